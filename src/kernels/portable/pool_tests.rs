//! Tests of the pooling kernels against direct references (ATen window rules).

use super::*;
use crate::kernels::portable::test_util::{close, numel, run};
use crate::testing::{OpTest, Rng, TestTensor};
use std::vec;
use std::vec::Vec;

/// Reference max pool: values and flat per-plane indices (ATen rules, last NaN wins).
#[allow(clippy::too_many_arguments)]
fn ref_max_pool(
    x: &[f64],
    planes: usize,
    h: usize,
    w: usize,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    d: (usize, usize),
    oh: usize,
    ow: usize,
) -> (Vec<f64>, Vec<i64>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for pl in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut best = f64::NEG_INFINITY;
                let mut bi: Option<i64> = None;
                let mut first: Option<i64> = None;
                for ky in 0..k.0 {
                    for kx in 0..k.1 {
                        let iy = (oy * s.0 + ky * d.0) as isize - p.0 as isize;
                        let ix = (ox * s.1 + kx * d.1) as isize - p.1 as isize;
                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            continue;
                        }
                        let fi = iy as i64 * w as i64 + ix as i64;
                        first.get_or_insert(fi);
                        let v = x[pl * h * w + fi as usize];
                        if v > best || v.is_nan() {
                            best = v;
                            bi = Some(fi);
                        }
                    }
                }
                vals.push(best);
                idx.push(bi.or(first).unwrap());
            }
        }
    }
    (vals, idx)
}

