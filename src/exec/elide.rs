//! Load-time removal of copies that change nothing. `expand_copy` to the same element count,
//! `view_copy`, `squeeze_copy` and `unsqueeze_copy` of a contiguous tensor, `clone`,
//! `alias_copy`, `detach_copy`, and `_to_copy`, `_to_dim_order_copy` or `_clone_dim_order` to
//! the same dtype and layout write exactly their input's bytes. When the proof below holds, the
//! output's slot is pointed at the input's bytes and the call is marked elided
//! ([`Proof::elided`]): the instruction loop skips it.
//!
//! Copy `c` reads tensor `S` and writes tensor `D`. It is elided when:
//! - `S` and `D` are static, contiguous (default dim order) tensors of one dtype and one
//!   non-zero element count, with disjoint storage; `S` has fixed storage (planned or a
//!   constant); `D` is planned, not a method input or output, and not state kept between runs;
//! - no instruction after `c` writes `D`;
//! - no instruction after `c`, up to the last one that reads `D`, writes over `S`'s bytes (they
//!   must still hold the data when `D` is read) or over `D`'s own bytes under another name (a
//!   view of `D` written in place, which `D` would no longer see); except an identity copy of
//!   `D` whose output has exactly `S`'s address and size (ExecuTorch plans a squeeze and the
//!   expand back that way): it then writes what is there and goes too, by the next rule;
//! - no instruction after `c` reads bytes of `D`'s own storage under another name before they
//!   have been written again (ExecuTorch plans a static view over its base's bytes: such a
//!   view would read what `c` no longer writes).
//!
//! A copy whose output already has its input's address and size (same dtype, element count
//! and layout) writes nothing new and is elided whatever else the program does.
//!
//! A slice that is one contiguous block of its input goes the same way: `slice_copy.Tensor`
//! with step 1 and `select_copy.int` of a static contiguous tensor whose dims before the
//! sliced one are all 1 (the last row of a `[1, T, C]` activation, one query's row of a
//! `[1, 1, T, T]` mask). Its output is pointed at the block's bytes inside the input, under
//! the proof above with the block as the bytes of `S` that must not be written while `D` is
//! read (no copy back is exempted). Its `dim`, `start`, `end`, `step` or `index` must be Int
//! (or None) values no instruction writes, so that the load-time reading is what the call
//! would see.
//!
//! `D`'s views move with it: ExecuTorch plans a view of `D` (a `view_copy` it removed) as
//! another tensor over `D`'s bytes, read instead of `D`. Such a tensor, never written and read
//! only after the copy and before anything else is written over `D`'s bytes, is pointed at the
//! same offset of `D`'s new bytes, and its reads count as `D`'s in the proof.
//!
//! What an instruction reads and writes: a kernel call writes the tensors of its last argument
//! (the returned `out` tensors) and reads the tensors of its other arguments (a tensor it also
//! returns counts as written only, the `out` convention); a delegate call uses each argument as
//! its backend says ([`crate::delegate::Backend::arg_access`]; by default it may read and write
//! all of them). Ranges are compared at capacity, like `exec::alias`. Nothing is elided in a
//! method with moves, jumps or frees, where a value's storage or the order of instructions is
//! not fixed.
//!
//! Copies are examined in program order; a copy whose input was itself an elided copy's
//! output reads (and keeps alive) the first copy's input bytes.

use crate::delegate::{ArgAccess, DelegateSlot};
use crate::format::fb;
pub use crate::kernel_api::AliasProof as Proof;
use crate::kernel_api::{Dynamism, TensorSlot, Value};

/// Operators (`name.overload`) whose output has its input's bytes when dtype, element count
/// and layout agree. The input is argument 0, the output the last argument.
const IDENTITY_COPIES: [&str; 14] = [
    "aten::expand_copy.out",
    "aten::view_copy.out",
    "aten::squeeze_copy.out",
    "aten::squeeze_copy.dim_out",
    "aten::squeeze_copy.dims_out",
    "aten::unsqueeze_copy.out",
    "aten::alias_copy.out",
    "aten::clone.out",
    "aten::detach_copy.out",
    "aten::lift_fresh_copy.out",
    "aten::_to_copy.out",
    "dim_order_ops::_to_dim_order_copy.out",
    "dim_order_ops::_clone_dim_order.out",
    "aten::_clone_dim_order.out",
];

