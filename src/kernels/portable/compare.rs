//! Comparisons (`eq`, `ne`, `lt`, `le`, `gt`, `ge`, Tensor and Scalar overloads), bitwise
//! (`bitwise_and`/`or`/`xor`/`not`) and logical (`logical_and`/`or`/`xor`/`not`) ops, and
//! selection (`where`, `masked_fill`), all with NumPy broadcasting.
//!
//! Layout contract: every tensor argument is contiguous (checked by `KernelCtx::input`); the
//! output is resized to the broadcast (or input) shape and every element is written.
//!
//! Dtype contract (ATen): the computation dtype is ATen's `result_type` of the operands
//! (dimensioned tensors over zero-dim tensors over Python scalars, by category), which must be
//! castable to the out dtype (no float → integer, no non-bool → bool); the result is then
//! converted to the out dtype. float32 is computed in f32, float64 in f64, float16/bfloat16 in
//! f32 rounded to the half type, integers in i64 wrapped to their common type, bool as bool.

use super::broadcast::{bcast_err, bshape, is_trailing, map1, zip2, zip3};
use super::common::{Ctx, Res};
use super::compute::{kind, num_kind, with_ct, with_num, Bits, Ct, Num};
use super::promote::{check_cast, renormalize, Promo, Rhs};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{KernelDef, Value};
use crate::linalg::vecmath as vec;
use crate::shape::{broadcast_shapes, dims_eq};
use crate::tensor::{TensorMut, TensorRef};

/// The comparison, logic and selection kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    // comparisons
    KernelDef::new("aten::eq.Tensor_out", eq_tensor_out),
    KernelDef::new("aten::ne.Tensor_out", ne_tensor_out),
    KernelDef::new("aten::lt.Tensor_out", lt_tensor_out),
    KernelDef::new("aten::le.Tensor_out", le_tensor_out),
    KernelDef::new("aten::gt.Tensor_out", gt_tensor_out),
    KernelDef::new("aten::ge.Tensor_out", ge_tensor_out),
    KernelDef::new("aten::eq.Scalar_out", eq_scalar_out),
    KernelDef::new("aten::ne.Scalar_out", ne_scalar_out),
    KernelDef::new("aten::lt.Scalar_out", lt_scalar_out),
    KernelDef::new("aten::le.Scalar_out", le_scalar_out),
    KernelDef::new("aten::gt.Scalar_out", gt_scalar_out),
    KernelDef::new("aten::ge.Scalar_out", ge_scalar_out),
    // logic / bitwise
    KernelDef::new("aten::bitwise_and.Tensor_out", bitwise_and_tensor_out),
    KernelDef::new("aten::bitwise_or.Tensor_out", bitwise_or_tensor_out),
    KernelDef::new("aten::bitwise_xor.Tensor_out", bitwise_xor_tensor_out),
    KernelDef::new("aten::bitwise_and.Scalar_out", bitwise_and_scalar_out),
    KernelDef::new("aten::bitwise_or.Scalar_out", bitwise_or_scalar_out),
    KernelDef::new("aten::bitwise_xor.Scalar_out", bitwise_xor_scalar_out),
    KernelDef::new("aten::bitwise_not.out", bitwise_not_out),
    KernelDef::new("aten::logical_and.out", logical_and_out),
    KernelDef::new("aten::logical_or.out", logical_or_out),
    KernelDef::new("aten::logical_xor.out", logical_xor_out),
    KernelDef::new("aten::logical_not.out", logical_not_out),
    // selection
    KernelDef::new("aten::where.self_out", where_out),
    KernelDef::new("aten::masked_fill.Scalar_out", masked_fill_scalar_out),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cm {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn compare_t<T: Num>(op: Cm, x: &TensorRef<'_>, rhs: Rhs<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            match rhs {
                Rhs::T(y) => zip2::<T, T, bool>(x, &y, out, f),
                Rhs::S(s) => {
                    let s = T::from_scalar(s);
                    map1::<T, bool>(x, out, move |a| f(a, s))
                }
            }
        }};
    }
    match op {
        Cm::Eq => go!(|a: T, b: T| a == b),
        Cm::Ne => go!(|a: T, b: T| a != b),
        Cm::Lt => go!(|a: T, b: T| a < b),
        Cm::Le => go!(|a: T, b: T| a <= b),
        Cm::Gt => go!(|a: T, b: T| a > b),
        Cm::Ge => go!(|a: T, b: T| a >= b),
    }
}

