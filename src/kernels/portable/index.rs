//! Advanced indexing: `index.Tensor` (int and bool/uint8 mask indices, broadcast together),
//! `index_put` (set or accumulate), `index_select`, `gather`, `embedding`.
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{
    check_out_dtype, checked_numel, contig_strides, copy_all, make_shape, prod, shape_err,
    value_err, wrap, Ctx, Res,
};
use super::copy_engine::{for_each_run, gather_rows, View};
use super::index_prepared::prepare_embedding;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::vecmath as vec;
use crate::shape::broadcast_shapes;
use crate::tensor::{
    read_f64, read_i64, write_f64, write_i64, NdIndex, Shape, TensorRef, MAX_RANK,
};

/// The indexing kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::index.Tensor_out", index_tensor_out),
    KernelDef::new("aten::index_put.out", index_put_out),
    KernelDef::new("aten::index_select.out", index_select_out),
    KernelDef::new("aten::gather.out", gather_out),
    KernelDef::new("aten::embedding.out", embedding_out).with_prepare(prepare_embedding),
];

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

    /// Value `i`, or `None` past the end.
    #[inline(always)]
    fn at(&self, i: usize) -> Option<i64> {
        match self {
            IdxVals::I64(s) => s.get(i).copied(),
            IdxVals::I32(s) => s.get(i).map(|&v| v as i64),
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

/// An int index tensor of more than one value in an [`AdvIndex::int_walk`] case: its values,
/// and the size and element stride of the input dim it indexes.
#[derive(Clone, Copy)]
struct IntCol<'a> {
    vals: IdxVals<'a>,
    size: usize,
    stride: usize,
}

/// An [`AdvIndex::int_walk`] case set up for its blocks ([`AdvIndex::walk`]): the input
/// offset of the single-valued index tensors (checked once), the other index tensors, and
/// the input stride of one position of the kept leading dims.
struct IntWalk<'a> {
    fixed: usize,
    var: heapless::Vec<IntCol<'a>, MAX_RANK>,
    lead_stride: usize,
    arg: usize,
}

