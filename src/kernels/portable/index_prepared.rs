//! `embedding` prepared at load (`exec::prepared`): a 2-D table, int64 or int32 indices, the
//! output the indices' shape with the table's row appended, all static and contiguous. The
//! shapes and dtypes are checked once; each run binds the three tensors and gathers the rows
//! across the cores as the general path does. An index out of range, or a tensor that changed,
//! hands the call back to the general path (which reports the index with its context).

use super::common::{plain, plain_sized, Ctx};
use super::copy_engine::gather_rows;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{Prepared, TensorSlot};

/// `embedding.out(weight, indices, padding_idx, scale_grad_by_freq, sparse, *, out)`. Sizes:
/// the table's rows, a row's bytes, the number of indices; param: 1 for int32 indices.
pub(super) fn prepare_embedding(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    if ctx.nargs() != 7 || ctx.named_elsewhere(0) || ctx.named_elsewhere(1) {
        return None;
    }
    let (w, it, o) = (ctx.entry(0).ok()?, ctx.entry(1).ok()?, ctx.entry(5).ok()?);
    let [rows, dim] = *w.shape.dims() else {
        return None;
    };
    let want = it.shape.dims().iter().chain(core::iter::once(&dim));
    let int32 = match it.dtype {
        DType::I64 => false,
        DType::I32 => true,
        _ => return None,
    };
    let shaped = o.shape.dims().iter().eq(want);
    if !plain(w) || !plain(it) || !plain(o) || o.dtype != w.dtype || !shaped || dim == 0 {
        return None;
    }
    let row = dim.checked_mul(w.dtype.size())?;
    let n = it.shape.numel();
    rows.checked_mul(row)?;
    n.checked_mul(row)?;
    let u = |v: usize| u32::try_from(v).ok();
    let slot = |a: usize| u32::try_from(ctx.tensor_slot(a).ok()?).ok();
    let mut slots = [Prepared::NO_SLOT; 6];
    slots[..3].copy_from_slice(&[slot(0)?, slot(1)?, slot(5)?]);
    Some(Prepared {
        run: Some(run_embedding),
        slots,
        sizes: [u(rows)?, u(row)?, u(n)?, 0],
        param: int32 as u32,
        hint: 0,
    })
}

/// Runs an embedding prepared by [`prepare_embedding`].
fn run_embedding(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let [rows, row, n, _] = p.sizes.map(|s| s as usize);
    let es = if p.param == 1 { 4 } else { 8 };
    let fits = |i: usize, bytes: usize| plain_sized(p, tensors, i, bytes);
    if !fits(0, rows * row) || !fits(1, n * es) || !fits(2, n * row) {
        return Ok(false);
    }
    let Some(id) = tensors.get(p.slots[1] as usize).map(|t| t.shape) else {
        return Ok(false);
    };
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument); the
    // output is bound once.
    let bound = unsafe { (p.input_bytes(tensors, 0), p.output_bytes(tensors, 2)) };
    let (Some(src), Some(dst)) = bound else {
        return Ok(false);
    };
    let gathered = if p.param == 1 {
        // SAFETY: as above (an input).
        unsafe { p.input::<i32>(tensors, 1, id.dims()) }.map(|idx| gather(idx, src, row, dst))
    } else {
        // SAFETY: as above (an input).
        unsafe { p.input::<i64>(tensors, 1, id.dims()) }.map(|idx| gather(idx, src, row, dst))
    };
    Ok(gathered == Some(true))
}

/// Rows `idx` of `src` (rows of `row` bytes) into `dst`, across the cores as the general
/// path does; `false` at an index out of range.
fn gather<I: Copy + Into<i64> + Sync>(idx: &[I], src: &[u8], row: usize, dst: &mut [u8]) -> bool {
    let bad = core::sync::atomic::AtomicBool::new(false);
    crate::parallel::for_chunks(dst, row, row / 8, |first, part, _| {
        gather_rows(part, idx.get(first..).unwrap_or(&[]), src, row, &bad)
    });
    !bad.load(core::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
#[path = "index_prepared_tests.rs"]
mod tests;
