//! Tests of binary arithmetic: broadcasting, promotion, rounding modes, errors and the f32 fast
//! paths.

use super::*;
use crate::kernels::portable::test_util::{
    assert_close, b, f, i, kerr, numel, out, ramp, run1, run_args, same, A, SHAPE_PAIRS,
};
use crate::tensor::{f16_to_f32, f32_to_f16};
use crate::testing::{broadcast_dims, broadcast_index, OpTest, Rng};
use std::vec::Vec;

#[test]
fn add_sub_mul_div_f32_broadcast() {
    let mut rng = Rng(7);
    for &(sa, sb) in SHAPE_PAIRS {
        let so = broadcast_dims(sa, sb);
        let a = rng.f32s(numel(sa), -4.0, 4.0);
        let bv = rng.f32s(numel(sb), 0.5, 3.0);
        let n = numel(&so);
        let pa = |k: usize| a[broadcast_index(k, &so, sa)];
        let pb = |k: usize| bv[broadcast_index(k, &so, sb)];
        for alpha in [1.0f64, 2.5, -1.0] {
            let al = alpha as f32;
            let want: Vec<f32> = (0..n).map(|k| pa(k) + al * pb(k)).collect();
            let want = if alpha == 1.0 {
                (0..n).map(|k| pa(k) + pb(k)).collect()
            } else {
                want
            };
            let got = run1(
                "aten::add.out",
                &[f(sa, &a), f(sb, &bv), A::Dbl(alpha), out(DType::F32, &so)],
            );
            assert_eq!(got.shape, so);
            assert!(same(&got.f32(), &want), "add {sa:?} {sb:?} alpha {alpha}");
            let want: Vec<f32> = (0..n).map(|k| pa(k) - al * pb(k)).collect();
            let got = run1(
                "aten::sub.out",
                &[f(sa, &a), f(sb, &bv), A::Dbl(alpha), out(DType::F32, &so)],
            );
            if alpha != 1.0 {
                assert!(same(&got.f32(), &want), "sub {sa:?} {sb:?}");
            } else {
                let w: Vec<f32> = (0..n).map(|k| pa(k) - pb(k)).collect();
                assert!(same(&got.f32(), &w), "sub {sa:?} {sb:?}");
            }
        }
        let cases: [(&str, fn(f32, f32) -> f32); 5] = [
            ("aten::mul.out", |x, y| x * y),
            ("aten::div.out", |x, y| x / y),
            ("aten::maximum.out", |x, y| if x < y { y } else { x }),
            ("aten::minimum.out", |x, y| if y < x { y } else { x }),
            ("aten::floor_divide.out", |x, y| {
                let q = (x - x % y) / y;
                let q = if x % y != 0.0 && ((y < 0.0) != (x % y < 0.0)) {
                    q - 1.0
                } else {
                    q
                };
                let fl = q.floor();
                if q - fl > 0.5 {
                    fl + 1.0
                } else {
                    fl
                }
            }),
        ];
        for (key, op) in cases {
            let want: Vec<f32> = (0..n).map(|k| op(pa(k), pb(k))).collect();
            let got = run1(key, &[f(sa, &a), f(sb, &bv), out(DType::F32, &so)]);
            assert_eq!(got.shape, so, "{key}");
            assert!(same(&got.f32(), &want), "{key} {sa:?} {sb:?}");
        }
    }
}

