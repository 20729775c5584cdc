//! Binary arithmetic with NumPy broadcasting and ATen type promotion: `add`, `sub`, `rsub`,
//! `mul`, `div` (with rounding modes), `floor_divide`, `pow`, `maximum`, `minimum`,
//! `remainder`, `fmod`, in their Tensor and Scalar overloads. Integer division by zero is an
//! error.
//!
//! Layout contract: every tensor argument is contiguous (checked by `KernelCtx::input`); the
//! output is resized to the broadcast (or input) shape and every element is written.
//!
//! Dtype contract (ATen): the computation dtype is ATen's `result_type` of the operands
//! (dimensioned tensors over zero-dim tensors over Python scalars, by category), which must be
//! castable to the out dtype (no float → integer, no non-bool → bool); the result is then
//! converted to the out dtype. float32 is computed in f32, float64 in f64, float16/bfloat16 in
//! f32 rounded to the half type, integers in i64 wrapped to their common type, bool as bool.
//!
//! Performance: broadcasting goes through the coalescing `Bcast` iterator (same-shape,
//! row-vector and scalar operands become flat loops); f32 operands have dedicated vectorised
//! paths, and when every operand already has the compute dtype the loops run over typed slices.

use super::binary_prepared::{prepare_add, prepare_mul, prepare_sub};
use super::broadcast::{bcast_err, bshape, is_column, is_trailing, map1, zip2};
use super::common::{Ctx, Res};
use super::compute::{num_kind, with_num, Ct, Float, Kind, Num};
use super::promote::{check_cast, renormalize, Promo, Rhs};
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::vecmath as vec;
use crate::shape::dims_eq;
use crate::tensor::{TensorMut, TensorRef};

/// The binary arithmetic kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::add.out", add_out).with_prepare(prepare_add),
    KernelDef::new("aten::sub.out", sub_out).with_prepare(prepare_sub),
    KernelDef::new("aten::mul.out", mul_out).with_prepare(prepare_mul),
    KernelDef::new("aten::div.out", div_out),
    KernelDef::new("aten::div.out_mode", div_out_mode),
    KernelDef::new("aten::floor_divide.out", floor_divide_out),
    KernelDef::new("aten::pow.Tensor_Tensor_out", pow_tt_out),
    KernelDef::new("aten::maximum.out", maximum_out),
    KernelDef::new("aten::minimum.out", minimum_out),
    KernelDef::new("aten::remainder.Tensor_out", remainder_tensor_out),
    KernelDef::new("aten::fmod.Tensor_out", fmod_tensor_out),
    KernelDef::new("aten::add.Scalar_out", add_scalar_out),
    KernelDef::new("aten::sub.Scalar_out", sub_scalar_out),
    KernelDef::new("aten::rsub.Scalar_out", rsub_scalar_out),
    KernelDef::new("aten::mul.Scalar_out", mul_scalar_out),
    KernelDef::new("aten::div.Scalar_out", div_scalar_out),
    KernelDef::new("aten::div.Scalar_mode_out", div_scalar_mode_out),
    KernelDef::new("aten::pow.Tensor_Scalar_out", pow_ts_out),
    KernelDef::new("aten::pow.Scalar_out", pow_scalar_out),
    KernelDef::new("aten::remainder.Scalar_out", remainder_scalar_out),
    KernelDef::new("aten::fmod.Scalar_out", fmod_scalar_out),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ar {
    Add,
    Sub,
    /// `other - alpha·self` (rsub).
    RSub,
    Mul,
    Div,
    DivTrunc,
    DivFloor,
    Pow,
    Max,
    Min,
    Rem,
    Fmod,
}

