//! The QD8 × quantized-weight product driver.
//!
//! Loop order: a block of 4 output channels outside (their weight rows stay in L1, their
//! weight sums are computed once per call), all activation rows inside, 4 at a time. Each
//! 4 × 4 tile sums `a · w` exactly in `i32` over the depth (per group for group-wise weights)
//! with the selected [`QuantKernel`], and the epilogue removes the zero point through the
//! weight sums: `Σ (a - zp)·w = Σ a·w - zp·Σ w`.

use super::dynamic::QParams;
use super::reference::weight;
use super::weights::QWeights;
use crate::error::KernelError;

/// Which tile code runs the integer sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantKernel {
    /// Plain Rust (auto-vectorised for the target's baseline).
    Portable,
    /// Neon `SDOT` tiles (AArch64 with FEAT_DotProd).
    NeonDot,
    /// The Neon tiles in base Neon (`SMULL`/`SADALP`, `lanes::Mull`) for AArch64 cores without
    /// the dot product (Cortex-A53, A57, A72, A73): the same integers as `NeonDot`.
    NeonMull,
}

impl QuantKernel {
    /// The kernel for this CPU: where the fp32 kernel selection is not pinned to the portable
    /// code, `NeonDot` with FEAT_DotProd, else `NeonMull`; `Portable` off AArch64.
    pub fn select() -> QuantKernel {
        #[cfg(target_arch = "aarch64")]
        {
            use crate::linalg::gemm::{select, Isa};
            if select::selected() != Isa::Generic {
                return if has_dotprod() {
                    QuantKernel::NeonDot
                } else {
                    QuantKernel::NeonMull
                };
            }
        }
        QuantKernel::Portable
    }
}

/// FEAT_DotProd ([`cpu::cached`](crate::linalg::cpu::cached)).
#[cfg(target_arch = "aarch64")]
fn has_dotprod() -> bool {
    static DOTPROD: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
    crate::linalg::cpu::cached(&DOTPROD, || crate::linalg::cpu::features().dotprod)
}

/// FEAT_I8MM ([`cpu::cached`](crate::linalg::cpu::cached)); false where the fp32 kernel selection is pinned to the
/// portable code.
#[cfg(target_arch = "aarch64")]
fn has_i8mm() -> bool {
    use crate::linalg::gemm::{select, Isa};
    static I8MM: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
    crate::linalg::cpu::cached(&I8MM, || crate::linalg::cpu::features().i8mm)
        && select::selected() != Isa::Generic
}

pub(super) const MR: usize = 4;
pub(super) const NR: usize = 4;

fn bad(detail: &'static str) -> KernelError {
    KernelError::Value { arg: 0, detail }
}

/// Portable tile: `Σ_{t∈[lo,hi)} a[i][t]·w[j][t]` for the tile's rows and columns.
fn tile_portable(
    a: &[i8],
    k: usize,
    rows: &[usize; MR],
    w: &QWeights<'_>,
    cols: &[usize; NR],
    lo: usize,
    hi: usize,
) -> [[i32; NR]; MR] {
    let mut out = [[0i32; NR]; MR];
    let data = w.data();
    for (jj, &j) in cols.iter().enumerate() {
        match w {
            QWeights::Qc8w { .. } => {
                let wr = &data[j * k + lo..j * k + hi];
                for (ii, &i) in rows.iter().enumerate() {
                    let ar = &a[i * k + lo..i * k + hi];
                    out[ii][jj] = ar
                        .iter()
                        .zip(wr)
                        .map(|(&x, &y)| x as i32 * y as i8 as i32)
                        .sum();
                }
            }
            _ if lo.is_multiple_of(2) => {
                // Whole bytes: element 2u in the low nibble, 2u + 1 in the high one.
                let pairs = (hi - lo) / 2;
                let wr = &data[j * w.row_bytes(k) + lo / 2..][..pairs + (hi - lo) % 2];
                for (ii, &i) in rows.iter().enumerate() {
                    let ar = &a[i * k + lo..i * k + hi];
                    let mut s: i32 = ar
                        .chunks_exact(2)
                        .zip(wr)
                        .map(|(x, &b)| {
                            x[0] as i32 * ((b & 15) as i32 - 8)
                                + x[1] as i32 * ((b >> 4) as i32 - 8)
                        })
                        .sum();
                    if (hi - lo) % 2 == 1 {
                        s += ar[hi - lo - 1] as i32 * ((wr[pairs] & 15) as i32 - 8);
                    }
                    out[ii][jj] = s;
                }
            }
            _ => {
                for (ii, &i) in rows.iter().enumerate() {
                    out[ii][jj] = (lo..hi)
                        .map(|t| a[i * k + t] as i32 * weight(w, k, j, t))
                        .sum();
                }
            }
        }
    }
    out
}