/// Comparison kernels: `[self, other (Tensor or Scalar), out, out]`, compared in the
/// promoted dtype, result written as 0/1 in out's dtype (normally bool).
fn compare(ctx: &mut Ctx<'_, '_, '_>, op: Cm, scalar: bool) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let rhs = if scalar {
        Rhs::S(ctx.scalar(1)?)
    } else {
        Rhs::T(ctx.input(1)?)
    };
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(2, &shape)?;
    if out.dtype() == DType::Bool && compare_fast(op, &x, rhs, common, &mut out)? {
        return Ok(());
    }
    with_num!(num_kind(common), T, compare_t::<T>(op, &x, rhs, &mut out))
}

/// Whether `x` (dims `xd`) is a row of the output's last dim and `y` a column of its
/// second-to-last, every other dim of all three 1: `out[i][j] = x[j] op y[i]`.
fn outer(xd: &[usize], yd: &[usize], od: &[usize]) -> bool {
    let r = od.len();
    let ones = |d: &[usize], keep: usize| {
        d.len() <= r && d[..d.len().saturating_sub(keep)].iter().all(|&v| v == 1)
    };
    r >= 2
        && od[..r - 2].iter().all(|&v| v == 1)
        && ones(xd, 1)
        && xd.last() == Some(&od[r - 1])
        && ones(yd, 2)
        && yd.len() >= 2
        && yd[yd.len() - 2..] == [od[r - 2], 1]
        && od[r - 1] > 0
}

/// Same-shape / scalar / row-against-column comparisons of f32 or i64 tensors into a bool
/// mask on the shared slice kernels; `false` when the case is not covered.
fn compare_fast(
    op: Cm,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    common: DType,
    out: &mut TensorMut<'_>,
) -> Result<bool, KernelError> {
    let c = match op {
        Cm::Eq => vec::CmpOp::Eq,
        Cm::Ne => vec::CmpOp::Ne,
        Cm::Lt => vec::CmpOp::Lt,
        Cm::Le => vec::CmpOp::Le,
        Cm::Gt => vec::CmpOp::Gt,
        Cm::Ge => vec::CmpOp::Ge,
    };
    if x.dtype() != common || !matches!(common, DType::F32 | DType::I64) {
        return Ok(false);
    }
    let bad = bcast_err(out.arg());
    let n = out.numel();
    macro_rules! go {
        ($t:ty) => {{
            let xs = x.as_slice::<$t>()?;
            let row = matches!(rhs, Rhs::T(y) if y.dtype() == common
                && outer(x.dims(), y.dims(), out.dims()));
            if xs.len() != n && !row {
                return Ok(false);
            }
            let r = match rhs {
                Rhs::T(y) if !row && y.dtype() == common && y.numel() == n => {
                    let ys = y.as_slice::<$t>()?;
                    vec::compare(c, xs, ys, out.as_mut_slice::<u8>()?)
                }
                Rhs::T(y) if row => {
                    // A row against a column (a causal mask from two position ranges): row
                    // `i` of the output is the row compared with the column's element `i`;
                    // whole rows across the cores (about 2 instructions an element).
                    let ys = y.as_slice::<$t>()?;
                    let os = out.as_mut_slice::<u8>()?;
                    let m = xs.len().max(1);
                    let errors = crate::parallel::FirstError::default();
                    crate::parallel::for_chunks(os, m, 2 * m + 16, |i0, rows, _| {
                        for (o, &yv) in rows.chunks_exact_mut(m).zip(&ys[i0.min(ys.len())..]) {
                            if let Err(e) = vec::compare_scalar(c, xs, yv, o) {
                                errors.put(e);
                            }
                        }
                    });
                    errors.result()
                }
                Rhs::S(s) => {
                    vec::compare_scalar(c, xs, <$t>::from_scalar(s), out.as_mut_slice::<u8>()?)
                }
                _ => return Ok(false),
            };
            r.map_err(|_| bad)?;
        }};
    }
    if common == DType::F32 {
        go!(f32)
    } else {
        go!(i64)
    }
    Ok(true)
}

macro_rules! cmp_kernels {
    ($($t:ident, $s:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".Tensor_out(self, other, *, out)`: broadcast ",
            "comparison in the promoted dtype (any real dtypes); out is normally bool (any ",
            "dtype receives 0/1). Contiguous.")]
        fn $t(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            compare(ctx, Cm::$op, false)
        }
        #[doc = concat!("`aten::", $doc, ".Scalar_out(self, Scalar other, *, out)`: ",
            "comparison with a scalar in the promoted dtype; out normally bool. Contiguous.")]
        fn $s(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            compare(ctx, Cm::$op, true)
        }
    )*};
}

