//! Neon slice kernels for the elementwise and row operations that dominate after GEMM
//! (add, mul, relu, exp, softmax, layer norm, tanh-GELU). Allocation-free; each function
//! processes 4 lanes at a time with `core::arch::aarch64` intrinsics and finishes the tail
//! with scalar code computing the same formula, so results do not depend on the slice length.
//!
//! `exp` is a polynomial (Cody–Waite reduction `x = n·ln2 + r`, |r| ≤ ln2/2, degree-6 Taylor
//! in Horner form, `2^n` by exponent-field arithmetic): relative error ≤ 2e-7 on
//! [-87, 88], 0 below (flushes to 0 under -87.3), +inf above 88.7. Not wired into the portable
//! operator kernels yet (those files belong to another work item); they can call these on
//! contiguous f32 slices.

use core::arch::aarch64::*;

const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
const LOG2E: f32 = core::f32::consts::LOG2_E;
const EXP_HI: f32 = 88.72;
const EXP_LO: f32 = -87.33;
const C: [f32; 6] = [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0];

/// Scalar `exp` with the vector path's formula.
pub fn exp_scalar(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > EXP_HI {
        return f32::INFINITY;
    }
    if x < EXP_LO {
        return 0.0;
    }
    let n = libm::roundf(x * LOG2E);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = C[0];
    for &c in &C[1..] {
        p = p * r + c;
    }
    p = p * r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// Vector `exp` of four lanes (see the module doc).
#[inline(always)]
fn exp4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let nan = vmvnq_u32(vceqq_f32(x, x));
        let over = vcgtq_f32(x, vdupq_n_f32(EXP_HI));
        let under = vcltq_f32(x, vdupq_n_f32(EXP_LO));
        let xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(EXP_LO)), vdupq_n_f32(EXP_HI));
        let n = vrndnq_f32(vmulq_n_f32(xc, LOG2E));
        let r = vfmsq_f32(
            vfmsq_f32(xc, n, vdupq_n_f32(LN2_HI)),
            n,
            vdupq_n_f32(LN2_LO),
        );
        let mut p = vdupq_n_f32(C[0]);
        for &c in &C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, r);
        }
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        let e = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
        let mut y = vmulq_f32(p, vreinterpretq_f32_s32(e));
        y = vbslq_f32(over, vdupq_n_f32(f32::INFINITY), y);
        y = vbslq_f32(under, vdupq_n_f32(0.0), y);
        vbslq_f32(nan, x, y)
    }
}

/// Applies `v` to 4-lane chunks and `s` to the tail, `out[i] = f(x[i])`.
#[inline(always)]
fn map1(
    x: &[f32],
    out: &mut [f32],
    v: impl Fn(float32x4_t) -> float32x4_t,
    s: impl Fn(f32) -> f32,
) {
    let n = x.len().min(out.len());
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ both lengths.
        unsafe { vst1q_f32(out.as_mut_ptr().add(i), v(vld1q_f32(x.as_ptr().add(i)))) };
        i += 4;
    }
    for j in i..n {
        out[j] = s(x[j]);
    }
}

/// Same with two inputs.
#[inline(always)]
fn map2(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    v: impl Fn(float32x4_t, float32x4_t) -> float32x4_t,
    s: impl Fn(f32, f32) -> f32,
) {
    let n = a.len().min(b.len()).min(out.len());
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ all three lengths.
        unsafe {
            let r = v(vld1q_f32(a.as_ptr().add(i)), vld1q_f32(b.as_ptr().add(i)));
            vst1q_f32(out.as_mut_ptr().add(i), r);
        }
        i += 4;
    }
    for j in i..n {
        out[j] = s(a[j], b[j]);
    }
}

/// `out[i] = a[i] + b[i]` over the common length.
pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) {
    map2(
        a,
        b,
        out,
        |x, y| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe { vaddq_f32(x, y) }
        },
        |x, y| x + y,
    );
}

/// `out[i] = a[i] · b[i]` over the common length.
pub fn mul(a: &[f32], b: &[f32], out: &mut [f32]) {
    map2(
        a,
        b,
        out,
        |x, y| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe { vmulq_f32(x, y) }
        },
        |x, y| x * y,
    );
}

