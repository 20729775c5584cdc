//! Depthwise convolution (`groups = C`, `OC = C·m` with channel multiplier `m`): every output
//! channel `o` reads one input channel, `o / m`. No GEMM: each output is a short sum over the
//! taps, so these are vector loops.
//!
//! - [`depthwise_nhwc`] (XNNPACK's `DepthwiseConv2d`, filter `[1, KH, KW, OC]`): channels are
//!   contiguous, so the loops run over blocks of channels, accumulators in registers across the
//!   taps. On AArch64 with `m = 1`, 3×3 filters with stride 1 or 2 across take the Neon kernel
//!   `neon_3x3` (filter vectors in registers across rows, input columns shared between
//!   neighbouring outputs, clamp fused), or its SVE2 counterpart `sve_3x3` where vectors
//!   are 256 bits or wider.
//! - [`depthwise_nchw`] (ATen, filter `[OC, 1, KH, KW]`): each output plane is a sum of shifted
//!   input rows scaled by one weight, a loop over contiguous output columns; on AArch64 3×3
//!   filters with stride 1 or 2 across take `nchw_3x3` (four outputs per accumulator vector
//!   across all taps).

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
    p.check_call(x, w, bias, out, None)
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
    let per_image = p.pixels() * oc;
    if per_image == 0 {
        return Ok(());
    }
    for (b, oimg) in out[..nout].chunks_exact_mut(per_image).enumerate() {
        #[cfg(target_arch = "aarch64")]
        if let Some(img) = geometry_3x3::accepts(p, x, w, bias, oimg, b).filter(|_| mult == 1) {
            if !sve_3x3::image(p, x, w, bias, oimg, img, range) {
                neon_3x3::image(p, x, w, bias, oimg, img, range);
            }
            continue;
        }
        for (row, orow) in oimg.chunks_exact_mut(p.out_w * oc).enumerate() {
            for (ox, o) in orow.chunks_exact_mut(oc).enumerate() {
                pixel(p, x, w, bias, o, b, row, ox, mult);
            }
            clamp(orow, range);
        }
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

/// Largest zero-bordered plane (floats) the NCHW 3×3 path uses; bigger planes take the
/// generic loop.
pub const NCHW_PLANE_F32: usize = 64 * 1024;

/// Whether the NCHW 3×3 path takes `p` (3×3, stride 1 or 2 across).
fn accepts_3x3(p: &Conv2d) -> bool {
    p.kh == 3 && p.kw == 3 && (p.stride_w == 1 || p.stride_w == 2)
}

/// Rows and columns of the zero-bordered plane: every tap of every output row, and every
/// column a whole number of four-output blocks reads (the last block's `ld2` reads 8 floats
/// per tap), lies inside it. `None` when `p` is not accepted or the plane exceeds
/// [`NCHW_PLANE_F32`].
fn padded_dims(p: &Conv2d) -> Option<(usize, usize)> {
    if !accepts_3x3(p) || p.out_h == 0 || p.out_w == 0 {
        return None;
    }
    let rows = (p.out_h - 1)
        .checked_mul(p.stride_h)?
        .checked_add(p.dil_h.checked_mul(2)?)?
        .checked_add(1)?;
    let blocks = p.out_w.div_ceil(4);
    let cols = (4 * blocks - 4)
        .checked_mul(p.stride_w)?
        .checked_add(p.dil_w.checked_mul(2)?)?
        .checked_add(if p.stride_w == 1 { 4 } else { 8 })?;
    // The image itself must fit at its padding offset too.
    let (rows, cols) = (
        rows.max(p.pad_top.checked_add(p.in_h)?),
        cols.max(p.pad_left.checked_add(p.in_w)?),
    );
    (rows.checked_mul(cols)? <= NCHW_PLANE_F32).then_some((rows, cols))
}

/// Scratch floats [`depthwise_nchw`] can use for `p` (the same on every CPU; with less it
/// takes the generic loop): the zero-bordered input plane of the 3×3 path.
pub fn nchw_scratch_f32(p: &Conv2d) -> usize {
    let (r, c) = padded_dims(p).unwrap_or((0, 0));
    r * c
}

/// `out = clamp(depthwise(x, w) + bias)`: NCHW `x` (`[N, C, H, W]`), filter `w`
/// (`[OC, 1, KH, KW]`, `OC = C·m`), `out` (`[N, OC, OH, OW]`); `scratch` holds up to
/// [`nchw_scratch_f32`] floats (fewer: the generic loop).
pub fn depthwise_nchw(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = check(p, x, w, bias, out)?;
    let (c, oc) = (p.in_c, p.out_c);
    let mult = oc / c.max(1);
    let (pix, ipix) = (p.pixels(), p.in_h * p.in_w);
    let taps = p.kh * p.kw;
    // The Neon 3×3 path, when its zero-bordered plane fits the scratch given.
    #[cfg(target_arch = "aarch64")]
    let fast = padded_dims(p).filter(|&(r, c)| r * c <= scratch.len());
    #[cfg(not(target_arch = "aarch64"))]
    let _ = &scratch;
    for (plane, op) in out[..nout].chunks_exact_mut(pix).enumerate() {
        let (b, o) = (plane / oc, plane % oc);
        let xi = &x[(b * c + o / mult) * ipix..][..ipix];
        let wo = &w[o * taps..][..taps];
        #[cfg(target_arch = "aarch64")]
        if let (Some(dims), Ok(w9)) = (fast, <&[f32; 9]>::try_from(wo)) {
            nchw_3x3::plane(
                p,
                xi,
                w9,
                bias.map_or(0.0, |bv| bv[o]),
                op,
                range,
                dims,
                scratch,
            );
            continue;
        }
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

#[cfg(target_arch = "aarch64")]
mod geometry_3x3;
#[cfg(target_arch = "aarch64")]
mod nchw_3x3;
#[cfg(target_arch = "aarch64")]
mod neon_3x3;
#[cfg(target_arch = "aarch64")]
mod sve_3x3;
