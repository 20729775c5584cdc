//! Kernel calls prepared at load. A kernel may offer a preparation
//! ([`KernelDef::with_prepare`](crate::kernel_api::KernelDef::with_prepare)); for each of its
//! calls whose outputs were proved not to alias any other argument (`exec::alias`; the
//! preparation sees the proof and refuses an input that is also the output), loading asks it
//! once what the call will do, and the instruction loop then runs that
//! [`Prepared`](crate::kernel_api::Prepared) record instead of the kernel: no context, no
//! argument decoding, no per-argument checks beyond what may change after load (data bound,
//! shapes). A transformer's residual adds, layer norms and matrix products (`addmm`, `mm`,
//! `bmm`) run this way, several per layer. A runner gets the method's kernel scratch.
//!
//! A delegate call is offered to its backend the same way
//! ([`Backend::prepare_call`](crate::delegate::Backend::prepare_call)): its record names the
//! tensors the call binds, and the backend's `execute` binds them from it instead of decoding
//! its arguments (ptera's own one-product regions).

use super::alias::Proof;
use super::decoded::{Decoded, Kind};
use crate::delegate::DelegateSlot;
use crate::kernel_api::{KernelCtx, PrepareFn, TensorSlot, Value};

/// Run-time-written values the check of the preparations' arguments keeps.
const MAX_WRITTEN: usize = 256;

/// Fills `prepared` of every kernel call in `decoded` whose operator's kernel has a
/// preparation (`prepares`, by operator index) and that preparation takes the call, and of
/// every delegate call its backend prepares (`delegates`, by delegate index).
pub fn prepare<'p>(
    values: &mut [Value<'p>],
    tensors: &mut [TensorSlot],
    prepares: &[Option<PrepareFn>],
    delegates: &[DelegateSlot<'_, 'p>],
    proved: &[Proof],
    decoded: &mut [Decoded<'p>],
) {
    // Non-tensor values a call writes as the method runs (a primitive operator's result:
    // `sym_size`, arithmetic on sizes): a preparation reads its arguments at load, so a call
    // that reads one of these (or an Int list holding one) stays on the general path. More of
    // them than this list keeps: no call with a non-tensor argument is prepared.
    let mut written: heapless::Vec<i64, MAX_WRITTEN> = heapless::Vec::new();
    let mut all_known = true;
    for d in decoded.iter().filter(|d| d.kind == Kind::Kernel) {
        let Some(&last) = d.args.last() else { continue };
        if !matches!(
            values.get(last as usize),
            Some(Value::Tensor(_) | Value::TensorList(_) | Value::OptTensorList(_))
        ) {
            all_known &= written.push(last as i64).is_ok();
        }
    }
    for (d, p) in decoded.iter_mut().zip(proved) {
        let stale = (!written.is_empty() || !all_known)
            && reads_written(values, d.args, all_known.then_some(&written[..]));
        if p.elided() || !p.proved() || stale {
            continue;
        }
        // The call's row demand (`exec::demand`), for a preparation that computes whole
        // outputs to refuse a call whose rows are restricted.
        let rows = d
            .rows
            .map(|(v, lo, hi)| (v as usize, lo as usize, hi as usize));
        let ctx = KernelCtx::new(values, tensors, d.args, &mut [])
            .with_alias_proof(*p)
            .with_rows(rows);
        d.prepared = match d.kind {
            Kind::Kernel => match prepares.get(d.index as usize) {
                Some(Some(f)) => f(&ctx),
                _ => None,
            },
            Kind::Delegate => delegates
                .get(d.index as usize)
                .and_then(|s| s.backend.prepare_call(&s.init, s.state, &ctx)),
            Kind::Other => None,
        };
    }
}

/// Whether a call with arguments `args` (its last one its result) reads a non-tensor value in
/// `written` (`None`: any non-tensor value counts), directly or as an item of an Int list.
fn reads_written(values: &[Value<'_>], args: &[i32], written: Option<&[i64]>) -> bool {
    let hit = |v: i64| written.is_none_or(|w| w.contains(&v));
    args.iter()
        .rev()
        .skip(1)
        .any(|&a| match values.get(a as usize) {
            Some(Value::Tensor(_) | Value::TensorList(_) | Value::OptTensorList(_)) => false,
            Some(Value::IntList(items)) => items.iter().any(hit),
            _ => hit(a as i64),
        })
}
