//! The portable kernel library: ATen out-variant semantics in plain Rust.
//!
//! - [`binary`]: arithmetic with broadcasting and type promotion (`add`, `sub`, `mul`, `div`,
//!   `pow`, `maximum`, `remainder`, ...);
//! - [`compare`]: comparisons, bitwise and logical ops, `where`, `masked_fill`;
//! - [`unary`]: unary math and activations (`exp`, `tanh`, `gelu`, `relu`, `clamp`, ...);
//! - [`fill`]: fills (`full`, `zeros`, `ones`, `fill`, `scalar_tensor`) and `arange`;
//! - [`cast`]: dtype-converting copies (`_to_copy`, `clone`, ...) and dim-order conversion
//!   (`_clone_dim_order`, `_to_dim_order_copy`);
//! - [`view`]: views as copies (`view_copy`, `squeeze`/`unsqueeze`), permutes and transposes,
//!   `expand_copy`, `repeat`;
//! - [`slice`](mod@slice): `slice_copy`, `select_copy`, `narrow_copy`;
//! - [`concat`](mod@concat): `cat`, `stack`, `split_*_copy`, `unbind_copy`;
//! - [`index`]: `index.Tensor`, `index_put`, `index_select`, `gather`, `embedding`;
//! - [`cumsum`]: cumulative sums (`cumsum`);
//! - [`tril`]: triangular masks (`tril`, `triu`);
//! - [`pad`]: constant padding (`constant_pad_nd`);
//! - [`flip_roll`]: reversing and rotating along dims (`flip`, `roll`);
//! - [`matmul`]: `mm`, `bmm`, `addmm`, `baddbmm`, `linear` (on [`crate::linalg::gemm`]);
//! - [`norm`]: layer, group and batch normalisation;
//! - [`softmax`]: `_softmax`, `_log_softmax`;
//! - [`conv`]: `convolution` (im2col + GEMM);
//! - [`pool`]: max, average and adaptive average pooling;
//! - [`reduce`]: sum, mean, prod, extremes, arg-extremes, any/all, var;
//! - [`prim`]: symbolic sizes and scalar arithmetic, `et_view`, `copy_`.
//!
//! Shared helpers (not public): `common` (the `Ctx`/`Res` aliases, errors, argument checks,
//! f64 reading), `compute` (the elementwise compute types), `promote` (ATen type promotion),
//! `broadcast` (the broadcast iterator and loops), `convert` (element conversion between
//! dtypes), `copy_engine` (strided copies of views).

use crate::kernel_api::KernelDef;

pub mod binary;
mod binary_prepared;
mod broadcast;
pub mod cast;
mod common;
pub mod compare;
mod compute;
pub mod concat;
pub mod conv;
mod convert;
mod copy_engine;
mod copy_prepared;
pub mod cumsum;
pub mod fill;
pub mod flip_roll;
pub mod index;
mod index_prepared;
pub mod matmul;
mod matmul_batch;
mod matmul_prepared;
pub mod norm;
pub mod pad;
pub mod pool;
pub mod prim;
mod promote;
pub mod quantized;
pub mod reduce;
pub mod slice;
mod slice_prepared;
pub mod softmax;
mod split_prepared;
pub mod tril;
pub mod unary;
pub mod view;
mod view_prepared;

#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod test_util;

/// Every portable kernel table, in lookup order.
pub static KERNELS: &[&[KernelDef]] = &[
    binary::KERNELS,
    compare::KERNELS,
    unary::KERNELS,
    fill::KERNELS,
    cast::KERNELS,
    view::KERNELS,
    slice::KERNELS,
    concat::KERNELS,
    index::KERNELS,
    cumsum::KERNELS,
    tril::KERNELS,
    pad::KERNELS,
    flip_roll::KERNELS,
    matmul::KERNELS,
    norm::KERNELS,
    softmax::KERNELS,
    conv::KERNELS,
    pool::KERNELS,
    reduce::KERNELS,
    prim::KERNELS,
    quantized::KERNELS,
];
