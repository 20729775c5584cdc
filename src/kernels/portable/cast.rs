//! Dim-order ops: `_clone_dim_order` and `_to_dim_order_copy` (dtype-converting), from any dim
//! order of `self` into the requested (default or channels-last) order, through the strided
//! copy engine.
// `KernelError` is the crate-wide kernel error type; its size is not this module's choice.
#![allow(clippy::result_large_err)]

use super::common::{value_err, Ctx, Res};
use super::copy_engine::{convert_view, copy_view, View};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{TensorRef, MAX_RANK};

/// The dim-order kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("dim_order_ops::_clone_dim_order.out", clone_dim_order_out),
    KernelDef::new(
        "dim_order_ops::_to_dim_order_copy.out",
        to_dim_order_copy_out,
    ),
];

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