/// Shared body of every arithmetic kernel. `rhs_arg` / `alpha_arg` are argument positions
/// for error reports.
#[allow(clippy::too_many_arguments)]
fn arith<'a>(
    ctx: &mut Ctx<'_, 'a, '_>,
    op: Ar,
    x: TensorRef<'a>,
    rhs: Rhs<'a>,
    rhs_arg: usize,
    alpha: Scalar,
    alpha_arg: usize,
    out_arg: usize,
) -> Res {
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    match op {
        Ar::Sub | Ar::RSub if x.dtype() == DType::Bool || rhs.dtype() == DType::Bool => {
            return Err(KernelError::UnsupportedDType {
                arg: if x.dtype() == DType::Bool { 0 } else { rhs_arg },
                dtype: DType::Bool,
            });
        }
        Ar::DivTrunc | Ar::DivFloor | Ar::Rem | Ar::Fmod | Ar::Pow if common == DType::Bool => {
            return Err(KernelError::UnsupportedDType {
                arg: 0,
                dtype: DType::Bool,
            });
        }
        _ => {}
    }
    if matches!(op, Ar::Add | Ar::Sub | Ar::RSub) {
        if !common.is_float() && matches!(alpha, Scalar::Double(_)) {
            return Err(KernelError::Value {
                arg: alpha_arg,
                detail: "alpha must not be a floating point number for integral inputs",
            });
        }
        if matches!(alpha, Scalar::Bool(_)) && common != DType::Bool {
            return Err(KernelError::Value {
                arg: alpha_arg,
                detail: "boolean alpha only supported for boolean results",
            });
        }
    }
    let result = if op == Ar::Div && !common.is_float() {
        DType::F32
    } else {
        common
    };
    check_cast(result, ctx.out_dtype(out_arg)?, out_arg)?;
    if !result.is_float() {
        if matches!(op, Ar::DivTrunc | Ar::DivFloor | Ar::Rem | Ar::Fmod) {
            let zero = match rhs {
                Rhs::T(y) => (0..y.numel()).any(|i| y.get_i64(i) == 0),
                Rhs::S(s) => s.as_i64() == 0,
            };
            if zero {
                return Err(KernelError::Value {
                    arg: rhs_arg,
                    detail: "integer division by zero",
                });
            }
        }
        if let (Ar::Pow, Rhs::S(Scalar::Int(e))) = (op, rhs) {
            if e < 0 {
                return Err(KernelError::Value {
                    arg: rhs_arg,
                    detail: "integers to negative integer powers are not allowed",
                });
            }
        }
    }
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(out_arg, &shape)?;
    if result == DType::F32 && arith_f32_fast(op, &x, rhs, alpha, &mut out)? {
        return Ok(());
    }
    if result == DType::I64 && arith_i64_fast(op, &x, rhs, alpha, &mut out)? {
        return Ok(());
    }
    match (op, rhs, num_kind(result)) {
        (Ar::Pow, Rhs::S(e), Kind::F32) => pow_scalar::<f32>(&x, e, &mut out)?,
        (Ar::Pow, Rhs::S(e), Kind::F64) => pow_scalar::<f64>(&x, e, &mut out)?,
        (_, _, k) => with_num!(k, T, arith_t::<T>(op, &x, rhs, alpha, &mut out)?),
    }
    renormalize(&mut out, result);
    Ok(())
}

