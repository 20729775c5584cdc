//! Plain-Rust twins of the slice kernels (no length checks: they work on the common prefix;
//! the public wrappers in [`super`] check), and the polynomial constants every back end
//! shares. Written branch-free so LLVM vectorises them.

use super::op::BinOp;

pub(crate) const LN2_HI: f32 = 0.693_145_75;
pub(crate) const LN2_LO: f32 = 1.428_606_8e-6;
pub(crate) const LOG2E: f32 = core::f32::consts::LOG2_E;
/// ln(FLT_MAX): above this exp overflows.
pub(crate) const EXP_HI: f32 = 88.722_84;
/// ln(FLT_MIN): below this exp is flushed to 0.
pub(crate) const EXP_LO: f32 = -87.336_54;
/// 1.5·2^23: adding it rounds to an integer held in the low mantissa bits.
pub(crate) const MAGIC: f32 = 12_582_912.0;
/// Taylor coefficients of e^r from r^7 down to r^2.
pub(crate) const EXP_C: [f32; 6] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];
/// tanh(x) rounds to ±1 in f32 beyond this |x|.
pub(crate) const TANH_CAP: f32 = 9.0;
pub(crate) const GELU_K: f32 = 0.797_884_6; // sqrt(2/pi)
pub(crate) const GELU_C: f32 = 0.044_715;
const SIGN: u32 = 0x8000_0000;
/// π/2 in three parts for the sin/cos argument reduction: the first two have at most 8 and 11
/// significant bits, so `n·PIO2_1` and `n·PIO2_2` are exact for |n| < 4096.
pub(crate) const PIO2_1: f32 = 1.570_312_5;
pub(crate) const PIO2_2: f32 = 4.837_513e-4;
pub(crate) const PIO2_3: f32 = 7.549_79e-8;
pub(crate) const FRAC_2_PI: f32 = core::f32::consts::FRAC_2_PI;
/// Largest |x| the reduction serves (`round(x·2/π)` < 4096); beyond it, and for NaN and
/// infinities, sin and cos go to libm.
pub(crate) const SINCOS_MAX: f32 = 6400.0;
/// sin(r) ≈ r + r·z·(S1 + z·(S2 + z·S3)), z = r², on |r| ≤ π/4 (Cephes `sinf`).
pub(crate) const SIN_C: [f32; 3] = [-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1];
/// cos(r) ≈ 1 − z/2 + z²·(C1 + z·(C2 + z·C3)) on |r| ≤ π/4 (Cephes `cosf`).
pub(crate) const COS_C: [f32; 3] = [2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2];

#[inline(always)]
fn abs(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & !SIGN)
}

