//! Whole-method memory re-plan: after the lowering, every planned tensor gets a new offset
//! from the lifetimes in the program as it now is (absorbed instructions gone, regions in
//! their place), with ptera's best-fit interval planner (`ptera::planner`).
//!
//! Rules:
//! - A tensor lives from the first to the last instruction naming it (as an argument, in a
//!   tensor list, or as a region's argument); method inputs from the start, outputs to the
//!   end; mutable buffers (planned tensors with initial data, e.g. a KV cache) for the whole
//!   method, since they keep their contents across runs.
//! - Tensors whose bytes overlap in the original plan while both are alive are views of one
//!   another (ExecuTorch elides static views this way): they move together, keeping their
//!   relative offsets. So does a tensor whose first use reads it (nothing wrote it under its
//!   own name: a view of data written through another tensor) with every tensor overlapping
//!   its bytes that was alive before that use. An instruction writes the tensors of its last
//!   argument (the out-variant return, or the list of outs); a region writes its outputs
//!   (the `Linear` outputs of ptera's regions, the external outputs of an XNNPACK graph;
//!   for other delegates nothing is assumed written, which only groups more).
//! - Planned tensors nothing names any more (a removed transpose's output, a product's output
//!   an absorbed activation overwrote) become `Null`, unless a tensor list still lists them.
//! - Methods with more than one chain, jumps, moves, frees or run-time views
//!   (`executorch_prim::et_view`) keep ExecuTorch's plan (the report says why); so does a
//!   method the new plan would not make smaller.

use std::collections::{BTreeMap, BTreeSet};

use ptera::format::fb;
use ptera::planner::{self, Interval};

use crate::emit::{PlanEdit, ProgramEdit};
use crate::partition::{PlanView, TensorMeta};

/// What the re-plan did to one method.
#[derive(Clone, Debug, Default)]
pub struct PlanReport {
    pub method: String,
    /// `non_const_buffer_sizes` before and after (placeholder 0 first).
    pub before: Vec<i64>,
    pub after: Vec<i64>,
    /// Why the original plan was kept, if it was.
    pub kept_because: Option<String>,
    /// Planned tensors that became `Null` (nothing names them any more).
    pub dropped_values: usize,
    /// The high-water mark: the most bytes alive at one instruction (a lower bound for any
    /// plan of these lifetimes), that instruction, and how many groups of tensors (a tensor
    /// and its views) are alive there.
    pub peak_live_bytes: u64,
    pub peak_instruction: u32,
    pub peak_groups: usize,
    /// What is alive at the high-water mark: per group, its largest tensor value and the
    /// group's bytes (largest first).
    pub peak_values: Vec<(usize, u64)>,
}

/// The high-water mark: bytes, instruction, groups alive, and per group its largest value
/// with the group's bytes.
type Peak = (u64, u32, usize, Vec<(usize, u64)>);

/// Union-find over value indices.
fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// DelegateCall argument positions a delegate writes (see the module documentation).
pub fn delegate_outputs(del: fb::BackendDelegate<'_>, segments: &[&[u8]]) -> Vec<usize> {
    let Some(seg) = del
        .processed()
        .filter(|r| r.location() == fb::DataLocation::SEGMENT)
        .and_then(|r| segments.get(r.index() as usize))
    else {
        return Vec::new();
    };
    let id = del.id().unwrap_or("");
    if id == ptera::delegate::ptera::ID {
        let Ok(r) = ptera::delegate::ptera::region_of(seg) else {
            return Vec::new();
        };
        let mut outs = Vec::new();
        for op in r.ops().into_iter().flatten() {
            if let Some(l) = op.op_as_linear() {
                outs.push(l.output() as usize);
            } else if let Some(a) = op.op_as_attention() {
                outs.push(a.output() as usize);
            } else if let Some(x) = op.op_as_xnn_graph() {
                if let Some(g) = segments.get(x.segment() as usize) {
                    outs.extend(xnn_outputs(g));
                }
            }
        }
        return outs;
    }
    if id == ptera::delegate::xnnpack::ID {
        return xnn_outputs(seg);
    }
    Vec::new()
}

