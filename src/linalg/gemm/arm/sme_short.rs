//! SME2 short tiles ([`ShortFn`](crate::linalg::gemm::ShortFn)): at most `S = SVL/32` rows of
//! C (the top half of the `2S × 2S` ZA tile) over both column halves of a B panel or one.
//!
//! The tile kernel's four FMOPAs per depth step cover `2S` rows; a product of at most `S`
//! rows (a 16-token prompt at SVL 512) needs only the top two ZA tiles, or one for a half
//! panel. Per two depth steps these kernels load A's two columns with one 4-vector load (the
//! top half of each is used) and B's two rows with another, then do four FMOPAs into `za0`
//! (columns `0..S`) and `za1` (`S..2S`), or two into `za0` for one half: 3.25 and 2.25
//! instructions a step over a packed panel, against 5 for the partial tile. A half panel
//! starts at column `first` (0 or S): B, C and the bias are read from there, and the packed
//! loop's 4-vector B loads run under a `3S`-lane counter predicate (rows `p` and `p + 1` of
//! the half, nothing past row `k − 1`'s half).
//!
//! Layouts: A MR-interleaved (`a[p·2S + i]`, rows `S..2S` of each step unread), B rows
//! `ldb` floats apart (a packed panel when `ldb = 2S`: immediate offsets and 4-vector loads;
//! otherwise one load per row), C rows `rsc` floats apart. The epilogue is the partial tile's
//! ([`kernel_sme2_part`](super::sme::kernel_sme2_part)): mode 1 (alpha 1, beta 0, no bias, no
//! clamp) stores ZA slices straight to C under the column predicate; every other case moves
//! four slices at a time to vectors and applies alpha (skipped when it is 1: exact), `beta·C`,
//! the bias (zero when none) and the clamp, in the partial tile's order: the same bits.

use super::streaming::streaming_asm;
use crate::linalg::gemm::contract::clamps;

/// One packed depth-step pair for one half: A columns `2j`, `2j + 1` and B rows `2j`,
/// `2j + 1` (3S lanes from the half's start) at immediate offset `$o` vectors.
macro_rules! half_pair {
    ($o:literal) => {
        concat!(
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #",
            $o,
            ", mul vl]\n",
            "ld1w {{z4.s-z7.s}}, pn9/z, [{b}, #",
            $o,
            ", mul vl]\n",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s\n",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s\n",
        )
    };
}

/// One packed depth-step pair for both halves (as [`half_pair!`], whole B rows).
macro_rules! both_pair {
    ($o:literal) => {
        concat!(
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #",
            $o,
            ", mul vl]\n",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #",
            $o,
            ", mul vl]\n",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s\n",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s\n",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s\n",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s\n",
        )
    };
}

/// Sixteen packed depth steps as asm text: `$pair!` at immediate offsets 0, 4, .. 28 vectors.
macro_rules! pairs16 {
    ($pair:ident) => {
        concat!(
            $pair!("0"),
            $pair!("4"),
            $pair!("8"),
            $pair!("12"),
            $pair!("16"),
            $pair!("20"),
            $pair!("24"),
            $pair!("28"),
        )
    };
}

/// The four C row offsets of a group of rows, as register operands: row 0 at the base, rows
/// 1..3 at `{n}`, `{o5}`, `{o6}` floats.
macro_rules! row4 {
    (0) => {
        "]"
    };
    (1) => {
        ", {n}, lsl #2]"
    };
    (2) => {
        ", {o5}, lsl #2]"
    };
    (3) => {
        ", {o6}, lsl #2]"
    };
}