/// Scalar polynomial `exp` (the formula every back end uses).
#[inline(always)]
pub fn exp1(x: f32) -> f32 {
    let xc = x.clamp(EXP_LO, EXP_HI);
    // n = round(x·log2 e), at most 127 so that 2^n stays a normal number.
    let t = (xc * LOG2E + MAGIC).min(MAGIC + 127.0);
    let n = t - MAGIC;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = EXP_C[0];
    for &c in &EXP_C[1..] {
        p = p * r + c;
    }
    p = p * r + 1.0;
    p = p * r + 1.0;
    // The low bits of t hold n (two's complement); shift it into the exponent field.
    let scale = f32::from_bits((t.to_bits() << 23).wrapping_add(127 << 23));
    let y = p * scale;
    let y = if x > EXP_HI { f32::INFINITY } else { y };
    let y = if x < EXP_LO { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// Scalar `tanh`: `e/(e + 2)` with `e = expm1(2|x|)` (|x| capped at 9, where tanh rounds
/// to 1), sign restored. `expm1(y) = 2^n·(e^r − 1) + (2^n − 1)` keeps full relative
/// accuracy near 0, so no separate small-argument polynomial is needed.
#[inline(always)]
pub fn tanh1(x: f32) -> f32 {
    let a = abs(x);
    // NaN > 9 is false, so NaN passes through.
    let a = if a > TANH_CAP { TANH_CAP } else { a };
    let y = a + a;
    let t = y * LOG2E + MAGIC;
    let n = t - MAGIC;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let mut p = EXP_C[0];
    for &c in &EXP_C[1..] {
        p = p * r + c;
    }
    p = p * r + 1.0;
    let scale = f32::from_bits((t.to_bits() << 23).wrapping_add(127 << 23));
    let e = scale * (p * r) + (scale - 1.0);
    let th = e / (e + 2.0);
    f32::from_bits(th.to_bits() | (x.to_bits() & SIGN))
}

/// Scalar sigmoid: `e = exp(−|x|)`, `1/(1 + e)` for `x ≥ 0`, `e/(1 + e)` below (no overflow
/// on either side; NaN passes through).
#[inline(always)]
pub fn sigmoid1(x: f32) -> f32 {
    let e = exp1(-abs(x));
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

#[inline(always)]
pub fn gelu_tanh1(x: f32) -> f32 {
    let u = GELU_K * (x + GELU_C * x * x * x);
    x / (1.0 + exp1(-2.0 * u))
}

/// erf(z) = z·P(z²)/Q(z²) on |z| ≤ [`ERF_ZMAX`]: a rational least-squares fit of degree 5 over
/// 5 in z², weighted towards the largest error (`scripts/fit-erf.py`; absolute error of erf
/// below 3.5e-7 in f32 arithmetic, 1.6e-8 in exact arithmetic). Beyond `ERF_ZMAX` erf is ±1
/// (erf(3.92) differs from 1 by 3.0e-8, half the f32 step of 6e-8 below 1).
pub(crate) const ERF_ZMAX: f32 = 3.92;
/// `P`, highest degree first.
pub(crate) const ERF_P: [f32; 6] = [
    2.034_736_3e-6,
    2.874_796_3e-4,
    3.868_332e-3,
    5.306_049_4e-2,
    1.927_641_5e-1,
    core::f32::consts::FRAC_2_SQRT_PI,
];
/// `Q`, highest degree first (constant term 1).
pub(crate) const ERF_Q: [f32; 6] = [
    3.807_067e-5,
    1.188_116_5e-3,
    1.517_230_5e-2,
    1.150_846_6e-1,
    5.041_644_6e-1,
    1.0,
];

/// `½x·(1 + erf(x/√2))` with the rational erf of [`ERF_P`]/[`ERF_Q`]: absolute error below
/// 1e-6·max(1, |GELU(x)|); exactly `x` and 0 beyond |x| = √2·`ERF_ZMAX` ≈ 5.54, NaN for NaN.
#[inline(always)]
pub fn gelu_erf1(x: f32) -> f32 {
    let z = x * core::f32::consts::FRAC_1_SQRT_2;
    let zc = z.clamp(-ERF_ZMAX, ERF_ZMAX);
    let w = zc * zc;
    let mut p = ERF_P[0];
    let mut q = ERF_Q[0];
    for k in 1..6 {
        p = p * w + ERF_P[k];
        q = q * w + ERF_Q[k];
    }
    let erf = if abs(z) >= ERF_ZMAX {
        if z > 0.0 {
            1.0
        } else {
            -1.0
        }
    } else {
        zc * p / q
    };
    let h = 0.5 * x;
    let y = h + h * erf;
    if x.is_nan() {
        x
    } else {
        y
    }
}

fn map(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

pub fn exp(x: &[f32], out: &mut [f32]) {
    map(x, out, exp1)
}
pub fn tanh(x: &[f32], out: &mut [f32]) {
    map(x, out, tanh1)
}
pub fn sigmoid(x: &[f32], out: &mut [f32]) {
    map(x, out, sigmoid1)
}
pub fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    map(x, out, gelu_tanh1)
}
pub fn gelu_erf(x: &[f32], out: &mut [f32]) {
    map(x, out, gelu_erf1)
}
pub fn sin(x: &[f32], out: &mut [f32]) {
    map(x, out, sin1)
}
pub fn cos(x: &[f32], out: &mut [f32]) {
    map(x, out, cos1)
}

/// sin(x) (see [`sincos1`]).
pub fn sin1(x: f32) -> f32 {
    sincos1(x, 0)
}

/// cos(x) = sin(x + π/2) (see [`sincos1`]).
pub fn cos1(x: f32) -> f32 {
    sincos1(x, 1)
}

/// sin(x) for `quarter` 0, cos(x) for 1: `n = round(x·2/π)`, `r = x − n·π/2` (three-part
/// Cody–Waite), then by the quadrant `(n + quarter) mod 4` one of sin r, cos r, −sin r,
/// −cos r. |x| beyond [`SINCOS_MAX`], NaN and infinities go to libm.
pub fn sincos1(x: f32, quarter: u32) -> f32 {
    // False for NaN too.
    let reducible = abs(x) <= SINCOS_MAX;
    if !reducible {
        return if quarter == 0 {
            libm::sinf(x)
        } else {
            libm::cosf(x)
        };
    }
    let t = x * FRAC_2_PI + MAGIC;
    let n = t - MAGIC;
    // MAGIC's low mantissa bits are 0, so t's hold n (two's complement for n < 0).
    let q = t.to_bits().wrapping_add(quarter);
    let r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3;
    let z = r * r;
    let s = r + r * z * (SIN_C[2] + z * (SIN_C[1] + z * SIN_C[0]));
    let c = 1.0 - 0.5 * z + z * z * (COS_C[2] + z * (COS_C[1] + z * COS_C[0]));
    let y = if q & 1 == 0 { s } else { c };
    f32::from_bits(y.to_bits() ^ ((q & 2) << 30))
}
pub fn relu(x: &[f32], out: &mut [f32]) {
    map(x, out, |v| if v > 0.0 || v.is_nan() { v } else { 0.0 })
}

#[inline(always)]
pub(crate) fn minimum(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x < y {
        x
    } else {
        y
    }
}
#[inline(always)]
pub(crate) fn maximum(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else if x > y {
        x
    } else {
        y
    }
}

macro_rules! per_op {
    ($op:expr, $go:ident) => {
        match $op {
            BinOp::Add => $go!(|x: f32, y: f32| x + y),
            BinOp::Sub => $go!(|x: f32, y: f32| x - y),
            BinOp::Mul => $go!(|x: f32, y: f32| x * y),
            BinOp::Div => $go!(|x: f32, y: f32| x / y),
            BinOp::Min => $go!(minimum),
            BinOp::Max => $go!(maximum),
        }
    };
}

pub fn binary(op: BinOp, a: &[f32], b: &[f32], out: &mut [f32]) {
    macro_rules! go {
        ($f:expr) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = $f(x, y);
            }
        };
    }
    per_op!(op, go)
}

pub fn binary_scalar(op: BinOp, a: &[f32], s: f32, out: &mut [f32]) {
    macro_rules! go {
        ($f:expr) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = $f(x, s);
            }
        };
    }
    per_op!(op, go)
}

