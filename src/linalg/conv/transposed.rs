//! Transposed ("fractionally strided") 2-D convolution, ATen's `convolution(transposed=True)`
//! and XNNPACK's `ConvTranspose2d` node, as matrix products per kernel tap and a scatter-add:
//!
//! ```text
//! out[b, oy, ox, g·OCg + o] = bias[g·OCg + o]
//!     + Σ_{iy, ix, ky, kx, i : oy = iy·sh + ky·dh − pad_top, ox = ix·sw + kx·dw − pad_left}
//!       x[b, iy, ix, g·Cg + i] · w(g, i, o, ky, kx)
//! ```
//!
//! For each tap `t = (ky, kx)` every input pixel sends one vector of `OCg` values to one
//! output pixel, so per image, group and chunk of input pixels the tap's contributions are one
//! product `x_chunk (pixels × Cg) · w_t (Cg × OCg)` (or its transpose in NCHW), computed into
//! scratch by the GEMM micro-kernels and then added into the output pixels the tap reaches
//! (contiguous channel vectors in NHWC, strided output rows in NCHW). The output is first set
//! to the bias; pixels no tap reaches keep it. The clamp (XNNPACK's `output_min/max`) is
//! applied once at the end.
//!
//! Filter layouts: NCHW (ATen) `[C, OC/groups, KH, KW]`, `w(g, i, o, t) =
//! w[((g·Cg + i)·OCg + o)·KH·KW + t]`; NHWC (XNNPACK) `[OC, KH, KW, C/groups]`, `w(g, i, o, t) =
//! w[((g·OCg + o)·KH·KW + t)·Cg + i]`.
//!
//! Every function is safe and panic-free for any argument: lengths are checked against the
//! geometry up front ([`ConvTranspose2d::check_call`]), and contributions that fall outside
//! the output (the padding crops them) are dropped.

use super::{clamp, shape_err};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};

/// Floats of per-tap product (input pixels × output channels of a group) per chunk.
pub const TAP_F32: usize = 32 * 1024;

/// The geometry of one transposed 2-D convolution (the same for both layouts).
///
/// Input pixel `(iy, ix)` at tap `(ky, kx)` adds into output pixel
/// `(iy·stride_h + ky·dil_h − pad_top, ix·stride_w + kx·dil_w − pad_left)` when that lies
/// inside `out_h × out_w`. The output size is given: ATen and XNNPACK make it
/// `(in − 1)·stride − pad_begin − pad_end + dil·(k − 1) + 1 + output_padding`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvTranspose2d {
    pub batch: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub in_c: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub out_c: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub dil_h: usize,
    pub dil_w: usize,
    pub pad_top: usize,
    pub pad_left: usize,
    pub groups: usize,
}

/// The output length of one dimension: `(n − 1)·stride − pad_total + dil·(k − 1) + 1 + adj`
/// (`None` when it is not positive or overflows).
pub fn out_len(
    n: usize,
    k: usize,
    stride: usize,
    dil: usize,
    pad_total: usize,
    adj: usize,
) -> Option<usize> {
    n.checked_sub(1)?
        .checked_mul(stride)?
        .checked_add(dil.checked_mul(k.checked_sub(1)?)?)?
        .checked_add(1)?
        .checked_add(adj)?
        .checked_sub(pad_total)
        .filter(|&o| o > 0)
}

impl ConvTranspose2d {
    /// Input channels per group.
    pub fn icg(&self) -> usize {
        self.in_c / self.groups.max(1)
    }
    /// Output channels per group.
    pub fn ocg(&self) -> usize {
        self.out_c / self.groups.max(1)
    }
    /// Kernel taps.
    fn taps(&self) -> usize {
        self.kh.saturating_mul(self.kw)
    }

