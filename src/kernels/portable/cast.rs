//! Dtype-converting copies and dim-order ops: `_to_copy`, `clone`, `alias_copy`,
//! `detach_copy`, `lift_fresh_copy` (elementwise C++ `static_cast` conversion to the out dtype),
//! and `_clone_dim_order` / `_to_dim_order_copy` (from any dim order of `self` into the
//! requested default or channels-last order, through the strided copy engine, converting the
//! dtype for `_to_dim_order_copy`).
//!
//! Layout contract: inputs and outputs are contiguous (the default dim order), except the `self`
//! input of the dim-order ops, which may use any dim order; every output element is written.

use super::broadcast::map1;
use super::common::{shape_err, value_err, Ctx, Res};
use super::compute::{kind, with_ct, Ct};
use super::convert::convert_run;
use super::copy_engine::{convert_view, copy_same, copy_view, View};
use super::copy_prepared::{
    prepare_clone, prepare_dim_order_copy, prepare_plain_copy, prepare_to_copy,
    prepare_to_dim_order_copy,
};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{TensorMut, TensorRef, MAX_RANK};

/// The cast, copy and dim-order kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::_to_copy.out", to_copy_out).with_prepare(prepare_to_copy),
    KernelDef::new("aten::clone.out", clone_out).with_prepare(prepare_clone),
    KernelDef::new("aten::alias_copy.out", alias_copy_out).with_prepare(prepare_plain_copy),
    KernelDef::new("aten::detach_copy.out", detach_copy_out).with_prepare(prepare_plain_copy),
    KernelDef::new("aten::lift_fresh_copy.out", lift_fresh_copy_out)
        .with_prepare(prepare_plain_copy),
    KernelDef::new("dim_order_ops::_clone_dim_order.out", clone_dim_order_out)
        .with_prepare(prepare_dim_order_copy),
    KernelDef::new(
        "dim_order_ops::_to_dim_order_copy.out",
        to_dim_order_copy_out,
    )
    .with_prepare(prepare_to_dim_order_copy),
];

/// Elementwise copy of `x` into `out` (same numel) converting to out's dtype like C++
/// `static_cast` (float → int truncates, nonzero/NaN → true).
fn cast_copy(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    if x.dtype() == out.dtype() {
        let arg = out.arg();
        return copy_same(x.bytes(), out.bytes_mut(), arg);
    }
    with_ct!(
        kind(x.dtype()),
        A,
        with_ct!(kind(out.dtype()), U, map1::<A, U>(x, out, Ct::cast::<U>))
    )
}

/// Copy kernels: `[self, (ignored args...), out, out]` with the out at `out_arg`.
fn copy_kernel(ctx: &mut Ctx<'_, '_, '_>, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    cast_copy(&x, &mut out)
}

/// `aten::_to_copy.out(self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
/// out)`: copy converted to out's dtype (any dtypes). Contiguous.
fn to_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 3)
}

/// `aten::clone.out(self, *, MemoryFormat? memory_format=None, out)`: copy (converted to
/// out's dtype). Contiguous.
fn clone_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 2)
}

/// `aten::alias_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn alias_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

/// `aten::detach_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn detach_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

/// `aten::lift_fresh_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn lift_fresh_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

/// Element strides of `x` from its dim order (notes 3.3): innermost dim stride 1, then outward;
/// a size-0 dim reuses the previous stride.
fn dim_order_strides(x: &TensorRef, arg: usize) -> Result<[isize; MAX_RANK], KernelError> {
    let order = x.dim_order();
    let dims = x.dims();
    let r = dims.len();
    let mut seen = 0u32;
    for &o in order {
        let o = o as usize;
        if o >= r || seen & (1 << o) != 0 {
            return Err(value_err(arg, "invalid dim_order"));
        }
        seen |= 1 << o;
    }
    let mut st = [0isize; MAX_RANK];
    if r == 0 {
        return Ok(st);
    }
    st[order[r - 1] as usize] = 1;
    for i in (0..r - 1).rev() {
        let inner = order[i + 1] as usize;
        let sz = dims[inner];
        st[order[i] as usize] = if sz == 0 {
            st[inner]
        } else {
            st[inner].saturating_mul(sz.min(isize::MAX as usize) as isize)
        };
    }
    Ok(st)
}

/// Shared body of `_clone_dim_order` (`cast` false) and `_to_dim_order_copy`.
fn dim_order_copy(ctx: &mut Ctx, cast: bool) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input_any_order(0)?;
    let _non_blocking = ctx.bool(1)?;
    let order = ctx.opt_int_list(2)?;
    let r = x.rank();
    if let Some(o) = &order {
        if o.len() != r {
            return Err(value_err(
                2,
                "dim_order length must equal the tensor's rank",
            ));
        }
        let mut seen = 0u32;
        for &d in o.iter() {
            if d < 0 || d as usize >= r || seen & (1 << d) != 0 {
                return Err(value_err(2, "dim_order must be a permutation of the dims"));
            }
            seen |= 1 << d;
        }
        if o.iter().enumerate().any(|(i, &d)| d as usize != i) {
            // The out tensor would need a non-contiguous layout.
            return Err(KernelError::NonContiguous { arg: 3 });
        }
    }
    let odt = ctx.out_dtype(3)?;
    if !cast && odt != x.dtype() {
        return Err(KernelError::DTypeMismatch {
            arg: 3,
            expected: x.dtype(),
            got: odt,
        });
    }
    let default_order = x
        .dim_order()
        .iter()
        .enumerate()
        .all(|(i, &d)| d as usize == i);
    if default_order {
        // The order kept: the bytes as they are, or converted run as a whole.
        let mut out = ctx.output(3, x.shape())?;
        if odt == x.dtype() {
            return copy_same(x.bytes(), out.bytes_mut(), 3);
        }
        let (src, dst) = (x.bytes(), out.bytes_mut());
        if src.len() / x.dtype().size() != dst.len() / odt.size() {
            return Err(shape_err(3, "output size does not match the input"));
        }
        convert_run(x.dtype(), src, odt, dst);
        return Ok(());
    }
    let st = dim_order_strides(&x, 0)?;
    let v = View::of(x.dims(), &st[..r], 0)?;
    let mut out = ctx.output(3, x.shape())?;
    if odt == x.dtype() {
        copy_view(odt.size(), x.bytes(), &v, out.bytes_mut(), 3)
    } else {
        convert_view(x.dtype(), x.bytes(), &v, odt, out.bytes_mut(), 3)
    }
}

/// `dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False,
/// int[]? dim_order=None, Tensor(a!) out)`: a copy into the contiguous out. Any dtype (out has
/// self's); self in any dim order; out contiguous (a non-contiguous `dim_order` is refused).
fn clone_dim_order_out(ctx: &mut Ctx) -> Res {
    dim_order_copy(ctx, false)
}

/// `dim_order_ops::_to_dim_order_copy.out(Tensor self, *, bool non_blocking=False,
/// int[]? dim_order=None, Tensor(a!) out)`: a copy converted to out's dtype (C cast). Any
/// dtypes; self in any dim order; out contiguous (a non-contiguous `dim_order` is refused).
fn to_dim_order_copy_out(ctx: &mut Ctx) -> Res {
    dim_order_copy(ctx, true)
}

#[cfg(test)]
#[path = "cast_tests.rs"]
mod tests;
