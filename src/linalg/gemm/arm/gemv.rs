//! Neon GEMV for `M = 1` (the decode case): `y = alpha·x·B (+ beta·y) (+ bias)`.
//!
//! Packing B for a single row of A would cost as much as the product itself, and an `MR`-row
//! register tile would waste `MR − 1` rows, so `gemm::gemv` sends `M = 1` products with a
//! unit-stride operand here (whenever a hand-written kernel is selected on AArch64). Two
//! layouts:
//!
//! * B row-major (`B(p, j) = b[p·rs + j]`, e.g. `mm` by a `[k, n]` matrix): 48 columns at a
//!   time in 12 accumulators; per depth step three 4-register `ld1` (post-increment, the last
//!   one jumps to the next row) and 12 `fmla` by a lane of x — 48 FMA in 63 instructions per
//!   4 steps (0.76; loads bound it).
//! * B column-major (`B(p, j) = b[p + j·cs]`, `linear`'s transposed weight): dot products of
//!   x with 4 columns at a time, reduced at the end.
//!
//! With SME2 selected (the `sme2` argument), a row-major B goes to [`sme2_rows`] whole: blocks
//! of 16·SVL/32 columns, the last one narrower under predicates. Multi-vector
//! `fmla za.s[w8, g, vgx4]` by an indexed element of x accumulates four 4-vector column groups
//! in the ZA array, so one depth step is four 4-vector loads of the B row and four FMLAs —
//! 16·(SVL/32) MACs per instruction pair instead of Neon's 4 per `fmla`. Every column is
//! computed the same way whatever block it falls in (ZA zeroed, fused multiply-adds in depth
//! order, the same epilogue), so any split by columns is bit-identical to one call.

use core::arch::aarch64::*;

/// Scalar epilogue for one output element.
#[inline(always)]
fn finish(acc: f32, y: &mut f32, alpha: f32, beta: f32, bias: Option<&[f32]>, j: usize) {
    let mut v = alpha * acc;
    if beta != 0.0 {
        v += beta * *y;
    }
    if let Some(b) = bias {
        v += b[j];
    }
    *y = v;
}

/// `y[j] = alpha·Σ_p x[p]·B(p, j) (+ beta·y[j] if beta ≠ 0) (+ bias[j])` for `j < n`, with
/// `B(p, j) = b[p·brs + j·bcs]`. Returns `false` (and touches nothing) when the layout is
/// not handled here (neither B stride is 1) or the slices are too short.
#[allow(clippy::too_many_arguments)]
pub fn sgemv(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    bcs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    sme2: bool,
) -> bool {
    if !accepts(k, n, x, b, brs, bcs, y, bias) {
        return false;
    }
    if bcs == 1 {
        // The ID-register check keeps this safe function sound whatever the caller passes.
        if sme2 && crate::linalg::cpu::has_sme2() {
            sme2_rows(k, n, x, b, brs, y, alpha, beta, bias);
        } else {
            rows(k, n, x, b, brs, y, alpha, beta, bias);
        }
        true
    } else if brs == 1 {
        cols(k, n, x, b, bcs, y, alpha, beta, bias);
        true
    } else {
        false
    }
}

/// Whether [`sgemv`] computes this call (layout handled, slices long enough).
#[allow(clippy::too_many_arguments)]
pub fn accepts(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    bcs: usize,
    y: &[f32],
    bias: Option<&[f32]>,
) -> bool {
    if k == 0 || n == 0 || x.len() < k || y.len() < n || bias.is_some_and(|s| s.len() < n) {
        return false;
    }
    if bcs != 1 && brs != 1 {
        return false;
    }
    // Last element of B read: (k-1)·brs + (n-1)·bcs (checked arithmetic).
    let last = (k - 1)
        .checked_mul(brs)
        .zip((n - 1).checked_mul(bcs))
        .and_then(|(r, c)| r.checked_add(c));
    last.is_some_and(|l| l < b.len())
}

/// Columns per unit when one GEMV is split across cores: whole column blocks of the path that
/// [`sgemv`] takes (SME2 blocks, Neon 48-column blocks, 4-column dot products), so that a part
/// costs whole blocks and computes each column exactly as one core does.
pub fn split_unit(row_major: bool, sme2: bool) -> usize {
    if !row_major {
        return 4;
    }
    if sme2 && crate::linalg::cpu::has_sme2() {
        (4 * SME2_GROUPS * super::sme::svl_bytes() / 4).max(4)
    } else {
        48
    }
}

/// Columns per SME2 GEMV block: 4 groups of 4 vectors of `S = SVL/32` floats.
const SME2_GROUPS: usize = 4;

