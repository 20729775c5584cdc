//! Depthwise convolution (`groups = C`, `OC = C·m` with channel multiplier `m`): every output
//! channel `o` reads one input channel, `o / m`. No GEMM: each output is a short sum over the
//! taps, so these are vector loops.
//!
//! - [`depthwise_nhwc`] (XNNPACK's `DepthwiseConv2d`, filter `[1, KH, KW, OC]`): channels are
//!   contiguous, so the loops run over blocks of channels, accumulators in registers across the
//!   taps. On AArch64 with `m = 1`, 3×3 filters with stride 1 or 2 take the Neon kernel
//!   `neon_3x3`, which keeps the nine filter vectors of a 4-channel block in registers and,
//!   over the interior of each row, shares input columns between neighbouring outputs (4 per
//!   block at stride 1, 3 at stride 2); border outputs use only their valid taps.
//! - [`depthwise_nchw`] (ATen, filter `[OC, 1, KH, KW]`): each output plane is a sum of shifted
//!   input rows scaled by one weight, a loop over contiguous output columns.

use super::{clamp, shape_err, Conv2d};
use crate::error::KernelError;

/// Channels per block of the generic NHWC loop (accumulators kept in registers).
const CB: usize = 16;

fn check(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<usize, KernelError> {
    if !p.is_depthwise() {
        return Err(shape_err("conv: depthwise needs groups = input channels"));
    }
    p.check_call(x, w, bias, out, None)
}

/// `out = clamp(depthwise(x, w) + bias)`: NHWC `x` (`[N, H, W, C]`), filter `w`
/// (`[1, KH, KW, OC]`, `OC = C·m`), `out` (`[N, OH, OW, OC]`).
pub fn depthwise_nhwc(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    let nout = check(p, x, w, bias, out)?;
    let (c, oc) = (p.in_c, p.out_c);
    let mult = oc / c.max(1);
    for (row, orow) in out[..nout].chunks_exact_mut(p.out_w * oc).enumerate() {
        let (b, oy) = (row / p.out_h, row % p.out_h);
        #[cfg(target_arch = "aarch64")]
        let done = mult == 1 && neon_3x3::row(p, x, w, bias, orow, b, oy);
        #[cfg(not(target_arch = "aarch64"))]
        let done = false;
        if !done {
            for (ox, o) in orow.chunks_exact_mut(oc).enumerate() {
                pixel(p, x, w, bias, o, b, oy, ox, mult);
            }
        }
        clamp(orow, range);
    }
    Ok(())
}

/// One output pixel of the NHWC depthwise convolution, all `OC` channels.
#[allow(clippy::too_many_arguments)]
fn pixel(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    o: &mut [f32],
    b: usize,
    oy: usize,
    ox: usize,
    mult: usize,
) {
    let (c, oc) = (p.in_c, p.out_c);
    if mult != 1 {
        for (j, v) in o.iter_mut().enumerate() {
            let mut acc = bias.map_or(0.0, |bv| bv[j]);
            for ky in 0..p.kh {
                let Some(iy) = p.in_row(oy, ky) else { continue };
                for kx in 0..p.kw {
                    let Some(ix) = p.in_col(ox, kx) else { continue };
                    acc += x[((b * p.in_h + iy) * p.in_w + ix) * c + j / mult]
                        * w[(ky * p.kw + kx) * oc + j];
                }
            }
            *v = acc;
        }
        return;
    }
    for c0 in (0..oc).step_by(CB) {
        let cb = CB.min(oc - c0);
        let mut acc = [0.0f32; CB];
        if let Some(bv) = bias {
            acc[..cb].copy_from_slice(&bv[c0..c0 + cb]);
        }
        for ky in 0..p.kh {
            let Some(iy) = p.in_row(oy, ky) else { continue };
            for kx in 0..p.kw {
                let Some(ix) = p.in_col(ox, kx) else { continue };
                let xs = &x[((b * p.in_h + iy) * p.in_w + ix) * c + c0..][..cb];
                let ws = &w[(ky * p.kw + kx) * oc + c0..][..cb];
                for ((a, &xv), &wv) in acc.iter_mut().zip(xs).zip(ws) {
                    *a += xv * wv;
                }
            }
        }
        o[c0..c0 + cb].copy_from_slice(&acc[..cb]);
    }
}

/// `out = clamp(depthwise(x, w) + bias)`: NCHW `x` (`[N, C, H, W]`), filter `w`
/// (`[OC, 1, KH, KW]`, `OC = C·m`), `out` (`[N, OC, OH, OW]`).
pub fn depthwise_nchw(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
) -> Result<(), KernelError> {
    let nout = check(p, x, w, bias, out)?;
    let (c, oc) = (p.in_c, p.out_c);
    let mult = oc / c.max(1);
    let (pix, ipix) = (p.pixels(), p.in_h * p.in_w);
    let taps = p.kh * p.kw;
    for (plane, op) in out[..nout].chunks_exact_mut(pix).enumerate() {
        let (b, o) = (plane / oc, plane % oc);
        let xi = &x[(b * c + o / mult) * ipix..][..ipix];
        let wo = &w[o * taps..][..taps];
        op.fill(bias.map_or(0.0, |bv| bv[o]));
        for ky in 0..p.kh {
            for kx in 0..p.kw {
                let wv = wo[ky * p.kw + kx];
                let (lo, hi) = p.valid_cols(kx);
                if lo >= hi {
                    continue;
                }
                for (oy, orow) in op.chunks_exact_mut(p.out_w).enumerate() {
                    let Some(iy) = p.in_row(oy, ky) else { continue };
                    let xr = &xi[iy * p.in_w..][..p.in_w];
                    // Valid columns read xr[first + j·stride], all inside the row.
                    let first = lo * p.stride_w + kx * p.dil_w - p.pad_left;
                    let dst = &mut orow[lo..hi];
                    if p.stride_w == 1 {
                        for (d, &v) in dst.iter_mut().zip(&xr[first..first + (hi - lo)]) {
                            *d += wv * v;
                        }
                    } else {
                        for (j, d) in dst.iter_mut().enumerate() {
                            *d += wv * xr[first + j * p.stride_w];
                        }
                    }
                }
            }
        }
        clamp(op, range);
    }
    Ok(())
}

/// The Neon 3×3 depthwise kernel (NHWC, multiplier 1, stride 1 or 2, dilation 1).
#[cfg(target_arch = "aarch64")]
mod neon_3x3 {
    use super::Conv2d;
    use core::arch::aarch64::*;

    /// Most input columns one block reads per row: stride 1, 8 outputs (stride 2 stops at 4).
    const MAX_COLS: usize = 10;

    /// `cols$N(p, step)`: `$N` vectors loaded `step` bytes apart from `*p` with post-indexed
    /// `ld1` (one instruction each, no address arithmetic); `*p` ends past the last one.
    macro_rules! cols {
        ($name:ident, $n:literal, $($x:ident),+) => {
            /// # Safety
            /// `*p + i·step` holds 4 readable floats for every loaded column `i`.
            #[inline(always)]
            unsafe fn $name(p: &mut *const f32, step: usize) -> [float32x4_t; $n] {
                $(let $x: float32x4_t;)+
                // SAFETY: loads only the columns the caller vouches for and advances `p`
                // past them; no stack, flags preserved.
                unsafe {
                    core::arch::asm!(
                        $(concat!("ld1 {{{", stringify!($x), ":v}.4s}}, [{p}], {step}"),)+
                        p = inout(reg) *p,
                        step = in(reg) step,
                        $($x = out(vreg) $x,)+
                        options(nostack, readonly, preserves_flags),
                    );
                }
                [$($x),+]
            }
        };
    }
    cols!(cols3, 3, x0, x1, x2);
    cols!(cols4, 4, x0, x1, x2, x3);
    cols!(cols5, 5, x0, x1, x2, x3, x4);
    cols!(cols6, 6, x0, x1, x2, x3, x4, x5);
    cols!(cols9, 9, x0, x1, x2, x3, x4, x5, x6, x7, x8);
    cols!(cols10, 10, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9);

    /// `N` neighbouring outputs (4 channels each) from the `R` valid input rows, every column
    /// tap inside the input: output `j` reads columns `S·j .. S·j + 3` of each row (`rows[r]`
    /// points at the block's first column, `cb[j]` = byte offset of column `j`, input and
    /// output columns alike), filter row `wr[r]`. Advances the row pointers by `S·N` input
    /// columns and `o` by `N` output columns.
    ///
    /// # Safety
    /// The `R` rows hold `S·(N − 1) + 3` readable columns (4 floats each) from the pointers, and
    /// `o` has `N` writable columns; Neon available (AArch64 baseline).
    #[inline(always)]
    unsafe fn block<const R: usize, const N: usize, const S: usize>(
        rows: &mut [*const f32; R],
        wr: &[[float32x4_t; 3]; R],
        cb: &[usize; MAX_COLS + 1],
        bv: float32x4_t,
        o: &mut *mut f32,
    ) {
        // SAFETY: the caller's contract covers every load and store below.
        unsafe {
            let step = cb[1]; // bytes between neighbouring columns
            let ncols = S * (N - 1) + 3;
            let mut a = [bv; N];
            for (q, w) in rows.iter_mut().zip(wr) {
                // Post-indexed loads of the block's columns, then back to the next block's
                // first column (S·N columns on).
                let mut xs = [vdupq_n_f32(0.0); MAX_COLS];
                let mut p = *q;
                match ncols {
                    3 => xs[..3].copy_from_slice(&cols3(&mut p, step)),
                    4 => xs[..4].copy_from_slice(&cols4(&mut p, step)),
                    5 => xs[..5].copy_from_slice(&cols5(&mut p, step)),
                    6 => xs[..6].copy_from_slice(&cols6(&mut p, step)),
                    9 => xs[..9].copy_from_slice(&cols9(&mut p, step)),
                    10 => xs[..10].copy_from_slice(&cols10(&mut p, step)),
                    _ => {
                        for x in xs.iter_mut().take(ncols) {
                            *x = vld1q_f32(p);
                            p = p.byte_add(step);
                        }
                    }
                }
                *q = p.byte_sub(cb[ncols - S * N]);
                for (j, aj) in a.iter_mut().enumerate() {
                    *aj = vfmaq_f32(*aj, xs[S * j], w[0]);
                    *aj = vfmaq_f32(*aj, xs[S * j + 1], w[1]);
                    *aj = vfmaq_f32(*aj, xs[S * j + 2], w[2]);
                }
            }
            for &aj in a.iter() {
                // SAFETY: `*o` has a writable output column (caller); post-indexed store.
                core::arch::asm!(
                    "st1 {{{v:v}.4s}}, [{o}], {step}",
                    v = in(vreg) aj,
                    o = inout(reg) *o,
                    step = in(reg) step,
                    options(nostack, preserves_flags),
                );
            }
        }
    }

    /// The interior columns `lo .. hi` of one output row from `R` valid rows, in blocks of 8,
    /// 4, 2 and 1 outputs.
    ///
    /// # Safety
    /// As [`block`] for every block: the rows hold the columns of outputs `lo .. hi`.
    #[inline(always)]
    unsafe fn interior<const R: usize, const S: usize>(
        mut rows: [*const f32; R],
        wr: &[[float32x4_t; 3]; R],
        cb: &[usize; MAX_COLS + 1],
        bv: float32x4_t,
        mut o: *mut f32,
        mut n: usize,
    ) {
        // SAFETY: blocks cover outputs lo .. hi exactly (the caller's contract).
        unsafe {
            // Stride 2 stops at 4 outputs (nine input columns per row in registers).
            while S == 1 && n >= 8 {
                block::<R, 8, S>(&mut rows, wr, cb, bv, &mut o);
                n -= 8;
            }
            while S == 2 && n >= 4 {
                block::<R, 4, S>(&mut rows, wr, cb, bv, &mut o);
                n -= 4;
            }
            if n >= 4 {
                block::<R, 4, S>(&mut rows, wr, cb, bv, &mut o);
                n -= 4;
            }
            if n >= 2 {
                block::<R, 2, S>(&mut rows, wr, cb, bv, &mut o);
                n -= 2;
            }
            if n == 1 {
                block::<R, 1, S>(&mut rows, wr, cb, bv, &mut o);
            }
        }
    }

    /// Computes output row `oy` of image `b` (`orow`: `[OW, OC]`, `OC = C`) when the geometry
    /// is this kernel's (3×3, dilation 1, stride 1 or 2) and returns `true`; `false` (nothing
    /// written) otherwise. Channels go 4 at a time with the filter vectors in registers: the
    /// interior columns (all three column taps inside the input) in blocks of neighbouring
    /// outputs that share their input columns, using only the input rows that exist; the border
    /// columns tap by tap; the channel tail `C mod 4` in scalar code.
    pub(super) fn row(
        p: &Conv2d,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        orow: &mut [f32],
        b: usize,
        oy: usize,
    ) -> bool {
        let s = p.stride_w;
        if p.kh != 3 || p.kw != 3 || p.dil_h != 1 || p.dil_w != 1 || !(s == 1 || s == 2) {
            return false;
        }
        let c = p.in_c;
        let (ow, img) = (p.out_w, b * p.in_h * p.in_w);
        if x.len() < (img + p.in_h * p.in_w) * c || w.len() < 9 * c || orow.len() < ow * c {
            return false;
        }
        if bias.is_some_and(|bb| bb.len() < c) {
            return false;
        }
        // Valid kernel rows and their input rows.
        let mut vr = [(0usize, 0usize); 3];
        let mut nr = 0;
        for ky in 0..3 {
            if let Some(iy) = p.in_row(oy, ky) {
                vr[nr] = (ky, iy);
                nr += 1;
            }
        }
        let (lo, _) = p.valid_cols(0);
        let (_, hi) = p.valid_cols(2);
        let hi = hi.max(lo);
        // Offset of input pixel (iy, ix) of this image, in floats.
        let at = |iy: usize, ix: usize| ((img + iy * p.in_w) + ix) * c;
        let cv = c - c % 4;
        let cb: [usize; MAX_COLS + 1] = core::array::from_fn(|j| j * c * 4);
        for c0 in (0..cv).step_by(4) {
            // SAFETY: (whole block) input reads are at `at(iy, ix) + c0 .. + 4` with iy < H
            // (`in_row`) and ix < W (`in_col` for border columns; interior outputs lo .. hi read
            // columns up to s·(hi − 1) + 2 − pad_left < W by `valid_cols`), so below the image's
            // end ≤ x.len() (checked); filter reads w[t·C + c0 .. + 4], t < 9 (w.len() ≥ 9C);
            // bias reads c0 .. c0 + 4 ≤ C; output writes orow[ox·C + c0 .. + 4], ox < OW
            // (orow.len() ≥ OW·C). Neon is in the AArch64 baseline.
            unsafe {
                let wp = w.as_ptr().add(c0);
                let wt: [float32x4_t; 9] = core::array::from_fn(|t| vld1q_f32(wp.add(t * c)));
                let bv = match bias {
                    Some(bb) => vld1q_f32(bb.as_ptr().add(c0)),
                    None => vdupq_n_f32(0.0),
                };
                let xb = x.as_ptr().add(c0);
                let ob = orow.as_mut_ptr().add(c0);
                // Border columns, tap by tap.
                for ox in (0..lo).chain(hi..ow) {
                    let mut a = bv;
                    for &(ky, iy) in &vr[..nr] {
                        for kx in 0..3 {
                            if let Some(ix) = p.in_col(ox, kx) {
                                a = vfmaq_f32(a, vld1q_f32(xb.add(at(iy, ix))), wt[3 * ky + kx]);
                            }
                        }
                    }
                    vst1q_f32(ob.add(ox * c), a);
                }
                if lo >= hi {
                    continue;
                }
                let col0 = lo * s - p.pad_left;
                let rp = |k: usize| xb.add(at(vr[k].1, col0));
                let wrow = |k: usize| [wt[3 * vr[k].0], wt[3 * vr[k].0 + 1], wt[3 * vr[k].0 + 2]];
                let o = ob.add(lo * c);
                let n = hi - lo;
                match (nr, s) {
                    (3, 1) => interior::<3, 1>(
                        [rp(0), rp(1), rp(2)],
                        &[wrow(0), wrow(1), wrow(2)],
                        &cb,
                        bv,
                        o,
                        n,
                    ),
                    (3, _) => interior::<3, 2>(
                        [rp(0), rp(1), rp(2)],
                        &[wrow(0), wrow(1), wrow(2)],
                        &cb,
                        bv,
                        o,
                        n,
                    ),
                    (2, 1) => interior::<2, 1>([rp(0), rp(1)], &[wrow(0), wrow(1)], &cb, bv, o, n),
                    (2, _) => interior::<2, 2>([rp(0), rp(1)], &[wrow(0), wrow(1)], &cb, bv, o, n),
                    (1, 1) => interior::<1, 1>([rp(0)], &[wrow(0)], &cb, bv, o, n),
                    (1, _) => interior::<1, 2>([rp(0)], &[wrow(0)], &cb, bv, o, n),
                    _ => (0..n).for_each(|j| vst1q_f32(o.add(j * c), bv)),
                }
            }
        }
        // Channel tail, every column.
        for ox in 0..ow {
            for ch in cv..c {
                let mut a = bias.map_or(0.0, |bb| bb[ch]);
                for &(ky, iy) in &vr[..nr] {
                    for kx in 0..3 {
                        if let Some(ix) = p.in_col(ox, kx) {
                            a += x[at(iy, ix) + ch] * w[(3 * ky + kx) * c + ch];
                        }
                    }
                }
                orow[ox * c + ch] = a;
            }
        }
        true
    }
}