/// `Σ w` of the 4-bit weights whose bytes are `bytes` (both nibbles of every byte).
fn nibble_sum(bytes: &[u8]) -> i32 {
    let s: u32 = bytes
        .iter()
        .map(|&b| (b & 15) as u32 + (b >> 4) as u32)
        .sum();
    s as i32 - 16 * bytes.len() as i32
}

/// `Σ_{lo≤t<hi} w[j][t]` of one weight row.
fn row_sum(w: &QWeights<'_>, k: usize, j: usize, lo: usize, hi: usize) -> i32 {
    let data = w.data();
    let rb = w.row_bytes(k);
    match w {
        QWeights::Qc8w { .. } => data[j * k + lo..j * k + hi]
            .iter()
            .map(|&b| b as i8 as i32)
            .sum(),
        // Whole bytes (a padding nibble of an odd `k` is never inside `[lo, hi)` here).
        _ if lo.is_multiple_of(2) && hi.is_multiple_of(2) => {
            nibble_sum(&data[j * rb + lo / 2..j * rb + hi / 2])
        }
        _ => (lo..hi).map(|t| weight(w, k, j, t)).sum(),
    }
}

/// Integer sums of one tile over `[lo, hi)`: the vector tile on the largest aligned run, the
/// portable tile on the rest.
#[allow(clippy::too_many_arguments)]
pub(super) fn tile_sums(
    kernel: QuantKernel,
    a: &[i8],
    k: usize,
    rows: &[usize; MR],
    w: &QWeights<'_>,
    cols: &[usize; NR],
    lo: usize,
    hi: usize,
) -> [[i32; NR]; MR] {
    #[cfg(target_arch = "aarch64")]
    if kernel == QuantKernel::NeonDot {
        let int8 = matches!(w, QWeights::Qc8w { .. });
        let step = if int8 { 16 } else { 32 };
        // 4-bit runs must start on a whole byte: `lo` is even (groups are even, checked).
        let run = (hi - lo) / step * step;
        if run > 0 && (int8 || lo.is_multiple_of(2)) {
            let ap = rows.map(|i| a[i * k + lo..].as_ptr());
            let data = w.data();
            let rb = w.row_bytes(k);
            let sums = if int8 {
                let wp = cols.map(|j| data[j * rb + lo..].as_ptr() as *const i8);
                // SAFETY: FEAT_DotProd was detected (`select`); each activation row has
                // `k - lo ≥ run` bytes from `lo`, each weight row `k - lo ≥ run` (checked
                // by `QWeights::check` and the caller's length checks); run % 16 == 0.
                unsafe { super::arm::dot_i8_4x4(&ap, &wp, run) }
            } else {
                let wp = cols.map(|j| data[j * rb + lo / 2..].as_ptr());
                // SAFETY: as above; each 4-bit row has `rb - lo/2 ≥ run/2` bytes from
                // `lo/2`; run % 32 == 0.
                unsafe { super::arm::dot_q4_4x4(&ap, &wp, run) }
            };
            if lo + run == hi {
                return sums;
            }
            let rest = tile_portable(a, k, rows, w, cols, lo + run, hi);
            let mut out = sums;
            for i in 0..MR {
                for j in 0..NR {
                    out[i][j] += rest[i][j];
                }
            }
            return out;
        }
    }
    let _ = kernel;
    tile_portable(a, k, rows, w, cols, lo, hi)
}

/// [`column_sums`] of one column.
fn column_sums_one(w: &QWeights<'_>, k: usize, j: usize, out: &mut f32) {
    let groups = w.groups(k);
    let gsize = k.checked_div(groups).unwrap_or(k);
    *out = match w {
        QWeights::Qb4w { .. } => (0..groups)
            .map(|g| row_sum(w, k, j, g * gsize, (g + 1) * gsize) as f32 * w.scale(j, g, groups))
            .sum(),
        _ => row_sum(w, k, j, 0, k) as f32,
    };
}

/// The column sums a filter's products need, one per output channel: `Σ_t w[j][t]` for
/// per-channel weights (an integer, exact in f32: `|Σ w| ≤ 127 · 2^16 < 2^24`), and
/// `Σ_g s[j][g]·Σ_{t∈g} w[j][t]` for group-wise ones. Computed once (the XNNPACK delegate does
/// it at load) and passed to [`gemm_qd8_f32`].
pub fn column_sums(
    w: &QWeights<'_>,
    n: usize,
    k: usize,
    out: &mut [f32],
) -> Result<(), KernelError> {
    w.check(n, k)?;
    if out.len() < n {
        return Err(bad("column sums shorter than the output channels"));
    }
    for (j, o) in out[..n].iter_mut().enumerate() {
        column_sums_one(w, k, j, o);
    }
    Ok(())
}

