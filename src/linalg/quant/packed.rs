//! int8 weights packed for lane-indexed `SDOT` (`qc8w_p4x4`): output channels in blocks of 4
//! (the last block zero-padded), each block's `k` inputs in chunks of 4, one 16-byte vector
//! per chunk holding the 4 channels' 4 weights: byte `4·j + t` of chunk `c` is
//! `w[4·b + j][4·c + t]`. Blocks follow each other, `4·k` bytes apart (`k % 16 == 0`).
//!
//! A vector of 16 activations times the block's 4 chunk vectors by
//! `SDOT v.4s, w.16b, a.4b[c]` leaves the 4 channels' sums in the 4 lanes: no horizontal
//! reduction (`arm::block_p4x4`). Written by `xtask lower --quantize int8`; the scales and
//! column sums keep their `[N]` layout.

use crate::error::KernelError;

/// Bytes of an `n × k` filter in this layout (`None` on overflow).
pub fn packed_len(n: usize, k: usize) -> Option<usize> {
    n.div_ceil(4).checked_mul(4)?.checked_mul(k)
}

/// Packs the row-major int8 `[n, k]` filter `rows` into `out` (`packed_len(n, k)` bytes);
/// `k` must be a multiple of 16. `qc8w_p4x4` is [`pack_qc8w_pnx4`] with blocks of 4.
pub fn pack_qc8w_p4x4(rows: &[u8], n: usize, k: usize, out: &mut [u8]) -> Result<(), KernelError> {
    pack_qc8w_pnx4(rows, n, k, 4, out)
}

/// Weight `(j, t)` of a packed filter.
pub fn packed_weight(data: &[u8], k: usize, j: usize, t: usize) -> i32 {
    data[(j / 4) * 4 * k + 16 * (t / 4) + 4 * (j % 4) + t % 4] as i8 as i32
}

/// Checks the sizes of a packed `n × k` filter and its `[N]` fp32 scales.
pub fn check_packed(data: &[u8], scales: &[u8], n: usize, k: usize) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) || packed_len(n, k) != Some(data.len()) {
        return Err(bad("packed int8 weights: size disagrees with n and k"));
    }
    if n.checked_mul(4).is_none_or(|b| scales.len() < b) {
        return Err(bad(
            "packed int8 weights: fewer scales than output channels",
        ));
    }
    Ok(())
}

// ---- 4-bit group-wise weights, `qb4w_p4x4` ----
//
// Output channels in blocks of 4 (the last block zero-padded), each block's `k` inputs in
// chunks of 8, one 16-byte vector per chunk: byte `4·j + t` of chunk `c` holds
// `w[4·b + j][8·c + t]` in its low nibble and `w[4·b + j][8·c + 4 + t]` in its high nibble,
// both as signed (two's-complement) nibbles. Blocks follow each other, `2·k` bytes apart.
// `SHL #4` of a chunk gives the 16 bytes `16·w` of its first 4 inputs per channel, `AND 0xF0`
// those of its last 4: two vectors ready for lane-indexed `SDOT` against 16 activations
// (chunk `2q` against lanes 0 and 1, chunk `2q + 1` against lanes 2 and 3), whose sums are
// `16 ×` the dot products. The group scales are fp32, `[blocks][k / group][4]`, already
// divided by 16 (exact), so `Σ_g (16·dot_g) · (s_g / 16)` is the product of XNNPACK's
// `qb4w` weights.

/// Bytes of an `n × k` filter packed `qb4w_p4x4` (`None` on overflow).
pub fn packed4_len(n: usize, k: usize) -> Option<usize> {
    n.div_ceil(4).checked_mul(2)?.checked_mul(k)
}

/// Number of fp32 group scales of an `n × k` filter packed `qb4w_p4x4` in groups of `group`.
pub fn packed4_scales_len(n: usize, k: usize, group: usize) -> Option<usize> {
    n.div_ceil(4)
        .checked_mul(4)?
        .checked_mul(k.checked_div(group)?)
}

/// Whether a 4-bit filter of depth `k` in groups of `group` can be packed `qb4w_p4x4`.
pub fn packs4(k: usize, group: usize) -> bool {
    group > 0 && group.is_multiple_of(16) && k.is_multiple_of(group)
}

