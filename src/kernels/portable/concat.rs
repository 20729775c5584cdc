//! Concatenation and splitting: `cat` (with ATen's legacy empty-tensor rule and dtype
//! promotion of the inputs), `stack`, `split_with_sizes_copy`, `split_copy`, `unbind_copy`.
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{
    checked_numel, list_item, make_shape, prod, shape_err, to_size, value_err, wrap, Ctx, Res,
};
use super::convert::convert_run;
use super::copy_engine::copy_row_pieces;
use super::promote::can_cast;
use super::split_prepared::prepare_split;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::parallel;
use crate::tensor::TensorRef;

/// The concatenation and splitting kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::cat.out", cat_out),
    KernelDef::new("aten::stack.out", stack_out),
    KernelDef::new("aten::split_with_sizes_copy.out", split_with_sizes_copy_out)
        .with_prepare(prepare_split),
    KernelDef::new("aten::split_copy.Tensor_out", split_copy_tensor_out),
    KernelDef::new("aten::unbind_copy.int_out", unbind_copy_int_out),
];

/// Copies `outer` rows of `w` elements from `src` into `dst` rows of `dst_row` elements at
/// column `col`, converting dtype if needed.
#[allow(clippy::too_many_arguments)]
fn copy_rows(
    sdt: DType,
    src: &[u8],
    ddt: DType,
    dst: &mut [u8],
    outer: usize,
    w: usize,
    dst_row: usize,
    col: usize,
) {
    let (ss, ds) = (sdt.size(), ddt.size());
    if w == 0 {
        return;
    }
    for o in 0..outer {
        let s = &src[o * w * ss..(o + 1) * w * ss];
        let d0 = (o * dst_row + col) * ds;
        let d = &mut dst[d0..d0 + w * ds];
        if sdt == ddt {
            d.copy_from_slice(s);
        } else {
            convert_run(sdt, s, ddt, d);
        }
    }
}

/// `aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)`: concatenation along `dim`.
/// Legacy rule: 1-D tensors of shape `[0]` are skipped. Inputs of any dtype are converted to
/// out's dtype (which must be castable from each input, ATen `canCast`). Contiguous.
fn cat_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let n = ctx.list_len(0)?;
    if n == 0 {
        return Err(value_err(0, "cat expects a non-empty list of tensors"));
    }
    let odt = ctx.out_dtype(2)?;
    let skip = |t: &TensorRef| t.rank() == 1 && t.dims()[0] == 0;
    let mut reference = None;
    for k in 0..n {
        let t = list_item(ctx, 0, k)?;
        if !can_cast(t.dtype(), odt) {
            return Err(KernelError::DTypeMismatch {
                arg: 2,
                expected: t.dtype(),
                got: odt,
            });
        }
        if reference.is_none() && !skip(&t) {
            reference = Some(t);
        }
    }
    let Some(rt) = reference else {
        // Every input is a legacy empty tensor: the result is empty.
        ctx.output(2, &make_shape(&[0], 2)?)?;
        return Ok(());
    };
    let r = rt.rank();
    if r == 0 {
        return Err(shape_err(
            0,
            "zero-dimensional tensor cannot be concatenated",
        ));
    }
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let mut total = 0usize;
    for k in 0..n {
        let t = list_item(ctx, 0, k)?;
        if skip(&t) {
            continue;
        }
        if t.rank() != r {
            return Err(shape_err(
                0,
                "tensors must have the same number of dimensions",
            ));
        }
        for d in 0..r {
            if d != dim && t.dims()[d] != rt.dims()[d] {
                return Err(shape_err(
                    0,
                    "sizes of tensors must match except in the concatenation dim",
                ));
            }
        }
        total = total
            .checked_add(t.dims()[dim])
            .ok_or(shape_err(0, "tensor size overflows"))?;
    }
    let mut shape = *rt.shape();
    shape.dims_mut()[dim] = total;
    checked_numel(shape.dims(), 2)?;
    let outer = prod(&rt.dims()[..dim]);
    let inner = prod(&rt.dims()[dim + 1..]);
    let mut out = ctx.output(2, &shape)?;
    let dst = out.bytes_mut();
    let row = total * inner;
    let mut col = 0usize;
    for k in 0..n {
        let t = list_item(ctx, 0, k)?;
        if skip(&t) {
            continue;
        }
        let w = t.dims()[dim] * inner;
        copy_rows(t.dtype(), t.bytes(), odt, dst, outer, w, row, col);
        col += w;
    }
    Ok(())
}

