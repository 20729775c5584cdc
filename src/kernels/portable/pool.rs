//! Pooling kernels: `max_pool2d_with_indices`, `avg_pool2d`, `_adaptive_avg_pool2d` (NCHW or
//! CHW planes).
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{
    checked_prod, int_at_least, need_dtype, need_float, param, shape_err, value_err, window_out,
    Ctx, Res, Src,
};
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::tensor::{Shape, TensorRef};

/// The pooling kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[
    KernelDef::new(
        "aten::max_pool2d_with_indices.out",
        max_pool2d_with_indices_out,
    ),
    KernelDef::new("aten::avg_pool2d.out", avg_pool2d_out),
    KernelDef::new("aten::_adaptive_avg_pool2d.out", adaptive_avg_pool2d_out),
];

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
    let planes = checked_prod(&d[..r - 2], 0)?;
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
    let planes = checked_prod(&d[..r - 2], 0)?;
    let mut oshape = *x.shape();
    oshape.dims_mut()[r - 2] = oh;
    oshape.dims_mut()[r - 1] = ow;
    checked_prod(oshape.dims(), 1)?;
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

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
