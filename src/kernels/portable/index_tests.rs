//! Tests of advanced indexing, plus rank-0, dynamic-shape and argument-error edges of the
//! data-movement kernels.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{
    data, iota_i64, numel, ravel, run_first, unary_f32, unravel,
};
use crate::testing::{OpTest, TestTensor};
use crate::KernelError;
use std::vec::Vec;

fn index_run(
    x_dims: &[usize],
    x: &[f32],
    idx: &[Option<(Vec<usize>, Vec<i64>)>],
    od: &[usize],
) -> Result<TestTensor, KernelError> {
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(x_dims, x);
    let items: Vec<Option<i32>> = idx
        .iter()
        .map(|e| e.as_ref().map(|(d, v)| t.input_i64(d, v)))
        .collect();
    let l = t.opt_tensor_list(&items);
    let o = t.output(DType::F32, od);
    t.call(&[a, l, o, o]);
    match t.run() {
        Ok(mut v) => Ok(v.remove(0)),
        Err(crate::Error::Kernel { source, .. }) => Err(source),
        Err(e) => panic!("{e:?}"),
    }
}

#[test]
fn index_single_int_tensor() {
    let d = [4, 5, 3];
    let x = data(60, 17);
    // x[:, idx] with idx of shape [2, 3] and negative values
    let iv = vec![0i64, -1, 2, 4, -5, 1];
    let od = [4, 2, 3, 3];
    let r = index_run(&d, &x, &[None, Some((vec![2, 3], iv.clone()))], &od).unwrap();
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let oi = unravel(i, &od);
            let j = iv[oi[1] * 3 + oi[2]];
            let j = if j < 0 { j + 5 } else { j } as usize;
            x[ravel(&[oi[0], j, oi[3]], &d)]
        })
        .collect();
    assert_eq!(r.shape, od.to_vec());
    assert_eq!(r.f32(), want);
    // out of range
    let e = index_run(&d, &x, &[Some((vec![1], vec![4]))], &[1, 5, 3]).unwrap_err();
    assert_eq!(
        e,
        KernelError::IndexOutOfBounds {
            arg: 1,
            index: 4,
            size: 4
        }
    );
    // too many indices
    let e = index_run(
        &[2],
        &[1.0, 2.0],
        &[Some((vec![1], vec![0])), Some((vec![1], vec![0]))],
        &[1],
    )
    .unwrap_err();
    assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
}

#[test]
fn index_adjacent_and_separated_broadcast() {
    let d = [3, 4, 5, 2];
    let x = data(numel(&d), 18);
    let i1 = vec![0i64, 3, 1]; // [3, 1] -> broadcasts with [2]
    let i2 = vec![4i64, -2]; // [2]
                             // adjacent: x[:, i1, i2] -> [3, 3, 2, 2]
    let od = [3, 3, 2, 2];
    let r = index_run(
        &d,
        &x,
        &[
            None,
            Some((vec![3, 1], i1.clone())),
            Some((vec![2], i2.clone())),
        ],
        &od,
    )
    .unwrap();
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let o = unravel(i, &od);
            let a = i1[o[1]] as usize;
            let b = if i2[o[2]] < 0 { i2[o[2]] + 5 } else { i2[o[2]] } as usize;
            x[ravel(&[o[0], a, b, o[3]], &d)]
        })
        .collect();
    assert_eq!(r.f32(), want);
    // separated: x[i1', :, i2'] -> broadcast dims first: [3, 2, 4, 2]
    let j1 = vec![2i64, 0, -1];
    let j2 = vec![1i64, 3];
    let od = [3, 2, 4, 2];
    let r = index_run(
        &d,
        &x,
        &[
            Some((vec![3, 1], j1.clone())),
            None,
            Some((vec![1, 2], j2.clone())),
        ],
        &od,
    )
    .unwrap();
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let o = unravel(i, &od);
            let a = if j1[o[0]] < 0 { j1[o[0]] + 3 } else { j1[o[0]] } as usize;
            let c = j2[o[1]] as usize;
            x[ravel(&[a, o[2], c, o[3]], &d)]
        })
        .collect();
    assert_eq!(r.shape, od.to_vec());
    assert_eq!(r.f32(), want);
    // 0-dim index removes the dim: x[:, 2] -> [3, 5, 2]
    let r = index_run(&d, &x, &[None, Some((vec![], vec![2]))], &[3, 5, 2]).unwrap();
    let want: Vec<f32> = (0..30)
        .map(|i| {
            let o = unravel(i, &[3, 5, 2]);
            x[ravel(&[o[0], 2, o[1], o[2]], &d)]
        })
        .collect();
    assert_eq!(r.f32(), want);
    // broadcast failure
    let e = index_run(
        &d,
        &x,
        &[Some((vec![3], vec![0, 1, 2])), Some((vec![2], vec![0, 1]))],
        &[3, 5, 2],
    )
    .unwrap_err();
    assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
    // all None: a copy
    let r = index_run(&d, &x, &[None], &d).unwrap();
    assert_eq!(r.f32(), x);
}

