//! Slice-level vector kernels shared by the portable operators and the XNNPACK delegate:
//! polynomial `exp`/`tanh`/`sigmoid`/GELU, softmax and layer-norm rows, binary arithmetic
//! (same shape, scalar, row- and column-broadcast), `pow` by a scalar, comparisons to `u8`
//! masks, `where`, `any`/`all`, `logical_not`, fills, strided row copies ([`copy_rows`]: the
//! bottom of permutes, slices, concatenations and broadcasts) and a 4-byte transpose.
//!
//! The element maps (transcendentals, arithmetic, `pow`, softmax rows) split their slices
//! across the installed team of cores ([`crate::parallel`]) when they are long enough, in
//! aligned blocks or whole rows, so the result is bit-identical on any number of cores.
//!
//! Every function is safe, allocation-free and panic-free: slice lengths are checked up front
//! and a mismatch is a [`KernelError::Shape`] (with `arg` 0; callers that have validated their
//! shapes can ignore the exact argument). On AArch64 the transcendental, row and transpose
//! kernels run on Neon (`neon`, AArch64 only); everywhere else (and for the plain
//! arithmetic on every target) they run on the [`generic`] twins: branch-free plain Rust that
//! LLVM vectorises for the target's baseline (SSE2 on x86_64, Neon on AArch64). No function
//! calls libm per element except `pow` with a non-integer exponent (`sqrtf` for ±0.5, `powf`
//! otherwise) and `sin`/`cos` beyond |x| = 6400.
//!
//! Accuracy against f64 references: the bound each test asserts (both back ends, dense sweeps)
//! and the maximum measured by those sweeps (generic / Neon under qemu):
//!
//! | function | tested bound (relative) | measured | method |
//! |---|---|---|---|
//! | [`exp`] | 2.5e-7 on [-87.3, 88.3]; 1e-6 on (88.3, 88.72] | 9.8e-8 / 7.3e-8; 7.4e-7 / 7.3e-7 | `n = round(x·log2 e)` (≤ 127), Cody–Waite `r`, degree-7 Taylor, `2^n` by exponent bits; 0 below ln(FLT_MIN) = -87.34, +inf above ln(FLT_MAX) |
//! | [`tanh`] | 3e-7 | 1.9e-7 / 1.7e-7 | `e/(e + 2)`, `e = expm1(2\|x\|) = 2^n·(e^r − 1) + (2^n − 1)`, \|x\| capped at 9, sign restored |
//! | [`sigmoid`] | 4e-7 | 1.2e-7 / 1.2e-7 | `1/(1 + e^-x)` |
//! | [`gelu_tanh`] | 1.5e-6 where \|y\| ≥ 1e-3 (abs 1.5e-9 below) | 1.07e-6 / 1.0e-6 (1.8e-7 on \|x\| ≤ 0.7) | `x/(1 + e^-2u)`, `u = √(2/π)(x + 0.044715x³)`; the f32 rounding of `u` dominates for x < -2 |
//! | [`gelu_erf`] | abs 1e-6·max(1, \|y\|) | 8.8e-7 / 6.4e-7 | `h + h·erf(x/√2)`, `h = ½x`; erf = `z·P(z²)/Q(z²)` (rational fit, degrees 5/5; Neon evaluates P and Q by Estrin's scheme) on \|z\| ≤ 3.92, ±1 beyond; f32 rounding of P/Q dominates |
//! | [`sin`], [`cos`] | abs 2.5e-7 on [-6400, 6400] (libm beyond) | | `n = round(x·2/π)`, three-part Cody–Waite `r` (exact products for \|n\| < 4096), Cephes degree-7/8 polynomials on \|r\| ≤ π/4, quadrant from the low bits of `n` |
//! | [`softmax`] | 1e-6 (+1e-12 abs) | | max-subtracted, polynomial exp (Neon: eight lanes in assembly), one reciprocal |
//! | [`log_softmax`] | abs 1e-5 | | `x − max − ln Σ e^(x − max)` (one `logf` per row) |
//! | [`layer_norm`] | abs 1e-5 (rows of \|x\| ≤ 10) | | two-pass f32 statistics |
//! | [`pow_scalar`] | 1e-6 | | multiplies for integer exponents up to ±8 |

use crate::error::KernelError;

pub mod generic;
#[cfg(target_arch = "aarch64")]
pub mod neon;
pub mod op;
mod runs;