/// f32 fast path of [`arith`] on the shared slice kernels: all-f32 operands, `add`/`sub` with
/// alpha 1, `mul`, `div`, `maximum`, `minimum`, `pow` by a scalar; same-shape, scalar (or
/// one-element tensor), trailing row-vector and per-row-scalar operands. Returns `false`
/// (nothing written) for every other case, which the generic path then handles.
fn arith_f32_fast(
    op: Ar,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    alpha: Scalar,
    out: &mut TensorMut<'_>,
) -> Result<bool, KernelError> {
    if x.dtype() != DType::F32 || rhs.dtype() != DType::F32 && matches!(rhs, Rhs::T(_)) {
        return Ok(false);
    }
    if out.dtype() != DType::F32 {
        return Ok(false);
    }
    let one = match alpha {
        Scalar::Int(v) => v == 1,
        Scalar::Double(v) => v == 1.0,
        Scalar::Bool(v) => v,
    };
    let bop = match op {
        Ar::Add if one => vec::BinOp::Add,
        Ar::Sub if one => vec::BinOp::Sub,
        Ar::Mul => vec::BinOp::Mul,
        Ar::Div => vec::BinOp::Div,
        Ar::Max => vec::BinOp::Max,
        Ar::Min => vec::BinOp::Min,
        Ar::Pow => {
            let Rhs::S(e) = rhs else { return Ok(false) };
            if matches!(e, Scalar::Bool(_)) {
                return Ok(false);
            }
            let (xs, os) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
            vec::pow_scalar(xs, f32::from_scalar(e), os).map_err(|_| bcast_err(out.arg()))?;
            return Ok(true);
        }
        _ => return Ok(false),
    };
    let bad = bcast_err(out.arg());
    let xs = x.as_slice::<f32>()?;
    let od = *out.shape();
    let os = out.as_mut_slice::<f32>()?;
    let n = os.len();
    let r = match rhs {
        Rhs::S(s) if xs.len() == n => vec::binary_scalar(bop, xs, f32::from_scalar(s), os),
        Rhs::S(_) => return Ok(false),
        Rhs::T(y) => {
            let ys = y.as_slice::<f32>()?;
            let (xd, yd, od) = (x.dims(), y.dims(), od.dims());
            if xs.len() == n && ys.len() == n {
                vec::binary(bop, xs, ys, os)
            } else if xs.len() == n && ys.len() == 1 {
                vec::binary_scalar(bop, xs, ys[0], os)
            } else if ys.len() == n && xs.len() == 1 {
                vec::scalar_binary(bop, xs[0], ys, os)
            } else if xs.len() == n && is_trailing(yd, od) {
                vec::binary_row(bop, xs, ys, os)
            } else if ys.len() == n && is_trailing(xd, od) {
                vec::row_binary(bop, xs, ys, os)
            } else if xs.len() == n && xd == od && is_column(yd, od) {
                vec::binary_col(bop, xs, ys, os)
            } else {
                return Ok(false);
            }
        }
    };
    r.map_err(|_| bad)?;
    Ok(true)
}

/// int64 fast path of [`arith`] (position ids, cumulative masks): `add`, `sub` and `mul` of
/// all-int64 operands of one shape, or by a scalar or a one-element tensor, wrapping as the
/// generic path does (no broadcast plan, no index walk). `false` (nothing written) otherwise.
fn arith_i64_fast(
    op: Ar,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    alpha: Scalar,
    out: &mut TensorMut<'_>,
) -> Result<bool, KernelError> {
    if x.dtype() != DType::I64 || out.dtype() != DType::I64 {
        return Ok(false);
    }
    let al = i64::from_scalar(alpha);
    let xs = x.as_slice::<i64>()?;
    let os = out.as_mut_slice::<i64>()?;
    if xs.len() != os.len() {
        return Ok(false);
    }
    let ys: &[i64] = match rhs {
        Rhs::T(y) if y.dtype() == DType::I64 => y.as_slice::<i64>()?,
        Rhs::T(_) => return Ok(false),
        Rhs::S(_) => &[],
    };
    let b = match (rhs, ys) {
        (Rhs::S(s), _) => I64Rhs::One(i64::from_scalar(s)),
        (_, [b]) if os.len() != 1 => I64Rhs::One(*b),
        (_, ys) if ys.len() == os.len() => I64Rhs::Each(ys),
        _ => return Ok(false),
    };
    match op {
        Ar::Add => zip_i64(xs, b, os, |a, b| a.wadd(al.wmul(b))),
        Ar::Sub => zip_i64(xs, b, os, |a, b| a.wsub(al.wmul(b))),
        Ar::Mul => zip_i64(xs, b, os, |a, b| a.wmul(b)),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The right operand of [`arith_i64_fast`]: one value for every element, or one each.
#[derive(Clone, Copy)]
enum I64Rhs<'a> {
    One(i64),
    Each(&'a [i64]),
}

/// `os[i] = f(xs[i], b[i])` (`b` one value or one per element, as long as `os`).
#[inline(always)]
fn zip_i64(xs: &[i64], b: I64Rhs<'_>, os: &mut [i64], f: impl Fn(i64, i64) -> i64) {
    match b {
        I64Rhs::One(b) => {
            for (o, &a) in os.iter_mut().zip(xs) {
                *o = f(a, b);
            }
        }
        I64Rhs::Each(ys) => {
            for ((o, &a), &b) in os.iter_mut().zip(xs).zip(ys) {
                *o = f(a, b);
            }
        }
    }
}

fn arith_t<T: Num>(
    op: Ar,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    alpha: Scalar,
    out: &mut TensorMut<'_>,
) -> Res {
    let al = T::from_scalar(alpha);
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            match rhs {
                Rhs::T(y) => zip2::<T, T, T>(x, &y, out, f),
                Rhs::S(s) => {
                    let s = T::from_scalar(s);
                    map1::<T, T>(x, out, move |a| f(a, s))
                }
            }
        }};
    }
    let one = al == T::ONE;
    match op {
        Ar::Add if one => go!(|a: T, b: T| a.wadd(b)),
        Ar::Add => go!(move |a: T, b: T| a.wadd(al.wmul(b))),
        Ar::Sub if one => go!(|a: T, b: T| a.wsub(b)),
        Ar::Sub => go!(move |a: T, b: T| a.wsub(al.wmul(b))),
        Ar::RSub => go!(move |a: T, b: T| b.wsub(al.wmul(a))),
        Ar::Mul => go!(|a: T, b: T| a.wmul(b)),
        Ar::Div => go!(|a: T, b: T| a.quot(b)),
        Ar::DivTrunc => go!(|a: T, b: T| a.div_trunc(b)),
        Ar::DivFloor => go!(|a: T, b: T| a.div_floor(b)),
        Ar::Pow => go!(|a: T, b: T| a.power(b)),
        Ar::Max => go!(|a: T, b: T| a.max_nan(b)),
        Ar::Min => go!(|a: T, b: T| a.min_nan(b)),
        Ar::Rem => go!(|a: T, b: T| a.rem_floor(b)),
        Ar::Fmod => go!(|a: T, b: T| a.fmod(b)),
    }
}