    /// Checks the geometry (non-zero strides, dilations and kernel, channels divisible by
    /// `groups`, no overflow in any size or coordinate) and returns `(input, filter, output)`
    /// element counts.
    pub fn check(&self) -> Result<(usize, usize, usize), KernelError> {
        if self.groups == 0
            || !self.in_c.is_multiple_of(self.groups)
            || !self.out_c.is_multiple_of(self.groups)
            || self.stride_h == 0
            || self.stride_w == 0
            || self.dil_h == 0
            || self.dil_w == 0
            || self.kh == 0
            || self.kw == 0
        {
            return Err(shape_err("transposed conv: invalid geometry"));
        }
        let prod = |v: &[usize]| {
            v.iter()
                .try_fold(1usize, |a, &b| a.checked_mul(b))
                .ok_or(shape_err("transposed conv: size overflows"))
        };
        let input = prod(&[self.batch, self.in_h, self.in_w, self.in_c])?;
        let filter = prod(&[self.in_c, self.ocg(), self.kh, self.kw])?;
        let output = prod(&[self.batch, self.out_h, self.out_w, self.out_c])?;
        prod(&[self.in_h, self.in_w, self.out_c.max(1), self.kh, self.kw])?;
        prod(&[self.out_h, self.out_w, self.in_c.max(1)])?;
        // Largest output coordinate computed: (in − 1)·stride + (k − 1)·dil (+ pad added back).
        for (n, s, k, d, pad, o) in [
            (
                self.in_h,
                self.stride_h,
                self.kh,
                self.dil_h,
                self.pad_top,
                self.out_h,
            ),
            (
                self.in_w,
                self.stride_w,
                self.kw,
                self.dil_w,
                self.pad_left,
                self.out_w,
            ),
        ] {
            n.saturating_sub(1)
                .checked_mul(s)
                .and_then(|a| (k - 1).checked_mul(d).and_then(|b| a.checked_add(b)))
                .and_then(|a| a.checked_add(pad.checked_add(o)?))
                .ok_or(shape_err("transposed conv: size overflows"))?;
        }
        Ok((input, filter, output))
    }

    /// Checks the geometry and the operands of one call and returns the output length.
    pub(crate) fn check_call(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        out: &[f32],
        scratch: usize,
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
        let needed = scratch_f32(self);
        if scratch < needed {
            return Err(KernelError::Scratch {
                needed: needed.saturating_mul(4),
                got: scratch.saturating_mul(4),
            });
        }
        Ok(nout)
    }

    /// Output channels per block (all of a group's unless there are more than [`TAP_F32`]).
    fn oblock(&self) -> usize {
        self.ocg().clamp(1, TAP_F32)
    }

