//! SME / SME2 micro-kernels: FMOPA fp32 outer products into the four ZA tiles.
//!
//! With `S = SVL/32` lanes, the tile is `2S × 2S` (8 × 8 at SVL 128, 32 × 32 at SVL 512):
//! `za0` = rows 0..S × cols 0..S, `za1` = rows 0..S × cols S..2S, `za2`/`za3` the rows S..2S.
//! Each depth step loads one A column pair (2 vectors, from the MR-interleaved packed A: the
//! column for depth `p` is exactly `a[p*MR..][..MR]`) and one B row pair (2 vectors, read in
//! place: row `p` at `b + p·ldb`) and does 4 FMOPAs. The B row offsets `j·ldb` of a group of
//! depth steps live in registers (`[b, o_j, lsl #2]` addressing), so walking B costs one add
//! per group, not per step. SME1 (no multi-vector loads) loads the A column and the B row with
//! one `ld2w` structure load each: the two vectors come de-interleaved (even / odd rows of A,
//! even / odd columns of B), so `za0..za3` hold C's (even|odd row, even|odd column) quarters
//! and its prologue / epilogue map ZA slice `q` to C rows `2q`, `2q + 1` with `ld2w` / `st2w`
//! (4 FMOPA per 6 instructions: bound 0.67, against 0.5 with single-vector loads). SME2 keeps
//! the plain layout: two depth steps of A with one 4-vector `ld1w {z0.s-z3.s}` and each B row
//! with one 2-vector load (bound 8/11 = 0.73 with B in place). When the driver hands a packed
//! B panel (`ldb == NR`: B stored transposed, e.g. `linear` / XNNPACK fully-connected
//! weights, or pre-packed, [`crate::linalg::gemm::PackedB`]), consecutive B rows are
//! contiguous and the kernels switch to immediate offsets and, for SME2, 4-vector loads of
//! two B rows (8 FMOPA per 2 loads: bound 0.8).
//!
//! A (and a transposed B) is packed by [`pack_za`] (in `sme_pack`), a transpose through ZA
//! (horizontal-slice loads, vertical-slice stores), and the kernels ask the driver for long
//! depth blocks (the tile stays in ZA; a depth block boundary costs a ZA store and reload).
//!
//! An edge tile of SME2 (fewer than `2S` rows or columns of C left: a 16-token prompt in
//! 32-row tiles) goes to [`kernel_sme2_part`]: the same depth loops, ZA zeroed, and an
//! epilogue that stores only the rows below the edge and, under `whilelt` predicates, the
//! columns below it, straight into C (no stack tile, no copy).
//!
//! Each kernel is one `asm!` block that enters streaming mode (`smstart`), works, and leaves it
//! (`smstop`) — the compiler knows nothing about PSTATE.SM/ZA, so no Rust code runs in
//! between. `smstart`/`smstop` zero the vector and predicate registers, so every vector
//! register (v0–v31: the compiler then saves the callee-saved d8–d15 itself) and every
//! predicate register is declared clobbered. `sme`/`sme2` target features are unstable in
//! Rust 1.95, hence the `.arch_extension` directive at the top of each block.
//!
//! Epilogues (SME2; SME1's do the same through `mova` + `st2w`): mode 1 (`alpha = 1, beta = 0`,
//! no bias) stores ZA slices straight to C; mode 2
//! (`alpha = 1, beta = 1`, no bias) first loads C into ZA, then accumulates and stores; mode 0
//! (anything else) moves each slice to a vector, scales, adds `beta·C` and the bias.

pub use super::sme_pack::{pack_za, pack_za2, pack_za2_edge};
pub use super::sme_short::kernel_sme2_short;
pub(crate) use super::streaming::streaming_asm;
pub use super::streaming::svl_bytes;
use crate::linalg::gemm::contract::{clamps, MicroKernel};

/// `{c}`-tile prologue as asm text: mode 2 (`beta = 1`) loads the C tile into ZA (row
/// slices, `{t}`/`{u}` walk rows `i` and `S + i`), any other mode zeroes ZA.
macro_rules! za_prologue {
    () => {
        concat!(
            "cmp {mode}, #2\n",
            "b.ne 10f\n",
            "mov w12, #0\n",
            "mov {t}, {c}\n",
            "madd {u}, {s}, {rsc}, {c}\n",
            "11:\n",
            "ld1w {{za0h.s[w12, 0]}}, p0/z, [{t}]\n",
            "ld1w {{za1h.s[w12, 0]}}, p0/z, [{t}, {s}, lsl #2]\n",
            "ld1w {{za2h.s[w12, 0]}}, p0/z, [{u}]\n",
            "ld1w {{za3h.s[w12, 0]}}, p0/z, [{u}, {s}, lsl #2]\n",
            "add {t}, {t}, {rsc}\n",
            "add {u}, {u}, {rsc}\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 11b\n",
            "b 12f\n",
            "10:\n",
            "zero {{za}}\n",
            "12:",
        )
    };
}

/// Clamp of four slice vectors into `[z16, z17]` (`fmaxnm` then `fminnm`, NaN becomes the
/// low bound) when `{clampf}`, as asm text for the mode-0 epilogues.
macro_rules! za_clamp4 {
    ($a:literal, $b:literal, $c:literal, $d:literal) => {
        concat!(
            "cbz {clampf}, 24f\n",
            za_clamp4!(@op "fmaxnm", "z16", $a, $b, $c, $d),
            za_clamp4!(@op "fminnm", "z17", $a, $b, $c, $d),
            "24:\n",
        )
    };
    (@op $op:literal, $bound:literal, $($z:literal),+) => {
        concat!($($op, " ", $z, ".s, p0/m, ", $z, ".s, ", $bound, ".s\n",)+)
    };
}

