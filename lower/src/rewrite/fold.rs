//! Constant folding: every kernel call whose operands are all constants (or outputs of other
//! folded calls) is evaluated once, at lower time, with ptera's own kernels, and removed. The
//! tensors kept instructions then read from folded calls become constants of the program.
//!
//! Language-model exports build their causal mask and position ids from `arange`, `full`,
//! comparisons, `unsqueeze` and `bitwise_and` of constants, and look up position embeddings
//! with those ids: all of that is the same on every run. What depends on an input (the
//! `attention_mask` part of the mask) stays.
//!
//! The analysis follows bytes, not names ([`Graph::sources`]): a call is folded when every
//! tensor it reads was produced by folded calls only; a tensor a kept instruction reads is
//! turned into a constant when all of its bytes come from folded calls, and if they come
//! partly from folded calls and partly from elsewhere those calls are not folded (the
//! analysis runs again without them).

use std::collections::{BTreeMap, BTreeSet};

use ptera::format::fb;
use ptera::method::OwnedArenas;
use ptera::{MethodMeta, Program, Registry};

use super::graph::{Graph, Kind, Source};

/// A folded value larger than this is stored only when the constants it is computed from go
/// away with it, so folding never makes the file grow by more than small tables.
pub const SMALL_FOLD_BYTES: usize = 64 * 1024;

/// A folded value computed from a constant larger than this that other instructions still
/// read is not stored: it would hold that constant's data a second time (a transpose of a
/// weight also read elsewhere, e.g. a tied LM head, stays a run-time transpose, which ptera's
/// partition turns into a packed weight anyway).
pub const SHARED_ROOT_BYTES: usize = 4 * 1024;

/// What folding decided for one method.
#[derive(Clone, Debug, Default)]
pub struct FoldPlan {
    /// Calls evaluated at lower time and removed.
    pub folded: BTreeSet<usize>,
    /// Tensors kept instructions read from folded calls: value → first reading instruction.
    pub materialize: BTreeMap<usize, usize>,
}

fn foldable_op(key: &str) -> bool {
    key.rsplit_once('.')
        .is_some_and(|(name, overload)| ptera::exec::fold::foldable_name(name, overload))
}

