//! Tests of the view-as-copy kernels against reference permutes and index maps.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{
    data, iota_i64, numel, permute_ref, run_first, unary_f32, unravel,
};
use crate::testing::OpTest;
use crate::KernelError;
use std::vec::Vec;

#[test]
fn view_copy_infers_and_copies() {
    let x = data(24, 1);
    let o = unary_f32("aten::view_copy.out", &[2, 3, 4], &x, &[4, 6], |t| {
        vec![t.int_list(&[4, -1])]
    });
    assert_eq!(o.shape, vec![4, 6]);
    assert_eq!(o.f32(), x);
    // int64, rank 0 target from one element
    let mut t = OpTest::new("aten::view_copy.out");
    let a = t.input_i64(&[1, 1], &[42]);
    let s = t.int_list(&[]);
    let o = t.output(DType::I64, &[]);
    t.call(&[a, s, o, o]);
    let r = run_first(&t);
    assert_eq!((r.shape.clone(), r.i64()), (vec![], vec![42]));
}

#[test]
fn view_copy_errors() {
    let x = data(6, 2);
    for (size, want_value) in [
        (vec![-1i64, -1], true),
        (vec![4, 2], false),
        (vec![-1, 4], false),
    ] {
        let mut t = OpTest::new("aten::view_copy.out");
        let a = t.input_f32(&[2, 3], &x);
        let s = t.int_list(&size);
        let o = t.output(DType::F32, &[6]);
        t.call(&[a, s, o, o]);
        let e = t.run_kernel_err();
        if want_value {
            assert!(matches!(e, KernelError::Value { arg: 1, .. }), "{e:?}");
        } else {
            assert!(matches!(e, KernelError::Shape { arg: 1, .. }), "{e:?}");
        }
    }
    // zero elements with -1 is ambiguous
    let mut t = OpTest::new("aten::view_copy.out");
    let a = t.input_f32(&[0, 3], &[]);
    let s = t.int_list(&[-1, 0]);
    let o = t.output(DType::F32, &[0]);
    t.call(&[a, s, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
    // wrong argument count
    let mut t = OpTest::new("aten::view_copy.out");
    let a = t.input_f32(&[2, 3], &x);
    let o = t.output(DType::F32, &[6]);
    t.call(&[a, o, o]);
    assert_eq!(
        t.run_kernel_err(),
        KernelError::ArgCount {
            expected: 4,
            got: 3
        }
    );
    // dtype mismatch
    let mut t = OpTest::new("aten::view_copy.out");
    let a = t.input_f32(&[2, 3], &x);
    let s = t.int_list(&[6]);
    let o = t.output(DType::I64, &[6]);
    t.call(&[a, s, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 2, .. }
    ));
}

#[test]
fn unsqueeze_and_squeeze() {
    let x = data(6, 3);
    for (dim, shape) in [
        (0i64, vec![1, 2, 3]),
        (1, vec![2, 1, 3]),
        (2, vec![2, 3, 1]),
        (-1, vec![2, 3, 1]),
        (-3, vec![1, 2, 3]),
    ] {
        let o = unary_f32("aten::unsqueeze_copy.out", &[2, 3], &x, &shape, |t| {
            vec![t.int(dim)]
        });
        assert_eq!(o.shape, shape);
        assert_eq!(o.f32(), x);
    }
    // rank 0
    let o = unary_f32("aten::unsqueeze_copy.out", &[], &[5.0], &[1], |t| {
        vec![t.int(-1)]
    });
    assert_eq!((o.shape.clone(), o.f32()), (vec![1], vec![5.0]));
    // out of range
    let mut t = OpTest::new("aten::unsqueeze_copy.out");
    let a = t.input_f32(&[2, 3], &x);
    let d = t.int(3);
    let o = t.output(DType::F32, &[2, 3, 1]);
    t.call(&[a, d, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::IndexOutOfBounds { arg: 1, .. }
    ));

    // squeeze variants on [1, 3, 1, 2]
    let x = data(6, 4);
    let o = unary_f32(
        "aten::squeeze_copy.dims_out",
        &[1, 3, 1, 2],
        &x,
        &[3, 1, 2],
        |t| vec![t.int_list(&[0, 1])],
    );
    assert_eq!(o.shape, vec![3, 1, 2]);
    let o = unary_f32(
        "aten::squeeze_copy.dims_out",
        &[1, 3, 1, 2],
        &x,
        &[3, 2],
        |t| vec![t.int_list(&[-2, 0])],
    );
    assert_eq!((o.shape.clone(), o.f32()), (vec![3, 2], x.clone()));
    let o = unary_f32(
        "aten::squeeze_copy.dim_out",
        &[1, 3, 1, 2],
        &x,
        &[1, 3, 2],
        |t| vec![t.int(2)],
    );
    assert_eq!(o.shape, vec![1, 3, 2]);
    let mut t = OpTest::new("aten::squeeze_copy.out");
    let a = t.input_i64(&[1, 3, 1, 2], &iota_i64(6));
    let o = t.output(DType::I64, &[3, 2]);
    t.call(&[a, o, o]);
    let r = run_first(&t);
    assert_eq!((r.shape.clone(), r.i64()), (vec![3, 2], iota_i64(6)));
    // repeated dims
    let mut t = OpTest::new("aten::squeeze_copy.dims_out");
    let a = t.input_f32(&[1, 3, 1, 2], &x);
    let d = t.int_list(&[0, -4]);
    let o = t.output(DType::F32, &[3, 1, 2]);
    t.call(&[a, d, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 1, .. }
    ));
}

