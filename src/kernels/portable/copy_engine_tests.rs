//! Tests of the strided copy engine through permutes and slices: odd sizes, every element size,
//! blocked 4-byte transposes.

use crate::dtype::DType;
use crate::kernels::portable::test_util::{data, numel, permute_ref, run_first, unary_f32};
use crate::testing::OpTest;
use std::vec::Vec;

#[test]
fn odd_sizes_and_dtypes_through_permute_and_slice() {
    // sizes 1, 3, 17, 129 and several dtypes through the strided engine
    for (n, dt) in [
        (1usize, DType::U8),
        (3, DType::I16),
        (17, DType::F64),
        (129, DType::I32),
    ] {
        let es = dt.size();
        let bytes: Vec<u8> = (0..2 * n * es).map(|i| (i * 37 % 251) as u8).collect();
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input(dt, &[2, n], &bytes);
        let p = t.int_list(&[1, 0]);
        let o = t.output(dt, &[n, 2]);
        t.call(&[a, p, o, o]);
        let r = run_first(&t);
        let mut want = vec![0u8; bytes.len()];
        for i in 0..2 {
            for j in 0..n {
                let s = (i * n + j) * es;
                let d = (j * 2 + i) * es;
                want[d..d + es].copy_from_slice(&bytes[s..s + es]);
            }
        }
        assert_eq!(r.bytes, want, "{n} {dt}");
        // every other element of the flattened tensor
        let mut t = OpTest::new("aten::slice_copy.Tensor_out");
        let a = t.input(dt, &[2 * n], &bytes);
        let (dm, s, e, st) = (t.int(0), t.int(1), t.none(), t.int(2));
        let o = t.output(dt, &[n]);
        t.call(&[a, dm, s, e, st, o, o]);
        let r = run_first(&t);
        let want: Vec<u8> = (0..n)
            .flat_map(|j| bytes[(2 * j + 1) * es..(2 * j + 2) * es].to_vec())
            .collect();
        assert_eq!(r.bytes, want, "{n} {dt}");
    }
}

