//! Neon back end of [`super`] (`linalg::vecmath`): polynomial `exp`, `tanh`, `sigmoid`, tanh-
//! and erf-GELU, softmax / log-softmax / layer-norm rows and 4×4-block and plane-interleaving
//! transposes. Called through the
//! checked wrappers in `linalg::vecmath` (which own the accuracy contract and the tests); these
//! functions work on the common prefix of their slices and never read or write past any
//! slice. Four lanes at a time with `core::arch::aarch64` intrinsics, tails with the generic
//! scalar formula (the same formula; only FMA contraction differs).

use core::arch::aarch64::*;

use super::generic::{
    self as g, ERF_P, ERF_Q, ERF_ZMAX, EXP_C, EXP_HI, EXP_LO, GELU_C, GELU_K, LN2_HI, LN2_LO,
    LOG2E, MAGIC, TANH_CAP,
};
use super::op::BinOp;

/// Four-lane `exp` (formula of `generic::exp1`).
#[inline(always)]
fn exp4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let nan = vmvnq_u32(vceqq_f32(x, x));
        let over = vcgtq_f32(x, vdupq_n_f32(EXP_HI));
        let under = vcltq_f32(x, vdupq_n_f32(EXP_LO));
        let xc = vminq_f32(vmaxq_f32(x, vdupq_n_f32(EXP_LO)), vdupq_n_f32(EXP_HI));
        let n = vminq_f32(vrndnq_f32(vmulq_n_f32(xc, LOG2E)), vdupq_n_f32(127.0));
        let r = vfmsq_f32(
            vfmsq_f32(xc, n, vdupq_n_f32(LN2_HI)),
            n,
            vdupq_n_f32(LN2_LO),
        );
        let mut p = vdupq_n_f32(EXP_C[0]);
        for &c in &EXP_C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, r);
        }
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        let e = vshlq_n_s32::<23>(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)));
        let mut y = vmulq_f32(p, vreinterpretq_f32_s32(e));
        y = vbslq_f32(over, vdupq_n_f32(f32::INFINITY), y);
        y = vbslq_f32(under, vdupq_n_f32(0.0), y);
        vbslq_f32(nan, x, y)
    }
}

/// Four-lane `exp` for arguments below 88 (so that `2^n` is a normal number without a cap):
/// the formula of `generic::exp1` without its overflow, cap and NaN selections. `n` comes from
/// one FMA with a magic constant whose low mantissa bits then hold `n + 127`, which a shift
/// moves into the exponent field; lanes below `EXP_LO` (also −∞) are cleared, a NaN lane stays
/// NaN through the arithmetic. About two thirds of [`exp4`]'s instructions. Used where the
/// argument cannot exceed 0 (softmax's `x − max`, sigmoid's `−|x|`, the erf-GELU's exponent).
#[inline(always)]
fn exp_lo4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let t = vfmaq_f32(vdupq_n_f32(MAGIC + 127.0), x, vdupq_n_f32(LOG2E));
        let n = vsubq_f32(t, vdupq_n_f32(MAGIC + 127.0));
        let r = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(LN2_HI)), n, vdupq_n_f32(LN2_LO));
        let mut p = vdupq_n_f32(EXP_C[0]);
        for &c in &EXP_C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, r);
        }
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        let scale = vshlq_n_u32::<23>(vreinterpretq_u32_f32(t));
        let y = vmulq_f32(p, vreinterpretq_f32_u32(scale));
        let under = vcltq_f32(x, vdupq_n_f32(EXP_LO));
        vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under))
    }
}

/// Four-lane `tanh` (formula of `generic::tanh1`; `vminq` propagates NaN).
#[inline(always)]
fn tanh4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let a = vminq_f32(vabsq_f32(x), vdupq_n_f32(TANH_CAP));
        let y = vaddq_f32(a, a);
        let n = vrndnq_f32(vmulq_n_f32(y, LOG2E));
        let r = vfmsq_f32(vfmsq_f32(y, n, vdupq_n_f32(LN2_HI)), n, vdupq_n_f32(LN2_LO));
        let mut p = vdupq_n_f32(EXP_C[0]);
        for &c in &EXP_C[1..] {
            p = vfmaq_f32(vdupq_n_f32(c), p, r);
        }
        p = vfmaq_f32(vdupq_n_f32(1.0), p, r);
        let scale = vreinterpretq_f32_s32(vshlq_n_s32::<23>(vaddq_s32(
            vcvtq_s32_f32(n),
            vdupq_n_s32(127),
        )));
        let e = vfmaq_f32(vsubq_f32(scale, vdupq_n_f32(1.0)), scale, vmulq_f32(p, r));
        let th = vdivq_f32(e, vaddq_f32(e, vdupq_n_f32(2.0)));
        let sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x8000_0000));
        vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(th), sign))
    }
}

/// Four-lane sigmoid (formula of `generic::sigmoid1`): `e = exp(−|x|) ≤ 1`, then `1/(1 + e)`
/// for `x ≥ 0` and `e/(1 + e)` below, so the exponential never overflows.
#[inline(always)]
fn sigmoid4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let e = exp_lo4(vnegq_f32(vabsq_f32(x)));
        let num = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0)), e, vdupq_n_f32(1.0));
        vdivq_f32(num, vaddq_f32(vdupq_n_f32(1.0), e))
    }
}

#[inline(always)]
fn gelu_tanh4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let x3 = vmulq_f32(vmulq_f32(x, x), x);
        let u = vmulq_n_f32(vfmaq_n_f32(x, x3, GELU_C), GELU_K);
        let e = exp4(vmulq_n_f32(u, -2.0));
        vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0), e))
    }
}

