//! `quantized_decomposed` kernels: the quantize / dequantize / choose-qparams operators that
//! pt2e-quantized programs keep outside delegates, with ExecuTorch's arithmetic:
//!
//! - quantize: `q = clamp(zp + nearbyint(x · (1 / scale)), qmin, qmax)` (the reciprocal and
//!   the product in f32, ties to even);
//! - dequantize: `x = (q - zp) · scale` (the difference in integers, the product in f32);
//! - choose_qparams: the range widened to contain 0, `scale = (max - min) / (qmax - qmin)` in
//!   f64 (0.1 when it is 0 or its reciprocal overflows, raised to 6.1e-5 when smaller with the
//!   range stretched to match), the zero point from the end with the smaller error, nudged to
//!   an integer in `[qmin, qmax]`.
//!
//! Layout contract: contiguous tensors. Quantized data may be any integer dtype (int8 and
//! uint8 have typed paths); fp32 on the float side.

use super::common::{need_dtype, opt_dtype, value_err, Ctx, Res};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::quant::dynamic::round_ties_even as nearbyint;
use crate::tensor::{TensorMut, TensorRef};

/// The quantized kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new(
        "quantized_decomposed::quantize_per_tensor.out",
        quantize_per_tensor_out,
    ),
    KernelDef::new(
        "quantized_decomposed::quantize_per_tensor.Tensor_out",
        quantize_per_tensor_tensor_out,
    ),
    KernelDef::new(
        "quantized_decomposed::dequantize_per_tensor.out",
        dequantize_per_tensor_out,
    ),
    KernelDef::new(
        "quantized_decomposed::dequantize_per_tensor.Tensor_out",
        dequantize_per_tensor_tensor_out,
    ),
    KernelDef::new(
        "quantized_decomposed::dequantize_per_channel.out",
        dequantize_per_channel_out,
    ),
    KernelDef::new(
        "quantized_decomposed::choose_qparams.Tensor_out",
        choose_qparams_tensor_out,
    ),
];

/// `[qmin, qmax]` must be a range of `dtype`'s integers.
fn quant_range(qmin: i64, qmax: i64, dtype: DType, arg: usize) -> Result<(), KernelError> {
    let (lo, hi) = match dtype {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        _ => {
            return Err(KernelError::UnsupportedDType { arg, dtype });
        }
    };
    if qmin > qmax || qmin < lo || qmax > hi {
        return Err(value_err(
            arg,
            "quant_min/quant_max outside the quantized dtype",
        ));
    }
    Ok(())
}

/// One-element f64 (scale) and i64 (zero point) parameter tensors.
fn tensor_params(scale: &TensorRef<'_>, zp: &TensorRef<'_>) -> Result<(f64, i64), KernelError> {
    if scale.numel() != 1 || zp.numel() != 1 {
        return Err(value_err(
            1,
            "per-tensor scale and zero point must have one element",
        ));
    }
    if !scale.dtype().is_float() {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: scale.dtype(),
        });
    }
    Ok((scale.get_f64(0), zp.get_i64(0)))
}

fn quantize(
    x: &TensorRef<'_>,
    scale: f64,
    zp: i64,
    qmin: i64,
    qmax: i64,
    out: &mut TensorMut<'_>,
) -> Res {
    let xs = x.as_slice::<f32>()?;
    if out.numel() != xs.len() {
        return Err(value_err(
            out.arg(),
            "quantize: output size differs from input",
        ));
    }
    let inv = 1.0f32 / scale as f32;
    let zp32 = zp as i32 as f32;
    let q = |v: f32| -> i64 {
        // The f32 sum of the zero point and the rounded value, as ExecuTorch computes it.
        let r = zp32 + nearbyint(inv * v);
        (r as i64).clamp(qmin, qmax)
    };
    match out.dtype() {
        DType::I8 => {
            for (o, &v) in out.as_mut_slice::<i8>()?.iter_mut().zip(xs) {
                *o = q(v) as i8;
            }
        }
        DType::U8 => {
            for (o, &v) in out.as_mut_slice::<u8>()?.iter_mut().zip(xs) {
                *o = q(v) as u8;
            }
        }
        _ => {
            for (i, &v) in xs.iter().enumerate() {
                out.set_i64(i, q(v));
            }
        }
    }
    Ok(())
}

