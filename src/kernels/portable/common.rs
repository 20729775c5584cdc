//! Helpers shared by the portable kernel families: the `Ctx`/`Res` aliases of every kernel
//! signature, error constructors, argument checks (dims, sizes, dtypes), typed element reading
//! in f64/i64 (`Src`), f64 accumulation over f32 rows, sliding-window geometry (convolution and
//! pooling parameters), and byte-level copies and pattern fills.

use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelCtx;
use crate::tensor::{Shape, TensorRef, MAX_RANK};

/// The kernel context every kernel function receives.
pub(super) type Ctx<'c, 'a, 'p> = KernelCtx<'c, 'a, 'p>;
/// What a kernel function returns.
pub(super) type Res = Result<(), KernelError>;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// A `Shape` error on argument `arg`.
pub(super) fn shape_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Shape { arg, detail }
}

/// A `Value` error on argument `arg`.
pub(super) fn value_err(arg: usize, detail: &'static str) -> KernelError {
    KernelError::Value { arg, detail }
}

// ---------------------------------------------------------------------------------------------
// Sizes and shapes
// ---------------------------------------------------------------------------------------------

/// `dims` as a [`Shape`]; an error past [`MAX_RANK`] dims.
pub(super) fn make_shape(dims: &[usize], arg: usize) -> Result<Shape, KernelError> {
    Shape::new(dims).ok_or(shape_err(arg, "result rank exceeds 16"))
}

/// Product of dims with overflow checking.
pub(super) fn checked_prod(dims: &[usize], arg: usize) -> Result<usize, KernelError> {
    dims.iter().try_fold(1usize, |a, &d| {
        a.checked_mul(d)
            .ok_or(shape_err(arg, "size product overflows"))
    })
}

/// Product of `dims`, failing if it (or its byte count for 8-byte elements) overflows.
pub(super) fn checked_numel(dims: &[usize], arg: usize) -> Result<usize, KernelError> {
    let mut n: usize = 1;
    for &d in dims {
        n = n
            .checked_mul(d)
            .ok_or(shape_err(arg, "tensor size overflows"))?;
    }
    if n > isize::MAX as usize / 8 {
        return Err(shape_err(arg, "tensor size overflows"));
    }
    Ok(n)
}

/// Product of dims of an existing tensor (cannot overflow: the tensor exists in memory).
/// Whether `t` is a static contiguous tensor in the default dim order: what a call prepared
/// at load binds as raw bytes.
pub(super) fn plain(t: &crate::kernel_api::TensorSlot) -> bool {
    let r = t.shape.rank();
    t.dynamism == crate::kernel_api::Dynamism::Static
        && t.contiguous
        && t.dim_order[..r]
            .iter()
            .enumerate()
            .all(|(i, &d)| d as usize == i)
}

/// Whether slot position `i` of prepared record `p` is a [`plain`] tensor of `bytes` bytes:
/// what a runner of whole-tensor byte copies rechecks before binding.
pub(super) fn plain_sized(
    p: &crate::kernel_api::Prepared,
    tensors: &[crate::kernel_api::TensorSlot],
    i: usize,
    bytes: usize,
) -> bool {
    let slot = p.slots.get(i).and_then(|&s| tensors.get(s as usize));
    slot.is_some_and(|t| plain(t) && t.nbytes() == bytes)
}

/// Units `lo..hi` of a split over blocks of `per` units each (unit `u` is unit `u % per` of
/// block `u / per`), one `f(block, first, end)` per block the range touches: a part's work in
/// one call per block rather than one per unit.
pub(super) fn block_runs(lo: usize, hi: usize, per: usize, mut f: impl FnMut(usize, usize, usize)) {
    let per = per.max(1);
    let mut u = lo;
    while u < hi {
        let (block, first) = (u / per, u % per);
        let end = per.min(first + (hi - u));
        u += end - first;
        f(block, first, end);
    }
}