/// Float `pow(tensor, scalar)` with ATen's exact shortcuts for common exponents.
fn pow_scalar<T: Float>(x: &TensorRef<'_>, e: Scalar, out: &mut TensorMut<'_>) -> Res {
    let special = match e {
        Scalar::Bool(_) => f64::NAN,
        _ => e.as_f64(),
    };
    let one = T::ONE;
    if special == 2.0 {
        map1::<T, T>(x, out, |a| a * a)
    } else if special == 3.0 {
        map1::<T, T>(x, out, |a| a * a * a)
    } else if special == 0.5 {
        map1::<T, T>(x, out, |a| a.sqrt())
    } else if special == -0.5 {
        map1::<T, T>(x, out, move |a| one / a.sqrt())
    } else if special == -1.0 {
        map1::<T, T>(x, out, move |a| one / a)
    } else if special == -2.0 {
        map1::<T, T>(x, out, move |a| one / (a * a))
    } else {
        let e = T::from_scalar(e);
        map1::<T, T>(x, out, move |a| a.power(e))
    }
}

/// `[self, other, (alpha,) out, out]` with a tensor `other`.
fn tensor_tensor(ctx: &mut Ctx<'_, '_, '_>, op: Ar, has_alpha: bool) -> Res {
    ctx.expect_args(if has_alpha { 5 } else { 4 })?;
    if same_shape_f32(ctx, op)? {
        return Ok(());
    }
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    let alpha = if has_alpha {
        ctx.scalar(2)?
    } else {
        Scalar::Int(1)
    };
    let out_arg = if has_alpha { 3 } else { 2 };
    arith(ctx, op, x, Rhs::T(y), 1, alpha, 2, out_arg)
}

/// The operations [`same_shape_f32`] takes: the kernel's, the slice kernel's, and whether the
/// call has an alpha (its output is then argument 3, else 2). A prepared call names its
/// operation by index here.
const SAME_SHAPE_OPS: [(Ar, vec::BinOp, bool); 3] = [
    (Ar::Add, vec::BinOp::Add, true),
    (Ar::Sub, vec::BinOp::Sub, true),
    (Ar::Mul, vec::BinOp::Mul, false),
];

