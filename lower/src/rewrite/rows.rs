//! Rows nothing reads: when a program keeps only some rows of a value (the last position of a
//! language model's hidden states before its LM head), every operator whose output rows depend
//! only on the same rows of its inputs computes those rows alone, back up the graph as far as
//! no other reader needs the whole value.
//!
//! ```text
//! h = layer_norm(x)      ; [1, T, E]        x1 = slice_copy(x, 1, T-1, T)  ; [1, 1, E]
//! y = addmm(b, h', W)    ; [T, N]      =>   h  = layer_norm(x1)            ; [1, 1, E]
//! s = slice_copy(y', ..) ; [1, N]           s  = addmm(b, h', W)           ; [1, N]
//! ```
//!
//! In a decoder's last layer this covers the feed-forward block, the residual adds, the layer
//! norms, the attention output projection, the softmax rows and the query projection; the keys
//! and values still see every position, and a `slice_copy` is kept where a value is also read
//! whole (the residual stream entering the layer, the shared attention mask).
//!
//! The rewrite starts from *seeds*: `slice_copy` calls with constant bounds and step 1 whose
//! output is read under its own name only, and the LM head's inserted row slice. A *cut* is one
//! row range of one value: of an instruction's output (when the bytes read come from exactly
//! that instruction and keep the sliced dimension whole under the reader's view) or of the read
//! value itself. Cuts are visited from the last producer to the first; a producer is *shrunk*
//! when every read of its outputs is a request of its cut, it is no method output, and its
//! operator is row-wise in the cut's dimension (the table in [`rule`]). Its inputs' rows then
//! become requests on earlier cuts. A cut that is not shrunk becomes one `slice_copy` before its
//! first reader. Every cut's bytes are fresh (end of the arena); the re-plan packs them.

use std::collections::{BTreeMap, BTreeSet};

use ptera::format::fb;

use super::graph::{Graph, Kind, Source};
use crate::emit::{NewCall, NewTensor, NewValue, PlanEdit};

/// A slice the rewrite starts from.
#[derive(Clone, Debug)]
pub struct Seed {
    /// The `slice_copy` instruction, or for an inserted slice the instruction it runs before.
    pub at: usize,
    /// Whether the slice is `edit.inserted[at]` (the LM head's) rather than an instruction.
    pub inserted: bool,
    /// The value sliced, the dimension (in its shape) and the rows kept.
    pub src: usize,
    pub dim: usize,
    pub lo: usize,
    pub hi: usize,
    /// The value the slice writes (read under its own name only).
    pub out: usize,
}

/// What the rewrite did to one method.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowsReport {
    /// Instructions now computing part of their rows: (instruction, operator, rows before,
    /// rows now).
    pub shrunk: Vec<(usize, String, usize, usize)>,
    /// Row slices the method keeps (one `slice_copy` each), by the instruction they run before.
    pub slices: Vec<usize>,
}

/// Which value of an instruction's outputs a cut is of, or a read value itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Base {
    /// (producer, value written).
    Ins(usize, usize),
    Value(usize),
}

/// Who reads a cut.
#[derive(Clone, Debug)]
enum Reader {
    Seed(usize),
    /// Argument `pos` of a shrunk instruction, which read `value` (of shape `shape`, sliced).
    Arg {
        pc: usize,
        pos: usize,
        value: usize,
        shape: Vec<usize>,
    },
}

#[derive(Clone, Debug)]
struct Cut {
    /// Dimension of the base value's shape and the rows kept.
    dim: usize,
    lo: usize,
    hi: usize,
    /// Fresh bytes: (memory id, offset).
    at: (u32, u64),
    readers: Vec<Reader>,
}

/// How a shrunk instruction reads and writes.
#[derive(Clone, Debug)]
struct Rule {
    /// Inputs sliced: (argument position, dimension in that argument's shape).
    inputs: Vec<(usize, usize)>,
    /// A size list to rewrite: (argument position, new sizes).
    sizes: Option<(usize, Vec<i64>)>,
}