impl IntWalk<'_> {
    /// Input offset of the block at position `l` of the kept leading dims and broadcast
    /// position `p`; an index outside its dim is the error of the index list argument.
    #[inline(always)]
    fn offset(&self, l: usize, p: usize) -> Result<usize, KernelError> {
        let mut off = self.fixed + l * self.lead_stride;
        for c in &self.var {
            let v = c.vals.at(p).ok_or(shape_err(
                self.arg,
                "index tensor shorter than the broadcast",
            ))?;
            off += check_index(v, c.size, true, self.arg)? * c.stride;
        }
        Ok(off)
    }
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

    /// The int index tensors when the fast walk of [`Self::for_each_offset`] applies: every
    /// entry an int tensor, the indexed dims adjacent (the broadcast dims replace them in
    /// place, after the kept leading dims), and each tensor either as large as the broadcast
    /// shape (its elements are then the broadcast positions in order) or a single element
    /// (broadcast everywhere). Returns the first indexed dim and the broadcast size.
    fn int_walk(&self) -> Option<(usize, usize)> {
        let nb = prod(&self.out.dims()[..self.outer_rank][self.outer_rank - self.bcast_rank..]);
        let mut first = usize::MAX;
        for e in self.entries.iter() {
            match e {
                Entry::Int { vals, dim, .. } if vals.len() == nb || vals.len() == 1 => {
                    first = first.min(*dim)
                }
                _ => return None,
            }
        }
        (first != usize::MAX && self.outer_rank == first + self.bcast_rank).then_some((first, nb))
    }

    /// [`Self::for_each_block`] for callers that need only each block's position and input
    /// offset. With int index tensors over adjacent dims (`x[idx]`, `x[:, idx]`, `x[i, idx]`
    /// with `i` a single element: the common cases) the blocks are a loop over the broadcast
    /// positions per position of the kept leading dims: `offset = lead · stride(first − 1) +
    /// Σ idx_e[p] · stride(dim_e)`, no per-block coordinates.
    fn for_each_offset(&mut self, mut f: impl FnMut(usize, usize) -> Res) -> Res {
        let Some((first, nb)) = self.int_walk() else {
            return self.for_each_block(|b, _, off| f(b, off));
        };
        if self.inner == 0 {
            return Ok(());
        }
        let (lead, lead_stride) = self.lead(first);
        if lead * nb == 0 {
            return Ok(());
        }
        let w = self.walk(lead_stride)?;
        let mut blk = 0;
        for l in 0..lead {
            for p in 0..nb {
                f(blk, w.offset(l, p)?)?;
                blk += 1;
            }
        }
        Ok(())
    }

    /// The [`Self::int_walk`] case set up for its blocks ([`IntWalk`]). Block 0's offset is
    /// computed in full first, in the order of the index tensors, so that an index out of
    /// range there is reported as a walk block by block would report it; after it, a
    /// single-valued index tensor is known to be in range for every block.
    fn walk(&self, lead_stride: usize) -> Result<IntWalk<'a>, KernelError> {
        let mut fixed = 0;
        let mut var = heapless::Vec::new();
        for e in self.entries.iter() {
            if let Entry::Int { vals, dim, .. } = *e {
                let (size, stride) = (self.in_dims.dims()[dim], self.in_strides[dim]);
                let v = vals
                    .at(0)
                    .ok_or(shape_err(self.arg, "empty index tensor"))?;
                let i = check_index(v, size, true, self.arg)?;
                if vals.len() == 1 {
                    fixed += i * stride;
                } else {
                    // At most one entry per input dim: `var` has room for every one.
                    let _ = var.push(IntCol { vals, size, stride });
                }
            }
        }
        Ok(IntWalk {
            fixed,
            var,
            lead_stride,
            arg: self.arg,
        })
    }

    /// The kept leading dims before the first indexed dim `first` ([`Self::int_walk`]
    /// cases): their positions, and the input stride of one position.
    fn lead(&self, first: usize) -> (usize, usize) {
        let stride = if first > 0 {
            self.in_strides[first - 1]
        } else {
            0
        };
        (prod(&self.in_dims.dims()[..first]), stride)
    }

    /// [`Self::for_each_offset`] split across the installed team by ranges of blocks, for the
    /// [`Self::int_walk`] cases (`work`: cost of one block for the split decision): `f(block,
    /// offset)` is called once per block, from any core. `None`, calling nothing, when the
    /// blocks are not such a walk or the team would not split them.
    fn for_each_offset_split(
        &self,
        work: usize,
        f: impl Fn(usize, usize) -> Res + Sync,
    ) -> Option<Res> {
        let (first, nb) = self.int_walk()?;
        if self.inner == 0 {
            return None;
        }
        let (lead, lead_stride) = self.lead(first);
        if lead * nb == 0 || crate::parallel::parts(lead * nb, work) < 2 {
            return None;
        }
        let w = match self.walk(lead_stride) {
            Ok(w) => w,
            Err(e) => return Some(Err(e)),
        };
        let errors = crate::parallel::FirstError::default();
        let split = crate::parallel::try_split(lead * nb, work, |b0, b1, _| {
            let (mut l, mut p) = (b0 / nb, b0 % nb);
            for b in b0..b1 {
                if let Err(e) = w.offset(l, p).and_then(|off| f(b, off)) {
                    errors.put(e);
                    return;
                }
                p += 1;
                if p == nb {
                    (l, p) = (l + 1, 0);
                }
            }
        });
        split.then(|| errors.result())
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
        let mut c = NdIndex::new(odims);
        for blk in 0..nblocks {
            let off = self.block_offset(c.index())?;
            f(blk, c.index(), off)?;
            c.advance();
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
    if index_leading_ints(ctx)? {
        return Ok(());
    }
    let x = ctx.input(0)?;
    let mut ai = AdvIndex::new(ctx, &x, 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, &ai.out)?;
    let es = x.dtype().size();
    let blk = ai.inner * es;
    let src = x.bytes();
    let dst = out.bytes_mut();
    let oob = shape_err(1, "index block outside the input");
    let split = {
        let len = dst.len();
        let shared = crate::parallel::SharedSlice::new(&mut *dst);
        // About 50 instructions to find and move a block, plus its bytes.
        ai.for_each_offset_split(blk / 8 + 48, |b, off| {
            if (b + 1) * blk > len {
                return Err(oob);
            }
            // SAFETY: block b of the output is this call's alone (each block is handed out
            // once); its range lies inside `dst` (checked above).
            let d = unsafe { shared.range(b * blk, (b + 1) * blk) };
            copy_block(src, off * es, d, oob)
        })
    };
    // On a failure in the parts, the walk block by block below finds the first bad index in
    // order, as one core reports it (the parts stop at their own first, in any order).
    if let Some(Ok(())) = split {
        return Ok(());
    }
    ai.for_each_offset(|b, off| {
        let d = dst.get_mut(b * blk..(b + 1) * blk).ok_or(oob)?;
        copy_block(src, off * es, d, oob)
    })
}

/// Most index tensors [`index_leading_ints`] takes.
const LEADING_INTS: usize = 4;

/// An int index tensor of many values in [`index_leading_ints`] (one per broadcast
/// position), the size and element stride of the input dim it indexes.
#[derive(Clone, Copy)]
struct Leading<'a> {
    vals: IdxVals<'a>,
    size: usize,
    stride: usize,
}

