//! The geometry of a transposed 2-D convolution (both layouts share it), its checks, and the
//! working-set bounds both of its paths size their chunks by.

use crate::error::KernelError;
use crate::linalg::conv::{shape_err, Conv2d};

/// Floats of product (input pixels × taps and output channels of a group) per chunk.
pub const TAP_F32: usize = 32 * 1024;
/// Fewest input pixels per chunk of the all-taps product.
pub const MIN_CHUNK: usize = 8;
/// Largest NHWC filter (floats per group) re-laid for the all-taps product.
pub const RELAYOUT_F32: usize = 64 * 1024;

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

impl From<Conv2d> for ConvTranspose2d {
    /// The same fields read the transposed way (see the type's documentation): callers that
    /// gather sizes and window parameters for both kinds build a [`Conv2d`] and convert it.
    fn from(c: Conv2d) -> ConvTranspose2d {
        let Conv2d {
            batch,
            in_h,
            in_w,
            in_c,
            out_h,
            out_w,
            out_c,
            kh,
            kw,
            stride_h,
            stride_w,
            dil_h,
            dil_w,
            pad_top,
            pad_left,
            groups,
        } = c;
        ConvTranspose2d {
            batch,
            in_h,
            in_w,
            in_c,
            out_h,
            out_w,
            out_c,
            kh,
            kw,
            stride_h,
            stride_w,
            dil_h,
            dil_w,
            pad_top,
            pad_left,
            groups,
        }
    }
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
    pub(crate) fn taps(&self) -> usize {
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
}