/// Four-lane erf-GELU (formula of `generic::gelu_erf1`): `h + h·erf(x/√2)`, `h = ½x`, with
/// erf as a rational function of the clamped argument and ±1 beyond the clamp.
#[inline(always)]
fn gelu_erf4(x: float32x4_t) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; pure register arithmetic.
    unsafe {
        let z = vmulq_n_f32(x, core::f32::consts::FRAC_1_SQRT_2);
        // FMIN/FMAX keep a NaN lane NaN.
        let zc = vmaxq_f32(vminq_f32(z, vdupq_n_f32(ERF_ZMAX)), vdupq_n_f32(-ERF_ZMAX));
        let w = vmulq_f32(zc, zc);
        // Estrin's scheme: P = (c5 + c4·w) + w²·((c3 + c2·w) + w²·(c1 + c0·w)) (c0 the
        // highest degree), Q alike: 8 instructions each against Horner's 10 (every Horner
        // step needs its constant copied into the accumulator first).
        let w2 = vmulq_f32(w, w);
        let estrin = |c: &[f32; 6]| {
            let hi = vfmaq_f32(vdupq_n_f32(c[1]), vdupq_n_f32(c[0]), w);
            let mid = vfmaq_f32(vdupq_n_f32(c[3]), vdupq_n_f32(c[2]), w);
            let lo = vfmaq_f32(vdupq_n_f32(c[5]), vdupq_n_f32(c[4]), w);
            vfmaq_f32(lo, w2, vfmaq_f32(mid, w2, hi))
        };
        let (p, q) = (estrin(&ERF_P), estrin(&ERF_Q));
        let r = vdivq_f32(vmulq_f32(zc, p), q);
        // ±1 (the sign of z) where |z| ≥ ERF_ZMAX: there zc is ±ERF_ZMAX, and zc / ERF_ZMAX
        // is exactly ±1 (one instruction, where building it from the sign bit takes two).
        let unit = vdivq_f32(zc, vdupq_n_f32(ERF_ZMAX));
        let erf = vbslq_f32(vcageq_f32(z, vdupq_n_f32(ERF_ZMAX)), unit, r);
        let h = vmulq_n_f32(x, 0.5);
        vfmaq_f32(h, h, erf)
    }
}

/// Applies `v` to 4-lane chunks (two a step) and `s` to the tail, `out[i] = f(x[i])`.
#[inline(always)]
fn map1(
    x: &[f32],
    out: &mut [f32],
    v: impl Fn(float32x4_t) -> float32x4_t,
    s: impl Fn(f32) -> f32,
) {
    let n = x.len().min(out.len());
    let mut i = 8 * (n / 8);
    // Whole chunks walked by pointer (no index kept alongside: two adds and a compare less per
    // step than an indexed loop).
    for (xc, oc) in x[..i].chunks_exact(8).zip(out[..i].chunks_exact_mut(8)) {
        // SAFETY: each chunk holds 8 floats.
        unsafe {
            let a = v(vld1q_f32(xc.as_ptr()));
            let b = v(vld1q_f32(xc.as_ptr().add(4)));
            vst1q_f32(oc.as_mut_ptr(), a);
            vst1q_f32(oc.as_mut_ptr().add(4), b);
        }
    }
    if i + 4 <= n {
        // SAFETY: i + 4 ≤ n ≤ both lengths.
        unsafe { vst1q_f32(out.as_mut_ptr().add(i), v(vld1q_f32(x.as_ptr().add(i)))) };
        i += 4;
    }
    for j in i..n {
        out[j] = s(x[j]);
    }
}

pub fn exp(x: &[f32], out: &mut [f32]) {
    map1(x, out, exp4, g::exp1);
}

pub fn tanh(x: &[f32], out: &mut [f32]) {
    map1(x, out, tanh4, g::tanh1);
}

pub fn sigmoid(x: &[f32], out: &mut [f32]) {
    map1(x, out, sigmoid4, g::sigmoid1);
}

pub fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    map1(x, out, gelu_tanh4, g::gelu_tanh1);
}

pub fn gelu_erf(x: &[f32], out: &mut [f32]) {
    map1(x, out, gelu_erf4, g::gelu_erf1);
}

pub fn sin(x: &[f32], out: &mut [f32]) {
    map1(x, out, |v| sincos4(v, 0), g::sin1);
}

pub fn cos(x: &[f32], out: &mut [f32]) {
    map1(x, out, |v| sincos4(v, 1), g::cos1);
}

/// Four lanes of [`g::sincos1`] (same reduction and polynomials, fused multiply-adds); a
/// vector with a lane beyond `SINCOS_MAX`, infinite or NaN goes lane by lane to the scalar.
#[inline(always)]
fn sincos4(x: float32x4_t, quarter: u32) -> float32x4_t {
    // SAFETY: Neon is in the AArch64 baseline; register arithmetic and a stack array.
    unsafe {
        // fmaxv propagates NaN, which fails the comparison.
        let reducible = vmaxvq_f32(vabsq_f32(x)) <= g::SINCOS_MAX;
        if !reducible {
            let mut v = [0f32; 4];
            vst1q_f32(v.as_mut_ptr(), x);
            for e in &mut v {
                *e = g::sincos1(*e, quarter);
            }
            return vld1q_f32(v.as_ptr());
        }
        let t = vfmaq_f32(vdupq_n_f32(g::MAGIC), x, vdupq_n_f32(g::FRAC_2_PI));
        let n = vsubq_f32(t, vdupq_n_f32(g::MAGIC));
        let q = vaddq_u32(vreinterpretq_u32_f32(t), vdupq_n_u32(quarter));
        let mut r = vfmsq_f32(x, n, vdupq_n_f32(g::PIO2_1));
        r = vfmsq_f32(r, n, vdupq_n_f32(g::PIO2_2));
        r = vfmsq_f32(r, n, vdupq_n_f32(g::PIO2_3));
        let z = vmulq_f32(r, r);
        let mut ps = vdupq_n_f32(g::SIN_C[0]);
        let mut pc = vdupq_n_f32(g::COS_C[0]);
        for k in 1..3 {
            ps = vfmaq_f32(vdupq_n_f32(g::SIN_C[k]), ps, z);
            pc = vfmaq_f32(vdupq_n_f32(g::COS_C[k]), pc, z);
        }
        let s = vfmaq_f32(r, vmulq_f32(r, z), ps);
        let c = vfmaq_f32(
            vfmsq_f32(vdupq_n_f32(1.0), z, vdupq_n_f32(0.5)),
            vmulq_f32(z, z),
            pc,
        );
        let y = vbslq_f32(vtstq_u32(q, vdupq_n_u32(1)), c, s);
        let sign = vshlq_n_u32::<30>(vandq_u32(q, vdupq_n_u32(2)));
        vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(y), sign))
    }
}

/// Sum of a slice (two 4-lane partial sums, then the tail).
#[inline(always)]
pub fn sum(x: &[f32]) -> f32 {
    reduce(
        x,
        0.0,
        // SAFETY: Neon is in the AArch64 baseline; register arithmetic.
        |a, v| unsafe { vaddq_f32(a, v) },
        // SAFETY: as above.
        |a| unsafe { vaddvq_f32(a) },
        |s, v| s + v,
    )
}

