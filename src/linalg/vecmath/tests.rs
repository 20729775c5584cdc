use super::*;
use std::vec::Vec;

pub(crate) const LENS: [usize; 8] = [0, 1, 3, 4, 8, 17, 129, 1000];

fn data(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919) % 1000) as f32 / 500.0 - 1.0) * scale)
        .collect()
}

/// Dense sweep of [lo, hi] plus the data pattern.
fn sweep(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32)
        .collect()
}

/// Max relative error (with an absolute floor) of `f` against `want` over `xs`.
fn max_err(
    xs: &[f32],
    f: impl Fn(&[f32], &mut [f32]) -> Res,
    want: impl Fn(f64) -> f64,
    floor: f64,
) -> f64 {
    let mut y = std::vec![0.0f32; xs.len()];
    f(xs, &mut y).unwrap();
    let mut worst = 0.0f64;
    for (&x, &g) in xs.iter().zip(&y) {
        let w = want(x as f64);
        let e = (g as f64 - w).abs() / w.abs().max(floor);
        assert!(e.is_finite() || w.is_nan(), "f({x}) = {g}, want {w}");
        worst = worst.max(e);
    }
    worst
}

fn both(
    name: &str,
    xs: &[f32],
    f: fn(&[f32], &mut [f32]) -> Res,
    g: fn(&[f32], &mut [f32]),
    want: fn(f64) -> f64,
    floor: f64,
    bound: f64,
) {
    let e1 = max_err(xs, f, want, floor);
    let e2 = max_err(
        xs,
        |x, o| {
            g(x, o);
            Ok(())
        },
        want,
        floor,
    );
    std::println!("{name}: max rel error dispatched {e1:.2e}, generic {e2:.2e}");
    assert!(
        e1 <= bound,
        "{name}: dispatched max rel error {e1:e} > {bound:e}"
    );
    assert!(
        e2 <= bound,
        "{name}: generic max rel error {e2:e} > {bound:e}"
    );
}

#[test]
fn exp_accuracy() {
    let xs = sweep(-87.3, 88.3, 200_001);
    both("exp", &xs, exp, generic::exp, f64::exp, 1e-38, 2.5e-7);
    // Near overflow 2^n is capped at 2^127 and |r| grows to ln 2.
    let xs = sweep(88.3, 88.72, 2_001);
    both("exp", &xs, exp, generic::exp, f64::exp, 1e-38, 1e-6);
    let xs = sweep(-1.0, 1.0, 20_001);
    both("exp", &xs, exp, generic::exp, f64::exp, 1e-38, 2.5e-7);
}

#[test]
fn sin_cos_accuracy_and_specials() {
    // Absolute error: near the zeros of sin and cos the relative one is meaningless.
    let xs = sweep(-6400.0, 6400.0, 400_001);
    both("sin", &xs, sin, generic::sin, f64::sin, 1.0, 2.5e-7);
    both("cos", &xs, cos, generic::cos, f64::cos, 1.0, 2.5e-7);
    let xs = sweep(-8.0, 8.0, 100_001);
    both("sin", &xs, sin, generic::sin, f64::sin, 1.0, 1.5e-7);
    both("cos", &xs, cos, generic::cos, f64::cos, 1.0, 1.5e-7);
    // Small arguments keep their relative accuracy (sin x ≈ x).
    let xs = sweep(-1e-3, 1e-3, 2_001);
    both("sin", &xs, sin, generic::sin, f64::sin, 1e-30, 2e-7);
    // Beyond the reduction's range, libm; NaN and infinities give NaN; every lane of a
    // vector with one such lane is still right.
    let x = [
        1e5f32,
        -3e7,
        f32::NAN,
        f32::INFINITY,
        0.5,
        -0.0,
        1.0,
        7000.0,
    ];
    for (f, want) in [
        (
            sin as fn(&[f32], &mut [f32]) -> Res,
            f64::sin as fn(f64) -> f64,
        ),
        (cos, f64::cos),
    ] {
        let mut y = [0.0f32; 8];
        f(&x, &mut y).unwrap();
        for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
            if xi.is_finite() {
                assert!((yi as f64 - want(xi as f64)).abs() < 1e-6, "lane {i}: {yi}");
            } else {
                assert!(yi.is_nan(), "lane {i}: {yi}");
            }
        }
    }
    // sin(±0) is 0 (its sign is not kept), cos(0) exactly 1.
    let mut y = [1.0f32, 0.0];
    sin(&[-0.0, 0.0], &mut y).unwrap();
    assert_eq!(y, [0.0, 0.0]);
    cos(&[0.0, -0.0], &mut y).unwrap();
    assert_eq!(y, [1.0, 1.0]);
}

