//! Load-time proof that a call's outputs cannot alias its other arguments, so the per-call
//! check in `KernelCtx::output` (every output against every argument's data range) runs once
//! per method load instead of once per call.
//!
//! A call is proved when, with the storage [`crate::exec::values::fill`] gave every tensor:
//! - each tensor it names has fixed storage (planned or constant) or none at all;
//! - distinct tensors it names have disjoint byte ranges, counted at their capacity (what a
//!   dynamic-bound tensor may grow to);
//! - a tensor is named at most once outside the last argument (a kernel call's return: the
//!   `out` tensor or list of outs repeated). A delegate call has no such exception.
//!
//! Nothing is proved in a method with `MoveCall`s or `FreeCall`s (they change what a value
//! holds while the method runs). Calls not proved keep the run-time check.
//!
//! A proof is a [`Proof`]: besides "proved", it keeps the argument positions whose tensor is
//! named at another position too (an `out` and its return, an in-place `self` and its return).
//! For those the run-time rule that an output may not be a tensor the kernel already read
//! under another argument is still applied, from the mask alone (no range comparisons).

use crate::format::fb;
pub use crate::kernel_api::AliasProof as Proof;
use crate::kernel_api::{TensorSlot, Value};

/// The capacity range of slot `s` (empty when it has no storage).
fn span(t: &TensorSlot) -> (usize, usize) {
    if t.data.is_null() || t.capacity == 0 {
        (0, 0)
    } else {
        (t.data as usize, t.data as usize + t.capacity)
    }
}

/// Sets `proved[i]` for every call (numbered across chains in order).
pub fn prove(
    plan: fb::ExecutionPlan<'_>,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
    proved: &mut [Proof],
) {
    // Calls `exec::elide` removed keep their mark; every other starts unproved.
    proved
        .iter_mut()
        .filter(|p| !p.elided())
        .for_each(|p| *p = Proof::NONE);
    let chains = plan.chains().unwrap_or_default();
    let dynamic_values = chains.iter().any(|c| {
        c.instructions().unwrap_or_default().iter().any(|i| {
            matches!(
                i.instr_args_type(),
                fb::InstructionArguments::MoveCall | fb::InstructionArguments::FreeCall
            )
        })
    });
    if dynamic_values {
        return;
    }
    let mut at = 0usize;
    for c in chains.iter() {
        for ins in c.instructions().unwrap_or_default().iter() {
            let (args, kernel) = match ins.instr_args_type() {
                fb::InstructionArguments::KernelCall => {
                    (ins.instr_args_as_kernel_call().and_then(|k| k.args()), true)
                }
                fb::InstructionArguments::DelegateCall => (
                    ins.instr_args_as_delegate_call().and_then(|d| d.args()),
                    false,
                ),
                _ => (None, false),
            };
            if let (Some(args), Some(slot)) = (args, proved.get_mut(at)) {
                if slot.elided() {
                    at += 1;
                    continue;
                }
                *slot = call_is_proved(args, kernel, values, tensors);
            }
            at += 1;
        }
    }
}

/// Most tensors one call may name for the proof (more: not proved, checked at run time).
const MAX_NAMED: usize = 64;

fn call_is_proved(
    args: flatbuffers::Vector<'_, i32>,
    kernel: bool,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
) -> Proof {
    match check(args, kernel, values, tensors) {
        Some(shared) => Proof::proved_with(shared),
        None => Proof::NONE,
    }
}

/// `Some(positions sharing a tensor)` when the call is proved.
fn check(
    args: flatbuffers::Vector<'_, i32>,
    kernel: bool,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
) -> Option<u64> {
    let last = args.len().checked_sub(1);
    // (slot, outside the return argument, position)
    let mut named: heapless::Vec<(u32, bool, usize), MAX_NAMED> = heapless::Vec::new();
    for (pos, v) in args.iter().enumerate() {
        let outside = !(kernel && Some(pos) == last);
        let value = usize::try_from(v).ok().and_then(|v| values.get(v))?;
        let mut add = |s: u32| named.push((s, outside, pos)).is_ok();
        let ok = match *value {
            Value::Tensor(s) => add(s),
            Value::TensorList(items) | Value::OptTensorList(items) => items.iter().all(|i| {
                i < 0
                    || match usize::try_from(i).ok().and_then(|i| values.get(i)) {
                        Some(Value::Tensor(s)) => add(*s),
                        Some(_) => true,
                        None => false,
                    }
            }),
            _ => true,
        };
        if !ok {
            return None;
        }
    }
    let mut shared = 0u64;
    for (i, &(s, outside, pos)) in named.iter().enumerate() {
        let t = tensors.get(s as usize)?;
        // Storage fixed at load: planned, or a constant. (An unplanned tensor may be bound
        // to other bytes while the method runs, e.g. by `et_view`.)
        if !t.planned && (t.data.is_null() || t.writable) {
            return None;
        }
        let (lo, hi) = span(t);
        for &(s2, outside2, pos2) in &named[i + 1..] {
            if s2 == s {
                if (outside && outside2) || pos >= 62 || pos2 >= 62 {
                    return None;
                }
                if pos != pos2 {
                    shared |= (1 << pos) | (1 << pos2);
                }
                continue;
            }
            let t2 = tensors.get(s2 as usize)?;
            let (l2, h2) = span(t2);
            if lo < hi && l2 < h2 && lo < h2 && l2 < hi {
                return None;
            }
        }
    }
    Some(shared)
}
