//! Load-time constant folding: kernel calls whose operands are all constants (or outputs of
//! other folded calls) run once, when the method is loaded, and never again.
//!
//! Language-model exports build their causal mask and position ids from `arange`, `full`,
//! comparisons, `unsqueeze` and `bitwise_and` of constants, look up position embeddings with
//! those ids, and some transpose constant weights with `permute_copy`: the same work on every
//! forward. `xtask lower` folds these into the file; this module does it for a program that
//! was not lowered, keeping each result a kept instruction reads (the *frontier*) in the
//! metadata buffer, where it then serves as a constant.
//!
//! The analysis ([`plan`]) reads the program alone, so `MethodMeta` counts the bytes the
//! frontier takes before anything is loaded, and `Method::load` repeats it to the same
//! decision. It follows bytes, not value names: the memory plan reuses arena bytes, so a
//! tensor a kept call reads is a frontier tensor only when every byte of it was last written
//! by folded calls; when its bytes come partly from folded calls and partly from elsewhere
//! (or from before the method ran), those folded calls are not folded and the analysis runs
//! again without them. A frontier tensor no kept call writes; the method's inputs, outputs and
//! mutable buffers are never folded. The frontier is kept within a byte budget
//! ([`DEFAULT_BUDGET`]; `MethodMeta::with_fold_budget`): over it, the producers of the largest
//! frontier tensor stay in the forward, and the analysis runs again.
//!
//! Folding applies to methods of one chain of kernel and delegate calls (no jumps, moves or
//! frees) of at most [`MAX_INSTRUCTIONS`] instructions and [`MAX_VALUES`] values (the
//! analysis keeps its sets in fixed bitsets on the stack). Delegate calls are never folded,
//! and every tensor they name counts as read and written.

use crate::format::{fb, Program};
use crate::kernel_api::{AliasProof as Proof, Value};

use super::decoded;
use super::layout::{Tables, ARENA_ALIGN};
use super::run::Frame;
use super::validate::check_tensor;

/// Frontier bytes a method keeps unless `MethodMeta::with_fold_budget` says otherwise: the
/// masks and position tables of a language model at a few hundred positions, not a second
/// copy of its weights.
pub const DEFAULT_BUDGET: usize = 64 * 1024;

/// Instructions a foldable method may have.
pub const MAX_INSTRUCTIONS: usize = 64 * 64;

/// Values a foldable method may have.
pub const MAX_VALUES: usize = 256 * 64;

/// Operators that must run every time (random, or with unspecified contents).
pub const NEVER: [&str; 7] = [
    "rand",
    "dropout",
    "bernoulli",
    "normal",
    "uniform",
    "multinomial",
    "empty",
];

/// Instructions the analysis's byte walks may visit in all (about 20 M instructions of work
/// at load): a language model's analysis takes a few hundred thousand.
pub const MAX_WALK: u32 = 1 << 20;

/// Rounds of the analysis (each forbids at least one call): the language models here need
/// a handful.
pub const MAX_ROUNDS: usize = 64;

/// Frontier tensors a method may keep.
pub const MAX_FRONTIER: usize = 256;

/// Byte intervals of one tensor not yet attributed to a writer.
const MAX_OPEN: usize = 16;

/// A fixed set of `64 · W` small integers.
#[derive(Clone, Copy)]
pub struct Bits<const W: usize>([u64; W]);

impl<const W: usize> Bits<W> {
    const EMPTY: Self = Bits([0; W]);

    pub fn get(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    fn set(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    fn union(&mut self, o: &Self) {
        self.0.iter_mut().zip(o.0.iter()).for_each(|(a, b)| *a |= b);
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(k, &w)| {
            let mut w = w;
            core::iter::from_fn(move || {
                let b = (w != 0).then(|| w.trailing_zeros() as usize)?;
                w &= w - 1;
                Some(k * 64 + b)
            })
        })
    }
}

/// What folding decided for one method.
#[derive(Clone, Copy)]
pub struct Fold {
    /// Calls run at load and skipped by `execute`.
    pub folded: Bits<{ MAX_INSTRUCTIONS / 64 }>,
    /// Values kept calls read from folded calls: kept in the metadata buffer.
    pub frontier: Bits<{ MAX_VALUES / 64 }>,
    /// Metadata bytes the frontier takes (each tensor's capacity rounded up to 16).
    pub bytes: usize,
}

impl Fold {
    /// Calls folded.
    pub fn calls(&self) -> usize {
        self.folded.count()
    }