/// The seeds among a method's `slice_copy` calls.
pub fn seeds(g: &Graph<'_>) -> Vec<Seed> {
    let n = g.ins.len();
    let mut out = Vec::new();
    for s in 0..n {
        let i = &g.ins[s];
        if i.removed || i.key != "aten::slice_copy.Tensor_out" || i.args.len() < 6 {
            continue;
        }
        let arg = |k: usize| i.args.get(k).and_then(|&a| usize::try_from(a).ok());
        let (Some(src), Some(dv), Some(out_v)) = (arg(0), arg(1), arg(5)) else {
            continue;
        };
        let Some(t) = g.tensor(src) else { continue };
        if !t.contiguous || g.tensor(out_v).is_none_or(|o| !o.contiguous) {
            continue;
        }
        let rank = t.sizes.len() as i64;
        // Dim, bounds and step are constants of the program (no instruction writes them).
        let Some(dim) = g.const_int(dv).filter(|d| (-rank..rank).contains(d)) else {
            continue;
        };
        let dim = if dim < 0 { dim + rank } else { dim } as usize;
        let size = t.sizes[dim] as i64;
        // Optional bounds: `None` is the whole range; PyTorch clamps out-of-range ends.
        let bound = |k: usize, default: i64| -> Option<i64> {
            let v = arg(k)?;
            if g.kind_of(v) == Some(fb::KernelTypes::Null) {
                return Some(default);
            }
            let b = g.const_int(v)?;
            Some((if b < 0 { b + size } else { b }).clamp(0, size))
        };
        let (Some(lo), Some(hi), Some(1)) = (
            bound(2, 0),
            bound(3, size),
            arg(4).and_then(|v| g.const_int(v)),
        ) else {
            continue;
        };
        if lo >= hi || (hi - lo) == size {
            continue;
        }
        if g.alloc[out_v].is_none() || !g.read_by_name_only(s, out_v) {
            continue;
        }
        out.push(Seed {
            at: s,
            inserted: false,
            src,
            dim,
            lo: lo as usize,
            hi: hi as usize,
            out: out_v,
        });
    }
    out
}

/// Operators whose every tensor input is broadcast to the output elementwise.
const ELEMENTWISE: &[&str] = &[
    "aten::add.out",
    "aten::sub.out",
    "aten::mul.out",
    "aten::div.out",
    "aten::where.self_out",
    "aten::add.Scalar_out",
    "aten::sub.Scalar_out",
    "aten::mul.Scalar_out",
    "aten::div.Scalar_out",
    "aten::relu.out",
    "aten::gelu.out",
    "aten::tanh.out",
    "aten::sigmoid.out",
    "aten::exp.out",
    "aten::neg.out",
    "aten::sqrt.out",
    "aten::rsqrt.out",
    "aten::pow.Tensor_Scalar_out",
    "aten::clone.out",
    "aten::alias_copy.out",
    "aten::silu.out",
    "aten::_to_copy.out",
    "dim_order_ops::_clone_dim_order.out",
    "dim_order_ops::_to_dim_order_copy.out",
];