pub use op::{BinOp, CmpOp};
use runs::copy_raw;
pub use runs::copy_run;

type Res = Result<(), KernelError>;

fn mismatch() -> KernelError {
    KernelError::Shape {
        arg: 0,
        detail: "vec: slice lengths do not match",
    }
}

#[inline]
fn same(a: usize, b: usize) -> Res {
    if a == b {
        Ok(())
    } else {
        Err(mismatch())
    }
}

/// Elements per unit when a map is split across cores ([`crate::parallel`]): whole vector
/// blocks, so every part but the last runs only the kernels' main loops, on the same elements
/// as one core would, and the split changes no bit.
const CHUNK: usize = 64;

/// What one element of an arithmetic operation costs in the unit of
/// [`Team::min_work`](crate::parallel::Team::min_work) (multiply-adds: four to a Neon
/// instruction): about one instruction per element (two loads, the operation and a store per
/// vector of four), so four.
const ELEMENT_OP: usize = 4;

/// `f(x_part, out_part)` over `CHUNK`-aligned parts of equal-length `x` and `out`, split across
/// the installed team when `cost` (instructions per element, roughly) times the length pays.
fn map(x: &[f32], out: &mut [f32], cost: usize, f: impl Fn(&[f32], &mut [f32]) + Sync) {
    crate::parallel::for_chunks(out, CHUNK, CHUNK * cost, |u, o, _| {
        f(&x[u * CHUNK..u * CHUNK + o.len()], o)
    });
}

/// [`map`] over rows of `n` elements (a part is whole rows).
fn map_rows(
    x: &[f32],
    out: &mut [f32],
    n: usize,
    cost: usize,
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) {
    crate::parallel::for_chunks(out, n, n * cost, |u, o, _| f(&x[u * n..u * n + o.len()], o));
}

/// A row broadcast split across cores: `f(at, r0, out_piece)` for pieces of `out` (viewed as
/// rows of `row` elements) that start at element `at`, at element `r0` of their row, and stay
/// inside it. Rows of more than one chunk (64 elements) and a whole number of them split by
/// chunks, so that a few long rows (a `[T, T]` mask over 6 heads) still share evenly; other
/// rows split by whole rows (`f` once per row). Elementwise work only: any split gives the
/// same bits.
pub fn for_row_pieces(
    out: &mut [f32],
    row: usize,
    cost: usize,
    f: impl Fn(usize, usize, &mut [f32]) + Sync,
) {
    if row == 0 {
        return;
    }
    let unit = if row > CHUNK && row.is_multiple_of(CHUNK) {
        CHUNK
    } else {
        row
    };
    crate::parallel::for_chunks(out, unit, unit * cost, |u, o, _| {
        let mut at = u * unit;
        // Only the first piece can start inside a row.
        let mut r0 = if unit == row { 0 } else { at % row };
        let mut o = o;
        while !o.is_empty() {
            let (piece, rest) = o.split_at_mut((row - r0).min(o.len()));
            let len = piece.len();
            f(at, r0, piece);
            (o, at, r0) = (rest, at + len, 0);
        }
    });
}

macro_rules! dispatch {
    ($name:ident ( $($a:expr),* )) => {{
        #[cfg(target_arch = "aarch64")]
        {
            neon::$name($($a),*)
        }
        #[cfg(not(target_arch = "aarch64"))]
        {
            generic::$name($($a),*)
        }
    }};
}

/// `out[i] = exp(x[i])`.
pub fn exp(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 10, |x, o| dispatch!(exp(x, o)));
    Ok(())
}

/// Σ x in f32, in several partial sums (not sequential order: two 4-lane accumulators on
/// Neon, eight lanes elsewhere); one core.
pub fn sum(x: &[f32]) -> f32 {
    dispatch!(sum(x))
}

/// `out[i] = sin(x[i])`.
pub fn sin(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 8, |x, o| dispatch!(sin(x, o)));
    Ok(())
}

/// `out[i] = cos(x[i])`.
pub fn cos(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 8, |x, o| dispatch!(cos(x, o)));
    Ok(())
}

/// `out[i] = tanh(x[i])`.
pub fn tanh(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 12, |x, o| dispatch!(tanh(x, o)));
    Ok(())
}

/// `out[i] = 1 / (1 + exp(-x[i]))`.
pub fn sigmoid(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 12, |x, o| dispatch!(sigmoid(x, o)));
    Ok(())
}

