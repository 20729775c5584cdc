//! Tests of `flip` and `roll`.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, ravel, unary_f32, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn flip_and_roll() {
    let d = [3, 4, 5];
    let x = data(60, 27);
    for dims in [vec![0i64], vec![-1], vec![0, 2], vec![0, 1, 2], vec![]] {
        let wd: Vec<usize> = dims
            .iter()
            .map(|&v| if v < 0 { v + 3 } else { v } as usize)
            .collect();
        let want: Vec<f32> = (0..60)
            .map(|i| {
                let mut oi = unravel(i, &d);
                for &k in &wd {
                    oi[k] = d[k] - 1 - oi[k];
                }
                x[ravel(&oi, &d)]
            })
            .collect();
        let o = unary_f32("aten::flip.out", &d, &x, &d, |t| vec![t.int_list(&dims)]);
        assert_eq!(o.f32(), want, "{dims:?}");
    }
    let mut t = OpTest::new("aten::flip.out");
    let a = t.input_f32(&d, &x);
    let dm = t.int_list(&[1, -2]);
    let o = t.output(DType::F32, &d);
    t.call(&[a, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 1, .. }
    ));

    // roll over dims (repeated dims add up), and flattened
    for (shifts, dims) in [
        (vec![1i64], vec![0i64]),
        (vec![-2, 7], vec![2, 1]),
        (vec![1, 1, 3], vec![-1, 2, 0]),
        (vec![13], vec![]),
        (vec![-61], vec![]),
    ] {
        let want: Vec<f32> = if dims.is_empty() {
            let s = shifts[0].rem_euclid(60) as usize;
            (0..60).map(|i| x[(i + 60 - s) % 60]).collect()
        } else {
            let mut sh = [0i64; 3];
            for (&s, &dd) in shifts.iter().zip(&dims) {
                let w = if dd < 0 { dd + 3 } else { dd } as usize;
                sh[w] += s;
            }
            (0..60)
                .map(|i| {
                    let mut oi = unravel(i, &d);
                    for k in 0..3 {
                        oi[k] = (oi[k] as i64 - sh[k]).rem_euclid(d[k] as i64) as usize;
                    }
                    x[ravel(&oi, &d)]
                })
                .collect()
        };
        let o = unary_f32("aten::roll.out", &d, &x, &d, |t| {
            vec![t.int_list(&shifts), t.int_list(&dims)]
        });
        assert_eq!(o.f32(), want, "{shifts:?} {dims:?}");
    }
    let mut t = OpTest::new("aten::roll.out");
    let a = t.input_f32(&d, &x);
    let (s, dm) = (t.int_list(&[1, 2]), t.int_list(&[0]));
    let o = t.output(DType::F32, &d);
    t.call(&[a, s, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 2, .. }
    ));
}
