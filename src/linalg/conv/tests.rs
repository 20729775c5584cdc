//! Convolutions against a scalar reference (f64 sums over the definition), on random shapes
//! with odd channel counts, 1×N and N×1 filters, stride above the kernel, padding wider than
//! the kernel, dilation, groups, batch > 1, bias and clamp; both layouts.

use super::depthwise::{depthwise_nchw, depthwise_nhwc};
use super::{nchw, nhwc, Conv2d};
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

/// Output size along one axis for padding `pad_lo`, `pad_hi`.
fn out_len(len: usize, k: usize, s: usize, d: usize, pad_lo: usize, pad_hi: usize) -> usize {
    let span = d * (k - 1) + 1;
    (len + pad_lo + pad_hi).saturating_sub(span) / s + 1
}

/// A random geometry; `depthwise` forces groups = C.
fn geometry(rng: &mut Rng, depthwise: bool) -> Option<Conv2d> {
    let pick = |rng: &mut Rng, v: &[usize]| v[rng.below(v.len() as u64) as usize];
    let kh = pick(rng, &[1, 1, 2, 3, 3, 5]);
    let kw = pick(rng, &[1, 3, 3, 4, 7]);
    let (sh, sw) = (pick(rng, &[1, 1, 2, 3, 4]), pick(rng, &[1, 1, 2, 5]));
    let (dh, dw) = (pick(rng, &[1, 1, 1, 2]), pick(rng, &[1, 1, 3]));
    let groups_c = pick(rng, &[1, 3, 4, 5, 8, 17]);
    let (groups, in_c, out_c) = if depthwise {
        let m = pick(rng, &[1, 1, 1, 2, 3]);
        (groups_c, groups_c, groups_c * m)
    } else {
        let g = pick(rng, &[1, 1, 1, 2, 3]);
        (
            g,
            g * pick(rng, &[1, 2, 3, 5, 16]),
            g * pick(rng, &[1, 3, 8, 13]),
        )
    };
    let in_h = 1 + rng.below(12) as usize;
    let in_w = 1 + rng.below(14) as usize;
    let (pt, pb) = (rng.below(kh as u64 + 3) as usize, rng.below(3) as usize);
    let (pl, pr) = (rng.below(kw as u64 + 3) as usize, rng.below(3) as usize);
    if in_h + pt + pb < dh * (kh - 1) + 1 || in_w + pl + pr < dw * (kw - 1) + 1 {
        return None;
    }
    Some(Conv2d {
        batch: 1 + rng.below(2) as usize,
        in_h,
        in_w,
        in_c,
        out_h: out_len(in_h, kh, sh, dh, pt, pb),
        out_w: out_len(in_w, kw, sw, dw, pl, pr),
        out_c,
        kh,
        kw,
        stride_h: sh,
        stride_w: sw,
        dil_h: dh,
        dil_w: dw,
        pad_top: pt,
        pad_left: pl,
        groups,
    })
}

