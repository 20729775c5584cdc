//! Prepared identity copies: each operator prepared when its output is its input's bytes, the
//! bytes copied exactly, and the copies that are something else left to the general path.

use super::*;
use crate::dtype::DType;
use crate::kernel_api::Dynamism;
use crate::kernels::portable::test_util::{record, table_entry};
use crate::testing::{OpTest, Rng};
use std::vec;
use std::vec::Vec;

/// Runs `op` on an input of `dtype` and dims `xd` into an output of `odt` and `od`, the
/// operator's other arguments made by `args` (between the input and the output); returns
/// whether the call was prepared and the input's and output's bytes.
fn copy(
    op: &str,
    (dtype, xd): (DType, &[usize]),
    (odt, od): (DType, &[usize]),
    args: impl Fn(&mut OpTest) -> Vec<i32>,
) -> (bool, Vec<u8>, Vec<u8>) {
    let n: usize = xd.iter().product();
    let bytes: Vec<u8> = match dtype {
        DType::F32 => Rng(2).vec(n).iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::I64 => (0..n as i64)
            .flat_map(|v| (v * 7 - 3).to_le_bytes())
            .collect(),
        _ => (0..n).map(|i| (i % 3 == 0) as u8).collect(),
    };
    let mut t = OpTest::new(op);
    let x = t.input(dtype, xd, &bytes);
    let mut call = vec![x];
    call.extend(args(&mut t));
    let o = t.output(odt, od);
    call.extend([o, o]);
    t.call(&call);
    let r = t.run_inspect(&[]).unwrap();
    (r.prepared == 1, bytes, r.outputs[0].bytes.clone())
}

#[test]
fn identity_copies_are_prepared_and_exact() {
    let none = |t: &mut OpTest| vec![t.none()];
    for (dtype, xd) in [
        (DType::F32, &[1usize, 4, 16, 16][..]),
        (DType::I64, &[3, 17]),
        (DType::Bool, &[1, 1, 5, 5]),
        (DType::F32, &[129]),
    ] {
        let cases: [(&str, &dyn Fn(&mut OpTest) -> Vec<i32>); 7] = [
            ("aten::alias_copy.out", &|_| vec![]),
            ("aten::detach_copy.out", &|_| vec![]),
            ("aten::lift_fresh_copy.out", &|_| vec![]),
            ("aten::clone.out", &none),
            ("aten::_to_copy.out", &|t| vec![t.boolean(false), t.none()]),
            ("dim_order_ops::_clone_dim_order.out", &|t| {
                vec![t.boolean(false), t.none()]
            }),
            ("aten::expand_copy.out", &|t| {
                let size: Vec<i64> = xd.iter().map(|&d| d as i64).collect();
                vec![t.int_list(&size), t.boolean(false)]
            }),
        ];
        for (op, args) in cases {
            let (prepared, x, y) = copy(op, (dtype, xd), (dtype, xd), args);
            assert!(prepared, "{op} {dtype:?} {xd:?}");
            assert_eq!(x, y, "{op} {dtype:?} {xd:?}");
        }
        let order: Vec<i64> = (0..xd.len() as i64).collect();
        let (prepared, x, y) = copy(
            "dim_order_ops::_to_dim_order_copy.out",
            (dtype, xd),
            (dtype, xd),
            |t| vec![t.boolean(false), t.int_list(&order)],
        );
        assert!(prepared && x == y, "{dtype:?} {xd:?}");
    }
}

/// A copy that converts, expands or asks for another layout is not prepared; the general
/// path still computes it.
#[test]
fn other_copies_are_left_to_the_general_path() {
    let (p, _, y) = copy(
        "aten::_to_copy.out",
        (DType::I64, &[2, 3]),
        (DType::F32, &[2, 3]),
        |t| vec![t.boolean(false), t.none()],
    );
    assert!(!p);
    let want: Vec<u8> = (0..6i64)
        .flat_map(|v| ((v * 7 - 3) as f32).to_le_bytes())
        .collect();
    assert_eq!(y, want);
    let (p, x, y) = copy(
        "aten::expand_copy.out",
        (DType::F32, &[1, 3]),
        (DType::F32, &[2, 3]),
        |t| vec![t.int_list(&[2, 3]), t.boolean(false)],
    );
    assert!(!p);
    assert_eq!(y, [x.clone(), x].concat());
    let (p, x, y) = copy(
        "dim_order_ops::_clone_dim_order.out",
        (DType::F32, &[2, 3]),
        (DType::F32, &[2, 3]),
        |t| vec![t.boolean(false), t.int_list(&[0, 1])],
    );
    assert!(p && x == y);
}