impl IdxVals<'_> {
    /// Whether every value lies in `-n..n` (an index of a dim of `n`; negative ones count
    /// from the end).
    fn all_within(&self, n: usize) -> bool {
        let n = n.min(i64::MAX as usize) as i64;
        match self {
            IdxVals::I64(s) => s.iter().all(|&v| -n <= v && v < n),
            IdxVals::I32(s) => s.iter().all(|&v| -n <= v as i64 && (v as i64) < n),
        }
    }
}

/// Copies block `p` of `dst` (`blk` bytes each, from block `b0`) from byte `off(p) · es` of
/// `src`, with `off(p) = fixed + wrap(idx[p]) · stride`: one index tensor of many values,
/// every value within `-size..size` (checked by the caller).
#[allow(clippy::too_many_arguments)]
fn gather_one<T: Copy + Into<i64>>(
    idx: &[T],
    (size, stride, fixed): (usize, usize, usize),
    src: &[u8],
    es: usize,
    blk: usize,
    b0: usize,
    dst: &mut [u8],
    err: KernelError,
) -> Res {
    let idx = idx.get(b0..).ok_or(err)?;
    for (d, &v) in dst.chunks_exact_mut(blk).zip(idx) {
        let v: i64 = v.into();
        let w = if v < 0 { v + size as i64 } else { v } as usize;
        copy_block(src, (fixed + w * stride) * es, d, err)?;
    }
    Ok(())
}

/// `index.Tensor` in its common case without the general walk's set-up (`AdvIndex`, a few
/// thousand instructions for a mask of 16 elements): every index an int tensor over the
/// leading dims of `self` in order (`x[i]`, `x[i, j]`; no `None` entry), each either one
/// element or of one common shape. The result is the broadcast shape followed by `self`'s
/// remaining dims; block `p` (`inner` elements) starts at input element
/// `Σ idx_e[p] · stride_e`. `Ok(false)`, nothing written, for any other call and for an index
/// out of range (the general path then reports it, in its own order).
fn index_leading_ints(ctx: &mut Ctx) -> Result<bool, KernelError> {
    let n = ctx.list_len(1)?;
    let (xp, xbytes, dtype) = ctx.input_raw(0)?;
    let xd = ctx.dims(0)?;
    let r = xd.len();
    if n == 0 || n > r.min(LEADING_INTS) {
        return Ok(false);
    }
    let inner = prod(&xd[n..]);
    // The tensors of many values, and the input offset the one-element ones add to every block.
    let mut multi: heapless::Vec<Leading<'_>, LEADING_INTS> = heapless::Vec::new();
    let mut fixed = 0usize;
    // The multi-element tensors' common dims, and the largest rank of the others.
    let mut common: Option<&[usize]> = None;
    let mut single_rank = 0;
    let mut stride = inner;
    for e in (0..n).rev() {
        let Some((p, bytes, dt, dims)) = ctx.list_input_raw(1, e)? else {
            return Ok(false);
        };
        let es = match dt {
            DType::I64 => 8,
            DType::I32 => 4,
            _ => return Ok(false),
        };
        let len = bytes / es;
        if len == 0 || !(p as usize).is_multiple_of(es) {
            return Ok(false);
        }
        // SAFETY: `list_input_raw` hands out `bytes` readable bytes at `p` for the call's
        // data lifetime, not written by any output of the call; `p` is aligned for `es`-byte
        // integers (checked) and `len · es ≤ bytes`.
        let vals = unsafe {
            if dt == DType::I64 {
                IdxVals::I64(core::slice::from_raw_parts(p as *const i64, len))
            } else {
                IdxVals::I32(core::slice::from_raw_parts(p as *const i32, len))
            }
        };
        if len == 1 {
            single_rank = single_rank.max(dims.len());
        } else if let Some(c) = common {
            if !crate::shape::dims_eq(c, dims) {
                return Ok(false);
            }
        } else {
            common = Some(dims);
        }
        let size = xd[e];
        // Every index in range, else the general path reports the first bad one.
        if !vals.all_within(size) {
            return Ok(false);
        }
        if len == 1 {
            if let Some(v) = vals.at(0) {
                fixed += (if v < 0 { v + size as i64 } else { v }) as usize * stride;
            }
        } else if multi.push(Leading { vals, size, stride }).is_err() {
            return Ok(false);
        }
        stride = stride.saturating_mul(size);
    }
    // The broadcast shape: the common dims behind leading ones up to the largest rank, then
    // `self`'s dims after the indexed ones.
    let common = common.unwrap_or(&[]);
    let mut out = Shape::scalar();
    let pushed = (common.len()..single_rank)
        .map(|_| 1)
        .chain(common.iter().copied())
        .chain(xd[n..].iter().copied())
        .all(|d| out.push(d).is_some());
    if !pushed {
        return Ok(false);
    }
    checked_numel(out.dims(), 1)?;
    check_out_dtype(ctx, 2, dtype)?;
    let mut o = ctx.output(2, &out)?;
    let dst = o.bytes_mut();
    let es = dtype.size();
    let blk = inner * es;
    if blk == 0 || dst.is_empty() {
        return Ok(true);
    }
    let src: &[u8] = if xbytes == 0 {
        &[]
    } else {
        // SAFETY: `input_raw` hands out `xbytes` readable bytes at `xp` for the call, not
        // written by the output (checked when it was bound).
        unsafe { core::slice::from_raw_parts(xp, xbytes) }
    };
    let oob = shape_err(1, "index block outside the input");
    let copy = |b0: usize, chunk: &mut [u8]| -> Res {
        match multi.as_slice() {
            [] => copy_block(src, fixed * es, chunk, oob),
            [m] => {
                let geo = (m.size, m.stride, fixed);
                match m.vals {
                    IdxVals::I64(v) => gather_one(v, geo, src, es, blk, b0, chunk, oob),
                    IdxVals::I32(v) => gather_one(v, geo, src, es, blk, b0, chunk, oob),
                }
            }
            many => {
                for (i, d) in chunk.chunks_exact_mut(blk).enumerate() {
                    let mut off = fixed;
                    for l in many {
                        let v = l.vals.at(b0 + i).ok_or(oob)?;
                        let w = if v < 0 { v + l.size as i64 } else { v };
                        off += w as usize * l.stride;
                    }
                    copy_block(src, off * es, d, oob)?;
                }
                Ok(())
            }
        }
    };
    let errors = crate::parallel::FirstError::default();
    // About 10 instructions to find a block, plus its bytes.
    crate::parallel::for_chunks(dst, blk, blk / 8 + 10, |b0, chunk, _| {
        if let Err(e) = copy(b0, chunk) {
            errors.put(e);
        }
    });
    errors.result()?;
    Ok(true)
}

