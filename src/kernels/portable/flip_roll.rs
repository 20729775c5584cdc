//! Reordering along dims: `flip` (through the copy engine, negative strides) and `roll`.
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{check_out_dtype, contig_strides, shape_err, value_err, wrap, Ctx, Res};
use super::copy_engine::{copy_view, View};
use super::view::dim_mask;
use crate::kernel_api::KernelDef;
use crate::tensor::{NdIndex, MAX_RANK};

/// The flip and roll kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::flip.out", flip_out),
    KernelDef::new("aten::roll.out", roll_out),
];

/// `aten::flip.out(Tensor self, int[] dims, *, Tensor(a!) out)`: reverses the order of elements
/// along each listed dim (no duplicates). Any dtype; contiguous.
fn flip_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    let mask = dim_mask(&ctx.int_list(1)?, r, 1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let st = contig_strides(x.dims());
    let mut base = 0isize;
    let mut v = View::new(0);
    for (i, &d) in x.dims().iter().enumerate() {
        if mask & (1 << i) != 0 && d > 0 {
            base += (d as isize - 1) * st[i];
            v.push(d, -st[i], 2)?;
        } else {
            v.push(d, st[i], 2)?;
        }
    }
    v.base = base;
    let mut out = ctx.output(2, x.shape())?;
    copy_view(x.dtype().size(), x.bytes(), &v, out.bytes_mut(), 2)
}

/// `aten::roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out)`: rotates
/// elements along `dims` by `shifts` (with no dims: over the flattened tensor, one shift).
/// Repeated dims add their shifts. Any dtype; contiguous.
fn roll_out(ctx: &mut Ctx) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let shifts = ctx.int_list(1)?;
    let dims = ctx.int_list(2)?;
    let r = x.rank();
    if shifts.is_empty() {
        return Err(value_err(1, "roll: shifts required"));
    }
    let flat = dims.is_empty();
    if flat && shifts.len() != 1 {
        return Err(value_err(1, "roll: shifts and dims must align"));
    }
    if !flat && shifts.len() != dims.len() {
        return Err(value_err(2, "roll: shifts and dims must align"));
    }
    if !flat && r == 0 {
        return Err(shape_err(2, "roll: dims given for a 0-dim tensor"));
    }
    // Effective shift per dim in 0..size.
    let mut sh = [0usize; MAX_RANK];
    if !flat {
        for (&d, &s) in dims.iter().zip(shifts.iter()) {
            let w = wrap(d, r, 2)?;
            let n = x.dims()[w];
            if n > 0 {
                let s = s.rem_euclid(n as i64) as usize;
                sh[w] = (sh[w] + s) % n;
            }
        }
    }
    check_out_dtype(ctx, 3, x.dtype())?;
    let mut out = ctx.output(3, x.shape())?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let es = x.dtype().size();
    let src = x.bytes();
    let dst = out.bytes_mut();
    let rotate = |d: &mut [u8], s: &[u8], len: usize, k: usize| {
        // d[k..] = s[..len-k]; d[..k] = s[len-k..]
        d[k * es..len * es].copy_from_slice(&s[..(len - k) * es]);
        d[..k * es].copy_from_slice(&s[(len - k) * es..len * es]);
    };
    if flat || r == 0 {
        let k = shifts[0].rem_euclid(n as i64) as usize;
        rotate(dst, src, n, k);
        return Ok(());
    }
    let l = x.dims()[r - 1];
    let xs = contig_strides(x.dims());
    let mut rows = NdIndex::new(&x.dims()[..r - 1]);
    for row in dst.chunks_exact_mut(l * es) {
        let mut s0 = 0usize;
        for (d, &c) in rows.index().iter().enumerate() {
            let n = x.dims()[d];
            s0 += ((c + n - sh[d]) % n) * xs[d] as usize;
        }
        rotate(row, &src[s0 * es..(s0 + l) * es], l, sh[r - 1]);
        rows.advance();
    }
    Ok(())
}

#[cfg(test)]
#[path = "flip_roll_tests.rs"]
mod tests;
