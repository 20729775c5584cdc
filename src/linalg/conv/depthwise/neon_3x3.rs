//! The Neon 3×3 depthwise kernel: NHWC, channel multiplier 1, stride 1 or 2 across (any
//! stride down), dilation 1, output clamp fused into the stores.
//!
//! Layout contract: input `[N, H, W, C]`, filter `[1, 3, 3, C]` (tap-major, channels
//! contiguous), bias `[C]`, output `[N, OH, OW, C]`, all f32 and contiguous. Channels go four at
//! a time (one vector); the nine filter vectors of a 4-channel block and its bias stay in
//! registers across a tile of output rows. In each row, the interior outputs (all three column
//! taps inside the input) go in blocks of 8, 4, 2 and 1 neighbouring outputs: one `asm!` per
//! input row and block streams the row's columns (post-indexed `ld1`) and adds each column's
//! products into every output of the block that reads it, so a column is loaded once per block
//! (8 outputs at stride 1: 10 loads for 24 FMLA). The border columns use only their valid taps;
//! the channel tail `C mod 4` is scalar. The `row_s*` bodies are written by
//! `scripts/gen-depthwise-asm.py neon`.

use super::geometry_3x3::valid_rows;
use crate::linalg::conv::Conv2d;
use core::arch::aarch64::*;

/// Input bytes one tile of output rows should read (about half an L1 data cache): the
/// tile's rows are computed one 4-channel block at a time, so each block's filter and bias
/// vectors are loaded once per tile, not once per row.
const TILE_BYTES: usize = 32 * 1024;

/// The output clamp as vectors; applied only in the `CLAMP = true` instantiations, so an
/// unclamped call pays nothing for it.
#[derive(Clone, Copy)]
struct Range {
    lo: float32x4_t,
    hi: float32x4_t,
}

/// `a` clamped into the range when `CLAMP` (`max` then `min`, NaN becomes `lo`, as
/// [`crate::linalg::conv::clamp`]).
#[inline(always)]
fn fin<const CLAMP: bool>(a: float32x4_t, r: Range) -> float32x4_t {
    if CLAMP {
        // SAFETY: Neon is in the AArch64 baseline.
        unsafe { vminnmq_f32(vmaxnmq_f32(a, r.lo), r.hi) }
    } else {
        a
    }
}

/// What every output row of one image shares.
struct Geo {
    /// Interior outputs (all three column taps inside the input): `lo .. hi`.
    lo: usize,
    hi: usize,
    out_w: usize,
    in_w: usize,
    pad_left: usize,
    /// Bytes from one column to the next (input and output columns alike: `C` floats).
    step: usize,
    /// The border columns (`0 .. lo` and `hi .. out_w`) worked out once per image, when
    /// there are at most [`MAX_EDGES`] of them (`None`: each is worked out per row).
    edges: Option<([Edge; MAX_EDGES], usize)>,
}

/// Most border columns an image keeps in [`Geo::edges`].
const MAX_EDGES: usize = 8;

/// One border output column: its byte offset in the output row, the byte offset of the
/// first input column it reads, and its valid column taps `ka .. kb` (empty when none is:
/// the output is the bias).
#[derive(Clone, Copy, Default)]
struct Edge {
    out: usize,
    input: usize,
    ka: usize,
    kb: usize,
}

impl Geo {
    /// The border column `ox` (stride `s`) and its valid column taps.
    fn edge(&self, ox: usize, s: usize) -> Edge {
        let step = self.step;
        let base = ox * s; // input column of tap 0, plus `pad_left`
        let ka = self.pad_left.saturating_sub(base).min(3);
        let kb = (self.in_w + self.pad_left).saturating_sub(base).min(3);
        if ka >= kb {
            return Edge {
                out: ox * step,
                ..Edge::default()
            };
        }
        Edge {
            out: ox * step,
            input: (base + ka - self.pad_left) * step,
            ka,
            kb,
        }
    }
}

