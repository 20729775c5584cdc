//! Prepared permutes: prepared at load when they move whole runs or transpose the last two
//! dims, the reference output, and the runner's refusals.

use super::*;
use crate::kernels::portable::test_util::{record, table_entry};
use crate::shape::Shape;
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

/// Runs a permute of `x` (dims `xd`) by `perm`: whether it was prepared, and its output.
fn run_permute_of(x: &[f32], xd: &[usize], perm: &[i64]) -> (bool, Vec<f32>) {
    let od: Vec<usize> = perm.iter().map(|&p| xd[p as usize]).collect();
    let mut t = OpTest::new("aten::permute_copy.out");
    let ix = t.input_f32(xd, x);
    let dims = t.int_list(perm);
    let o = t.output(DType::F32, &od);
    t.call(&[ix, dims, o, o]);
    let r = t.run_inspect(&[]).unwrap();
    (r.prepared == 1, r.outputs[0].f32())
}

/// A permute of `x` (dims `xd`) by `perm`: whether it was prepared, and whether its output is
/// the reference permute element for element.
fn permute(xd: &[usize], perm: &[i64]) -> (bool, bool) {
    let n: usize = xd.iter().product();
    let x = Rng(11).vec(n);
    let od: Vec<usize> = perm.iter().map(|&p| xd[p as usize]).collect();
    let (prepared, got) = run_permute_of(&x, xd, perm);
    // Output index i: its coordinates in `od`, the input coordinate of each dim p = perm[k].
    let mut strides = vec![1usize; xd.len()];
    for k in (0..xd.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * xd[k + 1];
    }
    let exact = (0..n).all(|i| {
        let (mut rem, mut src) = (i, 0usize);
        for k in (0..od.len()).rev() {
            src += (rem % od[k]) * strides[perm[k] as usize];
            rem /= od[k];
        }
        got[i].to_bits() == x[src].to_bits()
    });
    (prepared, exact && got.len() == n)
}

#[test]
fn head_permutes_and_transposes_are_prepared_and_exact() {
    for (xd, perm) in [
        (&[1usize, 5, 3, 7][..], &[0i64, 2, 1, 3][..]),
        (&[1, 3, 5, 7], &[0, 2, 1, 3]),
        (&[2, 17, 3], &[1, 0, 2]),
        (&[4, 3, 129], &[1, 0, 2]),
        // Transposes of the last two dims: weights, batched keys, odd edges.
        (&[3, 5], &[1, 0]),
        (&[1, 3, 5, 7], &[0, 1, 3, 2]),
        (&[2, 17, 129], &[0, 2, 1]),
        (&[1, 1], &[1, 0]),
        (&[64, 192], &[1, 0]),
    ] {
        assert_eq!(permute(xd, perm), (true, true), "{xd:?} {perm:?}");
    }
    // Rotations take the copy engine's plan: not prepared.
    for (xd, perm) in [
        (&[2usize, 3, 4][..], &[2i64, 0, 1][..]),
        (&[3, 5, 7], &[1, 2, 0]),
    ] {
        assert_eq!(permute(xd, perm), (false, true), "{xd:?} {perm:?}");
    }
}

/// The runner moves nothing and hands the call back when a tensor is no longer a bound
/// static f32 tensor of the prepared size.
#[test]
fn a_prepared_permute_runs_only_on_what_it_was_prepared_for() {
    let mut x: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let mut o = [f32::NAN; 6];
    let slot = |p: *mut f32, dims: &[usize]| table_entry(DType::F32, p.cast(), dims, 24);
    let base = [
        slot(x.as_mut_ptr(), &[2, 3, 1]),
        slot(o.as_mut_ptr(), &[3, 2, 1]),
    ];
    let p = record(run_permute, &[0, 1], [2, 3, 1, 0], 0);
    let mut changes: Vec<[TensorSlot; 2]> = Vec::new();
    let mut c = base;
    c[0].dynamism = Dynamism::Bound;
    changes.push(c);
    let mut c = base;
    c[1].dtype = DType::I32;
    changes.push(c);
    let mut c = base;
    c[1].data = core::ptr::null_mut();
    changes.push(c);
    let mut c = base;
    c[0].shape = Shape::new(&[2, 2, 1]).unwrap();
    changes.push(c);
    for (i, c) in changes.iter().enumerate() {
        assert!(!run_permute(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert!(o.iter().all(|v| v.is_nan()));
    assert!(run_permute(&p, &base, &mut []).unwrap());
    assert_eq!(o, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
}

/// Prepared swaps and transposes on 2- and 4-core teams: the one-core bytes, split.
#[test]
fn prepared_permutes_split_across_a_team() {
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    for (xd, perm) in [
        (&[1usize, 17, 6, 16][..], &[0i64, 2, 1, 3][..]),
        (&[96, 384], &[1, 0]),
        (&[1, 6, 17, 16], &[0, 1, 3, 2]),
        (&[5, 9], &[1, 0]),
    ] {
        let x = Rng(4).vec(xd.iter().product());
        let run = || {
            let (prepared, out) = run_permute_of(&x, xd, perm);
            assert!(prepared);
            out
        };
        let one = run();
        for cores in [2, 4] {
            let team = CountingTeam::new(cores);
            let got = scoped(&team, run);
            assert!(got
                .iter()
                .zip(&one)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(team.splits() > 0, "{xd:?} {perm:?} {cores}: not split");
        }
    }
}