/// The SME2 GEMV over every column of a row-major B: blocks of `16·S` columns, the last one
/// `n mod 16·S` wide under predicates. Preconditions as [`rows`], and the CPU has SME2
/// (checked by [`sgemv`]).
#[allow(clippy::too_many_arguments)]
fn sme2_rows(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let s = super::sme::svl_bytes() / 4;
    let block = 4 * SME2_GROUPS * s;
    if block == 0 {
        // Not reached (SME2 present): SVL is at least 128 bits.
        return rows(k, n, x, b, brs, y, alpha, beta, bias);
    }
    for j in (0..n).step_by(block) {
        let w = block.min(n - j);
        // SAFETY: columns j..j+w ≤ n of rows p < k lie in `b` ((k-1)·brs + n - 1 <
        // b.len(), precondition), x has k floats, y and bias (if any) n ≥ j + w; the
        // block touches no column at or past w (predicated loads and stores); SME2 is present
        // (precondition, checked by `sgemv` from the ID registers) and we are not in
        // streaming mode (Rust code never is).
        unsafe {
            sme2_block(
                k,
                x.as_ptr(),
                b.as_ptr().add(j),
                brs * 4,
                y.as_mut_ptr().add(j),
                (w, 4 * s),
                alpha,
                beta,
                bias.map_or(core::ptr::null(), |v| v.as_ptr().add(j)),
            )
        };
    }
}

/// One SME2 GEMV step `$j` (element `$j` of the x quad in z0): the B row (four 4-vector
/// loads = 16·S floats), next row, four multi-vector FMLAs into ZA groups 0–3.
macro_rules! gemv_step {
    ($j:literal) => {
        concat!(
            "ld1w {{z16.s-z19.s}}, pn9/z, [{b}, #0, mul vl]\n",
            "ld1w {{z20.s-z23.s}}, pn10/z, [{b}, #4, mul vl]\n",
            "ld1w {{z24.s-z27.s}}, pn11/z, [{b}, #8, mul vl]\n",
            "ld1w {{z28.s-z31.s}}, pn12/z, [{b}, #12, mul vl]\n",
            "add {b}, {b}, {brs}\n",
            "fmla za.s[w8, 0, vgx4], {{z16.s-z19.s}}, z0.s[",
            $j,
            "]\n",
            "fmla za.s[w8, 1, vgx4], {{z20.s-z23.s}}, z0.s[",
            $j,
            "]\n",
            "fmla za.s[w8, 2, vgx4], {{z24.s-z27.s}}, z0.s[",
            $j,
            "]\n",
            "fmla za.s[w8, 3, vgx4], {{z28.s-z31.s}}, z0.s[",
            $j,
            "]",
        )
    };
}

/// Epilogue of ZA group `$g`: its 4 vectors (columns `4S·g ..`) to z16–z19, times alpha,
/// plus beta·y and the bias, stored to y; loads and stores under the group's predicate
/// `pn$p`.
macro_rules! gemv_store {
    ($g:literal, $o:literal, $p:literal) => {
        concat!(
            "mova {{z16.d-z19.d}}, za.d[w8, ",
            $g,
            ", vgx4]\n",
            "fmul z16.s, z16.s, z1.s\n",
            "fmul z17.s, z17.s, z1.s\n",
            "fmul z18.s, z18.s, z1.s\n",
            "fmul z19.s, z19.s, z1.s\n",
            "cbz {betaf}, 6",
            $g,
            "f\n",
            "ld1w {{z20.s-z23.s}}, pn",
            $p,
            "/z, [{y}, #",
            $o,
            ", mul vl]\n",
            "fmla z16.s, p0/m, z20.s, z2.s\n",
            "fmla z17.s, p0/m, z21.s, z2.s\n",
            "fmla z18.s, p0/m, z22.s, z2.s\n",
            "fmla z19.s, p0/m, z23.s, z2.s\n",
            "6",
            $g,
            ":\n",
            "cbz {bias}, 7",
            $g,
            "f\n",
            "ld1w {{z20.s-z23.s}}, pn",
            $p,
            "/z, [{bias}, #",
            $o,
            ", mul vl]\n",
            "fadd z16.s, z16.s, z20.s\n",
            "fadd z17.s, z17.s, z21.s\n",
            "fadd z18.s, z18.s, z22.s\n",
            "fadd z19.s, z19.s, z23.s\n",
            "7",
            $g,
            ":\n",
            "st1w {{z16.s-z19.s}}, pn",
            $p,
            ", [{y}, #",
            $o,
            ", mul vl]",
        )
    };
}

