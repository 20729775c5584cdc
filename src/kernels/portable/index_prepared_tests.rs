//! Prepared embeddings: prepared and exact for int64 and int32 indices, split across teams,
//! an index out of range handed back to the general path (which reports it), the runner's
//! refusals.

use super::*;
use crate::kernels::portable::test_util::{record, same_on_teams, table_entry};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

/// Looks up `idx` (dims `id`, int32 when `int32`) in an f32 table of `rows` × `dim`; returns
/// whether the call was prepared, the table and the output (or the error).
fn embed(
    rows: usize,
    dim: usize,
    idx: &[i64],
    id: &[usize],
    int32: bool,
) -> (bool, Vec<f32>, Result<Vec<f32>, crate::Error>) {
    let w = Rng(9).vec(rows * dim);
    let mut t = OpTest::new("aten::embedding.out");
    let a = t.input_f32(&[rows, dim], &w);
    let i = if int32 {
        let v: Vec<i32> = idx.iter().map(|&x| x as i32).collect();
        t.input_i32(id, &v)
    } else {
        t.input_i64(id, idx)
    };
    let (pad, f1, f2) = (t.int(-1), t.boolean(false), t.boolean(false));
    let od: Vec<usize> = id.iter().copied().chain([dim]).collect();
    let o = t.output(DType::F32, &od);
    t.call(&[a, i, pad, f1, f2, o, o]);
    match t.run_inspect(&[]) {
        Ok(r) => (r.prepared == 1, w, Ok(r.outputs[0].f32())),
        Err(e) => (false, w, Err(e)),
    }
}

#[test]
fn embeddings_are_prepared_and_exact() {
    for (rows, dim, idx, id) in [
        (
            50usize,
            64usize,
            vec![3i64, 0, 49, 7, 7, 12],
            vec![1usize, 6],
        ),
        (17, 3, vec![16], vec![1]),
        (5, 129, (0..17).map(|i| i % 5).collect(), vec![17]),
    ] {
        for int32 in [false, true] {
            let (prepared, w, y) = embed(rows, dim, &idx, &id, int32);
            assert!(prepared, "{rows} {dim} {int32}");
            let want: Vec<f32> = idx
                .iter()
                .flat_map(|&i| w[i as usize * dim..(i as usize + 1) * dim].to_vec())
                .collect();
            assert_eq!(y.unwrap(), want, "{rows} {dim} {int32}");
        }
    }
}

/// An index out of range: the prepared runner hands the call back and the general path
/// reports the index.
#[test]
fn an_index_out_of_range_is_the_general_paths_error() {
    for bad in [5i64, -1] {
        let (_, _, y) = embed(5, 4, &[0, bad, 1], &[3], false);
        assert!(
            matches!(
                y,
                Err(crate::Error::Kernel {
                    source: KernelError::IndexOutOfBounds { arg: 1, .. },
                    ..
                })
            ),
            "{bad}: {y:?}"
        );
    }
}

/// On 2- and 4-core teams the prepared lookup gives the one-core bytes, split.
#[test]
fn prepared_embeddings_split_across_a_team() {
    let idx: Vec<i64> = (0..64).map(|i| (i * 7) % 100).collect();
    same_on_teams("embedding 100 x 256", || {
        let (prepared, _, y) = embed(100, 256, &idx, &[1, 64], false);
        assert!(prepared);
        y.unwrap()
    });
}

/// The runner gathers nothing and hands the call back when a tensor is no longer a bound,
/// static, plain tensor of the size it was prepared for.
#[test]
fn a_prepared_embedding_runs_only_on_what_it_was_prepared_for() {
    use crate::shape::Shape;
    let mut w = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut i = [2i64, 0];
    let mut o = [0.0f32; 4];
    let base = [
        table_entry(DType::F32, w.as_mut_ptr().cast(), &[3, 2], 24),
        table_entry(DType::I64, i.as_mut_ptr().cast(), &[2], 16),
        table_entry(DType::F32, o.as_mut_ptr().cast(), &[2, 2], 16),
    ];
    let p = record(run_embedding, &[0, 1, 2], [3, 8, 2, 0], 0);
    let mut changes: Vec<[TensorSlot; 3]> = Vec::new();
    let mut c = base;
    c[1].shape = Shape::new(&[1]).unwrap();
    changes.push(c);
    let mut c = base;
    c[2].writable = false;
    changes.push(c);
    let mut c = base;
    c[0].data = core::ptr::null_mut();
    changes.push(c);
    let mut c = base;
    c[1].dtype = DType::I32;
    changes.push(c);
    for (k, c) in changes.iter().enumerate() {
        assert!(!run_embedding(&p, c, &mut []).unwrap(), "change {k}");
    }
    assert_eq!(o, [0.0; 4]);
    assert!(run_embedding(&p, &base, &mut []).unwrap());
    assert_eq!(o, [5.0, 6.0, 1.0, 2.0]);
    // An index out of range: handed back.
    let mut j = [3i64, 0];
    let mut c = base;
    c[1].data = j.as_mut_ptr().cast();
    assert!(!run_embedding(&p, &c, &mut []).unwrap());
}