/// Packs the stock 4-bit `[n, ceil(k / 2)]` rows `rows` (element `2u` in the low nibble of
/// byte `u`, stored `q + 8`) and their bf16 `[n, k / group]` scales into `out`
/// ([`packed4_len`] bytes) and `out_scales` ([`packed4_scales_len`] floats).
pub fn pack_qb4w_p4x4(
    rows: &[u8],
    scales_bf16: &[u8],
    n: usize,
    k: usize,
    group: usize,
    out: &mut [u8],
    out_scales: &mut [f32],
) -> Result<(), KernelError> {
    let sizes = (packed4_len(n, k), packed4_scales_len(n, k, group));
    let groups = check_stock4(rows, scales_bf16, n, k, group, sizes, out, out_scales)?;
    let q = |ch: usize, t: usize| signed_nibble(rows, k, ch, t);
    for b in 0..n.div_ceil(4) {
        for c in 0..k / 8 {
            for j in 0..4 {
                let ch = 4 * b + j;
                for t in 0..4 {
                    out[b * 2 * k + 16 * c + 4 * j + t] = if ch < n {
                        q(ch, 8 * c + t) | (q(ch, 8 * c + 4 + t) << 4)
                    } else {
                        0
                    };
                }
            }
        }
        for g in 0..groups {
            for j in 0..4 {
                let ch = 4 * b + j;
                out_scales[(b * groups + g) * 4 + j] = if ch < n {
                    let i = 2 * (ch * groups + g);
                    let bits = u16::from_le_bytes([scales_bf16[i], scales_bf16[i + 1]]);
                    f32::from_bits((bits as u32) << 16) / 16.0
                } else {
                    0.0
                };
            }
        }
    }
    Ok(())
}

/// Checks a 4-bit packing's inputs (stock rows and bf16 scales of an `n × k` filter in
/// groups of `group`) and outputs (`sizes`: the layout's bytes and scale count); returns the
/// number of groups.
#[allow(clippy::too_many_arguments)]
fn check_stock4(
    rows: &[u8],
    scales_bf16: &[u8],
    n: usize,
    k: usize,
    group: usize,
    sizes: (Option<usize>, Option<usize>),
    out: &[u8],
    out_scales: &[f32],
) -> Result<usize, KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !packs4(k, group) {
        return Err(bad(
            "packed 4-bit weights need groups that are a multiple of 16 and divide the depth",
        ));
    }
    let groups = k / group;
    let stock = (
        n.checked_mul(k / 2),
        n.checked_mul(groups).and_then(|v| v.checked_mul(2)),
    );
    let (Some(len), Some(slen), Some(rlen), Some(blen)) = (sizes.0, sizes.1, stock.0, stock.1)
    else {
        return Err(bad("packed 4-bit weights: size overflows"));
    };
    if out.len() != len || out_scales.len() != slen || rows.len() < rlen || scales_bf16.len() < blen
    {
        return Err(bad(
            "packed 4-bit weights: buffer sizes disagree with n, k and the group",
        ));
    }
    Ok(groups)
}

/// Weight `(ch, t)` of stock 4-bit rows (`k` even, checked by [`check_stock4`]) as a signed
/// nibble: the stored nibble minus 8, two's complement.
fn signed_nibble(rows: &[u8], k: usize, ch: usize, t: usize) -> u8 {
    let b = rows[ch * (k / 2) + t / 2];
    let nib = if t.is_multiple_of(2) { b & 15 } else { b >> 4 };
    nib ^ 8
}

/// Weight `(j, t)` of a filter packed `qb4w_p4x4` (the integer, not `16 ×`).
pub fn packed4_weight(data: &[u8], k: usize, j: usize, t: usize) -> i32 {
    let (c, tt) = (t / 8, t % 8);
    let b = data[(j / 4) * 2 * k + 16 * c + 4 * (j % 4) + tt % 4];
    let nib = if tt < 4 { b << 4 } else { b & 0xF0 };
    (nib as i8 as i32) >> 4
}

/// Checks the sizes of a `qb4w_p4x4` filter and its fp32 group scales (as bytes).
pub fn check_packed4(
    data: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    group: usize,
) -> Result<(), KernelError> {
    let sizes = (packed4_len(n, k), packed4_scales_len(n, k, group));
    check_packed4_sizes(data, scales, k, group, sizes)
}

