//! The strided copy engine: [`copy_view`] copies a strided [`View`] of a source into a
//! contiguous destination. It drops size-1 dims and merges dims that are contiguous with each
//! other, then copies whole contiguous runs with `copy_from_slice`; when the innermost source
//! stride is not 1 it copies element by element, in a loop specialised on the element size
//! (transposes of the last two dims go through tiles, and 4×4 register blocks for 4-byte
//! elements). Every view is bounds-checked against its source before anything is copied.
//! [`convert_view`] is the converting variant.

use super::common::{block_runs, checked_numel, shape_err, Res};
use super::convert::{convert_elem, convert_run};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::linalg::vecmath as vec;
use crate::parallel;
use crate::tensor::MAX_RANK;

/// Views may have twice the tensor rank (`repeat` splits every dim in two).
const VIEW_RANK: usize = 2 * MAX_RANK;

/// A strided view of a source buffer, in elements: element `(i0, .., ik)` of the view is
/// source element `base + Σ i_j * strides[j]`. Strides may be 0 (broadcast) or negative (flip).
#[derive(Clone, Copy)]
pub(super) struct View {
    rank: usize,
    dims: [usize; VIEW_RANK],
    strides: [isize; VIEW_RANK],
    /// Source element of the all-zero index.
    pub(super) base: isize,
}

impl View {
    /// The rank-0 view of source element `base`; dims are added with [`View::push`].
    pub(super) fn new(base: isize) -> View {
        View {
            rank: 0,
            dims: [0; VIEW_RANK],
            strides: [0; VIEW_RANK],
            base,
        }
    }

    /// Appends an innermost dim of size `d` and element stride `s`.
    pub(super) fn push(&mut self, d: usize, s: isize, arg: usize) -> Res {
        if self.rank == VIEW_RANK {
            return Err(shape_err(arg, "view rank exceeds 32"));
        }
        self.dims[self.rank] = d;
        self.strides[self.rank] = s;
        self.rank += 1;
        Ok(())
    }

