//! Prepared f32 adds, subtractions and multiplies: each form prepared at load and giving the
//! exact IEEE results of the operation, and the runner's refusals.

use super::*;
use crate::kernels::portable::test_util::{record, table_entry};
use crate::shape::Shape;
use crate::testing::{OpTest, Rng};
use std::vec::Vec;

/// One call of `op` on operands of dims `xd` and `yd`, output `od`: whether it was prepared,
/// and whether every output element is exactly `x op y` at its broadcast positions.
fn prepared_and_exact(op: &str, xd: &[usize], yd: &[usize], od: &[usize]) -> (bool, bool) {
    let mut rng = Rng(5);
    let (xn, yn) = (xd.iter().product::<usize>(), yd.iter().product::<usize>());
    let (x, y) = (rng.vec(xn), rng.vec(yn));
    let mut t = OpTest::new(op);
    let (ix, iy) = (t.input_f32(xd, &x), t.input_f32(yd, &y));
    let o = t.output(DType::F32, od);
    if op == "aten::mul.out" {
        t.call(&[ix, iy, o, o]);
    } else {
        let one = t.int(1);
        t.call(&[ix, iy, one, o, o]);
    }
    let r = t.run_inspect(&[]).unwrap();
    let got = r.outputs[0].f32();
    let at = |d: &[usize], v: &[f32], i: usize| {
        // The element of an operand of dims `d` that output index `i` reads (broadcast).
        let mut rem = i;
        let mut idx = 0usize;
        let mut stride = 1usize;
        for (k, &on) in od.iter().enumerate().rev() {
            let c = rem % on;
            rem /= on;
            let dk = (k + d.len()).checked_sub(od.len());
            if let Some(dk) = dk {
                if d[dk] != 1 {
                    idx += c * stride;
                }
                stride *= d[dk];
            }
        }
        v[idx]
    };
    let exact = got.iter().enumerate().all(|(i, g)| {
        let (a, b) = (at(xd, &x, i), at(yd, &y, i));
        let want = match op {
            "aten::add.out" => a + b,
            "aten::sub.out" => a - b,
            _ => a * b,
        };
        g.to_bits() == want.to_bits()
    });
    (
        r.prepared == 1,
        exact && got.len() == od.iter().product::<usize>(),
    )
}

/// Every form, on odd sizes, for each operation: prepared, and the exact results.
#[test]
fn each_form_is_prepared_and_exact() {
    let cases: [(&[usize], &[usize], &[usize]); 8] = [
        (&[3, 17], &[3, 17], &[3, 17]),
        (&[1, 5, 129], &[], &[1, 5, 129]),
        (&[1], &[17, 3], &[17, 3]),
        (&[2, 3, 17], &[17], &[2, 3, 17]),
        (&[1, 4, 3, 3], &[1, 1, 3, 3], &[1, 4, 3, 3]),
        (&[1, 129], &[3, 129], &[3, 129]),
        (&[5, 17], &[5, 1], &[5, 17]),
        (&[1, 1, 1], &[1, 1, 1], &[1, 1, 1]),
    ];
    for op in ["aten::add.out", "aten::sub.out", "aten::mul.out"] {
        for (xd, yd, od) in cases {
            assert_eq!(
                prepared_and_exact(op, xd, yd, od),
                (true, true),
                "{op} {xd:?} {yd:?}"
            );
        }
    }
}

/// Operands the fast path does not take as one of the forms (a broadcast on both sides, a
/// middle dim) are not prepared, and the general path still gives the exact results.
#[test]
fn other_broadcasts_are_left_to_the_general_path() {
    let cases: [(&[usize], &[usize], &[usize]); 3] = [
        (&[3, 1], &[1, 4], &[3, 4]),
        (&[2, 3, 4], &[2, 1, 4], &[2, 3, 4]),
        (&[3, 4], &[1, 1, 3, 4], &[1, 1, 3, 4]),
    ];
    for (xd, yd, od) in cases {
        assert_eq!(
            prepared_and_exact("aten::add.out", xd, yd, od),
            (false, true),
            "{xd:?} {yd:?}"
        );
    }
}