#[test]
fn int64_arithmetic() {
    let mut rng = Rng(11);
    for &(sa, sb) in SHAPE_PAIRS {
        let so = broadcast_dims(sa, sb);
        let a = rng.i64s(numel(sa), -50, 50);
        let mut bv = rng.i64s(numel(sb), -9, 9);
        for v in bv.iter_mut() {
            if *v == 0 {
                *v = 3;
            }
        }
        let n = numel(&so);
        let pa = |k: usize| a[broadcast_index(k, &so, sa)];
        let pb = |k: usize| bv[broadcast_index(k, &so, sb)];
        let got = run1(
            "aten::add.out",
            &[i(sa, &a), i(sb, &bv), A::Int(3), out(DType::I64, &so)],
        );
        assert_eq!(
            got.i64(),
            (0..n).map(|k| pa(k) + 3 * pb(k)).collect::<Vec<_>>()
        );
        let got = run1(
            "aten::sub.out",
            &[i(sa, &a), i(sb, &bv), A::Int(1), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| pa(k) - pb(k)).collect::<Vec<_>>());
        let got = run1(
            "aten::mul.out",
            &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| pa(k) * pb(k)).collect::<Vec<_>>());
        let got = run1(
            "aten::floor_divide.out",
            &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
        );
        assert_eq!(
            got.i64(),
            (0..n)
                .map(|k| pa(k).div_euclid(pb(k))
                    - if pb(k) < 0 && pa(k).rem_euclid(pb(k)) != 0 {
                        1
                    } else {
                        0
                    })
                .collect::<Vec<_>>(),
            "floor_divide {sa:?} {sb:?}"
        );
        let got = run1(
            "aten::remainder.Tensor_out",
            &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
        );
        let py_mod = |x: i64, y: i64| ((x % y) + y) % y;
        assert_eq!(
            got.i64(),
            (0..n).map(|k| py_mod(pa(k), pb(k))).collect::<Vec<_>>()
        );
        let got = run1(
            "aten::fmod.Tensor_out",
            &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| pa(k) % pb(k)).collect::<Vec<_>>());
        let got = run1(
            "aten::div.out_mode",
            &[i(sa, &a), i(sb, &bv), A::Str("trunc"), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| pa(k) / pb(k)).collect::<Vec<_>>());
        // int / int is true division in float32.
        let got = run1(
            "aten::div.out",
            &[i(sa, &a), i(sb, &bv), out(DType::F32, &so)],
        );
        let want: Vec<f32> = (0..n).map(|k| pa(k) as f32 / pb(k) as f32).collect();
        assert!(same(&got.f32(), &want));
        let got = run1(
            "aten::div.out_mode",
            &[i(sa, &a), i(sb, &bv), A::Non, out(DType::F32, &so)],
        );
        assert!(same(&got.f32(), &want));
        let got = run1(
            "aten::maximum.out",
            &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
        );
        assert_eq!(
            got.i64(),
            (0..n).map(|k| pa(k).max(pb(k))).collect::<Vec<_>>()
        );
    }
    // Wrapping, exactness beyond 2^53.
    let big = (1i64 << 62) + 1;
    let got = run1(
        "aten::add.out",
        &[
            i(&[2], &[big, i64::MAX]),
            i(&[2], &[big, 1]),
            A::Int(1),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [big.wrapping_add(big), i64::MIN]);
    let got = run1(
        "aten::div.out_mode",
        &[
            i(&[4], &[7, -7, 7, -7]),
            i(&[4], &[2, 2, -2, -2]),
            A::Str("floor"),
            out(DType::I64, &[4]),
        ],
    );
    assert_eq!(got.i64(), [3, -4, -4, 3]);
}