/// `out[m × n] = clamp(dequant(a[m × k]) · dequant(w)ᵀ + bias)`: `a` quantized per row
/// (`ap[i]`), `w` an `[n, k]` quantized filter. Results agree bit for bit with
/// [`super::reference::gemm_qd8_f32_ref`] for per-channel weights; group-wise weights sum
/// `Σ_g s_g·Σ a·w - zp·Σ_g s_g·Σ w` in fp32, which rounds differently from the reference's
/// `Σ_g s_g·Σ (a - zp)·w` (as XNNPACK's does).
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    w: &QWeights<'_>,
    n: usize,
    bias: Option<&[f32]>,
    sums: Option<&[f32]>,
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    w.check(n, k)?;
    if sums.is_some_and(|s| s.len() < n) {
        return Err(bad("column sums shorter than the output channels"));
    }
    if k > 1 << 16 {
        // Keeps every i32 sum exact: |Σ a·w| ≤ 128 · 128 · 2^16 = 2^30.
        return Err(KernelError::Unsupported {
            detail: "quantized product deeper than 65536",
        });
    }
    let mk = m.checked_mul(k).ok_or(bad("quantized product too large"))?;
    let mn = m.checked_mul(n).ok_or(bad("quantized product too large"))?;
    if a.len() < mk || ap.len() < m || out.len() < mn || bias.is_some_and(|b| b.len() < n) {
        return Err(bad("quantized product operands shorter than their dims"));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let groups = w.groups(k);
    let gsize = k.checked_div(groups).unwrap_or(k);
    let grouped = matches!(w, QWeights::Qb4w { .. });
    let (lo_c, hi_c) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
    // One block of NR output channels; blocks are independent, so they split across cores.
    let block = |j0: usize| {
        let cols: [usize; NR] = core::array::from_fn(|jj| (j0 + jj).min(n - 1));
        // Per column: Σ w (per-channel) or Σ_g s_g·Σ_{g} w (group-wise), and the scale.
        let mut wsum = [0i32; NR];
        let mut fsum = [0f32; NR];
        let mut scale = [0f32; NR];
        for (jj, &j) in cols.iter().enumerate() {
            let sum = match sums {
                Some(s) => s[j],
                None => {
                    let mut one = [0f32];
                    column_sums_one(w, k, j, &mut one[0]);
                    one[0]
                }
            };
            if grouped {
                fsum[jj] = sum;
            } else {
                wsum[jj] = sum as i32;
                scale[jj] = w.scale(j, 0, 1);
            }
        }
        #[cfg(target_arch = "aarch64")]
        if kernel != QuantKernel::Portable {
            let data = w.data();
            let rb = w.row_bytes(k);
            let rows = match *w {
                QWeights::Qc8w { .. } if k.is_multiple_of(16) => Some(super::arm::Rows::I8),
                QWeights::Qc4w { .. } if k.is_multiple_of(32) => Some(super::arm::Rows::Q4),
                QWeights::Qb4w { scales, group, .. } if group.is_multiple_of(32) => {
                    Some(super::arm::Rows::Grouped {
                        group,
                        scales: cols.map(|j| scales[2 * j * groups..].as_ptr()),
                    })
                }
                _ => None,
            };
            if let Some(rows) = rows {
                let c = super::arm::Columns {
                    sum: if grouped {
                        fsum
                    } else {
                        wsum.map(|v| v as f32)
                    },
                    scale,
                    bias: cols.map(|j| bias.map_or(0.0, |b| b[j])),
                    lo: lo_c,
                    hi: hi_c,
                };
                let wp = cols.map(|j| data[j * rb..].as_ptr());
                let block = if kernel == QuantKernel::NeonDot {
                    super::arm::block
                } else {
                    super::arm::block_mull
                };
                // SAFETY: FEAT_DotProd was detected for `NeonDot` (`QuantKernel::select`; the
                // `Mull` block is base Neon); `rows` was chosen
                // only where `k` (or the group) meets the block's depth rule; `a` holds m·k
                // bytes, `ap` m parameters, `out` m·n floats (checked above), every weight row
                // `rb` bytes from its pointer and every column's group scales `2·groups`
                // bytes (`QWeights::check`); from column j0, each output row has
                // `min(4, n - j0)` floats and `ldo = n`; those columns of every row belong
                // to this block alone (blocks split across cores are disjoint).
                unsafe {
                    block(
                        a.as_ptr(),
                        ap.as_ptr(),
                        m,
                        k,
                        &wp,
                        rows,
                        &c,
                        shared.as_mut_ptr().add(j0),
                        n,
                        (n - j0).min(NR),
                    )
                };
                return;
            }
        }
        for i0 in (0..m).step_by(MR) {
            let rows: [usize; MR] = core::array::from_fn(|ii| (i0 + ii).min(m - 1));
            let mut res = [[0f32; NR]; MR];
            if grouped {
                for g in 0..groups {
                    let s = tile_sums(kernel, a, k, &rows, w, &cols, g * gsize, (g + 1) * gsize);
                    for jj in 0..NR {
                        let sg = w.scale(cols[jj], g, groups);
                        for ii in 0..MR {
                            res[ii][jj] += s[ii][jj] as f32 * sg;
                        }
                    }
                }
                for ii in 0..MR {
                    let zp = ap[rows[ii]].zero_point as f32;
                    for jj in 0..NR {
                        res[ii][jj] = (res[ii][jj] - zp * fsum[jj]) * ap[rows[ii]].scale;
                    }
                }
            } else {
                let s = tile_sums(kernel, a, k, &rows, w, &cols, 0, k);
                for ii in 0..MR {
                    let p = ap[rows[ii]];
                    for jj in 0..NR {
                        // Exact: |Σ a·w| and |zp·Σ w| stay far below 2^31 for k < 2^16.
                        let acc = s[ii][jj].wrapping_sub(p.zero_point.wrapping_mul(wsum[jj]));
                        res[ii][jj] = (acc as f32 * p.scale) * scale[jj];
                    }
                }
            }
            for (ii, r) in res.iter().enumerate().take(MR.min(m - i0)) {
                let at = (i0 + ii) * n + j0;
                // SAFETY: columns j0.. of row i0 + ii belong to this block alone.
                let row = unsafe { shared.range(at, at + NR.min(n - j0)) };
                for (jj, o) in row.iter_mut().enumerate() {
                    let b = bias.map_or(0.0, |b| b[j0 + jj]);
                    *o = (r[jj] + b).max(lo_c).min(hi_c);
                }
            }
        }
    };
    crate::parallel::for_units(n.div_ceil(NR), m * k * NR, |lo, hi, _| {
        for b in lo..hi {
            block(b * NR);
        }
    });
    Ok(())
}