/// One input row of an 8-output block at stride 1: loads the row's 10 columns
/// (post-indexed `ld1`, `step` bytes apart) and adds each one's products into the outputs
/// that read it (`a[j] += x[j + k]·w[k]`, taps in increasing `k` per output), then moves
/// `*p` to the next block's first column (8 columns on). One `asm!` per row keeps the
/// live registers at 8 accumulators, 3 filter vectors and 3 columns.
///
/// # Safety
/// `*p + i·step` holds 4 readable floats for `i < 10`.
#[inline(always)]
unsafe fn row_s1n8(
    a: &mut [float32x4_t; 8],
    p: &mut *const f32,
    w: &[float32x4_t; 3],
    step: usize,
) {
    // SAFETY: reads the 10 columns the caller vouches for; no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "fmla {a1:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a1:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "fmla {a2:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a2:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "fmla {a3:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a3:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "fmla {a4:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a4:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "fmla {a5:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a4:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a5:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "fmla {a6:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a5:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a6:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "fmla {a7:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a6:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a7:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a7:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "sub {p}, {p}, {back}",
            p = inout(reg) *p,
            step = in(reg) step,
            back = in(reg) step * 2,
            a0 = inout(vreg) a[0],
            a1 = inout(vreg) a[1],
            a2 = inout(vreg) a[2],
            a3 = inout(vreg) a[3],
            a4 = inout(vreg) a[4],
            a5 = inout(vreg) a[5],
            a6 = inout(vreg) a[6],
            a7 = inout(vreg) a[7],
            w0 = in(vreg) w[0],
            w1 = in(vreg) w[1],
            w2 = in(vreg) w[2],
            t0 = out(vreg) _,
            t1 = out(vreg) _,
            t2 = out(vreg) _,
            options(nostack, readonly, preserves_flags),
        );
    }
}

/// One input row of a 4-output block at stride 1: loads the row's 6 columns
/// (post-indexed `ld1`, `step` bytes apart) and adds each one's products into the outputs
/// that read it (`a[j] += x[j + k]·w[k]`, taps in increasing `k` per output), then moves
/// `*p` to the next block's first column (4 columns on). One `asm!` per row keeps the
/// live registers at 4 accumulators, 3 filter vectors and 3 columns.
///
/// # Safety
/// `*p + i·step` holds 4 readable floats for `i < 6`.
#[inline(always)]
unsafe fn row_s1n4(
    a: &mut [float32x4_t; 4],
    p: &mut *const f32,
    w: &[float32x4_t; 3],
    step: usize,
) {
    // SAFETY: reads the 6 columns the caller vouches for; no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "fmla {a1:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a1:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "fmla {a2:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a2:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "fmla {a3:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a3:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "sub {p}, {p}, {back}",
            p = inout(reg) *p,
            step = in(reg) step,
            back = in(reg) step * 2,
            a0 = inout(vreg) a[0],
            a1 = inout(vreg) a[1],
            a2 = inout(vreg) a[2],
            a3 = inout(vreg) a[3],
            w0 = in(vreg) w[0],
            w1 = in(vreg) w[1],
            w2 = in(vreg) w[2],
            t0 = out(vreg) _,
            t1 = out(vreg) _,
            t2 = out(vreg) _,
            options(nostack, readonly, preserves_flags),
        );
    }
}

/// One input row of a 4-output block at stride 2: loads the row's 9 columns
/// (post-indexed `ld1`, `step` bytes apart) and adds each one's products into the outputs
/// that read it (`a[j] += x[2·j + k]·w[k]`, taps in increasing `k` per output), then moves
/// `*p` to the next block's first column (8 columns on). One `asm!` per row keeps the
/// live registers at 4 accumulators, 3 filter vectors and 3 columns.
///
/// # Safety
/// `*p + i·step` holds 4 readable floats for `i < 9`.
#[inline(always)]
unsafe fn row_s2n4(
    a: &mut [float32x4_t; 4],
    p: &mut *const f32,
    w: &[float32x4_t; 3],
    step: usize,
) {
    // SAFETY: reads the 9 columns the caller vouches for; no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a1:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a2:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a3:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "sub {p}, {p}, {back}",
            p = inout(reg) *p,
            step = in(reg) step,
            back = in(reg) step,
            a0 = inout(vreg) a[0],
            a1 = inout(vreg) a[1],
            a2 = inout(vreg) a[2],
            a3 = inout(vreg) a[3],
            w0 = in(vreg) w[0],
            w1 = in(vreg) w[1],
            w2 = in(vreg) w[2],
            t0 = out(vreg) _,
            t1 = out(vreg) _,
            t2 = out(vreg) _,
            options(nostack, readonly, preserves_flags),
        );
    }
}

