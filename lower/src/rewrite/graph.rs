//! A method's chain 0 as dataflow over bytes, for the graph rewrites: what each instruction
//! reads and writes, and which earlier instructions produced the bytes a tensor holds when an
//! instruction reads it ([`Graph::sources`]).
//!
//! ExecuTorch elides static views by planning a view's tensor over its base's bytes, so a
//! tensor may be read under a name nothing ever wrote. Following bytes instead of names makes
//! such views visible: the writers of a read are the latest instructions whose outputs cover
//! the read tensor's byte range.

use std::collections::BTreeSet;

use ptera::format::fb;

use crate::partition::{PlanView, TensorMeta};

/// What kind of instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Delegate,
    /// Moves, jumps, frees: the rewrites leave methods with these alone.
    Other,
}

/// One instruction of chain 0.
#[derive(Clone, Debug)]
pub struct Ins {
    /// `name.overload` of a kernel call (empty otherwise).
    pub key: String,
    pub kind: Kind,
    pub args: Vec<i32>,
    /// Values read: every argument but the written ones (list items included).
    pub reads: Vec<usize>,
    /// Values written: a kernel call's last argument (or the items of that list); a
    /// delegate's outputs when its payload says which, else every tensor argument.
    pub writes: Vec<usize>,
    pub removed: bool,
}

/// Where the bytes of a read came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// Method inputs, mutable state, or bytes nothing wrote before.
    Start,
    /// The outputs of this instruction.
    Ins(usize),
}

/// The dataflow of one method.
pub struct Graph<'a> {
    pub view: PlanView<'a>,
    pub ins: Vec<Ins>,
    /// Planned storage of every tensor value, as the rewrites have moved it:
    /// (memory id, offset, bytes).
    pub alloc: Vec<Option<(u32, u64, u64)>>,
    pub inputs: BTreeSet<usize>,
    pub outputs: BTreeSet<usize>,
    /// Why the rewrites cannot work on this method (more than one chain, control flow).
    pub unsupported: Option<String>,
    /// Planned tensors a rewrite made constants (folded values).
    pub made_constant: BTreeSet<usize>,
}

fn list_items(e: fb::EValue<'_>) -> Vec<usize> {
    e.val_as_tensor_list()
        .and_then(|l| l.items())
        .or_else(|| e.val_as_optional_tensor_list().and_then(|l| l.items()))
        .into_iter()
        .flatten()
        .filter_map(|i| usize::try_from(i).ok())
        .collect()
}