/// Slices that may be one contiguous block of their input (`name.overload`).
const SLICE: &str = "aten::slice_copy.Tensor_out";
const SELECT: &str = "aten::select_copy.int_out";

/// Most tensors one instruction may name for the analysis (an instruction naming more keeps
/// every copy whose proof must look at it).
const MAX_NAMED: usize = 64;

/// Most separate pieces of `D`'s storage followed while they may still be read under another
/// name (more: the copy is kept).
const MAX_PIECES: usize = 8;

/// How one instruction uses one tensor.
#[derive(Clone, Copy)]
struct Use {
    slot: u32,
    read: bool,
    write: bool,
}

type Uses = heapless::Vec<Use, MAX_NAMED>;

/// The tensors instruction `ins` names and how it uses them; `None` when it cannot be told
/// (not a kernel or delegate call, too many tensors, an index out of range).
fn uses(
    ins: fb::Instruction<'_>,
    values: &[Value<'_>],
    delegates: &[DelegateSlot<'_, '_>],
) -> Option<Uses> {
    let (args, delegate) = match ins.instr_args_type() {
        fb::InstructionArguments::KernelCall => (ins.instr_args_as_kernel_call()?.args()?, None),
        fb::InstructionArguments::DelegateCall => {
            let d = ins.instr_args_as_delegate_call()?;
            let slot = delegates.get(usize::try_from(d.delegate_index()).ok()?)?;
            (d.args()?, Some(slot))
        }
        _ => return None,
    };
    let last = args.len().checked_sub(1);
    let mut out = Uses::new();
    // Pass 0 collects the written tensors, pass 1 the read ones (a kernel's tensor that is
    // written is not also read).
    for pass in 0..2 {
        for (pos, a) in args.iter().enumerate() {
            let (read, write) = match delegate {
                None => (pos != last.unwrap_or(0), Some(pos) == last),
                Some(slot) => match slot.backend.arg_access(&slot.init, slot.state, pos) {
                    ArgAccess::Unused => (false, false),
                    ArgAccess::Read => (true, false),
                    ArgAccess::Write => (false, true),
                    ArgAccess::ReadWrite => (true, true),
                },
            };
            let wanted = if pass == 0 { write } else { read };
            if !wanted {
                continue;
            }
            let mut add = |slot: u32| -> Option<()> {
                if pass == 1 && delegate.is_none() && out.iter().any(|u| u.slot == slot && u.write)
                {
                    return Some(());
                }
                out.push(Use {
                    slot,
                    read: pass == 1,
                    write: pass == 0,
                })
                .ok()
            };
            match *values.get(usize::try_from(a).ok()?)? {
                Value::Tensor(s) => add(s)?,
                Value::TensorList(items) | Value::OptTensorList(items) => {
                    for i in items.iter().filter(|&i| i >= 0) {
                        if let Some(Value::Tensor(s)) = values.get(usize::try_from(i).ok()?) {
                            add(*s)?;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Some(out)
}

/// Every instruction of the plan, chains in order (numbered like the proof table).
fn instructions<'p>(plan: fb::ExecutionPlan<'p>) -> impl Iterator<Item = fb::Instruction<'p>> {
    plan.chains()
        .unwrap_or_default()
        .iter()
        .flat_map(|c| c.instructions().unwrap_or_default().iter())
}

/// Bytes `[lo, hi)` of a slot's storage at capacity (empty without storage).
fn span(t: &TensorSlot) -> (usize, usize) {
    if t.data.is_null() || t.capacity == 0 {
        (0, 0)
    } else {
        (t.data as usize, t.data as usize + t.capacity)
    }
}

fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// `(S value, S slot, D value, D slot)` when `ins` is a call of an identity copy.
fn identity_copy(
    plan: fb::ExecutionPlan<'_>,
    ins: fb::Instruction<'_>,
    values: &[Value<'_>],
) -> Option<(usize, u32, usize, u32)> {
    called_key(plan, ins, &IDENTITY_COPIES)?;
    let k = ins.instr_args_as_kernel_call()?;
    let args = k.args()?;
    let sv = usize::try_from(args.iter().next()?).ok()?;
    let dv = usize::try_from(args.iter().next_back()?).ok()?;
    match (values.get(sv)?, values.get(dv)?) {
        (&Value::Tensor(s), &Value::Tensor(d)) if s != d => Some((sv, s, dv, d)),
        _ => None,
    }
}

/// A slice whose output is one contiguous block of its input (module doc).
struct Block {
    s: u32,
    dv: usize,
    d: u32,
    /// Where the block starts in the input, in bytes.
    offset: usize,
    /// The block's size in bytes (the output's).
    bytes: usize,
}

/// Which of `keys` (`name.overload`) the kernel call `ins` calls, if any.
fn called_key<'k>(
    plan: fb::ExecutionPlan<'_>,
    ins: fb::Instruction<'_>,
    keys: &[&'k str],
) -> Option<&'k str> {
    let k = ins.instr_args_as_kernel_call()?;
    let ops = plan.operators()?;
    let i = usize::try_from(k.op_index())
        .ok()
        .filter(|&i| i < ops.len())?;
    let op = ops.get(i);
    let (name, overload) = (op.name()?, op.overload().unwrap_or(""));
    keys.iter().copied().find(|key| {
        key.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|o| o == overload)
    })
}

/// Value `v` read as an optional Int at load: `Some(None)` for None, `None` when it is
/// neither, or when an instruction may write it (a kernel call's last argument, any argument
/// of a delegate call: prim ops compute Ints at run time).
fn fixed_int(plan: fb::ExecutionPlan<'_>, values: &[Value<'_>], v: i32) -> Option<Option<i64>> {
    let read = match values.get(usize::try_from(v).ok()?)? {
        Value::Int(i) => Some(*i),
        Value::None => None,
        _ => return None,
    };
    let written = instructions(plan).any(|ins| match ins.instr_args_type() {
        fb::InstructionArguments::KernelCall => ins
            .instr_args_as_kernel_call()
            .and_then(|k| k.args())
            .is_some_and(|a| a.iter().next_back() == Some(v)),
        fb::InstructionArguments::DelegateCall => ins
            .instr_args_as_delegate_call()
            .and_then(|d| d.args())
            .is_some_and(|a| a.iter().any(|x| x == v)),
        _ => true,
    });
    (!written).then_some(read)
}

/// The block a `slice_copy.Tensor` (step 1) or `select_copy.int` call copies, when it is one
/// contiguous run of a static contiguous input into a static contiguous output of the shape
/// the kernel would give it.
fn block_copy(
    plan: fb::ExecutionPlan<'_>,
    ins: fb::Instruction<'_>,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
) -> Option<Block> {
    let select = called_key(plan, ins, &[SLICE, SELECT])? == SELECT;
    let args = ins.instr_args_as_kernel_call()?.args()?;
    // slice: self, dim, start, end, step, out, return; select: self, dim, index, out, return.
    if args.len() != if select { 5 } else { 7 } {
        return None;
    }
    let arg = |i: usize| args.get(i);
    let (Value::Tensor(s), Value::Tensor(d)) = (
        *values.get(usize::try_from(arg(0)).ok()?)?,
        *values.get(usize::try_from(arg(args.len() - 1)).ok()?)?,
    ) else {
        return None;
    };
    let (ts, td) = (tensors.get(s as usize)?, tensors.get(d as usize)?);
    let plain = |t: &TensorSlot| t.dynamism == Dynamism::Static && t.contiguous;
    if s == d || ts.dtype != td.dtype || !plain(ts) || !plain(td) || ts.nbytes() == 0 {
        return None;
    }
    let dims = ts.shape.dims();
    let dim = crate::shape::wrap_dim(fixed_int(plan, values, arg(1))??, dims.len())?;
    let n = *dims.get(dim)?;
    let (start, len) = if select {
        let i = fixed_int(plan, values, arg(2))??;
        let i = if i < 0 { i.checked_add(n as i64)? } else { i };
        (usize::try_from(i).ok().filter(|&i| i < n)?, 1)
    } else {
        if fixed_int(plan, values, arg(4))?? != 1 {
            return None;
        }
        // As the kernel: negative bounds count from the end, then clamp to 0..=n.
        let clamp = |v: i64| {
            let v = if v < 0 { v.saturating_add(n as i64) } else { v };
            v.clamp(0, n as i64) as usize
        };
        let s0 = clamp(fixed_int(plan, values, arg(2))?.unwrap_or(0));
        let e = clamp(fixed_int(plan, values, arg(3))?.unwrap_or(i64::MAX)).max(s0);
        (s0, e - s0)
    };
    // The block is contiguous when every dim before `dim` is 1.
    if dims[..dim].iter().any(|&x| x != 1) || len == 0 {
        return None;
    }
    let inner: usize = dims[dim + 1..].iter().product();
    let mut want = ts.shape;
    want.dims_mut()[dim] = len;
    let same_shape = if select {
        let (a, b) = (td.shape.dims(), dims);
        a.len() + 1 == b.len() && a[..dim] == b[..dim] && a[dim..] == b[dim + 1..]
    } else {
        td.shape.same_dims(&want)
    };
    if !same_shape {
        return None;
    }
    let size = ts.dtype.size();
    Some(Block {
        s,
        dv: usize::try_from(arg(args.len() - 1)).ok()?,
        d,
        offset: start.checked_mul(inner)?.checked_mul(size)?,
        bytes: len.checked_mul(inner)?.checked_mul(size)?,
    })
}

/// Whether a copy from `ts` to `td` writes exactly `ts`'s bytes: one dtype and one non-zero
/// element count, both static and contiguous.
fn same_layout(ts: &TensorSlot, td: &TensorSlot) -> bool {
    ts.dtype == td.dtype
        && ts.dynamism == Dynamism::Static
        && td.dynamism == Dynamism::Static
        && ts.contiguous
        && td.contiguous
        && ts.shape.numel() == td.shape.numel()
        && ts.nbytes() > 0
}

/// Whether the slots themselves allow `D` over `S`'s bytes.
fn slots_allow(ts: &TensorSlot, td: &TensorSlot) -> bool {
    same_layout(ts, td) && storage_allows(ts, td)
}

/// The storage half of [`slots_allow`] (also for slices): `S` has fixed storage holding its
/// data (planned or a constant), `D` is planned and writable, and the two are apart.
fn storage_allows(ts: &TensorSlot, td: &TensorSlot) -> bool {
    ts.nbytes() <= ts.capacity
        && !ts.data.is_null()
        && (ts.planned || !ts.writable)
        && td.planned
        && td.writable
        && !td.data.is_null()
        && !overlap(span(ts), span(td))
}

/// Whether the slots make a copy from `ts` to `td` write nothing new: the same dtype and
/// element count, static and contiguous, at the same address (the bytes it would write are
/// already there).
fn same_bytes(ts: &TensorSlot, td: &TensorSlot) -> bool {
    same_layout(ts, td)
        && ts.nbytes() == td.nbytes()
        && !ts.data.is_null()
        && ts.data == td.data
        && td.planned
        && td.writable
}

/// Value `v` is a method input or output.
fn is_io(plan: fb::ExecutionPlan<'_>, v: usize) -> bool {
    let named = |l: Option<flatbuffers::Vector<'_, i32>>| {
        l.unwrap_or_default()
            .iter()
            .any(|x| usize::try_from(x).ok() == Some(v))
    };
    named(plan.inputs()) || named(plan.outputs())
}

/// Value `v` is state kept between runs (a mutable buffer with data), or not a tensor.
fn is_state(plan: fb::ExecutionPlan<'_>, v: usize) -> bool {
    plan.values()
        .filter(|vs| v < vs.len())
        .and_then(|vs| vs.get(v).val_as_tensor())
        .is_none_or(|t| t.data_buffer_idx() > 0)
}

/// Whether instruction `ins`, a copy of `D` (slot `d`), becomes a copy onto its own bytes
/// once `D` sits at `S`'s (slot `s`): its output has `S`'s address and size, and [`elide`]
/// then removes it as a copy that writes nothing new ([`same_bytes`]).
fn copies_back_onto(t: &Tables<'_, '_, '_>, ins: fb::Instruction<'_>, s: u32, d: u32) -> bool {
    let Some((_, s2, dv2, d2)) = identity_copy(t.plan, ins, t.values) else {
        return false;
    };
    let (Some(ts), Some(td), Some(t2)) = (
        t.tensors.get(s as usize),
        t.tensors.get(d as usize),
        t.tensors.get(d2 as usize),
    ) else {
        return false;
    };
    // D as it will be: S's bytes under D's own shape and dtype.
    let moved = TensorSlot {
        data: ts.data,
        capacity: ts.nbytes(),
        writable: ts.writable,
        ..*td
    };
    s2 == d && same_bytes(&moved, t2) && !is_io(t.plan, dv2) && !is_state(t.plan, dv2)
}

/// Most views of `D` moved along with it.
const MAX_VIEWS: usize = 8;

/// Slots planned inside `D`'s bytes that read as `D` (see [`views_of`]).
type Views = heapless::Vec<u32, MAX_VIEWS>;

/// Slot `v` is named by a value that is a method input or output, or state kept between runs.
fn slot_pinned(plan: fb::ExecutionPlan<'_>, values: &[Value<'_>], v: u32) -> bool {
    values.iter().enumerate().any(|(i, x)| {
        matches!(x, Value::Tensor(t) if *t == v) && (is_io(plan, i) || is_state(plan, i))
    })
}

/// `D`'s views: ExecuTorch plans a view of `D` (a `view_copy` it removed) as another tensor
/// over `D`'s bytes, which a later instruction reads instead of `D`. They move with `D`. A
/// view is a static planned slot other than `d` and `s` inside `D`'s bytes (`d.data ..
/// d.data + size`), not pinned ([`slot_pinned`]), that no instruction writes and that is read,
/// only after the copy at `at` and before another tensor is written over `D`'s bytes (a slot
/// read after that names the new tenant's data). Its reads count as `D`'s in [`provable`].
/// Slots inside `D`'s bytes that do not qualify are not returned: the proof then refuses the
/// copy if they are read while `D`'s bytes live.
fn views_of(t: &Tables<'_, '_, '_>, at: usize, s: u32, d: u32) -> Option<Views> {
    let td = t.tensors.get(d as usize)?;
    let inside = (td.data as usize, td.data as usize + td.nbytes());
    let within = |r: (usize, usize)| r.0 < r.1 && inside.0 <= r.0 && r.1 <= inside.1;
    // The first instruction after the copy that writes another tensor over D's bytes: from
    // there on those bytes hold that tensor's data, and a slot read there is its view.
    let mut end = usize::MAX;
    for (i, ins) in instructions(t.plan).enumerate().skip(at + 1) {
        let named = uses(ins, t.values, t.delegates)?;
        let over = |slot: u32| {
            t.tensors
                .get(slot as usize)
                .is_some_and(|x| overlap(span(x), inside))
        };
        if named.iter().any(|u| u.write && u.slot != d && over(u.slot)) {
            end = i;
            break;
        }
    }
    let mut views = Views::new();
    'slot: for (v, tv) in t.tensors.iter().enumerate() {
        let v = u32::try_from(v).ok()?;
        if v == d
            || v == s
            || !within(span(tv))
            || tv.dynamism != Dynamism::Static
            || !tv.planned
            || slot_pinned(t.plan, t.values, v)
        {
            continue;
        }
        let mut read = false;
        for (i, ins) in instructions(t.plan).enumerate() {
            for u in uses(ins, t.values, t.delegates)?
                .iter()
                .filter(|u| u.slot == v)
            {
                if u.write || i <= at || i >= end {
                    continue 'slot;
                }
                read = true;
            }
        }
        if read && views.push(v).is_err() {
            // More than can be followed: none moves (the proof then keeps the old rule).
            return Some(Views::new());
        }
    }
    Some(views)
}

