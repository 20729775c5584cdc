//! Unary math and activations: exp/log family, sqrt/rsqrt, trigonometric and hyperbolic
//! functions, `erf`, `reciprocal`, `sigmoid`, `tanh`, `silu`, `gelu`, `elu`, `leaky_relu`,
//! `relu`, `neg`, `abs`, rounding, `sign`, `clamp` (Scalar and Tensor bounds), `hardtanh`,
//! `isnan`, `isinf`. f32 inputs of the common functions use `linalg::vecmath`.
//!
//! Layout contract: every tensor argument is contiguous (checked by `KernelCtx::input`); the
//! output is resized to the broadcast (or input) shape and every element is written.
//!
//! Dtype contract (ATen): the computation dtype is ATen's `result_type` of the operands
//! (dimensioned tensors over zero-dim tensors over Python scalars, by category), which must be
//! castable to the out dtype (no float → integer, no non-bool → bool); the result is then
//! converted to the out dtype. float32 is computed in f32, float64 in f64, float16/bfloat16 in
//! f32 rounded to the half type, integers in i64 wrapped to their common type, bool as bool.

use super::broadcast::{bcast_err, map1, zip2, zip3};
use super::common::{Ctx, Res};
use super::compute::{kind, num_kind, with_num, Float, Kind, Num};
use super::promote::{check_cast, renormalize, Promo};
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::vecmath as vec;
use crate::shape::broadcast_shapes;
use crate::tensor::{TensorMut, TensorRef};

/// The unary kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::tanh.out", tanh_out),
    KernelDef::new("aten::sigmoid.out", sigmoid_out),
    KernelDef::new("aten::exp.out", exp_out),
    KernelDef::new("aten::expm1.out", expm1_out),
    KernelDef::new("aten::log.out", log_out),
    KernelDef::new("aten::log1p.out", log1p_out),
    KernelDef::new("aten::log2.out", log2_out),
    KernelDef::new("aten::log10.out", log10_out),
    KernelDef::new("aten::sqrt.out", sqrt_out),
    KernelDef::new("aten::rsqrt.out", rsqrt_out),
    KernelDef::new("aten::sin.out", sin_out),
    KernelDef::new("aten::cos.out", cos_out),
    KernelDef::new("aten::tan.out", tan_out),
    KernelDef::new("aten::sinh.out", sinh_out),
    KernelDef::new("aten::cosh.out", cosh_out),
    KernelDef::new("aten::asin.out", asin_out),
    KernelDef::new("aten::acos.out", acos_out),
    KernelDef::new("aten::atan.out", atan_out),
    KernelDef::new("aten::asinh.out", asinh_out),
    KernelDef::new("aten::acosh.out", acosh_out),
    KernelDef::new("aten::atanh.out", atanh_out),
    KernelDef::new("aten::erf.out", erf_out),
    KernelDef::new("aten::reciprocal.out", reciprocal_out),
    KernelDef::new("aten::silu.out", silu_out),
    KernelDef::new("aten::gelu.out", gelu_out),
    KernelDef::new("aten::elu.out", elu_out),
    KernelDef::new("aten::leaky_relu.out", leaky_relu_out),
    KernelDef::new("aten::neg.out", neg_out),
    KernelDef::new("aten::abs.out", abs_out),
    KernelDef::new("aten::relu.out", relu_out),
    KernelDef::new("aten::floor.out", floor_out),
    KernelDef::new("aten::ceil.out", ceil_out),
    KernelDef::new("aten::round.out", round_out),
    KernelDef::new("aten::trunc.out", trunc_out),
    KernelDef::new("aten::sign.out", sign_out),
    KernelDef::new("aten::clamp.out", clamp_out),
    KernelDef::new("aten::clamp.Tensor_out", clamp_tensor_out),
    KernelDef::new("aten::hardtanh.out", hardtanh_out),
    KernelDef::new("aten::isnan.out", isnan_out),
    KernelDef::new("aten::isinf.out", isinf_out),
];

