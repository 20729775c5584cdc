//! Tests of the slicing kernels against Python slice rules.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, numel, ravel, unary_f32, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

/// Python slice reference.
fn py_slice(n: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Vec<usize> {
    let fix = |v: i64| {
        let v = if v < 0 { v + n } else { v };
        v.clamp(0, n)
    };
    let s = fix(start.unwrap_or(0));
    let e = fix(end.unwrap_or(n));
    let mut out = Vec::new();
    let mut i = s;
    while i < e {
        out.push(i as usize);
        i += step;
    }
    out
}

#[test]
fn slice_copy_python_rules() {
    let d = [3, 17, 2];
    let x = data(numel(&d), 10);
    let cases: &[(i64, Option<i64>, Option<i64>, i64)] = &[
        (1, None, None, 1),
        (1, Some(2), Some(9), 1),
        (1, Some(-5), None, 2),
        (1, Some(-100), Some(100), 3),
        (-2, Some(4), Some(2), 1),
        (1, Some(16), Some(-1), 1),
        (0, Some(1), None, 5),
        (2, Some(-1), None, 1),
        (1, None, Some(-20), 1),
    ];
    for &(dim, s, e, step) in cases {
        let wd = if dim < 0 { dim + 3 } else { dim } as usize;
        let sel = py_slice(d[wd] as i64, s, e, step);
        let mut od = d.to_vec();
        od[wd] = sel.len();
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let mut oi = unravel(i, &od);
                oi[wd] = sel[oi[wd]];
                x[ravel(&oi, &d)]
            })
            .collect();
        let o = unary_f32("aten::slice_copy.Tensor_out", &d, &x, &od, |t| {
            let s = match s {
                Some(v) => t.int(v),
                None => t.none(),
            };
            let e = match e {
                Some(v) => t.int(v),
                None => t.none(),
            };
            vec![t.int(dim), s, e, t.int(step)]
        });
        assert_eq!(o.shape, od, "{dim} {s:?} {e:?} {step}");
        assert_eq!(o.f32(), want, "{dim} {s:?} {e:?} {step}");
    }
    // step 0 is an error; rank 0 is an error
    let mut t = OpTest::new("aten::slice_copy.Tensor_out");
    let a = t.input_f32(&d, &x);
    let (dm, s, e, st) = (t.int(1), t.none(), t.none(), t.int(0));
    let o = t.output(DType::F32, &d);
    t.call(&[a, dm, s, e, st, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 4, .. }
    ));
    let mut t = OpTest::new("aten::slice_copy.Tensor_out");
    let a = t.input_f32(&[], &[1.0]);
    let (dm, s, e, st) = (t.int(0), t.none(), t.none(), t.int(1));
    let o = t.output(DType::F32, &[]);
    t.call(&[a, dm, s, e, st, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}

#[test]
fn select_and_narrow() {
    let d = [3, 4, 5];
    let x = data(60, 11);
    for (dim, idx) in [(0i64, 2i64), (1, -1), (-1, 0), (2, -5)] {
        let wd = if dim < 0 { dim + 3 } else { dim } as usize;
        let wi = if idx < 0 { idx + d[wd] as i64 } else { idx } as usize;
        let mut od = d.to_vec();
        od.remove(wd);
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let mut oi = unravel(i, &od);
                oi.insert(wd, wi);
                x[ravel(&oi, &d)]
            })
            .collect();
        let o = unary_f32("aten::select_copy.int_out", &d, &x, &od, |t| {
            vec![t.int(dim), t.int(idx)]
        });
        assert_eq!(o.f32(), want);
    }
    for idx in [4i64, -5] {
        let mut t = OpTest::new("aten::select_copy.int_out");
        let a = t.input_f32(&d, &x);
        let (dm, i) = (t.int(1), t.int(idx));
        let o = t.output(DType::F32, &[3, 5]);
        t.call(&[a, dm, i, o, o]);
        assert_eq!(
            t.run_kernel_err(),
            KernelError::IndexOutOfBounds {
                arg: 2,
                index: idx,
                size: 4
            }
        );
    }
    // narrow: start -3, length 2 along dim 2 -> columns 2, 3
    let o = unary_f32("aten::narrow_copy.out", &d, &x, &[3, 4, 2], |t| {
        vec![t.int(2), t.int(-3), t.int(2)]
    });
    let want: Vec<f32> = (0..24)
        .map(|i| {
            let oi = unravel(i, &[3, 4, 2]);
            x[ravel(&[oi[0], oi[1], oi[2] + 2], &d)]
        })
        .collect();
    assert_eq!(o.f32(), want);
    // start == size with length 0 is allowed
    let o = unary_f32("aten::narrow_copy.out", &d, &x, &[3, 0, 5], |t| {
        vec![t.int(1), t.int(4), t.int(0)]
    });
    assert_eq!(o.shape, vec![3, 0, 5]);
    let mut t = OpTest::new("aten::narrow_copy.out");
    let a = t.input_f32(&d, &x);
    let (dm, s, l) = (t.int(1), t.int(3), t.int(2));
    let o = t.output(DType::F32, &[3, 2, 5]);
    t.call(&[a, dm, s, l, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 3, .. }
    ));
}
