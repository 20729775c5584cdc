//! Tests of the normalisation kernels against f64 references.

use super::*;
use crate::kernels::portable::test_util::{close, numel, run};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

fn ref_norm(x: &[f32], m: usize, n: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut mu, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..m {
        let row = &x[i * n..(i + 1) * n];
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let r = 1.0 / (var + eps).sqrt();
        mu.push(mean);
        rs.push(r);
        y.extend(row.iter().map(|&v| (v as f64 - mean) * r));
    }
    (y, mu, rs)
}

#[test]
fn layer_norm_f32() {
    let mut rng = Rng(6);
    for (dims, nd) in [
        (&[3usize, 17][..], 1usize),
        (&[2, 3, 4][..], 2),
        (&[129][..], 1),
        (&[2, 1, 5][..], 1),
    ] {
        let r = dims.len();
        let n: usize = dims[r - nd..].iter().product();
        let m = numel(dims) / n;
        // offset data: checks the two-pass accuracy
        let x: Vec<f32> = rng.vec(numel(dims)).iter().map(|v| v + 100.0).collect();
        let w = rng.vec(n);
        let b = rng.vec(n);
        for affine in [false, true] {
            let mut t = OpTest::new("aten::native_layer_norm.out");
            let ix = t.input_f32(dims, &x);
            let ns = t.int_list(&dims[r - nd..].iter().map(|&d| d as i64).collect::<Vec<_>>());
            let (iw, ib) = if affine {
                (
                    t.constant_f32(&dims[r - nd..], &w),
                    t.constant_f32(&dims[r - nd..], &b),
                )
            } else {
                (t.none(), t.none())
            };
            let eps = t.double(1e-5);
            let mut sdims = dims.to_vec();
            for d in &mut sdims[r - nd..] {
                *d = 1;
            }
            let o0 = t.output(DType::F32, dims);
            let o1 = t.output(DType::F32, &sdims);
            let o2 = t.output(DType::F32, &sdims);
            let l = t.tensor_list(&[o0, o1, o2]);
            t.call(&[ix, ns, iw, ib, eps, o0, o1, o2, l]);
            let out = run(&t);
            assert_eq!(out[1].shape, sdims);
            let (mut y, mu, rs) = ref_norm(&x, m, n, 1e-5);
            if affine {
                for (i, v) in y.iter_mut().enumerate() {
                    *v = *v * w[i % n] as f64 + b[i % n] as f64;
                }
            }
            close(&out[0].f32(), &y, 1e-4, 1e-4);
            close(&out[1].f32(), &mu, 1e-6, 0.0);
            close(&out[2].f32(), &rs, 1e-5, 0.0);
        }
    }
}

#[test]
fn layer_norm_f64_and_errors() {
    let x: Vec<f64> = (0..12).map(|i| (i * i) as f64 * 0.1).collect();
    let mut t = OpTest::new("aten::native_layer_norm.out");
    let ix = t.input_f64(&[3, 4], &x);
    let ns = t.int_list(&[4]);
    let n1 = t.none();
    let eps = t.double(1e-5);
    let o0 = t.output(DType::F64, &[3, 4]);
    let o1 = t.output(DType::F64, &[3, 1]);
    let o2 = t.output(DType::F64, &[3, 1]);
    let l = t.tensor_list(&[o0, o1, o2]);
    t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
    let out = run(&t);
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let (y, mu, _) = ref_norm(&xf, 3, 4, 1e-5);
    for (g, w) in out[0].f64().iter().zip(&y) {
        assert!((g - w).abs() < 1e-5);
    }
    for (g, w) in out[1].f64().iter().zip(&mu) {
        assert!((g - w).abs() < 1e-6);
    }
    // normalized_shape does not match the trailing dims
    let mut t = OpTest::new("aten::native_layer_norm.out");
    let ix = t.input_f32(&[3, 4], &[0.0; 12]);
    let ns = t.int_list(&[3]);
    let n1 = t.none();
    let eps = t.double(1e-5);
    let o0 = t.output(DType::F32, &[3, 4]);
    let o1 = t.output(DType::F32, &[3, 1]);
    let o2 = t.output(DType::F32, &[3, 1]);
    let l = t.tensor_list(&[o0, o1, o2]);
    t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
    // integer input
    let mut t = OpTest::new("aten::native_layer_norm.out");
    let ix = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
    let ns = t.int_list(&[2]);
    let n1 = t.none();
    let eps = t.double(1e-5);
    let o0 = t.output(DType::I64, &[2, 2]);
    let o1 = t.output(DType::I64, &[2, 1]);
    let o2 = t.output(DType::I64, &[2, 1]);
    let l = t.tensor_list(&[o0, o1, o2]);
    t.call(&[ix, ns, n1, n1, eps, o0, o1, o2, l]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::UnsupportedDType { .. }
    ));
    // f32 input: a weight of the wrong shape, a bias of another dtype, a mean of another dtype.
    for (case, want_arg) in [(0, 2), (1, 3), (2, 6)] {
        let mut t = OpTest::new("aten::native_layer_norm.out");
        let ix = t.input_f32(&[3, 4], &[0.0; 12]);
        let ns = t.int_list(&[4]);
        let w = match case {
            0 => t.constant_f32(&[3], &[1.0; 3]),
            _ => t.constant_f32(&[4], &[1.0; 4]),
        };
        let b = match case {
            1 => t.input_f64(&[4], &[0.0; 4]),
            _ => t.constant_f32(&[4], &[0.0; 4]),
        };
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F32, &[3, 4]);
        let o1 = t.output(if case == 2 { DType::F64 } else { DType::F32 }, &[3, 1]);
        let o2 = t.output(DType::F32, &[3, 1]);
        let l = t.tensor_list(&[o0, o1, o2]);
        t.call(&[ix, ns, w, b, eps, o0, o1, o2, l]);
        match t.run_kernel_err() {
            KernelError::Shape { arg, .. } | KernelError::DTypeMismatch { arg, .. } => {
                assert_eq!(arg, want_arg, "case {case}")
            }
            other => panic!("case {case}: {other:?}"),
        }
    }
}

