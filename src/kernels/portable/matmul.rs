//! Matmul family on [`crate::linalg::gemm`]: `mm`, `bmm`, `addmm`, `baddbmm`, `linear`.
//!
//! f32 only; every tensor is contiguous; the output is resized to the product shape and every
//! element is written (only the demanded rows when the program reads a subset of rows, as for
//! last-position logits). `addmm`/`baddbmm`/`linear` broadcast their bias to the output first.
//! `mm`, `bmm` and Linear-shaped `addmm` calls are prepared at load (`matmul_prepared.rs`).

use super::broadcast::{bcast_strides, broadcast_into};
use super::common::{checked_prod, make_shape, need_dtype, shape_err, Ctx, Res};
use super::matmul_batch::batched;
use super::matmul_prepared::{prepare_addmm, prepare_bmm, prepare_mm};
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};
use crate::tensor::TensorRef;

/// Scratch bytes of every GEMM-backed kernel (packed panels plus alignment slack).
pub(super) const GEMM_SCRATCH: usize = GEMM_SCRATCH_F32 * 4 + 16;

/// The matmul kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::with_scratch("aten::mm.out", mm_out, GEMM_SCRATCH).with_prepare(prepare_mm),
    KernelDef::with_scratch("aten::bmm.out", bmm_out, GEMM_SCRATCH).with_prepare(prepare_bmm),
    KernelDef::with_scratch("aten::addmm.out", addmm_out, GEMM_SCRATCH).with_prepare(prepare_addmm),
    KernelDef::with_scratch("aten::baddbmm.out", baddbmm_out, GEMM_SCRATCH),
    KernelDef::with_scratch("aten::linear.out", linear_out, GEMM_SCRATCH),
];

/// Checks that every tensor argument in `ins` and the output `out` are f32.
fn matmul_dtypes(ctx: &Ctx<'_, '_, '_>, ins: &[&TensorRef<'_>], out: usize) -> Res {
    for t in ins {
        if t.dtype() != DType::F32 {
            return Err(KernelError::UnsupportedDType {
                arg: t.arg(),
                dtype: t.dtype(),
            });
        }
    }
    need_dtype(ctx.out_dtype(out)?, DType::F32, out)
}

/// The output rows to compute for an `m`-row product written to argument `out`: the rows
/// the program reads ([`Ctx::demanded_rows`], e.g. only the last position's logits), else all.
fn rows_needed(ctx: &Ctx<'_, '_, '_>, out: usize, m: usize) -> (usize, usize) {
    match ctx.demanded_rows(out) {
        Some((lo, hi)) if lo < hi && hi <= m => (lo, hi),
        _ => (0, m),
    }
}

/// The kernel's whole GEMM scratch (every kernel here declares [`GEMM_SCRATCH`]): with all of
/// it the GEMM skips sizing the scratch for the shape, which costs more than the rest of a
/// small product's set-up.
fn gemm_scratch<'s>(ctx: &'s mut Ctx<'_, '_, '_>) -> Result<&'s mut [f32], KernelError> {
    ctx.scratch_f32(GEMM_SCRATCH_F32)
}

fn scalar_f32(s: Scalar) -> f32 {
    s.as_f64() as f32
}

/// `aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)`: `out = self @ mat2`.
/// f32 only (all three tensors); `self` `[m, k]`, `mat2` `[k, n]`, `out` resized to `[m, n]`.
fn mm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    matmul_dtypes(ctx, &[&a, &b], 2)?;
    if a.rank() != 2 {
        return Err(shape_err(0, "mm: self must be a matrix"));
    }
    if b.rank() != 2 {
        return Err(shape_err(1, "mm: mat2 must be a matrix"));
    }
    let (m, k, n) = (a.dims()[0], a.dims()[1], b.dims()[1]);
    if b.dims()[0] != k {
        return Err(shape_err(1, "mm: mat2 rows must equal self columns"));
    }
    let (ad, bd) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let (lo, hi) = rows_needed(ctx, 2, m);
    let mut out = ctx.output(2, &make_shape(&[m, n], 2)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let scratch = gemm_scratch(ctx)?;
    gemm::sgemm(
        MatRef::row_major(&ad[lo * k..], hi - lo, k)?,
        MatRef::row_major(bd, k, n)?,
        &mut od[lo * n..],
        n,
        1.0,
        0.0,
        None,
        scratch,
    )
}