/// The residual-add path of [`tensor_tensor`]: `add`, `sub` (alpha 1) and `mul` of two f32
/// tensors of one shape into an f32 output already of that shape, bound to raw storage with
/// no views, no promotion and no broadcast plan (a transformer layer runs two per row block).
/// Computes what [`arith`] computes for them (`vec::binary`, element by element); `false`
/// (nothing read or written) for any other call, which takes the general path.
fn same_shape_f32(ctx: &mut Ctx<'_, '_, '_>, op: Ar) -> Result<bool, KernelError> {
    let Some((i, n)) = same_shape_call(ctx, op) else {
        return Ok(false);
    };
    let (_, bop, has_alpha) = SAME_SHAPE_OPS[i];
    let out_arg = if has_alpha { 3 } else { 2 };
    let xs = ctx.input_f32s(0, n)?;
    let ys = ctx.input_f32s(1, n)?;
    let os = ctx.output_f32s(out_arg, n)?;
    vec::binary(bop, xs, ys, os).map_err(|_| bcast_err(out_arg))?;
    Ok(true)
}

/// Whether a call of `op` takes [`same_shape_f32`]: its index in [`SAME_SHAPE_OPS`] and its
/// element count. The shapes are compared first (the cheapest refusal: broadcast calls).
fn same_shape_call(ctx: &Ctx<'_, '_, '_>, op: Ar) -> Option<(usize, usize)> {
    let i = SAME_SHAPE_OPS.iter().position(|&(o, _, _)| o == op)?;
    let out_arg = if SAME_SHAPE_OPS[i].2 { 3 } else { 2 };
    let (xd, yd, od) = (
        ctx.dims(0).ok()?,
        ctx.dims(1).ok()?,
        ctx.dims(out_arg).ok()?,
    );
    if !dims_eq(xd, yd) || !dims_eq(xd, od) {
        return None;
    }
    for a in [0, 1, out_arg] {
        if ctx.out_dtype(a).ok()? != DType::F32 {
            return None;
        }
    }
    // alpha exactly 1, as an Int or a Double (a Bool alpha is the general path's error).
    if out_arg == 3 && !matches!(ctx.scalar(2), Ok(Scalar::Int(1)) | Ok(Scalar::Double(1.0))) {
        return None;
    }
    Some((i, xd.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?))
}

/// `[self, Scalar other, (alpha,) out, out]`.
fn tensor_scalar(ctx: &mut Ctx<'_, '_, '_>, op: Ar, has_alpha: bool) -> Res {
    ctx.expect_args(if has_alpha { 5 } else { 4 })?;
    let x = ctx.input(0)?;
    let s = ctx.scalar(1)?;
    let alpha = if has_alpha {
        ctx.scalar(2)?
    } else {
        Scalar::Int(1)
    };
    let out_arg = if has_alpha { 3 } else { 2 };
    arith(ctx, op, x, Rhs::S(s), 1, alpha, 2, out_arg)
}

fn rounding_mode(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Ar, KernelError> {
    if ctx.is_none(arg)? {
        return Ok(Ar::Div);
    }
    match ctx.string(arg)? {
        "trunc" => Ok(Ar::DivTrunc),
        "floor" => Ok(Ar::DivFloor),
        _ => Err(KernelError::Value {
            arg,
            detail: "rounding_mode must be None, 'trunc' or 'floor'",
        }),
    }
}

/// `aten::add.out(self, other, *, alpha=1, out)`: `self + alpha·other`, broadcast. Any real
/// dtypes (bool adds as logical or); ATen promotion, cast to out's dtype; contiguous.
fn add_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Add, true)
}

/// `aten::sub.out(self, other, *, alpha=1, out)`: `self - alpha·other`, broadcast. Real
/// dtypes except bool; ATen promotion; contiguous.
fn sub_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Sub, true)
}

/// `aten::mul.out(self, other, *, out)`: broadcast product. Any real dtypes (bool = and);
/// ATen promotion; contiguous.
fn mul_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Mul, false)
}

/// `aten::div.out(self, other, *, out)`: true division, broadcast. Integer and bool inputs
/// divide in float32 (out must be floating); contiguous.
fn div_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Div, false)
}

