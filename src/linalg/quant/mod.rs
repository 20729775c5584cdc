//! Integer products for dynamically quantized programs: fp32 activations quantized per row to
//! int8 at run time (QD8) times int8 or int4 weights quantized per output channel (QC8W,
//! QC4W) or per group of input channels (QB4W), with an fp32 result.
//!
//! The arithmetic is XNNPACK's, so that a program lowered by ExecuTorch's XNNPACK partitioner
//! gives the same integers here:
//! - [`dynamic`]: the row quantizer (asymmetric int8, zero point nudged to an integer, the
//!   range always containing 0);
//! - [`weights`]: the weight layouts as the XNNPACK payload stores them (row-major `[N, K]`;
//!   4-bit values two per byte, low nibble first, stored with an offset of 8);
//! - [`gemm`]: the driver: exact `i32` dot products of the quantized rows with the weight
//!   rows, the zero point removed through per-column weight sums, then
//!   `out = (acc · row_scale) · channel_scale + bias` (group-wise weights sum their groups'
//!   scaled products first), clamped;
//! - [`mod@reference`]: the scalar definition every kernel is tested against;
//! - [`packed`]: weights packed at lower time so that a tile needs no horizontal reduction:
//!   int8 `qc8w_p4x4` and group-wise 4-bit `qb4w_p4x4` for lane-indexed `SDOT`, int8
//!   `qc8w_p8x8` and 4-bit `qb4w_p8x8` for `SMMLA`, int8 `qc8w_pNx4` and 4-bit `qb4w_pNx4`
//!   (blocks of `2S` channels) for SME2 `SMOPA`; their drivers [`gemm_qd8_f32_p4x4`],
//!   [`gemm_qd8_f32_qb4w_p4x4`], [`gemm_qd8_f32_p8x8`], [`gemm_qd8_f32_qb4w_p8x8`],
//!   [`gemm_qd8_f32_pnx4`], [`gemm_qd8_f32_qb4w_pnx4`];
//! - `arm`: the Neon `SDOT` (FEAT_DotProd) and `SMMLA` (FEAT_I8MM) tiles, chosen at run time,
//!   the `SDOT` ones also in base Neon for cores without the dot product (`lanes`); the
//!   assembly depth loops of the widest ones in `sdot16` (4 × 16) and `smmla8` (8 × 8);
//! - `sme`: the SME2 `SMOPA` tile (4-way int8 outer products into ZA);
//! - [`qs8`]: statically quantized int8 (per-tensor activations, XNNPACK's requantization).

pub mod dynamic;
pub mod gemm;
pub mod packed;
pub mod qs8;
pub mod reference;
pub mod weights;

#[cfg(target_arch = "aarch64")]
pub mod arm;
#[cfg(target_arch = "aarch64")]
pub mod lanes;
#[cfg(target_arch = "aarch64")]
pub mod sdot16;
#[cfg(target_arch = "aarch64")]
pub mod sme;
#[cfg(target_arch = "aarch64")]
pub mod smmla8;

pub use dynamic::{qd8_params, quantize_row_qd8, quantize_rows_qd8, QParams};
pub use gemm::{
    column_sums, gemm_qd8_f32, gemm_qd8_f32_p4x4, gemm_qd8_f32_p8x8, gemm_qd8_f32_pnx4,
    gemm_qd8_f32_qb4w_p4x4, gemm_qd8_f32_qb4w_p8x8, gemm_qd8_f32_qb4w_pnx4, p8x8_scratch_f32,
    pnx4_scratch_f32, smopa_width, QuantKernel,
};
pub use weights::QWeights;

#[cfg(test)]
mod tests;