/// SME2 epilogue as asm text: modes 1 and 2 store the ZA row slices to C (four slices of a tile
/// per multi-vector `mova`, a C row per strided 2-vector store; needs `pn8` all-true); mode 0 moves
/// each slice to z0–z3, scales by alpha, adds `beta·C` (when `{betaf}`) and the bias, and
/// clamps into `[{lo}, {hi}]` (when `{clampf}`).
macro_rules! za_epilogue {
    () => {
        concat!(
            "mov w12, #0\n",
            "madd {u}, {s}, {rsc}, {c}\n",
            "cbz {mode}, 20f\n",
            // Modes 1 and 2, four slices of each tile at a time: one 4-vector `mova` per tile
            // (za0 → z0–z3, za1 → z8–z11, za2 → z16–z19, za3 → z24–z27), then each C row's
            // two halves with one strided 2-vector store ({z0, z8}: row i, columns 0..2S),
            // rows i + 1 .. i + 3 at register offsets. S is a multiple of 4.
            "asr {n}, {rsc}, #2\n",        // row stride in floats, and its multiples
            "lsl {o5}, {n}, #1\n",
            "add {o6}, {o5}, {n}\n",
            "lsl {o7}, {rsc}, #2\n",        // four rows, bytes
            "25:\n",
            "mova {{z0.s-z3.s}}, za0h.s[w12, 0:3]\n",
            "mova {{z8.s-z11.s}}, za1h.s[w12, 0:3]\n",
            "mova {{z16.s-z19.s}}, za2h.s[w12, 0:3]\n",
            "mova {{z24.s-z27.s}}, za3h.s[w12, 0:3]\n",
            "st1w {{z0.s, z8.s}}, pn8, [{c}]\n",
            "st1w {{z1.s, z9.s}}, pn8, [{c}, {n}, lsl #2]\n",
            "st1w {{z2.s, z10.s}}, pn8, [{c}, {o5}, lsl #2]\n",
            "st1w {{z3.s, z11.s}}, pn8, [{c}, {o6}, lsl #2]\n",
            "st1w {{z16.s, z24.s}}, pn8, [{u}]\n",
            "st1w {{z17.s, z25.s}}, pn8, [{u}, {n}, lsl #2]\n",
            "st1w {{z18.s, z26.s}}, pn8, [{u}, {o5}, lsl #2]\n",
            "st1w {{z19.s, z27.s}}, pn8, [{u}, {o6}, lsl #2]\n",
            "add {c}, {c}, {o7}\n",
            "add {u}, {u}, {o7}\n",
            "add w12, w12, #4\n",
            "cmp w12, {s:w}\n",
            "b.ne 25b\n",
            "b 29f\n",
            "20:\n",
            "dup z4.s, {alpha:w}\n",
            "dup z5.s, {beta:w}\n",
            "dup z6.s, #0\n",
            "dup z7.s, #0\n",
            "dup z16.s, {lo:w}\n",
            "dup z17.s, {hi:w}\n",
            "cbz {bias}, 22f\n",
            "ld1w {{z6.s}}, p0/z, [{bias}]\n",
            "ld1w {{z7.s}}, p0/z, [{bias}, #1, mul vl]\n",
            "22:\n",
            "mova z0.s, p0/m, za0h.s[w12, 0]\n",
            "mova z1.s, p0/m, za1h.s[w12, 0]\n",
            "mova z2.s, p0/m, za2h.s[w12, 0]\n",
            "mova z3.s, p0/m, za3h.s[w12, 0]\n",
            "fmul z0.s, p0/m, z0.s, z4.s\n",
            "fmul z1.s, p0/m, z1.s, z4.s\n",
            "fmul z2.s, p0/m, z2.s, z4.s\n",
            "fmul z3.s, p0/m, z3.s, z4.s\n",
            "cbz {betaf}, 23f\n",
            "ld1w {{z8.s}}, p0/z, [{c}]\n",
            "ld1w {{z9.s}}, p0/z, [{c}, #1, mul vl]\n",
            "ld1w {{z10.s}}, p0/z, [{u}]\n",
            "ld1w {{z11.s}}, p0/z, [{u}, #1, mul vl]\n",
            "fmla z0.s, p0/m, z8.s, z5.s\n",
            "fmla z1.s, p0/m, z9.s, z5.s\n",
            "fmla z2.s, p0/m, z10.s, z5.s\n",
            "fmla z3.s, p0/m, z11.s, z5.s\n",
            "23:\n",
            "fadd z0.s, p0/m, z0.s, z6.s\n",
            "fadd z1.s, p0/m, z1.s, z7.s\n",
            "fadd z2.s, p0/m, z2.s, z6.s\n",
            "fadd z3.s, p0/m, z3.s, z7.s\n",
            za_clamp4!("z0", "z1", "z2", "z3"),
            "st1w {{z0.s}}, p0, [{c}]\n",
            "st1w {{z1.s}}, p0, [{c}, #1, mul vl]\n",
            "st1w {{z2.s}}, p0, [{u}]\n",
            "st1w {{z3.s}}, p0, [{u}, #1, mul vl]\n",
            "add {c}, {c}, {rsc}\n",
            "add {u}, {u}, {rsc}\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 22b\n",
            "29:",
        )
    };
}

