//! Tests of the reductions against a reference that groups elements by output index.

use super::*;
use crate::kernels::portable::test_util::{close, run};
use crate::tensor::NdIndex;
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

/// Reference reduction: groups of input values (row-major within each group) for every
/// output element in row-major order, and the output shape.
fn ref_groups(
    x: &[f64],
    dims: &[usize],
    red: &[usize],
    keepdim: bool,
) -> (Vec<usize>, Vec<Vec<f64>>) {
    let r = dims.len();
    let kept: Vec<usize> = (0..r).filter(|d| !red.contains(d)).collect();
    let out_shape: Vec<usize> = (0..r)
        .filter_map(|d| {
            if red.contains(&d) {
                keepdim.then_some(1)
            } else {
                Some(dims[d])
            }
        })
        .collect();
    let nout: usize = kept.iter().map(|&d| dims[d]).product();
    let mut groups = vec![Vec::new(); nout];
    let mut idx = NdIndex::new(dims);
    for &v in x {
        let mut o = 0;
        for &d in &kept {
            o = o * dims[d] + idx.index()[d];
        }
        groups[o].push(v);
        idx.advance();
    }
    (out_shape, groups)
}

#[test]
fn sum_mean_dims() {
    let mut rng = Rng(14);
    sum_mean_case(&mut rng, [3, 4, 5]);
    // Reduced rows wider than one block of the row-wise f32 path (70 = 64 + 6), and
    // innermost rows of every length around the last-dim path's 8 lanes and 64-blocks.
    sum_mean_case(&mut rng, [2, 3, 70]);
    for n in [1, 3, 7, 8, 9, 17, 63, 64, 65, 129, 200] {
        sum_mean_case(&mut rng, [3, 2, n]);
    }
}

fn sum_mean_case(rng: &mut Rng, dims: [usize; 3]) {
    let x = rng.vec(dims.iter().product());
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let cases: &[(Option<&[i64]>, &[usize], bool)] = &[
        (Some(&[1]), &[1], false),
        (Some(&[-1, 0]), &[0, 2], true),
        (None, &[0, 1, 2], false),
        (Some(&[]), &[0, 1, 2], true),
        (Some(&[0]), &[0], true),
        (Some(&[2]), &[2], false),
    ];
    for &(dl, red, keep) in cases {
        let (oshape, groups) = ref_groups(&xd, &dims, red, keep);
        for (key, mean) in [("aten::sum.IntList_out", false), ("aten::mean.out", true)] {
            let mut t = OpTest::new(key);
            let ix = t.input_f32(&dims, &x);
            let id = match dl {
                Some(l) => t.int_list(l),
                None => t.none(),
            };
            let ik = t.boolean(keep);
            let dt = t.none();
            let o = t.output(DType::F32, &oshape);
            t.call(&[ix, id, ik, dt, o, o]);
            let want: Vec<f64> = groups
                .iter()
                .map(|g| {
                    let s: f64 = g.iter().sum();
                    if mean {
                        s / g.len() as f64
                    } else {
                        s
                    }
                })
                .collect();
            let r = run(&t);
            assert_eq!(r[0].shape, oshape);
            close(&r[0].f32(), &want, 1e-6, 1e-6);
        }
    }
}

