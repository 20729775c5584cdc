//! Attention regions: a layer's `bmm → [mul by a constant] → [add a mask] → _softmax → bmm →
//! [permute back]` chain, together with the head permutes, key transpose, splits and row
//! slices that feed its products, becomes one `Attention` operation of ptera's backend
//! (runtime: `ptera::linalg::attention`) that reads Q, K and V where their projections wrote
//! them.
//!
//! The chain is found on the method's dataflow over bytes ([`Graph`]): each operand of the two
//! products is traced back through the copies that only move elements (`permute_copy`,
//! `split_with_sizes_copy`, `slice_copy`, `expand_copy`, `clone`, `view_copy`, and the views
//! ExecuTorch elides by planning them over their base's bytes) to the tensor some other
//! instruction computed, as a strided view `[heads, rows, head_dim]` of it with unit stride
//! along `head_dim`. An `expand_copy` that repeats each K/V head for a group of query heads
//! (grouped-query attention, Llama) becomes the operation's `kv_group`. A query operand may also pass through one `mul` by a constant
//! scalar (OPT scales its queries): it becomes the operation's `q_scale`.
//!
//! A chain is taken only when nothing else reads what its instructions write (the whole chain
//! disappears), every tensor is f32 and static, and no kept instruction between the first
//! absorbed one and the last writes the bytes the operation reads (it runs at the place of the
//! last).

use std::collections::BTreeSet;

use ptera::format::fb;
use ptera::linalg::attention::{Attention, HeadView};
use ptera::{DType, Program};

use crate::rewrite::gelu::{args_of, producer, scalar};
use crate::rewrite::graph::{Graph, Source};

/// One attention chain made an operation.
#[derive(Clone, Debug)]
pub struct Match {
    /// Instruction the DelegateCall takes the place of (the last absorbed one).
    pub pc: usize,
    /// The other absorbed instructions.
    pub removed: Vec<usize>,
    /// Operator keys absorbed, in program order.
    pub absorbed: Vec<String>,
    /// Tensors read: queries, keys, values (may be one tensor), the mask; the output.
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub mask: Option<usize>,
    pub out: usize,
    pub attn: Attention,
}

/// An operand as a strided view of a computed tensor: element `i` (a multi-index over `sizes`)
/// is element `off + Σ (i / divs)·strides` of `base`, times `scale`. A divisor above 1 marks a
/// dim made of a broadcast one merged into the dim before it: grouped-query attention's
/// query heads, `kv_group` of them per K/V head.
#[derive(Clone, Debug)]
struct Strided {
    base: usize,
    off: usize,
    sizes: Vec<usize>,
    strides: Vec<usize>,
    divs: Vec<usize>,
    scale: f32,
    /// Instructions traced through.
    through: Vec<usize>,
}

impl Strided {
    /// All of the contiguous tensor `base` (of `sizes`), from element `off`.
    fn whole(base: usize, off: usize, sizes: Vec<usize>) -> Strided {
        Strided {
            base,
            off,
            strides: contiguous(&sizes),
            divs: vec![1; sizes.len()],
            sizes,
            scale: 1.0,
            through: Vec::new(),
        }
    }

    /// Elements `start, start + step, ..` (`len` of them) along `dim`; `None` for a dim with
    /// a divisor or an offset that overflows.
    fn narrowed(mut self, dim: usize, start: usize, len: usize, step: usize) -> Option<Strided> {
        if self.divs[dim] != 1 {
            return None;
        }
        self.off = self
            .off
            .checked_add(start.checked_mul(self.strides[dim])?)?;
        self.sizes[dim] = len;
        self.strides[dim] = self.strides[dim].checked_mul(step)?;
        Some(self)
    }

    /// The same elements viewed as `sizes` (a reshape that needs no copy, see [`restride`]).
    fn viewed_as(self, sizes: &[usize]) -> Option<Strided> {
        let (strides, divs) = restride(&self.sizes, &self.strides, &self.divs, sizes)?;
        Some(Strided {
            sizes: sizes.to_vec(),
            strides,
            divs,
            ..self
        })
    }
}

fn contiguous(sizes: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1].saturating_mul(sizes[i + 1]);
    }
    st
}

/// One dim of a strided view: `(size, stride, divisor)`.
type Dim = (usize, usize, usize);

