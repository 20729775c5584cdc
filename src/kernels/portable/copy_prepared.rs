//! Copies that write their input's bytes unchanged, prepared at load (`exec::prepared`) when
//! load-time elision (`exec::elide`) could not remove them (the planner reuses the input's
//! bytes while the output is still read): `alias_copy`, `detach_copy`, `lift_fresh_copy`,
//! `clone`, `_to_copy`, the dim-order copies to the default order, and `expand_copy` to the
//! input's own shape, each of two static tensors of one dtype, shape and the default dim
//! order. The arguments that could make the copy anything else are checked once; each run
//! binds the two tensors' bytes and copies them (split across the cores when large, as the
//! general path does). A call whose tensors changed returns to the general path.

use super::common::{plain, Ctx};
use super::convert::convert_run;
use super::copy_engine::copy_same;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{Prepared, TensorSlot};
use crate::shape::dims_eq;

/// The record of a copy of argument 0 into argument `out` (the call has `out + 2`
/// arguments: the out tensor and its return), when it writes the input's bytes.
fn identity(ctx: &Ctx<'_, '_, '_>, out: usize) -> Option<Prepared> {
    same_shape(ctx, out, false)
}

/// Element types a converting copy is prepared between (`convert_run` on each: what the
/// general path does for a copy in the default order).
fn convertible(d: DType) -> bool {
    use DType::*;
    matches!(d, Bool | U8 | I8 | I16 | I32 | I64 | F32 | F64)
}

/// The record of a copy of argument 0 into argument `out` of the same shape: of the same
/// dtype ([`run_copy`]), or with `convert` of another one ([`run_convert`]).
fn same_shape(ctx: &Ctx<'_, '_, '_>, out: usize, convert: bool) -> Option<Prepared> {
    if ctx.nargs() != out + 2 || ctx.named_elsewhere(0) {
        return None;
    }
    let (x, o) = (ctx.entry(0).ok()?, ctx.entry(out).ok()?);
    if !plain(x) || !plain(o) || !dims_eq(x.shape.dims(), o.shape.dims()) {
        return None;
    }
    let run: crate::kernel_api::PreparedFn = if x.dtype == o.dtype {
        run_copy
    } else if convert && convertible(x.dtype) && convertible(o.dtype) {
        run_convert
    } else {
        return None;
    };
    let slot = |a: usize| u32::try_from(ctx.tensor_slot(a).ok()?).ok();
    Some(Prepared {
        run: Some(run),
        slots: [
            slot(0)?,
            slot(out)?,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
        ],
        sizes: [0; 4],
        param: out as u32,
        hint: 0,
    })
}

/// `alias_copy`, `detach_copy`, `lift_fresh_copy`: `(self, *, out)`.
pub(super) fn prepare_plain_copy(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    identity(ctx, 1)
}

/// `clone.out(self, *, memory_format=None, out)`: any memory format keeps a tensor of the
/// default order as it is (the general path ignores it likewise).
pub(super) fn prepare_clone(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    identity(ctx, 2)
}

/// `_to_copy.out(self, *, non_blocking=False, memory_format=None, out)` to the same dtype.
pub(super) fn prepare_to_copy(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    identity(ctx, 3)
}

/// `_clone_dim_order.out` and `_to_dim_order_copy.out(self, *, non_blocking=False,
/// dim_order=None, out)` with no dim order or the default one (the latter converting to the
/// out's dtype: a clone of another dtype is the general path's error).
pub(super) fn prepare_dim_order_copy(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    dim_order_copy(ctx, false)
}

/// `_to_dim_order_copy.out`: [`prepare_dim_order_copy`], converting.
pub(super) fn prepare_to_dim_order_copy(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    dim_order_copy(ctx, true)
}

fn dim_order_copy(ctx: &Ctx<'_, '_, '_>, convert: bool) -> Option<Prepared> {
    let r = ctx.dims(0).ok()?.len();
    if !ctx.is_none(2).ok()? {
        let order = ctx.int_list(2).ok()?;
        if order.len() != r || order.iter().enumerate().any(|(i, &d)| d != i as i64) {
            return None;
        }
    }
    same_shape(ctx, 3, convert)
}

/// `expand_copy.out(self, size, *, implicit=False, out)` to exactly the input's shape.
pub(super) fn prepare_expand(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    let size = ctx.int_list(1).ok()?;
    let xd = ctx.dims(0).ok()?;
    if size.len() != xd.len() || size.iter().zip(xd).any(|(&s, &d)| s != d as i64) {
        return None;
    }
    identity(ctx, 3)
}

/// Runs a copy prepared by [`identity`]: the input's bytes into the output.
fn run_copy(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let (Some(x), Some(o)) = (
        tensors.get(p.slots[0] as usize),
        tensors.get(p.slots[1] as usize),
    ) else {
        return Ok(false);
    };
    if x.dtype != o.dtype || !plain(x) || !plain(o) || !dims_eq(x.shape.dims(), o.shape.dims()) {
        return Ok(false);
    }
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument); the
    // output is bound once.
    let bound = unsafe { (p.input_bytes(tensors, 0), p.output_bytes(tensors, 1)) };
    let (Some(src), Some(dst)) = bound else {
        return Ok(false);
    };
    copy_same(src, dst, p.param as usize)?;
    Ok(true)
}

/// Runs a converting copy prepared by [`same_shape`]: each input element converted into the
/// output's dtype (`convert_run`, as the general path).
fn run_convert(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let (Some(x), Some(o)) = (
        tensors.get(p.slots[0] as usize),
        tensors.get(p.slots[1] as usize),
    ) else {
        return Ok(false);
    };
    if !plain(x) || !plain(o) || !dims_eq(x.shape.dims(), o.shape.dims()) {
        return Ok(false);
    }
    let (sdt, ddt) = (x.dtype, o.dtype);
    // SAFETY: as in `run_copy`.
    let bound = unsafe { (p.input_bytes(tensors, 0), p.output_bytes(tensors, 1)) };
    let (Some(src), Some(dst)) = bound else {
        return Ok(false);
    };
    convert_run(sdt, src, ddt, dst);
    Ok(true)
}

#[cfg(test)]
#[path = "copy_prepared_tests.rs"]
mod tests;