    /// Input pixels per chunk (the per-tap product of a chunk and a channel block fits
    /// [`TAP_F32`] floats).
    fn chunk(&self) -> usize {
        let pix = self.in_h.saturating_mul(self.in_w).max(1);
        (TAP_F32 / self.oblock()).clamp(1, pix)
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

/// Scratch floats the transposed convolutions need for `p`, on any CPU (0 for a geometry
/// [`ConvTranspose2d::check`] refuses).
pub fn scratch_f32(p: &ConvTranspose2d) -> usize {
    if p.check().is_err() {
        return 0;
    }
    p.chunk()
        .saturating_mul(p.oblock())
        .saturating_add(GEMM_SCRATCH_F32)
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
/// [`scratch_f32`] floats.
pub fn conv_transpose2d_nchw(
    p: &ConvTranspose2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = p.check_call(x, w, bias, out, scratch.len())?;
    if nout == 0 {
        return Ok(());
    }
    let (cg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
    let (ipix, opix) = (p.in_h * p.in_w, p.out_h * p.out_w);
    let (chunk, ob) = (p.chunk(), p.oblock());
    let (tap, gemm_scratch) = scratch.split_at_mut(chunk * ob);
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
                for o0 in (0..ocg).step_by(ob) {
                    let n = ob.min(ocg - o0);
                    let planes = &mut out_g[o0 * opix..(o0 + n) * opix];
                    for t in 0..taps {
                        let (ky, kx) = (t / p.kw, t % p.kw);
                        // A: the tap's filter, [n, Cg], A(o, i) = w(g, i, o0 + o, t).
                        let a = MatRef::new(&wg[o0 * taps + t..], n, cg, taps, ocg * taps)?;
                        let c = &mut tap[..n * m];
                        gemm::sgemm(a, bm, c, m, 1.0, 0.0, None, gemm_scratch)?;
                        runs(p, q0, m, ky, kx, |q, oy, ox, len| {
                            for (o, plane) in planes.chunks_exact_mut(opix).enumerate() {
                                let src = &c[o * m + q..o * m + q + len];
                                let row = &mut plane[oy * p.out_w..(oy + 1) * p.out_w];
                                add_strided(&mut row[ox..], p.stride_w, src);
                            }
                        });
                    }
                }
            }
        }
        clamp(out_b, range);
    }
    Ok(())
}

/// NHWC: `out = clamp(conv_transpose(x, w) + bias)` for `x` `[N, H, W, C]`, filter `w`
/// `[OC, KH, KW, C/groups]`, `out` `[N, OH, OW, OC]`, `bias` `[OC]`. `scratch` must hold
/// [`scratch_f32`] floats.
pub fn conv_transpose2d_nhwc(
    p: &ConvTranspose2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let nout = p.check_call(x, w, bias, out, scratch.len())?;
    if nout == 0 {
        return Ok(());
    }
    let (cg, ocg, taps) = (p.icg(), p.ocg(), p.taps());
    let (ipix, opix, oc) = (p.in_h * p.in_w, p.out_h * p.out_w, p.out_c);
    let (chunk, ob) = (p.chunk(), p.oblock());
    let (tap, gemm_scratch) = scratch.split_at_mut(chunk * ob);
    let out = &mut out[..nout];
    for (b, out_b) in out.chunks_exact_mut(opix * oc).enumerate() {
        for px in out_b.chunks_exact_mut(oc) {
            match bias {
                Some(bv) => px.copy_from_slice(&bv[..oc]),
                None => px.fill(0.0),
            }
        }
        if ipix == 0 {
            continue;
        }
        for g in 0..p.groups {
            let wg = &w[g * ocg * taps * cg..];
            for q0 in (0..ipix).step_by(chunk) {
                let m = chunk.min(ipix - q0);
                // A: the chunk's pixels, [m, Cg], row stride C.
                let a = MatRef::new(&x[(b * ipix + q0) * p.in_c + g * cg..], m, cg, p.in_c, 1)?;
                for o0 in (0..ocg).step_by(ob) {
                    let n = ob.min(ocg - o0);
                    for t in 0..taps {
                        let (ky, kx) = (t / p.kw, t % p.kw);
                        // B: the tap's filter, [Cg, n], B(i, o) = w(g, i, o0 + o, t).
                        let bm = MatRef::new(&wg[(o0 * taps + t) * cg..], cg, n, 1, taps * cg)?;
                        let c = &mut tap[..m * n];
                        gemm::sgemm(a, bm, c, n, 1.0, 0.0, None, gemm_scratch)?;
                        runs(p, q0, m, ky, kx, |q, oy, ox, len| {
                            for j in 0..len {
                                let d0 = (oy * p.out_w + ox + j * p.stride_w) * oc + g * ocg + o0;
                                let src = &c[(q + j) * n..(q + j + 1) * n];
                                for (d, s) in out_b[d0..d0 + n].iter_mut().zip(src) {
                                    *d += *s;
                                }
                            }
                        });
                    }
                }
            }
        }
        clamp(out_b, range);
    }
    Ok(())
}

/// `dst[j·stride] += src[j]` for every `j < src.len()` (the caller's run stays in `dst`).
fn add_strided(dst: &mut [f32], stride: usize, src: &[f32]) {
    if stride == 1 {
        for (d, s) in dst.iter_mut().zip(src) {
            *d += *s;
        }
    } else {
        for (d, s) in dst.iter_mut().step_by(stride).zip(src) {
            *d += *s;
        }
    }
}
