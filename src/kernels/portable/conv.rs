//! Convolution: `aten::convolution` (1-D and 2-D NCHW, stride, zero padding, dilation, groups)
//! as GEMMs over im2col tiles built in kernel scratch.
//!
//! Conventions (as for every `nn`-style kernel): inputs and outputs are contiguous (default dim
//! order; `KernelCtx::input` enforces it); the f32 case has a dedicated fast path over slices,
//! other dtypes, where a kernel accepts them, go through a generic path computing in f64
//! (floats) or i64 (integers); every output element is written, and every size product is
//! checked for overflow.

use super::common::{
    checked_prod, f32_of, int_at_least, make_shape, need_dtype, param, shape_err, window_out, Ctx,
    Res,
};
use super::matmul::GEMM_SCRATCH;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelDef;
use crate::linalg::gemm::{self, MatRef};

/// Floats of the im2col tile buffer used by `convolution` (in addition to the GEMM scratch).
const IM2COL_F32: usize = 64 * 1024;
/// im2col tiles cover at most this many output pixels.
const IM2COL_TILE_PIXELS: usize = 256;
const CONV_SCRATCH: usize = GEMM_SCRATCH + IM2COL_F32 * 4;

/// The convolution kernels, by operator key.
pub static KERNELS: &[KernelDef] = &[KernelDef::with_scratch(
    "aten::convolution.out",
    convolution_out,
    CONV_SCRATCH,
)];

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
        make_shape(&[n, cout, oh, ow], 9)?
    } else {
        make_shape(&[n, cout, ow], 9)?
    };
    let pix = checked_prod(&[oh, ow], 9)?;
    let kdim = checked_prod(&[cin_g, kh, kw], 1)?;
    let in_plane = checked_prod(&[cin_g, h, w], 0)?;
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

#[cfg(test)]
#[path = "conv_tests.rs"]
mod tests;
