//! Transposed ("fractionally strided") 2-D convolution, ATen's `convolution(transposed=True)`
//! and XNNPACK's `ConvTranspose2d` node:
//!
//! ```text
//! out[b, oy, ox, g·OCg + o] = bias[g·OCg + o]
//!     + Σ_{iy, ix, ky, kx, i : oy = iy·sh + ky·dh − pad_top, ox = ix·sw + kx·dw − pad_left}
//!       x[b, iy, ix, g·Cg + i] · w(g, i, o, ky, kx)
//! ```
//!
//! NHWC goes by phases (module `phases`) whenever every phase's re-laid filter fits
//! [`RELAYOUT_F32`]: `stride_h·stride_w` ordinary convolutions on the implicit-GEMM path, each
//! output pixel computed once with its taps summed in the micro-kernel. The rest of this
//! module is the per-tap path, NCHW's and the fallback for NHWC filters too large to re-lay:
//! matrix products per kernel tap and a scatter-add.
//!
//! For each tap `t = (ky, kx)` every input pixel sends one vector of `OCg` values to one
//! output pixel, so per image, group and chunk of input pixels the contributions of all taps
//! are one product, computed into scratch by the GEMM micro-kernels and then added into the
//! output pixels each tap reaches ("col2im"):
//!
//! - NHWC: `x_chunk (pixels × Cg) · F (Cg × KH·KW·OCg)`, `F` the group's filter re-laid once
//!   per call so that each tap's `OCg` columns are contiguous; a pixel's row then holds one
//!   channel vector per tap, added into the output pixel's channels;
//! - NCHW: `W (KH·KW·OCg × Cg) · x_chunk (Cg × pixels)` with the filter viewed in place (row
//!   `o·KH·KW + t`) and the input read in place; each row is added into output rows of plane
//!   `o`, every `stride_w`-th column.
//!
//! When `KH·KW·OCg` is too wide for a chunk of at least [`MIN_CHUNK`] pixels (or the re-laid
//! filter too big), each tap is its own product over blocks of output channels. The output is
//! first set to the bias; pixels no tap reaches keep it. The clamp (XNNPACK's
//! `output_min/max`) is applied once at the end.
//!
//! Filter layouts: NCHW (ATen) `[C, OC/groups, KH, KW]`, `w(g, i, o, t) =
//! w[((g·Cg + i)·OCg + o)·KH·KW + t]`; NHWC (XNNPACK) `[OC, KH, KW, C/groups]`, `w(g, i, o, t) =
//! w[((g·OCg + o)·KH·KW + t)·Cg + i]`.
//!
//! Every function is safe and panic-free for any argument: lengths are checked against the
//! geometry up front (`ConvTranspose2d::check_call`), and contributions that fall outside
//! the output (the padding crops them) are dropped.

mod geometry;
mod phases;

pub use geometry::{out_len, ConvTranspose2d, MIN_CHUNK, RELAYOUT_F32, TAP_F32};

use super::{clamp, shape_err};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};

impl ConvTranspose2d {
    /// Checks the geometry and the operands of one call and returns the output length.
    pub(crate) fn check_call(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        out: &[f32],
        scratch: usize,
        nhwc: bool,
    ) -> Result<usize, KernelError> {
        let (nin, nw, nout) = self.check()?;
        if x.len() < nin
            || w.len() < nw
            || out.len() < nout
            || bias.is_some_and(|b| b.len() < self.out_c)
        {
            return Err(shape_err(
                "transposed conv: a slice is shorter than the geometry",
            ));
        }
        let needed = if nhwc {
            scratch_f32_nhwc(self)
        } else {
            scratch_f32_nchw(self)
        };
        if scratch < needed {
            return Err(KernelError::Scratch {
                needed: needed.saturating_mul(4),
                got: scratch.saturating_mul(4),
            });
        }
        Ok(nout)
    }

    /// Width of the all-taps product, `KH·KW·OCg` (rows in NCHW, columns in NHWC), when it is
    /// used: a chunk of [`MIN_CHUNK`] pixels fits [`TAP_F32`] and (NHWC) the re-laid filter
    /// [`RELAYOUT_F32`].
    fn all_taps(&self, nhwc: bool) -> Option<usize> {
        let n = self.taps().checked_mul(self.ocg())?;
        let fits = n.checked_mul(MIN_CHUNK)? <= TAP_F32
            && (!nhwc || n.checked_mul(self.icg())? <= RELAYOUT_F32);
        (fits && n > 0).then_some(n)
    }

