//! Dynamic per-row int8 quantization of fp32 activations (XNNPACK's `qdint8`).
//!
//! For a row with minimum `lo` and maximum `hi`: the range is widened to contain 0
//! (`rmin = min(0, lo)`, `rmax = max(0, hi)`), the multiplier is `s = 255 / (rmax - rmin)`
//! (1 for an all-zero row), the zero point is taken from whichever end has the smaller
//! rounding error, clamped to `[-128, 127]` and rounded to the nearest integer (ties to
//! even), and every element becomes `clamp(round(x · s), -128 - zp, 127 - zp) + zp`. The row
//! keeps `scale = 1 / s` and `zp` ([`QParams`]); `x ≈ (q - zp) · scale`.

/// Quantization parameters of one dynamically quantized row.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QParams {
    /// Dequantization scale: `x ≈ (q - zero_point) · scale`.
    pub scale: f32,
    pub zero_point: i32,
}

/// Round to nearest, ties to even (C's `nearbyint` in the default mode), without libm:
/// adding and subtracting 1.5 · 2^23 rounds magnitudes below 2^22; larger ones are integers
/// already (or get clamped by the callers).
pub fn round_ties_even(x: f32) -> f32 {
    if x.abs() < 4_194_304.0 {
        (x + 12_582_912.0) - 12_582_912.0
    } else {
        x
    }
}

/// The quantization multiplier `s` and the row's [`QParams`] for a row whose smallest and
/// largest elements are `lo` and `hi`.
pub fn qd8_params(lo: f32, hi: f32) -> (f32, QParams) {
    let (qmin, qmax) = (-128.0f32, 127.0f32);
    let rmin = lo.min(0.0);
    let rmax = hi.max(0.0);
    let s = if rmin == rmax {
        1.0
    } else {
        (qmax - qmin) / (rmax - rmin)
    };
    let (dmin, dmax) = (rmin * s, rmax * s);
    let mut zp = if (qmin + dmin) + (qmax + dmax) > 0.0 {
        qmin - dmin
    } else {
        qmax - dmax
    };
    zp = zp.max(qmin).min(qmax);
    // NaN rows (NaN range) keep zero point 0.
    let zp = if zp.is_nan() {
        0.0
    } else {
        round_ties_even(zp)
    };
    (
        s,
        QParams {
            scale: 1.0 / s,
            zero_point: zp as i32,
        },
    )
}

/// Quantizes one row `x` into `q` (same length) and returns its parameters.
pub fn quantize_row_qd8(x: &[f32], q: &mut [i8]) -> QParams {
    let n = x.len().min(q.len());
    let (x, q) = (&x[..n], &mut q[..n]);
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: Neon is part of the AArch64 baseline; both slices have length n.
        unsafe { neon::quantize_row(x, q) }
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        let (lo, hi) = min_max(x);
        let (s, p) = qd8_params(lo, hi);
        let zp = p.zero_point as f32;
        let (qlo, qhi) = (-128.0 - zp, 127.0 - zp);
        for (o, &v) in q.iter_mut().zip(x) {
            // Bounds are integers, so clamping before rounding equals clamping after; NaN → qlo.
            let c = (v * s).max(qlo).min(qhi);
            *o = (round_ties_even(c) + zp) as i8;
        }
        p
    }
}

/// Quantizes the rows of `x` (`k` elements each, one per entry of `params`) into `q`;
/// missing input rows leave their outputs untouched.
pub fn quantize_rows_qd8(x: &[f32], k: usize, q: &mut [i8], params: &mut [QParams]) {
    if k == 0 {
        return;
    }
    for ((p, src), dst) in params
        .iter_mut()
        .zip(x.chunks_exact(k))
        .zip(q.chunks_exact_mut(k))
    {
        *p = quantize_row_qd8(src, dst);
    }
}