    pub const NONE: Fold = Fold {
        folded: Bits::EMPTY,
        frontier: Bits::EMPTY,
        bytes: 0,
    };
}

/// Where a tensor value's bytes are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    /// Program bytes (a constant).
    Constant,
    /// Planned arena bytes `off..off + len` of memory id `mem`; `fixed`: a method input or
    /// output, or a mutable buffer (never folded, never a frontier tensor).
    Arena {
        mem: u32,
        off: u64,
        len: u64,
        fixed: bool,
    },
    /// No storage, or not a tensor.
    Other,
}

/// The program facts the analysis reads.
struct Facts<'p> {
    program: Program<'p>,
    plan: fb::ExecutionPlan<'p>,
    ins: flatbuffers::Vector<'p, flatbuffers::ForwardsUOffset<fb::Instruction<'p>>>,
    /// Instructions the byte walks ([`Facts::sources`]) have visited: past [`MAX_WALK`] the
    /// analysis gives up (a program built to make it slow folds nothing).
    walked: core::cell::Cell<u32>,
}

impl<'p> Facts<'p> {
    /// Value `v` of the plan.
    fn value(&self, v: i32) -> Option<fb::EValue<'p>> {
        let v = usize::try_from(v).ok()?;
        let vs = self.plan.values()?;
        (v < vs.len()).then(|| vs.get(v))
    }

    fn store(&self, v: i32) -> Store {
        let Some(t) = self.value(v).and_then(|ev| ev.val_as_tensor()) else {
            return Store::Other;
        };
        let Ok((_, _, nbytes)) = check_tensor(&self.program, self.plan, v as usize, t) else {
            return Store::Other;
        };
        match t.allocation_info() {
            Some(a) => {
                let named = |l: Option<flatbuffers::Vector<'_, i32>>| {
                    l.unwrap_or_default().iter().any(|x| x == v)
                };
                Store::Arena {
                    mem: a.memory_id(),
                    off: ((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64,
                    len: nbytes as u64,
                    fixed: t.data_buffer_idx() > 0
                        || named(self.plan.inputs())
                        || named(self.plan.outputs()),
                }
            }
            None if t.data_buffer_idx() > 0 => Store::Constant,
            None => Store::Other,
        }
    }

    fn value_type(&self, v: i32) -> Option<fb::KernelTypes> {
        self.value(v).map(|ev| ev.val_type())
    }

    /// The tensor values of value `v`: itself, or a list's items.
    fn tensors_of(&self, v: i32, mut f: impl FnMut(i32)) {
        let Some(ev) = self.value(v) else {
            return;
        };
        match ev.val_type() {
            fb::KernelTypes::Tensor => f(v),
            fb::KernelTypes::TensorList => ev
                .val_as_tensor_list()
                .and_then(|l| l.items())
                .into_iter()
                .flatten()
                .for_each(&mut f),
            fb::KernelTypes::OptionalTensorList => ev
                .val_as_optional_tensor_list()
                .and_then(|l| l.items())
                .into_iter()
                .flatten()
                .filter(|&x| x >= 0)
                .for_each(&mut f),
            _ => {}
        }
    }

    /// The value indices an Int list value `v` holds.
    fn int_items(&self, v: i32, f: impl FnMut(i64)) {
        self.value(v)
            .and_then(|ev| ev.val_as_int_list())
            .and_then(|l| l.items())
            .into_iter()
            .flatten()
            .for_each(f);
    }

    /// Instruction `pc`'s arguments and whether it is a kernel call (`Some(op)`).
    fn call(&self, pc: usize) -> (&'p [i32], Option<usize>) {
        let ins = self.ins.get(pc);
        let slice = |v: Option<flatbuffers::Vector<'p, i32>>| {
            v.and_then(|v| super::decoded::as_slice(v)).unwrap_or(&[])
        };
        if let Some(k) = ins.instr_args_as_kernel_call() {
            return (slice(k.args()), Some(k.op_index().max(0) as usize));
        }
        match ins.instr_args_as_delegate_call() {
            Some(d) => (slice(d.args()), None),
            None => (&[], None),
        }
    }

    /// Calls `f` with every tensor instruction `pc` writes: a kernel call its last argument's,
    /// a delegate call every tensor it names.
    fn writes(&self, pc: usize, mut f: impl FnMut(i32)) {
        match self.call(pc) {
            (args, Some(_)) => {
                if let Some(&last) = args.last() {
                    self.tensors_of(last, &mut f);
                }
            }
            (args, None) => args.iter().for_each(|&a| self.tensors_of(a, &mut f)),
        }
    }

    /// Whether instruction `pc` writes tensor value `v`.
    fn writes_value(&self, pc: usize, v: i32) -> bool {
        let mut hit = false;
        self.writes(pc, |w| hit |= w == v);
        hit
    }

    /// Calls `f` with every argument instruction `pc` reads: for a kernel call every argument
    /// but the tensors it writes, for a delegate call every argument.
    fn reads(&self, pc: usize, mut f: impl FnMut(i32)) {
        let (args, op) = self.call(pc);
        let written = match op {
            Some(_) => args.len().saturating_sub(1),
            None => args.len(),
        };
        for (i, &a) in args.iter().enumerate() {
            if op.is_some() && (i == written || self.writes_value(pc, a)) {
                continue;
            }
            f(a);
        }
    }

    /// The first call of `keep` that reads tensor value `v` (`n` when none does).
    fn first_reader(&self, v: i32, n: usize, keep: impl Fn(usize) -> bool) -> usize {
        (0..n)
            .find(|&pc| {
                let mut hit = false;
                if keep(pc) {
                    self.reads(pc, |a| self.tensors_of(a, |r| hit |= r == v));
                }
                hit
            })
            .unwrap_or(n)
    }

    /// The last writers before instruction `pc` of tensor value `v`'s bytes: `f` sees each
    /// writer; returns whether some byte has no writer before `pc` (or the intervals ran out:
    /// the same, conservatively).
    fn sources(&self, v: i32, pc: usize, mut f: impl FnMut(usize)) -> bool {
        let Store::Arena { mem, off, len, .. } = self.store(v) else {
            return true;
        };
        let mut open: heapless::Vec<(u64, u64), MAX_OPEN> = heapless::Vec::new();
        if len == 0 {
            return false;
        }
        let _ = open.push((off, off.saturating_add(len)));
        for j in (0..pc.min(self.ins.len())).rev() {
            let w = self.walked.get().saturating_add(1);
            self.walked.set(w);
            if w > MAX_WALK {
                return true;
            }
            let mut hit = false;
            let mut overflow = false;
            self.writes(j, |w| {
                let Store::Arena {
                    mem: wm,
                    off: a,
                    len: wl,
                    ..
                } = self.store(w)
                else {
                    return;
                };
                let b = a.saturating_add(wl);
                if wm != mem || wl == 0 {
                    return;
                }
                let mut next: heapless::Vec<(u64, u64), MAX_OPEN> = heapless::Vec::new();
                for &(x, y) in &open {
                    if b <= x || y <= a {
                        overflow |= next.push((x, y)).is_err();
                        continue;
                    }
                    hit = true;
                    if x < a {
                        overflow |= next.push((x, a)).is_err();
                    }
                    if b < y {
                        overflow |= next.push((b, y)).is_err();
                    }
                }
                open = next;
            });
            if hit {
                f(j);
            }
            if overflow {
                return true;
            }
            if open.is_empty() {
                return false;
            }
        }
        true
    }
}