#[test]
#[allow(clippy::type_complexity)]
fn max_pool2d_cases() {
    let mut rng = Rng(12);
    // dims, kernel, stride (empty = kernel), pad, dilation, ceil, expected (oh, ow)
    let cases: &[(
        &[usize],
        [i64; 2],
        &[i64],
        [i64; 2],
        [i64; 2],
        bool,
        (usize, usize),
    )] = &[
        (
            &[1, 2, 7, 9],
            [3, 3],
            &[2, 2],
            [1, 1],
            [1, 1],
            false,
            (4, 5),
        ),
        (&[2, 7, 9], [3, 2], &[], [1, 1], [1, 1], true, (3, 5)),
        (&[1, 1, 8, 8], [2, 3], &[2, 1], [0, 1], [2, 1], true, (4, 8)),
        (&[1, 3, 5, 5], [2, 2], &[2, 2], [0, 0], [1, 1], true, (3, 3)),
    ];
    for &(dims, k, st, p, d, ceil, (oh, ow)) in cases {
        let mut x: Vec<f32> = rng.vec(numel(dims));
        x[3] = f32::NAN;
        x[4] = f32::NAN;
        x[10] = f32::NEG_INFINITY;
        let r = dims.len();
        let planes: usize = dims[..r - 2].iter().product();
        let (h, w) = (dims[r - 2], dims[r - 1]);
        let s = if st.is_empty() { k } else { [st[0], st[1]] };
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let (vals, idx) = ref_max_pool(
            &xd,
            planes,
            h,
            w,
            (k[0] as usize, k[1] as usize),
            (s[0] as usize, s[1] as usize),
            (p[0] as usize, p[1] as usize),
            (d[0] as usize, d[1] as usize),
            oh,
            ow,
        );
        let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
        let ix = t.input_f32(dims, &x);
        let ik = t.int_list(&k);
        let is = t.int_list(st);
        let ip = t.int_list(&p);
        let id = t.int_list(&d);
        let ic = t.boolean(ceil);
        let mut odims = dims.to_vec();
        odims[r - 2] = oh;
        odims[r - 1] = ow;
        let o = t.output(DType::F32, &odims);
        let oi = t.output(DType::I64, &odims);
        let l = t.tensor_list(&[o, oi]);
        t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
        let out = run(&t);
        close(&out[0].f32(), &vals, 0.0, 0.0);
        assert_eq!(out[1].i64(), idx);
    }
    // values from torch: all -inf windows keep the first in-bounds index; last NaN wins
    let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
    let ix = t.input_f32(&[1, 1, 1, 4], &[1.0, f32::NAN, 2.0, f32::NAN]);
    let ik = t.int_list(&[1, 4]);
    let is = t.int_list(&[1, 1]);
    let ip = t.int_list(&[0, 0]);
    let id = t.int_list(&[1, 1]);
    let ic = t.boolean(false);
    let o = t.output(DType::F32, &[1, 1, 1, 1]);
    let oi = t.output(DType::I64, &[1, 1, 1, 1]);
    let l = t.tensor_list(&[o, oi]);
    t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
    let out = run(&t);
    assert!(out[0].f32()[0].is_nan());
    assert_eq!(out[1].i64(), vec![3]);

    let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
    let ix = t.input_f32(&[1, 1, 3, 3], &[f32::NEG_INFINITY; 9]);
    let ik = t.int_list(&[2, 2]);
    let is = t.int_list(&[1, 1]);
    let ip = t.int_list(&[1, 1]);
    let id = t.int_list(&[1, 1]);
    let ic = t.boolean(false);
    let o = t.output(DType::F32, &[1, 1, 4, 4]);
    let oi = t.output(DType::I64, &[1, 1, 4, 4]);
    let l = t.tensor_list(&[o, oi]);
    t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
    assert_eq!(
        run(&t)[1].i64(),
        vec![0, 0, 1, 2, 0, 0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8]
    );

    // int64 input, and padding larger than half the kernel is rejected
    let xi: Vec<i64> = (0..16).map(|i| (i * 7) % 11).collect();
    let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
    let ix = t.input_i64(&[1, 4, 4], &xi);
    let ik = t.int_list(&[2]);
    let is = t.int_list(&[]);
    let ip = t.int_list(&[0]);
    let id = t.int_list(&[1]);
    let ic = t.boolean(false);
    let o = t.output(DType::I64, &[1, 2, 2]);
    let oi = t.output(DType::I64, &[1, 2, 2]);
    let l = t.tensor_list(&[o, oi]);
    t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
    let out = run(&t);
    let xf: Vec<f64> = xi.iter().map(|&v| v as f64).collect();
    let (vals, idx) = ref_max_pool(&xf, 1, 4, 4, (2, 2), (2, 2), (0, 0), (1, 1), 2, 2);
    assert_eq!(
        out[0].i64(),
        vals.iter().map(|&v| v as i64).collect::<Vec<_>>()
    );
    assert_eq!(out[1].i64(), idx);

    let mut t = OpTest::new("aten::max_pool2d_with_indices.out");
    let ix = t.input_f32(&[1, 1, 5, 5], &[0.0; 25]);
    let ik = t.int_list(&[2, 2]);
    let is = t.int_list(&[1, 1]);
    let ip = t.int_list(&[2, 2]);
    let id = t.int_list(&[1, 1]);
    let ic = t.boolean(false);
    let o = t.output_dynamic(DType::F32, &[1, 1, 8, 8]);
    let oi = t.output_dynamic(DType::I64, &[1, 1, 8, 8]);
    let l = t.tensor_list(&[o, oi]);
    t.call(&[ix, ik, is, ip, id, ic, o, oi, l]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 3, .. }
    ));
}

