//! Tests of `constant_pad_nd` padding and cropping.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, numel, ravel, run_first, unary_f32, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn constant_pad_nd_pads_and_crops() {
    let d = [2, 3, 4];
    let x = data(24, 26);
    let cases: &[(Vec<i64>, f64)] = &[
        (vec![1, 2], 0.0),
        (vec![0, 0, 1, 1], -1.5),
        (vec![-1, 2, 1, -2], 7.0),
        (vec![2, -3, 0, 0, 1, 0], 3.0),
        (vec![-4, 1], 0.5),
        (vec![], 0.0),
    ];
    for (pad, val) in cases {
        let mut before = [0i64; 3];
        let mut od = d.to_vec();
        for i in 0..pad.len() / 2 {
            let dd = 2 - i;
            before[dd] = pad[2 * i];
            od[dd] = (d[dd] as i64 + pad[2 * i] + pad[2 * i + 1]) as usize;
        }
        let want: Vec<f32> = (0..numel(&od))
            .map(|i| {
                let oi = unravel(i, &od);
                let mut xi = vec![0usize; 3];
                for k in 0..3 {
                    let c = oi[k] as i64 - before[k];
                    if c < 0 || c >= d[k] as i64 {
                        return *val as f32;
                    }
                    xi[k] = c as usize;
                }
                x[ravel(&xi, &d)]
            })
            .collect();
        let v = *val;
        let o = unary_f32("aten::constant_pad_nd.out", &d, &x, &od, |t| {
            vec![t.int_list(pad), t.double(v)]
        });
        assert_eq!(o.shape, od, "{pad:?}");
        assert_eq!(o.f32(), want, "{pad:?}");
    }
    // int64 with an Int value
    let mut t = OpTest::new("aten::constant_pad_nd.out");
    let a = t.input_i64(&[2], &[1, 2]);
    let p = t.int_list(&[1, 1]);
    let v = t.int(-9);
    let o = t.output(DType::I64, &[4]);
    t.call(&[a, p, v, o, o]);
    assert_eq!(run_first(&t).i64(), vec![-9, 1, 2, -9]);
    // odd pad length, too long a pad, over-cropping
    for pad in [vec![1i64], vec![1, 1, 1, 1, 1, 1, 1, 1], vec![-5, 0]] {
        let mut t = OpTest::new("aten::constant_pad_nd.out");
        let a = t.input_f32(&d, &x);
        let p = t.int_list(&pad);
        let v = t.int(0);
        let o = t.output(DType::F32, &d);
        t.call(&[a, p, v, o, o]);
        let e = t.run_kernel_err();
        assert!(
            matches!(
                e,
                KernelError::Shape { arg: 1, .. } | KernelError::Value { arg: 1, .. }
            ),
            "{e:?}"
        );
    }
}