/// A prepared call runs when its tensors are what preparing saw, and leaves the call to the
/// general path (nothing written) when a shape no longer meets the prepared form, a dtype,
/// the output's writability or its data changed since.
#[test]
fn a_prepared_call_runs_only_on_what_it_was_prepared_for() {
    let mut x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut y = [10.0f32, 20.0, 30.0];
    let mut o = [0.0f32; 6];
    let slot =
        |p: *mut f32, dims: &[usize], n: usize| table_entry(DType::F32, p.cast(), dims, 4 * n);
    let base = [
        slot(x.as_mut_ptr(), &[2, 3], 6),
        slot(y.as_mut_ptr(), &[3], 3),
        slot(o.as_mut_ptr(), &[2, 3], 6),
    ];
    // Subtraction (index 1), a trailing row.
    let p = record(run_binary, &[0, 1, 2], [0; 4], 1 | (Form::Row as u32) << 8);
    let mut changes: Vec<[TensorSlot; 3]> = Vec::new();
    let mut c = base;
    c[1].shape = Shape::new(&[1, 3]).unwrap();
    changes.push(c); // still a trailing row, but [1, 3]: runs (below)
    let mut c = base;
    c[1].shape = Shape::new(&[2, 1]).unwrap();
    c[1].capacity = 8;
    changes.push(c); // a column now: another form
    let mut c = base;
    c[0].dtype = DType::I32;
    changes.push(c);
    let mut c = base;
    c[2].writable = false;
    changes.push(c);
    let mut c = base;
    c[2].data = core::ptr::null_mut();
    changes.push(c);
    for (i, c) in changes.iter().enumerate().skip(1) {
        assert!(!run_binary(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert_eq!(o, [0.0; 6]);
    assert!(run_binary(&p, &changes[0], &mut []).unwrap());
    assert!(run_binary(&p, &base, &mut []).unwrap());
    assert_eq!(o, [-9.0, -18.0, -27.0, -6.0, -15.0, -24.0]);
}

/// int64 calls (position arithmetic): same shape and a one-element right operand prepared,
/// any Int alpha, wrapping; a one-element left operand left to the general path. The results
/// are exact either way.
#[test]
fn int64_calls_are_prepared_in_the_fast_paths_forms() {
    let cases: [(&[usize], &[usize], &[usize], bool); 5] = [
        (&[16], &[16], &[16], true),
        (&[1, 16], &[], &[1, 16], true),
        (&[3, 17], &[1, 1], &[3, 17], true),
        (&[1], &[5], &[5], false),
        (&[1, 4], &[3, 1], &[3, 4], false),
    ];
    for op in ["aten::add.out", "aten::sub.out", "aten::mul.out"] {
        for (xd, yd, od, prepared) in cases {
            let (xn, yn) = (xd.iter().product::<usize>(), yd.iter().product::<usize>());
            let x: Vec<i64> = (0..xn as i64).map(|v| v * 0x1234_5678_9abc - 7).collect();
            let y: Vec<i64> = (0..yn as i64).map(|v| i64::MAX - 3 * v).collect();
            let alpha = 3i64;
            let mut t = OpTest::new(op);
            let (ix, iy) = (t.input_i64(xd, &x), t.input_i64(yd, &y));
            let o = t.output(DType::I64, od);
            if op == "aten::mul.out" {
                t.call(&[ix, iy, o, o]);
            } else {
                let a = t.int(alpha);
                t.call(&[ix, iy, a, o, o]);
            }
            let r = t.run_inspect(&[]).unwrap();
            assert_eq!(r.prepared == 1, prepared, "{op} {xd:?} {yd:?}");
            let got = r.outputs[0].i64();
            let n = got.len();
            for (i, &g) in got.iter().enumerate() {
                // x full, one element or a trailing row; y full, one element or a column.
                let a = if xn == n { x[i] } else { x[i % xn] };
                let b = if yn == n {
                    y[i]
                } else if yn == 1 {
                    y[0]
                } else {
                    y[i / (n / yn)]
                };
                let want = match op {
                    "aten::add.out" => a.wrapping_add(alpha.wrapping_mul(b)),
                    "aten::sub.out" => a.wrapping_sub(alpha.wrapping_mul(b)),
                    _ => a.wrapping_mul(b),
                };
                assert_eq!(g, want, "{op} {xd:?} {yd:?} element {i}");
            }
        }
    }
}

/// A call of static tensors in a form that depends on the element counts alone (same shape,
/// a one-element operand) records the counts and binds by them; it refuses a tensor that is
/// no longer static, bound, writable or of the dtype, and one whose capacity is short.
#[test]
fn a_static_call_binds_by_its_recorded_counts() {
    let mut x = [1.0f32, 2.0, 3.0, 4.0];
    let mut y = [10.0f32];
    let mut o = [0.0f32; 4];
    let slot =
        |p: *mut f32, dims: &[usize], n: usize| table_entry(DType::F32, p.cast(), dims, 4 * n);
    let base = [
        slot(x.as_mut_ptr(), &[2, 2], 4),
        slot(y.as_mut_ptr(), &[], 1),
        slot(o.as_mut_ptr(), &[2, 2], 4),
    ];
    // Multiplication (index 2) by a one-element operand.
    let param = 2 | (Form::Scalar as u32) << 8 | STATIC;
    let p = record(run_binary, &[0, 1, 2], [4, 1, 4, 0], param);
    let mut changes: Vec<[TensorSlot; 3]> = Vec::new();
    let mut c = base;
    c[0].dynamism = crate::kernel_api::Dynamism::Bound;
    changes.push(c);
    let mut c = base;
    c[1].data = core::ptr::null_mut();
    changes.push(c);
    let mut c = base;
    c[2].writable = false;
    changes.push(c);
    let mut c = base;
    c[2].capacity = 12;
    changes.push(c);
    let mut c = base;
    c[1].dtype = DType::I32;
    changes.push(c);
    for (i, c) in changes.iter().enumerate() {
        assert!(!run_binary(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert_eq!(o, [0.0; 4]);
    assert!(run_binary(&p, &base, &mut []).unwrap());
    assert_eq!(o, [10.0, 20.0, 30.0, 40.0]);
}