#[test]
fn sum_of_every_length() {
    for n in LENS.iter().copied().chain([5, 7, 9, 12, 64, 65]) {
        let x = data(n, 3.0);
        let want: f64 = x.iter().map(|&v| v as f64).sum();
        for got in [sum(&x), generic::sum(&x)] {
            assert!(
                (got as f64 - want).abs() <= 1e-6 * (1.0 + n as f64),
                "n = {n}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn exp_specials() {
    let x = [
        f32::NAN,
        100.0,
        -100.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        88.72,
        -87.3,
        88.8,
    ];
    for f in [exp as fn(&[f32], &mut [f32]) -> Res, |x, o| {
        generic::exp(x, o);
        Ok(())
    }] {
        let mut y = [0.0; 9];
        f(&x, &mut y).unwrap();
        assert!(y[0].is_nan());
        assert_eq!(&y[1..6], &[f32::INFINITY, 0.0, 1.0, f32::INFINITY, 0.0]);
        assert!(y[6].is_finite() && y[6] > 3.3e38, "exp(88.72) = {}", y[6]);
        assert!(y[7] > 1.1e-38 && y[7] < 1.3e-38);
        assert_eq!(y[8], f32::INFINITY);
    }
}

#[test]
fn tanh_sigmoid_gelu_accuracy() {
    let xs = sweep(-10.0, 10.0, 100_001);
    let small = sweep(-0.7, 0.7, 20_001);
    for xs in [&xs, &small] {
        both("tanh", xs, tanh, generic::tanh, f64::tanh, 1e-30, 3e-7);
        both(
            "sigmoid",
            xs,
            sigmoid,
            generic::sigmoid,
            |x| 1.0 / (1.0 + (-x).exp()),
            1e-30,
            4e-7,
        );
        both(
            "gelu_tanh",
            xs,
            gelu_tanh,
            generic::gelu_tanh,
            |x| {
                // 0.5·x·(1 + tanh u) = x/(1 + e^-2u), free of f64 cancellation.
                let k = (2.0 / core::f64::consts::PI).sqrt();
                x / (1.0 + (-2.0 * k * (x + 0.044715 * x * x * x)).exp())
            },
            1e-3,
            1.5e-6,
        );
    }
    let xs = sweep(-12.0, 12.0, 100_001);
    both(
        "gelu_erf",
        &xs,
        gelu_erf,
        generic::gelu_erf,
        |x| 0.5 * x * libm::erfc(-x / core::f64::consts::SQRT_2),
        1.0,
        1e-6,
    );
    // Specials.
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        50.0,
        -50.0,
    ];
    let mut y = [0.0; 7];
    tanh(&x, &mut y).unwrap();
    assert!(y[0].is_nan());
    assert_eq!(&y[1..], &[1.0, -1.0, 0.0, -0.0, 1.0, -1.0]);
    assert!(y[4].is_sign_negative());
    sigmoid(&x, &mut y).unwrap();
    assert!(y[0].is_nan());
    assert_eq!(&y[1..6], &[1.0, 0.0, 0.5, 0.5, 1.0]);
    assert!((y[6] as f64 / (-50.0f64).exp() - 1.0).abs() < 1e-6);
    gelu_tanh(&x, &mut y).unwrap();
    assert!(y[0].is_nan());
    assert_eq!(y[1], f32::INFINITY);
    assert_eq!(&y[3..], &[0.0, 0.0, 50.0, 0.0]);
    gelu_erf(&x, &mut y).unwrap();
    assert!(y[0].is_nan());
    assert_eq!(&y[3..], &[0.0, 0.0, 50.0, 0.0]);
}

#[test]
fn lengths_and_mismatch() {
    for n in LENS {
        let x = data(n, 3.0);
        let mut y = std::vec![9.0f32; n];
        tanh(&x, &mut y).unwrap();
        for (a, b) in x.iter().zip(&y) {
            assert!((*b as f64 - (*a as f64).tanh()).abs() < 1e-6);
        }
        relu(&x, &mut y).unwrap();
        assert!(y.iter().zip(&x).all(|(y, x)| *y == x.max(0.0)));
    }
    let mut y = [0.0f32; 3];
    assert!(exp(&[1.0, 2.0], &mut y).is_err());
    assert!(binary(BinOp::Add, &[1.0; 3], &[1.0; 2], &mut y).is_err());
    assert!(binary_row(BinOp::Add, &[1.0; 3], &[1.0; 2], &mut y).is_err());
    assert!(layer_norm(&[1.0; 3], Some(&[1.0; 2]), None, 1e-5, &mut y).is_err());
    assert!(transpose32(&[0.0; 3], 2, &mut y, 2, 2, 2).is_err());
    assert!(compare(CmpOp::Eq, &[1, 2], &[1, 2, 3], &mut [0u8; 2]).is_err());
}

#[test]
fn binary_forms() {
    let ops = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Min,
        BinOp::Max,
    ];
    let r = |op: BinOp, x: f32, y: f32| match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => x / y,
        BinOp::Min => {
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                x.min(y)
            }
        }
        BinOp::Max => {
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                x.max(y)
            }
        }
    };
    let eq = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for op in ops {
        for n in LENS {
            let mut a = data(n, 3.0);
            if n > 2 {
                a[1] = f32::NAN;
            }
            let b = data(n, -2.0).iter().map(|v| v + 0.25).collect::<Vec<_>>();
            let mut o = std::vec![0.0; n];
            binary(op, &a, &b, &mut o).unwrap();
            assert!((0..n).all(|i| eq(o[i], r(op, a[i], b[i]))), "{op:?} n={n}");
            binary_scalar(op, &a, 1.5, &mut o).unwrap();
            assert!((0..n).all(|i| eq(o[i], r(op, a[i], 1.5))));
            scalar_binary(op, 1.5, &b, &mut o).unwrap();
            assert!((0..n).all(|i| eq(o[i], r(op, 1.5, b[i]))));
            // The per-core forms over a common prefix (one element shorter output).
            let m = n.saturating_sub(1);
            binary_here(op, &a, &b, &mut o[..m]);
            assert!(
                (0..m).all(|i| eq(o[i], r(op, a[i], b[i]))),
                "{op:?} here n={n}"
            );
            binary_scalar_here(op, &a, -0.75, &mut o[..m]);
            assert!((0..m).all(|i| eq(o[i], r(op, a[i], -0.75))));
            scalar_binary_here(op, -0.75, &b, &mut o[..m]);
            assert!((0..m).all(|i| eq(o[i], r(op, -0.75, b[i]))));
        }
        // [rows, cols] with a row vector and a column vector; the row forms also on 4
        // cores (rows of whole 64-element chunks split inside rows: 6 × 1024, 3 × 192).
        let teams = [None, Some(crate::testing::CountingTeam::new(4))];
        for (rows, cols) in [(1, 1), (3, 17), (17, 3), (2, 129), (6, 1024), (3, 192)] {
            let a = data(rows * cols, 2.0);
            let row = data(cols, 1.0).iter().map(|v| v + 3.0).collect::<Vec<_>>();
            let col = data(rows, 1.0).iter().map(|v| v - 3.0).collect::<Vec<_>>();
            let mut o = std::vec![0.0; rows * cols];
            for team in &teams {
                let run = |f: &mut dyn FnMut()| match team {
                    Some(t) => crate::parallel::scoped(t, f),
                    None => f(),
                };
                o.fill(f32::NAN);
                run(&mut || binary_row(op, &a, &row, &mut o).unwrap());
                for i in 0..rows * cols {
                    assert!(eq(o[i], r(op, a[i], row[i % cols])), "{op:?} {rows}x{cols}");
                }
                o.fill(f32::NAN);
                run(&mut || row_binary(op, &row, &a, &mut o).unwrap());
                for i in 0..rows * cols {
                    assert!(eq(o[i], r(op, row[i % cols], a[i])), "{op:?} {rows}x{cols}");
                }
            }
            binary_col(op, &a, &col, &mut o).unwrap();
            for i in 0..rows * cols {
                assert!(eq(o[i], r(op, a[i], col[i / cols])));
            }
        }
    }
}

