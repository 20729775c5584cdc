//! Backend registry for `DelegateCall` regions.
//!
//! A backend validates its payload when the method's [`crate::MethodMeta`] is computed and
//! reports how much memory it needs: `state` bytes (its translated plan, kept for the method's
//! lifetime in the metadata buffer) and `scratch` bytes (intermediates of one execution, shared
//! with kernel scratch). At load it writes its plan into the state area; at run time it
//! executes over the call's arguments: inputs first, then outputs.

use crate::error::KernelError;
use crate::format::Program;
use crate::kernels::KernelCtx;

/// Everything a backend gets at load time for one delegate.
#[derive(Clone, Copy)]
pub struct DelegateInit<'p> {
    pub program: Program<'p>,
    /// The processed payload bytes (inline or from a segment), borrowed from the program.
    pub payload: &'p [u8],
    /// `BackendDelegate` index in the execution plan.
    pub index: usize,
}

/// Memory a delegate needs, known before loading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// Bytes of translated plan kept per delegate (16-byte aligned area).
    pub state: usize,
    /// Bytes of scratch one execution needs (16-byte aligned area, shared).
    pub scratch: usize,
}

/// A delegate backend (`BackendDelegate.id`).
pub trait Backend: Sync {
    /// The id programs use, e.g. `XnnpackBackend`.
    fn id(&self) -> &'static str;

    /// Validates the payload and reports its memory needs. Must be deterministic.
    fn prepare(&self, init: &DelegateInit<'_>) -> Result<Requirements, KernelError>;

    /// Writes the translated plan into `state` (`prepare().state` bytes, 16-byte aligned).
    fn init(&self, init: &DelegateInit<'_>, state: &mut [u8]) -> Result<(), KernelError>;

    /// Runs the region. `ctx` holds the DelegateCall arguments (its scratch is at least
    /// `prepare().scratch` bytes); `state` is what `init` wrote.
    fn execute(
        &self,
        init: &DelegateInit<'_>,
        state: &[u8],
        ctx: &mut KernelCtx<'_, '_, '_>,
    ) -> Result<(), KernelError>;
}

pub mod xnnpack;