#[test]
fn blocked_transposes_4_byte() {
    // Last-two-dims swaps of 4-byte elements go through linalg::vecmath::transpose32 (4x4
    // blocks, edges element-wise): sizes 4, 5, 17, 129 and batched, plus int32 bit patterns.
    for (d, p) in [
        (vec![4usize, 4], vec![1usize, 0]),
        (vec![5, 4], vec![1, 0]),
        (vec![4, 5], vec![1, 0]),
        (vec![17, 129], vec![1, 0]),
        (vec![129, 17], vec![1, 0]),
        (vec![64, 128], vec![1, 0]),
        (vec![1, 4, 16, 16], vec![0, 1, 3, 2]),
        (vec![3, 7, 5], vec![0, 2, 1]),
        (vec![2, 6, 3, 9], vec![0, 3, 2, 1]),
    ] {
        let x = data(numel(&d), 77);
        let (od, want) = permute_ref(&x, &d, &p);
        let dims: Vec<i64> = p.iter().map(|&v| v as i64).collect();
        let o = unary_f32("aten::permute_copy.out", &d, &x, &od, |t| {
            vec![t.int_list(&dims)]
        });
        assert_eq!(o.shape, od);
        assert_eq!(o.f32(), want, "{d:?} {p:?}");
    }
    // int32 with arbitrary bits (incl. NaN-like patterns) is moved bit for bit.
    let (r, c) = (9usize, 6usize);
    let vals: Vec<i32> = (0..(r * c) as i32)
        .map(|k| (0x7fc0_0001u32 as i32).wrapping_add(k * 0x0101))
        .collect();
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut t = OpTest::new("aten::permute_copy.out");
    let a = t.input(DType::I32, &[r, c], &bytes);
    let pl = t.int_list(&[1, 0]);
    let o = t.output(DType::I32, &[c, r]);
    t.call(&[a, pl, o, o]);
    let got = run_first(&t).i64();
    let want: Vec<i64> = (0..r * c)
        .map(|k| vals[(k % r) * c + k / r] as i64)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn head_split_runs_of_every_short_length() {
    // [T, H, D] -> [H, T, D] (attention heads split): runs of D elements, D·size from 1 to 72
    // bytes, which covers the fixed-size copies of 16, 32, 48 and 64 bytes and their
    // neighbours.
    for (d, dt) in [
        (1usize, DType::F32),
        (3, DType::F32),
        (4, DType::F32),
        (5, DType::F32),
        (8, DType::F32),
        (12, DType::F32),
        (16, DType::F32),
        (17, DType::F32),
        (8, DType::F64),
        (6, DType::F64),
        (16, DType::I16),
        (48, DType::U8),
    ] {
        let (t_len, h, es) = (5, 3, dt.size());
        let bytes: Vec<u8> = (0..t_len * h * d * es)
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        let mut t = OpTest::new("aten::permute_copy.out");
        let a = t.input(dt, &[t_len, h, d], &bytes);
        let p = t.int_list(&[1, 0, 2]);
        let o = t.output(dt, &[h, t_len, d]);
        t.call(&[a, p, o, o]);
        let r = run_first(&t);
        let mut want = vec![0u8; bytes.len()];
        for i in 0..t_len {
            for j in 0..h {
                let s = (i * h + j) * d * es;
                let dst = (j * t_len + i) * d * es;
                want[dst..dst + d * es].copy_from_slice(&bytes[s..s + d * es]);
            }
        }
        assert_eq!(r.bytes, want, "{d} {dt}");
    }
}

#[test]
fn whole_tensor_and_broadcast_copies_split_by_element_ranges() {
    // Views with one outer block (a contiguous copy, one row block broadcast, one element
    // repeated) split inside their runs on a team: the reference's bytes on 1, 2 and 4 cores,
    // and the teams really split.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for (dims, out, dt) in [
        (vec![1usize, 3, 129], vec![1usize, 3, 129], DType::F32),
        (vec![1, 1, 17, 129], vec![1, 4, 17, 129], DType::F32),
        (vec![1, 1, 1], vec![3, 17, 129], DType::F32),
        (vec![1, 1, 700], vec![1, 5, 700], DType::U8),
        (vec![1, 1, 257], vec![2, 3, 257], DType::F64),
    ] {
        let es = dt.size();
        let n: usize = dims.iter().product();
        let bytes: Vec<u8> = (0..n * es).map(|i| (i * 37 % 251) as u8).collect();
        // Reference: output index → input index, size-1 input dims broadcast.
        let total: usize = out.iter().product();
        let mut want = Vec::with_capacity(total * es);
        for flat in 0..total {
            let (mut rest, mut src, mut stride) = (flat, 0, 1);
            for (&o, &d) in out.iter().zip(&dims).rev() {
                let i = rest % o;
                rest /= o;
                src += if d == 1 { 0 } else { i * stride };
                stride *= d;
            }
            want.extend_from_slice(&bytes[src * es..(src + 1) * es]);
        }
        let size: Vec<i64> = out.iter().map(|&d| d as i64).collect();
        let expand = || {
            let mut t = OpTest::new("aten::expand_copy.out");
            let a = t.input(dt, &dims, &bytes);
            let s = t.int_list(&size);
            let imp = t.boolean(false);
            let o = t.output(dt, &out);
            t.call(&[a, s, imp, o, o]);
            run_first(&t).bytes
        };
        assert_eq!(expand(), want, "{dims:?} -> {out:?} {dt} on one core");
        for cores in [2, 4] {
            let team = CountingTeam::new(cores);
            assert_eq!(
                scoped(&team, expand),
                want,
                "{dims:?} -> {out:?} {dt} on {cores} cores"
            );
            assert!(team.splits() > 0, "{dims:?} -> {out:?} was not split");
        }
    }
}

#[test]
fn one_matrix_transposes_split_by_output_rows() {
    // A single 4-byte matrix transposed (a weight's `t`/permute) splits by groups of 4 output
    // rows on a team, with the same bytes as one core; elementwise unary maps split too.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for (r, c) in [(129usize, 67usize), (64, 256), (5, 17), (4, 4)] {
        let x: Vec<f32> = (0..r * c).map(|i| i as f32 - 100.0).collect();
        let want: Vec<f32> = (0..r * c).map(|i| x[(i % r) * c + i / r]).collect();
        let permute = || {
            let mut t = OpTest::new("aten::permute_copy.out");
            let a = t.input_f32(&[r, c], &x);
            let p = t.int_list(&[1, 0]);
            let o = t.output(DType::F32, &[c, r]);
            t.call(&[a, p, o, o]);
            run_first(&t).f32()
        };
        let relu = || unary_f32("aten::relu.out", &[r, c], &x, &[r, c], |_| vec![]).f32();
        let relu_want: Vec<f32> = x.iter().map(|&v| v.max(0.0)).collect();
        assert_eq!(permute(), want, "{r}x{c} on one core");
        assert_eq!(relu(), relu_want, "relu {r}x{c} on one core");
        for cores in [2, 4] {
            let team = CountingTeam::new(cores);
            assert_eq!(scoped(&team, permute), want, "{r}x{c} on {cores} cores");
            assert!(
                team.splits() > 0 || r <= 4,
                "{r}x{c} transpose was not split"
            );
            let before = team.splits();
            assert_eq!(
                scoped(&team, relu),
                relu_want,
                "relu {r}x{c} on {cores} cores"
            );
            assert!(
                team.splits() > before || r * c < 1024,
                "relu {r}x{c} was not split"
            );
        }
    }
}
