//! Neon int8 tiles: dot products (FEAT_DotProd `SDOT`) of 4 rows of quantized activations
//! with 4 weight rows, `i32` sums over a run of the depth; lane-indexed `SDOT` tiles over
//! weights packed `qc8w_p4x4` / `qb4w_p4x4` ([`gemm_p4x4`], [`gemm_qb4w_p4x4`]); and `SMMLA`
//! (FEAT_I8MM) tiles over weights packed `qc8w_p8x8` / `qb4w_p8x8` ([`gemm_p8x8`] through
//! the assembly tile of [`super::smmla8`] over rows packed in pairs once per product;
//! [`gemm_qb4w_p8x8`], whose `2 × 8` activation operands are two rows zipped on the fly).
//! The layout contracts below are those of the row-major tiles; the packed ones are in
//! [`super::packed`].
//!
//! Layout contract: every row pointer addresses `len` int8 activations (natural order) or the
//! weight bytes of the same depth run (`len` bytes for int8 rows, `len / 2` for 4-bit rows,
//! low nibble first, stored `q + 8`). `len` is a multiple of 16 (int8) or 32 (4-bit). Rows may
//! repeat (a partial tile repeats its last row; the caller discards the copies).
//!
//! Per 16 depth steps the int8 tile does 8 loads and 16 `SDOT`s; per 32 steps the 4-bit tile
//! does 4 de-interleaving `LD2`s of activations (even depths, odd depths), 4 weight loads,
//! 12 bit operations to turn the nibbles into `16 · w` (`EOR 0x88` makes each nibble the
//! two's-complement of `q`, `SHL #4` / `AND 0xF0` put it in the high half of a byte) and
//! 32 `SDOT`s; its sums are `16 ×` the dot product, shifted back exactly.

use core::arch::aarch64::*;
use core::arch::asm;

use super::dynamic::QParams;
use super::lanes::{sums_p4x4, Lanes, Mull, Sdot};
use super::smmla8::{neon_smmla_8x8_qc8w_p8x8, BlockVectors};

/// The lanes of `rows_of`'s row vectors as integers.
#[inline(always)]
fn lanes(r: [int32x4_t; 4]) -> [[i32; 4]; 4] {
    let mut out = [[0i32; 4]; 4];
    for (o, v) in out.iter_mut().zip(r) {
        // SAFETY: Neon is part of the AArch64 baseline; `o` holds 4 i32.
        unsafe { vst1q_s32(o.as_mut_ptr(), v) };
    }
    out
}

/// int8 × int8 tile: `out[i][j] = Σ_{t<len} a[i][t] · w[j][t]`.
///
/// # Safety
/// FEAT_DotProd; `len % 16 == 0`; each `a[i]` and `w[j]` valid for `len` byte reads.
#[target_feature(enable = "dotprod")]
pub unsafe fn dot_i8_4x4(a: &[*const i8; 4], w: &[*const i8; 4], len: usize) -> [[i32; 4]; 4] {
    // SAFETY: as the caller guarantees (the same extents as `run_i8` needs).
    lanes(unsafe { run_i8::<Sdot>(a, &w.map(|p| p as *const u8), len) })
}

/// int8 × 4-bit tile: `out[i][j] = Σ_{t<len} a[i][t] · (nibble(w[j], t) - 8)`.
///
/// # Safety
/// FEAT_DotProd; `len % 32 == 0`; each `a[i]` valid for `len` reads, each `w[j]` for `len / 2`.
#[target_feature(enable = "dotprod")]
pub unsafe fn dot_q4_4x4(a: &[*const i8; 4], w: &[*const u8; 4], len: usize) -> [[i32; 4]; 4] {
    // SAFETY: as the caller guarantees (the same extents as `run_q4` needs). Every product
    // was 16 · a · w: the shift is exact.
    lanes(unsafe { run_q4::<Sdot>(a, w, len) }).map(|r| r.map(|v| v >> 4))
}

/// Constants of one block of 4 output channels: weight sums (`Σ w`, exact integers, for
/// per-channel weights; `Σ_g s_g·Σ_g w` for group-wise ones), per-channel scales, biases and
/// the clamp.
#[derive(Clone, Copy, Debug)]
pub struct Columns {
    pub sum: [f32; 4],
    pub scale: [f32; 4],
    pub bias: [f32; 4],
    pub lo: f32,
    pub hi: f32,
}

/// The weight rows' encoding.
#[derive(Clone, Copy, Debug)]
pub enum Rows {
    /// int8, per-channel scales.
    I8,
    /// 4-bit, per-channel scales.
    Q4,
    /// 4-bit, bf16 scales per `group` inputs; `scales[j]` = column `j`'s `k / group` scales.
    Grouped {
        group: usize,
        scales: [*const u8; 4],
    },
}

/// Sums of one run as 4 row vectors, lane `j` = column `j` (pairwise-added accumulators).
#[inline(always)]
fn rows_of(acc: [[int32x4_t; 4]; 4]) -> [int32x4_t; 4] {
    // SAFETY: Neon is part of the AArch64 baseline.
    unsafe { acc.map(|r| vpaddq_s32(vpaddq_s32(r[0], r[1]), vpaddq_s32(r[2], r[3]))) }
}

