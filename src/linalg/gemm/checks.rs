//! What every product checks before a loop runs: the kernel's tile within the limits, C
//! and bias long enough for `m × n` at `ldc`; and the paths that compute no tiles (the empty
//! product, the GEMVs) clamp their rows here.

use super::contract::*;
use super::matref::shape_err;
use crate::error::KernelError;

/// Validates C and bias for an `m × n × k` call and applies the empty product (`k = 0`:
/// `C = clamp(beta·C + bias)`). `Ok(false)` when nothing is left to compute.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn check_call(
    uk: &MicroKernel,
    m: usize,
    n: usize,
    k: usize,
    c: &mut [f32],
    ldc: usize,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
) -> Result<bool, KernelError> {
    if uk.mr == 0
        || uk.nr == 0
        || uk.mr > MAX_MR
        || uk.nr > MAX_NR
        || uk.wide.is_some_and(|w| uk.mr != 8 || w.rep == 0)
    {
        return Err(KernelError::Unsupported {
            detail: "gemm: micro-kernel tile exceeds MAX_MR x MAX_NR",
        });
    }
    if m == 0 || n == 0 {
        return Ok(false);
    }
    if ldc < n {
        return Err(shape_err("gemm: ldc < n"));
    }
    let c_need = (m - 1)
        .checked_mul(ldc)
        .and_then(|x| x.checked_add(n))
        .ok_or(shape_err("gemm: C extent overflows"))?;
    if c.len() < c_need {
        return Err(shape_err("gemm: C slice too short"));
    }
    if let Some(bv) = bias {
        if bv.len() < n {
            return Err(shape_err("gemm: bias shorter than n"));
        }
    }
    if k == 0 {
        // Empty product: C = beta·C + bias.
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + n];
            for (j, x) in row.iter_mut().enumerate() {
                let mut v = if beta == 0.0 { 0.0 } else { beta * *x };
                if let Some(bv) = bias {
                    v += bv[j];
                }
                *x = v;
            }
        }
        clamp_rows(c, m, n, ldc, range);
        return Ok(false);
    }
    Ok(true)
}

/// Clamps rows `0..m` (columns `0..n`, row stride `ldc`) of C into `range` (the paths whose
/// kernels do not clamp: the GEMVs, the empty product). The rows are inside `c` (validated
/// by the caller's path).
#[inline]
pub(super) fn clamp_rows(c: &mut [f32], m: usize, n: usize, ldc: usize, range: Option<(f32, f32)>) {
    let Some((lo, hi)) = range.filter(|&(lo, hi)| clamps(lo, hi)) else {
        return;
    };
    for i in 0..m {
        if let Some(row) = c.get_mut(i * ldc..i * ldc + n) {
            row.iter_mut().for_each(|v| *v = clamp(*v, lo, hi));
        }
    }
}