/// `y[l] = alpha·Σ_p x[p]·b[p·brs + l] (+ beta·y[l]) (+ bias[l])` for `l < w` (`(w, g)`:
/// `w ≤ 16·S` columns, `g = 4·S` columns per ZA group); columns from `w` on are neither read
/// nor written (each group's loads and stores are predicated by `whilelt … vlx4`).
///
/// # Safety
/// `x` valid for `k ≥ 1` reads, `b + p·brs/4 + l` for `p < k`, `l < w` (`brs` in bytes),
/// `y` for `w` reads and writes, `bias` null or valid for `w` reads, `g = 4·SVL/32`; the CPU
/// has SME2 and the caller is not in streaming mode.
#[allow(clippy::too_many_arguments)]
unsafe fn sme2_block(
    k: usize,
    x: *const f32,
    b: *const f32,
    brs: usize,
    y: *mut f32,
    (w, g): (usize, usize),
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: the loads read x[0..k] (ld1rqw of 4 floats at x + 4q for 4q + 4 ≤ k, ld1rw for
    // the tail) and the first w floats of each B row p < k (group predicates pn9–pn12 are
    // true for columns below w only); y/bias accesses are the w floats the caller vouches for (y read only when beta ≠ 0, bias only when non-null). Streaming
    // mode and ZA are entered and left inside the block; every vector/predicate register,
    // w8 and the flags are declared clobbered.
    unsafe {
        super::sme::streaming_asm!(
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.s",
            "mov {t}, #0",
            "whilelt pn9.s, {t}, {w}, vlx4",
            "add {t}, {t}, {g}",
            "whilelt pn10.s, {t}, {w}, vlx4",
            "add {t}, {t}, {g}",
            "whilelt pn11.s, {t}, {w}, vlx4",
            "add {t}, {t}, {g}",
            "whilelt pn12.s, {t}, {w}, vlx4",
            "zero {{za}}",
            "mov w8, #0",
            "lsr {n}, {k}, #2",
            "cbz {n}, 3f",
            "2:",
            "ld1rqw {{z0.s}}, p0/z, [{x}]",
            "add {x}, {x}, #16",
            gemv_step!("0"),
            gemv_step!("1"),
            gemv_step!("2"),
            gemv_step!("3"),
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "3:",
            "ands {k}, {k}, #3",
            "b.eq 5f",
            "4:",
            "ld1rw {{z0.s}}, p0/z, [{x}]",
            "add {x}, {x}, #4",
            gemv_step!("0"),
            "subs {k}, {k}, #1",
            "b.ne 4b",
            "5:",
            "dup z1.s, {alpha:w}",
            "dup z2.s, {beta:w}",
            gemv_store!("0", "0", "9"),
            gemv_store!("1", "4", "10"),
            gemv_store!("2", "8", "11"),
            gemv_store!("3", "12", "12"),
            "smstop",
            k = inout(reg) k => _,
            x = inout(reg) x => _,
            b = inout(reg) b => _,
            brs = in(reg) brs,
            y = in(reg) y,
            alpha = in(reg) alpha.to_bits(),
            beta = in(reg) beta.to_bits(),
            betaf = in(reg) (beta != 0.0) as u64,
            bias = in(reg) bias,
            n = out(reg) _,
            t = out(reg) _,
            w = in(reg) w,
            g = in(reg) g,
            out("x8") _,
        );
    }
}

/// Row-major B, in blocks of 48 columns, then 16, 4 and 1. Preconditions (checked by
/// [`sgemv`]): `x.len() ≥ k`, `y.len() ≥ n`,
/// `(k-1)·brs + n - 1 < b.len()`, bias ≥ n.
#[allow(clippy::too_many_arguments)]
fn rows(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    brs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let mut j = 0;
    let mut t = [0.0f32; 48];
    while j + 48 <= n {
        // SAFETY: columns j..j+48 ≤ n of rows p < k lie in `b` (precondition), x has k floats;
        // `block48` reads exactly those.
        unsafe { block48(k, x.as_ptr(), b.as_ptr().add(j), brs, &mut t) };
        for (l, &v) in t.iter().enumerate() {
            finish(v, &mut y[j + l], alpha, beta, bias, j + l);
        }
        j += 48;
    }
    // Columns past the last 48-block: 16 at a time (four accumulators: a 32-column tail took
    // twice a 48-block's instructions in fours), then fours, then one by one. Every column's
    // sum is the same fused multiply-add chain in depth order whichever loop computes it.
    while j + 16 <= n {
        let mut acc = [0.0f32; 16];
        // SAFETY: columns j..j+16 ≤ n of rows p < k are in `b`; Neon is baseline on AArch64.
        unsafe {
            let mut a = [vdupq_n_f32(0.0); 4];
            for (p, &xp) in x[..k].iter().enumerate() {
                let bp = b.as_ptr().add(p * brs + j);
                for (q, aq) in a.iter_mut().enumerate() {
                    *aq = vfmaq_n_f32(*aq, vld1q_f32(bp.add(4 * q)), xp);
                }
            }
            for (q, aq) in a.iter().enumerate() {
                vst1q_f32(acc.as_mut_ptr().add(4 * q), *aq);
            }
        }
        for (l, &v) in acc.iter().enumerate() {
            finish(v, &mut y[j + l], alpha, beta, bias, j + l);
        }
        j += 16;
    }
    while j + 4 <= n {
        let mut acc = [0.0f32; 4];
        // SAFETY: columns j..j+4 ≤ n of rows p < k are in `b`; Neon is baseline on AArch64.
        unsafe {
            let mut a = vdupq_n_f32(0.0);
            for (p, &xp) in x[..k].iter().enumerate() {
                a = vfmaq_n_f32(a, vld1q_f32(b.as_ptr().add(p * brs + j)), xp);
            }
            vst1q_f32(acc.as_mut_ptr(), a);
        }
        for (l, &v) in acc.iter().enumerate() {
            finish(v, &mut y[j + l], alpha, beta, bias, j + l);
        }
        j += 4;
    }
    while j < n {
        let mut s = 0.0f32;
        for (p, &xp) in x[..k].iter().enumerate() {
            s += xp * b[p * brs + j];
        }
        finish(s, &mut y[j], alpha, beta, bias, j);
        j += 1;
    }
}

/// 48 columns of a row-major B: `out[l] = Σ_p x[p]·b[p·brs + l]`.
///
/// # Safety
/// `x` valid for `k` reads; `b + p·brs + l` valid for reads for `p < k`, `l < 48`.
#[inline(always)]
unsafe fn block48(k: usize, x: *const f32, b: *const f32, brs: usize, out: &mut [f32; 48]) {
    // SAFETY: (whole body) the loads stay inside the rows/columns the caller vouches for; the
    // asm reads 48 floats at `bp` (row p) and moves `bp` to row p + 1 (adj = brs·4 − 128).
    unsafe {
        let mut acc = [vdupq_n_f32(0.0); 12];
        let mut bp = b;
        let adj = (brs * 4) as isize - 128;
        macro_rules! step {
            ($xq:expr, $l:literal) => {{
                let (b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11): (
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                );
                core::arch::asm!(
                    "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{bp}], #64",
                    "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{bp}], #64",
                    "ld1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{bp}], {adj}",
                    bp = inout(reg) bp,
                    adj = in(reg) adj,
                    out("v0") b0, out("v1") b1, out("v2") b2, out("v3") b3,
                    out("v4") b4, out("v5") b5, out("v6") b6, out("v7") b7,
                    out("v16") b8, out("v17") b9, out("v18") b10, out("v19") b11,
                    options(nostack, readonly, preserves_flags),
                );
                let bv = [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11];
                for v in 0..12 {
                    acc[v] = vfmaq_laneq_f32::<$l>(acc[v], bv[v], $xq);
                }
            }};
        }
        let mut p = 0;
        while p + 4 <= k {
            let xq = vld1q_f32(x.add(p));
            step!(xq, 0);
            step!(xq, 1);
            step!(xq, 2);
            step!(xq, 3);
            p += 4;
        }
        while p < k {
            let xq = vld1q_dup_f32(x.add(p));
            step!(xq, 0);
            p += 1;
        }
        for (v, a) in acc.iter().enumerate() {
            vst1q_f32(out.as_mut_ptr().add(4 * v), *a);
        }
    }
}

/// Column-major B (`B(p, j) = b[p + j·cs]`, e.g. a `linear` / fully-connected weight
/// `[N, K]`): dot products, 4 columns at a time sharing each load of `x` (4 accumulators,
/// 16 depth steps per iteration with one 4-register `ld1` of x and of each column), reduced
/// pairwise at the end.
#[allow(clippy::too_many_arguments)]
fn cols(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    cs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let k4 = k - k % 4;
    let mut j = 0;
    while j + 4 <= n {
        let c: [&[f32]; 4] = core::array::from_fn(|q| &b[(j + q) * cs..(j + q) * cs + k]);
        // SAFETY: `x` and the four column slices hold ≥ k floats; every load of 16 floats
        // starts at p ≤ k4 − 16 (16-step body: p + 16 ≤ k4), every 4-float load at
        // p ≤ k4 − 4 (8-step body: p + 8 ≤ k4), so all end at or before k.
        let mut s = unsafe {
            let mut acc = [vdupq_n_f32(0.0); 4];
            // 16 depth steps per iteration: x and each column with one post-indexed
            // 4-register `ld1`, 16 `fmla` (21 instructions per 64 multiply-adds, plus the
            // loop's two).
            let blocks = k4 / 16;
            let mut p = blocks * 16;
            if blocks > 0 {
                let (mut xp, mut p0, mut p1, mut p2, mut p3) = (
                    x.as_ptr(),
                    c[0].as_ptr(),
                    c[1].as_ptr(),
                    c[2].as_ptr(),
                    c[3].as_ptr(),
                );
                let [mut a0, mut a1, mut a2, mut a3] = acc;
                let mut left = blocks;
                core::arch::asm!(
                    "2:",
                    "ld1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{xp}], #64",
                    "ld1 {{v20.4s, v21.4s, v22.4s, v23.4s}}, [{p0}], #64",
                    "ld1 {{v24.4s, v25.4s, v26.4s, v27.4s}}, [{p1}], #64",
                    "fmla {a0:v}.4s, v16.4s, v20.4s",
                    "fmla {a1:v}.4s, v16.4s, v24.4s",
                    "fmla {a0:v}.4s, v17.4s, v21.4s",
                    "fmla {a1:v}.4s, v17.4s, v25.4s",
                    "fmla {a0:v}.4s, v18.4s, v22.4s",
                    "fmla {a1:v}.4s, v18.4s, v26.4s",
                    "fmla {a0:v}.4s, v19.4s, v23.4s",
                    "fmla {a1:v}.4s, v19.4s, v27.4s",
                    "ld1 {{v20.4s, v21.4s, v22.4s, v23.4s}}, [{p2}], #64",
                    "ld1 {{v24.4s, v25.4s, v26.4s, v27.4s}}, [{p3}], #64",
                    "fmla {a2:v}.4s, v16.4s, v20.4s",
                    "fmla {a3:v}.4s, v16.4s, v24.4s",
                    "fmla {a2:v}.4s, v17.4s, v21.4s",
                    "fmla {a3:v}.4s, v17.4s, v25.4s",
                    "fmla {a2:v}.4s, v18.4s, v22.4s",
                    "fmla {a3:v}.4s, v18.4s, v26.4s",
                    "fmla {a2:v}.4s, v19.4s, v23.4s",
                    "fmla {a3:v}.4s, v19.4s, v27.4s",
                    "subs {left}, {left}, #1",
                    "b.ne 2b",
                    xp = inout(reg) xp,
                    p0 = inout(reg) p0,
                    p1 = inout(reg) p1,
                    p2 = inout(reg) p2,
                    p3 = inout(reg) p3,
                    left = inout(reg) left,
                    a0 = inout(vreg) a0,
                    a1 = inout(vreg) a1,
                    a2 = inout(vreg) a2,
                    a3 = inout(vreg) a3,
                    out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _,
                    out("v24") _, out("v25") _, out("v26") _, out("v27") _,
                    options(nostack, readonly),
                );
                let _ = (xp, p0, p1, p2, p3, left);
                acc = [a0, a1, a2, a3];
            }
            while p + 8 <= k4 {
                let x0 = vld1q_f32(x.as_ptr().add(p));
                let x1 = vld1q_f32(x.as_ptr().add(p + 4));
                for (a, col) in acc.iter_mut().zip(&c) {
                    *a = vfmaq_f32(*a, x0, vld1q_f32(col.as_ptr().add(p)));
                    *a = vfmaq_f32(*a, x1, vld1q_f32(col.as_ptr().add(p + 4)));
                }
                p += 8;
            }
            if p < k4 {
                let x0 = vld1q_f32(x.as_ptr().add(p));
                for (a, col) in acc.iter_mut().zip(&c) {
                    *a = vfmaq_f32(*a, x0, vld1q_f32(col.as_ptr().add(p)));
                }
            }
            let s = vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3]));
            let mut out = [0.0f32; 4];
            vst1q_f32(out.as_mut_ptr(), s);
            out
        };
        for p in k4..k {
            for (q, col) in c.iter().enumerate() {
                s[q] += x[p] * col[p];
            }
        }
        finish_block(
            &s,
            &mut y[j..j + 4],
            alpha,
            beta,
            bias.map(|b| &b[j..j + 4]),
        );
        j += 4;
    }
    while j < n {
        let col = &b[j * cs..j * cs + k];
        let t: f32 = x[..k].iter().zip(col).map(|(a, b)| a * b).sum();
        finish(t, &mut y[j], alpha, beta, bias, j);
        j += 1;
    }
}