/// [`gemm_qd8_f32`] for int8 per-channel weights packed `qc8w_p4x4` ([`super::packed`]):
/// `data` the packed filter, `scales` its fp32 `[N]` scales, `sums` its column sums. Agrees
/// bit for bit with the reference on the row-major filter.
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_p4x4(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    data: &[u8],
    scales: &[u8],
    n: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    use super::packed::{check_packed, packed_weight};
    check_packed(data, scales, n, k)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable {
        let blocks = n.div_ceil(4);
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        let tile = if kernel == QuantKernel::NeonDot {
            super::arm::gemm_p4x4
        } else {
            super::arm::gemm_p4x4_mull
        };
        // Pairs of 4-channel blocks (the pairing one core uses), split across cores.
        crate::parallel::for_units(blocks.div_ceil(2), m * k * 8, |lo_p, hi_p, _| {
            let c = super::arm::PackedColumns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                lo,
                hi,
            };
            // SAFETY: FEAT_DotProd was detected for `NeonDot` (`QuantKernel::select`; the
            // `Mull` tile is base Neon); k % 16 == 0 and the
            // packed size were checked (`check_packed`), so every block up to `blocks` has
            // 4·k bytes at b·4·k; `sums`, `scales` (4 bytes each) and `bias` hold n entries
            // (checked above); `a` holds m·k bytes and `ap` m parameters; the columns of
            // blocks 2·lo_p.. of each output row (m·n floats, `ldo = n`) belong to this part
            // alone (disjoint pairs of blocks).
            unsafe {
                tile(
                    a.as_ptr(),
                    ap.as_ptr(),
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    2 * lo_p..(2 * hi_p).min(blocks),
                    shared.as_mut_ptr(),
                    n,
                )
            };
        });
        return Ok(());
    }
    let _ = kernel;
    let w = |j: usize, t: usize| packed_weight(data, k, j, t);
    portable_int8(
        a,
        ap,
        m,
        k,
        n,
        &w,
        scales,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// [`gemm_qd8_f32`] for 4-bit group-wise weights packed `qb4w_p4x4` ([`super::packed`]):
/// `data` the packed filter, `scales` its packed fp32 group scales (bytes), `group` the group
/// size, `sums` its column sums ([`column_sums`] of the stock filter). On Neon with
/// FEAT_DotProd the results agree bit for bit with [`gemm_qd8_f32`]'s on the stock filter;
/// the portable code rounds like its portable path (unfused multiply-adds).
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_qb4w_p4x4(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    data: &[u8],
    scales: &[u8],
    n: usize,
    group: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    use super::packed::{check_packed4, packed4_weight};
    check_packed4(data, scales, n, k, group)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    let groups = k / group;
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable {
        let blocks = n.div_ceil(4);
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        let tile = if kernel == QuantKernel::NeonDot {
            super::arm::gemm_qb4w_p4x4
        } else {
            super::arm::gemm_qb4w_p4x4_mull
        };
        // Pairs of 4-channel blocks (the pairing one core uses), split across cores.
        crate::parallel::for_units(blocks.div_ceil(2), m * k * 8, |lo_p, hi_p, _| {
            let c = super::arm::Packed4Columns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                group,
                lo,
                hi,
            };
            // SAFETY: FEAT_DotProd was detected for `NeonDot` (`QuantKernel::select`; the
            // `Mull` tile is base Neon); the group rule and
            // the packed sizes were checked (`check_packed4`), so every block has 2·k weight
            // bytes at b·2·k and 16·groups scale bytes at b·16·groups; `sums` and `bias` hold
            // n entries (checked above); `a` holds m·k bytes and `ap` m parameters; the
            // columns of blocks 2·lo_p.. of each output row (m·n floats, `ldo = n`) belong to
            // this part alone (disjoint pairs of blocks).
            unsafe {
                tile(
                    a.as_ptr(),
                    ap.as_ptr(),
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    2 * lo_p..(2 * hi_p).min(blocks),
                    shared.as_mut_ptr(),
                    n,
                )
            };
        });
        return Ok(());
    }
    let _ = kernel;
    let scale = |j: usize, g: usize| {
        let i = 4 * ((j / 4 * groups + g) * 4 + j % 4);
        f32::from_le_bytes([scales[i], scales[i + 1], scales[i + 2], scales[i + 3]])
    };
    let w = |j: usize, t: usize| packed4_weight(data, k, j, t);
    portable_qb4w(
        a,
        ap,
        (m, k, n, group),
        &w,
        &scale,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// Scratch floats [`gemm_qd8_f32_p8x8`] needs for `m` rows of depth `k` to run its `SMMLA`
/// tile: the rows packed in pairs with their parameters (0 where the tile would not run).
pub fn p8x8_scratch_f32(m: usize, k: usize) -> usize {
    #[cfg(target_arch = "aarch64")]
    if has_i8mm() {
        return super::smmla8::packed_rows_len(m, k).map_or(usize::MAX, |b| b.div_ceil(4));
    }
    let _ = (m, k);
    0
}

/// [`gemm_qd8_f32`] for int8 per-channel weights packed `qc8w_p8x8` ([`super::packed`]) for
/// `SMMLA`: `data` the packed filter, `scales` its fp32 `[N]` scales, `sums` its column sums.
/// Agrees bit for bit with the reference on the row-major filter. Where `kernel` is not
/// `Portable`, the CPU has FEAT_I8MM and `scratch` holds [`p8x8_scratch_f32`] floats, the
/// rows are packed in pairs into `scratch` and the `SMMLA` tile runs; otherwise the portable
/// loop.
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_p8x8(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    data: &[u8],
    scales: &[u8],
    n: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    use super::packed::{check_packed8, packed8_weight};
    check_packed8(data, scales, n, k)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable && has_i8mm() && scratch.len() >= p8x8_scratch_f32(m, k) {
        let dst = scratch.as_mut_ptr() as *mut u8;
        // SAFETY: FEAT_I8MM (`has_i8mm`); m ≥ 1, k % 16 == 0 (`check_packed8`); `a` holds
        // m·k bytes and `ap` m parameters (`packed_operands`); the scratch holds the packed
        // length (checked above) and is disjoint from them.
        unsafe { super::smmla8::pack_rows_p8x8(a.as_ptr(), ap.as_ptr(), m, k, dst) };
        let packed: &[f32] = scratch;
        let blocks = n.div_ceil(8);
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        // Column blocks split across cores; every core reads the same packed rows.
        crate::parallel::for_units(blocks, m * k * 8, |lo_b, hi_b, _| {
            let c = super::arm::PackedColumns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                lo,
                hi,
            };
            // SAFETY: FEAT_I8MM was detected (`has_i8mm`); k % 16 == 0 and the packed
            // size were checked (`check_packed8`), so every block has 8·k bytes at b·8·k;
            // `sums`, `scales` (4 bytes each) and `bias` hold n entries (checked above);
            // `packed` holds the m rows as `pack_rows_p8x8` wrote them; the columns of
            // blocks lo_b..hi_b of each output row (m·n floats, `ldo = n`) belong to this
            // part alone.
            unsafe {
                super::arm::gemm_p8x8(
                    packed.as_ptr() as *const u8,
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    lo_b..hi_b,
                    shared.as_mut_ptr(),
                    n,
                )
            };
        });
        return Ok(());
    }
    let _ = (kernel, scratch);
    let w = |j: usize, t: usize| packed8_weight(data, k, j, t);
    portable_int8(
        a,
        ap,
        m,
        k,
        n,
        &w,
        scales,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// [`gemm_qd8_f32_qb4w_p4x4`] for 4-bit group-wise weights packed `qb4w_p8x8` for `SMMLA`
/// ([`super::packed`]): `scales` its packed fp32 group scales (bytes). With FEAT_I8MM (and
/// `kernel` not `Portable`) the results agree bit for bit with [`gemm_qd8_f32`]'s Neon tile on
/// the stock filter; the portable loop rounds like its portable path.
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_qb4w_p8x8(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    data: &[u8],
    scales: &[u8],
    n: usize,
    group: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    use super::packed::{check_packed4x8, packed4x8_weight};
    check_packed4x8(data, scales, n, k, group)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    let groups = k / group;
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable && has_i8mm() {
        let blocks = n.div_ceil(8);
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        crate::parallel::for_units(blocks, m * k * 8, |lo_b, hi_b, _| {
            let c = super::arm::Packed4Columns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                group,
                lo,
                hi,
            };
            // SAFETY: FEAT_I8MM was detected (`has_i8mm`); the group rule and the packed sizes
            // were checked (`check_packed4x8`), so every block has 4·k weight bytes at b·4·k
            // and 64·groups scale bytes at b·64·groups; `sums` and `bias` hold n entries
            // (checked above); `a` holds m·k bytes and `ap` m parameters; the columns of
            // blocks lo_b..hi_b of each output row (m·n floats, `ldo = n`) belong to this
            // part alone.
            unsafe {
                super::arm::gemm_qb4w_p8x8(
                    a.as_ptr(),
                    ap.as_ptr(),
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    lo_b..hi_b,
                    shared.as_mut_ptr(),
                    n,
                )
            };
        });
        return Ok(());
    }
    let _ = kernel;
    let scale = |j: usize, g: usize| {
        let i = 4 * ((j / 8 * groups + g) * 16 + 4 * ((j % 8) / 2) + j % 2);
        f32::from_le_bytes([scales[i], scales[i + 1], scales[i + 2], scales[i + 3]])
    };
    let w = |j: usize, t: usize| packed4x8_weight(data, k, j, t);
    portable_qb4w(
        a,
        ap,
        (m, k, n, group),
        &w,
        &scale,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// The SME2 tile width `2S` ([`crate::linalg::quant::sme::smopa_width`]; 0 without SME2
/// `SMOPA`, off AArch64, or where the fp32 kernel selection is pinned to the portable code).
pub fn smopa_width() -> usize {
    #[cfg(target_arch = "aarch64")]
    {
        use crate::linalg::gemm::{select, Isa};
        if select::selected() != Isa::Generic {
            return super::sme::smopa_width();
        }
    }
    0
}

/// Scratch floats [`gemm_qd8_f32_pnx4`] and [`gemm_qd8_f32_qb4w_pnx4`] need for `m` rows of
/// depth `k` to run their SME2 tiles with filters packed in blocks of `nb` (0 where the
/// tiles would not run).
pub fn pnx4_scratch_f32(m: usize, k: usize, nb: usize) -> usize {
    #[cfg(target_arch = "aarch64")]
    if nb > 0 && nb == smopa_width() {
        return super::sme::smopa_scratch_bytes(m, k, nb).map_or(usize::MAX, |b| b.div_ceil(4));
    }
    let _ = (m, k, nb);
    0
}

/// Packs the rows for the SME2 tiles into `scratch` ([`super::sme::pack_rows_za`]) and
/// returns the packed rows and, behind them, the rest of the scratch as floats (its
/// partial-block copy area first).
///
/// # Safety
/// SME2 with tile width `nb` ([`smopa_width`]); `k % 16 == 0`; `a` holds `m·k` bytes;
/// `scratch` holds [`pnx4_scratch_f32`]`(m, k, nb)` floats.
#[cfg(target_arch = "aarch64")]
unsafe fn packed_rows<'s>(
    nb: usize,
    a: &[i8],
    m: usize,
    k: usize,
    scratch: &'s mut [f32],
) -> (&'s [u8], &'s mut [f32]) {
    let base = scratch.as_mut_ptr() as *mut u8;
    // SAFETY: the caller's contract; the packed bytes (a multiple of 16) are the scratch's
    // first part, and the floats handed back start behind them, disjoint.
    unsafe {
        let len = super::sme::pack_rows_za(nb, a.as_ptr(), m, k, base);
        let (head, rest) = scratch.split_at_mut(len / 4);
        (
            core::slice::from_raw_parts(head.as_ptr() as *const u8, len),
            rest,
        )
    }
}

/// [`gemm_qd8_f32`] for int8 per-channel weights packed `qc8w_pNx4` with blocks of `nb`
/// channels ([`super::packed`]): `data` the packed filter, `scales` its fp32 `[N]` scales,
/// `sums` its column sums. Where the CPU's SME2 tile is `nb` wide ([`smopa_width`]), `kernel`
/// is not `Portable` and `scratch` holds [`pnx4_scratch_f32`] floats, the `SMOPA` tile runs;
/// otherwise the portable loop. Both agree bit for bit with the reference.
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_pnx4(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    (data, nb): (&[u8], usize),
    scales: &[u8],
    n: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    use super::packed::{check_packed_n, packed_n_weight};
    check_packed_n(data, scales, n, k, nb)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable
        && nb > 0
        && nb == smopa_width()
        && scratch.len() >= pnx4_scratch_f32(m, k, nb)
    {
        // SAFETY: SME2 of tile width nb (`smopa_width`); k % 16 == 0 (`check_packed_n`);
        // `a` holds m·k bytes (`packed_operands`); the scratch size was checked above.
        let (packed, _) = unsafe { packed_rows(nb, a, m, k, scratch) };
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        // Column tiles split across cores; every core reads the same packed rows.
        crate::parallel::for_units(n.div_ceil(nb), m * k * nb, |t0, t1, _| {
            let c = super::arm::PackedColumns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                lo,
                hi,
            };
            // SAFETY: SME2 with I8I32 of tile width nb (`smopa_width`, not pinned to
            // portable); k % 16 == 0, the packed size (whole tiles of nb·k bytes) and the
            // scales were checked (`check_packed_n`), 0 < k ≤ 65536 and the operand lengths
            // by `packed_operands`; `packed` holds the m rows packed; the columns of tiles
            // t0..t1 of each output row (m·n floats, `ldo = n`) belong to this part alone.
            unsafe {
                super::sme::gemm_qd8_f32_smopa(
                    nb,
                    packed.as_ptr(),
                    ap.as_ptr(),
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    t0..t1,
                    shared.as_mut_ptr(),
                    n,
                )
            };
        });
        return Ok(());
    }
    let _ = (kernel, scratch);
    let w = |j: usize, t: usize| packed_n_weight(data, k, nb, j, t);
    portable_int8(
        a,
        ap,
        m,
        k,
        n,
        &w,
        scales,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// [`gemm_qd8_f32_qb4w_p4x4`] for 4-bit group-wise weights packed `qb4w_pNx4` with blocks of
/// `nb` channels ([`super::packed`]): `scales` its packed fp32 group scales (bytes). Where the
/// CPU's SME2 tile is `nb` wide ([`smopa_width`]), `kernel` is not `Portable` and `scratch`
/// holds [`pnx4_scratch_f32`] floats, the `SMOPA` tile runs (bit for bit the Neon 4-bit
/// tiles' results); otherwise the portable loop (rounding like its portable path).
#[allow(clippy::too_many_arguments)]
pub fn gemm_qd8_f32_qb4w_pnx4(
    kernel: QuantKernel,
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    (data, nb): (&[u8], usize),
    scales: &[u8],
    n: usize,
    group: usize,
    bias: Option<&[f32]>,
    sums: &[f32],
    out: &mut [f32],
    clamp: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    use super::packed::{check_packed4n, packed4n_weight};
    check_packed4n(data, scales, n, k, group, nb)?;
    let mn = packed_operands(a, ap, m, k, n, sums, bias, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let (lo, hi) = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    #[cfg(target_arch = "aarch64")]
    if kernel != QuantKernel::Portable
        && nb == smopa_width()
        && scratch.len() >= pnx4_scratch_f32(m, k, nb)
    {
        // SAFETY: SME2 of tile width nb (`smopa_width`); k % 16 == 0 (`check_packed4n`);
        // `a` holds m·k bytes (`packed_operands`); the scratch size was checked above.
        let (packed, rest) = unsafe { packed_rows(nb, a, m, k, scratch) };
        // The tile's partial sums: this core's behind the copy area; a core of a split its
        // own scratch's (every core of a team has the same, checked before splitting).
        let tile = nb * nb;
        let fbuf = &mut rest[nb * k / 4..][..tile];
        let shared = crate::parallel::SharedSlice::new(&mut out[..mn]);
        let go = |t0: usize, t1: usize, fb: *mut f32| {
            let c = super::arm::Packed4Columns {
                sums: sums.as_ptr(),
                scales: scales.as_ptr(),
                bias: bias.map_or(core::ptr::null(), |b| b.as_ptr()),
                n,
                group,
                lo,
                hi,
            };
            // SAFETY: SME2 with I8I32 of tile width nb (`smopa_width`, not pinned to
            // portable); the group rule (group % 16 == 0, k % group == 0) and the packed
            // sizes (whole tiles of S·k weight bytes and 2S·k / group scales) were checked
            // (`check_packed4n`), 0 < k ≤ 65536 and the operand lengths by
            // `packed_operands`; `packed` holds the m rows packed; `fb` holds nb² floats
            // this part alone uses; the columns of tiles t0..t1 of each output row (m·n
            // floats, `ldo = n`) belong to this part alone.
            unsafe {
                super::sme::gemm_qd8_f32_smopa_qb4w(
                    nb,
                    packed.as_ptr(),
                    ap.as_ptr(),
                    m,
                    k,
                    data.as_ptr(),
                    &c,
                    t0..t1,
                    shared.as_mut_ptr(),
                    n,
                    fb,
                )
            }
        };
        let ntiles = n.div_ceil(nb);
        let team_fits = crate::parallel::with_team(|t| t.is_some_and(|t| t.scratch_f32() >= tile));
        if !(team_fits
            && crate::parallel::try_split(ntiles, m * k * nb, |t0, t1, own| {
                go(t0, t1, own.as_mut_ptr())
            }))
        {
            go(0, ntiles, fbuf.as_mut_ptr());
        }
        return Ok(());
    }
    let _ = (kernel, scratch);
    let groups = k / group;
    let scale = |j: usize, g: usize| {
        let i = 4 * ((j / nb * groups + g) * nb + j % nb);
        f32::from_le_bytes([scales[i], scales[i + 1], scales[i + 2], scales[i + 3]])
    };
    let w = |j: usize, t: usize| packed4n_weight(data, k, nb, j, t);
    portable_qb4w(
        a,
        ap,
        (m, k, n, group),
        &w,
        &scale,
        sums,
        bias,
        &mut out[..mn],
        (lo, hi),
    );
    Ok(())
}

/// Checks a packed product's depth and operand lengths (`m·k` activations, `m` row
/// parameters, `m·n` outputs, `n` column sums and biases); returns `m·n`.
#[allow(clippy::too_many_arguments)]
fn packed_operands(
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    n: usize,
    sums: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<usize, KernelError> {
    let mk = m.checked_mul(k).ok_or(bad("quantized product too large"))?;
    let mn = m.checked_mul(n).ok_or(bad("quantized product too large"))?;
    if a.len() < mk
        || ap.len() < m
        || out.len() < mn
        || sums.len() < n
        || bias.is_some_and(|b| b.len() < n)
    {
        return Err(bad("quantized product operands shorter than their dims"));
    }
    if k > 1 << 16 {
        return Err(KernelError::Unsupported {
            detail: "quantized product deeper than 65536",
        });
    }
    Ok(mn)
}

/// The portable loop of the packed int8 drivers: `w(j, t)` reads the packed filter, `scales`
/// its fp32 `[N]` scales; the reference's arithmetic (bit for bit).
#[allow(clippy::too_many_arguments)]
fn portable_int8(
    a: &[i8],
    ap: &[QParams],
    m: usize,
    k: usize,
    n: usize,
    w: &dyn Fn(usize, usize) -> i32,
    scales: &[u8],
    sums: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    (lo, hi): (f32, f32),
) {
    for i in 0..m {
        let p = ap[i];
        for j in 0..n {
            let dot: i32 = (0..k).map(|t| a[i * k + t] as i32 * w(j, t)).sum();
            let acc = dot.wrapping_sub(p.zero_point.wrapping_mul(sums[j] as i32));
            let s = &scales[4 * j..4 * j + 4];
            let scale = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            let v = (acc as f32 * p.scale) * scale + bias.map_or(0.0, |b| b[j]);
            out[i * n + j] = v.max(lo).min(hi);
        }
    }
}

/// The portable loop of the packed group-wise 4-bit drivers: `w(j, t)` reads the packed
/// filter, `scale(j, g)` its packed scale (divided by 16) of channel `j`, group `g`.
#[allow(clippy::too_many_arguments)]
fn portable_qb4w(
    a: &[i8],
    ap: &[QParams],
    (m, k, n, group): (usize, usize, usize, usize),
    w: &dyn Fn(usize, usize) -> i32,
    scale: &dyn Fn(usize, usize) -> f32,
    sums: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    (lo, hi): (f32, f32),
) {
    for i in 0..m {
        let p = ap[i];
        for j in 0..n {
            let mut f = 0f32;
            for g in 0..k / group {
                let dot: i32 = (g * group..(g + 1) * group)
                    .map(|t| a[i * k + t] as i32 * w(j, t))
                    .sum();
                f += (16 * dot) as f32 * scale(j, g);
            }
            let v = (f - p.zero_point as f32 * sums[j]) * p.scale + bias.map_or(0.0, |b| b[j]);
            out[i * n + j] = v.max(lo).min(hi);
        }
    }
}