/// `(strides, divisors)` that view `old` as `new` (same element count), when the view needs
/// no copy: dims are split or merged only where they are contiguous with each other; a dim
/// with a divisor is taken whole. `None` otherwise.
fn restride_dims(old: &[Dim], new: &[usize]) -> Option<(Vec<usize>, Vec<usize>)> {
    if old.iter().map(|d| d.0).product::<usize>() != new.iter().product::<usize>() {
        return None;
    }
    let old: Vec<Dim> = old.iter().copied().filter(|d| d.0 != 1).collect();
    let (mut strides, mut divs) = (vec![0usize; new.len()], vec![1usize; new.len()]);
    let mut nd = new.len();
    let mut i = old.len();
    while i > 0 {
        // One chunk of old dims contiguous with each other: old[j..i].
        let mut j = i - 1;
        let whole = old[j].2 != 1;
        let mut numel = old[j].0;
        while !whole
            && j > 0
            && old[j - 1].2 == 1
            && old[j].0.checked_mul(old[j].1) == Some(old[j - 1].1)
        {
            j -= 1;
            numel *= old[j].0;
        }
        let base = old[i - 1].1;
        let (mut got, top) = (1usize, nd);
        while nd > 0 && (got < numel || new[nd - 1] == 1) {
            nd -= 1;
            strides[nd] = got.checked_mul(base)?;
            got = got.checked_mul(new[nd])?;
        }
        if got != numel {
            return None;
        }
        if whole {
            let mut taken = (nd..top).filter(|&k| new[k] != 1);
            let (Some(k), None) = (taken.next(), taken.next()) else {
                return None;
            };
            (strides[k], divs[k]) = (old[j].1, old[j].2);
        }
        i = j;
    }
    while nd > 0 {
        nd -= 1;
        if new[nd] != 1 {
            return None;
        }
        strides[nd] = 0;
    }
    Some((strides, divs))
}

/// [`restride_dims`] of `(sizes, strides, divs)`; when that fails, again with every broadcast
/// dim (stride 0) merged into the dim before it (`(G, s, 1), (R, 0, 1)` → `(G·R, s, R)`).
fn restride(
    sizes: &[usize],
    strides: &[usize],
    divs: &[usize],
    new: &[usize],
) -> Option<(Vec<usize>, Vec<usize>)> {
    let dims: Vec<Dim> = (0..sizes.len())
        .map(|k| (sizes[k], strides[k], divs[k]))
        .filter(|d| d.0 != 1)
        .collect();
    if let Some(r) = restride_dims(&dims, new) {
        return Some(r);
    }
    let mut folded: Vec<Dim> = Vec::with_capacity(dims.len());
    for d in dims {
        match folded.last_mut() {
            Some(o) if d.1 == 0 && d.2 == 1 && o.2 == 1 && o.1 != 0 => {
                *o = (o.0.saturating_mul(d.0), o.1, d.0);
            }
            _ => folded.push(d),
        }
    }
    restride_dims(&folded, new)
}

/// The f32 tensor `v` when it is contiguous and of static shape.
fn static_f32(g: &Graph<'_>, v: usize) -> Option<Vec<usize>> {
    let t = g.tensor(v)?;
    if t.dtype != Some(DType::F32) || !t.contiguous {
        return None;
    }
    let vals = g.view.plan.values()?;
    let dynamic = (v < vals.len())
        .then(|| vals.get(v).val_as_tensor())
        .flatten()
        .is_none_or(|t| t.shape_dynamism() != fb::TensorShapeDynamism::STATIC);
    // Element counts stay far from overflow in every product the tracing forms.
    let numel = t
        .sizes
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMS)?;
    (!dynamic && numel > 0).then(|| t.sizes.clone())
}

/// Most elements a traced tensor may have (2^40).
const MAX_ELEMS: usize = 1 << 40;

/// Value `v` as a constant int list or int.
fn ints(g: &Graph<'_>, v: usize) -> Option<Vec<i64>> {
    g.const_int_list(v)
        .or_else(|| g.const_int(v).map(|i| vec![i]))
}

/// An optional Int argument: `None` value → `dflt`.
fn opt_int(g: &Graph<'_>, v: usize, dflt: i64) -> Option<i64> {
    match g.kind_of(v)? {
        fb::KernelTypes::Null => Some(dflt),
        _ => g.const_int(v),
    }
}

