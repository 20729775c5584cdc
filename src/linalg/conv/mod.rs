//! 2-D convolution on the GEMM micro-kernels, for the two layouts programs use:
//!
//! - [`nhwc`]: activations `[N, H, W, C]`, dense/grouped filters `[OC, KH, KW, C/groups]`
//!   (XNNPACK's `Conv2d` node);
//! - [`nchw`]: activations `[N, C, H, W]`, filters `[OC, C/groups, KH, KW]` (ATen's
//!   `convolution`, the portable kernel);
//! - [`transposed`]: transposed convolutions in both layouts (ATen's `convolution` with
//!   `transposed = true`, XNNPACK's `ConvTranspose2d` node): NHWC as one ordinary convolution
//!   per stride phase, NCHW (and NHWC filters too large to re-lay) as per-tap products and a
//!   scatter-add;
//! - [`depthwise`]: `groups = C` with a channel multiplier, in both layouts (XNNPACK's
//!   `DepthwiseConv2d` with filters `[1, KH, KW, OC]`, ATen's with `[OC, 1, KH, KW]`), as
//!   vector loops over channels (NHWC) or output columns (NCHW), not as a GEMM.
//!
//! Dense and grouped convolutions are matrix products per group: NHWC multiplies the patch
//! matrix (`[output pixels, KH·KW·C/groups]`, gathered chunk by chunk into scratch, "im2col";
//! a 1×1, stride-1, unpadded convolution reads the input itself) by the transposed filter;
//! NCHW multiplies the filter (`[OC/groups, C/groups·KH·KW]`) by the column matrix
//! (`[C/groups·KH·KW, output pixels]`, also gathered in chunks, or the input itself for 1×1).
//! Bias goes through the GEMM's bias, an output clamp (ReLU, ReLU6, XNNPACK's
//! `output_min/max`) is applied to each chunk while it is still in cache.
//!
//! Every function is safe and panic-free for any argument: lengths are checked against the
//! geometry up front ([`Conv2d::check`]), input taps outside the image read as zero (padding),
//! and an inconsistent geometry is a [`KernelError::Shape`].

pub mod depthwise;
pub mod nchw;
pub mod nhwc;
pub mod transposed;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod transposed_tests;

use crate::error::KernelError;

/// The geometry of one 2-D convolution (the same for both layouts).
///
/// Output pixel `(oy, ox)` reads input rows `oy·stride_h + ky·dil_h − pad_top` and columns
/// `ox·stride_w + kx·dil_w − pad_left` for `ky < kh`, `kx < kw`; taps outside the input are
/// zero. Bottom and right padding are implied by `out_h`, `out_w`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conv2d {
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

pub(crate) fn shape_err(detail: &'static str) -> KernelError {
    KernelError::Shape { arg: 0, detail }
}

impl Conv2d {
    /// Input channels per group.
    pub fn icg(&self) -> usize {
        self.in_c / self.groups.max(1)
    }
    /// Output channels per group.
    pub fn ocg(&self) -> usize {
        self.out_c / self.groups.max(1)
    }
    /// Depth of one group's product: `KH·KW·C/groups` (saturating: a geometry that overflows
    /// is refused by [`Conv2d::check`]).
    pub fn depth(&self) -> usize {
        self.kh.saturating_mul(self.kw).saturating_mul(self.icg())
    }
    /// Output pixels of one image (saturating, as [`Conv2d::depth`]).
    pub fn pixels(&self) -> usize {
        self.out_h.saturating_mul(self.out_w)
    }
    /// A depthwise convolution: one input channel per group (`groups = C`), `OC = C·m`.
    pub fn is_depthwise(&self) -> bool {
        self.groups == self.in_c && self.groups > 0
    }