pub(super) fn prod(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// Row-major strides in elements.
pub(super) fn contig_strides(dims: &[usize]) -> [isize; MAX_RANK] {
    let mut st = [0isize; MAX_RANK];
    let mut acc: isize = 1;
    for i in (0..dims.len()).rev() {
        st[i] = acc;
        acc = acc.saturating_mul(dims[i].min(isize::MAX as usize) as isize);
    }
    st
}

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// ATen `maybe_wrap_dim` with the error naming argument `arg`.
pub(super) fn wrap(dim: i64, rank: usize, arg: usize) -> Result<usize, KernelError> {
    crate::shape::wrap_dim(dim, rank).ok_or(KernelError::IndexOutOfBounds {
        arg,
        index: dim,
        size: rank,
    })
}

/// A non-negative `i64` argument value as `usize`.
pub(super) fn to_size(v: i64, arg: usize, detail: &'static str) -> Result<usize, KernelError> {
    usize::try_from(v).map_err(|_| value_err(arg, detail))
}

/// An `int` argument that must be ≥ `min`, as usize.
pub(super) fn int_at_least(
    v: i64,
    min: i64,
    arg: usize,
    detail: &'static str,
) -> Result<usize, KernelError> {
    if v < min {
        return Err(value_err(arg, detail));
    }
    usize::try_from(v).map_err(|_| value_err(arg, detail))
}

/// `ScalarType?` argument → dtype (None when absent).
pub(super) fn opt_dtype(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Option<DType>, KernelError> {
    match ctx.opt_int(arg)? {
        None => Ok(None),
        Some(code) => i8::try_from(code)
            .ok()
            .and_then(DType::from_scalar_type)
            .map(Some)
            .ok_or(value_err(arg, "unknown ScalarType code")),
    }
}

/// `got` must be `expected` (`DTypeMismatch` on argument `arg` otherwise).
pub(super) fn need_dtype(got: DType, expected: DType, arg: usize) -> Res {
    if got != expected {
        return Err(KernelError::DTypeMismatch { arg, expected, got });
    }
    Ok(())
}

/// `d` must be a floating dtype (`UnsupportedDType` on argument `arg` otherwise).
pub(super) fn need_float(d: DType, arg: usize) -> Res {
    if !d.is_float() {
        return Err(KernelError::UnsupportedDType { arg, dtype: d });
    }
    Ok(())
}

/// The out dtype of argument `arg` must be `expected`.
pub(super) fn check_out_dtype(ctx: &Ctx, arg: usize, expected: DType) -> Res {
    need_dtype(ctx.out_dtype(arg)?, expected, arg)
}

/// A tensor-list item that must be present.
pub(super) fn list_item<'a>(
    ctx: &Ctx<'_, 'a, '_>,
    arg: usize,
    k: usize,
) -> Result<TensorRef<'a>, KernelError> {
    ctx.list_input(arg, k)?
        .ok_or(value_err(arg, "None in a tensor list"))
}

/// The f32 elements of `t`; `UnsupportedDType` for any other dtype.
pub(super) fn f32_of<'a>(t: &TensorRef<'a>) -> Result<&'a [f32], KernelError> {
    if t.dtype() != DType::F32 {
        return Err(KernelError::UnsupportedDType {
            arg: t.arg(),
            dtype: t.dtype(),
        });
    }
    t.as_slice::<f32>()
}

// ---------------------------------------------------------------------------------------------
// Element reading and f64 accumulation
// ---------------------------------------------------------------------------------------------

/// Elements of an input read as f64 / i64, with typed fast cases.
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I64(&'a [i64]),
    Any(TensorRef<'a>),
}

impl<'a> Src<'a> {
    pub(super) fn new(t: &TensorRef<'a>) -> Result<Src<'a>, KernelError> {
        Ok(match t.dtype() {
            DType::F32 => Src::F32(t.as_slice()?),
            DType::F64 => Src::F64(t.as_slice()?),
            DType::I64 => Src::I64(t.as_slice()?),
            _ => Src::Any(*t),
        })
    }
    #[inline]
    pub(super) fn f64(&self, i: usize) -> f64 {
        match self {
            Src::F32(s) => s[i] as f64,
            Src::F64(s) => s[i],
            Src::I64(s) => s[i] as f64,
            Src::Any(t) => t.get_f64(i),
        }
    }
    #[inline]
    pub(super) fn i64(&self, i: usize) -> i64 {
        match self {
            Src::F32(s) => s[i] as i64,
            Src::F64(s) => s[i] as i64,
            Src::I64(s) => s[i],
            Src::Any(t) => t.get_i64(i),
        }
    }
}

/// Sum of `x` in f64 (four independent lanes, so the loop vectorises).
pub(super) fn sum_f64(x: &[f32]) -> f64 {
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
pub(super) fn sq_dev_f64(x: &[f32], mean: f64) -> f64 {
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

// ---------------------------------------------------------------------------------------------
// Sliding windows (convolution, pooling)
// ---------------------------------------------------------------------------------------------

/// Per-spatial-dim parameter from an int list of length 1 (shared) or `nd`; `None` when empty
/// (the caller's default applies).
pub(super) fn param(
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
pub(super) fn window_out(
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

// ---------------------------------------------------------------------------------------------
// Copies and fills
// ---------------------------------------------------------------------------------------------

/// Copies `src` into `dst`; both must have the same length.
pub(super) fn copy_all(dst: &mut [u8], src: &[u8], arg: usize) -> Res {
    if dst.len() != src.len() {
        return Err(shape_err(arg, "output byte size does not match the input"));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Fills `dst` with copies of the element `pat` (`dst.len()` a multiple of `pat.len() > 0`).
pub(super) fn fill_pattern(dst: &mut [u8], pat: &[u8]) {
    if pat.iter().all(|&b| b == 0) {
        dst.fill(0);
    } else {
        for c in dst.chunks_exact_mut(pat.len()) {
            c.copy_from_slice(pat);
        }
    }
}