#[test]
fn permute_matches_reference() {
    let perms3: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let d = [3, 17, 5];
    let x = data(numel(&d), 5);
    for p in perms3 {
        let (od, want) = permute_ref(&x, &d, &p);
        let dims: Vec<i64> = p.iter().map(|&v| v as i64 - 3).collect(); // negative dims
        let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
            vec![t.int_list(&dims)]
        });
        assert_eq!(o.shape, od);
        assert_eq!(o.f32(), want, "{p:?}");
    }
    // rank 4, attention-style [0, 2, 1, 3] and a full reversal
    let d = [2, 7, 3, 4];
    let x = data(numel(&d), 6);
    for p in [[0usize, 2, 1, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
        let (od, want) = permute_ref(&x, &d, &p);
        let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
        let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
            vec![t.int_list(&dims)]
        });
        assert_eq!(o.f32(), want, "{p:?}");
    }
    // bool and int64 dtypes
    let bools: Vec<bool> = (0..12).map(|i| i % 3 == 0).collect();
    let mut t = OpTest::new("aten::permute_copy.out");
    let a = t.input_bool(&[3, 4], &bools);
    let p = t.int_list(&[1, 0]);
    let o = t.output(DType::Bool, &[4, 3]);
    t.call(&[a, p, o, o]);
    let r = run_first(&t);
    let want: Vec<bool> = (0..12).map(|i| bools[(i % 3) * 4 + i / 3]).collect();
    assert_eq!(r.bools(), want);
    // repeated dim is an error
    let mut t = OpTest::new("aten::permute_copy.out");
    let a = t.input_f32(&[3, 4], &data(12, 0));
    let p = t.int_list(&[1, -1]);
    let o = t.output(DType::F32, &[4, 3]);
    t.call(&[a, p, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Value { arg: 1, .. }
    ));
    // wrong length
    let mut t = OpTest::new("aten::permute_copy.out");
    let a = t.input_f32(&[3, 4], &data(12, 0));
    let p = t.int_list(&[1]);
    let o = t.output(DType::F32, &[4, 3]);
    t.call(&[a, p, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
}

#[test]
fn tiled_transposes() {
    // last-two-dims transposes large enough for the tiled path, with partial tiles
    for (d, p) in [
        (vec![3usize, 17, 33], vec![0usize, 2, 1]),
        (vec![40, 20], vec![1, 0]),
        (vec![2, 3, 16, 16], vec![0, 1, 3, 2]),
        (vec![2, 19, 3, 21], vec![0, 3, 2, 1]),
    ] {
        let x = data(numel(&d), 31);
        let (od, want) = permute_ref(&x, &d, &p);
        let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
        let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
            vec![t.int_list(&dims)]
        });
        assert_eq!(o.f32(), want, "{d:?} {p:?}");
    }
    // int64 (8-byte elements) through the same path
    let v = iota_i64(20 * 18);
    let mut t = OpTest::new("aten::t_copy.out");
    let a = t.input_i64(&[20, 18], &v);
    let o = t.output(DType::I64, &[18, 20]);
    t.call(&[a, o, o]);
    let want: Vec<i64> = (0..360).map(|i| v[(i % 20) * 18 + i / 20]).collect();
    assert_eq!(run_first(&t).i64(), want);
}

