//! Hand-written AArch64 GEMM micro-kernels and the Neon/SME2 GEMV. Each implements the
//! [`MicroKernel`](super::contract::MicroKernel) contract (or, for the GEMV, its own stated
//! one) and imports nothing above it; which one runs is decided in `gemm::select`.

#[cfg(target_arch = "aarch64")]
pub mod gemv;
// The generated depth loops and tile ends of `neon`'s micro-kernels and `neon_rows`' row
// kernels (macros, so declared first).
#[cfg(target_arch = "aarch64")]
#[macro_use]
mod generated;
#[cfg(target_arch = "aarch64")]
pub mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_epilogue;
#[cfg(target_arch = "aarch64")]
pub mod neon_rows;
#[cfg(target_arch = "aarch64")]
pub mod sme;
#[cfg(target_arch = "aarch64")]
mod sme_pack;
#[cfg(target_arch = "aarch64")]
pub mod sme_short;
#[cfg(target_arch = "aarch64")]
mod streaming;
#[cfg(target_arch = "aarch64")]
pub mod sve;

#[cfg(all(test, target_arch = "aarch64"))]
mod sme_tests;
#[cfg(test)]
mod tests;