/// Points `D`'s views at `D`'s new bytes (`new`), at their offsets from `D`'s old ones.
fn move_views(
    tensors: &mut [TensorSlot],
    views: &Views,
    old: *mut u8,
    new: *mut u8,
    writable: bool,
) {
    for &v in views.iter() {
        if let Some(tv) = tensors.get_mut(v as usize) {
            let off = (tv.data as usize).wrapping_sub(old as usize);
            tv.data = new.wrapping_add(off);
            tv.writable = writable;
        }
    }
}

/// Removes `cut` from every piece of `pieces`; `false` when the pieces no longer fit.
fn subtract(pieces: &mut heapless::Vec<(usize, usize), MAX_PIECES>, cut: (usize, usize)) -> bool {
    let mut next: heapless::Vec<(usize, usize), MAX_PIECES> = heapless::Vec::new();
    for &p in pieces.iter() {
        if !overlap(p, cut) {
            if next.push(p).is_err() {
                return false;
            }
            continue;
        }
        for q in [(p.0, cut.0.min(p.1)), (cut.1.max(p.0), p.1)] {
            if q.0 < q.1 && next.push(q).is_err() {
                return false;
            }
        }
    }
    *pieces = next;
    true
}

/// What the proofs read: the plan and the method's tables.
struct Tables<'t, 'a, 'p> {
    plan: fb::ExecutionPlan<'p>,
    values: &'t [Value<'p>],
    tensors: &'t [TensorSlot],
    delegates: &'t [DelegateSlot<'a, 'p>],
}

