//! Statically quantized int8 (XNNPACK's QS8): per-tensor int8 activations (one scale and zero
//! point per value, fixed at export), per-channel int8 weights (QC8W, symmetric), int32
//! biases (scale `input_scale · weight_scale[c]`), and XNNPACK's "fp32" requantization of the
//! int32 sums into the next int8 value:
//!
//! `q_out = clamp(round_even(float(acc) · s[c]) + zp_out, q_min, q_max)`, with
//! `acc = bias[c] + Σ (q_in - zp_in) · w[c]` (exact, `i32`) and
//! `s[c] = (input_scale · weight_scale[c]) / output_scale` in `f32`, in that order.
//!
//! Converts: fp32 → QS8 `clamp(round_even(x · (1 / scale)), -128 - zp, 127 - zp) + zp`;
//! QS8 → fp32 `(q - zp) · scale`. A fused activation's float bounds become int8 bounds as
//! `round_even(clamp(bound / scale + zp, -128, 127))`.
//!
//! Every function here is the scalar definition: the same integers as XNNPACK's
//! microkernels, which only reorder exact integer sums.

use super::dynamic::round_ties_even;
use super::gemm::{tile_sums, QuantKernel, MR, NR};
use super::weights::QWeights;
use crate::linalg::conv::Conv2d;

/// Per-tensor quantization of a QS8 value: `x ≈ (q - zero_point) · scale`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Qs8 {
    pub scale: f32,
    pub zero_point: i32,
}

impl Qs8 {
    /// The int8 bound of a float clamp bound (`±inf` gives -128 / 127).
    pub fn bound(&self, v: f32) -> i8 {
        let q = (v / self.scale + self.zero_point as f32).clamp(-128.0, 127.0);
        round_ties_even(q) as i8
    }

    /// The int8 range of a node's output clamp (`None`: the whole int8 range).
    pub fn range(&self, clamp: Option<(f32, f32)>) -> (i8, i8) {
        match clamp {
            Some((lo, hi)) => (self.bound(lo), self.bound(hi)),
            None => (-128, 127),
        }
    }
}

/// fp32 → QS8.
pub fn quantize(x: &[f32], q: Qs8, out: &mut [i8]) {
    let inv = 1.0 / q.scale;
    let (lo, hi) = ((-128 - q.zero_point) as f32, (127 - q.zero_point) as f32);
    for (o, &v) in out.iter_mut().zip(x) {
        let r = round_ties_even((v * inv).max(lo).min(hi));
        *o = (r as i32 + q.zero_point) as i8;
    }
}

/// QS8 → fp32.
pub fn dequantize(x: &[i8], q: Qs8, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v as i32 - q.zero_point) as f32 * q.scale;
    }
}

/// The requantization scale of channel `j`: `(input_scale · weight_scale[j]) /
/// output_scale` (`weight_scales` little-endian fp32).
#[inline]
fn requant_scale(input: Qs8, weight_scales: &[u8], j: usize, output: Qs8) -> f32 {
    let s = &weight_scales[4 * j..4 * j + 4];
    input.scale * f32::from_le_bytes([s[0], s[1], s[2], s[3]]) / output.scale
}

/// One output: the requantized `acc` for channel scale `s`.
#[inline]
fn requantize(acc: i32, s: f32, zp: i32, (lo, hi): (i8, i8)) -> i8 {
    let v = (acc as f32 * s)
        .max((lo as i32 - zp) as f32)
        .min((hi as i32 - zp) as f32);
    (round_ties_even(v) as i32 + zp) as i8
}