/// `aten::bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out)`: batched `self[i] @ mat2[i]`.
/// f32 only; `self` `[b, m, k]`, `mat2` `[b, k, n]`, `out` resized to `[b, m, n]`.
fn bmm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    matmul_dtypes(ctx, &[&a, &b], 2)?;
    if a.rank() != 3 {
        return Err(shape_err(0, "bmm: self must be 3-D"));
    }
    if b.rank() != 3 {
        return Err(shape_err(1, "bmm: mat2 must be 3-D"));
    }
    let (nb, m, k) = (a.dims()[0], a.dims()[1], a.dims()[2]);
    let n = b.dims()[2];
    if b.dims()[0] != nb || b.dims()[1] != k {
        return Err(shape_err(
            1,
            "bmm: mat2 must be [batch, k, n] matching self",
        ));
    }
    let (ad, bd) = (a.as_slice::<f32>()?, b.as_slice::<f32>()?);
    let mut out = ctx.output(2, &make_shape(&[nb, m, n], 2)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let scratch = gemm_scratch(ctx)?;
    batched(ad, bd, od, nb, m, k, n, 1.0, 0.0, scratch)
}

/// `aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1,
/// Tensor(a!) out)`: `out = beta·self + alpha·(mat1 @ mat2)`.
/// f32 only; `mat1` `[m, k]`, `mat2` `[k, n]`, `self` broadcastable to `[m, n]`; when
/// `beta == 0`, `self` is ignored (NaN/Inf in it do not propagate), as in ATen.
fn addmm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(7)?;
    let s = ctx.input(0)?;
    let a = ctx.input(1)?;
    let b = ctx.input(2)?;
    let beta = scalar_f32(ctx.scalar(3)?);
    let alpha = scalar_f32(ctx.scalar(4)?);
    matmul_dtypes(ctx, &[&s, &a, &b], 5)?;
    if a.rank() != 2 {
        return Err(shape_err(1, "addmm: mat1 must be a matrix"));
    }
    if b.rank() != 2 {
        return Err(shape_err(2, "addmm: mat2 must be a matrix"));
    }
    let (m, k, n) = (a.dims()[0], a.dims()[1], b.dims()[1]);
    if b.dims()[0] != k {
        return Err(shape_err(2, "addmm: mat2 rows must equal mat1 columns"));
    }
    let (sd, ad, bd) = (
        s.as_slice::<f32>()?,
        a.as_slice::<f32>()?,
        b.as_slice::<f32>()?,
    );
    // Validate the broadcast before touching the output.
    let row_vector = s.rank() <= 2 && s.numel() == n && (s.rank() < 2 || s.dims()[0] == 1);
    let (lo, hi) = rows_needed(ctx, 5, m);
    let mut out = ctx.output(5, &make_shape(&[m, n], 5)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let am = MatRef::row_major(&ad[lo * k..], hi - lo, k)?;
    let bm = MatRef::row_major(bd, k, n)?;
    if beta == 0.0 {
        bcast_strides(s.dims(), &[m, n], 0)?;
        let scratch = gemm_scratch(ctx)?;
        return gemm::sgemm(am, bm, &mut od[lo * n..], n, alpha, 0.0, None, scratch);
    }
    if beta == 1.0 && row_vector && n > 0 {
        // The common Linear case: bias per output column, added in the GEMM epilogue.
        let scratch = gemm_scratch(ctx)?;
        return gemm::sgemm(am, bm, &mut od[lo * n..], n, alpha, 0.0, Some(sd), scratch);
    }
    broadcast_into(sd, s.dims(), od, &[m, n], 0)?;
    let scratch = gemm_scratch(ctx)?;
    gemm::sgemm(am, bm, &mut od[lo * n..], n, alpha, beta, None, scratch)
}