cmp_kernels! {
    eq_tensor_out, eq_scalar_out, Eq, "eq";
    ne_tensor_out, ne_scalar_out, Ne, "ne";
    lt_tensor_out, lt_scalar_out, Lt, "lt";
    le_tensor_out, le_scalar_out, Le, "le";
    gt_tensor_out, gt_scalar_out, Gt, "gt";
    ge_tensor_out, ge_scalar_out, Ge, "ge";
}

// ---------------------------------------------------------------------------------------------
// Bitwise and logical
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bw {
    And,
    Or,
    Xor,
}

fn bitwise_t<T: Bits>(op: Bw, x: &TensorRef<'_>, rhs: Rhs<'_>, out: &mut TensorMut<'_>) -> Res {
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
    match op {
        Bw::And => go!(|a: T, b: T| a.and(b)),
        Bw::Or => go!(|a: T, b: T| a.or(b)),
        Bw::Xor => go!(|a: T, b: T| a.xor(b)),
    }
}

/// Bitwise kernels: `[self, other (Tensor or Scalar), out, out]`, integer and bool dtypes.
fn bitwise(ctx: &mut Ctx<'_, '_, '_>, op: Bw, scalar: bool) -> Res {
    ctx.expect_args(4)?;
    if !scalar && bool_repeated(ctx, op)? {
        return Ok(());
    }
    let x = ctx.input(0)?;
    let rhs = if scalar {
        Rhs::S(ctx.scalar(1)?)
    } else {
        Rhs::T(ctx.input(1)?)
    };
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    if common.is_float() {
        let arg = if x.dtype().is_float() { 0 } else { 1 };
        return Err(KernelError::UnsupportedDType { arg, dtype: common });
    }
    check_cast(common, ctx.out_dtype(2)?, 2)?;
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(2, &shape)?;
    if common == DType::Bool {
        bitwise_t::<bool>(op, &x, rhs, &mut out)?;
    } else {
        bitwise_t::<i64>(op, &x, rhs, &mut out)?;
        renormalize(&mut out, common);
    }
    Ok(())
}

/// The mask path of [`bitwise`]: three bool tensors, `other` of `self`'s shape or of its
/// trailing dims (a padding mask over a causal mask), the output already of `self`'s shape;
/// bound to raw storage, no views and no broadcast plan. Each element is what the general
/// path computes (bytes read as bools: nonzero is true; results 0 or 1). `false` (nothing
/// read or written) for any other call.
fn bool_repeated(ctx: &mut Ctx<'_, '_, '_>, op: Bw) -> Result<bool, KernelError> {
    for a in 0..3 {
        if !matches!(ctx.value(a)?, Value::Tensor(_)) || ctx.out_dtype(a)? != DType::Bool {
            return Ok(false);
        }
    }
    let (xd, yd, od) = (ctx.dims(0)?, ctx.dims(1)?, ctx.dims(2)?);
    if !dims_eq(xd, od) || !is_trailing(yd, xd) {
        return Ok(false);
    }
    let (x, xn, _) = ctx.input_raw(0)?;
    let (y, yn, _) = ctx.input_raw(1)?;
    let (o, on, _) = ctx.output_raw(2)?;
    if xn == 0 {
        return Ok(true);
    }
    if xn != on || yn == 0 || !xn.is_multiple_of(yn) {
        return Err(bcast_err(2));
    }
    // SAFETY: the raw bindings hand out `xn`/`yn` readable bytes at `x`/`y` and `on` (= xn)
    // writable bytes at `o`, which overlap no argument read (the rules of views), for the call.
    let (xs, ys, os) = unsafe {
        (
            core::slice::from_raw_parts(x, xn),
            core::slice::from_raw_parts(y, yn),
            core::slice::from_raw_parts_mut(o, on),
        )
    };
    // Rows of `other`'s length across the team (elementwise: any grouping gives the same bytes).
    // A row's loop costs about 30 instructions besides a quarter per byte: `yn + 128`
    // multiply-adds' worth (four to an instruction).
    crate::parallel::for_chunks(os, yn, yn + 128, |u, o, _| {
        let x = &xs[u * yn..u * yn + o.len()];
        match op {
            Bw::And => repeated_rows(o, x, ys, |a, b| ((a != 0) & (b != 0)) as u8),
            Bw::Or => repeated_rows(o, x, ys, |a, b| ((a | b) != 0) as u8),
            Bw::Xor => repeated_rows(o, x, ys, |a, b| ((a != 0) ^ (b != 0)) as u8),
        }
    });
    Ok(true)
}

