//! Tests of the `quantized_decomposed` kernels against a scalar reference written from the
//! operators' definitions, on odd shapes (1, 3, 17, 129 elements; per-channel axes 0, 1, -1).

use crate::dtype::DType;
use crate::kernels::portable::quantized::scale_and_zero_point;
use crate::kernels::portable::test_util::run;
use crate::testing::{OpTest, Rng};
use std::vec::Vec;

/// Reference quantize: `clamp(zp + round_half_even(x · (1/scale)), qmin, qmax)`.
fn q_ref(x: f32, scale: f64, zp: i64, qmin: i64, qmax: i64) -> i64 {
    let v = x * (1.0f32 / scale as f32);
    let r = v.round_ties_even();
    ((zp as i32 as f32 + r) as i64).clamp(qmin, qmax)
}

#[test]
fn quantize_and_dequantize_per_tensor() {
    let mut rng = Rng(3);
    for n in [1usize, 3, 17, 129] {
        let x = rng.f32s(n, -3.0, 3.0);
        for (dt, qmin, qmax, zp) in [
            (DType::I8, -128i64, 127i64, -5i64),
            (DType::U8, 0, 255, 128),
        ] {
            let scale = 0.021;
            let mut t = OpTest::new("quantized_decomposed::quantize_per_tensor.out");
            let a = t.input_f32(&[n], &x);
            let s = t.double(scale);
            let z = t.int(zp);
            let lo = t.int(qmin);
            let hi = t.int(qmax);
            let d = t.int(dt as i64);
            let o = t.output(dt, &[n]);
            t.call(&[a, s, z, lo, hi, d, o, o]);
            let q = run(&t).remove(0).i64();
            let want: Vec<i64> = x.iter().map(|&v| q_ref(v, scale, zp, qmin, qmax)).collect();
            assert_eq!(q, want, "quantize {dt:?} n={n}");
            // And back: (q - zp) · scale.
            let mut t = OpTest::new("quantized_decomposed::dequantize_per_tensor.out");
            let bytes: Vec<u8> = q.iter().map(|&v| v as u8).collect();
            let a = t.input(dt, &[n], &bytes);
            let s = t.double(scale);
            let z = t.int(zp);
            let lo = t.int(qmin);
            let hi = t.int(qmax);
            let d = t.int(dt as i64);
            let od = t.none();
            let o = t.output(DType::F32, &[n]);
            t.call(&[a, s, z, lo, hi, d, od, o, o]);
            let back = run(&t).remove(0).f32();
            for (i, (&b, &qv)) in back.iter().zip(&q).enumerate() {
                assert_eq!(
                    b,
                    (qv - zp) as i32 as f32 * scale as f32,
                    "dequantize {dt:?} [{i}]"
                );
            }
        }
    }
}

#[test]
fn dequantize_per_channel_on_every_axis() {
    let mut rng = Rng(4);
    let dims = [3usize, 5, 2];
    let n: usize = dims.iter().product();
    let q: Vec<i8> = (0..n).map(|_| rng.i64s(1, -128, 127)[0] as i8).collect();
    for axis in [0i64, 1, -1] {
        let ax = if axis < 0 { axis + 3 } else { axis } as usize;
        let c = dims[ax];
        let scales: Vec<f64> = (0..c).map(|i| 0.01 * (i + 1) as f64).collect();
        let zps: Vec<i64> = (0..c).map(|i| i as i64 - 1).collect();
        let mut t = OpTest::new("quantized_decomposed::dequantize_per_channel.out");
        let bytes: Vec<u8> = q.iter().map(|&v| v as u8).collect();
        let a = t.input(DType::I8, &dims, &bytes);
        let s = t.input_f64(&[c], &scales);
        let z = t.input_i64(&[c], &zps);
        let axv = t.int(axis);
        let lo = t.int(-128);
        let hi = t.int(127);
        let d = t.int(DType::I8 as i64);
        let od = t.none();
        let o = t.output(DType::F32, &dims);
        t.call(&[a, s, z, axv, lo, hi, d, od, o, o]);
        let got = run(&t).remove(0).f32();
        let inner: usize = dims[ax + 1..].iter().product();
        for i in 0..n {
            let ch = (i / inner) % c;
            let want = (q[i] as i32 - zps[ch] as i32) as f32 * scales[ch] as f32;
            assert_eq!(got[i], want, "axis {axis} [{i}]");
        }
    }
}

#[test]
fn choose_qparams_widens_to_zero_and_nudges_the_zero_point() {
    // [-1, 3] over int8: scale 4/255, zero point from the min end: -128 + 63.75 → -64.
    let (s, z) = scale_and_zero_point(-1.0, 3.0, -128, 127);
    assert_eq!((s, z), (4.0 / 255.0, -64));
    // All positive: the range starts at 0, zero point qmin.
    assert_eq!(scale_and_zero_point(2.0, 4.0, -128, 127).1, -128);
    // All zero: scale 0.1 (a zero scale is replaced); the max end has the smaller error.
    assert_eq!(scale_and_zero_point(0.0, 0.0, -128, 127), (0.1, 127));
    // A tiny range is raised to 6.1e-5 per step.
    let (s, _) = scale_and_zero_point(-1e-6, 1e-6, -128, 127);
    assert_eq!(s, 6.1e-5f32 as f64);
    // Through the kernel: f64 scale and i64 zero point outputs.
    let x = [-1.0f32, 0.5, 3.0];
    let mut t = OpTest::new("quantized_decomposed::choose_qparams.Tensor_out");
    let a = t.input_f32(&[3], &x);
    let lo = t.int(-128);
    let hi = t.int(127);
    let eps = t.double(f32::EPSILON as f64);
    let d = t.int(DType::I8 as i64);
    let so = t.output(DType::F64, &[1]);
    let zo = t.output(DType::I64, &[1]);
    let tup = t.tensor_list(&[so, zo]);
    t.call(&[a, lo, hi, eps, d, so, zo, tup]);
    let outs = run(&t);
    assert_eq!(outs[0].f64(), vec![4.0 / 255.0]);
    assert_eq!(outs[1].i64(), vec![-64]);
}