#[test]
fn sum_mean_dtypes() {
    // int64 sum, bool → int64 sum, float → int64 with dtype (truncates first)
    let mut t = OpTest::new("aten::sum.IntList_out");
    let ix = t.input_i64(&[2, 3], &[1, 2, 3, 4, 5, i64::MAX]);
    let id = t.int_list(&[1]);
    let ik = t.boolean(false);
    let dt = t.none();
    let o = t.output(DType::I64, &[2]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![6, i64::MAX.wrapping_add(9)]);

    let mut t = OpTest::new("aten::sum.IntList_out");
    let ix = t.input_bool(&[4], &[true, false, true, true]);
    let id = t.none();
    let ik = t.boolean(false);
    let dt = t.none();
    let o = t.output(DType::I64, &[]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![3]);

    let mut t = OpTest::new("aten::sum.IntList_out");
    let ix = t.input_f32(&[2], &[1.7, 2.6]);
    let id = t.none();
    let ik = t.boolean(false);
    let dt = t.int(DType::I64 as i64);
    let o = t.output(DType::I64, &[]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![3]);

    // mean of int64 with dtype=float32; mean.dtype_out; empty mean is NaN
    let mut t = OpTest::new("aten::mean.out");
    let ix = t.input_i64(&[2], &[1, 2]);
    let id = t.none();
    let ik = t.boolean(false);
    let dt = t.int(DType::F32 as i64);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert_eq!(run(&t)[0].f32(), vec![1.5]);

    let mut t = OpTest::new("aten::mean.dtype_out");
    let ix = t.input_f64(&[2, 2], &[1.0, 2.0, 3.0, 5.0]);
    let dt = t.none();
    let o = t.output(DType::F64, &[]);
    t.call(&[ix, dt, o, o]);
    assert_eq!(run(&t)[0].f64(), vec![2.75]);

    let mut t = OpTest::new("aten::mean.out");
    let ix = t.input_f32(&[2, 0], &[]);
    let id = t.int_list(&[1]);
    let ik = t.boolean(false);
    let dt = t.none();
    let o = t.output(DType::F32, &[2]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert!(run(&t)[0].f32().iter().all(|v| v.is_nan()));

    // errors: integer mean without dtype, dtype ≠ out dtype, repeated dim, bad dim
    let mut t = OpTest::new("aten::mean.out");
    let ix = t.input_i64(&[2], &[1, 2]);
    let id = t.none();
    let ik = t.boolean(false);
    let dt = t.none();
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::UnsupportedDType { arg: 0, .. }
    ));

    let mut t = OpTest::new("aten::sum.IntList_out");
    let ix = t.input_f32(&[2], &[1.0, 2.0]);
    let id = t.none();
    let ik = t.boolean(false);
    let dt = t.int(DType::F64 as i64);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 4, .. }
    ));

    for dl in [&[0i64, -2][..], &[2][..]] {
        let mut t = OpTest::new("aten::sum.IntList_out");
        let ix = t.input_f32(&[2, 2], &[1.0; 4]);
        let id = t.int_list(dl);
        let ik = t.boolean(false);
        let dt = t.none();
        let o = t.output_dynamic(DType::F32, &[2]);
        t.call(&[ix, id, ik, dt, o, o]);
        let e = t.run_kernel_err();
        assert!(matches!(
            e,
            KernelError::Value { arg: 1, .. } | KernelError::IndexOutOfBounds { arg: 1, .. }
        ));
    }
}

#[test]
fn prod_reductions() {
    let mut t = OpTest::new("aten::prod.int_out");
    let ix = t.input_i64(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let id = t.int(-1);
    let ik = t.boolean(true);
    let dt = t.none();
    let o = t.output(DType::I64, &[2, 1]);
    t.call(&[ix, id, ik, dt, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![6, 120]);

    let mut t = OpTest::new("aten::prod.out");
    let ix = t.input_f32(&[3], &[1.5, -2.0, 4.0]);
    let dt = t.none();
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, dt, o, o]);
    assert_eq!(run(&t)[0].f32(), vec![-12.0]);
}