/// Panel-major B, as `PackedB` lays it out (whole-depth panels of `nr` columns, each a
/// `k × nr` row-major block, consecutive, the last one zero-padded to `nr`): `y[j] = alpha·Σ_p
/// x[p]·B(p, j) (+ beta·y[j]) (+ bias[j])` for `j < n`. Groups of `48 / nr` panels (12
/// accumulators) go through [`panel_group`]. Handles `nr` ∈ {8, 12, 16}; returns `false`,
/// touching nothing, for another `nr` or slices too short (`b` needs `⌈n/nr⌉·k·nr` floats).
/// With SME2 selected (`sme2`) and `nr = 2·SVL/32`, [`sme2_panels`] computes them instead.
#[allow(clippy::too_many_arguments)]
pub fn panels(
    k: usize,
    n: usize,
    nr: usize,
    x: &[f32],
    b: &[f32],
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    sme2: bool,
) -> bool {
    if !panel_widths(nr, sme2)
        || k == 0
        || n == 0
        || x.len() < k
        || y.len() < n
        || bias.is_some_and(|s| s.len() < n)
    {
        return false;
    }
    let count = n.div_ceil(nr);
    if count.checked_mul(k * nr).is_none_or(|len| b.len() < len) {
        return false;
    }
    if sme2_panel_width(nr, sme2) {
        sme2_panels(k, n, nr, x, b, y, alpha, beta, bias);
        return true;
    }
    let per = 48 / nr;
    let mut t = [0.0f32; 48];
    let mut q = 0;
    while q < count {
        let g = per.min(count - q);
        // SAFETY: panels q..q+g < count lie in `b` (checked above: count·k·nr floats), each
        // k·nr floats from b + (q+g')·k·nr; x has k floats; `t` holds g·nr ≤ 48 floats.
        unsafe {
            let bq = b.as_ptr().add(q * k * nr);
            let (xp, tp) = (x.as_ptr(), t.as_mut_ptr());
            match (nr, g) {
                (8, 6) => panel_group::<2, 6>(k, xp, bq, tp),
                (8, 5) => panel_group::<2, 5>(k, xp, bq, tp),
                (8, 4) => panel_group::<2, 4>(k, xp, bq, tp),
                (8, 3) => panel_group::<2, 3>(k, xp, bq, tp),
                (8, 2) => panel_group::<2, 2>(k, xp, bq, tp),
                (8, _) => panel_group::<2, 1>(k, xp, bq, tp),
                (12, 4) => panel_group::<3, 4>(k, xp, bq, tp),
                (12, 3) => panel_group::<3, 3>(k, xp, bq, tp),
                (12, 2) => panel_group::<3, 2>(k, xp, bq, tp),
                (12, _) => panel_group::<3, 1>(k, xp, bq, tp),
                (_, 3) => panel_group::<4, 3>(k, xp, bq, tp),
                (_, 2) => panel_group::<4, 2>(k, xp, bq, tp),
                (_, _) => panel_group::<4, 1>(k, xp, bq, tp),
            }
        }
        let (j0, j1) = (q * nr, ((q + g) * nr).min(n));
        finish_block(
            &t[..j1 - j0],
            &mut y[j0..j1],
            alpha,
            beta,
            bias.map(|s| &s[j0..j1]),
        );
        q += g;
    }
    true
}