/// One C row of a partial tile's general epilogue as asm text: slice `w12` of the ZA tiles
/// `$l`, `$r` (columns 0..S, S..2S) into `$x`, `$y`, times alpha (z4), plus `beta·C` (z5, C
/// read into `$cx`, `$cy` at `$at`) when `{betaf}`, plus the bias (z6, z7), clamped into
/// [z16, z17] when `{clampf}`, stored at `$at` under the column predicates p1, p2. `$nb`,
/// `$nc`: the local labels past the beta and clamp steps.
macro_rules! za_part_row {
    ($l:literal, $r:literal, $at:literal, $x:literal, $y:literal, $cx:literal, $cy:literal,
     $nb:literal, $nc:literal) => {
        concat!(
            "mova ", $x, ".s, p0/m, ", $l, ".s[w12, 0]\n",
            "mova ", $y, ".s, p0/m, ", $r, ".s[w12, 0]\n",
            "fmul ", $x, ".s, p0/m, ", $x, ".s, z4.s\n",
            "fmul ", $y, ".s, p0/m, ", $y, ".s, z4.s\n",
            "cbz {betaf}, ", $nb, "f\n",
            "ld1w {{", $cx, ".s}}, p1/z, [", $at, "]\n",
            "ld1w {{", $cy, ".s}}, p2/z, [", $at, ", #1, mul vl]\n",
            "fmla ", $x, ".s, p0/m, ", $cx, ".s, z5.s\n",
            "fmla ", $y, ".s, p0/m, ", $cy, ".s, z5.s\n",
            $nb, ":\n",
            "fadd ", $x, ".s, p0/m, ", $x, ".s, z6.s\n",
            "fadd ", $y, ".s, p0/m, ", $y, ".s, z7.s\n",
            "cbz {clampf}, ", $nc, "f\n",
            za_clamp4!(@op "fmaxnm", "z16", $x, $y),
            za_clamp4!(@op "fminnm", "z17", $x, $y),
            $nc, ":\n",
            "st1w {{", $x, ".s}}, p1, [", $at, "]\n",
            "st1w {{", $y, ".s}}, p2, [", $at, ", #1, mul vl]\n",
        )
    };
}

/// Epilogue of a partial tile ([`PartFn`](crate::linalg::gemm::PartFn)) as asm text: rows below `{rows}`, columns below
/// `{cols}` (`p1`: columns 0..S, `p2`: S..2S; C, the bias and stores under them). Mode 1
/// stores the ZA slices straight to C; any other mode does mode 0's steps in mode 0's order
/// (alpha, `beta·C` when `{betaf}`, the bias, the clamp when `{clampf}`): mode 2's C is added
/// here, as the prologue zeroed ZA.
macro_rules! za_part_epilogue {
    () => {
        concat!(
            "mov {t}, #0\n",
            "whilelt p1.s, {t}, {cols}\n",
            "whilelt p2.s, {s}, {cols}\n",
            "mov w12, #0\n",
            "madd {u}, {s}, {rsc}, {c}\n",
            "cmp {mode}, #1\n",
            "b.ne 20f\n",
            "21:\n",
            "cmp x12, {rows}\n",
            "b.hs 29f\n",
            "st1w {{za0h.s[w12, 0]}}, p1, [{c}]\n",
            "st1w {{za1h.s[w12, 0]}}, p2, [{c}, {s}, lsl #2]\n",
            "add {t}, x12, {s}\n",
            "cmp {t}, {rows}\n",
            "b.hs 28f\n",
            "st1w {{za2h.s[w12, 0]}}, p1, [{u}]\n",
            "st1w {{za3h.s[w12, 0]}}, p2, [{u}, {s}, lsl #2]\n",
            "28:\n",
            "add {c}, {c}, {rsc}\n",
            "add {u}, {u}, {rsc}\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 21b\n",
            "b 29f\n",
            "20:\n",
            "dup z4.s, {alpha:w}\n",
            "dup z5.s, {beta:w}\n",
            "dup z6.s, #0\n",
            "dup z7.s, #0\n",
            "dup z16.s, {lo:w}\n",
            "dup z17.s, {hi:w}\n",
            "cbz {bias}, 22f\n",
            "ld1w {{z6.s}}, p1/z, [{bias}]\n",
            "ld1w {{z7.s}}, p2/z, [{bias}, #1, mul vl]\n",
            "22:\n",
            "cmp x12, {rows}\n",
            "b.hs 29f\n",
            za_part_row!("za0h", "za1h", "{c}", "z0", "z1", "z8", "z9", "23", "24"),
            "add {t}, x12, {s}\n",
            "cmp {t}, {rows}\n",
            "b.hs 27f\n",
            za_part_row!("za2h", "za3h", "{u}", "z2", "z3", "z10", "z11", "26", "25"),
            "27:\n",
            "add {c}, {c}, {rsc}\n",
            "add {u}, {u}, {rsc}\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 22b\n",
            "29:",
        )
    };
}

/// The four outer products of one depth step: A column halves `$a0`, `$a1` × B row halves
/// `$b0`, `$b1` into za0 (top left), za1 (top right), za2, za3.
macro_rules! fmopa4 {
    ($a0:literal, $a1:literal, $b0:literal, $b1:literal) => {
        concat!(
            "fmopa za0.s, p0/m, p0/m, ", $a0, ".s, ", $b0, ".s\n",
            "fmopa za1.s, p0/m, p0/m, ", $a0, ".s, ", $b1, ".s\n",
            "fmopa za2.s, p0/m, p0/m, ", $a1, ".s, ", $b0, ".s\n",
            "fmopa za3.s, p0/m, p0/m, ", $a1, ".s, ", $b1, ".s",
        )
    };
}

