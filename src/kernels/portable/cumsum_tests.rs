//! Tests of `cumsum` over dtypes and dims.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, ravel, run_first, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn cumsum_dtypes_and_dims() {
    let d = [3, 4, 5];
    let x = data(60, 24);
    for dim in [0i64, 1, -1] {
        let wd = if dim < 0 { dim + 3 } else { dim } as usize;
        let o = {
            let mut t = OpTest::new("aten::cumsum.out");
            let a = t.input_f32(&d, &x);
            let dm = t.int(dim);
            let n = t.none();
            let o = t.output(DType::F32, &d);
            t.call(&[a, dm, n, o, o]);
            run_first(&t)
        };
        let want: Vec<f32> = (0..60)
            .map(|i| {
                let mut oi = unravel(i, &d);
                let upto = oi[wd];
                let mut acc = 0f64;
                for k in 0..=upto {
                    oi[wd] = k;
                    acc += x[ravel(&oi, &d)] as f64;
                }
                acc as f32
            })
            .collect();
        assert_eq!(o.f32(), want, "dim {dim}");
    }
    // bool counts into int64
    let b = [true, false, true, true, false, true];
    let mut t = OpTest::new("aten::cumsum.out");
    let a = t.input_bool(&[2, 3], &b);
    let dm = t.int(1);
    let n = t.none();
    let o = t.output(DType::I64, &[2, 3]);
    t.call(&[a, dm, n, o, o]);
    assert_eq!(run_first(&t).i64(), vec![1, 1, 2, 1, 1, 2]);
    // int32 input -> int64; int64 with dtype=float32
    let mut t = OpTest::new("aten::cumsum.out");
    let a = t.input_i32(&[4], &[1, -2, 3, 4]);
    let dm = t.int(0);
    let n = t.none();
    let o = t.output(DType::I64, &[4]);
    t.call(&[a, dm, n, o, o]);
    assert_eq!(run_first(&t).i64(), vec![1, -1, 2, 6]);
    let mut t = OpTest::new("aten::cumsum.out");
    let a = t.input_i64(&[4], &[1, -2, 3, 4]);
    let dm = t.int(0);
    let n = t.int(DType::F32 as i64);
    let o = t.output(DType::F32, &[4]);
    t.call(&[a, dm, n, o, o]);
    assert_eq!(run_first(&t).f32(), vec![1.0, -1.0, 2.0, 6.0]);
    // int input with an f32 out but no dtype: out must be int64
    let mut t = OpTest::new("aten::cumsum.out");
    let a = t.input_i64(&[4], &[1, -2, 3, 4]);
    let dm = t.int(0);
    let n = t.none();
    let o = t.output(DType::F32, &[4]);
    t.call(&[a, dm, n, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 3, .. }
    ));
    // rank 0
    let mut t = OpTest::new("aten::cumsum.out");
    let a = t.input_f32(&[], &[2.5]);
    let dm = t.int(0);
    let n = t.none();
    let o = t.output(DType::F32, &[]);
    t.call(&[a, dm, n, o, o]);
    assert_eq!(run_first(&t).f32(), vec![2.5]);
}

/// int64 along every dim of odd sizes (the last dim runs rows in order, the others stride),
/// with wrapping sums.
#[test]
fn cumsum_int64_every_dim() {
    let d = [3, 17, 129];
    let total = 3 * 17 * 129;
    let x: Vec<i64> = (0..total as i64)
        .map(|i| {
            if i == 5 {
                i64::MAX
            } else {
                (i * 7919) % 201 - 100
            }
        })
        .collect();
    for dim in [0i64, 1, 2, -1] {
        let wd = if dim < 0 { dim + 3 } else { dim } as usize;
        let mut t = OpTest::new("aten::cumsum.out");
        let a = t.input_i64(&d, &x);
        let dm = t.int(dim);
        let n = t.none();
        let o = t.output(DType::I64, &d);
        t.call(&[a, dm, n, o, o]);
        let want: Vec<i64> = (0..total)
            .map(|i| {
                let mut oi = unravel(i, &d);
                let upto = oi[wd];
                let mut acc = 0i64;
                for k in 0..=upto {
                    oi[wd] = k;
                    acc = acc.wrapping_add(x[ravel(&oi, &d)]);
                }
                acc
            })
            .collect();
        assert_eq!(run_first(&t).i64(), want, "dim {dim}");
    }
}
