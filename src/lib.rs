//! ptera: run ExecuTorch `.pte` programs from a byte slice, with no allocator in the runtime core.
//!
//! Architecture (one module per layer):
//! - [`format`]: the `.pte` container and the program flatbuffer, validated and read in place;
//! - [`dtype`], [`tensor`]: element types, shapes and typed views over planned memory;
//! - [`memory`]: the static memory plan ([`memory::MethodMeta`]) and the metadata bump arena;
//! - [`planner`]: lifetime-based static placement of buffers (delegate intermediates);
//! - [`exec`]: method loading (value table, operator resolution) and the instruction loop;
//! - [`kernels`]: the operator registry, the portable ATen-style kernel library and the GEMM;
//! - [`delegate`]: the backend registry for `DelegateCall` regions.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
// Errors carry context (names, shapes) by value; they are only built on failure paths.
#![allow(clippy::result_large_err)]

#[cfg(test)]
#[macro_use]
extern crate std;
#[cfg(all(not(test), feature = "std"))]
extern crate std;

pub mod delegate;
pub mod dtype;
pub mod error;
pub mod exec;
pub mod format;
pub mod kernels;
pub mod memory;
pub mod planner;
pub mod tensor;

#[cfg(any(test, feature = "std"))]
pub mod host;
#[cfg(any(test, feature = "std"))]
pub mod testing;

pub use dtype::DType;
pub use error::{Error, KernelError};
pub use exec::Method;
#[cfg(any(test, feature = "std"))]
pub use exec::OwnedArenas;
pub use format::Program;
pub use memory::MethodMeta;
pub use tensor::{Shape, TensorMut, TensorRef};
