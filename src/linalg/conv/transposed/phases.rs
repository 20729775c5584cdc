//! A transposed convolution as `stride_h · stride_w` ordinary convolutions ("sub-pixel"
//! decomposition), NHWC.
//!
//! The output pixels whose coordinates agree modulo the stride (one *phase*: rows
//! `fy, fy + sh, …` and columns `fx, fx + sw, …`) are reached by the same kernel taps, and the
//! input pixel a tap reads advances by one as the phase's output advances by one stride. So
//! each phase is a stride-1 convolution of the input with the phase's taps in reverse order
//! (their dilation `dil / gcd(dil, stride)` in the input), written densely into scratch by
//! [`nhwc::conv2d`] (implicit GEMM on the micro-kernels, bias and clamp fused) and then copied
//! into the output pixels of the phase, `sw·OC` floats apart. Nothing is added twice: the
//! taps' sum happens in the micro-kernel's registers, where the per-tap path
//! ([`super`]) scatters and adds every tap's products into the output.
//!
//! In one dimension (rows; columns alike), with `s` the stride, `d` the dilation, `p` the
//! leading padding: output `o` gets input `i` through tap `k` when `o + p = i·s + k·d`. For
//! the phase whose first output is `f`, `r = (f + p) mod s` and `t₀ = (f + p) div s`; its
//! taps are `k₀, k₀ + L, …` (`n` of them, `L = s / gcd(d, s)`), the `k` with `k·d ≡ r`
//! (mod `s`), and the `j`-th output of the phase reads input `t₀ + j − e₀ − i·D` through tap
//! `k₀ + i·L` (`e₀ = (k₀·d − r) / s`, `D = d / gcd(d, s)`). Reversing the taps
//! (`i = n − 1 − a`) gives the ordinary convolution `j + a·D − P` with
//! `P = e₀ + (n − 1)·D − t₀`. A negative `P` (padding that crops more than the kernel adds)
//! is the same convolution started `−P` outputs later: rows skip input rows, columns compute
//! `−P` leading outputs that the copy drops. A phase with no tap is the bias alone.

use super::geometry::{ConvTranspose2d, RELAYOUT_F32, TAP_F32};
use crate::error::KernelError;
use crate::linalg::conv::{clamp, nhwc, shape_err, Conv2d};
use crate::linalg::vecmath;

/// One dimension of one phase (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Phase {
    /// First output coordinate of the phase, and how many outputs it has.
    first: usize,
    count: usize,
    /// Kernel taps of the phase: `tap0, tap0 + step, …`, `taps` of them (0: none).
    tap0: usize,
    step: usize,
    taps: usize,
    /// Dilation of the phase's convolution over the input.
    dil: usize,
    /// Its leading padding `P` when `P ≥ 0` (`pad`), or `−P` (`lead`, outputs to skip).
    pad: usize,
    lead: usize,
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Phase {
    /// The phase whose first output is `first` (`< out`), for a dimension of `out` outputs,
    /// kernel `k`, stride `s`, dilation `d`, leading padding `p` (`s`, `d`, `k` non-zero and
    /// the sums below in range: a checked geometry).
    fn new(first: usize, out: usize, k: usize, s: usize, d: usize, p: usize) -> Phase {
        let (r, t0) = ((first + p) % s, (first + p) / s);
        let g = gcd(d, s);
        let (step, dil) = (s / g, d / g);
        // `tap·d mod s` repeats with period `step`, so the first tap (if any) is below it.
        let tap0 = (0..step.min(k)).find(|&t| (t * d) % s == r);
        let (tap0, taps, e0) = match tap0 {
            Some(t) => (t, (k - t).div_ceil(step), (t * d - r) / s),
            None => (0, 0, 0),
        };
        let reach = e0 + taps.saturating_sub(1) * dil;
        Phase {
            first,
            count: (out - first).div_ceil(s),
            tap0,
            step,
            taps,
            dil,
            pad: reach.saturating_sub(t0),
            lead: t0.saturating_sub(reach),
        }
    }

    /// Kernel index of the phase's convolution tap `a` (taps reversed).
    fn tap(&self, a: usize) -> usize {
        self.tap0 + (self.taps - 1 - a) * self.step
    }
}

