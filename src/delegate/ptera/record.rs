//! The helpers every operation's state record shares: the error of a bad payload or state,
//! and little-endian reads that cannot run past a short state area.

use crate::error::KernelError;

/// The error of a payload or state that does not hold what the runtime needs.
pub(super) fn bad(detail: &'static str) -> KernelError {
    KernelError::Value { arg: 0, detail }
}

/// The little-endian u32 at byte `at` of a record (0 past its end: records are written
/// whole by their `encode`, so this only guards against a short state area).
pub(super) fn u32_at(r: &[u8], at: usize) -> u32 {
    r.get(at..at.wrapping_add(4))
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

/// The little-endian u64 at byte `at` (0 past the end, as [`u32_at`]).
pub(super) fn u64_at(r: &[u8], at: usize) -> u64 {
    r.get(at..at.wrapping_add(8))
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}