/// Several int index tensors over adjacent dims, each as large as the broadcast shape or a
/// single element (the walk without per-block coordinates), against index arithmetic; a
/// partly broadcast tensor and an out-of-range element on that walk.
#[test]
fn index_several_ints_over_adjacent_dims() {
    let d = [2, 3, 5, 4];
    let x = data(numel(&d), 19);
    // x[:, a, b] with a, b of shape [2, 3] (b with negative values) -> [2, 2, 3, 4]
    let a = vec![0i64, 2, 1, 1, 0, 2];
    let b = vec![4i64, -1, 0, 2, -5, 3];
    let od = [2, 2, 3, 4];
    let r = index_run(
        &d,
        &x,
        &[
            None,
            Some((vec![2, 3], a.clone())),
            Some((vec![2, 3], b.clone())),
        ],
        &od,
    )
    .unwrap();
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let o = unravel(i, &od);
            let p = o[1] * 3 + o[2];
            let bb = if b[p] < 0 { b[p] + 5 } else { b[p] } as usize;
            x[ravel(&[o[0], a[p] as usize, bb, o[3]], &d)]
        })
        .collect();
    assert_eq!(r.f32(), want);
    // x[s, c] with s a single element ([1, 1]) and c of shape [1, 4] -> [1, 4, 5, 4]
    let c = vec![2i64, 0, -3, 1];
    let od = [1, 4, 5, 4];
    let r = index_run(
        &d,
        &x,
        &[Some((vec![1, 1], vec![-1])), Some((vec![1, 4], c.clone()))],
        &od,
    )
    .unwrap();
    let want: Vec<f32> = (0..numel(&od))
        .map(|i| {
            let o = unravel(i, &od);
            let cc = if c[o[1]] < 0 { c[o[1]] + 3 } else { c[o[1]] } as usize;
            x[ravel(&[1, cc, o[2], o[3]], &d)]
        })
        .collect();
    assert_eq!(r.shape, od.to_vec());
    assert_eq!(r.f32(), want);
    // out of range on the second tensor
    let e = index_run(
        &d,
        &x,
        &[Some((vec![1], vec![0])), Some((vec![2], vec![1, 3]))],
        &[2, 5, 4],
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::IndexOutOfBounds {
            arg: 1,
            index: 3,
            size: 3
        }
    );
}

