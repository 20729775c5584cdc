//! Neural-network kernels: the matmul family (on [`crate::linalg::gemm`]), normalisation,
//! softmax, convolution, pooling and reductions.
//!
//! Conventions shared by every kernel here:
//! - inputs and outputs are contiguous (default dim order; `KernelCtx::input` enforces it);
//! - the f32 case has a dedicated fast path over slices; other dtypes, where a kernel accepts
//!   them, go through a generic path computing in f64 (floats) or i64 (integers);
//! - every output element is written, and every size product is checked for overflow.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]

use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::{KernelCtx, KernelDef};
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};
use crate::linalg::vecmath as vec;
use crate::tensor::{Shape, TensorMut, TensorRef, MAX_RANK};

type Ctx<'c, 'a, 'p> = KernelCtx<'c, 'a, 'p>;
type Res = Result<(), KernelError>;

/// Scratch bytes of every GEMM-backed kernel (packed panels plus alignment slack).
const GEMM_SCRATCH: usize = GEMM_SCRATCH_F32 * 4 + 16;
/// Floats of the im2col tile buffer used by `convolution` (in addition to the GEMM scratch).
const IM2COL_F32: usize = 64 * 1024;
/// im2col tiles cover at most this many output pixels.
const IM2COL_TILE_PIXELS: usize = 256;
const CONV_SCRATCH: usize = GEMM_SCRATCH + IM2COL_F32 * 4;

pub static KERNELS: &[KernelDef] = &[
    // matmul family
    KernelDef::with_scratch("aten::mm.out", mm_out, GEMM_SCRATCH),
    KernelDef::with_scratch("aten::bmm.out", bmm_out, GEMM_SCRATCH),
    KernelDef::with_scratch("aten::addmm.out", addmm_out, GEMM_SCRATCH),
    KernelDef::with_scratch("aten::baddbmm.out", baddbmm_out, GEMM_SCRATCH),
    KernelDef::with_scratch("aten::linear.out", linear_out, GEMM_SCRATCH),
    // normalisation
    KernelDef::new("aten::native_layer_norm.out", native_layer_norm_out),
    KernelDef::new("aten::native_group_norm.out", native_group_norm_out),
    KernelDef::new(
        "aten::_native_batch_norm_legit_no_training.out",
        batch_norm_no_training_out,
    ),
    KernelDef::new("aten::_native_batch_norm_legit.out", batch_norm_legit_out),
    // softmax
    KernelDef::new("aten::_softmax.out", softmax_out),
    KernelDef::new("aten::_log_softmax.out", log_softmax_out),
    // convolution and pooling
    KernelDef::with_scratch("aten::convolution.out", convolution_out, CONV_SCRATCH),
    KernelDef::new(
        "aten::max_pool2d_with_indices.out",
        max_pool2d_with_indices_out,
    ),
    KernelDef::new("aten::avg_pool2d.out", avg_pool2d_out),
    KernelDef::new("aten::_adaptive_avg_pool2d.out", adaptive_avg_pool2d_out),
    // reductions
    KernelDef::new("aten::sum.IntList_out", sum_intlist_out),
    KernelDef::new("aten::mean.out", mean_out),
    KernelDef::new("aten::mean.dtype_out", mean_dtype_out),
    KernelDef::new("aten::prod.int_out", prod_int_out),
    KernelDef::new("aten::prod.out", prod_out),
    KernelDef::new("aten::amax.out", amax_out),
    KernelDef::new("aten::amin.out", amin_out),
    KernelDef::new("aten::max.unary_out", max_unary_out),
    KernelDef::new("aten::min.unary_out", min_unary_out),
    KernelDef::new("aten::max.dim_max", max_dim_max),
    KernelDef::new("aten::min.dim_min", min_dim_min),
    KernelDef::new("aten::argmax.out", argmax_out),
    KernelDef::new("aten::argmin.out", argmin_out),
    KernelDef::new("aten::any.out", any_out),
    KernelDef::new("aten::any.dims_out", any_dims_out),
    KernelDef::new("aten::any.all_out", any_all_out),
    KernelDef::new("aten::all.out", all_out),
    KernelDef::new("aten::all.dims_out", all_dims_out),
    KernelDef::new("aten::all.all_out", all_all_out),
    KernelDef::new("aten::var.correction_out", var_correction_out),
    KernelDef::new("aten::var.out", var_out),
    KernelDef::new("aten::var_mean.correction_out", var_mean_correction_out),
];

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn shape_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Shape { arg, detail }
}

fn value_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Value { arg, detail }
}

fn mk_shape(dims: &[usize], arg: usize) -> Result<Shape, KernelError> {
    Shape::new(dims).ok_or(shape_err(arg, "rank exceeds 16"))
}

/// Product of dims with overflow checking.
fn prod(dims: &[usize], arg: usize) -> Result<usize, KernelError> {
    dims.iter().try_fold(1usize, |a, &d| {
        a.checked_mul(d)
            .ok_or(shape_err(arg, "size product overflows"))
    })
}

fn need_dtype(got: DType, expected: DType, arg: usize) -> Res {
    if got != expected {
        return Err(KernelError::DTypeMismatch { arg, expected, got });
    }
    Ok(())
}

fn need_float(d: DType, arg: usize) -> Res {
    if !d.is_float() {
        return Err(KernelError::UnsupportedDType { arg, dtype: d });
    }
    Ok(())
}

/// The f32 elements of `t`; `UnsupportedDType` for any other dtype.
fn f32_of<'a>(t: &TensorRef<'a>) -> Result<&'a [f32], KernelError> {
    if t.dtype() != DType::F32 {
        return Err(KernelError::UnsupportedDType {
            arg: t.arg(),
            dtype: t.dtype(),
        });
    }
    t.as_slice::<f32>()
}

fn wrap(dim: i64, rank: usize, arg: usize) -> Result<usize, KernelError> {
    crate::shape::wrap_dim(dim, rank).ok_or(KernelError::IndexOutOfBounds {
        arg,
        index: dim,
        size: rank,
    })
}

/// An `int` argument that must be ≥ `min`, as usize.
fn int_at_least(v: i64, min: i64, arg: usize, detail: &'static str) -> Result<usize, KernelError> {
    if v < min {
        return Err(value_err(arg, detail));
    }
    usize::try_from(v).map_err(|_| value_err(arg, detail))
}

