//! Prepared selections of one contiguous block: prepared and exact, the other selections left
//! to the general path, and the runner's refusals.

use super::*;
use crate::dtype::DType;
use crate::kernels::portable::test_util::{record, table_entry};
use crate::testing::{OpTest, Rng};
use std::vec::Vec;

/// Selects `index` along `dim` of an f32 input of dims `xd`; returns whether the call was
/// prepared, the input and the output's values.
fn select(xd: &[usize], dim: i64, index: i64) -> (bool, Vec<f32>, Vec<f32>) {
    let x = Rng(5).vec(xd.iter().product());
    let d = dim.rem_euclid(xd.len() as i64) as usize;
    let od: Vec<usize> = [&xd[..d], &xd[d + 1..]].concat();
    let mut t = OpTest::new("aten::select_copy.int_out");
    let a = t.input_f32(xd, &x);
    let (dm, ix) = (t.int(dim), t.int(index));
    let o = t.output(DType::F32, &od);
    t.call(&[a, dm, ix, o, o]);
    let r = t.run_inspect(&[]).unwrap();
    (r.prepared == 1, x, r.outputs[0].f32())
}

#[test]
fn one_block_selections_are_prepared_and_exact() {
    for (xd, dim, index) in [
        (&[1usize, 16, 512][..], -2i64, -1i64),
        (&[1, 17, 3], 1, 0),
        (&[129, 3], 0, 128),
        (&[1, 1, 5, 1], 2, -3),
        (&[4], 0, 2),
    ] {
        let (prepared, x, y) = select(xd, dim, index);
        assert!(prepared, "{xd:?} {dim} {index}");
        let d = dim.rem_euclid(xd.len() as i64) as usize;
        let n = xd[d] as i64;
        let i = if index < 0 { index + n } else { index } as usize;
        let inner: usize = xd[d + 1..].iter().product();
        assert_eq!(y, x[i * inner..(i + 1) * inner], "{xd:?} {dim} {index}");
    }
}

/// A selection with a dim of more than one index before the selected one (rows of a
/// stride) is not prepared; the general path still computes it.
#[test]
fn strided_selections_are_left_to_the_general_path() {
    let (prepared, x, y) = select(&[2, 3, 4], 1, -1);
    assert!(!prepared);
    let want: Vec<f32> = (0..2)
        .flat_map(|o| x[o * 12 + 8..o * 12 + 12].to_vec())
        .collect();
    assert_eq!(y, want);
}

/// The runner copies nothing and hands the call back when a tensor is no longer a bound,
/// static, plain tensor of the size it was prepared for.
#[test]
fn a_prepared_selection_runs_only_on_what_it_was_prepared_for() {
    use crate::shape::Shape;
    let mut x = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let mut o = [0u8; 4];
    let base = [
        table_entry(DType::U8, x.as_mut_ptr(), &[2, 4], 8),
        table_entry(DType::U8, o.as_mut_ptr(), &[4], 4),
    ];
    let p = record(run_select, &[0, 1], [4, 4, 8, 0], 0);
    let mut changes: Vec<[TensorSlot; 2]> = Vec::new();
    let mut c = base;
    c[0].shape = Shape::new(&[1, 4]).unwrap();
    changes.push(c);
    let mut c = base;
    c[1].writable = false;
    changes.push(c);
    let mut c = base;
    c[1].data = core::ptr::null_mut();
    changes.push(c);
    let mut c = base;
    c[0].contiguous = false;
    changes.push(c);
    for (i, c) in changes.iter().enumerate() {
        assert!(!run_select(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert_eq!(o, [0; 4]);
    assert!(run_select(&p, &base, &mut []).unwrap());
    assert_eq!(o, [5, 6, 7, 8]);
}