/// int8 run sums (`len % 16 == 0`), rows × columns.
///
/// # Safety
/// The instructions of `D`; each row pointer valid for `len` bytes.
#[inline(always)]
unsafe fn run_i8<D: Lanes>(a: &[*const i8; 4], w: &[*const u8; 4], len: usize) -> [int32x4_t; 4] {
    // SAFETY: (whole body) as the caller guarantees.
    unsafe {
        let mut acc = [[vdupq_n_s32(0); 4]; 4];
        let mut t = 0;
        while t < len {
            let va = a.map(|p| vld1q_s8(p.add(t)));
            let vw = w.map(|p| vld1q_s8(p.add(t) as *const i8));
            for i in 0..4 {
                for j in 0..4 {
                    acc[i][j] = D::dot(acc[i][j], va[i], vw[j]);
                }
            }
            t += 16;
        }
        rows_of(acc)
    }
}

/// 4-bit run sums times 16 (`len % 32 == 0`; weight pointers at the run's first byte).
///
/// # Safety
/// The instructions of `D`; activation rows valid for `len` bytes, weight rows for `len / 2`.
#[inline(always)]
unsafe fn run_q4<D: Lanes>(a: &[*const i8; 4], w: &[*const u8; 4], len: usize) -> [int32x4_t; 4] {
    // SAFETY: (whole body) as the caller guarantees.
    unsafe {
        let mut acc = [[vdupq_n_s32(0); 4]; 4];
        let flip = vdupq_n_u8(0x88);
        let hi_mask = vdupq_n_u8(0xF0);
        let mut t = 0;
        while t < len {
            let va = a.map(|p| vld2q_s8(p.add(t)));
            for j in 0..4 {
                let b = veorq_u8(vld1q_u8(w[j].add(t / 2)), flip);
                let even = vreinterpretq_s8_u8(vshlq_n_u8::<4>(b));
                let odd = vreinterpretq_s8_u8(vandq_u8(b, hi_mask));
                for i in 0..4 {
                    acc[i][j] = D::dot(acc[i][j], va[i].0, even);
                    acc[i][j] = D::dot(acc[i][j], va[i].1, odd);
                }
            }
            t += 32;
        }
        rows_of(acc)
    }
}

/// One column block of the product, all `m` rows, 4 at a time:
/// per-channel `out[i][j] = clamp(((Σ a·w - zp_i·sum_j) · scale_i) · col_scale_j + bias_j)`,
/// group-wise `out[i][j] = clamp((Σ_g s_jg·Σ_g a·w - zp_i·sum_j) · scale_i + bias_j)`.
/// Rows `i` of `a` are `k` apart, rows of `out` `ldo` apart; `ncols ≤ 4` columns are stored
/// (a partial block computes its repeated last column and drops it).
///
/// # Safety
/// FEAT_DotProd; `m ≥ 1`; `k % 16 == 0` (int8), `k % 32 == 0` (4-bit per channel), or
/// `group % 32 == 0` and `k % group == 0`; `a` valid for `m·k` reads, `ap` for `m`; each `w[j]`
/// for `k` (int8) or `k / 2` (4-bit) bytes; group scales for `2·k / group` bytes; `out` for
/// `ncols` floats at each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "dotprod")]
pub unsafe fn block(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: &[*const u8; 4],
    rows: Rows,
    c: &Columns,
    out: *mut f32,
    ldo: usize,
    ncols: usize,
) {
    // SAFETY: the caller's contract; FEAT_DotProd (caller).
    unsafe { block_with::<Sdot>(a, ap, m, k, w, rows, c, out, ldo, ncols) }
}

/// [`block`] in base Neon ([`Mull`]), for cores without the dot product: the same integers.
///
/// # Safety
/// As [`block`], without FEAT_DotProd.
#[allow(clippy::too_many_arguments)]
pub unsafe fn block_mull(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: &[*const u8; 4],
    rows: Rows,
    c: &Columns,
    out: *mut f32,
    ldo: usize,
    ncols: usize,
) {
    // SAFETY: the caller's contract; base Neon only.
    unsafe { block_with::<Mull>(a, ap, m, k, w, rows, c, out, ldo, ncols) }
}

