//! Test helpers shared by the kernel families' test files (`*_tests.rs`): one-call runners
//! over [`crate::testing::OpTest`] (built programs, or a key and a list of [`A`] arguments),
//! tolerance and bit-equality checks, reference index maps and deterministic data.

use crate::dtype::DType;
use crate::error::{Error, KernelError};
use std::vec;
use std::vec::Vec;

use crate::testing::{OpTest, Rng, TestTensor};

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
    let o = t.output(DType::F32, out_dims);
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

// ----- key + argument-list runner (elementwise families) ------------------------------------

/// One call argument.
#[derive(Clone)]
pub(super) enum A {
    F(Vec<usize>, Vec<f32>),
    D(Vec<usize>, Vec<f64>),
    I(Vec<usize>, Vec<i64>),
    B(Vec<usize>, Vec<bool>),
    Raw(DType, Vec<usize>, Vec<u8>),
    Int(i64),
    Dbl(f64),
    Bo(bool),
    Non,
    Str(&'static str),
    List(Vec<i64>),
    Out(DType, Vec<usize>),
    OutDyn(DType, Vec<usize>),
}

/// A float32 input.
pub(super) fn f(shape: &[usize], v: &[f32]) -> A {
    A::F(shape.to_vec(), v.to_vec())
}
/// An int64 input.
pub(super) fn i(shape: &[usize], v: &[i64]) -> A {
    A::I(shape.to_vec(), v.to_vec())
}
/// A bool input.
pub(super) fn b(shape: &[usize], v: &[bool]) -> A {
    A::B(shape.to_vec(), v.to_vec())
}
/// A (static) output.
pub(super) fn out(dt: DType, shape: &[usize]) -> A {
    A::Out(dt, shape.to_vec())
}

/// Runs `key` with `args`; the last output argument is appended again (the return).
pub(super) fn run_args(key: &str, args: &[A]) -> Result<Vec<TestTensor>, Error> {
    let mut t = OpTest::new(key);
    let mut ids = Vec::new();
    let mut last_out = None;
    for a in args {
        let id = match a.clone() {
            A::F(s, v) => t.input_f32(&s, &v),
            A::D(s, v) => t.input_f64(&s, &v),
            A::I(s, v) => t.input_i64(&s, &v),
            A::B(s, v) => t.input_bool(&s, &v),
            A::Raw(d, s, v) => t.input(d, &s, &v),
            A::Int(v) => t.int(v),
            A::Dbl(v) => t.double(v),
            A::Bo(v) => t.boolean(v),
            A::Non => t.none(),
            A::Str(s) => t.string(s),
            A::List(v) => t.int_list(&v),
            A::Out(d, s) => {
                let o = t.output(d, &s);
                last_out = Some(o);
                o
            }
            A::OutDyn(d, s) => {
                let o = t.output_dynamic(d, &s);
                last_out = Some(o);
                o
            }
        };
        ids.push(id);
    }
    ids.push(last_out.expect("an output"));
    t.call(&ids);
    t.run()
}

/// [`run_args`] that must succeed; its first output.
pub(super) fn run1(key: &str, args: &[A]) -> TestTensor {
    match run_args(key, args) {
        Ok(mut v) => v.remove(0),
        Err(e) => panic!("{key}: {e}"),
    }
}

/// [`run_args`] that must fail with a kernel error; that error.
pub(super) fn kerr(key: &str, args: &[A]) -> KernelError {
    match run_args(key, args) {
        Err(Error::Kernel { source, .. }) => source,
        Err(e) => panic!("{key}: expected a kernel error, got {e}"),
        Ok(_) => panic!("{key}: expected a kernel error, got success"),
    }
}

/// Bitwise equality for floats (NaN == NaN).
pub(super) fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Within `ulps` units in the last place (or 1e-30 absolute), NaN == NaN.
pub(super) fn close_ulps(a: f32, b: f32, ulps: i64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a == b {
        return true;
    }
    if (a - b).abs() < 1e-30 {
        return true;
    }
    let (ia, ib) = (a.to_bits() as i32 as i64, b.to_bits() as i32 as i64);
    (ia - ib).abs() <= ulps && a.signum() == b.signum()
}

/// `|got - want| <= tol · max(1, |want|)` (for results that cancel, like gelu's `1 + erf`).
pub(super) fn assert_near(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{k}]: got {g}, want {w}"
        );
    }
}

pub(super) fn assert_close(got: &[f32], want: &[f32], ulps: i64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(close_ulps(g, w, ulps), "{what}[{k}]: got {g}, want {w}");
    }
}

/// Operand shape pairs covering every broadcast form (scalars, rows, columns, both sides,
/// size 0).
pub(super) const SHAPE_PAIRS: &[(&[usize], &[usize])] = &[
    (&[], &[]),
    (&[1], &[17]),
    (&[3], &[3]),
    (&[129], &[129]),
    (&[129], &[]),
    (&[], &[17]),
    (&[2, 3], &[3]),
    (&[2, 3], &[2, 1]),
    (&[4, 1, 3], &[1, 5, 1]),
    (&[2, 3, 4, 5], &[3, 1, 5]),
    (&[1, 1, 7], &[2, 3, 1]),
    (&[5, 1], &[]),
    (&[2, 1, 4, 1], &[1, 3, 1, 5]),
    (&[3, 17], &[3, 17]),
    (&[1, 3, 1], &[3, 3, 1]),
    (&[0, 3], &[3]),
];

/// `n` deterministic values spread over `[-scale, scale) + 0.125`.
pub(super) fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|k| (((k * 7919) % 1000) as f32 / 500.0 - 1.0) * scale + 0.125)
        .collect()
}

/// A static, planned, writable, contiguous tensor-table entry of `dtype` and `dims` (default
/// dim order) over `capacity` bytes at `data`: what the runner tests of prepared calls bind.
pub(super) fn table_entry(
    dtype: DType,
    data: *mut u8,
    dims: &[usize],
    capacity: usize,
) -> crate::kernel_api::TensorSlot {
    crate::kernel_api::TensorSlot {
        dtype,
        dynamism: crate::kernel_api::Dynamism::Static,
        planned: true,
        writable: true,
        contiguous: true,
        dim_order: core::array::from_fn(|i| i as u8),
        shape: crate::shape::Shape::new(dims).unwrap(),
        data,
        capacity,
    }
}

/// A prepared record running `run` over table entries `slots` (the other positions absent).
pub(super) fn record(
    run: crate::kernel_api::PreparedFn,
    slots: &[u32],
    sizes: [u32; 4],
    param: u32,
) -> crate::kernel_api::Prepared {
    use crate::kernel_api::Prepared;
    let mut all = [Prepared::NO_SLOT; 6];
    all[..slots.len()].copy_from_slice(slots);
    Prepared {
        run: Some(run),
        slots: all,
        sizes,
        param,
        hint: 0,
    }
}

/// Runs `run` on this core, then on 2- and 4-core teams: each team's result equals the
/// one-core result and the team split the work (`what` names the case in a failure).
pub(super) fn same_on_teams<T: PartialEq + core::fmt::Debug>(what: &str, run: impl Fn() -> T) {
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    let one = run();
    for cores in [2, 4] {
        let team = CountingTeam::new(cores);
        assert_eq!(scoped(&team, &run), one, "{what}: {cores} cores");
        assert!(team.splits() > 0, "{what}: {cores} cores: not split");
    }
}
