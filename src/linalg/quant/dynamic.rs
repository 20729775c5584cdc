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

/// Adding and subtracting 1.5 · 2^23 rounds an f32 of magnitude below 2^22 to the nearest
/// integer, ties to even (the default rounding mode), without a libm call.
const MAGIC: f32 = 12_582_912.0;

fn round_small(x: f32) -> f32 {
    (x + MAGIC) - MAGIC
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
    let zp = if zp.is_nan() { 0.0 } else { round_small(zp) };
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
    // Four running minima/maxima so that the loop vectorises.
    let mut lo = [f32::INFINITY; 4];
    let mut hi = [f32::NEG_INFINITY; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for j in 0..4 {
            lo[j] = lo[j].min(c[j]);
            hi[j] = hi[j].max(c[j]);
        }
    }
    for &v in chunks.remainder() {
        lo[0] = lo[0].min(v);
        hi[0] = hi[0].max(v);
    }
    let lo = lo[0].min(lo[1]).min(lo[2].min(lo[3]));
    let hi = hi[0].max(hi[1]).max(hi[2].max(hi[3]));
    let (s, p) = qd8_params(lo, hi);
    let zp = p.zero_point as f32;
    let (qlo, qhi) = (-128.0 - zp, 127.0 - zp);
    for (o, &v) in q.iter_mut().zip(x) {
        // Bounds are integers, so clamping before rounding equals clamping after; NaN → qlo.
        let c = (v * s).max(qlo).min(qhi);
        *o = (round_small(c) + zp) as i8;
    }
    p
}
