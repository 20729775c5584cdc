//! Tests of the matmul kernels against naive f64 products.

use super::*;
use crate::kernels::portable::test_util::{close, numel, run};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

fn naive_mm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                c[i * n + j] += a[i * k + p] as f64 * b[p * n + j] as f64;
            }
        }
    }
    c
}

#[test]
fn mm_shapes() {
    let mut rng = Rng(1);
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 17, 129),
        (129, 3, 17),
        (17, 129, 1),
        (2, 0, 3),
    ] {
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let mut t = OpTest::new("aten::mm.out");
        let ia = t.input_f32(&[m, k], &a);
        let ib = t.constant_f32(&[k, n], &b);
        let o = t.output(DType::F32, &[m, n]);
        t.call(&[ia, ib, o, o]);
        let r = run(&t);
        assert_eq!(r[0].shape, vec![m, n]);
        close(&r[0].f32(), &naive_mm(&a, &b, m, k, n), 1e-5, 1e-5);
    }
}

#[test]
fn mm_errors() {
    let mut t = OpTest::new("aten::mm.out");
    let a = t.input_f32(&[2, 3], &[0.0; 6]);
    let b = t.input_f32(&[4, 2], &[0.0; 8]);
    let o = t.output(DType::F32, &[2, 2]);
    t.call(&[a, b, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));

    let mut t = OpTest::new("aten::mm.out");
    let a = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
    let b = t.input_i64(&[2, 2], &[1, 2, 3, 4]);
    let o = t.output(DType::I64, &[2, 2]);
    t.call(&[a, b, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::UnsupportedDType { arg: 0, .. }
    ));

    let mut t = OpTest::new("aten::mm.out");
    let a = t.input_f32(&[2, 2], &[0.0; 4]);
    let o = t.output(DType::F32, &[2, 2]);
    t.call(&[a, a, o]);
    assert!(matches!(t.run_kernel_err(), KernelError::ArgCount { .. }));

    let mut t = OpTest::new("aten::mm.out");
    let a = t.input_f32(&[4], &[0.0; 4]);
    let o = t.output(DType::F32, &[2, 2]);
    t.call(&[a, a, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}

#[test]
fn bmm_batches() {
    let mut rng = Rng(2);
    let (nb, m, k, n) = (3, 5, 17, 4);
    let a = rng.vec(nb * m * k);
    let b = rng.vec(nb * k * n);
    let mut t = OpTest::new("aten::bmm.out");
    let ia = t.input_f32(&[nb, m, k], &a);
    let ib = t.input_f32(&[nb, k, n], &b);
    let o = t.output(DType::F32, &[nb, m, n]);
    t.call(&[ia, ib, o, o]);
    let got = run(&t)[0].f32();
    let mut want = Vec::new();
    for i in 0..nb {
        want.extend(naive_mm(
            &a[i * m * k..(i + 1) * m * k],
            &b[i * k * n..(i + 1) * k * n],
            m,
            k,
            n,
        ));
    }
    close(&got, &want, 1e-5, 1e-5);

    let mut t = OpTest::new("aten::bmm.out");
    let ia = t.input_f32(&[2, 2, 2], &[0.0; 8]);
    let ib = t.input_f32(&[3, 2, 2], &[0.0; 12]);
    let o = t.output(DType::F32, &[2, 2, 2]);
    t.call(&[ia, ib, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
}

/// Reference `beta * broadcast(self) + alpha * a@b` (beta == 0 ignores self).
fn naive_addmm(
    s: &[f32],
    sdims: &[usize],
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    beta: f64,
    alpha: f64,
) -> Vec<f64> {
    let p = naive_mm(a, b, m, k, n);
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            // right-aligned broadcast of self over [m, n]
            let sv = match sdims.len() {
                0 => s[0],
                1 => s[if sdims[0] == 1 { 0 } else { j }],
                _ => {
                    let ii = if sdims[0] == 1 { 0 } else { i };
                    let jj = if sdims[1] == 1 { 0 } else { j };
                    s[ii * sdims[1] + jj]
                }
            } as f64;
            let base = if beta == 0.0 { 0.0 } else { beta * sv };
            out[i * n + j] = base + alpha * p[i * n + j];
        }
    }
    out
}

#[test]
fn addmm_broadcasts_and_scalars() {
    let mut rng = Rng(3);
    let (m, k, n) = (7, 19, 13);
    let cases: &[(&[usize], Scalar, Scalar)] = &[
        (&[13], Scalar::Int(1), Scalar::Int(1)),
        (&[1, 13], Scalar::Double(1.0), Scalar::Double(0.5)),
        (&[7, 13], Scalar::Double(0.5), Scalar::Int(2)),
        (&[7, 1], Scalar::Int(1), Scalar::Double(-1.0)),
        (&[1], Scalar::Double(2.0), Scalar::Int(1)),
        (&[13], Scalar::Double(0.25), Scalar::Int(1)),
        (&[], Scalar::Int(3), Scalar::Int(1)),
    ];
    for (sdims, beta, alpha) in cases {
        let s = rng.vec(numel(sdims));
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let mut t = OpTest::new("aten::addmm.out");
        let is = t.constant_f32(sdims, &s);
        let ia = t.input_f32(&[m, k], &a);
        let ib = t.constant_f32(&[k, n], &b);
        let push = |t: &mut OpTest, v: Scalar| match v {
            Scalar::Int(i) => t.int(i),
            Scalar::Double(d) => t.double(d),
            Scalar::Bool(x) => t.boolean(x),
        };
        let ibeta = push(&mut t, *beta);
        let ialpha = push(&mut t, *alpha);
        let o = t.output(DType::F32, &[m, n]);
        t.call(&[is, ia, ib, ibeta, ialpha, o, o]);
        let want = naive_addmm(&s, sdims, &a, &b, (m, k, n), beta.as_f64(), alpha.as_f64());
        close(&run(&t)[0].f32(), &want, 1e-5, 1e-5);
    }
    // beta = 0: NaN in self does not propagate.
    let a = rng.vec(6);
    let b = rng.vec(6);
    let mut t = OpTest::new("aten::addmm.out");
    let is = t.input_f32(&[2, 2], &[f32::NAN; 4]);
    let ia = t.input_f32(&[2, 3], &a);
    let ib = t.input_f32(&[3, 2], &b);
    let zero = t.double(0.0);
    let one = t.int(1);
    let o = t.output(DType::F32, &[2, 2]);
    t.call(&[is, ia, ib, zero, one, o, o]);
    close(&run(&t)[0].f32(), &naive_mm(&a, &b, 2, 3, 2), 1e-6, 1e-6);
    // self that does not broadcast
    let mut t = OpTest::new("aten::addmm.out");
    let is = t.input_f32(&[3], &[0.0; 3]);
    let ia = t.input_f32(&[2, 3], &a);
    let ib = t.input_f32(&[3, 2], &b);
    let one = t.int(1);
    let o = t.output(DType::F32, &[2, 2]);
    t.call(&[is, ia, ib, one, one, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}

#[test]
fn baddbmm_variants() {
    let mut rng = Rng(4);
    let (nb, m, k, n) = (2, 3, 5, 4);
    let a = rng.vec(nb * m * k);
    let b = rng.vec(nb * k * n);
    for (sdims, beta, alpha) in [
        (&[nb, m, n][..], 0.5, 2.0),
        (&[n][..], 1.0, 1.0),
        (&[m, 1][..], 0.0, 1.5),
    ] {
        let s: Vec<f32> = if beta == 0.0 {
            vec![f32::NAN; numel(sdims)]
        } else {
            rng.vec(numel(sdims))
        };
        let mut t = OpTest::new("aten::baddbmm.out");
        let is = t.input_f32(sdims, &s);
        let ia = t.input_f32(&[nb, m, k], &a);
        let ib = t.input_f32(&[nb, k, n], &b);
        let ibeta = t.double(beta);
        let ialpha = t.double(alpha);
        let o = t.output(DType::F32, &[nb, m, n]);
        t.call(&[is, ia, ib, ibeta, ialpha, o, o]);
        let got = run(&t)[0].f32();
        let mut want = Vec::new();
        for bi in 0..nb {
            let p = naive_mm(
                &a[bi * m * k..][..m * k],
                &b[bi * k * n..][..k * n],
                m,
                k,
                n,
            );
            for i in 0..m {
                for j in 0..n {
                    let sv = match sdims.len() {
                        3 => s[(bi * m + i) * n + j],
                        1 => s[j],
                        _ => s[i],
                    } as f64;
                    let base = if beta == 0.0 { 0.0 } else { beta * sv };
                    want.push(base + alpha * p[i * n + j]);
                }
            }
        }
        close(&got, &want, 1e-5, 1e-5);
    }
}

#[test]
fn linear_variants() {
    let mut rng = Rng(5);
    let (nin, nout) = (17, 9);
    let w = rng.vec(nout * nin);
    let bias = rng.vec(nout);
    for (xdims, with_bias) in [
        (&[2usize, 3, 17][..], true),
        (&[17][..], true),
        (&[4, 17][..], false),
        (&[1, 1, 17][..], true),
    ] {
        let x = rng.vec(numel(xdims));
        let mut t = OpTest::new("aten::linear.out");
        let ix = t.input_f32(xdims, &x);
        let iw = t.constant_f32(&[nout, nin], &w);
        let ib = if with_bias {
            t.constant_f32(&[nout], &bias)
        } else {
            t.none()
        };
        let mut odims = xdims.to_vec();
        *odims.last_mut().unwrap() = nout;
        let o = t.output(DType::F32, &odims);
        t.call(&[ix, iw, ib, o, o]);
        let r = run(&t);
        assert_eq!(r[0].shape, odims);
        let rows = x.len() / nin;
        let mut want = Vec::new();
        for i in 0..rows {
            for j in 0..nout {
                let mut s = if with_bias { bias[j] as f64 } else { 0.0 };
                for p in 0..nin {
                    s += x[i * nin + p] as f64 * w[j * nin + p] as f64;
                }
                want.push(s);
            }
        }
        close(&r[0].f32(), &want, 1e-5, 1e-5);
    }
    // scalar-shaped bias broadcast
    let x = rng.vec(2 * nin);
    let mut t = OpTest::new("aten::linear.out");
    let ix = t.input_f32(&[2, nin], &x);
    let iw = t.constant_f32(&[nout, nin], &w);
    let ib = t.constant_f32(&[1], &[0.5]);
    let o = t.output(DType::F32, &[2, nout]);
    t.call(&[ix, iw, ib, o, o]);
    let got = run(&t)[0].f32();
    for i in 0..2 {
        for j in 0..nout {
            let mut s = 0.5f64;
            for p in 0..nin {
                s += x[i * nin + p] as f64 * w[j * nin + p] as f64;
            }
            assert!((got[i * nout + j] as f64 - s).abs() < 1e-5);
        }
    }
    // in_features mismatch
    let mut t = OpTest::new("aten::linear.out");
    let ix = t.input_f32(&[2, 4], &[0.0; 8]);
    let iw = t.constant_f32(&[nout, nin], &w);
    let n = t.none();
    let o = t.output(DType::F32, &[2, nout]);
    t.call(&[ix, iw, n, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
}
