//! Tests of the dtype-converting copies (every dtype pair, half types, bool) and of the
//! dim-order ops (channels-last sources, dtype conversion).

use crate::dtype::DType;
use crate::kernels::portable::test_util::{
    b, data, f, i, kerr, out, ravel, run1, run_first, same, unravel, A,
};
use crate::tensor::{f16_to_f32, f32_to_f16};
use crate::testing::{OpTest, Rng, TestTensor};
use crate::KernelError;
use std::vec::Vec;

#[test]
fn casts_and_copies() {
    let x = [2.7f32, -2.7, 0.0, -1.5, 300.7, f32::NAN];
    let got = run1(
        "aten::_to_copy.out",
        &[f(&[6], &x), A::Bo(false), A::Non, out(DType::I64, &[6])],
    );
    assert_eq!(&got.i64()[..5], &[2, -2, 0, -1, 300]);
    let got = run1(
        "aten::_to_copy.out",
        &[f(&[5], &x[..5]), A::Bo(false), A::Non, out(DType::U8, &[5])],
    );
    assert_eq!(got.i64(), [2, 254, 0, 255, 44]);
    let got = run1(
        "aten::_to_copy.out",
        &[f(&[6], &x), A::Bo(false), A::Non, out(DType::Bool, &[6])],
    );
    assert_eq!(got.bools(), [true, true, false, true, true, true]);
    let got = run1(
        "aten::_to_copy.out",
        &[
            i(&[3], &[16777217, -5, 0]),
            A::Bo(false),
            A::Non,
            out(DType::F32, &[3]),
        ],
    );
    assert_eq!(got.f32(), [16777216.0, -5.0, 0.0]);
    let got = run1(
        "aten::_to_copy.out",
        &[
            b(&[2], &[true, false]),
            A::Bo(false),
            A::Non,
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [1.0, 0.0]);
    let got = run1(
        "aten::_to_copy.out",
        &[
            f(&[3], &[0.1, 65504.0, 1e6]),
            A::Bo(false),
            A::Non,
            out(DType::F16, &[3]),
        ],
    );
    assert_eq!(
        got.f64(),
        [f16_to_f32(f32_to_f16(0.1)) as f64, 65504.0, f64::INFINITY]
    );
    let got = run1(
        "aten::_to_copy.out",
        &[f(&[1], &[0.1]), A::Bo(false), A::Non, out(DType::F64, &[1])],
    );
    assert_eq!(got.f64(), [0.1f32 as f64]);
    let got = run1(
        "aten::_to_copy.out",
        &[
            A::D(std::vec![1], std::vec![0.1]),
            A::Bo(false),
            A::Non,
            out(DType::F32, &[1]),
        ],
    );
    assert_eq!(got.f32(), [0.1f32]);
    let got = run1(
        "aten::_to_copy.out",
        &[
            i(&[2], &[300, -1]),
            A::Bo(false),
            A::Non,
            out(DType::I32, &[2]),
        ],
    );
    assert_eq!(got.i64(), [300, -1]);
    let mut rng = Rng(17);
    let v = rng.f32s(129, -9.0, 9.0);
    for (key, nargs) in [
        ("aten::clone.out", 1),
        ("aten::alias_copy.out", 0),
        ("aten::detach_copy.out", 0),
        ("aten::lift_fresh_copy.out", 0),
    ] {
        let mut args = std::vec![f(&[3, 43], &v)];
        if nargs == 1 {
            args.push(A::Non);
        }
        args.push(out(DType::F32, &[3, 43]));
        let got = run1(key, &args);
        assert_eq!(got.shape, [3, 43]);
        assert!(same(&got.f32(), &v), "{key}");
        args.pop();
        args.push(out(DType::F64, &[3, 43]));
        let got = run1(key, &args);
        assert_eq!(got.f64(), v.iter().map(|&x| x as f64).collect::<Vec<_>>());
    }
    let e = kerr(
        "aten::clone.out",
        &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[2])],
    );
    assert!(matches!(e, KernelError::ArgCount { expected: 4, .. }));
    let e = kerr(
        "aten::alias_copy.out",
        &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[3])],
    );
    assert!(matches!(e, KernelError::Resize { .. }));
}

