//! What kernels and delegate backends are written against: the calling convention.
//!
//! A kernel is a plain function over a [`KernelCtx`], which gives typed, checked access to the
//! instruction's arguments in ExecuTorch's order (schema arguments, then the appended return;
//! see `notes/pte-format.md` 3.4). Kernels never allocate: outputs are preallocated planned
//! tensors that [`KernelCtx::output`] resizes, and temporary space comes from a fixed scratch
//! area whose size each [`KernelDef`] declares. The runtime values a context reads
//! ([`Value`], [`TensorSlot`]) live in the method's metadata buffer.

mod ctx;
mod prepared;
mod value;

pub use ctx::{f32_scratch, AliasProof, IntList, KernelCtx, Observer, MAX_LIST};
pub use prepared::{Prepared, PreparedFn};
pub use value::{Dynamism, TensorSlot, Value};

use crate::error::KernelError;

/// Signature of every kernel.
pub type KernelFn = fn(&mut KernelCtx<'_, '_, '_>) -> Result<(), KernelError>;

/// A kernel's load-time look at one call ([`KernelDef::with_prepare`]): given the call's
/// context as loading left it (every tensor's dtype, shape and dynamism known, no data read),
/// the work the call will do each time it runs, or `None` for the general path. Called only
/// for calls whose outputs were proved not to alias any other argument (`exec::alias`); an
/// input that is also the output ([`KernelCtx::named_elsewhere`]) must be refused.
pub type PrepareFn = fn(&KernelCtx<'_, '_, '_>) -> Option<Prepared>;

/// A registry entry: the ExecuTorch operator key (`name` or `name.overload`), the function,
/// the scratch bytes it needs (0 for most kernels) and, for a few, a load-time preparation.
#[derive(Clone, Copy)]
pub struct KernelDef {
    pub name: &'static str,
    pub run: KernelFn,
    pub scratch: usize,
    pub prepare: Option<PrepareFn>,
}

impl KernelDef {
    pub const fn new(name: &'static str, run: KernelFn) -> KernelDef {
        KernelDef {
            name,
            run,
            scratch: 0,
            prepare: None,
        }
    }
    pub const fn with_scratch(name: &'static str, run: KernelFn, scratch: usize) -> KernelDef {
        KernelDef {
            name,
            run,
            scratch,
            prepare: None,
        }
    }
    /// The same entry with a load-time preparation of its calls (see [`PrepareFn`]); the
    /// prepared run must compute exactly what `run` computes for the calls it takes.
    pub const fn with_prepare(mut self, prepare: PrepareFn) -> KernelDef {
        self.prepare = Some(prepare);
        self
    }
}