#[test]
fn pow_exponents() {
    for e in [
        0.0f32, 1.0, 2.0, 3.0, 4.0, 0.5, -0.5, -1.0, 5.0, -3.0, 8.0, -7.0, 64.0, 2.5, -1.7,
    ] {
        for n in LENS {
            let x: Vec<f32> = data(n, 2.0).iter().map(|v| v.abs() + 0.1).collect();
            let mut y = std::vec![0.0; n];
            pow_scalar(&x, e, &mut y).unwrap();
            for (a, b) in x.iter().zip(&y) {
                let w = (*a as f64).powf(e as f64);
                let tol = if w.is_finite() {
                    1e-6 * w.abs() + 1e-30
                } else {
                    0.0
                };
                assert!(
                    (*b as f64 - w).abs() <= tol || (w.is_infinite() && b.is_infinite()),
                    "{a}^{e} = {b}, want {w}"
                );
            }
        }
    }
    let mut y = [0.0f32; 3];
    pow_scalar(&[-2.0, 0.0, f32::NAN], 3.0, &mut y).unwrap();
    assert_eq!(&y[..2], &[-8.0, 0.0]);
    assert!(y[2].is_nan());
}

#[test]
fn softmax_log_softmax_layer_norm() {
    for n in LENS {
        let x = data(n, 10.0);
        let mut y = std::vec![0.0; n];
        let mut z = std::vec![0.0; n];
        softmax(&x, &mut y).unwrap();
        log_softmax(&x, &mut z).unwrap();
        let mut y2 = std::vec![0.0; n];
        generic::softmax(&x, &mut y2);
        if n == 0 {
            continue;
        }
        let mx = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let s: f64 = x.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for i in 0..n {
            let w = (x[i] as f64 - mx).exp() / s;
            for got in [y[i], y2[i]] {
                assert!(
                    (got as f64 - w).abs() <= 1e-6 * w + 1e-12,
                    "softmax n={n}: {got} vs {w}"
                );
            }
            let lw = x[i] as f64 - mx - s.ln();
            assert!(
                (z[i] as f64 - lw).abs() <= 1e-5,
                "log_softmax {} vs {lw}",
                z[i]
            );
        }
        let g = data(n, 1.5);
        let bt = data(n, 0.5);
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for (gg, bb) in [
            (Some(&g[..]), Some(&bt[..])),
            (None, Some(&bt[..])),
            (Some(&g[..]), None),
            (None, None),
        ] {
            for imp in 0..2 {
                let (m, r) = if imp == 0 {
                    layer_norm(&x, gg, bb, 1e-5, &mut y).unwrap()
                } else {
                    generic::layer_norm(&x, gg, bb, 1e-5, &mut y)
                };
                assert!((m as f64 - mean).abs() <= 1e-5 * (1.0 + mean.abs()));
                assert!((r as f64 - rstd).abs() <= 1e-5 * rstd);
                for i in 0..n {
                    let w = (x[i] as f64 - mean) * rstd * gg.map_or(1.0, |g| g[i] as f64)
                        + bb.map_or(0.0, |b| b[i] as f64);
                    assert!((y[i] as f64 - w).abs() <= 1e-5, "layer_norm n={n} [{i}]");
                }
            }
        }
    }
    // Multi-row form equals the row form.
    for n in [1usize, 3, 16, 17] {
        let x = data(5 * n, 7.0);
        let (mut a, mut b) = (std::vec![0.0; 5 * n], std::vec![0.0; 5 * n]);
        softmax_rows(&x, &mut a, n).unwrap();
        for (xr, br) in x.chunks(n).zip(b.chunks_mut(n)) {
            softmax(xr, br).unwrap();
        }
        assert_eq!(a, b);
    }
    assert!(softmax_rows(&[1.0; 5], &mut [0.0; 5], 2).is_err());
    assert!(softmax_rows(&[1.0; 4], &mut [0.0; 4], 0).is_err());
    softmax_rows(&[], &mut [], 0).unwrap();
    // Masked attention rows (runs of the most negative float, as a causal or padding mask
    // adds): identical to the scalar formula, zeros included, at every alignment.
    for n in [1usize, 3, 4, 7, 16, 17, 129] {
        for keep in [0usize, 1, 2, 5, n / 2, n] {
            let keep = keep.min(n);
            let mut x = data(n, 4.0);
            for (j, v) in x.iter_mut().enumerate() {
                if j >= keep || (j % 9 == 4 && keep > 1) {
                    *v += f32::MIN;
                }
            }
            let (mut a, mut b) = (std::vec![0.0; n], std::vec![0.0; n]);
            softmax(&x, &mut a).unwrap();
            generic::softmax(&x, &mut b);
            for j in 0..n {
                assert!(
                    (a[j] - b[j]).abs() <= 1e-6 * b[j].abs() + 1e-12,
                    "n={n} keep={keep} [{j}]: {} vs {}",
                    a[j],
                    b[j]
                );
                if b[j] == 0.0 {
                    assert_eq!(a[j], 0.0);
                }
            }
        }
    }
    // NaN propagates through softmax, also from inside an eight-lane block whose other
    // lanes are masked.
    let mut y = [0.0f32; 3];
    softmax(&[1.0, f32::NAN, 2.0], &mut y).unwrap();
    assert!(y.iter().all(|v| v.is_nan()));
    for at in [0usize, 5, 9, 16] {
        let mut x = std::vec![f32::MIN; 17];
        x[3] = 1.0;
        x[at] = f32::NAN;
        let mut y = [0.0f32; 17];
        softmax(&x, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_nan()), "NaN at {at}: {y:?}");
    }
    assert_eq!(layer_norm(&[], None, None, 1e-5, &mut []).unwrap().0, 0.0);
}

