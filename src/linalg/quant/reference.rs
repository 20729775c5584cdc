//! The scalar definition of [`super::gemm_qd8_f32`]: one output element at a time, in the
//! order of operations the kernels keep (so that per-channel results agree bit for bit).

use super::dynamic::QParams;
use super::weights::{nibble, QWeights};

/// Weight `(j, kk)` of the filter as a signed integer.
pub fn weight(w: &QWeights<'_>, k: usize, j: usize, kk: usize) -> i32 {
    let data = w.data();
    match w {
        QWeights::Qc8w { .. } => data[j * k + kk] as i8 as i32,
        _ => {
            let b = data[j * w.row_bytes(k) + kk / 2];
            nibble(b, kk % 2 == 1)
        }
    }
}

/// `out[i, j] = clamp(Σ_g s[j,g]·Σ_{kk∈g} (a[i,kk] - zp_i)·w[j,kk] · scale_i + bias[j])`,
/// for per-channel weights `((Σ (a - zp)·w) · scale_i) · s[j] + bias[j]`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_ref(
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    w: &QWeights<'_>,
    n: usize,
    bias: Option<&[f32]>,
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
) {
    let groups = w.groups(k);
    let gsize = k / groups.max(1);
    for i in 0..m {
        let zp = ap[i].zero_point;
        for j in 0..n {
            let b = bias.map_or(0.0, |b| b[j]);
            let dot = |lo: usize, hi: usize| -> i32 {
                (lo..hi)
                    .map(|kk| (a[i * k + kk] as i32 - zp) * weight(w, k, j, kk))
                    .sum()
            };
            let v = match w {
                QWeights::Qb4w { .. } => {
                    let mut f = 0.0f32;
                    for g in 0..groups {
                        f += dot(g * gsize, (g + 1) * gsize) as f32 * w.scale(j, g, groups);
                    }
                    f * ap[i].scale + b
                }
                _ => (dot(0, k) as f32 * ap[i].scale) * w.scale(j, 0, 1) + b,
            };
            out[i * n + j] = match clamp {
                Some((lo, hi)) => v.max(lo).min(hi),
                None => v,
            };
        }
    }
}
