//! Tests of comparisons, bitwise and logical ops, `where` and `masked_fill`, and their fast paths.

use super::*;
use crate::kernels::portable::test_util::{
    b, f, i, kerr, numel, out, ramp, run1, same, A, SHAPE_PAIRS,
};
use crate::testing::{broadcast_dims, broadcast_index, Rng};
use std::vec::Vec;

/// The comparison operators and their reference (exact in f64 for f32 and small int64
/// values).
const CMP_OPS: [(&str, fn(f64, f64) -> bool); 6] = [
    ("eq", |x, y| x == y),
    ("ne", |x, y| x != y),
    ("lt", |x, y| x < y),
    ("le", |x, y| x <= y),
    ("gt", |x, y| x > y),
    ("ge", |x, y| x >= y),
];

#[test]
fn comparisons() {
    let mut rng = Rng(5);
    let ops = CMP_OPS;
    for &(sa, sb) in SHAPE_PAIRS {
        let so = broadcast_dims(sa, sb);
        let mut a: Vec<f32> = rng
            .i64s(numel(sa), -2, 2)
            .iter()
            .map(|&v| v as f32)
            .collect();
        if let Some(v) = a.first_mut() {
            *v = f32::NAN;
        }
        let c: Vec<f32> = rng
            .i64s(numel(sb), -2, 2)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let n = numel(&so);
        for (name, op) in ops {
            let want: Vec<bool> = (0..n)
                .map(|k| {
                    op(
                        a[broadcast_index(k, &so, sa)].into(),
                        c[broadcast_index(k, &so, sb)].into(),
                    )
                })
                .collect();
            let got = run1(
                &std::format!("aten::{name}.Tensor_out"),
                &[f(sa, &a), f(sb, &c), out(DType::Bool, &so)],
            );
            assert_eq!(got.bools(), want, "{name} {sa:?} {sb:?}");
            let want: Vec<bool> = (0..numel(sa)).map(|k| op(a[k].into(), 0.5)).collect();
            let got = run1(
                &std::format!("aten::{name}.Scalar_out"),
                &[f(sa, &a), A::Dbl(0.5), out(DType::Bool, sa)],
            );
            assert_eq!(got.bools(), want, "{name} scalar {sa:?}");
            // int64 inputs with an integer scalar
            let ai: Vec<i64> = (0..numel(sb)).map(|k| c[k] as i64).collect();
            let want: Vec<bool> = ai.iter().map(|&v| op(v as f64, 1.0)).collect();
            let got = run1(
                &std::format!("aten::{name}.Scalar_out"),
                &[i(sb, &ai), A::Int(1), out(DType::Bool, sb)],
            );
            assert_eq!(got.bools(), want, "{name} int scalar");
        }
    }
    // int tensor vs float scalar compares in float; int64 vs f32 tensor in f32.
    let got = run1(
        "aten::eq.Scalar_out",
        &[i(&[2], &[1, 2]), A::Dbl(1.5), out(DType::Bool, &[2])],
    );
    assert_eq!(got.bools(), [false, false]);
    let got = run1(
        "aten::lt.Scalar_out",
        &[
            i(&[1], &[16777217]),
            A::Dbl(16777217.0),
            out(DType::Bool, &[1]),
        ],
    );
    assert_eq!(got.bools(), [false]);
    let got = run1(
        "aten::le.Tensor_out",
        &[
            i(&[3], &[1, 2, 3]),
            f(&[3], &[1.5, 1.5, 3.0]),
            out(DType::Bool, &[3]),
        ],
    );
    assert_eq!(got.bools(), [true, false, true]);
    // bool vs int, and a float out receiving 0/1.
    let got = run1(
        "aten::eq.Tensor_out",
        &[
            b(&[2], &[true, false]),
            i(&[2], &[1, 0]),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [1.0, 1.0]);
    // GPT-2 mask pattern: le of an arange column against a row.
    let got = run1(
        "aten::le.Tensor_out",
        &[
            i(&[1, 3], &[0, 1, 2]),
            i(&[3, 1], &[0, 1, 2]),
            out(DType::Bool, &[3, 3]),
        ],
    );
    assert_eq!(
        got.bools(),
        [true, false, false, true, true, false, true, true, true]
    );
    let got = run1(
        "aten::ne.Scalar_out",
        &[i(&[4], &[0, 5, 0, 1]), A::Int(0), out(DType::Bool, &[4])],
    );
    assert_eq!(got.bools(), [false, true, false, true]);
}

// ----- bitwise / logical ---------------------------------------------------------------

#[test]
fn bitwise_ops() {
    let mut rng = Rng(9);
    for &(sa, sb) in SHAPE_PAIRS {
        let so = broadcast_dims(sa, sb);
        let a = rng.bools(numel(sa));
        let c = rng.bools(numel(sb));
        let n = numel(&so);
        let pa = |k: usize| a[broadcast_index(k, &so, sa)];
        let pc = |k: usize| c[broadcast_index(k, &so, sb)];
        let got = run1(
            "aten::bitwise_and.Tensor_out",
            &[b(sa, &a), b(sb, &c), out(DType::Bool, &so)],
        );
        assert_eq!(
            got.bools(),
            (0..n).map(|k| pa(k) & pc(k)).collect::<Vec<_>>()
        );
        let got = run1(
            "aten::logical_or.out",
            &[b(sa, &a), b(sb, &c), out(DType::Bool, &so)],
        );
        assert_eq!(
            got.bools(),
            (0..n).map(|k| pa(k) | pc(k)).collect::<Vec<_>>()
        );
        let ia = rng.i64s(numel(sa), -1000, 1000);
        let ic = rng.i64s(numel(sb), -1000, 1000);
        let qa = |k: usize| ia[broadcast_index(k, &so, sa)];
        let qc = |k: usize| ic[broadcast_index(k, &so, sb)];
        let got = run1(
            "aten::bitwise_and.Tensor_out",
            &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| qa(k) & qc(k)).collect::<Vec<_>>());
        let got = run1(
            "aten::bitwise_or.Tensor_out",
            &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| qa(k) | qc(k)).collect::<Vec<_>>());
        let got = run1(
            "aten::bitwise_xor.Tensor_out",
            &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), (0..n).map(|k| qa(k) ^ qc(k)).collect::<Vec<_>>());
    }
    let got = run1(
        "aten::bitwise_and.Scalar_out",
        &[b(&[2], &[true, false]), A::Int(3), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [1, 0]);
    let got = run1(
        "aten::bitwise_and.Scalar_out",
        &[i(&[2], &[5, 6]), A::Bo(true), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [1, 0]);
    let got = run1(
        "aten::bitwise_or.Scalar_out",
        &[i(&[2], &[5, 6]), A::Int(8), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [13, 14]);
    let got = run1(
        "aten::bitwise_xor.Scalar_out",
        &[b(&[2], &[true, false]), A::Bo(true), out(DType::Bool, &[2])],
    );
    assert_eq!(got.bools(), [false, true]);
    let got = run1(
        "aten::bitwise_not.out",
        &[
            A::Raw(DType::U8, std::vec![1], std::vec![5]),
            out(DType::U8, &[1]),
        ],
    );
    assert_eq!(got.i64(), [250]);
    let got = run1(
        "aten::bitwise_not.out",
        &[b(&[2], &[true, false]), out(DType::Bool, &[2])],
    );
    assert_eq!(got.bools(), [false, true]);
    let got = run1(
        "aten::bitwise_not.out",
        &[i(&[2], &[0, -6]), out(DType::I64, &[2])],
    );
    assert_eq!(got.i64(), [-1, 5]);
    let e = kerr(
        "aten::bitwise_and.Tensor_out",
        &[f(&[1], &[1.0]), f(&[1], &[1.0]), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
    let e = kerr(
        "aten::bitwise_and.Scalar_out",
        &[i(&[1], &[1]), A::Dbl(2.0), out(DType::I64, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 1, .. }));
    let e = kerr(
        "aten::bitwise_not.out",
        &[f(&[1], &[1.0]), out(DType::F32, &[1])],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
    let e = kerr(
        "aten::bitwise_and.Tensor_out",
        &[i(&[1], &[1]), i(&[1], &[1]), out(DType::Bool, &[1])],
    );
    assert!(matches!(e, KernelError::DTypeMismatch { .. }));
}

#[test]
fn logical_ops() {
    let nan = f32::NAN;
    let x = [nan, 0.0, 2.0, 0.0];
    let y = [1i64, 0, 0, 7];
    let got = run1(
        "aten::logical_and.out",
        &[f(&[4], &x), i(&[4], &y), out(DType::Bool, &[4])],
    );
    assert_eq!(got.bools(), [true, false, false, false]);
    let got = run1(
        "aten::logical_or.out",
        &[f(&[4], &x), i(&[4], &y), out(DType::Bool, &[4])],
    );
    assert_eq!(got.bools(), [true, false, true, true]);
    let got = run1(
        "aten::logical_xor.out",
        &[f(&[4], &x), i(&[4], &y), out(DType::F32, &[4])],
    );
    assert_eq!(got.f32(), [0.0, 0.0, 1.0, 1.0]);
    let got = run1(
        "aten::logical_not.out",
        &[f(&[4], &x), out(DType::Bool, &[4])],
    );
    assert_eq!(got.bools(), [false, true, false, true]);
    let got = run1(
        "aten::logical_and.out",
        &[
            b(&[2, 1], &[true, false]),
            b(&[2], &[true, false]),
            out(DType::Bool, &[2, 2]),
        ],
    );
    assert_eq!(got.bools(), [true, false, false, false]);
}

// ----- selection -----------------------------------------------------------------------

#[test]
fn where_broadcasts_every_way() {
    let mut rng = Rng(13);
    let triples: &[(&[usize], &[usize], &[usize])] = &[
        (&[1, 1, 4, 4], &[2, 3, 4, 4], &[]),
        (&[5], &[5], &[5]),
        (&[129], &[129], &[1]),
        (&[2, 1], &[1, 3], &[2, 3]),
        (&[2, 3], &[2, 1], &[1, 3]),
        (&[1, 3], &[2, 3], &[2, 1]),
        (&[2, 1], &[2, 1], &[1, 3]),
        (&[1, 3], &[2, 1], &[2, 1]),
        (&[2, 1], &[1, 3], &[2, 1]),
        (&[], &[], &[]),
        (&[3, 1, 1], &[1, 4, 1], &[1, 1, 5]),
        (&[0, 2], &[2], &[]),
    ];
    for &(sc, sa, sb) in triples {
        let so = broadcast_dims(&broadcast_dims(sc, sa), sb);
        let c = rng.bools(numel(sc));
        let a = rng.f32s(numel(sa), -1.0, 1.0);
        let bv = rng.f32s(numel(sb), -1.0, 1.0);
        let n = numel(&so);
        let want: Vec<f32> = (0..n)
            .map(|k| {
                if c[broadcast_index(k, &so, sc)] {
                    a[broadcast_index(k, &so, sa)]
                } else {
                    bv[broadcast_index(k, &so, sb)]
                }
            })
            .collect();
        let got = run1(
            "aten::where.self_out",
            &[b(sc, &c), f(sa, &a), f(sb, &bv), out(DType::F32, &so)],
        );
        assert_eq!(got.shape, so);
        assert!(same(&got.f32(), &want), "where {sc:?} {sa:?} {sb:?}");
        // int64 / bool payloads (fast paths for other compute types)
        let ia: Vec<i64> = (0..numel(sa)).map(|k| k as i64 * 3 - 7).collect();
        let ib: Vec<i64> = (0..numel(sb)).map(|k| -(k as i64)).collect();
        let want: Vec<i64> = (0..n)
            .map(|k| {
                if c[broadcast_index(k, &so, sc)] {
                    ia[broadcast_index(k, &so, sa)]
                } else {
                    ib[broadcast_index(k, &so, sb)]
                }
            })
            .collect();
        let got = run1(
            "aten::where.self_out",
            &[b(sc, &c), i(sa, &ia), i(sb, &ib), out(DType::I64, &so)],
        );
        assert_eq!(got.i64(), want);
    }
    // int64 self with a zero-dim float other promotes to float32.
    let got = run1(
        "aten::where.self_out",
        &[
            b(&[2], &[true, false]),
            i(&[2], &[1, 2]),
            f(&[], &[3.5]),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [1.0, 3.5]);
    let got = run1(
        "aten::where.self_out",
        &[
            A::Raw(DType::U8, std::vec![2], std::vec![1, 0]),
            f(&[2], &[1.0, 2.0]),
            f(&[2], &[3.0, 4.0]),
            out(DType::F32, &[2]),
        ],
    );
    assert_eq!(got.f32(), [1.0, 4.0]);
    let got = run1(
        "aten::where.self_out",
        &[
            b(&[2], &[true, false]),
            b(&[2], &[true, true]),
            b(&[], &[false]),
            out(DType::Bool, &[2]),
        ],
    );
    assert_eq!(got.bools(), [true, false]);
    let e = kerr(
        "aten::where.self_out",
        &[
            f(&[2], &[1.0, 0.0]),
            f(&[2], &[1.0, 2.0]),
            f(&[2], &[3.0, 4.0]),
            out(DType::F32, &[2]),
        ],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
    let e = kerr(
        "aten::where.self_out",
        &[
            b(&[3], &[true; 3]),
            f(&[2], &[1.0, 2.0]),
            f(&[2], &[3.0, 4.0]),
            out(DType::F32, &[2]),
        ],
    );
    assert!(matches!(e, KernelError::Shape { .. }));
    let e = kerr(
        "aten::where.self_out",
        &[
            b(&[2], &[true; 2]),
            f(&[2], &[1.0, 2.0]),
            f(&[2], &[3.0, 4.0]),
            out(DType::I64, &[2]),
        ],
    );
    assert!(matches!(e, KernelError::DTypeMismatch { arg: 3, .. }));
}

#[test]
fn masked_fill() {
    let got = run1(
        "aten::masked_fill.Scalar_out",
        &[
            f(&[2], &[1.0, 2.0]),
            b(&[2, 2], &[true, false, false, true]),
            A::Dbl(2.7),
            out(DType::F32, &[2, 2]),
        ],
    );
    assert_eq!(got.f32(), [2.7, 2.0, 1.0, 2.7]);
    let got = run1(
        "aten::masked_fill.Scalar_out",
        &[
            f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            b(&[3], &[false, true, false]),
            A::Dbl(f64::NEG_INFINITY),
            out(DType::F32, &[2, 3]),
        ],
    );
    assert_eq!(
        got.f32(),
        [1.0, f32::NEG_INFINITY, 3.0, 4.0, f32::NEG_INFINITY, 6.0]
    );
    let got = run1(
        "aten::masked_fill.Scalar_out",
        &[
            i(&[2], &[1, 2]),
            b(&[2], &[true, false]),
            A::Dbl(2.7),
            out(DType::I64, &[2]),
        ],
    );
    assert_eq!(got.i64(), [2, 2]);
    let e = kerr(
        "aten::masked_fill.Scalar_out",
        &[
            f(&[2], &[1.0, 2.0]),
            A::Raw(DType::U8, std::vec![2], std::vec![1, 0]),
            A::Dbl(0.0),
            out(DType::F32, &[2]),
        ],
    );
    assert!(matches!(e, KernelError::UnsupportedDType { arg: 1, .. }));
}

#[test]
fn mask_fast_paths() {
    for n in [0usize, 1, 3, 17, 129] {
        let xv = ramp(n, 2.0);
        let yv: Vec<f32> = (0..n)
            .map(|k| if k % 3 == 0 { xv[k] } else { 0.1 })
            .collect();
        let xi: Vec<i64> = (0..n as i64).map(|k| k % 5 - 2).collect();
        let yi: Vec<i64> = (0..n as i64).map(|k| k % 3 - 1).collect();
        type C = fn(f64, f64) -> bool;
        let ops: [(&str, C); 6] = [
            ("eq", |a, b| a == b),
            ("ne", |a, b| a != b),
            ("lt", |a, b| a < b),
            ("le", |a, b| a <= b),
            ("gt", |a, b| a > b),
            ("ge", |a, b| a >= b),
        ];
        for (name, r) in ops {
            let key = std::format!("aten::{name}.Tensor_out");
            let g = run1(&key, &[f(&[n], &xv), f(&[n], &yv), out(DType::Bool, &[n])]);
            let w: Vec<bool> = (0..n).map(|k| r(xv[k] as f64, yv[k] as f64)).collect();
            assert_eq!(g.bools(), w, "{key} f32");
            let g = run1(&key, &[i(&[n], &xi), i(&[n], &yi), out(DType::Bool, &[n])]);
            let w: Vec<bool> = (0..n).map(|k| r(xi[k] as f64, yi[k] as f64)).collect();
            assert_eq!(g.bools(), w, "{key} i64");
            let key = std::format!("aten::{name}.Scalar_out");
            let g = run1(&key, &[i(&[n], &xi), A::Int(0), out(DType::Bool, &[n])]);
            let w: Vec<bool> = (0..n).map(|k| r(xi[k] as f64, 0.0)).collect();
            assert_eq!(g.bools(), w, "{key} i64 scalar");
            let g = run1(&key, &[f(&[n], &xv), A::Dbl(0.25), out(DType::Bool, &[n])]);
            let w: Vec<bool> = (0..n).map(|k| r(xv[k] as f64, 0.25)).collect();
            assert_eq!(g.bools(), w, "{key} f32 scalar");
        }
        let cond: Vec<bool> = (0..n).map(|k| k % 4 != 1).collect();
        let g = run1(
            "aten::where.self_out",
            &[
                b(&[n], &cond),
                f(&[n], &xv),
                f(&[n], &yv),
                out(DType::F32, &[n]),
            ],
        )
        .f32();
        let w: Vec<f32> = (0..n)
            .map(|k| if cond[k] { xv[k] } else { yv[k] })
            .collect();
        assert_eq!(g, w);
        let g = run1(
            "aten::where.self_out",
            &[
                b(&[n], &cond),
                f(&[], &[1.5]),
                f(&[1], &[-2.0]),
                out(DType::F32, &[n]),
            ],
        )
        .f32();
        let w: Vec<f32> = cond.iter().map(|&c| if c { 1.5 } else { -2.0 }).collect();
        assert_eq!(g, w);
        let g = run1(
            "aten::logical_not.out",
            &[b(&[n], &cond), out(DType::Bool, &[n])],
        );
        assert_eq!(g.bools(), cond.iter().map(|c| !c).collect::<Vec<_>>());
    }
    // where with a [1, 1, T, T] condition against [1, H, T, T] values (generic path).
    let (h, t) = (3usize, 5usize);
    let cond: Vec<bool> = (0..t * t).map(|k| k % t <= k / t).collect();
    let xv = ramp(h * t * t, 1.0);
    let g = run1(
        "aten::where.self_out",
        &[
            b(&[1, 1, t, t], &cond),
            f(&[1, h, t, t], &xv),
            f(&[], &[f32::NEG_INFINITY]),
            out(DType::F32, &[1, h, t, t]),
        ],
    )
    .f32();
    for (k, &gv) in g.iter().enumerate() {
        let w = if cond[k % (t * t)] {
            xv[k]
        } else {
            f32::NEG_INFINITY
        };
        assert_eq!(gv, w);
    }
}

/// Bool masks repeated along the leading dims (`bool_repeated`: a padding mask over a causal
/// mask) match the reference for and/or/xor, read any nonzero byte as true and write 0 or 1;
/// shapes the path does not take (a column operand, a broadcast `self`) still go through the
/// general path.
#[test]
fn bool_masks_repeated_over_rows_match_the_reference() {
    let mut rng = Rng(31);
    let cases: &[(&[usize], &[usize])] = &[
        (&[1], &[1]),
        (&[3], &[3]),
        (&[1, 1, 17, 17], &[1, 1, 1, 17]),
        (&[1, 1, 17, 17], &[17]),
        (&[2, 129], &[1, 129]),
        (&[3, 17], &[3, 17]),
        (&[1, 1, 17, 17], &[1, 1, 17, 1]),
        (&[1, 17], &[3, 17]),
    ];
    let keys: [(&str, fn(bool, bool) -> bool); 3] = [
        ("aten::bitwise_and.Tensor_out", |a, b| a & b),
        ("aten::bitwise_or.Tensor_out", |a, b| a | b),
        ("aten::bitwise_xor.Tensor_out", |a, b| a ^ b),
    ];
    for &(sa, sb) in cases {
        let so = broadcast_dims(sa, sb);
        // Bytes 0, 1 and other nonzero values (true as well).
        let byte = |rng: &mut Rng| [0u8, 1, 2, 255][rng.below(4) as usize];
        let xa: Vec<u8> = (0..numel(sa)).map(|_| byte(&mut rng)).collect();
        let ya: Vec<u8> = (0..numel(sb)).map(|_| byte(&mut rng)).collect();
        for (key, op) in keys {
            let got = run1(
                key,
                &[
                    A::Raw(DType::Bool, sa.to_vec(), xa.clone()),
                    A::Raw(DType::Bool, sb.to_vec(), ya.clone()),
                    out(DType::Bool, &so),
                ],
            );
            let want: Vec<u8> = (0..numel(&so))
                .map(|k| {
                    let a = xa[broadcast_index(k, &so, sa)] != 0;
                    let b = ya[broadcast_index(k, &so, sb)] != 0;
                    op(a, b) as u8
                })
                .collect();
            assert_eq!(got.shape, so, "{key} {sa:?} {sb:?}");
            assert_eq!(got.bytes, want, "{key} {sa:?} {sb:?}");
        }
    }
}

/// `where` with f32 operands of the condition's shape or of one element (`where_f32_raw`)
/// selects what the reference selects, any nonzero condition byte true, bool and u8
/// conditions; operands that broadcast to a higher rank take the general path.
#[test]
fn where_over_f32_operands_of_the_condition_shape_matches_the_reference() {
    let mut rng = Rng(43);
    let ones: &[usize] = &[1, 1];
    for cd in [&[1usize][..], &[3], &[17, 17], &[1, 1, 129]] {
        let n = numel(cd);
        let cond: Vec<u8> = (0..n).map(|_| [0u8, 1, 7][rng.below(3) as usize]).collect();
        let full_a = rng.f32s(n, -3.0, 3.0);
        let full_b = rng.f32s(n, -3.0, 3.0);
        let one_rank5: &[usize] = &[1, 1, 1, 1, 1];
        for (ad, bd) in [
            (cd, cd),
            (&[][..], &[][..]),
            (ones, &[][..]),
            (one_rank5, one_rank5),
        ] {
            let (a, b) = if ad == cd {
                (full_a.clone(), full_b.clone())
            } else {
                (vec![-1.5f32], vec![f32::NEG_INFINITY])
            };
            let so = broadcast_dims(&broadcast_dims(cd, ad), bd);
            for dt in [DType::Bool, DType::U8] {
                let got = run1(
                    "aten::where.self_out",
                    &[
                        A::Raw(dt, cd.to_vec(), cond.clone()),
                        f(ad, &a),
                        f(bd, &b),
                        out(DType::F32, &so),
                    ],
                );
                let want: Vec<f32> = (0..numel(&so))
                    .map(|k| {
                        let c = cond[broadcast_index(k, &so, cd)] != 0;
                        if c {
                            a[broadcast_index(k, &so, ad)]
                        } else {
                            b[broadcast_index(k, &so, bd)]
                        }
                    })
                    .collect();
                assert_eq!(got.shape, so, "{cd:?} {ad:?} {bd:?}");
                assert!(same(&got.f32(), &want), "{cd:?} {ad:?} {bd:?} {dt:?}");
            }
        }
    }
}

/// A row against a column (`out[.., i, j] = x[j] op y[i]`, the causal mask of two position
/// ranges) on the fast path: every op, int64 and f32 with NaNs, odd sizes, against the
/// reference; the column against the row goes the general way, also to the reference.
#[test]
fn rows_against_columns_match_the_reference() {
    let ops = CMP_OPS;
    let mut rng = Rng(8);
    let cases: [(&[usize], &[usize]); 5] = [
        (&[1, 1, 1, 17], &[1, 1, 5, 1]),
        (&[129], &[3, 1]),
        (&[1, 16], &[16, 1]),
        (&[1, 1], &[4, 1]),
        (&[3, 1], &[1, 5]),
    ];
    for (sa, sb) in cases {
        let so = broadcast_dims(sa, sb);
        let a = rng.i64s(numel(sa), -3, 3);
        let c = rng.i64s(numel(sb), -3, 3);
        let mut af: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        af[0] = f32::NAN;
        let cf: Vec<f32> = c.iter().map(|&v| v as f32).collect();
        for (name, op) in ops {
            let key = std::format!("aten::{name}.Tensor_out");
            let n = numel(&so);
            let want = |x: &dyn Fn(usize) -> f64, y: &dyn Fn(usize) -> f64| -> Vec<bool> {
                (0..n)
                    .map(|k| {
                        op(
                            x(broadcast_index(k, &so, sa)),
                            y(broadcast_index(k, &so, sb)),
                        )
                    })
                    .collect()
            };
            let got = run1(&key, &[i(sa, &a), i(sb, &c), out(DType::Bool, &so)]);
            let w = want(&|k| a[k] as f64, &|k| c[k] as f64);
            assert_eq!(got.bools(), w, "{name} {sa:?} {sb:?} int64");
            let got = run1(&key, &[f(sa, &af), f(sb, &cf), out(DType::Bool, &so)]);
            let w = want(&|k| af[k] as f64, &|k| cf[k] as f64);
            assert_eq!(got.bools(), w, "{name} {sa:?} {sb:?} f32");
        }
    }
}

/// A row against a column splits its rows across a team: the one-core mask, split.
#[test]
fn rows_against_columns_split_across_a_team() {
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    let pos: Vec<i64> = (0..64).collect();
    let run = || {
        run1(
            "aten::le.Tensor_out",
            &[
                i(&[1, 1, 1, 64], &pos),
                i(&[1, 1, 64, 1], &pos),
                out(DType::Bool, &[1, 1, 64, 64]),
            ],
        )
        .bools()
    };
    let one = run();
    assert!((0..64 * 64).all(|k| one[k] == (k % 64 <= k / 64)));
    for cores in [2, 4] {
        let team = CountingTeam::new(cores);
        assert_eq!(scoped(&team, run), one, "{cores}");
        assert!(team.splits() > 0, "{cores}: not split");
    }
}