/// Fully connected: `out[i, j]` (`[m, n]`, quantization `qo`, float clamp `clamp`) from rows
/// `a` (`[m, k]`, quantization `qa`), weights `w(j, t)` (channel `j`, input `t`) with fp32
/// scales `w_scales` (`n`, little-endian bytes), int32 `bias` (`n`).
#[allow(clippy::too_many_arguments)]
pub fn fully_connected(
    a: &[i8],
    qa: Qs8,
    m: usize,
    k: usize,
    w: &dyn Fn(usize, usize) -> i32,
    n: usize,
    bias: Option<&[i32]>,
    w_scales: &[u8],
    qo: Qs8,
    clamp: Option<(f32, f32)>,
    out: &mut [i8],
) {
    let range = qo.range(clamp);
    for i in 0..m {
        let row = &a[i * k..(i + 1) * k];
        for j in 0..n {
            let mut acc = bias.map_or(0, |b| b[j]);
            for (t, &x) in row.iter().enumerate() {
                acc = acc.wrapping_add((x as i32 - qa.zero_point).wrapping_mul(w(j, t)));
            }
            let s = requant_scale(qa, w_scales, j, qo);
            out[i * n + j] = requantize(acc, s, qo.zero_point, range);
        }
    }
}

/// Output channels per block of [`Channels`].
const CH: usize = 64;

/// The per-channel constants of up to [`CH`] consecutive output channels of a row-major
/// int8 filter: `Σ w`, the requantization scale and the bias.
struct Channels {
    j0: usize,
    count: usize,
    wsum: [i32; CH],
    scale: [f32; CH],
    bias: [i32; CH],
}

impl Channels {
    #[allow(clippy::too_many_arguments)]
    fn new(
        j0: usize,
        n: usize,
        w: &[u8],
        k: usize,
        qa: Qs8,
        ws: &[u8],
        qo: Qs8,
        bias: Option<&[i32]>,
    ) -> Self {
        let count = (n - j0).min(CH);
        let mut c = Channels {
            j0,
            count,
            wsum: [0; CH],
            scale: [0.0; CH],
            bias: [0; CH],
        };
        for jj in 0..count {
            let j = j0 + jj;
            c.wsum[jj] = w[j * k..(j + 1) * k].iter().map(|&b| b as i8 as i32).sum();
            c.scale[jj] = requant_scale(qa, ws, j, qo);
            c.bias[jj] = bias.map_or(0, |b| b[j]);
        }
        c
    }

    /// The last `k % 16` weights of each of these channels, zero-padded to 16, channel after
    /// channel into `tails` (16·[`CH`] bytes); nothing when `k % 16 == 0`.
    fn tails(&self, w: &[u8], k: usize, tails: &mut [u8; 16 * CH]) {
        let run = k / 16 * 16;
        if run < k {
            for jj in 0..self.count {
                let j = self.j0 + jj;
                tails[16 * jj..16 * jj + k - run].copy_from_slice(&w[j * k + run..(j + 1) * k]);
            }
        }
    }

    /// Rows `a` (`[m, k]`) times these channels into `out` (rows `n` apart, column `j0`
    /// first), 4 rows × 4 channels at a time through [`tile_sums`].
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &self,
        kernel: QuantKernel,
        a: &[i8],
        qa: Qs8,
        m: usize,
        k: usize,
        qw: &QWeights<'_>,
        tails: &[u8],
        n: usize,
        qo: Qs8,
        range: (i8, i8),
        out: &mut [i8],
    ) {
        let last = self.j0 + self.count - 1;
        // The depth's rest (`k % 16`) goes through a 16-deep tile too: the channels' last
        // weights (`tails`, see [`Channels::tails`]) and the 4 rows' last inputs, zero-padded
        // to 16.
        let run = k / 16 * 16;
        let all: [usize; MR] = core::array::from_fn(|r| r);
        let tails = QWeights::Qc8w {
            data: tails,
            scales: &[],
        };
        for c0 in (0..self.count).step_by(NR) {
            let cols: [usize; NR] = core::array::from_fn(|c| (self.j0 + c0 + c).min(last));
            let local = cols.map(|j| j - self.j0);
            for i0 in (0..m).step_by(MR) {
                let rows: [usize; MR] = core::array::from_fn(|r| (i0 + r).min(m - 1));
                let mut s = tile_sums(kernel, a, k, &rows, qw, &cols, 0, run);
                if run < k {
                    // The rows' rests, zero-padded to 16, times the channels' tails.
                    let mut at = [0i8; 16 * MR];
                    for (r, &i) in rows.iter().enumerate() {
                        at[16 * r..16 * r + k - run].copy_from_slice(&a[i * k + run..(i + 1) * k]);
                    }
                    let rest = tile_sums(kernel, &at, 16, &all, &tails, &local, 0, 16);
                    for (sr, rr) in s.iter_mut().zip(rest) {
                        for (sc, rc) in sr.iter_mut().zip(rr) {
                            *sc = sc.wrapping_add(rc);
                        }
                    }
                }
                for (r, sr) in s.iter().enumerate().take((m - i0).min(MR)) {
                    for (c, &sc) in sr.iter().enumerate().take((self.count - c0).min(NR)) {
                        let jj = c0 + c;
                        let acc = self.bias[jj]
                            .wrapping_add(sc)
                            .wrapping_sub(qa.zero_point.wrapping_mul(self.wsum[jj]));
                        out[(i0 + r) * n + self.j0 + jj] =
                            requantize(acc, self.scale[jj], qo.zero_point, range);
                    }
                }
            }
        }
    }
}

