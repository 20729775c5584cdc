//! Neon back end of [`crate::kernels::vec`]: polynomial `exp`, `tanh`, `sigmoid`, tanh-GELU,
//! softmax / log-softmax / layer-norm rows and a 4×4-block transpose. Called through the
//! checked wrappers in `kernels::vec` (which own the accuracy contract and the tests); these
//! functions work on the common prefix of their slices and never read or write past any
//! slice. Four lanes at a time with `core::arch::aarch64` intrinsics, tails with the generic
//! scalar formula (the same formula; only FMA contraction differs).

use core::arch::aarch64::*;

use crate::kernels::vec::generic::{
    self as g, EXP_C, EXP_HI, EXP_LO, GELU_C, GELU_K, LN2_HI, LN2_LO, LOG2E, TANH_C, TANH_SMALL,
};

/// Four-lane `exp` (formula of `generic::exp1`).
#[inline(always)]
fn exp4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let nan = vmvnq_u32(vceqq_f32(x, x));
        let over = vcgtq_f32(x, vdupq_n_f32(EXP_HI));
        let under = vcltq_f32(x, vdupq_n_f32(EXP_LO));
        let xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(EXP_LO)), vdupq_n_f32(EXP_HI));
        let n = vminq_f32(vrndnq_f32(vmulq_n_f32(xc, LOG2E)), vdupq_n_f32(127.0));
        let r = vfmsq_f32(
            vfmsq_f32(xc, n, vdupq_n_f32(LN2_HI)),
            n,
            vdupq_n_f32(LN2_LO),
        );
        let mut p = vdupq_n_f32(EXP_C[0]);
        for &c in &EXP_C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, r);
        }
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        let e = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
        let mut y = vmulq_f32(p, vreinterpretq_f32_s32(e));
        y = vbslq_f32(over, vdupq_n_f32(f32::INFINITY), y);
        y = vbslq_f32(under, vdupq_n_f32(0.0), y);
        vbslq_f32(nan, x, y)
    }
}

/// Four-lane `tanh` (formula of `generic::tanh1`).
#[inline(always)]
fn tanh4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let a = vabsq_f32(x);
        let e = exp4(vaddq_f32(a, a));
        let big = vsubq_f32(
            vdupq_n_f32(1.0),
            vdivq_f32(vdupq_n_f32(2.0), vaddq_f32(e, vdupq_n_f32(1.0))),
        );
        let sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x8000_0000));
        let big = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(big), sign));
        let x2 = vmulq_f32(x, x);
        let mut p = vdupq_n_f32(TANH_C[0]);
        for &c in &TANH_C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, x2);
        }
        let small = vmulq_f32(x, vfmaq_f32(vdupq_n_f32(1.0), x2, p));
        vbslq_f32(vcltq_f32(a, vdupq_n_f32(TANH_SMALL)), small, big)
    }
}

#[inline(always)]
fn sigmoid4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let e = exp4(vnegq_f32(x));
        vdivq_f32(vdupq_n_f32(1.0), vaddq_f32(vdupq_n_f32(1.0), e))
    }
}

#[inline(always)]
fn gelu_tanh4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let x3 = vmulq_f32(vmulq_f32(x, x), x);
        let u = vmulq_n_f32(vfmaq_n_f32(x, x3, GELU_C), GELU_K);
        let e = exp4(vmulq_n_f32(u, -2.0));
        vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0), e))
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

pub fn exp(x: &[f32], out: &mut [f32]) {
    map1(x, out, exp4, g::exp1);
}

pub fn tanh(x: &[f32], out: &mut [f32]) {
    map1(x, out, tanh4, g::tanh1);
}

pub fn sigmoid(x: &[f32], out: &mut [f32]) {
    map1(x, out, sigmoid4, g::sigmoid1);
}

pub fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    map1(x, out, gelu_tanh4, g::gelu_tanh1);
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

/// Max of a non-empty slice (NaNs are skipped here and propagate through the exp sum).
fn max(x: &[f32]) -> f32 {
    let mut i = 0;
    // SAFETY: loads at i + 4 ≤ len.
    let mut mx = unsafe {
        let mut m = vdupq_n_f32(f32::NEG_INFINITY);
        while i + 4 <= x.len() {
            m = vmaxnmq_f32(m, vld1q_f32(x.as_ptr().add(i)));
            i += 4;
        }
        vmaxnmvq_f32(m)
    };
    for &v in &x[i..] {
        mx = if v > mx { v } else { mx };
    }
    mx
}

/// Writes `exp(x - mx)` into `out` (common length) and returns the sum.
fn exp_shifted(x: &[f32], mx: f32, out: &mut [f32]) -> f32 {
    let n = x.len().min(out.len());
    let mut i = 0;
    // SAFETY: loads/stores at i + 4 ≤ n ≤ both lengths.
    let mut s = unsafe {
        let mut acc = vdupq_n_f32(0.0);
        while i + 4 <= n {
            let e = exp4(vsubq_f32(vld1q_f32(x.as_ptr().add(i)), vdupq_n_f32(mx)));
            vst1q_f32(out.as_mut_ptr().add(i), e);
            acc = vaddq_f32(acc, e);
            i += 4;
        }
        vaddvq_f32(acc)
    };
    for j in i..n {
        let e = g::exp1(x[j] - mx);
        out[j] = e;
        s += e;
    }
    s
}

