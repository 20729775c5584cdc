//! f32 `permute_copy` calls prepared at load (`exec::prepared`) when they move whole runs
//! (the head permutes of attention, `[1, T, H, D]` ↔ `[1, H, T, D]`: [`RunsOrder::Swap`]) or
//! transpose the last two dims (a weight `[N, K]` → `[K, N]`, keys `[.., T, D]` → `[.., D,
//! T]`): the permutation is read and reduced once, and each run binds the two tensors and
//! moves the elements (a copy: the bits are the input's whichever way they move). Both
//! tensors must be static (their shapes cannot change after load, so the reduction stays
//! right); the runner still checks their dtype and binding, and a call whose tensors changed
//! returns to the general path ([`super::view`]).

use super::common::{wrap, Ctx};
use super::copy_engine::{runs_order, swap_runs, transpose_matrices, RunsOrder};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{Dynamism, Prepared, TensorSlot};
use crate::tensor::MAX_RANK;

/// `Prepared::param` of a swap of runs: sizes `[a, b, d]`, input `[a, b, d]`, output `[b, a,
/// d]`.
const SWAP: u32 = 0;
/// `Prepared::param` of a transpose of the last two dims: sizes `[batches, a, b]`, input
/// `[batches, a, b]`, output `[batches, b, a]`.
const TRANSPOSE: u32 = 1;

/// `aten::permute_copy.out(self, dims, *, out)`: slots `[self, out]`, the reduction in
/// `param` ([`SWAP`] or [`TRANSPOSE`]) and its sizes.
pub(super) fn prepare_permute(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    if ctx.nargs() != 4 || ctx.named_elsewhere(0) {
        return None;
    }
    let static_f32 = |a: usize| {
        let t = ctx.entry(a).ok()?;
        if t.dtype != DType::F32 || t.dynamism != Dynamism::Static || !t.contiguous {
            return None;
        }
        u32::try_from(ctx.tensor_slot(a).ok()?).ok()
    };
    let (x, out) = (static_f32(0)?, static_f32(2)?);
    let xd = ctx.dims(0).ok()?;
    let dims = ctx.int_list(1).ok()?;
    let r = xd.len();
    if dims.len() != r {
        return None;
    }
    let mut perm = [0usize; MAX_RANK];
    let mut seen = 0u32;
    for (p, &d) in perm.iter_mut().zip(dims.iter()) {
        let w = wrap(d, r, 1).ok()?;
        if seen & (1 << w) != 0 {
            return None;
        }
        seen |= 1 << w;
        *p = w;
    }
    let perm = &perm[..r];
    let od = ctx.dims(2).ok()?;
    if od.len() != r || perm.iter().zip(od).any(|(&p, &o)| xd[p] != o) {
        return None;
    }
    let ((a, b, d), param) = match runs_order(xd, perm) {
        Some(RunsOrder::Swap(a, b, d)) => ((a, b, d), SWAP),
        _ if r >= 2
            && perm[..r - 2].iter().enumerate().all(|(i, &p)| p == i)
            && (perm[r - 2], perm[r - 1]) == (r - 1, r - 2) =>
        {
            let batches = xd[..r - 2]
                .iter()
                .try_fold(1usize, |v, &x| v.checked_mul(x))?;
            ((batches, xd[r - 2], xd[r - 1]), TRANSPOSE)
        }
        _ => return None,
    };
    let size = |v: usize| u32::try_from(v).ok();
    Some(Prepared {
        run: Some(run_permute),
        slots: [
            x,
            out,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
        ],
        sizes: [size(a)?, size(b)?, size(d)?, 0],
        param,
        hint: 0,
    })
}

/// Runs a call prepared by [`prepare_permute`]: the runs of `[a, b, d]` moved to `[b, a, d]`,
/// or each of the `batches` `[a, b]` matrices transposed, in groups of 4 output rows across
/// the cores.
fn run_permute(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let (Some(x), Some(o)) = (
        tensors.get(p.slots[0] as usize),
        tensors.get(p.slots[1] as usize),
    ) else {
        return Ok(false);
    };
    if x.dynamism != Dynamism::Static || o.dynamism != Dynamism::Static {
        return Ok(false);
    }
    let [a, b, d, _] = p.sizes.map(|s| s as usize);
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument); the
    // output is bound once.
    let bound = unsafe {
        (
            p.input::<f32>(tensors, 0, x.shape.dims()),
            p.output::<f32>(tensors, 1, o.shape.dims()),
        )
    };
    let (Some(xs), Some(os)) = bound else {
        return Ok(false);
    };
    if xs.len() != a * b * d || os.len() != xs.len() {
        return Ok(false);
    }
    if p.param == SWAP {
        swap_runs(xs, os, (a, b, d), 1, 2)?;
    } else {
        transpose_matrices(xs, os, (a, b, d), 2)?;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "view_prepared_tests.rs"]
mod tests;
