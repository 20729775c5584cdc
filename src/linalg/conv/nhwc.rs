//! Dense and grouped convolution with NHWC activations and `[OC, KH, KW, C/groups]` filters
//! (XNNPACK's `Conv2d` layout), as one matrix product per group:
//!
//! ```text
//! out[b, oy, ox, g·OCg + o] = bias[g·OCg + o]
//!     + Σ_{ky, kx, i} x[b, iy, ix, g·Cg + i] · w[g·OCg + o, ky, kx, i]
//! C (pixels × OCg, row stride OC) = A (pixels × KH·KW·Cg) · Bᵀ, B = w_g (OCg × KH·KW·Cg)
//! ```
//!
//! A's row for one output pixel is its receptive field, `KH·KW` runs of `Cg` channels (zero
//! where a tap falls in the padding). A 1×1, stride-1, unpadded convolution uses the input as A
//! directly (row stride C). Otherwise A is gathered into scratch in chunks of
//! [`chunk_rows`] pixels (at least 64, so packing the filter once per chunk costs at most
//! 1/64 of the product), and the filter is packed once per call ahead of the chunks when it is
//! small enough ([`PREPACK_F32`]), so the chunks read it in place
//! ([`gemm::sgemm_prepacked`]).

use super::{clamp, shape_err, Conv2d};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, PackedB, GEMM_SCRATCH_F32, MAX_NR};

/// Floats of gathered patch rows per chunk (the pixel count adapts to the depth).
pub const IM2COL_F32: usize = 64 * 1024;
/// Fewest pixels per chunk.
const MIN_ROWS: usize = 64;
/// Largest filter (per group, floats, at the widest tile) packed once per call.
pub const PREPACK_F32: usize = 256 * 1024;

/// Output pixels gathered per chunk (all of them for a pointwise convolution).
pub fn chunk_rows(p: &Conv2d) -> usize {
    let total = p.batch * p.pixels();
    if p.is_pointwise() {
        return total.max(1);
    }
    let r = (IM2COL_F32 / p.depth().max(1)).max(MIN_ROWS);
    (r - r % 8).clamp(1, total.max(1))
}

/// Upper bound, over every tile width a kernel may have, of the packed filter of one group
/// (so that the scratch size does not depend on the CPU); `None` when it is not pre-packed.
fn prepacked_bound(p: &Conv2d) -> Option<usize> {
    let bound = (p.ocg() + MAX_NR - 1).checked_mul(p.depth())?;
    (!p.is_pointwise() && bound <= PREPACK_F32).then_some(bound)
}

/// Scratch floats [`conv2d`] needs for `p`, on any CPU.
pub fn scratch_f32(p: &Conv2d) -> usize {
    if p.is_pointwise() {
        return GEMM_SCRATCH_F32;
    }
    chunk_rows(p) * p.depth() + prepacked_bound(p).unwrap_or(0) + GEMM_SCRATCH_F32
}