#[test]
fn dim_order_copy_from_channels_last() {
    // logical NCHW [2, 3, 2, 4]; memory order NHWC
    let d = [2usize, 3, 2, 4];
    let nhwc = [2usize, 2, 4, 3];
    let mem = data(48, 28);
    let mem_bytes: Vec<u8> = mem.iter().flat_map(|v| v.to_le_bytes()).collect();
    let want: Vec<f32> = (0..48)
        .map(|i| {
            let o = unravel(i, &d);
            mem[ravel(&[o[0], o[2], o[3], o[1]], &nhwc)]
        })
        .collect();
    for op in [
        "dim_order_ops::_clone_dim_order.out",
        "dim_order_ops::_to_dim_order_copy.out",
    ] {
        let mut t = OpTest::new(op);
        let a = t.input_dim_order(DType::F32, &d, &[0, 2, 3, 1], &mem_bytes);
        let nb = t.boolean(false);
        let dord = t.int_list(&[0, 1, 2, 3]);
        let o = t.output(DType::F32, &d);
        t.call(&[a, nb, dord, o, o]);
        assert_eq!(run_first(&t).f32(), want, "{op}");
    }
    // with a cast to f64 and a None dim_order
    let mut t = OpTest::new("dim_order_ops::_to_dim_order_copy.out");
    let a = t.input_dim_order(DType::F32, &d, &[0, 2, 3, 1], &mem_bytes);
    let nb = t.boolean(false);
    let dord = t.none();
    let o = t.output(DType::F64, &d);
    t.call(&[a, nb, dord, o, o]);
    let r = run_first(&t);
    assert_eq!(r.f64(), want.iter().map(|&v| v as f64).collect::<Vec<_>>());
    // a channels-last out is refused
    let mut t = OpTest::new("dim_order_ops::_clone_dim_order.out");
    let a = t.input_f32(&d, &mem);
    let nb = t.boolean(false);
    let dord = t.int_list(&[0, 2, 3, 1]);
    let o = t.output(DType::F32, &d);
    t.call(&[a, nb, dord, o, o]);
    assert_eq!(t.run_kernel_err(), KernelError::NonContiguous { arg: 3 });
    // clone does not cast
    let mut t = OpTest::new("dim_order_ops::_clone_dim_order.out");
    let a = t.input_f32(&d, &mem);
    let nb = t.boolean(false);
    let dord = t.none();
    let o = t.output(DType::F64, &d);
    t.call(&[a, nb, dord, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 3, .. }
    ));
}

#[test]
fn to_dim_order_copy_casts() {
    let v = vec![-3i64, 0, 7, 1 << 40, 5];
    // i64 -> f32, i64 -> i32 (wraps), i64 -> bool, bool -> f32, f32 -> i64 (truncates)
    let run = |dt_in: DType, bytes: Vec<u8>, n: usize, dt_out: DType| -> TestTensor {
        let mut t = OpTest::new("dim_order_ops::_to_dim_order_copy.out");
        let a = t.input(dt_in, &[n], &bytes);
        let nb = t.boolean(false);
        let dord = t.none();
        let o = t.output(dt_out, &[n]);
        t.call(&[a, nb, dord, o, o]);
        run_first(&t)
    };
    let vb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        run(DType::I64, vb.clone(), 5, DType::F32).f32(),
        v.iter().map(|&x| x as f32).collect::<Vec<_>>()
    );
    assert_eq!(
        run(DType::I64, vb.clone(), 5, DType::I32).i64(),
        v.iter().map(|&x| x as i32 as i64).collect::<Vec<_>>()
    );
    assert_eq!(
        run(DType::I64, vb.clone(), 5, DType::Bool).bools(),
        vec![true, false, true, true, true]
    );
    assert_eq!(run(DType::I64, vb, 5, DType::I64).i64(), v);
    let f = [-1.7f32, 2.5, 0.0];
    let fb: Vec<u8> = f.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        run(DType::F32, fb.clone(), 3, DType::I64).i64(),
        vec![-1, 2, 0]
    );
    assert_eq!(
        run(DType::F32, fb.clone(), 3, DType::F16).f64(),
        vec![-1.7001953125, 2.5, 0.0]
    );
    assert_eq!(run(DType::F32, fb, 3, DType::U8).i64(), vec![255, 2, 0]);
    assert_eq!(
        run(DType::Bool, vec![1, 0, 1], 3, DType::F32).f32(),
        vec![1.0, 0.0, 1.0]
    );
}

