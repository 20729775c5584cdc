//! Softmax kernels: `_softmax` and `_log_softmax` along any dim (f32 rows through
//! `linalg::vecmath`, other float dtypes in f64).
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{checked_prod, need_dtype, need_float, shape_err, wrap, Ctx, Res, Src};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::vecmath as vec;

/// The softmax kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::_softmax.out", softmax_out),
    KernelDef::new("aten::_log_softmax.out", log_softmax_out),
];

/// exp(x): the shared polynomial of `linalg::vecmath` (relative error ≤ 2.5e-7; flushes to 0
/// below ln(FLT_MIN); NaN stays NaN).
#[inline(always)]
fn exp_fast(x: f32) -> f32 {
    vec::generic::exp1(x)
}

/// Softmax (or log-softmax) of one contiguous f32 row (`linalg::vecmath`; the row and its output
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
            checked_prod(&x.dims()[..d], 0)?,
            x.dims()[d],
            checked_prod(&x.dims()[d + 1..], 0)?,
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

#[cfg(test)]
#[path = "softmax_tests.rs"]
mod tests;
