//! Tests of fills and `arange`.

use super::*;
use crate::kernels::portable::test_util::{f, i, kerr, out, run1, A};
use crate::tensor::{f16_to_f32, f32_to_f16};
use crate::testing::TestTensor;
use std::vec::Vec;

#[test]
fn fills() {
    let got = run1(
        "aten::full.out",
        &[
            A::List(std::vec![2, 3]),
            A::Dbl(2.5),
            out(DType::F32, &[2, 3]),
        ],
    );
    assert_eq!(got.shape, [2, 3]);
    assert_eq!(got.f32(), [2.5; 6]);
    let got = run1(
        "aten::full.out",
        &[A::List(std::vec![2]), A::Dbl(2.7), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [2, 2]);
    let got = run1(
        "aten::full.out",
        &[A::List(std::vec![3]), A::Bo(true), out(DType::Bool, &[3])],
    );
    assert_eq!(got.bools(), [true; 3]);
    let got = run1(
        "aten::full.out",
        &[
            A::List(std::vec![]),
            A::Dbl(f64::NEG_INFINITY),
            out(DType::F32, &[]),
        ],
    );
    assert_eq!(got.f32(), [f32::NEG_INFINITY]);
    let got = run1(
        "aten::full.out",
        &[
            A::List(std::vec![1, 0]),
            A::Int(1),
            out(DType::F32, &[1, 0]),
        ],
    );
    assert_eq!(got.numel(), 0);
    let e = kerr(
        "aten::full.out",
        &[A::List(std::vec![-1]), A::Int(1), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::Value { arg: 0, .. }));
    let e = kerr(
        "aten::full.out",
        &[A::List(std::vec![4]), A::Int(1), out(DType::F32, &[3])],
    );
    assert!(matches!(e, KernelError::Resize { .. }));
    let got = run1(
        "aten::zeros.out",
        &[A::List(std::vec![17]), out(DType::I64, &[17])],
    );
    assert_eq!(got.i64(), [0; 17]);
    let got = run1(
        "aten::ones.out",
        &[A::List(std::vec![2, 2]), out(DType::F32, &[2, 2])],
    );
    assert_eq!(got.f32(), [1.0; 4]);
    let got = run1(
        "aten::full_like.out",
        &[
            i(&[3], &[1, 2, 3]),
            A::Dbl(-0.5),
            A::Non,
            out(DType::F32, &[3]),
        ],
    );
    assert_eq!(got.f32(), [-0.5; 3]);
    let got = run1(
        "aten::scalar_tensor.out",
        &[A::Dbl(0.25), out(DType::F32, &[])],
    );
    assert_eq!((got.shape.len(), got.f32()), (0, std::vec![0.25]));
    let got = run1(
        "aten::scalar_tensor.out",
        &[A::Int(-7), out(DType::I64, &[])],
    );
    assert_eq!(got.i64(), [-7]);
    let got = run1(
        "aten::fill.Scalar_out",
        &[f(&[2, 2], &[0.0; 4]), A::Int(3), out(DType::F32, &[2, 2])],
    );
    assert_eq!(got.f32(), [3.0; 4]);
    let got = run1(
        "aten::fill.Tensor_out",
        &[f(&[3], &[0.0; 3]), f(&[], &[1.5]), out(DType::F32, &[3])],
    );
    assert_eq!(got.f32(), [1.5; 3]);
    let e = kerr(
        "aten::fill.Tensor_out",
        &[f(&[3], &[0.0; 3]), f(&[1], &[1.5]), out(DType::F32, &[3])],
    );
    assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
    // f16 out
    let got = run1(
        "aten::full.out",
        &[A::List(std::vec![1]), A::Dbl(0.1), out(DType::F16, &[1])],
    );
    assert_eq!(got.f64(), [f16_to_f32(f32_to_f16(0.1)) as f64]);
}

#[test]
fn arange() {
    let ar = |s: A, e: A, st: A, dt: DType, cap: usize| -> TestTensor {
        run1(
            "aten::arange.start_out",
            &[s, e, st, A::OutDyn(dt, std::vec![cap])],
        )
    };
    let got = ar(A::Int(0), A::Dbl(5.5), A::Int(1), DType::I64, 16);
    assert_eq!(got.i64(), [0, 1, 2, 3, 4, 5]);
    let got = ar(A::Dbl(0.5), A::Int(5), A::Int(1), DType::I64, 16);
    assert_eq!(got.i64(), [0, 1, 2, 3, 4]);
    let got = ar(A::Int(0), A::Int(5), A::Dbl(0.3), DType::I64, 32);
    assert_eq!(got.i64(), [0; 17]);
    let got = ar(A::Int(-3), A::Int(5), A::Dbl(2.5), DType::F32, 16);
    assert_eq!(got.f32(), [-3.0, -0.5, 2.0, 4.5]);
    let got = ar(A::Int(0), A::Int(1), A::Dbl(0.1), DType::F32, 16);
    let want: Vec<f32> = (0..10).map(|k| (0.1 * k as f64) as f32).collect();
    assert_eq!(got.f32(), want);
    let got = ar(A::Int(10), A::Int(0), A::Int(-3), DType::I64, 16);
    assert_eq!(got.i64(), [10, 7, 4, 1]);
    let got = ar(A::Int(0), A::Int(10), A::Int(3), DType::I32, 16);
    assert_eq!(got.i64(), [0, 3, 6, 9]);
    let got = ar(A::Int(5), A::Int(5), A::Int(1), DType::I64, 4);
    assert_eq!(got.shape, [0]);
    let got = ar(A::Int(1), A::Int(4), A::Int(1), DType::F64, 4);
    assert_eq!(got.f64(), [1.0, 2.0, 3.0]);
    // int64 lengths and values are exact beyond 2^53.
    let s = 1i64 << 62;
    let got = ar(A::Int(s), A::Int(s + 5), A::Int(1), DType::I64, 8);
    assert_eq!(got.i64(), [s, s + 1, s + 2, s + 3, s + 4]);
    let got = ar(A::Int(0), A::Int(1 << 62), A::Int(1 << 60), DType::I64, 8);
    assert_eq!(got.i64(), [0, 1 << 60, 2 << 60, 3 << 60]);
    // arange.out(end) into a static out
    let got = run1("aten::arange.out", &[A::Int(7), out(DType::I64, &[7])]);
    assert_eq!(got.i64(), [0, 1, 2, 3, 4, 5, 6]);
    let got = run1("aten::arange.out", &[A::Dbl(2.5), out(DType::F32, &[3])]);
    assert_eq!(got.f32(), [0.0, 1.0, 2.0]);
    // errors
    let e = kerr(
        "aten::arange.start_out",
        &[
            A::Int(0),
            A::Int(5),
            A::Int(0),
            A::OutDyn(DType::I64, std::vec![8]),
        ],
    );
    assert!(matches!(e, KernelError::Value { arg: 2, .. }));
    let e = kerr(
        "aten::arange.start_out",
        &[
            A::Int(0),
            A::Int(10),
            A::Int(-3),
            A::OutDyn(DType::I64, std::vec![8]),
        ],
    );
    assert!(matches!(e, KernelError::Value { arg: 2, .. }));
    let e = kerr(
        "aten::arange.start_out",
        &[
            A::Int(0),
            A::Dbl(f64::INFINITY),
            A::Int(1),
            A::OutDyn(DType::F32, std::vec![8]),
        ],
    );
    assert!(matches!(e, KernelError::Value { .. }));
    let e = kerr("aten::arange.out", &[A::Int(9), out(DType::I64, &[7])]);
    assert!(matches!(e, KernelError::Resize { .. }));
    let e = kerr("aten::arange.out", &[A::Int(2), out(DType::Bool, &[2])]);
    assert!(matches!(e, KernelError::UnsupportedDType { .. }));
}
