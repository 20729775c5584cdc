//! Views as copies: `view_copy`, `unsqueeze_copy`, `squeeze_copy` (all overloads), permutes
//! and transposes (`permute_copy`, `transpose_copy`, `t_copy`), `expand_copy`, `repeat`; all
//! through the strided copy engine.
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{
    check_out_dtype, checked_numel, contig_strides, copy_all, make_shape, shape_err, to_size,
    value_err, wrap, Ctx, Res,
};
use super::copy_engine::{copy_same, copy_swapped, copy_view, runs_order, RunsOrder, View};
use super::copy_prepared::prepare_expand;
use super::view_prepared::prepare_permute;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{Shape, TensorRef, MAX_RANK};

/// The view-as-copy kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::view_copy.out", view_copy_out),
    KernelDef::new("aten::unsqueeze_copy.out", unsqueeze_copy_out),
    KernelDef::new("aten::squeeze_copy.dims_out", squeeze_copy_dims_out),
    KernelDef::new("aten::squeeze_copy.dim_out", squeeze_copy_dim_out),
    KernelDef::new("aten::squeeze_copy.out", squeeze_copy_out),
    KernelDef::new("aten::permute_copy.out", permute_copy_out).with_prepare(prepare_permute),
    KernelDef::new("aten::transpose_copy.int_out", transpose_copy_int_out),
    KernelDef::new("aten::t_copy.out", t_copy_out),
    KernelDef::new("aten::expand_copy.out", expand_copy_out).with_prepare(prepare_expand),
    KernelDef::new("aten::repeat.out", repeat_out),
];

/// ATen `infer_size`: `size` with at most one `-1`, matching `numel` elements.
fn infer_size(size: &[i64], numel: usize, arg: usize) -> Result<Shape, KernelError> {
    if size.len() > MAX_RANK {
        return Err(shape_err(arg, "result rank exceeds 16"));
    }
    let mut dims = [0usize; MAX_RANK];
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &s) in size.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(value_err(arg, "only one dimension can be inferred"));
            }
            infer = Some(i);
        } else {
            let s = to_size(s, arg, "negative size")?;
            dims[i] = s;
            known = known
                .checked_mul(s)
                .ok_or(shape_err(arg, "tensor size overflows"))?;
        }
    }
    let bad = shape_err(arg, "shape is invalid for the input's number of elements");
    match infer {
        Some(i) => {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(bad);
            }
            dims[i] = numel / known;
        }
        None if known != numel => return Err(bad),
        None => {}
    }
    make_shape(&dims[..size.len()], arg)
}

/// `aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out)`: a reshape as a copy.
/// Any dtype (out has self's dtype); contiguous. One `-1` in `size` is inferred.
fn view_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let shape = infer_size(&ctx.int_list(1)?, x.numel(), 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, &shape)?;
    copy_all(out.bytes_mut(), x.bytes(), 2)
}

/// `aten::unsqueeze_copy.out(Tensor self, int dim, *, Tensor(a!) out)`: inserts a size-1 dim
/// at `dim` (wrapped against rank + 1). Any dtype; contiguous.
fn unsqueeze_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let d = wrap(ctx.int(1)?, x.rank() + 1, 1)?;
    let mut shape = *x.shape();
    shape
        .insert(d, 1)
        .ok_or(shape_err(1, "result rank exceeds 16"))?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, &shape)?;
    copy_all(out.bytes_mut(), x.bytes(), 2)
}

/// Copies `x` with the size-1 dims whose bit is set in `mask` removed.
fn squeeze_mask(ctx: &mut Ctx, x: &TensorRef, mask: u32, out_arg: usize) -> Res {
    let mut shape = Shape::scalar();
    for (i, &d) in x.dims().iter().enumerate() {
        if !(mask & (1 << i) != 0 && d == 1) {
            shape.push(d).ok_or(shape_err(out_arg, "rank"))?;
        }
    }
    check_out_dtype(ctx, out_arg, x.dtype())?;
    let mut out = ctx.output(out_arg, &shape)?;
    copy_all(out.bytes_mut(), x.bytes(), out_arg)
}

