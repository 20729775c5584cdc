//! Fills and ranges: `full`, `full_like`, `zeros`, `ones`, `scalar_tensor`, `fill` (Scalar
//! and Tensor value), `arange` (end and start/end/step forms). The value is converted to the
//! out dtype as C++ `static_cast` does.
//!
//! Layout contract: outputs are contiguous and every element is written.

use super::common::{fill_pattern, Ctx, Res};
use super::compute::{kind, with_ct, Ct};
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{write_f64, write_i64, Shape, TensorMut};

/// The fill and range kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::full.out", full_out),
    KernelDef::new("aten::full_like.out", full_like_out),
    KernelDef::new("aten::zeros.out", zeros_out),
    KernelDef::new("aten::ones.out", ones_out),
    KernelDef::new("aten::scalar_tensor.out", scalar_tensor_out),
    KernelDef::new("aten::fill.Scalar_out", fill_scalar_out),
    KernelDef::new("aten::fill.Tensor_out", fill_tensor_out),
    KernelDef::new("aten::arange.out", arange_out),
    KernelDef::new("aten::arange.start_out", arange_start_out),
];

/// The bytes of `s` converted to `dt` (C++ `static_cast`; floats through f32 for halves).
fn scalar_bytes(s: Scalar, dt: DType) -> [u8; 8] {
    let mut b = [0u8; 8];
    with_ct!(kind(dt), T, T::from_scalar(s).store(dt, &mut b, 0));
    b
}

/// Writes `s` (converted to out's dtype) into every element of `out`.
fn fill(out: &mut TensorMut<'_>, s: Scalar) {
    let dt = out.dtype();
    let pat = scalar_bytes(s, dt);
    fill_pattern(out.bytes_mut(), &pat[..dt.size()]);
}