/// The proof for the copy at instruction `at` from slot `s` to slot `d` (module doc).
/// `block`: `D` takes only these bytes of `S` (a slice), which must then hold still while `D`
/// is read, and the copy-back exemption does not apply; `None`, all of `S`'s bytes (an
/// identity copy). Returns `D`'s views ([`views_of`]), which move with it: their reads count
/// as `D`'s.
fn provable(
    t: &Tables<'_, '_, '_>,
    at: usize,
    s: u32,
    d: u32,
    block: Option<(usize, usize)>,
) -> Option<Views> {
    let Tables {
        plan,
        values,
        tensors,
        delegates,
    } = *t;
    let whole = block.is_none();
    let sr = match block {
        Some(r) => r,
        None => span(tensors.get(s as usize)?),
    };
    let d0 = span(tensors.get(d as usize)?);
    let views = views_of(t, at, s, d)?;
    let is_d = |slot: u32| slot == d || views.contains(&slot);
    // The last instruction reading D; no later instruction may write it.
    let mut last_read = at;
    for (i, ins) in instructions(plan).enumerate().skip(at + 1) {
        for u in uses(ins, values, delegates)?
            .iter()
            .filter(|u| is_d(u.slot))
        {
            if u.write {
                return None;
            }
            last_read = i;
        }
    }
    let mut live: heapless::Vec<(usize, usize), MAX_PIECES> = heapless::Vec::new();
    live.push(d0).ok()?;
    for (i, ins) in instructions(plan).enumerate().skip(at + 1) {
        if i > last_read && live.is_empty() {
            break;
        }
        let named = uses(ins, values, delegates)?;
        for u in named.iter().filter(|u| !is_d(u.slot)) {
            let r = span(tensors.get(u.slot as usize)?);
            if u.read && live.iter().any(|&p| overlap(p, r)) {
                return None;
            }
        }
        for u in named.iter().filter(|u| !is_d(u.slot) && u.write) {
            let r = span(tensors.get(u.slot as usize)?);
            // While D is still to be read, nothing may write S's bytes (D's data now), nor
            // D's own bytes under another name (a view written in place: D would no longer
            // see the change); except a copy of D onto exactly S's bytes, which then writes
            // what is there and is elided itself.
            if i <= last_read
                && (overlap(r, sr) || overlap(r, d0))
                && !(whole && overlap(r, sr) && !overlap(r, d0) && copies_back_onto(t, ins, s, d))
            {
                return None;
            }
            if !subtract(&mut live, r) {
                return None;
            }
        }
    }
    Some(views)
}