/// Max of a non-empty slice (NaNs are skipped here and propagate through the exp sum). From
/// eight elements on, the last eight are read as one more (overlapping) step instead of a
/// scalar tail: a maximum does not mind elements counted twice.
#[inline(always)]
fn max(x: &[f32]) -> f32 {
    let n = x.len();
    if n >= 8 {
        // SAFETY: loads at n − 8 ≥ 0 and at i + 8 ≤ n; Neon is in the AArch64 baseline.
        unsafe {
            let p = x.as_ptr();
            let (mut a, mut b) = (vld1q_f32(p.add(n - 8)), vld1q_f32(p.add(n - 4)));
            let mut i = 0;
            while i + 8 <= n {
                a = vmaxnmq_f32(a, vld1q_f32(p.add(i)));
                b = vmaxnmq_f32(b, vld1q_f32(p.add(i + 4)));
                i += 8;
            }
            return vmaxnmvq_f32(vmaxnmq_f32(a, b));
        }
    }
    reduce(
        x,
        f32::NEG_INFINITY,
        // SAFETY: Neon is in the AArch64 baseline; register arithmetic.
        |a, v| unsafe { vmaxnmq_f32(a, v) },
        // SAFETY: as above.
        |a| unsafe { vmaxnmvq_f32(a) },
        |m, v| if v > m { v } else { m },
    )
}

/// A lane reduction of `x` with two accumulators (eight lanes a step, then four): `op` folds a
/// vector into an accumulator (both start as `init` in every lane), `across` reduces the
/// combined accumulator to a scalar, `tail` folds in the last elements one by one.
#[inline(always)]
fn reduce(
    x: &[f32],
    init: f32,
    op: impl Fn(float32x4_t, float32x4_t) -> float32x4_t,
    across: impl Fn(float32x4_t) -> f32,
    tail: impl Fn(f32, f32) -> f32,
) -> f32 {
    let mut i = 0;
    // SAFETY: loads at i + 8 ≤ len and i + 4 ≤ len.
    let mut r = unsafe {
        let (mut a, mut b) = (vdupq_n_f32(init), vdupq_n_f32(init));
        while i + 8 <= x.len() {
            a = op(a, vld1q_f32(x.as_ptr().add(i)));
            b = op(b, vld1q_f32(x.as_ptr().add(i + 4)));
            i += 8;
        }
        if i + 4 <= x.len() {
            a = op(a, vld1q_f32(x.as_ptr().add(i)));
            i += 4;
        }
        across(op(a, b))
    };
    for &v in &x[i..] {
        r = tail(r, v);
    }
    r
}

/// The polynomial of [`exp_shifted`]'s eight-lane loop: `e^r ≈ 1 + r·(1 + r·(c2 + r·(c3 +
/// r·(c4 + r·c5))))` on |r| ≤ ln 2 / 2, coefficients `c5, c4, c3, c2` fitted for the least
/// largest relative error (`scripts/fit-exp.py`: 1.05e-7 in exact arithmetic, 1.6e-7 with f32
/// steps; the degree-7 Taylor polynomial of [`exp_lo4`] gives 5e-9, more than softmax's 1e-6
/// needs).
const EXP5_C: [f32; 4] = [0.008_312_522, 0.041_890_16, 0.166_671_14, 0.499_992_3];

/// [`exp_shifted`]'s constants in three vectors, read by lane (`fmla … v.s[i]`, `dup`):
/// `MAGIC + 127` (`t = magic + d·log2 e` holds `n + 127` in its low mantissa bits), `log2 e`,
/// `ln 2` in two parts; [`EXP5_C`]; 1 and `EXP_LO`.
#[repr(C, align(16))]
struct ExpLanes([f32; 12]);

static EXP_LANES: ExpLanes = ExpLanes([
    MAGIC + 127.0,
    LOG2E,
    LN2_HI,
    LN2_LO,
    EXP5_C[0],
    EXP5_C[1],
    EXP5_C[2],
    EXP5_C[3],
    1.0,
    EXP_LO,
    0.0,
    0.0,
]);

/// Lane masks of the last, overlapping block of [`exp_shifted`]: the eight words at `r`
/// keep lanes `8 − r ..` (the `r` elements the whole blocks did not cover).
#[repr(C, align(16))]
struct TailLanes([u32; 16]);

static TAIL_LANES: TailLanes = TailLanes([0, 0, 0, 0, 0, 0, 0, 0, !0, !0, !0, !0, !0, !0, !0, !0]);

/// Writes `exp(x - mx)` into `out` (common length) and returns the sum.
///
/// Eight lanes at a time in assembly ([`exp8_blocks`]). From eight elements on, the last
/// `n mod 8` are covered by one more block over the last eight (its first lanes recompute
/// values already stored, and are masked out of the sum); a shorter row goes through one
/// block in a stack buffer padded with −∞ (whose lanes come out as 0 and add nothing to the
/// sum). No row has a four-lane or scalar tail.
#[inline(always)]
fn exp_shifted(x: &[f32], mx: f32, out: &mut [f32]) -> f32 {
    // SAFETY: Neon is in the AArch64 baseline.
    let vmx = unsafe { vdupq_n_f32(mx) };
    // SAFETY: `exp_blocks_of` calls this with pointers valid for `nb` blocks (its contract).
    exp_blocks_of(x, out, |p, o, nb, a0, a1| unsafe {
        exp8_blocks(p, o, nb, vmx, a0, a1)
    })
}

/// [`exp_shifted`] of `s·(x − mx)`.
#[inline(always)]
fn exp_shifted_scaled(x: &[f32], mx: f32, s: f32, out: &mut [f32]) -> f32 {
    // SAFETY: Neon is in the AArch64 baseline.
    let (vmx, vs) = unsafe { (vdupq_n_f32(mx), vdupq_n_f32(s)) };
    // SAFETY: as in `exp_shifted`.
    exp_blocks_of(x, out, |p, o, nb, a0, a1| unsafe {
        exp8_blocks_scaled(p, o, nb, vmx, vs, a0, a1)
    })
}