/// `len` bytes rounded up to the area's alignment (saturating: such a size never fits).
fn rounded(len: u64) -> usize {
    usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_next_multiple_of(ARENA_ALIGN))
        .unwrap_or(usize::MAX)
}

fn foldable_op(plan: fb::ExecutionPlan<'_>, op: usize) -> bool {
    let Some(o) = plan.operators().filter(|v| op < v.len()).map(|v| v.get(op)) else {
        return false;
    };
    foldable_name(o.name().unwrap_or(""), o.overload().unwrap_or(""))
}

/// Whether operator `name.overload` may be evaluated ahead of time when its operands are
/// constants: an out variant, not a primitive (those compute sizes as the method runs), not
/// random or of unspecified contents ([`NEVER`]). `xtask lower` folds by the same rule.
pub fn foldable_name(name: &str, overload: &str) -> bool {
    (overload == "out" || overload.ends_with("_out"))
        && !name.starts_with("executorch_prim::")
        && !NEVER.iter().any(|w| name.contains(w))
}

/// Decides which calls of `plan` to fold with a frontier of at most `budget` bytes (nothing
/// is changed; [`Fold::NONE`] when nothing folds).
pub fn plan<'p>(program: &Program<'p>, plan: fb::ExecutionPlan<'p>, budget: usize) -> Fold {
    let chains = plan.chains().unwrap_or_default();
    let Some(ins) = (chains.len() == 1)
        .then(|| chains.get(0).instructions())
        .flatten()
    else {
        return Fold::NONE;
    };
    let n = ins.len();
    let values = plan.values().map_or(0, |v| v.len());
    let calls_only = ins.iter().all(|i| {
        matches!(
            i.instr_args_type(),
            fb::InstructionArguments::KernelCall | fb::InstructionArguments::DelegateCall
        )
    });
    if budget == 0 || !calls_only || n > MAX_INSTRUCTIONS || values > MAX_VALUES {
        return Fold::NONE;
    }
    let f = Facts {
        program: *program,
        plan,
        ins,
        walked: core::cell::Cell::new(0),
    };
    // Non-tensor values some call writes (primitive operators): not known at load.
    let mut written: Bits<{ MAX_VALUES / 64 }> = Bits::EMPTY;
    for pc in 0..n {
        if let (args, Some(_)) = f.call(pc) {
            match args.last() {
                Some(&l) if f.value_type(l) != Some(fb::KernelTypes::Tensor) => {
                    written.set(l.max(0) as usize)
                }
                _ => {}
            }
        }
    }
    let mut forbidden: Bits<{ MAX_INSTRUCTIONS / 64 }> = Bits::EMPTY;
    // Each round forbids at least one call; a program that needs more rounds than
    // [`MAX_ROUNDS`] folds nothing.
    for _ in 0..=n.min(MAX_ROUNDS) {
        let folded = candidates(&f, n, &written, &forbidden);
        if folded.is_empty() || f.walked.get() > MAX_WALK {
            return Fold::NONE;
        }
        let mut more: Bits<{ MAX_INSTRUCTIONS / 64 }> = Bits::EMPTY;
        let mut frontier: Bits<{ MAX_VALUES / 64 }> = Bits::EMPTY;
        // Bytes folded calls write, to skip the walk for reads far from them.
        let touches = |r: i32| {
            let Store::Arena { mem, off, len, .. } = f.store(r) else {
                return false;
            };
            folded.iter().any(|j| {
                let mut hit = false;
                f.writes(j, |w| {
                    if let Store::Arena {
                        mem: wm,
                        off: a,
                        len: wl,
                        ..
                    } = f.store(w)
                    {
                        hit |=
                            wm == mem && a < off.saturating_add(len) && off < a.saturating_add(wl);
                    }
                });
                hit
            })
        };
        let mut check = |r: i32, pc: usize, more: &mut Bits<{ MAX_INSTRUCTIONS / 64 }>| {
            if !touches(r) {
                return;
            }
            let (mut any, mut all, mut last) = (false, true, 0);
            let start = f.sources(r, pc, |j| {
                any |= folded.get(j);
                all &= folded.get(j);
                last = last.max(j);
            });
            if !any {
                return;
            }
            let fixed = matches!(f.store(r), Store::Arena { fixed: true, .. });
            let kept_writer = (0..n).any(|j| !folded.get(j) && f.writes_value(j, r));
            // One copy serves every reader: the bytes are final before the first one.
            let first = f.first_reader(r, n, |j| !folded.get(j));
            let rewritten = (first..n).any(|j| folded.get(j) && f.writes_value(j, r));
            if start || !all || fixed || kept_writer || rewritten || pc >= n || last >= first {
                f.sources(r, pc, |j| {
                    if folded.get(j) {
                        more.set(j)
                    }
                });
            } else {
                frontier.set(r.max(0) as usize);
            }
        };
        for pc in (0..n).filter(|&pc| !folded.get(pc)) {
            f.reads(pc, |a| f.tensors_of(a, |r| check(r, pc, &mut more)));
        }
        // Method outputs keep their own storage: whatever they hold is not folded.
        for o in plan.outputs().unwrap_or_default().iter() {
            f.tensors_of(o, |r| check(r, n, &mut more));
        }
        if !more.is_empty() {
            forbidden.union(&more);
            continue;
        }
        let cap = |r: usize| match f.store(r as i32) {
            Store::Arena { len, .. } => rounded(len),
            _ => 0,
        };
        let bytes = frontier.iter().map(cap).fold(0, usize::saturating_add);
        if bytes > budget || frontier.count() > MAX_FRONTIER {
            // The largest frontier tensor stays in the forward, with what computes it.
            let Some(big) = frontier.iter().max_by_key(|&r| cap(r)) else {
                return Fold::NONE;
            };
            f.sources(big as i32, n, |j| {
                if folded.get(j) {
                    forbidden.set(j)
                }
            });
            // Its readers' sources reach it from before their own position: forbid every
            // folded writer of it by name as well.
            (0..n)
                .filter(|&j| folded.get(j) && f.writes_value(j, big as i32))
                .for_each(|j| forbidden.set(j));
            continue;
        }
        if f.walked.get() > MAX_WALK {
            return Fold::NONE;
        }
        return Fold {
            folded,
            frontier,
            bytes,
        };
    }
    Fold::NONE
}

