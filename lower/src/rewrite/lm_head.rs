//! The last-row LM head: a language-model export computes `logits = lm_head(hidden)` for every
//! position and then keeps one, `select_copy(logits, dim = -2, index = -1)`. When nothing else
//! reads the product, the row is sliced from the product's input first and the product
//! computes that one row, straight into the select's output:
//!
//! ```text
//! X = mm(A, W)            ; [T, vocab]          A1 = slice_copy(A, dim, i, i + 1, 1)  ; [1, K]
//! out = select_copy(X', -2, i)   ; X' views X   out = mm(A1, W)                       ; [1, vocab]
//! ```
//!
//! `mm`, `addmm` and `linear` are matched, and XNNPACK regions that compute each output row
//! from the same input row ([`crate::xnn::RowRegion`]: a quantized head's `Convert` and
//! `FullyConnected`), whose payload is then narrowed to one row. The select's output moves to fresh bytes (the
//! re-plan packs it): the product now writes it, earlier than the select did, and ExecuTorch's
//! plan may have put it over the product's inputs. The `[T, vocab]` product leaves the memory plan, and
//! with it most of a language model's activation memory (GPT-2 at T = 128: 25.7 MB).
//! `exec::demand` proves the same pattern at load time for programs not lowered.

use super::graph::{Graph, Kind, Source};
use crate::xnn::RowRegion;

/// One LM head to rewrite.
#[derive(Clone, Debug)]
pub struct Match {
    /// The `select_copy` (removed) and the product (kept, one row).
    pub select: usize,
    pub product: usize,
    pub operator: String,
    /// The product's input `A` and the dimension of its rows.
    pub a: usize,
    pub a_dim: usize,
    /// Shape of the sliced input `A1`.
    pub a_row_sizes: Vec<usize>,
    /// Row kept (normalised) and rows before.
    pub row: usize,
    pub rows: usize,
    /// The product's output `X` and the select's output.
    pub x: usize,
    pub out: usize,
    /// Shape the product writes for one row.
    pub y_sizes: Vec<usize>,
    /// The product is this XNNPACK region (its payload computes `rows` rows).
    pub region: Option<RowRegion>,
}

/// Argument positions of `A` and of the output in a product call.
fn positions(key: &str) -> Option<(usize, usize)> {
    match key {
        "aten::mm.out" => Some((0, 2)),
        "aten::addmm.out" => Some((1, 5)),
        "aten::linear.out" => Some((0, 3)),
        _ => None,
    }
}

/// Finds the LM heads of a method that can be rewritten; `region(pc)` tells whether
/// delegate call `pc` is a [`RowRegion`] whose payload may be narrowed.
pub fn find(g: &Graph<'_>, region: &dyn Fn(usize) -> Option<RowRegion>) -> Vec<Match> {
    let n = g.ins.len();
    let mut out = Vec::new();
    for s in 0..n {
        let i = &g.ins[s];
        if i.removed || i.key != "aten::select_copy.int_out" || i.args.len() < 4 {
            continue;
        }
        if let Some(m) = match_at(g, s, region) {
            out.push(m);
        }
    }
    out
}

fn match_at(g: &Graph<'_>, s: usize, region: &dyn Fn(usize) -> Option<RowRegion>) -> Option<Match> {
    let n = g.ins.len();
    let arg = |pc: usize, k: usize| g.ins[pc].args.get(k).and_then(|&a| usize::try_from(a).ok());
    let (xv, dim_v, idx_v, out) = (arg(s, 0)?, arg(s, 1)?, arg(s, 2)?, arg(s, 3)?);
    // dim and index are constants of the program (no instruction writes them).
    let (dim, index) = (g.const_int(dim_v)?, g.const_int(idx_v)?);
    let tx = g.tensor(xv)?;
    let rank = tx.sizes.len();
    if rank < 2 || !tx.contiguous {
        return None;
    }
    let dim = if dim < 0 { dim + rank as i64 } else { dim };
    if dim != rank as i64 - 2 || tx.sizes[..rank - 2].iter().any(|&d| d != 1) {
        return None;
    }
    let (rows, cols) = (tx.sizes[rank - 2], tx.sizes[rank - 1]);
    let row = if index < 0 {
        index + rows as i64
    } else {
        index
    };
    if row < 0 || row >= rows as i64 || rows < 2 {
        return None;
    }
    // The bytes read come from one product, whose output is exactly those bytes.
    let src = g.sources(xv, s)?;
    let [Source::Ins(p)] = src.iter().copied().collect::<Vec<_>>()[..] else {
        return None;
    };
    let xr = match g.ins[p].kind {
        Kind::Delegate => Some(region(p).filter(|r| r.rows == rows)?),
        _ => None,
    };
    let (a_pos, x_pos) = match xr {
        Some(r) => (r.input, r.output),
        None => positions(&g.ins[p].key)?,
    };
    let (a, x) = (arg(p, a_pos)?, arg(p, x_pos)?);
    if g.alloc[x] != g.alloc[xv] || g.outputs.contains(&x) {
        return None;
    }
    let (ta, txx, tout) = (g.tensor(a)?, g.tensor(x)?, g.tensor(out)?);
    if !ta.contiguous || !txx.contiguous || !tout.contiguous || txx.numel() != tx.numel() {
        return None;
    }
    let ar = ta.sizes.len();
    if ar < 2 || ta.sizes[ar - 2] != rows || ta.sizes[..ar - 2].iter().any(|&d| d != 1) {
        return None;
    }
    // Nothing but the select reads the product's bytes, and no output is made of them.
    for (j, i) in g.ins.iter().enumerate().skip(p + 1) {
        if i.removed || j == s {
            continue;
        }
        for &r in &i.reads {
            if g.alloc.get(r).copied().flatten().is_some()
                && g.sources(r, j)
                    .is_some_and(|src| src.contains(&Source::Ins(p)))
            {
                return None;
            }
        }
    }
    for &o in &g.outputs {
        if g.sources(o, n)
            .is_some_and(|src| src.contains(&Source::Ins(p)))
        {
            return None;
        }
    }
    // The select's output is read under its own name only (it moves to fresh bytes: the
    // product now writes it, and ExecuTorch's plan may have put it over the product's inputs).
    if !g.read_by_name_only(s, out) {
        return None;
    }
    // The select's output: planned, not over the product, `cols` elements of the same dtype.
    if g.alloc[out].is_none()
        || g.overlap(out, x)
        || tout.numel() != cols
        || tout.dtype != txx.dtype
    {
        return None;
    }
    let mut a_row_sizes = ta.sizes.clone();
    a_row_sizes[ar - 2] = 1;
    let y_sizes = match g.ins[p].key.as_str() {
        _ if xr.is_some() => {
            let mut y = txx.sizes.clone();
            let r = y.len();
            if r < 2 || y[r - 1] != cols {
                return None;
            }
            y[r - 2] = 1;
            y
        }
        "aten::linear.out" => {
            let mut y = a_row_sizes.clone();
            y[ar - 1] = cols;
            y
        }
        _ => vec![1, cols],
    };
    Some(Match {
        select: s,
        product: p,
        operator: match xr {
            Some(_) => "XNNPACK region".into(),
            None => g.ins[p].key.clone(),
        },
        a,
        a_dim: ar - 2,
        a_row_sizes,
        row: row as usize,
        rows,
        x,
        out,
        y_sizes,
        region: xr,
    })
}