/// Unary float functions (integer and bool inputs compute in float32 unless noted).
#[derive(Clone, Copy, Debug)]
enum Uf {
    Tanh,
    Sigmoid,
    Exp,
    Expm1,
    Log,
    Log1p,
    Log2,
    Log10,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Reciprocal,
    Silu,
    GeluErf,
    GeluTanh,
    Elu {
        alpha: Scalar,
        scale: Scalar,
        input_scale: Scalar,
    },
    LeakyRelu(Scalar),
}

fn float_unary_t<T: Float>(op: Uf, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! m {
        ($f:expr) => {
            map1::<T, T>(x, out, $f)
        };
    }
    let one = T::ONE;
    match op {
        Uf::Tanh => m!(|v: T| v.tanh()),
        Uf::Sigmoid => m!(move |v: T| one / (one + (-v).exp())),
        Uf::Exp => m!(|v: T| v.exp()),
        Uf::Expm1 => m!(|v: T| v.expm1()),
        Uf::Log => m!(|v: T| v.ln()),
        Uf::Log1p => m!(|v: T| v.ln1p()),
        Uf::Log2 => m!(|v: T| v.log2()),
        Uf::Log10 => m!(|v: T| v.log10()),
        Uf::Sqrt => m!(|v: T| v.sqrt()),
        Uf::Rsqrt => m!(move |v: T| one / v.sqrt()),
        Uf::Sin => m!(|v: T| v.sin()),
        Uf::Cos => m!(|v: T| v.cos()),
        Uf::Tan => m!(|v: T| v.tan()),
        Uf::Sinh => m!(|v: T| v.sinh()),
        Uf::Cosh => m!(|v: T| v.cosh()),
        Uf::Asin => m!(|v: T| v.asin()),
        Uf::Acos => m!(|v: T| v.acos()),
        Uf::Atan => m!(|v: T| v.atan()),
        Uf::Asinh => m!(|v: T| v.asinh()),
        Uf::Acosh => m!(|v: T| v.acosh()),
        Uf::Atanh => m!(|v: T| v.atanh()),
        Uf::Erf => m!(|v: T| v.erf()),
        Uf::Reciprocal => m!(move |v: T| one / v),
        Uf::Silu => m!(move |v: T| v / (one + (-v).exp())),
        Uf::GeluErf => {
            let k = T::from_f64(core::f64::consts::FRAC_1_SQRT_2);
            let h = T::from_f64(0.5);
            m!(move |v: T| v * h * (one + (v * k).erf()))
        }
        Uf::GeluTanh => {
            let beta =
                T::from_f64(core::f64::consts::SQRT_2 * core::f64::consts::FRAC_2_SQRT_PI * 0.5);
            let kappa = T::from_f64(0.044715);
            let h = T::from_f64(0.5);
            m!(move |v: T| {
                let cube = v * v * v;
                let inner = beta * (v + kappa * cube);
                h * v * (one + inner.tanh())
            })
        }
        Uf::Elu {
            alpha,
            scale,
            input_scale,
        } => {
            let neg = T::from_scalar(alpha) * T::from_scalar(scale);
            let pos = T::from_scalar(scale);
            let ins = T::from_scalar(input_scale);
            let zero = T::ZERO;
            m!(move |v: T| if v <= zero {
                (v * ins).expm1() * neg
            } else {
                v * pos
            })
        }
        Uf::LeakyRelu(s) => {
            let s = T::from_scalar(s);
            let zero = T::ZERO;
            m!(move |v: T| if v > zero { v } else { v * s })
        }
    }
}

