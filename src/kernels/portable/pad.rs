//! Constant padding: `constant_pad_nd` (negative pads crop).
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{
    check_out_dtype, checked_numel, contig_strides, copy_all, fill_pattern, make_shape, shape_err,
    to_size, value_err, Ctx, Res,
};
use crate::dtype::{DType, Scalar};
use crate::kernel_api::KernelDef;
use crate::tensor::{write_f64, write_i64, NdIndex, MAX_RANK};

/// The padding kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[KernelDef::new(
    "aten::constant_pad_nd.out",
    constant_pad_nd_out,
)];

/// One element of `s` converted to `dtype` through `write_i64`/`write_f64`, as little-endian
/// bytes (first `dtype.size()`).
fn value_bytes(dtype: DType, s: Scalar) -> [u8; 8] {
    let mut b = [0u8; 8];
    match s {
        Scalar::Int(v) => write_i64(dtype, &mut b, 0, v),
        Scalar::Double(v) => write_f64(dtype, &mut b, 0, v),
        Scalar::Bool(v) => write_i64(dtype, &mut b, 0, v as i64),
    }
    b
}

/// `aten::constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out)`:
/// pads (or, for negative pads, crops) dims from the last one backwards by the pairs
/// `(pad[2i], pad[2i+1])`, filling with `value` converted to self's dtype.
/// Any dtype; contiguous.
fn constant_pad_nd_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let pad = ctx.int_list(1)?;
    let value = ctx.scalar(2)?;
    let r = x.rank();
    if pad.len() % 2 != 0 {
        return Err(value_err(1, "length of pad must be even"));
    }
    if pad.len() / 2 > r {
        return Err(value_err(
            1,
            "length of pad must be at most twice the number of dimensions",
        ));
    }
    check_out_dtype(ctx, 3, x.dtype())?;
    let mut before = [0i64; MAX_RANK];
    let mut od = [0usize; MAX_RANK];
    od[..r].copy_from_slice(x.dims());
    for i in 0..pad.len() / 2 {
        let d = r - 1 - i;
        let (b, a) = (pad[2 * i], pad[2 * i + 1]);
        let n = x.dims()[d] as i64;
        let bad = shape_err(1, "negative padding crops more than the input size");
        let cropped = n
            .checked_add(b.min(0))
            .and_then(|v| v.checked_add(a.min(0)))
            .ok_or(bad)?;
        if cropped < 0 {
            return Err(bad);
        }
        let new = n
            .checked_add(b)
            .and_then(|v| v.checked_add(a))
            .ok_or(shape_err(1, "tensor size overflows"))?;
        od[d] = to_size(new, 1, "padding results in a negative output size")?;
        before[d] = b;
    }
    checked_numel(&od[..r], 1)?;
    let shape = make_shape(&od[..r], 1)?;
    let dt = x.dtype();
    let es = dt.size();
    let pat = value_bytes(dt, value);
    let pat = &pat[..es];
    let mut out = ctx.output(3, &shape)?;
    let src = x.bytes();
    let dst = out.bytes_mut();
    if r == 0 {
        return copy_all(dst, src, 3);
    }
    let l = od[r - 1];
    if l == 0 || dst.is_empty() {
        return Ok(());
    }
    let xs = contig_strides(x.dims());
    let xl = x.dims()[r - 1] as i64;
    let bl = before[r - 1];
    // Columns [j0, j1) of every valid row come from the input (column j - bl).
    let j0 = bl.clamp(0, l as i64);
    let j1 = (xl + bl).clamp(j0, l as i64);
    let (j0, j1) = (j0 as usize, j1 as usize);
    let mut rows = NdIndex::new(&od[..r - 1]);
    for row in dst.chunks_exact_mut(l * es) {
        let mut src_row = 0usize;
        let mut valid = true;
        for (d, &c) in rows.index().iter().enumerate() {
            let ic = c as i64 - before[d];
            if ic < 0 || ic >= x.dims()[d] as i64 {
                valid = false;
                break;
            }
            src_row += ic as usize * xs[d] as usize;
        }
        if valid && j1 > j0 {
            fill_pattern(&mut row[..j0 * es], pat);
            let s0 = (src_row as i64 + j0 as i64 - bl) as usize;
            row[j0 * es..j1 * es].copy_from_slice(&src[s0 * es..(s0 + j1 - j0) * es]);
            fill_pattern(&mut row[j1 * es..], pat);
        } else {
            fill_pattern(row, pat);
        }
        rows.advance();
    }
    Ok(())
}

#[cfg(test)]
#[path = "pad_tests.rs"]
mod tests;