/// Decides which calls to fold (nothing is changed).
pub fn plan(g: &Graph<'_>) -> FoldPlan {
    let n = g.ins.len();
    // Non-tensor values some instruction writes (prim ops): not known at lower time.
    let mut written_any: BTreeSet<usize> = BTreeSet::new();
    for i in g.ins.iter().filter(|i| !i.removed) {
        written_any.extend(i.writes.iter().copied());
    }
    let mut forbidden: BTreeSet<usize> = BTreeSet::new();
    loop {
        let mut folded: BTreeSet<usize> = BTreeSet::new();
        for (pc, i) in g.ins.iter().enumerate() {
            if i.removed || i.kind != Kind::Kernel || forbidden.contains(&pc) {
                continue;
            }
            if !foldable_op(&i.key) || i.writes.is_empty() {
                continue;
            }
            let writes_ok = i.writes.iter().all(|&w| {
                g.kind_of(w) == Some(fb::KernelTypes::Tensor)
                    && g.alloc[w].is_some()
                    && !g.outputs.contains(&w)
                    && !g.holds_start(w)
            });
            if !writes_ok {
                continue;
            }
            let reads_ok = i.reads.iter().all(|&r| match g.kind_of(r) {
                Some(fb::KernelTypes::Tensor) => {
                    if g.is_constant(r) {
                        return true;
                    }
                    match g.sources(r, pc) {
                        Some(src) => src.iter().all(|s| match s {
                            Source::Ins(j) => folded.contains(j),
                            Source::Start => false,
                        }),
                        None => false,
                    }
                }
                Some(fb::KernelTypes::TensorList | fb::KernelTypes::OptionalTensorList) => true,
                Some(_) => !written_any.contains(&r),
                None => false,
            });
            if reads_ok {
                folded.insert(pc);
            }
        }
        if folded.is_empty() {
            return FoldPlan::default();
        }
        // Tensors kept instructions read: all from folded calls (materialize) or none.
        let mut more: BTreeSet<usize> = BTreeSet::new();
        let mut materialize: BTreeMap<usize, (usize, BTreeSet<Source>)> = BTreeMap::new();
        let mut check = |r: usize, pc: usize, more: &mut BTreeSet<usize>| {
            let Some(src) = g.sources(r, pc) else { return };
            let from_folded: BTreeSet<usize> = src
                .iter()
                .filter_map(|s| match s {
                    Source::Ins(j) if folded.contains(j) => Some(*j),
                    _ => None,
                })
                .collect();
            if from_folded.is_empty() {
                return;
            }
            if from_folded.len() != src.len() || pc >= n {
                more.extend(from_folded);
                return;
            }
            match materialize.get(&r) {
                None => {
                    materialize.insert(r, (pc, src));
                }
                Some((_, s0)) if *s0 != src => {
                    more.extend(from_folded);
                    more.extend(s0.iter().filter_map(|s| match s {
                        Source::Ins(j) => Some(*j),
                        Source::Start => None,
                    }));
                }
                Some(_) => {}
            }
        };
        for (pc, i) in g.ins.iter().enumerate() {
            if i.removed || folded.contains(&pc) {
                continue;
            }
            for &r in &i.reads {
                if g.kind_of(r) == Some(fb::KernelTypes::Tensor) && !g.is_constant(r) {
                    check(r, pc, &mut more);
                }
            }
        }
        // Method outputs keep their own storage: whatever they read is not folded.
        for &o in &g.outputs {
            check(o, n, &mut more);
        }
        // Large values only when every constant they come from dies with the fold.
        if more.is_empty() {
            let mut roots: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
            let roots_of = |r: usize, pc: usize, roots: &BTreeMap<usize, BTreeSet<usize>>| {
                let mut out = BTreeSet::new();
                if g.is_constant(r) {
                    out.insert(r);
                } else if let Some(src) = g.sources(r, pc) {
                    for s in src {
                        if let Source::Ins(j) = s {
                            out.extend(roots.get(&j).into_iter().flatten().copied());
                        }
                    }
                }
                out
            };
            for &pc in &folded {
                let mut acc = BTreeSet::new();
                for &r in &g.ins[pc].reads {
                    if g.kind_of(r) == Some(fb::KernelTypes::Tensor) {
                        acc.extend(roots_of(r, pc, &roots));
                    }
                }
                roots.insert(pc, acc);
            }
            let kept_read: BTreeSet<usize> = g
                .ins
                .iter()
                .enumerate()
                .filter(|(pc, i)| !i.removed && !folded.contains(pc))
                .flat_map(|(_, i)| i.reads.iter().copied())
                .filter(|&r| g.is_constant(r))
                .collect();
            let const_bytes = |c: usize| {
                g.tensor(c)
                    .map_or(0, |t| t.numel() * t.dtype.map_or(1, |d| d.size()))
            };
            for (&r, (pc, src)) in &materialize {
                let bytes = g.alloc[r].map_or(0, |a| a.2 as usize);
                let shared: Vec<usize> = roots_of(r, *pc, &roots)
                    .into_iter()
                    .filter(|c| kept_read.contains(c))
                    .collect();
                let duplicates = shared.iter().any(|&c| const_bytes(c) > SHARED_ROOT_BYTES);
                if duplicates || (bytes > SMALL_FOLD_BYTES && !shared.is_empty()) {
                    more.extend(src.iter().filter_map(|s| match s {
                        Source::Ins(j) => Some(*j),
                        Source::Start => None,
                    }));
                }
            }
        }
        if more.is_empty() {
            return FoldPlan {
                folded,
                materialize: materialize
                    .into_iter()
                    .map(|(r, (pc, _))| (r, pc))
                    .collect(),
            };
        }
        forbidden.extend(more);
    }
}

/// Evaluates the folded calls of method `name` in program order with ptera's kernels and
/// returns the bytes of every tensor to materialize.
pub fn evaluate(
    program: &Program<'_>,
    name: &str,
    fp: &FoldPlan,
    g: &Graph<'_>,
) -> Result<BTreeMap<usize, Vec<u8>>, String> {
    let reg = Registry::standard();
    // Nothing folded at load: every call runs here, in program order, and its results stay
    // where the plan put them.
    let meta = MethodMeta::new(program, name, &reg).map_err(|e| e.to_string())?;
    let meta = meta.with_fold_budget(0).map_err(|e| e.to_string())?;
    let mut arenas = OwnedArenas::for_meta(&meta).map_err(|e| e.to_string())?;
    let mut m = arenas.load(meta, &reg).map_err(|e| e.to_string())?;
    let mut by_pc: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (&r, &pc) in &fp.materialize {
        by_pc.entry(pc).or_default().push(r);
    }
    let mut out = BTreeMap::new();
    let end = by_pc.keys().next_back().copied().unwrap_or(0);
    for pc in 0..=end {
        for &r in by_pc.get(&pc).into_iter().flatten() {
            let t = m
                .tensor(r)
                .ok_or_else(|| format!("value {r} has no storage at instruction {pc}"))?;
            let want: Vec<usize> = g.tensor(r).map(|t| t.sizes.clone()).unwrap_or_default();
            if t.shape().dims() != want.as_slice() {
                return Err(format!(
                    "value {r}: evaluated shape {:?} differs from the declared {want:?}",
                    t.shape().dims()
                ));
            }
            out.insert(r, t.bytes().to_vec());
        }
        if fp.folded.contains(&pc) {
            m.execute_instruction(0, pc)
                .map_err(|e| format!("instruction {pc} ({}): {e}", g.ins[pc].key))?;
        }
    }
    Ok(out)
}
