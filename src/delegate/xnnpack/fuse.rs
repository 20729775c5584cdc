//! Runs of elementwise nodes run as one parallel step. A chain such as GPT-2's tanh GELU
//! (seven multiplies, adds and a tanh over the same `[rows, 4·hidden]` elements) otherwise
//! costs one fork and join and one node's set-up per node; as a run, each core takes a range
//! of elements and passes it through every node of the run in order.
//!
//! [`mark`] finds the runs at load and records each run's length in its first node's record
//! ([`Step::fused`]); `execute_plan` runs them with [`run_part`]. A run is consecutive f32
//! `Binary`/`Unary` nodes whose outputs all have the same element count `n` (at least
//! [`MIN_ELEMENTS`]), each operand either `n` elements (read at the same positions as the
//! output is written) or one (a scalar), in a region that does not run in row chunks. A value
//! a node of the run writes must not share storage with any value the run reads or writes,
//! except one that is that very storage, element for element (the planner reusing a value's
//! bytes for a later one in the run): then a range of elements is only ever touched by the
//! core that owns that range. Parts are whole units of [`run::CHUNK`] elements, as each
//! node's own split is, so every element goes through the same code (vector body or tail) as
//! when the nodes run one by one: the same bits.

use super::graph::{Binary, Op, Unary};
use super::plan::{Loc, DT_F32, KIND_CONSTANT, KIND_EXTERNAL_IN, KIND_EXTERNAL_OUT, KIND_INTERNAL};
use super::run;
use super::step::Step;

/// Most nodes in one run.
pub const MAX_RUN: usize = 16;
/// Fewest output elements for a run: below this a node's own call is cheap enough.
pub const MIN_ELEMENTS: usize = 2 * run::CHUNK;

/// The elementwise operation of a node of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elem {
    Binary(Binary),
    Unary(Unary),
}

/// `(operation, operands, operand count, output)` of an elementwise node.
pub fn elementwise(op: &Op) -> Option<(Elem, [u32; 2], usize, u32)> {
    match *op {
        Op::Binary { op, a, b, out } => Some((Elem::Binary(op), [a, b], 2, out)),
        Op::Unary { op, x, out } => Some((Elem::Unary(op), [x, x], 1, out)),
        _ => None,
    }
}

/// The byte range of value `l` in its storage, and which storage (internal scratch, an
/// argument, the program's constants); `None` for a value this pass does not handle.
fn storage(l: &Loc) -> Option<(u32, u32, u64, u64)> {
    let bytes = l.numel.checked_mul(4)?;
    match l.kind {
        KIND_INTERNAL => Some((KIND_INTERNAL, 0, l.offset, l.offset.checked_add(bytes)?)),
        // Arguments: each its own tensor (an output overlaps no input: `KernelCtx`).
        KIND_EXTERNAL_IN | KIND_EXTERNAL_OUT => Some((l.kind, l.ext, 0, bytes)),
        KIND_CONSTANT => Some((KIND_CONSTANT, 0, l.offset, l.offset.checked_add(bytes)?)),
        _ => None,
    }
}

/// Whether writing `w` while the run reads or writes `o` is safe split by element ranges:
/// different storage, disjoint bytes, or the very same elements.
fn apart_or_same(w: (u32, u32, u64, u64), o: (u32, u32, u64, u64)) -> bool {
    let same_store = (w.0, w.1) == (o.0, o.1)
        || (w.0 == KIND_EXTERNAL_IN && o.0 == KIND_EXTERNAL_OUT && w.1 == o.1)
        || (w.0 == KIND_EXTERNAL_OUT && o.0 == KIND_EXTERNAL_IN && w.1 == o.1);
    !same_store || w.3 <= o.2 || o.3 <= w.2 || (w.2, w.3) == (o.2, o.3)
}

/// Marks the runs of `steps` (see the module documentation); `chunks`: the region's row
/// chunks (a chunked region fuses nothing).
pub fn mark(steps: &mut [Step], locs: &[Loc], chunks: usize) {
    if chunks != 1 {
        return;
    }
    let node = |s: &Step| -> Option<(Elem, [u32; 2], usize, u32, usize)> {
        let (op, _) = s.op().ok()?;
        let (e, ins, n_in, out) = elementwise(&op)?;
        let lo = locs.get(out as usize)?;
        let n = lo.numel as usize;
        let ok = |id: u32| {
            locs.get(id as usize)
                .is_some_and(|l| l.dt == DT_F32 && (l.numel as usize == n || l.numel == 1))
        };
        let full = ins[..n_in]
            .iter()
            .any(|&i| locs.get(i as usize).is_some_and(|l| l.numel as usize == n));
        (lo.dt == DT_F32 && n >= MIN_ELEMENTS && full && ins[..n_in].iter().all(|&i| ok(i)))
            .then_some((e, ins, n_in, out, n))
    };
    let mut i = 0;
    while i < steps.len() {
        let Some((_, _, _, _, n)) = node(&steps[i]) else {
            i += 1;
            continue;
        };
        // Grow the run while the next node fits and its storage is apart from the run's.
        let mut len = 1;
        while i + len < steps.len() && len < MAX_RUN {
            let Some((_, _, _, _, n2)) = node(&steps[i + len]) else {
                break;
            };
            if n2 != n || !storage_apart(&steps[i..=i + len], locs) {
                break;
            }
            len += 1;
        }
        if len >= 2 {
            steps[i].set_fused(len);
        }
        i += len;
    }
}