/// The panel widths [`panels`] handles.
/// The panel widths [`panels`] handles: 8, 12 and 16 (Neon), and with SME2 selected
/// (`sme2`) `2·SVL/32`.
pub fn panel_widths(nr: usize, sme2: bool) -> bool {
    matches!(nr, 8 | 12 | 16) || sme2_panel_width(nr, sme2)
}

/// Whether panels of `nr` columns go to [`sme2_panels`]: SME2 selected (`sme2`) and present,
/// and a panel row is two streaming vectors.
fn sme2_panel_width(nr: usize, sme2: bool) -> bool {
    sme2 && crate::linalg::cpu::has_sme2() && nr == 2 * super::sme::svl_bytes() / 4
}

/// The SME2 GEMV over packed panels of `nr = 2·S` columns (`S = SVL/32`), `count =
/// ⌈n/nr⌉` of them: blocks of 8, 4, 2 or 1 panels, panel `g` of a block accumulating in ZA
/// vector group `g` (`fmla za.s[w8, g, vgx2]` by a lane of x), so that a depth step of `G`
/// panels is `G` two-vector loads and `G` FMLAs. Every column is computed the same way in any
/// block (ZA zeroed, fused multiply-adds in depth order, one epilogue), so any split by whole
/// panels is bit-identical to one call. Preconditions (checked by [`panels`]): `b` holds
/// `count·k·nr` floats, `x` `k`, `y` and `bias` `n`; SME2 present.
#[allow(clippy::too_many_arguments)]
fn sme2_panels(
    k: usize,
    n: usize,
    nr: usize,
    x: &[f32],
    b: &[f32],
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) {
    let count = n.div_ceil(nr);
    let mut q = 0;
    while q < count {
        // The fewest instructions per depth step (2·G + 1) for the panels left.
        let g = match count - q {
            5.. => 8,
            3 | 4 => 4,
            r => r,
        };
        let (j0, j1) = (q * nr, ((q + g) * nr).min(n));
        let ops = PanelBlock {
            k,
            x: x.as_ptr(),
            // Panel q starts at q·k·nr < count·k·nr ≤ b.len(); column j0 < n ≤ y.len().
            b: b.as_ptr().wrapping_add(q * k * nr),
            stride: k * nr,
            nr,
            y: y.as_mut_ptr().wrapping_add(j0),
            w: j1 - j0,
            alpha,
            beta,
            bias: bias.map_or(core::ptr::null(), |v| v.as_ptr().wrapping_add(j0)),
        };
        // SAFETY: panels q..q+g' (g' = ⌈(j1 − j0)/nr⌉ ≤ g) lie in `b` (count·k·nr floats,
        // precondition), read only for columns below w = j1 − j0 (predicates); y and bias
        // hold n ≥ j1 floats; x holds k; SME2 is present and we are not in streaming mode.
        unsafe {
            match g {
                8 => ops.run8(),
                4 => ops.run4(),
                2 => ops.run2(),
                _ => ops.run1(),
            }
        }
        q += g;
    }
}