#[test]
fn amax_amin_nan_and_dims() {
    let mut rng = Rng(15);
    let dims = [2usize, 3, 4];
    let mut x = rng.vec(24);
    x[5] = f32::NAN;
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (dl, red, keep) in [
        (&[1i64][..], &[1usize][..], false),
        (&[][..], &[0, 1, 2][..], false),
        (&[-1, 0][..], &[0, 2][..], true),
    ] {
        let (oshape, groups) = ref_groups(&xd, &dims, red, keep);
        for (key, is_max) in [("aten::amax.out", true), ("aten::amin.out", false)] {
            let mut t = OpTest::new(key);
            let ix = t.input_f32(&dims, &x);
            let id = t.int_list(dl);
            let ik = t.boolean(keep);
            let o = t.output(DType::F32, &oshape);
            t.call(&[ix, id, ik, o, o]);
            let want: Vec<f64> = groups
                .iter()
                .map(|g| {
                    if g.iter().any(|v| v.is_nan()) {
                        f64::NAN
                    } else if is_max {
                        g.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        g.iter().cloned().fold(f64::INFINITY, f64::min)
                    }
                })
                .collect();
            close(&run(&t)[0].f32(), &want, 0.0, 0.0);
        }
    }
    // int64 and bool keep their dtype; unary max/min
    let mut t = OpTest::new("aten::amax.out");
    let ix = t.input_i64(&[2, 2], &[i64::MIN, -5, 7, i64::MAX]);
    let id = t.int_list(&[0]);
    let ik = t.boolean(false);
    let o = t.output(DType::I64, &[2]);
    t.call(&[ix, id, ik, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![7, i64::MAX]);

    let mut t = OpTest::new("aten::min.unary_out");
    let ix = t.input_bool(&[3], &[true, false, true]);
    let o = t.output(DType::Bool, &[]);
    t.call(&[ix, o, o]);
    assert_eq!(run(&t)[0].bools(), vec![false]);

    let mut t = OpTest::new("aten::max.unary_out");
    let ix = t.input_f32(&[3], &[1.0, 9.0, -3.0]);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, o, o]);
    assert_eq!(run(&t)[0].f32(), vec![9.0]);

    // empty reduction
    let mut t = OpTest::new("aten::amax.out");
    let ix = t.input_f32(&[0, 3], &[]);
    let id = t.int_list(&[0]);
    let ik = t.boolean(false);
    let o = t.output(DType::F32, &[3]);
    t.call(&[ix, id, ik, o, o]);
    assert!(matches!(t.run_kernel_err(), KernelError::Shape { .. }));
    // ... but reducing a non-empty dim of an empty tensor is fine
    let mut t = OpTest::new("aten::amax.out");
    let ix = t.input_f32(&[0, 3], &[]);
    let id = t.int_list(&[1]);
    let ik = t.boolean(false);
    let o = t.output(DType::F32, &[0]);
    t.call(&[ix, id, ik, o, o]);
    assert_eq!(run(&t)[0].shape, vec![0]);
}

#[test]
fn arg_and_dim_extremes() {
    let mut rng = Rng(16);
    let dims = [3usize, 5, 2];
    let mut x = rng.vec(30);
    x[7] = x[1]; // a tie within a group of dim 1
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let first_arg = |g: &Vec<f64>, is_max: bool| -> (i64, f64) {
        let mut bi = 0;
        for (i, &v) in g.iter().enumerate() {
            if v.is_nan() {
                return (i as i64, v);
            }
            if (is_max && v > g[bi]) || (!is_max && v < g[bi]) {
                bi = i;
            }
        }
        (bi as i64, g[bi])
    };
    for dim in [0i64, 1, -1] {
        let d = if dim < 0 {
            (dim + 3) as usize
        } else {
            dim as usize
        };
        for keep in [false, true] {
            let (oshape, groups) = ref_groups(&xd, &dims, &[d], keep);
            for (is_max, akey, dkey) in [
                (true, "aten::argmax.out", "aten::max.dim_max"),
                (false, "aten::argmin.out", "aten::min.dim_min"),
            ] {
                let want: Vec<(i64, f64)> = groups.iter().map(|g| first_arg(g, is_max)).collect();
                let mut t = OpTest::new(akey);
                let ix = t.input_f32(&dims, &x);
                let id = t.int(dim);
                let ik = t.boolean(keep);
                let o = t.output(DType::I64, &oshape);
                t.call(&[ix, id, ik, o, o]);
                assert_eq!(
                    run(&t)[0].i64(),
                    want.iter().map(|w| w.0).collect::<Vec<_>>()
                );

                let mut t = OpTest::new(dkey);
                let ix = t.input_f32(&dims, &x);
                let id = t.int(dim);
                let ik = t.boolean(keep);
                let ov = t.output(DType::F32, &oshape);
                let oi = t.output(DType::I64, &oshape);
                let l = t.tensor_list(&[ov, oi]);
                t.call(&[ix, id, ik, ov, oi, l]);
                let r = run(&t);
                close(
                    &r[0].f32(),
                    &want.iter().map(|w| w.1).collect::<Vec<_>>(),
                    0.0,
                    0.0,
                );
                assert_eq!(r[1].i64(), want.iter().map(|w| w.0).collect::<Vec<_>>());
            }
        }
    }
    // dim = None: flattened; keepdim gives all-ones shape; NaN: first NaN wins
    let v = [1.0f32, f32::NAN, 5.0, f32::NAN];
    for (keep, shape) in [(false, vec![]), (true, vec![1, 1])] {
        let mut t = OpTest::new("aten::argmax.out");
        let ix = t.input_f32(&[2, 2], &v);
        let id = t.none();
        let ik = t.boolean(keep);
        let o = t.output(DType::I64, &shape);
        t.call(&[ix, id, ik, o, o]);
        let r = run(&t);
        assert_eq!(r[0].shape, shape);
        assert_eq!(r[0].i64(), vec![1]);
    }
    let mut t = OpTest::new("aten::argmin.out");
    let ix = t.input_i64(&[4], &[3, -2, 8, -2]);
    let id = t.int(0);
    let ik = t.boolean(false);
    let o = t.output(DType::I64, &[]);
    t.call(&[ix, id, ik, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![1]);
    // rank 0 with dim 0
    let mut t = OpTest::new("aten::max.dim_max");
    let ix = t.input_f32(&[], &[4.5]);
    let id = t.int(0);
    let ik = t.boolean(true);
    let ov = t.output(DType::F32, &[]);
    let oi = t.output(DType::I64, &[]);
    let l = t.tensor_list(&[ov, oi]);
    t.call(&[ix, id, ik, ov, oi, l]);
    let r = run(&t);
    assert_eq!((r[0].f32(), r[1].i64()), (vec![4.5], vec![0]));
    // wrong indices dtype
    let mut t = OpTest::new("aten::argmax.out");
    let ix = t.input_f32(&[2], &[1.0, 2.0]);
    let id = t.none();
    let ik = t.boolean(false);
    let o = t.output(DType::I32, &[]);
    t.call(&[ix, id, ik, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 3, .. }
    ));
}