    /// Checks the geometry (non-zero strides, dilations and kernel, channels divisible by
    /// `groups`, no overflow in any size) and returns `(input, filter, output)` element counts.
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
            return Err(shape_err("conv: invalid geometry"));
        }
        let prod = |v: &[usize]| {
            v.iter()
                .try_fold(1usize, |a, &b| a.checked_mul(b))
                .ok_or(shape_err("conv: size overflows"))
        };
        let input = prod(&[self.batch, self.in_h, self.in_w, self.in_c])?;
        let filter = prod(&[self.out_c, self.kh, self.kw, self.icg()])?;
        let output = prod(&[self.batch, self.out_h, self.out_w, self.out_c])?;
        // The GEMM sizes on their own (a zero factor above would hide their overflow).
        prod(&[self.kh, self.kw, self.icg(), self.out_c.max(1)])?;
        prod(&[self.batch, self.out_h, self.out_w])?;
        // Largest tap coordinate computed: (out − 1)·stride + (k − 1)·dil.
        for (o, s, k, d) in [
            (self.out_h, self.stride_h, self.kh, self.dil_h),
            (self.out_w, self.stride_w, self.kw, self.dil_w),
        ] {
            o.saturating_sub(1)
                .checked_mul(s)
                .and_then(|a| (k - 1).checked_mul(d).and_then(|b| a.checked_add(b)))
                .ok_or(shape_err("conv: size overflows"))?;
        }
        Ok((input, filter, output))
    }

    /// Checks the geometry and the operands of one call (input, filter, bias, output long
    /// enough; scratch, if any, at least `scratch_needed` floats) and returns the output length.
    pub(crate) fn check_call(
        &self,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        out: &[f32],
        scratch: Option<(usize, usize)>,
    ) -> Result<usize, KernelError> {
        let (_, nw, _) = self.check()?;
        if w.len() < nw {
            return Err(shape_err("conv: a slice is shorter than the geometry"));
        }
        self.check_io(x, bias, out, scratch)
    }

    /// [`Conv2d::check_call`] without the filter (given in another form, e.g. packed ahead).
    pub(crate) fn check_io(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        out: &[f32],
        scratch: Option<(usize, usize)>,
    ) -> Result<usize, KernelError> {
        let (nin, _, nout) = self.check()?;
        if x.len() < nin || out.len() < nout || bias.is_some_and(|b| b.len() < self.out_c) {
            return Err(shape_err("conv: a slice is shorter than the geometry"));
        }
        if let Some((got, needed)) = scratch {
            if got < needed {
                return Err(KernelError::Scratch {
                    needed: needed.saturating_mul(4),
                    got: got.saturating_mul(4),
                });
            }
        }
        Ok(nout)
    }

    /// Input row read by output row `oy` at kernel row `ky` (`None`: padding).
    #[inline]
    pub(crate) fn in_row(&self, oy: usize, ky: usize) -> Option<usize> {
        (oy * self.stride_h + ky * self.dil_h)
            .checked_sub(self.pad_top)
            .filter(|&y| y < self.in_h)
    }

    /// Input column read by output column `ox` at kernel column `kx` (`None`: padding).
    #[inline]
    pub(crate) fn in_col(&self, ox: usize, kx: usize) -> Option<usize> {
        (ox * self.stride_w + kx * self.dil_w)
            .checked_sub(self.pad_left)
            .filter(|&x| x < self.in_w)
    }

    /// Output columns `ox` whose tap `kx` lies inside the input: `lo..hi` (may be empty).
    pub(crate) fn valid_cols(&self, kx: usize) -> (usize, usize) {
        valid_range(
            self.out_w,
            self.stride_w,
            kx * self.dil_w,
            self.pad_left,
            self.in_w,
        )
    }

    /// A 1×1, stride-1, unpadded convolution: the input is already the product's operand.
    pub(crate) fn is_pointwise(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.stride_h == 1
            && self.stride_w == 1
            && self.pad_top == 0
            && self.pad_left == 0
            && self.out_h == self.in_h
            && self.out_w == self.in_w
    }
}

/// `o` in `lo..hi` exactly when `o·stride + off − pad` lies in `0..len`, for `o < n`.
pub(crate) fn valid_range(
    n: usize,
    stride: usize,
    off: usize,
    pad: usize,
    len: usize,
) -> (usize, usize) {
    // o·stride + off ≥ pad  ⇔  o ≥ ceil((pad − off) / stride)
    let lo = pad.saturating_sub(off).div_ceil(stride).min(n);
    // o·stride + off < pad + len  ⇔  o < ceil((pad + len − off) / stride)
    let hi = (pad + len).saturating_sub(off).div_ceil(stride).min(n);
    (lo, hi.max(lo))
}

/// Clamps every element of `out` into `[lo, hi]` (`v.max(lo).min(hi)`, so NaN becomes `lo`
/// as in XNNPACK's min/max clamp); no-op for `None` or an unbounded range.
pub fn clamp(out: &mut [f32], range: Option<(f32, f32)>) {
    if let Some((lo, hi)) = range {
        if lo == f32::NEG_INFINITY && hi == f32::INFINITY {
            return;
        }
        for v in out.iter_mut() {
            *v = v.max(lo).min(hi);
        }
    }
}
