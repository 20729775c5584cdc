//! Tests of `tril`/`triu` diagonals.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, run_first, unary_f32, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn tril_triu_diagonals() {
    let d = [2, 3, 4];
    let x = data(24, 25);
    for diag in [-2i64, -1, 0, 1, 3, 5] {
        for (op, lower) in [("aten::tril.out", true), ("aten::triu.out", false)] {
            let o = unary_f32(op, &d, &x, &d, |t| vec![t.int(diag)]);
            let want: Vec<f32> = (0..24)
                .map(|i| {
                    let oi = unravel(i, &d);
                    let (r, c) = (oi[1] as i64, oi[2] as i64);
                    let keep = if lower { c - r <= diag } else { c - r >= diag };
                    if keep {
                        x[i]
                    } else {
                        0.0
                    }
                })
                .collect();
            assert_eq!(o.f32(), want, "{op} {diag}");
        }
    }
    // bool, and rank-1 error
    let mut t = OpTest::new("aten::tril.out");
    let a = t.input_bool(&[2, 2], &[true; 4]);
    let dg = t.int(0);
    let o = t.output(DType::Bool, &[2, 2]);
    t.call(&[a, dg, o, o]);
    assert_eq!(run_first(&t).bools(), vec![true, false, true, true]);
    let mut t = OpTest::new("aten::tril.out");
    let a = t.input_f32(&[3], &[1.0; 3]);
    let dg = t.int(0);
    let o = t.output(DType::F32, &[3]);
    t.call(&[a, dg, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}
