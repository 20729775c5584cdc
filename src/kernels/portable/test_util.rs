//! Test helpers shared by the kernel families' test files (`*_tests.rs`): reference sizes,
//! tolerance checks and one-call runners over [`crate::testing::OpTest`].

// The module is declared `#[cfg(test)]` in `mod.rs`; the attribute repeated here marks the
// import as test code for `tests/architecture.rs`, which reads each file on its own.
#[cfg(test)]
use crate::testing::{OpTest, TestTensor};
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