/// Bit set of wrapped dims; duplicates are an error (ATen `dim_list_to_bitset`).
pub(super) fn dim_mask(dims: &[i64], rank: usize, arg: usize) -> Result<u32, KernelError> {
    let mut mask = 0u32;
    for &d in dims {
        let w = wrap(d, rank, arg)?;
        if mask & (1 << w) != 0 {
            return Err(value_err(
                arg,
                "dim appears multiple times in the list of dims",
            ));
        }
        mask |= 1 << w;
    }
    Ok(mask)
}

/// `aten::squeeze_copy.dims_out(Tensor self, int[] dim, *, Tensor(a!) out)`: removes the listed
/// dims that have size 1. Any dtype; contiguous.
fn squeeze_copy_dims_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let mask = dim_mask(&ctx.int_list(1)?, x.rank(), 1)?;
    squeeze_mask(ctx, &x, mask, 2)
}

/// `aten::squeeze_copy.dim_out(Tensor self, int dim, *, Tensor(a!) out)`: removes `dim` if it has
/// size 1. Any dtype; contiguous.
fn squeeze_copy_dim_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let d = wrap(ctx.int(1)?, x.rank(), 1)?;
    squeeze_mask(ctx, &x, 1 << d, 2)
}

/// `aten::squeeze_copy.out(Tensor self, *, Tensor(a!) out)`: removes every size-1 dim.
/// Any dtype; contiguous.
fn squeeze_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    squeeze_mask(ctx, &x, u32::MAX, 1)
}

/// Writes `x` permuted by `perm` (out dim i = x dim perm[i]) into the output at `out_arg`.
fn permuted_copy(ctx: &mut Ctx, x: &TensorRef, perm: &[usize], out_arg: usize) -> Res {
    if let Some(order) = runs_order(x.dims(), perm) {
        // No view to plan: the bytes as they are, or one swap of two blocks of dims.
        let mut od = [0usize; MAX_RANK];
        for (o, &p) in od.iter_mut().zip(perm) {
            *o = x.dims()[p];
        }
        let shape = make_shape(&od[..perm.len()], out_arg)?;
        check_out_dtype(ctx, out_arg, x.dtype())?;
        let mut out = ctx.output(out_arg, &shape)?;
        let es = x.dtype().size();
        return match order {
            RunsOrder::Same => copy_same(x.bytes(), out.bytes_mut(), out_arg),
            RunsOrder::Swap(a, b, d) => {
                copy_swapped(es, x.bytes(), (a, b, d), out.bytes_mut(), out_arg)
            }
        };
    }
    let st = contig_strides(x.dims());
    let mut v = View::new(0);
    let mut od = [0usize; MAX_RANK];
    for (i, &p) in perm.iter().enumerate() {
        od[i] = x.dims()[p];
        v.push(x.dims()[p], st[p], out_arg)?;
    }
    let shape = make_shape(&od[..perm.len()], out_arg)?;
    check_out_dtype(ctx, out_arg, x.dtype())?;
    let mut out = ctx.output(out_arg, &shape)?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), out_arg)
}

fn identity_perm() -> [usize; MAX_RANK] {
    let mut p = [0usize; MAX_RANK];
    for (i, v) in p.iter_mut().enumerate() {
        *v = i;
    }
    p
}

/// `aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out)`: out dim i is self dim
/// `dims[i]` (negative dims wrap; each dim exactly once). Any dtype; contiguous.
fn permute_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let dims = ctx.int_list(1)?;
    let r = x.rank();
    if dims.len() != r {
        return Err(shape_err(
            1,
            "number of dims does not match the tensor's rank",
        ));
    }
    let mut perm = [0usize; MAX_RANK];
    let mut seen = 0u32;
    for (i, &d) in dims.iter().enumerate() {
        let w = wrap(d, r, 1)?;
        if seen & (1 << w) != 0 {
            return Err(value_err(1, "repeated dim in permutation"));
        }
        seen |= 1 << w;
        perm[i] = w;
    }
    permuted_copy(ctx, &x, &perm[..r], 2)
}

/// `aten::transpose_copy.int_out(Tensor self, int dim0, int dim1, *, Tensor(a!) out)`: swaps
/// two dims. Any dtype; contiguous.
fn transpose_copy_int_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let d0 = wrap(ctx.int(1)?, r, 1)?;
    let d1 = wrap(ctx.int(2)?, r, 2)?;
    let mut perm = identity_perm();
    if r > 0 {
        perm.swap(d0, d1);
    }
    permuted_copy(ctx, &x, &perm[..r], 3)
}