/// External-output argument positions of an XNNPACK payload.
fn xnn_outputs(payload: &[u8]) -> Vec<usize> {
    let Ok((g, _, _)) = ptera::delegate::xnnpack::graph_of(payload) else {
        return Vec::new();
    };
    g.xvalues()
        .into_iter()
        .flatten()
        .filter_map(|v| v.xvalue_union_as_xnntensor_value())
        .filter(|t| t.flags() & 2 != 0)
        .map(|t| t.external_id() as usize)
        .collect()
}

/// How [`plan_method`] places the groups of tensors.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Best fit over lifetimes (`ptera::planner`): the re-plan.
    Packed,
    /// Every group on bytes of its own, one after the other: no two groups share a byte
    /// whatever their lifetimes ([`spread`]).
    Apart,
}

/// The re-plan of one method, or why it keeps its plan.
fn plan_method(
    view: &PlanView<'_>,
    segments: &[&[u8]],
    placement: Placement,
) -> Result<(PlanEdit, Vec<i64>, usize, Peak), String> {
    let plan = view.plan;
    if plan.chains().map_or(0, |c| c.len()) != 1 {
        return Err("more than one chain".into());
    }
    for ins in plan
        .chains()
        .into_iter()
        .flatten()
        .flat_map(|c| c.instructions().into_iter().flatten())
    {
        match ins.instr_args_type() {
            fb::InstructionArguments::KernelCall | fb::InstructionArguments::DelegateCall => {}
            _ => return Err("jumps, moves or frees".into()),
        }
    }
    if view
        .instrs
        .iter()
        .any(|(k, _)| k == "executorch_prim::et_view.default")
    {
        return Err("run-time views (et_view)".into());
    }
    let end = view.instrs.len() as u32;
    let inputs: BTreeSet<i32> = plan.inputs().into_iter().flatten().collect();
    let outputs: BTreeSet<i32> = plan.outputs().into_iter().flatten().collect();
    // Tensors listed by some tensor-list value (kept even when unnamed).
    let values = plan.values().unwrap_or_default();
    let mut listed = BTreeSet::new();
    for e in values.iter() {
        let items = e
            .val_as_tensor_list()
            .and_then(|l| l.items())
            .or_else(|| e.val_as_optional_tensor_list().and_then(|l| l.items()));
        listed.extend(
            items
                .into_iter()
                .flatten()
                .filter(|&i| i >= 0)
                .map(|i| i as usize),
        );
    }
    // Planned tensors: (value, meta, lifetime).
    struct Item<'m> {
        value: usize,
        meta: &'m TensorMeta,
        range: (u64, u64),
        life: (u32, u32),
    }
    let mut items: Vec<Item<'_>> = Vec::new();
    let mut edit = PlanEdit::default();
    for (v, t) in view.tensors.iter().enumerate() {
        let Some(t) = t.as_ref() else { continue };
        let Some((_, off, bytes)) = t.alloc else {
            continue;
        };
        let named = &view.named_by[v];
        let (vi, mutable) = (v as i32, t.buffer > 0);
        let (input, output) = (inputs.contains(&vi), outputs.contains(&vi));
        let first = if input || mutable {
            Some(0)
        } else {
            named.first().map(|&p| p as u32).or(output.then_some(end))
        };
        let last = if output || mutable {
            Some(end)
        } else {
            // An input nothing reads still receives its data.
            named.last().map(|&p| p as u32).or(input.then_some(0))
        };
        match (first, last) {
            (Some(f), Some(l)) => items.push(Item {
                value: v,
                meta: t,
                range: (off, off + bytes),
                life: (f, l.max(f)),
            }),
            _ if listed.contains(&v) => items.push(Item {
                value: v,
                meta: t,
                range: (off, off + bytes),
                life: (0, end),
            }),
            // Named by nothing, listed by nothing: its storage is never touched.
            _ => {
                edit.nulled.insert(v);
            }
        }
    }
    // Views: overlapping bytes while both alive, same memory id.
    let mut parent: Vec<usize> = (0..items.len()).collect();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].meta.alloc.map(|a| a.0), items[i].range.0));
    for (n, &i) in order.iter().enumerate() {
        for &j in &order[n + 1..] {
            let (a, b) = (&items[i], &items[j]);
            // Sorted by (memory id, start): nothing later overlaps `a` once one starts past it.
            if a.meta.alloc.map(|x| x.0) != b.meta.alloc.map(|x| x.0) || b.range.0 >= a.range.1 {
                break;
            }
            let alive = a.life.0 <= b.life.1 && b.life.0 <= a.life.1;
            if alive && b.range.1 > b.range.0 {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    // Views read before anything wrote them under their own name.
    let dels = plan.delegates().unwrap_or_default();
    let calls: Vec<_> = plan
        .chains()
        .into_iter()
        .flatten()
        .flat_map(|c| c.instructions().into_iter().flatten())
        .collect();
    let mut written: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); view.instrs.len()];
    for (pc, ins) in calls.iter().enumerate() {
        let args = &view.instrs[pc].1;
        let outs: Vec<i32> = match ins.instr_args_type() {
            fb::InstructionArguments::KernelCall => args.last().copied().into_iter().collect(),
            _ => ins
                .instr_args_as_delegate_call()
                .and_then(|d| usize::try_from(d.delegate_index()).ok())
                .filter(|&d| d < dels.len())
                .map(|d| delegate_outputs(dels.get(d), segments))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|a| args.get(a).copied())
                .collect(),
        };
        for o in outs {
            let Some(e) = usize::try_from(o)
                .ok()
                .filter(|&i| i < values.len())
                .map(|i| values.get(i))
            else {
                continue;
            };
            if e.val_as_tensor().is_some() {
                written[pc].insert(o as usize);
            }
            let items = e
                .val_as_tensor_list()
                .and_then(|l| l.items())
                .or_else(|| e.val_as_optional_tensor_list().and_then(|l| l.items()));
            written[pc].extend(
                items
                    .into_iter()
                    .flatten()
                    .filter(|&i| i >= 0)
                    .map(|i| i as usize),
            );
        }
    }
    // The last write of a value before instruction `pc`: under its own name, or (inputs and
    // mutable buffers) before the run.
    let last_write_before = |it: &Item<'_>, pc: usize| -> Option<usize> {
        (0..pc)
            .rev()
            .find(|&p| written[p].contains(&it.value))
            .map(|p| p + 1)
            .or_else(|| (inputs.contains(&(it.value as i32)) || it.meta.buffer > 0).then_some(0))
    };
    for i in 0..items.len() {
        let it = &items[i];
        let vi = it.value as i32;
        if inputs.contains(&vi) || it.meta.buffer > 0 || it.range.1 == it.range.0 {
            continue;
        }
        // A method output no instruction names is read at the end (e.g. the select's output
        // an LM-head rewrite left over the bytes its product now writes).
        let first = match view.named_by[it.value].first() {
            Some(&first) => first,
            None if outputs.contains(&vi) => view.instrs.len(),
            None => continue,
        };
        if written.get(first).is_some_and(|w| w.contains(&it.value)) {
            continue;
        }
        let same_memory = |o: &Item<'_>| o.meta.alloc.map(|x| x.0) == it.meta.alloc.map(|x| x.0);
        // Tensors overlapping these bytes that hold data before `first`, and when they got it.
        let writers: Vec<(usize, usize)> = items
            .iter()
            .enumerate()
            .filter(|&(j, o)| {
                j != i && same_memory(o) && o.range.0 < it.range.1 && it.range.0 < o.range.1
            })
            .filter_map(|(j, o)| last_write_before(o, first).map(|w| (j, w)))
            .collect();
        // The bytes read at `first` come from the latest write that covers all of them and
        // from any write after it (e.g. the slices of a concatenation).
        let cover = writers
            .iter()
            .filter(|&&(j, _)| items[j].range.0 <= it.range.0 && it.range.1 <= items[j].range.1)
            .map(|&(_, w)| w)
            .max();
        // A delegate whose outputs are unknown may be the writer: keep every earlier neighbour.
        let unknown = (0..first).any(|p| {
            calls
                .get(p)
                .is_some_and(|c| c.instr_args_type() != fb::InstructionArguments::KernelCall)
                && written[p].is_empty()
        });
        for (j, o) in items.iter().enumerate() {
            let join = if unknown {
                j != i
                    && same_memory(o)
                    && o.life.0 < first as u32
                    && o.range.0 < it.range.1
                    && it.range.0 < o.range.1
            } else {
                writers
                    .iter()
                    .any(|&(jj, w)| jj == j && cover.is_none_or(|c| w >= c))
            };
            if join {
                let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
                parent[ri] = rj;
            }
        }
    }
    // Groups: memory id, base offset, extent, lifetime.
    let mut groups: BTreeMap<usize, (u32, u64, u64, u32, u32)> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        let r = find(&mut parent, i);
        let id = it.meta.alloc.map_or(1, |a| a.0);
        let g = groups
            .entry(r)
            .or_insert((id, it.range.0, it.range.1, it.life.0, it.life.1));
        g.1 = g.1.min(it.range.0);
        g.2 = g.2.max(it.range.1);
        g.3 = g.3.min(it.life.0);
        g.4 = g.4.max(it.life.1);
    }
    let before: Vec<i64> = plan
        .non_const_buffer_sizes()
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let mut after = before.clone();
    let mut placed: BTreeMap<usize, u64> = BTreeMap::new();
    let ids: BTreeSet<u32> = groups.values().map(|g| g.0).collect();
    for id in ids {
        let keys: Vec<usize> = groups
            .iter()
            .filter(|(_, g)| g.0 == id)
            .map(|(&k, _)| k)
            .collect();
        let mut ivs: Vec<Interval> = keys
            .iter()
            .map(|k| {
                let g = groups[k];
                Interval::new((g.2 - g.1) as usize, g.3, g.4)
            })
            .collect();
        let total = match placement {
            Placement::Packed => {
                let mut scratch = vec![0u32; ivs.len()];
                planner::plan(&mut ivs, &mut scratch, 16)
                    .ok_or_else(|| "the new plan overflows".to_string())?
            }
            Placement::Apart => {
                let mut end = 0usize;
                for iv in &mut ivs {
                    iv.offset = end;
                    end = end
                        .checked_add(iv.size)
                        .map(|e| e.next_multiple_of(16))
                        .filter(|&e| i64::try_from(e).is_ok())
                        .ok_or_else(|| "the groups laid apart overflow".to_string())?;
                }
                end
            }
        };
        let slot = after
            .get_mut(id as usize)
            .ok_or_else(|| format!("memory id {id} outside non_const_buffer_sizes"))?;
        *slot = total as i64;
        for (k, iv) in keys.iter().zip(&ivs) {
            placed.insert(*k, iv.offset as u64);
        }
    }
    if placement == Placement::Packed && after.iter().zip(&before).any(|(a, b)| a > b) {
        return Err("the new plan would not be smaller".into());
    }
    for (i, it) in items.iter().enumerate() {
        let r = find(&mut parent, i);
        let g = groups[&r];
        edit.alloc
            .insert(it.value, (g.0, placed[&r] + (it.range.0 - g.1)));
    }
    let dropped = edit.nulled.len();
    edit.arena_sizes = Some(after.clone());
    // High-water mark over instructions.
    let mut peak = (0u64, 0u32, 0usize);
    for step in 0..=end {
        let live = groups.values().filter(|g| g.3 <= step && step <= g.4);
        let (bytes, n) = live.fold((0u64, 0usize), |(b, n), g| (b + (g.2 - g.1), n + 1));
        if bytes > peak.0 {
            peak = (bytes, step, n);
        }
    }
    // The groups alive there, each named by its largest tensor.
    let roots: Vec<usize> = (0..items.len()).map(|i| find(&mut parent, i)).collect();
    let mut peak_values: Vec<(usize, u64)> = groups
        .iter()
        .filter(|(_, g)| g.3 <= peak.1 && peak.1 <= g.4)
        .filter_map(|(&r, g)| {
            let largest = items
                .iter()
                .zip(&roots)
                .filter(|&(_, &root)| root == r)
                .max_by_key(|(it, _)| it.range.1 - it.range.0)?;
            Some((largest.0.value, g.2 - g.1))
        })
        .collect();
    peak_values.sort_by_key(|&(v, b)| (std::cmp::Reverse(b), v));
    Ok((edit, after, dropped, (peak.0, peak.1, peak.2, peak_values)))
}