    /// Input pixels per chunk of a product `width` wide (fits [`TAP_F32`] floats).
    fn chunk_for(&self, width: usize) -> usize {
        let pix = self.in_h.saturating_mul(self.in_w).max(1);
        (TAP_F32 / width.max(1)).clamp(1, pix)
    }

    /// Output channels per block (all of a group's unless there are more than [`TAP_F32`]).
    fn oblock(&self) -> usize {
        self.ocg().clamp(1, TAP_F32)
    }

    /// Input pixels per chunk of a per-tap product (one channel block).
    fn chunk(&self) -> usize {
        self.chunk_for(self.oblock())
    }

    /// Output row reached by input row `iy` at kernel row `ky` (`None`: cropped).
    #[inline]
    fn out_row(&self, iy: usize, ky: usize) -> Option<usize> {
        (iy * self.stride_h + ky * self.dil_h)
            .checked_sub(self.pad_top)
            .filter(|&y| y < self.out_h)
    }

    /// Input columns `ix` whose tap `kx` lands inside the output: `lo..hi` (may be empty).
    fn valid_cols(&self, kx: usize) -> (usize, usize) {
        super::valid_range(
            self.in_w,
            self.stride_w,
            kx * self.dil_w,
            self.pad_left,
            self.out_w,
        )
    }
}

/// Scratch floats [`conv_transpose2d_nchw`] needs for `p`, on any CPU (0 for a geometry
/// [`ConvTranspose2d::check`] refuses); at most `TAP_F32 + GEMM_SCRATCH_F32`.
pub fn scratch_f32_nchw(p: &ConvTranspose2d) -> usize {
    if p.check().is_err() {
        return 0;
    }
    let product = match p.all_taps(false) {
        Some(n) => p.chunk_for(n) * n,
        None => p.chunk() * p.oblock(),
    };
    product.saturating_add(GEMM_SCRATCH_F32)
}

/// Scratch floats [`conv_transpose2d_nhwc`] needs for `p`, on any CPU (0 for a geometry
/// [`ConvTranspose2d::check`] refuses); at most `TAP_F32 + RELAYOUT_F32 + GEMM_SCRATCH_F32`.
pub fn scratch_f32_nhwc(p: &ConvTranspose2d) -> usize {
    if p.check().is_err() {
        return 0;
    }
    if let Some(n) = phases::scratch_f32_nhwc(p) {
        return n;
    }
    let product = match p.all_taps(true) {
        Some(n) => p.chunk_for(n) * n + p.icg() * n,
        None => p.chunk() * p.oblock(),
    };
    product.saturating_add(GEMM_SCRATCH_F32)
}

/// Walks the input pixels `q0 .. q0 + m` of one image (row-major `in_h × in_w`) that tap
/// `(ky, kx)` sends inside the output, as runs along an input row:
/// `f(q, oy, ox, len)`: pixels `q .. q + len` (chunk-relative) go to output row `oy`, columns
/// `ox, ox + stride_w, …`.
fn runs(
    p: &ConvTranspose2d,
    q0: usize,
    m: usize,
    ky: usize,
    kx: usize,
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    let (lo, hi) = p.valid_cols(kx);
    let mut q = q0;
    while q < q0 + m {
        let (iy, ix) = (q / p.in_w, q % p.in_w);
        let end = (q0 + m).min((iy + 1) * p.in_w);
        let (a, z) = (lo.max(ix), hi.min(ix + (end - q)));
        if let Some(oy) = p.out_row(iy, ky) {
            if a < z {
                // In the valid range, so the subtraction cannot underflow.
                let ox = a * p.stride_w + kx * p.dil_w - p.pad_left;
                f(q - q0 + (a - ix), oy, ox, z - a);
            }
        }
        q = end;
    }
}