fn norm_dim(d: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let d = if d < 0 { d + r } else { d };
    (0..r).contains(&d).then_some(d as usize)
}

/// Tensor `v` as instruction `pc` reads it, traced back to a computed tensor.
fn trace(g: &Graph<'_>, program: &Program<'_>, v: usize, pc: usize, q: bool) -> Option<Strided> {
    let sizes = static_f32(g, v)?;
    let (mem, off_v, len_v) = g.alloc.get(v).copied().flatten()?;
    let src: Vec<Source> = g.sources(v, pc)?.into_iter().collect();
    let j = match src[..] {
        [Source::Ins(j)] => j,
        // A method input (nothing wrote its bytes before): read where it is.
        [Source::Start] if g.inputs.contains(&v) => return Some(Strided::whole(v, 0, sizes)),
        _ => return None,
    };
    let ins = &g.ins[j];
    let w = ins.writes.iter().copied().find(|&w| {
        g.alloc.get(w).copied().flatten().is_some_and(|(m, o, l)| {
            m == mem && o <= off_v && off_v + len_v <= o + l && g.tensor(w).is_some()
        })
    })?;
    let (_, off_w, _) = g.alloc[w]?;
    if (off_v - off_w) % 4 != 0 {
        return None;
    }
    let e0 = ((off_v - off_w) / 4) as usize;
    let wsizes = static_f32(g, w)?;
    let a = |n: usize| ins.args.get(n).and_then(|&x| usize::try_from(x).ok());
    let key = ins.key.as_str();
    // How `w` is laid over its own input, when `j` only moves elements.
    let moved: Option<Strided> = match key {
        "aten::permute_copy.out" => {
            let x = trace(g, program, a(0)?, j, q)?;
            let dims = ints(g, a(1)?)?;
            if dims.len() != x.sizes.len() {
                return None;
            }
            let mut s = x.clone();
            for (k, &d) in dims.iter().enumerate() {
                let d = norm_dim(d, dims.len())?;
                s.sizes[k] = x.sizes[d];
                s.strides[k] = x.strides[d];
                s.divs[k] = x.divs[d];
            }
            Some(s)
        }
        "aten::split_with_sizes_copy.out" => {
            let x = trace(g, program, a(0)?, j, q)?;
            let parts = ints(g, a(1)?)?;
            let dim = norm_dim(g.const_int(a(2)?)?, x.sizes.len())?;
            // `writes` holds the out list, then its items in order.
            let idx = ins
                .writes
                .iter()
                .filter(|&&o| g.tensor(o).is_some())
                .position(|&o| o == w)?;
            let start: i64 = parts.get(..idx)?.iter().sum();
            let len = usize::try_from(*parts.get(idx)?).ok()?;
            x.narrowed(dim, usize::try_from(start).ok()?, len, 1)
        }
        "aten::slice_copy.Tensor_out" if ins.args.len() == 7 => {
            let x = trace(g, program, a(0)?, j, q)?;
            let dim = norm_dim(g.const_int(a(1)?)?, x.sizes.len())?;
            let n = x.sizes[dim] as i64;
            let clamp = |i: i64| if i < 0 { (i + n).max(0) } else { i.min(n) };
            let start = clamp(opt_int(g, a(2)?, 0)?);
            let end = clamp(opt_int(g, a(3)?, n)?);
            let step = g.const_int(a(4)?)?;
            if step < 1 {
                return None;
            }
            let count = if end > start {
                (end - start + step - 1) / step
            } else {
                0
            };
            x.narrowed(dim, start as usize, count as usize, step as usize)
        }
        "aten::expand_copy.out"
        | "aten::clone.out"
        | "dim_order_ops::_clone_dim_order.out"
        | "aten::view_copy.out"
        | "aten::alias_copy.out" => {
            let mut x = trace(g, program, a(0)?, j, q)?;
            if key == "aten::expand_copy.out" {
                // Broadcast size-1 dims (a K/V head repeated for its query heads) read with
                // stride 0; no new leading dims.
                if x.sizes.len() != wsizes.len() {
                    return None;
                }
                for (k, &want) in wsizes.iter().enumerate() {
                    if x.sizes[k] != want {
                        if x.sizes[k] != 1 {
                            return None;
                        }
                        (x.sizes[k], x.strides[k], x.divs[k]) = (want, 0, 1);
                    }
                }
            }
            x.viewed_as(&wsizes)
        }
        "aten::mul.out" if q && ins.args.len() == 4 => {
            // A query scaled by a constant, no broadcast of x.
            let (x, c) = scaled(g, program, a(0)?, a(1)?)?;
            let mut xs = trace(g, program, x, j, false)?.viewed_as(&wsizes)?;
            xs.scale *= c as f32;
            Some(xs)
        }
        _ => None,
    };
    // `v` over `w`'s elements: all of them (a view), or a contiguous piece of a computed one.
    let whole = sizes.iter().product::<usize>() == wsizes.iter().product::<usize>();
    match moved {
        Some(mut s) if e0 == 0 && whole => {
            s.through.push(j);
            s.viewed_as(&sizes)
        }
        Some(_) => None,
        None => Some(Strided::whole(w, e0, sizes)),
    }
}

