//! Transposed convolutions against a scalar reference (f64 sums over the definition), both
//! layouts, on random shapes: odd channel counts, 1×N and N×1 kernels, stride above the kernel,
//! padding that crops more than the kernel adds, output padding, dilation, groups, batch > 1,
//! bias and clamp, chunks of input pixels (an image larger than one chunk).

use super::transposed::{
    conv_transpose2d_nchw, conv_transpose2d_nhwc, out_len, scratch_f32_nchw, scratch_f32_nhwc,
    ConvTranspose2d, TAP_F32,
};
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

/// A random geometry (`None` when the output would be empty).
fn geometry(rng: &mut Rng) -> Option<ConvTranspose2d> {
    let pick = |rng: &mut Rng, v: &[usize]| v[rng.below(v.len() as u64) as usize];
    let kh = pick(rng, &[1, 1, 2, 3, 4, 5]);
    let kw = pick(rng, &[1, 2, 3, 4, 7]);
    let (sh, sw) = (pick(rng, &[1, 1, 2, 3, 4]), pick(rng, &[1, 2, 2, 5]));
    let (dh, dw) = (pick(rng, &[1, 1, 1, 2]), pick(rng, &[1, 1, 3]));
    let g = pick(rng, &[1, 1, 1, 2, 3]);
    let in_c = g * pick(rng, &[1, 2, 3, 5, 16]);
    let out_c = g * pick(rng, &[1, 3, 8, 13, 17]);
    let (in_h, in_w) = (1 + rng.below(9) as usize, 1 + rng.below(11) as usize);
    let (pt, pb) = (rng.below(kh as u64 + 2) as usize, rng.below(3) as usize);
    let (pl, pr) = (rng.below(kw as u64 + 2) as usize, rng.below(3) as usize);
    let (ah, aw) = (rng.below(sh as u64) as usize, rng.below(sw as u64) as usize);
    Some(ConvTranspose2d {
        batch: 1 + rng.below(2) as usize,
        in_h,
        in_w,
        in_c,
        out_h: out_len(in_h, kh, sh, dh, pt + pb, ah)?,
        out_w: out_len(in_w, kw, sw, dw, pl + pr, aw)?,
        out_c,
        kh,
        kw,
        stride_h: sh,
        stride_w: sw,
        dil_h: dh,
        dil_w: dw,
        pad_top: pt,
        pad_left: pl,
        groups: g,
    })
}