/// [`block`] over the sums of strategy `D`.
///
/// # Safety
/// As [`block`], with the instructions of `D`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block_with<D: Lanes>(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: &[*const u8; 4],
    rows: Rows,
    c: &Columns,
    out: *mut f32,
    ldo: usize,
    ncols: usize,
) {
    // SAFETY: (whole body) every pointer stays within the extents the caller guarantees:
    // row indices are clamped to `m - 1`, only the first `min(4, m - i0)` rows and `ncols`
    // columns are stored.
    unsafe {
        let sum = vld1q_f32(c.sum.as_ptr());
        let isum = vcvtq_s32_f32(sum); // exact: per-channel sums are integers below 2^24
        let cs = vld1q_f32(c.scale.as_ptr());
        let bias = vld1q_f32(c.bias.as_ptr());
        let (lo, hi) = (vdupq_n_f32(c.lo), vdupq_n_f32(c.hi));
        let mut i0 = 0;
        while i0 < m {
            let idx: [usize; 4] = core::array::from_fn(|ii| (i0 + ii).min(m - 1));
            let ar = idx.map(|i| a.add(i * k));
            let p = idx.map(|i| *ap.add(i));
            let mut r = [vdupq_n_f32(0.0); 4];
            match rows {
                Rows::I8 | Rows::Q4 => {
                    let s = if matches!(rows, Rows::Q4) {
                        run_q4::<D>(&ar, w, k).map(|v| vshrq_n_s32::<4>(v))
                    } else {
                        run_i8::<D>(&ar, w, k)
                    };
                    for i in 0..4 {
                        let acc = vmlsq_n_s32(s[i], isum, p[i].zero_point);
                        let f = vmulq_n_f32(vcvtq_f32_s32(acc), p[i].scale);
                        r[i] = vaddq_f32(vmulq_f32(f, cs), bias);
                    }
                }
                Rows::Grouped { group, scales } => {
                    let mut f = [vdupq_n_f32(0.0); 4];
                    let (mut g, mut t) = (0, 0);
                    while t < k {
                        let ag = ar.map(|q| q.add(t));
                        let wg = w.map(|q| q.add(t / 2));
                        let s = run_q4::<D>(&ag, &wg, group);
                        // bf16 → f32 of the four columns' scales, / 16 (exact) for the nibble
                        // encoding.
                        let bits: [u32; 4] = core::array::from_fn(|j| {
                            (u16::from_le_bytes([*scales[j].add(2 * g), *scales[j].add(2 * g + 1)])
                                as u32)
                                << 16
                        });
                        let sg =
                            vmulq_n_f32(vreinterpretq_f32_u32(vld1q_u32(bits.as_ptr())), 0.0625);
                        for i in 0..4 {
                            f[i] = vfmaq_f32(f[i], vcvtq_f32_s32(s[i]), sg);
                        }
                        g += 1;
                        t += group;
                    }
                    for i in 0..4 {
                        let c = vfmsq_n_f32(f[i], sum, p[i].zero_point as f32);
                        r[i] = vfmaq_n_f32(bias, c, p[i].scale);
                    }
                }
            }
            for (ii, v) in r.iter().enumerate().take((m - i0).min(4)) {
                let v = vminq_f32(vmaxq_f32(*v, lo), hi);
                let o = out.add((i0 + ii) * ldo);
                if ncols >= 4 {
                    vst1q_f32(o, v);
                } else {
                    let mut t = [0f32; 4];
                    vst1q_f32(t.as_mut_ptr(), v);
                    core::ptr::copy_nonoverlapping(t.as_ptr(), o, ncols);
                }
            }
            i0 += 4;
        }
    }
}

/// The per-channel constants of a filter packed `qc8w_p4x4`, for [`gemm_p4x4`]: `n` column
/// sums (fp32, integers), `n` fp32 scales (little-endian bytes, any alignment), `n` biases
/// or null, and the clamp.
#[derive(Clone, Copy, Debug)]
pub struct PackedColumns {
    pub sums: *const f32,
    pub scales: *const u8,
    pub bias: *const f32,
    pub n: usize,
    pub lo: f32,
    pub hi: f32,
}

/// Column sums (as `i32`), scales and biases of block `b` (4 channels; past `n` zero).
///
/// # Safety
/// `c`'s pointers valid for `c.n` elements.
#[inline(always)]
unsafe fn block_constants(c: &PackedColumns, b: usize) -> (int32x4_t, float32x4_t, float32x4_t) {
    let j0 = 4 * b;
    // SAFETY: whole blocks read 4 elements from j0 + 4 ≤ n; a partial block reads its
    // `n - j0` elements into zeroed arrays.
    unsafe {
        if j0 + 4 <= c.n {
            let bias = if c.bias.is_null() {
                vdupq_n_f32(0.0)
            } else {
                vld1q_f32(c.bias.add(j0))
            };
            (
                // exact: per-channel sums are integers below 2^24
                vcvtq_s32_f32(vld1q_f32(c.sums.add(j0))),
                vreinterpretq_f32_u8(vld1q_u8(c.scales.add(4 * j0))),
                bias,
            )
        } else {
            let (mut s, mut sc, mut bi) = ([0f32; 4], [0u8; 16], [0f32; 4]);
            let r = c.n - j0;
            core::ptr::copy_nonoverlapping(c.sums.add(j0), s.as_mut_ptr(), r);
            core::ptr::copy_nonoverlapping(c.scales.add(4 * j0), sc.as_mut_ptr(), 4 * r);
            if !c.bias.is_null() {
                core::ptr::copy_nonoverlapping(c.bias.add(j0), bi.as_mut_ptr(), r);
            }
            (
                vcvtq_s32_f32(vld1q_f32(s.as_ptr())),
                vreinterpretq_f32_u8(vld1q_u8(sc.as_ptr())),
                vld1q_f32(bi.as_ptr()),
            )
        }
    }
}