/// How instruction `p` computes rows `dim` (of its output `w`'s shape) from its inputs, if it
/// is row-wise there.
fn rule(g: &Graph<'_>, p: usize, w: usize, dim: usize) -> Option<Rule> {
    let i = &g.ins[p];
    let shape = |k: usize| -> Option<Vec<usize>> {
        let v = usize::try_from(*i.args.get(k)?).ok()?;
        let t = g.tensor(v)?;
        t.contiguous.then(|| t.sizes.clone())
    };
    let int = |k: usize| usize::try_from(*i.args.get(k)?).ok().and_then(|v| g.int(v));
    let is_tensor = |k: usize| {
        i.args
            .get(k)
            .and_then(|&a| usize::try_from(a).ok())
            .is_some_and(|v| g.kind_of(v) == Some(fb::KernelTypes::Tensor))
    };
    let so = g.tensor(w)?.sizes.clone();
    let r = so.len();
    let norm = |d: i64| -> Option<usize> {
        let d = if d < 0 { d + r as i64 } else { d };
        usize::try_from(d).ok().filter(|&d| d < r)
    };
    // An input broadcast to the output: sliced where it has the dimension whole.
    let broadcast = |k: usize| -> Option<Option<(usize, usize)>> {
        let si = shape(k)?;
        if si.len() > r {
            return None;
        }
        let Some(a) = (dim + si.len()).checked_sub(r) else {
            return Some(None);
        };
        match si[a] {
            1 => Some(None),
            s if s == so[dim] => Some(Some((k, a))),
            _ => None,
        }
    };
    let n = i.args.len();
    let rule = |inputs: Vec<(usize, usize)>| {
        Some(Rule {
            inputs,
            sizes: None,
        })
    };
    match i.key.as_str() {
        "aten::mm.out" if n == 4 && dim == 0 => rule(vec![(0, 0)]),
        "aten::addmm.out" if n == 7 && dim == 0 => {
            let mut v = vec![(1, 0)];
            v.extend(broadcast(0)?);
            rule(v)
        }
        "aten::linear.out" if n == 5 && dim + 1 < r => rule(vec![(0, dim)]),
        "aten::bmm.out" if n == 4 && dim == 1 => rule(vec![(0, 1)]),
        "aten::bmm.out" if n == 4 && dim == 0 => rule(vec![(0, 0), (1, 0)]),
        "aten::_softmax.out" | "aten::_log_softmax.out" if n == 5 => {
            (norm(int(1)?)? != dim && shape(0)? == so).then_some(())?;
            rule(vec![(0, dim)])
        }
        "aten::native_layer_norm.out" if n == 9 => {
            let ns = usize::try_from(*i.args.get(1)?)
                .ok()
                .and_then(|v| int_list(g, v))?;
            (dim + ns.len() < r && shape(0)? == so).then_some(())?;
            rule(vec![(0, dim)])
        }
        "aten::mean.out" | "aten::sum.IntList_out" | "aten::amax.out" if n >= 5 => {
            // Reductions keeping their dims, over other dimensions than the cut's.
            let dims = usize::try_from(*i.args.get(1)?)
                .ok()
                .and_then(|v| int_list(g, v))?;
            let keep = usize::try_from(*i.args.get(2)?).ok().and_then(|v| {
                let vals = g.view.plan.values()?;
                (v < vals.len()).then(|| vals.get(v).val_as_bool().map(|b| b.bool_val()))?
            })?;
            let reduced: Option<Vec<usize>> = dims.iter().map(|&d| norm(d)).collect();
            (keep && !dims.is_empty() && !reduced?.contains(&dim) && shape(0)?.len() == r)
                .then_some(())?;
            rule(vec![(0, dim)])
        }
        "aten::permute_copy.out" if n == 4 => {
            let perm = usize::try_from(*i.args.get(1)?)
                .ok()
                .and_then(|v| int_list(g, v))?;
            (perm.len() == r).then_some(())?;
            rule(vec![(0, norm(*perm.get(dim)?)?)])
        }
        "aten::expand_copy.out" if n == 5 => {
            let sv = usize::try_from(*i.args.get(1)?).ok()?;
            let mut sizes = int_list(g, sv)?;
            (sizes.len() == r).then_some(())?;
            if sizes[dim] != -1 {
                sizes[dim] = 0; // set below, when the rows are known
            }
            let input = broadcast(0)?;
            Some(Rule {
                inputs: input.into_iter().collect(),
                sizes: Some((1, sizes)),
            })
        }
        k if ELEMENTWISE.contains(&k) && n >= 3 => {
            // Tensor arguments before the out argument (the last two are out and return).
            let mut v = Vec::new();
            for k in 0..n - 2 {
                if is_tensor(k) {
                    v.extend(broadcast(k)?);
                }
            }
            rule(v)
        }
        _ => None,
    }
}

/// The items of an int list (values that are Ints).
fn int_list(g: &Graph<'_>, v: usize) -> Option<Vec<i64>> {
    let vals = g.view.plan.values()?;
    let l = (v < vals.len()).then(|| vals.get(v).val_as_int_list())??;
    l.items()?
        .iter()
        .map(|i| usize::try_from(i).ok().and_then(|i| g.int(i)))
        .collect()
}

