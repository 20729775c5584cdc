//! Neon GEMV for `M = 1` (the decode case): `y = alpha·x·B (+ beta·y) (+ bias)`.
//!
//! Packing B for a single row of A would cost as much as the product itself, and an `MR`-row
//! register tile would waste `MR − 1` rows, so [`gemm::sgemm_with`](crate::kernels::gemm)
//! hands `M = 1` products with a unit-stride operand here (any non-portable kernel on
//! AArch64). Two layouts:
//!
//! * B row-major (`B(p, j) = b[p·rs + j]`, e.g. `mm` by a `[k, n]` matrix): 48 columns at a
//!   time in 12 accumulators; per depth step three 4-register `ld1` (post-increment, the last
//!   one jumps to the next row) and 12 `fmla` by a lane of x — 48 FMA in 63 instructions per
//!   4 steps (0.76; loads bound it).
//! * B column-major (`B(p, j) = b[p + j·cs]`, `linear`'s transposed weight): dot products of
//!   x with 4 columns at a time, reduced at the end.

use core::arch::aarch64::*;

/// Scalar epilogue for one output element.
#[inline(always)]
fn finish(acc: f32, y: &mut f32, alpha: f32, beta: f32, bias: Option<&[f32]>, j: usize) {
    let mut v = alpha * acc;
    if beta != 0.0 {
        v += beta * *y;
    }
    if let Some(b) = bias {
        v += b[j];
    }
    *y = v;
}

/// `y[j] = alpha·Σ_p x[p]·B(p, j) (+ beta·y[j] if beta ≠ 0) (+ bias[j])` for `j < n`, with
/// `B(p, j) = b[p·brs + j·bcs]`. Returns `false` (and touches nothing) when the layout is
/// not handled here (neither B stride is 1) or the slices are too short.
#[allow(clippy::too_many_arguments)]
pub fn sgemv(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    bcs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> bool {
    if k == 0 || n == 0 || x.len() < k || y.len() < n || bias.is_some_and(|s| s.len() < n) {
        return false;
    }
    // Last element of B read: (k-1)·brs + (n-1)·bcs (checked arithmetic).
    let last = (k - 1)
        .checked_mul(brs)
        .zip((n - 1).checked_mul(bcs))
        .and_then(|(r, c)| r.checked_add(c));
    if last.is_none_or(|l| l >= b.len()) {
        return false;
    }
    if bcs == 1 {
        rows(k, n, x, b, brs, y, alpha, beta, bias);
        true
    } else if brs == 1 {
        cols(k, n, x, b, bcs, y, alpha, beta, bias);
        true
    } else {
        false
    }
}

/// Row-major B. Preconditions (checked by [`sgemv`]): `x.len() ≥ k`, `y.len() ≥ n`,
/// `(k-1)·brs + n - 1 < b.len()`, bias ≥ n.
#[allow(clippy::too_many_arguments)]
fn rows(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let mut j = 0;
    let mut t = [0.0f32; 48];
    while j + 48 <= n {
        // SAFETY: columns j..j+48 ≤ n of rows p < k lie in `b` (precondition), x has k floats;
        // `block48` reads exactly those.
        unsafe { block48(k, x.as_ptr(), b.as_ptr().add(j), brs, &mut t) };
        for (l, &v) in t.iter().enumerate() {
            finish(v, &mut y[j + l], alpha, beta, bias, j + l);
        }
        j += 48;
    }
    while j + 4 <= n {
        let mut acc = [0.0f32; 4];
        // SAFETY: columns j..j+4 ≤ n of rows p < k are in `b`; Neon is baseline on AArch64.
        unsafe {
            let mut a = vdupq_n_f32(0.0);
            for (p, &xp) in x[..k].iter().enumerate() {
                a = vfmaq_n_f32(a, vld1q_f32(b.as_ptr().add(p * brs + j)), xp);
            }
            vst1q_f32(acc.as_mut_ptr(), a);
        }
        for (l, &v) in acc.iter().enumerate() {
            finish(v, &mut y[j + l], alpha, beta, bias, j + l);
        }
        j += 4;
    }
    while j < n {
        let mut s = 0.0f32;
        for (p, &xp) in x[..k].iter().enumerate() {
            s += xp * b[p * brs + j];
        }
        finish(s, &mut y[j], alpha, beta, bias, j);
        j += 1;
    }
}

/// 48 columns of a row-major B: `out[l] = Σ_p x[p]·b[p·brs + l]`.
///
/// # Safety
/// `x` valid for `k` reads; `b + p·brs + l` valid for reads for `p < k`, `l < 48`.
#[inline(always)]
unsafe fn block48(k: usize, x: *const f32, b: *const f32, brs: usize, out: &mut [f32; 48]) {
    // SAFETY: (whole body) the loads stay inside the rows/columns the caller vouches for; the
    // asm reads 48 floats at `bp` (row p) and moves `bp` to row p + 1 (adj = brs·4 − 128).
    unsafe {
        let mut acc = [vdupq_n_f32(0.0); 12];
        let mut bp = b;
        let adj = (brs * 4) as isize - 128;
        macro_rules! step {
            ($xq:expr, $l:literal) => {{
                let (b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11): (
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                );
                core::arch::asm!(
                    "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{bp}], #64",
                    "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{bp}], #64",
                    "ld1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{bp}], {adj}",
                    bp = inout(reg) bp,
                    adj = in(reg) adj,
                    out("v0") b0, out("v1") b1, out("v2") b2, out("v3") b3,
                    out("v4") b4, out("v5") b5, out("v6") b6, out("v7") b7,
                    out("v16") b8, out("v17") b9, out("v18") b10, out("v19") b11,
                    options(nostack, readonly, preserves_flags),
                );
                let bv = [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11];
                for v in 0..12 {
                    acc[v] = vfmaq_laneq_f32::<$l>(acc[v], bv[v], $xq);
                }
            }};
        }
        let mut p = 0;
        while p + 4 <= k {
            let xq = vld1q_f32(x.add(p));
            step!(xq, 0);
            step!(xq, 1);
            step!(xq, 2);
            step!(xq, 3);
            p += 4;
        }
        while p < k {
            let xq = vld1q_dup_f32(x.add(p));
            step!(xq, 0);
            p += 1;
        }
        for (v, a) in acc.iter().enumerate() {
            vst1q_f32(out.as_mut_ptr().add(4 * v), *a);
        }
    }
}

/// Column-major B (`B(p, j) = b[p + j·cs]`): dot products, 4 columns at a time.
#[allow(clippy::too_many_arguments)]
fn cols(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    cs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let k4 = k - k % 4;
    let mut j = 0;
    while j < n {
        let w = (n - j).min(4);
        let mut s = [0.0f32; 4];
        for (c, sc) in s.iter_mut().enumerate().take(w) {
            let col = &b[(j + c) * cs..(j + c) * cs + k];
            // SAFETY: `col` and `x` both have ≥ k floats; loads at p < k4 ≤ k − 3 read 4.
            let mut t = unsafe {
                let mut a0 = vdupq_n_f32(0.0);
                let mut p = 0;
                while p < k4 {
                    a0 = vfmaq_f32(
                        a0,
                        vld1q_f32(x.as_ptr().add(p)),
                        vld1q_f32(col.as_ptr().add(p)),
                    );
                    p += 4;
                }
                vaddvq_f32(a0)
            };
            for p in k4..k {
                t += x[p] * col[p];
            }
            *sc = t;
        }
        for (c, &v) in s.iter().enumerate().take(w) {
            finish(v, &mut y[j + c], alpha, beta, bias, j + c);
        }
        j += w;
    }
}