/// Blocks `blocks` (4 output channels each) of an int8 filter packed `qc8w_p4x4` (see
/// [`super::packed`]) times all `m` quantized rows: groups of 4 blocks (16 channels; `SDOT`)
/// or pairs ([`Mull`]) through [`tile_p4x4`], the last blocks in smaller groups. `out` is the output's column 0, rows `ldo` apart.
///
/// # Safety
/// FEAT_DotProd; `m ≥ 1`; `k % 16 == 0`; `a` valid for `m·k` reads, `ap` for `m`; `w` for
/// `4·k` bytes per block up to `blocks.end`; `c` as [`block_constants`] with
/// `4·(blocks.end - 1) < c.n`; `out` writable at columns `4·blocks.start..min(c.n,
/// 4·blocks.end)` of each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "dotprod")]
pub unsafe fn gemm_p4x4(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: the caller's contract; FEAT_DotProd (caller).
    unsafe { gemm_p4x4_with::<Sdot>(a, ap, m, k, w, c, blocks, out, ldo) }
}

/// [`gemm_p4x4`] in base Neon ([`Mull`]), for cores without the dot product.
///
/// # Safety
/// As [`gemm_p4x4`], without FEAT_DotProd.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_p4x4_mull(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: the caller's contract; base Neon only.
    unsafe { gemm_p4x4_with::<Mull>(a, ap, m, k, w, c, blocks, out, ldo) }
}

/// [`gemm_p4x4`]'s block loop over the tile of strategy `D`.
///
/// # Safety
/// As [`gemm_p4x4`], with the instructions of `D`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemm_p4x4_with<D: Lanes>(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let ncols = |b: usize| (c.n - 4 * b).min(4);
    let mut b = blocks.start;
    // SAFETY: the caller's extents, block by block.
    unsafe {
        while b < blocks.end {
            if D::BLOCKS >= 4 && b + 4 <= blocks.end {
                tile_p4x4::<D, 4>(
                    a,
                    ap,
                    m,
                    k,
                    core::array::from_fn(|i| w.add(4 * (b + i) * k)),
                    core::array::from_fn(|i| block_constants(c, b + i)),
                    (c.lo, c.hi),
                    out.add(4 * b),
                    ldo,
                    core::array::from_fn(|i| ncols(b + i)),
                );
                b += 4;
            } else if b + 2 <= blocks.end {
                tile_p4x4::<D, 2>(
                    a,
                    ap,
                    m,
                    k,
                    [w.add(4 * b * k), w.add(4 * (b + 1) * k)],
                    [block_constants(c, b), block_constants(c, b + 1)],
                    (c.lo, c.hi),
                    out.add(4 * b),
                    ldo,
                    [ncols(b), ncols(b + 1)],
                );
                b += 2;
            } else {
                tile_p4x4::<D, 1>(
                    a,
                    ap,
                    m,
                    k,
                    [w.add(4 * b * k)],
                    [block_constants(c, b)],
                    (c.lo, c.hi),
                    out.add(4 * b),
                    ldo,
                    [ncols(b)],
                );
                b += 1;
            }
        }
    }
}

/// `NB` blocks of 4 output channels of packed int8 weights, all `m` rows, 4 at a time: per 16
/// depth steps 4 activation loads, 4 weight vectors per block and 16 `SDOT`s by element per
/// block ([`sums_p4x4`]; 4 blocks by [`Lanes::sums_4x16`], for `SDOT` the assembly loop of
/// [`super::sdot16`]: 64 `SDOT`s to 8 loads); the sums land one channel per lane, so the epilogue is the per-channel one of
/// [`block`] without a reduction. The column constants (`c`: sums, scales, biases) stay in
/// registers for the whole call, and a 4-row group is stored straight from its accumulators.
///
/// # Safety
/// FEAT_DotProd (the `SDOT`s are assembly); `m ≥ 1`; `k % 16 == 0`; `a` valid for `m·k` reads,
/// `ap` for `m`; each `w[b]` for `4·k` bytes; `out + b·4` valid for `ncols[b] ≤ 4` floats at
/// each of the `m` rows (rows `ldo` apart).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_p4x4<D: Lanes, const NB: usize>(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: [*const u8; NB],
    c: [(int32x4_t, float32x4_t, float32x4_t); NB],
    clamp: (f32, f32),
    out: *mut f32,
    ldo: usize,
    ncols: [usize; NB],
) {
    // SAFETY: (whole body) every pointer stays within the extents the caller guarantees: row
    // indices are clamped to `m - 1`; weight reads are at `4·t + 16·q < 4·k`; only the first
    // `min(4, m - i0)` rows and `ncols[b]` columns of block `b` are stored.
    unsafe {
        let (lo, hi) = (vdupq_n_f32(clamp.0), vdupq_n_f32(clamp.1));
        let whole = ncols.iter().all(|&n| n >= 4);
        let mut i0 = 0;
        while i0 < m {
            let idx: [usize; 4] = core::array::from_fn(|ii| (i0 + ii).min(m - 1));
            let ar = idx.map(|i| a.add(i * k));
            let sums: [[int32x4_t; 4]; NB] = if NB == 4 {
                let r = D::sums_4x16(ar, core::array::from_fn(|b| w[b.min(NB - 1)]), k);
                core::array::from_fn(|b| r[b.min(3)])
            } else {
                sums_p4x4::<D, NB>(ar, w, k)
            };
            let here = (m - i0).min(4);
            for ii in 0..4 {
                if ii >= here {
                    break;
                }
                let p = *ap.add(idx[ii]);
                let o = out.add((i0 + ii) * ldo);
                for b in 0..NB {
                    let (isum, cs, bias) = c[b];
                    let s = vmlsq_n_s32(sums[b][ii], isum, p.zero_point);
                    let f = vmulq_n_f32(vcvtq_f32_s32(s), p.scale);
                    let v = vminq_f32(vmaxq_f32(vaddq_f32(vmulq_f32(f, cs), bias), lo), hi);
                    if whole {
                        vst1q_f32(o.add(4 * b), v);
                    } else {
                        let mut tmp = [0f32; 4];
                        vst1q_f32(tmp.as_mut_ptr(), v);
                        core::ptr::copy_nonoverlapping(tmp.as_ptr(), o.add(4 * b), ncols[b].min(4));
                    }
                }
            }
            i0 += 4;
        }
    }
}