/// One block of [`sme2_panels`]: `G` panels from `b` (`stride` floats apart, rows of `nr =
/// 2·S` floats), the block's first `w ≤ G·nr` columns of y (and bias, null for none).
struct PanelBlock {
    k: usize,
    x: *const f32,
    b: *const f32,
    stride: usize,
    nr: usize,
    y: *mut f32,
    w: usize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
}

/// One depth step (lane `$j` of the x quad in z0) of a block of panels: each panel's row (two
/// vectors, predicate `pn$pn`, `{$o}` floats from `{b}`), the next row, each panel's FMLA
/// into ZA vector group `$g`.
macro_rules! panel_step {
    ($j:literal; $(($g:literal, $za:literal, $zb:literal, $pn:literal, $vo:literal, $o:ident)),+) => {
        concat!(
            $("ld1w {{z", $za, ".s-z", $zb, ".s}}, pn", $pn, "/z, [{b}, {", stringify!($o), "}, lsl #2]\n",)+
            "add {b}, {b}, {nr4}\n",
            $("fmla za.s[w8, ", $g, ", vgx2], {{z", $za, ".s-z", $zb, ".s}}, z0.s[", $j, "]\n",)+
        )
    };
}

/// The whole block: predicates, depth loop (four steps per x quad, then single steps), and
/// per panel the epilogue `alpha·acc (+ beta·y) (+ bias)` stored under its predicate.
macro_rules! panel_block {
    ($ops:expr; $(($g:literal, $za:literal, $zb:literal, $pn:literal, $vo:literal, $o:ident)),+) => {{
        let o = $ops;
        super::sme::streaming_asm!(
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.s",
            "mov {t}, #0",
            concat!($("whilelt pn", $pn, ".s, {t}, {w}, vlx2\n", "add {t}, {t}, {nrc}\n",)+),
            "zero {{za}}",
            "mov w8, #0",
            "lsr {n}, {k}, #2",
            "cbz {n}, 3f",
            "2:",
            "ld1rqw {{z0.s}}, p0/z, [{x}]",
            "add {x}, {x}, #16",
            panel_step!("0"; $(($g, $za, $zb, $pn, $vo, $o)),+),
            panel_step!("1"; $(($g, $za, $zb, $pn, $vo, $o)),+),
            panel_step!("2"; $(($g, $za, $zb, $pn, $vo, $o)),+),
            panel_step!("3"; $(($g, $za, $zb, $pn, $vo, $o)),+),
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "3:",
            "ands {k}, {k}, #3",
            "b.eq 5f",
            "4:",
            "ld1rw {{z0.s}}, p0/z, [{x}]",
            "add {x}, {x}, #4",
            panel_step!("0"; $(($g, $za, $zb, $pn, $vo, $o)),+),
            "subs {k}, {k}, #1",
            "b.ne 4b",
            "5:",
            "dup z1.s, {alpha:w}",
            "dup z2.s, {beta:w}",
            concat!($(
                "mova {{z16.d-z17.d}}, za.d[w8, ", $g, ", vgx2]\n",
                "fmul z16.s, z16.s, z1.s\n",
                "fmul z17.s, z17.s, z1.s\n",
                "cbz {betaf}, 6", $g, "f\n",
                "ld1w {{z20.s-z21.s}}, pn", $pn, "/z, [{y}, #", $vo, ", mul vl]\n",
                "fmla z16.s, p0/m, z20.s, z2.s\n",
                "fmla z17.s, p0/m, z21.s, z2.s\n",
                "6", $g, ":\n",
                "cbz {bias}, 7", $g, "f\n",
                "ld1w {{z20.s-z21.s}}, pn", $pn, "/z, [{bias}, #", $vo, ", mul vl]\n",
                "fadd z16.s, z16.s, z20.s\n",
                "fadd z17.s, z17.s, z21.s\n",
                "7", $g, ":\n",
                "st1w {{z16.s-z17.s}}, pn", $pn, ", [{y}, #", $vo, ", mul vl]\n",
            )+),
            "smstop",
            k = inout(reg) o.k => _,
            x = inout(reg) o.x => _,
            b = inout(reg) o.b => _,
            nr4 = in(reg) o.nr * 4,
            nrc = in(reg) o.nr,
            w = in(reg) o.w,
            y = in(reg) o.y,
            alpha = in(reg) o.alpha.to_bits(),
            beta = in(reg) o.beta.to_bits(),
            betaf = in(reg) u64::from(o.beta != 0.0),
            bias = in(reg) o.bias,
            n = out(reg) _,
            t = out(reg) _,
            $($o = in(reg) $g * o.stride,)+
            out("x8") _,
        );
    }};
}