/// The calls whose every read is a constant, an unwritten non-tensor value, or bytes last
/// written by calls in the set (none in `forbidden`).
fn candidates(
    f: &Facts<'_>,
    n: usize,
    written: &Bits<{ MAX_VALUES / 64 }>,
    forbidden: &Bits<{ MAX_INSTRUCTIONS / 64 }>,
) -> Bits<{ MAX_INSTRUCTIONS / 64 }> {
    let mut folded: Bits<{ MAX_INSTRUCTIONS / 64 }> = Bits::EMPTY;
    let mut made: Bits<{ MAX_VALUES / 64 }> = Bits::EMPTY;
    for pc in 0..n {
        let (args, op) = f.call(pc);
        let Some(_) = op.filter(|&op| !forbidden.get(pc) && foldable_op(f.plan, op)) else {
            continue;
        };
        let mut writes_ok = !args.is_empty();
        let mut wrote_any = false;
        f.writes(pc, |w| {
            wrote_any = true;
            writes_ok &= matches!(f.store(w), Store::Arena { fixed: false, .. });
        });
        if !writes_ok || !wrote_any {
            continue;
        }
        let mut reads_ok = true;
        f.reads(pc, |a| match f.value_type(a) {
            Some(
                fb::KernelTypes::Tensor
                | fb::KernelTypes::TensorList
                | fb::KernelTypes::OptionalTensorList,
            ) => f.tensors_of(a, |r| {
                reads_ok &= match f.store(r) {
                    Store::Constant => true,
                    // Bytes a folded call wrote under this name (checked byte by byte).
                    Store::Arena { fixed: false, .. } if made.get(r.max(0) as usize) => {
                        let mut all = true;
                        let start = f.sources(r, pc, |j| all &= folded.get(j));
                        all && !start
                    }
                    _ => false,
                }
            }),
            // An Int list reads its items (SymInts some call may compute).
            Some(fb::KernelTypes::IntList) => f.int_items(a, |v| {
                reads_ok &= !written.get(v.max(0) as usize);
            }),
            Some(_) => reads_ok &= !written.get(a.max(0) as usize),
            None => reads_ok = false,
        });
        if reads_ok {
            folded.set(pc);
            f.writes(pc, |w| made.set(w.max(0) as usize));
        }
    }
    folded
}