#[test]
fn index_bool_masks() {
    let d = [3, 4, 2];
    let x = data(24, 19);
    let mask: Vec<bool> = (0..12).map(|i| (i * 7) % 5 < 2).collect();
    let trues: Vec<(usize, usize)> = (0..12)
        .filter(|&i| mask[i])
        .map(|i| (i / 4, i % 4))
        .collect();
    // x[mask2d] -> [count, 2]
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(&d, &x);
    let m = t.input_bool(&[3, 4], &mask);
    let l = t.opt_tensor_list(&[Some(m)]);
    let o = t.output(DType::F32, &[trues.len(), 2]);
    t.call(&[a, l, o, o]);
    let r = run_first(&t);
    let want: Vec<f32> = trues
        .iter()
        .flat_map(|&(i, j)| [x[(i * 4 + j) * 2], x[(i * 4 + j) * 2 + 1]])
        .collect();
    assert_eq!(r.f32(), want);
    // x[:, mask1d, int] with int broadcasting against the mask count
    let m1 = [true, false, true, true];
    let iv = [1i64];
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(&d, &x);
    let m = t.input_bool(&[4], &m1);
    let k = t.input_i64(&[1], &iv);
    let l = t.opt_tensor_list(&[None, Some(m), Some(k)]);
    let o = t.output(DType::F32, &[3, 3]);
    t.call(&[a, l, o, o]);
    let r = run_first(&t);
    let sel = [0usize, 2, 3];
    let want: Vec<f32> = (0..9)
        .map(|i| x[ravel(&[i / 3, sel[i % 3], 1], &d)])
        .collect();
    assert_eq!(r.f32(), want);
    // mask with the wrong shape
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(&d, &x);
    let m = t.input_bool(&[3, 3], &[true; 9]);
    let l = t.opt_tensor_list(&[Some(m)]);
    let o = t.output(DType::F32, &[9, 2]);
    t.call(&[a, l, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 1, .. }
    ));
    // float index dtype
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(&d, &x);
    let m = t.input_f32(&[1], &[0.0]);
    let l = t.opt_tensor_list(&[Some(m)]);
    let o = t.output(DType::F32, &[1, 4, 2]);
    t.call(&[a, l, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::UnsupportedDType { arg: 1, .. }
    ));
}

#[test]
fn index_put_set_and_accumulate() {
    let d = [4, 3];
    let x = data(12, 20);
    let iv = [2i64, 0, 2, -1];
    for acc in [false, true] {
        let vals = data(4 * 3, 21);
        let mut t = OpTest::new("aten::index_put.out");
        let a = t.input_f32(&d, &x);
        let k = t.input_i64(&[4], &iv);
        let l = t.opt_tensor_list(&[Some(k)]);
        let v = t.input_f32(&[4, 3], &vals);
        let ac = t.boolean(acc);
        let o = t.output(DType::F32, &d);
        t.call(&[a, l, v, ac, o, o]);
        let r = run_first(&t);
        let mut want = x.clone();
        for (n, &i) in iv.iter().enumerate() {
            let row = if i < 0 { i + 4 } else { i } as usize;
            for j in 0..3 {
                if acc {
                    want[row * 3 + j] += vals[n * 3 + j];
                } else {
                    want[row * 3 + j] = vals[n * 3 + j];
                }
            }
        }
        assert_eq!(r.f32(), want, "acc={acc}");
    }
    // values broadcast ([3] against result [2, 3]) with a bool mask, int64 data
    let xi = iota_i64(12);
    let mut t = OpTest::new("aten::index_put.out");
    let a = t.input_i64(&d, &xi);
    let m = t.input_bool(&[4], &[false, true, false, true]);
    let l = t.opt_tensor_list(&[Some(m)]);
    let v = t.input_i64(&[3], &[100, 200, 300]);
    let ac = t.boolean(true);
    let o = t.output(DType::I64, &d);
    t.call(&[a, l, v, ac, o, o]);
    let r = run_first(&t);
    let mut want = xi.clone();
    for row in [1, 3] {
        for j in 0..3 {
            want[row * 3 + j] += 100 * (j as i64 + 1);
        }
    }
    assert_eq!(r.i64(), want);
    // 2 int indices (element scatter), scalar value
    let mut t = OpTest::new("aten::index_put.out");
    let a = t.input_f32(&d, &x);
    let k0 = t.input_i64(&[2], &[0, 3]);
    let k1 = t.input_i64(&[2], &[2, -3]);
    let l = t.opt_tensor_list(&[Some(k0), Some(k1)]);
    let v = t.input_f32(&[], &[-1.0]);
    let ac = t.boolean(false);
    let o = t.output(DType::F32, &d);
    t.call(&[a, l, v, ac, o, o]);
    let mut want = x.clone();
    want[2] = -1.0;
    want[9] = -1.0;
    assert_eq!(run_first(&t).f32(), want);
    // values that do not broadcast
    let mut t = OpTest::new("aten::index_put.out");
    let a = t.input_f32(&d, &x);
    let k = t.input_i64(&[2], &[0, 1]);
    let l = t.opt_tensor_list(&[Some(k)]);
    let v = t.input_f32(&[2], &[1.0, 2.0]);
    let ac = t.boolean(false);
    let o = t.output(DType::F32, &d);
    t.call(&[a, l, v, ac, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 2, .. }
    ));
}