impl PanelBlock {
    /// # Safety
    /// `x` valid for `k ≥ 1` reads; panel `g < G` (`b + g·stride`, `k` rows of `nr = 2·S`
    /// floats) valid for reads of its columns below `w − g·nr`; `y` for `w` reads and writes,
    /// `bias` null or valid for `w` reads; the CPU has SME2 and the caller is not in
    /// streaming mode. (Each `runG` is that contract for its `G`.)
    unsafe fn run8(&self) {
        // SAFETY: the caller's contract; loads and stores are predicated to columns below w,
        // streaming mode and ZA are entered and left here, every vector and predicate
        // register, w8 and the flags are declared clobbered.
        unsafe {
            panel_block!(self; (0, 16, 17, 8, 0, o0), (1, 18, 19, 9, 2, o1),
                (2, 20, 21, 10, 4, o2), (3, 22, 23, 11, 6, o3), (4, 24, 25, 12, 8, o4),
                (5, 26, 27, 13, 10, o5), (6, 28, 29, 14, 12, o6), (7, 30, 31, 15, 14, o7))
        }
    }
    /// # Safety
    /// As [`PanelBlock::run8`], `G = 4`.
    unsafe fn run4(&self) {
        // SAFETY: as in `run8`.
        unsafe {
            panel_block!(self; (0, 16, 17, 8, 0, o0), (1, 18, 19, 9, 2, o1),
                (2, 22, 23, 10, 4, o2), (3, 24, 25, 11, 6, o3))
        }
    }
    /// # Safety
    /// As [`PanelBlock::run8`], `G = 2`.
    unsafe fn run2(&self) {
        // SAFETY: as in `run8`.
        unsafe { panel_block!(self; (0, 22, 23, 8, 0, o0), (1, 24, 25, 9, 2, o1)) }
    }
    /// # Safety
    /// As [`PanelBlock::run8`], `G = 1`.
    unsafe fn run1(&self) {
        // SAFETY: as in `run8`.
        unsafe { panel_block!(self; (0, 22, 23, 8, 0, o0)) }
    }
}