/// The row walk of [`exp_shifted`] over a block function `blk(x, out, blocks, acc0, acc1)`
/// ([`exp8_blocks`] or its scaled variant), which it calls only with `x` readable and `out`
/// writable for `8·blocks` floats.
#[inline(always)]
fn exp_blocks_of(
    x: &[f32],
    out: &mut [f32],
    blk: impl Fn(*const f32, *mut f32, usize, float32x4_t, float32x4_t) -> (float32x4_t, float32x4_t),
) -> f32 {
    let n = x.len().min(out.len());
    let blocks = n / 8;
    let (head, r) = (8 * blocks, n % 8);
    // SAFETY: `blk` reads and writes 8·blocks ≤ n elements of `x` and `out`, then either the
    // last eight of them (n ≥ 8) or one block of the 8-element buffer (read and written
    // through the same pointer); the mask load reads words r .. r + 8 ≤ 15 of the 16-word
    // table.
    unsafe {
        let zero = vdupq_n_f32(0.0);
        let (mut acc0, mut acc1) = (zero, zero);
        if blocks > 0 {
            (acc0, acc1) = blk(x.as_ptr(), out.as_mut_ptr(), blocks, acc0, acc1);
        }
        if r > 0 && blocks > 0 {
            // The last eight again (`x` and `out` are distinct borrows, so the first 8 − r
            // lanes are recomputed to the values already stored); only the r new lanes enter
            // the sum.
            let (t0, t1) = blk(
                x.as_ptr().add(n - 8),
                out.as_mut_ptr().add(n - 8),
                1,
                zero,
                zero,
            );
            let m = TAIL_LANES.0.as_ptr().add(r);
            acc0 = vaddq_f32(
                acc0,
                vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(t0), vld1q_u32(m))),
            );
            acc1 = vaddq_f32(
                acc1,
                vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(t1), vld1q_u32(m.add(4)))),
            );
        } else if r > 0 {
            let mut buf = [f32::NEG_INFINITY; 8];
            super::runs::copy_run(&x[head..n], &mut buf[..r]);
            let p = buf.as_mut_ptr();
            (acc0, acc1) = blk(p, p, 1, acc0, acc1);
            super::runs::copy_run(&buf[..r], &mut out[head..n]);
        }
        vaddvq_f32(vaddq_f32(acc0, acc1))
    }
}

/// The assembly of [`exp8_blocks`]: `$scale` are instructions inserted after `x − mx` (the
/// scaled variant multiplies there), `$operands` their extra operands.
macro_rules! exp8_asm {
    ($x:expr, $out:expr, $blocks:expr, $mx:expr, $acc0:ident, $acc1:ident, [$($scale:literal),*], [$($operands:tt)*]) => {
        core::arch::asm!(
            "ldp {k0:q}, {k1:q}, [{k}]",
            "ldr {k2:q}, [{k}, #32]",
            "dup {magic:v}.4s, {k0:v}.s[0]",
            "dup {lo:v}.4s, {k2:v}.s[1]",
            "2:",
            "ldp {a:q}, {b:q}, [{x}], #32",
            "fsub {a:v}.4s, {a:v}.4s, {mx:v}.4s",
            "fsub {b:v}.4s, {b:v}.4s, {mx:v}.4s",
            $($scale,)*
            "fmax {ua:v}.4s, {a:v}.4s, {b:v}.4s",
            "fmaxv {ua:s}, {ua:v}.4s",
            "fcmp {ua:s}, {lo:s}",
            "b.mi 3f",
            "fcmgt {ua:v}.4s, {lo:v}.4s, {a:v}.4s",
            "fcmgt {ub:v}.4s, {lo:v}.4s, {b:v}.4s",
            "mov {ta:v}.16b, {magic:v}.16b",
            "mov {tb:v}.16b, {magic:v}.16b",
            "fmla {ta:v}.4s, {a:v}.4s, {k0:v}.s[1]",
            "fmla {tb:v}.4s, {b:v}.4s, {k0:v}.s[1]",
            "fsub {pa:v}.4s, {ta:v}.4s, {magic:v}.4s",
            "fsub {pb:v}.4s, {tb:v}.4s, {magic:v}.4s",
            "fmls {a:v}.4s, {pa:v}.4s, {k0:v}.s[2]",
            "fmls {b:v}.4s, {pb:v}.4s, {k0:v}.s[2]",
            "fmls {a:v}.4s, {pa:v}.4s, {k0:v}.s[3]",
            "fmls {b:v}.4s, {pb:v}.4s, {k0:v}.s[3]",
            // r in a, b. Horner: p = c4 + c5·r, q = c3 + p·r, p = c2 + q·r, q = 1 + p·r.
            "dup {pa:v}.4s, {k1:v}.s[1]",
            "dup {pb:v}.4s, {k1:v}.s[1]",
            "fmla {pa:v}.4s, {a:v}.4s, {k1:v}.s[0]",
            "fmla {pb:v}.4s, {b:v}.4s, {k1:v}.s[0]",
            "dup {qa:v}.4s, {k1:v}.s[2]",
            "dup {qb:v}.4s, {k1:v}.s[2]",
            "fmla {qa:v}.4s, {pa:v}.4s, {a:v}.4s",
            "fmla {qb:v}.4s, {pb:v}.4s, {b:v}.4s",
            "dup {pa:v}.4s, {k1:v}.s[3]",
            "dup {pb:v}.4s, {k1:v}.s[3]",
            "fmla {pa:v}.4s, {qa:v}.4s, {a:v}.4s",
            "fmla {pb:v}.4s, {qb:v}.4s, {b:v}.4s",
            "dup {qa:v}.4s, {k2:v}.s[0]",
            "dup {qb:v}.4s, {k2:v}.s[0]",
            "fmla {qa:v}.4s, {pa:v}.4s, {a:v}.4s",
            "fmla {qb:v}.4s, {pb:v}.4s, {b:v}.4s",
            // e^r = 1 + r·q; y = s + (s·r)·q with s = 2^n.
            "shl {ta:v}.4s, {ta:v}.4s, #23",
            "shl {tb:v}.4s, {tb:v}.4s, #23",
            "fmul {a:v}.4s, {a:v}.4s, {ta:v}.4s",
            "fmul {b:v}.4s, {b:v}.4s, {tb:v}.4s",
            "fmla {ta:v}.4s, {a:v}.4s, {qa:v}.4s",
            "fmla {tb:v}.4s, {b:v}.4s, {qb:v}.4s",
            "bic {ta:v}.16b, {ta:v}.16b, {ua:v}.16b",
            "bic {tb:v}.16b, {tb:v}.16b, {ub:v}.16b",
            "stp {ta:q}, {tb:q}, [{out}], #32",
            "fadd {acc0:v}.4s, {acc0:v}.4s, {ta:v}.4s",
            "fadd {acc1:v}.4s, {acc1:v}.4s, {tb:v}.4s",
            "subs {cnt}, {cnt}, #1",
            "b.ne 2b",
            "b 4f",
            // All eight below EXP_LO: zeros.
            "3:",
            "stp xzr, xzr, [{out}]",
            "stp xzr, xzr, [{out}, #16]",
            "add {out}, {out}, #32",
            "subs {cnt}, {cnt}, #1",
            "b.ne 2b",
            "4:",
            k = in(reg) EXP_LANES.0.as_ptr(),
            x = inout(reg) $x => _,
            out = inout(reg) $out => _,
            cnt = inout(reg) $blocks => _,
            mx = in(vreg) $mx,
            acc0 = inout(vreg) $acc0,
            acc1 = inout(vreg) $acc1,
            k0 = out(vreg) _,
            k1 = out(vreg) _,
            k2 = out(vreg) _,
            magic = out(vreg) _,
            lo = out(vreg) _,
            a = out(vreg) _,
            b = out(vreg) _,
            ua = out(vreg) _,
            ub = out(vreg) _,
            ta = out(vreg) _,
            tb = out(vreg) _,
            pa = out(vreg) _,
            pb = out(vreg) _,
            qa = out(vreg) _,
            qb = out(vreg) _,
            $($operands)*
            options(nostack),
        );
    };
}