/// `ScalarType?` argument → dtype (None when absent).
fn opt_dtype(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Option<DType>, KernelError> {
    match ctx.opt_int(arg)? {
        None => Ok(None),
        Some(code) => i8::try_from(code)
            .ok()
            .and_then(DType::from_scalar_type)
            .map(Some)
            .ok_or(value_err(arg, "unknown ScalarType code")),
    }
}

/// Elements of an input read as f64 / i64, with typed fast cases.
#[derive(Clone, Copy)]
enum Src<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I64(&'a [i64]),
    Any(TensorRef<'a>),
}

impl<'a> Src<'a> {
    fn new(t: &TensorRef<'a>) -> Result<Src<'a>, KernelError> {
        Ok(match t.dtype() {
            DType::F32 => Src::F32(t.as_slice()?),
            DType::F64 => Src::F64(t.as_slice()?),
            DType::I64 => Src::I64(t.as_slice()?),
            _ => Src::Any(*t),
        })
    }
    #[inline]
    fn f64(&self, i: usize) -> f64 {
        match self {
            Src::F32(s) => s[i] as f64,
            Src::F64(s) => s[i],
            Src::I64(s) => s[i] as f64,
            Src::Any(t) => t.get_f64(i),
        }
    }
    #[inline]
    fn i64(&self, i: usize) -> i64 {
        match self {
            Src::F32(s) => s[i] as i64,
            Src::F64(s) => s[i] as i64,
            Src::I64(s) => s[i],
            Src::Any(t) => t.get_i64(i),
        }
    }
}

/// Element strides of `sdims` broadcast (NumPy rules, right-aligned) to `ddims` (0 on
/// broadcast dims); fails unless `sdims` broadcasts to exactly `ddims`.
fn bcast_strides(
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
fn broadcast_into(
    src: &[f32],
    sdims: &[usize],
    dst: &mut [f32],
    ddims: &[usize],
    arg: usize,
) -> Res {
    let r = ddims.len();
    let sstr = bcast_strides(sdims, ddims, arg)?;
    let total = prod(ddims, arg)?;
    if total == 0 {
        return Ok(());
    }
    if r == 0 {
        dst[0] = src[0];
        return Ok(());
    }
    let inner = ddims[r - 1];
    let istr = sstr[r - 1];
    let mut idx = [0usize; MAX_RANK];
    let mut soff = 0usize;
    for row in dst[..total].chunks_exact_mut(inner) {
        if istr == 0 {
            row.fill(src[soff]);
        } else {
            row.copy_from_slice(&src[soff..soff + inner]);
        }
        // advance the outer index (dims 0..r-1)
        let mut d = r - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            soff += sstr[d];
            if idx[d] < ddims[d] {
                break;
            }
            soff -= sstr[d] * ddims[d];
            idx[d] = 0;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Matmul family
// ---------------------------------------------------------------------------------------------

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
    let mut out = ctx.output(2, &mk_shape(&[m, n], 2)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(hi - lo, n, k))?;
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
    let mut out = ctx.output(2, &mk_shape(&[nb, m, n], 2)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(m, n, k))?;
    batched(ad, bd, od, nb, m, k, n, 1.0, 0.0, scratch)
}

/// `c[i] = alpha·a[i]·b[i] + beta·c[i]` for `nb` row-major batches.
fn batched(
    ad: &[f32],
    bd: &[f32],
    od: &mut [f32],
    nb: usize,
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    beta: f32,
    scratch: &mut [f32],
) -> Res {
    // Sizes were checked against the tensors' own shapes, so these products fit.
    let (sa, sb, sc) = (m * k, k * n, m * n);
    for i in 0..nb {
        let a = MatRef::row_major(&ad[i * sa..(i + 1) * sa], m, k)?;
        let b = MatRef::row_major(&bd[i * sb..(i + 1) * sb], k, n)?;
        gemm::sgemm(
            a,
            b,
            &mut od[i * sc..(i + 1) * sc],
            n,
            alpha,
            beta,
            None,
            scratch,
        )?;
    }
    Ok(())
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
    let mut out = ctx.output(5, &mk_shape(&[m, n], 5)?)?;
    let od = out.as_mut_slice::<f32>()?;
    let am = MatRef::row_major(&ad[lo * k..], hi - lo, k)?;
    let bm = MatRef::row_major(bd, k, n)?;
    if beta == 0.0 {
        bcast_strides(s.dims(), &[m, n], 0)?;
        let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(hi - lo, n, k))?;
        return gemm::sgemm(am, bm, &mut od[lo * n..], n, alpha, 0.0, None, scratch);
    }
    if beta == 1.0 && row_vector && n > 0 {
        // The common Linear case: bias per output column, added in the GEMM epilogue.
        let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(hi - lo, n, k))?;
        return gemm::sgemm(am, bm, &mut od[lo * n..], n, alpha, 0.0, Some(sd), scratch);
    }
    broadcast_into(sd, s.dims(), od, &[m, n], 0)?;
    let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(hi - lo, n, k))?;
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
    let mut out = ctx.output(5, &mk_shape(&[nb, m, n], 5)?)?;
    let od = out.as_mut_slice::<f32>()?;
    if beta == 0.0 {
        bcast_strides(s.dims(), &[nb, m, n], 0)?;
    } else {
        broadcast_into(sd, s.dims(), od, &[nb, m, n], 0)?;
    }
    let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(m, n, k))?;
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
    let m = prod(&x.dims()[..r - 1], 0)?;
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
    let scratch = ctx.scratch_f32(gemm::sgemm_scratch_len(hi - lo, nout, nin))?;
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

// ---------------------------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------------------------

/// Sum of `x` in f64 (four independent lanes, so the loop vectorises).
fn sum_f64(x: &[f32]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for l in 0..4 {
            acc[l] += c[l] as f64;
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &v in chunks.remainder() {
        s += v as f64;
    }
    s
}

/// Σ (x - mean)² in f64.
fn sq_dev_f64(x: &[f32], mean: f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for l in 0..4 {
            let d = c[l] as f64 - mean;
            acc[l] += d * d;
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for &v in chunks.remainder() {
        let d = v as f64 - mean;
        s += d * d;
    }
    s
}

/// Mean and biased variance of a slice (two-pass, f64 accumulation). Empty → (0, NaN).
fn moments(x: &[f32]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, f64::NAN);
    }
    let n = x.len() as f64;
    let mean = sum_f64(x) / n;
    (mean, sq_dev_f64(x, mean) / n)
}

/// Mean and biased variance of `count` elements read through `get` (generic dtypes).
fn moments_by(count: usize, get: impl Fn(usize) -> f64) -> (f64, f64) {
    if count == 0 {
        return (0.0, f64::NAN);
    }
    let n = count as f64;
    let mut s = 0.0;
    for i in 0..count {
        s += get(i);
    }
    let mean = s / n;
    let mut v = 0.0;
    for i in 0..count {
        let d = get(i) - mean;
        v += d * d;
    }
    (mean, v / n)
}

fn rstd_of(var: f64, eps: f64) -> f64 {
    1.0 / libm::sqrt(var.max(0.0) + eps)
}

/// `aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,
/// Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)`.
///
/// Normalises over the trailing `normalized_shape` dims: `out0 = (x - mean) * rstd * w + b`,
/// `out1 = mean`, `out2 = rstd = 1/sqrt(var + eps)` (biased variance), both shaped like the
/// input with the normalised dims set to 1. Float dtypes (all tensors the same dtype); f32 is
/// the fast path (two-pass statistics accumulated in f64), others compute in f64.
/// `weight`/`bias`, when given, have exactly `normalized_shape`.
fn native_layer_norm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(9)?;
    let x = ctx.input(0)?;
    let ns = ctx.int_list(1)?;
    let w = ctx.opt_input(2)?;
    let b = ctx.opt_input(3)?;
    let eps = ctx.double(4)?;
    let dt = x.dtype();
    need_float(dt, 0)?;
    for a in 5..8 {
        need_dtype(ctx.out_dtype(a)?, dt, a)?;
    }
    if ns.is_empty() {
        return Err(value_err(
            1,
            "layer_norm: normalized_shape must not be empty",
        ));
    }
    let r = x.rank();
    if ns.len() > r {
        return Err(shape_err(
            1,
            "layer_norm: normalized_shape longer than input rank",
        ));
    }
    let axis = r - ns.len();
    for (i, &d) in ns.iter().enumerate() {
        if d < 0 || d as u64 != x.dims()[axis + i] as u64 {
            return Err(shape_err(
                1,
                "layer_norm: normalized_shape must match the input's trailing dims",
            ));
        }
    }
    for (t, arg) in [(&w, 2), (&b, 3)] {
        if let Some(t) = t {
            need_dtype(t.dtype(), dt, arg)?;
            if t.dims() != &x.dims()[axis..] {
                return Err(shape_err(
                    arg,
                    "layer_norm: weight/bias must have normalized_shape",
                ));
            }
        }
    }
    let m = prod(&x.dims()[..axis], 0)?;
    let n = prod(&x.dims()[axis..], 0)?;
    let mut stat_shape = *x.shape();
    for d in &mut stat_shape.dims_mut()[axis..] {
        *d = 1;
    }
    let mut out = ctx.output(5, x.shape())?;
    let mut mean_out = ctx.output(6, &stat_shape)?;
    let mut rstd_out = ctx.output(7, &stat_shape)?;
    if dt == DType::F32 {
        let xd = x.as_slice::<f32>()?;
        let wd = match &w {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let bd = match &b {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let od = out.as_mut_slice::<f32>()?;
        let md = mean_out.as_mut_slice::<f32>()?;
        let rd = rstd_out.as_mut_slice::<f32>()?;
        for i in 0..m {
            let xr = &xd[i * n..(i + 1) * n];
            let or = &mut od[i * n..(i + 1) * n];
            let (mean, rstd) = vec::layer_norm(xr, wd, bd, eps as f32, or)
                .map_err(|_| shape_err(5, "layer_norm: row length mismatch"))?;
            md[i] = mean;
            rd[i] = rstd;
        }
        return Ok(());
    }
    let xs = Src::new(&x)?;
    let ws = w.as_ref().map(Src::new).transpose()?;
    let bs = b.as_ref().map(Src::new).transpose()?;
    for i in 0..m {
        let base = i * n;
        let (mean, var) = moments_by(n, |j| xs.f64(base + j));
        let rstd = rstd_of(var, eps);
        mean_out.set_f64(i, mean);
        rstd_out.set_f64(i, rstd);
        for j in 0..n {
            let mut v = (xs.f64(base + j) - mean) * rstd;
            if let Some(ws) = &ws {
                v *= ws.f64(j);
            }
            if let Some(bs) = &bs {
                v += bs.f64(j);
            }
            out.set_f64(base + j, v);
        }
    }
    Ok(())
}

/// `aten::native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias, SymInt N,
/// SymInt C, SymInt HxW, int group, float eps, *, Tensor(a!) out0, Tensor(b!) out1,
/// Tensor(c!) out2)`.
///
/// `input` is `[N, C, *]` with `numel = N·C·HxW`; statistics per (sample, group of `C/group`
/// channels): `out0` like the input, `out1 = mean` and `out2 = rstd` shaped `[N, group]`.
/// `weight`/`bias` are `[C]`. Float dtypes (all the same); f32 fast path.
fn native_group_norm_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(12)?;
    let x = ctx.input(0)?;
    let w = ctx.opt_input(1)?;
    let b = ctx.opt_input(2)?;
    let nn = int_at_least(ctx.int(3)?, 0, 3, "group_norm: N must be >= 0")?;
    let c = int_at_least(ctx.int(4)?, 0, 4, "group_norm: C must be >= 0")?;
    let hw = int_at_least(ctx.int(5)?, 0, 5, "group_norm: HxW must be >= 0")?;
    let g = int_at_least(ctx.int(6)?, 1, 6, "group_norm: group must be > 0")?;
    let eps = ctx.double(7)?;
    let dt = x.dtype();
    need_float(dt, 0)?;
    for a in 8..11 {
        need_dtype(ctx.out_dtype(a)?, dt, a)?;
    }
    if x.rank() < 2 || x.dims()[0] != nn || x.dims()[1] != c {
        return Err(shape_err(0, "group_norm: input must be [N, C, *]"));
    }
    if prod(&[nn, c, hw], 3)? != x.numel() {
        return Err(shape_err(5, "group_norm: input numel must equal N*C*HxW"));
    }
    if c % g != 0 {
        return Err(value_err(6, "group_norm: C must be divisible by group"));
    }
    for (t, arg) in [(&w, 1), (&b, 2)] {
        if let Some(t) = t {
            need_dtype(t.dtype(), dt, arg)?;
            if t.rank() != 1 || t.dims()[0] != c {
                return Err(shape_err(arg, "group_norm: weight/bias must be [C]"));
            }
        }
    }
    let cg = c / g;
    let block = cg * hw;
    let stat_shape = mk_shape(&[nn, g], 9)?;
    let mut out = ctx.output(8, x.shape())?;
    let mut mean_out = ctx.output(9, &stat_shape)?;
    let mut rstd_out = ctx.output(10, &stat_shape)?;
    if dt == DType::F32 {
        let xd = x.as_slice::<f32>()?;
        let wd = match &w {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let bd = match &b {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let od = out.as_mut_slice::<f32>()?;
        let md = mean_out.as_mut_slice::<f32>()?;
        let rd = rstd_out.as_mut_slice::<f32>()?;
        for s in 0..nn * g {
            let xb = &xd[s * block..(s + 1) * block];
            let (mean, var) = moments(xb);
            let rstd = rstd_of(var, eps);
            md[s] = mean as f32;
            rd[s] = rstd as f32;
            let (mf, rf) = (mean as f32, rstd as f32);
            for ci in 0..cg {
                let ch = (s % g) * cg + ci;
                let wv = wd.map_or(1.0, |v| v[ch]);
                let bv = bd.map_or(0.0, |v| v[ch]);
                let o = s * block + ci * hw;
                for j in 0..hw {
                    od[o + j] = (xd[o + j] - mf) * rf * wv + bv;
                }
            }
        }
        return Ok(());
    }
    let xs = Src::new(&x)?;
    let ws = w.as_ref().map(Src::new).transpose()?;
    let bs = b.as_ref().map(Src::new).transpose()?;
    for s in 0..nn * g {
        let base = s * block;
        let (mean, var) = moments_by(block, |j| xs.f64(base + j));
        let rstd = rstd_of(var, eps);
        mean_out.set_f64(s, mean);
        rstd_out.set_f64(s, rstd);
        for ci in 0..cg {
            let ch = (s % g) * cg + ci;
            let wv = ws.as_ref().map_or(1.0, |v| v.f64(ch));
            let bv = bs.as_ref().map_or(0.0, |v| v.f64(ch));
            for j in 0..hw {
                let o = base + ci * hw + j;
                out.set_f64(o, (xs.f64(o) - mean) * rstd * wv + bv);
            }
        }
    }
    Ok(())
}

/// Shared body of the inference batch norms: arguments 0..5 are input, weight?, bias?,
/// running_mean, running_var; `eps_arg` is the index of `eps` and the three outputs start at
/// `o`.
fn batch_norm_infer(ctx: &mut Ctx<'_, '_, '_>, eps_arg: usize, o: usize) -> Res {
    let x = ctx.input(0)?;
    let w = ctx.opt_input(1)?;
    let b = ctx.opt_input(2)?;
    let rm = ctx.input(3)?;
    let rv = ctx.input(4)?;
    let eps = ctx.double(eps_arg)?;
    let dt = x.dtype();
    need_float(dt, 0)?;
    for a in o..o + 3 {
        need_dtype(ctx.out_dtype(a)?, dt, a)?;
    }
    if x.rank() < 2 {
        return Err(shape_err(0, "batch_norm: input must be [N, C, *]"));
    }
    let c = x.dims()[1];
    for (t, arg) in [
        (w.as_ref(), 1),
        (b.as_ref(), 2),
        (Some(&rm), 3),
        (Some(&rv), 4),
    ] {
        if let Some(t) = t {
            need_dtype(t.dtype(), dt, arg)?;
            if t.rank() != 1 || t.dims()[0] != c {
                return Err(shape_err(arg, "batch_norm: parameters must be [C]"));
            }
        }
    }
    let outer = x.dims()[0];
    let inner = prod(&x.dims()[2..], 0)?;
    let mut out = ctx.output(o, x.shape())?;
    let empty = mk_shape(&[0], o + 1)?;
    ctx.output(o + 1, &empty)?;
    ctx.output(o + 2, &empty)?;
    if dt == DType::F32 {
        let xd = x.as_slice::<f32>()?;
        let (md, vd) = (rm.as_slice::<f32>()?, rv.as_slice::<f32>()?);
        let wd = match &w {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let bd = match &b {
            Some(t) => Some(t.as_slice::<f32>()?),
            None => None,
        };
        let od = out.as_mut_slice::<f32>()?;
        for i in 0..outer {
            for ch in 0..c {
                let mean = md[ch];
                // As ExecuTorch: the inverse std is computed in double, then rounded.
                let invstd = (1.0 / libm::sqrt(vd[ch] as f64 + eps)) as f32;
                let wv = wd.map_or(1.0, |v| v[ch]);
                let bv = bd.map_or(0.0, |v| v[ch]);
                let base = (i * c + ch) * inner;
                for j in base..base + inner {
                    od[j] = (xd[j] - mean) * invstd * wv + bv;
                }
            }
        }
        return Ok(());
    }
    let xs = Src::new(&x)?;
    let (ms, vs) = (Src::new(&rm)?, Src::new(&rv)?);
    let ws = w.as_ref().map(Src::new).transpose()?;
    let bs = b.as_ref().map(Src::new).transpose()?;
    for i in 0..outer {
        for ch in 0..c {
            let mean = ms.f64(ch);
            let invstd = 1.0 / libm::sqrt(vs.f64(ch) + eps);
            let wv = ws.as_ref().map_or(1.0, |v| v.f64(ch));
            let bv = bs.as_ref().map_or(0.0, |v| v.f64(ch));
            let base = (i * c + ch) * inner;
            for j in base..base + inner {
                out.set_f64(j, (xs.f64(j) - mean) * invstd * wv + bv);
            }
        }
    }
    Ok(())
}

/// `aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight,
/// Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps, *,
/// Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)`.
///
/// Inference batch norm over channel dim 1 of `[N, C, *]`:
/// `out0 = (x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c]`;
/// `out1`/`out2` are resized to `[0]` as ExecuTorch does. Float dtypes (all the same).
fn batch_norm_no_training_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(11)?;
    batch_norm_infer(ctx, 6, 7)
}

/// `aten::_native_batch_norm_legit.out(Tensor input, Tensor? weight, Tensor? bias,
/// Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, float eps,
/// *, Tensor(d!) out, Tensor(e!) save_mean, Tensor(f!) save_invstd)`: inference only
/// (`training = false`, like ExecuTorch's portable kernel), same as the no-training variant.
fn batch_norm_legit_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(12)?;
    if ctx.bool(5)? {
        return Err(KernelError::Unsupported {
            detail: "batch_norm: training mode is not supported",
        });
    }
    batch_norm_infer(ctx, 7, 8)
}

// ---------------------------------------------------------------------------------------------
// Softmax
// ---------------------------------------------------------------------------------------------

/// exp(x): the shared polynomial of `kernels::vec` (relative error ≤ 2.5e-7; flushes to 0
/// below ln(FLT_MIN); NaN stays NaN).
#[inline(always)]
fn exp_fast(x: f32) -> f32 {
    vec::generic::exp1(x)
}

/// Softmax (or log-softmax) of one contiguous f32 row (`kernels::vec`; the row and its output
/// have the same length by construction).
fn softmax_row(x: &[f32], y: &mut [f32], log: bool) {
    let r = if log {
        vec::log_softmax(x, y)
    } else {
        vec::softmax(x, y)
    };
    debug_assert!(r.is_ok());
}

/// `aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`:
/// `exp(x - max) / Σ exp(x - max)` along `dim` (any dim, negative allowed; rank 0 allowed).
/// Float dtypes, `out` the same dtype as `self`; `half_to_float = true` is unsupported (as in
/// ExecuTorch). Rows that are all `-inf` (or contain NaN or `+inf`) give NaN, like ATen.
fn softmax_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    softmax_common(ctx, false)
}

/// `aten::_log_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out)`:
/// `x - max - log Σ exp(x - max)` along `dim`; same contract as `_softmax.out`.
fn log_softmax_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    softmax_common(ctx, true)
}

fn softmax_common(ctx: &mut Ctx<'_, '_, '_>, log: bool) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let dim = ctx.int(1)?;
    if ctx.bool(2)? {
        return Err(KernelError::Unsupported {
            detail: "softmax: half_to_float is not supported",
        });
    }
    let dt = x.dtype();
    need_float(dt, 0)?;
    need_dtype(ctx.out_dtype(3)?, dt, 3)?;
    let r = x.rank();
    let d = wrap(dim, r, 1)?;
    let (outer, len, inner) = if r == 0 {
        (1, 1, 1)
    } else {
        (
            prod(&x.dims()[..d], 0)?,
            x.dims()[d],
            prod(&x.dims()[d + 1..], 0)?,
        )
    };
    let mut out = ctx.output(3, x.shape())?;
    if x.numel() == 0 {
        return Ok(());
    }
    if dt == DType::F32 {
        let xd = x.as_slice::<f32>()?;
        let od = out.as_mut_slice::<f32>()?;
        if inner == 1 {
            if !log {
                return vec::softmax_rows(xd, od, len)
                    .map_err(|_| shape_err(3, "softmax: output size differs"));
            }
            for (xr, yr) in xd.chunks_exact(len).zip(od.chunks_exact_mut(len)) {
                softmax_row(xr, yr, log);
            }
            return Ok(());
        }
        // Strided dim: one column at a time.
        for o in 0..outer {
            for i in 0..inner {
                let base = o * len * inner + i;
                let at = |k: usize| base + k * inner;
                let mut max = f32::NEG_INFINITY;
                for k in 0..len {
                    if xd[at(k)] > max {
                        max = xd[at(k)];
                    }
                }
                let mut sum = 0.0f32;
                for k in 0..len {
                    let e = exp_fast(xd[at(k)] - max);
                    od[at(k)] = e;
                    sum += e;
                }
                if log {
                    let shift = max + libm::logf(sum);
                    for k in 0..len {
                        od[at(k)] = xd[at(k)] - shift;
                    }
                } else {
                    let inv = 1.0 / sum;
                    for k in 0..len {
                        od[at(k)] *= inv;
                    }
                }
            }
        }
        return Ok(());
    }
    let xs = Src::new(&x)?;
    for o in 0..outer {
        for i in 0..inner {
            let base = o * len * inner + i;
            let at = |k: usize| base + k * inner;
            let mut max = f64::NEG_INFINITY;
            for k in 0..len {
                let v = xs.f64(at(k));
                if v > max {
                    max = v;
                }
            }
            let mut sum = 0.0f64;
            for k in 0..len {
                sum += libm::exp(xs.f64(at(k)) - max);
            }
            let lse = max + libm::log(sum);
            for k in 0..len {
                let v = xs.f64(at(k));
                let y = if log {
                    v - lse
                } else {
                    libm::exp(v - max) / sum
                };
                out.set_f64(at(k), y);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Convolution
// ---------------------------------------------------------------------------------------------

/// Per-spatial-dim parameter from an int list of length 1 (shared) or `nd`; `None` when empty
/// (the caller's default applies).
fn param(
    list: &[i64],
    i: usize,
    nd: usize,
    arg: usize,
    min: i64,
) -> Result<Option<usize>, KernelError> {
    let v = match list.len() {
        0 => return Ok(None),
        1 => list[0],
        n if n == nd => list[i],
        _ => {
            return Err(value_err(
                arg,
                "parameter list must have 1 or one-per-spatial-dim items",
            ))
        }
    };
    if v < min {
        return Err(value_err(arg, "parameter out of range"));
    }
    usize::try_from(v)
        .map(Some)
        .map_err(|_| value_err(arg, "parameter out of range"))
}

/// Output length of a sliding window (ATen `pooling_output_shape` / conv formula).
fn window_out(
    input: usize,
    k: usize,
    pad: usize,
    stride: usize,
    dil: usize,
    ceil: bool,
) -> Option<usize> {
    let input = input as i128;
    let (k, pad, stride, dil) = (k as i128, pad as i128, stride as i128, dil as i128);
    let num = input + 2 * pad - dil * (k - 1) - 1 + if ceil { stride - 1 } else { 0 };
    if num < 0 {
        return None;
    }
    let mut out = num / stride + 1;
    if ceil && (out - 1) * stride >= input + pad {
        out -= 1;
    }
    usize::try_from(out).ok().filter(|&o| o > 0)
}

/// 2-D convolution geometry (1-D convolutions use `h = kh = oh = 1`).
#[derive(Clone, Copy)]
struct ConvGeom {
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    dh: usize,
    dw: usize,
    ow: usize,
}

/// Fills `col[kk * t + j]` for `kk` in `k0..k0+kt` and output pixels `p0..p0+t` of one group
/// (`x` = that group's `[cin_g, h, w]` input plane block) with the im2col values (0 in the
/// padding).
fn im2col(x: &[f32], g: &ConvGeom, k0: usize, kt: usize, p0: usize, t: usize, col: &mut [f32]) {
    let khw = g.kh * g.kw;
    for kk in 0..kt {
        let kidx = k0 + kk;
        let ci = kidx / khw;
        let ki = (kidx % khw) / g.kw;
        let kj = kidx % g.kw;
        let plane = &x[ci * g.h * g.w..(ci + 1) * g.h * g.w];
        let row = &mut col[kk * t..(kk + 1) * t];
        let (mut oy, mut ox) = (p0 / g.ow, p0 % g.ow);
        let dy = (ki * g.dh) as isize - g.ph as isize;
        let dx = (kj * g.dw) as isize - g.pw as isize;
        for v in row.iter_mut() {
            let iy = (oy * g.sh) as isize + dy;
            let ix = (ox * g.sw) as isize + dx;
            *v = if iy >= 0 && (iy as usize) < g.h && ix >= 0 && (ix as usize) < g.w {
                plane[iy as usize * g.w + ix as usize]
            } else {
                0.0
            };
            ox += 1;
            if ox == g.ow {
                ox = 0;
                oy += 1;
            }
        }
    }
}

/// `aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,
/// SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups,
/// *, Tensor(a!) out)`.
///
/// 2-D (`input [N, C, H, W]`, `weight [Cout, C/groups, kH, kW]`) and 1-D (`[N, C, L]`,
/// `[Cout, C/groups, kL]`) NCHW convolution with stride, zero padding, dilation and groups;
/// parameter lists have one item per spatial dim or a single shared item. `bias` is `[Cout]`.
/// f32 only. Computed per (sample, group) as a GEMM `weight_g [Cout/g, K] × cols [K, pixels]`
/// with `cols` built by im2col in bounded tiles in scratch (1×1 stride-1 unpadded convolutions
/// use the input directly). `transposed = true` is unsupported.
fn convolution_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(11)?;
    let x = ctx.input(0)?;
    let wt = ctx.input(1)?;
    let bias = ctx.opt_input(2)?;
    let stride = ctx.int_list(3)?;
    let padding = ctx.int_list(4)?;
    let dilation = ctx.int_list(5)?;
    if ctx.bool(6)? {
        return Err(KernelError::Unsupported {
            detail: "convolution: transposed convolution is not supported",
        });
    }
    let groups = int_at_least(ctx.int(8)?, 1, 8, "convolution: groups must be >= 1")?;
    f32_of(&x)?;
    need_dtype(wt.dtype(), DType::F32, 1)?;
    if let Some(b) = &bias {
        need_dtype(b.dtype(), DType::F32, 2)?;
    }
    need_dtype(ctx.out_dtype(9)?, DType::F32, 9)?;
    let r = x.rank();
    if r != 3 && r != 4 {
        return Err(shape_err(0, "convolution: input must be 3-D or 4-D"));
    }
    if wt.rank() != r {
        return Err(shape_err(
            1,
            "convolution: weight rank must equal input rank",
        ));
    }
    let nd = r - 2;
    let (n, cin) = (x.dims()[0], x.dims()[1]);
    let (cout, cin_g) = (wt.dims()[0], wt.dims()[1]);
    if cout % groups != 0 {
        return Err(shape_err(
            1,
            "convolution: out channels must be divisible by groups",
        ));
    }
    if cin_g.checked_mul(groups) != Some(cin) {
        return Err(shape_err(
            1,
            "convolution: weight.size(1) * groups must equal input channels",
        ));
    }
    if let Some(b) = &bias {
        if b.rank() != 1 || b.dims()[0] != cout {
            return Err(shape_err(2, "convolution: bias must be [out_channels]"));
        }
    }
    // Spatial parameters; 1-D is treated as 2-D with a unit height.
    let sp = |list: &[i64], i: usize, arg: usize, min: i64, def: usize| {
        param(list, i, nd, arg, min).map(|v| v.unwrap_or(def))
    };
    let (h, w, kh, kw, sh, sw, ph, pw, dh, dw) = if nd == 2 {
        (
            x.dims()[2],
            x.dims()[3],
            wt.dims()[2],
            wt.dims()[3],
            sp(&stride, 0, 3, 1, 1)?,
            sp(&stride, 1, 3, 1, 1)?,
            sp(&padding, 0, 4, 0, 0)?,
            sp(&padding, 1, 4, 0, 0)?,
            sp(&dilation, 0, 5, 1, 1)?,
            sp(&dilation, 1, 5, 1, 1)?,
        )
    } else {
        (
            1,
            x.dims()[2],
            1,
            wt.dims()[2],
            1,
            sp(&stride, 0, 3, 1, 1)?,
            0,
            sp(&padding, 0, 4, 0, 0)?,
            1,
            sp(&dilation, 0, 5, 1, 1)?,
        )
    };
    if kh == 0 || kw == 0 {
        return Err(shape_err(1, "convolution: kernel size must be positive"));
    }
    let bad_out = shape_err(0, "convolution: input too small for the kernel");
    let oh = window_out(h, kh, ph, sh, dh, false).ok_or(bad_out)?;
    let ow = window_out(w, kw, pw, sw, dw, false).ok_or(bad_out)?;
    let g = ConvGeom {
        h,
        w,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        ow,
    };
    let oshape = if nd == 2 {
        mk_shape(&[n, cout, oh, ow], 9)?
    } else {
        mk_shape(&[n, cout, ow], 9)?
    };
    let pix = prod(&[oh, ow], 9)?;
    let kdim = prod(&[cin_g, kh, kw], 1)?;
    let in_plane = prod(&[cin_g, h, w], 0)?;
    let cout_g = cout / groups;
    let xd = x.as_slice::<f32>()?;
    let wd = wt.as_slice::<f32>()?;
    let bd = match &bias {
        Some(b) => Some(b.as_slice::<f32>()?),
        None => None,
    };
    let mut out = ctx.output(9, &oshape)?;
    let od = out.as_mut_slice::<f32>()?;
    if od.is_empty() {
        return Ok(());
    }
    if kdim == 0 && bd.is_none() {
        od.fill(0.0);
        return Ok(());
    }
    // Bias first; the GEMMs then accumulate on top of it.
    let mut beta = 0.0;
    if let Some(bv) = bd {
        for (i, plane) in od.chunks_exact_mut(pix).enumerate() {
            plane.fill(bv[i % cout]);
        }
        beta = 1.0;
    }
    let direct = kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
    let tile = pix.min(IM2COL_TILE_PIXELS);
    let kt_max = kdim.clamp(1, IM2COL_F32 / tile.max(1));
    let gemm_len = if direct {
        gemm::sgemm_scratch_len(cout_g, pix, kdim)
    } else {
        gemm::sgemm_scratch_len(cout_g, tile, kt_max)
    };
    let col_len = if direct { 0 } else { kt_max * tile };
    let scratch = ctx.scratch_f32(gemm_len + col_len)?;
    let (gs, col) = scratch.split_at_mut(gemm_len);
    for ni in 0..n {
        for gi in 0..groups {
            let xg = &xd[(ni * cin + gi * cin_g) * h * w..][..in_plane];
            let wg = &wd[gi * cout_g * kdim..(gi + 1) * cout_g * kdim];
            let obase = (ni * cout + gi * cout_g) * pix;
            let og = &mut od[obase..obase + cout_g * pix];
            if direct {
                gemm::sgemm(
                    MatRef::row_major(wg, cout_g, kdim)?,
                    MatRef::row_major(xg, kdim, pix)?,
                    og,
                    pix,
                    1.0,
                    beta,
                    None,
                    gs,
                )?;
                continue;
            }
            let mut p0 = 0;
            while p0 < pix {
                let t = tile.min(pix - p0);
                let mut k0 = 0;
                while k0 < kdim {
                    let kt = kt_max.min(kdim - k0);
                    im2col(xg, &g, k0, kt, p0, t, col);
                    let a = MatRef::new(&wg[k0..], cout_g, kt, kdim, 1)?;
                    let b = MatRef::row_major(&col[..kt * t], kt, t)?;
                    let cb = if k0 == 0 { beta } else { 1.0 };
                    gemm::sgemm(a, b, &mut og[p0..], pix, 1.0, cb, None, gs)?;
                    k0 += kt;
                }
                p0 += t;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------------------------

/// Pooling geometry over `planes` planes of `h × w`.
#[derive(Clone, Copy)]
struct PoolGeom {
    planes: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    dh: usize,
    dw: usize,
    oh: usize,
    ow: usize,
}

/// Parses input, kernel/stride/padding/dilation lists and ceil mode into a geometry and the
/// output shape. `dilation = None` for average pooling. Padding must be at most half the
/// kernel size, as ATen and ExecuTorch require.
fn pool_geom(
    x: &TensorRef<'_>,
    ks: &[i64],
    st: &[i64],
    pd: &[i64],
    dl: Option<&[i64]>,
    ceil: bool,
    args: [usize; 4],
) -> Result<(PoolGeom, Shape), KernelError> {
    let r = x.rank();
    let d = x.dims();
    if !((r == 3 && d[0] > 0 && d[1] > 0 && d[2] > 0)
        || (r == 4 && d[1] > 0 && d[2] > 0 && d[3] > 0))
    {
        return Err(shape_err(
            0,
            "pool2d: input must be 3-D or 4-D with non-empty planes",
        ));
    }
    if ks.is_empty() {
        return Err(value_err(
            args[0],
            "pool2d: kernel_size must have 1 or 2 items",
        ));
    }
    let kh = param(ks, 0, 2, args[0], 1)?.unwrap_or(1);
    let kw = param(ks, 1, 2, args[0], 1)?.unwrap_or(1);
    let sh = param(st, 0, 2, args[1], 1)?.unwrap_or(kh);
    let sw = param(st, 1, 2, args[1], 1)?.unwrap_or(kw);
    if pd.is_empty() {
        return Err(value_err(args[2], "pool2d: padding must have 1 or 2 items"));
    }
    let ph = param(pd, 0, 2, args[2], 0)?.unwrap_or(0);
    let pw = param(pd, 1, 2, args[2], 0)?.unwrap_or(0);
    let (dh, dw) = match dl {
        Some(dl) => {
            if dl.is_empty() {
                return Err(value_err(
                    args[3],
                    "pool2d: dilation must have 1 or 2 items",
                ));
            }
            (
                param(dl, 0, 2, args[3], 1)?.unwrap_or(1),
                param(dl, 1, 2, args[3], 1)?.unwrap_or(1),
            )
        }
        None => (1, 1),
    };
    // ATen (and ExecuTorch): padding at most half the kernel size.
    if ph > kh / 2 || pw > kw / 2 {
        return Err(value_err(
            args[2],
            "pool2d: padding must be at most half the kernel size",
        ));
    }
    let (h, w) = (d[r - 2], d[r - 1]);
    let small = shape_err(0, "pool2d: output size would be empty");
    let oh = window_out(h, kh, ph, sh, dh, ceil).ok_or(small)?;
    let ow = window_out(w, kw, pw, sw, dw, ceil).ok_or(small)?;
    let planes = prod(&d[..r - 2], 0)?;
    let mut oshape = *x.shape();
    oshape.dims_mut()[r - 2] = oh;
    oshape.dims_mut()[r - 1] = ow;
    Ok((
        PoolGeom {
            planes,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            oh,
            ow,
        },
        oshape,
    ))
}

/// Max pooling core: `read(i)` reads input element `i`, `write(o, v)` writes output `o`;
/// indices are flat within each plane (`ih * W + iw`). Semantics as ATen's CPU kernel: the
/// first in-bounds window position is the initial index, a value replaces the maximum when it
/// is greater or NaN (so the last NaN wins).
fn max_pool_core<T: Copy + PartialOrd>(
    g: &PoolGeom,
    read: impl Fn(usize) -> T,
    is_nan: impl Fn(T) -> bool,
    init: T,
    mut write: impl FnMut(usize, T),
    idx: &mut [i64],
) {
    for p in 0..g.planes {
        let ib = p * g.h * g.w;
        for oy in 0..g.oh {
            let mut y0 = (oy * g.sh) as isize - g.ph as isize;
            let y1 = (y0 + ((g.kh - 1) * g.dh) as isize + 1).min(g.h as isize);
            while y0 < 0 {
                y0 += g.dh as isize;
            }
            for ox in 0..g.ow {
                let mut x0 = (ox * g.sw) as isize - g.pw as isize;
                let x1 = (x0 + ((g.kw - 1) * g.dw) as isize + 1).min(g.w as isize);
                while x0 < 0 {
                    x0 += g.dw as isize;
                }
                let mut best = init;
                let mut bi = y0 as i64 * g.w as i64 + x0 as i64;
                let mut y = y0;
                while y < y1 {
                    let mut xx = x0;
                    while xx < x1 {
                        let i = y as usize * g.w + xx as usize;
                        let v = read(ib + i);
                        if v > best || is_nan(v) {
                            best = v;
                            bi = i as i64;
                        }
                        xx += g.dw as isize;
                    }
                    y += g.dh as isize;
                }
                let o = (p * g.oh + oy) * g.ow + ox;
                write(o, best);
                idx[o] = bi;
            }
        }
    }
}

/// `aten::max_pool2d_with_indices.out(Tensor self, int[2] kernel_size, int[2] stride=[],
/// int[2] padding=0, int[2] dilation=1, bool ceil_mode=False, *, Tensor(a!) out,
/// Tensor(b!) indices)`.
///
/// Input `[N, C, H, W]` or `[C, H, W]`; lists of 1 or 2 items (`stride = []` means the kernel
/// size). `out` has the input's dtype (any real dtype; f32 fast path), `indices` is int64 with
/// the flat position `h * W + w` of the maximum within its plane. NaN wins (the last NaN in the
/// window), as in ATen.
fn max_pool2d_with_indices_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(9)?;
    let x = ctx.input(0)?;
    let ks = ctx.int_list(1)?;
    let st = ctx.int_list(2)?;
    let pd = ctx.int_list(3)?;
    let dl = ctx.int_list(4)?;
    let ceil = ctx.bool(5)?;
    let dt = x.dtype();
    if dt == DType::Bool {
        return Err(KernelError::UnsupportedDType { arg: 0, dtype: dt });
    }
    need_dtype(ctx.out_dtype(6)?, dt, 6)?;
    need_dtype(ctx.out_dtype(7)?, DType::I64, 7)?;
    let (g, oshape) = pool_geom(&x, &ks, &st, &pd, Some(&dl), ceil, [1, 2, 3, 4])?;
    let mut out = ctx.output(6, &oshape)?;
    let mut ind = ctx.output(7, &oshape)?;
    let id = ind.as_mut_slice::<i64>()?;
    match dt {
        DType::F32 => {
            let xd = x.as_slice::<f32>()?;
            let od = out.as_mut_slice::<f32>()?;
            max_pool_core(
                &g,
                |i| xd[i],
                |v: f32| v.is_nan(),
                f32::NEG_INFINITY,
                |o, v| od[o] = v,
                id,
            );
        }
        d if d.is_float() => {
            let xs = Src::new(&x)?;
            max_pool_core(
                &g,
                |i| xs.f64(i),
                |v: f64| v.is_nan(),
                f64::NEG_INFINITY,
                |o, v| out.set_f64(o, v),
                id,
            );
        }
        _ => {
            let xs = Src::new(&x)?;
            max_pool_core(
                &g,
                |i| xs.i64(i),
                |_| false,
                i64::MIN,
                |o, v| out.set_i64(o, v),
                id,
            );
        }
    }
    Ok(())
}

/// Rows `(start, end)`, columns `(start, end)` and `count_include_pad` divisor of a window.
type Window = ((usize, usize), (usize, usize), usize);

/// Average pooling window: (in-bounds rows, cols, divisor for `count_include_pad`, or None
/// when the window lies entirely in the padding).
fn avg_window(g: &PoolGeom, oy: usize, ox: usize) -> Option<Window> {
    let y0 = (oy * g.sh) as isize - g.ph as isize;
    let x0 = (ox * g.sw) as isize - g.pw as isize;
    let y1 = (y0 + g.kh as isize).min((g.h + g.ph) as isize);
    let x1 = (x0 + g.kw as isize).min((g.w + g.pw) as isize);
    let pool = ((y1 - y0) * (x1 - x0)) as usize;
    let (y0, x0) = (y0.max(0), x0.max(0));
    let (y1, x1) = (y1.min(g.h as isize), x1.min(g.w as isize));
    if y0 >= y1 || x0 >= x1 {
        return None;
    }
    Some(((y0 as usize, y1 as usize), (x0 as usize, x1 as usize), pool))
}

/// `aten::avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
/// bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None, *,
/// Tensor(a!) out)`.
///
/// Input `[N, C, H, W]` or `[C, H, W]`; windows clipped to `H + pad` (ATen's rule), the divisor
/// is `divisor_override`, else the clipped window size (`count_include_pad`) or the number of
/// in-bounds elements. Float dtypes (f32 fast path) and integer dtypes (sum in i64, truncating
/// division, as ATen). `out` has the input's dtype.
fn avg_pool2d_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(9)?;
    let x = ctx.input(0)?;
    let ks = ctx.int_list(1)?;
    let st = ctx.int_list(2)?;
    let pd = ctx.int_list(3)?;
    let ceil = ctx.bool(4)?;
    let include_pad = ctx.bool(5)?;
    let div_override = ctx.opt_int(6)?;
    if div_override == Some(0) {
        return Err(value_err(
            6,
            "avg_pool2d: divisor_override must be non-zero",
        ));
    }
    let dt = x.dtype();
    if dt == DType::Bool {
        return Err(KernelError::UnsupportedDType { arg: 0, dtype: dt });
    }
    need_dtype(ctx.out_dtype(7)?, dt, 7)?;
    let (g, oshape) = pool_geom(&x, &ks, &st, &pd, None, ceil, [1, 2, 3, 3])?;
    let mut out = ctx.output(7, &oshape)?;
    let divisor = |(y0, y1): (usize, usize), (x0, x1): (usize, usize), pool: usize| -> i64 {
        match div_override {
            Some(d) => d,
            None if include_pad => pool as i64,
            None => ((y1 - y0) * (x1 - x0)) as i64,
        }
    };
    let xs = Src::new(&x)?;
    let f32_data = if dt == DType::F32 {
        Some((x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?))
    } else {
        None
    };
    if let Some((xd, od)) = f32_data {
        for p in 0..g.planes {
            let plane = &xd[p * g.h * g.w..(p + 1) * g.h * g.w];
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let o = (p * g.oh + oy) * g.ow + ox;
                    od[o] = match avg_window(&g, oy, ox) {
                        None => 0.0,
                        Some((yr, xr, pool)) => {
                            let mut s = 0.0f32;
                            for y in yr.0..yr.1 {
                                for v in &plane[y * g.w + xr.0..y * g.w + xr.1] {
                                    s += v;
                                }
                            }
                            s / divisor(yr, xr, pool) as f32
                        }
                    };
                }
            }
        }
        return Ok(());
    }
    let is_float = dt.is_float();
    for p in 0..g.planes {
        let base = p * g.h * g.w;
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let o = (p * g.oh + oy) * g.ow + ox;
                match avg_window(&g, oy, ox) {
                    None => out.set_i64(o, 0),
                    Some((yr, xr, pool)) => {
                        let dv = divisor(yr, xr, pool);
                        if is_float {
                            let mut s = 0.0f64;
                            for y in yr.0..yr.1 {
                                for xx in xr.0..xr.1 {
                                    s += xs.f64(base + y * g.w + xx);
                                }
                            }
                            out.set_f64(o, s / dv as f64);
                        } else {
                            let mut s = 0i64;
                            for y in yr.0..yr.1 {
                                for xx in xr.0..xr.1 {
                                    s = s.wrapping_add(xs.i64(base + y * g.w + xx));
                                }
                            }
                            out.set_i64(o, s.wrapping_div(dv));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// `aten::_adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *, Tensor(a!) out)`:
/// input `[N, C, H, W]` or `[C, H, W]` (non-empty planes), output `[..., OH, OW]`; bin `o`
/// covers `floor(o·H/OH) .. ceil((o+1)·H/OH)`. Float dtypes, `out` the input's dtype.
fn adaptive_avg_pool2d_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let os = ctx.int_list(1)?;
    let dt = x.dtype();
    need_float(dt, 0)?;
    need_dtype(ctx.out_dtype(2)?, dt, 2)?;
    let r = x.rank();
    let d = x.dims();
    if !((r == 3 || r == 4) && d[r - 3] > 0 && d[r - 2] > 0 && d[r - 1] > 0) {
        return Err(shape_err(
            0,
            "adaptive_avg_pool2d: input must be 3-D or 4-D, non-empty",
        ));
    }
    if os.len() != 2 {
        return Err(value_err(
            1,
            "adaptive_avg_pool2d: output_size must have 2 items",
        ));
    }
    let oh = int_at_least(os[0], 0, 1, "adaptive_avg_pool2d: output_size must be >= 0")?;
    let ow = int_at_least(os[1], 0, 1, "adaptive_avg_pool2d: output_size must be >= 0")?;
    let (h, w) = (d[r - 2], d[r - 1]);
    let planes = prod(&d[..r - 2], 0)?;
    let mut oshape = *x.shape();
    oshape.dims_mut()[r - 2] = oh;
    oshape.dims_mut()[r - 1] = ow;
    prod(oshape.dims(), 1)?;
    let mut out = ctx.output(2, &oshape)?;
    let xs = Src::new(&x)?;
    let bin = |o: usize, n: usize, len: usize| {
        let (o, n, len) = (o as u128, n as u128, len as u128);
        let start = o * len / n;
        let end = ((o + 1) * len).div_ceil(n);
        (start as usize, end as usize)
    };
    for p in 0..planes {
        let base = p * h * w;
        for oy in 0..oh {
            let (y0, y1) = bin(oy, oh, h);
            for ox in 0..ow {
                let (x0, x1) = bin(ox, ow, w);
                let mut s = 0.0f64;
                for y in y0..y1 {
                    for xx in x0..x1 {
                        s += xs.f64(base + y * w + xx);
                    }
                }
                let cnt = ((y1 - y0) * (x1 - x0)) as f64;
                out.set_f64((p * oh + oy) * ow + ox, s / cnt);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

/// Nested loops as (size, element stride), outermost first.
type Loops = heapless::Vec<(usize, usize), MAX_RANK>;

/// A reduction over some dims of a contiguous input.
struct Plan {
    /// Output shape (`keepdim` applied).
    out: Shape,
    /// Kept dims (outer loops; their row-major order is the output order).
    kept: Loops,
    /// Reduced dims (inner loops, row-major), merged where contiguous.
    red: Loops,
    /// Elements per output (product of reduced sizes).
    count: usize,
}

fn push_loop(l: &mut Loops, size: usize, stride: usize) {
    if size == 1 {
        return;
    }
    if let Some(last) = l.last_mut() {
        if size != 0 && last.0 != 0 && size.checked_mul(stride) == Some(last.1) {
            last.0 = last.0.saturating_mul(size);
            last.1 = stride;
            return;
        }
    }
    // Capacity is MAX_RANK and at most one loop is pushed per dim.
    let _ = l.push((size, stride));
}

/// Plans a reduction of `shape` over `dims` (`None` = every dim; negative dims wrap; rank 0
/// accepts dim 0 / -1). Repeated dims are an error.
fn plan(
    shape: &Shape,
    dims: Option<&[i64]>,
    keepdim: bool,
    arg: usize,
) -> Result<Plan, KernelError> {
    let r = shape.rank();
    let mut mask = [false; MAX_RANK];
    match dims {
        None => mask[..r].fill(true),
        Some(ds) => {
            for &d in ds {
                let w = wrap(d, r, arg)?;
                if r == 0 {
                    continue;
                }
                if mask[w] {
                    return Err(value_err(
                        arg,
                        "dim appears multiple times in the list of dims",
                    ));
                }
                mask[w] = true;
            }
        }
    }
    let strides = shape.strides();
    let mut out = Shape::scalar();
    let (mut kept, mut red) = (Loops::new(), Loops::new());
    let mut count = 1usize;
    for i in 0..r {
        let d = shape.dims()[i];
        if mask[i] {
            push_loop(&mut red, d, strides[i]);
            count = count
                .checked_mul(d)
                .ok_or(shape_err(0, "size product overflows"))?;
            if keepdim {
                let _ = out.push(1);
            }
        } else {
            push_loop(&mut kept, d, strides[i]);
            let _ = out.push(d);
        }
    }
    prod(out.dims(), 0)?;
    Ok(Plan {
        out,
        kept,
        red,
        count,
    })
}

/// Calls `f(offset)` for every offset of the nested `loops` starting at `base`, row-major.
#[inline]
fn walk(loops: &[(usize, usize)], base: usize, mut f: impl FnMut(usize)) {
    if loops.iter().any(|l| l.0 == 0) {
        return;
    }
    let n = loops.len();
    if n == 0 {
        f(base);
        return;
    }
    let (last_n, last_s) = loops[n - 1];
    let mut idx = [0usize; MAX_RANK];
    let mut off = base;
    loop {
        for j in 0..last_n {
            f(off + j * last_s);
        }
        let mut d = n - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            off += loops[d].1;
            if idx[d] < loops[d].0 {
                break;
            }
            off -= loops[d].0 * loops[d].1;
            idx[d] = 0;
        }
    }
}

/// Calls `f(out_index, base_offset)` for each output element of the plan.
fn for_groups(p: &Plan, mut f: impl FnMut(usize, usize)) {
    let mut o = 0;
    walk(&p.kept, 0, |base| {
        f(o, base);
        o += 1;
    });
}

/// Sum of one reduction group in f64 (contiguous f32 groups use the vectorised sum).
fn group_sum_f64(src: &Src<'_>, p: &Plan, base: usize) -> f64 {
    if let (Src::F32(d), [(n, 1)]) = (src, &p.red[..]) {
        return sum_f64(&d[base..base + n]);
    }
    let mut s = 0.0;
    walk(&p.red, base, |i| s += src.f64(i));
    s
}

/// `int[]?` dims where both None and `[]` mean "all dims" (sum, mean, var, amax, amin).
fn dims_all_if_empty(
    ctx: &Ctx<'_, '_, '_>,
    arg: usize,
) -> Result<Option<crate::kernel_api::IntList>, KernelError> {
    Ok(ctx.opt_int_list(arg)?.filter(|d| !d.is_empty()))
}

/// Writes the per-group f64 result `f(base)` to every output element (f32 fast store).
fn write_f64_groups(out: &mut TensorMut<'_>, p: &Plan, f: impl Fn(usize) -> f64) -> Res {
    if out.dtype() == DType::F32 {
        let od = out.as_mut_slice::<f32>()?;
        for_groups(p, |o, base| od[o] = f(base) as f32);
    } else {
        for_groups(p, |o, base| out.set_f64(o, f(base)));
    }
    Ok(())
}

/// Shared body of `sum` (`is_mean = false`) and `mean`.
fn sum_mean(
    ctx: &mut Ctx<'_, '_, '_>,
    dims: Option<crate::kernel_api::IntList>,
    keepdim: bool,
    dtype: Option<DType>,
    out_arg: usize,
    is_mean: bool,
) -> Res {
    let x = ctx.input(0)?;
    let odt = ctx.out_dtype(out_arg)?;
    if let Some(d) = dtype {
        need_dtype(odt, d, out_arg)?;
    }
    if is_mean {
        need_float(odt, out_arg)?;
        if dtype.is_none() && !x.dtype().is_float() {
            return Err(KernelError::UnsupportedDType {
                arg: 0,
                dtype: x.dtype(),
            });
        }
    }
    let p = plan(x.shape(), dims.as_deref(), keepdim, 1)?;
    let mut out = ctx.output(out_arg, &p.out)?;
    let src = Src::new(&x)?;
    if odt.is_float() {
        let n = p.count as f64;
        return write_f64_groups(&mut out, &p, |base| {
            let s = group_sum_f64(&src, &p, base);
            if is_mean {
                s / n
            } else {
                s
            }
        });
    }
    for_groups(&p, |o, base| {
        let mut s = 0i64;
        walk(&p.red, base, |i| s = s.wrapping_add(src.i64(i)));
        out.set_i64(o, s);
    });
    Ok(())
}

/// `aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`: sum over `dim` (None or `[]` = all dims). Any real/bool input; the sum is
/// computed in the out tensor's dtype (f64 accumulation for floats, wrapping i64 for integers,
/// logical or for bool); `dtype`, when given, must equal the out dtype.
fn sum_intlist_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dims = dims_all_if_empty(ctx, 1)?;
    let keepdim = ctx.bool(2)?;
    let dtype = opt_dtype(ctx, 3)?;
    sum_mean(ctx, dims, keepdim, dtype, 4, false)
}

/// `aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`: mean over `dim` (None or `[]` = all dims; empty groups give NaN). The out
/// dtype must be floating (and equal `dtype` when given); integer inputs need `dtype`.
/// Accumulates in f64.
fn mean_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dims = dims_all_if_empty(ctx, 1)?;
    let keepdim = ctx.bool(2)?;
    let dtype = opt_dtype(ctx, 3)?;
    sum_mean(ctx, dims, keepdim, dtype, 4, true)
}

/// `aten::mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`: mean of all
/// elements into a rank-0 `out`; dtype rules as `mean.out`.
fn mean_dtype_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let dtype = opt_dtype(ctx, 1)?;
    sum_mean(ctx, None, false, dtype, 2, true)
}

fn prod_common(
    ctx: &mut Ctx<'_, '_, '_>,
    dims: Option<&[i64]>,
    keepdim: bool,
    dtype: Option<DType>,
    out_arg: usize,
) -> Res {
    let x = ctx.input(0)?;
    let odt = ctx.out_dtype(out_arg)?;
    if let Some(d) = dtype {
        need_dtype(odt, d, out_arg)?;
    }
    let p = plan(x.shape(), dims, keepdim, 1)?;
    let mut out = ctx.output(out_arg, &p.out)?;
    let src = Src::new(&x)?;
    if odt.is_float() {
        return write_f64_groups(&mut out, &p, |base| {
            let mut v = 1.0f64;
            walk(&p.red, base, |i| v *= src.f64(i));
            v
        });
    }
    for_groups(&p, |o, base| {
        let mut v = 1i64;
        walk(&p.red, base, |i| v = v.wrapping_mul(src.i64(i)));
        out.set_i64(o, v);
    });
    Ok(())
}

/// `aten::prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None,
/// Tensor(a!) out)`: product along `dim`, computed in the out dtype (f64 for floats, wrapping
/// i64 for integers, logical and for bool); empty products are 1.
fn prod_int_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dim = ctx.int(1)?;
    let keepdim = ctx.bool(2)?;
    let dtype = opt_dtype(ctx, 3)?;
    prod_common(ctx, Some(&[dim]), keepdim, dtype, 4)
}

/// `aten::prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out)`: product of all
/// elements into a rank-0 `out` (dtype rules as `prod.int_out`).
fn prod_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let dtype = opt_dtype(ctx, 1)?;
    prod_common(ctx, None, false, dtype, 2)
}

fn empty_reduction_err(arg: usize) -> KernelError {
    shape_err(arg, "reduction over an empty dim has no identity")
}

/// amax/amin/max/min without indices over `dims`. NaN propagates; output dtype = input dtype.
fn extreme(
    ctx: &mut Ctx<'_, '_, '_>,
    dims: Option<&[i64]>,
    keepdim: bool,
    out_arg: usize,
    is_max: bool,
) -> Res {
    let x = ctx.input(0)?;
    let dt = x.dtype();
    need_dtype(ctx.out_dtype(out_arg)?, dt, out_arg)?;
    let p = plan(x.shape(), dims, keepdim, 1)?;
    if p.count == 0 && p.out.numel() > 0 {
        return Err(empty_reduction_err(0));
    }
    let mut out = ctx.output(out_arg, &p.out)?;
    let src = Src::new(&x)?;
    if dt.is_float() {
        let pick = |base: usize| {
            let mut best = if is_max {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
            walk(&p.red, base, |i| {
                let v = src.f64(i);
                if v.is_nan() || (is_max && v > best) || (!is_max && v < best) {
                    best = v;
                }
            });
            best
        };
        // Once NaN, `best` stays NaN: later comparisons with it are false.
        return write_f64_groups(&mut out, &p, |base| {
            let mut nan = false;
            walk(&p.red, base, |i| nan |= src.f64(i).is_nan());
            if nan {
                f64::NAN
            } else {
                pick(base)
            }
        });
    }
    for_groups(&p, |o, base| {
        let mut best = if is_max { i64::MIN } else { i64::MAX };
        walk(&p.red, base, |i| {
            let v = src.i64(i);
            if (is_max && v > best) || (!is_max && v < best) {
                best = v;
            }
        });
        out.set_i64(o, best);
    });
    Ok(())
}

/// `aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`: maximum
/// over `dim` (`[]` = all dims), NaN propagating; `out` has the input's dtype (any real dtype
/// or bool). Reducing an empty dim is an error.
fn amax_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dims = ctx.int_list(1)?;
    let keepdim = ctx.bool(2)?;
    let d = if dims.is_empty() {
        None
    } else {
        Some(&dims[..])
    };
    extreme(ctx, d, keepdim, 3, true)
}

/// `aten::amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)`: minimum,
/// same contract as `amax.out`.
fn amin_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dims = ctx.int_list(1)?;
    let keepdim = ctx.bool(2)?;
    let d = if dims.is_empty() {
        None
    } else {
        Some(&dims[..])
    };
    extreme(ctx, d, keepdim, 3, false)
}

/// `aten::max.unary_out(Tensor self, *, Tensor(a!) out)`: maximum of all elements into a rank-0
/// `out` of the input's dtype (NaN propagating; empty input is an error).
fn max_unary_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    extreme(ctx, None, false, 1, true)
}

/// `aten::min.unary_out(Tensor self, *, Tensor(a!) out)`: minimum, as `max.unary_out`.
fn min_unary_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    extreme(ctx, None, false, 1, false)
}

/// Index (position in the group's row-major walk) and value of the max/min of one group.
/// Ties keep the first; the first NaN wins and ends the search (ATen).
fn arg_extreme_f64(
    src: &Src<'_>,
    loops: &[(usize, usize)],
    base: usize,
    is_max: bool,
) -> (i64, f64) {
    let mut best = f64::NAN;
    let mut bi = -1i64;
    let mut k = 0i64;
    let mut done = false;
    walk(loops, base, |i| {
        if done {
            return;
        }
        let v = src.f64(i);
        if bi < 0 || v.is_nan() || (is_max && v > best) || (!is_max && v < best) {
            best = v;
            bi = k;
            done = v.is_nan();
        }
        k += 1;
    });
    (bi, best)
}

fn arg_extreme_i64(
    src: &Src<'_>,
    loops: &[(usize, usize)],
    base: usize,
    is_max: bool,
) -> (i64, i64) {
    let mut best = 0i64;
    let mut bi = -1i64;
    let mut k = 0i64;
    walk(loops, base, |i| {
        let v = src.i64(i);
        if bi < 0 || (is_max && v > best) || (!is_max && v < best) {
            best = v;
            bi = k;
        }
        k += 1;
    });
    (bi, best)
}

/// argmax/argmin and max.dim/min.dim: `val_arg` is the values output (None for arg*),
/// `idx_arg` the int64 indices output.
fn arg_extreme(
    ctx: &mut Ctx<'_, '_, '_>,
    dim: Option<i64>,
    keepdim: bool,
    val_arg: Option<usize>,
    idx_arg: usize,
    is_max: bool,
) -> Res {
    let x = ctx.input(0)?;
    let dt = x.dtype();
    if let Some(va) = val_arg {
        need_dtype(ctx.out_dtype(va)?, dt, va)?;
    }
    need_dtype(ctx.out_dtype(idx_arg)?, DType::I64, idx_arg)?;
    let mut p = match dim {
        Some(d) => plan(x.shape(), Some(&[d]), keepdim, 1)?,
        None => plan(x.shape(), None, false, 1)?,
    };
    if dim.is_none() && keepdim {
        // argmax(dim=None, keepdim=True): every dim kept as 1.
        p.out = Shape::new(&[1; MAX_RANK][..x.rank()]).ok_or(shape_err(0, "rank"))?;
    }
    if p.count == 0 && p.out.numel() > 0 {
        return Err(empty_reduction_err(0));
    }
    let mut vals = match val_arg {
        Some(va) => Some(ctx.output(va, &p.out)?),
        None => None,
    };
    let mut idx = ctx.output(idx_arg, &p.out)?;
    let id = idx.as_mut_slice::<i64>()?;
    let src = Src::new(&x)?;
    let float = dt.is_float();
    for_groups(&p, |o, base| {
        if float {
            let (i, v) = arg_extreme_f64(&src, &p.red, base, is_max);
            id[o] = i;
            if let Some(vt) = vals.as_mut() {
                vt.set_f64(o, v);
            }
        } else {
            let (i, v) = arg_extreme_i64(&src, &p.red, base, is_max);
            id[o] = i;
            if let Some(vt) = vals.as_mut() {
                vt.set_i64(o, v);
            }
        }
    });
    Ok(())
}

/// `aten::argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`:
/// int64 index of the maximum along `dim` (None = over the flattened input; with `keepdim`
/// the output then has the input's rank, all ones). First occurrence wins; NaN counts as the
/// maximum (first NaN). Any real dtype or bool; empty reductions are an error.
fn argmax_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dim = ctx.opt_int(1)?;
    let keepdim = ctx.bool(2)?;
    arg_extreme(ctx, dim, keepdim, None, 3, true)
}

/// `aten::argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out)`:
/// as `argmax.out` for the minimum.
fn argmin_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dim = ctx.opt_int(1)?;
    let keepdim = ctx.bool(2)?;
    arg_extreme(ctx, dim, keepdim, None, 3, false)
}

/// `aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max,
/// Tensor(b!) max_values) -> (values, indices)`: `max` (arg 3) receives the values (input
/// dtype), `max_values` (arg 4) the int64 indices (schema naming is ATen's). NaN wins (first
/// NaN); ties keep the first index. Any real dtype or bool.
fn max_dim_max(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dim = ctx.int(1)?;
    let keepdim = ctx.bool(2)?;
    arg_extreme(ctx, Some(dim), keepdim, Some(3), 4, true)
}

/// `aten::min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min,
/// Tensor(b!) min_indices)`: as `max.dim_max` for the minimum.
fn min_dim_min(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dim = ctx.int(1)?;
    let keepdim = ctx.bool(2)?;
    arg_extreme(ctx, Some(dim), keepdim, Some(3), 4, false)
}

/// any (`is_any`) / all over `dims` into a Bool (or UInt8) output; nonzero (NaN included) is
/// true. Empty groups give false (any) / true (all).
fn any_all(
    ctx: &mut Ctx<'_, '_, '_>,
    dims: Option<&[i64]>,
    keepdim: bool,
    out_arg: usize,
    is_any: bool,
) -> Res {
    let x = ctx.input(0)?;
    let odt = ctx.out_dtype(out_arg)?;
    if odt != DType::Bool && odt != DType::U8 {
        return Err(KernelError::DTypeMismatch {
            arg: out_arg,
            expected: DType::Bool,
            got: odt,
        });
    }
    let p = plan(x.shape(), dims, keepdim, 1)?;
    let mut out = ctx.output(out_arg, &p.out)?;
    let od = out.as_mut_slice::<u8>()?;
    if od.len() == 1 && x.numel() > 0 && matches!(x.dtype(), DType::Bool | DType::U8) {
        // Whole-tensor reduction of a mask: one pass over the bytes.
        let xs = x.as_slice::<u8>()?;
        od[0] = if is_any { vec::any(xs) } else { vec::all(xs) } as u8;
        return Ok(());
    }
    let src = Src::new(&x)?;
    let float = x.dtype().is_float();
    for_groups(&p, |o, base| {
        let mut r = !is_any;
        walk(&p.red, base, |i| {
            let nz = if float {
                src.f64(i) != 0.0
            } else {
                src.i64(i) != 0
            };
            if is_any {
                r |= nz;
            } else {
                r &= nz;
            }
        });
        od[o] = r as u8;
    });
    Ok(())
}

/// `aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)`: logical or
/// along `dim`; any input dtype, Bool (or UInt8) output.
fn any_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dim = ctx.int(1)?;
    let keepdim = ctx.bool(2)?;
    any_all(ctx, Some(&[dim]), keepdim, 3, true)
}

