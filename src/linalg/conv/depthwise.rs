//! Depthwise convolution (`groups = C`, `OC = C·m` with channel multiplier `m`): every output
//! channel `o` reads one input channel, `o / m`. No GEMM: each output is a short sum over the
//! taps, so these are vector loops.
//!
//! - [`depthwise_nhwc`] (XNNPACK's `DepthwiseConv2d`, filter `[1, KH, KW, OC]`): channels are
//!   contiguous, so the loops run over blocks of channels, accumulators in registers across the
//!   taps. On AArch64 with `m = 1`, 3×3 filters with stride 1 or 2 over the interior of the
//!   image (no padding tap) take the Neon kernel [`neon_3x3`], which keeps the nine filter
//!   vectors of a 4-channel block in registers and shares input columns between neighbouring
//!   outputs.
//! - [`depthwise_nchw`] (ATen, filter `[OC, 1, KH, KW]`): each output plane is a sum of shifted
//!   input rows scaled by one weight, a loop over contiguous output columns.

use super::{clamp, shape_err, Conv2d};
use crate::error::KernelError;

/// Channels per block of the generic NHWC loop (accumulators kept in registers).
const CB: usize = 16;

fn check(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<usize, KernelError> {
    if !p.is_depthwise() {
        return Err(shape_err("conv: depthwise needs groups = input channels"));
    }
    let (nin, nw, nout) = p.check()?;
    if x.len() < nin || w.len() < nw || out.len() < nout || bias.is_some_and(|b| b.len() < p.out_c)
    {
        return Err(shape_err("conv: a slice is shorter than the geometry"));
    }
    Ok(nout)
}

/// `out = clamp(depthwise(x, w) + bias)`: NHWC `x` (`[N, H, W, C]`), filter `w`
/// (`[1, KH, KW, OC]`, `OC = C·m`), `out` (`[N, OH, OW, OC]`).
pub fn depthwise_nhwc(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    let nout = check(p, x, w, bias, out)?;
    let (c, oc) = (p.in_c, p.out_c);
    let mult = oc / c.max(1);
    for (row, orow) in out[..nout].chunks_exact_mut(p.out_w * oc).enumerate() {
        let (b, oy) = (row / p.out_h, row % p.out_h);
        #[cfg(target_arch = "aarch64")]
        let done = if mult == 1 {
            neon_3x3::row(p, x, w, bias, orow, b, oy)
        } else {
            (0, 0)
        };
        #[cfg(not(target_arch = "aarch64"))]
        let done = (0, 0);
        for ox in (0..done.0).chain(done.1..p.out_w) {
            let o = &mut orow[ox * oc..(ox + 1) * oc];
            pixel(p, x, w, bias, o, b, oy, ox, mult);
        }
        clamp(orow, range);
    }
    Ok(())
}

/// One output pixel of the NHWC depthwise convolution, all `OC` channels.
#[allow(clippy::too_many_arguments)]
fn pixel(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    o: &mut [f32],
    b: usize,
    oy: usize,
    ox: usize,
    mult: usize,
) {
    let (c, oc) = (p.in_c, p.out_c);
    if mult != 1 {
        for (j, v) in o.iter_mut().enumerate() {
            let mut acc = bias.map_or(0.0, |bv| bv[j]);
            for ky in 0..p.kh {
                let Some(iy) = p.in_row(oy, ky) else { continue };
                for kx in 0..p.kw {
                    let Some(ix) = p.in_col(ox, kx) else { continue };
                    acc += x[((b * p.in_h + iy) * p.in_w + ix) * c + j / mult]
                        * w[(ky * p.kw + kx) * oc + j];
                }
            }
            *v = acc;
        }
        return;
    }
    for c0 in (0..oc).step_by(CB) {
        let cb = CB.min(oc - c0);
        let mut acc = [0.0f32; CB];
        if let Some(bv) = bias {
            acc[..cb].copy_from_slice(&bv[c0..c0 + cb]);
        }
        for ky in 0..p.kh {
            let Some(iy) = p.in_row(oy, ky) else { continue };
            for kx in 0..p.kw {
                let Some(ix) = p.in_col(ox, kx) else { continue };
                let xs = &x[((b * p.in_h + iy) * p.in_w + ix) * c + c0..][..cb];
                let ws = &w[(ky * p.kw + kx) * oc + c0..][..cb];
                for ((a, &xv), &wv) in acc.iter_mut().zip(xs).zip(ws) {
                    *a += xv * wv;
                }
            }
        }
        o[c0..c0 + cb].copy_from_slice(&acc[..cb]);
    }
}

/// `out = clamp(depthwise(x, w) + bias)`: NCHW `x` (`[N, C, H, W]`), filter `w`
/// (`[OC, 1, KH, KW]`, `OC = C·m`), `out` (`[N, OC, OH, OW]`).
pub fn depthwise_nchw(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    let nout = check(p, x, w, bias, out)?;
    let (c, oc) = (p.in_c, p.out_c);
    let mult = oc / c.max(1);
    let (pix, ipix) = (p.pixels(), p.in_h * p.in_w);
    let taps = p.kh * p.kw;
    for (plane, op) in out[..nout].chunks_exact_mut(pix).enumerate() {
        let (b, o) = (plane / oc, plane % oc);
        let xi = &x[(b * c + o / mult) * ipix..][..ipix];
        let wo = &w[o * taps..][..taps];
        op.fill(bias.map_or(0.0, |bv| bv[o]));
        for ky in 0..p.kh {
            for kx in 0..p.kw {
                let wv = wo[ky * p.kw + kx];
                let (lo, hi) = p.valid_cols(kx);
                if lo >= hi {
                    continue;
                }
                for (oy, orow) in op.chunks_exact_mut(p.out_w).enumerate() {
                    let Some(iy) = p.in_row(oy, ky) else { continue };
                    let xr = &xi[iy * p.in_w..][..p.in_w];
                    // Valid columns read xr[first + j·stride], all inside the row.
                    let first = lo * p.stride_w + kx * p.dil_w - p.pad_left;
                    let dst = &mut orow[lo..hi];
                    if p.stride_w == 1 {
                        for (d, &v) in dst.iter_mut().zip(&xr[first..first + (hi - lo)]) {
                            *d += wv * v;
                        }
                    } else {
                        for (j, d) in dst.iter_mut().enumerate() {
                            *d += wv * xr[first + j * p.stride_w];
                        }
                    }
                }
            }
        }
        clamp(op, range);
    }
    Ok(())
}

/// The Neon 3×3 depthwise kernel (NHWC, multiplier 1, stride 1 or 2, dilation 1).
#[cfg(target_arch = "aarch64")]
mod neon_3x3 {
    use super::Conv2d;
    use core::arch::aarch64::*;

    /// Computes the interior output pixels of row `oy` of image `b` (every tap inside the
    /// input) into `orow` (`[OW, OC]`), whole 4-channel blocks; returns the range `lo..hi` of
    /// output columns it wrote (`(0, 0)` when the geometry is not its case). The caller
    /// computes the other columns, and the channel tail `OC mod 4` of these columns is also
    /// computed here with scalar code.
    pub(super) fn row(
        p: &Conv2d,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        orow: &mut [f32],
        b: usize,
        oy: usize,
    ) -> (usize, usize) {
        let s = p.stride_w;
        if p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || !(s == 1 || s == 2) {
            return (0, 0);
        }
        // Rows: all three taps inside the input.
        let (Some(iy0), Some(_)) = (p.in_row(oy, 0), p.in_row(oy, 2)) else {
            return (0, 0);
        };
        let (lo, _) = p.valid_cols(0);
        let (_, hi) = p.valid_cols(2);
        if lo >= hi {
            return (0, 0);
        }
        let c = p.in_c;
        let rs = p.in_w * c; // input row stride
        let base = (b * p.in_h + iy0) * rs;
        // Input pixels read: rows iy0..iy0+3, columns lo·s − pad .. (hi−1)·s − pad + 2.
        let first_col = lo * s - p.pad_left;
        let last = base + 2 * rs + ((hi - 1) * s - p.pad_left + 2) * c + c;
        if last > x.len() || w.len() < 9 * c || orow.len() < p.out_w * c {
            return (0, 0);
        }
        let cv = c - c % 4;
        for c0 in (0..cv).step_by(4) {
            // SAFETY: every pointer below is derived from slices whose bounds were checked
            // above: input reads are in rows iy0..iy0+3 (< H) at columns first_col +
            // (ox − lo)·s + kx ≤ (hi − 1)·s − pad + 2 (< W, `valid_cols`), channels c0..c0+4 ≤ C,
            // all below `last` ≤ x.len(); filter reads w[t·C + c0 ..+4] for t < 9 (w.len() ≥ 9C);
            // output writes orow[ox·C + c0 ..+4] for ox < hi ≤ OW (orow.len() ≥ OW·C). Neon is
            // part of the AArch64 baseline.
            unsafe {
                let wp = w.as_ptr().add(c0);
                let wt: [float32x4_t; 9] = core::array::from_fn(|t| vld1q_f32(wp.add(t * c)));
                let bv = match bias {
                    Some(bb) => vld1q_f32(bb.as_ptr().add(c0)),
                    None => vdupq_n_f32(0.0),
                };
                let xp = x.as_ptr().add(base + first_col * c + c0);
                let op = orow.as_mut_ptr().add(c0);
                let ld = |col: usize, r: usize| vld1q_f32(xp.add(r * rs + col * c));
                let mut ox = lo;
                if s == 1 {
                    // Three outputs share five input columns.
                    while ox + 3 <= hi {
                        let j = ox - lo;
                        let (mut a0, mut a1, mut a2) = (bv, bv, bv);
                        for r in 0..3 {
                            let x0 = ld(j, r);
                            let x1 = ld(j + 1, r);
                            let x2 = ld(j + 2, r);
                            let x3 = ld(j + 3, r);
                            let x4 = ld(j + 4, r);
                            let (w0, w1, w2) = (wt[3 * r], wt[3 * r + 1], wt[3 * r + 2]);
                            a0 = vfmaq_f32(vfmaq_f32(vfmaq_f32(a0, x0, w0), x1, w1), x2, w2);
                            a1 = vfmaq_f32(vfmaq_f32(vfmaq_f32(a1, x1, w0), x2, w1), x3, w2);
                            a2 = vfmaq_f32(vfmaq_f32(vfmaq_f32(a2, x2, w0), x3, w1), x4, w2);
                        }
                        vst1q_f32(op.add(ox * c), a0);
                        vst1q_f32(op.add((ox + 1) * c), a1);
                        vst1q_f32(op.add((ox + 2) * c), a2);
                        ox += 3;
                    }
                } else {
                    // Two outputs share one of their five input columns.
                    while ox + 2 <= hi {
                        let j = 2 * (ox - lo);
                        let (mut a0, mut a1) = (bv, bv);
                        for r in 0..3 {
                            let x0 = ld(j, r);
                            let x1 = ld(j + 1, r);
                            let x2 = ld(j + 2, r);
                            let x3 = ld(j + 3, r);
                            let x4 = ld(j + 4, r);
                            let (w0, w1, w2) = (wt[3 * r], wt[3 * r + 1], wt[3 * r + 2]);
                            a0 = vfmaq_f32(vfmaq_f32(vfmaq_f32(a0, x0, w0), x1, w1), x2, w2);
                            a1 = vfmaq_f32(vfmaq_f32(vfmaq_f32(a1, x2, w0), x3, w1), x4, w2);
                        }
                        vst1q_f32(op.add(ox * c), a0);
                        vst1q_f32(op.add((ox + 1) * c), a1);
                        ox += 2;
                    }
                }
                while ox < hi {
                    let j = s * (ox - lo);
                    let mut a = bv;
                    for r in 0..3 {
                        for kx in 0..3 {
                            a = vfmaq_f32(a, ld(j + kx, r), wt[3 * r + kx]);
                        }
                    }
                    vst1q_f32(op.add(ox * c), a);
                    ox += 1;
                }
            }
        }
        // Channel tail.
        for ox in lo..hi {
            for ch in cv..c {
                let mut a = bias.map_or(0.0, |bb| bb[ch]);
                for r in 0..3 {
                    for kx in 0..3 {
                        let col = first_col + (ox - lo) * s + kx;
                        a += x[base + r * rs + col * c + ch] * w[(3 * r + kx) * c + ch];
                    }
                }
                orow[ox * c + ch] = a;
            }
        }
        (lo, hi)
    }
}