/// SME2 depth steps `2j`, `2j+1`: A columns for both with one 4-vector load (immediate
/// offset `$a` vectors from `{a}`), each B row (both halves) with one 2-vector load from
/// `$base` plus the row offsets `$o0` / `$o1`.
macro_rules! sme2_pair {
    ($a:literal, $base:literal, $o0:literal, $o1:literal) => {
        concat!(
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #",
            $a,
            ", mul vl]\n",
            "ld1w {{z4.s-z5.s}}, pn8/z, [",
            $base,
            $o0,
            "]\n",
            "ld1w {{z6.s-z7.s}}, pn8/z, [",
            $base,
            $o1,
            "]\n",
            fmopa4!("z0", "z1", "z4", "z5"),
            "\n",
            fmopa4!("z2", "z3", "z6", "z7"),
        )
    };
}

/// SME2 depth steps `2j`, `2j+1` over a packed B panel: both A columns and both B rows
/// with one 4-vector load each (immediate offset `$o` vectors).
macro_rules! sme2_packed_pair {
    ($o:literal) => {
        concat!(
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #",
            $o,
            ", mul vl]\n",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #",
            $o,
            ", mul vl]\n",
            fmopa4!("z0", "z1", "z4", "z5"),
            "\n",
            fmopa4!("z2", "z3", "z6", "z7"),
        )
    };
}

/// [`sme2_packed_pair!`] from the second pointer pair `{a2}`, `{b2}`.
macro_rules! sme2_packed_pair2 {
    ($o:literal) => {
        concat!(
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a2}, #",
            $o,
            ", mul vl]\n",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b2}, #",
            $o,
            ", mul vl]\n",
            fmopa4!("z0", "z1", "z4", "z5"),
            "\n",
            fmopa4!("z2", "z3", "z6", "z7"),
        )
    };
}

/// One SME kernel body: `smstart`, prologue, the given depth loop, epilogue, `smstop`.
/// The depth loop reads `{k}` steps from `{a}` (packed, 2S floats per step) and from the
/// B rows at `{b}`, `{ldb}` floats apart, and may use `{n}`, `{t}`, `{u}`, `{o4}`–`{o7}` and
/// the extra scratch registers listed in brackets.
macro_rules! sme_kernel {
    ($(#[$doc:meta])* $name:ident $(($($xp:ident),+))?, $ext:literal, [$($extra:ident),*],
     $pro:expr, $epi:expr, $($line:expr,)*) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The [`MicroKernel`] contract with `MR = NR = 2·SVL/32` (with `rows` and `cols`:
        /// the [`PartFn`](crate::linalg::gemm::PartFn) contract), on a CPU with the extension, called from non-streaming
        /// mode with ZA off.
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
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
            $($($xp: usize,)+)?
        ) {
            // A clamp needs the slices in vectors: mode 0.
            let clampf = clamps(lo, hi);
            let mode: u64 = if clampf {
                0
            } else if alpha == 1.0 && bias.is_null() && beta == 0.0 {
                1
            } else if alpha == 1.0 && bias.is_null() && beta == 1.0 {
                2
            } else {
                0
            };
            // SAFETY: reads `k·MR` floats of `a` (2 vectors of S floats per depth step) and,
            // for p < k, the NR = 2S floats of B row p at `b + p·ldb` (contract); C rows
            // i < 2S at `c + i·rsc` with 2S contiguous floats (a part: rows i < rows, columns
            // below cols, under predicates), read only when beta ≠ 0 (mode 2 or the beta path
            // of mode 0); bias read (2S floats, a part's cols) only when non-null. All vector/predicate registers, x12 (the slice index) and the flags
            // are clobbered; streaming mode and ZA are left off at the end (smstop). The
            // extension is present (caller).
            unsafe {
                streaming_asm!(
                    concat!(".arch_extension ", $ext),
                    "smstart",
                    "ptrue p0.s",
                    "cntw {s}",
                    $pro,
                    $($line,)*
                    $epi,
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
                    bias = in(reg) bias,
                    mode = in(reg) mode,
                    clampf = in(reg) clampf as u64,
                    lo = in(reg) lo.to_bits(),
                    hi = in(reg) hi.to_bits(),
                    n = out(reg) _,
                    s = out(reg) _,
                    t = out(reg) _,
                    u = out(reg) _,
                    o4 = out(reg) _,
                    o5 = out(reg) _,
                    o6 = out(reg) _,
                    o7 = out(reg) _,
                    $($extra = out(reg) _,)*
                    $($($xp = in(reg) $xp,)+)?
                    out("x12") _,
                    );
            }
        }
    };
}

/// Row offsets `j·ldb` (floats) for j = 2..7 into `{t}`, `{u}`, `{o4}`–`{o7}`
/// (`{ldb}` itself is the offset of row 1).
macro_rules! row_offsets {
    () => {
        concat!(
            "lsl {t}, {ldb}, #1\n",
            "add {u}, {t}, {ldb}\n",
            "lsl {o4}, {ldb}, #2\n",
            "add {o5}, {o4}, {ldb}\n",
            "add {o6}, {o4}, {t}\n",
            "add {o7}, {o4}, {u}",
        )
    };
}