#[test]
fn avg_pool2d_matches_torch() {
    // torch.ops.aten.avg_pool2d(arange(16).reshape(1,1,4,4), [3,3], [2,2], [1,1], True, X)
    let xf: Vec<f32> = (0..16).map(|v| v as f32).collect();
    let xi: Vec<i64> = (0..16).collect();
    let run_case = |int: bool, include_pad: bool, div: Option<i64>| -> TestTensor {
        let mut t = OpTest::new("aten::avg_pool2d.out");
        let ix = if int {
            t.input_i64(&[1, 1, 4, 4], &xi)
        } else {
            t.input_f32(&[1, 1, 4, 4], &xf)
        };
        let ik = t.int_list(&[3, 3]);
        let is = t.int_list(&[2, 2]);
        let ip = t.int_list(&[1, 1]);
        let ic = t.boolean(true);
        let icp = t.boolean(include_pad);
        let idv = match div {
            Some(d) => t.int(d),
            None => t.none(),
        };
        let o = t.output(if int { DType::I64 } else { DType::F32 }, &[1, 1, 3, 3]);
        t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
        run(&t).remove(0)
    };
    let exclude = run_case(false, false, None);
    close(
        &exclude.f32(),
        &[2.5, 4.0, 5.0, 8.5, 10.0, 11.0, 12.5, 14.0, 15.0],
        1e-6,
        0.0,
    );
    let ints = run_case(true, true, None);
    assert_eq!(ints.i64(), vec![1, 2, 1, 5, 10, 5, 4, 7, 3]);
    // count_include_pad: windows clipped at H + pad (values from torch)
    let incl = run_case(false, true, None);
    let want: Vec<f64> = vec![
        10.0 / 9.0,
        24.0 / 9.0,
        10.0 / 6.0,
        51.0 / 9.0,
        90.0 / 9.0,
        33.0 / 6.0,
        25.0 / 6.0,
        42.0 / 6.0,
        15.0 / 4.0,
    ];
    close(&incl.f32(), &want, 1e-6, 0.0);
    let div = run_case(false, true, Some(2));
    let want: Vec<f64> = [10.0, 24.0, 10.0, 51.0, 90.0, 33.0, 25.0, 42.0, 15.0]
        .iter()
        .map(|v| v / 2.0)
        .collect();
    close(&div.f32(), &want, 1e-6, 0.0);
}

#[test]
fn avg_pool2d_ceil_edge_windows() {
    // ceil_mode with no padding: the last window is clipped to the input (torch: the
    // corner output equals the corner input, divisor 1).
    let mut rng = Rng(18);
    let x = rng.vec(25);
    let mut t = OpTest::new("aten::avg_pool2d.out");
    let ix = t.input_f32(&[1, 1, 5, 5], &x);
    let ik = t.int_list(&[2, 2]);
    let is = t.int_list(&[2, 2]);
    let ip = t.int_list(&[0, 0]);
    let ic = t.boolean(true);
    let icp = t.boolean(true);
    let idv = t.none();
    let o = t.output(DType::F32, &[1, 1, 3, 3]);
    t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
    let y = run(&t)[0].f32();
    assert_eq!(y[8], x[24]);
    assert!((y[2] - (x[4] + x[9]) / 2.0).abs() < 1e-6);
    assert!((y[0] - (x[0] + x[1] + x[5] + x[6]) / 4.0).abs() < 1e-6);
    // divisor_override = 0 is rejected
    let mut t = OpTest::new("aten::avg_pool2d.out");
    let ix = t.input_f32(&[1, 1, 5, 5], &x);
    let ik = t.int_list(&[2, 2]);
    let is = t.int_list(&[2, 2]);
    let ip = t.int_list(&[0, 0]);
    let ic = t.boolean(true);
    let icp = t.boolean(true);
    let idv = t.int(0);
    let o = t.output(DType::F32, &[1, 1, 3, 3]);
    t.call(&[ix, ik, is, ip, ic, icp, idv, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 6, .. }
    ));
}

#[test]
fn adaptive_avg_pool2d_bins() {
    let mut rng = Rng(13);
    let (c, h, w, oh, ow) = (3usize, 7usize, 5usize, 3usize, 2usize);
    let x = rng.vec(2 * c * h * w);
    let mut t = OpTest::new("aten::_adaptive_avg_pool2d.out");
    let ix = t.input_f32(&[2, c, h, w], &x);
    let os = t.int_list(&[oh as i64, ow as i64]);
    let o = t.output(DType::F32, &[2, c, oh, ow]);
    t.call(&[ix, os, o, o]);
    let got = run(&t)[0].f32();
    let mut want = Vec::new();
    for p in 0..2 * c {
        for oy in 0..oh {
            let (y0, y1) = ((oy * h) / oh, ((oy + 1) * h).div_ceil(oh));
            for ox in 0..ow {
                let (x0, x1) = ((ox * w) / ow, ((ox + 1) * w).div_ceil(ow));
                let mut s = 0.0;
                for y in y0..y1 {
                    for xx in x0..x1 {
                        s += x[p * h * w + y * w + xx] as f64;
                    }
                }
                want.push(s / ((y1 - y0) * (x1 - x0)) as f64);
            }
        }
    }
    close(&got, &want, 1e-5, 1e-6);
}