#[test]
fn index_select_gather_embedding() {
    let d = [3, 5, 2];
    let x = data(30, 22);
    // index_select dim 1 with int32 indices
    let iv = [4i32, 0, 4];
    let mut t = OpTest::new("aten::index_select.out");
    let a = t.input_f32(&d, &x);
    let dm = t.int(-2);
    let k = t.input_i32(&[3], &iv);
    let o = t.output(DType::F32, &[3, 3, 2]);
    t.call(&[a, dm, k, o, o]);
    let want: Vec<f32> = (0..18)
        .map(|i| {
            let o = unravel(i, &[3, 3, 2]);
            x[ravel(&[o[0], iv[o[1]] as usize, o[2]], &d)]
        })
        .collect();
    assert_eq!(run_first(&t).f32(), want);
    let mut t = OpTest::new("aten::index_select.out");
    let a = t.input_f32(&d, &x);
    let dm = t.int(0);
    let k = t.input_i64(&[1], &[-1]);
    let o = t.output(DType::F32, &[1, 5, 2]);
    t.call(&[a, dm, k, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::IndexOutOfBounds { arg: 2, .. }
    ));

    // gather dim 1: index [3, 4, 1]
    let gd = [3usize, 4, 1];
    let gi: Vec<i64> = (0..12).map(|i| (i * 3 % 5) as i64).collect();
    let mut t = OpTest::new("aten::gather.out");
    let a = t.input_f32(&d, &x);
    let dm = t.int(1);
    let k = t.input_i64(&gd, &gi);
    let sg = t.boolean(false);
    let o = t.output(DType::F32, &gd);
    t.call(&[a, dm, k, sg, o, o]);
    let want: Vec<f32> = (0..12)
        .map(|i| {
            let o = unravel(i, &gd);
            x[ravel(&[o[0], gi[i] as usize, o[2]], &d)]
        })
        .collect();
    assert_eq!(run_first(&t).f32(), want);
    // gather with an index larger than self outside dim
    let mut t = OpTest::new("aten::gather.out");
    let a = t.input_f32(&d, &x);
    let dm = t.int(1);
    let k = t.input_i64(&[3, 1, 3], &[0; 9]);
    let sg = t.boolean(false);
    let o = t.output(DType::F32, &[3, 1, 3]);
    t.call(&[a, dm, k, sg, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 2, .. }
    ));

    // embedding: weight [7, 3], indices [2, 2] int64 and int32
    let w = data(21, 23);
    for i32_idx in [false, true] {
        let ids = [6i64, 0, 3, 3];
        let mut t = OpTest::new("aten::embedding.out");
        let wt = t.constant_f32(&[7, 3], &w);
        let k = if i32_idx {
            let v: Vec<i32> = ids.iter().map(|&v| v as i32).collect();
            t.input_i32(&[2, 2], &v)
        } else {
            t.input_i64(&[2, 2], &ids)
        };
        let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
        let o = t.output(DType::F32, &[2, 2, 3]);
        t.call(&[wt, k, p, s1, s2, o, o]);
        let want: Vec<f32> = ids
            .iter()
            .flat_map(|&r| w[r as usize * 3..r as usize * 3 + 3].to_vec())
            .collect();
        assert_eq!(run_first(&t).f32(), want);
    }
    let mut t = OpTest::new("aten::embedding.out");
    let wt = t.constant_f32(&[7, 3], &w);
    let k = t.input_i64(&[2], &[1, 7]);
    let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
    let o = t.output(DType::F32, &[2, 3]);
    t.call(&[wt, k, p, s1, s2, o, o]);
    assert_eq!(
        t.run_kernel_err(),
        KernelError::IndexOutOfBounds {
            arg: 1,
            index: 7,
            size: 7
        }
    );
}

