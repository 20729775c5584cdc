//! The portable kernel library: ATen out-variant semantics in plain Rust.

use super::KernelDef;

pub mod prim;

/// Every portable kernel table, in lookup order.
pub static KERNELS: &[&[KernelDef]] = &[prim::KERNELS];