/// Mode-0 steps of one vector `$z` (a C row half): alpha when `{u}` (alpha ≠ 1), `beta·C`
/// (C read into `$cz` under `$p` at `$base` row `$r`) when `{betaf}`, the bias `$bz`, the
/// clamp when `{clampf}`, the store. `$l1`..`$l3`: local labels.
macro_rules! general {
    ($z:literal, $cz:literal, $bz:literal, $p:literal, $base:literal, $r:tt, $l1:literal,
     $l2:literal, $l3:literal) => {
        concat!(
            "cbz {u}, ",
            $l1,
            "f\n",
            "fmul ",
            $z,
            ".s, p0/m, ",
            $z,
            ".s, z20.s\n",
            $l1,
            ":\n",
            "cbz {betaf}, ",
            $l2,
            "f\n",
            "ld1w {{",
            $cz,
            ".s}}, ",
            $p,
            "/z, [",
            $base,
            row4!($r),
            "\n",
            "fmla ",
            $z,
            ".s, p0/m, ",
            $cz,
            ".s, z21.s\n",
            $l2,
            ":\n",
            "fadd ",
            $z,
            ".s, p0/m, ",
            $z,
            ".s, ",
            $bz,
            ".s\n",
            "cbz {clampf}, ",
            $l3,
            "f\n",
            "fmaxnm ",
            $z,
            ".s, p0/m, ",
            $z,
            ".s, z30.s\n",
            "fminnm ",
            $z,
            ".s, p0/m, ",
            $z,
            ".s, z31.s\n",
            $l3,
            ":\n",
            "st1w {{",
            $z,
            ".s}}, ",
            $p,
            ", [",
            $base,
            row4!($r),
            "\n",
        )
    };
}

/// The epilogue's set-up as asm text: `p1` (`p2`) the columns of the first (second) half
/// below `{cols}`, `{n}`/`{o5}`/`{o6}` rows 1..3 in floats, `{t}` the rows in whole groups
/// of four, `{a}` the second half's C.
macro_rules! epilogue_setup {
    () => {
        concat!(
            "mov {t}, #0\n",
            "whilelt p1.s, {t}, {cols}\n",
            "whilelt p2.s, {s}, {cols}\n",
            "mov w12, #0\n",
            "asr {n}, {rsc}, #2\n",
            "lsl {o5}, {n}, #1\n",
            "add {o6}, {o5}, {n}\n",
            "lsr {t}, {rows}, #2\n",
            "lsl {t}, {t}, #2\n",
            "add {a}, {c}, {s}, lsl #2\n",
        )
    };
}

/// Mode 0's set-up as asm text: alpha, beta, the bias halves (zero when none) and the clamp
/// bounds in z20–z23, z30, z31, and `{u}` = alpha ≠ 1.
macro_rules! general_setup {
    () => {
        concat!(
            "dup z20.s, {alpha:w}\n",
            "dup z21.s, {beta:w}\n",
            "dup z22.s, #0\n",
            "dup z23.s, #0\n",
            "dup z30.s, {lo:w}\n",
            "dup z31.s, {hi:w}\n",
            "cbz {bias}, 48f\n",
            "ld1w {{z22.s}}, p1/z, [{bias}]\n",
            "ld1w {{z23.s}}, p2/z, [{bias}, #1, mul vl]\n",
            "48:\n",
            "mov {u}, #0x3f800000\n",
            "cmp {alpha:w}, {u:w}\n",
            "cset {u}, ne\n",
        )
    };
}