/// Copies `d.len()` bytes of `src` from byte `at` into `d` (`err` when they run past `src`'s
/// end), by [`vec::copy_run`]: the 1- to 8-byte blocks of single elements (a mask's or an
/// index's) move without a library call.
#[inline(always)]
fn copy_block(src: &[u8], at: usize, d: &mut [u8], err: KernelError) -> Res {
    let s = src.get(at..at + d.len()).ok_or(err)?;
    vec::copy_run(s, d);
    Ok(())
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
    // Offset of the coordinates outside `dim`, kept in step with the index walk.
    let mut outside = [0usize; MAX_RANK];
    for (k, s) in outside[..r].iter_mut().enumerate() {
        if k != dim {
            *s = xs[k] as usize;
        }
    }
    let mut c = NdIndex::new(id);
    let jumps = c.jumps(&outside[..r]);
    let mut base = 0usize;
    for (j, &v) in idx.iter().enumerate() {
        let i = check_index(v, n, false, 2)?;
        let s0 = (base + i * xs[dim] as usize) * es;
        dst[j * es..(j + 1) * es].copy_from_slice(&src[s0..s0 + es]);
        if let Some(d) = c.advance() {
            base = base.wrapping_add(jumps[d]);
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
    let row = dim * w.dtype().size();
    if row == 0 {
        // Nothing to copy: the indices are still checked.
        for i in 0..idx.len() {
            check_index(idx.get(i), rows, false, 1)?;
        }
        ctx.output(5, &shape)?;
        return Ok(());
    }
    let mut out = ctx.output(5, &shape)?;
    let src = w.bytes();
    let dst = out.bytes_mut();
    // Rows gathered across the team's cores, each part checking its own indices (a bad one
    // stops the part: the output is then unspecified and the error below is returned).
    let bad = core::sync::atomic::AtomicBool::new(false);
    crate::parallel::for_chunks(dst, row, row / 8, |first, part, _| match idx {
        IdxVals::I64(s) => gather_rows(part, s.get(first..).unwrap_or(&[]), src, row, &bad),
        IdxVals::I32(s) => gather_rows(part, s.get(first..).unwrap_or(&[]), src, row, &bad),
    });
    if bad.load(core::sync::atomic::Ordering::Relaxed) {
        // The first bad index in order, whichever part met one.
        for i in 0..idx.len() {
            check_index(idx.get(i), rows, false, 1)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