/// Scalar reference over the definition, NCHW with ATen's `[C, OC/groups, KH, KW]` filter.
fn reference(p: &ConvTranspose2d, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let (cg, ocg) = (p.icg(), p.ocg());
    let mut acc = vec![0.0f64; p.batch * p.out_c * p.out_h * p.out_w];
    for b in 0..p.batch {
        for ci in 0..p.in_c {
            let (g, i) = (ci / cg, ci % cg);
            for iy in 0..p.in_h {
                for ix in 0..p.in_w {
                    let xv = x[((b * p.in_c + ci) * p.in_h + iy) * p.in_w + ix] as f64;
                    for o in 0..ocg {
                        for ky in 0..p.kh {
                            for kx in 0..p.kw {
                                let oy =
                                    (iy * p.stride_h + ky * p.dil_h) as isize - p.pad_top as isize;
                                let ox =
                                    (ix * p.stride_w + kx * p.dil_w) as isize - p.pad_left as isize;
                                if oy < 0
                                    || ox < 0
                                    || oy as usize >= p.out_h
                                    || ox as usize >= p.out_w
                                {
                                    continue;
                                }
                                let wv = w[((g * cg + i) * ocg + o) * p.kh * p.kw + ky * p.kw + kx];
                                let oc = g * ocg + o;
                                acc[((b * p.out_c + oc) * p.out_h + oy as usize) * p.out_w
                                    + ox as usize] += xv * wv as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    let plane = p.out_h * p.out_w;
    acc.iter()
        .enumerate()
        .map(|(j, &v)| (v + bias.map_or(0.0, |bv| bv[j / plane % p.out_c] as f64)) as f32)
        .collect()
}

/// XNNPACK's `[OC, KH, KW, C/groups]` filter from ATen's `[C, OC/groups, KH, KW]`.
fn ohwi(p: &ConvTranspose2d, w: &[f32]) -> Vec<f32> {
    let (cg, ocg, taps) = (p.icg(), p.ocg(), p.kh * p.kw);
    let mut v = vec![0.0; w.len()];
    for g in 0..p.groups {
        for i in 0..cg {
            for o in 0..ocg {
                for t in 0..taps {
                    v[((g * ocg + o) * taps + t) * cg + i] = w[((g * cg + i) * ocg + o) * taps + t];
                }
            }
        }
    }
    v
}

/// NHWC data from NCHW data of `[n, c, h, w]`.
fn to_nhwc(x: &[f32], n: usize, c: usize, hw: usize) -> Vec<f32> {
    let mut v = vec![0.0; x.len()];
    for b in 0..n {
        for ch in 0..c {
            for i in 0..hw {
                v[(b * hw + i) * c + ch] = x[(b * c + ch) * hw + i];
            }
        }
    }
    v
}

#[track_caller]
fn close(got: &[f32], want: &[f32], k: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let tol = 1e-5 * (k as f32).sqrt().max(1.0) * 4.0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

fn run_case(rng: &mut Rng, p: &ConvTranspose2d) {
    let (nin, nw, nout) = p.check().unwrap();
    let x = rng.vec(nin);
    let w = rng.vec(nw);
    let bias = rng.vec(p.out_c);
    let with_bias = rng.below(3) != 0;
    let b = with_bias.then_some(&bias[..]);
    let range = (rng.below(3) == 0).then_some((-0.5f32, 0.75f32));
    let k = p.icg() * p.kh * p.kw;
    let mut want = reference(p, &x, &w, b);
    if let Some((lo, hi)) = range {
        want.iter_mut().for_each(|v| *v = v.max(lo).min(hi));
    }
    let what = std::format!("{p:?} bias {with_bias} clamp {range:?}");
    let mut scratch = vec![0.0; scratch_f32_nchw(p).max(scratch_f32_nhwc(p))];
    let mut out = vec![f32::NAN; nout];
    conv_transpose2d_nchw(p, &x, &w, b, &mut out, range, &mut scratch).unwrap();
    close(&out, &want, k, &std::format!("nchw {what}"));
    let xh = to_nhwc(&x, p.batch, p.in_c, p.in_h * p.in_w);
    let want_h = to_nhwc(&want, p.batch, p.out_c, p.out_h * p.out_w);
    let mut out = vec![f32::NAN; nout];
    conv_transpose2d_nhwc(p, &xh, &ohwi(p, &w), b, &mut out, range, &mut scratch).unwrap();
    close(&out, &want_h, k, &std::format!("nhwc {what}"));
}

#[test]
fn transposed_random_shapes() {
    let mut rng = Rng(0x7C_0A);
    let mut cases = 0;
    while cases < 250 {
        if let Some(p) = geometry(&mut rng) {
            run_case(&mut rng, &p);
            cases += 1;
        }
    }
}

#[test]
fn transposed_specialised_shapes() {
    let mut rng = Rng(0x7C_0B);
    let base = ConvTranspose2d {
        batch: 1,
        in_h: 8,
        in_w: 8,
        in_c: 16,
        out_h: 16,
        out_w: 16,
        out_c: 8,
        kh: 4,
        kw: 4,
        stride_h: 2,
        stride_w: 2,
        dil_h: 1,
        dil_w: 1,
        pad_top: 1,
        pad_left: 1,
        groups: 1,
    };
    // The U-Net up-sampler (4×4/2, pad 1: exactly 2× the input).
    run_case(&mut rng, &base);
    // 3×3/2, pad 1, output padding 1; batch 2; 17 and 129 channels.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            batch: 2,
            in_c: 17,
            out_c: 129,
            kh: 3,
            kw: 3,
            ..base
        },
    );
    // 1-D (height 1) transposed: [C, 1, W] with a 1×3 kernel, stride 2, no padding.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 1,
            in_w: 13,
            out_h: 1,
            out_w: 27,
            kh: 1,
            kw: 3,
            pad_top: 0,
            pad_left: 0,
            stride_h: 1,
            ..base
        },
    );
    // Stride above the kernel (gaps that only the bias fills), and padding that crops more
    // than the kernel adds.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 3,
            in_w: 5,
            out_h: 10,
            out_w: 21,
            kh: 2,
            kw: 1,
            stride_h: 4,
            stride_w: 5,
            pad_top: 0,
            pad_left: 0,
            ..base
        },
    );
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 6,
            in_w: 6,
            out_h: 1,
            out_w: 2,
            kh: 1,
            kw: 2,
            stride_h: 1,
            stride_w: 1,
            pad_top: 5,
            pad_left: 5,
            ..base
        },
    );
    // Grouped and dilated (the generator's `mix` layer), and an image over several chunks.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_c: 8,
            out_c: 8,
            out_h: 8,
            out_w: 8,
            kh: 3,
            kw: 3,
            stride_h: 1,
            stride_w: 1,
            dil_h: 2,
            dil_w: 2,
            pad_top: 2,
            pad_left: 2,
            groups: 2,
            ..base
        },
    );
    // All taps in one product in NCHW, but a filter too big to re-lay in NHWC (per-tap
    // products there).
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 2,
            in_w: 3,
            in_c: 300,
            out_h: 3,
            out_w: 5,
            out_c: 25,
            kh: 3,
            kw: 3,
            stride_h: 1,
            stride_w: 2,
            pad_top: 1,
            pad_left: 1,
            ..base
        },
    );
    // More output channels than one block holds.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 1,
            in_w: 2,
            in_c: 2,
            out_h: 1,
            out_w: 3,
            out_c: TAP_F32 + 5,
            kh: 1,
            kw: 2,
            stride_h: 1,
            stride_w: 1,
            pad_top: 0,
            pad_left: 0,
            ..base
        },
    );
    // Rows in chunks of 8 (64 columns of 64 channels): a dilated 5-tap kernel pads the second
    // chunk by 4 rows and skips 4 input rows in the third ...
    let wide = ConvTranspose2d {
        in_h: 6,
        in_w: 64,
        in_c: 3,
        out_h: 18,
        out_w: 64,
        out_c: 64,
        kh: 5,
        kw: 1,
        stride_h: 1,
        stride_w: 1,
        dil_h: 3,
        pad_top: 0,
        pad_left: 0,
        ..base
    };
    run_case(&mut rng, &wide);
    // ... and an output taller than the taps reach (a file's output padding): rows 8.. read
    // no input row and are the bias alone.
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: 2,
            out_h: 20,
            kh: 1,
            dil_h: 1,
            ..wide
        },
    );
    let side = 1 + (TAP_F32 / 8).isqrt();
    run_case(
        &mut rng,
        &ConvTranspose2d {
            in_h: side,
            in_w: side,
            in_c: 3,
            out_h: side,
            out_w: side,
            kh: 3,
            kw: 3,
            stride_h: 1,
            stride_w: 1,
            ..base
        },
    );
}

