//! Row chunks: a region that computes every row of its outputs from the same row of its
//! inputs runs in chunks of rows when its intermediates are large, so that the scratch holds
//! one chunk's rows instead of all of them.
//!
//! A region qualifies when every node is
//! - an elementwise unary operator, a copy or a dynamic row quantization (`Convert`);
//! - an elementwise binary operator whose operands are rows of the same shape or are
//!   broadcast along the rows (constants, or one-element inputs: every dimension but the
//!   last is 1);
//! - a fully-connected product with a quantized filter (int8 or 4-bit: its weights are never
//!   packed per call, so a chunk costs no packing);
//!
//! and every other value a node names has the same `rows` (its dimensions before the last two
//! all 1). A GPT-2 MLP's second half (the GELU's seven elementwise nodes, the row
//! quantization, the product and the residual add) is one; at T = 128 and width 3,072 its
//! intermediates take 4.7 MB at once, 1.2 MB in chunks of 32 rows.
//!
//! Each output element is computed by the same kernel from the same operands whichever chunk
//! holds its row, so the outputs are the same bits: the chunk rows are a divisor of `rows`
//! and every chunk of every value is a multiple of 64 elements, which keeps each element in
//! the same part (vector body or tail) of the elementwise kernels' loops.
//!
//! An output whose rows the program reads only in part (`exec::demand`) is computed whole in a
//! chunked region, and a profile (ETDump, observers) sees each node once per chunk.

use super::graph::{self, Op};
use super::plan::*;
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::shape::Shape;

/// Intermediates above this many bytes (all of them, summed) make a region run in chunks.
pub(super) const CHUNK_BYTES: usize = 1 << 20;
/// Fewest rows in one chunk (a multiple of every integer tile's row block, `SMOPA`'s 32 at
/// SVL 512 included).
pub(super) const MIN_CHUNK_ROWS: usize = 32;

/// How a region runs: `count` chunks of `rows / count` rows; `chunked` marks the values
/// whose row dimension [`plan`] rewrote to one chunk's rows.
pub(super) struct Chunks {
    pub(super) count: usize,
    chunked: [u64; MAX_VALUES / 64],
}

impl Chunks {
    pub(super) fn is_chunked(&self, id: usize) -> bool {
        self.chunked
            .get(id / 64)
            .is_some_and(|w| w >> (id % 64) & 1 != 0)
    }
}

/// Rows of a value whose dimensions before its last two are all 1.
fn rows_of(d: &Shape) -> Option<usize> {
    let r = d.rank();
    (r >= 2 && d.dims()[..r - 2].iter().all(|&x| x == 1)).then(|| d.dims()[r - 2])
}

/// Broadcast along the rows: every dimension but the last is 1.
fn broadcast(d: &Shape) -> bool {
    d.dims().iter().rev().skip(1).all(|&x| x == 1)
}

/// Decides whether the region runs in chunks; if so, rewrites the row dimension of every row
/// value in `dims` (and the bytes of every intermediate in `kinds`) to one chunk's rows.
pub(super) fn plan(
    nodes: &flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<xf::XNode<'_>>>,
    kinds: &mut [(u32, u32, u64)],
    dims: &mut [Shape],
    qinfo: &[(u32, u32, u64, bool)],
) -> Result<Chunks, KernelError> {
    let mut out = Chunks {
        count: 1,
        chunked: [0; MAX_VALUES / 64],
    };
    let mut rows: Option<usize> = None;
    let mut is_row = [0u64; MAX_VALUES / 64];
    // A value holding `rows` rows (the first one seen sets them); constants never do.
    let mut row_value = |id: u32, rows: &mut Option<usize>| -> bool {
        let i = id as usize;
        let (Some(k), Some(d)) = (kinds.get(i), dims.get(i)) else {
            return false;
        };
        if matches!(k.0, KIND_CONSTANT | KIND_PACKED) {
            return false;
        }
        match rows_of(d) {
            Some(r) if *rows.get_or_insert(r) == r => {
                is_row[i / 64] |= 1 << (i % 64);
                true
            }
            _ => false,
        }
    };
    // An operand broadcast along the rows: a constant, or a one-element-row region input.
    let spread = |id: u32| {
        let i = id as usize;
        kinds
            .get(i)
            .is_some_and(|k| matches!(k.0, KIND_CONSTANT | KIND_EXTERNAL_IN))
            && dims.get(i).is_some_and(broadcast)
            && qinfo.get(i).is_some_and(|q| q.0 == DT_F32)
    };
    let quantized = |id: u32| qinfo.get(id as usize).is_some_and(|q| q.0 != DT_F32 || q.3);
    for node in nodes.iter() {
        let (op, _) = graph::decode(node)?;
        let ok = match op {
            Op::Unary { x, out, .. } => row_value(x, &mut rows) && row_value(out, &mut rows),
            Op::Binary { a, b, out, .. } => {
                let a_ok = spread(a) || row_value(a, &mut rows);
                let b_ok = spread(b) || row_value(b, &mut rows);
                a_ok && b_ok && row_value(out, &mut rows)
            }
            Op::FullyConnected { x, w, out, .. } => {
                quantized(w) && row_value(x, &mut rows) && row_value(out, &mut rows)
            }
            _ => false,
        };
        if !ok {
            return Ok(out);
        }
    }
    let Some(rows) = rows else { return Ok(out) };
    let flagged = |i: usize| is_row[i / 64] >> (i % 64) & 1 != 0;
    // Every intermediate is a row value; together they take `total` bytes.
    let mut total = 0usize;
    for (i, k) in kinds.iter().enumerate() {
        if k.0 == KIND_INTERNAL && k.2 > 0 {
            if !flagged(i) {
                return Ok(out);
            }
            total = total.saturating_add(k.2 as usize);
        }
    }
    if total <= CHUNK_BYTES {
        return Ok(out);
    }
    // The largest divisor of the rows (at least MIN_CHUNK_ROWS, fewer than all) whose chunk
    // fits CHUNK_BYTES, else the smallest such divisor.
    let fits = |c: usize| total / rows * c <= CHUNK_BYTES;
    let divisors = (MIN_CHUNK_ROWS..rows).filter(|c| rows.is_multiple_of(*c));
    let Some(c) = divisors
        .clone()
        .filter(|&c| fits(c))
        .max()
        .or_else(|| divisors.min())
    else {
        return Ok(out);
    };
    // Every chunk of every row value is a multiple of 64 elements.
    for (i, d) in dims.iter().enumerate() {
        if flagged(i) && !(d.numel() / rows * c).is_multiple_of(64) {
            return Ok(out);
        }
    }
    for (i, (k, d)) in kinds.iter_mut().zip(dims.iter_mut()).enumerate() {
        if !flagged(i) {
            continue;
        }
        let r = d.rank();
        d.dims_mut()[r - 2] = c;
        if k.0 == KIND_INTERNAL {
            let numel = d.numel();
            k.2 = match qinfo.get(i).map(|q| q.0) {
                Some(DT_QD8) => qd8_bytes(numel, numel / graph::last_dim(d).max(1)),
                _ => numel.checked_mul(4),
            }
            .ok_or(graph::bad("XNNPACK value size overflows"))? as u64;
        }
    }
    out.chunked = is_row;
    out.count = rows / c;
    Ok(out)
}
