//! Data-movement kernels: views as copies (`view_copy`, `unsqueeze_copy`, `squeeze_copy`),
//! permutes and transposes, `expand_copy`, `repeat`, slicing (`slice_copy`, `select_copy`,
//! `narrow_copy`), concatenation and splitting (`cat`, `stack`, `split_*_copy`,
//! `unbind_copy`), advanced indexing (`index.Tensor`, `index_put`, `index_select`, `gather`,
//! `embedding`), `cumsum`, triangular masks (`tril`, `triu`), `constant_pad_nd`, `flip`,
//! `roll`, and dim-order conversion (`_clone_dim_order`, `_to_dim_order_copy`).
//!
//! These kernels move elements without arithmetic, so nearly all of them are dtype-generic:
//! they copy raw elements of `dtype.size()` bytes. The shared engine, [`copy_view`], copies a
//! strided view of a source into a contiguous destination. It drops size-1 dims and merges dims
//! that are contiguous with each other, then copies whole contiguous runs with
//! `copy_from_slice`. When the innermost source stride is not 1 it copies element by element,
//! in a loop specialised on the element size. Every view is bounds-checked against its
//! source before anything is copied.
//!
//! Layout contract: inputs and outputs are contiguous (the default dim order). The one
//! exception is the `self` input of the dim-order ops, which may use any dim order.

// `KernelError` is the crate-wide kernel error type; its size is not this module's choice.
#![allow(clippy::result_large_err)]

use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::{KernelCtx, KernelDef};
use crate::linalg::vecmath as vec;
use crate::shape::{broadcast_shapes, wrap_dim};
use crate::tensor::{read_f64, read_i64, write_f64, write_i64, Shape, TensorRef, MAX_RANK};

type Ctx<'c, 'a, 'p> = KernelCtx<'c, 'a, 'p>;
type Res = Result<(), KernelError>;

// ------------------------------------------------------------------------------------------
// Small helpers
// ------------------------------------------------------------------------------------------

fn shape_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Shape { arg, detail }
}

fn value_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Value { arg, detail }
}

/// ATen `maybe_wrap_dim` with the error naming argument `arg`.
fn wrap(dim: i64, rank: usize, arg: usize) -> Result<usize, KernelError> {
    wrap_dim(dim, rank).ok_or(KernelError::IndexOutOfBounds {
        arg,
        index: dim,
        size: rank,
    })
}

fn make_shape(dims: &[usize], arg: usize) -> Result<Shape, KernelError> {
    Shape::new(dims).ok_or(shape_err(arg, "result rank exceeds 16"))
}

/// Product of `dims`, failing if it (or its byte count for 8-byte elements) overflows.
fn checked_numel(dims: &[usize], arg: usize) -> Result<usize, KernelError> {
    let mut n: usize = 1;
    for &d in dims {
        n = n
            .checked_mul(d)
            .ok_or(shape_err(arg, "tensor size overflows"))?;
    }
    if n > isize::MAX as usize / 8 {
        return Err(shape_err(arg, "tensor size overflows"));
    }
    Ok(n)
}

/// A non-negative `i64` argument value as `usize`.
fn to_size(v: i64, arg: usize, detail: &'static str) -> Result<usize, KernelError> {
    usize::try_from(v).map_err(|_| value_err(arg, detail))
}

fn check_out_dtype(ctx: &Ctx, arg: usize, expected: DType) -> Res {
    let got = ctx.out_dtype(arg)?;
    if got != expected {
        return Err(KernelError::DTypeMismatch { arg, expected, got });
    }
    Ok(())
}

/// Product of dims of an existing tensor (cannot overflow: the tensor exists in memory).
fn prod(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// Row-major strides in elements.
fn contig_strides(dims: &[usize]) -> [isize; MAX_RANK] {
    let mut st = [0isize; MAX_RANK];
    let mut acc: isize = 1;
    for i in (0..dims.len()).rev() {
        st[i] = acc;
        acc = acc.saturating_mul(dims[i].min(isize::MAX as usize) as isize);
    }
    st
}

/// Copies `src` into `dst`; both must have the same length.
fn copy_all(dst: &mut [u8], src: &[u8], arg: usize) -> Res {
    if dst.len() != src.len() {
        return Err(shape_err(arg, "output byte size does not match the input"));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// A tensor-list item that must be present.
fn list_item<'a>(
    ctx: &Ctx<'_, 'a, '_>,
    arg: usize,
    k: usize,
) -> Result<TensorRef<'a>, KernelError> {
    ctx.list_input(arg, k)?
        .ok_or(value_err(arg, "None in a tensor list"))
}

/// One element of `s` converted to `dtype`, as little-endian bytes (first `dtype.size()`).
fn scalar_bytes(dtype: DType, s: Scalar) -> [u8; 8] {
    let mut b = [0u8; 8];
    match s {
        Scalar::Int(v) => write_i64(dtype, &mut b, 0, v),
        Scalar::Double(v) => write_f64(dtype, &mut b, 0, v),
        Scalar::Bool(v) => write_i64(dtype, &mut b, 0, v as i64),
    }
    b
}

/// Fills `dst` with copies of the element `pat`.
fn fill(dst: &mut [u8], pat: &[u8]) {
    if pat.iter().all(|&b| b == 0) {
        dst.fill(0);
    } else {
        for c in dst.chunks_exact_mut(pat.len()) {
            c.copy_from_slice(pat);
        }
    }
}

/// ATen `canCast`: no float → integral/bool and no non-bool → bool.
fn can_cast(from: DType, to: DType) -> bool {
    let float_to_int = from.is_float() && !to.is_float();
    let to_bool = from != DType::Bool && to == DType::Bool;
    !float_to_int && !to_bool
}

// ------------------------------------------------------------------------------------------
// Element conversion
// ------------------------------------------------------------------------------------------

fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    a
}

/// Typed conversion loop over little-endian byte runs.
macro_rules! conv_loop {
    ($src:expr, $dst:expr, $S:ty, $D:ty, |$x:ident| $e:expr) => {{
        const SS: usize = core::mem::size_of::<$S>();
        const DS: usize = core::mem::size_of::<$D>();
        for (d, s) in $dst.chunks_exact_mut(DS).zip($src.chunks_exact(SS)) {
            let $x = <$S>::from_le_bytes(arr::<SS>(s));
            let y: $D = $e;
            d.copy_from_slice(&y.to_le_bytes());
        }
    }};
}

/// Element `si` of `src` (dtype `sdt`) converted to `ddt` and stored as element `di` of `dst`
/// (C++ `static_cast` semantics: integers wrap, floats truncate, bool is `!= 0`).
fn convert_elem(sdt: DType, src: &[u8], si: usize, ddt: DType, dst: &mut [u8], di: usize) {
    if sdt.is_float() || ddt.is_float() {
        if !sdt.is_float() && ddt == DType::F32 {
            // One rounding step (i64 → f32), not two through f64.
            let v = read_i64(sdt, src, si) as f32;
            dst[di * 4..di * 4 + 4].copy_from_slice(&v.to_le_bytes());
        } else {
            write_f64(ddt, dst, di, read_f64(sdt, src, si));
        }
    } else {
        write_i64(ddt, dst, di, read_i64(sdt, src, si));
    }
}

