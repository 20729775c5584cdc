//! Normalisation kernels: `native_layer_norm`, `native_group_norm` and batch norm in inference
//! form (`_native_batch_norm_legit_no_training`, `_native_batch_norm_legit` with
//! `training = false`). Statistics are two-pass and accumulated in f64.
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{
    checked_prod, int_at_least, make_shape, need_dtype, need_float, shape_err, sq_dev_f64, sum_f64,
    value_err, Ctx, Res, Src,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::{KernelDef, Prepared, TensorSlot};
use crate::linalg::vecmath as vec;
use crate::parallel;

/// The normalisation kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new("aten::native_layer_norm.out", native_layer_norm_out)
        .with_prepare(prepare_layer_norm),
    KernelDef::new("aten::native_group_norm.out", native_group_norm_out),
    KernelDef::new(
        "aten::_native_batch_norm_legit_no_training.out",
        batch_norm_no_training_out,
    ),
    KernelDef::new("aten::_native_batch_norm_legit.out", batch_norm_legit_out),
];

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
    if ctx.out_dtype(0)? == DType::F32 {
        return layer_norm_f32(ctx);
    }
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
    let axis = norm_axis(&ns, x.dims())?;
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
    let m = checked_prod(&x.dims()[..axis], 0)?;
    let n = checked_prod(&x.dims()[axis..], 0)?;
    let mut stat_shape = *x.shape();
    for d in &mut stat_shape.dims_mut()[axis..] {
        *d = 1;
    }
    let mut out = ctx.output(5, x.shape())?;
    let mut mean_out = ctx.output(6, &stat_shape)?;
    let mut rstd_out = ctx.output(7, &stat_shape)?;
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

/// The first normalised dim of an input of `dims` for `normalized_shape` `ns` (argument 1):
/// `ns` must be non-empty and equal the input's trailing dims.
fn norm_axis(ns: &[i64], dims: &[usize]) -> Result<usize, KernelError> {
    if ns.is_empty() {
        return Err(value_err(
            1,
            "layer_norm: normalized_shape must not be empty",
        ));
    }
    let axis = dims.len().checked_sub(ns.len()).ok_or(shape_err(
        1,
        "layer_norm: normalized_shape longer than input rank",
    ))?;
    if ns
        .iter()
        .zip(&dims[axis..])
        .any(|(&n, &d)| n < 0 || n as u64 != d as u64)
    {
        return Err(shape_err(
            1,
            "layer_norm: normalized_shape must match the input's trailing dims",
        ));
    }
    Ok(axis)
}

/// [`native_layer_norm_out`] of an f32 input: the same checks, on the tensors' dims and raw
/// storage (no views are made: this runs several times per transformer layer).
fn layer_norm_f32(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    let ns = ctx.int_list(1)?;
    let eps = ctx.double(4)?;
    for a in 5..8 {
        need_dtype(ctx.out_dtype(a)?, DType::F32, a)?;
    }
    let x_shape = crate::shape::Shape::new(ctx.dims(0)?).ok_or(shape_err(0, "rank too large"))?;
    let dims = x_shape.dims();
    let axis = norm_axis(&ns, dims)?;
    let m = checked_prod(&dims[..axis], 0)?;
    let n = checked_prod(&dims[axis..], 0)?;
    let mut affine = [None, None];
    for (slot, arg) in affine.iter_mut().zip([2, 3]) {
        if ctx.is_none(arg)? {
            continue;
        }
        need_dtype(ctx.out_dtype(arg)?, DType::F32, arg)?;
        if !crate::shape::dims_eq(ctx.dims(arg)?, &dims[axis..]) {
            return Err(shape_err(
                arg,
                "layer_norm: weight/bias must have normalized_shape",
            ));
        }
        *slot = Some(ctx.input_f32s(arg, n)?);
    }
    let [wd, bd] = affine;
    let xd = ctx.input_f32s(0, m.saturating_mul(n))?;
    let mut stat_shape = x_shape;
    for d in &mut stat_shape.dims_mut()[axis..] {
        *d = 1;
    }
    let od = ctx.output_f32s_shaped(5, &x_shape)?;
    let md = ctx.output_f32s_shaped(6, &stat_shape)?;
    let rd = ctx.output_f32s_shaped(7, &stat_shape)?;
    layer_norm_split(xd, wd, bd, eps as f32, (m, n), (od, md, rd))
}

/// The rows of an f32 layer norm across the team's cores, each row computed as one core
/// computes it: `x` holds `m` rows of `n`, `o` likewise, `mo` and `ro` one value per row.
#[allow(clippy::type_complexity)]
fn layer_norm_split(
    xd: &[f32],
    wd: Option<&[f32]>,
    bd: Option<&[f32]>,
    eps: f32,
    (m, n): (usize, usize),
    (od, md, rd): (&mut [f32], &mut [f32], &mut [f32]),
) -> Res {
    let mn = m.checked_mul(n);
    if Some(xd.len()) != mn || Some(od.len()) != mn || md.len() != m || rd.len() != m {
        return Err(shape_err(5, "layer_norm: row length mismatch"));
    }
    let (od, md, rd) = (
        parallel::SharedSlice::new(od),
        parallel::SharedSlice::new(md),
        parallel::SharedSlice::new(rd),
    );
    let errors = parallel::FirstError::default();
    parallel::for_units(m, n * 6, |lo, hi, _| {
        // SAFETY: rows lo..hi (and their statistics) belong to this part alone; the outputs
        // hold m·n and m elements (checked above).
        let (o, mo, ro) = unsafe { (od.range(lo * n, hi * n), md.range(lo, hi), rd.range(lo, hi)) };
        let xr = &xd[lo * n..hi * n];
        if vec::layer_norm_rows(xr, wd, bd, eps, n, o, mo, ro).is_err() {
            errors.put(shape_err(5, "layer_norm: row length mismatch"));
        }
    });
    errors.result()
}