#[test]
fn any_all_variants() {
    let x = [0.0f32, 1.0, 0.0, 0.0, f32::NAN, 2.0];
    let run_any =
        |key: &str, dims: Option<&[i64]>, single: Option<i64>, keep: bool, oshape: &[usize]| {
            let mut t = OpTest::new(key);
            let ix = t.input_f32(&[2, 3], &x);
            let mut args = vec![ix];
            if let Some(d) = single {
                args.push(t.int(d));
                args.push(t.boolean(keep));
            } else if key.ends_with("dims_out") {
                args.push(match dims {
                    Some(l) => t.int_list(l),
                    None => t.none(),
                });
                args.push(t.boolean(keep));
            }
            let o = t.output(DType::Bool, oshape);
            args.push(o);
            args.push(o);
            t.call(&args);
            run(&t)[0].bools()
        };
    assert_eq!(
        run_any("aten::any.out", None, Some(1), false, &[2]),
        vec![true, true]
    );
    assert_eq!(
        run_any("aten::all.out", None, Some(0), true, &[1, 3]),
        vec![false, true, false]
    );
    assert_eq!(
        run_any("aten::all.out", None, Some(-1), false, &[2]),
        vec![false, false]
    );
    assert_eq!(
        run_any("aten::any.all_out", None, None, false, &[]),
        vec![true]
    );
    assert_eq!(
        run_any("aten::all.all_out", None, None, false, &[]),
        vec![false]
    );
    assert_eq!(
        run_any("aten::any.dims_out", None, None, false, &[]),
        vec![true]
    );
    assert_eq!(
        run_any("aten::any.dims_out", Some(&[]), None, false, &[2, 3]),
        vec![false, true, false, false, true, true]
    );
    assert_eq!(
        run_any("aten::all.dims_out", Some(&[0, 1]), None, true, &[1, 1]),
        vec![false]
    );
    // int input with uint8 output; empty all is true
    let mut t = OpTest::new("aten::all.all_out");
    let ix = t.input_i64(&[0], &[]);
    let o = t.output(DType::U8, &[]);
    t.call(&[ix, o, o]);
    assert_eq!(run(&t)[0].i64(), vec![1]);
    // float output is rejected
    let mut t = OpTest::new("aten::any.all_out");
    let ix = t.input_i64(&[1], &[1]);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 1, .. }
    ));
}