/// The per-channel constants of a 4-bit filter packed `qb4w_p4x4`, for [`gemm_qb4w_p4x4`]:
/// `n` column sums `Σ_g s_g·Σ w` (fp32), the packed fp32 group scales (little-endian bytes,
/// any alignment, `[blocks][groups][4]`), `n` biases or null, and the clamp.
#[derive(Clone, Copy, Debug)]
pub struct Packed4Columns {
    pub sums: *const f32,
    pub scales: *const u8,
    pub bias: *const f32,
    pub n: usize,
    pub group: usize,
    pub lo: f32,
    pub hi: f32,
}

/// Column sums and biases of block `b` (4 channels; past `n` zero).
///
/// # Safety
/// `c`'s `sums` and `bias` valid for `c.n` elements.
#[inline(always)]
unsafe fn block4_constants(c: &Packed4Columns, b: usize) -> (float32x4_t, float32x4_t) {
    let j0 = 4 * b;
    // SAFETY: whole blocks read 4 elements from j0 + 4 ≤ n; a partial block copies its
    // `n - j0` elements into zeroed arrays.
    unsafe {
        if j0 + 4 <= c.n {
            let bias = if c.bias.is_null() {
                vdupq_n_f32(0.0)
            } else {
                vld1q_f32(c.bias.add(j0))
            };
            (vld1q_f32(c.sums.add(j0)), bias)
        } else {
            let (mut s, mut bi) = ([0f32; 4], [0f32; 4]);
            let r = c.n - j0;
            core::ptr::copy_nonoverlapping(c.sums.add(j0), s.as_mut_ptr(), r);
            if !c.bias.is_null() {
                core::ptr::copy_nonoverlapping(c.bias.add(j0), bi.as_mut_ptr(), r);
            }
            (vld1q_f32(s.as_ptr()), vld1q_f32(bi.as_ptr()))
        }
    }
}

/// Blocks `blocks` (4 output channels each) of a 4-bit group-wise filter packed `qb4w_p4x4`
/// (see [`super::packed`]) times all `m` quantized rows: pairs of blocks through
/// [`tile_qb4w_p4x4`], a last single block alone. `out` is the output's column 0, rows `ldo`
/// apart.
///
/// # Safety
/// FEAT_DotProd; `m ≥ 1`; `c.group % 16 == 0`, `k % c.group == 0`; `a` valid for `m·k`
/// reads, `ap` for `m`; `w` for `2·k` bytes per block and `c.scales` for `16·k / group` bytes
/// per block up to `blocks.end`; `c.sums`/`c.bias` for `c.n` floats with
/// `4·(blocks.end - 1) < c.n`; `out` writable at columns `4·blocks.start..min(c.n,
/// 4·blocks.end)` of each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "dotprod")]
pub unsafe fn gemm_qb4w_p4x4(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: the caller's contract; FEAT_DotProd (caller).
    unsafe { gemm_qb4w_p4x4_with::<Sdot>(a, ap, m, k, w, c, blocks, out, ldo) }
}

/// [`gemm_qb4w_p4x4`] in base Neon ([`Mull`]), for cores without the dot product.
///
/// # Safety
/// As [`gemm_qb4w_p4x4`], without FEAT_DotProd.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_qb4w_p4x4_mull(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: the caller's contract; base Neon only.
    unsafe { gemm_qb4w_p4x4_with::<Mull>(a, ap, m, k, w, c, blocks, out, ldo) }
}

/// [`gemm_qb4w_p4x4`]'s block loop over the tile of strategy `D`.
///
/// # Safety
/// As [`gemm_qb4w_p4x4`], with the instructions of `D`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn gemm_qb4w_p4x4_with<D: Lanes>(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let ncols = |b: usize| (c.n - 4 * b).min(4);
    let sc = |b: usize| 16 * (k / c.group) * b;
    let mut b = blocks.start;
    // SAFETY: the caller's extents, block by block.
    unsafe {
        while b < blocks.end {
            if b + 2 <= blocks.end {
                tile_qb4w_p4x4::<D, 2>(
                    a,
                    ap,
                    m,
                    k,
                    c.group,
                    [w.add(2 * b * k), w.add(2 * (b + 1) * k)],
                    [c.scales.add(sc(b)), c.scales.add(sc(b + 1))],
                    [block4_constants(c, b), block4_constants(c, b + 1)],
                    (c.lo, c.hi),
                    out.add(4 * b),
                    ldo,
                    [ncols(b), ncols(b + 1)],
                );
                b += 2;
            } else {
                tile_qb4w_p4x4::<D, 1>(
                    a,
                    ap,
                    m,
                    k,
                    c.group,
                    [w.add(2 * b * k)],
                    [c.scales.add(sc(b))],
                    [block4_constants(c, b)],
                    (c.lo, c.hi),
                    out.add(4 * b),
                    ldo,
                    [ncols(b)],
                );
                b += 1;
            }
        }
    }
}

