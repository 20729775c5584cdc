//! The portable kernel library: ATen out-variant semantics in plain Rust.
//!
//! - [`elementwise`]: arithmetic, comparisons, logic, unary math, `where`, fills, casts;
//! - [`shape`]: views-as-copies, permutes, slicing, concatenation, splitting, indexing,
//!   embedding, cumulative sums, masks (`tril`), padding, dim-order conversion;
//! - [`nn`]: matmul family (on [`crate::linalg::gemm`]), normalisation, softmax,
//!   convolution, pooling, reductions;
//! - [`prim`]: symbolic sizes and scalar arithmetic, `et_view`, `copy_`.

use crate::kernel_api::KernelDef;

pub mod elementwise;
pub mod nn;
pub mod prim;
pub mod shape;

/// Every portable kernel table, in lookup order.
pub static KERNELS: &[&[KernelDef]] = &[
    elementwise::KERNELS,
    shape::KERNELS,
    nn::KERNELS,
    prim::KERNELS,
];