#[test]
fn transposed_bad_geometry_is_an_error() {
    let p = ConvTranspose2d {
        batch: 1,
        in_h: 4,
        in_w: 4,
        in_c: 6,
        out_h: 8,
        out_w: 8,
        out_c: 4,
        kh: 2,
        kw: 2,
        stride_h: 2,
        stride_w: 2,
        dil_h: 1,
        dil_w: 1,
        pad_top: 0,
        pad_left: 0,
        groups: 2,
    };
    let (nin, nw, nout) = p.check().unwrap();
    let (x, w) = (vec![1.0; nin], vec![1.0; nw]);
    let mut scratch = vec![0.0; scratch_f32_nchw(&p).max(scratch_f32_nhwc(&p))];
    let mut out = vec![0.0; nout];
    assert!(conv_transpose2d_nchw(&p, &x, &w, None, &mut out, None, &mut scratch).is_ok());
    // Short slices, short scratch, groups that do not divide the channels, zero stride,
    // sizes that overflow: errors, never panics.
    let mut short = vec![0.0; nout - 1];
    assert!(conv_transpose2d_nhwc(&p, &x, &w, None, &mut short, None, &mut scratch).is_err());
    assert!(conv_transpose2d_nchw(&p, &x[1..], &w, None, &mut out, None, &mut scratch).is_err());
    assert!(conv_transpose2d_nchw(&p, &x, &w[1..], None, &mut out, None, &mut scratch).is_err());
    assert!(
        conv_transpose2d_nchw(&p, &x, &w, Some(&[0.0; 3]), &mut out, None, &mut scratch).is_err()
    );
    let n = scratch_f32_nchw(&p) - 1;
    assert!(conv_transpose2d_nchw(&p, &x, &w, None, &mut out, None, &mut scratch[..n]).is_err());
    let n = scratch_f32_nhwc(&p) - 1;
    assert!(conv_transpose2d_nhwc(&p, &x, &w, None, &mut out, None, &mut scratch[..n]).is_err());
    for bad in [
        ConvTranspose2d { groups: 4, ..p },
        ConvTranspose2d { stride_w: 0, ..p },
        ConvTranspose2d { kh: 0, ..p },
        ConvTranspose2d {
            in_h: usize::MAX / 2,
            ..p
        },
        ConvTranspose2d {
            stride_h: usize::MAX / 2,
            ..p
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
        assert_eq!(scratch_f32_nchw(&bad) + scratch_f32_nhwc(&bad), 0);
        assert!(conv_transpose2d_nhwc(&bad, &x, &w, None, &mut out, None, &mut scratch).is_err());
    }
}