/// Smallest and largest element (±inf for an empty row), in eight running lanes.
#[cfg(not(target_arch = "aarch64"))]
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut lo = [f32::INFINITY; 8];
    let mut hi = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for j in 0..8 {
            lo[j] = lo[j].min(c[j]);
            hi[j] = hi[j].max(c[j]);
        }
    }
    for &v in chunks.remainder() {
        lo[0] = lo[0].min(v);
        hi[0] = hi[0].max(v);
    }
    (
        lo.iter().fold(f32::INFINITY, |m, &v| m.min(v)),
        hi.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)),
    )
}

/// Neon row quantizer: min/max over 16 lanes (`FMINNM`/`FMAXNM`, NaN ignored like
/// `f32::min`), then per 16 elements multiply, raise to the lower bound (`FMAXNM`: NaN goes
/// there too), round to nearest even (`FCVTNS`), add the zero point with saturation and narrow
/// with saturation. The saturating narrows are the upper clamp: the bounds are integers, so
/// clamping before or after rounding gives the same value.
#[cfg(target_arch = "aarch64")]
mod neon {
    use crate::linalg::quant::dynamic::{qd8_params, round_ties_even, QParams};
    use core::arch::aarch64::*;

    /// `x[i..i + 16]` (four vectors) quantized to 16 bytes at `q`.
    ///
    /// # Safety
    /// `x` readable for 16 floats, `q` writable for 16 bytes.
    #[inline(always)]
    unsafe fn sixteen(x: *const f32, q: *mut i8, s: f32, qlo: float32x4_t, zp: int32x4_t) {
        // SAFETY: the caller's extents.
        unsafe {
            let v = vld1q_f32_x4(x);
            let r = |x: float32x4_t| {
                vqaddq_s32(vcvtnq_s32_f32(vmaxnmq_f32(vmulq_n_f32(x, s), qlo)), zp)
            };
            let h0 = vqmovn_high_s32(vqmovn_s32(r(v.0)), r(v.1));
            let h1 = vqmovn_high_s32(vqmovn_s32(r(v.2)), r(v.3));
            vst1q_s8(q, vqmovn_high_s16(vqmovn_s16(h0), h1));
        }
    }

    /// # Safety
    /// `x.len() == q.len()`.
    pub(super) unsafe fn quantize_row(x: &[f32], q: &mut [i8]) -> QParams {
        let n = x.len();
        let xp = x.as_ptr();
        // SAFETY: (whole body) every vector load reads x[i..i + 16] with i + 16 ≤ n; every
        // store writes q[i..i + 16] with i + 16 ≤ n; the tails use checked slice indexing.
        unsafe {
            let mut lo = [vdupq_n_f32(f32::INFINITY); 4];
            let mut hi = [vdupq_n_f32(f32::NEG_INFINITY); 4];
            let mut i = 0;
            while i + 16 <= n {
                let v = vld1q_f32_x4(xp.add(i));
                let v = [v.0, v.1, v.2, v.3];
                for j in 0..4 {
                    lo[j] = vminnmq_f32(lo[j], v[j]);
                    hi[j] = vmaxnmq_f32(hi[j], v[j]);
                }
                i += 16;
            }
            let lo4 = vminnmq_f32(vminnmq_f32(lo[0], lo[1]), vminnmq_f32(lo[2], lo[3]));
            let hi4 = vmaxnmq_f32(vmaxnmq_f32(hi[0], hi[1]), vmaxnmq_f32(hi[2], hi[3]));
            let (mut lo, mut hi) = (vminnmvq_f32(lo4), vmaxnmvq_f32(hi4));
            for &v in &x[i..] {
                lo = lo.min(v);
                hi = hi.max(v);
            }
            let (s, p) = qd8_params(lo, hi);
            let zp = p.zero_point as f32;
            let qlo = vdupq_n_f32(-128.0 - zp);
            let vzp = vdupq_n_s32(p.zero_point);
            let qp = q.as_mut_ptr();
            let mut i = 0;
            while i + 16 <= n {
                sixteen(xp.add(i), qp.add(i), s, qlo, vzp);
                i += 16;
            }
            for (o, &v) in q[i..].iter_mut().zip(&x[i..]) {
                let c = (v * s).max(-128.0 - zp).min(127.0 - zp);
                *o = (round_ties_even(c) + zp) as i8;
            }
            p
        }
    }
}