/// f32 → f32 fast path on the shared polynomial slice kernels (`linalg::vecmath`, accuracy table
/// there). Returns `false` when `op` has no such kernel.
fn vec_unary(op: Uf, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<bool, KernelError> {
    let f: fn(&[f32], &mut [f32]) -> Res = match op {
        Uf::Tanh => vec::tanh,
        Uf::Sigmoid => vec::sigmoid,
        Uf::Exp => vec::exp,
        Uf::GeluTanh => vec::gelu_tanh,
        Uf::GeluErf => vec::gelu_erf,
        Uf::Sin => vec::sin,
        Uf::Cos => vec::cos,
        _ => return Ok(false),
    };
    let (xs, os) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
    f(xs, os).map_err(|_| KernelError::Shape {
        arg: out.arg(),
        detail: "output shape differs from input",
    })?;
    Ok(true)
}

/// Shared body of the float unary kernels: `[self, (params...,) out, out]` with the out at
/// `out_arg`. Float inputs keep their type (f16/bf16 computed in f32); integer/bool inputs
/// compute in float32 when `ints` is set and are rejected otherwise.
fn float_unary(ctx: &mut Ctx<'_, '_, '_>, op: Uf, ints: bool, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    let common = if x.dtype().is_float() {
        x.dtype()
    } else if ints {
        DType::F32
    } else {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: x.dtype(),
        });
    };
    check_cast(common, ctx.out_dtype(out_arg)?, out_arg)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    if x.dtype() == DType::F32 && out.dtype() == DType::F32 && vec_unary(op, &x, &mut out)? {
        return Ok(());
    }
    if common == DType::F64 {
        float_unary_t::<f64>(op, &x, &mut out)?;
    } else {
        float_unary_t::<f32>(op, &x, &mut out)?;
    }
    renormalize(&mut out, common);
    Ok(())
}

macro_rules! float_unary_kernels {
    ($($f:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".out(self, *, out)`: elementwise; float dtypes ",
            "(f16/bf16 computed in f32), integer and bool inputs compute in float32. ",
            "Contiguous.")]
        fn $f(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            float_unary(ctx, Uf::$op, true, 1)
        }
    )*};
}

float_unary_kernels! {
    tanh_out, Tanh, "tanh";
    sigmoid_out, Sigmoid, "sigmoid";
    exp_out, Exp, "exp";
    expm1_out, Expm1, "expm1";
    log_out, Log, "log";
    log1p_out, Log1p, "log1p";
    log2_out, Log2, "log2";
    log10_out, Log10, "log10";
    sqrt_out, Sqrt, "sqrt";
    rsqrt_out, Rsqrt, "rsqrt";
    sin_out, Sin, "sin";
    cos_out, Cos, "cos";
    tan_out, Tan, "tan";
    sinh_out, Sinh, "sinh";
    cosh_out, Cosh, "cosh";
    asin_out, Asin, "asin";
    acos_out, Acos, "acos";
    atan_out, Atan, "atan";
    asinh_out, Asinh, "asinh";
    acosh_out, Acosh, "acosh";
    atanh_out, Atanh, "atanh";
    erf_out, Erf, "erf";
    reciprocal_out, Reciprocal, "reciprocal";
}

/// `aten::silu.out(self, *, out)`: `x / (1 + exp(-x))`. Float dtypes only.
fn silu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_unary(ctx, Uf::Silu, false, 1)
}

/// `aten::gelu.out(self, *, approximate="none", out)`: `"none"` = `x·½(1+erf(x/√2))`,
/// `"tanh"` = tanh approximation. Float dtypes only; contiguous.
fn gelu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let op = match ctx.string(1)? {
        "none" => Uf::GeluErf,
        "tanh" => Uf::GeluTanh,
        _ => {
            return Err(KernelError::Value {
                arg: 1,
                detail: "approximate must be 'none' or 'tanh'",
            })
        }
    };
    float_unary(ctx, op, false, 2)
}

/// `aten::elu.out(self, alpha=1, scale=1, input_scale=1, *, out)`:
/// `x > 0 ? scale·x : alpha·scale·(exp(input_scale·x) − 1)`. Float dtypes only.
fn elu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let op = Uf::Elu {
        alpha: ctx.scalar(1)?,
        scale: ctx.scalar(2)?,
        input_scale: ctx.scalar(3)?,
    };
    float_unary(ctx, op, false, 4)
}

