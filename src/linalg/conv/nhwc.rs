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
//! directly (row stride C). Otherwise:
//!
//! - when the filter is small enough to be packed once per call ([`PREPACK_F32`]), A is never
//!   formed (implicit GEMM): each image is copied once into a zero-bordered buffer (if it has
//!   padding), and chunks of [`chunk_rows`] pixels are written straight into the micro-kernel's
//!   packed A layout ([`gemm::PackedA`]), one run of `KW·C` contiguous input floats per kernel
//!   row and pixel group, by the kernel's own packer; the product then reads both operands in
//!   place ([`gemm::sgemm_packed_with`]);
//! - otherwise A is gathered row-major into scratch in chunks (im2col, at least 64 pixels, so
//!   packing the filter once per chunk costs at most 1/64 of the product) and multiplied by
//!   [`gemm::sgemm`].

use super::{shape_err, Conv2d};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, MicroKernel, PackedA, PackedB, GEMM_SCRATCH_F32};
use crate::linalg::gemm::{MAX_MR, MAX_NR};

/// Floats of gathered patch rows per chunk (the pixel count adapts to the depth).
pub const IM2COL_F32: usize = 64 * 1024;
/// Fewest pixels per chunk.
const MIN_ROWS: usize = 64;
/// Largest filter (per group, floats, at the widest tile) packed once per call.
pub const PREPACK_F32: usize = 256 * 1024;