/// `out[i] = max(x[i], 0)` (NaN stays NaN).
pub fn relu(x: &[f32], out: &mut [f32]) {
    let s = |v: f32| if v > 0.0 || v.is_nan() { v } else { 0.0 };
    map1(
        x,
        out,
        |v| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe {
                let keep = vorrq_u32(vcgtq_f32(v, vdupq_n_f32(0.0)), vmvnq_u32(vceqq_f32(v, v)));
                vbslq_f32(keep, v, vdupq_n_f32(0.0))
            }
        },
        s,
    );
}

/// `out[i] = exp(x[i])` (polynomial, see the module doc).
pub fn exp(x: &[f32], out: &mut [f32]) {
    map1(x, out, exp4, exp_scalar);
}

const GELU_K: f32 = 0.797_884_6; // sqrt(2/pi)
const GELU_C: f32 = 0.044_715;

/// Tanh-approximated GELU: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, with
/// `1 + tanh(u) = 2 − 2/(exp(2u) + 1)`.
pub fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    let s = |v: f32| {
        let u = GELU_K * (v + GELU_C * v * v * v);
        let t = 2.0 - 2.0 / (exp_scalar(2.0 * u) + 1.0);
        0.5 * v * t
    };
    map1(
        x,
        out,
        |v| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe {
                let v3 = vmulq_f32(vmulq_f32(v, v), v);
                let u = vmulq_n_f32(vfmaq_n_f32(v, v3, GELU_C), GELU_K);
                let e = exp4(vaddq_f32(u, u));
                let t = vsubq_f32(
                    vdupq_n_f32(2.0),
                    vdivq_f32(vdupq_n_f32(2.0), vaddq_f32(e, vdupq_n_f32(1.0))),
                );
                vmulq_f32(vmulq_n_f32(v, 0.5), t)
            }
        },
        s,
    );
}

/// Sum of a slice (4 partial sums, then the tail).
fn sum(x: &[f32]) -> f32 {
    let mut i = 0;
    // SAFETY: loads at i + 4 ≤ len.
    let mut s = unsafe {
        let mut acc = vdupq_n_f32(0.0);
        while i + 4 <= x.len() {
            acc = vaddq_f32(acc, vld1q_f32(x.as_ptr().add(i)));
            i += 4;
        }
        vaddvq_f32(acc)
    };
    for &v in &x[i..] {
        s += v;
    }
    s
}

/// Softmax of one row: `out[i] = exp(x[i] − max) / Σ exp(x[j] − max)`. Empty rows are a no-op.
pub fn softmax(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let mut i = 0;
    // SAFETY: loads at i + 4 ≤ n.
    let mut mx = unsafe {
        let mut m = vdupq_n_f32(f32::NEG_INFINITY);
        while i + 4 <= n {
            m = vmaxq_f32(m, vld1q_f32(x.as_ptr().add(i)));
            i += 4;
        }
        vmaxvq_f32(m)
    };
    for &v in &x[i..] {
        mx = if v > mx || v.is_nan() { v } else { mx };
    }
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n.
        unsafe {
            let e = exp4(vsubq_f32(vld1q_f32(x.as_ptr().add(i)), vdupq_n_f32(mx)));
            vst1q_f32(out.as_mut_ptr().add(i), e);
        }
        i += 4;
    }
    for j in i..n {
        out[j] = exp_scalar(x[j] - mx);
    }
    let inv = 1.0 / sum(out);
    let copy = |v: f32| v * inv;
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n.
        unsafe {
            let p = out.as_mut_ptr().add(i);
            vst1q_f32(p, vmulq_n_f32(vld1q_f32(p), inv));
        }
        i += 4;
    }
    for v in &mut out[i..] {
        *v = copy(*v);
    }
}

