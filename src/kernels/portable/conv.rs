//! Convolution: `aten::convolution` (1-D and 2-D NCHW, stride, zero padding, dilation, groups)
//! on `linalg::conv`: the NCHW layout is kept (no transposition to NHWC); dense and grouped
//! convolutions are filter × column-matrix GEMMs per image and group (the column matrix gathered
//! in chunks of kernel scratch, or the input itself for 1×1), depthwise ones (groups = input
//! channels) run the depthwise row loops; transposed ones (`transposed = true`, weight
//! `[C, OC/groups, KH, KW]`, `output_padding`) are per-tap products scattered into the output
//! (`linalg::conv::transposed`). A 1-D convolution is the 2-D one with height 1.
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{
    f32_of, int_at_least, make_shape, need_dtype, param, shape_err, value_err, window_out, Ctx, Res,
};
use super::matmul::GEMM_SCRATCH;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::conv::transposed::{self, ConvTranspose2d};
use crate::linalg::conv::{depthwise, nchw, Conv2d};
use crate::tensor::Shape;

/// Bytes of scratch: the NCHW convolution's bound (`linalg::conv::nchw::scratch_f32` never
/// exceeds `IM2COL_F32 + GEMM_SCRATCH_F32` floats, the transposed one's
/// `TAP_F32 + GEMM_SCRATCH_F32`, less) plus f32 alignment.
const CONV_SCRATCH: usize = GEMM_SCRATCH + nchw::IM2COL_F32 * 4;
const _: () = assert!(transposed::TAP_F32 <= nchw::IM2COL_F32);
const _: () = assert!(depthwise::NCHW_PLANE_F32 <= nchw::IM2COL_F32);

/// The convolution kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[KernelDef::with_scratch(
    "aten::convolution.out",
    convolution_out,
    CONV_SCRATCH,
)];

