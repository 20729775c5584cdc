//! `split_with_sizes_copy` into equal pieces of rows, prepared at load (`exec::prepared`): the
//! query, key and value an attention layer splits from one product (`[.., 3·C]` into three
//! `[.., C]`). The sizes, the dim and the outputs are checked once; each run binds the input
//! and the outputs' bytes and copies every piece's rows in one parallel step (as the general
//! path's row split does). A call whose tensors changed returns to the general path.

use super::common::{plain, plain_sized, prod, Ctx};
use super::copy_engine::copy_row_pieces;
use crate::error::KernelError;
use crate::kernel_api::{Prepared, TensorSlot};
use crate::parallel::SharedSlice;

/// Most pieces a record binds (one slot is the input's).
const MAX_PIECES: usize = 5;

/// `split_with_sizes_copy.out(self, split_sizes, dim, *, out)`: prepared when the sizes are
/// equal and positive, at most 5, and split a dim with at least one dim of more than one
/// index before it (pieces of rows); every output of `self`'s dtype and the piece's shape.
/// Sizes: pieces, rows, a piece's row bytes, the input's row bytes.
pub(super) fn prepare_split(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    if ctx.nargs() != 5 || ctx.named_elsewhere(0) {
        return None;
    }
    let x = ctx.entry(0).ok()?;
    let xd = x.shape.dims();
    if xd.is_empty() {
        return None;
    }
    let sizes = ctx.int_list(1).ok()?;
    let count = sizes.len();
    let sz = *sizes.first()?;
    if !(1..=MAX_PIECES).contains(&count) || sz <= 0 || sizes.iter().any(|&s| s != sz) {
        return None;
    }
    let dim = usize::try_from(ctx.int(2).ok()?.rem_euclid(xd.len() as i64)).ok()?;
    let total = *xd.get(dim)?;
    let (outer, inner) = (prod(&xd[..dim]), prod(&xd[dim + 1..]));
    let sz = sz as usize;
    if !plain(x) || sz.checked_mul(count)? != total || outer < 2 || ctx.list_len(3).ok()? != count {
        return None;
    }
    let mut slots = [Prepared::NO_SLOT; 6];
    slots[0] = u32::try_from(ctx.tensor_slot(0).ok()?).ok()?;
    for k in 0..count {
        let s = ctx.list_tensor_slot(3, k).ok()??;
        let o = ctx.tensor_at(s)?;
        let od = o.shape.dims();
        let same = od.len() == xd.len()
            && od
                .iter()
                .zip(xd)
                .enumerate()
                .all(|(i, (&a, &b))| a == if i == dim { sz } else { b });
        if o.dtype != x.dtype || !plain(o) || !same {
            return None;
        }
        slots[k + 1] = u32::try_from(s).ok()?;
    }
    let es = x.dtype.size();
    let w = sz.checked_mul(inner)?.checked_mul(es)?;
    let stride = w.checked_mul(count)?;
    outer.checked_mul(stride)?;
    let u = |v: usize| u32::try_from(v).ok();
    Some(Prepared {
        run: Some(run_split),
        slots,
        sizes: [u(count)?, u(outer)?, u(w)?, u(stride)?],
        param: 0,
        hint: 0,
    })
}

/// Runs a split prepared by [`prepare_split`].
fn run_split(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let [count, outer, w, stride] = p.sizes.map(|s| s as usize);
    let fits = |i: usize, bytes: usize| plain_sized(p, tensors, i, bytes);
    if count > MAX_PIECES || !fits(0, outer * stride) || !(1..=count).all(|i| fits(i, outer * w)) {
        return Ok(false);
    }
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose outputs were proved to overlap no other argument);
    // each output is bound once.
    let Some(src) = (unsafe { p.input_bytes(tensors, 0) }) else {
        return Ok(false);
    };
    let mut pieces: heapless::Vec<(SharedSlice<'_, u8>, usize, usize), MAX_PIECES> =
        heapless::Vec::new();
    for k in 0..count {
        // SAFETY: as above; distinct outputs of one call.
        let Some(dst) = (unsafe { p.output_bytes(tensors, k + 1) }) else {
            return Ok(false);
        };
        if dst.len() != outer * w || pieces.push((SharedSlice::new(dst), w, k * w)).is_err() {
            return Ok(false);
        }
    }
    copy_row_pieces(src, &pieces, outer, stride);
    Ok(true)
}

#[cfg(test)]
#[path = "split_prepared_tests.rs"]
mod tests;