/// The load-time preparation of [`layer_norm_f32`]'s calls over the last dimension (the
/// transformers' layer norms): slots `[x, weight, bias, out, mean, rstd]` (weight and bias
/// may be absent), sizes `[row length, 0]`, epsilon's f32 bits as `param`.
fn prepare_layer_norm(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    if ctx.nargs() != 9 || [0, 2, 3].iter().any(|&a| ctx.named_elsewhere(a)) {
        return None;
    }
    for a in [0, 5, 6, 7] {
        if ctx.out_dtype(a).ok()? != DType::F32 {
            return None;
        }
    }
    let ns = ctx.int_list(1).ok()?;
    let eps = ctx.double(4).ok()?;
    let xd = ctx.dims(0).ok()?;
    let &n = xd.last()?;
    if ns.len() != 1 || u64::try_from(ns[0]).ok()? != n as u64 {
        return None;
    }
    let slot = |a| ctx.tensor_slot(a).ok().and_then(|s| u32::try_from(s).ok());
    let mut affine = [Prepared::NO_SLOT; 2];
    for (s, a) in affine.iter_mut().zip([2, 3]) {
        if ctx.is_none(a).ok()? {
            continue;
        }
        if ctx.out_dtype(a).ok()? != DType::F32 || !crate::shape::dims_eq(ctx.dims(a).ok()?, &[n]) {
            return None;
        }
        *s = slot(a)?;
    }
    if !crate::shape::dims_eq(ctx.dims(5).ok()?, xd)
        || !stats_of(ctx.dims(6).ok()?, xd)
        || !stats_of(ctx.dims(7).ok()?, xd)
    {
        return None;
    }
    Some(Prepared {
        run: Some(run_layer_norm),
        slots: [slot(0)?, affine[0], affine[1], slot(5)?, slot(6)?, slot(7)?],
        sizes: [u32::try_from(n).ok()?, 0, 0, 0],
        param: (eps as f32).to_bits(),
        hint: 0,
    })
}

/// Whether `s` is the statistics' shape of an input of `x` normalised over its last dim
/// (`x` with the last dim 1).
fn stats_of(s: &[usize], x: &[usize]) -> bool {
    s.len() == x.len()
        && s.split_last()
            .is_some_and(|(&l, r)| l == 1 && crate::shape::dims_eq(r, &x[..x.len() - 1]))
}

/// Runs a call prepared by [`prepare_layer_norm`]: what [`layer_norm_f32`] computes, over the
/// input's current rows (one statistic each).
fn run_layer_norm(p: &Prepared, tensors: &[TensorSlot], _: &mut [u8]) -> Result<bool, KernelError> {
    let n = p.sizes[0] as usize;
    let (Some(x), Some(mt)) = (
        tensors.get(p.slots[0] as usize),
        tensors.get(p.slots[4] as usize),
    ) else {
        return Ok(false);
    };
    let (xd, sd) = (x.shape.dims(), mt.shape.dims());
    if xd.last() != Some(&n) || !stats_of(sd, xd) {
        return Ok(false);
    }
    let row: &[usize] = &[n];
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose outputs were proved to overlap no other argument);
    // each output is bound once.
    let bound = unsafe {
        (
            p.input::<f32>(tensors, 0, xd),
            p.output::<f32>(tensors, 3, xd),
            p.output::<f32>(tensors, 4, sd),
            p.output::<f32>(tensors, 5, sd),
        )
    };
    let (Some(xs), Some(od), Some(md), Some(rd)) = bound else {
        return Ok(false);
    };
    let mut affine: [Option<&[f32]>; 2] = [None, None];
    for (a, i) in affine.iter_mut().zip([1, 2]) {
        if p.slots[i] != Prepared::NO_SLOT {
            // SAFETY: as above.
            match unsafe { p.input::<f32>(tensors, i, row) } {
                Some(v) => *a = Some(v),
                None => return Ok(false),
            }
        }
    }
    layer_norm_split(
        xs,
        affine[0],
        affine[1],
        f32::from_bits(p.param),
        (md.len(), n),
        (od, md, rd),
    )?;
    Ok(true)
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
    if checked_prod(&[nn, c, hw], 3)? != x.numel() {
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
    let stat_shape = make_shape(&[nn, g], 9)?;
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
    let inner = checked_prod(&x.dims()[2..], 0)?;
    let mut out = ctx.output(o, x.shape())?;
    let empty = make_shape(&[0], o + 1)?;
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
                // Slices, so that the loop vectorises (same operations, same order).
                let (dst, src) = (&mut od[base..base + inner], &xd[base..base + inner]);
                for (d, &v) in dst.iter_mut().zip(src) {
                    *d = (v - mean) * invstd * wv + bv;
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

#[cfg(test)]
#[path = "norm_tests.rs"]
mod tests;