/// The proof for moving `S` onto `D`'s bytes instead: `S`'s one writer `p` (before the copy
/// at `at`, not itself elided) then writes them. Returns `p`.
fn provable_onto_output(
    t: &Tables<'_, '_, '_>,
    at: usize,
    s: u32,
    d: u32,
    proved: &[Proof],
) -> Option<usize> {
    let Tables {
        plan,
        values,
        tensors,
        delegates,
    } = *t;
    let sr = span(tensors.get(s as usize)?);
    let d0 = span(tensors.get(d as usize)?);
    // S's one writer, before the copy, which does not read it; S's last read.
    let (mut writer, mut last_read) = (None, at);
    for (i, ins) in instructions(plan).enumerate() {
        for u in uses(ins, values, delegates)?.iter().filter(|u| u.slot == s) {
            if u.write {
                if writer.is_some() || u.read || i >= at {
                    return None;
                }
                writer = Some(i);
            } else if i > at {
                last_read = i;
            }
        }
    }
    let p = writer?;
    if proved.get(p).is_none_or(|x| x.elided()) {
        return None;
    }
    let mut live: heapless::Vec<(usize, usize), MAX_PIECES> = heapless::Vec::new();
    live.push(sr).ok()?;
    for (i, ins) in instructions(plan).enumerate().skip(p) {
        if i == at || proved.get(i).is_some_and(|x| x.elided()) {
            continue;
        }
        if i > last_read && live.is_empty() {
            break;
        }
        let named = uses(ins, values, delegates)?;
        for u in named.iter().filter(|u| u.slot != s) {
            let r = span(tensors.get(u.slot as usize)?);
            // From S's writer to the copy nothing else may touch D's bytes; up to S's last
            // read nothing may write them (D itself included).
            if overlap(r, d0) && (i < at || (u.write && i <= last_read)) {
                return None;
            }
            if i > p && u.slot != d && u.read && live.iter().any(|&q| overlap(q, r)) {
                return None;
            }
        }
        if i > p {
            for u in named.iter().filter(|u| u.slot != s && u.write) {
                if !subtract(&mut live, span(tensors.get(u.slot as usize)?)) {
                    return None;
                }
            }
        }
    }
    Some(p)
}

