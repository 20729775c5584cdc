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
    for (d, p) in decoded.iter_mut().zip(proved) {
        if p.elided() || !p.proved() {
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
