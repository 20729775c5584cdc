//! Batches of matrix products (`bmm`, `baddbmm`, prepared `bmm` calls): across the cores by
//! whole products or parts of them, each computed as one core computes it alone.

use super::common::{shape_err, Res};
use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef};
use crate::parallel;

/// `c[i] = alpha·a[i]·b[i] + beta·c[i]` for `nb` row-major batches.
#[allow(clippy::too_many_arguments)]
pub(super) fn batched(
    ad: &[f32],
    bd: &[f32],
    od: &mut [f32],
    nb: usize,
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    beta: f32,
    scratch: &mut [f32],
) -> Res {
    // Sizes were checked against the tensors' own shapes, so these products fit.
    let (sa, sb, sc) = (m * k, k * n, m * n);
    let operands = |i: usize| -> Result<(MatRef<'_>, MatRef<'_>), KernelError> {
        let a = ad
            .get(i * sa..(i + 1) * sa)
            .ok_or(shape_err(0, "bmm: short input"))?;
        let b = bd
            .get(i * sb..(i + 1) * sb)
            .ok_or(shape_err(1, "bmm: short input"))?;
        Ok((MatRef::row_major(a, m, k)?, MatRef::row_major(b, k, n)?))
    };
    // Across the cores by whole products or parts of them (each computed as one core computes
    // it alone: the same bits), else one product after the other, each split inside the GEMM.
    if (alpha, beta) == (1.0, 0.0) {
        if gemm::sgemm_batch_split((m, n, k), nb, operands, od)? {
            return Ok(());
        }
    } else if scratch.len() >= gemm::sgemm_scratch_len(m, n, k) {
        let errors = parallel::FirstError::default();
        let shared = parallel::SharedSlice::new(&mut od[..nb * sc]);
        let split = parallel::try_split(nb, m * n * k, |lo, hi, core_scratch| {
            for i in lo..hi {
                // SAFETY: batch i of the output belongs to this part alone.
                let oi = unsafe { shared.range(i * sc, (i + 1) * sc) };
                let r = operands(i)
                    .and_then(|(a, b)| gemm::sgemm(a, b, oi, n, alpha, beta, None, core_scratch));
                if let Err(e) = r {
                    errors.put(e);
                    return;
                }
            }
        });
        if split {
            return errors.result();
        }
    }
    for i in 0..nb {
        let (a, b) = operands(i)?;
        gemm::sgemm(
            a,
            b,
            &mut od[i * sc..(i + 1) * sc],
            n,
            alpha,
            beta,
            None,
            scratch,
        )?;
    }
    Ok(())
}
