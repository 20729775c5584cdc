//! Prim ops: symbolic sizes, scalar arithmetic on SymInts/SymFloats (`executorch_prim::*`),
//! `et_view` (aliasing reshape) and the in-place `aten::copy_`.
//!
//! Convention (notes 6.3): `args = [inputs..., out]`, and the kernel overwrites the `out`
//! EValue with its result (Int, Double or Bool).

use super::common::Ctx;
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::kernel_api::Value;
use crate::shape::broadcast_shapes;
use crate::tensor::{read_f64, read_i64, write_f64, write_i64, NdIndex, Shape};

fn put<'p>(ctx: &mut Ctx<'_, '_, 'p>, s: Scalar) -> Result<(), KernelError> {
    let last = ctx.nargs() - 1;
    ctx.set_value(
        last,
        match s {
            Scalar::Int(v) => Value::Int(v),
            Scalar::Double(v) => Value::Double(v),
            Scalar::Bool(v) => Value::Bool(v),
        },
    )
}

/// `aten::sym_size.int [self, dim, out]`: out = Int(self.size(dim)).
fn sym_size(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(3)?;
    let t = ctx.input_any_order(0)?;
    let dim = t.shape().wrap_dim(ctx.int(1)?).ok_or(KernelError::Value {
        arg: 1,
        detail: "dim out of range",
    })?;
    let size = if t.rank() == 0 { 1 } else { t.dims()[dim] };
    put(ctx, Scalar::Int(size as i64))
}

/// `aten::sym_numel [self, out]`.
fn sym_numel(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(2)?;
    let n = ctx.input_any_order(0)?.numel();
    put(ctx, Scalar::Int(n as i64))
}

/// `aten::_local_scalar_dense [self, out]`: the single element as a scalar (`.item()`).
fn local_scalar_dense(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(2)?;
    let t = ctx.input_any_order(0)?;
    if t.numel() != 1 {
        return Err(KernelError::Shape {
            arg: 0,
            detail: "item() needs exactly one element",
        });
    }
    let b = t.bytes();
    let s = match t.dtype() {
        DType::Bool => Scalar::Bool(b[0] != 0),
        d if d.is_float() => Scalar::Double(read_f64(d, b, 0)),
        d => Scalar::Int(read_i64(d, b, 0)),
    };
    put(ctx, s)
}

fn two(ctx: &Ctx) -> Result<(Scalar, Scalar), KernelError> {
    ctx.expect_args(3)?;
    Ok((ctx.scalar(0)?, ctx.scalar(1)?))
}

/// Int∘Int stays Int (wrapping like C), anything with a Double becomes Double.
fn arith(
    ctx: &mut Ctx,
    fi: fn(i64, i64) -> Option<i64>,
    fd: fn(f64, f64) -> f64,
) -> Result<(), KernelError> {
    let (a, b) = two(ctx)?;
    let r = match (a, b) {
        (Scalar::Double(_), _) | (_, Scalar::Double(_)) => {
            Scalar::Double(fd(a.as_f64(), b.as_f64()))
        }
        _ => Scalar::Int(fi(a.as_i64(), b.as_i64()).ok_or(KernelError::Value {
            arg: 1,
            detail: "integer division by zero",
        })?),
    };
    put(ctx, r)
}

fn add(ctx: &mut Ctx) -> Result<(), KernelError> {
    arith(ctx, |a, b| Some(a.wrapping_add(b)), |a, b| a + b)
}
fn sub(ctx: &mut Ctx) -> Result<(), KernelError> {
    arith(ctx, |a, b| Some(a.wrapping_sub(b)), |a, b| a - b)
}
fn mul(ctx: &mut Ctx) -> Result<(), KernelError> {
    arith(ctx, |a, b| Some(a.wrapping_mul(b)), |a, b| a * b)
}
/// Python floor division.
fn floordiv(ctx: &mut Ctx) -> Result<(), KernelError> {
    arith(
        ctx,
        |a, b| {
            if b == 0 {
                return None;
            }
            let q = a.wrapping_div(b);
            Some(if (a % b != 0) && ((a < 0) != (b < 0)) {
                q - 1
            } else {
                q
            })
        },
        |a, b| libm::floor(a / b),
    )
}
/// Python true division: always Double.
fn truediv(ctx: &mut Ctx) -> Result<(), KernelError> {
    let (a, b) = two(ctx)?;
    put(ctx, Scalar::Double(a.as_f64() / b.as_f64()))
}
/// C `%` on ints (truncating); `fmod` on doubles.
fn modulo(ctx: &mut Ctx) -> Result<(), KernelError> {
    arith(
        ctx,
        |a, b| {
            if b == 0 {
                None
            } else {
                Some(a.wrapping_rem(b))
            }
        },
        libm::fmod,
    )
}
/// C `/` on ints (truncating toward zero).
fn floordiv_int(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(3)?;
    let (a, b) = (ctx.int(0)?, ctx.int(1)?);
    if b == 0 {
        return Err(KernelError::Value {
            arg: 1,
            detail: "integer division by zero",
        });
    }
    put(ctx, Scalar::Int(a.wrapping_div(b)))
}