#[test]
fn rank0_and_dynamic_and_error_edges() {
    // rank-0 inputs: permute [], repeat [], flip [0], transpose (0, -1)
    let o = unary_f32("aten::permute_copy.out", &[], &[3.0], &[], |t| {
        vec![t.int_list(&[])]
    });
    assert_eq!((o.shape.clone(), o.f32()), (vec![], vec![3.0]));
    let o = unary_f32("aten::repeat.out", &[], &[3.0], &[2, 2], |t| {
        vec![t.int_list(&[2, 2])]
    });
    assert_eq!(o.f32(), vec![3.0; 4]);
    let o = unary_f32("aten::flip.out", &[], &[3.0], &[], |t| {
        vec![t.int_list(&[0])]
    });
    assert_eq!(o.f32(), vec![3.0]);
    let o = unary_f32("aten::transpose_copy.int_out", &[], &[3.0], &[], |t| {
        vec![t.int(0), t.int(-1)]
    });
    assert_eq!(o.f32(), vec![3.0]);
    // cat of a rank-0 tensor is an error
    let mut t = OpTest::new("aten::cat.out");
    let x = t.input_f32(&[], &[1.0]);
    let l = t.tensor_list(&[x]);
    let dm = t.int(0);
    let o = t.output(DType::F32, &[1]);
    t.call(&[l, dm, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
    // data-dependent result shape into a dynamic-bound output (uint8 mask)
    let x = data(6, 29);
    let mut t = OpTest::new("aten::index.Tensor_out");
    let a = t.input_f32(&[6], &x);
    let m = t.input(DType::U8, &[6], &[0, 3, 0, 1, 1, 0]);
    let l = t.opt_tensor_list(&[Some(m)]);
    let o = t.output_dynamic(DType::F32, &[6]);
    t.call(&[a, l, o, o]);
    let r = run_first(&t);
    assert_eq!(
        (r.shape.clone(), r.f32()),
        (vec![3], vec![x[1], x[3], x[4]])
    );
    // a static output of the wrong shape cannot be resized
    let mut t = OpTest::new("aten::view_copy.out");
    let a = t.input_f32(&[6], &x);
    let s = t.int_list(&[2, 3]);
    let o = t.output(DType::F32, &[5]);
    t.call(&[a, s, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Resize { arg: 2, .. }
    ));
    // index dtype errors
    let mut t = OpTest::new("aten::index_select.out");
    let a = t.input_f32(&[6], &x);
    let dm = t.int(0);
    let k = t.input_f32(&[1], &[0.0]);
    let o = t.output(DType::F32, &[1]);
    t.call(&[a, dm, k, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::UnsupportedDType { arg: 2, .. }
    ));
    let mut t = OpTest::new("aten::gather.out");
    let a = t.input_f32(&[6], &x);
    let dm = t.int(0);
    let k = t.input_i32(&[1], &[0]);
    let sg = t.boolean(false);
    let o = t.output(DType::F32, &[1]);
    t.call(&[a, dm, k, sg, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::DTypeMismatch { arg: 2, .. }
    ));
    // embedding needs a 2-D weight
    let mut t = OpTest::new("aten::embedding.out");
    let wt = t.constant_f32(&[6], &x);
    let k = t.input_i64(&[1], &[0]);
    let (p, s1, s2) = (t.int(-1), t.boolean(false), t.boolean(false));
    let o = t.output(DType::F32, &[1, 1]);
    t.call(&[wt, k, p, s1, s2, o, o]);
    assert!(matches!(
        t.run_kernel_err(),
        KernelError::Shape { arg: 0, .. }
    ));
    // gather on a rank-0 self with a rank-0 index
    let mut t = OpTest::new("aten::gather.out");
    let a = t.input_f32(&[], &[4.5]);
    let dm = t.int(0);
    let k = t.input_i64(&[], &[0]);
    let sg = t.boolean(false);
    let o = t.output(DType::F32, &[]);
    t.call(&[a, dm, k, sg, o, o]);
    assert_eq!(run_first(&t).f32(), vec![4.5]);
}

#[test]
fn index_and_embedding_split_across_cores_give_the_same_bytes() {
    // Gathers of many blocks split by ranges of blocks on 2- and 4-core teams: the reference's
    // values, and the teams split; an index out of range is still refused on a team.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    let d = [3usize, 129, 17];
    let x: Vec<f32> = (0..numel(&d)).map(|i| i as f32 * 0.5 - 7.0).collect();
    let rows: Vec<i64> = (0..300).map(|i| (i * 37 % 129) as i64).collect();
    // x[:, rows]: 3 × 300 blocks of 17.
    let want: Vec<f32> = (0..3 * 300 * 17)
        .map(|i| x[ravel(&[i / (300 * 17), rows[i / 17 % 300] as usize, i % 17], &d)])
        .collect();
    let gather = || {
        index_run(
            &d,
            &x,
            &[None, Some((vec![300], rows.clone()))],
            &[3, 300, 17],
        )
    };
    assert_eq!(gather().map(|r| r.f32()).ok(), Some(want.clone()));
    let table: Vec<f32> = (0..129 * 17).map(|i| i as f32).collect();
    let embed = |ids: &[i64]| {
        let mut t = OpTest::new("aten::embedding.out");
        let w = t.input_f32(&[129, 17], &table);
        let i = t.input_i64(&[1, ids.len()], ids);
        let (p, s, sp) = (t.int(-1), t.boolean(false), t.boolean(false));
        let o = t.output(DType::F32, &[1, ids.len(), 17]);
        t.call(&[w, i, p, s, sp, o, o]);
        t.run().map(|mut v| v.remove(0).f32())
    };
    let want_rows: Vec<f32> = rows
        .iter()
        .flat_map(|&r| table[r as usize * 17..(r as usize + 1) * 17].to_vec())
        .collect();
    assert_eq!(embed(&rows).ok(), Some(want_rows.clone()));
    for cores in [2, 4] {
        let team = CountingTeam::new(cores);
        let got = scoped(&team, gather).map(|r| r.f32()).ok();
        assert_eq!(got, Some(want.clone()), "index on {cores} cores");
        let splits = team.splits();
        assert!(splits > 0, "index was not split on {cores} cores");
        assert_eq!(scoped(&team, || embed(&rows)).ok(), Some(want_rows.clone()));
        assert!(
            team.splits() > splits,
            "embedding was not split on {cores} cores"
        );
        let mut bad = rows.clone();
        bad[250] = 129;
        let refused = scoped(&team, || {
            index_run(
                &d,
                &x,
                &[None, Some((vec![300], bad.clone()))],
                &[3, 300, 17],
            )
        });
        assert!(
            refused.is_err(),
            "an index out of range was accepted on {cores} cores"
        );
        // The embedding checks its indices inside the parts: two bad ones in different
        // parts, and the error names the first in order (on one core as on the team).
        let mut bad = rows.clone();
        bad[260] = 129;
        bad[40] = -3;
        for refused in [embed(&bad), scoped(&team, || embed(&bad))] {
            match refused {
                Err(crate::Error::Kernel {
                    source:
                        KernelError::IndexOutOfBounds {
                            arg: 1,
                            index,
                            size,
                        },
                    ..
                }) => assert_eq!((index, size), (-3, 129), "{cores} cores"),
                other => panic!("{cores} cores: {other:?}"),
            }
        }
    }
}

#[test]
fn single_valued_and_broadcast_int_indices_gather_and_fail_in_order() {
    // A decoder's mask row: `x[i, cols]` with `i` one value and `cols` a row of positions
    // (shapes [1, 1, 1, 1] and [1, 1, 1, T]). The single value is checked once, the row per
    // block: the reference's values on one core and on 2- and 4-core teams, for T = 1, 3,
    // 17, 129 and 700; an index out of range is the first one in order either way.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for t in [1usize, 3, 17, 129, 700] {
        let d = [2usize, t + 3];
        let x: Vec<f32> = (0..numel(&d)).map(|i| i as f32 - 5.0).collect();
        let cols: Vec<i64> = (0..t).map(|j| ((j * 7) % (t + 3)) as i64 - 1).collect();
        let run = |row: i64, cols: &[i64]| {
            index_run(
                &d,
                &x,
                &[
                    Some((vec![1, 1, 1, 1], vec![row])),
                    Some((vec![1, 1, 1, t], cols.to_vec())),
                ],
                &[1, 1, 1, t],
            )
        };
        let want: Vec<f32> = cols
            .iter()
            .map(|&c| x[(t + 3) + c.rem_euclid(t as i64 + 3) as usize])
            .collect();
        assert_eq!(run(1, &cols).map(|r| r.f32()), Ok(want.clone()), "T = {t}");
        assert_eq!(run(-1, &cols).map(|r| r.f32()), Ok(want.clone()), "T = {t}");
        let oob = |index, size| {
            Err(KernelError::IndexOutOfBounds {
                arg: 1,
                index,
                size,
            })
        };
        let mut bad = cols.clone();
        bad[t - 1] = t as i64 + 3;
        if t > 2 {
            bad[t / 2] = -(t as i64) - 4;
        }
        let first = if t > 2 {
            oob(-(t as i64) - 4, t + 3)
        } else {
            oob(t as i64 + 3, t + 3)
        };
        for cores in [1, 2, 4] {
            let team = CountingTeam::new(cores);
            let on = |f: &dyn Fn() -> Result<TestTensor, KernelError>| scoped(&team, f);
            assert_eq!(on(&|| run(1, &cols)).map(|r| r.f32()), Ok(want.clone()));
            assert_eq!(
                on(&|| run(1, &bad)).map(|r| r.f32()),
                first,
                "T = {t}, {cores}"
            );
            // The row out of range and the first column too: the row (the first index
            // tensor) is named, as a walk block by block names it.
            let mut both = cols.clone();
            both[0] = 99 + t as i64;
            assert_eq!(on(&|| run(2, &both)).map(|r| r.f32()), oob(2, 2), "{cores}");
            if t >= 129 && cores > 1 {
                assert!(team.splits() > 0, "T = {t} was not split on {cores} cores");
            }
        }
    }
}

/// Int index tensors over the leading dims of `self` (the kernel's direct path: one element
/// or one common shape each, no `None`), against index arithmetic: f32 and bool `self`, i64
/// and i32 indices, negative indices, a single index of higher rank than the common shape
/// (`x[s, c]` of a causal mask's padding row), every index a single element, sizes 1, 3, 17
/// and 129; split across cores; an index out of range still reported as the general path
/// reports it (the first in order, as `IndexOutOfBounds`).
#[test]
fn leading_int_indices_match_the_reference() {
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    let wrap = |v: i64, n: usize| if v < 0 { v + n as i64 } else { v } as usize;
    // x dims, then per index: (dims, values); the expected result dims.
    type Case = (Vec<usize>, Vec<(Vec<usize>, Vec<i64>)>, Vec<usize>);
    let mut cases: Vec<Case> = Vec::new();
    // The padding mask of a causal mask: x [1, 17] indexed by [[[[0]]]] and an arange of
    // shape [1, 1, 1, 17] -> [1, 1, 1, 17].
    cases.push((
        vec![1, 17],
        vec![
            (vec![1, 1, 1, 1], vec![0]),
            (vec![1, 1, 1, 17], (0..17).collect()),
        ],
        vec![1, 1, 1, 17],
    ));
    // x[idx] over [129, 3] with 17 indices in [1, 17], some negative.
    let rows: Vec<i64> = (0..17).map(|i| (i * 53 % 129) as i64 - 64).collect();
    cases.push((vec![129, 3], vec![(vec![1, 17], rows)], vec![1, 17, 3]));
    // x[a, b] with both of shape [3] over [3, 17, 1].
    cases.push((
        vec![3, 17, 1],
        vec![(vec![3], vec![2, -3, 1]), (vec![3], vec![16, 0, -17])],
        vec![3, 1],
    ));
    // Every index one element: x[-1, 5] over [3, 17, 129] -> [129]; x[[1]] -> [1, 17, 129].
    cases.push((
        vec![3, 17, 129],
        vec![(vec![], vec![-1]), (vec![1], vec![5])],
        vec![1, 129],
    ));
    cases.push((vec![3, 17, 129], vec![(vec![1], vec![1])], vec![1, 17, 129]));
    // x[-2, c] with c of shape [2, 2] over [3, 17, 3] -> [2, 2, 3]: one single index (an
    // offset for every block) and one of many values.
    cases.push((
        vec![3, 17, 3],
        vec![(vec![], vec![-2]), (vec![2, 2], vec![16, 0, -1, 5])],
        vec![2, 2, 3],
    ));
    for (xd, idx, od) in &cases {
        let x = data(numel(xd), 23);
        let n = idx.len();
        let bd = &od[..od.len() - (xd.len() - n)];
        let want: Vec<f32> = (0..numel(od))
            .map(|i| {
                let o = unravel(i, od);
                let p = ravel(&o[..bd.len()], bd);
                let mut at: Vec<usize> = idx
                    .iter()
                    .enumerate()
                    .map(|(e, (_, v))| wrap(v[if v.len() == 1 { 0 } else { p }], xd[e]))
                    .collect();
                at.extend_from_slice(&o[bd.len()..]);
                x[ravel(&at, xd)]
            })
            .collect();
        let items: Vec<Option<(Vec<usize>, Vec<i64>)>> =
            idx.iter().map(|e| Some(e.clone())).collect();
        let r = index_run(xd, &x, &items, od).unwrap();
        assert_eq!(r.shape, od.to_vec(), "{xd:?} {idx:?}");
        assert_eq!(r.f32(), want, "{xd:?} {idx:?}");
        // Bool self and i32 indices: the same positions.
        let xb: Vec<bool> = x.iter().map(|v| *v > 0.0).collect();
        let mut t = OpTest::new("aten::index.Tensor_out");
        let a = t.input_bool(xd, &xb);
        let items: Vec<Option<i32>> = idx
            .iter()
            .map(|(d, v)| {
                let v32: Vec<i32> = v.iter().map(|&v| v as i32).collect();
                Some(t.input_i32(d, &v32))
            })
            .collect();
        let l = t.opt_tensor_list(&items);
        let o = t.output(DType::Bool, od);
        t.call(&[a, l, o, o]);
        let got = run_first(&t);
        let wantb: Vec<u8> = want.iter().map(|v| u8::from(*v > 0.0)).collect();
        assert_eq!(got.bytes, wantb, "bool {xd:?} {idx:?}");
    }
    // Out of range: the first bad index in order, after a good one.
    let e = index_run(
        &[3, 17],
        &data(51, 3),
        &[Some((vec![2], vec![2, 1])), Some((vec![2], vec![16, 17]))],
        &[2],
    )
    .unwrap_err();
    assert_eq!(
        e,
        KernelError::IndexOutOfBounds {
            arg: 1,
            index: 17,
            size: 17
        }
    );
    // x[rows] of 300 blocks of 17 split across cores: the same bytes.
    let xd = [129usize, 17];
    let x: Vec<f32> = (0..numel(&xd)).map(|i| i as f32 - 900.0).collect();
    let rows: Vec<i64> = (0..300).map(|i| (i * 37 % 129) as i64).collect();
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|&r| x[r as usize * 17..(r as usize + 1) * 17].to_vec())
        .collect();
    let gather = || index_run(&xd, &x, &[Some((vec![300], rows.clone()))], &[300, 17]);
    assert_eq!(gather().map(|r| r.f32()).ok(), Some(want.clone()));
    for cores in [2, 4] {
        let team = CountingTeam::new(cores);
        let got = scoped(&team, gather).map(|r| r.f32()).ok();
        assert_eq!(got, Some(want.clone()), "{cores} cores");
        assert!(team.splits() > 0, "not split on {cores} cores");
    }
}