/// Points a contiguous slice's output at its block of the input when the proof holds
/// (module doc); `true` when it did.
fn elide_block(
    plan: fb::ExecutionPlan<'_>,
    ins: fb::Instruction<'_>,
    values: &[Value<'_>],
    tensors: &mut [TensorSlot],
    delegates: &[DelegateSlot<'_, '_>],
    at: usize,
) -> bool {
    let Some(b) = block_copy(plan, ins, values, tensors) else {
        return false;
    };
    let (Some(&ts), Some(&td)) = (tensors.get(b.s as usize), tensors.get(b.d as usize)) else {
        return false;
    };
    let fits = b
        .offset
        .checked_add(b.bytes)
        .is_some_and(|e| e <= ts.nbytes());
    let allowed = fits
        && b.bytes == td.nbytes()
        && storage_allows(&ts, &td)
        && !is_io(plan, b.dv)
        && !is_state(plan, b.dv);
    let t = Tables {
        plan,
        values,
        tensors,
        delegates,
    };
    // Inside the input's bytes when `allowed` (`fits`: offset + bytes <= its size).
    let at_block = ts.data.wrapping_add(b.offset);
    let block = (at_block as usize, (at_block as usize).wrapping_add(b.bytes));
    let Some(views) = allowed
        .then(|| provable(&t, at, b.s, b.d, Some(block)))
        .flatten()
    else {
        return false;
    };
    move_views(tensors, &views, td.data, at_block, ts.writable);
    let Some(out) = tensors.get_mut(b.d as usize) else {
        return false;
    };
    out.data = at_block;
    out.capacity = b.bytes;
    out.writable = ts.writable;
    true
}

/// Where an elided copy's two tensors end up.
enum Place {
    /// The output already has the input's address and size.
    Already,
    /// The output moves onto the input's bytes, with its views.
    OutputOnInput(Views),
    /// The input moves onto the output's bytes (its one writer writes there).
    InputOnOutput,
}

/// Elides every identity copy the proof allows: points the output slot at the input's bytes
/// and marks the call in `proved` ([`Proof::ELIDED`]). Returns how many were elided. Must run
/// before `exec::alias::prove` (which sees the moved slots) and after the delegates' `init`
/// (whose argument use it asks).
pub fn elide(
    plan: fb::ExecutionPlan<'_>,
    values: &[Value<'_>],
    tensors: &mut [TensorSlot],
    delegates: &[DelegateSlot<'_, '_>],
    proved: &mut [Proof],
) -> usize {
    let fixed = instructions(plan).all(|i| {
        matches!(
            i.instr_args_type(),
            fb::InstructionArguments::KernelCall | fb::InstructionArguments::DelegateCall
        )
    });
    if !fixed {
        return 0;
    }
    let io = |v: usize| is_io(plan, v);
    let state = |v: usize| is_state(plan, v);
    let mut elided = 0;
    for (at, ins) in instructions(plan).enumerate() {
        // Calls folded at load (`exec::fold`) no longer run.
        if proved.get(at).is_some_and(|p| p.elided()) {
            continue;
        }
        let Some((sv, s, dv, d)) = identity_copy(plan, ins, values) else {
            if at < proved.len() && elide_block(plan, ins, values, tensors, delegates, at) {
                proved[at] = Proof::ELIDED;
                elided += 1;
            }
            continue;
        };
        if at >= proved.len() || io(dv) || state(dv) {
            continue;
        }
        let place = {
            let (Some(ts), Some(td)) = (tensors.get(s as usize), tensors.get(d as usize)) else {
                continue;
            };
            let t = Tables {
                plan,
                values,
                tensors,
                delegates,
            };
            if same_bytes(ts, td) {
                // Already in place (ExecuTorch planned D over S's bytes, or an earlier
                // elision moved S there): the copy would write what is there.
                Place::Already
            } else if !slots_allow(ts, td) {
                continue;
            } else if let Some(views) = provable(&t, at, s, d, None) {
                Place::OutputOnInput(views)
            } else if ts.planned
                && ts.writable
                && !io(sv)
                && !state(sv)
                && provable_onto_output(&t, at, s, d, proved).is_some()
            {
                Place::InputOnOutput
            } else {
                continue;
            }
        };
        let (ts, td) = (tensors[s as usize], tensors[d as usize]);
        match place {
            Place::Already => {}
            Place::OutputOnInput(views) => {
                move_views(tensors, &views, td.data, ts.data, ts.writable);
                let out = &mut tensors[d as usize];
                out.data = ts.data;
                out.capacity = ts.nbytes();
                out.writable = ts.writable;
            }
            Place::InputOnOutput => {
                let input = &mut tensors[s as usize];
                input.data = td.data;
                input.capacity = td.nbytes();
            }
        }
        proved[at] = Proof::ELIDED;
        elided += 1;
    }
    elided
}