/// `NB` blocks of 4 output channels of 4-bit weights packed `qb4w_p4x4`, all `m` rows, 4 at a
/// time. Per 16 depth steps: 4 activation loads; per block 2 weight loads, 2 `SHL` and 2 `AND`
/// (the nibbles as `16·w` bytes) and 16 `SDOT`s by element. Per group the `i32` sums are
/// converted and multiplied into fp32 accumulators by the group's 4 scales (`FMLA`), as the
/// row-major [`block`] does, so the results agree with it bit for bit; the epilogue is
/// `clamp((f - zp·sum) · scale + bias)` (fused).
///
/// # Safety
/// As [`gemm_qb4w_p4x4`] for the `NB` blocks `w` (block bytes), `s` (block scales) and `c`
/// (their sums and biases); `out + 4·b` writable for `ncols[b]` floats at each row.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_qb4w_p4x4<D: Lanes, const NB: usize>(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    group: usize,
    w: [*const u8; NB],
    s: [*const u8; NB],
    c: [(float32x4_t, float32x4_t); NB],
    clamp: (f32, f32),
    out: *mut f32,
    ldo: usize,
    ncols: [usize; NB],
) {
    // SAFETY: (whole body) every pointer stays within the extents the caller guarantees: row
    // indices are clamped to `m - 1`; weight reads are at `2·t + 16·q < 2·k`, scale reads at
    // `16·g < 16·k / group`; only the first `min(4, m - i0)` rows and `ncols[b]` columns of
    // block `b` are stored.
    unsafe {
        let (lo, hi) = (vdupq_n_f32(clamp.0), vdupq_n_f32(clamp.1));
        let hi_mask = vdupq_n_u8(0xF0);
        let whole = ncols.iter().all(|&n| n >= 4);
        let mut i0 = 0;
        while i0 < m {
            let idx: [usize; 4] = core::array::from_fn(|ii| (i0 + ii).min(m - 1));
            let ar = idx.map(|i| a.add(i * k));
            let mut f = [[vdupq_n_f32(0.0); 4]; NB];
            let (mut g, mut t0) = (0, 0);
            while t0 < k {
                let mut acc = [[D::zero(); 4]; NB];
                let mut t = t0;
                while t < t0 + group {
                    let va = ar.map(|p| vld1q_s8(p.add(t)));
                    for b in 0..NB {
                        let wp = w[b].add(2 * t);
                        let (w0, w1) = (vld1q_u8(wp), vld1q_u8(wp.add(16)));
                        let wv = [
                            vreinterpretq_s8_u8(vshlq_n_u8::<4>(w0)),
                            vreinterpretq_s8_u8(vandq_u8(w0, hi_mask)),
                            vreinterpretq_s8_u8(vshlq_n_u8::<4>(w1)),
                            vreinterpretq_s8_u8(vandq_u8(w1, hi_mask)),
                        ];
                        for i in 0..4 {
                            let mut x = acc[b][i];
                            x = D::lane::<0>(x, wv[0], va[i]);
                            x = D::lane::<1>(x, wv[1], va[i]);
                            x = D::lane::<2>(x, wv[2], va[i]);
                            x = D::lane::<3>(x, wv[3], va[i]);
                            acc[b][i] = x;
                        }
                    }
                    t += 16;
                }
                for b in 0..NB {
                    let sg = vreinterpretq_f32_u8(vld1q_u8(s[b].add(16 * g)));
                    for i in 0..4 {
                        f[b][i] = vfmaq_f32(f[b][i], vcvtq_f32_s32(D::sums(acc[b][i])), sg);
                    }
                }
                g += 1;
                t0 += group;
            }
            let here = (m - i0).min(4);
            for ii in 0..4 {
                if ii >= here {
                    break;
                }
                let p = *ap.add(idx[ii]);
                let o = out.add((i0 + ii) * ldo);
                for b in 0..NB {
                    let (sum, bias) = c[b];
                    let x = vfmsq_n_f32(f[b][ii], sum, p.zero_point as f32);
                    let v = vminq_f32(vmaxq_f32(vfmaq_n_f32(bias, x, p.scale), lo), hi);
                    if whole {
                        vst1q_f32(o.add(4 * b), v);
                    } else {
                        let mut tmp = [0f32; 4];
                        vst1q_f32(tmp.as_mut_ptr(), v);
                        core::ptr::copy_nonoverlapping(tmp.as_ptr(), o.add(4 * b), ncols[b].min(4));
                    }
                }
            }
            i0 += 4;
        }
    }
}