/// `aten::leaky_relu.out(self, negative_slope=0.01, *, out)`: `x > 0 ? x : slope·x`.
/// Float dtypes only.
fn leaky_relu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let op = Uf::LeakyRelu(ctx.scalar(1)?);
    float_unary(ctx, op, false, 2)
}

/// Unary ops that keep the input's dtype (integers allowed).
#[derive(Clone, Copy, Debug)]
enum Uk {
    Neg,
    Abs,
    Relu,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
    Clamp(Option<Scalar>, Option<Scalar>),
}

fn keep_unary_t<T: Num>(op: Uk, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! m {
        ($f:expr) => {
            map1::<T, T>(x, out, $f)
        };
    }
    let zero = T::ZERO;
    match op {
        Uk::Neg => m!(|v: T| v.negate()),
        Uk::Abs => m!(|v: T| v.absolute()),
        Uk::Relu => m!(move |v: T| if v < zero { zero } else { v }),
        Uk::Floor => m!(|v: T| v.floor()),
        Uk::Ceil => m!(|v: T| v.ceil()),
        Uk::Round => m!(|v: T| v.round()),
        Uk::Trunc => m!(|v: T| v.trunc()),
        Uk::Sign => m!(|v: T| v.sign()),
        Uk::Clamp(Some(lo), Some(hi)) => {
            let (lo, hi) = (T::from_scalar(lo), T::from_scalar(hi));
            m!(move |v: T| v.max_nan(lo).min_nan(hi))
        }
        Uk::Clamp(Some(lo), None) => {
            let lo = T::from_scalar(lo);
            m!(move |v: T| v.max_nan(lo))
        }
        Uk::Clamp(None, Some(hi)) => {
            let hi = T::from_scalar(hi);
            m!(move |v: T| v.min_nan(hi))
        }
        Uk::Clamp(None, None) => Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        }),
    }
}

/// Shared body of the dtype-keeping unary kernels (out at `out_arg`). Bool is rejected
/// except by `sign`.
fn keep_unary(ctx: &mut Ctx<'_, '_, '_>, op: Uk, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    if let Uk::Clamp(None, None) = op {
        return Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        });
    }
    let common = match op {
        Uk::Clamp(lo, hi) => {
            let mut p = Promo::default().tensor(&x);
            if let Some(s) = lo {
                p = p.scalar(s);
            }
            if let Some(s) = hi {
                p = p.scalar(s);
            }
            p.result()
        }
        _ => x.dtype(),
    };
    if common == DType::Bool && !matches!(op, Uk::Sign) {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(out_arg)?, out_arg)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    // f32 clamp with ordinary bounds (ReLU6, hardtanh): a select-based slice loop that
    // vectorises; NaN inputs pass through, as in the generic path.
    if let (Uk::Clamp(lo, hi), DType::F32, DType::F32) = (op, x.dtype(), out.dtype()) {
        let bound = |b: Option<Scalar>, inf: f32| b.map_or(inf, |v| v.as_f64() as f32);
        let (lo, hi) = (bound(lo, f32::NEG_INFINITY), bound(hi, f32::INFINITY));
        if common == DType::F32 && !lo.is_nan() && !hi.is_nan() {
            let xs = x.as_slice::<f32>()?;
            let os = out.as_mut_slice::<f32>()?;
            for (o, &v) in os.iter_mut().zip(xs) {
                let c = v.max(lo).min(hi);
                *o = if v.is_nan() { v } else { c };
            }
            return Ok(());
        }
    }
    with_num!(num_kind(common), T, keep_unary_t::<T>(op, &x, &mut out)?);
    renormalize(&mut out, common);
    Ok(())
}

macro_rules! keep_unary_kernels {
    ($($f:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".out(self, *, out)`: elementwise, result keeps ",
            "the input dtype (integers and floats; bool rejected except by sign). Contiguous.")]
        fn $f(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            keep_unary(ctx, Uk::$op, 1)
        }
    )*};
}

