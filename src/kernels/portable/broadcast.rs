//! Broadcasting helpers: NumPy-rule strides of a tensor broadcast to an output shape and the
//! broadcast copy of an f32 operand (the bias of `addmm`, `baddbmm`, `linear`).

use super::common::{checked_prod, shape_err, Res};
use crate::error::KernelError;
use crate::tensor::{NdIndex, MAX_RANK};

/// Element strides of `sdims` broadcast (NumPy rules, right-aligned) to `ddims` (0 on
/// broadcast dims); fails unless `sdims` broadcasts to exactly `ddims`.
pub(super) fn bcast_strides(
    sdims: &[usize],
    ddims: &[usize],
    arg: usize,
) -> Result<[usize; MAX_RANK], KernelError> {
    let r = ddims.len();
    let bad = shape_err(arg, "tensor does not broadcast to the output shape");
    if sdims.len() > r {
        return Err(bad);
    }
    let lead = r - sdims.len();
    let mut sstr = [0usize; MAX_RANK];
    let mut acc = 1usize;
    for i in (0..r).rev() {
        let sd = if i >= lead { sdims[i - lead] } else { 1 };
        if sd == ddims[i] {
            sstr[i] = if sd == 1 { 0 } else { acc };
        } else if sd == 1 {
            sstr[i] = 0;
        } else {
            return Err(bad);
        }
        acc = acc.saturating_mul(sd);
    }
    Ok(sstr)
}

/// Writes `src` (shape `sdims`) broadcast to `ddims` into `dst` (row-major).
pub(super) fn broadcast_into(
    src: &[f32],
    sdims: &[usize],
    dst: &mut [f32],
    ddims: &[usize],
    arg: usize,
) -> Res {
    let r = ddims.len();
    let sstr = bcast_strides(sdims, ddims, arg)?;
    let total = checked_prod(ddims, arg)?;
    if total == 0 {
        return Ok(());
    }
    if r == 0 {
        dst[0] = src[0];
        return Ok(());
    }
    let inner = ddims[r - 1];
    let istr = sstr[r - 1];
    // The outer index (dims 0..r-1) and the source offset of its row.
    let mut rows = NdIndex::new(&ddims[..r - 1]);
    let jumps = rows.jumps(&sstr[..r - 1]);
    let mut soff = 0usize;
    for row in dst[..total].chunks_exact_mut(inner) {
        if istr == 0 {
            row.fill(src[soff]);
        } else {
            row.copy_from_slice(&src[soff..soff + inner]);
        }
        if let Some(d) = rows.advance() {
            soff = soff.wrapping_add(jumps[d]);
        }
    }
    Ok(())
}