/// The SME2 short tile: see the module documentation and the
/// [`ShortFn`](crate::linalg::gemm::ShortFn) contract.
///
/// # Safety
/// The `ShortFn` contract for `MR = NR = 2·SVL/32`, on a CPU with SME2, called from
/// non-streaming mode with ZA off.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_sme2_short(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
    rows: usize,
    cols: usize,
    first: usize,
) {
    let clampf = clamps(lo, hi);
    let mode: u64 = (!clampf && alpha == 1.0 && bias.is_null() && beta == 0.0) as u64;
    // SAFETY: reads `k·2S` floats of `a` (each step's first S used), for p < k row p of B
    // at `b + p·ldb` from column `first` (S floats, or 2S when first = 0 and cols > S: inside
    // the row's NR = 2S readable floats; the packed loop's 3S-lane loads end at row p + 1's
    // half, p + 1 < k); C rows i < rows, columns first .. first + cols under the `whilelt`
    // predicates (read only when beta ≠ 0); the bias at first .. first + cols under the same
    // predicates, when non-null. Every vector/predicate register, x12 and the flags are
    // clobbered; streaming mode and ZA are off at the end (smstop). SME2 present (caller).
    unsafe {
        streaming_asm!(
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.s",
            "ptrue pn8.s",
            "cntw {s}",
            "zero {{za}}",
            "add {c}, {c}, {first}, lsl #2",
            "add {b}, {b}, {first}, lsl #2",
            "cbz {bias}, 1f",
            "add {bias}, {bias}, {first}, lsl #2",
            "1:",
            "lsl {t}, {s}, #1",
            "cmp {cols}, {s}",
            "b.hi 100f",
            // ---- One half (cols ≤ S): za0 only. ----
            "cmp {ldb}, {t}",
            "b.ne 60f",
            "mov {t}, #0",
            "add {u}, {s}, {s}, lsl #1",
            "whilelt pn9.s, {t}, {u}, vlx4",
            "lsr {n}, {k}, #4",
            "cbz {n}, 33f",
            "31:",
            pairs16!(half_pair),
            "add {a}, {a}, {s}, lsl #7",
            "add {b}, {b}, {s}, lsl #7",
            "subs {n}, {n}, #1",
            "b.ne 31b",
            "33:",
            "ubfx {n}, {k}, #1, #3",
            "cbz {n}, 35f",
            "34:",
            half_pair!("0"),
            "addvl {a}, {a}, #4",
            "addvl {b}, {b}, #4",
            "subs {n}, {n}, #1",
            "b.ne 34b",
            "35:",
            "tbz {k}, #0, 50f",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z4.s}}, p0/z, [{b}]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "b 50f",
            // B read in place: four rows per iteration at register offsets.
            "60:",
            "lsl {t}, {ldb}, #1",
            "add {u}, {t}, {ldb}",
            "lsr {n}, {k}, #2",
            "cbz {n}, 62f",
            "61:",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}]",
            "ld1w {{z8.s-z11.s}}, pn8/z, [{a}, #4, mul vl]",
            "ld1w {{z4.s}}, p0/z, [{b}]",
            "ld1w {{z5.s}}, p0/z, [{b}, {ldb}, lsl #2]",
            "ld1w {{z6.s}}, p0/z, [{b}, {t}, lsl #2]",
            "ld1w {{z7.s}}, p0/z, [{b}, {u}, lsl #2]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z8.s, z6.s",
            "fmopa za0.s, p0/m, p0/m, z10.s, z7.s",
            "addvl {a}, {a}, #8",
            "add {b}, {b}, {ldb}, lsl #4",
            "subs {n}, {n}, #1",
            "b.ne 61b",
            "62:",
            "ands {n}, {k}, #3",
            "b.eq 50f",
            "63:",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z4.s}}, p0/z, [{b}]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "addvl {a}, {a}, #2",
            "add {b}, {b}, {ldb}, lsl #2",
            "subs {n}, {n}, #1",
            "b.ne 63b",
            // One half's epilogue.
            "50:",
            epilogue_setup!(),
            "cbz {mode}, 70f",
            "51:",
            "cmp x12, {t}",
            "b.hs 53f",
            "st1w {{za0h.s[w12, 0]}}, p1, [{c}]",
            "st1w {{za0h.s[w12, 1]}}, p1, [{c}, {n}, lsl #2]",
            "st1w {{za0h.s[w12, 2]}}, p1, [{c}, {o5}, lsl #2]",
            "st1w {{za0h.s[w12, 3]}}, p1, [{c}, {o6}, lsl #2]",
            "add {c}, {c}, {rsc}, lsl #2",
            "add w12, w12, #4",
            "b 51b",
            "53:",
            "cmp x12, {rows}",
            "b.hs 199f",
            "st1w {{za0h.s[w12, 0]}}, p1, [{c}]",
            "add {c}, {c}, {rsc}",
            "add w12, w12, #1",
            "b 53b",
            "70:",
            general_setup!(),
            "75:",
            "cmp x12, {t}",
            "b.hs 80f",
            "mova {{z0.s-z3.s}}, za0h.s[w12, 0:3]",
            general!("z0", "z8", "z22", "p1", "{c}", 0, "71", "72", "73"),
            general!("z1", "z9", "z22", "p1", "{c}", 1, "71", "72", "73"),
            general!("z2", "z10", "z22", "p1", "{c}", 2, "71", "72", "73"),
            general!("z3", "z11", "z22", "p1", "{c}", 3, "71", "72", "73"),
            "add {c}, {c}, {rsc}, lsl #2",
            "add w12, w12, #4",
            "b 75b",
            "80:",
            "cmp x12, {rows}",
            "b.hs 199f",
            "mova z0.s, p0/m, za0h.s[w12, 0]",
            general!("z0", "z8", "z22", "p1", "{c}", 0, "81", "82", "83"),
            "add {c}, {c}, {rsc}",
            "add w12, w12, #1",
            "b 80b",
            // ---- Both halves (first = 0, cols > S): za0 and za1. ----
            "100:",
            "cmp {ldb}, {t}",
            "b.ne 160f",
            "lsr {n}, {k}, #4",
            "cbz {n}, 133f",
            "131:",
            pairs16!(both_pair),
            "add {a}, {a}, {s}, lsl #7",
            "add {b}, {b}, {s}, lsl #7",
            "subs {n}, {n}, #1",
            "b.ne 131b",
            "133:",
            "ubfx {n}, {k}, #1, #3",
            "cbz {n}, 135f",
            "134:",
            both_pair!("0"),
            "addvl {a}, {a}, #4",
            "addvl {b}, {b}, #4",
            "subs {n}, {n}, #1",
            "b.ne 134b",
            "135:",
            "tbz {k}, #0, 150f",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z4.s-z5.s}}, pn8/z, [{b}]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "b 150f",
            "160:",
            "lsl {t}, {ldb}, #1",
            "add {u}, {t}, {ldb}",
            "lsr {n}, {k}, #2",
            "cbz {n}, 162f",
            "161:",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}]",
            "ld1w {{z8.s-z11.s}}, pn8/z, [{a}, #4, mul vl]",
            "ld1w {{z4.s-z5.s}}, pn8/z, [{b}]",
            "ld1w {{z6.s-z7.s}}, pn8/z, [{b}, {ldb}, lsl #2]",
            "ld1w {{z12.s-z13.s}}, pn8/z, [{b}, {t}, lsl #2]",
            "ld1w {{z14.s-z15.s}}, pn8/z, [{b}, {u}, lsl #2]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za0.s, p0/m, p0/m, z8.s, z12.s",
            "fmopa za1.s, p0/m, p0/m, z8.s, z13.s",
            "fmopa za0.s, p0/m, p0/m, z10.s, z14.s",
            "fmopa za1.s, p0/m, p0/m, z10.s, z15.s",
            "addvl {a}, {a}, #8",
            "add {b}, {b}, {ldb}, lsl #4",
            "subs {n}, {n}, #1",
            "b.ne 161b",
            "162:",
            "ands {n}, {k}, #3",
            "b.eq 150f",
            "163:",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z4.s-z5.s}}, pn8/z, [{b}]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "addvl {a}, {a}, #2",
            "add {b}, {b}, {ldb}, lsl #2",
            "subs {n}, {n}, #1",
            "b.ne 163b",
            // Both halves' epilogue: the second half's C at `{a}` (the first's plus S).
            "150:",
            epilogue_setup!(),
            "cbz {mode}, 170f",
            "151:",
            "cmp x12, {t}",
            "b.hs 153f",
            "st1w {{za0h.s[w12, 0]}}, p1, [{c}]",
            "st1w {{za0h.s[w12, 1]}}, p1, [{c}, {n}, lsl #2]",
            "st1w {{za0h.s[w12, 2]}}, p1, [{c}, {o5}, lsl #2]",
            "st1w {{za0h.s[w12, 3]}}, p1, [{c}, {o6}, lsl #2]",
            "st1w {{za1h.s[w12, 0]}}, p2, [{a}]",
            "st1w {{za1h.s[w12, 1]}}, p2, [{a}, {n}, lsl #2]",
            "st1w {{za1h.s[w12, 2]}}, p2, [{a}, {o5}, lsl #2]",
            "st1w {{za1h.s[w12, 3]}}, p2, [{a}, {o6}, lsl #2]",
            "add {c}, {c}, {rsc}, lsl #2",
            "add {a}, {a}, {rsc}, lsl #2",
            "add w12, w12, #4",
            "b 151b",
            "153:",
            "cmp x12, {rows}",
            "b.hs 199f",
            "st1w {{za0h.s[w12, 0]}}, p1, [{c}]",
            "st1w {{za1h.s[w12, 0]}}, p2, [{a}]",
            "add {c}, {c}, {rsc}",
            "add {a}, {a}, {rsc}",
            "add w12, w12, #1",
            "b 153b",
            "170:",
            general_setup!(),
            "175:",
            "cmp x12, {t}",
            "b.hs 180f",
            "mova {{z0.s-z3.s}}, za0h.s[w12, 0:3]",
            "mova {{z4.s-z7.s}}, za1h.s[w12, 0:3]",
            general!("z0", "z8", "z22", "p1", "{c}", 0, "171", "172", "173"),
            general!("z4", "z12", "z23", "p2", "{a}", 0, "171", "172", "173"),
            general!("z1", "z9", "z22", "p1", "{c}", 1, "171", "172", "173"),
            general!("z5", "z13", "z23", "p2", "{a}", 1, "171", "172", "173"),
            general!("z2", "z10", "z22", "p1", "{c}", 2, "171", "172", "173"),
            general!("z6", "z14", "z23", "p2", "{a}", 2, "171", "172", "173"),
            general!("z3", "z11", "z22", "p1", "{c}", 3, "171", "172", "173"),
            general!("z7", "z15", "z23", "p2", "{a}", 3, "171", "172", "173"),
            "add {c}, {c}, {rsc}, lsl #2",
            "add {a}, {a}, {rsc}, lsl #2",
            "add w12, w12, #4",
            "b 175b",
            "180:",
            "cmp x12, {rows}",
            "b.hs 199f",
            "mova z0.s, p0/m, za0h.s[w12, 0]",
            "mova z4.s, p0/m, za1h.s[w12, 0]",
            general!("z0", "z8", "z22", "p1", "{c}", 0, "181", "182", "183"),
            general!("z4", "z12", "z23", "p2", "{a}", 0, "181", "182", "183"),
            "add {c}, {c}, {rsc}",
            "add {a}, {a}, {rsc}",
            "add w12, w12, #1",
            "b 180b",
            "199:",
            "smstop",
            k = inout(reg) k => _,
            a = inout(reg) a => _,
            b = inout(reg) b => _,
            ldb = in(reg) ldb,
            c = inout(reg) c => _,
            rsc = in(reg) rsc * 4,
            alpha = in(reg) alpha.to_bits(),
            beta = in(reg) beta.to_bits(),
            betaf = in(reg) (beta != 0.0) as u64,
            bias = inout(reg) bias => _,
            mode = in(reg) mode,
            clampf = in(reg) clampf as u64,
            lo = in(reg) lo.to_bits(),
            hi = in(reg) hi.to_bits(),
            rows = in(reg) rows,
            cols = in(reg) cols,
            first = in(reg) first,
            n = out(reg) _,
            s = out(reg) _,
            t = out(reg) _,
            u = out(reg) _,
            o5 = out(reg) _,
            o6 = out(reg) _,
            out("x12") _,
        );
    }
}