#[test]
fn masks_where_any_all() {
    for n in LENS {
        let a: Vec<i64> = (0..n as i64).map(|i| i % 5).collect();
        let b: Vec<i64> = (0..n as i64).map(|i| i % 3).collect();
        let mut m = std::vec![7u8; n];
        for op in [
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
        ] {
            compare(op, &a, &b, &mut m).unwrap();
            for i in 0..n {
                assert_eq!(m[i] != 0, cmp(op, a[i], b[i]), "{op:?}");
                assert!(m[i] <= 1);
            }
            compare_scalar(op, &a, 2, &mut m).unwrap();
            for i in 0..n {
                assert_eq!(m[i] != 0, cmp(op, a[i], 2));
            }
        }
        let fa = data(n, 1.0);
        let fb = data(n, -1.0);
        compare(CmpOp::Lt, &fa, &fb, &mut m).unwrap();
        let mut o = std::vec![0.0f32; n];
        where_select(&m, &fa, &fb, &mut o).unwrap();
        assert!((0..n).all(|i| o[i] == fa[i].min(fb[i])));
        where_scalars(&m, 1.0, -1.0, &mut o).unwrap();
        assert!((0..n).all(|i| o[i] == if fa[i] < fb[i] { 1.0 } else { -1.0 }));
        let mut nm = std::vec![0u8; n];
        logical_not(&m, &mut nm).unwrap();
        assert!((0..n).all(|i| nm[i] == (m[i] == 0) as u8));
        assert_eq!(any(&m), m.iter().any(|&v| v != 0));
        assert_eq!(all(&m), m.iter().all(|&v| v != 0));
        let ones = std::vec![3u8; n];
        assert!(all(&ones));
        assert_eq!(any(&ones), n > 0);
        let mut z = std::vec![0u8; n];
        assert!(!any(&z));
        if n > 0 {
            z[n - 1] = 2;
            assert!(any(&z));
            assert_eq!(all(&z), n == 1);
        }
        let mut f = std::vec![0i64; n];
        fill(&mut f, -4);
        assert!(f.iter().all(|&v| v == -4));
    }
    assert!(where_select(&[1u8], &[1.0f32, 2.0], &[1.0], &mut [0.0]).is_err());
}