keep_unary_kernels! {
    neg_out, Neg, "neg";
    abs_out, Abs, "abs";
    relu_out, Relu, "relu";
    floor_out, Floor, "floor";
    ceil_out, Ceil, "ceil";
    round_out, Round, "round";
    trunc_out, Trunc, "trunc";
    sign_out, Sign, "sign";
}

/// `aten::clamp.out(self, Scalar? min=None, Scalar? max=None, *, out)`:
/// `min(max(x, min), max)`, NaN propagates, at least one bound. Real dtypes except bool;
/// promoted with the scalars (a float bound makes an integer input float32).
fn clamp_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = Uk::Clamp(ctx.opt_scalar(1)?, ctx.opt_scalar(2)?);
    keep_unary(ctx, op, 3)
}

/// `aten::hardtanh.out(self, min_val=-1, max_val=1, *, out)`: clamp to `[min_val, max_val]`.
/// Real dtypes except bool.
fn hardtanh_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = Uk::Clamp(Some(ctx.scalar(1)?), Some(ctx.scalar(2)?));
    keep_unary(ctx, op, 3)
}

fn clamp_tensor_t<T: Num>(
    x: &TensorRef<'_>,
    lo: Option<TensorRef<'_>>,
    hi: Option<TensorRef<'_>>,
    out: &mut TensorMut<'_>,
) -> Res {
    match (lo, hi) {
        (Some(l), Some(h)) => zip3::<T, T, T, T>(x, &l, &h, out, |v, l, h| v.max_nan(l).min_nan(h)),
        (Some(l), None) => zip2::<T, T, T>(x, &l, out, |v, l| v.max_nan(l)),
        (None, Some(h)) => zip2::<T, T, T>(x, &h, out, |v, h| v.min_nan(h)),
        (None, None) => Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        }),
    }
}

/// `aten::clamp.Tensor_out(self, Tensor? min=None, Tensor? max=None, *, out)`: clamp with
/// tensor bounds, all broadcast together, NaN propagates from any operand. Real dtypes
/// except bool, promoted; contiguous.
fn clamp_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let lo = ctx.opt_input(1)?;
    let hi = ctx.opt_input(2)?;
    let mut p = Promo::default().tensor(&x);
    let mut shape = *x.shape();
    for t in [lo, hi].iter().flatten() {
        p = p.tensor(t);
        shape = broadcast_shapes(&shape, t.shape()).ok_or(bcast_err(t.arg()))?;
    }
    if lo.is_none() && hi.is_none() {
        return Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        });
    }
    let common = p.result();
    if common == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let mut out = ctx.output(3, &shape)?;
    with_num!(
        num_kind(common),
        T,
        clamp_tensor_t::<T>(&x, lo, hi, &mut out)?
    );
    renormalize(&mut out, common);
    Ok(())
}

/// `isnan` / `isinf` body: any input dtype (integers give false), out any dtype (0/1).
fn float_test(ctx: &mut Ctx<'_, '_, '_>, inf: bool) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(1, x.shape())?;
    match (kind(x.dtype()), inf) {
        (Kind::F32, false) => map1::<f32, bool>(&x, &mut out, |v| v.nan()),
        (Kind::F32, true) => map1::<f32, bool>(&x, &mut out, |v| v.inf()),
        (Kind::F64, false) => map1::<f64, bool>(&x, &mut out, |v| v.nan()),
        (Kind::F64, true) => map1::<f64, bool>(&x, &mut out, |v| v.inf()),
        _ => map1::<bool, bool>(&x, &mut out, |_| false),
    }
}

/// `aten::isnan.out(self, *, out)`: any dtype in, 0/1 out (normally bool). Contiguous.
fn isnan_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_test(ctx, false)
}

/// `aten::isinf.out(self, *, out)`: any dtype in, 0/1 out (normally bool). Contiguous.
fn isinf_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_test(ctx, true)
}

#[cfg(test)]
#[path = "unary_tests.rs"]
mod tests;