/// SME1 depth step: the A column (both halves) and the B row (both halves) each with one
/// `ld2w` structure load. `ld2w` de-interleaves: z0 / z1 hold the even / odd rows of the A
/// column, z2 / z3 the even / odd columns of the B row, so za0 accumulates C's (even row,
/// even column) elements, za1 (even, odd), za2 (odd, even), za3 (odd, odd); the
/// `za_pairs_prologue!` / `za_pairs_epilogue!` moves map ZA slice `q` to C rows `2q`, `2q + 1`
/// and re-interleave the columns with `ld2w` / `st2w`. `$a` is the A immediate (vectors,
/// even), `$bo` the B address tail (`{b}` plus an optional register offset).
macro_rules! sme1_pair_step {
    ($ab:literal, $a:literal, $bo:literal) => {
        concat!(
            "ld2w {{z0.s, z1.s}}, p0/z, [",
            $ab,
            ", #",
            $a,
            ", mul vl]\n",
            "ld2w {{z2.s, z3.s}}, p0/z, [",
            $bo,
            "]\n",
            fmopa4!("z0", "z1", "z2", "z3"),
        )
    };
}

/// Prologue for the de-interleaved SME1 layout: mode 2 (`beta = 1`) loads C rows `2q`,
/// `2q + 1` into ZA slices `q` (columns split even/odd by `ld2w`), any other mode zeroes ZA.
macro_rules! za_pairs_prologue {
    () => {
        concat!(
            "cmp {mode}, #2\n",
            "b.ne 10f\n",
            "mov w12, #0\n",
            "mov {t}, {c}\n",
            "add {u}, {c}, {rsc}\n",
            "11:\n",
            "ld2w {{z4.s, z5.s}}, p0/z, [{t}]\n",
            "ld2w {{z6.s, z7.s}}, p0/z, [{u}]\n",
            "mova za0h.s[w12, 0], p0/m, z4.s\n",
            "mova za1h.s[w12, 0], p0/m, z5.s\n",
            "mova za2h.s[w12, 0], p0/m, z6.s\n",
            "mova za3h.s[w12, 0], p0/m, z7.s\n",
            "add {t}, {t}, {rsc}, lsl #1\n",
            "add {u}, {u}, {rsc}, lsl #1\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 11b\n",
            "b 12f\n",
            "10:\n",
            "zero {{za}}\n",
            "12:",
        )
    };
}

/// Epilogue for the de-interleaved SME1 layout: ZA slice `q` of za0/za1 is C row `2q`, of
/// za2/za3 row `2q + 1`, columns re-interleaved by `st2w`; mode 0 scales by alpha, adds
/// `beta·C` (when `{betaf}`, read with `ld2w`) and the bias (split even/odd with `ld2w`), and
/// clamps into `[{lo}, {hi}]` (when `{clampf}`).
macro_rules! za_pairs_epilogue {
    () => {
        concat!(
            "mov w12, #0\n",
            "add {u}, {c}, {rsc}\n",
            "cbz {mode}, 20f\n",
            "21:\n",
            "mova z4.s, p0/m, za0h.s[w12, 0]\n",
            "mova z5.s, p0/m, za1h.s[w12, 0]\n",
            "mova z6.s, p0/m, za2h.s[w12, 0]\n",
            "mova z7.s, p0/m, za3h.s[w12, 0]\n",
            "st2w {{z4.s, z5.s}}, p0, [{c}]\n",
            "st2w {{z6.s, z7.s}}, p0, [{u}]\n",
            "add {c}, {c}, {rsc}, lsl #1\n",
            "add {u}, {u}, {rsc}, lsl #1\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 21b\n",
            "b 29f\n",
            "20:\n",
            "dup z8.s, {alpha:w}\n",
            "dup z9.s, {beta:w}\n",
            "dup z10.s, #0\n",
            "dup z11.s, #0\n",
            "dup z16.s, {lo:w}\n",
            "dup z17.s, {hi:w}\n",
            "cbz {bias}, 22f\n",
            "ld2w {{z10.s, z11.s}}, p0/z, [{bias}]\n",
            "22:\n",
            "mova z4.s, p0/m, za0h.s[w12, 0]\n",
            "mova z5.s, p0/m, za1h.s[w12, 0]\n",
            "mova z6.s, p0/m, za2h.s[w12, 0]\n",
            "mova z7.s, p0/m, za3h.s[w12, 0]\n",
            "fmul z4.s, p0/m, z4.s, z8.s\n",
            "fmul z5.s, p0/m, z5.s, z8.s\n",
            "fmul z6.s, p0/m, z6.s, z8.s\n",
            "fmul z7.s, p0/m, z7.s, z8.s\n",
            "cbz {betaf}, 23f\n",
            "ld2w {{z12.s, z13.s}}, p0/z, [{c}]\n",
            "ld2w {{z14.s, z15.s}}, p0/z, [{u}]\n",
            "fmla z4.s, p0/m, z12.s, z9.s\n",
            "fmla z5.s, p0/m, z13.s, z9.s\n",
            "fmla z6.s, p0/m, z14.s, z9.s\n",
            "fmla z7.s, p0/m, z15.s, z9.s\n",
            "23:\n",
            "fadd z4.s, p0/m, z4.s, z10.s\n",
            "fadd z5.s, p0/m, z5.s, z11.s\n",
            "fadd z6.s, p0/m, z6.s, z10.s\n",
            "fadd z7.s, p0/m, z7.s, z11.s\n",
            za_clamp4!("z4", "z5", "z6", "z7"),
            "st2w {{z4.s, z5.s}}, p0, [{c}]\n",
            "st2w {{z6.s, z7.s}}, p0, [{u}]\n",
            "add {c}, {c}, {rsc}, lsl #1\n",
            "add {u}, {u}, {rsc}, lsl #1\n",
            "add w12, w12, #1\n",
            "cmp w12, {s:w}\n",
            "b.ne 22b\n",
            "29:",
        )
    };
}

