//! The portable kernel library: ATen out-variant semantics in plain Rust.
//!
//! - [`elementwise`]: arithmetic, comparisons, logic, unary math, `where`, fills, casts;
//! - [`shape`]: views-as-copies, permutes, slicing, concatenation, splitting, indexing,
//!   embedding, cumulative sums, masks (`tril`), padding, dim-order conversion;
//! - [`matmul`]: `mm`, `bmm`, `addmm`, `baddbmm`, `linear` (on [`crate::linalg::gemm`]);
//! - [`norm`]: layer, group and batch normalisation;
//! - [`softmax`]: `_softmax`, `_log_softmax`;
//! - [`conv`]: `convolution` (im2col + GEMM);
//! - [`pool`]: max, average and adaptive average pooling;
//! - [`reduce`]: sum, mean, prod, extremes, arg-extremes, any/all, var;
//! - [`prim`]: symbolic sizes and scalar arithmetic, `et_view`, `copy_`.
//!
//! Shared helpers: `common` (argument checks, errors, f64 reading), `broadcast`.

use crate::kernel_api::KernelDef;

mod broadcast;
mod common;
pub mod conv;
pub mod elementwise;
pub mod matmul;
pub mod norm;
pub mod pool;
pub mod prim;
pub mod reduce;
pub mod shape;
pub mod softmax;

#[cfg(test)]
mod test_util;

/// Every portable kernel table, in lookup order.
pub static KERNELS: &[&[KernelDef]] = &[
    elementwise::KERNELS,
    shape::KERNELS,
    matmul::KERNELS,
    norm::KERNELS,
    softmax::KERNELS,
    conv::KERNELS,
    pool::KERNELS,
    reduce::KERNELS,
    prim::KERNELS,
];