/// Layer norm of one row: `out = (x − mean)/sqrt(var + eps)·gamma + beta` (biased variance;
/// `gamma`/`beta` optional, else 1 and 0). Lengths: the common length of `x` and `out`;
/// `gamma`/`beta` must be at least that long (else they are ignored).
pub fn layer_norm(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let mean = sum(x) / n as f32;
    let mut i = 0;
    // SAFETY: loads at i + 4 ≤ n.
    let mut var = unsafe {
        let mut acc = vdupq_n_f32(0.0);
        while i + 4 <= n {
            let d = vsubq_f32(vld1q_f32(x.as_ptr().add(i)), vdupq_n_f32(mean));
            acc = vfmaq_f32(acc, d, d);
            i += 4;
        }
        vaddvq_f32(acc)
    };
    for &v in &x[i..] {
        var += (v - mean) * (v - mean);
    }
    let rstd = 1.0 / libm::sqrtf(var / n as f32 + eps);
    let g = gamma.filter(|g| g.len() >= n);
    let b = beta.filter(|b| b.len() >= n);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ len of x, out, and of gamma/beta when present (filtered).
        unsafe {
            let mut y = vmulq_n_f32(
                vsubq_f32(vld1q_f32(x.as_ptr().add(i)), vdupq_n_f32(mean)),
                rstd,
            );
            if let Some(g) = g {
                y = vmulq_f32(y, vld1q_f32(g.as_ptr().add(i)));
            }
            if let Some(b) = b {
                y = vaddq_f32(y, vld1q_f32(b.as_ptr().add(i)));
            }
            vst1q_f32(out.as_mut_ptr().add(i), y);
        }
        i += 4;
    }
    for j in i..n {
        let mut y = (x[j] - mean) * rstd;
        if let Some(g) = g {
            y *= g[j];
        }
        if let Some(b) = b {
            y += b[j];
        }
        out[j] = y;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn data(n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919) % 1000) as f32 / 500.0 - 1.0) * scale)
            .collect()
    }

    fn close(got: f32, want: f64, rel: f64, abs: f64) -> bool {
        (got as f64 - want).abs() <= rel * want.abs() + abs
    }

    #[test]
    fn exp_accuracy_and_specials() {
        for n in [1usize, 3, 4, 17, 1000] {
            let x = data(n, 87.0);
            let mut y = std::vec![0.0; n];
            exp(&x, &mut y);
            for (a, b) in x.iter().zip(&y) {
                let w = (*a as f64).exp();
                assert!(close(*b, w, 3e-7, 1e-38), "exp({a}) = {b}, want {w}");
            }
        }
        let x = [
            f32::NAN,
            100.0,
            -100.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0,
            -1.0,
        ];
        let mut y = [0.0; 8];
        exp(&x, &mut y);
        assert!(y[0].is_nan());
        assert_eq!(&y[1..6], &[f32::INFINITY, 0.0, 1.0, f32::INFINITY, 0.0]);
        assert_eq!(y[6].to_bits(), exp_scalar(1.0).to_bits());
    }

    #[test]
    fn elementwise_ops() {
        let (a, b) = (data(19, 3.0), data(19, -2.0));
        let mut o = std::vec![0.0; 19];
        add(&a, &b, &mut o);
        assert!(o
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(o, (a, b))| *o == a + b));
        mul(&a, &b, &mut o);
        assert!(o
            .iter()
            .zip(a.iter().zip(&b))
            .all(|(o, (a, b))| *o == a * b));
        relu(&a, &mut o);
        assert!(o.iter().zip(&a).all(|(o, a)| *o == a.max(0.0)));
        gelu_tanh(&a, &mut o);
        for (o, &x) in o.iter().zip(&a) {
            let x = x as f64;
            let w = 0.5
                * x
                * (1.0
                    + ((2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh());
            assert!(close(*o, w, 1e-5, 1e-6), "gelu({x}) = {o}, want {w}");
        }
    }

    #[test]
    fn softmax_and_layer_norm_rows() {
        for n in [1usize, 5, 8, 50, 768] {
            let x = data(n, 10.0);
            let mut y = std::vec![0.0; n];
            softmax(&x, &mut y);
            let mx = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let s: f64 = x.iter().map(|&v| (v as f64 - mx).exp()).sum();
            for (a, b) in x.iter().zip(&y) {
                let w = (*a as f64 - mx).exp() / s;
                assert!(close(*b, w, 2e-6, 1e-12), "softmax n={n}: {b} vs {w}");
            }
            let g = data(n, 1.5);
            let bt = data(n, 0.5);
            layer_norm(&x, Some(&g), Some(&bt), 1e-5, &mut y);
            let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
            for i in 0..n {
                let w = (x[i] as f64 - mean) / (var + 1e-5).sqrt() * g[i] as f64 + bt[i] as f64;
                assert!(
                    close(y[i], w, 1e-5, 1e-5),
                    "layer_norm n={n} [{i}]: {} vs {w}",
                    y[i]
                );
            }
        }
    }
}