/// [`fully_connected`] over a row-major int8 filter `w` (`[n, k]` bytes), 4 rows × 4
/// channels at a time through the integer tiles of [`super::gemm`] (`SDOT` where `kernel` is
/// `NeonDot`): `bias + Σ a·w - zp·Σ w`, the same integers in another order.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_rows(
    kernel: QuantKernel,
    a: &[i8],
    qa: Qs8,
    m: usize,
    k: usize,
    w: &[u8],
    n: usize,
    bias: Option<&[i32]>,
    w_scales: &[u8],
    qo: Qs8,
    clamp: Option<(f32, f32)>,
    out: &mut [i8],
) {
    if m == 0 {
        return;
    }
    let qw = QWeights::Qc8w {
        data: w,
        scales: w_scales,
    };
    let range = qo.range(clamp);
    let mut tails = [0u8; 16 * CH];
    for j0 in (0..n).step_by(CH) {
        let c = Channels::new(j0, n, w, k, qa, w_scales, qo, bias);
        c.tails(w, k, &mut tails);
        c.rows(kernel, a, qa, m, k, &qw, &tails, n, qo, range, out);
    }
}

/// Bytes of the 4-row patch buffer [`conv2d_nhwc_rows`] keeps on the stack.
const PATCH: usize = 8192;