/// Tanh-approximated GELU, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub fn gelu_tanh(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 16, |x, o| dispatch!(gelu_tanh(x, o)));
    Ok(())
}

/// Exact GELU, `0.5·x·(1 + erf(x/√2))`.
pub fn gelu_erf(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 16, |x, o| dispatch!(gelu_erf(x, o)));
    Ok(())
}

/// `out[i] = max(x[i], 0)`; NaN stays NaN.
pub fn relu(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, ELEMENT_OP, generic::relu);
    Ok(())
}

/// Softmax of one row (max subtracted). Empty rows are a no-op.
pub fn softmax(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    dispatch!(softmax(x, out));
    Ok(())
}

/// Softmax of `scale·x` over every `n`-element row (an attention score scale folded in):
/// `exp(scale·(x − m))` normalised, `m` the row maximum of `x` (its minimum for a negative
/// scale: the maximum of `scale·x` either way). An infinite or NaN scale gives NaN, as the
/// softmax of `scale·x` does; `scale = 1` is [`softmax_rows`].
pub fn softmax_rows_scaled(x: &[f32], out: &mut [f32], n: usize, scale: f32) -> Res {
    if scale == 1.0 {
        return softmax_rows(x, out, n);
    }
    same(x.len(), out.len())?;
    if n == 0 {
        return same(x.len(), 0);
    }
    if !x.len().is_multiple_of(n) {
        return Err(mismatch());
    }
    if !scale.is_finite() {
        out.fill(f32::NAN);
        return Ok(());
    }
    map_rows(x, out, n, 16, |x, o| {
        dispatch!(softmax_rows_scaled(x, o, n, scale))
    });
    Ok(())
}

/// Softmax of every `n`-element row (`x.len()` a multiple of `n`; `n = 0` only with empty
/// slices).
pub fn softmax_rows(x: &[f32], out: &mut [f32], n: usize) -> Res {
    same(x.len(), out.len())?;
    if n == 0 {
        return same(x.len(), 0);
    }
    if !x.len().is_multiple_of(n) {
        return Err(mismatch());
    }
    map_rows(x, out, n, 16, |x, o| dispatch!(softmax_rows(x, o, n)));
    Ok(())
}

/// Log-softmax of one row: `x - max - ln Σ exp(x - max)`.
pub fn log_softmax(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    dispatch!(log_softmax(x, out));
    Ok(())
}

/// Layer norm of one row, `out = (x − mean)·rstd·gamma + beta` with the biased variance and
/// `rstd = 1/sqrt(var + eps)`; `gamma`/`beta` default to 1 and 0. Returns `(mean, rstd)`.
/// An empty row returns `(0, NaN)` like ATen's statistics of zero elements.
pub fn layer_norm(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> Result<(f32, f32), KernelError> {
    same(x.len(), out.len())?;
    if let Some(g) = gamma {
        same(g.len(), x.len())?;
    }
    if let Some(b) = beta {
        same(b.len(), x.len())?;
    }
    if x.is_empty() {
        return Ok((0.0, f32::NAN));
    }
    Ok(dispatch!(layer_norm(x, gamma, beta, eps, out)))
}

/// [`layer_norm`] of each `n`-element row of `x` into the same row of `out`, its mean and
/// rstd into `mean[r]` and `rstd[r]`, on this core: the lengths are checked once for all the
/// rows (`x` and `out` hold `rows·n`, `mean` and `rstd` `rows`, `gamma`/`beta` `n`), not
/// per row.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_rows(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    n: usize,
    out: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
) -> Res {
    let rows = mean.len();
    same(rstd.len(), rows)?;
    let total = rows.checked_mul(n).ok_or_else(mismatch)?;
    same(x.len(), total)?;
    same(out.len(), total)?;
    for v in [gamma, beta].into_iter().flatten() {
        same(v.len(), n)?;
    }
    if n == 0 {
        mean.fill(0.0);
        rstd.fill(f32::NAN);
        return Ok(());
    }
    let rows_of = x.chunks_exact(n).zip(out.chunks_exact_mut(n));
    for ((xr, or), (m, r)) in rows_of.zip(mean.iter_mut().zip(rstd.iter_mut())) {
        (*m, *r) = dispatch!(layer_norm(xr, gamma, beta, eps, or));
    }
    Ok(())
}

