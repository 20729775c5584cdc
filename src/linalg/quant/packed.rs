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
/// `k` must be a multiple of 16.
pub fn pack_qc8w_p4x4(rows: &[u8], n: usize, k: usize, out: &mut [u8]) -> Result<(), KernelError> {
    let bad = |detail| KernelError::Value { arg: 0, detail };
    if !k.is_multiple_of(16) {
        return Err(bad(
            "packed int8 weights need a depth that is a multiple of 16",
        ));
    }
    let len = packed_len(n, k).ok_or(bad("packed int8 weights: size overflows"))?;
    if out.len() != len || n.checked_mul(k).is_none_or(|b| rows.len() < b) {
        return Err(bad(
            "packed int8 weights: buffer sizes disagree with n and k",
        ));
    }
    for b in 0..n.div_ceil(4) {
        for c in 0..k / 4 {
            for j in 0..4 {
                for t in 0..4 {
                    let (ch, kk) = (4 * b + j, 4 * c + t);
                    out[b * 4 * k + 16 * c + 4 * j + t] =
                        if ch < n { rows[ch * k + kk] } else { 0 };
                }
            }
        }
    }
    Ok(())
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