/// [`conv2d_nhwc`] for one group: 4 output pixels' input patches (`KH·KW·C` bytes each, taps
/// outside the input given the zero point) gathered on the stack, times the OHWI filter as
/// a row-major `[OC, KH·KW·C]` matrix through [`fully_connected_rows`]'s tiles; the same
/// integers. Falls back to [`conv2d_nhwc`] for several groups or patches over 2,048 bytes.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc_rows(
    kernel: QuantKernel,
    p: &Conv2d,
    x: &[i8],
    qx: Qs8,
    w: &[i8],
    bias: Option<&[i32]>,
    w_scales: &[u8],
    qo: Qs8,
    clamp: Option<(f32, f32)>,
    out: &mut [i8],
) {
    let k = p.kh * p.kw * p.in_c;
    if p.groups != 1 || k == 0 || MR * k > PATCH {
        return conv2d_nhwc(p, x, qx, w, bias, w_scales, qo, clamp, out);
    }
    let n = p.out_c;
    // SAFETY: i8 and u8 have the same size and alignment.
    let wb = unsafe { core::slice::from_raw_parts(w.as_ptr() as *const u8, w.len()) };
    let qw = QWeights::Qc8w {
        data: wb,
        scales: w_scales,
    };
    let range = qo.range(clamp);
    let pixels = p.batch * p.out_h * p.out_w;
    let mut patch = [0i8; PATCH];
    let mut tails = [0u8; 16 * CH];
    for j0 in (0..n).step_by(CH) {
        let c = Channels::new(j0, n, wb, k, qx, w_scales, qo, bias);
        c.tails(wb, k, &mut tails);
        for p0 in (0..pixels).step_by(MR) {
            let here = (pixels - p0).min(MR);
            for r in 0..here {
                let px = p0 + r;
                let (b, oy, ox) = (
                    px / (p.out_h * p.out_w),
                    px / p.out_w % p.out_h,
                    px % p.out_w,
                );
                let row = &mut patch[r * k..(r + 1) * k];
                for ky in 0..p.kh {
                    let iy = (oy * p.stride_h + ky * p.dil_h) as isize - p.pad_top as isize;
                    let ix0 = (ox * p.stride_w) as isize - p.pad_left as isize;
                    let taps = &mut row[ky * p.kw * p.in_c..][..p.kw * p.in_c];
                    let inside = |ix: isize| ix >= 0 && (ix as usize) < p.in_w;
                    if iy < 0 || iy as usize >= p.in_h {
                        taps.fill(qx.zero_point as i8);
                    } else if p.dil_w == 1 && inside(ix0) && inside(ix0 + p.kw as isize - 1) {
                        // The row's taps are adjacent in the input: one copy.
                        let i = ((b * p.in_h + iy as usize) * p.in_w + ix0 as usize) * p.in_c;
                        taps.copy_from_slice(&x[i..i + taps.len()]);
                    } else {
                        for (kx, dst) in taps.chunks_exact_mut(p.in_c).enumerate() {
                            let ix = ix0 + (kx * p.dil_w) as isize;
                            if inside(ix) {
                                let i =
                                    ((b * p.in_h + iy as usize) * p.in_w + ix as usize) * p.in_c;
                                dst.copy_from_slice(&x[i..i + p.in_c]);
                            } else {
                                dst.fill(qx.zero_point as i8);
                            }
                        }
                    }
                }
            }
            let o = &mut out[p0 * n..(p0 + here) * n];
            c.rows(
                kernel,
                &patch[..here * k],
                qx,
                here,
                k,
                &qw,
                &tails,
                n,
                qo,
                range,
                o,
            );
        }
    }
}

/// NHWC convolution of QS8 input `x` (quantization `qx`) with an OHWI int8 filter `w`
/// (`[OC, KH, KW, IC / groups]`, fp32 scales `w_scales`), int32 `bias`, into QS8 `out`
/// (`qo`, float clamp `clamp`): taps outside the input count as the input's zero point (they
/// add nothing).
#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc(
    p: &Conv2d,
    x: &[i8],
    qx: Qs8,
    w: &[i8],
    bias: Option<&[i32]>,
    w_scales: &[u8],
    qo: Qs8,
    clamp: Option<(f32, f32)>,
    out: &mut [i8],
) {
    let (icg, ocg) = (p.icg(), p.ocg());
    let (x_zp, range) = (qx.zero_point, qo.range(clamp));
    for b in 0..p.batch {
        for oy in 0..p.out_h {
            for ox in 0..p.out_w {
                let obase = ((b * p.out_h + oy) * p.out_w + ox) * p.out_c;
                for oc in 0..p.out_c {
                    let g = oc / ocg.max(1);
                    let mut acc = bias.map_or(0, |v| v[oc]);
                    for ky in 0..p.kh {
                        let iy = (oy * p.stride_h + ky * p.dil_h) as isize - p.pad_top as isize;
                        if iy < 0 || iy as usize >= p.in_h {
                            continue;
                        }
                        for kx in 0..p.kw {
                            let ix =
                                (ox * p.stride_w + kx * p.dil_w) as isize - p.pad_left as isize;
                            if ix < 0 || ix as usize >= p.in_w {
                                continue;
                            }
                            let ib = ((b * p.in_h + iy as usize) * p.in_w + ix as usize) * p.in_c
                                + g * icg;
                            let wb = ((oc * p.kh + ky) * p.kw + kx) * icg;
                            for c in 0..icg {
                                let d = (x[ib + c] as i32 - x_zp).wrapping_mul(w[wb + c] as i32);
                                acc = acc.wrapping_add(d);
                            }
                        }
                    }
                    let s = requant_scale(qx, w_scales, oc, qo);
                    out[obase + oc] = requantize(acc, s, qo.zero_point, range);
                }
            }
        }
    }
}