/// Softmax of one row (common length of `x` and `out`).
pub fn softmax(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let inv = 1.0 / exp_shifted(x, max(x), out);
    scale(out, inv);
}

/// `out *= s`.
fn scale(out: &mut [f32], s: f32) {
    let n = out.len();
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n.
        unsafe {
            let p = out.as_mut_ptr().add(i);
            vst1q_f32(p, vmulq_n_f32(vld1q_f32(p), s));
        }
        i += 4;
    }
    for v in &mut out[i..] {
        *v *= s;
    }
}

/// Log-softmax of one row.
pub fn log_softmax(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let mx = max(x);
    let shift = mx + libm::logf(exp_shifted(x, mx, out));
    map1(
        x,
        out,
        |v| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe { vsubq_f32(v, vdupq_n_f32(shift)) }
        },
        |v| v - shift,
    );
}

/// Layer norm of one non-empty row; returns `(mean, rstd)`. `gamma`/`beta` are used only when
/// at least as long as the row (the checked wrapper guarantees equal lengths).
pub fn layer_norm(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> (f32, f32) {
    let n = x.len().min(out.len());
    if n == 0 {
        return (0.0, f32::NAN);
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
    let gm = gamma.filter(|g| g.len() >= n);
    let bt = beta.filter(|b| b.len() >= n);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ len of x, out, and of gamma/beta when present (filtered).
        unsafe {
            let mut y = vmulq_n_f32(
                vsubq_f32(vld1q_f32(x.as_ptr().add(i)), vdupq_n_f32(mean)),
                rstd,
            );
            if let Some(gm) = gm {
                y = vmulq_f32(y, vld1q_f32(gm.as_ptr().add(i)));
            }
            if let Some(bt) = bt {
                y = vaddq_f32(y, vld1q_f32(bt.as_ptr().add(i)));
            }
            vst1q_f32(out.as_mut_ptr().add(i), y);
        }
        i += 4;
    }
    for j in i..n {
        let mut y = (x[j] - mean) * rstd;
        if let Some(gm) = gm {
            y *= gm[j];
        }
        if let Some(bt) = bt {
            y += bt[j];
        }
        out[j] = y;
    }
    (mean, rstd)
}

/// `dst[i·ds + j] = src[j·ss + i]`, `i < rows`, `j < cols`: 4×4 register blocks, the edges
/// by the generic code. The caller (`vec::transpose32`) checked that both slices cover the
/// addressed ranges and that `ss ≥ rows`, `ds ≥ cols` (no row overlap).
pub fn transpose32(src: &[f32], ss: usize, dst: &mut [f32], ds: usize, rows: usize, cols: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    // Re-check the bounds here so this function is sound on its own.
    let need = |stride: usize, outer: usize, inner: usize| {
        (outer - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(inner))
    };
    match (need(ss, cols, rows), need(ds, rows, cols)) {
        (Some(s), Some(d)) if s <= src.len() && d <= dst.len() => {}
        _ => return,
    }
    let (r4, c4) = (rows & !3, cols & !3);
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    for i in (0..r4).step_by(4) {
        for j in (0..c4).step_by(4) {
            // SAFETY: source rows j..j+4 (each `ss` apart) read lanes i..i+4 with i + 4 ≤ rows
            // and j + 3 < cols, so the last index read is (cols-1)·ss + rows - 1 < src.len();
            // likewise the stores write dst rows i..i+4 at columns j..j+4 < cols, the last
            // index being (rows-1)·ds + cols - 1 < dst.len() (both checked above).
            unsafe {
                let a = vreinterpretq_u32_f32(vld1q_f32(sp.add(j * ss + i)));
                let b = vreinterpretq_u32_f32(vld1q_f32(sp.add((j + 1) * ss + i)));
                let c = vreinterpretq_u32_f32(vld1q_f32(sp.add((j + 2) * ss + i)));
                let d = vreinterpretq_u32_f32(vld1q_f32(sp.add((j + 3) * ss + i)));
                let t0 = vreinterpretq_u64_u32(vtrn1q_u32(a, b));
                let t1 = vreinterpretq_u64_u32(vtrn2q_u32(a, b));
                let t2 = vreinterpretq_u64_u32(vtrn1q_u32(c, d));
                let t3 = vreinterpretq_u64_u32(vtrn2q_u32(c, d));
                let o0 = vreinterpretq_f32_u64(vtrn1q_u64(t0, t2));
                let o1 = vreinterpretq_f32_u64(vtrn1q_u64(t1, t3));
                let o2 = vreinterpretq_f32_u64(vtrn2q_u64(t0, t2));
                let o3 = vreinterpretq_f32_u64(vtrn2q_u64(t1, t3));
                vst1q_f32(dp.add(i * ds + j), o0);
                vst1q_f32(dp.add((i + 1) * ds + j), o1);
                vst1q_f32(dp.add((i + 2) * ds + j), o2);
                vst1q_f32(dp.add((i + 3) * ds + j), o3);
            }
        }
    }
    // Right edge (columns c4..cols) of the blocked rows, then the bottom rows.
    for i in 0..r4 {
        for j in c4..cols {
            dst[i * ds + j] = src[j * ss + i];
        }
    }
    for i in r4..rows {
        for j in 0..cols {
            dst[i * ds + j] = src[j * ss + i];
        }
    }
}