/// `aten::div.out_mode(self, other, *, rounding_mode, out)`: `None` = true division,
/// `"trunc"` / `"floor"` round the quotient (integers stay integral; integer division by
/// zero is an error). Real dtypes; contiguous.
fn div_out_mode(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = rounding_mode(ctx, 2)?;
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    arith(ctx, op, x, Rhs::T(y), 1, Scalar::Int(1), 2, 3)
}

/// `aten::floor_divide.out(self, other, *, out)`: `floor(self / other)` (Python `//`),
/// broadcast. Integer and float dtypes (not bool); integer division by zero is an error.
fn floor_divide_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::DivFloor, false)
}

/// `aten::pow.Tensor_Tensor_out(self, exponent, *, out)`: broadcast power. Integer (exact,
/// wrapping) and float dtypes, not bool; contiguous.
fn pow_tt_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Pow, false)
}

/// `aten::maximum.out(self, other, *, out)`: elementwise max, NaN propagates. Real dtypes.
fn maximum_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Max, false)
}

/// `aten::minimum.out(self, other, *, out)`: elementwise min, NaN propagates. Real dtypes.
fn minimum_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Min, false)
}

/// `aten::remainder.Tensor_out(self, other, *, out)`: Python-style `%` (sign of `other`),
/// broadcast. Integer and float dtypes; integer division by zero is an error.
fn remainder_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Rem, false)
}

/// `aten::fmod.Tensor_out(self, other, *, out)`: C `fmod` (sign of `self`), broadcast.
/// Integer and float dtypes; integer division by zero is an error.
fn fmod_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Fmod, false)
}

/// `aten::add.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `self + alpha·other`.
/// Real dtypes, scalar promotion (a float scalar makes integer input float32).
fn add_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Add, true)
}

/// `aten::sub.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `self - alpha·other`.
/// Real dtypes except bool.
fn sub_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Sub, true)
}

/// `aten::rsub.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `other - alpha·self`.
/// Real dtypes except bool.
fn rsub_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::RSub, true)
}

/// `aten::mul.Scalar_out(self, Scalar other, *, out)`. Real dtypes.
fn mul_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Mul, false)
}

/// `aten::div.Scalar_out(self, Scalar other, *, out)`: true division (integers → float32).
fn div_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Div, false)
}

/// `aten::div.Scalar_mode_out(self, Scalar other, *, rounding_mode, out)`: as `div.out_mode`.
fn div_scalar_mode_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = rounding_mode(ctx, 2)?;
    let x = ctx.input(0)?;
    let s = ctx.scalar(1)?;
    arith(ctx, op, x, Rhs::S(s), 1, Scalar::Int(1), 2, 3)
}

/// `aten::pow.Tensor_Scalar_out(self, Scalar exponent, *, out)`: float exponents 2, 3, 0.5,
/// -0.5, -1, -2 use exact multiplications / sqrt; integer tensors with integer exponents stay
/// integral (negative exponents are an error). Real dtypes.
fn pow_ts_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Pow, false)
}

/// `aten::remainder.Scalar_out(self, Scalar other, *, out)`: Python-style `%`.
/// Integer and float dtypes; integer division by zero is an error.
fn remainder_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Rem, false)
}

/// `aten::fmod.Scalar_out(self, Scalar other, *, out)`: C `fmod`.
/// Integer and float dtypes; integer division by zero is an error.
fn fmod_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Fmod, false)
}

/// `aten::pow.Scalar_out(Scalar self, Tensor exponent, *, out)`: `self ** exponent`.
/// Integer (exact) and float dtypes, not bool.
fn pow_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let base = ctx.scalar(0)?;
    let e = ctx.input(1)?;
    let common = Promo::default().scalar(base).tensor(&e).result();
    if common == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(2)?, 2)?;
    let mut out = ctx.output(2, e.shape())?;
    with_num!(num_kind(common), T, {
        let b = T::from_scalar(base);
        map1::<T, T>(&e, &mut out, move |v| b.power(v))?
    });
    renormalize(&mut out, common);
    Ok(())
}

#[cfg(test)]
#[path = "binary_tests.rs"]
mod tests;