fn compare(ctx: &mut Ctx, f: fn(core::cmp::Ordering) -> bool) -> Result<(), KernelError> {
    let (a, b) = two(ctx)?;
    let ord = match (a, b) {
        (Scalar::Double(_), _) | (_, Scalar::Double(_)) => a.as_f64().partial_cmp(&b.as_f64()),
        _ => Some(a.as_i64().cmp(&b.as_i64())),
    };
    put(ctx, Scalar::Bool(ord.is_some_and(f)))
}
fn eq(ctx: &mut Ctx) -> Result<(), KernelError> {
    compare(ctx, |o| o.is_eq())
}
fn gt(ctx: &mut Ctx) -> Result<(), KernelError> {
    compare(ctx, |o| o.is_gt())
}
fn lt(ctx: &mut Ctx) -> Result<(), KernelError> {
    compare(ctx, |o| o.is_lt())
}
fn ge(ctx: &mut Ctx) -> Result<(), KernelError> {
    compare(ctx, |o| o.is_ge())
}
fn le(ctx: &mut Ctx) -> Result<(), KernelError> {
    compare(ctx, |o| o.is_le())
}

fn unary(ctx: &mut Ctx, f: fn(Scalar) -> Scalar) -> Result<(), KernelError> {
    ctx.expect_args(2)?;
    let a = ctx.scalar(0)?;
    put(ctx, f(a))
}
fn neg(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| match a {
        Scalar::Double(v) => Scalar::Double(-v),
        _ => Scalar::Int(a.as_i64().wrapping_neg()),
    })
}
fn sym_float(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Double(a.as_f64()))
}
fn sym_int(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Int(a.as_i64()))
}
fn ceil(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Int(libm::ceil(a.as_f64()) as i64))
}
fn trunc(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Int(libm::trunc(a.as_f64()) as i64))
}
/// Python `round`: half to even.
fn round(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Int(libm::rint(a.as_f64()) as i64))
}
fn sym_not(ctx: &mut Ctx) -> Result<(), KernelError> {
    unary(ctx, |a| Scalar::Bool(!a.as_bool()))
}
fn sym_max(ctx: &mut Ctx) -> Result<(), KernelError> {
    let (a, b) = two(ctx)?;
    put(ctx, Scalar::Int(a.as_i64().max(b.as_i64())))
}
fn sym_min(ctx: &mut Ctx) -> Result<(), KernelError> {
    let (a, b) = two(ctx)?;
    put(ctx, Scalar::Int(a.as_i64().min(b.as_i64())))
}
/// `sym_ite [cond, then, else, out]`.
fn sym_ite(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(4)?;
    let v = if ctx.bool(0)? {
        ctx.value(1)?
    } else {
        ctx.value(2)?
    };
    ctx.set_value(3, v)
}

/// Resolves a view size list with at most one -1 against `numel`.
pub(crate) fn infer_size(sizes: &[i64], numel: usize, arg: usize) -> Result<Shape, KernelError> {
    let bad = |detail| KernelError::Value { arg, detail };
    let mut shape = Shape::scalar();
    let mut infer = None;
    let mut known = 1usize;
    for (i, &s) in sizes.iter().enumerate() {
        if s == -1 {
            if infer.replace(i).is_some() {
                return Err(bad("only one dimension can be -1"));
            }
            shape.push(1).ok_or(bad("rank above 16"))?;
        } else if s < 0 {
            return Err(bad("negative size"));
        } else {
            known = known.checked_mul(s as usize).ok_or(bad("size overflows"))?;
            shape.push(s as usize).ok_or(bad("rank above 16"))?;
        }
    }
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(bad("shape is invalid for the input size"));
        }
        shape.dims_mut()[i] = numel / known;
    } else if known != numel {
        return Err(bad("shape is invalid for the input size"));
    }
    Ok(shape)
}