/// The runner copies nothing and hands the call back when a tensor is no longer a bound,
/// static, plain tensor of the input's dtype and shape.
#[test]
fn a_prepared_copy_runs_only_on_what_it_was_prepared_for() {
    use crate::shape::Shape;
    let mut x = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let mut o = [0u8; 8];
    let slot = |p: *mut u8, dims: &[usize]| table_entry(DType::I32, p, dims, 8);
    let base = [slot(x.as_mut_ptr(), &[2]), slot(o.as_mut_ptr(), &[2])];
    let p = record(run_copy, &[0, 1], [0; 4], 1);
    let mut changes: Vec<[TensorSlot; 2]> = Vec::new();
    let mut c = base;
    c[1].dtype = DType::F32;
    changes.push(c);
    let mut c = base;
    c[0].dynamism = Dynamism::Bound;
    changes.push(c);
    let mut c = base;
    c[1].shape = Shape::new(&[1, 2]).unwrap();
    changes.push(c);
    let mut c = base;
    c[0].dim_order[0] = 1;
    c[0].shape = Shape::new(&[1, 2]).unwrap();
    c[1].shape = Shape::new(&[1, 2]).unwrap();
    changes.push(c);
    let mut c = base;
    c[1].writable = false;
    changes.push(c);
    let mut c = base;
    c[0].data = core::ptr::null_mut();
    changes.push(c);
    for (i, c) in changes.iter().enumerate() {
        assert!(!run_copy(&p, c, &mut []).unwrap(), "change {i}");
    }
    assert_eq!(o, [0; 8]);
    assert!(run_copy(&p, &base, &mut []).unwrap());
    assert_eq!(o, x);
}

/// A dim-order copy to another dtype is prepared and converts each element as the general
/// path does (a C cast: nonzero → true, float → int truncating).
#[test]
fn converting_dim_order_copies_are_prepared_and_exact() {
    let op = "dim_order_ops::_to_dim_order_copy.out";
    let none = |t: &mut OpTest| vec![t.boolean(false), t.none()];
    let xd = [3usize, 17];
    let n = 51;
    let (p, _, y) = copy(op, (DType::I64, &xd), (DType::Bool, &xd), none);
    let want: Vec<u8> = (0..n as i64).map(|v| (v * 7 - 3 != 0) as u8).collect();
    assert!(p && y == want);
    let (p, _, y) = copy(op, (DType::I64, &xd), (DType::F32, &xd), none);
    let want: Vec<u8> = (0..n as i64)
        .flat_map(|v| ((v * 7 - 3) as f32).to_le_bytes())
        .collect();
    assert!(p && y == want);
    let (p, x, y) = copy(op, (DType::F32, &xd), (DType::I64, &xd), none);
    let want: Vec<u8> = x
        .chunks_exact(4)
        .flat_map(|c| (f32::from_le_bytes(c.try_into().unwrap()) as i64).to_le_bytes())
        .collect();
    assert!(p && y == want);
    let (p, x, y) = copy(op, (DType::Bool, &xd), (DType::F32, &xd), none);
    let want: Vec<u8> = x.iter().flat_map(|&b| (b as f32).to_le_bytes()).collect();
    assert!(p && y == want);
    // A clone to another dtype is the general path's error, not a conversion.
    let mut t = OpTest::new("dim_order_ops::_clone_dim_order.out");
    let x = t.input(DType::I64, &xd, &[0u8; 51 * 8]);
    let (f, nn) = (t.boolean(false), t.none());
    let o = t.output(DType::Bool, &xd);
    t.call(&[x, f, nn, o, o]);
    assert!(t.run().is_err());
}