/// `data` and `scales` (fp32 as bytes) have a 4-bit packing's `sizes` (bytes, scale count)
/// and the group rule holds.
fn check_packed4_sizes(
    data: &[u8],
    scales: &[u8],
    k: usize,
    group: usize,
    sizes: (Option<usize>, Option<usize>),
) -> Result<(), KernelError> {
    if !packs4(k, group)
        || sizes.0 != Some(data.len())
        || sizes.1.and_then(|s| s.checked_mul(4)) != Some(scales.len())
    {
        return Err(KernelError::Value {
            arg: 0,
            detail: "packed 4-bit weights: sizes disagree with n, k and the group",
        });
    }
    Ok(())
}

// ---- int8 weights for SMMLA, `qc8w_p8x8` ----
//
// Output channels in blocks of 8 (the last block zero-padded), each block's `k` inputs in
// chunks of 8, 64 bytes per chunk: 4 channel pairs of 16 bytes, pair `p` holding
// `w[8·b + 2·p + j][8·c + t]` at byte `8·j + t`. Blocks follow each other, `8·k` bytes apart.
// One 16-byte pair vector is the `2 × 8` right operand of `SMMLA` (FEAT_I8MM), whose left
// operand is two activation rows' 8 inputs (`ZIP1`/`ZIP2` of two row loads): the result is
// the `2 × 2` block of the product.

/// Bytes of an `n × k` filter packed `qc8w_p8x8` (`None` on overflow).
pub fn packed8_len(n: usize, k: usize) -> Option<usize> {
    n.div_ceil(8).checked_mul(8)?.checked_mul(k)
}

/// Packs the row-major int8 `[n, k]` filter `rows` into `out` (`packed8_len(n, k)` bytes);
/// `k` must be a multiple of 16.
pub fn pack_qc8w_p8x8(rows: &[u8], n: usize, k: usize, out: &mut [u8]) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) {
        return Err(bad(
            "packed int8 weights need a depth that is a multiple of 16",
        ));
    }
    let len = packed8_len(n, k).ok_or(bad("packed int8 weights: size overflows"))?;
    if out.len() != len || n.checked_mul(k).is_none_or(|b| rows.len() < b) {
        return Err(bad(
            "packed int8 weights: buffer sizes disagree with n and k",
        ));
    }
    for (i, o) in out.iter_mut().enumerate() {
        let (b, r) = (i / (8 * k), i % (8 * k));
        let (c, r) = (r / 64, r % 64);
        let (p, r) = (r / 16, r % 16);
        let ch = 8 * b + 2 * p + r / 8;
        *o = if ch < n {
            rows[ch * k + 8 * c + r % 8]
        } else {
            0
        };
    }
    Ok(())
}

/// Weight `(j, t)` of a filter packed `qc8w_p8x8`.
pub fn packed8_weight(data: &[u8], k: usize, j: usize, t: usize) -> i32 {
    data[(j / 8) * 8 * k + (t / 8) * 64 + ((j % 8) / 2) * 16 + (j % 2) * 8 + t % 8] as i8 as i32
}

/// Checks the sizes of a `qc8w_p8x8` filter and its `[N]` fp32 scales.
pub fn check_packed8(data: &[u8], scales: &[u8], n: usize, k: usize) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) || packed8_len(n, k) != Some(data.len()) {
        return Err(bad("packed int8 weights: size disagrees with n and k"));
    }
    if n.checked_mul(4).is_none_or(|b| scales.len() < b) {
        return Err(bad(
            "packed int8 weights: fewer scales than output channels",
        ));
    }
    Ok(())
}

// ---- int8 weights for SME2 `SMOPA`, `qc8w_pNx4` ----
//
// `qc8w_p4x4` with blocks of `N` channels instead of 4: output channels in blocks of `N` (the
// last block zero-padded), each block's `k` inputs in chunks of 4, `4·N` bytes per chunk, byte
// `4·j + t` of chunk `c` holding `w[N·b + j][4·c + t]`. Blocks follow each other, `N·k` bytes
// apart. With `N = 2S` (`S = SVL / 32`) one chunk is the right operands of two 4-way
// `SMOPA`s (channels `0..S` and `S..2S` of the block, one vector each): the SME2 tile reads
// each chunk with half of a 4-vector load (`sme::gemm_smopa_2x2za_qc8w_pnx4`).

