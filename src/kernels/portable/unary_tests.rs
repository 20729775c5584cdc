//! Tests of the unary math and activation kernels against f64 references.

use super::*;
use crate::kernels::portable::test_util::{
    assert_close, assert_near, b, f, i, kerr, out, ramp, run1, same, A,
};
use crate::testing::Rng;
use std::vec::Vec;

#[test]
fn float_unary_ops() {
    let mut rng = Rng(21);
    let x = rng.f32s(129, -3.0, 3.0);
    let pos = rng.f32s(129, 0.05, 4.0);
    let unit = rng.f32s(129, -0.95, 0.95);
    let big = rng.f32s(129, 1.05, 4.0);
    type Case = (&'static str, fn(f32) -> f32, u8, i64);
    // (op, reference, domain: 0 = any, 1 = positive, 2 = (-1, 1), 3 = > 1, ulps)
    let cases: &[Case] = &[
        ("tanh", |v| v.tanh(), 0, 2),
        ("sigmoid", |v| 1.0 / (1.0 + (-v).exp()), 0, 2),
        ("exp", |v| v.exp(), 0, 1),
        ("expm1", |v| v.exp_m1(), 0, 2),
        ("log", |v| v.ln(), 1, 1),
        ("log1p", |v| v.ln_1p(), 1, 2),
        ("log2", |v| v.log2(), 1, 1),
        ("log10", |v| v.log10(), 1, 2),
        ("sqrt", |v| v.sqrt(), 1, 0),
        ("rsqrt", |v| 1.0 / v.sqrt(), 1, 0),
        ("sin", |v| v.sin(), 0, 2),
        ("cos", |v| v.cos(), 0, 2),
        ("tan", |v| v.tan(), 2, 2),
        ("sinh", |v| v.sinh(), 0, 2),
        ("cosh", |v| v.cosh(), 0, 2),
        ("asin", |v| v.asin(), 2, 2),
        ("acos", |v| v.acos(), 2, 2),
        ("atan", |v| v.atan(), 0, 2),
        ("asinh", |v| v.asinh(), 0, 4),
        ("acosh", |v| v.acosh(), 3, 4),
        ("atanh", |v| v.atanh(), 2, 4),
        ("erf", |v| libm_free_erf(v), 0, 4),
        ("reciprocal", |v| 1.0 / v, 1, 0),
    ];
    for &(name, r, dom, ulps) in cases {
        let input = match dom {
            0 => &x,
            1 => &pos,
            2 => &unit,
            _ => &big,
        };
        let key = std::format!("aten::{name}.out");
        let got = run1(&key, &[f(&[129], input), out(DType::F32, &[129])]);
        let want: Vec<f32> = input.iter().map(|&v| r(v)).collect();
        assert_close(&got.f32(), &want, ulps, name);
        // rank 0 and a 2-d shape
        let got = run1(&key, &[f(&[], &input[..1]), out(DType::F32, &[])]);
        assert_eq!(got.shape, Vec::<usize>::new());
        assert_close(&got.f32(), &want[..1], ulps, name);
        // f64 input computes in f64
        let xd: Vec<f64> = input[..3].iter().map(|&v| v as f64).collect();
        let got = run1(&key, &[A::D(std::vec![3], xd), out(DType::F64, &[3])]);
        let g: Vec<f32> = got.f64().iter().map(|&v| v as f32).collect();
        assert_close(&g, &want[..3], ulps + 1, name);
    }
    // Integer inputs promote to float32.
    let got = run1(
        "aten::sigmoid.out",
        &[i(&[2], &[1, -2]), out(DType::F32, &[2])],
    );
    assert_close(
        &got.f32(),
        &[1.0 / (1.0 + (-1f32).exp()), 1.0 / (1.0 + 2f32.exp())],
        1,
        "sigmoid int",
    );
    let got = run1(
        "aten::reciprocal.out",
        &[i(&[2], &[0, 2]), out(DType::F32, &[2])],
    );
    assert_eq!(got.f32(), [f32::INFINITY, 0.5]);
    let got = run1("aten::sqrt.out", &[b(&[1], &[true]), out(DType::F32, &[1])]);
    assert_eq!(got.f32(), [1.0]);
    let got = run1("aten::exp.out", &[i(&[1], &[1]), out(DType::F64, &[1])]);
    assert_eq!(got.f64(), [1f32.exp() as f64]);
    let got = run1(
        "aten::log.out",
        &[f(&[3], &[0.0, -1.0, f32::INFINITY]), out(DType::F32, &[3])],
    );
    let g = got.f32();
    assert_eq!(g[0], f32::NEG_INFINITY);
    assert!(g[1].is_nan());
    assert_eq!(g[2], f32::INFINITY);
    let e = kerr("aten::exp.out", &[f(&[1], &[1.0]), out(DType::I64, &[1])]);
    assert!(matches!(e, KernelError::DTypeMismatch { arg: 1, .. }));
    let e = kerr(
        "aten::tanh.out",
        &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[3])],
    );
    assert!(matches!(e, KernelError::Resize { .. }));
    let e = kerr(
        "aten::tanh.out",
        &[f(&[1], &[1.0]), A::Int(0), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::ArgCount { .. }));
}