/// Shape from an `int[] size` argument (negative sizes rejected).
fn size_arg(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Shape, KernelError> {
    let list = ctx.int_list(arg)?;
    let mut s = Shape::scalar();
    for &d in list.iter() {
        if d < 0 {
            return Err(KernelError::Value {
                arg,
                detail: "negative dimension",
            });
        }
        s.push(d as usize).ok_or(KernelError::Shape {
            arg,
            detail: "rank exceeds 16",
        })?;
    }
    Ok(s)
}

/// `aten::full.out(int[] size, Scalar fill_value, *, out)`: out of shape `size`, every
/// element `fill_value` cast to out's dtype (any dtype).
fn full_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let shape = size_arg(ctx, 0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(2, &shape)?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::zeros.out(int[] size, *, out)`: any dtype.
fn zeros_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let shape = size_arg(ctx, 0)?;
    let mut out = ctx.output(1, &shape)?;
    fill(&mut out, Scalar::Int(0));
    Ok(())
}

/// `aten::ones.out(int[] size, *, out)`: any dtype.
fn ones_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let shape = size_arg(ctx, 0)?;
    let mut out = ctx.output(1, &shape)?;
    fill(&mut out, Scalar::Int(1));
    Ok(())
}

/// `aten::full_like.out(self, Scalar fill_value, *, MemoryFormat? memory_format=None, out)`:
/// out of self's shape filled with `fill_value` (any dtypes; self's data is not read).
fn full_like_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(3, x.shape())?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::fill.Scalar_out(self, Scalar value, *, out)`: out of self's shape filled with
/// `value` (any dtypes; self's data is not read).
fn fill_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(2, x.shape())?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::fill.Tensor_out(self, Tensor value, *, out)`: like `fill.Scalar_out` with a
/// zero-dim `value` tensor (any dtype).
fn fill_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.input(1)?;
    if v.rank() != 0 {
        return Err(KernelError::Shape {
            arg: 1,
            detail: "fill value must be a zero-dim tensor",
        });
    }
    let s = match v.dtype() {
        DType::Bool => Scalar::Bool(v.get_i64(0) != 0),
        d if d.is_float() => Scalar::Double(v.get_f64(0)),
        _ => Scalar::Int(v.get_i64(0)),
    };
    let mut out = ctx.output(2, x.shape())?;
    fill(&mut out, s);
    Ok(())
}

/// `aten::scalar_tensor.out(Scalar s, *, out)`: rank-0 out holding `s` in out's dtype.
fn scalar_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let v = ctx.scalar(0)?;
    let mut out = ctx.output(1, &Shape::scalar())?;
    fill(&mut out, v);
    Ok(())
}

/// ATen `arange` on `[start, end)` by `step` into the out at `out_arg`. Length: for an int64
/// out with integral scalars, exact integer arithmetic; otherwise `ceil((end−start)/step)` in
/// f64. Values `start + i·step` in i64 (integer outs; scalars truncated) or f64 (f32 in f16/bf16).
fn arange_impl(
    ctx: &mut Ctx<'_, '_, '_>,
    start: Scalar,
    end: Scalar,
    step: Scalar,
    step_arg: usize,
    out_arg: usize,
) -> Res {
    let od = ctx.out_dtype(out_arg)?;
    if od == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: out_arg,
            dtype: od,
        });
    }
    let (ds, de, dp) = (start.as_f64(), end.as_f64(), step.as_f64());
    if dp == 0.0 || dp.is_nan() {
        return Err(KernelError::Value {
            arg: step_arg,
            detail: "step must be nonzero",
        });
    }
    if !ds.is_finite() || !de.is_finite() {
        return Err(KernelError::Value {
            arg: 0,
            detail: "unsupported range (non-finite bound)",
        });
    }
    if !((dp > 0.0 && de >= ds) || (dp < 0.0 && de <= ds)) {
        return Err(KernelError::Value {
            arg: step_arg,
            detail: "upper bound and lower bound inconsistent with step sign",
        });
    }
    let integral = |s: Scalar| matches!(s, Scalar::Int(_));
    let len: u64 = if od == DType::I64 && integral(start) && integral(end) && integral(step) {
        let (s, e, p) = (
            start.as_i64() as i128,
            end.as_i64() as i128,
            step.as_i64() as i128,
        );
        let n = (e - s + p - p.signum()) / p;
        u64::try_from(n).map_err(|_| KernelError::Value {
            arg: 0,
            detail: "invalid arange size",
        })?
    } else {
        let d = libm::ceil((de - ds) / dp);
        if !(d >= 0.0 && d <= i64::MAX as f64) {
            return Err(KernelError::Value {
                arg: 0,
                detail: "invalid arange size",
            });
        }
        d as u64
    };
    let len = usize::try_from(len).map_err(|_| KernelError::Value {
        arg: 0,
        detail: "invalid arange size",
    })?;
    let shape = Shape::new(&[len]).ok_or(KernelError::Value {
        arg: 0,
        detail: "invalid arange size",
    })?;
    let mut out = ctx.output(out_arg, &shape)?;
    match od {
        DType::F32 => {
            for (i, o) in out.as_mut_slice::<f32>()?.iter_mut().enumerate() {
                *o = (ds + dp * i as f64) as f32;
            }
        }
        DType::F16 | DType::BF16 => {
            let (s, p) = (ds as f32, dp as f32);
            let b = out.bytes_mut();
            for i in 0..len {
                write_f64(od, b, i, (s + p * i as f32) as f64);
            }
        }
        DType::F64 => {
            for (i, o) in out.as_mut_slice::<f64>()?.iter_mut().enumerate() {
                *o = ds + dp * i as f64;
            }
        }
        DType::I64 => {
            let (s, p) = (start.as_i64(), step.as_i64());
            for (i, o) in out.as_mut_slice::<i64>()?.iter_mut().enumerate() {
                *o = s.wrapping_add(p.wrapping_mul(i as i64));
            }
        }
        _ => {
            let (s, p) = (start.as_i64(), step.as_i64());
            let b = out.bytes_mut();
            for i in 0..len {
                write_i64(od, b, i, s.wrapping_add(p.wrapping_mul(i as i64)));
            }
        }
    }
    Ok(())
}

/// `aten::arange.out(Scalar end, *, out)`: `0, 1, .., end-1` in out's dtype (not bool).
fn arange_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let end = ctx.scalar(0)?;
    arange_impl(ctx, Scalar::Int(0), end, Scalar::Int(1), 0, 1)
}

/// `aten::arange.start_out(Scalar start, Scalar end, Scalar step=1, *, out)`: ATen length
/// rule and values in out's dtype (integers exact; not bool).
fn arange_start_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let start = ctx.scalar(0)?;
    let end = ctx.scalar(1)?;
    let step = ctx.scalar(2)?;
    arange_impl(ctx, start, end, step, 2, 3)
}

#[cfg(test)]
#[path = "fill_tests.rs"]
mod tests;
