//! `select_copy` of one contiguous block, prepared at load (`exec::prepared`): every dim
//! before the selected one has one index, so the result is one run of the input's bytes (a
//! decoder's last row of logits, when the output is the method's and elision cannot place it
//! on the input). The dim, the index and the output are checked once; each run binds the two
//! tensors' bytes and copies the block. A call whose tensors changed returns to the general
//! path.

use super::common::{plain, plain_sized, prod, Ctx};
use super::copy_engine::copy_same;
use crate::error::KernelError;
use crate::kernel_api::{Prepared, TensorSlot};

/// `select_copy.int_out(self, dim, index, *, out)`. Sizes: the block's first byte, its
/// length, the input's bytes.
pub(super) fn prepare_select(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    if ctx.nargs() != 5 || ctx.named_elsewhere(0) {
        return None;
    }
    let (x, o) = (ctx.entry(0).ok()?, ctx.entry(3).ok()?);
    let xd = x.shape.dims();
    let r = xd.len() as i64;
    let d = ctx.int(1).ok()?;
    let dim = usize::try_from(if d < 0 { d + r } else { d }).ok()?;
    let n = *xd.get(dim)? as i64;
    let index = ctx.int(2).ok()?;
    let i = if index < 0 { index + n } else { index };
    if !(0..n).contains(&i) || prod(&xd[..dim]) != 1 {
        return None;
    }
    let inner = prod(&xd[dim + 1..]);
    let want = xd[..dim].iter().chain(&xd[dim + 1..]);
    if o.dtype != x.dtype || !plain(x) || !plain(o) || !o.shape.dims().iter().eq(want) {
        return None;
    }
    let es = x.dtype.size();
    let len = inner.checked_mul(es)?;
    let off = (i as usize).checked_mul(len)?;
    let u = |v: usize| u32::try_from(v).ok();
    let slot = |a: usize| u32::try_from(ctx.tensor_slot(a).ok()?).ok();
    let mut slots = [Prepared::NO_SLOT; 6];
    slots[0] = slot(0)?;
    slots[1] = slot(3)?;
    Some(Prepared {
        run: Some(run_select),
        slots,
        sizes: [u(off)?, u(len)?, u(x.nbytes())?, 0],
        param: 0,
        hint: 0,
    })
}

/// Runs a selection prepared by [`prepare_select`]: the block's bytes into the output.
fn run_select(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let [off, len, total, _] = p.sizes.map(|s| s as usize);
    let fits = |i: usize, bytes: usize| plain_sized(p, tensors, i, bytes);
    if !fits(0, total) || !fits(1, len) {
        return Ok(false);
    }
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument); the
    // output is bound once.
    let bound = unsafe { (p.input_bytes(tensors, 0), p.output_bytes(tensors, 1)) };
    let (Some(src), Some(dst)) = bound else {
        return Ok(false);
    };
    let Some(block) = src.get(off..off + len) else {
        return Ok(false);
    };
    copy_same(block, dst, 3)?;
    Ok(true)
}

#[cfg(test)]
#[path = "slice_prepared_tests.rs"]
mod tests;
