//! ptera: run ExecuTorch `.pte` programs from a byte slice, with no allocator in the runtime core.
//!
//! Layers, top to bottom (each imports only layers below it; `tests/architecture.rs` checks):
//! - public API: [`Program`] (from [`format`]), [`method::MethodMeta`] (validation and exact
//!   memory needs) and [`Method`] (load, inputs, `execute`, outputs), in [`method`];
//! - [`exec`]: the operator/backend [`exec::Registry`], plan validation, metadata-buffer
//!   layout, value table, instruction loop, output-row demand;
//! - [`delegate`] (backends for `DelegateCall` regions, `xnnpack/`) and [`kernels`] (the
//!   portable ATen kernel library, one file per operator family);
//! - [`kernel_api`] (what kernels and backends are written against: `KernelCtx`, `KernelDef`,
//!   `Value`), [`linalg`] (GEMM and micro-kernels, fp32 slice math, CPU detection),
//!   [`planner`] (lifetime-based buffer placement);
//! - [`tensor`] (typed views), [`format`] (the `.pte` container and program flatbuffer),
//!   [`error`], and at the bottom [`dtype`], [`shape`], [`parallel`] (work sharing across
//!   cores) and the `std` helpers in `host`.
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
pub mod devtools;
pub mod dtype;
pub mod error;
pub mod exec;
pub mod format;
pub mod kernel_api;
pub mod kernels;
pub mod linalg;
pub mod method;
pub mod parallel;
pub mod planner;
pub mod shape;
pub mod tensor;

#[cfg(any(test, feature = "std"))]
pub mod host;
#[cfg(any(test, feature = "std"))]
pub mod testing;

pub use dtype::DType;
pub use error::{Error, KernelError};
pub use exec::Registry;
pub use format::Program;
pub use method::Method;
pub use method::MethodMeta;
#[cfg(any(test, feature = "std"))]
pub use method::OwnedArenas;
pub use shape::Shape;
pub use tensor::{TensorMut, TensorRef};