/// `out = clamp(conv(x, w) + bias)` for NHWC `x` (`[N, H, W, C]`), filter `w`
/// (`[OC, KH, KW, C/groups]`), `out` (`[N, OH, OW, OC]`), `bias` (`[OC]`), optional clamp
/// range. `scratch` must hold [`scratch_f32`] floats.
pub fn conv2d(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (nin, nw, nout) = p.check()?;
    if x.len() < nin || w.len() < nw || out.len() < nout || bias.is_some_and(|b| b.len() < p.out_c)
    {
        return Err(shape_err("conv: a slice is shorter than the geometry"));
    }
    if scratch.len() < scratch_f32(p) {
        return Err(KernelError::Scratch {
            needed: scratch_f32(p) * 4,
            got: scratch.len() * 4,
        });
    }
    if nout == 0 {
        return Ok(());
    }
    let (k, n, cg, oc) = (p.depth(), p.ocg(), p.icg(), p.out_c);
    let total = p.batch * p.pixels();
    let out = &mut out[..nout];
    for g in 0..p.groups {
        // B(kk, o) = w[(g·OCg + o)·K + kk]: the group's filter rows, transposed.
        let b = MatRef::new(&w[g * n * k..], k, n, 1, k)?;
        let bias_g = bias.map(|b| &b[g * n..(g + 1) * n]);
        if p.is_pointwise() {
            let a = MatRef::new(&x[g * cg..], total, cg, p.in_c, 1)?;
            gemm::sgemm(a, b, &mut out[g * n..], oc, 1.0, 0.0, bias_g, scratch)?;
            continue;
        }
        let rows = chunk_rows(p);
        let (col, rest) = scratch.split_at_mut(rows * k);
        let (packed_area, gemm_scratch) = rest.split_at_mut(prepacked_bound(p).unwrap_or(0));
        let packed = match prepacked_bound(p) {
            Some(_) => {
                let nr = gemm::prepack_nr(rows, n, k);
                let len = PackedB::len_for(k, n, nr).ok_or(shape_err("conv: size overflows"))?;
                let dst = packed_area
                    .get_mut(..len)
                    .ok_or(shape_err("conv: packed filter exceeds its bound"))?;
                gemm::pack_b_ahead(b, nr, dst)?;
                Some(PackedB::new(dst, k, n, nr)?)
            }
            None => None,
        };
        for p0 in (0..total).step_by(rows) {
            let m = rows.min(total - p0);
            let col = &mut col[..m * k];
            gather(p, x, g, p0, col);
            let a = MatRef::row_major(col, m, k)?;
            let c = &mut out[p0 * oc + g * n..];
            match packed {
                Some(pb) => gemm::sgemm_prepacked(a, pb, c, oc, 1.0, 0.0, bias_g, gemm_scratch)?,
                None => gemm::sgemm(a, b, c, oc, 1.0, 0.0, bias_g, gemm_scratch)?,
            }
            if p.groups == 1 {
                // Still in cache.
                clamp(&mut out[p0 * oc..(p0 + m) * oc], range);
            }
        }
    }
    if p.groups != 1 || p.is_pointwise() {
        clamp(out, range);
    }
    Ok(())
}

/// Gathers the patch rows of output pixels `p0 ..` (as many as `col` holds rows of
/// `K = KH·KW·Cg`) for group `g`: row `r`, column `(ky·KW + kx)·Cg + i` is
/// `x[b, iy, ix, g·Cg + i]`, or 0 where the tap is padding.
fn gather(p: &Conv2d, x: &[f32], g: usize, p0: usize, col: &mut [f32]) {
    let (cg, c) = (p.icg(), p.in_c);
    let k = p.depth();
    if k == 0 {
        return;
    }
    let pix = p.pixels();
    let run = p.kw * cg;
    // The KW taps of a kernel row are one contiguous run of the input when they are adjacent
    // pixels and the group spans every channel.
    let contiguous_row = cg == c && p.dil_w == 1;
    for (r, dst) in col.chunks_exact_mut(k).enumerate() {
        let q = p0 + r;
        let (b, oy, ox) = (q / pix, q % pix / p.out_w, q % p.out_w);
        for (ky, row) in dst.chunks_exact_mut(run).enumerate() {
            let Some(iy) = p.in_row(oy, ky) else {
                row.fill(0.0);
                continue;
            };
            let base = (b * p.in_h + iy) * p.in_w;
            if contiguous_row {
                if let (Some(ix0), Some(_)) = (p.in_col(ox, 0), p.in_col(ox, p.kw - 1)) {
                    // In bounds: ix0 + KW − 1 < W and b, iy inside the image (checked geometry).
                    let s = (base + ix0) * c;
                    row.copy_from_slice(&x[s..s + run]);
                    continue;
                }
            }
            for (kx, d) in row.chunks_exact_mut(cg).enumerate() {
                match p.in_col(ox, kx) {
                    Some(ix) => {
                        // ix < W, iy < H, b < N: inside the checked input length.
                        let s = (base + ix) * c + g * cg;
                        d.copy_from_slice(&x[s..s + cg]);
                    }
                    None => d.fill(0.0),
                }
            }
        }
    }
}