#[test]
fn var_and_var_mean() {
    let mut rng = Rng(17);
    let dims = [4usize, 6];
    let x = rng.vec(24);
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let var = |g: &Vec<f64>, c: f64| {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        g.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (g.len() as f64 - c).max(0.0)
    };
    for (dl, red, corr) in [
        (Some(&[1i64][..]), &[1usize][..], None),
        (None, &[0, 1][..], Some(0.0)),
        (Some(&[0][..]), &[0][..], Some(2.5)),
    ] {
        let (oshape, groups) = ref_groups(&xd, &dims, red, false);
        let mut t = OpTest::new("aten::var.correction_out");
        let ix = t.input_f32(&dims, &x);
        let id = match dl {
            Some(l) => t.int_list(l),
            None => t.none(),
        };
        let ic = match corr {
            Some(c) => t.double(c),
            None => t.none(),
        };
        let ik = t.boolean(false);
        let o = t.output(DType::F32, &oshape);
        t.call(&[ix, id, ic, ik, o, o]);
        let want: Vec<f64> = groups.iter().map(|g| var(g, corr.unwrap_or(1.0))).collect();
        close(&run(&t)[0].f32(), &want, 1e-5, 1e-7);
    }
    // var.out (unbiased=false, keepdim) and var_mean
    let (oshape, groups) = ref_groups(&xd, &dims, &[0], true);
    let mut t = OpTest::new("aten::var.out");
    let ix = t.input_f32(&dims, &x);
    let id = t.int_list(&[0]);
    let iu = t.boolean(false);
    let ik = t.boolean(true);
    let o = t.output(DType::F32, &oshape);
    t.call(&[ix, id, iu, ik, o, o]);
    let want: Vec<f64> = groups.iter().map(|g| var(g, 0.0)).collect();
    close(&run(&t)[0].f32(), &want, 1e-5, 1e-7);

    let mut t = OpTest::new("aten::var_mean.correction_out");
    let ix = t.input_f32(&dims, &x);
    let id = t.int_list(&[0]);
    let ic = t.int(1);
    let ik = t.boolean(true);
    let o0 = t.output(DType::F32, &oshape);
    let o1 = t.output(DType::F32, &oshape);
    let l = t.tensor_list(&[o0, o1]);
    t.call(&[ix, id, ic, ik, o0, o1, l]);
    let r = run(&t);
    close(
        &r[0].f32(),
        &groups.iter().map(|g| var(g, 1.0)).collect::<Vec<_>>(),
        1e-5,
        1e-7,
    );
    close(
        &r[1].f32(),
        &groups
            .iter()
            .map(|g| g.iter().sum::<f64>() / g.len() as f64)
            .collect::<Vec<_>>(),
        1e-6,
        1e-7,
    );
    // single element with correction 1 → NaN
    let mut t = OpTest::new("aten::var.correction_out");
    let ix = t.input_f32(&[1], &[3.0]);
    let id = t.none();
    let ic = t.none();
    let ik = t.boolean(false);
    let o = t.output(DType::F32, &[]);
    t.call(&[ix, id, ic, ik, o, o]);
    assert!(run(&t)[0].f32()[0].is_nan());
}

#[test]
fn any_all_bool_masks_whole_tensor() {
    for n in [1usize, 3, 17, 129] {
        for pattern in 0..4 {
            let m: Vec<bool> = (0..n)
                .map(|k| match pattern {
                    0 => false,
                    1 => true,
                    2 => k == n - 1,
                    _ => k != n / 2,
                })
                .collect();
            for (key, want) in [
                ("aten::any.all_out", m.iter().any(|&v| v)),
                ("aten::all.all_out", m.iter().all(|&v| v)),
            ] {
                let mut t = OpTest::new(key);
                let ix = t.input_bool(&[1, n], &m);
                let o = t.output(DType::Bool, &[]);
                t.call(&[ix, o, o]);
                assert_eq!(run(&t)[0].bools(), vec![want], "{key} n={n} p={pattern}");
            }
            // A single-dim reduction to one element takes the same fast path.
            let mut t = OpTest::new("aten::any.out");
            let ix = t.input_bool(&[1, n], &m);
            let d = t.int(1);
            let k = t.boolean(false);
            let o = t.output(DType::Bool, &[1]);
            t.call(&[ix, d, k, o, o]);
            assert_eq!(run(&t)[0].bools(), vec![m.iter().any(|&v| v)]);
        }
    }
}