/// The head view of a traced `[heads, rows, head_dim]` operand (`kt`: traced as `[heads,
/// head_dim, rows]`, the keys' transpose) and its query heads per head (its head dim's
/// divisor: 1 unless K/V heads are shared).
fn head_view(s: &Strided, kt: bool) -> Option<(HeadView, usize)> {
    let (rows, dim) = if kt { (2, 1) } else { (1, 2) };
    if s.sizes.len() != 3 || s.strides[dim] != 1 || s.divs[1] != 1 || s.divs[2] != 1 {
        return None;
    }
    let u = |x: usize| u32::try_from(x).ok().map(|_| x);
    let view = HeadView {
        offset: u(s.off)?,
        head_stride: u(s.strides[0])?,
        row_stride: u(s.strides[rows])?,
    };
    Some((view, s.divs[0]))
}

/// The operands `(x, c)` of `x · c` or `c · x`, `c` a constant scalar.
fn scaled(g: &Graph<'_>, program: &Program<'_>, a: usize, b: usize) -> Option<(usize, f64)> {
    match (scalar(g, program, a), scalar(g, program, b)) {
        (None, Some(c)) => Some((a, c)),
        (Some(c), None) => Some((b, c)),
        _ => None,
    }
}

/// The attention chain whose softmax is instruction `sm`, if it can be one operation.
fn at_softmax(g: &Graph<'_>, program: &Program<'_>, sm: usize) -> Option<Match> {
    let [x, dim, htf, p, _] = args_of(g, sm, "aten::_softmax.out", 5)?[..] else {
        return None;
    };
    let xs = static_f32(g, x)?;
    if norm_dim(g.const_int(dim)?, xs.len())? != xs.len() - 1 {
        return None;
    }
    let vals = g.view.plan.values()?;
    if vals.get(htf).val_as_bool().is_some_and(|b| b.bool_val()) {
        return None;
    }
    let mut chain = vec![sm];
    let mut mask = None;
    let mut scale = 1.0f32;
    let mut j = producer(g, x, sm)?;
    if let Some([a, b, alpha, _, _]) = args_of(g, j, "aten::add.out", 5).as_deref() {
        if scalar(g, program, *alpha) != Some(1.0) {
            return None;
        }
        // The scores come from a mul or a bmm; the other operand is the mask.
        let scores_from = |v: usize| {
            producer(g, v, j)
                .filter(|&pj| matches!(g.ins[pj].key.as_str(), "aten::mul.out" | "aten::bmm.out"))
        };
        let (s, m) = match (scores_from(*a), scores_from(*b)) {
            (Some(_), None) => (*a, *b),
            (None, Some(_)) => (*b, *a),
            _ => return None,
        };
        if static_f32(g, s)? != xs {
            return None;
        }
        mask = Some(m);
        chain.push(j);
        j = producer(g, s, j)?;
    }
    if let Some([a, b, _, _]) = args_of(g, j, "aten::mul.out", 4).as_deref() {
        let (s, c) = scaled(g, program, *a, *b)?;
        if static_f32(g, s)?.iter().product::<usize>() != xs.iter().product::<usize>() {
            return None;
        }
        scale = c as f32;
        chain.push(j);
        j = producer(g, s, j)?;
    }
    let [qa, ka, _, _] = args_of(g, j, "aten::bmm.out", 4)?[..] else {
        return None;
    };
    let bmm1 = j;
    chain.push(bmm1);
    let q = trace(g, program, qa, bmm1, true)?;
    let kt = trace(g, program, ka, bmm1, false)?;
    let ((qv, 1), (kv, group)) = (head_view(&q, false)?, head_view(&kt, true)?) else {
        return None;
    };
    let (h, tq, d) = (q.sizes[0], q.sizes[1], q.sizes[2]);
    let tk = kt.sizes[2];
    if kt.sizes[0] != h || kt.sizes[1] != d || h == 0 || d == 0 {
        return None;
    }
    // The softmax runs over the scores' key dim: its input ends in `[tq, tk]`.
    if xs.len() < 2 || xs[xs.len() - 2..] != [tq, tk] {
        return None;
    }
    // The second product: the first later kept bmm reading the probabilities.
    let bmm2 = (sm + 1..g.ins.len()).find(|&i| {
        let ins = &g.ins[i];
        !ins.removed
            && ins.key == "aten::bmm.out"
            && ins.args.len() == 4
            && usize::try_from(ins.args[0]).ok().is_some_and(|pa| {
                g.sources(pa, i)
                    .is_some_and(|s| s.len() == 1 && s.contains(&Source::Ins(sm)))
            })
    })?;
    let [pa, va, o, _] = args_of(g, bmm2, "aten::bmm.out", 4)?[..] else {
        return None;
    };
    if static_f32(g, pa)? != [h, tq, tk]
        || g.alloc[pa]?.1 != g.alloc[p]?.1
        || static_f32(g, o)? != [h, tq, d]
    {
        return None;
    }
    chain.push(bmm2);
    let v = trace(g, program, va, bmm2, false)?;
    let (vv, vgroup) = head_view(&v, false)?;
    if vgroup != group || h % group != 0 {
        return None;
    }
    if v.sizes != [h, tk, d] {
        return None;
    }
    // The output: the heads permuted back to `[1, T, H, D]`, or the product itself when its
    // bytes already are in that order (one row or one head).
    let after = (bmm2 + 1..g.ins.len()).find(|&i| {
        let ins = &g.ins[i];
        !ins.removed
            && ins.reads.iter().any(|&r| {
                g.sources(r, i)
                    .is_some_and(|s| s.contains(&Source::Ins(bmm2)))
            })
    });
    let mut out = o;
    let mut last = bmm2;
    if let Some(pp) = after {
        if let Some([pi, dims, po, _]) = args_of(g, pp, "aten::permute_copy.out", 4).as_deref() {
            let ok = g
                .sources(*pi, pp)
                .is_some_and(|s| s.len() == 1 && s.contains(&Source::Ins(bmm2)))
                && g.alloc[*pi]?.1 == g.alloc[o]?.1
                && static_f32(g, *pi)? == [1, h, tq, d]
                && ints(g, *dims)? == [0, 2, 1, 3]
                && static_f32(g, *po)? == [1, tq, h, d];
            if ok {
                out = *po;
                last = pp;
                chain.push(pp);
            }
        }
    }
    if last == bmm2 && !(tq == 1 || h == 1) {
        return None;
    }
    if Some(static_f32(g, out)?.iter().product::<usize>()) != tq.checked_mul(h)?.checked_mul(d) {
        return None;
    }
    // The mask's strides over `[heads, q rows, kv rows]`.
    let mut mask_strides = (0, 0);
    if let Some(m) = mask {
        let ms = static_f32(g, m)?;
        let r = ms.len();
        if r < 2 || ms[r - 1] != tk {
            return None;
        }
        let mq = ms[r - 2];
        let lead: usize = ms[..r - 2].iter().product();
        if !(mq == tq || mq == 1) || !(lead == 1 || lead == h) {
            return None;
        }
        // A head count of mask rows must sit on the scores' head dim (`[1, H, T, T]`-like).
        if lead == h && h > 1 && ms[..r - 2].iter().filter(|&&x| x != 1).count() != 1 {
            return None;
        }
        let rs = if mq == 1 { 0 } else { tk };
        let hs = if lead == 1 { 0 } else { mq * tk };
        mask_strides = (hs, rs);
    }
    // Everything absorbed: the chain and what the operands were traced through.
    let mut absorbed: BTreeSet<usize> = chain.iter().copied().collect();
    absorbed.extend(q.through.iter().chain(&kt.through).chain(&v.through));
    for &j in &absorbed {
        if j != last && !g.read_only_where(j, |pc, _| absorbed.contains(&pc)) {
            return None;
        }
    }
    // What the operation reads must still be there at `last`: from the first absorbed
    // instruction reading each tensor on, no kept instruction writes its bytes.
    let reads: Vec<usize> = [q.base, kt.base, v.base].into_iter().chain(mask).collect();
    for &r in &reads {
        static_f32(g, r)?;
        let first = absorbed
            .iter()
            .copied()
            .find(|&i| g.ins[i].reads.iter().any(|&x| x == r || g.overlap(x, r)))?;
        for i in first + 1..last {
            let ins = &g.ins[i];
            if ins.removed || absorbed.contains(&i) {
                continue;
            }
            if ins.writes.iter().any(|&w| g.overlap(w, r)) {
                return None;
            }
        }
    }
    let removed: Vec<usize> = absorbed.iter().copied().filter(|&i| i != last).collect();
    Some(Match {
        pc: last,
        removed,
        absorbed: absorbed.iter().map(|&i| g.ins[i].key.clone()).collect(),
        q: q.base,
        k: kt.base,
        v: v.base,
        mask,
        out,
        attn: Attention {
            heads: h,
            head_dim: d,
            q_rows: tq,
            kv_rows: tk,
            q: qv,
            k: kv,
            v: vv,
            mask_strides,
            scale,
            q_scale: q.scale,
            kv_group: group,
        },
    })
}

