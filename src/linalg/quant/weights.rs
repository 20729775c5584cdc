//! Quantized weight layouts, as XNNPACK payloads store them: the filter of a fully-connected
//! node with `N` output channels and `K` inputs, row-major `[N, K]`.

use crate::error::KernelError;

/// A quantized `[N, K]` filter and its scales (raw little-endian bytes: the program's named
/// data need not be aligned for floats).
#[derive(Clone, Copy, Debug)]
pub enum QWeights<'a> {
    /// int8, symmetric (zero point 0), one fp32 scale per output channel (`N × 4` bytes).
    Qc8w { data: &'a [u8], scales: &'a [u8] },
    /// 4-bit, one fp32 scale per output channel. Each row holds `ceil(K / 2)` bytes: element
    /// `2j` in the low nibble of byte `j`, `2j + 1` in the high nibble, each stored as `q + 8`.
    Qc4w { data: &'a [u8], scales: &'a [u8] },
    /// 4-bit as [`QWeights::Qc4w`], one bf16 scale per output channel and group of `group`
    /// inputs (`N × K / group` scales, row-major).
    Qb4w {
        data: &'a [u8],
        scales: &'a [u8],
        group: usize,
    },
}

fn bad(detail: &'static str) -> KernelError {
    KernelError::Value { arg: 0, detail }
}

impl<'a> QWeights<'a> {
    /// Bytes of one output channel's row.
    pub fn row_bytes(&self, k: usize) -> usize {
        match self {
            QWeights::Qc8w { .. } => k,
            _ => k.div_ceil(2),
        }
    }

    /// Groups per row (1 for per-channel weights).
    pub fn groups(&self, k: usize) -> usize {
        match *self {
            QWeights::Qb4w { group, .. } if group > 0 => k / group,
            _ => 1,
        }
    }

    /// Checks the byte counts for an `n × k` filter.
    pub fn check(&self, n: usize, k: usize) -> Result<(), KernelError> {
        let (data, scales, scale_bytes) = match *self {
            QWeights::Qc8w { data, scales } | QWeights::Qc4w { data, scales } => {
                (data, scales, n.checked_mul(4))
            }
            QWeights::Qb4w {
                data,
                scales,
                group,
            } => {
                if group == 0 || !k.is_multiple_of(group) || !group.is_multiple_of(2) {
                    return Err(bad(
                        "group-wise weights: the group must be even and divide the input channels",
                    ));
                }
                (
                    data,
                    scales,
                    n.checked_mul(k / group).and_then(|v| v.checked_mul(2)),
                )
            }
        };
        let need = n.checked_mul(self.row_bytes(k));
        if need.is_none_or(|b| data.len() < b) {
            return Err(bad("quantized weights shorter than their dims"));
        }
        if scale_bytes.is_none_or(|b| scales.len() < b) {
            return Err(bad("quantized weight scales fewer than their channels"));
        }
        Ok(())
    }

    /// Raw filter bytes.
    pub fn data(&self) -> &'a [u8] {
        match *self {
            QWeights::Qc8w { data, .. }
            | QWeights::Qc4w { data, .. }
            | QWeights::Qb4w { data, .. } => data,
        }
    }

    /// Scale of output channel `j`, group `g` (as f32).
    #[inline]
    pub fn scale(&self, j: usize, g: usize, groups: usize) -> f32 {
        match *self {
            QWeights::Qc8w { scales, .. } | QWeights::Qc4w { scales, .. } => {
                let b = &scales[4 * j..4 * j + 4];
                f32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
            QWeights::Qb4w { scales, .. } => {
                let i = 2 * (j * groups + g);
                bf16_to_f32(u16::from_le_bytes([scales[i], scales[i + 1]]))
            }
        }
    }
}

/// bf16 → f32 (exact).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// The signed value of a 4-bit weight stored as `q + 8`.
#[inline]
pub fn nibble(byte: u8, high: bool) -> i32 {
    (if high { byte >> 4 } else { byte & 15 }) as i32 - 8
}
