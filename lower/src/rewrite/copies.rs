//! Removal of copies that change nothing: `clone`, `alias_copy`, `_clone_dim_order` and
//! `_to_dim_order_copy` to the same dtype and layout, `expand_copy` to the same shape, the
//! reshapes `view_copy`, `unsqueeze_copy`, `squeeze_copy` of contiguous tensors, and a
//! `permute_copy` that moves only dims of size 1. Their output
//! has exactly the input's bytes, so the output is placed over the input's bytes instead (the
//! way ExecuTorch places a static view over its base) and the call disappears.
//!
//! A copy `c` from `S` to `D` goes when, following bytes ([`Graph::sources`]):
//! - every tensor a later instruction reads with bytes from `c` has all of its bytes from `c`
//!   and lies inside `D` (these are `D` and its views: they move with it);
//! - no instruction between `c` and the last read of those tensors writes over `S`'s bytes or
//!   writes one of those tensors, so `S`'s bytes still hold the data when they are read;
//! - `D` is not a method input or output, not state kept between runs, and no other
//!   instruction writes it.

use std::collections::BTreeSet;

use ptera::format::fb;

use super::graph::{Graph, Source};

/// `(S, D)` when instruction `pc` is a copy whose output has its input's exact bytes.
fn identity_copy(g: &Graph<'_>, pc: usize) -> Option<(usize, usize)> {
    let i = &g.ins[pc];
    let arg = |k: usize| i.args.get(k).and_then(|&a| usize::try_from(a).ok());
    let (s, d) = match i.key.as_str() {
        "aten::alias_copy.out" => (arg(0)?, arg(1)?),
        "aten::clone.out" => {
            // memory_format must be none or preserve (the default): the layout stays.
            let mf = arg(1)?;
            let preserve = match g.kind_of(mf)? {
                fb::KernelTypes::Null => true,
                fb::KernelTypes::Int => g
                    .view
                    .plan
                    .values()
                    .and_then(|v| v.get(mf).val_as_int())
                    .is_some_and(|x| x.int_val() == 1 || x.int_val() == 0),
                _ => false,
            };
            if !preserve {
                return None;
            }
            (arg(0)?, arg(2)?)
        }
        "dim_order_ops::_clone_dim_order.out"
        | "dim_order_ops::_to_dim_order_copy.out"
        | "aten::_to_copy.out" => (arg(0)?, arg(3)?),
        "aten::expand_copy.out" => (arg(0)?, arg(3)?),
        "aten::view_copy.out" | "aten::unsqueeze_copy.out" | "aten::squeeze_copy.dim_out" => {
            (arg(0)?, arg(2)?)
        }
        "aten::squeeze_copy.out" => (arg(0)?, arg(1)?),
        // A permutation that moves only size-1 dims keeps every element where it was.
        "aten::permute_copy.out" => {
            let (s, d) = (arg(0)?, arg(2)?);
            let sizes = &g.tensor(s)?.sizes;
            let perm = g.const_int_list(arg(1)?)?;
            if perm.len() != sizes.len() {
                return None;
            }
            let r = sizes.len() as i64;
            let mut kept = Vec::new();
            for p in perm {
                let p = usize::try_from(if p < 0 { p + r } else { p }).ok()?;
                if *sizes.get(p)? != 1 {
                    kept.push(p);
                }
            }
            if !kept.windows(2).all(|w| w[0] < w[1]) {
                return None;
            }
            (s, d)
        }
        _ => return None,
    };
    let (ts, td) = (g.tensor(s)?, g.tensor(d)?);
    let same_bytes = ts.dtype.is_some()
        && ts.dtype == td.dtype
        && ts.contiguous
        && td.contiguous
        && ts.numel() == td.numel();
    if !same_bytes {
        return None;
    }
    // An expand must not broadcast: the shapes are equal.
    if i.key == "aten::expand_copy.out" && ts.sizes != td.sizes {
        return None;
    }
    Some((s, d))
}

/// Tries to remove copy `pc`; on success the graph is updated (the call removed, `D` and its
/// views moved over `S`) and the moved values are returned.
pub fn try_remove(g: &mut Graph<'_>, pc: usize) -> Option<Vec<usize>> {
    if g.ins[pc].removed {
        return None;
    }
    let (s, d) = identity_copy(g, pc)?;
    let (ms, os, ls) = g.alloc.get(s).copied().flatten()?;
    let (md, od, ld) = g.alloc.get(d).copied().flatten()?;
    if ls != ld || ls == 0 || g.is_constant(s) {
        return None;
    }
    if g.outputs.contains(&d) || g.holds_start(d) {
        return None;
    }
    let n = g.ins.len();
    if g.ins
        .iter()
        .enumerate()
        .any(|(j, i)| j != pc && !i.removed && i.writes.contains(&d))
    {
        return None;
    }
    // The tensors read later with bytes from the copy.
    let mut moved: BTreeSet<usize> = BTreeSet::new();
    let mut last = pc;
    for j in pc + 1..n {
        if g.ins[j].removed {
            continue;
        }
        for &r in &g.ins[j].reads {
            if g.kind_of(r) != Some(fb::KernelTypes::Tensor) || g.alloc[r].is_none() {
                continue;
            }
            let src = g.sources(r, j)?;
            if !src.contains(&Source::Ins(pc)) {
                continue;
            }
            let (mr, or, lr) = g.alloc[r]?;
            if src.len() != 1 || mr != md || or < od || or + lr > od + ld {
                return None;
            }
            moved.insert(r);
            last = j;
        }
    }
    for &o in &g.outputs {
        if g.sources(o, n)
            .is_some_and(|s| s.contains(&Source::Ins(pc)))
        {
            return None;
        }
    }
    // Between the copy and the last read: nothing writes over S or writes a moved tensor.
    for j in pc + 1..=last {
        let i = &g.ins[j];
        if i.removed {
            continue;
        }
        for &w in &i.writes {
            if moved.contains(&w) || w == s {
                return None;
            }
            if let Some((mw, ow, lw)) = g.alloc.get(w).copied().flatten() {
                if mw == ms && lw > 0 && ow < os + ls && os < ow + lw {
                    return None;
                }
            }
        }
    }
    for &r in &moved {
        if g.outputs.contains(&r) || g.holds_start(r) {
            return None;
        }
    }
    for &r in &moved {
        if let Some((_, or, lr)) = g.alloc[r] {
            g.alloc[r] = Some((ms, os + (or - od), lr));
        }
    }
    g.ins[pc].removed = true;
    Some(moved.into_iter().collect())
}

/// Removes every copy that can go, in program order. Returns the removed instructions.
pub fn run(g: &mut Graph<'_>) -> Vec<usize> {
    let mut removed = Vec::new();
    for pc in 0..g.ins.len() {
        if try_remove(g, pc).is_some() {
            removed.push(pc);
        }
    }
    removed
}
