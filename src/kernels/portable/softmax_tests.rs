//! Tests of the softmax kernels against f64 references, special values included.

use super::*;
use crate::kernels::portable::test_util::{close, numel, run};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

#[test]
fn exp_fast_accuracy() {
    let mut worst = 0.0f64;
    let mut x = -87.0f32;
    while x <= 0.0 {
        let want = libm::exp(x as f64);
        let got = exp_fast(x) as f64;
        worst = worst.max((got - want).abs() / want);
        x += 0.000_731;
    }
    assert!(worst < 3e-7, "worst relative error {worst}");
    assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp_fast(-200.0), 0.0);
    assert!(exp_fast(f32::NAN).is_nan());
    assert_eq!(exp_fast(0.0), 1.0);
    assert!((exp_fast(10.0) as f64 - libm::exp(10.0)).abs() / libm::exp(10.0) < 3e-7);
}

/// Reference softmax over `dim` of a row-major tensor, in f64.
fn ref_softmax(x: &[f32], dims: &[usize], dim: usize, log: bool) -> Vec<f64> {
    let outer: usize = dims[..dim].iter().product();
    let len = dims[dim];
    let inner: usize = dims[dim + 1..].iter().product();
    let mut y = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mx = (0..len)
                .map(|k| x[at(k)] as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..len).map(|k| (x[at(k)] as f64 - mx).exp()).sum();
            for k in 0..len {
                let v = x[at(k)] as f64;
                y[at(k)] = if log {
                    v - mx - s.ln()
                } else {
                    (v - mx).exp() / s
                };
            }
        }
    }
    y
}

#[test]
fn softmax_any_dim() {
    let mut rng = Rng(9);
    for (dims, dim) in [
        (&[3usize, 129][..], -1i64),
        (&[2, 17, 3][..], 1),
        (&[2, 17, 3][..], 0),
        (&[2, 17, 3][..], -3),
        (&[1][..], 0),
        (&[4, 1, 9][..], 1),
        (&[5, 33][..], 1),
    ] {
        let x: Vec<f32> = rng.vec(numel(dims)).iter().map(|v| v * 8.0).collect();
        let d = if dim < 0 {
            (dim + dims.len() as i64) as usize
        } else {
            dim as usize
        };
        for (key, log) in [
            ("aten::_softmax.out", false),
            ("aten::_log_softmax.out", true),
        ] {
            let mut t = OpTest::new(key);
            let ix = t.input_f32(dims, &x);
            let idim = t.int(dim);
            let h = t.boolean(false);
            let o = t.output(DType::F32, dims);
            t.call(&[ix, idim, h, o, o]);
            close(
                &run(&t)[0].f32(),
                &ref_softmax(&x, dims, d, log),
                2e-6,
                1e-6,
            );
        }
    }
}

#[test]
fn softmax_special_values() {
    let ninf = f32::NEG_INFINITY;
    // row 0: all -inf → NaN; row 1: masked entries → 0; row 2: NaN poisons the row
    let x = [ninf, ninf, ninf, 0.0, ninf, 1.0, 2.0, f32::NAN, 0.0];
    let mut t = OpTest::new("aten::_softmax.out");
    let ix = t.input_f32(&[3, 3], &x);
    let idim = t.int(-1);
    let h = t.boolean(false);
    let o = t.output(DType::F32, &[3, 3]);
    t.call(&[ix, idim, h, o, o]);
    let y = run(&t)[0].f32();
    assert!(y[..3].iter().all(|v| v.is_nan()));
    let e = 1.0f64.exp();
    close(&y[3..6], &[1.0 / (1.0 + e), 0.0, e / (1.0 + e)], 1e-6, 0.0);
    assert!(y[6..].iter().all(|v| v.is_nan()));
    // rank 0
    let mut t = OpTest::new("aten::_log_softmax.out");
    let ix = t.input_f32(&[], &[3.5]);
    let idim = t.int(0);
    let h = t.boolean(false);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, idim, h, o, o]);
    assert_eq!(run(&t)[0].f32(), vec![0.0]);
    // f64, middle dim
    let xd: Vec<f64> = (0..12).map(|i| (i as f64).sin() * 3.0).collect();
    let mut t = OpTest::new("aten::_softmax.out");
    let ix = t.input_f64(&[2, 3, 2], &xd);
    let idim = t.int(1);
    let h = t.boolean(false);
    let o = t.output(DType::F64, &[2, 3, 2]);
    t.call(&[ix, idim, h, o, o]);
    let xf: Vec<f32> = xd.iter().map(|&v| v as f32).collect();
    for (g, w) in run(&t)[0]
        .f64()
        .iter()
        .zip(ref_softmax(&xf, &[2, 3, 2], 1, false))
    {
        assert!((g - w).abs() < 1e-6);
    }
    // half_to_float and bad dim
    for (dim, h2f) in [(0i64, true), (2, false)] {
        let mut t = OpTest::new("aten::_softmax.out");
        let ix = t.input_f32(&[2, 2], &[0.0; 4]);
        let idim = t.int(dim);
        let h = t.boolean(h2f);
        let o = t.output(DType::F32, &[2, 2]);
        t.call(&[ix, idim, h, o, o]);
        let e = t.run_kernel_err();
        if h2f {
            assert!(matches!(e, KernelError::Unsupported { .. }));
        } else {
            assert!(matches!(e, KernelError::IndexOutOfBounds { arg: 1, .. }));
        }
    }
}