/// Where rows `dim`, `lo..hi` of value `v` read at `pc` come from: the single instruction that
/// wrote its bytes (with the dimension mapped to that instruction's output) or `v` itself.
fn base_of(g: &Graph<'_>, v: usize, dim: usize, pc: usize) -> Option<(Base, usize)> {
    let t = g.tensor(v)?;
    if !t.contiguous || dim >= t.sizes.len() {
        return None;
    }
    let Some(a) = g.alloc.get(v).copied().flatten() else {
        return g.is_constant(v).then_some((Base::Value(v), dim));
    };
    let src = g.sources(v, pc)?;
    let [Source::Ins(p)] = src.iter().copied().collect::<Vec<_>>()[..] else {
        return Some((Base::Value(v), dim));
    };
    if g.ins[p].kind != Kind::Kernel {
        return Some((Base::Value(v), dim));
    }
    let outer: usize = t.sizes[..dim].iter().product();
    for &w in &g.ins[p].writes {
        let Some(tw) = g.tensor(w).filter(|tw| tw.contiguous) else {
            continue;
        };
        if g.alloc.get(w).copied().flatten() != Some(a) || tw.numel() != t.numel() {
            continue;
        }
        let mut prod = 1usize;
        for (d, &s) in tw.sizes.iter().enumerate() {
            if prod == outer && s == t.sizes[dim] {
                return Some((Base::Ins(p, w), d));
            }
            prod *= s;
        }
    }
    Some((Base::Value(v), dim))
}

/// Shape with dimension `dim` cut to `rows`.
fn cut_shape(sizes: &[usize], dim: usize, rows: usize) -> Vec<usize> {
    let mut s = sizes.to_vec();
    if let Some(d) = s.get_mut(dim) {
        *d = rows;
    }
    s
}

/// The rewrite's state for one method.
struct Rows<'g, 'a> {
    g: &'g mut Graph<'a>,
    edit: &'g mut PlanEdit,
    arena: &'g mut Vec<i64>,
    nvalues: usize,
    cuts: BTreeMap<Base, Cut>,
    /// Shrunk instructions: pc → (base of their cut, rule).
    shrunk: BTreeMap<usize, (Base, Rule)>,
    /// Producers whose cut was decided (shrunk or kept).
    decided: BTreeSet<usize>,
}

impl Rows<'_, '_> {
    fn new_value(&mut self, v: NewValue) -> i32 {
        self.edit.new_values.push(v);
        (self.nvalues + self.edit.new_values.len() - 1) as i32
    }

    fn int(&mut self, i: i64) -> i32 {
        self.new_value(NewValue::Int(i))
    }

    /// Fresh bytes at the end of arena `mem`.
    fn fresh(&mut self, mem: u32, bytes: u64) -> (u32, u64) {
        let slot = mem as usize;
        if self.arena.len() <= slot {
            self.arena.resize(slot + 1, 0);
        }
        let off = (self.arena[slot].max(0) as u64).div_ceil(16) * 16;
        self.arena[slot] = (off + bytes) as i64;
        (mem, off)
    }

    fn elem(&self, v: usize) -> u64 {
        self.g
            .tensor(v)
            .and_then(|t| t.dtype)
            .map_or(4, |d| d.size() as u64)
    }

    /// A planned tensor over `at` with `sizes`, of `like`'s dtype.
    fn view(&mut self, like: usize, sizes: &[usize], at: (u32, u64)) -> i32 {
        let st = self.g.scalar_type(like).unwrap_or(6);
        self.new_value(NewValue::Tensor(NewTensor {
            scalar_type: st,
            sizes: sizes.iter().map(|&d| d as i32).collect(),
            dim_order: (0..sizes.len() as u8).collect(),
            buffer: 0,
            alloc: Some(at),
        }))
    }

