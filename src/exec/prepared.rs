//! Kernel calls prepared at load. A kernel may offer a preparation
//! ([`KernelDef::with_prepare`](crate::kernel_api::KernelDef::with_prepare)); for each of its
//! calls whose outputs were proved not to alias any other argument (`exec::alias`; the
//! preparation sees the proof and refuses an input that is also the output), loading asks it
//! once what the call will do, and the instruction loop then runs that
//! [`Prepared`](crate::kernel_api::Prepared) record instead of the kernel: no context, no
//! argument decoding, no per-argument checks beyond what may change after load (data bound,
//! shapes). A transformer's residual adds and layer norms run this way, several per layer.

use super::alias::Proof;
use super::decoded::{Decoded, Kind};
use crate::kernel_api::{KernelCtx, PrepareFn, TensorSlot, Value};

/// Fills `prepared` of every kernel call in `decoded` whose operator's kernel has a
/// preparation (`prepares`, by operator index) and that preparation takes the call.
pub fn prepare<'p>(
    values: &mut [Value<'p>],
    tensors: &mut [TensorSlot],
    prepares: &[Option<PrepareFn>],
    proved: &[Proof],
    decoded: &mut [Decoded<'p>],
) {
    for (d, p) in decoded.iter_mut().zip(proved) {
        if d.kind != Kind::Kernel || p.elided() || !p.proved() {
            continue;
        }
        let Some(Some(f)) = prepares.get(d.index as usize) else {
            continue;
        };
        let ctx = KernelCtx::new(values, tensors, d.args, &mut []).with_alias_proof(*p);
        d.prepared = f(&ctx);
    }
}