/// Output pixels gathered per chunk (all of them for a pointwise convolution).
pub fn chunk_rows(p: &Conv2d) -> usize {
    let total = p.batch.saturating_mul(p.pixels());
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

/// Rows and columns of the zero-bordered copy of one image the implicit path reads: every
/// tap of every output pixel lies inside it.
fn padded_hw(p: &Conv2d) -> (usize, usize) {
    let span = |o: usize, s: usize, k: usize, d: usize| {
        o.saturating_sub(1)
            .saturating_mul(s)
            .saturating_add(k.saturating_sub(1).saturating_mul(d))
            .saturating_add(1)
    };
    (
        span(p.out_h, p.stride_h, p.kh, p.dil_h),
        span(p.out_w, p.stride_w, p.kw, p.dil_w),
    )
}

/// Whether the implicit path reads the input image in place (no border to add).
fn reads_in_place(p: &Conv2d) -> bool {
    let (hp, wp) = padded_hw(p);
    p.pad_top == 0 && p.pad_left == 0 && hp <= p.in_h && wp <= p.in_w
}

/// Scratch floats [`conv2d`] needs for `p`, on any CPU (0 for a geometry [`Conv2d::check`]
/// refuses: `conv2d` then fails before using any; saturating, so never a panic).
pub fn scratch_f32(p: &Conv2d) -> usize {
    if p.check().is_err() {
        return 0;
    }
    if p.is_pointwise() || p.out_h == 0 || p.out_w == 0 {
        return GEMM_SCRATCH_F32;
    }
    let k = p.depth();
    let patches = chunk_rows(p).saturating_mul(k);
    match prepacked_bound(p) {
        Some(packed_b) => {
            let (hp, wp) = padded_hw(p);
            let image = if reads_in_place(p) {
                0
            } else {
                hp.saturating_mul(wp).saturating_mul(p.in_c)
            };
            image
                .saturating_add(patches)
                .saturating_add(MAX_MR.saturating_mul(k))
                .saturating_add(packed_b)
                .saturating_add(GEMM_SCRATCH_F32)
        }
        None => patches.saturating_add(GEMM_SCRATCH_F32),
    }
}

/// A group's filter as the GEMM's B (`K × OCg`, `B(kk, o) = w[(g·OCg + o)·K + kk]`): the
/// filter tensor viewed in place (packed per call), or panels packed ahead of time.
#[derive(Clone, Copy)]
enum Filter<'a> {
    Plain(MatRef<'a>),
    Packed(PackedB<'a>),
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
    let nout = p.check_call(x, w, bias, out, Some((scratch.len(), scratch_f32(p))))?;
    if nout == 0 {
        return Ok(());
    }
    let (k, n) = (p.depth(), p.ocg());
    let out = &mut out[..nout];
    for g in 0..p.groups {
        let b = MatRef::new(&w[g * n * k..], k, n, 1, k)?;
        let bias_g = bias.map(|b| &b[g * n..(g + 1) * n]);
        group(p, x, Filter::Plain(b), bias_g, g, out, range, scratch)?;
    }
    Ok(())
}

/// [`conv2d`] of a one-group convolution whose filter was packed ahead (by `xtask lower`):
/// `w` holds the `K × OC` matrix `B(kk, o) = filter[o·K + kk]` (`K = KH·KW·C`) as
/// [`PackedB`] panels, read in place. Same `scratch` as [`conv2d`].
pub fn conv2d_prepacked(
    p: &Conv2d,
    x: &[f32],
    w: PackedB<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if p.groups != 1 || w.k() != p.depth() || w.n() != p.out_c {
        return Err(shape_err(
            "conv: packed filter does not match a one-group geometry",
        ));
    }
    // The filter is checked above; this covers input, output, bias and scratch.
    let nout = p.check_io(x, bias, out, Some((scratch.len(), scratch_f32(p))))?;
    if nout == 0 {
        return Ok(());
    }
    let out = &mut out[..nout];
    group(p, x, Filter::Packed(w), bias, 0, out, range, scratch)
}

/// One group `g` of the convolution, its output clamp applied by the GEMM as it stores.
#[allow(clippy::too_many_arguments)]
fn group(
    p: &Conv2d,
    x: &[f32],
    filter: Filter<'_>,
    bias_g: Option<&[f32]>,
    g: usize,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (k, n, cg, oc) = (p.depth(), p.ocg(), p.icg(), p.out_c);
    let total = p.batch.saturating_mul(p.pixels());
    if p.is_pointwise() {
        let a = MatRef::new(&x[g * cg..], total, cg, p.in_c, 1)?;
        let c = &mut out[g * n..];
        return match filter {
            Filter::Plain(b) => gemm::sgemm_clamped(a, b, c, oc, 1.0, 0.0, bias_g, range, scratch),
            Filter::Packed(pb) => {
                gemm::sgemm_prepacked_clamped(a, pb, c, oc, 1.0, 0.0, bias_g, range, scratch)
            }
        };
    }
    if prepacked_bound(p).is_some() {
        let rows = chunk_rows(p).min(p.pixels());
        let usable = match filter {
            Filter::Plain(_) => true,
            Filter::Packed(pb) => gemm::kernel_for_prepacked(rows, n, k, pb.nr()).is_some(),
        };
        if usable {
            return implicit(p, x, filter, bias_g, g, out, range, scratch);
        }
    }
    let rows = chunk_rows(p);
    let (col, rest) = scratch.split_at_mut(rows * k);
    let (packed_area, gemm_scratch) = rest.split_at_mut(prepacked_bound(p).unwrap_or(0));
    let packed = match (filter, prepacked_bound(p)) {
        (Filter::Packed(pb), _) => Some(pb),
        (Filter::Plain(b), Some(_)) => Some(pack_filter(b, rows, packed_area)?),
        (Filter::Plain(_), None) => None,
    };
    for p0 in (0..total).step_by(rows) {
        let m = rows.min(total - p0);
        let col = &mut col[..m * k];
        gather(p, x, g, p0, col);
        let a = MatRef::row_major(col, m, k)?;
        let c = &mut out[p0 * oc + g * n..];
        match (packed, filter) {
            (Some(pb), _) => {
                gemm::sgemm_prepacked_clamped(a, pb, c, oc, 1.0, 0.0, bias_g, range, gemm_scratch)?
            }
            (None, Filter::Plain(b)) => {
                gemm::sgemm_clamped(a, b, c, oc, 1.0, 0.0, bias_g, range, gemm_scratch)?
            }
            (None, Filter::Packed(_)) => unreachable!("a packed filter is always `packed`"),
        }
    }
    Ok(())
}

/// Packs the filter matrix `b` (`K × OCg`) into `area` for the tile width the GEMM prefers
/// for `rows`-row chunks.
fn pack_filter<'s>(
    b: MatRef<'_>,
    rows: usize,
    area: &'s mut [f32],
) -> Result<PackedB<'s>, KernelError> {
    let (k, n) = (b.rows(), b.cols());
    let nr = gemm::prepack_nr(rows, n, k);
    let len = PackedB::len_for(k, n, nr).ok_or(shape_err("conv: size overflows"))?;
    let dst = area
        .get_mut(..len)
        .ok_or(shape_err("conv: packed filter exceeds its bound"))?;
    gemm::pack_b_ahead(b, nr, dst)?;
    PackedB::new(dst, k, n, nr)
}