/// Bytes of an `n × k` filter packed `qc8w_pNx4` with blocks of `nb` (`None` on overflow or
/// `nb == 0`).
pub fn packed_n_len(n: usize, k: usize, nb: usize) -> Option<usize> {
    if nb == 0 {
        return None;
    }
    n.div_ceil(nb).checked_mul(nb)?.checked_mul(k)
}

/// Packs the row-major int8 `[n, k]` filter `rows` into `out` (`packed_n_len(n, k, nb)`
/// bytes) in blocks of `nb` channels (a multiple of 4); `k` must be a multiple of 16.
pub fn pack_qc8w_pnx4(
    rows: &[u8],
    n: usize,
    k: usize,
    nb: usize,
    out: &mut [u8],
) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) {
        return Err(bad(
            "packed int8 weights need a depth that is a multiple of 16",
        ));
    }
    if nb == 0 || !nb.is_multiple_of(4) {
        return Err(bad(
            "packed int8 weights: the block width is not a multiple of 4",
        ));
    }
    let len = packed_n_len(n, k, nb).ok_or(bad("packed int8 weights: size overflows"))?;
    if out.len() != len || n.checked_mul(k).is_none_or(|b| rows.len() < b) {
        return Err(bad(
            "packed int8 weights: buffer sizes disagree with n and k",
        ));
    }
    for (i, o) in out.iter_mut().enumerate() {
        let (b, r) = (i / (nb * k), i % (nb * k));
        let (c, r) = (r / (4 * nb), r % (4 * nb));
        let ch = nb * b + r / 4;
        *o = if ch < n {
            rows[ch * k + 4 * c + r % 4]
        } else {
            0
        };
    }
    Ok(())
}

/// Weight `(j, t)` of a filter packed `qc8w_pNx4` with blocks of `nb`.
pub fn packed_n_weight(data: &[u8], k: usize, nb: usize, j: usize, t: usize) -> i32 {
    data[(j / nb) * nb * k + (t / 4) * 4 * nb + 4 * (j % nb) + t % 4] as i8 as i32
}

/// Checks the sizes of a `qc8w_pNx4` filter (blocks of `nb`) and its `[N]` fp32 scales.
pub fn check_packed_n(
    data: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    nb: usize,
) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) || !nb.is_multiple_of(4) || packed_n_len(n, k, nb) != Some(data.len())
    {
        return Err(bad("packed int8 weights: size disagrees with n and k"));
    }
    if n.checked_mul(4).is_none_or(|b| scales.len() < b) {
        return Err(bad(
            "packed int8 weights: fewer scales than output channels",
        ));
    }
    Ok(())
}

/// How a filter's int8 rows are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int8Layout {
    /// `[N, K]` as the payload stores them.
    RowMajor,
    /// `qc8w_p4x4`, for lane-indexed `SDOT`.
    P4x4,
    /// `qc8w_p8x8`, for `SMMLA`.
    P8x8,
    /// `qc8w_pNx4` with blocks of the given width, for SME2 `SMOPA` (`2S` channels).
    PNx4(usize),
}

impl Int8Layout {
    /// Bytes of an `n × k` filter in this layout (`None` on overflow; the packed layouts need
    /// `k % 16 == 0`, checked by their packers and size checks).
    pub fn len(self, n: usize, k: usize) -> Option<usize> {
        match self {
            Int8Layout::RowMajor => n.checked_mul(k),
            Int8Layout::P4x4 => packed_len(n, k),
            Int8Layout::P8x8 => packed8_len(n, k),
            Int8Layout::PNx4(nb) => packed_n_len(n, k, nb),
        }
    }
}

// ---- 4-bit group-wise weights for SMMLA, `qb4w_p8x8` ----
//
// Output channels in blocks of 8 (the last block zero-padded), each block's `k` inputs in
// chunks of 16, 64 bytes per chunk: 4 channel pairs of 16 bytes, byte `8·j + t` of pair `p`
// holding `w[8·b + 2·p + j][16·c + t]` in its low nibble and `w[8·b + 2·p + j][16·c + 8 + t]`
// in its high nibble (signed nibbles). Blocks follow each other, `4·k` bytes apart. `SHL #4`
// of a pair gives the `2 × 8` right operand of `SMMLA` for the chunk's first 8 inputs (as
// `16·w`), `AND 0xF0` the one for its last 8. The group scales are fp32,
// `[blocks][k / group][4 pairs][4]`, lane `l` of pair `p` holding channel `2·p + l % 2`'s
// scale divided by 16: the lane order of an `SMMLA` result (`[r0·c0, r0·c1, r1·c0, r1·c1]`).