/// Every planned tensor of the method in `view` moved so that tensors share bytes only with
/// their views (the groups of the module rules), each group on bytes of its own: value →
/// (memory id, offset), and the arena sizes that holds. A step before rewrites that change
/// lifetimes (removing a copy makes its input live until the copy's output was last read):
/// with nothing placed over a tensor's bytes once it is dead, a rewrite has only to respect
/// what the program reads and writes, and the re-plan that follows packs the arenas again.
/// `Err` (why) where the re-plan would keep ExecuTorch's plan: the rewrite must not spread
/// what will not be packed again. Also returns the planned tensors nothing names or lists
/// (left where they are by the first, the re-plan makes them `Null`).
pub fn spread(view: &PlanView<'_>, segments: &[&[u8]]) -> Result<Spread, String> {
    let (edit, sizes, _, _) = plan_method(view, segments, Placement::Apart)?;
    Ok(Spread {
        alloc: edit.alloc,
        arena_sizes: sizes,
        unnamed: edit.nulled,
    })
}

/// What [`spread`] gives a method.
pub struct Spread {
    /// Value → (memory id, offset).
    pub alloc: BTreeMap<usize, (u32, u64)>,
    /// `non_const_buffer_sizes` holding them.
    pub arena_sizes: Vec<i64>,
    /// Planned tensors nothing names or lists.
    pub unnamed: BTreeSet<usize>,
}