/// Whether every value the nodes `run` write is apart from (or the same elements as) every
/// value they read or write.
fn storage_apart(run: &[Step], locs: &[Loc]) -> bool {
    let mut written = heapless::Vec::<(u32, u32, u64, u64), MAX_RUN>::new();
    let mut all = heapless::Vec::<(u32, u32, u64, u64), { 3 * MAX_RUN }>::new();
    for s in run {
        let Some((_, ins, n_in, out)) = s.op().ok().and_then(|(op, _)| elementwise(&op)) else {
            return false;
        };
        for id in ins[..n_in].iter().chain([&out]) {
            let Some(st) = locs.get(*id as usize).and_then(storage) else {
                return false;
            };
            if all.push(st).is_err() {
                return false;
            }
        }
        let Some(st) = locs.get(out as usize).and_then(storage) else {
            return false;
        };
        if written.push(st).is_err() {
            return false;
        }
    }
    written
        .iter()
        .all(|&w| all.iter().all(|&o| apart_or_same(w, o)))
}

/// One node of a run, bound: its operation, operands (pointer, elements: the run's `n`, or 1
/// for a scalar) and output (`n` elements), and its clamp.
#[derive(Clone, Copy)]
pub struct Bound {
    pub elem: Elem,
    pub a: (*const f32, usize),
    pub b: (*const f32, usize),
    pub out: *mut f32,
    pub clamp: Option<(f32, f32)>,
}

/// Elements `e0 .. e1` of every node of a run, in order.
///
/// # Safety
/// Each node's pointers hold its operands' and output's elements (`n` ≥ `e1`, or one for a
/// scalar operand), as `mark` checked its storage: no other thread reads or writes elements
/// `e0 .. e1` of any value of the run, and the scalars are not written by the run.
pub unsafe fn run_part(nodes: &[Bound], e0: usize, e1: usize) {
    let len = e1 - e0;
    for b in nodes {
        // SAFETY: per this function's contract: this part's elements of the output, written
        // by this node alone, and not aliasing an operand of the same node (the planner keeps
        // a node's inputs and output apart).
        let out = unsafe { core::slice::from_raw_parts_mut(b.out.add(e0), len) };
        // A scalar operand (one element) or this part's elements of a full one.
        // SAFETY: as above; read only.
        let operand = |(p, n): (*const f32, usize)| unsafe {
            if n == 1 {
                Err(*p)
            } else {
                Ok(core::slice::from_raw_parts(p.add(e0), len))
            }
        };
        match b.elem {
            Elem::Binary(op) => match (operand(b.a), operand(b.b)) {
                (Ok(x), Ok(y)) => run::zip_with_part(op, x, y, out),
                (Ok(x), Err(s)) => run::zip_scalar_part(op, x, s, false, out),
                (Err(s), Ok(y)) => run::zip_scalar_part(op, y, s, true, out),
                // `mark` requires a full operand: two scalars make no run.
                (Err(_), Err(_)) => {}
            },
            Elem::Unary(op) => {
                if let Ok(x) = operand(b.a) {
                    run::unary_part(op, x, out);
                }
            }
        }
        if let Some((lo, hi)) = b.clamp {
            run::clamp_part(out, lo, hi);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Storage a run may write: other storage, disjoint bytes, or the very same elements; a
    /// partial overlap (a range one core writes that another core's range reads) is refused.
    #[test]
    fn written_values_are_apart_or_the_same_elements() {
        let internal = |lo: u64, hi: u64| (KIND_INTERNAL, 0, lo, hi);
        assert!(apart_or_same(internal(0, 64), internal(64, 128)));
        assert!(apart_or_same(internal(64, 128), internal(0, 64)));
        assert!(apart_or_same(internal(0, 64), internal(0, 64)));
        assert!(!apart_or_same(internal(0, 64), internal(32, 96)));
        assert!(
            !apart_or_same(internal(0, 64), internal(0, 4)),
            "a scalar in the bytes"
        );
        // Arguments: each its own tensor, whatever the offsets; an argument read and written
        // through its input and output entries is the same storage.
        let arg = |kind: u32, ext: u32| (kind, ext, 0, 256);
        assert!(apart_or_same(
            arg(KIND_EXTERNAL_OUT, 1),
            arg(KIND_EXTERNAL_IN, 0)
        ));
        assert!(apart_or_same(arg(KIND_EXTERNAL_OUT, 1), internal(0, 256)));
        assert!(apart_or_same(
            arg(KIND_EXTERNAL_OUT, 1),
            arg(KIND_EXTERNAL_IN, 1)
        ));
        assert!(!apart_or_same(
            (KIND_EXTERNAL_OUT, 1, 0, 256),
            (KIND_EXTERNAL_IN, 1, 128, 132)
        ));
    }
}