pub fn scalar_binary(op: BinOp, s: f32, b: &[f32], out: &mut [f32]) {
    macro_rules! go {
        ($f:expr) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = $f(s, y);
            }
        };
    }
    per_op!(op, go)
}

pub fn pow_scalar(x: &[f32], e: f32, out: &mut [f32]) {
    let ei = e as i32;
    if e == 0.0 {
        out.fill(1.0);
    } else if e == 1.0 {
        map(x, out, |v| v);
    } else if e == 2.0 {
        map(x, out, |v| v * v);
    } else if e == 3.0 {
        map(x, out, |v| v * v * v);
    } else if e == 4.0 {
        map(x, out, |v| {
            let s = v * v;
            s * s
        });
    } else if e == 0.5 {
        map(x, out, libm::sqrtf);
    } else if e == -0.5 {
        map(x, out, |v| 1.0 / libm::sqrtf(v));
    } else if e == -1.0 {
        map(x, out, |v| 1.0 / v);
    } else if ei as f32 == e && (-8..=8).contains(&ei) {
        let n = ei.unsigned_abs();
        map(x, out, |v| {
            let (mut base, mut k, mut acc) = (v, n, 1.0f32);
            while k > 0 {
                if k & 1 == 1 {
                    acc *= base;
                }
                base *= base;
                k >>= 1;
            }
            if ei < 0 {
                1.0 / acc
            } else {
                acc
            }
        });
    } else {
        map(x, out, |v| libm::powf(v, e));
    }
}

/// Minimum of `x` (NaNs skipped), +∞ for an empty slice.
pub(super) fn min_of(x: &[f32]) -> f32 {
    x.iter()
        .fold(f32::INFINITY, |a, &v| if v < a { v } else { a })
}

fn max_of(x: &[f32]) -> f32 {
    let mut m = [f32::NEG_INFINITY; 8];
    let mut ch = x.chunks_exact(8);
    for c in &mut ch {
        for l in 0..8 {
            m[l] = if c[l] > m[l] { c[l] } else { m[l] };
        }
    }
    let mut mx = f32::NEG_INFINITY;
    for &v in m.iter().chain(ch.remainder()) {
        mx = if v > mx { v } else { mx };
    }
    mx
}