/// `out[i] = a[i] op b[i]`.
pub fn binary(op: BinOp, a: &[f32], b: &[f32], out: &mut [f32]) -> Res {
    same(a.len(), out.len())?;
    same(b.len(), out.len())?;
    crate::parallel::for_chunks(out, CHUNK, CHUNK * ELEMENT_OP, |u, o, _| {
        let r = u * CHUNK..u * CHUNK + o.len();
        dispatch!(binary(op, &a[r.clone()], &b[r], o))
    });
    Ok(())
}

/// [`binary`] on this core over the common prefix of the slices (no split across cores, no
/// length check): for callers that split the work themselves.
pub fn binary_here(op: BinOp, a: &[f32], b: &[f32], out: &mut [f32]) {
    dispatch!(binary(op, a, b, out))
}

/// [`binary_scalar`] on this core over the common prefix (see [`binary_here`]).
pub fn binary_scalar_here(op: BinOp, a: &[f32], s: f32, out: &mut [f32]) {
    dispatch!(binary_scalar(op, a, s, out))
}

/// [`scalar_binary`] on this core over the common prefix (see [`binary_here`]).
pub fn scalar_binary_here(op: BinOp, s: f32, b: &[f32], out: &mut [f32]) {
    dispatch!(scalar_binary(op, s, b, out))
}

/// `out[i] = a[i] op s`.
pub fn binary_scalar(op: BinOp, a: &[f32], s: f32, out: &mut [f32]) -> Res {
    same(a.len(), out.len())?;
    map(a, out, ELEMENT_OP, |a, o| {
        dispatch!(binary_scalar(op, a, s, o))
    });
    Ok(())
}

/// `out[i] = s op b[i]`.
pub fn scalar_binary(op: BinOp, s: f32, b: &[f32], out: &mut [f32]) -> Res {
    same(b.len(), out.len())?;
    map(b, out, ELEMENT_OP, |b, o| {
        dispatch!(scalar_binary(op, s, b, o))
    });
    Ok(())
}

/// Row broadcast: `a` is `[rows, n]`, `row` is `[n]`: `out[r][j] = a[r][j] op row[j]`.
pub fn binary_row(op: BinOp, a: &[f32], row: &[f32], out: &mut [f32]) -> Res {
    same(a.len(), out.len())?;
    if row.is_empty() {
        return same(a.len(), 0);
    }
    if !a.len().is_multiple_of(row.len()) {
        return Err(mismatch());
    }
    for_row_pieces(out, row.len(), ELEMENT_OP, |at, r0, o| {
        let n = o.len();
        if let (Some(x), Some(r)) = (a.get(at..at + n), row.get(r0..r0 + n)) {
            dispatch!(binary(op, x, r, o));
        }
    });
    Ok(())
}

/// Row broadcast on the left: `out[r][j] = row[j] op b[r][j]`.
pub fn row_binary(op: BinOp, row: &[f32], b: &[f32], out: &mut [f32]) -> Res {
    same(b.len(), out.len())?;
    if row.is_empty() {
        return same(b.len(), 0);
    }
    if !b.len().is_multiple_of(row.len()) {
        return Err(mismatch());
    }
    for_row_pieces(out, row.len(), ELEMENT_OP, |at, r0, o| {
        let n = o.len();
        if let (Some(r), Some(y)) = (row.get(r0..r0 + n), b.get(at..at + n)) {
            dispatch!(binary(op, r, y, o));
        }
    });
    Ok(())
}

/// Column broadcast: `a` is `[rows, n]`, `col` is `[rows]` (a `[rows, 1]` tensor):
/// `out[r][j] = a[r][j] op col[r]`.
pub fn binary_col(op: BinOp, a: &[f32], col: &[f32], out: &mut [f32]) -> Res {
    same(a.len(), out.len())?;
    if col.is_empty() {
        return same(a.len(), 0);
    }
    if !a.len().is_multiple_of(col.len()) {
        return Err(mismatch());
    }
    let n = a.len() / col.len();
    if n == 0 {
        return Ok(());
    }
    crate::parallel::for_chunks(out, n, n * ELEMENT_OP, |r0, out, _| {
        let a = &a[r0 * n..r0 * n + out.len()];
        for ((o, x), &c) in out
            .chunks_exact_mut(n)
            .zip(a.chunks_exact(n))
            .zip(&col[r0..])
        {
            dispatch!(binary_scalar(op, x, c, o));
        }
    });
    Ok(())
}