/// erf by its Taylor series / continued fraction in f64 (independent of libm).
fn libm_free_erf(x: f32) -> f32 {
    let x = x as f64;
    if x.abs() < 3.0 {
        // Taylor series: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x * x / n;
            let t = term / (2.0 * n + 1.0);
            sum += t;
            if t.abs() < 1e-17 {
                break;
            }
        }
        (sum * 2.0 / core::f64::consts::PI.sqrt()) as f32
    } else {
        x.signum() as f32
    }
}

#[test]
fn activations() {
    let mut rng = Rng(31);
    let mut x = rng.f32s(129, -4.0, 4.0);
    x[0] = 0.0;
    x[1] = -0.0;
    let n = x.len();
    // gelu none
    let got = run1(
        "aten::gelu.out",
        &[f(&[n], &x), A::Str("none"), out(DType::F32, &[n])],
    );
    let want: Vec<f32> = x
        .iter()
        .map(|&v| v * 0.5 * (1.0 + libm_free_erf(v * core::f32::consts::FRAC_1_SQRT_2)))
        .collect();
    assert_near(&got.f32(), &want, 1e-6, "gelu");
    // gelu tanh
    let got = run1(
        "aten::gelu.out",
        &[f(&[n], &x), A::Str("tanh"), out(DType::F32, &[n])],
    );
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let k = ((2.0 / core::f64::consts::PI).sqrt()) as f32;
            0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
        })
        .collect();
    assert_near(&got.f32(), &want, 1e-6, "gelu tanh");
    let e = kerr(
        "aten::gelu.out",
        &[f(&[1], &[1.0]), A::Str("fast"), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::Value { arg: 1, .. }));
    let e = kerr(
        "aten::gelu.out",
        &[i(&[1], &[1]), A::Str("none"), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
    // silu
    let got = run1("aten::silu.out", &[f(&[n], &x), out(DType::F32, &[n])]);
    let want: Vec<f32> = x.iter().map(|&v| v / (1.0 + (-v).exp())).collect();
    assert_close(&got.f32(), &want, 2, "silu");
    // relu keeps NaN and -0
    let got = run1(
        "aten::relu.out",
        &[f(&[4], &[-1.0, -0.0, f32::NAN, 2.5]), out(DType::F32, &[4])],
    )
    .f32();
    assert_eq!(got[0].to_bits(), 0);
    assert_eq!(got[1].to_bits(), (-0.0f32).to_bits());
    assert!(got[2].is_nan());
    assert_eq!(got[3], 2.5);
    let got = run1("aten::relu.out", &[f(&[n], &x), out(DType::F32, &[n])]);
    assert!(same(
        &got.f32(),
        &x.iter()
            .map(|&v| if v < 0.0 { 0.0 } else { v })
            .collect::<Vec<_>>()
    ));
    let got = run1(
        "aten::relu.out",
        &[i(&[3], &[-3, 0, 4]), out(DType::I64, &[3])],
    );
    assert_eq!(got.i64(), [0, 0, 4]);
    let e = kerr(
        "aten::relu.out",
        &[b(&[1], &[true]), out(DType::Bool, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    // elu
    let got = run1(
        "aten::elu.out",
        &[
            f(&[n], &x),
            A::Dbl(1.5),
            A::Int(2),
            A::Dbl(0.5),
            out(DType::F32, &[n]),
        ],
    );
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            if v <= 0.0 {
                (v * 0.5).exp_m1() * (1.5 * 2.0)
            } else {
                v * 2.0
            }
        })
        .collect();
    assert_close(&got.f32(), &want, 2, "elu");
    // leaky_relu
    let got = run1(
        "aten::leaky_relu.out",
        &[f(&[n], &x), A::Dbl(0.01), out(DType::F32, &[n])],
    );
    assert!(same(
        &got.f32(),
        &x.iter()
            .map(|&v| if v > 0.0 { v } else { v * 0.01 })
            .collect::<Vec<_>>()
    ));
    let e = kerr(
        "aten::leaky_relu.out",
        &[i(&[1], &[1]), A::Dbl(0.01), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    // hardtanh
    let got = run1(
        "aten::hardtanh.out",
        &[
            f(&[4], &[f32::NAN, 5.0, -3.0, 0.5]),
            A::Int(-1),
            A::Int(1),
            out(DType::F32, &[4]),
        ],
    )
    .f32();
    assert!(got[0].is_nan());
    assert_eq!(&got[1..], &[1.0, -1.0, 0.5]);
    let got = run1(
        "aten::hardtanh.out",
        &[
            i(&[3], &[1, 5, -3]),
            A::Int(-1),
            A::Int(1),
            out(DType::I64, &[3]),
        ],
    );
    assert_eq!(got.i64(), [1, 1, -1]);
}

#[test]
fn dtype_keeping_unary() {
    let x = [-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 3.7, f32::NAN];
    let n = x.len();
    let cases: [(&str, fn(f32) -> f32); 7] = [
        ("neg", |v| -v),
        ("abs", |v| v.abs()),
        ("floor", |v| v.floor()),
        ("ceil", |v| v.ceil()),
        ("round", |v| {
            let r = v.round();
            if (v - v.trunc()).abs() == 0.5 {
                2.0 * (v / 2.0).round()
            } else {
                r
            }
        }),
        ("trunc", |v| v.trunc()),
        ("sign", |v| {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
    ];
    for (name, r) in cases {
        let got = run1(
            &std::format!("aten::{name}.out"),
            &[f(&[n], &x), out(DType::F32, &[n])],
        );
        let want: Vec<f32> = x.iter().map(|&v| r(v)).collect();
        let g = got.f32();
        for k in 0..n {
            assert!(
                g[k] == want[k] || (g[k].is_nan() && want[k].is_nan()),
                "{name}[{k}]: {} vs {}",
                g[k],
                want[k]
            );
        }
    }
    let xi = [-3i64, 0, 5, i64::MIN];
    let got = run1("aten::neg.out", &[i(&[4], &xi), out(DType::I64, &[4])]);
    assert_eq!(got.i64(), [3, 0, -5, i64::MIN]);
    let got = run1("aten::abs.out", &[i(&[4], &xi), out(DType::I64, &[4])]);
    assert_eq!(got.i64(), [3, 0, 5, i64::MIN]);
    let got = run1(
        "aten::abs.out",
        &[
            A::Raw(DType::I8, std::vec![2], std::vec![0x80, 0xfd]),
            out(DType::I8, &[2]),
        ],
    );
    assert_eq!(got.i64(), [-128, 3]);
    let got = run1(
        "aten::sign.out",
        &[i(&[3], &[-3, 0, 5]), out(DType::I64, &[3])],
    );
    assert_eq!(got.i64(), [-1, 0, 1]);
    let got = run1(
        "aten::sign.out",
        &[b(&[2], &[true, false]), out(DType::Bool, &[2])],
    );
    assert_eq!(got.bools(), [true, false]);
    let got = run1(
        "aten::floor.out",
        &[i(&[2], &[3, -2]), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [3, -2]);
    for name in ["neg", "abs", "floor"] {
        let e = kerr(
            &std::format!("aten::{name}.out"),
            &[b(&[1], &[true]), out(DType::Bool, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }), "{name}");
    }
}

#[test]
fn clamp_variants() {
    let nan = f32::NAN;
    let x = [nan, 1.0, 5.0, 2.5];
    let got = run1(
        "aten::clamp.out",
        &[f(&[4], &x), A::Dbl(2.0), A::Dbl(3.0), out(DType::F32, &[4])],
    )
    .f32();
    assert!(got[0].is_nan());
    assert_eq!(&got[1..], &[2.0, 3.0, 2.5]);
    let got = run1(
        "aten::clamp.out",
        &[
            f(&[2], &[1.0, 5.0]),
            A::Dbl(3.0),
            A::Dbl(2.0),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [2.0, 2.0]);
    let got = run1(
        "aten::clamp.out",
        &[
            f(&[2], &[1.0, 5.0]),
            A::Dbl(f64::NAN),
            A::Non,
            out(DType::F32, &[2]),
        ],
    );
    assert!(got.f32().iter().all(|v| v.is_nan()));
    let got = run1(
        "aten::clamp.out",
        &[
            f(&[3], &[1.0, 5.0, -9.0]),
            A::Non,
            A::Int(2),
            out(DType::F32, &[3]),
        ],
    );
    assert_eq!(got.f32(), [1.0, 2.0, -9.0]);
    let got = run1(
        "aten::clamp.out",
        &[
            i(&[2], &[1, 5]),
            A::Int(2),
            A::Int(3),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [2, 3]);
    // A float bound makes an int tensor float32.
    let got = run1(
        "aten::clamp.out",
        &[i(&[2], &[1, 5]), A::Dbl(2.5), A::Non, out(DType::F32, &[2])],
    );
    assert_eq!(got.f32(), [2.5, 5.0]);
    let e = kerr(
        "aten::clamp.out",
        &[i(&[2], &[1, 5]), A::Dbl(2.5), A::Non, out(DType::I64, &[2])],
    );
    assert!(matches!(e, KernelError::DTypeMismatch { .. }));
    let e = kerr(
        "aten::clamp.out",
        &[f(&[1], &[1.0]), A::Non, A::Non, out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::Value { .. }));
    // Tensor bounds with broadcasting and NaN from the bounds.
    let got = run1(
        "aten::clamp.Tensor_out",
        &[
            f(&[2], &[1.0, 5.0]),
            f(&[2], &[nan, 0.0]),
            f(&[2], &[3.0, nan]),
            out(DType::F32, &[2]),
        ],
    );
    assert!(got.f32().iter().all(|v| v.is_nan()));
    let mut rng = Rng(41);
    let xv = rng.f32s(12, -3.0, 3.0);
    let lo = rng.f32s(3, -2.0, 0.0);
    let hi = rng.f32s(4, 0.0, 2.0);
    let got = run1(
        "aten::clamp.Tensor_out",
        &[
            f(&[4, 3], &xv),
            f(&[3], &lo),
            f(&[4, 1], &hi),
            out(DType::F32, &[4, 3]),
        ],
    );
    let want: Vec<f32> = (0..12)
        .map(|k| xv[k].max(lo[k % 3]).min(hi[k / 3]))
        .collect();
    assert_eq!(got.f32(), want);
    let got = run1(
        "aten::clamp.Tensor_out",
        &[
            f(&[4, 3], &xv),
            A::Non,
            f(&[4, 1], &hi),
            out(DType::F32, &[4, 3]),
        ],
    );
    let want: Vec<f32> = (0..12).map(|k| xv[k].min(hi[k / 3])).collect();
    assert_eq!(got.f32(), want);
    let got = run1(
        "aten::clamp.Tensor_out",
        &[
            f(&[2], &[1.0, 5.0]),
            i(&[], &[2]),
            A::Non,
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [2.0, 5.0]);
    let e = kerr(
        "aten::clamp.Tensor_out",
        &[f(&[1], &[1.0]), A::Non, A::Non, out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::Value { .. }));
    let e = kerr(
        "aten::clamp.Tensor_out",
        &[
            f(&[2], &[1.0, 2.0]),
            f(&[3], &[0.0; 3]),
            A::Non,
            out(DType::F32, &[2]),
        ],
    );
    assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
}

#[test]
fn nan_inf_tests() {
    let x = [1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0];
    let got = run1("aten::isnan.out", &[f(&[5], &x), out(DType::Bool, &[5])]);
    assert_eq!(got.bools(), [false, true, false, false, false]);
    let got = run1("aten::isinf.out", &[f(&[5], &x), out(DType::Bool, &[5])]);
    assert_eq!(got.bools(), [false, false, true, true, false]);
    let got = run1(
        "aten::isinf.out",
        &[i(&[2], &[1, 2]), out(DType::Bool, &[2])],
    );
    assert_eq!(got.bools(), [false, false]);
    let got = run1(
        "aten::isnan.out",
        &[
            A::D(std::vec![2], std::vec![f64::NAN, 1.0]),
            out(DType::Bool, &[2]),
        ],
    );
    assert_eq!(got.bools(), [true, false]);
}

#[test]
fn pow_and_unary_f32_fast_paths() {
    for n in [0usize, 1, 3, 17, 129] {
        let xv: Vec<f32> = ramp(n, 4.0);
        for e in [2.0f64, 3.0, 0.5, -1.0, 1.7] {
            let g = run1(
                "aten::pow.Tensor_Scalar_out",
                &[f(&[n], &xv), A::Dbl(e), out(DType::F32, &[n])],
            )
            .f32();
            for (g, &x) in g.iter().zip(&xv) {
                let w = (x as f64).powf(e);
                assert!(
                    (*g as f64 - w).abs() <= 1e-6 * w.abs() + 1e-7 || (w.is_nan() && g.is_nan()),
                    "{x}^{e}: {g} vs {w}"
                );
            }
        }
        let g = run1(
            "aten::pow.Tensor_Scalar_out",
            &[f(&[n], &xv), A::Int(3), out(DType::F32, &[n])],
        )
        .f32();
        assert!(g.iter().zip(&xv).all(|(g, x)| *g == x * x * x));
        type R = fn(f64) -> f64;
        let refs: [(&str, R); 3] = [
            ("aten::tanh.out", f64::tanh),
            ("aten::sigmoid.out", |x| 1.0 / (1.0 + (-x).exp())),
            ("aten::exp.out", f64::exp),
        ];
        for (key, r) in refs {
            let g = run1(key, &[f(&[n], &xv), out(DType::F32, &[n])]).f32();
            for (g, &x) in g.iter().zip(&xv) {
                let w = r(x as f64);
                assert!((*g as f64 - w).abs() <= 5e-7 * w.abs() + 1e-7, "{key}({x})");
            }
        }
        for (mode, r) in [
            (
                "tanh",
                (|x: f64| {
                    let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                    x / (1.0 + (-2.0 * u).exp())
                }) as R,
            ),
            ("none", |x| {
                0.5 * x * libm::erfc(-x / core::f64::consts::SQRT_2)
            }),
        ] {
            let g = run1(
                "aten::gelu.out",
                &[f(&[n], &xv), A::Str(mode), out(DType::F32, &[n])],
            )
            .f32();
            for (g, &x) in g.iter().zip(&xv) {
                let w = r(x as f64);
                // erf-GELU: the rational erf's absolute error (vecmath::gelu_erf).
                let floor = if mode == "none" { 0.33 } else { 0.03 };
                assert!(
                    (*g as f64 - w).abs() <= 3e-6 * w.abs().max(floor),
                    "gelu {mode}({x})"
                );
            }
        }
    }
    // f64 stays on libm.
    let g = run1(
        "aten::tanh.out",
        &[
            A::D(std::vec![2], std::vec![0.5, -3.0]),
            out(DType::F64, &[2]),
        ],
    )
    .f64();
    assert_eq!(g, std::vec![0.5f64.tanh(), (-3.0f64).tanh()]);
}