/// The geometry of an NHWC pooling: input `[n, h, w, c]`, output `[n, oh, ow, c]`, window,
/// strides, dilations and the top / left padding.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    pub input: (usize, usize, usize, usize),
    pub output: (usize, usize),
    pub window: (usize, usize),
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    pub pad: (usize, usize),
}

/// NHWC max pooling of QS8 values (same quantization in and out), clamped to `range`; taps
/// outside the input are skipped.
pub fn max_pool_nhwc(x: &[i8], p: &Pool, range: (i8, i8), out: &mut [i8]) {
    let (n, h, w, c) = p.input;
    let (oh, ow) = p.output;
    for b in 0..n {
        for y in 0..oh {
            for xo in 0..ow {
                let o = &mut out[((b * oh + y) * ow + xo) * c..][..c];
                o.fill(i8::MIN);
                for ky in 0..p.window.0 {
                    let iy = (y * p.stride.0 + ky * p.dilation.0) as isize - p.pad.0 as isize;
                    if iy < 0 || iy as usize >= h {
                        continue;
                    }
                    for kx in 0..p.window.1 {
                        let ix = (xo * p.stride.1 + kx * p.dilation.1) as isize - p.pad.1 as isize;
                        if ix < 0 || ix as usize >= w {
                            continue;
                        }
                        let i = &x[((b * h + iy as usize) * w + ix as usize) * c..][..c];
                        for (ov, &iv) in o.iter_mut().zip(i) {
                            *ov = (*ov).max(iv);
                        }
                    }
                }
                o.iter_mut().for_each(|v| *v = (*v).clamp(range.0, range.1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const Q: Qs8 = Qs8 {
        scale: 0.5,
        zero_point: -3,
    };

    #[test]
    fn clamp_bounds_round_half_to_even_and_saturate() {
        assert_eq!(Q.bound(0.0), -3);
        assert_eq!(Q.bound(0.75), -2); // -1.5 → -2
        assert_eq!(Q.bound(1.25), -0); // -0.5 → 0
        assert_eq!(Q.bound(f32::NEG_INFINITY), -128);
        assert_eq!(Q.bound(f32::INFINITY), 127);
        assert_eq!(Q.range(None), (-128, 127));
        assert_eq!(Q.range(Some((0.0, 6.0))), (-3, 9));
    }

    #[test]
    fn converts_round_half_to_even_and_saturate() {
        let x = [0.25, 0.75, -0.25, 1000.0, -1000.0, 2.0];
        let mut q = [0i8; 6];
        quantize(&x, Q, &mut q);
        // x / 0.5: 0.5 → 0, 1.5 → 2, -0.5 → 0, saturated, saturated, 4; then + zp.
        assert_eq!(q, [-3, -1, -3, 127, -128, 1]);
        let mut back = [0f32; 6];
        dequantize(&q, Q, &mut back);
        assert_eq!(back, [0.0, 1.0, 0.0, 65.0, -62.5, 2.0]);
    }

    fn scales(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|s| s.to_le_bytes()).collect()
    }

    #[test]
    fn fully_connected_requantizes_each_channel() {
        // Rows [1, 2] and [3, -1] (zero point 1), two channels, biases 5 and -2.
        let qa = Qs8 {
            scale: 1.0,
            zero_point: 1,
        };
        let qo = Qs8 {
            scale: 4.0,
            zero_point: 7,
        };
        let w = [[3, -4], [2, 1]];
        let ws = scales(&[2.0, 6.0]);
        let weight = |j: usize, t: usize| w[j][t];
        let run = |clamp| {
            let mut out = [0i8; 4];
            let (a, b) = ([1, 2, 3, -1], Some(&[5, -2][..]));
            fully_connected(&a, qa, 2, 2, &weight, 2, b, &ws, qo, clamp, &mut out);
            out
        };
        // Sums: 5 + 0·3 + 1·(-4) = 1, -2 + 0·2 + 1·1 = -1, 5 + 2·3 - 2·(-4) = 19,
        // -2 + 2·2 - 2·1 = 0; scales 1·2/4 = 0.5 and 1·6/4 = 1.5:
        // 0.5 → 0, -1.5 → -2, 9.5 → 10, 0 → 0; plus 7.
        assert_eq!(run(None), [7, 5, 17, 7]);
        // A ReLU (float 0 ↦ the zero point) raises the negative one.
        assert_eq!(run(Some((0.0, f32::INFINITY))), [7, 7, 17, 7]);
    }

    #[test]
    fn convolution_is_the_product_over_each_window_and_padding_adds_nothing() {
        let mut rng = 12345u32;
        let mut next = || {
            rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (rng >> 16) as i8
        };
        let (h, w, c, oc) = (5, 4, 3, 2);
        let qx = Qs8 {
            scale: 0.02,
            zero_point: 5,
        };
        let qo = Qs8 {
            scale: 0.7,
            zero_point: -9,
        };
        let x: Vec<i8> = (0..h * w * c).map(|_| next()).collect();
        let filt: Vec<i8> = (0..oc * 9 * c).map(|_| next()).collect();
        let ws = scales(&[0.03, 0.05]);
        let p = Conv2d {
            batch: 1,
            in_h: h,
            in_w: w,
            in_c: c,
            out_h: h,
            out_w: w,
            out_c: oc,
            kh: 3,
            kw: 3,
            stride_h: 1,
            stride_w: 1,
            dil_h: 1,
            dil_w: 1,
            pad_top: 1,
            pad_left: 1,
            groups: 1,
        };
        let mut got = vec![0i8; h * w * oc];
        conv2d_nhwc(
            &p,
            &x,
            qx,
            &filt,
            Some(&[100, -50]),
            &ws,
            qo,
            None,
            &mut got,
        );
        // Each output as a one-row product over its window, the outside taps given the
        // input's zero point.
        for oy in 0..h {
            for ox in 0..w {
                let mut row = vec![qx.zero_point as i8; 9 * c];
                for ky in 0..3 {
                    for kx in 0..3 {
                        let (iy, ix) =
                            (oy as isize + ky as isize - 1, ox as isize + kx as isize - 1);
                        if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                            let i = (iy as usize * w + ix as usize) * c;
                            row[(ky * 3 + kx) * c..][..c].copy_from_slice(&x[i..i + c]);
                        }
                    }
                }
                let weight = |j: usize, t: usize| filt[j * 9 * c + t] as i32;
                let mut want = [0i8; 2];
                fully_connected(
                    &row,
                    qx,
                    1,
                    9 * c,
                    &weight,
                    oc,
                    Some(&[100, -50]),
                    &ws,
                    qo,
                    None,
                    &mut want,
                );
                assert_eq!(&got[(oy * w + ox) * oc..][..oc], &want, "({oy}, {ox})");
            }
        }
    }

    #[test]
    fn max_pooling_skips_padding_and_clamps() {
        // 1 × 2 × 2 × 1 input, 2 × 2 window, stride 1, padding 1 on top and left: 3 × 3.
        let x = [-100i8, 20, 7, -128];
        let p = Pool {
            input: (1, 2, 2, 1),
            output: (3, 3),
            window: (2, 2),
            stride: (1, 1),
            dilation: (1, 1),
            pad: (1, 1),
        };
        let mut out = [0i8; 9];
        max_pool_nhwc(&x, &p, (-50, 10), &mut out);
        assert_eq!(out, [-50, 10, 10, 7, 10, 10, 7, 7, -50]);
    }

    /// A small deterministic generator of int8 values.
    fn bytes(seed: u32, n: usize) -> Vec<i8> {
        let mut r = seed;
        (0..n)
            .map(|_| {
                r = r.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (r >> 16) as i8
            })
            .collect()
    }

    fn kernels() -> Vec<QuantKernel> {
        let mut k = vec![QuantKernel::Portable, QuantKernel::select()];
        k.dedup();
        k
    }

    #[test]
    fn tiled_products_are_the_scalar_definition() {
        let qa = Qs8 {
            scale: 0.03,
            zero_point: -7,
        };
        let qo = Qs8 {
            scale: 0.9,
            zero_point: 11,
        };
        for &(m, k, n) in &[
            (1, 16, 1),
            (3, 48, 17),
            (17, 32, 3),
            (5, 129, 129),
            (4, 272, 8),
        ] {
            let a = bytes(m as u32, m * k);
            let w: Vec<u8> = bytes(k as u32, n * k).iter().map(|&v| v as u8).collect();
            let ws = scales(&(0..n).map(|j| 0.002 + j as f32 * 1e-4).collect::<Vec<_>>());
            let bias: Vec<i32> = (0..n as i32).map(|j| j * 37 - 500).collect();
            let clamp = Some((-3.0, 40.0));
            let mut want = vec![0i8; m * n];
            let weight = |j: usize, t: usize| w[j * k + t] as i8 as i32;
            fully_connected(
                &a,
                qa,
                m,
                k,
                &weight,
                n,
                Some(&bias),
                &ws,
                qo,
                clamp,
                &mut want,
            );
            for kern in kernels() {
                let mut got = vec![0i8; m * n];
                fully_connected_rows(
                    kern,
                    &a,
                    qa,
                    m,
                    k,
                    &w,
                    n,
                    Some(&bias),
                    &ws,
                    qo,
                    clamp,
                    &mut got,
                );
                assert_eq!(got, want, "{kern:?} {m}x{k}x{n}");
            }
        }
    }

    #[test]
    fn tiled_convolutions_are_the_scalar_definition() {
        let qx = Qs8 {
            scale: 0.05,
            zero_point: 3,
        };
        let qo = Qs8 {
            scale: 0.4,
            zero_point: -20,
        };
        // (h, w, c, oc, k, stride, pad): a 3-channel stem (depth 27), odd sizes, stride 2.
        for &(h, w, c, oc, kk, st, pad) in &[
            (16, 16, 3, 8, 3, 1, 1),
            (9, 7, 5, 17, 3, 2, 1),
            (5, 5, 16, 3, 1, 1, 0),
            (6, 4, 2, 65, 5, 2, 2),
        ] {
            let out_h = (h + 2 * pad - kk) / st + 1;
            let out_w = (w + 2 * pad - kk) / st + 1;
            let p = Conv2d {
                batch: 2,
                in_h: h,
                in_w: w,
                in_c: c,
                out_h,
                out_w,
                out_c: oc,
                kh: kk,
                kw: kk,
                stride_h: st,
                stride_w: st,
                dil_h: 1,
                dil_w: 1,
                pad_top: pad,
                pad_left: pad,
                groups: 1,
            };
            let x = bytes(7, 2 * h * w * c);
            let filt = bytes(9, oc * kk * kk * c);
            let ws = scales(&(0..oc).map(|j| 0.01 + j as f32 * 1e-3).collect::<Vec<_>>());
            let bias: Vec<i32> = (0..oc as i32).map(|j| 100 - j * 13).collect();
            let mut want = vec![0i8; 2 * out_h * out_w * oc];
            conv2d_nhwc(
                &p,
                &x,
                qx,
                &filt,
                Some(&bias),
                &ws,
                qo,
                Some((0.0, 6.0)),
                &mut want,
            );
            for kern in kernels() {
                let mut got = vec![0i8; want.len()];
                let b = Some(bias.as_slice());
                conv2d_nhwc_rows(
                    kern,
                    &p,
                    &x,
                    qx,
                    &filt,
                    b,
                    &ws,
                    qo,
                    Some((0.0, 6.0)),
                    &mut got,
                );
                assert_eq!(
                    got, want,
                    "{kern:?} {h}x{w}x{c} -> {oc}, k {kk}, stride {st}"
                );
            }
        }
    }
}