impl<'a> Graph<'a> {
    /// Reads method `plan`, its delegates' outputs read from their payloads in `segments`
    /// (the program's segments, in order).
    pub fn with_delegates(plan: fb::ExecutionPlan<'a>, segments: &[&[u8]]) -> Graph<'a> {
        let dels = plan.delegates().unwrap_or_default();
        let dw = |d: usize| -> Option<Vec<usize>> {
            let del = (d < dels.len()).then(|| dels.get(d))?;
            let w = crate::replan::delegate_outputs(del, segments);
            (!w.is_empty()).then_some(w)
        };
        Graph::new(plan, &dw)
    }

    /// Reads method `plan`; `delegate_writes(delegate index)` gives the argument positions a
    /// delegate writes, when known.
    pub fn new(
        plan: fb::ExecutionPlan<'a>,
        delegate_writes: &dyn Fn(usize) -> Option<Vec<usize>>,
    ) -> Graph<'a> {
        let view = PlanView::new(plan);
        let values = plan.values().unwrap_or_default();
        let value = |v: i32| {
            usize::try_from(v)
                .ok()
                .filter(|&i| i < values.len())
                .map(|i| (i, values.get(i)))
        };
        let chains = plan.chains().map_or(0, |c| c.len());
        let mut unsupported = (chains != 1).then(|| format!("{chains} chains"));
        let list = plan
            .chains()
            .and_then(|c| (!c.is_empty()).then(|| c.get(0)))
            .and_then(|c| c.instructions())
            .unwrap_or_default();
        let mut ins = Vec::with_capacity(list.len());
        for (pc, i) in list.iter().enumerate() {
            let (key, args) = view.instrs.get(pc).cloned().unwrap_or_default();
            let kind = match i.instr_args_type() {
                fb::InstructionArguments::KernelCall => Kind::Kernel,
                fb::InstructionArguments::DelegateCall => Kind::Delegate,
                _ => Kind::Other,
            };
            if kind == Kind::Other && unsupported.is_none() {
                unsupported = Some(format!("instruction {pc} is a move, jump or free"));
            }
            // Argument positions written (and whether the others are only read: a delegate
            // whose outputs are unknown may read and write every argument).
            let (written_pos, all_read): (Vec<usize>, bool) = match kind {
                Kind::Kernel => (args.len().checked_sub(1).into_iter().collect(), false),
                Kind::Delegate => match i
                    .instr_args_as_delegate_call()
                    .and_then(|d| usize::try_from(d.delegate_index()).ok())
                    .and_then(delegate_writes)
                {
                    Some(w) => (w, false),
                    None => ((0..args.len()).collect(), true),
                },
                Kind::Other => ((0..args.len()).collect(), true),
            };
            let mut writes = Vec::new();
            for &p in &written_pos {
                if let Some((v, e)) = args.get(p).and_then(|&a| value(a)) {
                    writes.push(v);
                    writes.extend(list_items(e));
                }
            }
            let mut reads = Vec::new();
            for (p, &a) in args.iter().enumerate() {
                let Some((v, e)) = value(a) else { continue };
                if written_pos.contains(&p) && !all_read {
                    continue;
                }
                if all_read || !writes.contains(&v) {
                    reads.push(v);
                }
                for it in list_items(e) {
                    if all_read || !writes.contains(&it) {
                        reads.push(it);
                    }
                }
                // Int lists name Int values.
                if let Some(items) = e.val_as_int_list().and_then(|l| l.items()) {
                    reads.extend(items.iter().filter_map(|i| usize::try_from(i).ok()));
                }
            }
            ins.push(Ins {
                key,
                kind,
                args,
                reads,
                writes,
                removed: false,
            });
        }
        let alloc = view
            .tensors
            .iter()
            .map(|t| t.as_ref().and_then(|t| t.alloc))
            .collect();
        let to_set = |v: Option<flatbuffers::Vector<'_, i32>>| -> BTreeSet<usize> {
            v.into_iter()
                .flatten()
                .filter_map(|i| usize::try_from(i).ok())
                .collect()
        };
        Graph {
            inputs: to_set(plan.inputs()),
            outputs: to_set(plan.outputs()),
            view,
            ins,
            alloc,
            unsupported,
            made_constant: BTreeSet::new(),
        }
    }

    pub fn tensor(&self, v: usize) -> Option<&TensorMeta> {
        self.view.tensors.get(v)?.as_ref()
    }

    /// A constant tensor (data in the program, not planned).
    pub fn is_constant(&self, v: usize) -> bool {
        self.made_constant.contains(&v)
            || self
                .tensor(v)
                .is_some_and(|t| t.is_constant() && self.alloc[v].is_none())
    }

    /// Planned tensor whose storage holds data before the run (an input or mutable state).
    pub fn holds_start(&self, v: usize) -> bool {
        self.inputs.contains(&v) || self.tensor(v).is_some_and(|t| t.buffer > 0 && t.planned)
    }

    /// Value `v` when it is an Int.
    pub fn int(&self, v: usize) -> Option<i64> {
        let vals = self.view.plan.values()?;
        (v < vals.len())
            .then(|| vals.get(v).val_as_int().map(|i| i.int_val()))
            .flatten()
    }

    /// Value `v` when it is an Int of the program itself: no kept instruction writes it.
    pub fn const_int(&self, v: usize) -> Option<i64> {
        let written = self.ins.iter().any(|i| !i.removed && i.writes.contains(&v));
        if written {
            return None;
        }
        self.int(v)
    }

    /// Value `v` when it is an IntList of the program whose items are Ints no kept instruction
    /// writes.
    pub fn const_int_list(&self, v: usize) -> Option<Vec<i64>> {
        let vals = self.view.plan.values()?;
        let items = (v < vals.len())
            .then(|| vals.get(v).val_as_int_list())
            .flatten()?
            .items()?;
        items
            .iter()
            .map(|i| usize::try_from(i).ok().and_then(|i| self.const_int(i)))
            .collect()
    }

    /// The program's scalar type code of tensor `v`.
    pub fn scalar_type(&self, v: usize) -> Option<i8> {
        let vals = self.view.plan.values()?;
        (v < vals.len())
            .then(|| vals.get(v).val_as_tensor().map(|t| t.scalar_type().0))
            .flatten()
    }

    /// The value's type in the program.
    pub fn kind_of(&self, v: usize) -> Option<fb::KernelTypes> {
        let vals = self.view.plan.values()?;
        (v < vals.len()).then(|| vals.get(v).val_type())
    }

    /// Whether planned tensors `a` and `b` share bytes.
    pub fn overlap(&self, a: usize, b: usize) -> bool {
        match (
            self.alloc.get(a).copied().flatten(),
            self.alloc.get(b).copied().flatten(),
        ) {
            (Some((ma, oa, la)), Some((mb, ob, lb))) => {
                ma == mb && la > 0 && lb > 0 && oa < ob + lb && ob < oa + la
            }
            _ => false,
        }
    }

    /// Where the bytes of planned tensor `v` come from when instruction `pc` reads it: the
    /// latest kept instructions before `pc` whose written tensors overlap `v`, walking back
    /// until their union covers `v` (or [`Source::Start`] when it never does, or when a tensor
    /// holding data before the run overlaps the rest). `None` for unplanned tensors.
    pub fn sources(&self, v: usize, pc: usize) -> Option<BTreeSet<Source>> {
        let (mem, lo, len) = self.alloc.get(v).copied().flatten()?;
        let hi = lo + len;
        let mut out = BTreeSet::new();
        if len == 0 {
            return Some(out);
        }
        // Uncovered byte intervals of `v`.
        let mut open: Vec<(u64, u64)> = vec![(lo, hi)];
        for j in (0..pc.min(self.ins.len())).rev() {
            let i = &self.ins[j];
            if i.removed {
                continue;
            }
            let mut hit = false;
            for &w in &i.writes {
                let Some((wm, wo, wl)) = self.alloc.get(w).copied().flatten() else {
                    continue;
                };
                if wm != mem || wl == 0 {
                    continue;
                }
                let (a, b) = (wo, wo + wl);
                let mut next = Vec::with_capacity(open.len() + 1);
                for &(x, y) in &open {
                    if b <= x || y <= a {
                        next.push((x, y));
                        continue;
                    }
                    hit = true;
                    if x < a {
                        next.push((x, a));
                    }
                    if b < y {
                        next.push((b, y));
                    }
                }
                open = next;
            }
            if hit {
                out.insert(Source::Ins(j));
            }
            if open.is_empty() {
                return Some(out);
            }
        }
        out.insert(Source::Start);
        Some(out)
    }

    /// Whether the bytes instruction `s` writes are read, and made a method output, only as
    /// value `out` (no later instruction reads them through a view under another name).
    pub fn read_by_name_only(&self, s: usize, out: usize) -> bool {
        self.read_only_where(s, |_, r| r == out)
    }

    /// Whether every later kept read of the bytes instruction `s` wrote (as value `r` by
    /// instruction `pc`), and every method output holding them (`pc` = the instruction
    /// count), passes `ok(pc, r)`.
    pub fn read_only_where(&self, s: usize, ok: impl Fn(usize, usize) -> bool) -> bool {
        let n = self.ins.len();
        let from_s = |r: usize, j: usize| {
            !ok(j, r)
                && self.alloc.get(r).copied().flatten().is_some()
                && self
                    .sources(r, j)
                    .is_some_and(|src| src.contains(&Source::Ins(s)))
        };
        let reads_ok = self
            .ins
            .iter()
            .enumerate()
            .skip(s + 1)
            .filter(|(_, i)| !i.removed)
            .all(|(j, i)| !i.reads.iter().any(|&r| from_s(r, j)));
        reads_ok && !self.outputs.iter().any(|&o| from_s(o, n))
    }

    /// The last kept instruction at or after `from` that reads or writes one of `vs`
    /// (`from` when none does).
    pub fn last_touch(&self, vs: &BTreeSet<usize>, from: usize) -> usize {
        let mut last = from;
        for (j, i) in self.ins.iter().enumerate().skip(from) {
            if i.removed {
                continue;
            }
            if i.reads.iter().chain(&i.writes).any(|r| vs.contains(r)) {
                last = j;
            }
        }
        last
    }
}