/// `aten::stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out)`: joins equal-shaped
/// tensors along a new dim (wrapped against rank + 1). Inputs are converted to out's dtype
/// (ATen `canCast`). Contiguous.
fn stack_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let n = ctx.list_len(0)?;
    if n == 0 {
        return Err(value_err(0, "stack expects a non-empty list of tensors"));
    }
    let odt = ctx.out_dtype(2)?;
    let t0 = list_item(ctx, 0, 0)?;
    let dim = wrap(ctx.int(1)?, t0.rank() + 1, 1)?;
    for k in 0..n {
        let t = list_item(ctx, 0, k)?;
        if t.dims() != t0.dims() {
            return Err(shape_err(0, "stack expects each tensor to be equal size"));
        }
        if !can_cast(t.dtype(), odt) {
            return Err(KernelError::DTypeMismatch {
                arg: 2,
                expected: t.dtype(),
                got: odt,
            });
        }
    }
    let mut shape = *t0.shape();
    shape
        .insert(dim, n)
        .ok_or(shape_err(2, "result rank exceeds 16"))?;
    checked_numel(shape.dims(), 2)?;
    let outer = prod(&t0.dims()[..dim]);
    let inner = prod(&t0.dims()[dim..]);
    let mut out = ctx.output(2, &shape)?;
    let dst = out.bytes_mut();
    for k in 0..n {
        let t = list_item(ctx, 0, k)?;
        copy_rows(
            t.dtype(),
            t.bytes(),
            odt,
            dst,
            outer,
            inner,
            n * inner,
            k * inner,
        );
    }
    Ok(())
}

/// Writes consecutive pieces of `x` along `dim` (piece k has `size_of(k)` indices) into the
/// outputs of the tensor list at `out_arg`. `keep_dim` false removes the dim (unbind).
fn split_into(
    ctx: &mut Ctx,
    x: &TensorRef,
    dim: usize,
    count: usize,
    size_of: impl Fn(usize) -> usize,
    keep_dim: bool,
    out_arg: usize,
) -> Res {
    let total = x.dims()[dim];
    if ctx.list_len(out_arg)? != count {
        return Err(shape_err(
            out_arg,
            "number of outputs does not match the number of splits",
        ));
    }
    let mut sum = 0usize;
    for k in 0..count {
        sum = sum
            .checked_add(size_of(k))
            .ok_or(shape_err(1, "split sizes overflow"))?;
        let got = ctx.list_out_dtype(out_arg, k)?;
        if got != x.dtype() {
            return Err(KernelError::DTypeMismatch {
                arg: out_arg,
                expected: x.dtype(),
                got,
            });
        }
    }
    if sum != total {
        return Err(shape_err(
            1,
            "split sizes must sum to the size of the split dim",
        ));
    }
    let es = x.dtype().size();
    let outer = prod(&x.dims()[..dim]);
    let inner = prod(&x.dims()[dim + 1..]);
    let src = x.bytes();
    if outer > 1 && count <= SPLIT_ROWS_MAX {
        return split_rows(ctx, x, dim, count, &size_of, keep_dim, out_arg);
    }
    let mut off = 0usize;
    for k in 0..count {
        let sz = size_of(k);
        let mut out = piece_output(ctx, x, (dim, sz, keep_dim), (out_arg, k))?;
        let dst = out.bytes_mut();
        let w = sz * inner * es;
        if w > 0 {
            let (stride, base) = (total * inner * es, off * inner * es);
            if outer == 1 {
                // One contiguous piece: split it across cores in 4 KiB units.
                parallel::for_chunks(&mut dst[..w], 4096, 256, |u, d, _| {
                    let s0 = base + u * 4096;
                    d.copy_from_slice(&src[s0..s0 + d.len()]);
                });
            } else {
                // Rows of `w` bytes, whole rows per core (about one instruction per 16 bytes).
                parallel::for_chunks(&mut dst[..outer * w], w, w / 16 + 8, |o0, d, _| {
                    for (j, row) in d.chunks_exact_mut(w).enumerate() {
                        let s0 = (o0 + j) * stride + base;
                        row.copy_from_slice(&src[s0..s0 + w]);
                    }
                });
            }
        }
        off += sz;
    }
    Ok(())
}

/// Output `k` of the list at `out_arg`, resized to piece `sz` of `x` along `dim` (the dim
/// removed when `keep_dim` is false: unbind).
fn piece_output<'a>(
    ctx: &mut Ctx<'_, 'a, '_>,
    x: &TensorRef,
    (dim, sz, keep_dim): (usize, usize, bool),
    (out_arg, k): (usize, usize),
) -> Result<crate::tensor::TensorMut<'a>, KernelError> {
    let mut shape = *x.shape();
    if keep_dim {
        shape.dims_mut()[dim] = sz;
    } else {
        shape.remove(dim);
    }
    ctx.list_output(out_arg, k, &shape)
}

