//! Delegate backends for `DelegateCall` regions: the [`Backend`] contract, resolved slots, and
//! the backends ptera ships (`xnnpack/` for ExecuTorch's XNNPACK payloads, `ptera/` for the
//! regions `xtask lower` writes).
//!
//! A backend validates its payload when the method's [`crate::MethodMeta`] is computed and
//! reports how much memory it needs: `state` bytes (its translated plan, kept for the method's
//! lifetime in the metadata buffer) and `scratch` bytes (intermediates of one execution, shared
//! with kernel scratch). At load it writes its plan into the state area; at run time it
//! executes over the call's arguments: inputs first, then outputs.

use crate::error::{self, Error, KernelError};
use crate::format::Program;
use crate::kernel_api::{KernelCtx, Prepared};

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

    /// A load-time look at one DelegateCall of this delegate (after `init`): given the call's
    /// context as loading left it (every tensor's dtype, shape and dynamism known, no data
    /// read), the tensors the call binds, decided once ([`Prepared`] without a runner), or
    /// `None`. The record reaches `execute` through [`KernelCtx::prepared`]; `execute` must
    /// still check what may change after load (shapes, bound data) and otherwise take its
    /// general path. Called only for calls whose outputs were proved not to alias any other
    /// argument (`exec::alias`); an input also named as the output
    /// ([`KernelCtx::named_elsewhere`]) must be refused. The default prepares nothing.
    fn prepare_call(
        &self,
        init: &DelegateInit<'_>,
        state: &[u8],
        ctx: &KernelCtx<'_, '_, '_>,
    ) -> Option<Prepared> {
        let _ = (init, state, ctx);
        None
    }

    /// What the region does with DelegateCall argument `arg`, for the load-time analyses
    /// (`exec::elide`); `state` is what `init` wrote. The default says it may read and write
    /// every argument, which is always safe; a backend that knows its inputs and outputs
    /// says so and lets more of the program be simplified.
    fn arg_access(&self, init: &DelegateInit<'_>, state: &[u8], arg: usize) -> ArgAccess {
        let _ = (init, state, arg);
        ArgAccess::ReadWrite
    }
}

/// How a delegate region uses one of its call's arguments ([`Backend::arg_access`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgAccess {
    /// Neither read nor written (an argument no value of the region names).
    Unused,
    /// Only read.
    Read,
    /// Only written (every byte of it: an output).
    Write,
    /// May be read and written.
    ReadWrite,
}

impl ArgAccess {
    /// The access of an argument that is `read` and/or `written`.
    pub fn of(read: bool, written: bool) -> ArgAccess {
        match (read, written) {
            (false, false) => ArgAccess::Unused,
            (true, false) => ArgAccess::Read,
            (false, true) => ArgAccess::Write,
            (true, true) => ArgAccess::ReadWrite,
        }
    }
}

/// A resolved delegate of a loaded method: its backend, payload and translated plan.
#[derive(Clone, Copy)]
pub struct DelegateSlot<'a, 'p> {
    pub backend: &'a dyn Backend,
    pub init: DelegateInit<'p>,
    /// The backend's translated plan (in the metadata buffer).
    pub state: &'a [u8],
}

impl<'a, 'p> DelegateSlot<'a, 'p> {
    /// A slot not resolved yet (fills the slot table before each delegate is initialised;
    /// executing it is an error, never undefined).
    pub fn unresolved(program: Program<'p>) -> DelegateSlot<'a, 'p> {
        DelegateSlot {
            backend: &Unresolved,
            init: DelegateInit {
                program,
                payload: &[],
                index: 0,
            },
            state: &[],
        }
    }
}

/// The backend of an unresolved slot: refuses everything.
struct Unresolved;

impl Backend for Unresolved {
    fn id(&self) -> &'static str {
        "<unresolved>"
    }
    fn prepare(&self, _: &DelegateInit<'_>) -> Result<Requirements, KernelError> {
        Err(KernelError::Unsupported {
            detail: "unresolved delegate",
        })
    }
    fn init(&self, _: &DelegateInit<'_>, _: &mut [u8]) -> Result<(), KernelError> {
        Err(KernelError::Unsupported {
            detail: "unresolved delegate",
        })
    }
    fn execute(
        &self,
        _: &DelegateInit<'_>,
        _: &[u8],
        _: &mut KernelCtx<'_, '_, '_>,
    ) -> Result<(), KernelError> {
        Err(KernelError::Unsupported {
            detail: "unresolved delegate",
        })
    }
}

/// Wraps a backend's load-time error with the delegate index and backend id.
pub fn init_error(d: usize, backend: &str, e: KernelError) -> Error {
    let mut detail = error::Name::new();
    let _ = core::fmt::write(&mut detail, format_args!("{e}"));
    Error::DelegateInit {
        delegate: d,
        backend: error::name(backend),
        detail,
    }
}

pub mod ptera;
pub mod xnnpack;