    fn base_value(b: Base) -> usize {
        match b {
            Base::Ins(_, w) | Base::Value(w) => w,
        }
    }

    /// The cut for rows of `v` read at `pc`, if one is possible and agrees with an existing
    /// cut of the same base.
    fn locate(
        &self,
        v: usize,
        dim: usize,
        lo: usize,
        hi: usize,
        pc: usize,
    ) -> Option<(Base, usize)> {
        let (b, d) = base_of(self.g, v, dim, pc)?;
        match self.cuts.get(&b) {
            Some(c) if (c.dim, c.lo, c.hi) != (d, lo, hi) => None,
            _ => Some((b, d)),
        }
    }

    fn add_reader(
        &mut self,
        b: Base,
        d: usize,
        lo: usize,
        hi: usize,
        r: Reader,
        at: Option<(u32, u64)>,
    ) {
        if !self.cuts.contains_key(&b) {
            let bv = Self::base_value(b);
            let sizes = self
                .g
                .tensor(bv)
                .map(|t| t.sizes.clone())
                .unwrap_or_default();
            let bytes =
                cut_shape(&sizes, d, hi - lo).iter().product::<usize>() as u64 * self.elem(bv);
            let mem = self.g.alloc.get(bv).copied().flatten().map_or(1, |a| a.0);
            let at = match at {
                Some(a) => a,
                None => self.fresh(mem, bytes),
            };
            self.cuts.insert(
                b,
                Cut {
                    dim: d,
                    lo,
                    hi,
                    at,
                    readers: Vec::new(),
                },
            );
        }
        if let Some(c) = self.cuts.get_mut(&b) {
            c.readers.push(r);
        }
    }

    /// Whether every read of `p`'s outputs is a request of cut `b`, and no method output
    /// comes from `p`.
    fn only_cut_reads(&self, p: usize, b: Base, seeds: &[Seed]) -> bool {
        let Some(c) = self.cuts.get(&b) else {
            return false;
        };
        let mut covered: BTreeSet<(usize, usize)> = BTreeSet::new();
        for r in &c.readers {
            match r {
                Reader::Seed(k) => {
                    covered.insert((seeds[*k].at, seeds[*k].src));
                }
                Reader::Arg { pc, value, .. } => {
                    covered.insert((*pc, *value));
                }
            }
        }
        let g = &*self.g;
        let n = g.ins.len();
        for (j, i) in g.ins.iter().enumerate().skip(p + 1) {
            if i.removed {
                continue;
            }
            for &r in &i.reads {
                if covered.contains(&(j, r)) {
                    continue;
                }
                if g.alloc.get(r).copied().flatten().is_some()
                    && g.sources(r, j).is_some_and(|s| s.contains(&Source::Ins(p)))
                {
                    return false;
                }
            }
        }
        // Seeds inserted before an instruction read `src` there (counted above as covered
        // only when they are this cut's); others reading `p`'s bytes keep it whole.
        for (k, s) in seeds.iter().enumerate() {
            let mine = c
                .readers
                .iter()
                .any(|r| matches!(r, Reader::Seed(x) if *x == k));
            if s.inserted
                && !mine
                && g.sources(s.src, s.at)
                    .is_some_and(|src| src.contains(&Source::Ins(p)))
            {
                return false;
            }
        }
        g.outputs
            .iter()
            .all(|&o| g.sources(o, n).is_none_or(|s| !s.contains(&Source::Ins(p))))
    }

