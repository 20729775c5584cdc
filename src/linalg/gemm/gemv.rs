//! The explicit `M = 1` path: a row vector times a matrix, `y = alpha·x·B + beta·y (+ bias)`,
//! with no packing.
//!
//! [`super::sgemm`] (which picks its kernel itself) sends single-row products here first;
//! [`super::sgemm_with`] never does, so a caller that chose a micro-kernel gets that kernel.
//! Whether a GEMV exists for this CPU is decided in `select` (`select::gemv_for_single_rows`:
//! AArch64 with a hand-written kernel selected; the SME2 ZA-array variant when SME2 is the
//! selected ISA).

use super::matref::MatRef;
#[cfg(target_arch = "aarch64")]
use super::select;

/// Computes `y[j] = alpha·Σ_p x(0, p)·B(p, j) + beta·y[j] (+ bias[j])` for `j < n` (the `beta`
/// term omitted when `beta == 0`) if this CPU has a GEMV for the layout: `x` is `1 × k` with
/// unit column stride, B is `k × n` with a unit stride in either direction, `y` and `bias`
/// hold at least `n` floats. Returns `false`, touching nothing, otherwise (the caller then uses
/// the micro-kernel driver, which also reports shape errors).
pub fn sgemv(
    x: MatRef<'_>,
    b: MatRef<'_>,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> bool {
    let (k, n) = (x.cols, b.cols);
    if x.rows != 1 || b.rows != k || x.cs != 1 {
        return false;
    }
    #[cfg(target_arch = "aarch64")]
    if select::gemv_for_single_rows() {
        return super::arm::gemv::sgemv(
            k,
            n,
            &x.data[..k.min(x.data.len())],
            b.data,
            b.rs,
            b.cs,
            y,
            alpha,
            beta,
            bias,
            select::gemv_sme2(),
        );
    }
    let _ = (n, y, alpha, beta, bias);
    false
}