/// `aten::convolution.out(input, weight, bias?, stride, padding, dilation, transposed,
/// output_padding, groups, out)`, f32; transposed or not.
fn convolution_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(11)?;
    let x = ctx.input(0)?;
    let wt = ctx.input(1)?;
    let bias = ctx.opt_input(2)?;
    let stride = ctx.int_list(3)?;
    let padding = ctx.int_list(4)?;
    let dilation = ctx.int_list(5)?;
    let transposed = ctx.bool(6)?;
    let output_padding = ctx.int_list(7)?;
    let groups = int_at_least(ctx.int(8)?, 1, 8, "convolution: groups must be >= 1")?;
    f32_of(&x)?;
    need_dtype(wt.dtype(), DType::F32, 1)?;
    if let Some(b) = &bias {
        need_dtype(b.dtype(), DType::F32, 2)?;
    }
    need_dtype(ctx.out_dtype(9)?, DType::F32, 9)?;
    let r = x.rank();
    if r != 3 && r != 4 {
        return Err(shape_err(0, "convolution: input must be 3-D or 4-D"));
    }
    if wt.rank() != r {
        return Err(shape_err(
            1,
            "convolution: weight rank must equal input rank",
        ));
    }
    let nd = r - 2;
    let (n, cin) = (x.dims()[0], x.dims()[1]);
    // Weight [OC, C/groups, K...], transposed [C, OC/groups, K...].
    let cout = if transposed {
        if wt.dims()[0] != cin {
            return Err(shape_err(
                1,
                "convolution: transposed weight.size(0) must equal input channels",
            ));
        }
        let cout = wt.dims()[1]
            .checked_mul(groups)
            .ok_or(shape_err(1, "convolution: out channels overflow"))?;
        if cin % groups != 0 {
            return Err(shape_err(
                1,
                "convolution: input channels must be divisible by groups",
            ));
        }
        cout
    } else {
        let (cout, cin_g) = (wt.dims()[0], wt.dims()[1]);
        if cout % groups != 0 {
            return Err(shape_err(
                1,
                "convolution: out channels must be divisible by groups",
            ));
        }
        if cin_g.checked_mul(groups) != Some(cin) {
            return Err(shape_err(
                1,
                "convolution: weight.size(1) * groups must equal input channels",
            ));
        }
        cout
    };
    if let Some(b) = &bias {
        if b.rank() != 1 || b.dims()[0] != cout {
            return Err(shape_err(2, "convolution: bias must be [out_channels]"));
        }
    }
    // Spatial parameters; 1-D is treated as 2-D with a unit height: (size, kernel, stride,
    // padding, dilation, output padding) per axis.
    let sp = |list: &[i64], i: usize, arg: usize, min: i64, def: usize| {
        param(list, i, nd, arg, min).map(|v| v.unwrap_or(def))
    };
    let axis = |i: usize| -> Result<[usize; 6], KernelError> {
        Ok([
            x.dims()[2 + i],
            wt.dims()[2 + i],
            sp(&stride, i, 3, 1, 1)?,
            sp(&padding, i, 4, 0, 0)?,
            sp(&dilation, i, 5, 1, 1)?,
            if transposed {
                sp(&output_padding, i, 7, 0, 0)?
            } else {
                0
            },
        ])
    };
    let [h, kh, sh, ph, dh, ah] = if nd == 2 {
        axis(0)?
    } else {
        [1, 1, 1, 0, 1, 0]
    };
    let [w, kw, sw, pw, dw, aw] = axis(nd - 1)?;
    if kh == 0 || kw == 0 {
        return Err(shape_err(1, "convolution: kernel size must be positive"));
    }
    let xd = x.as_slice::<f32>()?;
    let wd = wt.as_slice::<f32>()?;
    let bd = match &bias {
        Some(b) => Some(b.as_slice::<f32>()?),
        None => None,
    };
    let (oh, ow) = if transposed {
        // ATen requires output_padding < stride or < dilation.
        if (ah >= sh && ah >= dh) || (aw >= sw && aw >= dw) {
            return Err(value_err(
                7,
                "convolution: output_padding must be smaller than stride or dilation",
            ));
        }
        let bad_out = shape_err(0, "convolution: transposed output size is not positive");
        (
            transposed::out_len(h, kh, sh, dh, 2 * ph, ah).ok_or(bad_out)?,
            transposed::out_len(w, kw, sw, dw, 2 * pw, aw).ok_or(bad_out)?,
        )
    } else {
        let bad_out = shape_err(0, "convolution: input too small for the kernel");
        (
            window_out(h, kh, ph, sh, dh, false).ok_or(bad_out)?,
            window_out(w, kw, pw, sw, dw, false).ok_or(bad_out)?,
        )
    };
    let oshape = spatial_shape(nd, n, cout, oh, ow)?;
    let geometry = Conv2d {
        batch: n,
        in_h: h,
        in_w: w,
        in_c: cin,
        out_h: oh,
        out_w: ow,
        out_c: cout,
        kh,
        kw,
        stride_h: sh,
        stride_w: sw,
        dil_h: dh,
        dil_w: dw,
        pad_top: ph,
        pad_left: pw,
        groups,
    };
    if transposed {
        let geometry = ConvTranspose2d::from(geometry);
        let mut out = ctx.output(9, &oshape)?;
        let od = out.as_mut_slice::<f32>()?;
        let scratch = ctx.scratch_f32(transposed::scratch_f32_nchw(&geometry))?;
        return transposed::conv_transpose2d_nchw(&geometry, xd, wd, bd, od, None, scratch);
    }
    let mut out = ctx.output(9, &oshape)?;
    let od = out.as_mut_slice::<f32>()?;
    if geometry.is_depthwise() {
        // One input channel per group: weight [OC, 1, KH, KW].
        let scratch = ctx.scratch_f32(depthwise::nchw_scratch_f32(&geometry))?;
        return depthwise::depthwise_nchw(&geometry, xd, wd, bd, od, None, scratch);
    }
    let scratch = ctx.scratch_f32(nchw::scratch_f32(&geometry))?;
    nchw::conv2d(&geometry, xd, wd, bd, od, None, scratch)
}

/// The output shape `[N, OC, OH, OW]` (2-D) or `[N, OC, OW]` (1-D).
fn spatial_shape(
    nd: usize,
    n: usize,
    c: usize,
    oh: usize,
    ow: usize,
) -> Result<Shape, KernelError> {
    if nd == 2 {
        make_shape(&[n, c, oh, ow], 9)
    } else {
        make_shape(&[n, c, ow], 9)
    }
}

#[cfg(test)]
#[path = "conv_tests.rs"]
mod tests;