/// `y[l] = alpha·acc[l] (+ beta·y[l]) (+ bias[l])`, rounded like [`finish`] (no fused
/// multiply-add), four columns per vector.
fn finish_block(acc: &[f32], y: &mut [f32], alpha: f32, beta: f32, bias: Option<&[f32]>) {
    let n = acc.len().min(y.len());
    let n4 = n - n % 4;
    for l in (0..n4).step_by(4) {
        // SAFETY: l + 4 ≤ n4 ≤ the lengths of acc and y (and of bias, which the caller
        // sized to y); Neon is baseline on AArch64.
        unsafe {
            let mut v = vmulq_n_f32(vld1q_f32(acc.as_ptr().add(l)), alpha);
            if beta != 0.0 {
                v = vaddq_f32(v, vmulq_n_f32(vld1q_f32(y.as_ptr().add(l)), beta));
            }
            if let Some(b) = bias {
                v = vaddq_f32(v, vld1q_f32(b[l..l + 4].as_ptr()));
            }
            vst1q_f32(y.as_mut_ptr().add(l), v);
        }
    }
    for l in n4..n {
        finish(acc[l], &mut y[l], alpha, beta, bias, l);
    }
}

/// `G` consecutive panels of `4·V` columns (`V` = 2, 3, 4): `out[g·4V + c] = Σ_p x[p]·
/// panel_g[p·4V + c]`, the `G·V` accumulators in registers, four depth steps per iteration
/// (one load of x, each B element by a lane). Panel rows are contiguous, so for `V = 2` one
/// 4-register `ld1` holds two depth steps of a panel.
///
/// # Safety
/// `x` valid for `k` reads; `b` for `G·k·4V` reads; `out` for `G·4V` writes.
#[inline(always)]
unsafe fn panel_group<const V: usize, const G: usize>(
    k: usize,
    x: *const f32,
    b: *const f32,
    out: *mut f32,
) {
    // SAFETY: (whole body) panel g's loads stay within b + g·k·4V .. + k·4V (the pointer
    // advances 4V floats per depth step, k steps); x reads stay below k.
    unsafe {
        let nr = 4 * V;
        let mut acc = [[vdupq_n_f32(0.0); V]; G];
        let mut bp: [*const f32; G] = core::array::from_fn(|g| b.add(g * k * nr));
        macro_rules! fma {
            ($g:expr, $v:expr, $b:expr, $xq:expr, $l:literal) => {
                acc[$g][$v] = vfmaq_laneq_f32::<$l>(acc[$g][$v], $b, $xq)
            };
        }
        let mut p = 0;
        while p + 4 <= k {
            let xq = vld1q_f32(x.add(p));
            for g in 0..G {
                if V == 2 {
                    let r01 = vld1q_f32_x4(bp[g]);
                    let r23 = vld1q_f32_x4(bp[g].add(16));
                    fma!(g, 0, r01.0, xq, 0);
                    fma!(g, 1, r01.1, xq, 0);
                    fma!(g, 0, r01.2, xq, 1);
                    fma!(g, 1, r01.3, xq, 1);
                    fma!(g, 0, r23.0, xq, 2);
                    fma!(g, 1, r23.1, xq, 2);
                    fma!(g, 0, r23.2, xq, 3);
                    fma!(g, 1, r23.3, xq, 3);
                } else {
                    macro_rules! step {
                        ($s:literal) => {{
                            let r = bp[g].add($s * nr);
                            for v in 0..V {
                                fma!(g, v, vld1q_f32(r.add(4 * v)), xq, $s);
                            }
                        }};
                    }
                    step!(0);
                    step!(1);
                    step!(2);
                    step!(3);
                }
                bp[g] = bp[g].add(4 * nr);
            }
            p += 4;
        }
        while p < k {
            let xs = *x.add(p);
            for (row, b) in acc.iter_mut().zip(bp.iter_mut()) {
                for (v, a) in row.iter_mut().enumerate() {
                    *a = vfmaq_n_f32(*a, vld1q_f32(b.add(4 * v)), xs);
                }
                *b = b.add(nr);
            }
            p += 1;
        }
        for (g, row) in acc.iter().enumerate() {
            for (v, a) in row.iter().enumerate() {
                vst1q_f32(out.add(g * nr + 4 * v), *a);
            }
        }
    }
}
