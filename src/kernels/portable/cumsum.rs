//! Cumulative sum along a dim (`cumsum`), accumulated in f64 (floats) or wrapping i64
//! (integers) and rounded to the out dtype at every step, as ATen.
//!
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{check_out_dtype, prod, value_err, wrap, Ctx, Res};
use crate::dtype::DType;
use crate::kernel_api::KernelDef;
use crate::tensor::{read_f64, read_i64, write_f64, write_i64};

/// The cumulative kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[KernelDef::new("aten::cumsum.out", cumsum_out)];

/// `v` rounded to the precision of `dt`.
fn round_to(dt: DType, v: f64) -> f64 {
    let mut b = [0u8; 8];
    write_f64(dt, &mut b, 0, v);
    read_f64(dt, &b, 0)
}

/// `v` wrapped to the range of `dt` (C cast).
fn wrap_to(dt: DType, v: i64) -> i64 {
    let mut b = [0u8; 8];
    write_i64(dt, &mut b, 0, v);
    read_i64(dt, &b, 0)
}

/// `aten::cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out)`:
/// running sums along `dim`. Result dtype: `dtype` if given, else self's dtype for floats and
/// int64 for integer and bool inputs (out must have it). As in ATen on CPU, self is first cast
/// to the result dtype; f32/f64 accumulate in f64, f16/bf16 in f32, integers in wrapping i64.
/// Fast paths for f32 → f32 and i64 → i64. Contiguous.
fn cumsum_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let dim = wrap(ctx.int(1)?, r, 1)?;
    let dt = match ctx.opt_int(2)? {
        None => None,
        Some(c) => Some(
            i8::try_from(c)
                .ok()
                .and_then(DType::from_scalar_type)
                .ok_or(value_err(2, "unsupported ScalarType"))?,
        ),
    };
    let odt = dt.unwrap_or(if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::I64
    });
    check_out_dtype(ctx, 3, odt)?;
    let mut out = ctx.output(3, x.shape())?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (outer, n, inner) = if r == 0 {
        (1, 1, 1)
    } else {
        (
            prod(&x.dims()[..dim]),
            x.dims()[dim],
            prod(&x.dims()[dim + 1..]),
        )
    };
    match (x.dtype(), odt) {
        (DType::F32, DType::F32) => {
            let s = x.as_slice::<f32>()?;
            let d = out.as_mut_slice::<f32>()?;
            if inner == 1 {
                for (sr, dr) in s.chunks_exact(n).zip(d.chunks_exact_mut(n)) {
                    let mut acc = 0f64;
                    for (a, b) in sr.iter().zip(dr.iter_mut()) {
                        acc += *a as f64;
                        *b = acc as f32;
                    }
                }
            } else {
                for o in 0..outer {
                    for i in 0..inner {
                        let mut acc = 0f64;
                        for j in 0..n {
                            let p = (o * n + j) * inner + i;
                            acc += s[p] as f64;
                            d[p] = acc as f32;
                        }
                    }
                }
            }
        }
        (DType::I64, DType::I64) => {
            let s = x.as_slice::<i64>()?;
            let d = out.as_mut_slice::<i64>()?;
            // Along the last dim (position ids from an attention mask): rows in order.
            if inner == 1 {
                for (sr, dr) in s.chunks_exact(n).zip(d.chunks_exact_mut(n)) {
                    let mut acc = 0i64;
                    for (a, b) in sr.iter().zip(dr.iter_mut()) {
                        acc = acc.wrapping_add(*a);
                        *b = acc;
                    }
                }
                return Ok(());
            }
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = 0i64;
                    for j in 0..n {
                        let p = (o * n + j) * inner + i;
                        acc = acc.wrapping_add(s[p]);
                        d[p] = acc;
                    }
                }
            }
        }
        (sdt, odt) => {
            let src = x.bytes();
            let dst = out.bytes_mut();
            let half = matches!(odt, DType::F16 | DType::BF16);
            for o in 0..outer {
                for i in 0..inner {
                    let mut facc = 0f64;
                    let mut iacc = 0i64;
                    for j in 0..n {
                        let p = (o * n + j) * inner + i;
                        if odt.is_float() {
                            let v = round_to(odt, read_f64(sdt, src, p));
                            facc = if half {
                                (facc as f32 + v as f32) as f64
                            } else {
                                facc + v
                            };
                            write_f64(odt, dst, p, facc);
                        } else {
                            let v = if sdt.is_float() {
                                read_f64(sdt, src, p) as i64
                            } else {
                                read_i64(sdt, src, p)
                            };
                            iacc = iacc.wrapping_add(wrap_to(odt, v));
                            write_i64(odt, dst, p, iacc);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cumsum_tests.rs"]
mod tests;