/// Converts a contiguous run of elements (`src` and `dst` hold the same count).
fn convert_run(sdt: DType, src: &[u8], ddt: DType, dst: &mut [u8]) {
    use DType::*;
    match (sdt, ddt) {
        _ if sdt == ddt => {
            let n = dst.len().min(src.len());
            dst[..n].copy_from_slice(&src[..n]);
        }
        (I64, F32) => conv_loop!(src, dst, i64, f32, |x| x as f32),
        (I32, F32) => conv_loop!(src, dst, i32, f32, |x| x as f32),
        (Bool, F32) => conv_loop!(src, dst, u8, f32, |x| (x != 0) as u8 as f32),
        (U8, F32) => conv_loop!(src, dst, u8, f32, |x| x as f32),
        (F32, I64) => conv_loop!(src, dst, f32, i64, |x| x as i64),
        (I32, I64) => conv_loop!(src, dst, i32, i64, |x| x as i64),
        (Bool, I64) => conv_loop!(src, dst, u8, i64, |x| (x != 0) as i64),
        (I64, I32) => conv_loop!(src, dst, i64, i32, |x| x as i32),
        (F32, F64) => conv_loop!(src, dst, f32, f64, |x| x as f64),
        (F64, F32) => conv_loop!(src, dst, f64, f32, |x| x as f32),
        (F32, Bool) => conv_loop!(src, dst, f32, u8, |x| (x != 0.0) as u8),
        (I64, Bool) => conv_loop!(src, dst, i64, u8, |x| (x != 0) as u8),
        _ => {
            let n = (dst.len() / ddt.size()).min(src.len() / sdt.size());
            for i in 0..n {
                convert_elem(sdt, src, i, ddt, dst, i);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Strided copy engine
// ------------------------------------------------------------------------------------------

/// Views may have twice the tensor rank (`repeat` splits every dim in two).
const VIEW_RANK: usize = 2 * MAX_RANK;

/// A strided view of a source buffer, in elements: element `(i0, .., ik)` of the view is
/// source element `base + Σ i_j * strides[j]`. Strides may be 0 (broadcast) or negative (flip).
#[derive(Clone, Copy)]
struct View {
    rank: usize,
    dims: [usize; VIEW_RANK],
    strides: [isize; VIEW_RANK],
    base: isize,
}

impl View {
    fn new(base: isize) -> View {
        View {
            rank: 0,
            dims: [0; VIEW_RANK],
            strides: [0; VIEW_RANK],
            base,
        }
    }

    fn push(&mut self, d: usize, s: isize, arg: usize) -> Res {
        if self.rank == VIEW_RANK {
            return Err(shape_err(arg, "view rank exceeds 32"));
        }
        self.dims[self.rank] = d;
        self.strides[self.rank] = s;
        self.rank += 1;
        Ok(())
    }

    /// The whole of a tensor with the given dims and strides.
    fn of(dims: &[usize], strides: &[isize], arg: usize) -> Result<View, KernelError> {
        let mut v = View::new(0);
        for (&d, &s) in dims.iter().zip(strides) {
            v.push(d, s, arg)?;
        }
        Ok(v)
    }
}

/// A view after bounds checking and simplification: size-1 dims dropped and every outer dim
/// merged into the next inner one when the two are contiguous with each other.
struct Simple {
    rank: usize,
    dims: [usize; VIEW_RANK],
    strides: [isize; VIEW_RANK],
    base: isize,
}

/// Checks that every source element of `v` lies in `0..src_len` and simplifies it.
/// `None` when the view is empty.
fn simplify(v: &View, src_len: usize, arg: usize) -> Result<Option<Simple>, KernelError> {
    let n = checked_numel(&v.dims[..v.rank], arg)?;
    if n == 0 {
        return Ok(None);
    }
    let oob = || shape_err(arg, "view reaches outside its source tensor");
    let (mut lo, mut hi) = (v.base, v.base);
    for i in 0..v.rank {
        // n fits isize, so every dim does too.
        let ext = (v.dims[i] as isize - 1)
            .checked_mul(v.strides[i])
            .ok_or_else(oob)?;
        if ext < 0 {
            lo = lo.checked_add(ext).ok_or_else(oob)?;
        } else {
            hi = hi.checked_add(ext).ok_or_else(oob)?;
        }
    }
    if lo < 0 || hi as usize >= src_len {
        return Err(oob());
    }
    let mut out = Simple {
        rank: 0,
        dims: [0; VIEW_RANK],
        strides: [0; VIEW_RANK],
        base: v.base,
    };
    for i in 0..v.rank {
        let (di, si) = (v.dims[i], v.strides[i]);
        if di == 1 {
            continue;
        }
        let r = out.rank;
        if r > 0 && si.checked_mul(di as isize) == Some(out.strides[r - 1]) {
            out.dims[r - 1] *= di;
            out.strides[r - 1] = si;
        } else {
            out.dims[r] = di;
            out.strides[r] = si;
            out.rank += 1;
        }
    }
    Ok(Some(out))
}

/// Walks the outer `v.rank - levels` dims of `v` in row-major order and calls
/// `f(dst_start, src_start)` for each block formed by the innermost `levels` dims
/// (`block` elements each).
fn walk_blocks(v: &Simple, levels: usize, block: usize, mut f: impl FnMut(usize, usize)) {
    let outer_rank = v.rank - levels;
    let mut idx = [0usize; VIEW_RANK];
    let mut off = v.base;
    let mut dst = 0usize;
    loop {
        // Offsets at block starts are within the checked bounds, so non-negative.
        f(dst, off as usize);
        dst += block;
        let mut k = outer_rank;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            off += v.strides[k];
            if idx[k] < v.dims[k] {
                break;
            }
            off -= v.strides[k] * v.dims[k] as isize;
            idx[k] = 0;
        }
    }
}

/// Walks `v` in row-major order and calls `f(dst_start, src_start, count, src_stride)` for every
/// innermost run of the simplified view, after checking every source element lies in
/// `0..src_len`.
fn for_each_run(
    v: &View,
    src_len: usize,
    arg: usize,
    mut f: impl FnMut(usize, usize, usize, isize),
) -> Res {
    let Some(sv) = simplify(v, src_len, arg)? else {
        return Ok(());
    };
    if sv.rank == 0 {
        f(0, sv.base as usize, 1, 1);
        return Ok(());
    }
    let (inner, istride) = (sv.dims[sv.rank - 1], sv.strides[sv.rank - 1]);
    walk_blocks(&sv, 1, inner, |d0, s0| f(d0, s0, inner, istride));
    Ok(())
}

/// `bytes` as f32 (every bit pattern is valid; used only to move 4-byte elements), if aligned.
fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    // SAFETY: f32 is plain old data (no padding, every bit pattern valid, align 4); `align_to`
    // only yields a middle part that is correctly aligned and inside `bytes`.
    let (pre, mid, post) = unsafe { bytes.align_to::<f32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// Mutable twin of [`as_f32`].
fn as_f32_mut(bytes: &mut [u8]) -> Option<&mut [f32]> {
    // SAFETY: as in `as_f32`; any bytes written through the f32 view are valid u8s.
    let (pre, mid, post) = unsafe { bytes.align_to_mut::<f32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// Tile edge of the blocked transpose.
const TILE: usize = 16;

fn copy_runs<const N: usize>(src: &[u8], v: &View, dst: &mut [u8], arg: usize) -> Res {
    let Some(sv) = simplify(v, src.len() / N, arg)? else {
        return Ok(());
    };
    let r = sv.rank;
    if r == 0 {
        let s0 = sv.base as usize * N;
        dst[..N].copy_from_slice(&src[s0..s0 + N]);
        return Ok(());
    }
    let (rows, cols) = (if r >= 2 { sv.dims[r - 2] } else { 1 }, sv.dims[r - 1]);
    let cs = sv.strides[r - 1];
    if N == 4
        && r >= 2
        && sv.strides[r - 2] == 1
        && cs > 0
        && cs as usize >= rows
        && rows >= 4
        && cols >= 4
    {
        if let (Some(s32), Some(d32)) = (as_f32(src), as_f32_mut(dst)) {
            // A transpose of the last two dims of 4-byte elements: 4×4 register blocks
            // (bits copied unchanged, so this serves every 4-byte dtype).
            let cs = cs as usize;
            let mut res = Ok(());
            walk_blocks(&sv, 2, rows * cols, |d0, s0| {
                let r = match (s32.get(s0..), d32.get_mut(d0..)) {
                    (Some(s), Some(d)) => vec::transpose32(s, cs, d, cols, rows, cols),
                    _ => Err(shape_err(arg, "view out of bounds")),
                };
                if r.is_err() {
                    res = Err(shape_err(arg, "view out of bounds"));
                }
            });
            return res;
        }
    }
    if r >= 2 && sv.strides[r - 2] == 1 && cs > 1 && rows >= TILE && cols >= TILE {
        // A transpose of the last two dims: dst[a][b] = src[a + b * cs]. Copy it in square
        // tiles so that both sides stay in cache.
        let cs = cs as usize;
        walk_blocks(&sv, 2, rows * cols, |d0, s0| {
            for a0 in (0..rows).step_by(TILE) {
                let a1 = (a0 + TILE).min(rows);
                for b0 in (0..cols).step_by(TILE) {
                    let b1 = (b0 + TILE).min(cols);
                    for b in b0..b1 {
                        // Source column b of the tile is contiguous (rows a0..a1).
                        let sb = s0 + b * cs;
                        let mut p = (d0 + a0 * cols + b) * N;
                        for e in src[(sb + a0) * N..(sb + a1) * N].chunks_exact(N) {
                            dst[p..p + N].copy_from_slice(e);
                            p += cols * N;
                        }
                    }
                }
            }
        });
        return Ok(());
    }
    walk_blocks(&sv, 1, cols, |d0, s0| {
        let out = &mut dst[d0 * N..(d0 + cols) * N];
        if cs == 1 {
            out.copy_from_slice(&src[s0 * N..(s0 + cols) * N]);
        } else if cs == 0 {
            let e = &src[s0 * N..s0 * N + N];
            for c in out.chunks_exact_mut(N) {
                c.copy_from_slice(e);
            }
        } else {
            let mut p = s0 as isize;
            for c in out.chunks_exact_mut(N) {
                let q = p as usize * N;
                c.copy_from_slice(&src[q..q + N]);
                p += cs;
            }
        }
    });
    Ok(())
}

/// Copies the view `v` of `src` (elements of `es` bytes) into the contiguous `dst`.
fn copy_view(es: usize, src: &[u8], v: &View, dst: &mut [u8], arg: usize) -> Res {
    let n = checked_numel(&v.dims[..v.rank], arg)?;
    if dst.len() != n * es {
        return Err(shape_err(arg, "output size does not match the copied view"));
    }
    match es {
        1 => copy_runs::<1>(src, v, dst, arg),
        2 => copy_runs::<2>(src, v, dst, arg),
        4 => copy_runs::<4>(src, v, dst, arg),
        8 => copy_runs::<8>(src, v, dst, arg),
        _ => Err(KernelError::Unsupported {
            detail: "element size",
        }),
    }
}

/// Like [`copy_view`], converting each element from `sdt` to `ddt`.
fn convert_view(sdt: DType, src: &[u8], v: &View, ddt: DType, dst: &mut [u8], arg: usize) -> Res {
    let (ss, ds) = (sdt.size(), ddt.size());
    let n = checked_numel(&v.dims[..v.rank], arg)?;
    if dst.len() != n * ds {
        return Err(shape_err(arg, "output size does not match the copied view"));
    }
    for_each_run(v, src.len() / ss, arg, |d0, s0, cnt, st| {
        if st == 1 {
            convert_run(
                sdt,
                &src[s0 * ss..(s0 + cnt) * ss],
                ddt,
                &mut dst[d0 * ds..(d0 + cnt) * ds],
            );
        } else {
            let mut p = s0 as isize;
            for j in 0..cnt {
                convert_elem(sdt, src, p as usize, ddt, dst, d0 + j);
                p += st;
            }
        }
    })?;
    Ok(())
}

// ------------------------------------------------------------------------------------------
// View-like copies
// ------------------------------------------------------------------------------------------

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
            if known == 0 || numel % known != 0 {
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
fn dim_mask(dims: &[i64], rank: usize, arg: usize) -> Result<u32, KernelError> {
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

// ------------------------------------------------------------------------------------------
// Slicing
// ------------------------------------------------------------------------------------------

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

// ------------------------------------------------------------------------------------------
// Concatenation and splitting
// ------------------------------------------------------------------------------------------

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
    let mut off = 0usize;
    for k in 0..count {
        let sz = size_of(k);
        let mut shape = *x.shape();
        if keep_dim {
            shape.dims_mut()[dim] = sz;
        } else {
            shape.remove(dim);
        }
        let mut out = ctx.list_output(out_arg, k, &shape)?;
        let dst = out.bytes_mut();
        let w = sz * inner * es;
        if w > 0 {
            for o in 0..outer {
                let s0 = (o * total + off) * inner * es;
                dst[o * w..(o + 1) * w].copy_from_slice(&src[s0..s0 + w]);
            }
        }
        off += sz;
    }
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

// ------------------------------------------------------------------------------------------
// Indexing
// ------------------------------------------------------------------------------------------

/// Typed view of an int64/int32 index tensor.
#[derive(Clone, Copy)]
enum IdxVals<'a> {
    I64(&'a [i64]),
    I32(&'a [i32]),
}

impl<'a> IdxVals<'a> {
    fn of(t: &TensorRef<'a>, arg: usize) -> Result<IdxVals<'a>, KernelError> {
        match t.dtype() {
            DType::I64 => Ok(IdxVals::I64(t.as_slice()?)),
            DType::I32 => Ok(IdxVals::I32(t.as_slice()?)),
            dtype => Err(KernelError::UnsupportedDType { arg, dtype }),
        }
    }

    fn len(&self) -> usize {
        match self {
            IdxVals::I64(s) => s.len(),
            IdxVals::I32(s) => s.len(),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            IdxVals::I64(s) => s[i],
            IdxVals::I32(s) => s[i] as i64,
        }
    }
}

/// Index `v` checked against `0..n` (negative values wrap once when `wrap_neg`).
fn check_index(v: i64, n: usize, wrap_neg: bool, arg: usize) -> Result<usize, KernelError> {
    let w = if wrap_neg && v < 0 {
        v.saturating_add(n as i64)
    } else {
        v
    };
    if w < 0 || w >= n as i64 {
        return Err(KernelError::IndexOutOfBounds {
            arg,
            index: v,
            size: n,
        });
    }
    Ok(w as usize)
}

/// One non-None entry of an advanced-index list.
#[derive(Clone, Copy)]
enum Entry<'a> {
    /// An int index tensor for input dim `dim`; `bstrides` map broadcast coordinates to it.
    Int {
        vals: IdxVals<'a>,
        dim: usize,
        bstrides: [usize; MAX_RANK],
    },
    /// A bool/uint8 mask over input dims `dim..dim + k`: the same as its `nonzero()` columns.
    /// `count` trues; `(cur_p, cur_flat)` caches where the last looked-up true element was.
    Mask {
        bytes: &'a [u8],
        dim: usize,
        k: usize,
        count: usize,
        cur_p: usize,
        cur_flat: usize,
    },
}

/// Where an outer dim of the indexing result takes its coordinate from.
#[derive(Clone, Copy)]
enum Role {
    /// Dim `j` of the broadcast index shape.
    Bcast(usize),
    /// An input dim that is not indexed.
    Kept(usize),
}

/// ATen advanced indexing (`self[indices]`) set up for one call: the result shape and, for
/// every outer position of the result, the input offset of a contiguous block of `inner`
/// elements (the input dims after the last indexed dim).
struct AdvIndex<'a> {
    arg: usize,
    entries: heapless::Vec<Entry<'a>, MAX_RANK>,
    in_dims: Shape,
    in_strides: [usize; MAX_RANK],
    bcast_rank: usize,
    /// Result shape.
    out: Shape,
    /// Result dims before the trailing block, and their roles.
    outer_rank: usize,
    roles: [Role; MAX_RANK],
    inner: usize,
}

impl<'a> AdvIndex<'a> {
    fn new(ctx: &Ctx<'_, 'a, '_>, x: &TensorRef<'a>, arg: usize) -> Result<Self, KernelError> {
        let r = x.rank();
        let n = ctx.list_len(arg)?;
        let too_many = shape_err(arg, "too many indices for tensor");
        let mut entries: heapless::Vec<Entry<'a>, MAX_RANK> = heapless::Vec::new();
        let mut tensors: heapless::Vec<TensorRef<'a>, MAX_RANK> = heapless::Vec::new();
        let mut bshape = Shape::scalar();
        let mut pos = 0usize; // next input dim
        let mut first = None;
        let mut end = 0usize;
        let mut consumed = 0usize;
        let bad_bcast = shape_err(arg, "indexing tensors could not be broadcast together");
        for k in 0..n {
            let Some(t) = ctx.list_input(arg, k)? else {
                pos += 1;
                continue;
            };
            match t.dtype() {
                DType::I64 | DType::I32 => {
                    if pos >= r {
                        return Err(too_many);
                    }
                    bshape = broadcast_shapes(&bshape, t.shape()).ok_or(bad_bcast)?;
                    let e = Entry::Int {
                        vals: IdxVals::of(&t, arg)?,
                        dim: pos,
                        bstrides: [0; MAX_RANK],
                    };
                    entries.push(e).map_err(|_| too_many)?;
                    tensors.push(t).map_err(|_| too_many)?;
                    first.get_or_insert(pos);
                    consumed += 1;
                    pos += 1;
                    end = pos;
                }
                DType::Bool | DType::U8 => {
                    let kd = t.rank();
                    if kd == 0 {
                        return Err(KernelError::Unsupported {
                            detail: "0-dim boolean index",
                        });
                    }
                    if pos + kd > r {
                        return Err(too_many);
                    }
                    if t.dims() != &x.dims()[pos..pos + kd] {
                        return Err(shape_err(
                            arg,
                            "the shape of the mask does not match the indexed tensor",
                        ));
                    }
                    let bytes = t.bytes();
                    let count = bytes.iter().filter(|&&b| b != 0).count();
                    let cs = make_shape(&[count], arg)?;
                    bshape = broadcast_shapes(&bshape, &cs).ok_or(bad_bcast)?;
                    let e = Entry::Mask {
                        bytes,
                        dim: pos,
                        k: kd,
                        count,
                        cur_p: usize::MAX,
                        cur_flat: 0,
                    };
                    entries.push(e).map_err(|_| too_many)?;
                    tensors.push(t).map_err(|_| too_many)?;
                    first.get_or_insert(pos);
                    consumed += kd;
                    pos += kd;
                    end = pos;
                }
                dtype => return Err(KernelError::UnsupportedDType { arg, dtype }),
            }
        }
        if pos > r {
            return Err(too_many);
        }
        let xs = contig_strides(x.dims());
        let mut in_strides = [0usize; MAX_RANK];
        for i in 0..r {
            in_strides[i] = xs[i] as usize;
        }
        let mut out = Shape::scalar();
        let mut roles = [Role::Kept(0); MAX_RANK];
        let rank_err = shape_err(arg, "result rank exceeds 16");
        let first = match first {
            None => {
                // No index tensors: the result is `self`.
                return Ok(AdvIndex {
                    arg,
                    entries,
                    in_dims: *x.shape(),
                    in_strides,
                    bcast_rank: 0,
                    out: *x.shape(),
                    outer_rank: 0,
                    roles,
                    inner: x.numel(),
                });
            }
            Some(f) => f,
        };
        let adjacent = consumed == end - first;
        let mut nroles = 0usize;
        let mut add = |out: &mut Shape, d: usize, role: Role| -> Res {
            out.push(d).ok_or(rank_err)?;
            roles[nroles] = role;
            nroles += 1;
            Ok(())
        };
        let mut indexed = [false; MAX_RANK];
        for e in entries.iter() {
            match *e {
                Entry::Int { dim, .. } => indexed[dim] = true,
                Entry::Mask { dim, k, .. } => indexed[dim..dim + k].fill(true),
            }
        }
        if adjacent {
            for d in 0..first {
                add(&mut out, x.dims()[d], Role::Kept(d))?;
            }
            for j in 0..bshape.rank() {
                add(&mut out, bshape.dims()[j], Role::Bcast(j))?;
            }
        } else {
            for j in 0..bshape.rank() {
                add(&mut out, bshape.dims()[j], Role::Bcast(j))?;
            }
            for (d, &size) in x.dims()[..end].iter().enumerate() {
                if !indexed[d] {
                    add(&mut out, size, Role::Kept(d))?;
                }
            }
        }
        let outer_rank = out.rank();
        for d in end..r {
            out.push(x.dims()[d]).ok_or(rank_err)?;
        }
        checked_numel(out.dims(), arg)?;
        // Broadcast strides of int index tensors (right-aligned against the broadcast shape).
        let rb = bshape.rank();
        for (e, t) in entries.iter_mut().zip(tensors.iter()) {
            if let Entry::Int { bstrides, .. } = e {
                let ts = contig_strides(t.dims());
                let off = rb - t.rank();
                for j in off..rb {
                    let td = t.dims()[j - off];
                    bstrides[j] = if td == 1 { 0 } else { ts[j - off] as usize };
                }
            }
        }
        Ok(AdvIndex {
            arg,
            entries,
            in_dims: *x.shape(),
            in_strides,
            bcast_rank: rb,
            out,
            outer_rank,
            roles,
            inner: prod(&x.dims()[end..]),
        })
    }

    /// Input element offset of the block at result coordinates `coords` (outer dims only).
    fn block_offset(&mut self, coords: &[usize]) -> Result<usize, KernelError> {
        let mut off = 0usize;
        let mut bc = [0usize; MAX_RANK];
        for (&c, role) in coords.iter().zip(self.roles.iter()) {
            match *role {
                Role::Bcast(j) => bc[j] = c,
                Role::Kept(d) => off += c * self.in_strides[d],
            }
        }
        let rb = self.bcast_rank;
        for e in self.entries.iter_mut() {
            match e {
                Entry::Int {
                    vals,
                    dim,
                    bstrides,
                } => {
                    let p: usize = bc[..rb]
                        .iter()
                        .zip(bstrides[..rb].iter())
                        .map(|(&c, &s)| c * s)
                        .sum();
                    let n = self.in_dims.dims()[*dim];
                    let i = check_index(vals.get(p), n, true, self.arg)?;
                    off += i * self.in_strides[*dim];
                }
                Entry::Mask {
                    bytes,
                    dim,
                    k,
                    count,
                    cur_p,
                    cur_flat,
                } => {
                    let p = if *count > 1 { bc[rb - 1] } else { 0 };
                    // Find the p-th true element, continuing from the cached position.
                    if *cur_p == usize::MAX || p < *cur_p {
                        *cur_p = 0;
                        *cur_flat = bytes
                            .iter()
                            .position(|&b| b != 0)
                            .ok_or(value_err(self.arg, "mask has no true element"))?;
                    }
                    while *cur_p < p {
                        let rest = bytes.get(*cur_flat + 1..).unwrap_or(&[]);
                        let step = rest
                            .iter()
                            .position(|&b| b != 0)
                            .ok_or(value_err(self.arg, "mask index past its true elements"))?;
                        *cur_flat += step + 1;
                        *cur_p += 1;
                    }
                    // The mask covers contiguous input dims, so its flat index scales by the
                    // stride of its last dim.
                    off += *cur_flat * self.in_strides[*dim + *k - 1];
                }
            }
        }
        Ok(off)
    }

    /// Calls `f(block_number, outer_coords, input_offset)` for every block, in result order.
    fn for_each_block(&mut self, mut f: impl FnMut(usize, &[usize], usize) -> Res) -> Res {
        let out = self.out;
        let odims = &out.dims()[..self.outer_rank];
        let nblocks = prod(odims);
        if nblocks == 0 || self.inner == 0 {
            return Ok(());
        }
        let mut c = [0usize; MAX_RANK];
        for blk in 0..nblocks {
            let off = self.block_offset(&c[..self.outer_rank])?;
            f(blk, &c[..self.outer_rank], off)?;
            for k in (0..self.outer_rank).rev() {
                c[k] += 1;
                if c[k] < odims[k] {
                    break;
                }
                c[k] = 0;
            }
        }
        Ok(())
    }
}

/// `aten::index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out)`: ATen advanced
/// indexing. Index tensors are int64/int32 (negative values wrap once) or bool/uint8 masks
/// (a mask over k dims acts as its k `nonzero()` columns); None keeps a dim. Index tensors
/// broadcast together; the broadcast dims replace the indexed dims in place when the indexed
/// dims are adjacent, and go first otherwise. Any dtype for self (out has self's dtype);
/// contiguous.
fn index_tensor_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let mut ai = AdvIndex::new(ctx, &x, 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, &ai.out)?;
    let es = x.dtype().size();
    let blk = ai.inner * es;
    let src = x.bytes();
    let dst = out.bytes_mut();
    let oob = shape_err(1, "index block outside the input");
    ai.for_each_block(|b, _, off| {
        let s = src.get(off * es..off * es + blk).ok_or(oob)?;
        let d = dst.get_mut(b * blk..(b + 1) * blk).ok_or(oob)?;
        d.copy_from_slice(s);
        Ok(())
    })
}

/// Adds element `si` of `src` into element `di` of `dst` (same dtype; ints wrap, bool ORs).
fn add_elem(dt: DType, dst: &mut [u8], di: usize, src: &[u8], si: usize) {
    if dt.is_float() {
        let v = read_f64(dt, dst, di) + read_f64(dt, src, si);
        write_f64(dt, dst, di, v);
    } else {
        let v = read_i64(dt, dst, di).wrapping_add(read_i64(dt, src, si));
        write_i64(dt, dst, di, v);
    }
}

/// `aten::index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False,
/// *, Tensor(a!) out)`: out = self with `out[indices] = values` (or `+=` when `accumulate`,
/// summing duplicate indices). `values` (same dtype as self) broadcasts to the indexing result
/// shape. Indices as in `index.Tensor`. Any dtype; contiguous.
fn index_put_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(6)?;
    let x = ctx.input(0)?;
    let mut ai = AdvIndex::new(ctx, &x, 1)?;
    let vals = ctx.input(2)?;
    let acc = ctx.bool(3)?;
    if vals.dtype() != x.dtype() {
        return Err(KernelError::DTypeMismatch {
            arg: 2,
            expected: x.dtype(),
            got: vals.dtype(),
        });
    }
    check_out_dtype(ctx, 4, x.dtype())?;
    // Broadcast strides of values against the result shape.
    let res = ai.out;
    let bad = shape_err(2, "values cannot be broadcast to the indexing result shape");
    if vals.rank() > res.rank() {
        return Err(bad);
    }
    let vs = contig_strides(vals.dims());
    let mut vstrides = [0isize; MAX_RANK];
    let off = res.rank() - vals.rank();
    for j in off..res.rank() {
        let vd = vals.dims()[j - off];
        vstrides[j] = if vd == res.dims()[j] {
            vs[j - off]
        } else if vd == 1 {
            0
        } else {
            return Err(bad);
        };
    }
    let mut out = ctx.output(4, x.shape())?;
    let dst = out.bytes_mut();
    copy_all(dst, x.bytes(), 4)?;
    let dt = x.dtype();
    let es = dt.size();
    let vsrc = vals.bytes();
    let orank = ai.outer_rank;
    let inner_dims = &res.dims()[orank..];
    let oob = shape_err(1, "index block outside the input");
    ai.for_each_block(|_, coords, off| {
        let vbase: isize = coords
            .iter()
            .zip(vstrides.iter())
            .map(|(&c, &s)| c as isize * s)
            .sum();
        let mut v = View::new(vbase);
        for (i, &d) in inner_dims.iter().enumerate() {
            v.push(d, vstrides[orank + i], 2)?;
        }
        let mut ok = true;
        for_each_run(&v, vals.numel(), 2, |d0, s0, cnt, st| {
            let Some(block) = dst.get_mut((off + d0) * es..(off + d0 + cnt) * es) else {
                ok = false;
                return;
            };
            if !acc && st == 1 {
                block.copy_from_slice(&vsrc[s0 * es..(s0 + cnt) * es]);
                return;
            }
            let mut p = s0 as isize;
            for j in 0..cnt {
                let q = p as usize;
                if acc {
                    add_elem(dt, block, j, vsrc, q);
                } else {
                    block[j * es..(j + 1) * es].copy_from_slice(&vsrc[q * es..(q + 1) * es]);
                }
                p += st;
            }
        })?;
        if ok {
            Ok(())
        } else {
            Err(oob)
        }
    })
}

/// `aten::index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out)`: the slices
/// of `self` at `index` (int64/int32, rank ≤ 1, values in `0..size`) along `dim`.
/// Any dtype for self (out has self's dtype); contiguous.
fn index_select_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let it = ctx.input(2)?;
    let idx = IdxVals::of(&it, 2)?;
    if it.rank() > 1 {
        return Err(shape_err(2, "index_select(): index must be a vector"));
    }
    check_out_dtype(ctx, 3, x.dtype())?;
    let m = idx.len();
    let es = x.dtype().size();
    if r == 0 {
        if m != 1 {
            return Err(shape_err(
                2,
                "index_select(): index to a scalar can have only 1 value",
            ));
        }
        check_index(idx.get(0), 1, false, 2)?;
        let mut out = ctx.output(3, x.shape())?;
        return copy_all(out.bytes_mut(), x.bytes(), 3);
    }
    let n = x.dims()[dim];
    for i in 0..m {
        check_index(idx.get(i), n, false, 2)?;
    }
    let mut shape = *x.shape();
    shape.dims_mut()[dim] = m;
    checked_numel(shape.dims(), 3)?;
    let outer = prod(&x.dims()[..dim]);
    let blk = prod(&x.dims()[dim + 1..]) * es;
    let mut out = ctx.output(3, &shape)?;
    let dst = out.bytes_mut();
    let src = x.bytes();
    if blk == 0 {
        return Ok(());
    }
    for o in 0..outer {
        for j in 0..m {
            let s0 = (o * n + idx.get(j) as usize) * blk;
            let d0 = (o * m + j) * blk;
            dst[d0..d0 + blk].copy_from_slice(&src[s0..s0 + blk]);
        }
    }
    Ok(())
}

/// `aten::gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False,
/// Tensor(a!) out)`: `out[i][j][k] = self[i][index[i][j][k]][k]` (for dim 1). `index` is int64
/// with self's rank and sizes ≤ self's outside `dim`; values in `0..size(dim)`.
/// Any dtype for self (out has self's dtype, index's shape); contiguous.
fn gather_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(6)?;
    let x = ctx.input(0)?;
    let d = ctx.int(1)?;
    let it = ctx.input(2)?;
    let _sparse = ctx.bool(3)?;
    if it.dtype() != DType::I64 {
        return Err(KernelError::DTypeMismatch {
            arg: 2,
            expected: DType::I64,
            got: it.dtype(),
        });
    }
    let idx = it.as_slice::<i64>()?;
    let dim = wrap(d, x.rank(), 1)?;
    // Rank-0 tensors act as rank 1 (ATen `ensure_nonempty_dim`).
    let xd: &[usize] = if x.rank() == 0 { &[1] } else { x.dims() };
    let id: &[usize] = if it.rank() == 0 { &[1] } else { it.dims() };
    if xd.len() != id.len() {
        return Err(shape_err(
            2,
            "index must have the same number of dimensions as input",
        ));
    }
    for k in 0..xd.len() {
        if k != dim && id[k] > xd[k] {
            return Err(shape_err(
                2,
                "index size must not exceed the input size outside the gather dim",
            ));
        }
    }
    check_out_dtype(ctx, 4, x.dtype())?;
    let mut out = ctx.output(4, it.shape())?;
    let m = idx.len();
    if m == 0 {
        return Ok(());
    }
    let es = x.dtype().size();
    let xs = contig_strides(xd);
    let n = xd[dim];
    let r = id.len();
    let src = x.bytes();
    let dst = out.bytes_mut();
    let mut c = [0usize; MAX_RANK];
    let mut base = 0usize; // offset of the coordinates outside `dim`
    for (j, &v) in idx.iter().enumerate() {
        let i = check_index(v, n, false, 2)?;
        let s0 = (base + i * xs[dim] as usize) * es;
        dst[j * es..(j + 1) * es].copy_from_slice(&src[s0..s0 + es]);
        for k in (0..r).rev() {
            c[k] += 1;
            if k != dim {
                base += xs[k] as usize;
            }
            if c[k] < id[k] {
                break;
            }
            if k != dim {
                base -= xs[k] as usize * id[k];
            }
            c[k] = 0;
        }
    }
    Ok(())
}

/// `aten::embedding.out(Tensor weight, Tensor indices, SymInt padding_idx=-1,
/// bool scale_grad_by_freq=False, bool sparse=False, *, Tensor(a!) out)`: rows of the 2-D
/// `weight` picked by `indices` (int64/int32, any shape, values in `0..rows`); out shape is
/// `indices.shape + [embedding_dim]`. Any dtype for weight (out has its dtype); contiguous.
fn embedding_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(7)?;
    let w = ctx.input(0)?;
    let it = ctx.input(1)?;
    let _padding_idx = ctx.int(2)?;
    let _scale = ctx.bool(3)?;
    let _sparse = ctx.bool(4)?;
    if w.rank() != 2 {
        return Err(shape_err(0, "embedding weight must be 2-D"));
    }
    let idx = IdxVals::of(&it, 1)?;
    let (rows, dim) = (w.dims()[0], w.dims()[1]);
    let mut shape = *it.shape();
    shape
        .push(dim)
        .ok_or(shape_err(5, "result rank exceeds 16"))?;
    checked_numel(shape.dims(), 5)?;
    check_out_dtype(ctx, 5, w.dtype())?;
    for i in 0..idx.len() {
        check_index(idx.get(i), rows, false, 1)?;
    }
    let mut out = ctx.output(5, &shape)?;
    let row = dim * w.dtype().size();
    if row == 0 {
        return Ok(());
    }
    let src = w.bytes();
    let dst = out.bytes_mut();
    match idx {
        IdxVals::I64(s) => {
            for (d, &v) in dst.chunks_exact_mut(row).zip(s) {
                let v = v as usize;
                d.copy_from_slice(&src[v * row..(v + 1) * row]);
            }
        }
        IdxVals::I32(s) => {
            for (d, &v) in dst.chunks_exact_mut(row).zip(s) {
                let v = v as usize;
                d.copy_from_slice(&src[v * row..(v + 1) * row]);
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// cumsum, tril/triu, constant_pad_nd, flip, roll
// ------------------------------------------------------------------------------------------

/// `v` rounded to the precision of `dt`.
fn round_to(dt: DType, v: f64) -> f64 {
    let mut b = [0u8; 8];
    write_f64(dt, &mut b, 0, v);
    read_f64(dt, &b, 0)
}

/// `v` wrapped to the range of `dt` (C cast).
fn wrap_to(dt: DType, v: i64) -> i64 {
    let mut b = [0u8; 8];
    write_i64(dt, &mut b, 0, v);
    read_i64(dt, &b, 0)
}

/// `aten::cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)`:
/// running sums along `dim`. Result dtype: `dtype` if given, else self's dtype for floats and
/// int64 for integer and bool inputs (out must have it). As in ATen on CPU, self is first cast
/// to the result dtype; f32/f64 accumulate in f64, f16/bf16 in f32, integers in wrapping i64.
/// Fast paths for f32 → f32 and i64 → i64. Contiguous.
fn cumsum_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let dt = match ctx.opt_int(2)? {
        None => None,
        Some(c) => Some(
            i8::try_from(c)
                .ok()
                .and_then(DType::from_scalar_type)
                .ok_or(value_err(2, "unsupported ScalarType"))?,
        ),
    };
    let odt = dt.unwrap_or(if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::I64
    });
    check_out_dtype(ctx, 3, odt)?;
    let mut out = ctx.output(3, x.shape())?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (outer, n, inner) = if r == 0 {
        (1, 1, 1)
    } else {
        (
            prod(&x.dims()[..dim]),
            x.dims()[dim],
            prod(&x.dims()[dim + 1..]),
        )
    };
    match (x.dtype(), odt) {
        (DType::F32, DType::F32) => {
            let s = x.as_slice::<f32>()?;
            let d = out.as_mut_slice::<f32>()?;
            if inner == 1 {
                for (sr, dr) in s.chunks_exact(n).zip(d.chunks_exact_mut(n)) {
                    let mut acc = 0f64;
                    for (a, b) in sr.iter().zip(dr.iter_mut()) {
                        acc += *a as f64;
                        *b = acc as f32;
                    }
                }
            } else {
                for o in 0..outer {
                    for i in 0..inner {
                        let mut acc = 0f64;
                        for j in 0..n {
                            let p = (o * n + j) * inner + i;
                            acc += s[p] as f64;
                            d[p] = acc as f32;
                        }
                    }
                }
            }
        }
        (DType::I64, DType::I64) => {
            let s = x.as_slice::<i64>()?;
            let d = out.as_mut_slice::<i64>()?;
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = 0i64;
                    for j in 0..n {
                        let p = (o * n + j) * inner + i;
                        acc = acc.wrapping_add(s[p]);
                        d[p] = acc;
                    }
                }
            }
        }
        (sdt, odt) => {
            let src = x.bytes();
            let dst = out.bytes_mut();
            let half = matches!(odt, DType::F16 | DType::BF16);
            for o in 0..outer {
                for i in 0..inner {
                    let mut facc = 0f64;
                    let mut iacc = 0i64;
                    for j in 0..n {
                        let p = (o * n + j) * inner + i;
                        if odt.is_float() {
                            let v = round_to(odt, read_f64(sdt, src, p));
                            facc = if half {
                                (facc as f32 + v as f32) as f64
                            } else {
                                facc + v
                            };
                            write_f64(odt, dst, p, facc);
                        } else {
                            let v = if sdt.is_float() {
                                read_f64(sdt, src, p) as i64
                            } else {
                                read_i64(sdt, src, p)
                            };
                            iacc = iacc.wrapping_add(wrap_to(odt, v));
                            write_i64(odt, dst, p, iacc);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Shared body of `tril` (`lower`) and `triu`.
fn tri(ctx: &mut Ctx, lower: bool) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r < 2 {
        return Err(shape_err(0, "input tensor must have at least 2 dimensions"));
    }
    let diag = ctx.int(1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, x.shape())?;
    let (rows, cols) = (x.dims()[r - 2], x.dims()[r - 1]);
    let es = x.dtype().size();
    let rb = cols * es;
    if rb == 0 {
        return Ok(());
    }
    let src = x.bytes();
    let dst = out.bytes_mut();
    for (row, (s, d)) in src
        .chunks_exact(rb)
        .zip(dst.chunks_exact_mut(rb))
        .enumerate()
    {
        let i = (row % rows.max(1)) as i64;
        let t = i.saturating_add(diag);
        // tril keeps columns j <= i + diag; triu keeps j >= i + diag.
        let split = if lower {
            t.saturating_add(1).clamp(0, cols as i64)
        } else {
            t.clamp(0, cols as i64)
        } as usize;
        let (a, b) = (split * es, rb);
        if lower {
            d[..a].copy_from_slice(&s[..a]);
            d[a..b].fill(0);
        } else {
            d[..a].fill(0);
            d[a..b].copy_from_slice(&s[a..b]);
        }
    }
    Ok(())
}

/// `aten::tril.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`: keeps the lower
/// triangle (`col - row <= diagonal`) of the last two dims, zeroes the rest.
/// Any dtype; contiguous.
fn tril_out(ctx: &mut Ctx) -> Res {
    tri(ctx, true)
}

/// `aten::triu.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`: keeps the upper
/// triangle (`col - row >= diagonal`) of the last two dims, zeroes the rest.
/// Any dtype; contiguous.
fn triu_out(ctx: &mut Ctx) -> Res {
    tri(ctx, false)
}

/// `aten::constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out)`:
/// pads (or, for negative pads, crops) dims from the last one backwards by the pairs
/// `(pad[2i], pad[2i+1])`, filling with `value` converted to self's dtype.
/// Any dtype; contiguous.
fn constant_pad_nd_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let pad = ctx.int_list(1)?;
    let value = ctx.scalar(2)?;
    let r = x.rank();
    if pad.len() % 2 != 0 {
        return Err(value_err(1, "length of pad must be even"));
    }
    if pad.len() / 2 > r {
        return Err(value_err(
            1,
            "length of pad must be at most twice the number of dimensions",
        ));
    }
    check_out_dtype(ctx, 3, x.dtype())?;
    let mut before = [0i64; MAX_RANK];
    let mut od = [0usize; MAX_RANK];
    od[..r].copy_from_slice(x.dims());
    for i in 0..pad.len() / 2 {
        let d = r - 1 - i;
        let (b, a) = (pad[2 * i], pad[2 * i + 1]);
        let n = x.dims()[d] as i64;
        let bad = shape_err(1, "negative padding crops more than the input size");
        let cropped = n
            .checked_add(b.min(0))
            .and_then(|v| v.checked_add(a.min(0)))
            .ok_or(bad)?;
        if cropped < 0 {
            return Err(bad);
        }
        let new = n
            .checked_add(b)
            .and_then(|v| v.checked_add(a))
            .ok_or(shape_err(1, "tensor size overflows"))?;
        od[d] = to_size(new, 1, "padding results in a negative output size")?;
        before[d] = b;
    }
    checked_numel(&od[..r], 1)?;
    let shape = make_shape(&od[..r], 1)?;
    let dt = x.dtype();
    let es = dt.size();
    let pat = scalar_bytes(dt, value);
    let pat = &pat[..es];
    let mut out = ctx.output(3, &shape)?;
    let src = x.bytes();
    let dst = out.bytes_mut();
    if r == 0 {
        return copy_all(dst, src, 3);
    }
    let l = od[r - 1];
    if l == 0 || dst.is_empty() {
        return Ok(());
    }
    let xs = contig_strides(x.dims());
    let xl = x.dims()[r - 1] as i64;
    let bl = before[r - 1];
    // Columns [j0, j1) of every valid row come from the input (column j - bl).
    let j0 = bl.clamp(0, l as i64);
    let j1 = (xl + bl).clamp(j0, l as i64);
    let (j0, j1) = (j0 as usize, j1 as usize);
    let mut c = [0usize; MAX_RANK];
    for row in dst.chunks_exact_mut(l * es) {
        let mut src_row = 0usize;
        let mut valid = true;
        for d in 0..r - 1 {
            let ic = c[d] as i64 - before[d];
            if ic < 0 || ic >= x.dims()[d] as i64 {
                valid = false;
                break;
            }
            src_row += ic as usize * xs[d] as usize;
        }
        if valid && j1 > j0 {
            fill(&mut row[..j0 * es], pat);
            let s0 = (src_row as i64 + j0 as i64 - bl) as usize;
            row[j0 * es..j1 * es].copy_from_slice(&src[s0 * es..(s0 + j1 - j0) * es]);
            fill(&mut row[j1 * es..], pat);
        } else {
            fill(row, pat);
        }
        for d in (0..r - 1).rev() {
            c[d] += 1;
            if c[d] < od[d] {
                break;
            }
            c[d] = 0;
        }
    }
    Ok(())
}

/// `aten::flip.out(Tensor self, int[] dims, *, Tensor(a!) out)`: reverses the order of elements
/// along each listed dim (no duplicates). Any dtype; contiguous.
fn flip_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let mask = dim_mask(&ctx.int_list(1)?, r, 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let st = contig_strides(x.dims());
    let mut base = 0isize;
    let mut v = View::new(0);
    for (i, &d) in x.dims().iter().enumerate() {
        if mask & (1 << i) != 0 && d > 0 {
            base += (d as isize - 1) * st[i];
            v.push(d, -st[i], 2)?;
        } else {
            v.push(d, st[i], 2)?;
        }
    }
    v.base = base;
    let mut out = ctx.output(2, x.shape())?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), 2)
}

/// `aten::roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out)`: rotates
/// elements along `dims` by `shifts` (with no dims: over the flattened tensor, one shift).
/// Repeated dims add their shifts. Any dtype; contiguous.
fn roll_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let shifts = ctx.int_list(1)?;
    let dims = ctx.int_list(2)?;
    let r = x.rank();
    if shifts.is_empty() {
        return Err(value_err(1, "roll: shifts required"));
    }
    let flat = dims.is_empty();
    if flat && shifts.len() != 1 {
        return Err(value_err(1, "roll: shifts and dims must align"));
    }
    if !flat && shifts.len() != dims.len() {
        return Err(value_err(2, "roll: shifts and dims must align"));
    }
    if !flat && r == 0 {
        return Err(shape_err(2, "roll: dims given for a 0-dim tensor"));
    }
    // Effective shift per dim in 0..size.
    let mut sh = [0usize; MAX_RANK];
    if !flat {
        for (&d, &s) in dims.iter().zip(shifts.iter()) {
            let w = wrap(d, r, 2)?;
            let n = x.dims()[w];
            if n > 0 {
                let s = s.rem_euclid(n as i64) as usize;
                sh[w] = (sh[w] + s) % n;
            }
        }
    }
    check_out_dtype(ctx, 3, x.dtype())?;
    let mut out = ctx.output(3, x.shape())?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let es = x.dtype().size();
    let src = x.bytes();
    let dst = out.bytes_mut();
    let rotate = |d: &mut [u8], s: &[u8], len: usize, k: usize| {
        // d[k..] = s[..len-k]; d[..k] = s[len-k..]
        d[k * es..len * es].copy_from_slice(&s[..(len - k) * es]);
        d[..k * es].copy_from_slice(&s[(len - k) * es..len * es]);
    };
    if flat || r == 0 {
        let k = shifts[0].rem_euclid(n as i64) as usize;
        rotate(dst, src, n, k);
        return Ok(());
    }
    let l = x.dims()[r - 1];
    let xs = contig_strides(x.dims());
    let mut c = [0usize; MAX_RANK];
    for row in dst.chunks_exact_mut(l * es) {
        let mut s0 = 0usize;
        for d in 0..r - 1 {
            let n = x.dims()[d];
            s0 += ((c[d] + n - sh[d]) % n) * xs[d] as usize;
        }
        rotate(row, &src[s0 * es..(s0 + l) * es], l, sh[r - 1]);
        for d in (0..r - 1).rev() {
            c[d] += 1;
            if c[d] < x.dims()[d] {
                break;
            }
            c[d] = 0;
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Dim-order ops
// ------------------------------------------------------------------------------------------

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

/// Kernels of this module.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::view_copy.out", view_copy_out),
    KernelDef::new("aten::unsqueeze_copy.out", unsqueeze_copy_out),
    KernelDef::new("aten::squeeze_copy.dims_out", squeeze_copy_dims_out),
    KernelDef::new("aten::squeeze_copy.dim_out", squeeze_copy_dim_out),
    KernelDef::new("aten::squeeze_copy.out", squeeze_copy_out),
    KernelDef::new("aten::permute_copy.out", permute_copy_out),
    KernelDef::new("aten::transpose_copy.int_out", transpose_copy_int_out),
    KernelDef::new("aten::t_copy.out", t_copy_out),
    KernelDef::new("aten::expand_copy.out", expand_copy_out),
    KernelDef::new("aten::repeat.out", repeat_out),
    KernelDef::new("aten::slice_copy.Tensor_out", slice_copy_tensor_out),
    KernelDef::new("aten::select_copy.int_out", select_copy_int_out),
    KernelDef::new("aten::narrow_copy.out", narrow_copy_out),
    KernelDef::new("aten::cat.out", cat_out),
    KernelDef::new("aten::stack.out", stack_out),
    KernelDef::new("aten::split_with_sizes_copy.out", split_with_sizes_copy_out),
    KernelDef::new("aten::split_copy.Tensor_out", split_copy_tensor_out),
    KernelDef::new("aten::unbind_copy.int_out", unbind_copy_int_out),
    KernelDef::new("aten::index.Tensor_out", index_tensor_out),
    KernelDef::new("aten::index_put.out", index_put_out),
    KernelDef::new("aten::index_select.out", index_select_out),
    KernelDef::new("aten::gather.out", gather_out),
    KernelDef::new("aten::embedding.out", embedding_out),
    KernelDef::new("aten::cumsum.out", cumsum_out),
    KernelDef::new("aten::tril.out", tril_out),
    KernelDef::new("aten::triu.out", triu_out),
    KernelDef::new("aten::constant_pad_nd.out", constant_pad_nd_out),
    KernelDef::new("aten::flip.out", flip_out),
    KernelDef::new("aten::roll.out", roll_out),
    KernelDef::new("dim_order_ops::_clone_dim_order.out", clone_dim_order_out),
    KernelDef::new(
        "dim_order_ops::_to_dim_order_copy.out",
        to_dim_order_copy_out,
    ),
];

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::testing::{OpTest, TestTensor};
    use crate::KernelError;
    use std::vec::Vec;

    // ---- reference helpers (independent of the kernels) ----

    fn numel(d: &[usize]) -> usize {
        d.iter().product()
    }

    /// Row-major multi-index of flat index `i`.
    fn unravel(mut i: usize, d: &[usize]) -> Vec<usize> {
        let mut idx = vec![0; d.len()];
        for k in (0..d.len()).rev() {
            idx[k] = i % d[k];
            i /= d[k];
        }
        idx
    }

    fn ravel(idx: &[usize], d: &[usize]) -> usize {
        idx.iter().zip(d).fold(0, |acc, (&i, &n)| acc * n + i)
    }

    /// Deterministic pseudo-random f32 data.
    fn data(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as i32 % 1000) as f32 / 10.0
            })
            .collect()
    }

    fn iota_i64(n: usize) -> Vec<i64> {
        (0..n as i64).map(|v| v * 3 - 7).collect()
    }

    fn run1(t: &OpTest) -> TestTensor {
        let mut outs = t.run().expect("run");
        outs.remove(0)
    }

    /// Runs a single-input, single-output op whose extra arguments are built by `extra`.
    fn unary_f32(
        op: &str,
        dims: &[usize],
        x: &[f32],
        out_dims: &[usize],
        extra: impl FnOnce(&mut OpTest) -> Vec<i32>,
    ) -> TestTensor {
        let mut t = OpTest::new(op);
        let a = t.input_f32(dims, x);
        let mut args = vec![a];
        args.extend(extra(&mut t));
        let o = t.output(DType::F32, out_dims);
        args.push(o);
        args.push(o);
        t.call(&args);
        run1(&t)
    }

    /// Reference permute.
    fn permute_ref(x: &[f32], d: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<f32>) {
        let od: Vec<usize> = perm.iter().map(|&p| d[p]).collect();
        let out = (0..numel(&od))
            .map(|i| {
                let oi = unravel(i, &od);
                let mut xi = vec![0; d.len()];
                for (k, &p) in perm.iter().enumerate() {
                    xi[p] = oi[k];
                }
                x[ravel(&xi, d)]
            })
            .collect();
        (od, out)
    }

    // ---- view-like ----

    #[test]
    fn view_copy_infers_and_copies() {
        let x = data(24, 1);
        let o = unary_f32("aten::view_copy.out", &[2, 3, 4], &x, &[4, 6], |t| {
            vec![t.int_list(&[4, -1])]
        });
        assert_eq!(o.shape, vec![4, 6]);
        assert_eq!(o.f32(), x);
        // int64, rank 0 target from one element
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_i64(&[1, 1], &[42]);
        let s = t.int_list(&[]);
        let o = t.output(DType::I64, &[]);
        t.call(&[a, s, o, o]);
        let r = run1(&t);
        assert_eq!((r.shape.clone(), r.i64()), (vec![], vec![42]));
    }

    #[test]
    fn view_copy_errors() {
        let x = data(6, 2);
        for (size, want_value) in [
            (vec![-1i64, -1], true),
            (vec![4, 2], false),
            (vec![-1, 4], false),
        ] {
            let mut t = OpTest::new("aten::view_copy.out");
            let a = t.input_f32(&[2, 3], &x);
            let s = t.int_list(&size);
            let o = t.output(DType::F32, &[6]);
            t.call(&[a, s, o, o]);
            let e = t.run_kernel_err();
            if want_value {
                assert!(matches!(e, KernelError::Value { arg: 1, .. }), "{e:?}");
            } else {
                assert!(matches!(e, KernelError::Shape { arg: 1, .. }), "{e:?}");
            }
        }
        // zero elements with -1 is ambiguous
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_f32(&[0, 3], &[]);
        let s = t.int_list(&[-1, 0]);
        let o = t.output(DType::F32, &[0]);
        t.call(&[a, s, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
        // wrong argument count
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_f32(&[2, 3], &x);
        let o = t.output(DType::F32, &[6]);
        t.call(&[a, o, o]);
        assert_eq!(
            t.run_kernel_err(),
            KernelError::ArgCount {
                expected: 4,
                got: 3
            }
        );
        // dtype mismatch
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_f32(&[2, 3], &x);
        let s = t.int_list(&[6]);
        let o = t.output(DType::I64, &[6]);
        t.call(&[a, s, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 2, .. }
        ));
    }

    #[test]
    fn unsqueeze_and_squeeze() {
        let x = data(6, 3);
        for (dim, shape) in [
            (0i64, vec![1, 2, 3]),
            (1, vec![2, 1, 3]),
            (2, vec![2, 3, 1]),
            (-1, vec![2, 3, 1]),
            (-3, vec![1, 2, 3]),
        ] {
            let o = unary_f32("aten::unsqueeze_copy.out", &[2, 3], &x, &shape, |t| {
                vec![t.int(dim)]
            });
            assert_eq!(o.shape, shape);
            assert_eq!(o.f32(), x);
        }
        // rank 0
        let o = unary_f32("aten::unsqueeze_copy.out", &[], &[5.0], &[1], |t| {
            vec![t.int(-1)]
        });
        assert_eq!((o.shape.clone(), o.f32()), (vec![1], vec![5.0]));
        // out of range
        let mut t = OpTest::new("aten::unsqueeze_copy.out");
        let a = t.input_f32(&[2, 3], &x);
        let d = t.int(3);
        let o = t.output(DType::F32, &[2, 3, 1]);
        t.call(&[a, d, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::IndexOutOfBounds { arg: 1, .. }
        ));

        // squeeze variants on [1, 3, 1, 2]
        let x = data(6, 4);
        let o = unary_f32(
            "aten::squeeze_copy.dims_out",
            &[1, 3, 1, 2],
            &x,
            &[3, 1, 2],
            |t| vec![t.int_list(&[0, 1])],
        );
        assert_eq!(o.shape, vec![3, 1, 2]);
        let o = unary_f32(
            "aten::squeeze_copy.dims_out",
            &[1, 3, 1, 2],
            &x,
            &[3, 2],
            |t| vec![t.int_list(&[-2, 0])],
        );
        assert_eq!((o.shape.clone(), o.f32()), (vec![3, 2], x.clone()));
        let o = unary_f32(
            "aten::squeeze_copy.dim_out",
            &[1, 3, 1, 2],
            &x,
            &[1, 3, 2],
            |t| vec![t.int(2)],
        );
        assert_eq!(o.shape, vec![1, 3, 2]);
        let mut t = OpTest::new("aten::squeeze_copy.out");
        let a = t.input_i64(&[1, 3, 1, 2], &iota_i64(6));
        let o = t.output(DType::I64, &[3, 2]);
        t.call(&[a, o, o]);
        let r = run1(&t);
        assert_eq!((r.shape.clone(), r.i64()), (vec![3, 2], iota_i64(6)));
        // repeated dims
        let mut t = OpTest::new("aten::squeeze_copy.dims_out");
        let a = t.input_f32(&[1, 3, 1, 2], &x);
        let d = t.int_list(&[0, -4]);
        let o = t.output(DType::F32, &[3, 1, 2]);
        t.call(&[a, d, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 1, .. }
        ));
    }

    #[test]
    fn permute_matches_reference() {
        let perms3: [[usize; 3]; 6] = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        let d = [3, 17, 5];
        let x = data(numel(&d), 5);
        for p in perms3 {
            let (od, want) = permute_ref(&x, &d, &p);
            let dims: Vec<i64> = p.iter().map(|&v| v as i64 - 3).collect(); // negative dims
            let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
                vec![t.int_list(&dims)]
            });
            assert_eq!(o.shape, od);
            assert_eq!(o.f32(), want, "{p:?}");
        }
        // rank 4, attention-style [0, 2, 1, 3] and a full reversal
        let d = [2, 7, 3, 4];
        let x = data(numel(&d), 6);
        for p in [[0usize, 2, 1, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            let (od, want) = permute_ref(&x, &d, &p);
            let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
            let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
                vec![t.int_list(&dims)]
            });
            assert_eq!(o.f32(), want, "{p:?}");
        }
        // bool and int64 dtypes
        let bools: Vec<bool> = (0..12).map(|i| i % 3 == 0).collect();
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input_bool(&[3, 4], &bools);
        let p = t.int_list(&[1, 0]);
        let o = t.output(DType::Bool, &[4, 3]);
        t.call(&[a, p, o, o]);
        let r = run1(&t);
        let want: Vec<bool> = (0..12).map(|i| bools[(i % 3) * 4 + i / 3]).collect();
        assert_eq!(r.bools(), want);
        // repeated dim is an error
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input_f32(&[3, 4], &data(12, 0));
        let p = t.int_list(&[1, -1]);
        let o = t.output(DType::F32, &[4, 3]);
        t.call(&[a, p, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 1, .. }
        ));
        // wrong length
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input_f32(&[3, 4], &data(12, 0));
        let p = t.int_list(&[1]);
        let o = t.output(DType::F32, &[4, 3]);
        t.call(&[a, p, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
    }

    #[test]
    fn tiled_transposes() {
        // last-two-dims transposes large enough for the tiled path, with partial tiles
        for (d, p) in [
            (vec![3usize, 17, 33], vec![0usize, 2, 1]),
            (vec![40, 20], vec![1, 0]),
            (vec![2, 3, 16, 16], vec![0, 1, 3, 2]),
            (vec![2, 19, 3, 21], vec![0, 3, 2, 1]),
        ] {
            let x = data(numel(&d), 31);
            let (od, want) = permute_ref(&x, &d, &p);
            let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
            let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
                vec![t.int_list(&dims)]
            });
            assert_eq!(o.f32(), want, "{d:?} {p:?}");
        }
        // int64 (8-byte elements) through the same path
        let v = iota_i64(20 * 18);
        let mut t = OpTest::new("aten::t_copy.out");
        let a = t.input_i64(&[20, 18], &v);
        let o = t.output(DType::I64, &[18, 20]);
        t.call(&[a, o, o]);
        let want: Vec<i64> = (0..360).map(|i| v[(i % 20) * 18 + i / 20]).collect();
        assert_eq!(run1(&t).i64(), want);
    }

    #[test]
    fn transpose_and_t() {
        let d = [2, 3, 5];
        let x = data(30, 7);
        let (od, want) = permute_ref(&x, &d, &[2, 1, 0]);
        let o = unary_f32("aten::transpose_copy.int_out", &d, &x, &od, |t| {
            vec![t.int(0), t.int(-1)]
        });
        assert_eq!(o.f32(), want);
        let (od, want) = permute_ref(&x[..15], &[3, 5], &[1, 0]);
        let o = unary_f32("aten::t_copy.out", &[3, 5], &x[..15], &od, |_| vec![]);
        assert_eq!((o.shape.clone(), o.f32()), (vec![5, 3], want));
        let o = unary_f32("aten::t_copy.out", &[5], &x[..5], &[5], |_| vec![]);
        assert_eq!(o.f32(), x[..5].to_vec());
        let mut t = OpTest::new("aten::t_copy.out");
        let a = t.input_f32(&d, &x);
        let o = t.output(DType::F32, &d);
        t.call(&[a, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn expand_copy_broadcasts() {
        let x = data(3, 8);
        // [3, 1] -> [2, 3, 4]
        let o = unary_f32("aten::expand_copy.out", &[3, 1], &x, &[2, 3, 4], |t| {
            vec![t.int_list(&[2, -1, 4]), t.boolean(false)]
        });
        let want: Vec<f32> = (0..24).map(|i| x[(i / 4) % 3]).collect();
        assert_eq!(o.f32(), want);
        // [1, 3] -> [17, 3] (row broadcast), int64
        let mut t = OpTest::new("aten::expand_copy.out");
        let a = t.input_i64(&[1, 3], &[1, 2, 3]);
        let s = t.int_list(&[17, 3]);
        let f = t.boolean(false);
        let o = t.output(DType::I64, &[17, 3]);
        t.call(&[a, s, f, o, o]);
        let r = run1(&t);
        assert_eq!(r.i64(), [1, 2, 3].repeat(17));
        // rank 0 -> [2, 2]
        let o = unary_f32("aten::expand_copy.out", &[], &[9.0], &[2, 2], |t| {
            vec![t.int_list(&[2, 2]), t.boolean(false)]
        });
        assert_eq!(o.f32(), vec![9.0; 4]);
        // errors: non-singleton change, -1 in a new leading dim, too few sizes
        for size in [vec![2i64, 2], vec![-1, 3, 1], vec![1], vec![3, -2]] {
            let mut t = OpTest::new("aten::expand_copy.out");
            let a = t.input_f32(&[3, 1], &x);
            let s = t.int_list(&size);
            let f = t.boolean(false);
            let o = t.output(DType::F32, &[3, 1]);
            t.call(&[a, s, f, o, o]);
            let e = t.run_kernel_err();
            assert!(
                matches!(
                    e,
                    KernelError::Shape { arg: 1, .. } | KernelError::Value { arg: 1, .. }
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn repeat_tiles() {
        let d = [2, 3];
        let x = data(6, 9);
        let reps = [2usize, 1, 3];
        let od = [2, 2, 9];
        let o = unary_f32("aten::repeat.out", &d, &x, &od, |t| {
            vec![t.int_list(&[2, 1, 3])]
        });
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let oi = unravel(i, &od);
                x[(oi[1] % d[0]) * 3 + oi[2] % d[1]]
            })
            .collect();
        let _ = reps;
        assert_eq!(o.f32(), want);
        // zero repeats
        let o = unary_f32("aten::repeat.out", &d, &x, &[0, 3], |t| {
            vec![t.int_list(&[0, 1])]
        });
        assert_eq!(o.shape, vec![0, 3]);
        // too few repeats / negative
        for reps in [vec![2i64], vec![-1, 1]] {
            let mut t = OpTest::new("aten::repeat.out");
            let a = t.input_f32(&d, &x);
            let s = t.int_list(&reps);
            let o = t.output(DType::F32, &d);
            t.call(&[a, s, o, o]);
            let e = t.run_kernel_err();
            assert!(matches!(
                e,
                KernelError::Shape { arg: 1, .. } | KernelError::Value { arg: 1, .. }
            ));
        }
    }

    // ---- slicing ----

    /// Python slice reference.
    fn py_slice(n: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Vec<usize> {
        let fix = |v: i64| {
            let v = if v < 0 { v + n } else { v };
            v.clamp(0, n)
        };
        let s = fix(start.unwrap_or(0));
        let e = fix(end.unwrap_or(n));
        let mut out = Vec::new();
        let mut i = s;
        while i < e {
            out.push(i as usize);
            i += step;
        }
        out
    }

    #[test]
    fn slice_copy_python_rules() {
        let d = [3, 17, 2];
        let x = data(numel(&d), 10);
        let cases: &[(i64, Option<i64>, Option<i64>, i64)] = &[
            (1, None, None, 1),
            (1, Some(2), Some(9), 1),
            (1, Some(-5), None, 2),
            (1, Some(-100), Some(100), 3),
            (-2, Some(4), Some(2), 1),
            (1, Some(16), Some(-1), 1),
            (0, Some(1), None, 5),
            (2, Some(-1), None, 1),
            (1, None, Some(-20), 1),
        ];
        for &(dim, s, e, step) in cases {
            let wd = if dim < 0 { dim + 3 } else { dim } as usize;
            let sel = py_slice(d[wd] as i64, s, e, step);
            let mut od = d.to_vec();
            od[wd] = sel.len();
            let want: Vec<f32> = (0..numel(&od))
                .map(|i| {
                    let mut oi = unravel(i, &od);
                    oi[wd] = sel[oi[wd]];
                    x[ravel(&oi, &d)]
                })
                .collect();
            let o = unary_f32("aten::slice_copy.Tensor_out", &d, &x, &od, |t| {
                let s = match s {
                    Some(v) => t.int(v),
                    None => t.none(),
                };
                let e = match e {
                    Some(v) => t.int(v),
                    None => t.none(),
                };
                vec![t.int(dim), s, e, t.int(step)]
            });
            assert_eq!(o.shape, od, "{dim} {s:?} {e:?} {step}");
            assert_eq!(o.f32(), want, "{dim} {s:?} {e:?} {step}");
        }
        // step 0 is an error; rank 0 is an error
        let mut t = OpTest::new("aten::slice_copy.Tensor_out");
        let a = t.input_f32(&d, &x);
        let (dm, s, e, st) = (t.int(1), t.none(), t.none(), t.int(0));
        let o = t.output(DType::F32, &d);
        t.call(&[a, dm, s, e, st, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 4, .. }
        ));
        let mut t = OpTest::new("aten::slice_copy.Tensor_out");
        let a = t.input_f32(&[], &[1.0]);
        let (dm, s, e, st) = (t.int(0), t.none(), t.none(), t.int(1));
        let o = t.output(DType::F32, &[]);
        t.call(&[a, dm, s, e, st, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn select_and_narrow() {
        let d = [3, 4, 5];
        let x = data(60, 11);
        for (dim, idx) in [(0i64, 2i64), (1, -1), (-1, 0), (2, -5)] {
            let wd = if dim < 0 { dim + 3 } else { dim } as usize;
            let wi = if idx < 0 { idx + d[wd] as i64 } else { idx } as usize;
            let mut od = d.to_vec();
            od.remove(wd);
            let want: Vec<f32> = (0..numel(&od))
                .map(|i| {
                    let mut oi = unravel(i, &od);
                    oi.insert(wd, wi);
                    x[ravel(&oi, &d)]
                })
                .collect();
            let o = unary_f32("aten::select_copy.int_out", &d, &x, &od, |t| {
                vec![t.int(dim), t.int(idx)]
            });
            assert_eq!(o.f32(), want);
        }
        for idx in [4i64, -5] {
            let mut t = OpTest::new("aten::select_copy.int_out");
            let a = t.input_f32(&d, &x);
            let (dm, i) = (t.int(1), t.int(idx));
            let o = t.output(DType::F32, &[3, 5]);
            t.call(&[a, dm, i, o, o]);
            assert_eq!(
                t.run_kernel_err(),
                KernelError::IndexOutOfBounds {
                    arg: 2,
                    index: idx,
                    size: 4
                }
            );
        }
        // narrow: start -3, length 2 along dim 2 -> columns 2, 3
        let o = unary_f32("aten::narrow_copy.out", &d, &x, &[3, 4, 2], |t| {
            vec![t.int(2), t.int(-3), t.int(2)]
        });
        let want: Vec<f32> = (0..24)
            .map(|i| {
                let oi = unravel(i, &[3, 4, 2]);
                x[ravel(&[oi[0], oi[1], oi[2] + 2], &d)]
            })
            .collect();
        assert_eq!(o.f32(), want);
        // start == size with length 0 is allowed
        let o = unary_f32("aten::narrow_copy.out", &d, &x, &[3, 0, 5], |t| {
            vec![t.int(1), t.int(4), t.int(0)]
        });
        assert_eq!(o.shape, vec![3, 0, 5]);
        let mut t = OpTest::new("aten::narrow_copy.out");
        let a = t.input_f32(&d, &x);
        let (dm, s, l) = (t.int(1), t.int(3), t.int(2));
        let o = t.output(DType::F32, &[3, 2, 5]);
        t.call(&[a, dm, s, l, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 3, .. }
        ));
    }

    // ---- cat / stack / split ----

    #[test]
    fn cat_along_dims_with_legacy_empty_and_promotion() {
        let a = data(2 * 3 * 4, 12);
        let b = data(2 * 5 * 4, 13);
        for dim in [1i64, -2] {
            let mut t = OpTest::new("aten::cat.out");
            let x = t.input_f32(&[2, 3, 4], &a);
            let e = t.input_f32(&[0], &[]);
            let y = t.input_f32(&[2, 5, 4], &b);
            let l = t.tensor_list(&[x, e, y]);
            let dm = t.int(dim);
            let o = t.output(DType::F32, &[2, 8, 4]);
            t.call(&[l, dm, o, o]);
            let r = run1(&t);
            let want: Vec<f32> = (0..64)
                .map(|i| {
                    let oi = unravel(i, &[2, 8, 4]);
                    if oi[1] < 3 {
                        a[ravel(&oi, &[2, 3, 4])]
                    } else {
                        b[ravel(&[oi[0], oi[1] - 3, oi[2]], &[2, 5, 4])]
                    }
                })
                .collect();
            assert_eq!(r.f32(), want);
        }
        // dim 0 and dim -1 with three tensors, int64 + bool promoted into f32 out
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_i64(&[2, 1], &[5, -6]);
        let y = t.input_bool(&[2, 2], &[true, false, false, true]);
        let z = t.input_f32(&[2, 1], &[0.5, 1.5]);
        let l = t.tensor_list(&[x, y, z]);
        let dm = t.int(-1);
        let o = t.output(DType::F32, &[2, 4]);
        t.call(&[l, dm, o, o]);
        assert_eq!(
            run1(&t).f32(),
            vec![5.0, 1.0, 0.0, 0.5, -6.0, 0.0, 1.0, 1.5]
        );
        // f32 into an i64 out is not a valid cast
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_f32(&[2], &[1.0, 2.0]);
        let l = t.tensor_list(&[x]);
        let dm = t.int(0);
        let o = t.output(DType::I64, &[2]);
        t.call(&[l, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 2, .. }
        ));
        // mismatched sizes outside the dim
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_f32(&[2, 3], &data(6, 0));
        let y = t.input_f32(&[3, 3], &data(9, 0));
        let l = t.tensor_list(&[x, y]);
        let dm = t.int(1);
        let o = t.output(DType::F32, &[2, 6]);
        t.call(&[l, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
        // all legacy empties -> [0]
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_f32(&[0], &[]);
        let l = t.tensor_list(&[x, x]);
        let dm = t.int(0);
        let o = t.output_dynamic(DType::F32, &[4]);
        t.call(&[l, dm, o, o]);
        assert_eq!(run1(&t).shape, vec![0]);
    }

    #[test]
    fn stack_inserts_a_dim() {
        let a = data(6, 14);
        let b = data(6, 15);
        for (dim, od) in [(0i64, [2usize, 2, 3]), (1, [2, 2, 3]), (-1, [2, 3, 2])] {
            let mut t = OpTest::new("aten::stack.out");
            let x = t.input_f32(&[2, 3], &a);
            let y = t.input_f32(&[2, 3], &b);
            let l = t.tensor_list(&[x, y]);
            let dm = t.int(dim);
            let o = t.output(DType::F32, &od);
            t.call(&[l, dm, o, o]);
            let r = run1(&t);
            let wd = if dim < 0 { dim + 3 } else { dim } as usize;
            let want: Vec<f32> = (0..12)
                .map(|i| {
                    let mut oi = unravel(i, &od);
                    let k = oi.remove(wd);
                    let src = if k == 0 { &a } else { &b };
                    src[ravel(&oi, &[2, 3])]
                })
                .collect();
            assert_eq!(r.f32(), want, "{dim}");
        }
        let mut t = OpTest::new("aten::stack.out");
        let x = t.input_f32(&[2, 3], &a);
        let y = t.input_f32(&[3, 2], &b);
        let l = t.tensor_list(&[x, y]);
        let dm = t.int(0);
        let o = t.output(DType::F32, &[2, 2, 3]);
        t.call(&[l, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn split_with_sizes_split_and_unbind() {
        let d = [2, 7, 3];
        let x = data(42, 16);
        let piece = |start: usize, len: usize| -> Vec<f32> {
            (0..2 * len * 3)
                .map(|i| {
                    let oi = unravel(i, &[2, len, 3]);
                    x[ravel(&[oi[0], oi[1] + start, oi[2]], &d)]
                })
                .collect()
        };
        // split_with_sizes [2, 0, 5] along dim -2
        let mut t = OpTest::new("aten::split_with_sizes_copy.out");
        let a = t.input_f32(&d, &x);
        let s = t.int_list(&[2, 0, 5]);
        let dm = t.int(-2);
        let o1 = t.output(DType::F32, &[2, 2, 3]);
        let o2 = t.output(DType::F32, &[2, 0, 3]);
        let o3 = t.output(DType::F32, &[2, 5, 3]);
        let l = t.tensor_list(&[o1, o2, o3]);
        let l2 = t.tensor_list(&[o1, o2, o3]);
        t.call(&[a, s, dm, l, l2]);
        let r = t.run().unwrap();
        assert_eq!(r[0].f32(), piece(0, 2));
        assert_eq!(r[1].shape, vec![2, 0, 3]);
        assert_eq!(r[2].f32(), piece(2, 5));
        // sizes not summing to the dim
        let mut t = OpTest::new("aten::split_with_sizes_copy.out");
        let a = t.input_f32(&d, &x);
        let s = t.int_list(&[2, 4]);
        let dm = t.int(1);
        let o1 = t.output(DType::F32, &[2, 2, 3]);
        let o2 = t.output(DType::F32, &[2, 4, 3]);
        let l = t.tensor_list(&[o1, o2]);
        let l2 = t.tensor_list(&[o1, o2]);
        t.call(&[a, s, dm, l, l2]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
        // split_copy with split_size 3 -> 3, 3, 1
        let mut t = OpTest::new("aten::split_copy.Tensor_out");
        let a = t.input_f32(&d, &x);
        let s = t.int(3);
        let dm = t.int(1);
        let o1 = t.output(DType::F32, &[2, 3, 3]);
        let o2 = t.output(DType::F32, &[2, 3, 3]);
        let o3 = t.output(DType::F32, &[2, 1, 3]);
        let l = t.tensor_list(&[o1, o2, o3]);
        let l2 = t.tensor_list(&[o1, o2, o3]);
        t.call(&[a, s, dm, l, l2]);
        let r = t.run().unwrap();
        assert_eq!(r[0].f32(), piece(0, 3));
        assert_eq!(r[1].f32(), piece(3, 3));
        assert_eq!(r[2].f32(), piece(6, 1));
        // wrong number of outputs
        let mut t = OpTest::new("aten::split_copy.Tensor_out");
        let a = t.input_f32(&d, &x);
        let s = t.int(4);
        let dm = t.int(1);
        let o1 = t.output(DType::F32, &[2, 4, 3]);
        let l = t.tensor_list(&[o1]);
        let l2 = t.tensor_list(&[o1]);
        t.call(&[a, s, dm, l, l2]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 3, .. }
        ));
        // unbind along dim 0 (int64)
        let v = iota_i64(6);
        let mut t = OpTest::new("aten::unbind_copy.int_out");
        let a = t.input_i64(&[3, 2], &v);
        let dm = t.int(0);
        let outs: Vec<i32> = (0..3).map(|_| t.output(DType::I64, &[2])).collect();
        let l = t.tensor_list(&outs);
        let l2 = t.tensor_list(&outs);
        t.call(&[a, dm, l, l2]);
        let r = t.run().unwrap();
        for k in 0..3 {
            assert_eq!(r[k].i64(), v[k * 2..k * 2 + 2].to_vec());
        }
    }

    // ---- indexing ----

    fn index_run(
        x_dims: &[usize],
        x: &[f32],
        idx: &[Option<(Vec<usize>, Vec<i64>)>],
        od: &[usize],
    ) -> Result<TestTensor, KernelError> {
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(x_dims, x);
        let items: Vec<Option<i32>> = idx
            .iter()
            .map(|e| e.as_ref().map(|(d, v)| t.input_i64(d, v)))
            .collect();
        let l = t.opt_tensor_list(&items);
        let o = t.output(DType::F32, od);
        t.call(&[a, l, o, o]);
        match t.run() {
            Ok(mut v) => Ok(v.remove(0)),
            Err(crate::Error::Kernel { source, .. }) => Err(source),
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn index_single_int_tensor() {
        let d = [4, 5, 3];
        let x = data(60, 17);
        // x[:, idx] with idx of shape [2, 3] and negative values
        let iv = vec![0i64, -1, 2, 4, -5, 1];
        let od = [4, 2, 3, 3];
        let r = index_run(&d, &x, &[None, Some((vec![2, 3], iv.clone()))], &od).unwrap();
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let oi = unravel(i, &od);
                let j = iv[oi[1] * 3 + oi[2]];
                let j = if j < 0 { j + 5 } else { j } as usize;
                x[ravel(&[oi[0], j, oi[3]], &d)]
            })
            .collect();
        assert_eq!(r.shape, od.to_vec());
        assert_eq!(r.f32(), want);
        // out of range
        let e = index_run(&d, &x, &[Some((vec![1], vec![4]))], &[1, 5, 3]).unwrap_err();
        assert_eq!(
            e,
            KernelError::IndexOutOfBounds {
                arg: 1,
                index: 4,
                size: 4
            }
        );
        // too many indices
        let e = index_run(
            &[2],
            &[1.0, 2.0],
            &[Some((vec![1], vec![0])), Some((vec![1], vec![0]))],
            &[1],
        )
        .unwrap_err();
        assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
    }

    #[test]
    fn index_adjacent_and_separated_broadcast() {
        let d = [3, 4, 5, 2];
        let x = data(numel(&d), 18);
        let i1 = vec![0i64, 3, 1]; // [3, 1] -> broadcasts with [2]
        let i2 = vec![4i64, -2]; // [2]
                                 // adjacent: x[:, i1, i2] -> [3, 3, 2, 2]
        let od = [3, 3, 2, 2];
        let r = index_run(
            &d,
            &x,
            &[
                None,
                Some((vec![3, 1], i1.clone())),
                Some((vec![2], i2.clone())),
            ],
            &od,
        )
        .unwrap();
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let o = unravel(i, &od);
                let a = i1[o[1]] as usize;
                let b = if i2[o[2]] < 0 { i2[o[2]] + 5 } else { i2[o[2]] } as usize;
                x[ravel(&[o[0], a, b, o[3]], &d)]
            })
            .collect();
        assert_eq!(r.f32(), want);
        // separated: x[i1', :, i2'] -> broadcast dims first: [3, 2, 4, 2]
        let j1 = vec![2i64, 0, -1];
        let j2 = vec![1i64, 3];
        let od = [3, 2, 4, 2];
        let r = index_run(
            &d,
            &x,
            &[
                Some((vec![3, 1], j1.clone())),
                None,
                Some((vec![1, 2], j2.clone())),
            ],
            &od,
        )
        .unwrap();
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let o = unravel(i, &od);
                let a = if j1[o[0]] < 0 { j1[o[0]] + 3 } else { j1[o[0]] } as usize;
                let c = j2[o[1]] as usize;
                x[ravel(&[a, o[2], c, o[3]], &d)]
            })
            .collect();
        assert_eq!(r.shape, od.to_vec());
        assert_eq!(r.f32(), want);
        // 0-dim index removes the dim: x[:, 2] -> [3, 5, 2]
        let r = index_run(&d, &x, &[None, Some((vec![], vec![2]))], &[3, 5, 2]).unwrap();
        let want: Vec<f32> = (0..30)
            .map(|i| {
                let o = unravel(i, &[3, 5, 2]);
                x[ravel(&[o[0], 2, o[1], o[2]], &d)]
            })
            .collect();
        assert_eq!(r.f32(), want);
        // broadcast failure
        let e = index_run(
            &d,
            &x,
            &[Some((vec![3], vec![0, 1, 2])), Some((vec![2], vec![0, 1]))],
            &[3, 5, 2],
        )
        .unwrap_err();
        assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
        // all None: a copy
        let r = index_run(&d, &x, &[None], &d).unwrap();
        assert_eq!(r.f32(), x);
    }

    #[test]
    fn index_bool_masks() {
        let d = [3, 4, 2];
        let x = data(24, 19);
        let mask: Vec<bool> = (0..12).map(|i| (i * 7) % 5 < 2).collect();
        let trues: Vec<(usize, usize)> = (0..12)
            .filter(|&i| mask[i])
            .map(|i| (i / 4, i % 4))
            .collect();
        // x[mask2d] -> [count, 2]
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(&d, &x);
        let m = t.input_bool(&[3, 4], &mask);
        let l = t.opt_tensor_list(&[Some(m)]);
        let o = t.output(DType::F32, &[trues.len(), 2]);
        t.call(&[a, l, o, o]);
        let r = run1(&t);
        let want: Vec<f32> = trues
            .iter()
            .flat_map(|&(i, j)| [x[(i * 4 + j) * 2], x[(i * 4 + j) * 2 + 1]])
            .collect();
        assert_eq!(r.f32(), want);
        // x[:, mask1d, int] with int broadcasting against the mask count
        let m1 = [true, false, true, true];
        let iv = [1i64];
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(&d, &x);
        let m = t.input_bool(&[4], &m1);
        let k = t.input_i64(&[1], &iv);
        let l = t.opt_tensor_list(&[None, Some(m), Some(k)]);
        let o = t.output(DType::F32, &[3, 3]);
        t.call(&[a, l, o, o]);
        let r = run1(&t);
        let sel = [0usize, 2, 3];
        let want: Vec<f32> = (0..9)
            .map(|i| x[ravel(&[i / 3, sel[i % 3], 1], &d)])
            .collect();
        assert_eq!(r.f32(), want);
        // mask with the wrong shape
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(&d, &x);
        let m = t.input_bool(&[3, 3], &[true; 9]);
        let l = t.opt_tensor_list(&[Some(m)]);
        let o = t.output(DType::F32, &[9, 2]);
        t.call(&[a, l, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
        // float index dtype
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(&d, &x);
        let m = t.input_f32(&[1], &[0.0]);
        let l = t.opt_tensor_list(&[Some(m)]);
        let o = t.output(DType::F32, &[1, 4, 2]);
        t.call(&[a, l, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::UnsupportedDType { arg: 1, .. }
        ));
    }

    #[test]
    fn index_put_set_and_accumulate() {
        let d = [4, 3];
        let x = data(12, 20);
        let iv = [2i64, 0, 2, -1];
        for acc in [false, true] {
            let vals = data(4 * 3, 21);
            let mut t = OpTest::new("aten::index_put.out");
            let a = t.input_f32(&d, &x);
            let k = t.input_i64(&[4], &iv);
            let l = t.opt_tensor_list(&[Some(k)]);
            let v = t.input_f32(&[4, 3], &vals);
            let ac = t.boolean(acc);
            let o = t.output(DType::F32, &d);
            t.call(&[a, l, v, ac, o, o]);
            let r = run1(&t);
            let mut want = x.clone();
            for (n, &i) in iv.iter().enumerate() {
                let row = if i < 0 { i + 4 } else { i } as usize;
                for j in 0..3 {
                    if acc {
                        want[row * 3 + j] += vals[n * 3 + j];
                    } else {
                        want[row * 3 + j] = vals[n * 3 + j];
                    }
                }
            }
            assert_eq!(r.f32(), want, "acc={acc}");
        }
        // values broadcast ([3] against result [2, 3]) with a bool mask, int64 data
        let xi = iota_i64(12);
        let mut t = OpTest::new("aten::index_put.out");
        let a = t.input_i64(&d, &xi);
        let m = t.input_bool(&[4], &[false, true, false, true]);
        let l = t.opt_tensor_list(&[Some(m)]);
        let v = t.input_i64(&[3], &[100, 200, 300]);
        let ac = t.boolean(true);
        let o = t.output(DType::I64, &d);
        t.call(&[a, l, v, ac, o, o]);
        let r = run1(&t);
        let mut want = xi.clone();
        for row in [1, 3] {
            for j in 0..3 {
                want[row * 3 + j] += 100 * (j as i64 + 1);
            }
        }
        assert_eq!(r.i64(), want);
        // 2 int indices (element scatter), scalar value
        let mut t = OpTest::new("aten::index_put.out");
        let a = t.input_f32(&d, &x);
        let k0 = t.input_i64(&[2], &[0, 3]);
        let k1 = t.input_i64(&[2], &[2, -3]);
        let l = t.opt_tensor_list(&[Some(k0), Some(k1)]);
        let v = t.input_f32(&[], &[-1.0]);
        let ac = t.boolean(false);
        let o = t.output(DType::F32, &d);
        t.call(&[a, l, v, ac, o, o]);
        let mut want = x.clone();
        want[2] = -1.0;
        want[9] = -1.0;
        assert_eq!(run1(&t).f32(), want);
        // values that do not broadcast
        let mut t = OpTest::new("aten::index_put.out");
        let a = t.input_f32(&d, &x);
        let k = t.input_i64(&[2], &[0, 1]);
        let l = t.opt_tensor_list(&[Some(k)]);
        let v = t.input_f32(&[2], &[1.0, 2.0]);
        let ac = t.boolean(false);
        let o = t.output(DType::F32, &d);
        t.call(&[a, l, v, ac, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 2, .. }
        ));
    }

    #[test]
    fn index_select_gather_embedding() {
        let d = [3, 5, 2];
        let x = data(30, 22);
        // index_select dim 1 with int32 indices
        let iv = [4i32, 0, 4];
        let mut t = OpTest::new("aten::index_select.out");
        let a = t.input_f32(&d, &x);
        let dm = t.int(-2);
        let k = t.input_i32(&[3], &iv);
        let o = t.output(DType::F32, &[3, 3, 2]);
        t.call(&[a, dm, k, o, o]);
        let want: Vec<f32> = (0..18)
            .map(|i| {
                let o = unravel(i, &[3, 3, 2]);
                x[ravel(&[o[0], iv[o[1]] as usize, o[2]], &d)]
            })
            .collect();
        assert_eq!(run1(&t).f32(), want);
        let mut t = OpTest::new("aten::index_select.out");
        let a = t.input_f32(&d, &x);
        let dm = t.int(0);
        let k = t.input_i64(&[1], &[-1]);
        let o = t.output(DType::F32, &[1, 5, 2]);
        t.call(&[a, dm, k, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::IndexOutOfBounds { arg: 2, .. }
        ));

        // gather dim 1: index [3, 4, 1]
        let gd = [3usize, 4, 1];
        let gi: Vec<i64> = (0..12).map(|i| (i * 3 % 5) as i64).collect();
        let mut t = OpTest::new("aten::gather.out");
        let a = t.input_f32(&d, &x);
        let dm = t.int(1);
        let k = t.input_i64(&gd, &gi);
        let sg = t.boolean(false);
        let o = t.output(DType::F32, &gd);
        t.call(&[a, dm, k, sg, o, o]);
        let want: Vec<f32> = (0..12)
            .map(|i| {
                let o = unravel(i, &gd);
                x[ravel(&[o[0], gi[i] as usize, o[2]], &d)]
            })
            .collect();
        assert_eq!(run1(&t).f32(), want);
        // gather with an index larger than self outside dim
        let mut t = OpTest::new("aten::gather.out");
        let a = t.input_f32(&d, &x);
        let dm = t.int(1);
        let k = t.input_i64(&[3, 1, 3], &[0; 9]);
        let sg = t.boolean(false);
        let o = t.output(DType::F32, &[3, 1, 3]);
        t.call(&[a, dm, k, sg, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 2, .. }
        ));

        // embedding: weight [7, 3], indices [2, 2] int64 and int32
        let w = data(21, 23);
        for i32_idx in [false, true] {
            let ids = [6i64, 0, 3, 3];
            let mut t = OpTest::new("aten::embedding.out");
            let wt = t.constant_f32(&[7, 3], &w);
            let k = if i32_idx {
                let v: Vec<i32> = ids.iter().map(|&v| v as i32).collect();
                t.input_i32(&[2, 2], &v)
            } else {
                t.input_i64(&[2, 2], &ids)
            };
            let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
            let o = t.output(DType::F32, &[2, 2, 3]);
            t.call(&[wt, k, p, s1, s2, o, o]);
            let want: Vec<f32> = ids
                .iter()
                .flat_map(|&r| w[r as usize * 3..r as usize * 3 + 3].to_vec())
                .collect();
            assert_eq!(run1(&t).f32(), want);
        }
        let mut t = OpTest::new("aten::embedding.out");
        let wt = t.constant_f32(&[7, 3], &w);
        let k = t.input_i64(&[2], &[1, 7]);
        let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
        let o = t.output(DType::F32, &[2, 3]);
        t.call(&[wt, k, p, s1, s2, o, o]);
        assert_eq!(
            t.run_kernel_err(),
            KernelError::IndexOutOfBounds {
                arg: 1,
                index: 7,
                size: 7
            }
        );
    }

    // ---- cumsum, tril/triu, pad, flip, roll ----

    #[test]
    fn cumsum_dtypes_and_dims() {
        let d = [3, 4, 5];
        let x = data(60, 24);
        for dim in [0i64, 1, -1] {
            let wd = if dim < 0 { dim + 3 } else { dim } as usize;
            let o = {
                let mut t = OpTest::new("aten::cumsum.out");
                let a = t.input_f32(&d, &x);
                let dm = t.int(dim);
                let n = t.none();
                let o = t.output(DType::F32, &d);
                t.call(&[a, dm, n, o, o]);
                run1(&t)
            };
            let want: Vec<f32> = (0..60)
                .map(|i| {
                    let mut oi = unravel(i, &d);
                    let upto = oi[wd];
                    let mut acc = 0f64;
                    for k in 0..=upto {
                        oi[wd] = k;
                        acc += x[ravel(&oi, &d)] as f64;
                    }
                    acc as f32
                })
                .collect();
            assert_eq!(o.f32(), want, "dim {dim}");
        }
        // bool counts into int64
        let b = [true, false, true, true, false, true];
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_bool(&[2, 3], &b);
        let dm = t.int(1);
        let n = t.none();
        let o = t.output(DType::I64, &[2, 3]);
        t.call(&[a, dm, n, o, o]);
        assert_eq!(run1(&t).i64(), vec![1, 1, 2, 1, 1, 2]);
        // int32 input -> int64; int64 with dtype=float32
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_i32(&[4], &[1, -2, 3, 4]);
        let dm = t.int(0);
        let n = t.none();
        let o = t.output(DType::I64, &[4]);
        t.call(&[a, dm, n, o, o]);
        assert_eq!(run1(&t).i64(), vec![1, -1, 2, 6]);
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_i64(&[4], &[1, -2, 3, 4]);
        let dm = t.int(0);
        let n = t.int(DType::F32 as i64);
        let o = t.output(DType::F32, &[4]);
        t.call(&[a, dm, n, o, o]);
        assert_eq!(run1(&t).f32(), vec![1.0, -1.0, 2.0, 6.0]);
        // int input with an f32 out but no dtype: out must be int64
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_i64(&[4], &[1, -2, 3, 4]);
        let dm = t.int(0);
        let n = t.none();
        let o = t.output(DType::F32, &[4]);
        t.call(&[a, dm, n, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 3, .. }
        ));
        // rank 0
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_f32(&[], &[2.5]);
        let dm = t.int(0);
        let n = t.none();
        let o = t.output(DType::F32, &[]);
        t.call(&[a, dm, n, o, o]);
        assert_eq!(run1(&t).f32(), vec![2.5]);
    }

    #[test]
    fn tril_triu_diagonals() {
        let d = [2, 3, 4];
        let x = data(24, 25);
        for diag in [-2i64, -1, 0, 1, 3, 5] {
            for (op, lower) in [("aten::tril.out", true), ("aten::triu.out", false)] {
                let o = unary_f32(op, &d, &x, &d, |t| vec![t.int(diag)]);
                let want: Vec<f32> = (0..24)
                    .map(|i| {
                        let oi = unravel(i, &d);
                        let (r, c) = (oi[1] as i64, oi[2] as i64);
                        let keep = if lower { c - r <= diag } else { c - r >= diag };
                        if keep {
                            x[i]
                        } else {
                            0.0
                        }
                    })
                    .collect();
                assert_eq!(o.f32(), want, "{op} {diag}");
            }
        }
        // bool, and rank-1 error
        let mut t = OpTest::new("aten::tril.out");
        let a = t.input_bool(&[2, 2], &[true; 4]);
        let dg = t.int(0);
        let o = t.output(DType::Bool, &[2, 2]);
        t.call(&[a, dg, o, o]);
        assert_eq!(run1(&t).bools(), vec![true, false, true, true]);
        let mut t = OpTest::new("aten::tril.out");
        let a = t.input_f32(&[3], &[1.0; 3]);
        let dg = t.int(0);
        let o = t.output(DType::F32, &[3]);
        t.call(&[a, dg, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn constant_pad_nd_pads_and_crops() {
        let d = [2, 3, 4];
        let x = data(24, 26);
        let cases: &[(Vec<i64>, f64)] = &[
            (vec![1, 2], 0.0),
            (vec![0, 0, 1, 1], -1.5),
            (vec![-1, 2, 1, -2], 7.0),
            (vec![2, -3, 0, 0, 1, 0], 3.0),
            (vec![-4, 1], 0.5),
            (vec![], 0.0),
        ];
        for (pad, val) in cases {
            let mut before = [0i64; 3];
            let mut od = d.to_vec();
            for i in 0..pad.len() / 2 {
                let dd = 2 - i;
                before[dd] = pad[2 * i];
                od[dd] = (d[dd] as i64 + pad[2 * i] + pad[2 * i + 1]) as usize;
            }
            let want: Vec<f32> = (0..numel(&od))
                .map(|i| {
                    let oi = unravel(i, &od);
                    let mut xi = vec![0usize; 3];
                    for k in 0..3 {
                        let c = oi[k] as i64 - before[k];
                        if c < 0 || c >= d[k] as i64 {
                            return *val as f32;
                        }
                        xi[k] = c as usize;
                    }
                    x[ravel(&xi, &d)]
                })
                .collect();
            let v = *val;
            let o = unary_f32("aten::constant_pad_nd.out", &d, &x, &od, |t| {
                vec![t.int_list(pad), t.double(v)]
            });
            assert_eq!(o.shape, od, "{pad:?}");
            assert_eq!(o.f32(), want, "{pad:?}");
        }
        // int64 with an Int value
        let mut t = OpTest::new("aten::constant_pad_nd.out");
        let a = t.input_i64(&[2], &[1, 2]);
        let p = t.int_list(&[1, 1]);
        let v = t.int(-9);
        let o = t.output(DType::I64, &[4]);
        t.call(&[a, p, v, o, o]);
        assert_eq!(run1(&t).i64(), vec![-9, 1, 2, -9]);
        // odd pad length, too long a pad, over-cropping
        for pad in [vec![1i64], vec![1, 1, 1, 1, 1, 1, 1, 1], vec![-5, 0]] {
            let mut t = OpTest::new("aten::constant_pad_nd.out");
            let a = t.input_f32(&d, &x);
            let p = t.int_list(&pad);
            let v = t.int(0);
            let o = t.output(DType::F32, &d);
            t.call(&[a, p, v, o, o]);
            let e = t.run_kernel_err();
            assert!(
                matches!(
                    e,
                    KernelError::Shape { arg: 1, .. } | KernelError::Value { arg: 1, .. }
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn flip_and_roll() {
        let d = [3, 4, 5];
        let x = data(60, 27);
        for dims in [vec![0i64], vec![-1], vec![0, 2], vec![0, 1, 2], vec![]] {
            let wd: Vec<usize> = dims
                .iter()
                .map(|&v| if v < 0 { v + 3 } else { v } as usize)
                .collect();
            let want: Vec<f32> = (0..60)
                .map(|i| {
                    let mut oi = unravel(i, &d);
                    for &k in &wd {
                        oi[k] = d[k] - 1 - oi[k];
                    }
                    x[ravel(&oi, &d)]
                })
                .collect();
            let o = unary_f32("aten::flip.out", &d, &x, &d, |t| vec![t.int_list(&dims)]);
            assert_eq!(o.f32(), want, "{dims:?}");
        }
        let mut t = OpTest::new("aten::flip.out");
        let a = t.input_f32(&d, &x);
        let dm = t.int_list(&[1, -2]);
        let o = t.output(DType::F32, &d);
        t.call(&[a, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 1, .. }
        ));

        // roll over dims (repeated dims add up), and flattened
        for (shifts, dims) in [
            (vec![1i64], vec![0i64]),
            (vec![-2, 7], vec![2, 1]),
            (vec![1, 1, 3], vec![-1, 2, 0]),
            (vec![13], vec![]),
            (vec![-61], vec![]),
        ] {
            let want: Vec<f32> = if dims.is_empty() {
                let s = shifts[0].rem_euclid(60) as usize;
                (0..60).map(|i| x[(i + 60 - s) % 60]).collect()
            } else {
                let mut sh = [0i64; 3];
                for (&s, &dd) in shifts.iter().zip(&dims) {
                    let w = if dd < 0 { dd + 3 } else { dd } as usize;
                    sh[w] += s;
                }
                (0..60)
                    .map(|i| {
                        let mut oi = unravel(i, &d);
                        for k in 0..3 {
                            oi[k] = (oi[k] as i64 - sh[k]).rem_euclid(d[k] as i64) as usize;
                        }
                        x[ravel(&oi, &d)]
                    })
                    .collect()
            };
            let o = unary_f32("aten::roll.out", &d, &x, &d, |t| {
                vec![t.int_list(&shifts), t.int_list(&dims)]
            });
            assert_eq!(o.f32(), want, "{shifts:?} {dims:?}");
        }
        let mut t = OpTest::new("aten::roll.out");
        let a = t.input_f32(&d, &x);
        let (s, dm) = (t.int_list(&[1, 2]), t.int_list(&[0]));
        let o = t.output(DType::F32, &d);
        t.call(&[a, s, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 2, .. }
        ));
    }

    #[test]
    fn rank0_and_dynamic_and_error_edges() {
        // rank-0 inputs: permute [], repeat [], flip [0], transpose (0, -1)
        let o = unary_f32("aten::permute_copy.out", &[], &[3.0], &[], |t| {
            vec![t.int_list(&[])]
        });
        assert_eq!((o.shape.clone(), o.f32()), (vec![], vec![3.0]));
        let o = unary_f32("aten::repeat.out", &[], &[3.0], &[2, 2], |t| {
            vec![t.int_list(&[2, 2])]
        });
        assert_eq!(o.f32(), vec![3.0; 4]);
        let o = unary_f32("aten::flip.out", &[], &[3.0], &[], |t| {
            vec![t.int_list(&[0])]
        });
        assert_eq!(o.f32(), vec![3.0]);
        let o = unary_f32("aten::transpose_copy.int_out", &[], &[3.0], &[], |t| {
            vec![t.int(0), t.int(-1)]
        });
        assert_eq!(o.f32(), vec![3.0]);
        // cat of a rank-0 tensor is an error
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_f32(&[], &[1.0]);
        let l = t.tensor_list(&[x]);
        let dm = t.int(0);
        let o = t.output(DType::F32, &[1]);
        t.call(&[l, dm, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
        // data-dependent result shape into a dynamic-bound output (uint8 mask)
        let x = data(6, 29);
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_f32(&[6], &x);
        let m = t.input(DType::U8, &[6], &[0, 3, 0, 1, 1, 0]);
        let l = t.opt_tensor_list(&[Some(m)]);
        let o = t.output_dynamic(DType::F32, &[6]);
        t.call(&[a, l, o, o]);
        let r = run1(&t);
        assert_eq!(
            (r.shape.clone(), r.f32()),
            (vec![3], vec![x[1], x[3], x[4]])
        );
        // a static output of the wrong shape cannot be resized
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_f32(&[6], &x);
        let s = t.int_list(&[2, 3]);
        let o = t.output(DType::F32, &[5]);
        t.call(&[a, s, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Resize { arg: 2, .. }
        ));
        // index dtype errors
        let mut t = OpTest::new("aten::index_select.out");
        let a = t.input_f32(&[6], &x);
        let dm = t.int(0);
        let k = t.input_f32(&[1], &[0.0]);
        let o = t.output(DType::F32, &[1]);
        t.call(&[a, dm, k, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::UnsupportedDType { arg: 2, .. }
        ));
        let mut t = OpTest::new("aten::gather.out");
        let a = t.input_f32(&[6], &x);
        let dm = t.int(0);
        let k = t.input_i32(&[1], &[0]);
        let sg = t.boolean(false);
        let o = t.output(DType::F32, &[1]);
        t.call(&[a, dm, k, sg, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 2, .. }
        ));
        // embedding needs a 2-D weight
        let mut t = OpTest::new("aten::embedding.out");
        let wt = t.constant_f32(&[6], &x);
        let k = t.input_i64(&[1], &[0]);
        let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
        let o = t.output(DType::F32, &[1, 1]);
        t.call(&[wt, k, p, s1, s2, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
        // gather on a rank-0 self with a rank-0 index
        let mut t = OpTest::new("aten::gather.out");
        let a = t.input_f32(&[], &[4.5]);
        let dm = t.int(0);
        let k = t.input_i64(&[], &[0]);
        let sg = t.boolean(false);
        let o = t.output(DType::F32, &[]);
        t.call(&[a, dm, k, sg, o, o]);
        assert_eq!(run1(&t).f32(), vec![4.5]);
    }

    // ---- dim order ----

    #[test]
    fn dim_order_copy_from_channels_last() {
        // logical NCHW [2, 3, 2, 4]; memory order NHWC
        let d = [2usize, 3, 2, 4];
        let nhwc = [2usize, 2, 4, 3];
        let mem = data(48, 28);
        let mem_bytes: Vec<u8> = mem.iter().flat_map(|v| v.to_le_bytes()).collect();
        let want: Vec<f32> = (0..48)
            .map(|i| {
                let o = unravel(i, &d);
                mem[ravel(&[o[0], o[2], o[3], o[1]], &nhwc)]
            })
            .collect();
        for op in [
            "dim_order_ops::_clone_dim_order.out",
            "dim_order_ops::_to_dim_order_copy.out",
        ] {
            let mut t = OpTest::new(op);
            let a = t.input_dim_order(DType::F32, &d, &[0, 2, 3, 1], &mem_bytes);
            let nb = t.boolean(false);
            let dord = t.int_list(&[0, 1, 2, 3]);
            let o = t.output(DType::F32, &d);
            t.call(&[a, nb, dord, o, o]);
            assert_eq!(run1(&t).f32(), want, "{op}");
        }
        // with a cast to f64 and a None dim_order
        let mut t = OpTest::new("dim_order_ops::_to_dim_order_copy.out");
        let a = t.input_dim_order(DType::F32, &d, &[0, 2, 3, 1], &mem_bytes);
        let nb = t.boolean(false);
        let dord = t.none();
        let o = t.output(DType::F64, &d);
        t.call(&[a, nb, dord, o, o]);
        let r = run1(&t);
        assert_eq!(r.f64(), want.iter().map(|&v| v as f64).collect::<Vec<_>>());
        // a channels-last out is refused
        let mut t = OpTest::new("dim_order_ops::_clone_dim_order.out");
        let a = t.input_f32(&d, &mem);
        let nb = t.boolean(false);
        let dord = t.int_list(&[0, 2, 3, 1]);
        let o = t.output(DType::F32, &d);
        t.call(&[a, nb, dord, o, o]);
        assert_eq!(t.run_kernel_err(), KernelError::NonContiguous { arg: 3 });
        // clone does not cast
        let mut t = OpTest::new("dim_order_ops::_clone_dim_order.out");
        let a = t.input_f32(&d, &mem);
        let nb = t.boolean(false);
        let dord = t.none();
        let o = t.output(DType::F64, &d);
        t.call(&[a, nb, dord, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 3, .. }
        ));
    }

    #[test]
    fn to_dim_order_copy_casts() {
        let v = vec![-3i64, 0, 7, 1 << 40, 5];
        // i64 -> f32, i64 -> i32 (wraps), i64 -> bool, bool -> f32, f32 -> i64 (truncates)
        let run = |dt_in: DType, bytes: Vec<u8>, n: usize, dt_out: DType| -> TestTensor {
            let mut t = OpTest::new("dim_order_ops::_to_dim_order_copy.out");
            let a = t.input(dt_in, &[n], &bytes);
            let nb = t.boolean(false);
            let dord = t.none();
            let o = t.output(dt_out, &[n]);
            t.call(&[a, nb, dord, o, o]);
            run1(&t)
        };
        let vb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            run(DType::I64, vb.clone(), 5, DType::F32).f32(),
            v.iter().map(|&x| x as f32).collect::<Vec<_>>()
        );
        assert_eq!(
            run(DType::I64, vb.clone(), 5, DType::I32).i64(),
            v.iter().map(|&x| x as i32 as i64).collect::<Vec<_>>()
        );
        assert_eq!(
            run(DType::I64, vb.clone(), 5, DType::Bool).bools(),
            vec![true, false, true, true, true]
        );
        assert_eq!(run(DType::I64, vb, 5, DType::I64).i64(), v);
        let f = [-1.7f32, 2.5, 0.0];
        let fb: Vec<u8> = f.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(
            run(DType::F32, fb.clone(), 3, DType::I64).i64(),
            vec![-1, 2, 0]
        );
        assert_eq!(
            run(DType::F32, fb.clone(), 3, DType::F16).f64(),
            vec![-1.7001953125, 2.5, 0.0]
        );
        assert_eq!(run(DType::F32, fb, 3, DType::U8).i64(), vec![255, 2, 0]);
        assert_eq!(
            run(DType::Bool, vec![1, 0, 1], 3, DType::F32).f32(),
            vec![1.0, 0.0, 1.0]
        );
    }

    #[test]
    fn odd_sizes_and_dtypes_through_permute_and_slice() {
        // sizes 1, 3, 17, 129 and several dtypes through the strided engine
        for (n, dt) in [
            (1usize, DType::U8),
            (3, DType::I16),
            (17, DType::F64),
            (129, DType::I32),
        ] {
            let es = dt.size();
            let bytes: Vec<u8> = (0..2 * n * es).map(|i| (i * 37 % 251) as u8).collect();
            let mut t = OpTest::new("aten::permute_copy.out");
            let a = t.input(dt, &[2, n], &bytes);
            let p = t.int_list(&[1, 0]);
            let o = t.output(dt, &[n, 2]);
            t.call(&[a, p, o, o]);
            let r = run1(&t);
            let mut want = vec![0u8; bytes.len()];
            for i in 0..2 {
                for j in 0..n {
                    let s = (i * n + j) * es;
                    let d = (j * 2 + i) * es;
                    want[d..d + es].copy_from_slice(&bytes[s..s + es]);
                }
            }
            assert_eq!(r.bytes, want, "{n} {dt}");
            // every other element of the flattened tensor
            let mut t = OpTest::new("aten::slice_copy.Tensor_out");
            let a = t.input(dt, &[2 * n], &bytes);
            let (dm, s, e, st) = (t.int(0), t.int(1), t.none(), t.int(2));
            let o = t.output(dt, &[n]);
            t.call(&[a, dm, s, e, st, o, o]);
            let r = run1(&t);
            let want: Vec<u8> = (0..n)
                .flat_map(|j| bytes[(2 * j + 1) * es..(2 * j + 2) * es].to_vec())
                .collect();
            assert_eq!(r.bytes, want, "{n} {dt}");
        }
    }

    #[test]
    fn blocked_transposes_4_byte() {
        // Last-two-dims swaps of 4-byte elements go through kernels::vec::transpose32 (4x4
        // blocks, edges element-wise): sizes 4, 5, 17, 129 and batched, plus int32 bit patterns.
        for (d, p) in [
            (vec![4usize, 4], vec![1usize, 0]),
            (vec![5, 4], vec![1, 0]),
            (vec![4, 5], vec![1, 0]),
            (vec![17, 129], vec![1, 0]),
            (vec![129, 17], vec![1, 0]),
            (vec![64, 128], vec![1, 0]),
            (vec![1, 4, 16, 16], vec![0, 1, 3, 2]),
            (vec![3, 7, 5], vec![0, 2, 1]),
            (vec![2, 6, 3, 9], vec![0, 3, 2, 1]),
        ] {
            let x = data(numel(&d), 77);
            let (od, want) = permute_ref(&x, &d, &p);
            let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
            let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
                vec![t.int_list(&dims)]
            });
            assert_eq!(o.shape, od);
            assert_eq!(o.f32(), want, "{d:?} {p:?}");
        }
        // int32 with arbitrary bits (incl. NaN-like patterns) is moved bit for bit.
        let (r, c) = (9usize, 6usize);
        let vals: Vec<i32> = (0..(r * c) as i32)
            .map(|k| (0x7fc0_0001u32 as i32).wrapping_add(k * 0x0101))
            .collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input(DType::I32, &[r, c], &bytes);
        let pl = t.int_list(&[1, 0]);
        let o = t.output(DType::I32, &[c, r]);
        t.call(&[a, pl, o, o]);
        let got = run1(&t).i64();
        let want: Vec<i64> = (0..r * c)
            .map(|k| vals[(k % r) * c + k / r] as i64)
            .collect();
        assert_eq!(got, want);
    }
}