/// One input row of an 8-output block at stride 2: loads the row's 17 columns
/// (post-indexed `ld1`, `step` bytes apart) and adds each one's products into the outputs
/// that read it (`a[j] += x[2·j + k]·w[k]`, taps in increasing `k` per output), then moves
/// `*p` to the next block's first column (16 columns on). One `asm!` per row keeps the
/// live registers at 8 accumulators, 3 filter vectors and 3 columns.
///
/// # Safety
/// `*p + i·step` holds 4 readable floats for `i < 17`.
#[inline(always)]
unsafe fn row_s2n8(
    a: &mut [float32x4_t; 8],
    p: &mut *const f32,
    w: &[float32x4_t; 3],
    step: usize,
) {
    // SAFETY: reads the 17 columns the caller vouches for; no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a0:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a1:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a1:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a2:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a2:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a3:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a3:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a4:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a4:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a4:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "fmla {a5:v}.4s, {t1:v}.4s, {w0:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a5:v}.4s, {t2:v}.4s, {w1:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a5:v}.4s, {t0:v}.4s, {w2:v}.4s",
            "fmla {a6:v}.4s, {t0:v}.4s, {w0:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a6:v}.4s, {t1:v}.4s, {w1:v}.4s",
            "ld1 {{{t2:v}.4s}}, [{p}], {step}",
            "fmla {a6:v}.4s, {t2:v}.4s, {w2:v}.4s",
            "fmla {a7:v}.4s, {t2:v}.4s, {w0:v}.4s",
            "ld1 {{{t0:v}.4s}}, [{p}], {step}",
            "fmla {a7:v}.4s, {t0:v}.4s, {w1:v}.4s",
            "ld1 {{{t1:v}.4s}}, [{p}], {step}",
            "fmla {a7:v}.4s, {t1:v}.4s, {w2:v}.4s",
            "sub {p}, {p}, {back}",
            p = inout(reg) *p,
            step = in(reg) step,
            back = in(reg) step,
            a0 = inout(vreg) a[0],
            a1 = inout(vreg) a[1],
            a2 = inout(vreg) a[2],
            a3 = inout(vreg) a[3],
            a4 = inout(vreg) a[4],
            a5 = inout(vreg) a[5],
            a6 = inout(vreg) a[6],
            a7 = inout(vreg) a[7],
            w0 = in(vreg) w[0],
            w1 = in(vreg) w[1],
            w2 = in(vreg) w[2],
            t0 = out(vreg) _,
            t1 = out(vreg) _,
            t2 = out(vreg) _,
            options(nostack, readonly, preserves_flags),
        );
    }
}