#[test]
fn transpose_and_t() {
    let d = [2, 3, 5];
    let x = data(30, 7);
    let (od, want) = permute_ref(&x, &d, &[2, 1, 0]);
    let o = unary_f32("aten::transpose_copy.int_out", &d, &x, &od, |t| {
        vec![t.int(0), t.int(-1)]
    });
    assert_eq!(o.f32(), want);
    let (od, want) = permute_ref(&x[..15], &[3, 5], &[1, 0]);
    let o = unary_f32("aten::t_copy.out", &[3, 5], &x[..15], &od, |_| vec![]);
    assert_eq!((o.shape.clone(), o.f32()), (vec![5, 3], want));
    let o = unary_f32("aten::t_copy.out", &[5], &x[..5], &[5], |_| vec![]);
    assert_eq!(o.f32(), x[..5].to_vec());
    let mut t = OpTest::new("aten::t_copy.out");
    let a = t.input_f32(&d, &x);
    let o = t.output(DType::F32, &d);
    t.call(&[a, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
}

#[test]
fn expand_copy_broadcasts() {
    let x = data(3, 8);
    // [3, 1] -> [2, 3, 4]
    let o = unary_f32("aten::expand_copy.out", &[3, 1], &x, &[2, 3, 4], |t| {
        vec![t.int_list(&[2, -1, 4]), t.boolean(false)]
    });
    let want: Vec<f32> = (0..24).map(|i| x[(i / 4) % 3]).collect();
    assert_eq!(o.f32(), want);
    // [1, 3] -> [17, 3] (row broadcast), int64
    let mut t = OpTest::new("aten::expand_copy.out");
    let a = t.input_i64(&[1, 3], &[1, 2, 3]);
    let s = t.int_list(&[17, 3]);
    let f = t.boolean(false);
    let o = t.output(DType::I64, &[17, 3]);
    t.call(&[a, s, f, o, o]);
    let r = run_first(&t);
    assert_eq!(r.i64(), [1, 2, 3].repeat(17));
    // rank 0 -> [2, 2]
    let o = unary_f32("aten::expand_copy.out", &[], &[9.0], &[2, 2], |t| {
        vec![t.int_list(&[2, 2]), t.boolean(false)]
    });
    assert_eq!(o.f32(), vec![9.0; 4]);
    // errors: non-singleton change, -1 in a new leading dim, too few sizes
    for size in [vec![2i64, 2], vec![-1, 3, 1], vec![1], vec![3, -2]] {
        let mut t = OpTest::new("aten::expand_copy.out");
        let a = t.input_f32(&[3, 1], &x);
        let s = t.int_list(&size);
        let f = t.boolean(false);
        let o = t.output(DType::F32, &[3, 1]);
        t.call(&[a, s, f, o, o]);
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

#[test]
fn repeat_tiles() {
    let d = [2, 3];
    let x = data(6, 9);
    let reps = [2usize, 1, 3];
    let od = [2, 2, 9];
    let o = unary_f32("aten::repeat.out", &d, &x, &od, |t| {
        vec![t.int_list(&[2, 1, 3])]
    });
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let oi = unravel(i, &od);
            x[(oi[1] % d[0]) * 3 + oi[2] % d[1]]
        })
        .collect();
    let _ = reps;
    assert_eq!(o.f32(), want);
    // zero repeats
    let o = unary_f32("aten::repeat.out", &d, &x, &[0, 3], |t| {
        vec![t.int_list(&[0, 1])]
    });
    assert_eq!(o.shape, vec![0, 3]);
    // too few repeats / negative
    for reps in [vec![2i64], vec![-1, 1]] {
        let mut t = OpTest::new("aten::repeat.out");
        let a = t.input_f32(&d, &x);
        let s = t.int_list(&reps);
        let o = t.output(DType::F32, &d);
        t.call(&[a, s, o, o]);
        let e = t.run_kernel_err();
        assert!(matches!(
            e,
            KernelError::Shape { arg: 1, .. } | KernelError::Value { arg: 1, .. }
        ));
    }
}

#[test]
fn block_swaps_and_size_one_moves_match_the_reference_on_teams() {
    // Permutes done without the copy engine's plan (`runs_order`): the head permutes of
    // attention and other swaps of two blocks of dims in front of an unmoved innermost block,
    // and permutes that move only size-1 dims. Each gives the reference's bytes for 1-, 2-,
    // 4- and 8-byte elements, on one core and on 2- and 4-core teams; the large ones split.
    use super::{runs_order, RunsOrder};
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    let cases: [(&[usize], &[usize], Option<RunsOrder>); 9] = [
        (
            &[1, 17, 3, 16],
            &[0, 2, 1, 3],
            Some(RunsOrder::Swap(17, 3, 16)),
        ),
        (
            &[1, 3, 17, 16],
            &[0, 2, 1, 3],
            Some(RunsOrder::Swap(3, 17, 16)),
        ),
        (
            &[1, 129, 6, 16],
            &[0, 2, 1, 3],
            Some(RunsOrder::Swap(129, 6, 16)),
        ),
        (&[2, 3, 5, 7], &[2, 0, 1, 3], Some(RunsOrder::Swap(6, 5, 7))),
        (&[5, 1, 3, 1, 1], &[2, 1, 0, 4, 3], None),
        (&[17, 1, 3], &[0, 2, 1], Some(RunsOrder::Same)),
        (&[1, 17, 1], &[2, 1, 0], Some(RunsOrder::Same)),
        (&[3, 17, 5], &[1, 2, 0], None),
        (&[2, 3, 4, 5], &[0, 1, 3, 2], None),
    ];
    for (dims, perm, order) in cases {
        assert_eq!(runs_order(dims, perm), order, "{dims:?} {perm:?}");
        let n = numel(dims);
        for dt in [DType::U8, DType::F16, DType::F32, DType::I64] {
            let es = dt.size();
            let bytes: Vec<u8> = (0..n * es).map(|k| (k * 31 % 253) as u8).collect();
            // Reference: output element i is input element at the permuted index.
            let od: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let mut want = Vec::with_capacity(n * es);
            for i in 0..n {
                let oi = unravel(i, &od);
                let mut ii = vec![0usize; dims.len()];
                for (k, &p) in perm.iter().enumerate() {
                    ii[p] = oi[k];
                }
                let src = ii.iter().zip(dims).fold(0, |acc, (&c, &d)| acc * d + c);
                want.extend_from_slice(&bytes[src * es..(src + 1) * es]);
            }
            let p64: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
            let run = || {
                let mut t = OpTest::new("aten::permute_copy.out");
                let a = t.input(dt, dims, &bytes);
                let p = t.int_list(&p64);
                let o = t.output(dt, &od);
                t.call(&[a, p, o, o]);
                run_first(&t).bytes
            };
            assert_eq!(run(), want, "{dims:?} {perm:?} {dt}");
            for cores in [2, 4] {
                let team = CountingTeam::new(cores);
                assert_eq!(scoped(&team, run), want, "{dims:?} {perm:?} {dt} {cores}");
                if n * es >= 16384 && order.is_some() {
                    assert!(team.splits() > 0, "{dims:?} {perm:?} {dt} not split");
                }
            }
        }
    }
}