/// Scalar reference. `nhwc`: activations NHWC, filter `[OC, KH, KW, Cg]`; else NCHW with
/// filter `[OC, Cg, KH, KW]`.
fn reference(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>, nhwc: bool) -> Vec<f32> {
    let (cg, ocg) = (p.icg(), p.ocg());
    let mut out = vec![0.0f32; p.batch * p.out_h * p.out_w * p.out_c];
    for b in 0..p.batch {
        for o in 0..p.out_c {
            let g = o / ocg;
            for oy in 0..p.out_h {
                for ox in 0..p.out_w {
                    let mut acc = bias.map_or(0.0, |bv| bv[o] as f64);
                    for i in 0..cg {
                        let ci = g * cg + i;
                        for ky in 0..p.kh {
                            for kx in 0..p.kw {
                                let iy =
                                    (oy * p.stride_h + ky * p.dil_h) as isize - p.pad_top as isize;
                                let ix =
                                    (ox * p.stride_w + kx * p.dil_w) as isize - p.pad_left as isize;
                                if iy < 0
                                    || ix < 0
                                    || iy >= p.in_h as isize
                                    || ix >= p.in_w as isize
                                {
                                    continue;
                                }
                                let (iy, ix) = (iy as usize, ix as usize);
                                let (xv, wv) = if nhwc {
                                    (
                                        x[((b * p.in_h + iy) * p.in_w + ix) * p.in_c + ci],
                                        w[((o * p.kh + ky) * p.kw + kx) * cg + i],
                                    )
                                } else {
                                    (
                                        x[((b * p.in_c + ci) * p.in_h + iy) * p.in_w + ix],
                                        w[((o * cg + i) * p.kh + ky) * p.kw + kx],
                                    )
                                };
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    let at = if nhwc {
                        ((b * p.out_h + oy) * p.out_w + ox) * p.out_c + o
                    } else {
                        ((b * p.out_c + o) * p.out_h + oy) * p.out_w + ox
                    };
                    out[at] = acc as f32;
                }
            }
        }
    }
    out
}

/// The depthwise filter in XNNPACK's `[1, KH, KW, OC]` layout from `[OC, 1, KH, KW]`.
fn hwo(p: &Conv2d, w: &[f32]) -> Vec<f32> {
    let taps = p.kh * p.kw;
    let mut v = vec![0.0; w.len()];
    for o in 0..p.out_c {
        for t in 0..taps {
            v[t * p.out_c + o] = w[o * taps + t];
        }
    }
    v
}

/// The filter `[OC, Cg, KH, KW]` as `[OC, KH, KW, Cg]`.
fn ohwi(p: &Conv2d, w: &[f32]) -> Vec<f32> {
    let (cg, taps) = (p.icg(), p.kh * p.kw);
    let mut v = vec![0.0; w.len()];
    for o in 0..p.out_c {
        for i in 0..cg {
            for t in 0..taps {
                v[(o * taps + t) * cg + i] = w[(o * cg + i) * taps + t];
            }
        }
    }
    v
}

/// NHWC data from NCHW data of `[n, c, h, w]`.
fn to_nhwc(x: &[f32], n: usize, c: usize, h: usize, w: usize) -> Vec<f32> {
    let mut v = vec![0.0; x.len()];
    for b in 0..n {
        for ch in 0..c {
            for i in 0..h * w {
                v[(b * h * w + i) * c + ch] = x[(b * c + ch) * h * w + i];
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

fn run_case(rng: &mut Rng, p: &Conv2d) {
    let (nin, nw, nout) = p.check().unwrap();
    let x = rng.vec(nin);
    let w = rng.vec(nw);
    let bias = rng.vec(p.out_c);
    let with_bias = rng.below(3) != 0;
    let b = with_bias.then_some(&bias[..]);
    let range = (rng.below(3) == 0).then_some((-0.5f32, 0.75f32));
    let k = p.kh * p.kw * p.icg();
    let mut want = reference(p, &x, &w, b, false);
    if let Some((lo, hi)) = range {
        want.iter_mut().for_each(|v| *v = v.max(lo).min(hi));
    }
    let what = std::format!("{p:?} bias {with_bias} clamp {range:?}");
    // NCHW.
    let mut out = vec![f32::NAN; nout];
    if p.is_depthwise() {
        // With the scratch its 3×3 path needs, and without (the generic loop).
        let mut scratch = vec![0.0; super::depthwise::nchw_scratch_f32(p)];
        depthwise_nchw(p, &x, &w, b, &mut out, range, &mut scratch).unwrap();
        let mut generic = vec![f32::NAN; nout];
        depthwise_nchw(p, &x, &w, b, &mut generic, range, &mut []).unwrap();
        close(&generic, &want, k, &std::format!("nchw generic {what}"));
    } else {
        let mut scratch = vec![0.0; nchw::scratch_f32(p)];
        nchw::conv2d(p, &x, &w, b, &mut out, range, &mut scratch).unwrap();
    }
    close(&out, &want, k, &std::format!("nchw {what}"));
    // NHWC: the same data transposed.
    let xh = to_nhwc(&x, p.batch, p.in_c, p.in_h, p.in_w);
    let want_h = to_nhwc(&want, p.batch, p.out_c, p.out_h, p.out_w);
    let mut out = vec![f32::NAN; nout];
    if p.is_depthwise() {
        depthwise_nhwc(p, &xh, &hwo(p, &w), b, &mut out, range).unwrap();
    } else {
        let mut scratch = vec![0.0; nhwc::scratch_f32(p)];
        nhwc::conv2d(p, &xh, &ohwi(p, &w), b, &mut out, range, &mut scratch).unwrap();
    }
    close(&out, &want_h, k, &std::format!("nhwc {what}"));
    // NHWC with the filter packed ahead (one group only): at the CPU's tile width (implicit
    // GEMM / packed products), and at a width no kernel has (per-panel fallback).
    if p.groups == 1 && !p.is_depthwise() {
        use crate::linalg::gemm::{self, MatRef, PackedB};
        let wo = ohwi(p, &w);
        let b = MatRef::new(&wo, k, p.out_c, 1, k).unwrap();
        for nr in [gemm::micro_kernel().nr(), 5] {
            let mut packed = vec![f32::NAN; PackedB::len_for(k, p.out_c, nr).unwrap()];
            gemm::pack_b_ahead(b, nr, &mut packed).unwrap();
            let pb = PackedB::new(&packed, k, p.out_c, nr).unwrap();
            let mut out = vec![f32::NAN; nout];
            let mut scratch = vec![0.0; nhwc::scratch_f32(p)];
            nhwc::conv2d_prepacked(
                p,
                &xh,
                pb,
                with_bias.then_some(&bias[..]),
                &mut out,
                range,
                &mut scratch,
            )
            .unwrap();
            close(
                &out,
                &want_h,
                k,
                &std::format!("nhwc prepacked nr {nr} {what}"),
            );
        }
    }
}

#[test]
fn dense_and_grouped_random_shapes() {
    let mut rng = Rng(0xC0_4F);
    let mut cases = 0;
    while cases < 300 {
        if let Some(p) = geometry(&mut rng, false) {
            run_case(&mut rng, &p);
            cases += 1;
        }
    }
}

#[test]
fn depthwise_random_shapes() {
    let mut rng = Rng(0xD3_97);
    let mut cases = 0;
    while cases < 300 {
        if let Some(p) = geometry(&mut rng, true) {
            run_case(&mut rng, &p);
            cases += 1;
        }
    }
}

/// The shapes the fast paths specialise: 3×3 depthwise stride 1 and 2 (every channel count
/// mod 4), pointwise, patch embedding (kernel = stride), a 3×3 layer large enough to take
/// several chunks, and 1×N / N×1 filters.
#[test]
fn specialised_shapes() {
    let mut rng = Rng(7);
    let base = Conv2d {
        batch: 1,
        in_h: 9,
        in_w: 11,
        in_c: 1,
        out_h: 9,
        out_w: 11,
        out_c: 1,
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
    // Depthwise 3×3 on rows wide enough for the NCHW blocks of four outputs (and their
    // stride-2 de-interleaving loads near the row's end): widths around multiples of 4 and 8,
    // stride 1/2 across (3 down), dilation 1/2, padding 0–2, channel multiplier 1 and 2.
    for (w, sw, sh, d, pad, m) in [
        (37, 1, 1, 1, 1, 1),
        (40, 2, 2, 1, 1, 1),
        (41, 2, 1, 1, 0, 1),
        (33, 2, 3, 2, 2, 2),
        (24, 1, 2, 2, 2, 1),
        (19, 2, 2, 1, 2, 1),
        (16, 1, 1, 1, 0, 2),
    ] {
        let (kspan, h) = (2 * d + 1, 7);
        let p = Conv2d {
            batch: 2,
            in_h: h,
            in_w: w,
            in_c: 3,
            out_c: 3 * m,
            groups: 3,
            stride_h: sh,
            stride_w: sw,
            dil_h: d,
            dil_w: d,
            pad_top: pad,
            pad_left: pad,
            out_h: (h + 2 * pad - kspan) / sh + 1,
            out_w: (w + 2 * pad - kspan) / sw + 1,
            ..base
        };
        run_case(&mut rng, &p);
    }
    for c in [1, 3, 4, 5, 8, 17, 32] {
        for s in [1, 2] {
            let p = Conv2d {
                in_c: c,
                out_c: c,
                groups: c,
                stride_h: s,
                stride_w: s,
                out_h: out_len(9, 3, s, 1, 1, 1),
                out_w: out_len(11, 3, s, 1, 1, 1),
                ..base
            };
            run_case(&mut rng, &p);
            let q = Conv2d {
                pad_top: 0,
                pad_left: 0,
                out_h: out_len(9, 3, s, 1, 0, 0),
                out_w: out_len(11, 3, s, 1, 0, 0),
                ..p
            };
            run_case(&mut rng, &q);
        }
    }
    // The 3×3 depthwise kernel's edges: rows and columns narrower than a block or with no
    // interior column, padding of 2 (border columns with one valid tap, or none), another
    // stride down than across, batch 2, and a tall image that takes several row tiles.
    for (h, w, c) in [
        (1, 1, 4),
        (2, 3, 5),
        (5, 2, 8),
        (3, 17, 4),
        (4, 129, 7),
        (70, 9, 16),
    ] {
        for (sh, sw) in [(1, 1), (2, 2), (1, 2), (3, 1)] {
            for pad in [0, 1, 2] {
                if h + 2 * pad < 3 || w + 2 * pad < 3 {
                    continue;
                }
                let p = Conv2d {
                    batch: if h == 5 { 2 } else { 1 },
                    in_h: h,
                    in_w: w,
                    in_c: c,
                    out_c: c,
                    groups: c,
                    stride_h: sh,
                    stride_w: sw,
                    pad_top: pad,
                    pad_left: pad,
                    out_h: out_len(h, 3, sh, 1, pad, pad),
                    out_w: out_len(w, 3, sw, 1, pad, pad),
                    ..base
                };
                run_case(&mut rng, &p);
            }
        }
    }
    let pointwise = Conv2d {
        in_c: 24,
        out_c: 40,
        kh: 1,
        kw: 1,
        pad_top: 0,
        pad_left: 0,
        batch: 2,
        ..base
    };
    run_case(&mut rng, &pointwise);
    let patch = Conv2d {
        in_h: 32,
        in_w: 32,
        in_c: 3,
        out_h: 4,
        out_w: 4,
        out_c: 48,
        kh: 8,
        kw: 8,
        stride_h: 8,
        stride_w: 8,
        pad_top: 0,
        pad_left: 0,
        ..base
    };
    run_case(&mut rng, &patch);
    let chunked = Conv2d {
        in_h: 30,
        in_w: 29,
        in_c: 64,
        out_h: 30,
        out_w: 29,
        out_c: 24,
        ..base
    };
    assert!(nhwc::chunk_rows(&chunked) < 30 * 29, "several chunks");
    assert!(nchw::chunk_cols(&chunked) < 30 * 29, "several chunks");
    run_case(&mut rng, &chunked);
    // A filter deeper than one gathered chunk holds: NCHW splits the depth.
    let deep = Conv2d {
        in_h: 5,
        in_w: 6,
        in_c: 800,
        out_h: 5,
        out_w: 6,
        out_c: 3,
        ..base
    };
    run_case(&mut rng, &deep);
    for (kh, kw) in [(1, 7), (7, 1)] {
        let p = Conv2d {
            in_c: 5,
            out_c: 6,
            kh,
            kw,
            pad_top: kh / 2,
            pad_left: kw / 2,
            ..base
        };
        run_case(&mut rng, &p);
    }
}

#[test]
fn bad_geometry_is_an_error() {
    let p = Conv2d {
        batch: 1,
        in_h: 4,
        in_w: 4,
        in_c: 3,
        out_h: 4,
        out_w: 4,
        out_c: 4,
        kh: 3,
        kw: 3,
        stride_h: 1,
        stride_w: 1,
        dil_h: 1,
        dil_w: 1,
        pad_top: 1,
        pad_left: 1,
        groups: 2, // 3 channels do not split in 2 groups
    };
    assert!(p.check().is_err());
    // Sizing a refused or absurd geometry never panics (a hostile program reaches it at load).
    for bad in [
        Conv2d { kh: 0, ..p },
        Conv2d {
            out_c: 0,
            kh: usize::MAX,
            groups: 1,
            ..p
        },
        Conv2d {
            batch: 0,
            out_h: usize::MAX,
            out_w: 3,
            groups: 1,
            ..p
        },
        Conv2d {
            stride_h: usize::MAX,
            groups: 1,
            ..p
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
        assert_eq!(nhwc::scratch_f32(&bad), 0);
        assert_eq!(nchw::scratch_f32(&bad), 0);
    }
    let ok = Conv2d { groups: 1, ..p };
    let (nin, nw, nout) = ok.check().unwrap();
    let mut scratch = vec![0.0; nhwc::scratch_f32(&ok)];
    let mut out = vec![0.0; nout];
    // Input one element short.
    assert!(nhwc::conv2d(
        &ok,
        &vec![0.0; nin - 1],
        &vec![0.0; nw],
        None,
        &mut out,
        None,
        &mut scratch
    )
    .is_err());
    assert!(depthwise_nhwc(&ok, &vec![0.0; nin], &vec![0.0; nw], None, &mut out, None).is_err());
}
