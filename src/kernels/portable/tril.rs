//! Triangular masks: `tril`, `triu` (any `diagonal`, batched over leading dims).
//!
//! Dtype-generic: elements move as raw `dtype.size()`-byte values, without arithmetic.
//! Layout contract: inputs and outputs are contiguous (the default dim order).

use super::common::{check_out_dtype, shape_err, Ctx, Res};
use crate::kernel_api::KernelDef;

/// The triangular mask kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::tril.out", tril_out),
    KernelDef::new("aten::triu.out", triu_out),
];

/// Shared body of `tril` (`lower`) and `triu`.
fn tri(ctx: &mut Ctx, lower: bool) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r < 2 {
        return Err(shape_err(0, "input tensor must have at least 2 dimensions"));
    }
    let diag = ctx.int(1)?;
    check_out_dtype(ctx, 2, x.dtype())?;
    let mut out = ctx.output(2, x.shape())?;
    let (rows, cols) = (x.dims()[r - 2], x.dims()[r - 1]);
    let es = x.dtype().size();
    let rb = cols * es;
    if rb == 0 {
        return Ok(());
    }
    let src = x.bytes();
    let dst = out.bytes_mut();
    for (row, (s, d)) in src
        .chunks_exact(rb)
        .zip(dst.chunks_exact_mut(rb))
        .enumerate()
    {
        let i = (row % rows.max(1)) as i64;
        let t = i.saturating_add(diag);
        // tril keeps columns j <= i + diag; triu keeps j >= i + diag.
        let split = if lower {
            t.saturating_add(1).clamp(0, cols as i64)
        } else {
            t.clamp(0, cols as i64)
        } as usize;
        let (a, b) = (split * es, rb);
        if lower {
            d[..a].copy_from_slice(&s[..a]);
            d[a..b].fill(0);
        } else {
            d[..a].fill(0);
            d[a..b].copy_from_slice(&s[a..b]);
        }
    }
    Ok(())
}

/// `aten::tril.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`: keeps the lower
/// triangle (`col - row <= diagonal`) of the last two dims, zeroes the rest.
/// Any dtype; contiguous.
fn tril_out(ctx: &mut Ctx) -> Res {
    tri(ctx, true)
}

/// `aten::triu.out(Tensor self, SymInt diagonal=0, *, Tensor(a!) out)`: keeps the upper
/// triangle (`col - row >= diagonal`) of the last two dims, zeroes the rest.
/// Any dtype; contiguous.
fn triu_out(ctx: &mut Ctx) -> Res {
    tri(ctx, false)
}

#[cfg(test)]
#[path = "tril_tests.rs"]
mod tests;