/// The value table's tensor slot of value `v`, if it is a tensor.
fn slot_of(values: &[Value<'_>], v: usize) -> Option<usize> {
    match values.get(v) {
        Some(Value::Tensor(s)) => Some(*s as usize),
        _ => None,
    }
}

/// Runs the calls `fold` folds, in program order, on the freshly filled tables `t` (before
/// any other load-time analysis); copies each frontier tensor into `t.fold` once the last
/// folded call before its first kept reader has run (later folded calls may reuse its arena
/// bytes) and points its slot there (read-only, like a constant); marks the calls
/// [`Proof::FOLDED`]. Returns the calls folded: 0 when one of them fails (nothing is folded
/// then, and the forward runs every call and reports the error with its context) or the
/// area is smaller than `fold.bytes`.
///
/// [`Proof::FOLDED`]: crate::kernel_api::AliasProof::FOLDED
pub fn apply<'p>(
    program: &Program<'p>,
    plan: fb::ExecutionPlan<'p>,
    fold: &Fold,
    t: &mut Tables<'_, 'p>,
) -> usize {
    if fold.calls() == 0 || t.fold.len() < fold.bytes {
        return 0;
    }
    let Some(ins) = plan.chains().and_then(|c| c.iter().next()?.instructions()) else {
        return 0;
    };
    let f = Facts {
        program: *program,
        plan,
        ins,
        walked: core::cell::Cell::new(0),
    };
    let n = ins.len();
    // Each frontier tensor with its first kept reader and its place in the area.
    let mut keep: heapless::Vec<(usize, usize, usize), MAX_FRONTIER> = heapless::Vec::new();
    let mut at = 0usize;
    for r in fold.frontier.iter() {
        let first = f.first_reader(r as i32, n, |j| !fold.folded.get(j));
        let take = match f.store(r as i32) {
            Store::Arena { len, .. } => rounded(len),
            _ => return 0,
        };
        if keep.push((r, first, at)).is_err() {
            return 0;
        }
        at = at.saturating_add(take);
    }
    if at > t.fold.len() || decoded::decode(plan, &[], t.decoded).is_err() {
        return 0;
    }
    let mut pcs = fold.folded.iter().peekable();
    while let Some(pc) = pcs.next() {
        let mut frame = Frame {
            plan,
            values: t.values,
            tensors: t.tensors,
            kernels: t.kernels,
            delegates: t.delegates,
            scratch: t.scratch,
            step_limit: u64::MAX,
            rows: false,
            decoded: t.decoded,
            proved: t.proved,
            observer: None,
        };
        if frame.run_one(0, pc).is_err() {
            return 0;
        }
        let next = pcs.peek().copied().unwrap_or(n);
        for &(r, _, off) in keep.iter().filter(|k| pc < k.1 && k.1 <= next) {
            let Some(slot) = slot_of(t.values, r).and_then(|s| t.tensors.get_mut(s)) else {
                return 0;
            };
            let n = slot.nbytes();
            let take = rounded(slot.capacity as u64);
            let Some(dst) = t.fold.get_mut(off..off.saturating_add(take)) else {
                return 0;
            };
            if n > take || (n > 0 && slot.data.is_null()) {
                return 0;
            }
            if n > 0 {
                // SAFETY: the slot's data holds `n` bytes of planned arena storage (its
                // capacity is at least its current size; folded calls just wrote them); the
                // metadata buffer never overlaps an arena.
                let src = unsafe { core::slice::from_raw_parts(slot.data, n) };
                dst[..n].copy_from_slice(src);
            }
            slot.data = dst.as_mut_ptr();
            slot.planned = false;
            slot.writable = false;
        }
    }
    for pc in fold.folded.iter() {
        if let Some(p) = t.proved.get_mut(pc) {
            *p = Proof::FOLDED;
        }
    }
    fold.calls()
}