    /// Tries to shrink the producer of cut `b`.
    fn push(&mut self, b: Base, seeds: &[Seed]) {
        let Base::Ins(p, w) = b else { return };
        let Some(c) = self.cuts.get(&b).cloned() else {
            return;
        };
        if self.g.ins[p].removed || !self.only_cut_reads(p, b, seeds) {
            return;
        }
        let Some(rule) = rule(self.g, p, w, c.dim) else {
            return;
        };
        // Every written value has the cut dimension (layer norm's mean and rstd).
        let wsizes = self
            .g
            .tensor(w)
            .map(|t| t.sizes.clone())
            .unwrap_or_default();
        for &x in &self.g.ins[p].writes {
            if self.g.kind_of(x) != Some(fb::KernelTypes::Tensor) {
                continue;
            }
            let Some(t) = self.g.tensor(x) else { return };
            if !t.contiguous
                || t.sizes.len() != wsizes.len()
                || t.sizes[..c.dim] != wsizes[..c.dim]
                || t.sizes[c.dim] != wsizes[c.dim]
            {
                return;
            }
        }
        let mut requests = Vec::new();
        for &(pos, d) in &rule.inputs {
            let Some(v) = self.g.ins[p]
                .args
                .get(pos)
                .and_then(|&a| usize::try_from(a).ok())
            else {
                return;
            };
            let Some((nb, nd)) = self.locate(v, d, c.lo, c.hi, p) else {
                return;
            };
            // Two inputs on one base must agree too.
            if requests
                .iter()
                .any(|&(_, _, _, ob, od): &(usize, usize, usize, Base, usize)| ob == nb && od != nd)
            {
                return;
            }
            requests.push((pos, v, d, nb, nd));
        }
        for (pos, v, d, nb, nd) in requests {
            let shape = self
                .g
                .tensor(v)
                .map(|t| cut_shape(&t.sizes, d, c.hi - c.lo))
                .unwrap_or_default();
            self.add_reader(
                nb,
                nd,
                c.lo,
                c.hi,
                Reader::Arg {
                    pc: p,
                    pos,
                    value: v,
                    shape,
                },
                None,
            );
        }
        self.shrunk.insert(p, (b, rule));
    }

