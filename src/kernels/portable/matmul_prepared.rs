//! `mm`, `addmm` and `bmm` calls prepared at load (`exec::prepared`): the shapes, the bias
//! and the operation are checked once, and each run binds the tensors and hands the GEMM the
//! whole scratch, with the arguments the general path ([`super::matmul`]) would give it, so
//! the bits are the same. A call whose tensors changed since (a shape, a binding) returns
//! to the general path, which reports what is wrong.
//!
//! Prepared: f32 tensors of the shapes the kernel would give the output (already those), no
//! row demand on the output (the general path computes only the demanded rows), inputs not
//! named at another argument, and for `addmm` `alpha = beta = 1` with a bias per output column
//! (`[n]` or `[1, n]`: the Linear layer). Others take the general path every time.

use super::common::Ctx;
use super::matmul_batch::batched;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{f32_scratch, Prepared, TensorSlot};
use crate::linalg::gemm::{self, MatRef, SplitHint, GEMM_SCRATCH_F32};

/// `Prepared::param` of a batched product (`bmm`); `0` is a matrix product.
const BATCHED: u32 = 1;

/// The record of a product call: inputs `a` (argument 0 of `mm`/`bmm`, 1 of `addmm`) and `b`,
/// the output, the bias (`addmm`), with sizes `[batches, m, k, n]`.
fn record(
    ctx: &Ctx<'_, '_, '_>,
    (a, b, out): (usize, usize, usize),
    bias: Option<usize>,
    batched: bool,
) -> Option<Prepared> {
    let ins = [Some(a), Some(b), bias];
    if ctx.demanded_rows(out).is_some()
        || ins.iter().flatten().any(|&i| ctx.named_elsewhere(i))
        || ins
            .iter()
            .flatten()
            .chain([&out])
            .any(|&i| ctx.out_dtype(i).ok() != Some(DType::F32))
    {
        return None;
    }
    let (ad, bd, od) = (ctx.dims(a).ok()?, ctx.dims(b).ok()?, ctx.dims(out).ok()?);
    let (nb, m, k, n) = match (batched, ad, bd) {
        (false, &[m, k], &[k2, n]) if k2 == k => (1, m, k, n),
        (true, &[nb, m, k], &[nb2, k2, n]) if (nb2, k2) == (nb, k) => (nb, m, k, n),
        _ => return None,
    };
    let want = [nb, m, n];
    if od != if batched { &want[..] } else { &want[1..] } {
        return None;
    }
    if let Some(s) = bias {
        if !matches!(ctx.dims(s).ok()?, [c] | [1, c] if *c == n) {
            return None;
        }
    }
    let slot = |i: usize| u32::try_from(ctx.tensor_slot(i).ok()?).ok();
    let size = |v: usize| u32::try_from(v).ok();
    Some(Prepared {
        run: Some(run_product),
        slots: [
            slot(a)?,
            slot(b)?,
            slot(out)?,
            match bias {
                Some(s) => slot(s)?,
                None => Prepared::NO_SLOT,
            },
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
        ],
        sizes: [size(nb)?, size(m)?, size(k)?, size(n)?],
        param: if batched { BATCHED } else { 0 },
        // The split across the team installed at load (none: decided as it runs).
        hint: if batched {
            0
        } else {
            gemm::split_hint(m, n, k, true).bits()
        },
    })
}

/// `aten::mm.out(self, mat2, *, out)`.
pub(super) fn prepare_mm(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    (ctx.nargs() == 4).then_some(())?;
    record(ctx, (0, 1, 2), None, false)
}

/// `aten::bmm.out(self, mat2, *, out)`.
pub(super) fn prepare_bmm(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    (ctx.nargs() == 4).then_some(())?;
    record(ctx, (0, 1, 2), None, true)
}

/// `aten::addmm.out(self, mat1, mat2, *, beta, alpha, out)` with `alpha = beta = 1` and a
/// bias per output column.
pub(super) fn prepare_addmm(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    (ctx.nargs() == 7).then_some(())?;
    let one = |i: usize| ctx.scalar(i).ok().is_some_and(|s| s.as_f64() == 1.0);
    if !one(3) || !one(4) {
        return None;
    }
    record(ctx, (1, 2, 5), Some(0), false)
}

/// Runs a product call prepared by [`record`]: the general path's GEMM on the bound tensors.
fn run_product(
    p: &Prepared,
    tensors: &[TensorSlot],
    scratch: &mut [u8],
) -> Result<bool, KernelError> {
    let [nb, m, k, n] = p.sizes.map(|s| s as usize);
    let (ad, bd, od) = ([nb, m, k], [nb, k, n], [nb, m, n]);
    let from = usize::from(p.param != BATCHED);
    let bias_dims = match tensors.get(p.slots[3] as usize) {
        Some(t) if p.slots[3] != Prepared::NO_SLOT => Some(t.shape.dims()),
        _ => None,
    };
    if bias_dims.is_some_and(|d| !matches!(d, [c] | [1, c] if *c == n)) {
        return Ok(false);
    }
    // SAFETY: this record's runner while its call runs (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument); the
    // output is bound once.
    let bound = unsafe {
        (
            p.input::<f32>(tensors, 0, &ad[from..]),
            p.input::<f32>(tensors, 1, &bd[from..]),
            p.output::<f32>(tensors, 2, &od[from..]),
        )
    };
    let (Some(a), Some(b), Some(out)) = bound else {
        return Ok(false);
    };
    let bias = match bias_dims {
        None => None,
        // SAFETY: as above (an input).
        Some(d) => match unsafe { p.input::<f32>(tensors, 3, d) } {
            Some(v) => Some(v),
            None => return Ok(false),
        },
    };
    let scratch = f32_scratch(scratch, GEMM_SCRATCH_F32)?;
    if p.param == BATCHED {
        batched(a, b, out, nb, m, k, n, 1.0, 0.0, scratch)?;
    } else {
        let (am, bm) = (MatRef::row_major(a, m, k)?, MatRef::row_major(b, k, n)?);
        let hint = SplitHint::from_bits(p.hint);
        gemm::sgemm_hinted(am, bm, out, n, (1.0, 0.0, bias, None), scratch, hint)?;
    }
    Ok(true)
}

#[cfg(test)]
#[path = "matmul_prepared_tests.rs"]
mod tests;