sme_kernel!(
    /// SME1 body: per depth step one `ld2w` of the A column and one of the B row (two vectors
    /// each, see `sme1_pair_step!`) and 4 FMOPA; 16 depth steps per loop iteration (64
    /// FMOPA, 32 loads, 5 loop instructions: 0.63 of the FMOPA bound). B rows at register
    /// offsets `j·ldb` from `{b}` (rows 0–7) and `{b8}` (rows 8–15); a packed B panel
    /// (`ldb = NR`) uses immediate offsets.
    sme1_rows,
    "sme",
    [b8],
    za_pairs_prologue!(),
    za_pairs_epilogue!(),
    "lsl {t}, {s}, #1",
    "cmp {ldb}, {t}",
    "b.eq 40f",
    "lsr {n}, {k}, #4",
    "cbz {n}, 3f",
    row_offsets!(),
    "add {b8}, {b}, {o4}, lsl #3",
    "addvl {a}, {a}, #16",
    "2:",
    sme1_pair_step!("{a}", "-16", "{b}"),
    sme1_pair_step!("{a}", "-14", "{b}, {ldb}, lsl #2"),
    sme1_pair_step!("{a}", "-12", "{b}, {t}, lsl #2"),
    sme1_pair_step!("{a}", "-10", "{b}, {u}, lsl #2"),
    sme1_pair_step!("{a}", "-8", "{b}, {o4}, lsl #2"),
    sme1_pair_step!("{a}", "-6", "{b}, {o5}, lsl #2"),
    sme1_pair_step!("{a}", "-4", "{b}, {o6}, lsl #2"),
    sme1_pair_step!("{a}", "-2", "{b}, {o7}, lsl #2"),
    sme1_pair_step!("{a}", "0", "{b8}"),
    sme1_pair_step!("{a}", "2", "{b8}, {ldb}, lsl #2"),
    sme1_pair_step!("{a}", "4", "{b8}, {t}, lsl #2"),
    sme1_pair_step!("{a}", "6", "{b8}, {u}, lsl #2"),
    sme1_pair_step!("{a}", "8", "{b8}, {o4}, lsl #2"),
    sme1_pair_step!("{a}", "10", "{b8}, {o5}, lsl #2"),
    sme1_pair_step!("{a}", "12", "{b8}, {o6}, lsl #2"),
    sme1_pair_step!("{a}", "14", "{b8}, {o7}, lsl #2"),
    "add {a}, {a}, {s}, lsl #7",
    "add {b}, {b}, {o4}, lsl #4",
    "add {b8}, {b8}, {o4}, lsl #4",
    "subs {n}, {n}, #1",
    "b.ne 2b",
    "addvl {a}, {a}, #-16",
    "3:",
    "ands {k}, {k}, #15",
    "b.eq 5f",
    "4:",
    sme1_pair_step!("{a}", "0", "{b}"),
    "addvl {a}, {a}, #2",
    "add {b}, {b}, {ldb}, lsl #2",
    "subs {k}, {k}, #1",
    "b.ne 4b",
    "b 5f",
    // Packed B (ldb = NR = 2S): immediate offsets for A and B, 16 depth steps per iteration.
    "40:",
    "lsr {n}, {k}, #4",
    "cbz {n}, 43f",
    "addvl {a}, {a}, #16",
    "addvl {b}, {b}, #16",
    "41:",
    sme1_pair_step!("{a}", "-16", "{b}, #-16, mul vl"),
    sme1_pair_step!("{a}", "-14", "{b}, #-14, mul vl"),
    sme1_pair_step!("{a}", "-12", "{b}, #-12, mul vl"),
    sme1_pair_step!("{a}", "-10", "{b}, #-10, mul vl"),
    sme1_pair_step!("{a}", "-8", "{b}, #-8, mul vl"),
    sme1_pair_step!("{a}", "-6", "{b}, #-6, mul vl"),
    sme1_pair_step!("{a}", "-4", "{b}, #-4, mul vl"),
    sme1_pair_step!("{a}", "-2", "{b}, #-2, mul vl"),
    sme1_pair_step!("{a}", "0", "{b}"),
    sme1_pair_step!("{a}", "2", "{b}, #2, mul vl"),
    sme1_pair_step!("{a}", "4", "{b}, #4, mul vl"),
    sme1_pair_step!("{a}", "6", "{b}, #6, mul vl"),
    sme1_pair_step!("{a}", "8", "{b}, #8, mul vl"),
    sme1_pair_step!("{a}", "10", "{b}, #10, mul vl"),
    sme1_pair_step!("{a}", "12", "{b}, #12, mul vl"),
    sme1_pair_step!("{a}", "14", "{b}, #14, mul vl"),
    "add {a}, {a}, {s}, lsl #7",
    "add {b}, {b}, {s}, lsl #7",
    "subs {n}, {n}, #1",
    "b.ne 41b",
    "addvl {a}, {a}, #-16",
    "addvl {b}, {b}, #-16",
    "43:",
    "ands {k}, {k}, #15",
    "b.eq 5f",
    "44:",
    sme1_pair_step!("{a}", "0", "{b}"),
    "addvl {a}, {a}, #2",
    "addvl {b}, {b}, #2",
    "subs {k}, {k}, #1",
    "b.ne 44b",
    "5:",
);

