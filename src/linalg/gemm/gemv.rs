//! The explicit `M = 1` path: a row vector times a matrix, `y = alpha·x·B + beta·y (+ bias)`,
//! with no packing.
//!
//! [`super::sgemm`] (which picks its kernel itself) sends single-row products here first;
//! [`super::sgemm_with`] never does, so a caller that chose a micro-kernel gets that kernel.
//! Whether a GEMV exists for this CPU is decided in `select` (`select::gemv_for_single_rows`:
//! AArch64 with a hand-written kernel selected; the SME2 ZA-array variant when SME2 is the
//! selected ISA; 32-bit Arm with Neon + VFPv4, for a row-major or transposed B).

use super::matref::MatRef;
#[cfg(any(target_arch = "aarch64", target_arch = "arm"))]
use super::select;

/// Whether [`sgemv`] would compute a `1 × k` row times `b` on this CPU (its layout and CPU
/// conditions, not the slice lengths).
pub fn accepts(k: usize, b: MatRef<'_>) -> bool {
    #[cfg(target_arch = "aarch64")]
    if select::gemv_for_single_rows() {
        return b.rows == k && k > 0 && b.cols > 0 && (b.cs == 1 || b.rs == 1);
    }
    // 32-bit Arm: B row-major or stored transposed with its columns at least `k` apart.
    #[cfg(target_arch = "arm")]
    if select::gemv_for_single_rows() {
        return b.rows == k && k > 0 && b.cols > 0 && (b.cs == 1 || (b.rs == 1 && b.cs >= k));
    }
    let _ = (k, b);
    false
}

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
        use super::arm::gemv;
        let xs = &x.data[..k.min(x.data.len())];
        let sme2 = select::gemv_sme2();
        if !gemv::accepts(k, n, xs, b.data, b.rs, b.cs, y, bias) {
            return false;
        }
        // Across cores by whole column blocks (each column computed as one core would).
        let unit = gemv::split_unit(b.cs == 1, sme2);
        let y = crate::parallel::SharedSlice::new(&mut y[..n]);
        let split = crate::parallel::try_split(n.div_ceil(unit), unit * k, |lo, hi, _| {
            let (j0, j1) = (lo * unit, (hi * unit).min(n));
            // SAFETY: parts get disjoint column ranges, so these elements of y are this
            // part's alone.
            let yp = unsafe { y.range(j0, j1) };
            let bias = bias.map(|s| &s[j0..]);
            // Columns j0..j1 of a B accepted above: the view from column j0 is in bounds.
            let bp = &b.data[j0 * b.cs..];
            let done = gemv::sgemv(k, j1 - j0, xs, bp, b.rs, b.cs, yp, alpha, beta, bias, sme2);
            debug_assert!(done);
        });
        if !split {
            // SAFETY: the whole of y, on this core, nothing else holds it.
            let yall = unsafe { y.range(0, n) };
            return gemv::sgemv(k, n, xs, b.data, b.rs, b.cs, yall, alpha, beta, bias, sme2);
        }
        return true;
    }
    #[cfg(target_arch = "arm")]
    if select::gemv_for_single_rows() {
        let xs = &x.data[..k.min(x.data.len())];
        if b.cs == 1 {
            return super::arm32::sgemv_rows(k, n, xs, b.data, b.rs, y, alpha, beta, bias);
        }
        if b.rs == 1 {
            return super::arm32::sgemv_cols(k, n, xs, b.data, b.cs, y, alpha, beta, bias);
        }
    }
    let _ = (n, y, alpha, beta, bias);
    false
}

/// Whether [`panels`] computes packed panels of width `nr` and depth `k` on this CPU.
pub fn panels_accepted(k: usize, nr: usize) -> bool {
    #[cfg(target_arch = "aarch64")]
    if select::gemv_for_single_rows() {
        return k > 0 && super::arm::gemv::panel_widths(nr, select::gemv_sme2());
    }
    let _ = (k, nr);
    false
}

/// Whether a product over packed panels of `nr` columns may be split into units of 4 columns:
/// [`sgemv`] computes every column of a row-major B of `nr` columns the same way whatever
/// 4-aligned range of columns it is given (so the split stays bit-identical), and a few
/// columns cost about their share: its Neon paths accumulate each column alone, by fused
/// multiply-adds in depth order. Not with the SME2 GEMV (exact for any range too, but each
/// call costs a whole block of `16·SVL/32` columns: whole panels split better), and 32-bit
/// Arm is not split here.
pub fn four_column_units(nr: usize) -> bool {
    #[cfg(target_arch = "aarch64")]
    if select::gemv_for_single_rows() {
        return nr.is_multiple_of(4) && nr > 0 && !select::gemv_sme2();
    }
    let _ = nr;
    false
}

/// `y = alpha·x·B + beta·y (+ bias)` for a `1 × k` row `x` and `n` columns of a packed B
/// (panels of `nr` columns, each `k × nr` row-major, consecutive) if this CPU has a GEMV for
/// such panels; `false`, touching nothing, otherwise (then each panel goes to [`sgemv`] as a
/// row-major matrix).
#[allow(clippy::too_many_arguments)]
pub fn panels(
    k: usize,
    n: usize,
    nr: usize,
    x: &[f32],
    b: &[f32],
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> bool {
    #[cfg(target_arch = "aarch64")]
    if select::gemv_for_single_rows() {
        let sme2 = select::gemv_sme2();
        return super::arm::gemv::panels(k, n, nr, x, b, y, alpha, beta, bias, sme2);
    }
    let _ = (k, n, nr, x, b, y, alpha, beta, bias);
    false
}