/// `o[r·len + j] = f(x[r·len + j], y[j])` for every whole row (`len = y.len() > 0`): one
/// loop per operation, so that the compiler vectorises it.
#[inline(always)]
fn repeated_rows(o: &mut [u8], x: &[u8], y: &[u8], f: impl Fn(u8, u8) -> u8 + Copy) {
    for (orow, xrow) in o.chunks_exact_mut(y.len()).zip(x.chunks_exact(y.len())) {
        for ((o, &a), &b) in orow.iter_mut().zip(xrow).zip(y) {
            *o = f(a, b);
        }
    }
}

/// `aten::bitwise_and.Tensor_out(self, other, *, out)`: broadcast `&` (bool: logical and).
/// Integer and bool dtypes; contiguous.
fn bitwise_and_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::And, false)
}
/// `aten::bitwise_or.Tensor_out(self, other, *, out)`: broadcast `|`. Integer and bool.
fn bitwise_or_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Or, false)
}
/// `aten::bitwise_xor.Tensor_out(self, other, *, out)`: broadcast `^`. Integer and bool.
fn bitwise_xor_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Xor, false)
}
/// `aten::bitwise_and.Scalar_out(self, Scalar other, *, out)`. Integer and bool (the scalar
/// must be Int or Bool).
fn bitwise_and_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::And, true)
}
/// `aten::bitwise_or.Scalar_out(self, Scalar other, *, out)`. Integer and bool.
fn bitwise_or_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Or, true)
}
/// `aten::bitwise_xor.Scalar_out(self, Scalar other, *, out)`. Integer and bool.
fn bitwise_xor_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Xor, true)
}

/// `aten::bitwise_not.out(self, *, out)`: `~x` (bool: logical not). Integer and bool dtypes.
fn bitwise_not_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let dt = x.dtype();
    if dt.is_float() {
        return Err(KernelError::UnsupportedDType { arg: 0, dtype: dt });
    }
    check_cast(dt, ctx.out_dtype(1)?, 1)?;
    let mut out = ctx.output(1, x.shape())?;
    if dt == DType::Bool {
        map1::<bool, bool>(&x, &mut out, |v| !v)
    } else {
        map1::<i64, i64>(&x, &mut out, |v| !v)?;
        renormalize(&mut out, dt);
        Ok(())
    }
}

/// Logical kernels: `[self, other, out, out]`, any dtypes (nonzero and NaN are true); out
/// receives 0/1 in its dtype.
fn logical(ctx: &mut Ctx<'_, '_, '_>, op: Bw) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    let shape = bshape(&x, &y)?;
    let mut out = ctx.output(2, &shape)?;
    match op {
        Bw::And => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a & b),
        Bw::Or => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a | b),
        Bw::Xor => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a ^ b),
    }
}

/// `aten::logical_and.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_and_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::And)
}
/// `aten::logical_or.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_or_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::Or)
}
/// `aten::logical_xor.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_xor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::Xor)
}

/// `aten::logical_not.out(self, *, out)`: `x == 0`; any dtypes, out any dtype (0/1).
fn logical_not_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(1, x.shape())?;
    if x.dtype() == DType::Bool && out.dtype() == DType::Bool {
        let (xs, os) = (x.as_slice::<u8>()?, out.as_mut_slice::<u8>()?);
        return vec::logical_not(xs, os).map_err(|_| bcast_err(1));
    }
    map1::<bool, bool>(&x, &mut out, |v| !v)
}

// ---------------------------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------------------------

/// `aten::where.self_out(condition, self, other, *, out)`: `condition ? self : other`, all
/// three broadcast together. Condition bool (or uint8); self/other any dtypes, promoted;
/// contiguous.
fn where_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    if where_f32_raw(ctx)? {
        return Ok(());
    }
    let c = ctx.input(0)?;
    let a = ctx.input(1)?;
    let b = ctx.input(2)?;
    if !matches!(c.dtype(), DType::Bool | DType::U8) {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: c.dtype(),
        });
    }
    let common = Promo::default().tensor(&a).tensor(&b).result();
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let shape = broadcast_shapes(c.shape(), &bshape(&a, &b)?).ok_or(bcast_err(0))?;
    let mut out = ctx.output(3, &shape)?;
    let f32s = [a.dtype(), b.dtype(), out.dtype()] == [DType::F32; 3];
    if f32s && c.numel() == out.numel() {
        // Same-shape condition over f32 values: one select per element, or per element
        // between two broadcast scalars.
        let (cs, xs, ys) = (
            c.as_slice::<u8>()?,
            a.as_slice::<f32>()?,
            b.as_slice::<f32>()?,
        );
        let os = out.as_mut_slice::<f32>()?;
        let n = os.len();
        let same = xs.len() == n && ys.len() == n;
        if same || (xs.len() == 1 && ys.len() == 1) {
            return select_f32(cs, xs, ys, same, os);
        }
    }
    with_ct!(
        kind(common),
        T,
        zip3::<bool, T, T, T>(&c, &a, &b, &mut out, |c, x, y| if c { x } else { y })?
    );
    renormalize(&mut out, common);
    Ok(())
}