/// NCHW: `out = clamp(conv_transpose(x, w) + bias)` for `x` `[N, C, H, W]`, filter `w`
/// `[C, OC/groups, KH, KW]`, `out` `[N, OC, OH, OW]`, `bias` `[OC]`. `scratch` must hold
/// [`scratch_f32_nchw`] floats.
pub fn conv_transpose2d_nchw(
    p: &ConvTranspose2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = p.check_call(x, w, bias, out, scratch.len(), false)?;
    if nout == 0 {
        return Ok(());
    }
    let (cg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
    let (ipix, opix) = (p.in_h * p.in_w, p.out_h * p.out_w);
    // Rows of one product: all taps of all the group's channels, or one tap of a block.
    let (all, ob) = match p.all_taps(false) {
        Some(n) => (true, n),
        None => (false, p.oblock()),
    };
    let chunk = p.chunk_for(ob);
    let (prod, gemm_scratch) = scratch.split_at_mut(chunk * ob);
    let out = &mut out[..nout];
    for (b, out_b) in out.chunks_exact_mut(p.out_c * opix).enumerate() {
        for (o, plane) in out_b.chunks_exact_mut(opix).enumerate() {
            plane.fill(bias.map_or(0.0, |bv| bv[o]));
        }
        if ipix == 0 {
            continue;
        }
        for g in 0..p.groups {
            let xg = &x[(b * p.in_c + g * cg) * ipix..];
            let wg = &w[g * cg * ocg * taps..];
            let out_g = &mut out_b[g * ocg * opix..(g + 1) * ocg * opix];
            for q0 in (0..ipix).step_by(chunk) {
                let m = chunk.min(ipix - q0);
                // B: the chunk's pixels of the group's channels, [Cg, m], row stride H·W.
                let bm = MatRef::new(&xg[q0..], cg, m, ipix, 1)?;
                if all {
                    // A: [OCg·KH·KW, Cg], row o·KH·KW + t is w(g, ·, o, t).
                    let a = MatRef::new(wg, ob, cg, 1, ob)?;
                    let c = &mut prod[..ob * m];
                    gemm::sgemm(a, bm, c, m, 1.0, 0.0, None, gemm_scratch)?;
                    for t in 0..taps {
                        scatter_nchw(p, q0, m, t, c, taps * m, t * m, out_g);
                    }
                    continue;
                }
                for o0 in (0..ocg).step_by(ob) {
                    let n = ob.min(ocg - o0);
                    let planes = &mut out_g[o0 * opix..(o0 + n) * opix];
                    for t in 0..taps {
                        // A: the tap's filter, [n, Cg], A(o, i) = w(g, i, o0 + o, t).
                        let a = MatRef::new(&wg[o0 * taps + t..], n, cg, taps, ocg * taps)?;
                        let c = &mut prod[..n * m];
                        gemm::sgemm(a, bm, c, m, 1.0, 0.0, None, gemm_scratch)?;
                        scatter_nchw(p, q0, m, t, c, m, 0, planes);
                    }
                }
            }
        }
        clamp(out_b, range);
    }
    Ok(())
}

/// Adds tap `t`'s rows of a product into the output planes it reaches: plane `o` (of
/// `planes`, whole `OH·OW` planes) gets row `o·pitch + off` of `prod` (input pixels
/// `q0 .. q0 + m`, one float each).
#[allow(clippy::too_many_arguments)]
fn scatter_nchw(
    p: &ConvTranspose2d,
    q0: usize,
    m: usize,
    t: usize,
    prod: &[f32],
    pitch: usize,
    off: usize,
    planes: &mut [f32],
) {
    let opix = p.out_h * p.out_w;
    runs(p, q0, m, t / p.kw, t % p.kw, |q, oy, ox, len| {
        for (o, plane) in planes.chunks_exact_mut(opix).enumerate() {
            let row = &prod[o * pitch + off + q..o * pitch + off + q + len];
            add_strided(
                &mut plane[oy * p.out_w + ox..(oy + 1) * p.out_w],
                p.stride_w,
                row,
            );
        }
    });
}

/// NHWC: `out = clamp(conv_transpose(x, w) + bias)` for `x` `[N, H, W, C]`, filter `w`
/// `[OC, KH, KW, C/groups]`, `out` `[N, OH, OW, OC]`, `bias` `[OC]`. `scratch` must hold
/// [`scratch_f32_nhwc`] floats.
pub fn conv_transpose2d_nhwc(
    p: &ConvTranspose2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = p.check_call(x, w, bias, out, scratch.len(), true)?;
    if nout == 0 {
        return Ok(());
    }
    if phases::scratch_f32_nhwc(p).is_some() {
        return phases::conv_transpose2d_nhwc(p, x, w, bias, &mut out[..nout], range, scratch);
    }
    let (cg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
    let (ipix, opix, oc) = (p.in_h * p.in_w, p.out_h * p.out_w, p.out_c);
    let (all, ob) = match p.all_taps(true) {
        Some(n) => (true, n),
        None => (false, p.oblock()),
    };
    let chunk = p.chunk_for(ob);
    let (prod, rest) = scratch.split_at_mut(chunk * ob);
    let (filter, gemm_scratch) = rest.split_at_mut(if all { cg * ob } else { 0 });
    let out = &mut out[..nout];
    match bias {
        // Element by element: `copy_from_slice` of a few channels is a libc call per pixel.
        Some(bv) => out.chunks_exact_mut(oc).for_each(|px| {
            px.iter_mut().zip(bv).for_each(|(d, b)| *d = *b);
        }),
        None => out.fill(0.0),
    }
    if ipix == 0 {
        clamp(out, range);
        return Ok(());
    }
    for g in 0..p.groups {
        let wg = &w[g * ocg * taps * cg..];
        if all {
            // F (Cg × KH·KW·OCg): F[i, t·OCg + o] = w(g, i, o, t).
            for (i, frow) in filter.chunks_exact_mut(ob).enumerate() {
                for (t, ft) in frow.chunks_exact_mut(ocg).enumerate() {
                    for (o, f) in ft.iter_mut().enumerate() {
                        *f = wg[(o * taps + t) * cg + i];
                    }
                }
            }
        }
        for (b, out_b) in out.chunks_exact_mut(opix * oc).enumerate() {
            for q0 in (0..ipix).step_by(chunk) {
                let m = chunk.min(ipix - q0);
                // A: the chunk's pixels, [m, Cg], row stride C.
                let a = MatRef::new(&x[(b * ipix + q0) * p.in_c + g * cg..], m, cg, p.in_c, 1)?;
                if all {
                    let c = &mut prod[..m * ob];
                    gemm::sgemm(
                        a,
                        MatRef::row_major(filter, cg, ob)?,
                        c,
                        ob,
                        1.0,
                        0.0,
                        None,
                        gemm_scratch,
                    )?;
                    for t in 0..taps {
                        scatter_nhwc(p, q0, m, t, c, ob, t * ocg, ocg, out_b, g * ocg);
                    }
                    continue;
                }
                for o0 in (0..ocg).step_by(ob) {
                    let n = ob.min(ocg - o0);
                    for t in 0..taps {
                        // B: the tap's filter, [Cg, n], B(i, o) = w(g, i, o0 + o, t).
                        let bm = MatRef::new(&wg[(o0 * taps + t) * cg..], cg, n, 1, taps * cg)?;
                        let c = &mut prod[..m * n];
                        gemm::sgemm(a, bm, c, n, 1.0, 0.0, None, gemm_scratch)?;
                        scatter_nhwc(p, q0, m, t, c, n, 0, n, out_b, g * ocg + o0);
                    }
                }
            }
        }
    }
    clamp(out, range);
    Ok(())
}

/// Adds tap `t`'s part of a product (`prod` row `q` = input pixel `q0 + q`, `width` floats,
/// the tap's `n` channels from column `col`) into the output pixels it reaches, channels
/// `oc0 .. oc0 + n`.
#[allow(clippy::too_many_arguments)]
fn scatter_nhwc(
    p: &ConvTranspose2d,
    q0: usize,
    m: usize,
    t: usize,
    prod: &[f32],
    width: usize,
    col: usize,
    n: usize,
    out_b: &mut [f32],
    oc0: usize,
) {
    let oc = p.out_c;
    let step = p.stride_w * oc;
    runs(p, q0, m, t / p.kw, t % p.kw, |q, oy, ox, len| {
        let d = (oy * p.out_w + ox) * oc + oc0;
        let s = q * width + col;
        // The run's last pixel: every earlier one lies below it in both slices.
        let (dl, sl) = (d + (len - 1) * step, s + (len - 1) * width);
        if len == 0 || dl + n > out_b.len() || sl + n > prod.len() {
            return;
        }
        // SAFETY: pixel j < len reads prod[s + j·width ..][..n] and updates
        // out_b[d + j·step ..][..n], both inside their slices (checked for the last j above);
        // the two slices are distinct borrows, so they do not overlap.
        unsafe {
            let (dp, sp) = (out_b.as_mut_ptr().add(d), prod.as_ptr().add(s));
            match n {
                4 => add_pixels::<1>(dp, sp, len, step, width),
                8 => add_pixels::<2>(dp, sp, len, step, width),
                12 => add_pixels::<3>(dp, sp, len, step, width),
                16 => add_pixels::<4>(dp, sp, len, step, width),
                _ => {
                    for j in 0..len {
                        add_into(dp.add(j * step), sp.add(j * width), n);
                    }
                }
            }
        }
    });
}

/// `len` pixels of `4·V` channels: `dst[j·step ..][..4V] += src[j·width ..][..4V]` (the
/// channel count known at compile time, so each pixel is `V` vector adds).
///
/// # Safety
/// As [`add_into`] for every pixel `j < len`.
#[inline(always)]
unsafe fn add_pixels<const V: usize>(
    dst: *mut f32,
    src: *const f32,
    len: usize,
    step: usize,
    width: usize,
) {
    let (mut d, mut s) = (dst, src);
    for _ in 0..len {
        for v in 0..V {
            // SAFETY: the caller's pixel holds 4·V floats at both pointers.
            unsafe {
                let a = d.add(4 * v).cast::<[f32; 4]>().read_unaligned();
                let b = s.add(4 * v).cast::<[f32; 4]>().read_unaligned();
                let c = [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]];
                d.add(4 * v).cast::<[f32; 4]>().write_unaligned(c);
            }
        }
        // SAFETY: wrapping steps past the last pixel are never dereferenced.
        (d, s) = (d.wrapping_add(step), s.wrapping_add(width));
    }
}

/// `dst[k] += src[k]` for `k < n`, four floats at a time (which LLVM makes one vector add);
/// a remainder of 1–3 is the last four floats, summed from the original values before the
/// overlapping vectors are stored (so each element gets its sum once).
///
/// # Safety
/// `dst` valid for `n` reads and writes, `src` for `n` reads, not overlapping.
#[inline(always)]
unsafe fn add_into(dst: *mut f32, src: *const f32, n: usize) {
    #[inline(always)]
    unsafe fn sum4(d: *const f32, s: *const f32) -> [f32; 4] {
        // SAFETY: the caller's four floats at both pointers.
        let (a, b) = unsafe {
            (
                d.cast::<[f32; 4]>().read_unaligned(),
                s.cast::<[f32; 4]>().read_unaligned(),
            )
        };
        [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
    }
    if n < 4 {
        for k in 0..n {
            // SAFETY: k < n.
            unsafe { *dst.add(k) += *src.add(k) };
        }
        return;
    }
    // SAFETY: (whole block) every access is a group of four floats inside the first n.
    unsafe {
        let tail = sum4(dst.add(n - 4), src.add(n - 4));
        let mut k = 0;
        while k + 4 <= n {
            let v = sum4(dst.add(k), src.add(k));
            dst.add(k).cast::<[f32; 4]>().write_unaligned(v);
            k += 4;
        }
        if k < n {
            dst.add(n - 4).cast::<[f32; 4]>().write_unaligned(tail);
        }
    }
}

/// `dst[j·stride] += src[j]` for every `j < src.len()` (the caller's run stays in `dst`).
fn add_strided(dst: &mut [f32], stride: usize, src: &[f32]) {
    if stride == 1 {
        for (d, s) in dst.iter_mut().zip(src) {
            *d += *s;
        }
    } else if stride == 2 {
        add_even(dst, src);
    } else {
        for (d, s) in dst.iter_mut().step_by(stride).zip(src) {
            *d += *s;
        }
    }
}

/// `dst[2j] += src[j]` for `j < src.len()` (the odd elements are kept): Neon de-interleaving
/// loads and stores four pairs at a time on AArch64.
fn add_even(dst: &mut [f32], src: &[f32]) {
    let n = src.len().min(dst.len().div_ceil(2));
    let mut j = 0;
    #[cfg(target_arch = "aarch64")]
    {
        use core::arch::aarch64::{vaddq_f32, vld1q_f32, vld2q_f32, vst2q_f32};
        // Whole groups of four pairs inside dst.
        while j + 4 <= n && 2 * j + 8 <= dst.len() {
            // SAFETY: reads src[j..j + 4] and dst[2j..2j + 8], writes dst[2j..2j + 8], all
            // inside the slices (checked just above); Neon is in the AArch64 baseline.
            unsafe {
                let mut pair = vld2q_f32(dst.as_ptr().add(2 * j));
                pair.0 = vaddq_f32(pair.0, vld1q_f32(src.as_ptr().add(j)));
                vst2q_f32(dst.as_mut_ptr().add(2 * j), pair);
            }
            j += 4;
        }
    }
    while j < n {
        dst[2 * j] += src[j];
        j += 1;
    }
}