/// Bytes of an `n × k` filter packed `qb4w_p8x8` (`None` on overflow).
pub fn packed4x8_len(n: usize, k: usize) -> Option<usize> {
    n.div_ceil(8).checked_mul(4)?.checked_mul(k)
}

/// Number of fp32 group scales of an `n × k` filter packed `qb4w_p8x8` in groups of `group`.
pub fn packed4x8_scales_len(n: usize, k: usize, group: usize) -> Option<usize> {
    n.div_ceil(8)
        .checked_mul(16)?
        .checked_mul(k.checked_div(group)?)
}

/// Packs stock 4-bit rows and bf16 scales (as [`pack_qb4w_p4x4`] takes them) `qb4w_p8x8` into
/// `out` ([`packed4x8_len`] bytes) and `out_scales` ([`packed4x8_scales_len`] floats).
pub fn pack_qb4w_p8x8(
    rows: &[u8],
    scales_bf16: &[u8],
    n: usize,
    k: usize,
    group: usize,
    out: &mut [u8],
    out_scales: &mut [f32],
) -> Result<(), KernelError> {
    let sizes = (packed4x8_len(n, k), packed4x8_scales_len(n, k, group));
    let groups = check_stock4(rows, scales_bf16, n, k, group, sizes, out, out_scales)?;
    let q = |ch: usize, t: usize| signed_nibble(rows, k, ch, t);
    for (i, o) in out.iter_mut().enumerate() {
        let (b, r) = (i / (4 * k), i % (4 * k));
        let (c, r) = (r / 64, r % 64);
        let (p, r) = (r / 16, r % 16);
        let ch = 8 * b + 2 * p + r / 8;
        let t = 16 * c + r % 8;
        *o = if ch < n {
            q(ch, t) | (q(ch, t + 8) << 4)
        } else {
            0
        };
    }
    for (i, o) in out_scales.iter_mut().enumerate() {
        let (b, r) = (i / (16 * groups), i % (16 * groups));
        let (g, r) = (r / 16, r % 16);
        let ch = 8 * b + 2 * (r / 4) + r % 2;
        *o = if ch < n {
            let at = 2 * (ch * groups + g);
            let bits = u16::from_le_bytes([scales_bf16[at], scales_bf16[at + 1]]);
            f32::from_bits((bits as u32) << 16) / 16.0
        } else {
            0.0
        };
    }
    Ok(())
}

/// Weight `(j, t)` of a filter packed `qb4w_p8x8` (the integer, not `16 ×`).
pub fn packed4x8_weight(data: &[u8], k: usize, j: usize, t: usize) -> i32 {
    let (c, tt) = (t / 16, t % 16);
    let b = data[(j / 8) * 4 * k + 64 * c + 16 * ((j % 8) / 2) + 8 * (j % 2) + tt % 8];
    let nib = if tt < 8 { b << 4 } else { b & 0xF0 };
    (nib as i8 as i32) >> 4
}

/// Checks the sizes of a `qb4w_p8x8` filter and its fp32 group scales (as bytes).
pub fn check_packed4x8(
    data: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    group: usize,
) -> Result<(), KernelError> {
    let sizes = (packed4x8_len(n, k), packed4x8_scales_len(n, k, group));
    check_packed4_sizes(data, scales, k, group, sizes)
}

// ---- 4-bit group-wise weights for SME2 `SMOPA`, `qb4w_pNx4` ----
//
// Output channels in blocks of `N` (the last block zero-padded), each block's `k` inputs in
// chunks of 4, `2·N` bytes per chunk: byte `4·j + t` (`j < N / 2`) holds
// `w[N·b + j][4·c + t]` in its low nibble and `w[N·b + N/2 + j][4·c + t]` in its high nibble,
// both as signed nibbles. Blocks follow each other, `N·k / 2` bytes apart. With `N = 2S` one
// chunk is one vector: `LSL #4` gives the `SMOPA` operand of channels `0..S` (as `16·w`),
// `AND 0xF0` the one of channels `S..2S`. The group scales are fp32 `[blocks][k / group][N]`,
// divided by 16.