    /// The whole of a tensor with the given dims and strides.
    pub(super) fn of(dims: &[usize], strides: &[isize], arg: usize) -> Result<View, KernelError> {
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
#[inline(always)]
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
fn walk_blocks(v: &Simple, levels: usize, block: usize, f: impl FnMut(usize, usize)) {
    let outer_rank = v.rank - levels;
    let blocks: usize = v.dims[..outer_rank].iter().product();
    walk_range(v, outer_rank, block, 0, blocks, f);
}

/// Blocks `lo..hi` (row-major over the first `outer_rank` dims) of [`walk_blocks`]: the
/// odometer starts at block `lo`.
fn walk_range(
    v: &Simple,
    outer_rank: usize,
    block: usize,
    lo: usize,
    hi: usize,
    mut f: impl FnMut(usize, usize),
) {
    let mut idx = [0usize; VIEW_RANK];
    let mut rest = lo;
    let mut off = v.base;
    for k in (0..outer_rank).rev() {
        idx[k] = rest % v.dims[k];
        rest /= v.dims[k];
        off += v.strides[k] * idx[k] as isize;
    }
    for b in lo..hi {
        // Offsets at block starts are within the checked bounds, so non-negative.
        f(b * block, off as usize);
        let mut k = outer_rank;
        while k > 0 {
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

/// [`walk_blocks`] with the blocks split across the installed team of cores: `f(dst, src)` is
/// called once per block, from any core, each block exactly once (`cost`: instructions per
/// element, roughly, for the split decision).
fn walk_blocks_split(
    v: &Simple,
    levels: usize,
    block: usize,
    cost: usize,
    f: impl Fn(usize, usize) + Sync,
) {
    let outer_rank = v.rank - levels;
    let blocks: usize = v.dims[..outer_rank].iter().product();
    parallel::for_units(blocks, block.saturating_mul(cost), |lo, hi, _| {
        walk_range(v, outer_rank, block, lo, hi, &f)
    });
}

/// Walks `v` in row-major order and calls `f(dst_start, src_start, count, src_stride)` for every
/// innermost run of the simplified view, after checking every source element lies in
/// `0..src_len`.
pub(super) fn for_each_run(
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

/// Elements of one unit of [`copy_pieces`].
const PIECE: usize = 256;

/// Work of one [`PIECE`] of `N`-byte elements for the split decision: a copy moves about 8
/// bytes per instruction.
const fn piece_work(n: usize) -> usize {
    PIECE * n / 8
}

/// Copies a view whose innermost stride `cs` is 1 (contiguous runs) or 0 (one element
/// repeated) across the installed team by ranges of destination elements, cutting runs where
/// a range ends: for views with too few outer blocks to split (a whole-tensor copy, a
/// broadcast of one row block). `false`, copying nothing, when the team would not split it.
fn copy_pieces<const N: usize>(src: &[u8], sv: &Simple, dst: &mut [u8]) -> bool {
    let r = sv.rank;
    let cols = sv.dims[r - 1];
    let cs = sv.strides[r - 1];
    let total = dst.len() / N;
    let shared = parallel::SharedSlice::new(dst);
    parallel::try_split(total.div_ceil(PIECE), piece_work(N), |lo, hi, _| {
        let (e0, e1) = (lo * PIECE, (hi * PIECE).min(total));
        walk_range(sv, r - 1, cols, e0 / cols, e1.div_ceil(cols), |d0, s0| {
            let (a, b) = (d0.max(e0), (d0 + cols).min(e1));
            // SAFETY: elements a..b lie in this part's range e0..e1, which no other part
            // reaches.
            let out = unsafe { shared.range(a * N, b * N) };
            if cs == 1 {
                let s = s0 + (a - d0);
                out.copy_from_slice(&src[s * N..(s + b - a) * N]);
            } else {
                let e = &src[s0 * N..s0 * N + N];
                for c in out.chunks_exact_mut(N) {
                    c.copy_from_slice(e);
                }
            }
        });
    })
}

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
    if cs == 0 || cs == 1 {
        // Contiguous or repeated runs in too few blocks for the paths below to split (a
        // whole-tensor copy, one broadcast row block): split by element ranges instead.
        let blocks: usize = sv.dims[..r.saturating_sub(2)].iter().product();
        let block_work = (rows * cols).div_ceil(PIECE) * piece_work(N);
        let pieces = parallel::parts((rows * cols * blocks).div_ceil(PIECE), piece_work(N));
        if pieces > parallel::parts(blocks, block_work) && copy_pieces::<N>(src, &sv, dst) {
            return Ok(());
        }
    }
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
            let errors = parallel::FirstError::default();
            if r == 2 && parallel::parts(rows.div_ceil(4), 8 * cols) > 1 {
                // One matrix (a weight's transpose): split by groups of 4 output rows.
                let base = sv.base as usize;
                let d32 = parallel::SharedSlice::new(d32);
                parallel::try_split(rows.div_ceil(4), 8 * cols, |lo, hi, _| {
                    let (i0, i1) = (lo * 4, (hi * 4).min(rows));
                    // SAFETY: output rows i0..i1 belong to this part alone.
                    let d = unsafe { d32.range(i0 * cols, i1 * cols) };
                    let r = match s32.get(base + i0..) {
                        Some(s) => vec::transpose32(s, cs, d, cols, i1 - i0, cols),
                        None => Err(shape_err(arg, "view out of bounds")),
                    };
                    if r.is_err() {
                        errors.put(shape_err(arg, "view out of bounds"));
                    }
                });
                return errors.result();
            }
            let d32 = parallel::SharedSlice::new(d32);
            walk_blocks_split(&sv, 2, rows * cols, 2, |d0, s0| {
                // SAFETY: every block's elements belong to its call alone.
                let d = unsafe { d32.range(d0, d0 + rows * cols) };
                let r = match s32.get(s0..) {
                    Some(s) if d.len() == rows * cols => {
                        vec::transpose32(s, cs, d, cols, rows, cols)
                    }
                    _ => Err(shape_err(arg, "view out of bounds")),
                };
                if r.is_err() {
                    errors.put(shape_err(arg, "view out of bounds"));
                }
            });
            return errors.result();
        }
    }
    if N == 4 && r >= 2 && cs == 1 && sv.strides[r - 2] >= 0 {
        if let (Some(s32), Some(d32)) = (as_f32(src), as_f32_mut(dst)) {
            // Blocks of `rows` contiguous runs of `cols` 4-byte elements, `rs` apart (0: one
            // row broadcast): one strided copy per block, short runs without a library call.
            let rs = sv.strides[r - 2] as usize;
            let errors = parallel::FirstError::default();
            let d32 = parallel::SharedSlice::new(d32);
            walk_blocks_split(&sv, 2, rows * cols, 1, |d0, s0| {
                // SAFETY: every block's elements belong to its call alone.
                let d = unsafe { d32.range(d0, d0 + rows * cols) };
                let res = match s32.get(s0..) {
                    Some(s) => vec::copy_rows(s, rs, d, cols, cols, rows),
                    None => Err(shape_err(arg, "view out of bounds")),
                };
                if res.is_err() {
                    errors.put(shape_err(arg, "view out of bounds"));
                }
            });
            return errors.result();
        }
    }
    let shared = parallel::SharedSlice::new(dst);
    if r >= 2 && sv.strides[r - 2] == 1 && cs > 1 && rows >= TILE && cols >= TILE {
        // A transpose of the last two dims: dst[a][b] = src[a + b * cs]. Copy it in square
        // tiles so that both sides stay in cache.
        let cs = cs as usize;
        walk_blocks_split(&sv, 2, rows * cols, 2, |d0, s0| {
            // SAFETY: every block's elements belong to its call alone.
            let dst = unsafe { shared.range(d0 * N, (d0 + rows * cols) * N) };
            for a0 in (0..rows).step_by(TILE) {
                let a1 = (a0 + TILE).min(rows);
                for b0 in (0..cols).step_by(TILE) {
                    let b1 = (b0 + TILE).min(cols);
                    for b in b0..b1 {
                        // Source column b of the tile is contiguous (rows a0..a1).
                        let sb = s0 + b * cs;
                        let mut p = (a0 * cols + b) * N;
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
    walk_blocks_split(&sv, 1, cols, 1, |d0, s0| {
        // SAFETY: every block's elements belong to its call alone.
        let out = unsafe { shared.range(d0 * N, (d0 + cols) * N) };
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

/// Copies `src` into `dst` byte for byte: a contiguous tensor into one of the same dtype,
/// element count and layout (a same-shape `expand_copy`, `clone`, `alias_copy`, a dim-order
/// copy that keeps the order). No view is planned; the bytes are split across the team in
/// ranges of [`PIECE`] 4-byte words when there are enough of them. `arg` names the output.
pub(super) fn copy_same(src: &[u8], dst: &mut [u8], arg: usize) -> Res {
    if src.len() != dst.len() {
        return Err(shape_err(arg, "output size does not match the input"));
    }
    const UNIT: usize = PIECE * 4;
    if dst.len() <= UNIT {
        // One piece: nothing to split, and no team to ask.
        dst.copy_from_slice(src);
        return Ok(());
    }
    parallel::for_chunks(dst, UNIT, piece_work(4), |u, o, _| {
        let s0 = u * UNIT;
        if let Some(s) = src.get(s0..s0 + o.len()) {
            o.copy_from_slice(s);
        }
    });
    Ok(())
}

/// Copies the contiguous `[a, b, d]` tensor `src` (elements of `es` bytes) into `dst` as
/// `[b, a, d]`: `dst[x][y][..] = src[y][x][..]`, runs of `d` elements moved whole. The head
/// permutes of attention (`[1, T, H, D]` ↔ `[1, H, T, D]`) and any permute that is one such
/// swap once size-1 dims are dropped and neighbours that stay together are merged. No view
/// is planned; the `b · a` output runs are split across the team in ranges (not by `x`: a
/// 6-head swap on 4 cores would leave two cores idle half the time). `arg` names the output.
pub(super) fn copy_swapped(
    es: usize,
    src: &[u8],
    (a, b, d): (usize, usize, usize),
    dst: &mut [u8],
    arg: usize,
) -> Res {
    let n = a
        .checked_mul(b)
        .and_then(|v| v.checked_mul(d))
        .and_then(|v| v.checked_mul(es))
        .ok_or(shape_err(arg, "permuted tensor too large"))?;
    if src.len() != n || dst.len() != n {
        return Err(shape_err(
            arg,
            "output size does not match the permuted input",
        ));
    }
    if n == 0 {
        return Ok(());
    }
    match (as_f32(src), es) {
        (Some(s32), 4) => {
            let d32 = as_f32_mut(dst).ok_or(shape_err(arg, "misaligned output"))?;
            swap_runs(s32, d32, (a, b, d), 1, arg)
        }
        _ => swap_runs(src, dst, (a, b, d * es), 8, arg),
    }
}

/// [`copy_swapped`] on elements `T` (`per_word`: elements per 8 bytes, for the split
/// decision), lengths checked by the caller.
pub(super) fn swap_runs<T: Copy + Send + Sync>(
    src: &[T],
    dst: &mut [T],
    (a, b, d): (usize, usize, usize),
    per_word: usize,
    arg: usize,
) -> Res {
    // Output runs `o0..o1` into `out` (run `o` is `x = o / a`, `y = o % a`): for each `x`
    // they touch, one strided copy of its rows `y`.
    let runs = |out: &mut [T], o0: usize, o1: usize| -> Res {
        let mut o = o0;
        while o < o1 {
            let (x, y0) = (o / a, o % a);
            let y1 = a.min(y0 + (o1 - o));
            let s = src.get((y0 * b + x) * d..).unwrap_or(&[]);
            let part = out.get_mut((o - o0) * d..).unwrap_or(&mut []);
            vec::copy_rows(s, b * d, part, d, d, y1 - y0)
                .map_err(|_| shape_err(arg, "view out of bounds"))?;
            o += y1 - y0;
        }
        Ok(())
    };
    let units = a * b;
    let work = d.div_ceil(per_word) + 4;
    if parallel::parts(units, work) < 2 {
        return runs(dst, 0, units);
    }
    let errors = parallel::FirstError::default();
    let shared = parallel::SharedSlice::new(dst);
    let split = parallel::try_split(units, work, |o0, o1, _| {
        // SAFETY: output runs o0..o1 belong to this part alone.
        if let Err(e) = runs(unsafe { shared.range(o0 * d, o1 * d) }, o0, o1) {
            errors.put(e);
        }
    });
    if !split {
        // SAFETY: no part ran: every output run is this call's.
        return runs(unsafe { shared.range(0, units * d) }, 0, units);
    }
    errors.result()
}

/// Copies the view `v` of `src` (elements of `es` bytes) into the contiguous `dst`.
pub(super) fn copy_view(es: usize, src: &[u8], v: &View, dst: &mut [u8], arg: usize) -> Res {
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
pub(super) fn convert_view(
    sdt: DType,
    src: &[u8],
    v: &View,
    ddt: DType,
    dst: &mut [u8],
    arg: usize,
) -> Res {
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

/// Transposes each of the `batches` row-major `rows × cols` matrices of `src` into `dst`
/// (`cols × rows` each; lengths `batches·rows·cols`, checked by the caller): output rows in
/// groups of 4 split across the team, a part's groups of one matrix in one `transpose32`
/// call. Bits copied unchanged. `arg` names the output.
pub(super) fn transpose_matrices(
    src: &[f32],
    dst: &mut [f32],
    (batches, rows, cols): (usize, usize, usize),
    arg: usize,
) -> Res {
    let groups = cols.div_ceil(4);
    let errors = parallel::FirstError::default();
    let out = parallel::SharedSlice::new(dst);
    let move_units = |lo: usize, hi: usize| {
        // Unit u: output rows 4g .. 4g + 4 of matrix u / groups (output row i is input
        // column i).
        block_runs(lo, hi, groups, |m, g0, g1| {
            let (i0, i1) = (4 * g0, (4 * g1).min(cols));
            let base = m * rows * cols;
            // SAFETY: output rows i0..i1 of matrix m belong to these units alone.
            let d = unsafe { out.range(base + i0 * rows, base + i1 * rows) };
            let r = match src.get(base + i0..base + rows * cols) {
                Some(s) => vec::transpose32(s, cols, d, rows, i1 - i0, rows),
                None => Err(shape_err(
                    arg,
                    "output size does not match the permuted input",
                )),
            };
            if let Err(e) = r {
                errors.put(e);
            }
        })
    };
    let units = batches * groups;
    if !parallel::try_split(units, 8 * rows, |lo, hi, _| move_units(lo, hi)) {
        move_units(0, units);
    }
    errors.result()
}

/// A permute done without the copy engine's plan (`view::permuted_copy`, the prepared
/// permutes).
#[derive(Debug, PartialEq)]
pub(super) enum RunsOrder {
    /// The output has the input's bytes (only size-1 dims move).
    Same,
    /// The input is `[a, b, d]` and the output `[b, a, d]`: runs of `d` elements move whole
    /// (a swap that moves the innermost dims is a transpose, left to the engine's tiles).
    Swap(usize, usize, usize),
}

/// The permute `perm` of a contiguous tensor of dims `dims` as a [`RunsOrder`], when it is
/// one: size-1 dims dropped, output neighbours that are neighbours in the input, in order,
/// merged into blocks; one block is [`RunsOrder::Same`], three blocks whose input order is
/// (second, first, third) a [`RunsOrder::Swap`] (the head permutes of attention, `[1, T, H,
/// D]` ↔ `[1, H, T, D]`). `None` for anything else (a transpose of the innermost dims, a
/// rotation of three blocks, ...).
pub(super) fn runs_order(dims: &[usize], perm: &[usize]) -> Option<RunsOrder> {
    // The next input dim after `q` that is not of size 1.
    let next = |q: usize| (q + 1..dims.len()).find(|&i| dims[i] != 1);
    // Blocks in output order: (first input dim, last input dim, elements).
    let mut g: heapless::Vec<(usize, usize, usize), MAX_RANK> = heapless::Vec::new();
    for &p in perm {
        let n = *dims.get(p)?;
        if n == 1 {
            continue;
        }
        match g.last_mut() {
            Some(last) if next(last.1) == Some(p) => {
                last.1 = p;
                last.2 *= n;
            }
            _ => g.push((p, p, n)).ok()?,
        }
    }
    match g.as_slice() {
        [] | [_] => Some(RunsOrder::Same),
        [x, y, z] if y.0 < x.0 && x.0 < z.0 => Some(RunsOrder::Swap(y.2, x.2, z.2)),
        _ => None,
    }
}

#[cfg(test)]
#[path = "copy_engine_tests.rs"]
mod tests;

/// The rows of a split into pieces of rows, in one parallel step: `src` holds `outer` rows
/// of `stride` bytes; piece `k` = `(out, w, base)` takes bytes `base..base + w` of each row
/// into row after row of `out` (`outer · w` bytes). Unit `u` is row `u % outer` of piece
/// `u / outer` (the query, key and value of an attention layer split from one product: 3 × T
/// rows, too few per output to split each alone).
pub(super) fn copy_row_pieces(
    src: &[u8],
    pieces: &[(parallel::SharedSlice<'_, u8>, usize, usize)],
    outer: usize,
    stride: usize,
) {
    let count = pieces.len();
    // A library copy of a row costs about 50 instructions for a short row (measured: its call
    // and loop) and one per 16 bytes.
    let units = count * outer;
    let work = stride / count.max(1) / 16 + 50;
    let copy = |lo: usize, hi: usize| {
        block_runs(lo, hi, outer, |k, o0, o1| {
            // The rows o0..o1 of piece k in this range: one loop.
            let Some(&(ref dst, w, base)) = pieces.get(k).filter(|p| p.1 > 0) else {
                return;
            };
            // SAFETY: rows o0..o1 of piece k belong to this range's units alone.
            let rows = unsafe { dst.range(o0 * w, o1 * w) };
            for (j, row) in rows.chunks_exact_mut(w).enumerate() {
                let s0 = (o0 + j) * stride + base;
                if let Some(s) = src.get(s0..s0 + w) {
                    row.copy_from_slice(s);
                }
            }
        })
    };
    if !parallel::try_split(units, work, |lo, hi, _| copy(lo, hi)) {
        copy(0, units);
    }
}

/// Copies row `idx[j]` of `src` (rows of `row > 0` bytes) into each row `j` of `part` (an
/// embedding lookup: indices `0..rows`, negative ones out of range); at the first index out
/// of range sets `bad` and stops.
pub(super) fn gather_rows<I: Copy + Into<i64>>(
    part: &mut [u8],
    idx: &[I],
    src: &[u8],
    row: usize,
    bad: &core::sync::atomic::AtomicBool,
) {
    let rows = src.len() / row.max(1);
    for (d, &v) in part.chunks_exact_mut(row).zip(idx) {
        let Some(s) = usize::try_from(v.into())
            .ok()
            .filter(|&v| v < rows)
            .and_then(|v| src.get(v * row..(v + 1) * row))
        else {
            bad.store(true, core::sync::atomic::Ordering::Relaxed);
            return;
        };
        d.copy_from_slice(s);
    }
}