/// `aten::baddbmm.out(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1,
/// Scalar alpha=1, Tensor(a!) out)`: `out[i] = beta·self[i] + alpha·(batch1[i] @ batch2[i])`.
/// f32 only; `batch1` `[b, m, k]`, `batch2` `[b, k, n]`, `self` broadcastable to `[b, m, n]`
/// (ignored when `beta == 0`).
fn baddbmm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(7)?;
    let s = ctx.input(0)?;
    let a = ctx.input(1)?;
    let b = ctx.input(2)?;
    let beta = scalar_f32(ctx.scalar(3)?);
    let alpha = scalar_f32(ctx.scalar(4)?);
    matmul_dtypes(ctx, &[&s, &a, &b], 5)?;
    if a.rank() != 3 {
        return Err(shape_err(1, "baddbmm: batch1 must be 3-D"));
    }
    if b.rank() != 3 {
        return Err(shape_err(2, "baddbmm: batch2 must be 3-D"));
    }
    let (nb, m, k) = (a.dims()[0], a.dims()[1], a.dims()[2]);
    let n = b.dims()[2];
    if b.dims()[0] != nb || b.dims()[1] != k {
        return Err(shape_err(
            2,
            "baddbmm: batch2 must be [batch, k, n] matching batch1",
        ));
    }
    let (sd, ad, bd) = (
        s.as_slice::<f32>()?,
        a.as_slice::<f32>()?,
        b.as_slice::<f32>()?,
    );
    let mut out = ctx.output(5, &make_shape(&[nb, m, n], 5)?)?;
    let od = out.as_mut_slice::<f32>()?;
    if beta == 0.0 {
        bcast_strides(s.dims(), &[nb, m, n], 0)?;
    } else {
        broadcast_into(sd, s.dims(), od, &[nb, m, n], 0)?;
    }
    let scratch = gemm_scratch(ctx)?;
    batched(ad, bd, od, nb, m, k, n, alpha, beta, scratch)
}

/// `aten::linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out)`:
/// `out = input @ weightᵀ + bias`. f32 only; `input` `[..., in]` (rank ≥ 1), `weight`
/// `[out, in]` (multiplied through a transposed view, no copy), `bias` `[out]` (added in the
/// GEMM epilogue) or any shape broadcastable to the output; `out` is `[..., out]`.
fn linear_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let w = ctx.input(1)?;
    let bias = ctx.opt_input(2)?;
    match &bias {
        Some(bt) => matmul_dtypes(ctx, &[&x, &w, bt], 3)?,
        None => matmul_dtypes(ctx, &[&x, &w], 3)?,
    }
    if x.rank() == 0 {
        return Err(shape_err(0, "linear: input must have rank >= 1"));
    }
    if w.rank() != 2 {
        return Err(shape_err(
            1,
            "linear: weight must be [out_features, in_features]",
        ));
    }
    let (nout, nin) = (w.dims()[0], w.dims()[1]);
    let r = x.rank();
    if x.dims()[r - 1] != nin {
        return Err(shape_err(
            1,
            "linear: weight in_features must equal input's last dim",
        ));
    }
    let m = checked_prod(&x.dims()[..r - 1], 0)?;
    let mut oshape = *x.shape();
    oshape.dims_mut()[r - 1] = nout;
    let (xd, wd) = (x.as_slice::<f32>()?, w.as_slice::<f32>()?);
    let bd = match &bias {
        Some(bt) => Some(bt.as_slice::<f32>()?),
        None => None,
    };
    let (lo, hi) = rows_needed(ctx, 3, m);
    let mut out = ctx.output(3, &oshape)?;
    let od = out.as_mut_slice::<f32>()?;
    let am = MatRef::row_major(&xd[lo * nin..], hi - lo, nin)?;
    let bm = MatRef::row_major(wd, nout, nin)?.t();
    let (beta, vec_bias) = match (&bias, bd) {
        (Some(bt), Some(b)) if bt.rank() == 1 && bt.numel() == nout && nout > 0 => (0.0, Some(b)),
        (Some(bt), Some(b)) => {
            broadcast_into(b, bt.dims(), od, oshape.dims(), 2)?;
            (1.0, None)
        }
        _ => (0.0, None),
    };
    let scratch = gemm_scratch(ctx)?;
    gemm::sgemm(
        am,
        bm,
        &mut od[lo * nout..],
        nout,
        1.0,
        beta,
        vec_bias,
        scratch,
    )
}

#[cfg(test)]
#[path = "matmul_tests.rs"]
mod tests;