/// `acc += a · bᵀ` for the `2 × 8` int8 matrices `a` (rows in the two 64-bit halves) and `b`:
/// lanes `[a0·b0, a0·b1, a1·b0, a1·b1]` (one `SMMLA`).
///
/// # Safety
/// The CPU must implement FEAT_I8MM.
#[inline(always)]
unsafe fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut r = acc;
    // SAFETY: register-only instruction; the caller guarantees FEAT_I8MM.
    unsafe {
        asm!(".arch_extension i8mm", "smmla {r:v}.4s, {a:v}.16b, {b:v}.16b",
            r = inout(vreg) r, a = in(vreg) a, b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags));
    }
    r
}

/// Blocks `blocks` (8 output channels each) of an int8 filter packed `qc8w_p8x8` (see
/// [`super::packed`]) times all `m` rows packed by [`super::smmla8::pack_rows_p8x8`] at `packed`, 8 × 8
/// tiles through [`neon_smmla_8x8_qc8w_p8x8`]. `out` is the output's column 0, rows `ldo`
/// apart. The column constants are [`PackedColumns`]. Partial tiles (the last rows, the last
/// channels) are stored through an 8 × 8 buffer.
///
/// # Safety
/// FEAT_I8MM; `m ≥ 1`; `k % 16 == 0`; `packed` as [`super::smmla8::pack_rows_p8x8`] wrote it for
/// these `m` rows; `w` valid for `8·k` bytes per block up to `blocks.end`; `c` as
/// [`block_constants`] with `8·(blocks.end - 1) < c.n`; `out` writable at columns
/// `8·blocks.start..min(c.n, 8·blocks.end)` of each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "i8mm")]
pub unsafe fn gemm_p8x8(
    packed: *const u8,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let panel = 8 * k + 128;
    for b in blocks {
        let j0 = 8 * b;
        let cols = (c.n - j0).min(8);
        // SAFETY: channels j0..j0 + cols < n of `sums`, `scales` (4 bytes each) and `bias`.
        let v = unsafe {
            let mut sums = [0i32; 8];
            let (mut scales, mut bias) = ([0f32; 8], [0f32; 8]);
            for j in 0..cols {
                // exact: per-channel sums are integers below 2^24
                sums[j] = *c.sums.add(j0 + j) as i32;
                scales[j] = f32::from_le_bytes(*(c.scales.add(4 * (j0 + j)) as *const [u8; 4]));
                if !c.bias.is_null() {
                    bias[j] = *c.bias.add(j0 + j);
                }
            }
            BlockVectors::new(sums, scales, bias, (c.lo, c.hi))
        };
        for p in 0..m.div_ceil(8) {
            let rows = (m - 8 * p).min(8);
            // SAFETY: panel p and block b lie within the caller's extents; whole tiles store
            // 8 floats at rows 8p..8p + 8 < m from column j0 (cols == 8: inside the
            // caller's columns); partial ones store to `tmp`, then copy their rows × cols.
            unsafe {
                let o = out.add(8 * p * ldo + j0);
                let (pp, wb) = (packed.add(p * panel), w.add(b * 8 * k));
                if rows == 8 && cols == 8 {
                    neon_smmla_8x8_qc8w_p8x8(pp, wb, k, &v, o, 4 * ldo);
                } else {
                    let mut tmp = [0f32; 64];
                    neon_smmla_8x8_qc8w_p8x8(pp, wb, k, &v, tmp.as_mut_ptr(), 32);
                    for r in 0..rows {
                        core::ptr::copy_nonoverlapping(
                            tmp.as_ptr().add(8 * r),
                            o.add(r * ldo),
                            cols,
                        );
                    }
                }
            }
        }
    }
}

/// Blocks `blocks` (8 output channels each) of a 4-bit group-wise filter packed `qb4w_p8x8`
/// (see [`super::packed`]) times all `m` quantized rows, through [`tile_qb4w_p8x8`]. The
/// column constants are [`Packed4Columns`] (its `scales` the `qb4w_p8x8` group scales).
///
/// # Safety
/// FEAT_I8MM; `m ≥ 1`; `c.group % 16 == 0`, `k % c.group == 0`; `a` valid for `m·k` reads,
/// `ap` for `m`; `w` for `4·k` bytes and `c.scales` for `64·k / group` bytes per block up to
/// `blocks.end`; `c.sums`/`c.bias` for `c.n` floats with `8·(blocks.end - 1) < c.n`; `out`
/// writable at columns `8·blocks.start..min(c.n, 8·blocks.end)` of each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "i8mm")]
pub unsafe fn gemm_qb4w_p8x8(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    blocks: core::ops::Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let groups = k / c.group;
    // SAFETY: the caller's extents, block by block (block b's second half of channels is
    // 4-channel block 2b + 1, present when 8·b + 4 < n).
    unsafe {
        for b in blocks {
            let ncols = [(c.n - 8 * b).min(4), (c.n - 8 * b).saturating_sub(4).min(4)];
            let second = if 8 * b + 4 < c.n {
                block4_constants(c, 2 * b + 1)
            } else {
                (vdupq_n_f32(0.0), vdupq_n_f32(0.0))
            };
            tile_qb4w_p8x8(
                a,
                ap,
                m,
                k,
                c.group,
                w.add(4 * b * k),
                c.scales.add(64 * groups * b),
                [block4_constants(c, 2 * b), second],
                (c.lo, c.hi),
                out.add(8 * b),
                ldo,
                ncols,
            );
        }
    }
}

