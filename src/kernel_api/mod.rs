//! What kernels and delegate backends are written against: the calling convention.
//!
//! A kernel is a plain function over a [`KernelCtx`], which gives typed, checked access to the
//! instruction's arguments in ExecuTorch's order (schema arguments, then the appended return;
//! see `notes/pte-format.md` 3.4). Kernels never allocate: outputs are preallocated planned
//! tensors that [`KernelCtx::output`] resizes, and temporary space comes from a fixed scratch
//! area whose size each [`KernelDef`] declares. The runtime values a context reads
//! ([`Value`], [`TensorSlot`]) live in the method's metadata buffer.

mod ctx;
mod value;

pub use ctx::{AliasProof, IntList, KernelCtx, Observer, MAX_LIST};
pub use value::{Dynamism, TensorSlot, Value};

use crate::error::KernelError;

/// Signature of every kernel.
pub type KernelFn = fn(&mut KernelCtx<'_, '_, '_>) -> Result<(), KernelError>;

/// A registry entry: the ExecuTorch operator key (`name` or `name.overload`), the function,
/// and the scratch bytes it needs (0 for most kernels).
#[derive(Clone, Copy)]
pub struct KernelDef {
    pub name: &'static str,
    pub run: KernelFn,
    pub scratch: usize,
}

impl KernelDef {
    pub const fn new(name: &'static str, run: KernelFn) -> KernelDef {
        KernelDef {
            name,
            run,
            scratch: 0,
        }
    }
    pub const fn with_scratch(name: &'static str, run: KernelFn, scratch: usize) -> KernelDef {
        KernelDef { name, run, scratch }
    }
}
