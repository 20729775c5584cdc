//! Test helpers shared by the kernel families' test files (`*_tests.rs`): reference sizes,
//! tolerance checks and one-call runners over [`crate::testing::OpTest`].

// The module is declared `#[cfg(test)]` in `mod.rs`; the attribute repeated here marks the
// import as test code for `tests/architecture.rs`, which reads each file on its own.
#[cfg(test)]
use crate::testing::{OpTest, Rng, TestTensor};
use std::vec;
use std::vec::Vec;

/// Number of elements of a shape (1 for rank 0).
pub(super) fn numel(d: &[usize]) -> usize {
    d.iter().product()
}

/// Asserts `|got - want| <= atol + rtol·|want|` elementwise (NaN and infinities must match).
#[track_caller]
pub(super) fn close(got: &[f32], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g as f64;
        if w.is_nan() {
            assert!(g.is_nan(), "at {i}: got {g}, want NaN");
            continue;
        }
        if w.is_infinite() {
            assert_eq!(g, w, "at {i}");
            continue;
        }
        assert!(
            (g - w).abs() <= atol + rtol * w.abs(),
            "at {i}: got {g}, want {w}"
        );
    }
}

/// Runs a built one-operator program; every output, in order.
pub(super) fn run(t: &OpTest) -> Vec<TestTensor> {
    t.run().expect("kernel run")
}

/// Runs a built one-operator program; its first output.
pub(super) fn run_first(t: &OpTest) -> TestTensor {
    let mut outs = t.run().expect("run");
    outs.remove(0)
}

/// Row-major multi-index of flat index `i`.
pub(super) fn unravel(mut i: usize, d: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; d.len()];
    for k in (0..d.len()).rev() {
        idx[k] = i % d[k];
        i /= d[k];
    }
    idx
}

/// Flat row-major index of multi-index `idx` in dims `d`.
pub(super) fn ravel(idx: &[usize], d: &[usize]) -> usize {
    idx.iter().zip(d).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// Deterministic pseudo-random f32 data: `n` multiples of 0.1 in `[0, 100)`.
pub(super) fn data(n: usize, seed: u64) -> Vec<f32> {
    Rng(seed)
        .i64s(n, 0, 999)
        .into_iter()
        .map(|v| v as f32 / 10.0)
        .collect()
}

/// `n` distinct int64 values (`3k - 7`).
pub(super) fn iota_i64(n: usize) -> Vec<i64> {
    (0..n as i64).map(|v| v * 3 - 7).collect()
}

/// Runs a single-input, single-output f32 op whose extra arguments are built by `extra`.
pub(super) fn unary_f32(
    op: &str,
    dims: &[usize],
    x: &[f32],
    out_dims: &[usize],
    extra: impl FnOnce(&mut OpTest) -> Vec<i32>,
) -> TestTensor {
    let mut t = OpTest::new(op);
    let a = t.input_f32(dims, x);
    let mut args = vec![a];
    args.extend(extra(&mut t));
    let o = t.output(crate::dtype::DType::F32, out_dims);
    args.push(o);
    args.push(o);
    t.call(&args);
    run_first(&t)
}

/// Reference permute: the permuted dims and data.
pub(super) fn permute_ref(x: &[f32], d: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<f32>) {
    let od: Vec<usize> = perm.iter().map(|&p| d[p]).collect();
    let out = (0..numel(&od))
        .map(|i| {
            let oi = unravel(i, &od);
            let mut xi = vec![0; d.len()];
            for (k, &p) in perm.iter().enumerate() {
                xi[p] = oi[k];
            }
            x[ravel(&xi, d)]
        })
        .collect();
    (od, out)
}