/// `out[i] = x[i]^e`. Exponents 0, ±0.5, ±1, 2, 3, 4 and other integers up to ±8 are
/// computed with multiplies (and one `sqrt`/division); any other exponent calls `powf` per
/// element. Integer powers by multiplication differ from a correctly rounded `pow` by a few
/// roundings: relative error ≤ 1e-6 (2 ulp for `x³`).
pub fn pow_scalar(x: &[f32], e: f32, out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    map(x, out, 2, |x, o| generic::pow_scalar(x, e, o));
    Ok(())
}

/// `out = x`, split across cores when long (a copy costs well under one instruction per
/// element, so only large copies split).
pub fn copy(x: &[f32], out: &mut [f32]) -> Res {
    same(x.len(), out.len())?;
    crate::parallel::for_chunks(out, 1024, 256, |u, o, _| {
        o.copy_from_slice(&x[u * 1024..u * 1024 + o.len()])
    });
    Ok(())
}

/// Copies `rows` runs of `run` elements from `src` to `out`: run `i` reads
/// `src[i·src_stride ..]` and writes `out[i·out_stride ..]`, so
/// `out[i·out_stride + j] = src[i·src_stride + j]` for `j < run`. The strided copy at the
/// bottom of permutes (gather: `out_stride = run`), concatenations (scatter: `src_stride =
/// run`), slices and broadcasts (`src_stride = 0`: one run repeated): their walkers call it
/// once per block of rows instead of once per run. Elements of `out` between runs are left
/// as they are.
///
/// Layout contract, when `rows > 0` and `run > 0`: `src` holds at least
/// `(rows − 1)·src_stride + run` elements, `out` at least `(rows − 1)·out_stride + run`, and
/// `out_stride ≥ run` when `rows > 1` (runs written do not overlap). Otherwise a shape error,
/// nothing written.
pub fn copy_rows<T: Copy>(
    src: &[T],
    src_stride: usize,
    out: &mut [T],
    out_stride: usize,
    run: usize,
    rows: usize,
) -> Res {
    if rows == 0 || run == 0 {
        return Ok(());
    }
    let span = |stride: usize| {
        (rows - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(run))
            .ok_or_else(mismatch)
    };
    if src.len() < span(src_stride)? || out.len() < span(out_stride)? {
        return Err(mismatch());
    }
    if rows > 1 && out_stride < run {
        return Err(mismatch());
    }
    let (s, o) = (src.as_ptr(), out.as_mut_ptr());
    // SAFETY: row i reads src[i·src_stride ..][..run] and writes out[i·out_stride ..][..run],
    // inside both slices by the span checks above; the rows written do not overlap
    // (out_stride ≥ run) and `src` and `out` are distinct borrows.
    unsafe {
        match run {
            // The run lengths of attention heads and their halves: one fixed-size move per
            // row (paired vector loads and stores, no per-row length logic).
            4 => rows_of::<T, 4>(s, src_stride, o, out_stride, rows),
            8 => rows_of::<T, 8>(s, src_stride, o, out_stride, rows),
            16 => rows_of::<T, 16>(s, src_stride, o, out_stride, rows),
            32 => rows_of::<T, 32>(s, src_stride, o, out_stride, rows),
            _ => {
                for i in 0..rows {
                    copy_raw(s.add(i * src_stride), o.add(i * out_stride), run);
                }
            }
        }
    }
    Ok(())
}

/// [`copy_rows`] for runs of exactly `N` elements.
///
/// # Safety
/// As [`copy_rows`]' contract with `run = N`, checked by the caller.
#[inline(always)]
unsafe fn rows_of<T: Copy, const N: usize>(
    s: *const T,
    ss: usize,
    o: *mut T,
    os: usize,
    rows: usize,
) {
    for i in 0..rows {
        // SAFETY: row i < rows lies inside both buffers (caller); `[T; N]` has T's alignment.
        unsafe {
            let v = (s.add(i * ss) as *const [T; N]).read();
            (o.add(i * os) as *mut [T; N]).write(v);
        }
    }
}

/// Fills `out` with `v`.
pub fn fill<T: Copy>(out: &mut [T], v: T) {
    out.fill(v);
}

