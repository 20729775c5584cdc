//! Prepared splits into equal pieces of rows: prepared and byte-exact (against a reference
//! built element by element), split across teams, and the other splits left to the general
//! path.

use super::*;
use crate::dtype::DType;
use crate::kernels::portable::test_util::{record, same_on_teams, table_entry};
use crate::testing::{OpTest, Rng};
use std::vec::Vec;

/// Splits an f32 input of dims `xd` with `sizes` along `dim`; returns whether the call was
/// prepared and each output's values.
fn split(xd: &[usize], sizes: &[i64], dim: i64) -> (bool, Vec<Vec<f32>>) {
    let x = Rng(7).vec(xd.iter().product());
    let mut t = OpTest::new("aten::split_with_sizes_copy.out");
    let a = t.input_f32(xd, &x);
    let s = t.int_list(sizes);
    let dm = t.int(dim);
    let d = dim.rem_euclid(xd.len() as i64) as usize;
    let outs: Vec<i32> = sizes
        .iter()
        .map(|&sz| {
            let mut od = xd.to_vec();
            od[d] = sz as usize;
            t.output(DType::F32, &od)
        })
        .collect();
    let (l, l2) = (t.tensor_list(&outs), t.tensor_list(&outs));
    t.call(&[a, s, dm, l, l2]);
    let r = t.run_inspect(&[]).unwrap();
    (r.prepared == 1, r.outputs.iter().map(|o| o.f32()).collect())
}

/// The pieces of `x` (dims `xd`) along `dim`, element by element.
fn reference(x: &[f32], xd: &[usize], sizes: &[i64], dim: usize) -> Vec<Vec<f32>> {
    let outer: usize = xd[..dim].iter().product();
    let inner: usize = xd[dim + 1..].iter().product();
    let mut start = 0;
    sizes
        .iter()
        .map(|&sz| {
            let sz = sz as usize;
            let mut v = Vec::new();
            for o in 0..outer {
                for i in start..start + sz {
                    for e in 0..inner {
                        v.push(x[(o * xd[dim] + i) * inner + e]);
                    }
                }
            }
            start += sz;
            v
        })
        .collect()
}

#[test]
fn equal_row_pieces_are_prepared_and_exact() {
    for (xd, sizes, dim) in [
        (&[1usize, 16, 192][..], &[64i64, 64, 64][..], -1i64),
        (&[3, 5], &[1, 1, 1, 1, 1], 1),
        (&[17, 3], &[1, 1, 1], 1),
        (&[2, 129, 4], &[129], 1),
        (&[5, 6, 2, 3], &[2, 2, 2], 1),
    ] {
        let (prepared, got) = split(xd, sizes, dim);
        assert!(prepared, "{xd:?} {sizes:?}");
        let x = Rng(7).vec(xd.iter().product());
        let d = dim.rem_euclid(xd.len() as i64) as usize;
        assert_eq!(got, reference(&x, xd, sizes, d), "{xd:?} {sizes:?} {dim}");
    }
}

/// Unequal or zero sizes, more than five pieces, and pieces of the outermost dim (one
/// contiguous block each) are not prepared; the general path still splits them.
#[test]
fn other_splits_are_left_to_the_general_path() {
    for (xd, sizes, dim) in [
        (&[2usize, 7, 3][..], &[2i64, 5][..], 1i64),
        (&[2, 7, 3], &[2, 0, 5], 1),
        (&[2, 6], &[1, 1, 1, 1, 1, 1], 1),
        (&[6, 4], &[2, 2, 2], 0),
        (&[1, 6, 4], &[2, 2, 2], 1),
    ] {
        let (prepared, got) = split(xd, sizes, dim);
        assert!(!prepared, "{xd:?} {sizes:?} {dim}");
        let x = Rng(7).vec(xd.iter().product());
        let d = dim.rem_euclid(xd.len() as i64) as usize;
        assert_eq!(got, reference(&x, xd, sizes, d), "{xd:?} {sizes:?} {dim}");
    }
}

/// On 2- and 4-core teams the prepared split gives the one-core bytes, split.
#[test]
fn prepared_splits_split_across_a_team() {
    same_on_teams("Q/K/V split", || {
        let (prepared, out) = split(&[1, 64, 192], &[64, 64, 64], 2);
        assert!(prepared);
        out
    });
}

/// The runner copies nothing and hands the call back when a tensor is no longer a bound,
/// static, plain tensor of the size it was prepared for.
#[test]
fn a_prepared_split_runs_only_on_what_it_was_prepared_for() {
    use crate::kernel_api::Dynamism;
    use crate::shape::Shape;
    // x: 2 rows of 4 bytes into two pieces of 2 bytes a row.
    let mut x = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    let slot = |p: *mut u8, dims: &[usize]| table_entry(DType::U8, p, dims, 8);
    let base = [
        slot(x.as_mut_ptr(), &[2, 4]),
        slot(a.as_mut_ptr(), &[2, 2]),
        slot(b.as_mut_ptr(), &[2, 2]),
    ];
    let p = record(run_split, &[0, 1, 2], [2, 2, 2, 4], 0);
    let mut changes: Vec<[TensorSlot; 3]> = Vec::new();
    let mut c = base;
    c[1].shape = Shape::new(&[2, 3]).unwrap();
    changes.push(c);
    let mut c = base;
    c[0].dynamism = Dynamism::Bound;
    changes.push(c);
    let mut c = base;
    c[2].writable = false;
    changes.push(c);
    let mut c = base;
    c[0].data = core::ptr::null_mut();
    changes.push(c);
    let mut c = base;
    c[2].contiguous = false;
    changes.push(c);
    for (i, c) in changes.iter().enumerate() {
        assert!(!run_split(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert_eq!((a, b), ([0; 4], [0; 4]));
    assert!(run_split(&p, &base, &mut []).unwrap());
    assert_eq!((a, b), ([1, 2, 5, 6], [3, 4, 7, 8]));
}