/// `aten::t_copy.out(Tensor self, *, Tensor(a!) out)`: transposes a rank-2 tensor; ranks 0
/// and 1 are copied unchanged. Any dtype; contiguous.
fn t_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r > 2 {
        return Err(shape_err(0, "t() expects a tensor with <= 2 dimensions"));
    }
    let perm: [usize; 2] = if r == 2 { [1, 0] } else { [0, 1] };
    permuted_copy(ctx, &x, &perm[..r], 1)
}

/// `aten::expand_copy.out(Tensor self, SymInt[] size, *, bool implicit=False, Tensor(a!) out)`:
/// broadcasts `self` to `size`. New leading dims may be added (not `-1`); `-1` keeps a size;
/// only size-1 dims can change. Any dtype; contiguous.
fn expand_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let size = ctx.int_list(1)?;
    let _implicit = ctx.bool(2)?;
    let (r, n) = (x.rank(), size.len());
    if n < r {
        return Err(shape_err(
            1,
            "the number of sizes must be at least the tensor's rank",
        ));
    }
    if n > MAX_RANK {
        return Err(shape_err(1, "result rank exceeds 16"));
    }
    if n == r
        && x.dims()
            .iter()
            .zip(size.iter())
            .all(|(&d, &s)| s == -1 || s == d as i64)
    {
        // Every size kept: the input's bytes as they are, with no view planned.
        check_out_dtype(ctx, 3, x.dtype())?;
        let mut out = ctx.output(3, x.shape())?;
        return copy_same(x.bytes(), out.bytes_mut(), 3);
    }
    let lead = n - r;
    let st = contig_strides(x.dims());
    let mut od = [0usize; MAX_RANK];
    let mut v = View::new(0);
    for i in 0..n {
        let s = size[i];
        if i < lead {
            let t = to_size(s, 1, "expanded size of a new leading dim must be >= 0")?;
            od[i] = t;
            v.push(t, 0, 1)?;
        } else {
            let xd = x.dims()[i - lead];
            let t = if s == -1 {
                xd
            } else {
                to_size(s, 1, "expanded size must be >= -1")?
            };
            if t == xd {
                v.push(t, st[i - lead], 1)?;
            } else if xd == 1 {
                v.push(t, 0, 1)?;
            } else {
                return Err(shape_err(
                    1,
                    "expanded size must match the existing size at a non-singleton dim",
                ));
            }
            od[i] = t;
        }
    }
    checked_numel(&od[..n], 1)?;
    let shape = make_shape(&od[..n], 1)?;
    check_out_dtype(ctx, 3, x.dtype())?;
    let mut out = ctx.output(3, &shape)?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), 3)
}

/// `aten::repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out)`: tiles `self`
/// `repeats[i]` times along each dim (extra leading repeats add dims). Any dtype; contiguous.
fn repeat_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let reps = ctx.int_list(1)?;
    let (r, n) = (x.rank(), reps.len());
    if n < r {
        return Err(shape_err(
            1,
            "number of repeats can not be smaller than the tensor's rank",
        ));
    }
    if n > MAX_RANK {
        return Err(shape_err(1, "result rank exceeds 16"));
    }
    let lead = n - r;
    let st = contig_strides(x.dims());
    let mut od = [0usize; MAX_RANK];
    let mut v = View::new(0);
    for i in 0..n {
        let rep = to_size(reps[i], 1, "repeats must be non-negative")?;
        let (xd, sd) = if i < lead {
            (1, 0)
        } else {
            (x.dims()[i - lead], st[i - lead])
        };
        od[i] = rep
            .checked_mul(xd)
            .ok_or(shape_err(1, "tensor size overflows"))?;
        // Output dim i of size rep*xd is the row-major pair (rep, xd).
        v.push(rep, 0, 1)?;
        v.push(xd, sd, 1)?;
    }
    checked_numel(&od[..n], 1)?;
    let shape = make_shape(&od[..n], 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, &shape)?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), 2)
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