/// `out[i] = if cond[i] != 0 { a[i] } else { b[i] }`.
pub fn where_select<T: Copy>(cond: &[u8], a: &[T], b: &[T], out: &mut [T]) -> Res {
    same(cond.len(), out.len())?;
    same(a.len(), out.len())?;
    same(b.len(), out.len())?;
    for (((o, &c), &x), &y) in out.iter_mut().zip(cond).zip(a).zip(b) {
        *o = if c != 0 { x } else { y };
    }
    Ok(())
}

/// `where` with both values broadcast scalars: `out[i] = if cond[i] != 0 { a } else { b }`.
pub fn where_scalars<T: Copy>(cond: &[u8], a: T, b: T, out: &mut [T]) -> Res {
    same(cond.len(), out.len())?;
    for (o, &c) in out.iter_mut().zip(cond) {
        *o = if c != 0 { a } else { b };
    }
    Ok(())
}

#[inline(always)]
fn cmp<T: PartialOrd>(op: CmpOp, x: T, y: T) -> bool {
    match op {
        CmpOp::Eq => x == y,
        CmpOp::Ne => x != y,
        CmpOp::Lt => x < y,
        CmpOp::Le => x <= y,
        CmpOp::Gt => x > y,
        CmpOp::Ge => x >= y,
    }
}

macro_rules! per_cmp {
    ($op:expr, $f:ident ! ($($args:tt)*)) => {
        match $op {
            CmpOp::Eq => $f!(CmpOp::Eq, $($args)*),
            CmpOp::Ne => $f!(CmpOp::Ne, $($args)*),
            CmpOp::Lt => $f!(CmpOp::Lt, $($args)*),
            CmpOp::Le => $f!(CmpOp::Le, $($args)*),
            CmpOp::Gt => $f!(CmpOp::Gt, $($args)*),
            CmpOp::Ge => $f!(CmpOp::Ge, $($args)*),
        }
    };
}

/// `out[i] = (a[i] op b[i]) as u8`.
pub fn compare<T: PartialOrd + Copy>(op: CmpOp, a: &[T], b: &[T], out: &mut [u8]) -> Res {
    same(a.len(), out.len())?;
    same(b.len(), out.len())?;
    macro_rules! go {
        ($k:expr,) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = cmp($k, x, y) as u8;
            }
        };
    }
    per_cmp!(op, go!());
    Ok(())
}

/// `out[i] = (a[i] op s) as u8`.
pub fn compare_scalar<T: PartialOrd + Copy>(op: CmpOp, a: &[T], s: T, out: &mut [u8]) -> Res {
    same(a.len(), out.len())?;
    macro_rules! go {
        ($k:expr,) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = cmp($k, x, s) as u8;
            }
        };
    }
    per_cmp!(op, go!());
    Ok(())
}

/// Is any byte non-zero?
pub fn any(x: &[u8]) -> bool {
    x.chunks(64)
        .any(|c| c.iter().fold(0u8, |acc, &v| acc | v) != 0)
}

/// Are all bytes non-zero?
pub fn all(x: &[u8]) -> bool {
    x.chunks(64)
        .all(|c| c.iter().fold(1u8, |acc, &v| acc & (v != 0) as u8) != 0)
}

/// `out[i] = (x[i] == 0) as u8`.
pub fn logical_not(x: &[u8], out: &mut [u8]) -> Res {
    same(x.len(), out.len())?;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v == 0) as u8;
    }
    Ok(())
}

/// Transpose of 4-byte elements: `dst[i·dst_stride + j] = src[j·src_stride + i]` for
/// `i < rows`, `j < cols` (bits copied unchanged). Fails if either slice is too short.
pub fn transpose32(
    src: &[f32],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    rows: usize,
    cols: usize,
) -> Res {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let need = |stride: usize, outer: usize, inner: usize| {
        (outer - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(inner))
    };
    match (need(src_stride, cols, rows), need(dst_stride, rows, cols)) {
        (Some(s), Some(d)) if s <= src.len() && d <= dst.len() => {}
        _ => return Err(mismatch()),
    }
    if rows > 1 && src_stride < rows || cols > 1 && dst_stride < cols {
        // Overlapping rows would make the vector path's reads/writes differ; still valid
        // (bounds hold), done element by element.
        generic::transpose32(src, src_stride, dst, dst_stride, rows, cols);
        return Ok(());
    }
    dispatch!(transpose32(src, src_stride, dst, dst_stride, rows, cols));
    Ok(())
}

#[cfg(test)]
mod tests;
