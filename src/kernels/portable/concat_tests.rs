//! Tests of concatenation and splitting.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, iota_i64, ravel, run_first, unravel};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn cat_along_dims_with_legacy_empty_and_promotion() {
    let a = data(2 * 3 * 4, 12);
    let b = data(2 * 5 * 4, 13);
    for dim in [1i64, -2] {
        let mut t = OpTest::new("aten::cat.out");
        let x = t.input_f32(&[2, 3, 4], &a);
        let e = t.input_f32(&[0], &[]);
        let y = t.input_f32(&[2, 5, 4], &b);
        let l = t.tensor_list(&[x, e, y]);
        let dm = t.int(dim);
        let o = t.output(DType::F32, &[2, 8, 4]);
        t.call(&[l, dm, o, o]);
        let r = run_first(&t);
        let want: Vec<f32> = (0..64)
            .map(|i| {
                let oi = unravel(i, &[2, 8, 4]);
                if oi[1] < 3 {
                    a[ravel(&oi, &[2, 3, 4])]
                } else {
                    b[ravel(&[oi[0], oi[1] - 3, oi[2]], &[2, 5, 4])]
                }
            })
            .collect();
        assert_eq!(r.f32(), want);
    }
    // dim 0 and dim -1 with three tensors, int64 + bool promoted into f32 out
    let mut t = OpTest::new("aten::cat.out");
    let x = t.input_i64(&[2, 1], &[5, -6]);
    let y = t.input_bool(&[2, 2], &[true, false, false, true]);
    let z = t.input_f32(&[2, 1], &[0.5, 1.5]);
    let l = t.tensor_list(&[x, y, z]);
    let dm = t.int(-1);
    let o = t.output(DType::F32, &[2, 4]);
    t.call(&[l, dm, o, o]);
    assert_eq!(
        run_first(&t).f32(),
        vec![5.0, 1.0, 0.0, 0.5, -6.0, 0.0, 1.0, 1.5]
    );
    // f32 into an i64 out is not a valid cast
    let mut t = OpTest::new("aten::cat.out");
    let x = t.input_f32(&[2], &[1.0, 2.0]);
    let l = t.tensor_list(&[x]);
    let dm = t.int(0);
    let o = t.output(DType::I64, &[2]);
    t.call(&[l, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 2, .. }
    ));
    // mismatched sizes outside the dim
    let mut t = OpTest::new("aten::cat.out");
    let x = t.input_f32(&[2, 3], &data(6, 0));
    let y = t.input_f32(&[3, 3], &data(9, 0));
    let l = t.tensor_list(&[x, y]);
    let dm = t.int(1);
    let o = t.output(DType::F32, &[2, 6]);
    t.call(&[l, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
    // all legacy empties -> [0]
    let mut t = OpTest::new("aten::cat.out");
    let x = t.input_f32(&[0], &[]);
    let l = t.tensor_list(&[x, x]);
    let dm = t.int(0);
    let o = t.output_dynamic(DType::F32, &[4]);
    t.call(&[l, dm, o, o]);
    assert_eq!(run_first(&t).shape, vec![0]);
}

#[test]
fn stack_inserts_a_dim() {
    let a = data(6, 14);
    let b = data(6, 15);
    for (dim, od) in [(0i64, [2usize, 2, 3]), (1, [2, 2, 3]), (-1, [2, 3, 2])] {
        let mut t = OpTest::new("aten::stack.out");
        let x = t.input_f32(&[2, 3], &a);
        let y = t.input_f32(&[2, 3], &b);
        let l = t.tensor_list(&[x, y]);
        let dm = t.int(dim);
        let o = t.output(DType::F32, &od);
        t.call(&[l, dm, o, o]);
        let r = run_first(&t);
        let wd = if dim < 0 { dim + 3 } else { dim } as usize;
        let want: Vec<f32> = (0..12)
            .map(|i| {
                let mut oi = unravel(i, &od);
                let k = oi.remove(wd);
                let src = if k == 0 { &a } else { &b };
                src[ravel(&oi, &[2, 3])]
            })
            .collect();
        assert_eq!(r.f32(), want, "{dim}");
    }
    let mut t = OpTest::new("aten::stack.out");
    let x = t.input_f32(&[2, 3], &a);
    let y = t.input_f32(&[3, 2], &b);
    let l = t.tensor_list(&[x, y]);
    let dm = t.int(0);
    let o = t.output(DType::F32, &[2, 2, 3]);
    t.call(&[l, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}

#[test]
fn split_with_sizes_split_and_unbind() {
    let d = [2, 7, 3];
    let x = data(42, 16);
    let piece = |start: usize, len: usize| -> Vec<f32> {
        (0..2 * len * 3)
            .map(|i| {
                let oi = unravel(i, &[2, len, 3]);
                x[ravel(&[oi[0], oi[1] + start, oi[2]], &d)]
            })
            .collect()
    };
    // split_with_sizes [2, 0, 5] along dim -2
    let mut t = OpTest::new("aten::split_with_sizes_copy.out");
    let a = t.input_f32(&d, &x);
    let s = t.int_list(&[2, 0, 5]);
    let dm = t.int(-2);
    let o1 = t.output(DType::F32, &[2, 2, 3]);
    let o2 = t.output(DType::F32, &[2, 0, 3]);
    let o3 = t.output(DType::F32, &[2, 5, 3]);
    let l = t.tensor_list(&[o1, o2, o3]);
    let l2 = t.tensor_list(&[o1, o2, o3]);
    t.call(&[a, s, dm, l, l2]);
    let r = t.run().unwrap();
    assert_eq!(r[0].f32(), piece(0, 2));
    assert_eq!(r[1].shape, vec![2, 0, 3]);
    assert_eq!(r[2].f32(), piece(2, 5));
    // sizes not summing to the dim
    let mut t = OpTest::new("aten::split_with_sizes_copy.out");
    let a = t.input_f32(&d, &x);
    let s = t.int_list(&[2, 4]);
    let dm = t.int(1);
    let o1 = t.output(DType::F32, &[2, 2, 3]);
    let o2 = t.output(DType::F32, &[2, 4, 3]);
    let l = t.tensor_list(&[o1, o2]);
    let l2 = t.tensor_list(&[o1, o2]);
    t.call(&[a, s, dm, l, l2]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
    // split_copy with split_size 3 -> 3, 3, 1
    let mut t = OpTest::new("aten::split_copy.Tensor_out");
    let a = t.input_f32(&d, &x);
    let s = t.int(3);
    let dm = t.int(1);
    let o1 = t.output(DType::F32, &[2, 3, 3]);
    let o2 = t.output(DType::F32, &[2, 3, 3]);
    let o3 = t.output(DType::F32, &[2, 1, 3]);
    let l = t.tensor_list(&[o1, o2, o3]);
    let l2 = t.tensor_list(&[o1, o2, o3]);
    t.call(&[a, s, dm, l, l2]);
    let r = t.run().unwrap();
    assert_eq!(r[0].f32(), piece(0, 3));
    assert_eq!(r[1].f32(), piece(3, 3));
    assert_eq!(r[2].f32(), piece(6, 1));
    // wrong number of outputs
    let mut t = OpTest::new("aten::split_copy.Tensor_out");
    let a = t.input_f32(&d, &x);
    let s = t.int(4);
    let dm = t.int(1);
    let o1 = t.output(DType::F32, &[2, 4, 3]);
    let l = t.tensor_list(&[o1]);
    let l2 = t.tensor_list(&[o1]);
    t.call(&[a, s, dm, l, l2]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 3, .. }
    ));
    // unbind along dim 0 (int64)
    let v = iota_i64(6);
    let mut t = OpTest::new("aten::unbind_copy.int_out");
    let a = t.input_i64(&[3, 2], &v);
    let dm = t.int(0);
    let outs: Vec<i32> = (0..3).map(|_| t.output(DType::I64, &[2])).collect();
    let l = t.tensor_list(&outs);
    let l2 = t.tensor_list(&outs);
    t.call(&[a, dm, l, l2]);
    let r = t.run().unwrap();
    for k in 0..3 {
        assert_eq!(r[k].i64(), v[k * 2..k * 2 + 2].to_vec());
    }
}

/// Pieces of rows (an attention layer's query, key and value split from one product) are
/// copied in one step over every output's rows: the same bytes on one core and on 2- and
/// 4-core teams, which split it.
#[test]
fn row_pieces_split_in_one_step_across_a_team() {
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for (t_rows, widths) in [
        (17usize, &[8usize, 8, 8][..]),
        (3, &[5, 0, 129]),
        (64, &[64, 64, 64]),
    ] {
        let c: usize = widths.iter().sum();
        let x = data(t_rows * c, 7);
        let run = || {
            let mut t = OpTest::new("aten::split_with_sizes_copy.out");
            let a = t.input_f32(&[1, t_rows, c], &x);
            let sizes: Vec<i64> = widths.iter().map(|&w| w as i64).collect();
            let s = t.int_list(&sizes);
            let dm = t.int(2);
            let outs: Vec<i32> = widths
                .iter()
                .map(|&w| t.output(DType::F32, &[1, t_rows, w]))
                .collect();
            let l = t.tensor_list(&outs);
            let l2 = t.tensor_list(&outs);
            t.call(&[a, s, dm, l, l2]);
            t.run().unwrap().iter().map(|r| r.f32()).collect::<Vec<_>>()
        };
        let one = run();
        let mut start = 0;
        for (k, &w) in widths.iter().enumerate() {
            let want: Vec<f32> = (0..t_rows)
                .flat_map(|r| x[r * c + start..r * c + start + w].to_vec())
                .collect();
            assert_eq!(one[k], want, "{t_rows} {widths:?} piece {k}");
            start += w;
        }
        for cores in [2, 4] {
            let team = CountingTeam::new(cores);
            assert_eq!(scoped(&team, run), one, "{t_rows} {widths:?} {cores}");
            assert!(team.splits() > 0, "{t_rows} {widths:?} {cores}: not split");
        }
    }
}