#[test]
fn transposes() {
    for (rows, cols) in [
        (1, 1),
        (3, 17),
        (17, 3),
        (4, 4),
        (7, 7),
        (8, 12),
        (9, 20),
        (16, 16),
        (24, 13),
        (64, 64),
        (129, 5),
        // Planes into interleaved rows (2–4 channels), with a row tail.
        (4099, 3),
        (18, 2),
        (13, 4),
    ] {
        for pad in [0usize, 3] {
            let (ss, ds) = (rows + pad, cols + pad);
            let src: Vec<f32> = (0..cols * ss).map(|i| i as f32 + 0.5).collect();
            let mut dst = std::vec![-1.0f32; rows * ds];
            transpose32(&src, ss, &mut dst, ds, rows, cols).unwrap();
            let mut dst2 = std::vec![-1.0f32; rows * ds];
            generic::transpose32(&src, ss, &mut dst2, ds, rows, cols);
            for i in 0..rows {
                for j in 0..ds {
                    let want = if j < cols { src[j * ss + i] } else { -1.0 };
                    assert_eq!(dst[i * ds + j], want, "{rows}x{cols} pad {pad}");
                    assert_eq!(dst2[i * ds + j], want);
                }
            }
        }
    }
    // NaN payloads are copied bit for bit.
    let src = [f32::from_bits(0x7fc0_1234); 16];
    let mut dst = [0.0f32; 16];
    transpose32(&src, 4, &mut dst, 4, 4, 4).unwrap();
    assert!(dst.iter().all(|v| v.to_bits() == 0x7fc0_1234));
}

