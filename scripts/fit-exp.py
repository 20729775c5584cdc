#!/usr/bin/env python3
"""Fits the degree-5 polynomial of linalg::vecmath's softmax exponential (neon::EXP5_C):
e^r ~ 1 + r*(1 + r*(c2 + r*(c3 + r*(c4 + r*c5)))) on |r| <= ln(2)/2 (the reduced argument
after n = round(x*log2 e)), minimising the largest relative error by least squares on
Chebyshev nodes, iteratively reweighted towards the largest error (Lawson). Prints the
coefficients c5..c2 (highest degree first, as the Rust constant) and the largest relative
error in exact arithmetic and with f32 fused multiply-adds simulated in f64 per step.

usage: python3 scripts/fit-exp.py   (needs numpy)
"""
import numpy as np

h = np.log(2) / 2 * 1.0001
N = 4000
k = np.arange(N)
r = h * np.cos(np.pi * (k + 0.5) / N)
# e^r = 1 + r + r^2 * (c2 + c3 r + c4 r^2 + c5 r^3): fit g(r) = (e^r - 1 - r) / r^2.
g = np.where(np.abs(r) > 1e-4, (np.expm1(r) - r) / np.where(r == 0, 1, r * r), 0.5 + r / 6)
weight = r * r / np.exp(r)  # relative error of e^r
lawson = np.ones(N)
for it in range(80):
    a = np.vstack([r**j for j in range(4)]).T
    s = weight * lawson
    c, *_ = np.linalg.lstsq(a * s[:, None], g * s, rcond=None)
    err = (1 + r + r * r * np.polyval(c[::-1], r)) / np.exp(r) - 1
    if it > 10:
        lawson = lawson * np.abs(err) ** 0.5
        lawson /= lawson.max()
print(f"max relative error, exact arithmetic: {np.abs(err).max():.3e}")
c32 = c.astype(np.float32)
rr = np.linspace(-h, h, 200001).astype(np.float32)
q = np.full(rr.shape, c32[3], dtype=np.float64)
for cc in [c32[2], c32[1], c32[0], np.float32(1.0)]:
    q = (q * rr + cc).astype(np.float32).astype(np.float64)  # one rounding per FMA
y = (1 + rr.astype(np.float64) * q).astype(np.float32)
print(f"max relative error, f32 FMA steps: {np.abs(y / np.exp(rr.astype(np.float64)) - 1).max():.3e}")
print("EXP5_C (c5, c4, c3, c2):", [float(v) for v in c32[::-1]])