/// Re-plans every method of the finished program flatbuffer `fbytes` (the output of
/// [`crate::emit::program`], with the `segments` it is written with); returns the
/// new flatbuffer and what happened per method.
pub fn replan(fbytes: &[u8], segments: &[&[u8]]) -> Result<(Vec<u8>, Vec<PlanReport>), String> {
    let root = fb::root_as_program(fbytes).map_err(|e| format!("re-plan: {e}"))?;
    let mut edits = Vec::new();
    let mut reports = Vec::new();
    for plan in root.execution_plan().into_iter().flatten() {
        let view = PlanView::new(plan);
        let before: Vec<i64> = plan
            .non_const_buffer_sizes()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let mut rep = PlanReport {
            method: plan.name().unwrap_or("").to_string(),
            before: before.clone(),
            after: before,
            ..Default::default()
        };
        match plan_method(&view, segments, Placement::Packed) {
            Ok((edit, after, dropped, peak)) => {
                rep.after = after;
                rep.dropped_values = dropped;
                (
                    rep.peak_live_bytes,
                    rep.peak_instruction,
                    rep.peak_groups,
                    rep.peak_values,
                ) = peak;
                edits.push(edit);
            }
            Err(why) => {
                rep.kept_because = Some(why);
                edits.push(PlanEdit::default());
            }
        }
        reports.push(rep);
    }
    let edit = ProgramEdit {
        plans: edits,
        buffer_map: BTreeMap::new(),
        constant_offsets: None,
        segment_sizes: segments.iter().map(|s| s.len()).collect(),
        segment_map: (0..segments.len() as u32).map(Some).collect(),
        new_named: Vec::new(),
        dropped_keys: BTreeSet::new(),
        new_constant_segment: None,
    };
    Ok((crate::emit::program(root, &edit), reports))
}