#[test]
fn softmax_with_masked_and_special_lanes() {
    // −∞ lanes (a mask) give 0 and leave the others exact; a row of −∞ only and a row with a
    // NaN give NaN everywhere (as in the formula); −3.4e38 lanes (a finite mask) give 0.
    let ninf = f32::NEG_INFINITY;
    let x = [ninf, 0.0, 1.0, ninf, 2.0, -3.4e38, ninf, 3.0, -1.0];
    let mut y = [0.0f32; 9];
    softmax(&x, &mut y).unwrap();
    let live: f64 = [0.0f64, 1.0, 2.0, 3.0, -1.0]
        .iter()
        .map(|v| (v - 3.0).exp())
        .sum();
    for (i, &v) in x.iter().enumerate() {
        let w = if v < -1e30 {
            0.0
        } else {
            ((v as f64) - 3.0).exp() / live
        };
        assert!(
            (y[i] as f64 - w).abs() <= 1e-6 * w + 1e-12,
            "lane {i}: {} vs {w}",
            y[i]
        );
    }
    for row in [
        [ninf; 9],
        [0.0, 1.0, f32::NAN, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ] {
        softmax(&row, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_nan()), "{row:?} -> {y:?}");
    }
}

#[test]
fn copy_rows_gathers_scatters_and_broadcasts_every_run_length() {
    // Run lengths around the inline steps (8, 4, 1) and the library threshold.
    for run in [1usize, 3, 4, 5, 8, 12, 16, 17, 31, 32, 33, 129] {
        for rows in [1usize, 2, 3, 17] {
            for (ss, os) in [
                (run, run),
                (run + 5, run),
                (0, run),
                (run, run + 3),
                (run + 1, run + 7),
            ] {
                let src: Vec<f32> = (0..(rows - 1) * ss + run)
                    .map(|i| i as f32 + 0.25)
                    .collect();
                let olen = (rows - 1) * os + run;
                let mut out = std::vec![-1.0f32; olen + 2];
                copy_rows(&src, ss, &mut out, os, run, rows).unwrap();
                for (p, &v) in out.iter().enumerate() {
                    let (i, j) = (p / os.max(1), p % os.max(1));
                    let want = if i < rows && j < run {
                        src[i * ss + j]
                    } else {
                        -1.0
                    };
                    assert_eq!(v, want, "run {run} rows {rows} strides {ss}/{os} at {p}");
                }
            }
        }
    }
    // Bytes and 8-byte elements take the same path.
    let src: Vec<u8> = (0..40).collect();
    let mut out = [0u8; 30];
    copy_rows(&src, 13, &mut out, 10, 10, 3).unwrap();
    assert_eq!(&out[10..20], &src[13..23]);
    let src: Vec<i64> = (0..9).collect();
    let mut out = [0i64; 9];
    copy_rows(&src, 0, &mut out, 3, 3, 3).unwrap();
    assert_eq!(out, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    // Bad lengths are errors and write nothing.
    let src = [1.0f32; 10];
    let mut out = [0.0f32; 10];
    assert!(copy_rows(&src, 4, &mut out, 4, 4, 3).is_err()); // src needs 12
    assert!(copy_rows(&src, 3, &mut out[..7], 4, 3, 3).is_err()); // out needs 11
    assert!(copy_rows(&src, 3, &mut out, 2, 3, 3).is_err()); // overlapping writes
    assert!(copy_rows(&src, usize::MAX, &mut out, 4, 3, 3).is_err());
    assert!(out.iter().all(|&v| v == 0.0));
    copy_rows(&src, 3, &mut out, 2, 3, 0).unwrap();
    copy_rows(&src, 3, &mut out, 2, 0, 3).unwrap();
    // A single row may sit at the end of a buffer shorter than any stride.
    copy_rows(&src, 100, &mut out[7..], 100, 3, 1).unwrap();
    assert_eq!(out[7..], [1.0; 3]);
}

#[test]
fn copy_rows_single_runs_of_every_length() {
    // One run: the inline moves (1, 2..4, 4..8, 8..16, 16..32 overlapping) and the library
    // call at 32 and above, with the elements behind the run untouched.
    for n in 0usize..=40 {
        let src: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut out = std::vec![-1.0f32; n + 3];
        copy_rows(&src, 0, &mut out, 0, n, 1).unwrap();
        assert_eq!(&out[..n], &src[..], "n = {n}");
        assert!(out[n..].iter().all(|&v| v == -1.0), "n = {n}");
    }
}

#[test]
fn copy_run_copies_the_common_length() {
    for n in 0usize..=40 {
        let src: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
        let mut out = std::vec![-1.0f32; n + 3];
        copy_run(&src, &mut out);
        assert_eq!(&out[..n], &src[..], "n = {n}");
        assert!(out[n..].iter().all(|&v| v == -1.0), "n = {n}");
        // A shorter destination takes the common length.
        let mut short = std::vec![-1.0f32; n / 2];
        copy_run(&src, &mut short);
        assert_eq!(&short[..], &src[..n / 2], "n = {n}");
    }
}

#[test]
fn softmax_finds_the_maximum_at_every_position() {
    // A large score anywhere in the row (every lane of the sixteen-, eight- and four-lane
    // steps and the tail): a missed maximum would overflow e^(x − max) into inf/NaN.
    for n in [1usize, 5, 16, 17, 35, 40] {
        for p in 0..n {
            let mut x = std::vec![0.0f32; n];
            x[p] = 100.0;
            let mut out = std::vec![f32::NAN; n];
            softmax(&x, &mut out).unwrap();
            for (j, &v) in out.iter().enumerate() {
                let want = if j == p { 1.0 } else { 0.0 };
                assert!(
                    (v - want).abs() <= 1e-6,
                    "n {n}, max at {p}: out[{j}] = {v}"
                );
            }
        }
    }
}

/// `layer_norm_rows` gives, row for row, what `layer_norm` gives on that row (bit for bit,
/// statistics included), with and without the affine terms; wrong lengths are errors and
/// write nothing.
#[test]
fn layer_norm_rows_match_row_by_row() {
    for n in [0usize, 1, 3, 17, 64, 129] {
        for rows in [1usize, 3, 5] {
            let x = data(rows * n, 3.0);
            let (g, b) = (data(n, 1.5), data(n, 0.5));
            for (gg, bb) in [(Some(&g[..]), Some(&b[..])), (None, None)] {
                let mut want = std::vec![0.0f32; rows * n];
                let mut stats = std::vec![(0.0f32, 0.0f32); rows];
                for r in 0..rows {
                    let (xr, wr) = (&x[r * n..(r + 1) * n], &mut want[r * n..(r + 1) * n]);
                    stats[r] = layer_norm(xr, gg, bb, 1e-5, wr).unwrap();
                }
                let mut got = std::vec![f32::NAN; rows * n];
                let (mut mean, mut rstd) = (std::vec![0.0f32; rows], std::vec![0.0f32; rows]);
                layer_norm_rows(&x, gg, bb, 1e-5, n, &mut got, &mut mean, &mut rstd).unwrap();
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "n {n}, rows {rows}");
                let (wm, wr): (Vec<f32>, Vec<f32>) = stats.into_iter().unzip();
                assert_eq!(bits(&mean), bits(&wm), "means, n {n}, rows {rows}");
                assert_eq!(bits(&rstd), bits(&wr), "rstds, n {n}, rows {rows}");
            }
        }
    }
    let (x, g) = (data(12, 1.0), data(4, 1.0));
    let mut out = std::vec![7.0f32; 12];
    let (mut m, mut r) = ([0.0f32; 3], [0.0f32; 3]);
    assert!(layer_norm_rows(&x, Some(&g[..3]), None, 1e-5, 4, &mut out, &mut m, &mut r).is_err());
    assert!(layer_norm_rows(&x[..11], None, None, 1e-5, 4, &mut out, &mut m, &mut r).is_err());
    assert!(layer_norm_rows(&x, None, None, 1e-5, 4, &mut out, &mut m, &mut r[..2]).is_err());
    assert!(out.iter().all(|&v| v == 7.0));
}

