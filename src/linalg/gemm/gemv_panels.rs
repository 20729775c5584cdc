//! Products of a few rows over pre-packed B (`sgemm_prepacked_clamped` with `M` ≤
//! [`GEMV_ROWS`]): each row times each whole-depth panel through the CPU's GEMV, split across
//! cores by panels, or by 4-column units where the GEMV computes every column alone.

use super::checks::check_call;
use super::gemv;
use super::matref::{shape_err, MatRef};
use super::pack_rhs_nr_whole_k::PackedB;
use super::portable::PORTABLE;
use crate::error::KernelError;

/// Products with at most this many rows go through the GEMV, panel by panel, when B is
/// pre-packed: a micro-kernel tile of 8 (Neon) or 2·SVL/32 (SME) rows would mostly compute
/// padding (e.g. a language-model head reduced to its last row).
pub(super) const GEMV_ROWS: usize = 4;

/// Each row of A times each whole-depth panel of B (a `k × nr` row-major matrix) with the
/// CPU's GEMV. `Ok(false)`, touching nothing, when this CPU has no GEMV for that layout.
#[inline]
pub(super) fn gemv_panels(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> Result<bool, KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.n);
    if !super::select::gemv_for_single_rows() || k == 0 {
        return Ok(false);
    }
    if !check_call(&PORTABLE, m, n, k, c, ldc, beta, bias, None)? {
        return Ok(true);
    }
    // Whether this CPU has a GEMV for a row-major panel: asked once, on the first panel.
    let probe = MatRef::new(&b.data[..k * b.nr], k, b.nr.min(n), b.nr, 1)?;
    if !gemv::accepts(a.cols, probe) {
        return Ok(false);
    }
    let panels = n.div_ceil(b.nr);
    let errors = crate::parallel::FirstError::default();
    let shared = crate::parallel::SharedSlice::new(c);
    // Columns `c0..c1` (4-aligned `c0`) of panel `q`, every row, through the row-major GEMV.
    let piece = |q: usize, c0: usize, c1: usize| -> Result<(), KernelError> {
        let j0 = q * b.nr;
        let panel = &b.data[q * k * b.nr..(q + 1) * k * b.nr];
        let bq = MatRef::new(&panel[c0..], k, c1 - c0, b.nr, 1)?;
        let bias_q = bias.map(|bv| &bv[j0 + c0..j0 + c1]);
        for i in 0..m {
            let xi = MatRef::new(&a.data[i * a.rs..], 1, k, a.rs.max(k), 1)?;
            // SAFETY: these columns of row i belong to the part that owns them.
            let row = unsafe { shared.range(i * ldc + j0 + c0, i * ldc + j0 + c1) };
            if !gemv::sgemv(xi, bq, row, alpha, beta, bias_q) {
                return Err(shape_err("gemm: GEMV refused a panel it accepted"));
            }
        }
        Ok(())
    };
    // Panel `q` whole.
    let one = |q: usize| piece(q, 0, b.nr.min(n - q * b.nr));
    // Panels lo..hi at once, when the CPU has a GEMV over packed panels of this width.
    let many = |lo: usize, hi: usize| -> bool {
        let (j0, j1) = (lo * b.nr, (hi * b.nr).min(n));
        let bias_q = bias.map(|bv| &bv[j0..j1]);
        let bq = &b.data[lo * k * b.nr..(hi * k * b.nr).min(b.data.len())];
        (0..m).all(|i| {
            let xi = &a.data[i * a.rs..(i * a.rs + k).min(a.data.len())];
            // SAFETY: (row i, panels lo..hi) elements of C belong to the part that owns them.
            let row = unsafe { shared.range(i * ldc + j0, i * ldc + j1) };
            gemv::panels(k, j1 - j0, b.nr, xi, bq, row, alpha, beta, bias_q)
        })
    };
    let split = if gemv::panels_accepted(k, b.nr) || !gemv::four_column_units(b.nr) {
        // Whole panels across cores (each computed as one core computes it).
        crate::parallel::try_split(panels, m * k * b.nr, |lo, hi, _| {
            if many(lo, hi) {
                return;
            }
            for q in lo..hi {
                if let Err(e) = one(q) {
                    return errors.put(e);
                }
            }
        })
    } else {
        // Panels the GEMV reads as row-major matrices, whose every column it computes the
        // same way in any 4-aligned range: units of 4 columns, so that a product of fewer
        // panels than cores (a 64-wide one-row product in 32-wide panels) still uses them
        // all. A panel's last unit takes its last `w % 4` columns too.
        let per = b.nr / 4;
        crate::parallel::try_split(panels * per, m * k * 4, |lo, hi, _| {
            let mut u = lo;
            while u < hi {
                let (q, c0) = (u / per, u % per * 4);
                let last = ((q + 1) * per).min(hi);
                let w = b.nr.min(n - q * b.nr);
                let c1 = if last == (q + 1) * per {
                    w
                } else {
                    (last % per * 4).min(w)
                };
                if c0 < c1 {
                    if let Err(e) = piece(q, c0, c1) {
                        return errors.put(e);
                    }
                }
                u = last;
            }
        })
    };
    if !split && !many(0, panels) {
        for q in 0..panels {
            one(q)?;
        }
    }
    errors.result()?;
    Ok(true)
}