/// Sum with 8 partial accumulators (vectorisable).
pub fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ch = x.chunks_exact(8);
    for c in &mut ch {
        for l in 0..8 {
            acc[l] += c[l];
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for &v in ch.remainder() {
        s += v;
    }
    s
}

/// Writes `exp(x - mx)` and returns the sum (NaNs propagate into the sum).
fn exp_shifted(x: &[f32], mx: f32, out: &mut [f32]) -> f32 {
    exp_shifted_scaled(x, mx, 1.0, out)
}

/// `out = exp(s·(x − mx))`, returning the sum (`s = 1`: [`exp_shifted`]).
fn exp_shifted_scaled(x: &[f32], mx: f32, s: f32, out: &mut [f32]) -> f32 {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = exp1(if s == 1.0 { v - mx } else { (v - mx) * s });
    }
    sum(out)
}

pub fn softmax(x: &[f32], out: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let mx = max_of(x);
    let inv = 1.0 / exp_shifted(x, mx, out);
    for o in out.iter_mut() {
        *o *= inv;
    }
}

pub fn softmax_rows(x: &[f32], out: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        softmax(xr, or);
    }
}

/// Softmax of `s·x` over rows of `n` (`s` finite): `exp(s·(x − m))` normalised, `m` the
/// row maximum of `x` for `s ≥ 0` and its minimum below (the maximum of `s·x` either way).
pub fn softmax_rows_scaled(x: &[f32], out: &mut [f32], n: usize, s: f32) {
    if n == 0 {
        return;
    }
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        if xr.is_empty() {
            continue;
        }
        let m = if s < 0.0 { min_of(xr) } else { max_of(xr) };
        let inv = 1.0 / exp_shifted_scaled(xr, m, s, or);
        for o in or.iter_mut() {
            *o *= inv;
        }
    }
}

pub fn log_softmax(x: &[f32], out: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let mx = max_of(x);
    let shift = mx + libm::logf(exp_shifted(x, mx, out));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v - shift;
    }
}

pub fn layer_norm(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = sum(x) / n;
    let mut acc = [0.0f32; 8];
    let mut ch = x.chunks_exact(8);
    for c in &mut ch {
        for l in 0..8 {
            let d = c[l] - mean;
            acc[l] += d * d;
        }
    }
    let mut var = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for &v in ch.remainder() {
        var += (v - mean) * (v - mean);
    }
    let rstd = 1.0 / libm::sqrtf(var / n + eps);
    match (gamma, beta) {
        (Some(g), Some(b)) => {
            for (((o, &v), &g), &b) in out.iter_mut().zip(x).zip(g).zip(b) {
                *o = (v - mean) * rstd * g + b;
            }
        }
        (Some(g), None) => {
            for ((o, &v), &g) in out.iter_mut().zip(x).zip(g) {
                *o = (v - mean) * rstd * g;
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &b) in out.iter_mut().zip(x).zip(b) {
                *o = (v - mean) * rstd + b;
            }
        }
        (None, None) => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = (v - mean) * rstd;
            }
        }
    }
    (mean, rstd)
}

/// See [`super::transpose32`] (bounds already checked by the caller; out-of-range
/// elements are skipped, never read).
pub fn transpose32(
    src: &[f32],
    src_stride: usize,
    dst: &mut [f32],
    dst_stride: usize,
    rows: usize,
    cols: usize,
) {
    const T: usize = 8;
    for i0 in (0..rows).step_by(T) {
        let i1 = (i0 + T).min(rows);
        for j0 in (0..cols).step_by(T) {
            let j1 = (j0 + T).min(cols);
            for i in i0..i1 {
                let Some(at) = i.checked_mul(dst_stride) else {
                    return;
                };
                let Some(drow) = dst.get_mut(at..at.saturating_add(j1)) else {
                    return;
                };
                for (j, d) in drow.iter_mut().enumerate().skip(j0) {
                    let k = j.checked_mul(src_stride).and_then(|v| v.checked_add(i));
                    if let Some(&v) = k.and_then(|k| src.get(k)) {
                        *d = v;
                    }
                }
            }
        }
    }
}