/// The mask path of [`where_out`]: a bool (or u8) condition of the output's shape choosing
/// between two f32 operands each of that shape or of one element (a causal mask's `0` and
/// `-inf`), bound to raw storage with no views and no broadcast plan; the selects are those
/// of the general path's f32 branch, split across the team the same way. `false` (nothing
/// read or written) for any other call.
fn where_f32_raw(ctx: &mut Ctx<'_, '_, '_>) -> Result<bool, KernelError> {
    for a in 0..4 {
        if !matches!(ctx.value(a)?, Value::Tensor(_)) {
            return Ok(false);
        }
    }
    if !matches!(ctx.out_dtype(0)?, DType::Bool | DType::U8) {
        return Ok(false);
    }
    for a in 1..4 {
        if ctx.out_dtype(a)? != DType::F32 {
            return Ok(false);
        }
    }
    let (cd, od) = (ctx.dims(0)?, ctx.dims(3)?);
    if !dims_eq(cd, od) {
        return Ok(false);
    }
    let n = cd.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let Some(n) = n else { return Ok(false) };
    // Both value operands of the condition's dims, or both of one element and of rank at
    // most the condition's (so that the broadcast shape is the condition's).
    let one = |d: &[usize]| d.len() <= cd.len() && d.iter().all(|&x| x == 1);
    let (ad, bd) = (ctx.dims(1)?, ctx.dims(2)?);
    let same = dims_eq(ad, cd) && dims_eq(bd, cd);
    if !(same || one(ad) && one(bd)) {
        return Ok(false);
    }
    let (na, nb) = if same { (n, n) } else { (1, 1) };
    let (c, cn, _) = ctx.input_raw(0)?;
    let xs = ctx.input_f32s(1, na)?;
    let ys = ctx.input_f32s(2, nb)?;
    let os = ctx.output_f32s(3, n)?;
    let cs: &[u8] = if cn == 0 {
        &[]
    } else {
        // SAFETY: `input_raw` hands out `cn` readable bytes at `c` for the call, not written
        // by its output (the rules of views); a short condition is `select_f32`'s error.
        unsafe { core::slice::from_raw_parts(c, cn) }
    };
    select_f32(cs, xs, ys, same, os).map(|_| true)
}

/// `os[i] = cs[i] != 0 ? xs[i] : ys[i]` (`same`), or between the one-element `xs` and `ys`,
/// in chunks of 64 across the team's cores: the f32 selects of [`where_out`]. A select costs
/// about 1.5 instructions an element, six multiply-adds' worth.
fn select_f32(cs: &[u8], xs: &[f32], ys: &[f32], same: bool, os: &mut [f32]) -> Res {
    let errors = crate::parallel::FirstError::default();
    crate::parallel::for_chunks(os, 64, 64 * 6, |u, o, _| {
        let (lo, hi) = (u * 64, u * 64 + o.len());
        let r = match (cs.get(lo..hi), same) {
            (Some(c), true) => match (xs.get(lo..hi), ys.get(lo..hi)) {
                (Some(x), Some(y)) => vec::where_select(c, x, y, o),
                _ => Err(bcast_err(3)),
            },
            (Some(c), false) => match (xs.first(), ys.first()) {
                (Some(&x), Some(&y)) => vec::where_scalars(c, x, y, o),
                _ => Err(bcast_err(3)),
            },
            (None, _) => Err(bcast_err(3)),
        };
        if r.is_err() {
            errors.put(bcast_err(3));
        }
    });
    errors.result()
}

/// `aten::masked_fill.Scalar_out(self, mask, Scalar value, *, out)`: `mask ? value : self`,
/// mask (bool) broadcast with self. Any self dtype (value cast to it); contiguous.
fn masked_fill_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let m = ctx.input(1)?;
    let value = ctx.scalar(2)?;
    if m.dtype() != DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: m.dtype(),
        });
    }
    let common = x.dtype();
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let shape = bshape(&x, &m)?;
    let mut out = ctx.output(3, &shape)?;
    with_ct!(kind(common), T, {
        let v = T::from_scalar(value);
        zip2::<T, bool, T>(&x, &m, &mut out, move |a, m| if m { v } else { a })?
    });
    renormalize(&mut out, common);
    Ok(())
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