    /// Writes the shrunk instructions, the kept slices and the seeds' removal into the edit.
    fn finish(&mut self, seeds: &[Seed], used: &[bool], report: &mut RowsReport) {
        // Argument replacements of shrunk instructions: pc → (position → value).
        let mut args: BTreeMap<usize, BTreeMap<usize, i32>> = BTreeMap::new();
        // A cut only seeds read, whose producer keeps its rows, changes nothing: its seeds
        // stay as they were.
        let idle = |b: &Base, c: &Cut| {
            !matches!(b, Base::Ins(p, _) if self.shrunk.contains_key(p))
                && c.readers.iter().all(|r| matches!(r, Reader::Seed(_)))
        };
        let mut used = used.to_vec();
        self.cuts.retain(|b, c| {
            if idle(b, c) {
                for r in &c.readers {
                    if let Reader::Seed(k) = r {
                        used[*k] = false;
                    }
                }
                return false;
            }
            true
        });
        let cuts: Vec<(Base, Cut)> = self.cuts.iter().map(|(b, c)| (*b, c.clone())).collect();
        for (b, c) in &cuts {
            let rows = c.hi - c.lo;
            let bv = Self::base_value(*b);
            for r in &c.readers {
                match r {
                    Reader::Seed(k) => {
                        let s = &seeds[*k];
                        self.move_to(s.out, c.at);
                    }
                    Reader::Arg {
                        pc,
                        pos,
                        value,
                        shape,
                    } => {
                        let v = self.view(*value, shape, c.at);
                        args.entry(*pc).or_default().insert(*pos, v);
                    }
                }
            }
            let shrunk = matches!(b, Base::Ins(p, _) if self.shrunk.contains_key(p));
            if shrunk {
                continue;
            }
            // Kept: one slice_copy into the cut's bytes before its first reader.
            let first = c
                .readers
                .iter()
                .map(|r| match r {
                    Reader::Seed(k) => seeds[*k].at,
                    Reader::Arg { pc, .. } => *pc,
                })
                .min()
                .unwrap_or(0);
            let sizes = self
                .g
                .tensor(bv)
                .map(|t| t.sizes.clone())
                .unwrap_or_default();
            let out = self.view(bv, &cut_shape(&sizes, c.dim, rows), c.at);
            let dim = self.int(c.dim as i64);
            let start = self.int(c.lo as i64);
            let end = self.int(c.hi as i64);
            let step = self.int(1);
            self.edit.inserted.entry(first).or_default().push(NewCall {
                name: "aten::slice_copy".into(),
                overload: "Tensor_out".into(),
                args: vec![bv as i32, dim, start, end, step, out, out],
            });
            report.slices.push(first);
        }
        // Seeds are replaced by their cuts.
        for (s, _) in seeds.iter().zip(&used).filter(|(_, u)| **u) {
            if s.inserted {
                if let Some(calls) = self.edit.inserted.get_mut(&s.at) {
                    calls.retain(|c| {
                        !(c.name == "aten::slice_copy" && c.args.last() == Some(&(s.out as i32)))
                    });
                }
            } else {
                self.edit.removed.insert(s.at);
                self.g.ins[s.at].removed = true;
            }
        }
        let shrunk: Vec<(usize, (Base, Rule))> =
            self.shrunk.iter().map(|(p, r)| (*p, r.clone())).collect();
        for (p, (b, rule)) in shrunk {
            let Some(c) = self.cuts.get(&b).cloned() else {
                continue;
            };
            let rows = c.hi - c.lo;
            // A call another rewrite replaced (GELU) carries its own arguments.
            let old: Vec<i32> = match self.edit.calls.get(&p) {
                Some(c) => c.args.clone(),
                None => self
                    .edit
                    .args
                    .get(&p)
                    .cloned()
                    .unwrap_or_else(|| self.g.ins[p].args.clone()),
            };
            let mut new = old.clone();
            for (&pos, &v) in args.get(&p).into_iter().flatten() {
                if let Some(a) = new.get_mut(pos) {
                    *a = v;
                }
            }
            // Outputs: the cut's value over its bytes, the others (mean, rstd) fresh.
            let Base::Ins(_, w) = b else { continue };
            let mut outs: BTreeMap<i32, i32> = BTreeMap::new();
            let writes = self.g.ins[p].writes.clone();
            for x in writes {
                if self.g.kind_of(x) != Some(fb::KernelTypes::Tensor) {
                    continue;
                }
                let sizes = self
                    .g
                    .tensor(x)
                    .map(|t| t.sizes.clone())
                    .unwrap_or_default();
                let cs = cut_shape(&sizes, c.dim, rows);
                let at = if x == w {
                    c.at
                } else {
                    let mem = self.g.alloc.get(x).copied().flatten().map_or(1, |a| a.0);
                    let bytes = cs.iter().product::<usize>() as u64 * self.elem(x);
                    self.fresh(mem, bytes)
                };
                let nv = self.view(x, &cs, at);
                outs.insert(x as i32, nv);
            }
            for a in new.iter_mut() {
                if let Some(&nv) = outs.get(a) {
                    *a = nv;
                }
            }
            // A returned list of outputs (layer norm) becomes a new list of the new ones,
            // after them in the value table (ExecuTorch parses a list's items before it); the
            // old list becomes Null, or it would keep the old outputs planned.
            for a in new.iter_mut() {
                let Ok(v) = usize::try_from(*a) else { continue };
                let items = self.tensor_list(v);
                if let Some(items) = items {
                    if items.iter().any(|i| outs.contains_key(i)) {
                        let ni = items.iter().map(|i| *outs.get(i).unwrap_or(i)).collect();
                        *a = self.new_value(NewValue::TensorList(ni));
                        self.edit.nulled.insert(v);
                    }
                }
            }
            if let Some((pos, mut sizes)) = rule.sizes.clone() {
                if sizes[c.dim] != -1 {
                    sizes[c.dim] = rows as i64;
                }
                let items: Vec<i64> = sizes.iter().map(|&s| self.int(s) as i64).collect();
                let l = self.new_value(NewValue::IntList(items));
                if let Some(a) = new.get_mut(pos) {
                    *a = l;
                }
            }
            let before = self
                .g
                .tensor(w)
                .and_then(|t| t.sizes.get(c.dim).copied())
                .unwrap_or(0);
            report
                .shrunk
                .push((p, self.g.ins[p].key.clone(), before, rows));
            match self.edit.calls.get_mut(&p) {
                Some(c) => c.args = new,
                None => {
                    self.edit.args.insert(p, new);
                }
            }
        }
        report.shrunk.sort();
        report.slices.sort();
    }

