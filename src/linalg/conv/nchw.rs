//! Dense and grouped convolution with NCHW activations and `[OC, C/groups, KH, KW]` filters
//! (ATen's `convolution` layout), as one matrix product per image and group:
//!
//! ```text
//! out[b, g·OCg + o, oy, ox] = bias[g·OCg + o]
//!     + Σ_{i, ky, kx} w[g·OCg + o, i, ky, kx] · x[b, g·Cg + i, iy, ix]
//! C (OCg × pixels, row stride OH·OW) = A (w_g: OCg × Cg·KH·KW) · B (Cg·KH·KW × pixels)
//! ```
//!
//! B's row `(i, ky, kx)` is input channel `i` shifted by the tap: for a 1×1, stride-1,
//! unpadded convolution B is the input itself (`[Cg, H·W]`, read in place); otherwise it is
//! gathered into scratch in chunks of [`chunk_cols`] output pixels by at most [`IM2COL_F32`]
//! floats (a very deep filter is also split along its depth), whole runs of input row copied
//! at a time when the stride is 1. The bias is per row of C, so C is filled with it first and
//! the products accumulate (`beta = 1`). Scratch never exceeds
//! `IM2COL_F32 + GEMM_SCRATCH_F32` floats, whatever the geometry.

use super::{clamp, Conv2d};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};

/// Floats of gathered columns per chunk (the pixel count adapts to the depth).
pub const IM2COL_F32: usize = 64 * 1024;
/// Fewest output pixels per chunk (a multiple of every Neon tile width).
const MIN_COLS: usize = 48;

/// Output pixels gathered per chunk (all of one image for a pointwise convolution).
pub fn chunk_cols(p: &Conv2d) -> usize {
    let pix = p.pixels().max(1);
    if p.is_pointwise() {
        return pix;
    }
    let c = (IM2COL_F32 / p.depth().max(1)).max(MIN_COLS);
    (c - c % MIN_COLS).clamp(1, pix)
}

/// Depth rows gathered per chunk (all of them unless the filter is very deep).
fn chunk_depth(p: &Conv2d) -> usize {
    (IM2COL_F32 / chunk_cols(p)).clamp(1, p.depth().max(1))
}

/// Scratch floats [`conv2d`] needs for `p`, on any CPU (at most
/// `IM2COL_F32 + GEMM_SCRATCH_F32`).
pub fn scratch_f32(p: &Conv2d) -> usize {
    if p.check().is_err() {
        return 0;
    }
    if p.is_pointwise() {
        GEMM_SCRATCH_F32
    } else {
        chunk_cols(p) * chunk_depth(p) + GEMM_SCRATCH_F32
    }
}

/// `out = clamp(conv(x, w) + bias)` for NCHW `x` (`[N, C, H, W]`), filter `w`
/// (`[OC, C/groups, KH, KW]`), `out` (`[N, OC, OH, OW]`), `bias` (`[OC]`). `scratch` must hold
/// [`scratch_f32`] floats.
pub fn conv2d(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = p.check_call(x, w, bias, out, Some((scratch.len(), scratch_f32(p))))?;
    if nout == 0 {
        return Ok(());
    }
    let (k, n, cg) = (p.depth(), p.ocg(), p.icg());
    let (pix, ipix) = (p.pixels(), p.in_h * p.in_w);
    let cols = chunk_cols(p);
    let out = &mut out[..nout];
    for (b, out_b) in out.chunks_exact_mut(p.out_c * pix).enumerate() {
        // Bias rows (the product then accumulates onto them).
        for (o, row) in out_b.chunks_exact_mut(pix).enumerate() {
            row.fill(bias.map_or(0.0, |bv| bv[o]));
        }
        for g in 0..p.groups {
            let a = MatRef::row_major(&w[g * n * k..], n, k)?;
            let xg = &x[(b * p.in_c + g * cg) * ipix..];
            let c = &mut out_b[g * n * pix..];
            if p.is_pointwise() {
                let bm = MatRef::row_major(xg, cg, ipix)?;
                gemm::sgemm(a, bm, c, pix, 1.0, 1.0, None, scratch)?;
                continue;
            }
            let kt = chunk_depth(p);
            let (col, gemm_scratch) = scratch.split_at_mut(cols * kt);
            for q0 in (0..pix).step_by(cols) {
                let m = cols.min(pix - q0);
                for k0 in (0..k).step_by(kt) {
                    let kb = kt.min(k - k0);
                    let col = &mut col[..kb * m];
                    gather(p, xg, q0, m, k0, col);
                    let ab = MatRef::new(&w[g * n * k + k0..], n, kb, k, 1)?;
                    let bm = MatRef::row_major(col, kb, m)?;
                    gemm::sgemm(ab, bm, &mut c[q0..], pix, 1.0, 1.0, None, gemm_scratch)?;
                }
            }
        }
        clamp(out_b, range);
    }
    Ok(())
}

/// Gathers columns `q0 .. q0 + m` (output pixels) of B rows `k0 ..` (as many as `col` holds)
/// for one image and group: row `(i·KH + ky)·KW + kx`, column `q` is `xg[i, iy, ix]` for pixel
/// `q0 + q`, 0 in the padding. `xg` starts at the group's first input channel.
fn gather(p: &Conv2d, xg: &[f32], q0: usize, m: usize, k0: usize, col: &mut [f32]) {
    let ipix = p.in_h * p.in_w;
    let taps = p.kh * p.kw;
    let mut rows = col.chunks_exact_mut(m);
    for r in k0.. {
        let (i, ky, kx) = (r / taps, r % taps / p.kw, r % p.kw);
        let Some(dst) = rows.next() else {
            return;
        };
        let xi = &xg[i * ipix..(i + 1) * ipix];
        let (lo, hi) = p.valid_cols(kx);
        // Output pixels q0 .. q0+m, row by row of the output image.
        let mut q = q0;
        let mut d = 0;
        while d < m {
            let (oy, ox) = (q / p.out_w, q % p.out_w);
            let run = (p.out_w - ox).min(m - d);
            let seg = &mut dst[d..d + run];
            match p.in_row(oy, ky) {
                None => seg.fill(0.0),
                Some(iy) => {
                    let xr = &xi[iy * p.in_w..(iy + 1) * p.in_w];
                    // Columns ox .. ox+run: valid ones are lo..hi.
                    let (a, z) = (lo.clamp(ox, ox + run), hi.clamp(ox, ox + run));
                    seg[..a - ox].fill(0.0);
                    seg[z - ox..].fill(0.0);
                    let valid = &mut seg[a - ox..z - ox];
                    if !valid.is_empty() {
                        // `in_col` of a valid column is inside the row.
                        let first = a * p.stride_w + kx * p.dil_w - p.pad_left;
                        if p.stride_w == 1 {
                            valid.copy_from_slice(&xr[first..first + valid.len()]);
                        } else {
                            for (j, v) in valid.iter_mut().enumerate() {
                                *v = xr[first + j * p.stride_w];
                            }
                        }
                    }
                }
            }
            d += run;
            q += run;
        }
    }
}