/// `N` neighbouring outputs (4 channels each) from the `R` valid input rows, every column
/// tap inside the input: output `j` reads columns `S·j .. S·j + 3` of each row (`rows[r]`
/// points at the block's first column), filter row `wr[r]`. Advances the row pointers by
/// `S·N` input columns and `o` by `N` output columns.
///
/// # Safety
/// The `R` rows hold `S·(N − 1) + 3` readable columns (4 floats each) from the pointers, and
/// `o` has `N` writable columns; Neon available (AArch64 baseline).
#[inline(always)]
unsafe fn block<const R: usize, const N: usize, const S: usize, const CLAMP: bool>(
    rows: &mut [*const f32; R],
    wr: &[[float32x4_t; 3]; R],
    step: usize,
    bv: float32x4_t,
    rg: Range,
    o: &mut *mut f32,
) {
    // SAFETY: the caller's contract covers every load and store below.
    unsafe {
        let mut a = [bv; N];
        // The wide blocks: one `asm!` per row (see `row_s1n8`).
        if let (1, Ok(a8)) = (S, <&mut [float32x4_t; 8]>::try_from(&mut a[..])) {
            rows.iter_mut()
                .zip(wr)
                .for_each(|(q, w)| row_s1n8(a8, q, w, step));
        } else if let (2, Ok(a8)) = (S, <&mut [float32x4_t; 8]>::try_from(&mut a[..])) {
            rows.iter_mut()
                .zip(wr)
                .for_each(|(q, w)| row_s2n8(a8, q, w, step));
        } else if let (1, Ok(a4)) = (S, <&mut [float32x4_t; 4]>::try_from(&mut a[..])) {
            rows.iter_mut()
                .zip(wr)
                .for_each(|(q, w)| row_s1n4(a4, q, w, step));
        } else if let (2, Ok(a4)) = (S, <&mut [float32x4_t; 4]>::try_from(&mut a[..])) {
            rows.iter_mut()
                .zip(wr)
                .for_each(|(q, w)| row_s2n4(a4, q, w, step));
        } else {
            // The 1- and 2-output tails.
            for (q, w) in rows.iter_mut().zip(wr) {
                let x = |i: usize| vld1q_f32(q.byte_add(i * step));
                for (j, aj) in a.iter_mut().enumerate() {
                    *aj = vfmaq_f32(*aj, x(S * j), w[0]);
                    *aj = vfmaq_f32(*aj, x(S * j + 1), w[1]);
                    *aj = vfmaq_f32(*aj, x(S * j + 2), w[2]);
                }
                *q = q.byte_add(S * N * step);
            }
        }
        for &aj in a.iter() {
            // SAFETY: `*o` has a writable output column (caller); post-indexed store.
            core::arch::asm!(
                "st1 {{{v:v}.4s}}, [{o}], {step}",
                v = in(vreg) fin::<CLAMP>(aj, rg),
                o = inout(reg) *o,
                step = in(reg) step,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// The interior columns of one output row from `R` valid rows, in blocks of 8, 4, 2 and 1
/// outputs (`n` outputs from `o`; `rows` at the first one's first column).
///
/// # Safety
/// As [`block`] for every block: the rows hold the columns of those `n` outputs.
#[inline(always)]
unsafe fn interior<const R: usize, const S: usize, const CLAMP: bool>(
    mut rows: [*const f32; R],
    wr: &[[float32x4_t; 3]; R],
    step: usize,
    bv: float32x4_t,
    rg: Range,
    mut o: *mut f32,
    mut n: usize,
) {
    // SAFETY: blocks cover the n outputs exactly (the caller's contract).
    unsafe {
        while n >= 8 {
            block::<R, 8, S, CLAMP>(&mut rows, wr, step, bv, rg, &mut o);
            n -= 8;
        }
        while n >= 4 {
            block::<R, 4, S, CLAMP>(&mut rows, wr, step, bv, rg, &mut o);
            n -= 4;
        }
        if n >= 2 {
            block::<R, 2, S, CLAMP>(&mut rows, wr, step, bv, rg, &mut o);
            n -= 2;
        }
        if n == 1 {
            block::<R, 1, S, CLAMP>(&mut rows, wr, step, bv, rg, &mut o);
        }
    }
}

/// One border output from the `R` valid rows: column taps `KA .. KB` of each filter row,
/// reading `KB − KA` neighbouring input columns from `rows[r]` (the column tap `KA` reads).
///
/// # Safety
/// Each row pointer holds `KB − KA` readable columns (`step` bytes apart), `o` one writable
/// output column.
#[inline(always)]
unsafe fn edge<const R: usize, const KA: usize, const KB: usize, const CLAMP: bool>(
    rows: &[*const f32; R],
    wr: &[[float32x4_t; 3]; R],
    step: usize,
    bv: float32x4_t,
    rg: Range,
    o: *mut f32,
) {
    // SAFETY: the caller's contract covers the loads and the store.
    unsafe {
        let mut a = bv;
        for (q, w) in rows.iter().zip(wr) {
            for (t, wt) in w.iter().enumerate().take(KB).skip(KA) {
                a = vfmaq_f32(a, vld1q_f32(q.byte_add((t - KA) * step)), *wt);
            }
        }
        vst1q_f32(o, fin::<CLAMP>(a, rg));
    }
}

/// One border output column `e`: only its taps inside the input.
///
/// # Safety
/// `rows` point at input column 0 of the `R` valid rows, `o` at output column 0 of the
/// row; `e` comes from [`Geo::edge`] of this geometry (so its columns are inside the rows).
#[inline(always)]
unsafe fn border<const R: usize, const CLAMP: bool>(
    rows: &[*const f32; R],
    wr: &[[float32x4_t; 3]; R],
    step: usize,
    e: Edge,
    bv: float32x4_t,
    rg: Range,
    o: *mut f32,
) {
    // SAFETY: taps ka .. kb read input columns inside 0 .. in_w (`Geo::edge`); the output
    // column is in the row (caller).
    unsafe {
        let o = o.byte_add(e.out);
        let q = rows.map(|r| r.byte_add(e.input));
        match (e.ka, e.kb) {
            (0, 3) => edge::<R, 0, 3, CLAMP>(&q, wr, step, bv, rg, o),
            (1, 3) => edge::<R, 1, 3, CLAMP>(&q, wr, step, bv, rg, o),
            (2, 3) => edge::<R, 2, 3, CLAMP>(&q, wr, step, bv, rg, o),
            (0, 2) => edge::<R, 0, 2, CLAMP>(&q, wr, step, bv, rg, o),
            (1, 2) => edge::<R, 1, 2, CLAMP>(&q, wr, step, bv, rg, o),
            (0, 1) => edge::<R, 0, 1, CLAMP>(&q, wr, step, bv, rg, o),
            _ => vst1q_f32(o, fin::<CLAMP>(bv, rg)),
        }
    }
}

/// One output row, one 4-channel block: left border columns, interior blocks, right
/// border columns.
///
/// # Safety
/// `rows` point at input column 0 of the `R` valid input rows (each `g.in_w` columns
/// readable), `o` at output column 0 of a row of `g.out_w` writable columns.
#[inline(always)]
unsafe fn out_row<const R: usize, const S: usize, const CLAMP: bool>(
    rows: [*const f32; R],
    wr: &[[float32x4_t; 3]; R],
    g: &Geo,
    bv: float32x4_t,
    rg: Range,
    o: *mut f32,
) {
    // SAFETY: border columns are below `lo` and from `hi` (each < out_w), worked out by
    // `Geo::edge`; the interior outputs lo .. hi read input columns
    // S·lo − pad_left .. S·(hi − 1) + 3 − pad_left, inside the row by `valid_cols`.
    unsafe {
        let step = g.step;
        match &g.edges {
            Some((edges, n)) => {
                for e in &edges[..*n] {
                    border::<R, CLAMP>(&rows, wr, step, *e, bv, rg, o);
                }
            }
            None => {
                for ox in (0..g.lo).chain(g.hi..g.out_w) {
                    border::<R, CLAMP>(&rows, wr, step, g.edge(ox, S), bv, rg, o);
                }
            }
        }
        if g.lo < g.hi {
            let col = step * (S * g.lo - g.pad_left);
            let start = rows.map(|r| r.byte_add(col));
            let o0 = o.byte_add(step * g.lo);
            interior::<R, S, CLAMP>(start, wr, step, bv, rg, o0, g.hi - g.lo);
        }
    }
}

/// Computes one image (`out`: `[OH, OW, OC]`, `OC = C`; `img`: its first input pixel) of a
/// call that `geometry_3x3::accepts` took. Output rows go in tiles (about [`TILE_BYTES`] of
/// input each); in a tile, channels go 4 at a time with the filter vectors in registers
/// across all of its rows: the interior columns in blocks of neighbouring outputs that share
/// their input columns, the border columns with only their valid taps, each row with only the
/// input rows that exist; the channel tail `C mod 4` in scalar code. The clamp is applied as
/// each vector is stored.
pub(super) fn image(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    img: usize,
    range: Option<(f32, f32)>,
) {
    let s = p.stride_w;
    match (
        range.filter(|&(lo, hi)| lo != f32::NEG_INFINITY || hi != f32::INFINITY),
        s,
    ) {
        (Some(r), 1) => image_with::<true, 1>(p, x, w, bias, out, img, r),
        (Some(r), _) => image_with::<true, 2>(p, x, w, bias, out, img, r),
        (None, 1) => image_with::<false, 1>(p, x, w, bias, out, img, (0.0, 0.0)),
        (None, _) => image_with::<false, 2>(p, x, w, bias, out, img, (0.0, 0.0)),
    }
}

/// Most output rows in one tile (their valid input rows are worked out once per tile).
const TILE_ROWS: usize = 64;

/// [`image`] once its geometry and lengths are checked (`img`: the image's first input
/// pixel), at stride `S` across, clamped into `range` when `CLAMP`.
fn image_with<const CLAMP: bool, const S: usize>(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    img: usize,
    range: (f32, f32),
) {
    let (c, ow) = (p.in_c, p.out_w);
    let (lo, _) = p.valid_cols(0);
    let (_, hi) = p.valid_cols(2);
    let mut g = Geo {
        lo,
        hi: hi.max(lo),
        out_w: ow,
        in_w: p.in_w,
        pad_left: p.pad_left,
        step: c * 4,
        edges: None,
    };
    let nedges = g.lo + (ow - g.hi);
    if nedges <= MAX_EDGES {
        let mut edges = [Edge::default(); MAX_EDGES];
        for (e, ox) in edges.iter_mut().zip((0..g.lo).chain(g.hi..ow)) {
            *e = g.edge(ox, S);
        }
        g.edges = Some((edges, nedges));
    }
    // Offset of input pixel (iy, 0) of this image, in floats.
    let at = |iy: usize| (img + iy * p.in_w) * c;
    let cv = c - c % 4;
    let row_bytes = (p.in_w * c * 4).saturating_mul(p.stride_h).max(1);
    let tile = (TILE_BYTES / row_bytes).clamp(1, TILE_ROWS);
    let mut r0 = 0;
    while r0 < p.out_h {
        let r1 = (r0 + tile).min(p.out_h);
        // Per row of the tile: how many kernel rows are valid, the first of them, and the
        // input offset (floats) of the input row it reads (valid rows are consecutive).
        let mut rows = [(0usize, 0usize, 0usize); TILE_ROWS];
        for (info, oy) in rows.iter_mut().zip(r0..r1) {
            let (ky0, nr, iy0) = valid_rows(p, oy);
            *info = (nr, ky0, at(iy0));
        }
        let row_f = p.in_w * c;
        for c0 in (0..cv).step_by(4) {
            // SAFETY: (whole block) input reads are inside rows iy < H (`in_row`) of this
            // image at columns < W (`out_row`'s contract, met by `Geo` from
            // `valid_cols`), channel c0 .. c0 + 4 ≤ C, so below the image's end ≤ x.len()
            // (checked by `image`); filter reads w[t·C + c0 .. + 4], t < 9 (w.len() ≥ 9C);
            // bias reads c0 .. c0 + 4 ≤ C; output writes out[(oy·OW + ox)·C + c0 .. + 4],
            // oy < OH, ox < OW (out.len() ≥ OH·OW·C). Neon is in the AArch64 baseline.
            unsafe {
                let wp = w.as_ptr().add(c0);
                let wt: [float32x4_t; 9] = core::array::from_fn(|t| vld1q_f32(wp.add(t * c)));
                let bv = match bias {
                    Some(bb) => vld1q_f32(bb.as_ptr().add(c0)),
                    None => vdupq_n_f32(0.0),
                };
                let rg = Range {
                    lo: vdupq_n_f32(range.0),
                    hi: vdupq_n_f32(range.1),
                };
                let xb = x.as_ptr().add(c0);
                let mut o = out.as_mut_ptr().add(r0 * ow * c + c0);
                for &(nr, ky0, off) in &rows[..r1 - r0] {
                    let r = xb.add(off);
                    let wrow = |ky: usize| [wt[3 * ky], wt[3 * ky + 1], wt[3 * ky + 2]];
                    match nr {
                        3 => out_row::<3, S, CLAMP>(
                            [r, r.add(row_f), r.add(2 * row_f)],
                            &[wrow(0), wrow(1), wrow(2)],
                            &g,
                            bv,
                            rg,
                            o,
                        ),
                        2 => out_row::<2, S, CLAMP>(
                            [r, r.add(row_f)],
                            &[wrow(ky0), wrow(ky0 + 1)],
                            &g,
                            bv,
                            rg,
                            o,
                        ),
                        1 => out_row::<1, S, CLAMP>([r], &[wrow(ky0)], &g, bv, rg, o),
                        _ => (0..ow).for_each(|j| vst1q_f32(o.add(j * c), fin::<CLAMP>(bv, rg))),
                    }
                    o = o.add(ow * c);
                }
            }
        }
        // Channel tail, every column of the tile's rows.
        for oy in r0..r1 {
            for ox in 0..ow {
                for ch in cv..c {
                    let mut a = bias.map_or(0.0, |bb| bb[ch]);
                    for ky in 0..3 {
                        let Some(iy) = p.in_row(oy, ky) else { continue };
                        for kx in 0..3 {
                            if let Some(ix) = p.in_col(ox, kx) {
                                a += x[at(iy) + ix * c + ch] * w[(3 * ky + kx) * c + ch];
                            }
                        }
                    }
                    if CLAMP {
                        a = a.max(range.0).min(range.1);
                    }
                    out[(oy * ow + ox) * c + ch] = a;
                }
            }
        }
        r0 = r1;
    }
}
