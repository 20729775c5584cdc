#!/usr/bin/env python3
"""Fits the rational erf of linalg::vecmath (generic::ERF_P, ERF_Q): erf(z) = z*P(z^2)/Q(z^2)
on 0 <= z <= ZMAX, Q(0) = 1, by linearised least squares on Chebyshev nodes, iteratively
reweighted towards the largest absolute error of erf (a Lawson-style approach to minimax).
Prints the coefficients (highest degree first, as the Rust constants) and the maximum absolute
error of erf in exact arithmetic and in f32 Horner arithmetic.

usage: python3 scripts/fit-erf.py [ZMAX DEG_P DEG_Q]   (default 3.92 5 5; needs numpy, mpmath)
"""
import sys

import mpmath
import numpy as np

zmax = float(sys.argv[1]) if len(sys.argv) > 1 else 3.92
dp = int(sys.argv[2]) if len(sys.argv) > 2 else 5
dq = int(sys.argv[3]) if len(sys.argv) > 3 else 5
N = 4000
k = np.arange(N)
z = (zmax / 2) * (1 - np.cos(np.pi * (k + 0.5) / N))
w = z * z
f = np.array([float(mpmath.erf(mpmath.mpf(v)) / v) for v in z])  # erf(z)/z
weight = np.maximum(z, 1e-3)  # absolute error of erf = z * (P/Q - f)
q_prev = np.ones(N)
lawson = np.ones(N)
for it in range(60):
    a = np.hstack([
        np.vstack([w**j for j in range(dp + 1)]).T,
        -(f[:, None] * np.vstack([w**j for j in range(1, dq + 1)]).T),
    ])
    s = weight * lawson / q_prev
    c, *_ = np.linalg.lstsq(a * s[:, None], f * s, rcond=None)
    p = c[: dp + 1]
    q = np.concatenate([[1.0], c[dp + 1 :]])
    q_prev = np.polyval(q[::-1], w)
    err = z * (np.polyval(p[::-1], w) / q_prev - f)
    if it > 10:
        lawson = lawson * np.abs(err) ** 0.5
        lawson /= lawson.max()
print(f"max abs error of erf, exact arithmetic: {np.abs(err).max():.3e}")


def horner32(coef, x):
    r = np.full_like(x, np.float32(coef[-1]))
    for cc in coef[-2::-1]:
        r = (r * x + np.float32(cc)).astype(np.float32)
    return r


zz = np.linspace(0, zmax, 40001).astype(np.float32)
e32 = zz * horner32(p.astype(np.float32), zz * zz) / horner32(q.astype(np.float32), zz * zz)
ref = np.array([float(mpmath.erf(mpmath.mpf(float(v)))) for v in zz])
print(f"max abs error of erf, f32 Horner: {np.abs(e32.astype(np.float64) - ref).max():.3e}")
print("ERF_P (highest degree first):", [float(np.float32(v)) for v in p[::-1]])
print("ERF_Q (highest degree first):", [float(np.float32(v)) for v in q[::-1]])
