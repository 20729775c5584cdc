//! Slicing: `slice_copy`, `select_copy`, `narrow_copy` (Python index rules), through the
//! strided copy engine.
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{check_out_dtype, contig_strides, shape_err, value_err, wrap, Ctx, Res};
use super::copy_engine::{copy_view, View};
use super::slice_prepared::prepare_select;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{Shape, TensorRef};

/// The slicing kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::slice_copy.Tensor_out", slice_copy_tensor_out),
    KernelDef::new("aten::select_copy.int_out", select_copy_int_out).with_prepare(prepare_select),
    KernelDef::new("aten::narrow_copy.out", narrow_copy_out),
];

/// Copies `x` restricted along `dim` to `len` indices `start, start+step, ..` (the dim is
/// dropped when `keep_dim` is false, for `select`).
#[allow(clippy::too_many_arguments)]
fn dim_range_copy(
    ctx: &mut Ctx,
    x: &TensorRef,
    dim: usize,
    start: usize,
    len: usize,
    step: usize,
    keep_dim: bool,
    out_arg: usize,
) -> Res {
    let st = contig_strides(x.dims());
    let base = (start.min(isize::MAX as usize) as isize).saturating_mul(st[dim]);
    let mut v = View::new(base);
    let mut shape = Shape::scalar();
    for (i, &d) in x.dims().iter().enumerate() {
        if i == dim {
            if keep_dim {
                let s = st[i].saturating_mul(step.min(isize::MAX as usize) as isize);
                v.push(len, s, out_arg)?;
                shape.push(len).ok_or(shape_err(out_arg, "rank"))?;
            }
        } else {
            v.push(d, st[i], out_arg)?;
            shape.push(d).ok_or(shape_err(out_arg, "rank"))?;
        }
    }
    check_out_dtype(ctx, out_arg, x.dtype())?;
    let mut out = ctx.output(out_arg, &shape)?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), out_arg)
}

/// `aten::slice_copy.Tensor_out(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None,
/// SymInt step=1, *, Tensor(a!) out)`: Python slicing `self[.., start:end:step, ..]` (None
/// bounds, negative bounds wrap once, then clamp to `[0, size]`; `step >= 1`).
/// Any dtype; contiguous.
fn slice_copy_tensor_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(7)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r == 0 {
        return Err(shape_err(0, "slice() cannot be applied to a 0-dim tensor"));
    }
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let start = ctx.opt_int(2)?;
    let end = ctx.opt_int(3)?;
    let step = ctx.int(4)?;
    if step <= 0 {
        return Err(value_err(4, "slice step must be positive"));
    }
    let n = x.dims()[dim] as i64;
    let clamp = |v: i64| -> i64 {
        let v = if v < 0 { v.saturating_add(n) } else { v };
        v.clamp(0, n)
    };
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(i64::MAX)).max(s);
    let len = if e == s { 0 } else { (e - s - 1) / step + 1 };
    dim_range_copy(
        ctx,
        &x,
        dim,
        s as usize,
        len as usize,
        step as usize,
        true,
        5,
    )
}

/// `aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)`: the
/// slice at `index` along `dim`, with that dim removed (negative index wraps once).
/// Any dtype; contiguous.
fn select_copy_int_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r == 0 {
        return Err(shape_err(0, "select() cannot be applied to a 0-dim tensor"));
    }
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let index = ctx.int(2)?;
    let n = x.dims()[dim];
    let i = if index < 0 {
        index.saturating_add(n as i64)
    } else {
        index
    };
    if i < 0 || i >= n as i64 {
        return Err(KernelError::IndexOutOfBounds {
            arg: 2,
            index,
            size: n,
        });
    }
    dim_range_copy(ctx, &x, dim, i as usize, 1, 1, false, 3)
}

/// `aten::narrow_copy.out(Tensor self, int dim, SymInt start, SymInt length, *, Tensor(a!) out)`:
/// `length` indices from `start` (which may be negative, or equal to the size) along `dim`.
/// Any dtype; contiguous.
fn narrow_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(6)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r == 0 {
        return Err(shape_err(0, "narrow() cannot be applied to a 0-dim tensor"));
    }
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let start = ctx.int(2)?;
    let length = ctx.int(3)?;
    let n = x.dims()[dim] as i64;
    if length < 0 {
        return Err(value_err(3, "narrow(): length must be non-negative"));
    }
    let s = if start == n {
        n
    } else if start < -n || start >= n {
        return Err(KernelError::IndexOutOfBounds {
            arg: 2,
            index: start,
            size: n as usize,
        });
    } else if start < 0 {
        start + n
    } else {
        start
    };
    if length > n - s {
        return Err(value_err(
            3,
            "narrow(): start + length exceeds the dimension size",
        ));
    }
    dim_range_copy(ctx, &x, dim, s as usize, length as usize, 1, true, 4)
}

#[cfg(test)]
#[path = "slice_tests.rs"]
mod tests;
