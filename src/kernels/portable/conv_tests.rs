//! Tests of convolution against a direct (non-GEMM) reference.

use super::*;
use crate::kernels::portable::test_util::{close, run};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

#[allow(clippy::too_many_arguments)]
fn ref_conv2d(
    x: &[f32],
    (n, c, h, w): (usize, usize, usize, usize),
    wt: &[f32],
    (co, kh, kw): (usize, usize, usize),
    bias: Option<&[f32]>,
    s: (usize, usize),
    p: (usize, usize),
    d: (usize, usize),
    groups: usize,
) -> (Vec<f64>, usize, usize) {
    let oh = (h + 2 * p.0 - d.0 * (kh - 1) - 1) / s.0 + 1;
    let ow = (w + 2 * p.1 - d.1 * (kw - 1) - 1) / s.1 + 1;
    let cg = c / groups;
    let cog = co / groups;
    let mut y = vec![0.0f64; n * co * oh * ow];
    for ni in 0..n {
        for o in 0..co {
            let g = o / cog;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias.map_or(0.0, |b| b[o] as f64);
                    for ci in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * s.0 + ky * d.0) as isize - p.0 as isize;
                                let ix = (ox * s.1 + kx * d.1) as isize - p.1 as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xv =
                                    x[((ni * c + g * cg + ci) * h + iy as usize) * w + ix as usize];
                                let wv = wt[((o * cg + ci) * kh + ky) * kw + kx];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    y[((ni * co + o) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    (y, oh, ow)
}

#[test]
fn conv2d_params() {
    let mut rng = Rng(10);
    // (n, c, h, w), (co, kh, kw), stride, pad, dilation, groups, bias
    let cases = [
        ((1, 3, 7, 9), (4, 3, 3), (1, 1), (1, 1), (1, 1), 1, true),
        ((2, 4, 8, 5), (6, 3, 2), (2, 1), (1, 0), (1, 2), 2, false),
        ((1, 6, 9, 9), (6, 3, 3), (2, 2), (2, 1), (2, 1), 6, true),
        ((2, 4, 5, 6), (8, 1, 1), (1, 1), (0, 0), (1, 1), 1, true),
        ((1, 4, 5, 6), (2, 1, 1), (2, 2), (0, 0), (1, 1), 2, false),
        ((1, 32, 17, 17), (5, 3, 3), (1, 1), (1, 1), (1, 1), 1, true),
        ((1, 1, 1, 1), (1, 1, 1), (1, 1), (0, 0), (1, 1), 1, false),
    ];
    for (xs, ws, s, p, d, g, with_bias) in cases {
        let x = rng.vec(xs.0 * xs.1 * xs.2 * xs.3);
        let wt = rng.vec(ws.0 * (xs.1 / g) * ws.1 * ws.2);
        let b = rng.vec(ws.0);
        let (want, oh, ow) = ref_conv2d(&x, xs, &wt, ws, with_bias.then_some(&b[..]), s, p, d, g);
        let mut t = OpTest::new("aten::convolution.out");
        let ix = t.input_f32(&[xs.0, xs.1, xs.2, xs.3], &x);
        let iw = t.constant_f32(&[ws.0, xs.1 / g, ws.1, ws.2], &wt);
        let ib = if with_bias {
            t.constant_f32(&[ws.0], &b)
        } else {
            t.none()
        };
        let is = t.int_list(&[s.0 as i64, s.1 as i64]);
        let ip = t.int_list(&[p.0 as i64, p.1 as i64]);
        let id = t.int_list(&[d.0 as i64, d.1 as i64]);
        let tr = t.boolean(false);
        let op = t.int_list(&[0, 0]);
        let ig = t.int(g as i64);
        let o = t.output(DType::F32, &[xs.0, ws.0, oh, ow]);
        t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
        close(&run(&t)[0].f32(), &want, 1e-4, 1e-4);
    }
}

#[test]
fn conv1d_and_errors() {
    let mut rng = Rng(11);
    let (n, c, l, co, k) = (2, 4, 11, 3, 3);
    let x = rng.vec(n * c * l);
    let wt = rng.vec(co * c * k);
    let b = rng.vec(co);
    let (want, oh, ow) = ref_conv2d(
        &x,
        (n, c, 1, l),
        &wt,
        (co, 1, k),
        Some(&b),
        (1, 2),
        (0, 2),
        (1, 1),
        1,
    );
    assert_eq!(oh, 1);
    let mut t = OpTest::new("aten::convolution.out");
    let ix = t.input_f32(&[n, c, l], &x);
    let iw = t.constant_f32(&[co, c, k], &wt);
    let ib = t.constant_f32(&[co], &b);
    let is = t.int_list(&[2]);
    let ip = t.int_list(&[2]);
    let id = t.int_list(&[1]);
    let tr = t.boolean(false);
    let op = t.int_list(&[0]);
    let ig = t.int(1);
    let o = t.output(DType::F32, &[n, co, ow]);
    t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
    close(&run(&t)[0].f32(), &want, 1e-5, 1e-5);

    // transposed with a weight whose first dim is not C → shape error (weight); bad groups →
    // shape error; kernel larger than input
    for case in 0..3 {
        let mut t = OpTest::new("aten::convolution.out");
        let ix = t.input_f32(&[1, 4, 3, 3], &[0.0; 36]);
        let iw = t.constant_f32(&[2, 4, 4, 4], &[0.0; 128]);
        let ib = t.none();
        let is = t.int_list(&[1, 1]);
        let ip = t.int_list(&[0, 0]);
        let id = t.int_list(&[1, 1]);
        let tr = t.boolean(case == 0);
        let op = t.int_list(&[0, 0]);
        let ig = t.int(if case == 1 { 2 } else { 1 });
        let o = t.output_dynamic(DType::F32, &[1, 2, 4, 4]);
        t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
        let e = t.run_kernel_err();
        match case {
            0 | 1 => assert!(matches!(e, KernelError::Shape { arg: 1, .. })),
            _ => assert!(matches!(e, KernelError::Shape { arg: 0, .. })),
        }
    }
}

/// Direct transposed convolution, NCHW, weight `[C, OC/groups, KH, KW]`: every input pixel
/// and tap adds into output pixel `(iy·s + ky·d − p, ix·s + kx·d − p)`.
#[allow(clippy::too_many_arguments)]
fn ref_conv_transpose2d(
    x: &[f32],
    (n, c, h, w): (usize, usize, usize, usize),
    wt: &[f32],
    (cog, kh, kw): (usize, usize, usize),
    bias: Option<&[f32]>,
    s: (usize, usize),
    p: (usize, usize),
    d: (usize, usize),
    a: (usize, usize),
    groups: usize,
) -> (Vec<f64>, usize, usize) {
    let oh = (h - 1) * s.0 + d.0 * (kh - 1) + 1 + a.0 - 2 * p.0;
    let ow = (w - 1) * s.1 + d.1 * (kw - 1) + 1 + a.1 - 2 * p.1;
    let (cg, co) = (c / groups, cog * groups);
    let mut y = vec![0.0f64; n * co * oh * ow];
    for ni in 0..n {
        for o in 0..co {
            let v = bias.map_or(0.0, |b| b[o] as f64);
            y[(ni * co + o) * oh * ow..(ni * co + o + 1) * oh * ow].fill(v);
        }
        for ci in 0..c {
            let g = ci / cg;
            for iy in 0..h {
                for ix in 0..w {
                    let xv = x[((ni * c + ci) * h + iy) * w + ix] as f64;
                    for o in 0..cog {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = (iy * s.0 + ky * d.0) as isize - p.0 as isize;
                                let ox = (ix * s.1 + kx * d.1) as isize - p.1 as isize;
                                if oy < 0 || ox < 0 || oy >= oh as isize || ox >= ow as isize {
                                    continue;
                                }
                                let wv = wt[((ci * cog + o) * kh + ky) * kw + kx] as f64;
                                let oc = g * cog + o;
                                y[((ni * co + oc) * oh + oy as usize) * ow + ox as usize] +=
                                    xv * wv;
                            }
                        }
                    }
                }
            }
        }
    }
    (y, oh, ow)
}

#[test]
fn conv_transpose_params() {
    let mut rng = Rng(12);
    // (n, c, h, w), (oc/groups, kh, kw), stride, pad, dilation, output padding, groups, bias;
    // h = 0 marks a 1-D case ([n, c, w] with a [c, oc/groups, kw] weight).
    let cases = [
        (
            (1, 16, 8, 8),
            (8, 4, 4),
            (2, 2),
            (1, 1),
            (1, 1),
            (0, 0),
            1,
            true,
        ),
        (
            (2, 6, 5, 7),
            (3, 3, 3),
            (2, 2),
            (1, 1),
            (1, 1),
            (1, 1),
            2,
            false,
        ),
        (
            (1, 4, 6, 5),
            (5, 3, 2),
            (1, 3),
            (2, 0),
            (2, 1),
            (1, 2),
            1,
            true,
        ),
        (
            (1, 3, 1, 9),
            (2, 1, 3),
            (1, 2),
            (0, 1),
            (1, 1),
            (0, 1),
            3,
            true,
        ),
        (
            (2, 8, 0, 11),
            (4, 1, 3),
            (1, 2),
            (0, 0),
            (1, 1),
            (0, 1),
            1,
            true,
        ),
    ];
    for (xs, ws, s, p, d, a, g, with_bias) in cases {
        let one_d = xs.2 == 0;
        let xs4 = (xs.0, xs.1, xs.2.max(1), xs.3);
        let x = rng.vec(xs4.0 * xs4.1 * xs4.2 * xs4.3);
        let wt = rng.vec(xs.1 * ws.0 * ws.1 * ws.2);
        let b = rng.vec(ws.0 * g);
        let bias = with_bias.then_some(&b[..]);
        let (want, oh, ow) = ref_conv_transpose2d(&x, xs4, &wt, ws, bias, s, p, d, a, g);
        let mut t = OpTest::new("aten::convolution.out");
        let (ix, iw, dims) = if one_d {
            (
                t.input_f32(&[xs.0, xs.1, xs.3], &x),
                t.constant_f32(&[xs.1, ws.0, ws.2], &wt),
                vec![xs.0, ws.0 * g, ow],
            )
        } else {
            (
                t.input_f32(&[xs.0, xs.1, xs.2, xs.3], &x),
                t.constant_f32(&[xs.1, ws.0, ws.1, ws.2], &wt),
                vec![xs.0, ws.0 * g, oh, ow],
            )
        };
        let ib = if with_bias {
            t.constant_f32(&[ws.0 * g], &b)
        } else {
            t.none()
        };
        let list = |t: &mut OpTest, v: (usize, usize)| {
            if one_d {
                t.int_list(&[v.1 as i64])
            } else {
                t.int_list(&[v.0 as i64, v.1 as i64])
            }
        };
        let (is, ip, id) = (list(&mut t, s), list(&mut t, p), list(&mut t, d));
        let tr = t.boolean(true);
        let op = list(&mut t, a);
        let ig = t.int(g as i64);
        let o = t.output(DType::F32, &dims);
        t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
        close(&run(&t)[0].f32(), &want, 1e-4, 1e-4);
    }
}

#[test]
fn conv_transpose_errors() {
    // output_padding not below stride or dilation → value error on output_padding; padding
    // that crops the whole output → shape error; groups that do not divide C → shape error.
    for case in 0..3 {
        let mut t = OpTest::new("aten::convolution.out");
        let ix = t.input_f32(&[1, 4, 3, 3], &[0.0; 36]);
        let iw = t.constant_f32(&[4, 2, 2, 2], &[0.0; 32]);
        let ib = t.none();
        let is = t.int_list(&[2, 2]);
        let ip = t.int_list(if case == 1 { &[5, 5] } else { &[0, 0] });
        let id = t.int_list(&[1, 1]);
        let tr = t.boolean(true);
        let op = t.int_list(if case == 0 { &[2, 0] } else { &[0, 0] });
        let ig = t.int(if case == 2 { 3 } else { 1 });
        let o = t.output_dynamic(DType::F32, &[1, 2, 6, 6]);
        t.call(&[ix, iw, ib, is, ip, id, tr, op, ig, o, o]);
        let e = t.run_kernel_err();
        match case {
            0 => assert!(matches!(e, KernelError::Value { arg: 7, .. }), "{e:?}"),
            _ => assert!(matches!(e, KernelError::Shape { .. }), "{e:?}"),
        }
    }
}