/// The phases of `p`: `(rows, columns)` for every phase with at least one output.
fn phases(p: &ConvTranspose2d) -> impl Iterator<Item = (Phase, Phase)> + '_ {
    let rows = (0..p.stride_h.min(p.out_h))
        .map(|f| Phase::new(f, p.out_h, p.kh, p.stride_h, p.dil_h, p.pad_top));
    rows.flat_map(move |ph| {
        (0..p.stride_w.min(p.out_w)).map(move |f| {
            (
                ph,
                Phase::new(f, p.out_w, p.kw, p.stride_w, p.dil_w, p.pad_left),
            )
        })
    })
}

/// Whether the phases' convolutions treat the groups as one dense convolution whose filter
/// is zero across groups: when a group has fewer output channels than the narrowest
/// micro-kernel tile (8 columns), separate products would leave most of each tile empty and
/// gather every group's channels apart, while a few groups only multiply the work by their
/// count.
fn dense(p: &ConvTranspose2d) -> bool {
    (2..=4).contains(&p.groups) && p.ocg() < 8
}

/// Input channels of one filter run in the phases' convolutions.
fn filter_c(p: &ConvTranspose2d) -> usize {
    if dense(p) {
        p.in_c
    } else {
        p.icg()
    }
}

/// Output rows of a phase computed per [`nhwc::conv2d`] call (at most [`TAP_F32`] floats, at
/// least one row).
fn chunk_rows(ph: &Phase, width: usize, oc: usize) -> usize {
    (TAP_F32 / width.saturating_mul(oc).max(1)).clamp(1, ph.count.max(1))
}

/// The ordinary convolution computing phase rows `j0 .. j0 + rows` (all `pw.count + pw.lead`
/// columns), and the input rows it skips; `None` when those rows read no input row.
fn sub_conv(
    p: &ConvTranspose2d,
    ph: &Phase,
    pw: &Phase,
    j0: usize,
    rows: usize,
) -> Option<(Conv2d, usize)> {
    // Phase row j reads input row j + lead + a·D − pad.
    let base = j0 + ph.lead;
    let (skip, pad_top) = if base >= ph.pad {
        (base - ph.pad, 0)
    } else {
        (0, ph.pad - base)
    };
    let in_h = p.in_h.checked_sub(skip).filter(|&h| h > 0)?;
    Some((
        Conv2d {
            batch: 1,
            in_h,
            in_w: p.in_w,
            in_c: p.in_c,
            out_h: rows,
            out_w: pw.count + pw.lead,
            out_c: p.out_c,
            kh: ph.taps,
            kw: pw.taps,
            stride_h: 1,
            stride_w: 1,
            dil_h: ph.dil,
            dil_w: pw.dil,
            pad_top,
            pad_left: pw.pad,
            groups: if dense(p) { 1 } else { p.groups },
        },
        skip,
    ))
}

/// Scratch floats [`conv_transpose2d_nhwc`] needs, or `None` when a phase's re-laid filter
/// is larger than [`RELAYOUT_F32`] (the per-tap path is used then).
pub(crate) fn scratch_f32_nhwc(p: &ConvTranspose2d) -> Option<usize> {
    p.check().ok()?;
    let mut most = 0usize;
    for (ph, pw) in phases(p) {
        if ph.taps == 0 || pw.taps == 0 {
            continue;
        }
        let filter = p
            .out_c
            .checked_mul(ph.taps * pw.taps)?
            .checked_mul(filter_c(p))?;
        if filter > RELAYOUT_F32 {
            return None;
        }
        let width = pw.count + pw.lead;
        let rows = chunk_rows(&ph, width, p.out_c);
        let chunk = rows.checked_mul(width)?.checked_mul(p.out_c)?;
        // The largest per-call need: a full chunk of rows, padded (not read in place).
        let conv = nhwc::scratch_f32(&Conv2d {
            batch: 1,
            in_h: p.in_h,
            in_w: p.in_w,
            in_c: p.in_c,
            out_h: rows,
            out_w: width,
            out_c: p.out_c,
            kh: ph.taps,
            kw: pw.taps,
            stride_h: 1,
            stride_w: 1,
            dil_h: ph.dil,
            dil_w: pw.dil,
            pad_top: 1,
            pad_left: pw.pad,
            groups: if dense(p) { 1 } else { p.groups },
        });
        most = most.max(filter.checked_add(chunk)?.checked_add(conv)?);
    }
    Some(most)
}