/// `executorch_prim::et_view.default [self, size, out]`: out aliases self's data with the
/// new shape (no copy).
fn et_view(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(3)?;
    let src = ctx.input(0)?;
    let sizes = ctx.int_list(1)?;
    let shape = infer_size(&sizes, src.numel(), 1)?;
    ctx.alias_output(2, 0, &shape)
}

/// `aten::copy_ [self, src, non_blocking, out]`: copies `src` (broadcast to self's shape,
/// converted to self's dtype) into `self` in place.
fn copy_(ctx: &mut Ctx) -> Result<(), KernelError> {
    ctx.expect_args(4)?;
    let src = ctx.input(1)?;
    let dst_shape = *ctx.input(0)?.shape();
    if broadcast_shapes(&dst_shape, src.shape()).as_ref() != Some(&dst_shape) {
        return Err(KernelError::Shape {
            arg: 1,
            detail: "src does not broadcast to self",
        });
    }
    let mut dst = ctx.output(0, &dst_shape)?;
    let n = dst.numel();
    let (dt, st) = (dst.dtype(), src.dtype());
    let sb = src.bytes();
    let db = dst.bytes_mut();
    let rank = dst_shape.rank();
    // Map every output index to the broadcast source index.
    let src_dims = src.dims();
    let off = rank - src_dims.len();
    let mut sstride = [0usize; 16];
    let mut acc = 1;
    for i in (0..src_dims.len()).rev() {
        sstride[off + i] = if src_dims[i] == 1 { 0 } else { acc };
        acc *= src_dims[i];
    }
    let mut idx = NdIndex::new(dst_shape.dims());
    let jumps = idx.jumps(&sstride[..rank]);
    let mut s = 0usize;
    for o in 0..n {
        if dt == st {
            let w = dt.size();
            db[o * w..o * w + w].copy_from_slice(&sb[s * w..s * w + w]);
        } else if dt.is_float() {
            write_f64(dt, db, o, read_f64(st, sb, s));
        } else {
            write_i64(dt, db, o, read_i64(st, sb, s));
        }
        if let Some(d) = idx.advance() {
            s = s.wrapping_add(jumps[d]);
        }
    }
    Ok(())
}

pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::sym_size.int", sym_size),
    KernelDef::new("aten::sym_numel", sym_numel),
    KernelDef::new("aten::_local_scalar_dense", local_scalar_dense),
    KernelDef::new("executorch_prim::add.Scalar", add),
    KernelDef::new("executorch_prim::sub.Scalar", sub),
    KernelDef::new("executorch_prim::mul.Scalar", mul),
    KernelDef::new("executorch_prim::floordiv.Scalar", floordiv),
    KernelDef::new("executorch_prim::truediv.Scalar", truediv),
    KernelDef::new("executorch_prim::mod.Scalar", modulo),
    KernelDef::new("executorch_prim::mod.int", modulo),
    KernelDef::new("executorch_prim::floordiv.int", floordiv_int),
    KernelDef::new("executorch_prim::eq.Scalar", eq),
    KernelDef::new("executorch_prim::gt.Scalar", gt),
    KernelDef::new("executorch_prim::lt.Scalar", lt),
    KernelDef::new("executorch_prim::ge.Scalar", ge),
    KernelDef::new("executorch_prim::le.Scalar", le),
    KernelDef::new("executorch_prim::neg.Scalar", neg),
    KernelDef::new("executorch_prim::sym_float.Scalar", sym_float),
    KernelDef::new("executorch_prim::sym_int.Scalar", sym_int),
    KernelDef::new("executorch_prim::ceil.Scalar", ceil),
    KernelDef::new("executorch_prim::round.Scalar", round),
    KernelDef::new("executorch_prim::trunc.Scalar", trunc),
    KernelDef::new("executorch_prim::sym_max.Scalar", sym_max),
    KernelDef::new("executorch_prim::sym_min.Scalar", sym_min),
    KernelDef::new("executorch_prim::sym_not.Scalar", sym_not),
    KernelDef::new("executorch_prim::sym_ite.Scalar", sym_ite),
    KernelDef::new("executorch_prim::et_view.default", et_view),
    KernelDef::new("aten::copy_", copy_),
];

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::testing::OpTest;
    use crate::{Error, KernelError};

    /// Runs a binary prim op on two scalars and reads back the placeholder it overwrote.
    fn scalar_result(op: &str, a: f64, b: f64, ints: bool) -> Result<crate::dtype::Scalar, Error> {
        use crate::dtype::Scalar;
        use crate::kernel_api::Value;
        let mut t = OpTest::new(op);
        let (x, y) = if ints {
            (t.int(a as i64), t.int(b as i64))
        } else {
            (t.double(a), t.double(b))
        };
        let out = t.int(0);
        t.call(&[x, y, out]);
        let v = t.run_values()?;
        Ok(match v[out as usize] {
            Value::Int(i) => Scalar::Int(i),
            Value::Double(d) => Scalar::Double(d),
            Value::Bool(b) => Scalar::Bool(b),
            _ => panic!("not a scalar"),
        })
    }

    #[test]
    fn scalar_arithmetic() {
        use crate::dtype::Scalar::*;
        assert_eq!(
            scalar_result("executorch_prim::add.Scalar", 3.0, 4.0, true).unwrap(),
            Int(7)
        );
        assert_eq!(
            scalar_result("executorch_prim::add.Scalar", 3.0, 0.5, false).unwrap(),
            Double(3.5)
        );
        assert_eq!(
            scalar_result("executorch_prim::mul.Scalar", -3.0, 4.0, true).unwrap(),
            Int(-12)
        );
        assert_eq!(
            scalar_result("executorch_prim::floordiv.Scalar", -7.0, 2.0, true).unwrap(),
            Int(-4)
        );
        assert_eq!(
            scalar_result("executorch_prim::floordiv.int", -7.0, 2.0, true).unwrap(),
            Int(-3)
        );
        assert_eq!(
            scalar_result("executorch_prim::mod.Scalar", -7.0, 2.0, true).unwrap(),
            Int(-1)
        );
        assert_eq!(
            scalar_result("executorch_prim::truediv.Scalar", 7.0, 2.0, true).unwrap(),
            Double(3.5)
        );
        assert_eq!(
            scalar_result("executorch_prim::lt.Scalar", 1.0, 2.0, true).unwrap(),
            Bool(true)
        );
        assert_eq!(
            scalar_result("executorch_prim::ge.Scalar", 1.0, 2.0, false).unwrap(),
            Bool(false)
        );
        assert_eq!(
            scalar_result("executorch_prim::sym_max.Scalar", 1.0, 2.0, true).unwrap(),
            Int(2)
        );
        match scalar_result("executorch_prim::floordiv.Scalar", 1.0, 0.0, true) {
            Err(Error::Kernel {
                source: KernelError::Value { .. },
                instruction: 0,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sym_size_reads_dims() {
        use crate::kernel_api::Value;
        let mut t = OpTest::new("aten::sym_size.int");
        let a = t.input_f32(&[2, 5, 3], &[0.0; 30]);
        let d = t.int(-2);
        let out = t.int(0);
        t.call(&[a, d, out]);
        assert!(matches!(
            t.run_values().unwrap()[out as usize],
            Value::Int(5)
        ));
    }

    #[test]
    fn copy_broadcasts_and_casts() {
        let mut t = OpTest::new("aten::copy_");
        let dst = t.output(DType::F32, &[2, 3]);
        let src = t.input_i64(&[3], &[1, -2, 3]);
        let nb = t.boolean(false);
        t.call(&[dst, src, nb, dst]);
        let out = t.run().unwrap();
        assert_eq!(out[0].f32(), vec![1.0, -2.0, 3.0, 1.0, -2.0, 3.0]);
    }

    #[test]
    fn et_view_aliases() {
        let mut t = OpTest::new("executorch_prim::et_view.default");
        let a = t.input_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let sz = t.int_list(&[3, -1]);
        let out = t.output_unplanned(DType::F32, &[3, 2]);
        t.call(&[a, sz, out]);
        let out = t.run().unwrap();
        assert_eq!(out[0].shape, vec![3, 2]);
        assert_eq!(out[0].f32(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut t = OpTest::new("executorch_prim::et_view.default");
        let a = t.input_f32(&[2, 3], &[0.0; 6]);
        let sz = t.int_list(&[4, -1]);
        let out = t.output_unplanned(DType::F32, &[3, 2]);
        t.call(&[a, sz, out]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 1, .. }
        ));
    }
}