    /// Items of a tensor-list value.
    fn tensor_list(&self, v: usize) -> Option<Vec<i32>> {
        let vals = self.g.view.plan.values()?;
        let l = (v < vals.len()).then(|| vals.get(v).val_as_tensor_list())??;
        Some(l.items()?.iter().collect())
    }

    /// Moves value `v` (existing or new) to bytes `at`.
    fn move_to(&mut self, v: usize, at: (u32, u64)) {
        if v >= self.nvalues {
            if let Some(NewValue::Tensor(t)) = self.edit.new_values.get_mut(v - self.nvalues) {
                t.alloc = Some(at);
            }
        } else if let Some(Some((m, o, _))) = self.g.alloc.get_mut(v) {
            (*m, *o) = at;
        }
    }
}

/// Applies the rewrite from `seeds`; `arena` is the method's `non_const_buffer_sizes`, grown
/// for the fresh bytes.
pub fn run(
    g: &mut Graph<'_>,
    seeds: &[Seed],
    edit: &mut PlanEdit,
    arena: &mut Vec<i64>,
    nvalues: usize,
) -> RowsReport {
    let mut report = RowsReport::default();
    if seeds.is_empty() || dynamic_shapes(g) {
        return report;
    }
    let (arena_before, values_before) = (arena.clone(), edit.new_values.len());
    let mut st = Rows {
        g,
        edit,
        arena,
        nvalues,
        cuts: BTreeMap::new(),
        shrunk: BTreeMap::new(),
        decided: BTreeSet::new(),
    };
    let mut used = vec![false; seeds.len()];
    for (k, s) in seeds.iter().enumerate() {
        let Some((b, d)) = st.locate(s.src, s.dim, s.lo, s.hi, s.at) else {
            continue;
        };
        // The seed's own output takes the cut's bytes; a seed that is the first of its cut
        // lends them (its output was placed on fresh bytes).
        let at = if st.cuts.contains_key(&b) {
            None
        } else if s.inserted {
            st.alloc_of_new(s.out)
        } else {
            let bytes = st.g.alloc.get(s.out).copied().flatten().map_or(0, |a| a.2);
            let mem = st.g.alloc.get(s.out).copied().flatten().map_or(1, |a| a.0);
            Some(st.fresh(mem, bytes))
        };
        st.add_reader(b, d, s.lo, s.hi, Reader::Seed(k), at);
        used[k] = true;
    }
    loop {
        // The latest producer not yet decided.
        let next = st
            .cuts
            .keys()
            .rev()
            .find(|b| matches!(b, Base::Ins(p, _) if !st.decided(*p)))
            .copied();
        let Some(b) = next else { break };
        let Base::Ins(p, _) = b else { break };
        st.push(b, seeds);
        st.decided.insert(p);
    }
    if st.shrunk.is_empty() {
        // Nothing computes fewer rows: leave the method as it was.
        *st.arena = arena_before;
        st.edit.new_values.truncate(values_before);
        return report;
    }
    st.finish(seeds, &used, &mut report);
    report
}

/// Whether some tensor of the method has a dynamic shape (its sizes are bounds, and a row
/// index from the end would move with the run-time size).
fn dynamic_shapes(g: &Graph<'_>) -> bool {
    g.view.plan.values().is_some_and(|vals| {
        vals.iter().any(|e| {
            e.val_as_tensor()
                .is_some_and(|t| t.shape_dynamism() != fb::TensorShapeDynamism::STATIC)
        })
    })
}

impl Rows<'_, '_> {
    fn decided(&self, p: usize) -> bool {
        self.decided.contains(&p)
    }

    /// The bytes of a value this lowering added.
    fn alloc_of_new(&self, v: usize) -> Option<(u32, u64)> {
        match self.edit.new_values.get(v.checked_sub(self.nvalues)?)? {
            NewValue::Tensor(t) => t.alloc,
            _ => None,
        }
    }
}