/// `out = clamp(conv_transpose(x, w) + bias)` by phases; same operands as
/// [`super::conv_transpose2d_nhwc`], which checked them and sized `scratch` by
/// [`scratch_f32_nhwc`] (`Some`).
pub(crate) fn conv_transpose2d_nhwc(
    p: &ConvTranspose2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (cg, oc) = (p.icg(), p.out_c);
    let (ipix, opix) = (p.in_h * p.in_w * p.in_c, p.out_h * p.out_w * oc);
    for (ph, pw) in phases(p) {
        if ph.taps == 0 || pw.taps == 0 {
            bias_only(p, &ph, &pw, bias, out, range);
            continue;
        }
        let width = pw.count + pw.lead;
        let rows = chunk_rows(&ph, width, oc);
        // The phase's filter, [OC, n_y, n_x, Cg] (or C), taps reversed; then its output rows.
        let fc = filter_c(p);
        let (flen, clen) = (oc * ph.taps * pw.taps * fc, rows * width * oc);
        if scratch.len() < flen + clen {
            return Err(shape_err("transposed conv: scratch smaller than its bound"));
        }
        let (filter, rest) = scratch.split_at_mut(flen);
        let (chunk, conv_scratch) = rest.split_at_mut(clen);
        let mut runs = filter.chunks_exact_mut(fc);
        for o in 0..oc {
            // Dense: the group's channels of the run, zeros for the other groups'.
            let at = if fc == cg { 0 } else { o / p.ocg() * cg };
            for a in 0..ph.taps {
                for b in 0..pw.taps {
                    let s = ((o * p.kh + ph.tap(a)) * p.kw + pw.tap(b)) * cg;
                    if let Some(d) = runs.next() {
                        d.fill(0.0);
                        d[at..at + cg].copy_from_slice(&w[s..s + cg]);
                    }
                }
            }
        }
        // Stride 1 in both dimensions with nothing to drop: the phase is the whole output.
        let direct = p.stride_h == 1 && p.stride_w == 1 && pw.lead == 0;
        for b in 0..p.batch {
            let xb = &x[b * ipix..(b + 1) * ipix];
            let out_b = &mut out[b * opix..(b + 1) * opix];
            for j0 in (0..ph.count).step_by(rows) {
                let m = rows.min(ph.count - j0);
                let Some((c, skip)) = sub_conv(p, &ph, &pw, j0, m) else {
                    let rows_ph = Phase {
                        first: ph.first + j0 * p.stride_h,
                        count: m,
                        ..ph
                    };
                    bias_only(p, &rows_ph, &pw, bias, out_b, range);
                    continue;
                };
                let xs = &xb[skip * p.in_w * p.in_c..];
                if direct {
                    let dst = &mut out_b[(ph.first + j0) * width * oc..][..m * width * oc];
                    nhwc::conv2d(&c, xs, filter, bias, dst, range, conv_scratch)?;
                    continue;
                }
                let dense = &mut chunk[..m * width * oc];
                nhwc::conv2d(&c, xs, filter, bias, dense, range, conv_scratch)?;
                for jl in 0..m {
                    let oy = ph.first + (j0 + jl) * p.stride_h;
                    let src = &dense[(jl * width + pw.lead) * oc..(jl + 1) * width * oc];
                    let dst = &mut out_b[(oy * p.out_w + pw.first) * oc..(oy + 1) * p.out_w * oc];
                    if p.stride_w == 1 {
                        vecmath::copy_rows(src, 0, dst, 0, pw.count * oc, 1)?;
                    } else {
                        vecmath::copy_rows(src, oc, dst, p.stride_w * oc, oc, pw.count)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The pixels of phase `(ph, pw)` of every image that no tap reaches: `clamp(bias)` (or
/// `clamp(0)`). For one image when `out` holds one.
fn bias_only(
    p: &ConvTranspose2d,
    ph: &Phase,
    pw: &Phase,
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
) {
    let oc = p.out_c;
    for img in out.chunks_exact_mut(p.out_h * p.out_w * oc) {
        for j in 0..ph.count {
            let oy = ph.first + j * p.stride_h;
            for i in 0..pw.count {
                let ox = pw.first + i * p.stride_w;
                let px = &mut img[(oy * p.out_w + ox) * oc..][..oc];
                match bias {
                    Some(bv) => px.copy_from_slice(&bv[..oc]),
                    None => px.fill(0.0),
                }
                clamp(px, range);
            }
        }
    }
}