/// `qb4w_pNx4` blocks hold two halves of whole 4-channel groups: `nb` a non-zero multiple of 8.
fn check_block4(nb: usize) -> Result<(), KernelError> {
    if nb == 0 || !nb.is_multiple_of(8) {
        return Err(KernelError::Value {
            arg: 0,
            detail: "packed 4-bit weights: the block width is not a multiple of 8",
        });
    }
    Ok(())
}

/// Bytes of an `n × k` filter packed `qb4w_pNx4` with blocks of `nb` (`None` on overflow).
pub fn packed4n_len(n: usize, k: usize, nb: usize) -> Option<usize> {
    packed_n_len(n, k, nb).map(|b| b / 2)
}

/// Number of fp32 group scales of an `n × k` filter packed `qb4w_pNx4` (blocks of `nb`).
pub fn packed4n_scales_len(n: usize, k: usize, group: usize, nb: usize) -> Option<usize> {
    if nb == 0 {
        return None;
    }
    n.div_ceil(nb)
        .checked_mul(nb)?
        .checked_mul(k.checked_div(group)?)
}

/// Packs stock 4-bit rows (`[n, k / 2]`, low nibble first, stored `q + 8`) and their bf16
/// group scales (`[n, k / group]`) as `qb4w_pNx4` with blocks of `nb` (a multiple of 8):
/// `out` [`packed4n_len`] bytes, `out_scales` [`packed4n_scales_len`] floats.
#[allow(clippy::too_many_arguments)]
pub fn pack_qb4w_pnx4(
    rows: &[u8],
    scales_bf16: &[u8],
    n: usize,
    k: usize,
    group: usize,
    nb: usize,
    out: &mut [u8],
    out_scales: &mut [f32],
) -> Result<(), KernelError> {
    check_block4(nb)?;
    let sizes = (packed4n_len(n, k, nb), packed4n_scales_len(n, k, group, nb));
    let groups = check_stock4(rows, scales_bf16, n, k, group, sizes, out, out_scales)?;
    let q = |ch: usize, t: usize| {
        if ch < n {
            signed_nibble(rows, k, ch, t)
        } else {
            0
        }
    };
    let half = nb / 2;
    for (i, o) in out.iter_mut().enumerate() {
        let (b, r) = (i / (half * k), i % (half * k));
        let (c, r) = (r / (4 * half), r % (4 * half));
        let (ch, t) = (nb * b + r / 4, 4 * c + r % 4);
        *o = q(ch, t) | (q(ch + half, t) << 4);
    }
    for (i, o) in out_scales.iter_mut().enumerate() {
        let (b, r) = (i / (nb * groups), i % (nb * groups));
        let (g, j) = (r / nb, r % nb);
        let ch = nb * b + j;
        *o = if ch < n {
            let at = 2 * (ch * groups + g);
            let bits = u16::from_le_bytes([scales_bf16[at], scales_bf16[at + 1]]);
            f32::from_bits((bits as u32) << 16) / 16.0
        } else {
            0.0
        };
    }
    Ok(())
}

/// Weight `(j, t)` of a filter packed `qb4w_pNx4` with blocks of `nb` (the integer).
pub fn packed4n_weight(data: &[u8], k: usize, nb: usize, j: usize, t: usize) -> i32 {
    let (half, jj) = (nb / 2, j % nb);
    let b = data[(j / nb) * half * k + (t / 4) * 4 * half + 4 * (jj % half) + t % 4];
    let nib = if jj < half { b << 4 } else { b & 0xF0 };
    (nib as i8 as i32) >> 4
}

/// Checks the sizes of a `qb4w_pNx4` filter (blocks of `nb`) and its fp32 group scales (as
/// bytes).
pub fn check_packed4n(
    data: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    group: usize,
    nb: usize,
) -> Result<(), KernelError> {
    check_block4(nb)?;
    let sizes = (packed4n_len(n, k, nb), packed4n_scales_len(n, k, group, nb));
    check_packed4_sizes(data, scales, k, group, sizes)
}