/// The implicit-GEMM path for group `g` (filter small enough to pack once, or packed ahead
/// for a tile width some kernel here has): see the module documentation.
#[allow(clippy::too_many_arguments)]
fn implicit(
    p: &Conv2d,
    x: &[f32],
    filter: Filter<'_>,
    bias_g: Option<&[f32]>,
    g: usize,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (k, n, oc) = (p.depth(), p.ocg(), p.out_c);
    let (pix, ipix) = (p.pixels(), p.in_h * p.in_w * p.in_c);
    let rows = chunk_rows(p).min(pix);
    let (hp, wp) = padded_hw(p);
    let in_place = reads_in_place(p);
    let image_len = if in_place { 0 } else { hp * wp * p.in_c };
    let (image, rest) = scratch.split_at_mut(image_len);
    let (a_area, rest) = rest.split_at_mut((chunk_rows(p) + MAX_MR) * k);
    let (packed_area, gemm_scratch) = rest.split_at_mut(prepacked_bound(p).unwrap_or(0));
    let pb = match filter {
        Filter::Packed(pb) => pb,
        Filter::Plain(b) => pack_filter(b, rows, packed_area)?,
    };
    let uk = gemm::kernel_for_prepacked(rows, n, k, pb.nr())
        .ok_or(shape_err("conv: no micro-kernel for the packed filter"))?;
    for bi in 0..p.batch {
        let xb = &x[bi * ipix..(bi + 1) * ipix];
        let (src, wsrc): (&[f32], usize) = if in_place {
            (xb, p.in_w)
        } else {
            pad_image(p, xb, hp, wp, image);
            (&image[..], wp)
        };
        for q0 in (0..pix).step_by(rows) {
            let m = rows.min(pix - q0);
            let alen = PackedA::len_for(m, k, uk.mr()).ok_or(shape_err("conv: size overflows"))?;
            let a = a_area
                .get_mut(..alen)
                .ok_or(shape_err("conv: packed patches exceed their bound"))?;
            gather_packed(p, src, wsrc, g, q0, m, uk, a)?;
            let pa = PackedA::new(a, m, k, uk.mr())?;
            let c = &mut out[(bi * pix + q0) * oc + g * n..];
            gemm::sgemm_packed_with(uk, pa, pb, c, oc, 1.0, 0.0, bias_g, range, gemm_scratch)?;
        }
    }
    Ok(())
}

/// Copies image `xb` (`[H, W, C]`) into `dst` as `[hp, wp, C]` shifted by the top/left padding,
/// zero elsewhere.
fn pad_image(p: &Conv2d, xb: &[f32], hp: usize, wp: usize, dst: &mut [f32]) {
    let c = p.in_c;
    let (x0, x1) = (p.pad_left.min(wp), (p.pad_left + p.in_w).min(wp));
    for (y, row) in dst[..hp * wp * c].chunks_exact_mut(wp * c).enumerate() {
        match y.checked_sub(p.pad_top).filter(|&iy| iy < p.in_h) {
            Some(iy) if x0 < x1 => {
                row[..x0 * c].fill(0.0);
                row[x1 * c..].fill(0.0);
                let src = &xb[iy * p.in_w * c..][..(x1 - x0) * c];
                row[x0 * c..x1 * c].copy_from_slice(src);
            }
            _ => row.fill(0.0),
        }
    }
}

/// Writes the patch rows of output pixels `q0 .. q0 + m` of one image, group `g`, into packed
/// A panels (`uk.mr()` rows each, whole depth `K = KH·KW·Cg`). `src` is the image with every
/// tap inside it (`[.., wsrc, C]`: the padded copy or the input itself). Pixels of one output
/// row are evenly spaced runs of the source, handed to the kernel's packer together.
#[allow(clippy::too_many_arguments)]
fn gather_packed(
    p: &Conv2d,
    src: &[f32],
    wsrc: usize,
    g: usize,
    q0: usize,
    m: usize,
    uk: &MicroKernel,
    a: &mut [f32],
) -> Result<(), KernelError> {
    let (mr, k, cg, c) = (uk.mr(), p.depth(), p.icg(), p.in_c);
    if k == 0 {
        return Ok(());
    }
    let ld = p.stride_w * c;
    let contiguous = cg == c && p.dil_w == 1;
    for (qi, panel) in a.chunks_exact_mut(k * mr).enumerate() {
        let first = q0 + qi * mr;
        let count = mr.min(q0 + m - first);
        if count < mr {
            panel.fill(0.0);
        }
        let mut lane = 0;
        while lane < count {
            let q = first + lane;
            let (oy, ox) = (q / p.out_w, q % p.out_w);
            let runs = (p.out_w - ox).min(count - lane);
            // The pixels' first tap; kernel rows are `dil_h` source rows apart.
            let row0 = oy * p.stride_h * wsrc + ox * p.stride_w;
            let row_step = p.dil_h * wsrc * c;
            if contiguous {
                // Kernel row ky: one run of KW·C floats per pixel, depths ky·KW·C ...
                let run = p.kw * cg;
                gemm::pack_a_taps(
                    uk,
                    src,
                    row0 * c,
                    ld,
                    runs,
                    lane,
                    0,
                    run,
                    p.kh,
                    row_step,
                    panel,
                )?;
            } else {
                // ... or, dilated or grouped, KW runs of Cg floats `dil_w` pixels apart.
                for ky in 0..p.kh {
                    let (base, p0) = (row0 * c + ky * row_step + g * cg, ky * p.kw * cg);
                    let step = p.dil_w * c;
                    gemm::pack_a_taps(uk, src, base, ld, runs, lane, p0, cg, p.kw, step, panel)?;
                }
            }
            lane += runs;
        }
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