/// `blocks` eight-lane blocks of `exp(x − mx)` from `x` into `out`, summed into the two
/// accumulators: `n` from one FMA with a magic constant, a two-part `ln 2` reduction, the
/// degree-5 polynomial of [`EXP5_C`] by Horner's rule with its last step as `s + (s·r)·q`
/// (`s = 2^n`), lanes below `EXP_LO` cleared. Eight lanes all below `EXP_LO` (masked
/// attention scores: a mask adds the most negative float, or −∞) are stored as zeros without
/// the formula. A NaN lane fails that test (the eight-lane maximum is NaN) and propagates
/// through the formula.
///
/// # Safety
/// `blocks ≥ 1`; `x` readable and `out` writable for `8·blocks` floats (they may be the same
/// pointer: each block is read before it is written).
#[inline(always)]
unsafe fn exp8_blocks(
    x: *const f32,
    out: *mut f32,
    blocks: usize,
    mx: float32x4_t,
    mut acc0: float32x4_t,
    mut acc1: float32x4_t,
) -> (float32x4_t, float32x4_t) {
    // SAFETY: Neon is in the AArch64 baseline. The assembly reads the 48 bytes of
    // `EXP_LANES` (16-byte aligned), `x[..8·blocks]` and writes `out[..8·blocks]` (caller)
    // through pointers it advances by 32 bytes per block, for `blocks` blocks; it touches no
    // other memory and no stack, and declares every register it changes.
    unsafe {
        exp8_asm!(x, out, blocks, mx, acc0, acc1, [], []);
    }
    (acc0, acc1)
}

/// [`exp8_blocks`] of `exp(s·(x − mx))`: one more multiply per four lanes, before the test
/// for lanes all below `EXP_LO`.
///
/// # Safety
/// As [`exp8_blocks`].
#[inline(always)]
unsafe fn exp8_blocks_scaled(
    x: *const f32,
    out: *mut f32,
    blocks: usize,
    mx: float32x4_t,
    s: float32x4_t,
    mut acc0: float32x4_t,
    mut acc1: float32x4_t,
) -> (float32x4_t, float32x4_t) {
    // SAFETY: as in `exp8_blocks` (the scale is one more register operand).
    unsafe {
        exp8_asm!(
            x,
            out,
            blocks,
            mx,
            acc0,
            acc1,
            [
                "fmul {a:v}.4s, {a:v}.4s, {sc:v}.4s",
                "fmul {b:v}.4s, {b:v}.4s, {sc:v}.4s"
            ],
            [sc = in(vreg) s,]
        );
    }
    (acc0, acc1)
}

/// Softmax of every `n`-element row of `x` into `out` (whole rows of the common length; the
/// exp loop loads its constants once per row, three vector loads).
pub fn softmax_rows(x: &[f32], out: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        softmax(xr, or);
    }
}

/// Softmax of `s·x` over every `n`-element row (`s` finite, checked by the wrapper):
/// `exp(s·(x − max x))` normalised. A scale ≤ 0 (which attention never uses) takes the
/// scalar formula: the eight-lane blocks pad short rows with −∞, which only a positive scale
/// sends to 0.
pub fn softmax_rows_scaled(x: &[f32], out: &mut [f32], n: usize, s: f32) {
    if n == 0 {
        return;
    }
    if s <= 0.0 {
        g::softmax_rows_scaled(x, out, n, s);
        return;
    }
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let inv = 1.0 / exp_shifted_scaled(xr, max(xr), s, or);
        scale(or, inv);
    }
}

/// Softmax of one row (common length of `x` and `out`).
#[inline(always)]
pub fn softmax(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let inv = 1.0 / exp_shifted(x, max(x), out);
    scale(out, inv);
}

/// `out *= s`, eight lanes a step. From eight elements on, the last eight are scaled first
/// (kept in registers) and stored after the eight-lane steps, which cover the rest: no scalar
/// tail, and every element scaled once.
#[inline(always)]
fn scale(out: &mut [f32], s: f32) {
    let n = out.len();
    if n >= 8 {
        // SAFETY: accesses at n − 8 ≥ 0 and at i + 8 ≤ n; the last eight are read before
        // any store and written after them.
        unsafe {
            let p = out.as_mut_ptr();
            let last = (
                vmulq_n_f32(vld1q_f32(p.add(n - 8)), s),
                vmulq_n_f32(vld1q_f32(p.add(n - 4)), s),
            );
            let mut i = 0;
            while i + 8 <= n {
                vst1q_f32(p.add(i), vmulq_n_f32(vld1q_f32(p.add(i)), s));
                vst1q_f32(p.add(i + 4), vmulq_n_f32(vld1q_f32(p.add(i + 4)), s));
                i += 8;
            }
            vst1q_f32(p.add(n - 8), last.0);
            vst1q_f32(p.add(n - 4), last.1);
        }
        return;
    }
    for v in out.iter_mut() {
        *v *= s;
    }
}

/// Log-softmax of one row.
pub fn log_softmax(x: &[f32], out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let mx = max(x);
    let shift = mx + libm::logf(exp_shifted(x, mx, out));
    map1(
        x,
        out,
        |v| {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic only.
            unsafe { vsubq_f32(v, vdupq_n_f32(shift)) }
        },
        |v| v - shift,
    );
}