/// `quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
/// int quant_max, ScalarType dtype, *, Tensor(a!) out)`.
fn quantize_per_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(8)?;
    let x = ctx.input(0)?;
    need_dtype(x.dtype(), DType::F32, 0)?;
    let (scale, zp) = (ctx.double(1)?, ctx.int(2)?);
    let (qmin, qmax) = (ctx.int(3)?, ctx.int(4)?);
    let mut out = ctx.output(6, x.shape())?;
    quant_range(qmin, qmax, out.dtype(), 6)?;
    quantize(&x, scale, zp, qmin, qmax, &mut out)
}

/// `quantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point,
/// int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out)`.
fn quantize_per_tensor_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(8)?;
    let x = ctx.input(0)?;
    need_dtype(x.dtype(), DType::F32, 0)?;
    let (scale, zp) = tensor_params(&ctx.input(1)?, &ctx.input(2)?)?;
    let (qmin, qmax) = (ctx.int(3)?, ctx.int(4)?);
    let mut out = ctx.output(6, x.shape())?;
    quant_range(qmin, qmax, out.dtype(), 6)?;
    quantize(&x, scale, zp, qmin, qmax, &mut out)
}

/// `(q - zp) · scale` for every element. The elements come in runs of `run` consecutive
/// ones sharing a channel (`run = numel` per tensor); run `r` uses `param(r % channels)`, read
/// once per run.
fn dequantize(
    q: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    run: usize,
    channels: usize,
    param: &dyn Fn(usize) -> (f32, i32),
) -> Res {
    need_dtype(out.dtype(), DType::F32, out.arg())?;
    let o = out.as_mut_slice::<f32>()?;
    if o.len() != q.numel() {
        return Err(value_err(
            out.arg(),
            "dequantize: output size differs from input",
        ));
    }
    let (run, channels) = (run.max(1), channels.max(1));
    let runs = o.chunks_mut(run).enumerate();
    match q.dtype() {
        DType::I8 => {
            for ((r, o), x) in runs.zip(q.as_slice::<i8>()?.chunks(run)) {
                let (s, zp) = param(r % channels);
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = (v as i32).wrapping_sub(zp) as f32 * s;
                }
            }
        }
        DType::U8 => {
            for ((r, o), x) in runs.zip(q.as_slice::<u8>()?.chunks(run)) {
                let (s, zp) = param(r % channels);
                for (o, &v) in o.iter_mut().zip(x) {
                    *o = (v as i32).wrapping_sub(zp) as f32 * s;
                }
            }
        }
        DType::I16 | DType::U16 | DType::I32 => {
            for (r, o) in runs {
                let (s, zp) = param(r % channels);
                for (t, o) in o.iter_mut().enumerate() {
                    *o = (q.get_i64(r * run + t) as i32).wrapping_sub(zp) as f32 * s;
                }
            }
        }
        dtype => return Err(KernelError::UnsupportedDType { arg: 0, dtype }),
    }
    Ok(())
}

/// The `out_dtype` argument, when given, must be float32.
fn out_dtype_f32(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Res {
    match opt_dtype(ctx, arg)? {
        None | Some(DType::F32) => Ok(()),
        Some(dtype) => Err(KernelError::UnsupportedDType { arg, dtype }),
    }
}

/// `dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
/// int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out)`.
fn dequantize_per_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(9)?;
    let q = ctx.input(0)?;
    let (scale, zp) = (ctx.double(1)? as f32, ctx.int(2)? as i32);
    out_dtype_f32(ctx, 6)?;
    let mut out = ctx.output(7, q.shape())?;
    dequantize(&q, &mut out, q.numel(), 1, &|_| (scale, zp))
}

/// `dequantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point,
/// int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None,
/// Tensor(a!) out)`.
fn dequantize_per_tensor_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(9)?;
    let q = ctx.input(0)?;
    let (scale, zp) = tensor_params(&ctx.input(1)?, &ctx.input(2)?)?;
    let (scale, zp) = (scale as f32, zp as i32);
    out_dtype_f32(ctx, 6)?;
    let mut out = ctx.output(7, q.shape())?;
    dequantize(&q, &mut out, q.numel(), 1, &|_| (scale, zp))
}