/// 8 output channels of 4-bit weights packed `qb4w_p8x8`, all `m` rows, 4 at a time. Per 16
/// depth steps: one 4-vector weight load, 4 `SHL` and 4 `AND` (the nibbles as `16·w`), per row
/// pair 2 row loads and a `ZIP1`/`ZIP2`, and 8 `SMMLA`s (16 in all). Per group the `2 × 2`
/// `i32` blocks are converted and multiplied into fp32 ones by the group's scales (`FMLA`,
/// lanes in `SMMLA` order), as [`tile_qb4w_p4x4`] does per channel, so the results agree with
/// it bit for bit; the fp32 blocks are unzipped into rows for its epilogue.
///
/// # Safety
/// As [`gemm_qb4w_p8x8`] for the one block `w` and its scales `s`; `out + 4·h` writable for
/// `ncols[h] ≤ 4` floats at each of the `m` rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_qb4w_p8x8(
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    group: usize,
    w: *const u8,
    s: *const u8,
    c: [(float32x4_t, float32x4_t); 2],
    clamp: (f32, f32),
    out: *mut f32,
    ldo: usize,
    ncols: [usize; 2],
) {
    // SAFETY: (whole body) every pointer stays within the extents the caller guarantees: row
    // indices are clamped to `m - 1`; weight reads are at `4·t + 16·q < 4·k`, scale reads at
    // `64·g + 16·q < 64·k / group`; only the first `min(4, m - i0)` rows and `ncols[h]`
    // columns of each half are stored.
    unsafe {
        let (lo, hi) = (vdupq_n_f32(clamp.0), vdupq_n_f32(clamp.1));
        let hi_mask = vdupq_n_u8(0xF0);
        let mut i0 = 0;
        while i0 < m {
            let idx: [usize; 4] = core::array::from_fn(|ii| (i0 + ii).min(m - 1));
            let ar = idx.map(|i| a.add(i * k));
            // f[rp][cp]: rows 2·rp, 2·rp + 1 × channels 2·cp, 2·cp + 1.
            let mut f = [[vdupq_n_f32(0.0); 4]; 2];
            let (mut g, mut t0) = (0, 0);
            while t0 < k {
                let mut acc = [[vdupq_n_s32(0); 4]; 2];
                let mut t = t0;
                while t < t0 + group {
                    let wv = vld1q_u8_x4(w.add(4 * t));
                    let wv = [wv.0, wv.1, wv.2, wv.3];
                    let wl = wv.map(|v| vreinterpretq_s8_u8(vshlq_n_u8::<4>(v)));
                    let wh = wv.map(|v| vreinterpretq_s8_u8(vandq_u8(v, hi_mask)));
                    for (rp, accr) in acc.iter_mut().enumerate() {
                        let r0 = vreinterpretq_s64_s8(vld1q_s8(ar[2 * rp].add(t)));
                        let r1 = vreinterpretq_s64_s8(vld1q_s8(ar[2 * rp + 1].add(t)));
                        let lo8 = vreinterpretq_s8_s64(vzip1q_s64(r0, r1));
                        let hi8 = vreinterpretq_s8_s64(vzip2q_s64(r0, r1));
                        for cp in 0..4 {
                            accr[cp] = smmla(accr[cp], lo8, wl[cp]);
                            accr[cp] = smmla(accr[cp], hi8, wh[cp]);
                        }
                    }
                    t += 16;
                }
                let sp = s.add(64 * g);
                let sg: [float32x4_t; 4] =
                    core::array::from_fn(|cp| vreinterpretq_f32_u8(vld1q_u8(sp.add(16 * cp))));
                for rp in 0..2 {
                    for cp in 0..4 {
                        f[rp][cp] = vfmaq_f32(f[rp][cp], vcvtq_f32_s32(acc[rp][cp]), sg[cp]);
                    }
                }
                g += 1;
                t0 += group;
            }
            let here = (m - i0).min(4);
            for (ii, &i) in idx.iter().enumerate() {
                if ii >= here {
                    break;
                }
                let p = *ap.add(i);
                let o = out.add((i0 + ii) * ldo);
                let (rp, r) = (ii / 2, ii % 2);
                for (h, &nc) in ncols.iter().enumerate() {
                    if nc == 0 {
                        continue;
                    }
                    let (x, y) = (
                        vreinterpretq_f64_f32(f[rp][2 * h]),
                        vreinterpretq_f64_f32(f[rp][2 * h + 1]),
                    );
                    let row = vreinterpretq_f32_f64(if r == 0 {
                        vzip1q_f64(x, y)
                    } else {
                        vzip2q_f64(x, y)
                    });
                    let (sum, bias) = c[h];
                    let xx = vfmsq_n_f32(row, sum, p.zero_point as f32);
                    let v = vminq_f32(vmaxq_f32(vfmaq_n_f32(bias, xx, p.scale), lo), hi);
                    if nc >= 4 {
                        vst1q_f32(o.add(4 * h), v);
                    } else {
                        let mut tmp = [0f32; 4];
                        vst1q_f32(tmp.as_mut_ptr(), v);
                        core::ptr::copy_nonoverlapping(tmp.as_ptr(), o.add(4 * h), nc);
                    }
                }
            }
            i0 += 4;
        }
    }
}