/// Layer norm of one non-empty row; returns `(mean, rstd)`. `gamma`/`beta` are used only when
/// at least as long as the row (the checked wrapper guarantees equal lengths).
///
/// Two passes of statistics, sixteen lanes a step in four accumulators (one four-vector
/// `ld1` each), then the affine pass eight lanes a step (two-vector `ld1`/`st1` of `x`,
/// gamma, beta and the output): about 2.9 instructions per element plus a few dozen per row.
pub fn layer_norm(
    x: &[f32],
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> (f32, f32) {
    let n = x.len().min(out.len());
    if n == 0 {
        return (0.0, f32::NAN);
    }
    let (x, out) = (&x[..n], &mut out[..n]);
    let xp = x.as_ptr();
    // SAFETY: every vector load reads x[i .. i + 16] or x[i .. i + 4] with that end ≤ n, the
    // scalar tails x[j], j < n; Neon is in the AArch64 baseline.
    let (mean, rstd) = unsafe {
        let z = vdupq_n_f32(0.0);
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = 0;
        while i + 16 <= n {
            let v = vld1q_f32_x4(xp.add(i));
            a0 = vaddq_f32(a0, v.0);
            a1 = vaddq_f32(a1, v.1);
            a2 = vaddq_f32(a2, v.2);
            a3 = vaddq_f32(a3, v.3);
            i += 16;
        }
        while i + 4 <= n {
            a0 = vaddq_f32(a0, vld1q_f32(xp.add(i)));
            i += 4;
        }
        let mut s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
        for j in i..n {
            s += *xp.add(j);
        }
        let mean = s / n as f32;
        let m = vdupq_n_f32(mean);
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = 0;
        while i + 16 <= n {
            let v = vld1q_f32_x4(xp.add(i));
            let (d0, d1) = (vsubq_f32(v.0, m), vsubq_f32(v.1, m));
            let (d2, d3) = (vsubq_f32(v.2, m), vsubq_f32(v.3, m));
            a0 = vfmaq_f32(a0, d0, d0);
            a1 = vfmaq_f32(a1, d1, d1);
            a2 = vfmaq_f32(a2, d2, d2);
            a3 = vfmaq_f32(a3, d3, d3);
            i += 16;
        }
        while i + 4 <= n {
            let d = vsubq_f32(vld1q_f32(xp.add(i)), m);
            a0 = vfmaq_f32(a0, d, d);
            i += 4;
        }
        let mut var = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
        for j in i..n {
            let d = *xp.add(j) - mean;
            var += d * d;
        }
        (mean, 1.0 / libm::sqrtf(var / n as f32 + eps))
    };
    let gp = gamma.filter(|g| g.len() >= n).map(|g| g.as_ptr());
    let bp = beta.filter(|b| b.len() >= n).map(|b| b.as_ptr());
    let op = out.as_mut_ptr();
    // SAFETY: loads of x, gamma and beta and stores of out at [i, i + 8) or [i, i + 4) with
    // that end ≤ n, scalars at j < n; gamma and beta were filtered to at least n elements.
    unsafe {
        let (mv, rv) = (vdupq_n_f32(mean), vdupq_n_f32(rstd));
        // One loop per affine variant, so that no Option is tested per vector.
        let norm = |v: float32x4_t| vmulq_f32(vsubq_f32(v, mv), rv);
        let mut i = 0;
        match (gp, bp) {
            (Some(g), Some(b)) => {
                // The common case as one loop of 12 instructions per 8 elements (LLVM spends
                // 17 on separate pointer increments): y = b + ((x − mean)·rstd)·g.
                let blocks = n / 8;
                if blocks > 0 {
                    // SAFETY: reads x, gamma and beta and writes out at [0, 8·blocks) ⊆ [0, n)
                    // through pointers advanced 32 bytes per block; only the named registers
                    // change; no stack.
                    core::arch::asm!(
                        "2:",
                        "ld1 {{v0.4s, v1.4s}}, [{x}], #32",
                        "ld1 {{v2.4s, v3.4s}}, [{g}], #32",
                        "ld1 {{v4.4s, v5.4s}}, [{b}], #32",
                        "fsub v0.4s, v0.4s, {mv:v}.4s",
                        "fsub v1.4s, v1.4s, {mv:v}.4s",
                        "fmul v0.4s, v0.4s, {rv:v}.4s",
                        "fmul v1.4s, v1.4s, {rv:v}.4s",
                        "fmla v4.4s, v0.4s, v2.4s",
                        "fmla v5.4s, v1.4s, v3.4s",
                        "st1 {{v4.4s, v5.4s}}, [{o}], #32",
                        "subs {cnt}, {cnt}, #1",
                        "b.ne 2b",
                        x = inout(reg) xp => _,
                        g = inout(reg) g => _,
                        b = inout(reg) b => _,
                        o = inout(reg) op => _,
                        cnt = inout(reg) blocks => _,
                        mv = in(vreg) mv,
                        rv = in(vreg) rv,
                        out("v0") _, out("v1") _, out("v2") _,
                        out("v3") _, out("v4") _, out("v5") _,
                        options(nostack),
                    );
                    i = 8 * blocks;
                }
                for j in i..n {
                    *op.add(j) = (*xp.add(j) - mean) * rstd * *g.add(j) + *b.add(j);
                }
            }
            (Some(g), None) => {
                while i + 8 <= n {
                    let (v, gv) = (vld1q_f32_x2(xp.add(i)), vld1q_f32_x2(g.add(i)));
                    let y = float32x4x2_t(vmulq_f32(norm(v.0), gv.0), vmulq_f32(norm(v.1), gv.1));
                    vst1q_f32_x2(op.add(i), y);
                    i += 8;
                }
                for j in i..n {
                    *op.add(j) = (*xp.add(j) - mean) * rstd * *g.add(j);
                }
            }
            (None, Some(b)) => {
                while i + 8 <= n {
                    let (v, bv) = (vld1q_f32_x2(xp.add(i)), vld1q_f32_x2(b.add(i)));
                    let y = float32x4x2_t(vaddq_f32(norm(v.0), bv.0), vaddq_f32(norm(v.1), bv.1));
                    vst1q_f32_x2(op.add(i), y);
                    i += 8;
                }
                for j in i..n {
                    *op.add(j) = (*xp.add(j) - mean) * rstd + *b.add(j);
                }
            }
            (None, None) => {
                while i + 8 <= n {
                    let v = vld1q_f32_x2(xp.add(i));
                    vst1q_f32_x2(op.add(i), float32x4x2_t(norm(v.0), norm(v.1)));
                    i += 8;
                }
                for j in i..n {
                    *op.add(j) = (*xp.add(j) - mean) * rstd;
                }
            }
        }
    }
    (mean, rstd)
}

/// `dst[i·ds + j] = src[j·ss + i]`, `i < rows`, `j < cols`: 4×4 register blocks, the edges
/// by the generic code. The caller (`vec::transpose32`) checked that both slices cover the
/// addressed ranges and that `ss ≥ rows`, `ds ≥ cols` (no row overlap).
pub fn transpose32(src: &[f32], ss: usize, dst: &mut [f32], ds: usize, rows: usize, cols: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    // Re-check the bounds here so this function is sound on its own.
    let need = |stride: usize, outer: usize, inner: usize| {
        (outer - 1)
            .checked_mul(stride)
            .and_then(|v| v.checked_add(inner))
    };
    match (need(ss, cols, rows), need(ds, rows, cols)) {
        (Some(s), Some(d)) if s <= src.len() && d <= dst.len() => {}
        _ => return,
    }
    let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
    // A few planes into interleaved rows (NCHW → NHWC of an image's 2–4 channels): the
    // structure stores interleave four elements of each plane at once.
    if (2..=4).contains(&cols) && ds == cols {
        let r4 = rows & !3;
        // SAFETY: i + 4 ≤ rows: reads lanes i..i+4 of source rows j < cols, writes the
        // contiguous destination rows i..i+4 (4·cols floats from i·ds, ds = cols), inside the
        // ranges checked above.
        unsafe {
            for i in (0..r4).step_by(4) {
                let l = |j: usize| vld1q_f32(sp.add(j * ss + i));
                let d = dp.add(i * ds);
                match cols {
                    2 => vst2q_f32(d, float32x4x2_t(l(0), l(1))),
                    3 => vst3q_f32(d, float32x4x3_t(l(0), l(1), l(2))),
                    _ => vst4q_f32(d, float32x4x4_t(l(0), l(1), l(2), l(3))),
                }
            }
            region4(sp, ss, dp, ds, r4, rows, 0, cols);
        }
        return;
    }
    let (r8, c8) = (rows & !7, cols & !7);
    for i in (0..r8).step_by(8) {
        for j in (0..c8).step_by(8) {
            // SAFETY: i + 8 ≤ rows and j + 8 ≤ cols, so every source read (rows j..j+8 of
            // `ss`, lanes i..i+8) and destination write (rows i..i+8 of `ds`, columns j..j+8)
            // lies inside the ranges checked above.
            unsafe { block8(sp.add(j * ss + i), ss, dp.add(i * ds + j), ds) };
        }
    }
    // The rest: 4×4 blocks and single elements over the right strip and the bottom strip.
    // SAFETY: both regions lie inside rows × cols, whose bounds were checked above.
    unsafe {
        region4(sp, ss, dp, ds, 0, r8, c8, cols);
        region4(sp, ss, dp, ds, r8, rows, 0, cols);
    }
}

/// One 8×8 block: `d[m·ds + k] = s[k·ss + m]`, `m, k < 8`, with no register permutes: the
/// eight source rows load as four groups of four vectors (rows 0–3 and 4–7, lanes 0–3 and
/// 4–7), and each destination row half is one single-lane `st4` of a group (`st4
/// {v0.s-v3.s}[m]` writes lane m of source rows 0–3: four consecutive destination floats),
/// post-indexed down the destination rows: 16 loads and 16 stores per 64 floats.
///
/// # Safety
/// `s + k·ss + [0, 8)` must be readable and `d + m·ds + [0, 8)` writable for `k, m < 8`.
#[inline(always)]
unsafe fn block8(s: *const f32, ss: usize, d: *mut f32, ds: usize) {
    // SAFETY: reads the 8 source rows of 8 floats (caller) and writes the 8 destination rows
    // of 8 floats (caller); Neon is in the AArch64 baseline; unaligned accesses are allowed.
    unsafe {
        core::arch::asm!(
            "ld1 {{v0.4s}}, [{s}], #16",
            "ld1 {{v16.4s}}, [{s}], {adj}",
            "ld1 {{v1.4s}}, [{s}], #16",
            "ld1 {{v17.4s}}, [{s}], {adj}",
            "ld1 {{v2.4s}}, [{s}], #16",
            "ld1 {{v18.4s}}, [{s}], {adj}",
            "ld1 {{v3.4s}}, [{s}], #16",
            "ld1 {{v19.4s}}, [{s}], {adj}",
            "ld1 {{v4.4s}}, [{s}], #16",
            "ld1 {{v20.4s}}, [{s}], {adj}",
            "ld1 {{v5.4s}}, [{s}], #16",
            "ld1 {{v21.4s}}, [{s}], {adj}",
            "ld1 {{v6.4s}}, [{s}], #16",
            "ld1 {{v22.4s}}, [{s}], {adj}",
            "ld1 {{v7.4s}}, [{s}], #16",
            "ld1 {{v23.4s}}, [{s}]",
            "add {q}, {p}, #16",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[0], [{p}], {ds4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[0], [{q}], {ds4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[1], [{p}], {ds4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[1], [{q}], {ds4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[2], [{p}], {ds4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[2], [{q}], {ds4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[3], [{p}], {ds4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[3], [{q}], {ds4}",
            "st4 {{v16.s, v17.s, v18.s, v19.s}}[0], [{p}], {ds4}",
            "st4 {{v20.s, v21.s, v22.s, v23.s}}[0], [{q}], {ds4}",
            "st4 {{v16.s, v17.s, v18.s, v19.s}}[1], [{p}], {ds4}",
            "st4 {{v20.s, v21.s, v22.s, v23.s}}[1], [{q}], {ds4}",
            "st4 {{v16.s, v17.s, v18.s, v19.s}}[2], [{p}], {ds4}",
            "st4 {{v20.s, v21.s, v22.s, v23.s}}[2], [{q}], {ds4}",
            "st4 {{v16.s, v17.s, v18.s, v19.s}}[3], [{p}], {ds4}",
            "st4 {{v20.s, v21.s, v22.s, v23.s}}[3], [{q}], {ds4}",
            s = inout(reg) s => _,
            p = inout(reg) d => _,
            q = out(reg) _,
            adj = in(reg) (ss * 4).wrapping_sub(16),
            ds4 = in(reg) ds * 4,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _,
            options(nostack),
        );
    }
}

/// 4×4 register transpose: `out[m][k] = in[k][m]`.
#[inline(always)]
fn t4(a: float32x4_t, b: float32x4_t, c: float32x4_t, d: float32x4_t) -> [float32x4_t; 4] {
    // SAFETY: Neon is in the AArch64 baseline; register permutes only.
    unsafe {
        let (a, b) = (vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b));
        let (c, d) = (vreinterpretq_u32_f32(c), vreinterpretq_u32_f32(d));
        let t0 = vreinterpretq_u64_u32(vtrn1q_u32(a, b));
        let t1 = vreinterpretq_u64_u32(vtrn2q_u32(a, b));
        let t2 = vreinterpretq_u64_u32(vtrn1q_u32(c, d));
        let t3 = vreinterpretq_u64_u32(vtrn2q_u32(c, d));
        [
            vreinterpretq_f32_u64(vtrn1q_u64(t0, t2)),
            vreinterpretq_f32_u64(vtrn1q_u64(t1, t3)),
            vreinterpretq_f32_u64(vtrn2q_u64(t0, t2)),
            vreinterpretq_f32_u64(vtrn2q_u64(t1, t3)),
        ]
    }
}

/// Transposes the region `i0..i1 × j0..j1` of the destination: 4×4 blocks, then single
/// elements.
///
/// # Safety
/// Every `s[j·ss + i]` and `d[i·ds + j]` in the region must be in bounds.
#[allow(clippy::too_many_arguments)]
unsafe fn region4(
    s: *const f32,
    ss: usize,
    d: *mut f32,
    ds: usize,
    i0: usize,
    i1: usize,
    j0: usize,
    j1: usize,
) {
    let (i4, j4) = (i0 + ((i1 - i0) & !3), j0 + ((j1 - j0) & !3));
    for i in (i0..i4).step_by(4) {
        for j in (j0..j4).step_by(4) {
            // SAFETY: i + 4 ≤ i1 and j + 4 ≤ j1: inside the region (caller's contract).
            unsafe {
                let l = |k: usize| vld1q_f32(s.add((j + k) * ss + i));
                let o = t4(l(0), l(1), l(2), l(3));
                for (m, v) in o.into_iter().enumerate() {
                    vst1q_f32(d.add((i + m) * ds + j), v);
                }
            }
        }
        for j in j4..j1 {
            for m in i..i + 4 {
                // SAFETY: (m, j) is inside the region (caller's contract).
                unsafe { *d.add(m * ds + j) = *s.add(j * ss + m) };
            }
        }
    }
    for i in i4..i1 {
        for j in j0..j1 {
            // SAFETY: (i, j) is inside the region (caller's contract).
            unsafe { *d.add(i * ds + j) = *s.add(j * ss + i) };
        }
    }
}

/// `out[i] = v(a[i], b[i])` over the common prefix: sixteen lanes a step (four-vector
/// `ld1`/`st1`), then four, then `s` lane by lane.
#[inline(always)]
fn zip_map(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    v: impl Fn(float32x4_t, float32x4_t) -> float32x4_t,
    s: impl Fn(f32, f32) -> f32,
) {
    let n = a.len().min(b.len()).min(out.len());
    let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let mut i = 0;
    // SAFETY: every access is at i .. i + 16 (or + 4) ≤ n, inside all three slices; Neon is
    // in the AArch64 baseline; unaligned vector accesses are allowed.
    unsafe {
        while i + 16 <= n {
            let x = vld1q_f32_x4(pa.add(i));
            let y = vld1q_f32_x4(pb.add(i));
            let r = float32x4x4_t(v(x.0, y.0), v(x.1, y.1), v(x.2, y.2), v(x.3, y.3));
            vst1q_f32_x4(po.add(i), r);
            i += 16;
        }
        while i + 4 <= n {
            vst1q_f32(po.add(i), v(vld1q_f32(pa.add(i)), vld1q_f32(pb.add(i))));
            i += 4;
        }
    }
    for j in i..n {
        out[j] = s(a[j], b[j]);
    }
}

/// The four lane operations of [`binary`] as safe functions.
macro_rules! lane_ops {
    ($($name:ident = $f:ident;)*) => {$(
        #[inline(always)]
        fn $name(x: float32x4_t, y: float32x4_t) -> float32x4_t {
            // SAFETY: Neon is in the AArch64 baseline; register arithmetic.
            unsafe { $f(x, y) }
        }
    )*};
}
lane_ops! {
    lane_add = vaddq_f32;
    lane_sub = vsubq_f32;
    lane_mul = vmulq_f32;
    lane_div = vdivq_f32;
}

/// `out[i] = a[i] op b[i]`: Add, Sub, Mul and Div sixteen lanes a step ([`zip_map`]); Min
/// and Max (NaN-propagating, as [`g::binary`] defines them) through the generic loop.
pub fn binary(op: BinOp, a: &[f32], b: &[f32], out: &mut [f32]) {
    match op {
        BinOp::Add => zip_map(a, b, out, lane_add, |x, y| x + y),
        BinOp::Sub => zip_map(a, b, out, lane_sub, |x, y| x - y),
        BinOp::Mul => zip_map(a, b, out, lane_mul, |x, y| x * y),
        BinOp::Div => zip_map(a, b, out, lane_div, |x, y| x / y),
        BinOp::Min | BinOp::Max => g::binary(op, a, b, out),
    }
}

/// `out[i] = a[i] op s` ([`binary`] with a splatted scalar on the right).
pub fn binary_scalar(op: BinOp, a: &[f32], s: f32, out: &mut [f32]) {
    // SAFETY: Neon is in the AArch64 baseline; register arithmetic.
    let vs = unsafe { vdupq_n_f32(s) };
    match op {
        BinOp::Add => zip_map(a, a, out, |x, _| lane_add(x, vs), |x, _| x + s),
        BinOp::Sub => zip_map(a, a, out, |x, _| lane_sub(x, vs), |x, _| x - s),
        BinOp::Mul => zip_map(a, a, out, |x, _| lane_mul(x, vs), |x, _| x * s),
        BinOp::Div => zip_map(a, a, out, |x, _| lane_div(x, vs), |x, _| x / s),
        BinOp::Min | BinOp::Max => g::binary_scalar(op, a, s, out),
    }
}

/// `out[i] = s op b[i]` ([`binary`] with a splatted scalar on the left).
pub fn scalar_binary(op: BinOp, s: f32, b: &[f32], out: &mut [f32]) {
    // SAFETY: Neon is in the AArch64 baseline; register arithmetic.
    let vs = unsafe { vdupq_n_f32(s) };
    match op {
        BinOp::Add => zip_map(b, b, out, |y, _| lane_add(vs, y), |y, _| s + y),
        BinOp::Sub => zip_map(b, b, out, |y, _| lane_sub(vs, y), |y, _| s - y),
        BinOp::Mul => zip_map(b, b, out, |y, _| lane_mul(vs, y), |y, _| s * y),
        BinOp::Div => zip_map(b, b, out, |y, _| lane_div(vs, y), |y, _| s / y),
        BinOp::Min | BinOp::Max => g::scalar_binary(op, s, b, out),
    }
}