/// The SME2 kernel: A with 4-vector loads (two depth steps each), each B row with one
/// 2-vector load; 16 depth steps per loop iteration (64 FMOPA, 8 + 16 loads, 5 loop
/// instructions: 0.69). The depth loops are shared by the tile kernel and the partial-tile
/// kernel, which differ in prologue and epilogue only.
macro_rules! sme2_kernel {
    ($(#[$doc:meta])* $name:ident $(($($xp:ident),+))?, $pro:expr, $epi:expr) => {
        sme_kernel!(
            $(#[$doc])*
            $name $(($($xp),+))?,
            "sme2",
            [bh, a2, b2],
            $pro,
            $epi,
        "ptrue pn8.s",
        "cmp {ldb}, {s}, lsl #1",
        "b.eq 40f",
        "lsr {n}, {k}, #4",
        "cbz {n}, 3f",
        row_offsets!(),
        "add {bh}, {b}, {o4}, lsl #3",
        "addvl {a}, {a}, #16",
        "2:",
        sme2_pair!("-16", "{b}", "", ", {ldb}, lsl #2"),
        sme2_pair!("-12", "{b}", ", {t}, lsl #2", ", {u}, lsl #2"),
        sme2_pair!("-8", "{b}", ", {o4}, lsl #2", ", {o5}, lsl #2"),
        sme2_pair!("-4", "{b}", ", {o6}, lsl #2", ", {o7}, lsl #2"),
        sme2_pair!("0", "{bh}", "", ", {ldb}, lsl #2"),
        sme2_pair!("4", "{bh}", ", {t}, lsl #2", ", {u}, lsl #2"),
        sme2_pair!("8", "{bh}", ", {o4}, lsl #2", ", {o5}, lsl #2"),
        sme2_pair!("12", "{bh}", ", {o6}, lsl #2", ", {o7}, lsl #2"),
        "add {a}, {a}, {s}, lsl #7",
        "add {b}, {b}, {o4}, lsl #4",
        "add {bh}, {bh}, {o4}, lsl #4",
        "subs {n}, {n}, #1",
        "b.ne 2b",
        "addvl {a}, {a}, #-16",
        "3:",
        "ands {k}, {k}, #15",
        "b.eq 5f",
        "4:",
        "ld1w {{z0.s-z1.s}}, pn8/z, [{a}]",
        "ld1w {{z4.s-z5.s}}, pn8/z, [{b}]",
        fmopa4!("z0", "z1", "z4", "z5"),
        "addvl {a}, {a}, #2",
        "add {b}, {b}, {ldb}, lsl #2",
        "subs {k}, {k}, #1",
        "b.ne 4b",
        "b 5f",
        // Packed B (ldb = NR = 2S): two depth steps of A and of B per 4-vector load over the
        // whole immediate range (-32..28 vectors from pointers biased by 32 vectors). 64 steps
        // per iteration, the second 32 from a second pair of pointers 64 vectors on: 256 FMOPA,
        // 64 loads, 6 loop instructions (0.787); then at most one 32-step block (128 FMOPA, 32
        // loads, 4 instructions), then single steps.
        "40:",
        "lsl {t}, {s}, #8",              // 32 steps of A or B, bytes (2S floats a step)
        "add {a}, {a}, {t}, lsr #1",
        "add {b}, {b}, {t}, lsr #1",
        "lsr {n}, {k}, #6",
        "cbz {n}, 46f",
        "add {a2}, {a}, {t}",
        "add {b2}, {b}, {t}",
        "lsl {u}, {t}, #1",              // 64 steps, bytes
        "45:",
        sme2_packed_pair!("-32"),
        sme2_packed_pair!("-28"),
        sme2_packed_pair!("-24"),
        sme2_packed_pair!("-20"),
        sme2_packed_pair!("-16"),
        sme2_packed_pair!("-12"),
        sme2_packed_pair!("-8"),
        sme2_packed_pair!("-4"),
        sme2_packed_pair!("0"),
        sme2_packed_pair!("4"),
        sme2_packed_pair!("8"),
        sme2_packed_pair!("12"),
        sme2_packed_pair!("16"),
        sme2_packed_pair!("20"),
        sme2_packed_pair!("24"),
        sme2_packed_pair!("28"),
        sme2_packed_pair2!("-32"),
        sme2_packed_pair2!("-28"),
        sme2_packed_pair2!("-24"),
        sme2_packed_pair2!("-20"),
        sme2_packed_pair2!("-16"),
        sme2_packed_pair2!("-12"),
        sme2_packed_pair2!("-8"),
        sme2_packed_pair2!("-4"),
        sme2_packed_pair2!("0"),
        sme2_packed_pair2!("4"),
        sme2_packed_pair2!("8"),
        sme2_packed_pair2!("12"),
        sme2_packed_pair2!("16"),
        sme2_packed_pair2!("20"),
        sme2_packed_pair2!("24"),
        sme2_packed_pair2!("28"),
        "add {a}, {a}, {u}",
        "add {b}, {b}, {u}",
        "add {a2}, {a2}, {u}",
        "add {b2}, {b2}, {u}",
        "subs {n}, {n}, #1",
        "b.ne 45b",
        "46:",
        "tbz {k}, #5, 42f",
        "41:",
        sme2_packed_pair!("-32"),
        sme2_packed_pair!("-28"),
        sme2_packed_pair!("-24"),
        sme2_packed_pair!("-20"),
        sme2_packed_pair!("-16"),
        sme2_packed_pair!("-12"),
        sme2_packed_pair!("-8"),
        sme2_packed_pair!("-4"),
        sme2_packed_pair!("0"),
        sme2_packed_pair!("4"),
        sme2_packed_pair!("8"),
        sme2_packed_pair!("12"),
        sme2_packed_pair!("16"),
        sme2_packed_pair!("20"),
        sme2_packed_pair!("24"),
        sme2_packed_pair!("28"),
        "add {a}, {a}, {t}",
        "add {b}, {b}, {t}",
        "42:",
        "sub {a}, {a}, {t}, lsr #1",
        "sub {b}, {b}, {t}, lsr #1",
        "43:",
        "ands {k}, {k}, #31",
        "b.eq 5f",
        "44:",
        "ld1w {{z0.s-z1.s}}, pn8/z, [{a}]",
        "ld1w {{z4.s-z5.s}}, pn8/z, [{b}]",
        fmopa4!("z0", "z1", "z4", "z5"),
        "addvl {a}, {a}, #2",
        "addvl {b}, {b}, #2",
        "subs {k}, {k}, #1",
        "b.ne 44b",
        "5:",
        );
    };
}

sme2_kernel!(
    /// The SME2 tile: C loaded into ZA first when `beta = 1` (mode 2).
    sme2_rows,
    za_prologue!(),
    za_epilogue!()
);

sme2_kernel!(
    /// The SME2 partial tile ([`PartFn`](crate::linalg::gemm::PartFn)): ZA zeroed, rows below `rows` and columns below
    /// `cols` stored.
    sme2_part(rows, cols),
    "zero {{za}}",
    za_part_epilogue!()
);

/// The SME1 `2S × 2S` micro-kernel (`S = SVL/32`).
///
/// Layout contract: that of [`MicroKernel`] with `MR = NR = 2S`: `a[p*MR + i] = A(i, p)`,
/// `b[p*ldb + j] = B(p, j)`, C element `(i, j)` at `c[i*rsc + j]`,
/// `c = alpha·AB (+ beta·c if beta ≠ 0) (+ bias)`. No alignment beyond f32 is needed.
///
/// # Safety
/// That contract on a CPU with SME (FEAT_SME, F32F32), called outside streaming mode.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_sme1(
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
) {
    // SAFETY: forwarded contract; SME present (caller).
    unsafe { sme1_rows(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

/// The SME2 `2S × 2S` micro-kernel: [`kernel_sme1`]'s contract, multi-vector loads.
///
/// # Safety
/// As [`kernel_sme1`], on a CPU with SME2.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_sme2(
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
) {
    // SAFETY: forwarded contract; SME2 present (caller).
    unsafe { sme2_rows(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

/// The SME2 partial tile: [`kernel_sme2`]'s depth loops, the first `rows` rows and `cols`
/// columns stored (the [`PartFn`](crate::linalg::gemm::PartFn) contract with `MR = NR = 2S`).
///
/// # Safety
/// The [`PartFn`](crate::linalg::gemm::PartFn) contract for `MR = NR = 2·SVL/32`, on a CPU with SME2, called outside
/// streaming mode.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_sme2_part(
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
) {
    // SAFETY: forwarded contract; SME2 present (caller).
    unsafe { sme2_part(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi, rows, cols) }
}

macro_rules! statics {
    ($f:ident, $pack:ident, $name:literal, $($id:ident = $t:literal),*) => {
        $(
            // SAFETY: the kernel implements the contract for MR = NR = 2·SVL/32; each static
            // declares the tile of one SVL and is handed out only when the CPU has the
            // extension and its SVL matches (`pick`).
            // `pack_za` (SME) and `pack_za2` (SME2) implement the PackFn contract for
            // w = MR = NR = 2·SVL/32 under the same condition (the kernel's extension
            // present). Long depth blocks: the tile stays in ZA.
            static $id: MicroKernel = unsafe {
                MicroKernel::new($name, $t, $t, $f)
                    .with_packer($pack)
                    .with_kc_max(1024)
            };
        )*
    };
}
statics!(
    kernel_sme1,
    pack_za,
    "sme-2x2za",
    SME1_8 = 8,
    SME1_16 = 16,
    SME1_32 = 32
);

/// The SME2 tiles of each SVL (as `statics!`), with the partial-tile entry.
macro_rules! statics_sme2 {
    ($($id:ident = $t:literal),*) => {
        $(
            // SAFETY: as `statics!` for `kernel_sme2` / `pack_za2`; `kernel_sme2_part`
            // implements the PartFn contract and `kernel_sme2_short` the ShortFn contract
            // (with the part's bits) for the same tile under the same condition, and
            // `pack_za2_edge` the edge packer's contract for w = MR = NR; no wide entry.
            static $id: MicroKernel = unsafe {
                MicroKernel::new("sme2-2x2za", $t, $t, kernel_sme2)
                    .with_packer(pack_za2)
                    .with_kc_max(1024)
                    .with_part(kernel_sme2_part)
                    .with_short(kernel_sme2_short)
                    .with_edge_packer(pack_za2_edge)
            };
        )*
    };
}
statics_sme2!(SME2_8 = 8, SME2_16 = 16, SME2_32 = 32);

fn pick(t: [&'static MicroKernel; 3]) -> Option<&'static MicroKernel> {
    match svl_bytes() {
        16 => Some(t[0]),
        32 => Some(t[1]),
        64 => Some(t[2]),
        _ => None,
    }
}

/// The SME1 kernel for the current SVL (128, 256 or 512 bits), if SME is present.
pub fn kernel_sme1_for_cpu() -> Option<&'static MicroKernel> {
    let f = crate::linalg::cpu::features();
    if !(f.sme && f.sme_f32f32) {
        return None;
    }
    pick([&SME1_8, &SME1_16, &SME1_32])
}

/// The SME2 kernel for the current SVL, if SME2 is present.
pub fn kernel_sme2_for_cpu() -> Option<&'static MicroKernel> {
    let f = crate::linalg::cpu::features();
    if !(f.sme2 && f.sme_f32f32) {
        return None;
    }
    pick([&SME2_8, &SME2_16, &SME2_32])
}