#[test]
fn same_layout_copies_move_the_bytes_and_split_on_a_team() {
    // `clone`, `alias_copy`, `_clone_dim_order` of a default-order input and a same-shape
    // `expand_copy` copy the bytes as they are: each output is the input's bytes, on one core
    // and on 2- and 4-core teams, which split the larger ones. Odd lengths (1, 3, 17, 129 and
    // a tail short of a piece) and a 1-byte dtype.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for (dims, dt) in [
        (vec![1usize], DType::F32),
        (vec![3, 17], DType::U8),
        (vec![3, 17, 129], DType::F32),
        (vec![2, 129, 17], DType::F64),
        (vec![1, 4, 257], DType::U8),
    ] {
        let n: usize = dims.iter().product::<usize>() * dt.size();
        let bytes: Vec<u8> = (0..n).map(|k| (k * 53 % 251) as u8).collect();
        let size: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let keep: Vec<i64> = dims.iter().map(|_| -1).collect();
        let run = |op: &str, shape_arg: Option<&[i64]>| {
            let mut t = OpTest::new(op);
            let a = t.input(dt, &dims, &bytes);
            let o = t.output(dt, &dims);
            match (op, shape_arg) {
                ("aten::expand_copy.out", Some(s)) => {
                    let s = t.int_list(s);
                    let imp = t.boolean(false);
                    t.call(&[a, s, imp, o, o]);
                }
                ("dim_order_ops::_clone_dim_order.out", _) => {
                    let nb = t.boolean(false);
                    let dord = t.none();
                    t.call(&[a, nb, dord, o, o]);
                }
                ("aten::clone.out", _) => {
                    let mf = t.none();
                    t.call(&[a, mf, o, o]);
                }
                _ => t.call(&[a, o, o]),
            }
            run_first(&t).bytes
        };
        let cases: [(&str, Option<&[i64]>); 5] = [
            ("aten::clone.out", None),
            ("aten::alias_copy.out", None),
            ("dim_order_ops::_clone_dim_order.out", None),
            ("aten::expand_copy.out", Some(&size)),
            ("aten::expand_copy.out", Some(&keep)),
        ];
        for (op, s) in cases {
            assert_eq!(run(op, s), bytes, "{op} {dims:?} {dt} on one core");
            for cores in [2, 4] {
                let team = CountingTeam::new(cores);
                assert_eq!(
                    scoped(&team, || run(op, s)),
                    bytes,
                    "{op} {dims:?} on {cores}"
                );
                // 3 × 17 × 129 f32 is 26 KB: enough for every team to split it.
                if n >= 8192 {
                    assert!(team.splits() > 0, "{op} {dims:?} was not split on {cores}");
                }
            }
        }
    }
    // An output too small for the input's shape is refused, naming it.
    let mut t = OpTest::new("aten::alias_copy.out");
    let a = t.input_f32(&[3, 17], &data(51, 3));
    let o = t.output(DType::F32, &[3, 16]);
    t.call(&[a, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Resize { arg: 1, .. }
    ));
}
