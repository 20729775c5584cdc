//! The portable kernel library: ATen out-variant semantics in plain Rust, one file per
//! operator family (see `portable/`).

pub mod portable;

pub use portable::KERNELS;
