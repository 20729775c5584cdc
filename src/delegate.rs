//! Backend registry for `DelegateCall` regions.
//!
//! A backend validates its payload when the method is loaded (reporting how much metadata and
//! scratch it needs, so that [`crate::MethodMeta`] can size buffers before loading) and then
//! executes the region over the call's arguments: inputs first, then outputs.

use crate::error::KernelError;
use crate::format::Program;
use crate::kernels::KernelCtx;

/// Everything a backend gets at load time for one delegate.
pub struct DelegateInit<'p> {
    pub program: Program<'p>,
    /// The processed payload bytes (inline or from a segment), borrowed from the program.
    pub payload: &'p [u8],
    /// `BackendDelegate` index in the execution plan.
    pub index: usize,
}

/// A delegate backend (`BackendDelegate.id`).
pub trait Backend: Sync {
    /// The id programs use, e.g. `XnnpackBackend`.
    fn id(&self) -> &'static str;

    /// Validates the payload; returns the scratch bytes one execution needs.
    fn prepare(&self, init: &DelegateInit<'_>) -> Result<usize, KernelError>;

    /// Runs the region. `ctx` holds the DelegateCall arguments; `payload` is the same slice
    /// `prepare` validated.
    fn execute(
        &self,
        payload: &[u8],
        program: &Program<'_>,
        ctx: &mut KernelCtx<'_, '_, '_>,
    ) -> Result<(), KernelError>;
}