/// Most pieces [`split_rows`] binds at once.
const SPLIT_ROWS_MAX: usize = 16;

/// [`split_into`] for pieces of rows (`dim` not the outermost non-trivial dim): every
/// output bound first, then all their rows copied in one parallel step (the query, key and
/// value of an attention layer split from one product: 3 × T rows, too few per output to
/// split each alone). The checks were made by the caller.
fn split_rows(
    ctx: &mut Ctx,
    x: &TensorRef,
    dim: usize,
    count: usize,
    size_of: &impl Fn(usize) -> usize,
    keep_dim: bool,
    out_arg: usize,
) -> Res {
    let es = x.dtype().size();
    let total = x.dims()[dim];
    let outer = prod(&x.dims()[..dim]);
    let inner = prod(&x.dims()[dim + 1..]);
    let src = x.bytes();
    let stride = total * inner * es;
    // Per piece: its output, its row width in bytes and where its rows start in a row of x.
    let mut pieces: heapless::Vec<(parallel::SharedSlice<'_, u8>, usize, usize), SPLIT_ROWS_MAX> =
        heapless::Vec::new();
    let mut off = 0usize;
    for k in 0..count {
        let sz = size_of(k);
        let mut out = piece_output(ctx, x, (dim, sz, keep_dim), (out_arg, k))?;
        let w = sz * inner * es;
        let dst = out
            .bytes_mut()
            .get_mut(..outer * w)
            .ok_or(shape_err(out_arg, "split output too small"))?;
        let dst = parallel::SharedSlice::new(dst);
        if pieces.push((dst, w, off * inner * es)).is_err() {
            return Err(shape_err(out_arg, "too many split outputs"));
        }
        off += sz;
    }
    copy_row_pieces(src, &pieces, outer, stride);
    Ok(())
}

/// `aten::split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *,
/// Tensor(a!)[] out) -> ()`: pieces of the given sizes (which must sum to the dim's size).
/// Args: self, sizes, dim, out list, and the appended copy of the out list. Any dtype (outs
/// have self's dtype); contiguous.
fn split_with_sizes_copy_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    if x.rank() == 0 {
        return Err(shape_err(
            0,
            "split expects at least a 1-dimensional tensor",
        ));
    }
    let sizes = ctx.int_list(1)?;
    let dim = wrap(ctx.int(2)?, x.rank(), 2)?;
    for &s in sizes.iter() {
        to_size(s, 1, "split sizes must be non-negative")?;
    }
    split_into(ctx, &x, dim, sizes.len(), |k| sizes[k] as usize, true, 3)
}

/// `aten::split_copy.Tensor_out(Tensor self, SymInt split_size, int dim=0, *,
/// Tensor(a!)[] out) -> ()`: pieces of `split_size` (the last may be smaller).
/// Any dtype (outs have self's dtype); contiguous.
fn split_copy_tensor_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    if x.rank() == 0 {
        return Err(shape_err(
            0,
            "split expects at least a 1-dimensional tensor",
        ));
    }
    let ss = to_size(ctx.int(1)?, 1, "split_size must be non-negative")?;
    let dim = wrap(ctx.int(2)?, x.rank(), 2)?;
    let total = x.dims()[dim];
    if ss == 0 && total != 0 {
        return Err(value_err(
            1,
            "split_size can only be 0 if the dimension size is 0",
        ));
    }
    let num = if ss == 0 {
        1
    } else {
        total.div_ceil(ss).max(1)
    };
    let last = total - ss * (num - 1);
    split_into(
        ctx,
        &x,
        dim,
        num,
        |k| if k + 1 == num { last } else { ss },
        true,
        3,
    )
}

/// `aten::unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out) -> ()`: every index
/// along `dim` as its own tensor with the dim removed. Any dtype; contiguous.
fn unbind_copy_int_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    if x.rank() == 0 {
        return Err(shape_err(
            0,
            "unbind expects at least a 1-dimensional tensor",
        ));
    }
    let dim = wrap(ctx.int(1)?, x.rank(), 1)?;
    let n = x.dims()[dim];
    split_into(ctx, &x, dim, n, |_| 1, false, 2)
}

#[cfg(test)]
#[path = "concat_tests.rs"]
mod tests;