#[test]
fn float_rounding_modes_and_remainders() {
    let x = [5.0f32, -3.0, 0.0, 7.5, -7.5, 1.0];
    let y = [0.0f32, 0.0, 0.0, 2.0, 2.0, -0.0];
    let got = run1(
        "aten::div.out_mode",
        &[
            f(&[6], &x),
            f(&[6], &y),
            A::Str("floor"),
            out(DType::F32, &[6]),
        ],
    );
    let g = got.f32();
    assert_eq!(g[0], f32::INFINITY);
    assert_eq!(g[1], f32::NEG_INFINITY);
    assert!(g[2].is_nan());
    assert_eq!(&g[3..5], &[3.0, -4.0]);
    assert_eq!(g[5], f32::NEG_INFINITY);
    let got = run1(
        "aten::div.out_mode",
        &[
            f(&[6], &x),
            f(&[6], &y),
            A::Str("trunc"),
            out(DType::F32, &[6]),
        ],
    );
    assert_eq!(&got.f32()[3..5], &[3.0, -3.0]);
    let got = run1(
        "aten::remainder.Scalar_out",
        &[
            f(&[3], &[5.0, -3.0, 3.0]),
            A::Int(-2),
            out(DType::F32, &[3]),
        ],
    );
    assert_eq!(got.f32(), [-1.0, -1.0, -1.0]);
    let got = run1(
        "aten::remainder.Scalar_out",
        &[f(&[2], &[5.0, -3.0]), A::Dbl(0.0), out(DType::F32, &[2])],
    );
    assert!(got.f32().iter().all(|v| v.is_nan()));
    let got = run1(
        "aten::fmod.Scalar_out",
        &[
            f(&[3], &[5.5, -5.5, 2.0]),
            A::Dbl(2.0),
            out(DType::F32, &[3]),
        ],
    );
    assert_eq!(got.f32(), [1.5, -1.5, 0.0]);
    // int tensor with a float scalar computes in float32.
    let got = run1(
        "aten::fmod.Scalar_out",
        &[i(&[1], &[5]), A::Dbl(1.5), out(DType::F32, &[1])],
    );
    assert_eq!(got.f32(), [0.5]);
    let got = run1(
        "aten::remainder.Scalar_out",
        &[i(&[4], &[-7, 7, -1, 0]), A::Int(3), out(DType::I64, &[4])],
    );
    assert_eq!(got.i64(), [2, 1, 2, 0]);
    let got = run1(
        "aten::div.Scalar_mode_out",
        &[
            i(&[2], &[-7, 7]),
            A::Int(2),
            A::Str("floor"),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [-4, 3]);
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for key in [
        "aten::floor_divide.out",
        "aten::remainder.Tensor_out",
        "aten::fmod.Tensor_out",
    ] {
        let e = kerr(
            key,
            &[i(&[2], &[5, 3]), i(&[2], &[0, 1]), out(DType::I64, &[2])],
        );
        assert!(
            matches!(e, KernelError::Value { arg: 1, .. }),
            "{key}: {e:?}"
        );
    }
    for key in ["aten::remainder.Scalar_out", "aten::fmod.Scalar_out"] {
        let e = kerr(key, &[i(&[2], &[5, 3]), A::Int(0), out(DType::I64, &[2])]);
        assert!(
            matches!(e, KernelError::Value { arg: 1, .. }),
            "{key}: {e:?}"
        );
    }
    let e = kerr(
        "aten::div.out_mode",
        &[
            i(&[1], &[5]),
            i(&[1], &[0]),
            A::Str("trunc"),
            out(DType::I64, &[1]),
        ],
    );
    assert!(matches!(e, KernelError::Value { arg: 1, .. }));
    // True division by zero is fine (float result).
    let got = run1(
        "aten::div.out",
        &[i(&[2], &[5, 3]), i(&[2], &[0, 1]), out(DType::F32, &[2])],
    );
    assert_eq!(got.f32(), [f32::INFINITY, 3.0]);
    let e = kerr(
        "aten::div.out_mode",
        &[
            i(&[1], &[5]),
            i(&[1], &[1]),
            A::Str("round"),
            out(DType::I64, &[1]),
        ],
    );
    assert!(matches!(e, KernelError::Value { arg: 2, .. }));
}

#[test]
fn promotion_rules() {
    // int64 + float32 → float32 (ints converted to f32 first).
    let got = run1(
        "aten::add.out",
        &[
            i(&[2], &[16777217, 3]),
            f(&[2], &[0.0, 0.5]),
            A::Int(1),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [16777216.0, 3.5]);
    // A zero-dim f64 does not widen a dimensioned f32.
    let got = run1(
        "aten::mul.out",
        &[
            f(&[2], &[1.0, 3.0]),
            A::D(std::vec![], std::vec![0.1]),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [0.1f32, 3.0 * 0.1f32]);
    // int8 arithmetic wraps in int8 even into an int64 out.
    let got = run1(
        "aten::add.out",
        &[
            A::Raw(DType::I8, std::vec![1], std::vec![100]),
            A::Raw(DType::I8, std::vec![1], std::vec![100]),
            A::Int(1),
            out(DType::I64, &[1]),
        ],
    );
    assert_eq!(got.i64(), [-56]);
    // uint8 tensor + negative int scalar stays uint8.
    let got = run1(
        "aten::add.Scalar_out",
        &[
            A::Raw(DType::U8, std::vec![2], std::vec![1, 200]),
            A::Int(-3),
            A::Int(1),
            out(DType::U8, &[2]),
        ],
    );
    assert_eq!(got.i64(), [254, 197]);
    // bool + bool is logical or; into an int64 out it is 0/1.
    let got = run1(
        "aten::add.out",
        &[
            b(&[2], &[true, true]),
            b(&[2], &[true, false]),
            A::Int(1),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [1, 1]);
    let got = run1(
        "aten::mul.out",
        &[
            b(&[3], &[true, true, false]),
            b(&[3], &[true, false, false]),
            out(DType::Bool, &[3]),
        ],
    );
    assert_eq!(got.bools(), [true, false, false]);
    // Int tensor with a double scalar → float32.
    let got = run1(
        "aten::mul.Scalar_out",
        &[i(&[2], &[3, -2]), A::Dbl(0.5), out(DType::F32, &[2])],
    );
    assert_eq!(got.f32(), [1.5, -1.0]);
    // f32 compute result into an f64 out.
    let got = run1(
        "aten::add.out",
        &[
            f(&[1], &[0.1]),
            f(&[1], &[0.2]),
            A::Int(1),
            out(DType::F64, &[1]),
        ],
    );
    assert_eq!(got.f64(), [(0.1f32 + 0.2f32) as f64]);
    // f16 inputs compute in f32 and round to f16.
    let h = |v: &[f32]| -> A {
        A::Raw(
            DType::F16,
            std::vec![v.len()],
            v.iter()
                .flat_map(|x| f32_to_f16(*x).to_le_bytes())
                .collect(),
        )
    };
    let got = run1(
        "aten::mul.out",
        &[h(&[1.1, 2.0]), h(&[3.3, 0.25]), out(DType::F32, &[2])],
    );
    let r = |x: f32| f16_to_f32(f32_to_f16(x));
    assert_eq!(got.f32(), [r(r(1.1) * r(3.3)), 0.5]);
}

#[test]
fn arithmetic_errors() {
    // float result into an int out
    let e = kerr(
        "aten::add.out",
        &[
            f(&[1], &[1.5]),
            f(&[1], &[1.5]),
            A::Int(1),
            out(DType::I64, &[1]),
        ],
    );
    assert!(
        matches!(e, KernelError::DTypeMismatch { arg: 3, .. }),
        "{e:?}"
    );
    // int result into a bool out
    let e = kerr(
        "aten::mul.out",
        &[i(&[1], &[1]), i(&[1], &[1]), out(DType::Bool, &[1])],
    );
    assert!(matches!(e, KernelError::DTypeMismatch { arg: 2, .. }));
    // int / int into an int out
    let e = kerr(
        "aten::div.out",
        &[i(&[1], &[1]), i(&[1], &[1]), out(DType::I64, &[1])],
    );
    assert!(matches!(e, KernelError::DTypeMismatch { .. }));
    // bool subtraction
    let e = kerr(
        "aten::sub.out",
        &[
            b(&[1], &[true]),
            b(&[1], &[true]),
            A::Int(1),
            out(DType::Bool, &[1]),
        ],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    let e = kerr(
        "aten::rsub.Scalar_out",
        &[
            b(&[1], &[true]),
            A::Int(1),
            A::Int(1),
            out(DType::I64, &[1]),
        ],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    // floating alpha with integers
    let e = kerr(
        "aten::add.out",
        &[
            i(&[1], &[1]),
            i(&[1], &[1]),
            A::Dbl(0.5),
            out(DType::I64, &[1]),
        ],
    );
    assert!(matches!(e, KernelError::Value { arg: 2, .. }));
    // not broadcastable
    let e = kerr(
        "aten::add.out",
        &[
            f(&[2, 3], &[0.0; 6]),
            f(&[2], &[0.0; 2]),
            A::Int(1),
            out(DType::F32, &[2, 3]),
        ],
    );
    assert!(matches!(e, KernelError::Shape { arg: 1, .. }), "{e:?}");
    // static out of the wrong shape
    let e = kerr(
        "aten::mul.out",
        &[
            f(&[2, 3], &[0.0; 6]),
            f(&[3], &[0.0; 3]),
            out(DType::F32, &[3, 3]),
        ],
    );
    assert!(matches!(e, KernelError::Resize { arg: 2, .. }), "{e:?}");
    // wrong argument count
    let e = kerr(
        "aten::mul.out",
        &[
            f(&[1], &[0.0]),
            f(&[1], &[0.0]),
            A::Int(1),
            out(DType::F32, &[1]),
        ],
    );
    assert!(matches!(
        e,
        KernelError::ArgCount {
            expected: 4,
            got: 5
        }
    ));
    // a scalar where a tensor is expected
    let e = kerr(
        "aten::mul.out",
        &[f(&[1], &[0.0]), A::Int(2), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::ArgType { arg: 1, .. }));
    // pow of bools
    let e = kerr(
        "aten::pow.Tensor_Tensor_out",
        &[b(&[1], &[true]), b(&[1], &[true]), out(DType::Bool, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    // int ** negative int scalar
    let e = kerr(
        "aten::pow.Tensor_Scalar_out",
        &[i(&[2], &[2, 3]), A::Int(-1), out(DType::I64, &[2])],
    );
    assert!(matches!(e, KernelError::Value { arg: 1, .. }));
}

#[test]
fn dynamic_output_resizes() {
    let mut t = OpTest::new("aten::add.out");
    let a = t.input_f32(&[2, 1], &[1.0, 2.0]);
    let c = t.input_f32(&[3], &[10.0, 20.0, 30.0]);
    let al = t.int(1);
    let o = t.output_dynamic(DType::F32, &[16]);
    t.call(&[a, c, al, o, o]);
    let r = t.run().unwrap();
    assert_eq!(r[0].shape, [2, 3]);
    assert_eq!(r[0].f32(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
}

#[test]
fn scalar_overloads() {
    let x = [1.5f32, -2.0, 0.25];
    let got = run1(
        "aten::add.Scalar_out",
        &[f(&[3], &x), A::Dbl(0.1), A::Int(2), out(DType::F32, &[3])],
    );
    let want: Vec<f32> = x.iter().map(|v| v + 2.0 * 0.1f32).collect();
    assert!(same(&got.f32(), &want));
    let got = run1(
        "aten::sub.Scalar_out",
        &[f(&[3], &x), A::Int(1), A::Int(1), out(DType::F32, &[3])],
    );
    assert_eq!(got.f32(), [0.5, -3.0, -0.75]);
    let got = run1(
        "aten::rsub.Scalar_out",
        &[f(&[3], &x), A::Int(1), A::Dbl(2.0), out(DType::F32, &[3])],
    );
    assert_eq!(got.f32(), [-2.0, 5.0, 0.5]);
    let got = run1(
        "aten::rsub.Scalar_out",
        &[
            i(&[2], &[3, -4]),
            A::Int(10),
            A::Int(1),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [7, 14]);
    let got = run1(
        "aten::mul.Scalar_out",
        &[f(&[3], &x), A::Dbl(-2.0), out(DType::F32, &[3])],
    );
    assert_eq!(got.f32(), [-3.0, 4.0, -0.5]);
    let got = run1(
        "aten::div.Scalar_out",
        &[i(&[3], &[1, 2, -3]), A::Int(2), out(DType::F32, &[3])],
    );
    assert_eq!(got.f32(), [0.5, 1.0, -1.5]);
    let got = run1(
        "aten::div.Scalar_out",
        &[f(&[0], &[]), A::Int(2), out(DType::F32, &[0])],
    );
    assert_eq!(got.shape, [0]);
    let got = run1(
        "aten::add.Scalar_out",
        &[f(&[], &[4.0]), A::Bo(true), A::Int(1), out(DType::F32, &[])],
    );
    assert_eq!(got.f32(), [5.0]);
}

#[test]
fn pow_variants() {
    let mut rng = Rng(3);
    let x = rng.f32s(129, 0.1, 3.0);
    let run_pow = |e: A| {
        run1(
            "aten::pow.Tensor_Scalar_out",
            &[f(&[129], &x), e, out(DType::F32, &[129])],
        )
        .f32()
    };
    assert!(same(
        &run_pow(A::Int(2)),
        &x.iter().map(|v| v * v).collect::<Vec<_>>()
    ));
    assert!(same(
        &run_pow(A::Dbl(3.0)),
        &x.iter().map(|v| v * v * v).collect::<Vec<_>>()
    ));
    assert!(same(
        &run_pow(A::Dbl(0.5)),
        &x.iter().map(|v| v.sqrt()).collect::<Vec<_>>()
    ));
    assert!(same(
        &run_pow(A::Dbl(-0.5)),
        &x.iter().map(|v| 1.0 / v.sqrt()).collect::<Vec<_>>()
    ));
    assert!(same(
        &run_pow(A::Int(-1)),
        &x.iter().map(|v| 1.0 / v).collect::<Vec<_>>()
    ));
    assert!(same(
        &run_pow(A::Int(-2)),
        &x.iter().map(|v| 1.0 / (v * v)).collect::<Vec<_>>()
    ));
    assert_close(
        &run_pow(A::Dbl(1.7)),
        &x.iter().map(|v| v.powf(1.7)).collect::<Vec<_>>(),
        2,
        "pow 1.7",
    );
    assert_close(&run_pow(A::Int(0)), &[1.0; 129], 0, "pow 0");
    // Integer base with an integer exponent stays integral and exact.
    let got = run1(
        "aten::pow.Tensor_Scalar_out",
        &[i(&[4], &[2, -3, 0, 3]), A::Int(3), out(DType::I64, &[4])],
    );
    assert_eq!(got.i64(), [8, -27, 0, 27]);
    let got = run1(
        "aten::pow.Tensor_Scalar_out",
        &[b(&[2], &[true, false]), A::Int(2), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [1, 0]);
    let got = run1(
        "aten::pow.Tensor_Scalar_out",
        &[i(&[2], &[2, 3]), A::Dbl(0.5), out(DType::F32, &[2])],
    );
    assert_eq!(got.f32(), [2f32.sqrt(), 3f32.sqrt()]);
    // Tensor ** Tensor with broadcasting.
    let e = rng.f32s(3, -2.0, 2.0);
    let base = rng.f32s(6, 0.5, 2.0);
    let got = run1(
        "aten::pow.Tensor_Tensor_out",
        &[f(&[2, 3], &base), f(&[3], &e), out(DType::F32, &[2, 3])],
    );
    let want: Vec<f32> = (0..6).map(|k| base[k].powf(e[k % 3])).collect();
    assert_close(&got.f32(), &want, 2, "pow tt");
    let got = run1(
        "aten::pow.Tensor_Tensor_out",
        &[
            i(&[5], &[2, 3, 1, -1, 0]),
            i(&[5], &[10, -1, -5, -3, -1]),
            out(DType::I64, &[5]),
        ],
    );
    assert_eq!(got.i64(), [1024, 0, 1, -1, 0]);
    let got = run1(
        "aten::pow.Scalar_out",
        &[A::Int(2), i(&[3], &[3, 4, 0]), out(DType::I64, &[3])],
    );
    assert_eq!(got.i64(), [8, 16, 1]);
    let got = run1(
        "aten::pow.Scalar_out",
        &[A::Dbl(2.5), i(&[2], &[3, 4]), out(DType::F32, &[2])],
    );
    assert_close(&got.f32(), &[15.625, 39.0625], 1, "pow scalar base");
}

#[test]
fn maximum_minimum_nan() {
    let nan = f32::NAN;
    let a = [nan, 1.0, 2.0, -1.0];
    let c = [1.0, nan, 3.0, -2.0];
    let got = run1(
        "aten::maximum.out",
        &[f(&[4], &a), f(&[4], &c), out(DType::F32, &[4])],
    )
    .f32();
    assert!(got[0].is_nan() && got[1].is_nan());
    assert_eq!(&got[2..], &[3.0, -1.0]);
    let got = run1(
        "aten::minimum.out",
        &[f(&[4], &a), f(&[4], &c), out(DType::F32, &[4])],
    )
    .f32();
    assert!(got[0].is_nan() && got[1].is_nan());
    assert_eq!(&got[2..], &[2.0, -2.0]);
    let got = run1(
        "aten::maximum.out",
        &[
            b(&[2], &[true, false]),
            b(&[2], &[false, false]),
            out(DType::Bool, &[2]),
        ],
    );
    assert_eq!(got.bools(), [true, false]);
}

#[test]
fn arith_f32_fast_broadcast_forms() {
    // (x shape, y shape): same shape, scalar, one-element tensor, trailing row, left row,
    // per-row column, leading broadcast of a block, general (no fast path).
    let cases: [(&[usize], &[usize]); 10] = [
        (&[17], &[17]),
        (&[3, 129], &[3, 129]),
        (&[2, 3, 17], &[17]),
        (&[17], &[2, 3, 17]),
        (&[4, 3], &[4, 1]),
        (&[1, 4, 16, 16], &[1, 1, 16, 16]),
        (&[5, 1], &[1, 3]),
        (&[2, 3, 4], &[1]),
        (&[1], &[3, 1, 5]),
        (&[0, 3], &[3]),
    ];
    for (xs, ys) in cases {
        let os = broadcast_dims(xs, ys);
        let xv = ramp(numel(xs), 3.0);
        let yv: Vec<f32> = ramp(numel(ys), -2.0).iter().map(|v| v + 0.5).collect();
        for (key, op) in [
            ("aten::add.out", 0),
            ("aten::sub.out", 1),
            ("aten::mul.out", 2),
            ("aten::div.out", 3),
            ("aten::maximum.out", 4),
            ("aten::minimum.out", 5),
        ] {
            let mut args = std::vec![f(xs, &xv), f(ys, &yv)];
            if op < 2 {
                args.push(A::Int(1));
            }
            args.push(out(DType::F32, &os));
            let got = run1(key, &args);
            assert_eq!(got.shape, os);
            let g = got.f32();
            for (o, &gv) in g.iter().enumerate() {
                let a = xv[broadcast_index(o, &os, xs)];
                let b = yv[broadcast_index(o, &os, ys)];
                let w = match op {
                    0 => a + b,
                    1 => a - b,
                    2 => a * b,
                    3 => a / b,
                    4 => a.max(b),
                    _ => a.min(b),
                };
                assert_eq!(gv, w, "{key} {xs:?} {ys:?} at {o}");
            }
        }
        // alpha != 1 takes the generic path and still matches.
        let got = run1(
            "aten::add.out",
            &[f(xs, &xv), f(ys, &yv), A::Dbl(2.5), out(DType::F32, &os)],
        )
        .f32();
        for (o, &gv) in got.iter().enumerate() {
            let w = xv[broadcast_index(o, &os, xs)] + 2.5 * yv[broadcast_index(o, &os, ys)];
            assert!((gv - w).abs() <= 1e-6 * w.abs().max(1.0));
        }
    }
    // Scalar overloads and NaN propagation of maximum.
    let xv = ramp(129, 2.0);
    let g = run1(
        "aten::mul.Scalar_out",
        &[f(&[129], &xv), A::Dbl(-1.5), out(DType::F32, &[129])],
    )
    .f32();
    assert!(g.iter().zip(&xv).all(|(g, x)| *g == x * -1.5));
    let g = run1(
        "aten::maximum.out",
        &[
            f(&[3], &[1.0, f32::NAN, 3.0]),
            f(&[3], &[2.0, 0.0, f32::NAN]),
            out(DType::F32, &[3]),
        ],
    )
    .f32();
    assert_eq!(g[0], 2.0);
    assert!(g[1].is_nan() && g[2].is_nan());
    // Wrong output shape is an error, not a panic.
    assert!(run_args(
        "aten::add.out",
        &[
            f(&[3], &[1.0; 3]),
            f(&[2], &[1.0; 2]),
            A::Int(1),
            out(DType::F32, &[3])
        ]
    )
    .is_err());
}

/// `add`/`sub` with alpha 1 (Int or Double) and `mul` of same-shape f32 tensors into an
/// output of that shape (`same_shape_f32`, bound to raw storage) give the reference's bits;
/// an output of another current shape is resized by the general path; a Bool alpha is still
/// the general path's error.
#[test]
fn same_shape_f32_operands_match_the_reference() {
    let mut rng = Rng(41);
    for dims in [&[1usize][..], &[3], &[17], &[129], &[3, 129], &[1, 17, 3]] {
        let n = numel(dims);
        let x = rng.f32s(n, -4.0, 4.0);
        let y = rng.f32s(n, -4.0, 4.0);
        type Case = (&'static str, Option<A>, fn(f32, f32) -> f32);
        let cases: [Case; 5] = [
            ("aten::add.out", Some(A::Int(1)), |a, b| a + b),
            ("aten::add.out", Some(A::Dbl(1.0)), |a, b| a + b),
            ("aten::sub.out", Some(A::Int(1)), |a, b| a - b),
            ("aten::sub.out", Some(A::Dbl(1.0)), |a, b| a - b),
            ("aten::mul.out", None, |a, b| a * b),
        ];
        for (key, alpha, op) in cases {
            let want: Vec<f32> = x.iter().zip(&y).map(|(&a, &b)| op(a, b)).collect();
            for o in [out(DType::F32, dims), A::OutDyn(DType::F32, vec![n + 5])] {
                let mut args = vec![f(dims, &x), f(dims, &y)];
                args.extend(alpha.clone());
                args.push(o);
                let got = run1(key, &args);
                assert_eq!(got.shape, dims, "{key} {dims:?}");
                assert!(same(&got.f32(), &want), "{key} {dims:?}");
            }
        }
        let e = kerr(
            "aten::add.out",
            &[f(dims, &x), f(dims, &y), A::Bo(true), out(DType::F32, dims)],
        );
        assert!(matches!(e, KernelError::Value { arg: 2, .. }), "{e:?}");
    }
}