/// Softmax of `s·x` (an attention scale folded in): against the f64 formula on rows of every
/// length class (tails, whole blocks, the short-row buffer) with a masked lane, for scales
/// below and above 1; negative and zero scales on unmasked rows; bit-equal to the plain
/// softmax at `s = 1`; an infinite or NaN scale gives NaN.
#[test]
fn scaled_softmax_rows_match_the_formula() {
    for n in [1usize, 3, 7, 8, 17, 29, 37, 129] {
        let rows = 3;
        let plain = data(rows * n, 6.0);
        let mut masked = plain.clone();
        if n >= 3 {
            masked[n / 2] = f32::NEG_INFINITY;
        }
        for (x, s) in [
            (&masked, 0.125f32),
            (&masked, 0.25),
            (&masked, 1.0),
            (&masked, 3.0),
            (&plain, -0.5),
            (&plain, 0.0),
        ] {
            let mut y = std::vec![0.0f32; rows * n];
            softmax_rows_scaled(x, &mut y, n, s).unwrap();
            for (xr, yr) in x.chunks(n).zip(y.chunks(n)) {
                let sx: Vec<f64> = xr.iter().map(|&v| v as f64 * s as f64).collect();
                let mx = sx.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
                let e: Vec<f64> = sx.iter().map(|&v| (v - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (j, (&g, &w)) in yr.iter().zip(&e).enumerate() {
                    let w = w / sum;
                    assert!(
                        (g as f64 - w).abs() <= 2e-6 * w + 1e-9,
                        "n {n} s {s} [{j}]: {g} vs {w}"
                    );
                }
            }
            let mut z = std::vec![0.0f32; rows * n];
            generic::softmax_rows_scaled(x, &mut z, n, s);
            for (g, w) in y.iter().zip(&z) {
                assert!(
                    (g - w).abs() <= 2e-6 * w.abs() + 1e-9,
                    "n {n} s {s}: {g} vs generic {w}"
                );
            }
            if s == 1.0 {
                let mut p = std::vec![0.0f32; rows * n];
                softmax_rows(x, &mut p, n).unwrap();
                assert_eq!(p, y);
            }
        }
    }
    let mut y = [0.0f32; 4];
    for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        softmax_rows_scaled(&[0.0, 1.0, 2.0, 3.0], &mut y, 4, bad).unwrap();
        assert!(y.iter().all(|v| v.is_nan()), "scale {bad}: {y:?}");
    }
}