/// `dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis,
/// int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None,
/// Tensor(a!) out)`: channel `c` of dim `axis` uses `scales[c]` (f32 or f64, read as f32)
/// and `zero_points[c]` (0 when absent).
fn dequantize_per_channel_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(10)?;
    let q = ctx.input(0)?;
    let scales = ctx.input(1)?;
    let zps = ctx.opt_input(2)?;
    let rank = q.rank() as i64;
    let axis = ctx.int(3)?;
    let axis = if axis < 0 { axis + rank } else { axis };
    if axis < 0 || axis >= rank.max(1) {
        return Err(value_err(3, "dequantize_per_channel: axis out of range"));
    }
    let axis = axis as usize;
    let channels = q.dims().get(axis).copied().unwrap_or(1);
    if scales.numel() != channels || zps.is_some_and(|z| z.numel() != channels) {
        return Err(value_err(
            1,
            "dequantize_per_channel: one scale (and zero point) per channel",
        ));
    }
    if !scales.dtype().is_float() {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: scales.dtype(),
        });
    }
    out_dtype_f32(ctx, 7)?;
    // Elements of one channel step: the product of the dims after `axis`.
    let inner: usize = q.dims().get(axis + 1..).map_or(1, |d| d.iter().product());
    let mut out = ctx.output(8, q.shape())?;
    let param = |c: usize| {
        (
            scales.get_f64(c) as f32,
            zps.map_or(0, |z| z.get_i64(c) as i32),
        )
    };
    dequantize(&q, &mut out, inner, channels, &param)
}

/// `choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max, float eps,
/// ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out)`: one f64 scale and
/// one i64 zero point for the whole fp32 input.
fn choose_qparams_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(8)?;
    let x = ctx.input(0)?;
    need_dtype(x.dtype(), DType::F32, 0)?;
    let (qmin, qmax) = (ctx.int(1)?, ctx.int(2)?);
    if qmin >= qmax || qmin < i32::MIN as i64 || qmax > i32::MAX as i64 {
        return Err(value_err(
            1,
            "choose_qparams: quant_min must be below quant_max",
        ));
    }
    let xs = x.as_slice::<f32>()?;
    let lo = xs.iter().fold(f32::INFINITY, |m, &v| m.min(v));
    let hi = xs.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let (scale, zp) = scale_and_zero_point(lo, hi, qmin as i32, qmax as i32);
    let shape = ctx.tensor_shape(5)?;
    let mut s = ctx.output(5, &shape)?;
    need_dtype(s.dtype(), DType::F64, 5)?;
    if s.numel() != 1 {
        return Err(value_err(
            5,
            "choose_qparams: scale_out must have one element",
        ));
    }
    s.as_mut_slice::<f64>()?[0] = scale;
    let shape = ctx.tensor_shape(6)?;
    let mut z = ctx.output(6, &shape)?;
    need_dtype(z.dtype(), DType::I64, 6)?;
    if z.numel() != 1 {
        return Err(value_err(
            6,
            "choose_qparams: zero_point_out must have one element",
        ));
    }
    z.as_mut_slice::<i64>()?[0] = zp as i64;
    Ok(())
}

/// ExecuTorch's `calculate_scale_and_zero_point` (see the module comment).
pub(crate) fn scale_and_zero_point(min: f32, max: f32, qmin: i32, qmax: i32) -> (f64, i32) {
    const SMALL: f32 = 6.1e-5;
    let mut min = min.min(0.0);
    let mut max = max.max(0.0);
    let range = (qmax - qmin) as f64;
    let mut scale = (max as f64 - min as f64) / range;
    if scale as f32 == 0.0 || (1.0f32 / scale as f32).is_infinite() {
        scale = 0.1;
    }
    if scale < SMALL as f64 {
        let org = scale as f32;
        scale = SMALL as f64;
        if min == 0.0 {
            max = SMALL * (qmax - qmin) as f32;
        } else if max == 0.0 {
            min = -SMALL * (qmax - qmin) as f32;
        } else {
            let amp = SMALL / org;
            min *= amp;
            max *= amp;
        }
    }
    let from_min = qmin as f64 - min as f64 / scale;
    let from_max = qmax as f64 - max as f64 / scale;
    let err_min = (qmin as f64).abs() - (min as f64 / scale).abs();
    let err_max = (qmax as f64).abs() - (max as f64 / scale).abs();
    let initial = if err_min < err_max {
        from_min
    } else {
        from_max
    };
    let zp = if initial < qmin as f64 {
        qmin
    } else if initial > qmax as f64 {
        qmax
    } else {
        nearbyint(initial as f32) as i32
    };
    (scale, zp)
}

#[cfg(test)]
#[path = "quantized_tests.rs"]
mod tests;