#[test]
fn group_norm_f32() {
    let mut rng = Rng(7);
    let (n, c, h, w, g) = (2usize, 6usize, 3usize, 5usize, 3usize);
    let x = rng.vec(n * c * h * w);
    let wt = rng.vec(c);
    let b = rng.vec(c);
    let mut t = OpTest::new("aten::native_group_norm.out");
    let ix = t.input_f32(&[n, c, h, w], &x);
    let iw = t.constant_f32(&[c], &wt);
    let ib = t.constant_f32(&[c], &b);
    let (a_n, a_c, a_hw, a_g) = (
        t.int(n as i64),
        t.int(c as i64),
        t.int((h * w) as i64),
        t.int(g as i64),
    );
    let eps = t.double(1e-5);
    let o0 = t.output(DType::F32, &[n, c, h, w]);
    let o1 = t.output(DType::F32, &[n, g]);
    let o2 = t.output(DType::F32, &[n, g]);
    let l = t.tensor_list(&[o0, o1, o2]);
    t.call(&[ix, iw, ib, a_n, a_c, a_hw, a_g, eps, o0, o1, o2, l]);
    let out = run(&t);
    let block = c / g * h * w;
    let (mut y, mu, rs) = ref_norm(&x, n * g, block, 1e-5);
    for (i, v) in y.iter_mut().enumerate() {
        let ch = (i / (h * w)) % c;
        *v = *v * wt[ch] as f64 + b[ch] as f64;
    }
    close(&out[0].f32(), &y, 1e-4, 1e-4);
    close(&out[1].f32(), &mu, 1e-5, 1e-6);
    close(&out[2].f32(), &rs, 1e-5, 0.0);
}

#[test]
fn batch_norm_inference() {
    let mut rng = Rng(8);
    let (n, c, h, w) = (2usize, 3usize, 4usize, 5usize);
    let x = rng.vec(n * c * h * w);
    let wt = rng.vec(c);
    let b = rng.vec(c);
    let rm = rng.vec(c);
    let rv: Vec<f32> = rng.vec(c).iter().map(|v| v.abs() + 0.5).collect();
    for key in [
        "aten::_native_batch_norm_legit_no_training.out",
        "aten::_native_batch_norm_legit.out",
    ] {
        let legit = key.ends_with("legit.out");
        let mut t = OpTest::new(key);
        let ix = t.input_f32(&[n, c, h, w], &x);
        let iw = t.constant_f32(&[c], &wt);
        let ib = t.constant_f32(&[c], &b);
        let im = t.constant_f32(&[c], &rm);
        let iv = t.constant_f32(&[c], &rv);
        let training = t.boolean(false);
        let mom = t.double(0.1);
        let eps = t.double(1e-5);
        let o0 = t.output(DType::F32, &[n, c, h, w]);
        let o1 = t.output_dynamic(DType::F32, &[3]);
        let o2 = t.output_dynamic(DType::F32, &[3]);
        let l = t.tensor_list(&[o0, o1, o2]);
        if legit {
            t.call(&[ix, iw, ib, im, iv, training, mom, eps, o0, o1, o2, l]);
        } else {
            t.call(&[ix, iw, ib, im, iv, mom, eps, o0, o1, o2, l]);
        }
        let out = run(&t);
        assert_eq!(out[1].shape, vec![0]);
        assert_eq!(out[2].shape, vec![0]);
        let want: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let ch = (i / (h * w)) % c;
                (v as f64 - rm[ch] as f64) / (rv[ch] as f64 + 1e-5).sqrt() * wt[ch] as f64
                    + b[ch] as f64
            })
            .collect();
        close(&out[0].f32(), &want, 1e-5, 1e-5);
    }
    // training mode is unsupported
    let mut t = OpTest::new("aten::_native_batch_norm_legit.out");
    let ix = t.input_f32(&[1, 1, 1, 1], &[0.0]);
    let p = t.constant_f32(&[1], &[1.0]);
    let training = t.boolean(true);
    let mom = t.double(0.1);
    let eps = t.double(1e-5);
    let o0 = t.output(DType::F32, &[1, 1, 1, 1]);
    let o1 = t.output_dynamic(DType::F32, &[1]);
    let o2 = t.output_dynamic(DType::F32, &[1]);
    let l = t.tensor_list(&[o0, o1, o2]);
    t.call(&[ix, p, p, p, p, training, mom, eps, o0, o1, o2, l]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Unsupported { .. }
    ));
}
