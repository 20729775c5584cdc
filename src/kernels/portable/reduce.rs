//! Reductions over any set of dims: `sum`, `mean`, `prod`, `amax`/`amin`, `max`/`min` (whole
//! tensor and along a dim with indices), `argmax`/`argmin`, `any`/`all`, `var`, `var_mean`.
//! A reduction is planned once (`Plan`): kept and reduced dims become nested loops, merged
//! where contiguous, and each output element walks its group of input elements.
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{
    checked_prod, need_dtype, need_float, opt_dtype, shape_err, sq_dev_f64, sum_f64, value_err,
    wrap, Ctx, Res, Src,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::vecmath as vec;
use crate::tensor::{Shape, TensorMut, MAX_RANK};

/// The reduction kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
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
    checked_prod(out.dims(), 0)?;
    Ok(Plan {
        out,
        kept,
        red,
        count,
    })
}

/// Calls `f(offset)` for every offset of the nested `loops` starting at `base`, row-major.
///
/// Runs once per output element, so it keeps its own allocation-free odometer instead of an
/// `NdIndex`: building one (and its offset jumps) per group would cost more than walking a
/// small group.
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

/// f32 sum or mean (`scale` = 1 or 1/count) over the innermost dims (one contiguous run of
/// `n` per output, the outputs in input order, e.g. RMSNorm's `mean(x², -1)`): each row in
/// blocks of 64 summed in f32 partial sums (`vecmath::sum`), the block sums added in f64. Returns false,
/// writing nothing, for any other plan.
fn sum_last_f32(x: &[f32], p: &Plan, scale: f64, od: &mut [f32]) -> bool {
    let &[(n, 1)] = &p.red[..] else {
        return false;
    };
    if n == 0 || od.len().checked_mul(n) != Some(x.len()) {
        return false;
    }
    for (o, row) in od.iter_mut().zip(x.chunks_exact(n)) {
        let mut total = 0.0f64;
        for block in row.chunks(64) {
            total += crate::linalg::vecmath::sum(block) as f64;
        }
        *o = (total * scale) as f32;
    }
    true
}

/// Inner elements per block of [`sum_rows_f32`]'s f64 accumulators.
const ROW_BLOCK: usize = 64;

/// f32 sum or mean (`scale` = 1 or 1/count) over one reduced dim that lies directly outside a
/// contiguous kept block (e.g. `mean(dim=2)` of NCHW: reduce H, keep W): for each outer group
/// the reduced rows are added element-wise, in f64, a block of [`ROW_BLOCK`] inner elements
/// at a time (a vector loop over the row instead of a strided walk per output element).
/// Returns false, writing nothing, for any other plan.
fn sum_rows_f32(x: &[f32], p: &Plan, scale: f64, od: &mut [f32]) -> bool {
    let (&[(rows, rs)], Some(&(inner, 1))) = (&p.red[..], p.kept.last()) else {
        return false;
    };
    let outer = &p.kept[..p.kept.len() - 1];
    let last = rows
        .checked_sub(1)
        .and_then(|r| r.checked_mul(rs))
        .and_then(|v| v.checked_add(inner));
    if rs < inner || last.is_none() {
        return false;
    }
    let mut o = 0;
    walk(outer, 0, |base| {
        for i0 in (0..inner).step_by(ROW_BLOCK) {
            let n = ROW_BLOCK.min(inner - i0);
            let mut acc = [0.0f64; ROW_BLOCK];
            for r in 0..rows {
                let row = &x[base + r * rs + i0..base + r * rs + i0 + n];
                for (a, v) in acc.iter_mut().zip(row) {
                    *a += *v as f64;
                }
            }
            for (d, a) in od[o + i0..o + i0 + n].iter_mut().zip(&acc) {
                *d = (*a * scale) as f32;
            }
        }
        o += inner;
    });
    true
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
    if let (Src::F32(xd), DType::F32) = (&src, odt) {
        let scale = if is_mean { 1.0 / p.count as f64 } else { 1.0 };
        let od = out.as_mut_slice::<f32>()?;
        if sum_last_f32(xd, &p, scale, od) || sum_rows_f32(xd, &p, scale, od) {
            return Ok(());
        }
    }
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
pub(super) fn mean_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
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
#[path = "reduce_tests.rs"]
mod tests;