/// Every attention chain of the method that can be one operation, in program order; the
/// absorbed instructions are marked removed in `g`.
pub fn find(g: &mut Graph<'_>, program: &Program<'_>) -> Vec<Match> {
    if g.unsupported.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sm in 0..g.ins.len() {
        if g.ins[sm].removed || g.ins[sm].key != "aten::_softmax.out" {
            continue;
        }
        if let Some(m) = at_softmax(g, program, sm) {
            for &r in &m.removed {
                g.ins[r].removed = true;
            }
            out.push(m);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::restride;

    #[test]
    fn views_split_and_merge_contiguous_dims_only() {
        let plain = |sizes: &[usize], strides: &[usize], new: &[usize]| {
            restride(sizes, strides, &vec![1; sizes.len()], new).map(|r| r.0)
        };
        // [T, 3C] columns C..2C viewed as [T, H, D].
        assert_eq!(plain(&[4, 6], &[18, 1], &[4, 2, 3]), Some(vec![18, 3, 1]));
        // Heads permuted to the front, then merged with the batch of one: [1, H, T, D] → [H, T, D].
        assert_eq!(
            plain(&[1, 2, 4, 3], &[72, 3, 18, 1], &[2, 4, 3]),
            Some(vec![3, 18, 1])
        );
        // Rows of a strided view cannot merge with its heads.
        assert_eq!(plain(&[2, 4, 3], &[3, 18, 1], &[8, 3]), None);
        assert_eq!(plain(&[2, 3], &[3, 1], &[3, 2]), Some(vec![2, 1]));
        assert_eq!(plain(&[2, 3], &[3, 1], &[5]), None);
        assert_eq!(plain(&[1], &[1], &[1, 1]), Some(vec![0, 0]));
    }

    #[test]
    fn a_broadcast_kv_head_merges_into_grouped_query_heads() {
        // K `[1, 2, 48, 16]` expanded to `[1, 2, 2, 48, 16]` (stride 0), viewed `[1, 4, 48, 16]`:
        // query head h reads K/V head h / 2.
        let (sizes, strides) = ([1, 2, 2, 48, 16], [1536, 768, 0, 16, 1]);
        let got = restride(&sizes, &strides, &[1; 5], &[1, 4, 48, 16]);
        let (st, dv) = got.unwrap();
        assert_eq!((&st[1..], &dv[..]), (&[768, 16, 1][..], &[1, 2, 1, 1][..]));
        // The same view without merging stays plain.
        let same = restride(&sizes, &strides, &[1; 5], &[2, 2, 48, 16]);
        assert_eq!(same, Some((vec![768, 0, 16, 1], vec![1; 4])));
        // A grouped dim is taken whole: it cannot be split again.
        let grouped = restride(&[4, 16], &[768, 1], &[2, 1], &[2, 2, 16]);
        assert_eq!(grouped, None);
    }
}