/// `aten::any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)`:
/// logical or over `dim` (None = all dims, `[]` = no dim: elementwise `self != 0`).
fn any_dims_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dims = ctx.opt_int_list(1)?;
    let keepdim = ctx.bool(2)?;
    any_all(ctx, dims.as_deref(), keepdim, 3, true)
}

/// `aten::any.all_out(Tensor self, *, Tensor(a!) out)`: logical or of all elements (rank-0
/// Bool/UInt8 output).
fn any_all_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    any_all(ctx, None, false, 1, true)
}

/// `aten::all.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)`: logical and
/// along `dim`.
fn all_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dim = ctx.int(1)?;
    let keepdim = ctx.bool(2)?;
    any_all(ctx, Some(&[dim]), keepdim, 3, false)
}

/// `aten::all.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)`:
/// logical and over `dim` (None = all dims, `[]` = elementwise).
fn all_dims_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let dims = ctx.opt_int_list(1)?;
    let keepdim = ctx.bool(2)?;
    any_all(ctx, dims.as_deref(), keepdim, 3, false)
}

/// `aten::all.all_out(Tensor self, *, Tensor(a!) out)`: logical and of all elements.
fn all_all_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    any_all(ctx, None, false, 1, false)
}

/// Variance (and optionally mean) over `dims` with `correction`: Σ(x - mean)² / max(0, N - c).
fn var_common(
    ctx: &mut Ctx<'_, '_, '_>,
    dims: Option<crate::kernel_api::IntList>,
    correction: f64,
    keepdim: bool,
    var_arg: usize,
    mean_arg: Option<usize>,
) -> Res {
    let x = ctx.input(0)?;
    need_float(x.dtype(), 0)?;
    let vdt = ctx.out_dtype(var_arg)?;
    need_float(vdt, var_arg)?;
    if let Some(ma) = mean_arg {
        need_float(ctx.out_dtype(ma)?, ma)?;
    }
    let p = plan(x.shape(), dims.as_deref(), keepdim, 1)?;
    let mut var = ctx.output(var_arg, &p.out)?;
    let mut mean = match mean_arg {
        Some(ma) => Some(ctx.output(ma, &p.out)?),
        None => None,
    };
    let src = Src::new(&x)?;
    let n = p.count as f64;
    let div = (n - correction).max(0.0);
    for_groups(&p, |o, base| {
        let m = group_sum_f64(&src, &p, base) / n;
        let mut ss = 0.0f64;
        if let (Src::F32(d), [(len, 1)]) = (&src, &p.red[..]) {
            ss = sq_dev_f64(&d[base..base + len], m);
        } else {
            walk(&p.red, base, |i| {
                let dv = src.f64(i) - m;
                ss += dv * dv;
            });
        }
        var.set_f64(o, ss / div);
        if let Some(mt) = mean.as_mut() {
            mt.set_f64(o, m);
        }
    });
    Ok(())
}

/// `aten::var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
/// bool keepdim=False, Tensor(a!) out)`: variance over `dim` (None or `[]` = all) with divisor
/// `max(0, N - correction)` (default correction 1). Float input and output; f64 accumulation.
fn var_correction_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dims = dims_all_if_empty(ctx, 1)?;
    let corr = ctx.opt_scalar(2)?.map_or(1.0, |s| s.as_f64());
    let keepdim = ctx.bool(3)?;
    var_common(ctx, dims, corr, keepdim, 4, None)
}

/// `aten::var.out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *,
/// Tensor(a!) out)`: as `var.correction_out` with correction 1 (unbiased) or 0.
fn var_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let dims = dims_all_if_empty(ctx, 1)?;
    let corr = if ctx.bool(2)? { 1.0 } else { 0.0 };
    let keepdim = ctx.bool(3)?;
    var_common(ctx, dims, corr, keepdim, 4, None)
}

/// `aten::var_mean.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None,
/// bool keepdim=False, Tensor(a!) out0, Tensor(b!) out1)`: `out0` = variance (as
/// `var.correction_out`), `out1` = mean.
fn var_mean_correction_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(7)?;
    let dims = dims_all_if_empty(ctx, 1)?;
    let corr = ctx.opt_scalar(2)?.map_or(1.0, |s| s.as_f64());
    let keepdim = ctx.bool(3)?;
    var_common(ctx, dims, corr, keepdim, 4, Some(5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{OpTest, TestTensor};
    use std::vec;
    use std::vec::Vec;

    struct Rng(u64);
    impl Rng {
        fn f(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.f()).collect()
        }
    }

    fn numel(d: &[usize]) -> usize {
        d.iter().product()
    }

    #[track_caller]
    fn close(got: &[f32], want: &[f64], rtol: f64, atol: f64) {
        assert_eq!(got.len(), want.len(), "length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let g = g as f64;
            if w.is_nan() {
                assert!(g.is_nan(), "at {i}: got {g}, want NaN");
                continue;
            }
            if w.is_infinite() {
                assert_eq!(g, w, "at {i}");
                continue;
            }
            assert!(
                (g - w).abs() <= atol + rtol * w.abs(),
                "at {i}: got {g}, want {w}"
            );
        }
    }

    fn run(t: &OpTest) -> Vec<TestTensor> {
        t.run().expect("kernel run")
    }

    // -------------------------------------------------------------------- matmul family

    fn naive_mm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    c[i * n + j] += a[i * k + p] as f64 * b[p * n + j] as f64;
                }
            }
        }
        c
    }

    #[test]
    fn mm_shapes() {
        let mut rng = Rng(1);
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 17, 129),
            (129, 3, 17),
            (17, 129, 1),
            (2, 0, 3),
        ] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut t = OpTest::new("aten::mm.out");
            let ia = t.input_f32(&[m, k], &a);
            let ib = t.constant_f32(&[k, n], &b);
            let o = t.output(DType::F32, &[m, n]);
            t.call(&[ia, ib, o, o]);
            let r = run(&t);
            assert_eq!(r[0].shape, vec![m, n]);
            close(&r[0].f32(), &naive_mm(&a, &b, m, k, n), 1e-5, 1e-5);
        }
    }

    #[test]
    fn mm_errors() {
        let mut t = OpTest::new("aten::mm.out");
        let a = t.input_f32(&[2, 3], &[0.0; 6]);
        let b = t.input_f32(&[4, 2], &[0.0; 8]);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[a, b, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));

        let mut t = OpTest::new("aten::mm.out");
        let a = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
        let b = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
        let o = t.output(DType::I64, &[2, 2]);
        t.call(&[a, b, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::UnsupportedDType { arg: 0, .. }
        ));

        let mut t = OpTest::new("aten::mm.out");
        let a = t.input_f32(&[2, 2], &[0.0; 4]);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[a, a, o]);
        assert!(matches!(t.run_kernel_err(), KernelError::ArgCount { .. }));

        let mut t = OpTest::new("aten::mm.out");
        let a = t.input_f32(&[4], &[0.0; 4]);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[a, a, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn bmm_batches() {
        let mut rng = Rng(2);
        let (nb, m, k, n) = (3, 5, 17, 4);
        let a = rng.vec(nb * m * k);
        let b = rng.vec(nb * k * n);
        let mut t = OpTest::new("aten::bmm.out");
        let ia = t.input_f32(&[nb, m, k], &a);
        let ib = t.input_f32(&[nb, k, n], &b);
        let o = t.output(DType::F32, &[nb, m, n]);
        t.call(&[ia, ib, o, o]);
        let got = run(&t)[0].f32();
        let mut want = Vec::new();
        for i in 0..nb {
            want.extend(naive_mm(
                &a[i * m * k..(i + 1) * m * k],
                &b[i * k * n..(i + 1) * k * n],
                m,
                k,
                n,
            ));
        }
        close(&got, &want, 1e-5, 1e-5);

        let mut t = OpTest::new("aten::bmm.out");
        let ia = t.input_f32(&[2, 2, 2], &[0.0; 8]);
        let ib = t.input_f32(&[3, 2, 2], &[0.0; 12]);
        let o = t.output(DType::F32, &[2, 2, 2]);
        t.call(&[ia, ib, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
    }

    /// Reference `beta * broadcast(self) + alpha * a@b` (beta == 0 ignores self).
    fn naive_addmm(
        s: &[f32],
        sdims: &[usize],
        a: &[f32],
        b: &[f32],
        (m, k, n): (usize, usize, usize),
        beta: f64,
        alpha: f64,
    ) -> Vec<f64> {
        let p = naive_mm(a, b, m, k, n);
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                // right-aligned broadcast of self over [m, n]
                let sv = match sdims.len() {
                    0 => s[0],
                    1 => s[if sdims[0] == 1 { 0 } else { j }],
                    _ => {
                        let ii = if sdims[0] == 1 { 0 } else { i };
                        let jj = if sdims[1] == 1 { 0 } else { j };
                        s[ii * sdims[1] + jj]
                    }
                } as f64;
                let base = if beta == 0.0 { 0.0 } else { beta * sv };
                out[i * n + j] = base + alpha * p[i * n + j];
            }
        }
        out
    }

    #[test]
    fn addmm_broadcasts_and_scalars() {
        let mut rng = Rng(3);
        let (m, k, n) = (7, 19, 13);
        let cases: &[(&[usize], Scalar, Scalar)] = &[
            (&[13], Scalar::Int(1), Scalar::Int(1)),
            (&[1, 13], Scalar::Double(1.0), Scalar::Double(0.5)),
            (&[7, 13], Scalar::Double(0.5), Scalar::Int(2)),
            (&[7, 1], Scalar::Int(1), Scalar::Double(-1.0)),
            (&[1], Scalar::Double(2.0), Scalar::Int(1)),
            (&[13], Scalar::Double(0.25), Scalar::Int(1)),
            (&[], Scalar::Int(3), Scalar::Int(1)),
        ];
        for (sdims, beta, alpha) in cases {
            let s = rng.vec(numel(sdims));
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut t = OpTest::new("aten::addmm.out");
            let is = t.constant_f32(sdims, &s);
            let ia = t.input_f32(&[m, k], &a);
            let ib = t.constant_f32(&[k, n], &b);
            let push = |t: &mut OpTest, v: Scalar| match v {
                Scalar::Int(i) => t.int(i),
                Scalar::Double(d) => t.double(d),
                Scalar::Bool(x) => t.boolean(x),
            };
            let ibeta = push(&mut t, *beta);
            let ialpha = push(&mut t, *alpha);
            let o = t.output(DType::F32, &[m, n]);
            t.call(&[is, ia, ib, ibeta, ialpha, o, o]);
            let want = naive_addmm(&s, sdims, &a, &b, (m, k, n), beta.as_f64(), alpha.as_f64());
            close(&run(&t)[0].f32(), &want, 1e-5, 1e-5);
        }
        // beta = 0: NaN in self does not propagate.
        let a = rng.vec(6);
        let b = rng.vec(6);
        let mut t = OpTest::new("aten::addmm.out");
        let is = t.input_f32(&[2, 2], &[f32::NAN; 4]);
        let ia = t.input_f32(&[2, 3], &a);
        let ib = t.input_f32(&[3, 2], &b);
        let zero = t.double(0.0);
        let one = t.int(1);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[is, ia, ib, zero, one, o, o]);
        close(&run(&t)[0].f32(), &naive_mm(&a, &b, 2, 3, 2), 1e-6, 1e-6);
        // self that does not broadcast
        let mut t = OpTest::new("aten::addmm.out");
        let is = t.input_f32(&[3], &[0.0; 3]);
        let ia = t.input_f32(&[2, 3], &a);
        let ib = t.input_f32(&[3, 2], &b);
        let one = t.int(1);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[is, ia, ib, one, one, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 0, .. }
        ));
    }

    #[test]
    fn baddbmm_variants() {
        let mut rng = Rng(4);
        let (nb, m, k, n) = (2, 3, 5, 4);
        let a = rng.vec(nb * m * k);
        let b = rng.vec(nb * k * n);
        for (sdims, beta, alpha) in [
            (&[nb, m, n][..], 0.5, 2.0),
            (&[n][..], 1.0, 1.0),
            (&[m, 1][..], 0.0, 1.5),
        ] {
            let s: Vec<f32> = if beta == 0.0 {
                vec![f32::NAN; numel(sdims)]
            } else {
                rng.vec(numel(sdims))
            };
            let mut t = OpTest::new("aten::baddbmm.out");
            let is = t.input_f32(sdims, &s);
            let ia = t.input_f32(&[nb, m, k], &a);
            let ib = t.input_f32(&[nb, k, n], &b);
            let ibeta = t.double(beta);
            let ialpha = t.double(alpha);
            let o = t.output(DType::F32, &[nb, m, n]);
            t.call(&[is, ia, ib, ibeta, ialpha, o, o]);
            let got = run(&t)[0].f32();
            let mut want = Vec::new();
            for bi in 0..nb {
                let p = naive_mm(
                    &a[bi * m * k..][..m * k],
                    &b[bi * k * n..][..k * n],
                    m,
                    k,
                    n,
                );
                for i in 0..m {
                    for j in 0..n {
                        let sv = match sdims.len() {
                            3 => s[(bi * m + i) * n + j],
                            1 => s[j],
                            _ => s[i],
                        } as f64;
                        let base = if beta == 0.0 { 0.0 } else { beta * sv };
                        want.push(base + alpha * p[i * n + j]);
                    }
                }
            }
            close(&got, &want, 1e-5, 1e-5);
        }
    }

    #[test]
    fn linear_variants() {
        let mut rng = Rng(5);
        let (nin, nout) = (17, 9);
        let w = rng.vec(nout * nin);
        let bias = rng.vec(nout);
        for (xdims, with_bias) in [
            (&[2usize, 3, 17][..], true),
            (&[17][..], true),
            (&[4, 17][..], false),
            (&[1, 1, 17][..], true),
        ] {
            let x = rng.vec(numel(xdims));
            let mut t = OpTest::new("aten::linear.out");
            let ix = t.input_f32(xdims, &x);
            let iw = t.constant_f32(&[nout, nin], &w);
            let ib = if with_bias {
                t.constant_f32(&[nout], &bias)
            } else {
                t.none()
            };
            let mut odims = xdims.to_vec();
            *odims.last_mut().unwrap() = nout;
            let o = t.output(DType::F32, &odims);
            t.call(&[ix, iw, ib, o, o]);
            let r = run(&t);
            assert_eq!(r[0].shape, odims);
            let rows = x.len() / nin;
            let mut want = Vec::new();
            for i in 0..rows {
                for j in 0..nout {
                    let mut s = if with_bias { bias[j] as f64 } else { 0.0 };
                    for p in 0..nin {
                        s += x[i * nin + p] as f64 * w[j * nin + p] as f64;
                    }
                    want.push(s);
                }
            }
            close(&r[0].f32(), &want, 1e-5, 1e-5);
        }
        // scalar-shaped bias broadcast
        let x = rng.vec(2 * nin);
        let mut t = OpTest::new("aten::linear.out");
        let ix = t.input_f32(&[2, nin], &x);
        let iw = t.constant_f32(&[nout, nin], &w);
        let ib = t.constant_f32(&[1], &[0.5]);
        let o = t.output(DType::F32, &[2, nout]);
        t.call(&[ix, iw, ib, o, o]);
        let got = run(&t)[0].f32();
        for i in 0..2 {
            for j in 0..nout {
                let mut s = 0.5f64;
                for p in 0..nin {
                    s += x[i * nin + p] as f64 * w[j * nin + p] as f64;
                }
                assert!((got[i * nout + j] as f64 - s).abs() < 1e-5);
            }
        }
        // in_features mismatch
        let mut t = OpTest::new("aten::linear.out");
        let ix = t.input_f32(&[2, 4], &[0.0; 8]);
        let iw = t.constant_f32(&[nout, nin], &w);
        let n = t.none();
        let o = t.output(DType::F32, &[2, nout]);
        t.call(&[ix, iw, n, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
    }

    // -------------------------------------------------------------------- normalisation

    fn ref_norm(x: &[f32], m: usize, n: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (mut y, mut mu, mut rs) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..m {
            let row = &x[i * n..(i + 1) * n];
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
            let r = 1.0 / (var + eps).sqrt();
            mu.push(mean);
            rs.push(r);
            y.extend(row.iter().map(|&v| (v as f64 - mean) * r));
        }
        (y, mu, rs)
    }

    #[test]
    fn layer_norm_f32() {
        let mut rng = Rng(6);
        for (dims, nd) in [
            (&[3usize, 17][..], 1usize),
            (&[2, 3, 4][..], 2),
            (&[129][..], 1),
            (&[2, 1, 5][..], 1),
        ] {
            let r = dims.len();
            let n: usize = dims[r - nd..].iter().product();
            let m = numel(dims) / n;
            // offset data: checks the two-pass accuracy
            let x: Vec<f32> = rng.vec(numel(dims)).iter().map(|v| v + 100.0).collect();
            let w = rng.vec(n);
            let b = rng.vec(n);
            for affine in [false, true] {
                let mut t = OpTest::new("aten::native_layer_norm.out");
                let ix = t.input_f32(dims, &x);
                let ns = t.int_list(&dims[r - nd..].iter().map(|&d| d as i64).collect::<Vec<_>>());
                let (iw, ib) = if affine {
                    (
                        t.constant_f32(&dims[r - nd..], &w),
                        t.constant_f32(&dims[r - nd..], &b),
                    )
                } else {
                    (t.none(), t.none())
                };
                let eps = t.double(1e-5);
                let mut sdims = dims.to_vec();
                for d in &mut sdims[r - nd..] {
                    *d = 1;
                }
                let o0 = t.output(DType::F32, dims);
                let o1 = t.output(DType::F32, &sdims);
                let o2 = t.output(DType::F32, &sdims);
                let l = t.tensor_list(&[o0, o1, o2]);
                t.call(&[ix, ns, iw, ib, eps, o0, o1, o2, l]);
                let out = run(&t);
                assert_eq!(out[1].shape, sdims);
                let (mut y, mu, rs) = ref_norm(&x, m, n, 1e-5);
                if affine {
                    for (i, v) in y.iter_mut().enumerate() {
                        *v = *v * w[i % n] as f64 + b[i % n] as f64;
                    }
                }
                close(&out[0].f32(), &y, 1e-4, 1e-4);
                close(&out[1].f32(), &mu, 1e-6, 0.0);
                close(&out[2].f32(), &rs, 1e-5, 0.0);
            }
        }
    }

    #[test]
    fn layer_norm_f64_and_errors() {
        let x: Vec<f64> = (0..12).map(|i| (i * i) as f64 * 0.1).collect();
        let mut t = OpTest::new("aten::native_layer_norm.out");
        let ix = t.input_f64(&[3, 4], &x);
        let ns = t.int_list(&[4]);
        let n1 = t.none();
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F64, &[3, 4]);
        let o1 = t.output(DType::F64, &[3, 1]);
        let o2 = t.output(DType::F64, &[3, 1]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
        let out = run(&t);
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let (y, mu, _) = ref_norm(&xf, 3, 4, 1e-5);
        for (g, w) in out[0].f64().iter().zip(&y) {
            assert!((g - w).abs() < 1e-5);
        }
        for (g, w) in out[1].f64().iter().zip(&mu) {
            assert!((g - w).abs() < 1e-6);
        }
        // normalized_shape does not match the trailing dims
        let mut t = OpTest::new("aten::native_layer_norm.out");
        let ix = t.input_f32(&[3, 4], &[0.0; 12]);
        let ns = t.int_list(&[3]);
        let n1 = t.none();
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F32, &[3, 4]);
        let o1 = t.output(DType::F32, &[3, 1]);
        let o2 = t.output(DType::F32, &[3, 1]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Shape { arg: 1, .. }
        ));
        // integer input
        let mut t = OpTest::new("aten::native_layer_norm.out");
        let ix = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
        let ns = t.int_list(&[2]);
        let n1 = t.none();
        let eps = t.double(1e-5);
        let o0 = t.output(DType::I64, &[2, 2]);
        let o1 = t.output(DType::I64, &[2, 1]);
        let o2 = t.output(DType::I64, &[2, 1]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::UnsupportedDType { .. }
        ));
    }

    #[test]
    fn group_norm_f32() {
        let mut rng = Rng(7);
        let (n, c, h, w, g) = (2usize, 6usize, 3usize, 5usize, 3usize);
        let x = rng.vec(n * c * h * w);
        let wt = rng.vec(c);
        let b = rng.vec(c);
        let mut t = OpTest::new("aten::native_group_norm.out");
        let ix = t.input_f32(&[n, c, h, w], &x);
        let iw = t.constant_f32(&[c], &wt);
        let ib = t.constant_f32(&[c], &b);
        let (a_n, a_c, a_hw, a_g) = (
            t.int(n as i64),
            t.int(c as i64),
            t.int((h * w) as i64),
            t.int(g as i64),
        );
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F32, &[n, c, h, w]);
        let o1 = t.output(DType::F32, &[n, g]);
        let o2 = t.output(DType::F32, &[n, g]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, iw, ib, a_n, a_c, a_hw, a_g, eps, o0, o1, o2, l]);
        let out = run(&t);
        let block = c / g * h * w;
        let (mut y, mu, rs) = ref_norm(&x, n * g, block, 1e-5);
        for (i, v) in y.iter_mut().enumerate() {
            let ch = (i / (h * w)) % c;
            *v = *v * wt[ch] as f64 + b[ch] as f64;
        }
        close(&out[0].f32(), &y, 1e-4, 1e-4);
        close(&out[1].f32(), &mu, 1e-5, 1e-6);
        close(&out[2].f32(), &rs, 1e-5, 0.0);
    }

    #[test]
    fn batch_norm_inference() {
        let mut rng = Rng(8);
        let (n, c, h, w) = (2usize, 3usize, 4usize, 5usize);
        let x = rng.vec(n * c * h * w);
        let wt = rng.vec(c);
        let b = rng.vec(c);
        let rm = rng.vec(c);
        let rv: Vec<f32> = rng.vec(c).iter().map(|v| v.abs() + 0.5).collect();
        for key in [
            "aten::_native_batch_norm_legit_no_training.out",
            "aten::_native_batch_norm_legit.out",
        ] {
            let legit = key.ends_with("legit.out");
            let mut t = OpTest::new(key);
            let ix = t.input_f32(&[n, c, h, w], &x);
            let iw = t.constant_f32(&[c], &wt);
            let ib = t.constant_f32(&[c], &b);
            let im = t.constant_f32(&[c], &rm);
            let iv = t.constant_f32(&[c], &rv);
            let training = t.boolean(false);
            let mom = t.double(0.1);
            let eps = t.double(1e-5);
            let o0 = t.output(DType::F32, &[n, c, h, w]);
            let o1 = t.output_dynamic(DType::F32, &[3]);
            let o2 = t.output_dynamic(DType::F32, &[3]);
            let l = t.tensor_list(&[o0, o1, o2]);
            if legit {
                t.call(&[ix, iw, ib, im, iv, training, mom, eps, o0, o1, o2, l]);
            } else {
                t.call(&[ix, iw, ib, im, iv, mom, eps, o0, o1, o2, l]);
            }
            let out = run(&t);
            assert_eq!(out[1].shape, vec![0]);
            assert_eq!(out[2].shape, vec![0]);
            let want: Vec<f64> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let ch = (i / (h * w)) % c;
                    (v as f64 - rm[ch] as f64) / (rv[ch] as f64 + 1e-5).sqrt() * wt[ch] as f64
                        + b[ch] as f64
                })
                .collect();
            close(&out[0].f32(), &want, 1e-5, 1e-5);
        }
        // training mode is unsupported
        let mut t = OpTest::new("aten::_native_batch_norm_legit.out");
        let ix = t.input_f32(&[1, 1, 1, 1], &[0.0]);
        let p = t.constant_f32(&[1], &[1.0]);
        let training = t.boolean(true);
        let mom = t.double(0.1);
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F32, &[1, 1, 1, 1]);
        let o1 = t.output_dynamic(DType::F32, &[1]);
        let o2 = t.output_dynamic(DType::F32, &[1]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, p, p, p, p, training, mom, eps, o0, o1, o2, l]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Unsupported { .. }
        ));
    }

    // -------------------------------------------------------------------- softmax

    #[test]
    fn exp_fast_accuracy() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let want = libm::exp(x as f64);
            let got = exp_fast(x) as f64;
            worst = worst.max((got - want).abs() / want);
            x += 0.000_731;
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_fast(-200.0), 0.0);
        assert!(exp_fast(f32::NAN).is_nan());
        assert_eq!(exp_fast(0.0), 1.0);
        assert!((exp_fast(10.0) as f64 - libm::exp(10.0)).abs() / libm::exp(10.0) < 3e-7);
    }

    /// Reference softmax over `dim` of a row-major tensor, in f64.
    fn ref_softmax(x: &[f32], dims: &[usize], dim: usize, log: bool) -> Vec<f64> {
        let outer: usize = dims[..dim].iter().product();
        let len = dims[dim];
        let inner: usize = dims[dim + 1..].iter().product();
        let mut y = vec![0.0; x.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * len + k) * inner + i;
                let mx = (0..len)
                    .map(|k| x[at(k)] as f64)
                    .fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = (0..len).map(|k| (x[at(k)] as f64 - mx).exp()).sum();
                for k in 0..len {
                    let v = x[at(k)] as f64;
                    y[at(k)] = if log {
                        v - mx - s.ln()
                    } else {
                        (v - mx).exp() / s
                    };
                }
            }
        }
        y
    }

    #[test]
    fn softmax_any_dim() {
        let mut rng = Rng(9);
        for (dims, dim) in [
            (&[3usize, 129][..], -1i64),
            (&[2, 17, 3][..], 1),
            (&[2, 17, 3][..], 0),
            (&[2, 17, 3][..], -3),
            (&[1][..], 0),
            (&[4, 1, 9][..], 1),
            (&[5, 33][..], 1),
        ] {
            let x: Vec<f32> = rng.vec(numel(dims)).iter().map(|v| v * 8.0).collect();
            let d = if dim < 0 {
                (dim + dims.len() as i64) as usize
            } else {
                dim as usize
            };
            for (key, log) in [
                ("aten::_softmax.out", false),
                ("aten::_log_softmax.out", true),
            ] {
                let mut t = OpTest::new(key);
                let ix = t.input_f32(dims, &x);
                let idim = t.int(dim);
                let h = t.boolean(false);
                let o = t.output(DType::F32, dims);
                t.call(&[ix, idim, h, o, o]);
                close(
                    &run(&t)[0].f32(),
                    &ref_softmax(&x, dims, d, log),
                    2e-6,
                    1e-6,
                );
            }
        }
    }

    #[test]
    fn softmax_special_values() {
        let ninf = f32::NEG_INFINITY;
        // row 0: all -inf → NaN; row 1: masked entries → 0; row 2: NaN poisons the row
        let x = [ninf, ninf, ninf, 0.0, ninf, 1.0, 2.0, f32::NAN, 0.0];
        let mut t = OpTest::new("aten::_softmax.out");
        let ix = t.input_f32(&[3, 3], &x);
        let idim = t.int(-1);
        let h = t.boolean(false);
        let o = t.output(DType::F32, &[3, 3]);
        t.call(&[ix, idim, h, o, o]);
        let y = run(&t)[0].f32();
        assert!(y[..3].iter().all(|v| v.is_nan()));
        let e = 1.0f64.exp();
        close(&y[3..6], &[1.0 / (1.0 + e), 0.0, e / (1.0 + e)], 1e-6, 0.0);
        assert!(y[6..].iter().all(|v| v.is_nan()));
        // rank 0
        let mut t = OpTest::new("aten::_log_softmax.out");
        let ix = t.input_f32(&[], &[3.5]);
        let idim = t.int(0);
        let h = t.boolean(false);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, idim, h, o, o]);
        assert_eq!(run(&t)[0].f32(), vec![0.0]);
        // f64, middle dim
        let xd: Vec<f64> = (0..12).map(|i| (i as f64).sin() * 3.0).collect();
        let mut t = OpTest::new("aten::_softmax.out");
        let ix = t.input_f64(&[2, 3, 2], &xd);
        let idim = t.int(1);
        let h = t.boolean(false);
        let o = t.output(DType::F64, &[2, 3, 2]);
        t.call(&[ix, idim, h, o, o]);
        let xf: Vec<f32> = xd.iter().map(|&v| v as f32).collect();
        for (g, w) in run(&t)[0]
            .f64()
            .iter()
            .zip(ref_softmax(&xf, &[2, 3, 2], 1, false))
        {
            assert!((g - w).abs() < 1e-6);
        }
        // half_to_float and bad dim
        for (dim, h2f) in [(0i64, true), (2, false)] {
            let mut t = OpTest::new("aten::_softmax.out");
            let ix = t.input_f32(&[2, 2], &[0.0; 4]);
            let idim = t.int(dim);
            let h = t.boolean(h2f);
            let o = t.output(DType::F32, &[2, 2]);
            t.call(&[ix, idim, h, o, o]);
            let e = t.run_kernel_err();
            if h2f {
                assert!(matches!(e, KernelError::Unsupported { .. }));
            } else {
                assert!(matches!(e, KernelError::IndexOutOfBounds { arg: 1, .. }));
            }
        }
    }

    // -------------------------------------------------------------------- convolution

    #[allow(clippy::too_many_arguments)]
    fn ref_conv2d(
        x: &[f32],
        (n, c, h, w): (usize, usize, usize, usize),
        wt: &[f32],
        (co, kh, kw): (usize, usize, usize),
        bias: Option<&[f32]>,
        s: (usize, usize),
        p: (usize, usize),
        d: (usize, usize),
        groups: usize,
    ) -> (Vec<f64>, usize, usize) {
        let oh = (h + 2 * p.0 - d.0 * (kh - 1) - 1) / s.0 + 1;
        let ow = (w + 2 * p.1 - d.1 * (kw - 1) - 1) / s.1 + 1;
        let cg = c / groups;
        let cog = co / groups;
        let mut y = vec![0.0f64; n * co * oh * ow];
        for ni in 0..n {
            for o in 0..co {
                let g = o / cog;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = bias.map_or(0.0, |b| b[o] as f64);
                        for ci in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy = (oy * s.0 + ky * d.0) as isize - p.0 as isize;
                                    let ix = (ox * s.1 + kx * d.1) as isize - p.1 as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let xv = x[((ni * c + g * cg + ci) * h + iy as usize) * w
                                        + ix as usize];
                                    let wv = wt[((o * cg + ci) * kh + ky) * kw + kx];
                                    acc += xv as f64 * wv as f64;
                                }
                            }
                        }
                        y[((ni * co + o) * oh + oy) * ow + ox] = acc;
                    }
                }
            }
        }
        (y, oh, ow)
    }

    #[test]
    fn conv2d_params() {
        let mut rng = Rng(10);
        // (n, c, h, w), (co, kh, kw), stride, pad, dilation, groups, bias
        let cases = [
            ((1, 3, 7, 9), (4, 3, 3), (1, 1), (1, 1), (1, 1), 1, true),
            ((2, 4, 8, 5), (6, 3, 2), (2, 1), (1, 0), (1, 2), 2, false),
            ((1, 6, 9, 9), (6, 3, 3), (2, 2), (2, 1), (2, 1), 6, true),
            ((2, 4, 5, 6), (8, 1, 1), (1, 1), (0, 0), (1, 1), 1, true),
            ((1, 4, 5, 6), (2, 1, 1), (2, 2), (0, 0), (1, 1), 2, false),
            ((1, 32, 17, 17), (5, 3, 3), (1, 1), (1, 1), (1, 1), 1, true),
            ((1, 1, 1, 1), (1, 1, 1), (1, 1), (0, 0), (1, 1), 1, false),
        ];
        for (xs, ws, s, p, d, g, with_bias) in cases {
            let x = rng.vec(xs.0 * xs.1 * xs.2 * xs.3);
            let wt = rng.vec(ws.0 * (xs.1 / g) * ws.1 * ws.2);
            let b = rng.vec(ws.0);
            let (want, oh, ow) =
                ref_conv2d(&x, xs, &wt, ws, with_bias.then_some(&b[..]), s, p, d, g);
            let mut t = OpTest::new("aten::convolution.out");
            let ix = t.input_f32(&[xs.0, xs.1, xs.2, xs.3], &x);
            let iw = t.constant_f32(&[ws.0, xs.1 / g, ws.1, ws.2], &wt);
            let ib = if with_bias {
                t.constant_f32(&[ws.0], &b)
            } else {
                t.none()
            };
            let is = t.int_list(&[s.0 as i64, s.1 as i64]);
            let ip = t.int_list(&[p.0 as i64, p.1 as i64]);
            let id = t.int_list(&[d.0 as i64, d.1 as i64]);
            let tr = t.boolean(false);
            let op = t.int_list(&[0, 0]);
            let ig = t.int(g as i64);
            let o = t.output(DType::F32, &[xs.0, ws.0, oh, ow]);
            t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
            close(&run(&t)[0].f32(), &want, 1e-4, 1e-4);
        }
    }

    #[test]
    fn conv1d_and_errors() {
        let mut rng = Rng(11);
        let (n, c, l, co, k) = (2, 4, 11, 3, 3);
        let x = rng.vec(n * c * l);
        let wt = rng.vec(co * c * k);
        let b = rng.vec(co);
        let (want, oh, ow) = ref_conv2d(
            &x,
            (n, c, 1, l),
            &wt,
            (co, 1, k),
            Some(&b),
            (1, 2),
            (0, 2),
            (1, 1),
            1,
        );
        assert_eq!(oh, 1);
        let mut t = OpTest::new("aten::convolution.out");
        let ix = t.input_f32(&[n, c, l], &x);
        let iw = t.constant_f32(&[co, c, k], &wt);
        let ib = t.constant_f32(&[co], &b);
        let is = t.int_list(&[2]);
        let ip = t.int_list(&[2]);
        let id = t.int_list(&[1]);
        let tr = t.boolean(false);
        let op = t.int_list(&[0]);
        let ig = t.int(1);
        let o = t.output(DType::F32, &[n, co, ow]);
        t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
        close(&run(&t)[0].f32(), &want, 1e-5, 1e-5);

        // transposed → unsupported; bad groups → shape error; kernel larger than input
        for case in 0..3 {
            let mut t = OpTest::new("aten::convolution.out");
            let ix = t.input_f32(&[1, 4, 3, 3], &[0.0; 36]);
            let iw = t.constant_f32(&[2, 4, 4, 4], &[0.0; 128]);
            let ib = t.none();
            let is = t.int_list(&[1, 1]);
            let ip = t.int_list(&[0, 0]);
            let id = t.int_list(&[1, 1]);
            let tr = t.boolean(case == 0);
            let op = t.int_list(&[0, 0]);
            let ig = t.int(if case == 1 { 2 } else { 1 });
            let o = t.output_dynamic(DType::F32, &[1, 2, 4, 4]);
            t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
            let e = t.run_kernel_err();
            match case {
                0 => assert!(matches!(e, KernelError::Unsupported { .. })),
                1 => assert!(matches!(e, KernelError::Shape { arg: 1, .. })),
                _ => assert!(matches!(e, KernelError::Shape { arg: 0, .. })),
            }
        }
    }

    // -------------------------------------------------------------------- pooling

    /// Reference max pool: values and flat per-plane indices (ATen rules, last NaN wins).
    #[allow(clippy::too_many_arguments)]
    fn ref_max_pool(
        x: &[f64],
        planes: usize,
        h: usize,
        w: usize,
        k: (usize, usize),
        s: (usize, usize),
        p: (usize, usize),
        d: (usize, usize),
        oh: usize,
        ow: usize,
    ) -> (Vec<f64>, Vec<i64>) {
        let (mut vals, mut idx) = (Vec::new(), Vec::new());
        for pl in 0..planes {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut best = f64::NEG_INFINITY;
                    let mut bi: Option<i64> = None;
                    let mut first: Option<i64> = None;
                    for ky in 0..k.0 {
                        for kx in 0..k.1 {
                            let iy = (oy * s.0 + ky * d.0) as isize - p.0 as isize;
                            let ix = (ox * s.1 + kx * d.1) as isize - p.1 as isize;
                            if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                continue;
                            }
                            let fi = iy as i64 * w as i64 + ix as i64;
                            first.get_or_insert(fi);
                            let v = x[pl * h * w + fi as usize];
                            if v > best || v.is_nan() {
                                best = v;
                                bi = Some(fi);
                            }
                        }
                    }
                    vals.push(best);
                    idx.push(bi.or(first).unwrap());
                }
            }
        }
        (vals, idx)
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn max_pool2d_cases() {
        let mut rng = Rng(12);
        // dims, kernel, stride (empty = kernel), pad, dilation, ceil, expected (oh, ow)
        let cases: &[(
            &[usize],
            [i64; 2],
            &[i64],
            [i64; 2],
            [i64; 2],
            bool,
            (usize, usize),
        )] = &[
            (
                &[1, 2, 7, 9],
                [3, 3],
                &[2, 2],
                [1, 1],
                [1, 1],
                false,
                (4, 5),
            ),
            (&[2, 7, 9], [3, 2], &[], [1, 1], [1, 1], true, (3, 5)),
            (&[1, 1, 8, 8], [2, 3], &[2, 1], [0, 1], [2, 1], true, (4, 8)),
            (&[1, 3, 5, 5], [2, 2], &[2, 2], [0, 0], [1, 1], true, (3, 3)),
        ];
        for &(dims, k, st, p, d, ceil, (oh, ow)) in cases {
            let mut x: Vec<f32> = rng.vec(numel(dims));
            x[3] = f32::NAN;
            x[4] = f32::NAN;
            x[10] = f32::NEG_INFINITY;
            let r = dims.len();
            let planes: usize = dims[..r - 2].iter().product();
            let (h, w) = (dims[r - 2], dims[r - 1]);
            let s = if st.is_empty() { k } else { [st[0], st[1]] };
            let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let (vals, idx) = ref_max_pool(
                &xd,
                planes,
                h,
                w,
                (k[0] as usize, k[1] as usize),
                (s[0] as usize, s[1] as usize),
                (p[0] as usize, p[1] as usize),
                (d[0] as usize, d[1] as usize),
                oh,
                ow,
            );
            let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
            let ix = t.input_f32(dims, &x);
            let ik = t.int_list(&k);
            let is = t.int_list(st);
            let ip = t.int_list(&p);
            let id = t.int_list(&d);
            let ic = t.boolean(ceil);
            let mut odims = dims.to_vec();
            odims[r - 2] = oh;
            odims[r - 1] = ow;
            let o = t.output(DType::F32, &odims);
            let oi = t.output(DType::I64, &odims);
            let l = t.tensor_list(&[o, oi]);
            t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
            let out = run(&t);
            close(&out[0].f32(), &vals, 0.0, 0.0);
            assert_eq!(out[1].i64(), idx);
        }
        // values from torch: all -inf windows keep the first in-bounds index; last NaN wins
        let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
        let ix = t.input_f32(&[1, 1, 1, 4], &[1.0, f32::NAN, 2.0, f32::NAN]);
        let ik = t.int_list(&[1, 4]);
        let is = t.int_list(&[1, 1]);
        let ip = t.int_list(&[0, 0]);
        let id = t.int_list(&[1, 1]);
        let ic = t.boolean(false);
        let o = t.output(DType::F32, &[1, 1, 1, 1]);
        let oi = t.output(DType::I64, &[1, 1, 1, 1]);
        let l = t.tensor_list(&[o, oi]);
        t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
        let out = run(&t);
        assert!(out[0].f32()[0].is_nan());
        assert_eq!(out[1].i64(), vec![3]);

        let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
        let ix = t.input_f32(&[1, 1, 3, 3], &[f32::NEG_INFINITY; 9]);
        let ik = t.int_list(&[2, 2]);
        let is = t.int_list(&[1, 1]);
        let ip = t.int_list(&[1, 1]);
        let id = t.int_list(&[1, 1]);
        let ic = t.boolean(false);
        let o = t.output(DType::F32, &[1, 1, 4, 4]);
        let oi = t.output(DType::I64, &[1, 1, 4, 4]);
        let l = t.tensor_list(&[o, oi]);
        t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
        assert_eq!(
            run(&t)[1].i64(),
            vec![0, 0, 1, 2, 0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8]
        );

        // int64 input, and padding larger than half the kernel is rejected
        let xi: Vec<i64> = (0..16).map(|i| (i * 7) % 11).collect();
        let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
        let ix = t.input_i64(&[1, 4, 4], &xi);
        let ik = t.int_list(&[2]);
        let is = t.int_list(&[]);
        let ip = t.int_list(&[0]);
        let id = t.int_list(&[1]);
        let ic = t.boolean(false);
        let o = t.output(DType::I64, &[1, 2, 2]);
        let oi = t.output(DType::I64, &[1, 2, 2]);
        let l = t.tensor_list(&[o, oi]);
        t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
        let out = run(&t);
        let xf: Vec<f64> = xi.iter().map(|&v| v as f64).collect();
        let (vals, idx) = ref_max_pool(&xf, 1, 4, 4, (2, 2), (2, 2), (0, 0), (1, 1), 2, 2);
        assert_eq!(
            out[0].i64(),
            vals.iter().map(|&v| v as i64).collect::<Vec<_>>()
        );
        assert_eq!(out[1].i64(), idx);

        let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
        let ix = t.input_f32(&[1, 1, 5, 5], &[0.0; 25]);
        let ik = t.int_list(&[2, 2]);
        let is = t.int_list(&[1, 1]);
        let ip = t.int_list(&[2, 2]);
        let id = t.int_list(&[1, 1]);
        let ic = t.boolean(false);
        let o = t.output_dynamic(DType::F32, &[1, 1, 8, 8]);
        let oi = t.output_dynamic(DType::I64, &[1, 1, 8, 8]);
        let l = t.tensor_list(&[o, oi]);
        t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 3, .. }
        ));
    }

    #[test]
    fn avg_pool2d_matches_torch() {
        // torch.ops.aten.avg_pool2d(arange(16).reshape(1,1,4,4), [3,3], [2,2], [1,1], True, X)
        let xf: Vec<f32> = (0..16).map(|v| v as f32).collect();
        let xi: Vec<i64> = (0..16).collect();
        let run_case = |int: bool, include_pad: bool, div: Option<i64>| -> TestTensor {
            let mut t = OpTest::new("aten::avg_pool2d.out");
            let ix = if int {
                t.input_i64(&[1, 1, 4, 4], &xi)
            } else {
                t.input_f32(&[1, 1, 4, 4], &xf)
            };
            let ik = t.int_list(&[3, 3]);
            let is = t.int_list(&[2, 2]);
            let ip = t.int_list(&[1, 1]);
            let ic = t.boolean(true);
            let icp = t.boolean(include_pad);
            let idv = match div {
                Some(d) => t.int(d),
                None => t.none(),
            };
            let o = t.output(if int { DType::I64 } else { DType::F32 }, &[1, 1, 3, 3]);
            t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
            run(&t).remove(0)
        };
        let exclude = run_case(false, false, None);
        close(
            &exclude.f32(),
            &[2.5, 4.0, 5.0, 8.5, 10.0, 11.0, 12.5, 14.0, 15.0],
            1e-6,
            0.0,
        );
        let ints = run_case(true, true, None);
        assert_eq!(ints.i64(), vec![1, 2, 1, 5, 10, 5, 4, 7, 3]);
        // count_include_pad: windows clipped at H + pad (values from torch)
        let incl = run_case(false, true, None);
        let want: Vec<f64> = vec![
            10.0 / 9.0,
            24.0 / 9.0,
            10.0 / 6.0,
            51.0 / 9.0,
            90.0 / 9.0,
            33.0 / 6.0,
            25.0 / 6.0,
            42.0 / 6.0,
            15.0 / 4.0,
        ];
        close(&incl.f32(), &want, 1e-6, 0.0);
        let div = run_case(false, true, Some(2));
        let want: Vec<f64> = [10.0, 24.0, 10.0, 51.0, 90.0, 33.0, 25.0, 42.0, 15.0]
            .iter()
            .map(|v| v / 2.0)
            .collect();
        close(&div.f32(), &want, 1e-6, 0.0);
    }

    #[test]
    fn avg_pool2d_ceil_edge_windows() {
        // ceil_mode with no padding: the last window is clipped to the input (torch: the
        // corner output equals the corner input, divisor 1).
        let mut rng = Rng(18);
        let x = rng.vec(25);
        let mut t = OpTest::new("aten::avg_pool2d.out");
        let ix = t.input_f32(&[1, 1, 5, 5], &x);
        let ik = t.int_list(&[2, 2]);
        let is = t.int_list(&[2, 2]);
        let ip = t.int_list(&[0, 0]);
        let ic = t.boolean(true);
        let icp = t.boolean(true);
        let idv = t.none();
        let o = t.output(DType::F32, &[1, 1, 3, 3]);
        t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
        let y = run(&t)[0].f32();
        assert_eq!(y[8], x[24]);
        assert!((y[2] - (x[4] + x[9]) / 2.0).abs() < 1e-6);
        assert!((y[0] - (x[0] + x[1] + x[5] + x[6]) / 4.0).abs() < 1e-6);
        // divisor_override = 0 is rejected
        let mut t = OpTest::new("aten::avg_pool2d.out");
        let ix = t.input_f32(&[1, 1, 5, 5], &x);
        let ik = t.int_list(&[2, 2]);
        let is = t.int_list(&[2, 2]);
        let ip = t.int_list(&[0, 0]);
        let ic = t.boolean(true);
        let icp = t.boolean(true);
        let idv = t.int(0);
        let o = t.output(DType::F32, &[1, 1, 3, 3]);
        t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::Value { arg: 6, .. }
        ));
    }

    #[test]
    fn adaptive_avg_pool2d_bins() {
        let mut rng = Rng(13);
        let (c, h, w, oh, ow) = (3usize, 7usize, 5usize, 3usize, 2usize);
        let x = rng.vec(2 * c * h * w);
        let mut t = OpTest::new("aten::_adaptive_avg_pool2d.out");
        let ix = t.input_f32(&[2, c, h, w], &x);
        let os = t.int_list(&[oh as i64, ow as i64]);
        let o = t.output(DType::F32, &[2, c, oh, ow]);
        t.call(&[ix, os, o, o]);
        let got = run(&t)[0].f32();
        let mut want = Vec::new();
        for p in 0..2 * c {
            for oy in 0..oh {
                let (y0, y1) = ((oy * h) / oh, ((oy + 1) * h).div_ceil(oh));
                for ox in 0..ow {
                    let (x0, x1) = ((ox * w) / ow, ((ox + 1) * w).div_ceil(ow));
                    let mut s = 0.0;
                    for y in y0..y1 {
                        for xx in x0..x1 {
                            s += x[p * h * w + y * w + xx] as f64;
                        }
                    }
                    want.push(s / ((y1 - y0) * (x1 - x0)) as f64);
                }
            }
        }
        close(&got, &want, 1e-5, 1e-6);
    }

    // -------------------------------------------------------------------- reductions

    /// Reference reduction: groups of input values (row-major within each group) for every
    /// output element in row-major order, and the output shape.
    fn ref_groups(
        x: &[f64],
        dims: &[usize],
        red: &[usize],
        keepdim: bool,
    ) -> (Vec<usize>, Vec<Vec<f64>>) {
        let r = dims.len();
        let kept: Vec<usize> = (0..r).filter(|d| !red.contains(d)).collect();
        let out_shape: Vec<usize> = (0..r)
            .filter_map(|d| {
                if red.contains(&d) {
                    keepdim.then_some(1)
                } else {
                    Some(dims[d])
                }
            })
            .collect();
        let nout: usize = kept.iter().map(|&d| dims[d]).product();
        let mut groups = vec![Vec::new(); nout];
        let mut idx = vec![0usize; r];
        for &v in x {
            let mut o = 0;
            for &d in &kept {
                o = o * dims[d] + idx[d];
            }
            groups[o].push(v);
            for d in (0..r).rev() {
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        (out_shape, groups)
    }

    #[test]
    fn sum_mean_dims() {
        let mut rng = Rng(14);
        let dims = [3usize, 4, 5];
        let x = rng.vec(60);
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let cases: &[(Option<&[i64]>, &[usize], bool)] = &[
            (Some(&[1]), &[1], false),
            (Some(&[-1, 0]), &[0, 2], true),
            (None, &[0, 1, 2], false),
            (Some(&[]), &[0, 1, 2], true),
            (Some(&[0]), &[0], true),
            (Some(&[2]), &[2], false),
        ];
        for &(dl, red, keep) in cases {
            let (oshape, groups) = ref_groups(&xd, &dims, red, keep);
            for (key, mean) in [("aten::sum.IntList_out", false), ("aten::mean.out", true)] {
                let mut t = OpTest::new(key);
                let ix = t.input_f32(&dims, &x);
                let id = match dl {
                    Some(l) => t.int_list(l),
                    None => t.none(),
                };
                let ik = t.boolean(keep);
                let dt = t.none();
                let o = t.output(DType::F32, &oshape);
                t.call(&[ix, id, ik, dt, o, o]);
                let want: Vec<f64> = groups
                    .iter()
                    .map(|g| {
                        let s: f64 = g.iter().sum();
                        if mean {
                            s / g.len() as f64
                        } else {
                            s
                        }
                    })
                    .collect();
                let r = run(&t);
                assert_eq!(r[0].shape, oshape);
                close(&r[0].f32(), &want, 1e-6, 1e-6);
            }
        }
    }

    #[test]
    fn sum_mean_dtypes() {
        // int64 sum, bool → int64 sum, float → int64 with dtype (truncates first)
        let mut t = OpTest::new("aten::sum.IntList_out");
        let ix = t.input_i64(&[2, 3], &[1, 2, 3, 4, 5, i64::MAX]);
        let id = t.int_list(&[1]);
        let ik = t.boolean(false);
        let dt = t.none();
        let o = t.output(DType::I64, &[2]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![6, i64::MAX.wrapping_add(9)]);

        let mut t = OpTest::new("aten::sum.IntList_out");
        let ix = t.input_bool(&[4], &[true, false, true, true]);
        let id = t.none();
        let ik = t.boolean(false);
        let dt = t.none();
        let o = t.output(DType::I64, &[]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![3]);

        let mut t = OpTest::new("aten::sum.IntList_out");
        let ix = t.input_f32(&[2], &[1.7, 2.6]);
        let id = t.none();
        let ik = t.boolean(false);
        let dt = t.int(DType::I64 as i64);
        let o = t.output(DType::I64, &[]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![3]);

        // mean of int64 with dtype=float32; mean.dtype_out; empty mean is NaN
        let mut t = OpTest::new("aten::mean.out");
        let ix = t.input_i64(&[2], &[1, 2]);
        let id = t.none();
        let ik = t.boolean(false);
        let dt = t.int(DType::F32 as i64);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert_eq!(run(&t)[0].f32(), vec![1.5]);

        let mut t = OpTest::new("aten::mean.dtype_out");
        let ix = t.input_f64(&[2, 2], &[1.0, 2.0, 3.0, 5.0]);
        let dt = t.none();
        let o = t.output(DType::F64, &[]);
        t.call(&[ix, dt, o, o]);
        assert_eq!(run(&t)[0].f64(), vec![2.75]);

        let mut t = OpTest::new("aten::mean.out");
        let ix = t.input_f32(&[2, 0], &[]);
        let id = t.int_list(&[1]);
        let ik = t.boolean(false);
        let dt = t.none();
        let o = t.output(DType::F32, &[2]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert!(run(&t)[0].f32().iter().all(|v| v.is_nan()));

        // errors: integer mean without dtype, dtype ≠ out dtype, repeated dim, bad dim
        let mut t = OpTest::new("aten::mean.out");
        let ix = t.input_i64(&[2], &[1, 2]);
        let id = t.none();
        let ik = t.boolean(false);
        let dt = t.none();
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::UnsupportedDType { arg: 0, .. }
        ));

        let mut t = OpTest::new("aten::sum.IntList_out");
        let ix = t.input_f32(&[2], &[1.0, 2.0]);
        let id = t.none();
        let ik = t.boolean(false);
        let dt = t.int(DType::F64 as i64);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 4, .. }
        ));

        for dl in [&[0i64, -2][..], &[2][..]] {
            let mut t = OpTest::new("aten::sum.IntList_out");
            let ix = t.input_f32(&[2, 2], &[1.0; 4]);
            let id = t.int_list(dl);
            let ik = t.boolean(false);
            let dt = t.none();
            let o = t.output_dynamic(DType::F32, &[2]);
            t.call(&[ix, id, ik, dt, o, o]);
            let e = t.run_kernel_err();
            assert!(matches!(
                e,
                KernelError::Value { arg: 1, .. } | KernelError::IndexOutOfBounds { arg: 1, .. }
            ));
        }
    }

    #[test]
    fn prod_reductions() {
        let mut t = OpTest::new("aten::prod.int_out");
        let ix = t.input_i64(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let id = t.int(-1);
        let ik = t.boolean(true);
        let dt = t.none();
        let o = t.output(DType::I64, &[2, 1]);
        t.call(&[ix, id, ik, dt, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![6, 120]);

        let mut t = OpTest::new("aten::prod.out");
        let ix = t.input_f32(&[3], &[1.5, -2.0, 4.0]);
        let dt = t.none();
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, dt, o, o]);
        assert_eq!(run(&t)[0].f32(), vec![-12.0]);
    }

    #[test]
    fn amax_amin_nan_and_dims() {
        let mut rng = Rng(15);
        let dims = [2usize, 3, 4];
        let mut x = rng.vec(24);
        x[5] = f32::NAN;
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        for (dl, red, keep) in [
            (&[1i64][..], &[1usize][..], false),
            (&[][..], &[0, 1, 2][..], false),
            (&[-1, 0][..], &[0, 2][..], true),
        ] {
            let (oshape, groups) = ref_groups(&xd, &dims, red, keep);
            for (key, is_max) in [("aten::amax.out", true), ("aten::amin.out", false)] {
                let mut t = OpTest::new(key);
                let ix = t.input_f32(&dims, &x);
                let id = t.int_list(dl);
                let ik = t.boolean(keep);
                let o = t.output(DType::F32, &oshape);
                t.call(&[ix, id, ik, o, o]);
                let want: Vec<f64> = groups
                    .iter()
                    .map(|g| {
                        if g.iter().any(|v| v.is_nan()) {
                            f64::NAN
                        } else if is_max {
                            g.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                        } else {
                            g.iter().cloned().fold(f64::INFINITY, f64::min)
                        }
                    })
                    .collect();
                close(&run(&t)[0].f32(), &want, 0.0, 0.0);
            }
        }
        // int64 and bool keep their dtype; unary max/min
        let mut t = OpTest::new("aten::amax.out");
        let ix = t.input_i64(&[2, 2], &[i64::MIN, -5, 7, i64::MAX]);
        let id = t.int_list(&[0]);
        let ik = t.boolean(false);
        let o = t.output(DType::I64, &[2]);
        t.call(&[ix, id, ik, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![7, i64::MAX]);

        let mut t = OpTest::new("aten::min.unary_out");
        let ix = t.input_bool(&[3], &[true, false, true]);
        let o = t.output(DType::Bool, &[]);
        t.call(&[ix, o, o]);
        assert_eq!(run(&t)[0].bools(), vec![false]);

        let mut t = OpTest::new("aten::max.unary_out");
        let ix = t.input_f32(&[3], &[1.0, 9.0, -3.0]);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, o, o]);
        assert_eq!(run(&t)[0].f32(), vec![9.0]);

        // empty reduction
        let mut t = OpTest::new("aten::amax.out");
        let ix = t.input_f32(&[0, 3], &[]);
        let id = t.int_list(&[0]);
        let ik = t.boolean(false);
        let o = t.output(DType::F32, &[3]);
        t.call(&[ix, id, ik, o, o]);
        assert!(matches!(t.run_kernel_err(), KernelError::Shape { .. }));
        // ... but reducing a non-empty dim of an empty tensor is fine
        let mut t = OpTest::new("aten::amax.out");
        let ix = t.input_f32(&[0, 3], &[]);
        let id = t.int_list(&[1]);
        let ik = t.boolean(false);
        let o = t.output(DType::F32, &[0]);
        t.call(&[ix, id, ik, o, o]);
        assert_eq!(run(&t)[0].shape, vec![0]);
    }

    #[test]
    fn arg_and_dim_extremes() {
        let mut rng = Rng(16);
        let dims = [3usize, 5, 2];
        let mut x = rng.vec(30);
        x[7] = x[1]; // a tie within a group of dim 1
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let first_arg = |g: &Vec<f64>, is_max: bool| -> (i64, f64) {
            let mut bi = 0;
            for (i, &v) in g.iter().enumerate() {
                if v.is_nan() {
                    return (i as i64, v);
                }
                if (is_max && v > g[bi]) || (!is_max && v < g[bi]) {
                    bi = i;
                }
            }
            (bi as i64, g[bi])
        };
        for dim in [0i64, 1, -1] {
            let d = if dim < 0 {
                (dim + 3) as usize
            } else {
                dim as usize
            };
            for keep in [false, true] {
                let (oshape, groups) = ref_groups(&xd, &dims, &[d], keep);
                for (is_max, akey, dkey) in [
                    (true, "aten::argmax.out", "aten::max.dim_max"),
                    (false, "aten::argmin.out", "aten::min.dim_min"),
                ] {
                    let want: Vec<(i64, f64)> =
                        groups.iter().map(|g| first_arg(g, is_max)).collect();
                    let mut t = OpTest::new(akey);
                    let ix = t.input_f32(&dims, &x);
                    let id = t.int(dim);
                    let ik = t.boolean(keep);
                    let o = t.output(DType::I64, &oshape);
                    t.call(&[ix, id, ik, o, o]);
                    assert_eq!(
                        run(&t)[0].i64(),
                        want.iter().map(|w| w.0).collect::<Vec<_>>()
                    );

                    let mut t = OpTest::new(dkey);
                    let ix = t.input_f32(&dims, &x);
                    let id = t.int(dim);
                    let ik = t.boolean(keep);
                    let ov = t.output(DType::F32, &oshape);
                    let oi = t.output(DType::I64, &oshape);
                    let l = t.tensor_list(&[ov, oi]);
                    t.call(&[ix, id, ik, ov, oi, l]);
                    let r = run(&t);
                    close(
                        &r[0].f32(),
                        &want.iter().map(|w| w.1).collect::<Vec<_>>(),
                        0.0,
                        0.0,
                    );
                    assert_eq!(r[1].i64(), want.iter().map(|w| w.0).collect::<Vec<_>>());
                }
            }
        }
        // dim = None: flattened; keepdim gives all-ones shape; NaN: first NaN wins
        let v = [1.0f32, f32::NAN, 5.0, f32::NAN];
        for (keep, shape) in [(false, vec![]), (true, vec![1, 1])] {
            let mut t = OpTest::new("aten::argmax.out");
            let ix = t.input_f32(&[2, 2], &v);
            let id = t.none();
            let ik = t.boolean(keep);
            let o = t.output(DType::I64, &shape);
            t.call(&[ix, id, ik, o, o]);
            let r = run(&t);
            assert_eq!(r[0].shape, shape);
            assert_eq!(r[0].i64(), vec![1]);
        }
        let mut t = OpTest::new("aten::argmin.out");
        let ix = t.input_i64(&[4], &[3, -2, 8, -2]);
        let id = t.int(0);
        let ik = t.boolean(false);
        let o = t.output(DType::I64, &[]);
        t.call(&[ix, id, ik, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![1]);
        // rank 0 with dim 0
        let mut t = OpTest::new("aten::max.dim_max");
        let ix = t.input_f32(&[], &[4.5]);
        let id = t.int(0);
        let ik = t.boolean(true);
        let ov = t.output(DType::F32, &[]);
        let oi = t.output(DType::I64, &[]);
        let l = t.tensor_list(&[ov, oi]);
        t.call(&[ix, id, ik, ov, oi, l]);
        let r = run(&t);
        assert_eq!((r[0].f32(), r[1].i64()), (vec![4.5], vec![0]));
        // wrong indices dtype
        let mut t = OpTest::new("aten::argmax.out");
        let ix = t.input_f32(&[2], &[1.0, 2.0]);
        let id = t.none();
        let ik = t.boolean(false);
        let o = t.output(DType::I32, &[]);
        t.call(&[ix, id, ik, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 3, .. }
        ));
    }

    #[test]
    fn any_all_variants() {
        let x = [0.0f32, 1.0, 0.0, 0.0, f32::NAN, 2.0];
        let run_any =
            |key: &str, dims: Option<&[i64]>, single: Option<i64>, keep: bool, oshape: &[usize]| {
                let mut t = OpTest::new(key);
                let ix = t.input_f32(&[2, 3], &x);
                let mut args = vec![ix];
                if let Some(d) = single {
                    args.push(t.int(d));
                    args.push(t.boolean(keep));
                } else if key.ends_with("dims_out") {
                    args.push(match dims {
                        Some(l) => t.int_list(l),
                        None => t.none(),
                    });
                    args.push(t.boolean(keep));
                }
                let o = t.output(DType::Bool, oshape);
                args.push(o);
                args.push(o);
                t.call(&args);
                run(&t)[0].bools()
            };
        assert_eq!(
            run_any("aten::any.out", None, Some(1), false, &[2]),
            vec![true, true]
        );
        assert_eq!(
            run_any("aten::all.out", None, Some(0), true, &[1, 3]),
            vec![false, true, false]
        );
        assert_eq!(
            run_any("aten::all.out", None, Some(-1), false, &[2]),
            vec![false, false]
        );
        assert_eq!(
            run_any("aten::any.all_out", None, None, false, &[]),
            vec![true]
        );
        assert_eq!(
            run_any("aten::all.all_out", None, None, false, &[]),
            vec![false]
        );
        assert_eq!(
            run_any("aten::any.dims_out", None, None, false, &[]),
            vec![true]
        );
        assert_eq!(
            run_any("aten::any.dims_out", Some(&[]), None, false, &[2, 3]),
            vec![false, true, false, false, true, true]
        );
        assert_eq!(
            run_any("aten::all.dims_out", Some(&[0, 1]), None, true, &[1, 1]),
            vec![false]
        );
        // int input with uint8 output; empty all is true
        let mut t = OpTest::new("aten::all.all_out");
        let ix = t.input_i64(&[0], &[]);
        let o = t.output(DType::U8, &[]);
        t.call(&[ix, o, o]);
        assert_eq!(run(&t)[0].i64(), vec![1]);
        // float output is rejected
        let mut t = OpTest::new("aten::any.all_out");
        let ix = t.input_i64(&[1], &[1]);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, o, o]);
        assert!(matches!(
            t.run_kernel_err(),
            KernelError::DTypeMismatch { arg: 1, .. }
        ));
    }

    #[test]
    fn var_and_var_mean() {
        let mut rng = Rng(17);
        let dims = [4usize, 6];
        let x = rng.vec(24);
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let var = |g: &Vec<f64>, c: f64| {
            let m = g.iter().sum::<f64>() / g.len() as f64;
            g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (g.len() as f64 - c).max(0.0)
        };
        for (dl, red, corr) in [
            (Some(&[1i64][..]), &[1usize][..], None),
            (None, &[0, 1][..], Some(0.0)),
            (Some(&[0][..]), &[0][..], Some(2.5)),
        ] {
            let (oshape, groups) = ref_groups(&xd, &dims, red, false);
            let mut t = OpTest::new("aten::var.correction_out");
            let ix = t.input_f32(&dims, &x);
            let id = match dl {
                Some(l) => t.int_list(l),
                None => t.none(),
            };
            let ic = match corr {
                Some(c) => t.double(c),
                None => t.none(),
            };
            let ik = t.boolean(false);
            let o = t.output(DType::F32, &oshape);
            t.call(&[ix, id, ic, ik, o, o]);
            let want: Vec<f64> = groups.iter().map(|g| var(g, corr.unwrap_or(1.0))).collect();
            close(&run(&t)[0].f32(), &want, 1e-5, 1e-7);
        }
        // var.out (unbiased=false, keepdim) and var_mean
        let (oshape, groups) = ref_groups(&xd, &dims, &[0], true);
        let mut t = OpTest::new("aten::var.out");
        let ix = t.input_f32(&dims, &x);
        let id = t.int_list(&[0]);
        let iu = t.boolean(false);
        let ik = t.boolean(true);
        let o = t.output(DType::F32, &oshape);
        t.call(&[ix, id, iu, ik, o, o]);
        let want: Vec<f64> = groups.iter().map(|g| var(g, 0.0)).collect();
        close(&run(&t)[0].f32(), &want, 1e-5, 1e-7);

        let mut t = OpTest::new("aten::var_mean.correction_out");
        let ix = t.input_f32(&dims, &x);
        let id = t.int_list(&[0]);
        let ic = t.int(1);
        let ik = t.boolean(true);
        let o0 = t.output(DType::F32, &oshape);
        let o1 = t.output(DType::F32, &oshape);
        let l = t.tensor_list(&[o0, o1]);
        t.call(&[ix, id, ic, ik, o0, o1, l]);
        let r = run(&t);
        close(
            &r[0].f32(),
            &groups.iter().map(|g| var(g, 1.0)).collect::<Vec<_>>(),
            1e-5,
            1e-7,
        );
        close(
            &r[1].f32(),
            &groups
                .iter()
                .map(|g| g.iter().sum::<f64>() / g.len() as f64)
                .collect::<Vec<_>>(),
            1e-6,
            1e-7,
        );
        // single element with correction 1 → NaN
        let mut t = OpTest::new("aten::var.correction_out");
        let ix = t.input_f32(&[1], &[3.0]);
        let id = t.none();
        let ic = t.none();
        let ik = t.boolean(false);
        let o = t.output(DType::F32, &[]);
        t.call(&[ix, id, ic, ik, o, o]);
        assert!(run(&t)[0].f32()[0].is_nan());
    }

    #[test]
    fn any_all_bool_masks_whole_tensor() {
        for n in [1usize, 3, 17, 129] {
            for pattern in 0..4 {
                let m: Vec<bool> = (0..n)
                    .map(|k| match pattern {
                        0 => false,
                        1 => true,
                        2 => k == n - 1,
                        _ => k != n / 2,
                    })
                    .collect();
                for (key, want) in [
                    ("aten::any.all_out", m.iter().any(|&v| v)),
                    ("aten::all.all_out", m.iter().all(|&v| v)),
                ] {
                    let mut t = OpTest::new(key);
                    let ix = t.input_bool(&[1, n], &m);
                    let o = t.output(DType::Bool, &[]);
                    t.call(&[ix, o, o]);
                    assert_eq!(run(&t)[0].bools(), vec![want], "{key} n={n} p={pattern}");
                }
                // A single-dim reduction to one element takes the same fast path.
                let mut t = OpTest::new("aten::any.out");
                let ix = t.input_bool(&[1, n], &m);
                let d = t.int(1);
                let k = t.boolean(false);
                let o = t.output(DType::Bool, &[1]);
                t.call(&[ix, d, k, o, o]);
                assert_eq!(run(&t)[0].bools(), vec![m.iter().any(|&v| v)]);
            }
        }
    }
}
