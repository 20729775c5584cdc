//! SVE2 vector-length-agnostic micro-kernel (`asm!` inside `#[target_feature(enable = "sve2")]`).
//!
//! Register tile: 8 rows × 3 vectors (NR = 3·VL/32 columns), 24 accumulators z8–z31.
//! Per depth step: two `ld1rqw` (A rows 0–3 and 4–7 replicated into every 128-bit segment),
//! one `ld3w` of the B row (three vectors in one structure load, columns de-interleaved by 3;
//! the kernel reads a row-major B in place, rows at register offsets) and 24
//! `fmla z.s, z.s, z.s[lane]` (indexed by A lane; the indexed form needs its multiplicand in
//! z0–z7, hence the register map): 24 FMLA in 27 instructions, plus 4 per eight depth steps
//! (0.873 in the loop). C and bias go through `ld3w`/`st3w`, which undo the column
//! permutation. Stable Rust has no SVE intrinsics, hence `asm!`.
//!
//! Wide entry ([`kernel_vla_wide`], [`crate::linalg::gemm::WideA`]): when the driver packs A
//! itself and the row has 3 or more column tiles, [`expand_wide`] rewrites each packed panel
//! so that every two depth steps are one block of 4 vectors, each 4-row group repeated in
//! every 128-bit segment (`VL/128` copies). One `ld4w` then gives the 8 rows of two steps in
//! z0–z3: 48 FMLA per 51 instructions, 16 steps per iteration over a packed B (0.932 in the
//! loop), against 27 instructions per 24 FMLA with the two `ld1rqw` per step of the plain
//! entry. Both entries issue the same FMLAs in the same order: their results are identical.

use core::arch::asm;

use crate::linalg::gemm::contract::{clamp_tile, MicroKernel};
#[cfg(doc)]
use crate::linalg::gemm::contract::{ExpandFn, WideA};

/// Rows of the tile.
pub const MR: usize = 8;

/// Preferred depth block: the whole depth of the GPT-2 products in one block, so each C tile
/// is stored once (every extra block costs a reload of C and a kernel entry per tile).
const KC_MAX: usize = 1024;

/// 32-bit lanes in the (non-streaming) SVE vector.
///
/// # Safety
/// The CPU must implement SVE (and the OS must allow it).
#[target_feature(enable = "sve")]
pub unsafe fn cntw() -> usize {
    let n: usize;
    // SAFETY: CNTW only reads the current vector length (SVE present: caller). Not `pure`:
    // the vector length is run-time state (prctl / ZCR_EL1 writes).
    unsafe { asm!("cntw {}", out(reg) n, options(nomem, nostack, preserves_flags)) };
    n
}

/// The 24 indexed FMLAs of one depth step as asm text: tile row `i` (accumulators
/// `z8+3i .. z10+3i`) gets the three B vectors `$b0..$b2` times lane `i mod 4` of `$lo`
/// (rows 0–3) or `$hi` (rows 4–7).
macro_rules! fmla24 {
    ($lo:literal, $hi:literal, $b0:literal, $b1:literal, $b2:literal) => {
        concat!(
            "fmla z8.s, ",
            $b0,
            ".s, ",
            $lo,
            ".s[0]\n",
            "fmla z9.s, ",
            $b1,
            ".s, ",
            $lo,
            ".s[0]\n",
            "fmla z10.s, ",
            $b2,
            ".s, ",
            $lo,
            ".s[0]\n",
            "fmla z11.s, ",
            $b0,
            ".s, ",
            $lo,
            ".s[1]\n",
            "fmla z12.s, ",
            $b1,
            ".s, ",
            $lo,
            ".s[1]\n",
            "fmla z13.s, ",
            $b2,
            ".s, ",
            $lo,
            ".s[1]\n",
            "fmla z14.s, ",
            $b0,
            ".s, ",
            $lo,
            ".s[2]\n",
            "fmla z15.s, ",
            $b1,
            ".s, ",
            $lo,
            ".s[2]\n",
            "fmla z16.s, ",
            $b2,
            ".s, ",
            $lo,
            ".s[2]\n",
            "fmla z17.s, ",
            $b0,
            ".s, ",
            $lo,
            ".s[3]\n",
            "fmla z18.s, ",
            $b1,
            ".s, ",
            $lo,
            ".s[3]\n",
            "fmla z19.s, ",
            $b2,
            ".s, ",
            $lo,
            ".s[3]\n",
            "fmla z20.s, ",
            $b0,
            ".s, ",
            $hi,
            ".s[0]\n",
            "fmla z21.s, ",
            $b1,
            ".s, ",
            $hi,
            ".s[0]\n",
            "fmla z22.s, ",
            $b2,
            ".s, ",
            $hi,
            ".s[0]\n",
            "fmla z23.s, ",
            $b0,
            ".s, ",
            $hi,
            ".s[1]\n",
            "fmla z24.s, ",
            $b1,
            ".s, ",
            $hi,
            ".s[1]\n",
            "fmla z25.s, ",
            $b2,
            ".s, ",
            $hi,
            ".s[1]\n",
            "fmla z26.s, ",
            $b0,
            ".s, ",
            $hi,
            ".s[2]\n",
            "fmla z27.s, ",
            $b1,
            ".s, ",
            $hi,
            ".s[2]\n",
            "fmla z28.s, ",
            $b2,
            ".s, ",
            $hi,
            ".s[2]\n",
            "fmla z29.s, ",
            $b0,
            ".s, ",
            $hi,
            ".s[3]\n",
            "fmla z30.s, ",
            $b1,
            ".s, ",
            $hi,
            ".s[3]\n",
            "fmla z31.s, ",
            $b2,
            ".s, ",
            $hi,
            ".s[3]\n",
        )
    };
}

/// One depth step of the SVE2 kernel as asm text: A rows 0–3 / 4–7 replicated per 128-bit
/// segment (`ld1rqw` at byte offsets `$a0`, `$a1` from `{a}`), one B row of 3 vectors with a
/// single `ld3w` at `{b}` plus the row offset `$o` (`, {oJ}, lsl #2`, or empty for row 0),
/// 24 indexed FMLAs into z8–z31.
///
/// `ld3w` de-interleaves: z2, z3, z4 hold the row's columns `3q`, `3q + 1`, `3q + 2`, so the
/// accumulators of tile row `i` (z8+3i .. z10+3i) hold columns in that order too, and every
/// C / bias access of the epilogue goes through `ld3w` / `st3w` with the same permutation.
macro_rules! sve_step {
    ($a0:literal, $a1:literal, $o:literal) => {
        concat!(
            "ld1rqw {{z0.s}}, p0/z, [{a}, #",
            $a0,
            "]\n",
            "ld1rqw {{z1.s}}, p0/z, [{a}, #",
            $a1,
            "]\n",
            "ld3w {{z2.s, z3.s, z4.s}}, p0/z, [{b}",
            $o,
            "]\n",
            fmla24!("z0", "z1", "z2", "z3", "z4"),
        )
    };
}

/// Zeroes the 24 accumulators z8–z31 (asm text).
macro_rules! sve_zero24 {
    () => {
        concat!(
            "dup z8.s, #0\n",
            "dup z9.s, #0\n",
            "dup z10.s, #0\n",
            "dup z11.s, #0\n",
            "dup z12.s, #0\n",
            "dup z13.s, #0\n",
            "dup z14.s, #0\n",
            "dup z15.s, #0\n",
            "dup z16.s, #0\n",
            "dup z17.s, #0\n",
            "dup z18.s, #0\n",
            "dup z19.s, #0\n",
            "dup z20.s, #0\n",
            "dup z21.s, #0\n",
            "dup z22.s, #0\n",
            "dup z23.s, #0\n",
            "dup z24.s, #0\n",
            "dup z25.s, #0\n",
            "dup z26.s, #0\n",
            "dup z27.s, #0\n",
            "dup z28.s, #0\n",
            "dup z29.s, #0\n",
            "dup z30.s, #0\n",
            "dup z31.s, #0",
        )
    };
}

/// The epilogue of the 8 × 3·VL tile as asm text: scales by `{alpha}` unless `{alpha1}`,
/// adds `{beta}`·C when `{betaf}` and the bias when `{bias}` is non-null (all through
/// `ld3w`, the accumulators' column order), stores the 8 rows with `st3w` at `{c}`, `{rsc}`
/// bytes apart. Uses z0–z7 and `{t}`.
macro_rules! sve_epilogue {
    () => {
        concat!(
            "cbnz {alpha1}, 9f\n",
            "dup z0.s, {alpha:w}\n",
            "fmul z8.s, z8.s, z0.s\n",
            "fmul z9.s, z9.s, z0.s\n",
            "fmul z10.s, z10.s, z0.s\n",
            "fmul z11.s, z11.s, z0.s\n",
            "fmul z12.s, z12.s, z0.s\n",
            "fmul z13.s, z13.s, z0.s\n",
            "fmul z14.s, z14.s, z0.s\n",
            "fmul z15.s, z15.s, z0.s\n",
            "fmul z16.s, z16.s, z0.s\n",
            "fmul z17.s, z17.s, z0.s\n",
            "fmul z18.s, z18.s, z0.s\n",
            "fmul z19.s, z19.s, z0.s\n",
            "fmul z20.s, z20.s, z0.s\n",
            "fmul z21.s, z21.s, z0.s\n",
            "fmul z22.s, z22.s, z0.s\n",
            "fmul z23.s, z23.s, z0.s\n",
            "fmul z24.s, z24.s, z0.s\n",
            "fmul z25.s, z25.s, z0.s\n",
            "fmul z26.s, z26.s, z0.s\n",
            "fmul z27.s, z27.s, z0.s\n",
            "fmul z28.s, z28.s, z0.s\n",
            "fmul z29.s, z29.s, z0.s\n",
            "fmul z30.s, z30.s, z0.s\n",
            "fmul z31.s, z31.s, z0.s\n",
            "9:\n",
            "cbz {betaf}, 6f\n",
            "dup z1.s, {beta:w}\n",
            "mov {t}, {c}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z8.s, p0/m, z5.s, z1.s\n",
            "fmla z9.s, p0/m, z6.s, z1.s\n",
            "fmla z10.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z11.s, p0/m, z5.s, z1.s\n",
            "fmla z12.s, p0/m, z6.s, z1.s\n",
            "fmla z13.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z14.s, p0/m, z5.s, z1.s\n",
            "fmla z15.s, p0/m, z6.s, z1.s\n",
            "fmla z16.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z17.s, p0/m, z5.s, z1.s\n",
            "fmla z18.s, p0/m, z6.s, z1.s\n",
            "fmla z19.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z20.s, p0/m, z5.s, z1.s\n",
            "fmla z21.s, p0/m, z6.s, z1.s\n",
            "fmla z22.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z23.s, p0/m, z5.s, z1.s\n",
            "fmla z24.s, p0/m, z6.s, z1.s\n",
            "fmla z25.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z26.s, p0/m, z5.s, z1.s\n",
            "fmla z27.s, p0/m, z6.s, z1.s\n",
            "fmla z28.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]\n",
            "fmla z29.s, p0/m, z5.s, z1.s\n",
            "fmla z30.s, p0/m, z6.s, z1.s\n",
            "fmla z31.s, p0/m, z7.s, z1.s\n",
            "add {t}, {t}, {rsc}\n",
            "6:\n",
            "cbz {bias}, 7f\n",
            "ld3w {{z2.s, z3.s, z4.s}}, p0/z, [{bias}]\n",
            "fadd z8.s, z8.s, z2.s\n",
            "fadd z9.s, z9.s, z3.s\n",
            "fadd z10.s, z10.s, z4.s\n",
            "fadd z11.s, z11.s, z2.s\n",
            "fadd z12.s, z12.s, z3.s\n",
            "fadd z13.s, z13.s, z4.s\n",
            "fadd z14.s, z14.s, z2.s\n",
            "fadd z15.s, z15.s, z3.s\n",
            "fadd z16.s, z16.s, z4.s\n",
            "fadd z17.s, z17.s, z2.s\n",
            "fadd z18.s, z18.s, z3.s\n",
            "fadd z19.s, z19.s, z4.s\n",
            "fadd z20.s, z20.s, z2.s\n",
            "fadd z21.s, z21.s, z3.s\n",
            "fadd z22.s, z22.s, z4.s\n",
            "fadd z23.s, z23.s, z2.s\n",
            "fadd z24.s, z24.s, z3.s\n",
            "fadd z25.s, z25.s, z4.s\n",
            "fadd z26.s, z26.s, z2.s\n",
            "fadd z27.s, z27.s, z3.s\n",
            "fadd z28.s, z28.s, z4.s\n",
            "fadd z29.s, z29.s, z2.s\n",
            "fadd z30.s, z30.s, z3.s\n",
            "fadd z31.s, z31.s, z4.s\n",
            "7:\n",
            "st3w {{z8.s, z9.s, z10.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z11.s, z12.s, z13.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z14.s, z15.s, z16.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z17.s, z18.s, z19.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z20.s, z21.s, z22.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z23.s, z24.s, z25.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z26.s, z27.s, z28.s}}, p0, [{c}]\n",
            "add {c}, {c}, {rsc}\n",
            "st3w {{z29.s, z30.s, z31.s}}, p0, [{c}]",
        )
    };
}

/// Two depth steps of the wide-panel kernel as asm text: one `ld4w` of the wide A block
/// at `$a` vectors from `{a}` (z0/z1: rows 0–3 / 4–7 of the first step, z2/z3 of the
/// second, every 128-bit segment alike), then per step one `ld3w` of the B row at `[$b0]` /
/// `[$b1]` into z4–z6 and its 24 FMLAs.
macro_rules! wide_pair {
    ($a:literal, $b0:literal, $b1:literal) => {
        concat!(
            "ld4w {{z0.s, z1.s, z2.s, z3.s}}, p0/z, [{a}, #",
            $a,
            ", mul vl]\n",
            "ld3w {{z4.s, z5.s, z6.s}}, p0/z, [",
            $b0,
            "]\n",
            fmla24!("z0", "z1", "z4", "z5", "z6"),
            "\n",
            "ld3w {{z4.s, z5.s, z6.s}}, p0/z, [",
            $b1,
            "]\n",
            fmla24!("z2", "z3", "z4", "z5", "z6"),
            "\n",
        )
    };
}

/// The `asm!` block of an 8 × 3·VL tile kernel: the given lines with the operands every
/// such body uses (`{k}`, `{a}`, `{b}`, `{ldb}`, `{c}`, `{rsc}` in bytes, `{alpha}`,
/// `{alpha1}`, `{beta}`, `{betaf}`, `{bias}` from the kernel's arguments, scratch `{n}`,
/// `{t}`, `{o2}`–`{o7}` and the listed extra scratch registers), every vector register and p0
/// clobbered (z8–z31 alias v8–v31, so the compiler keeps the callee-saved d8–d15 itself),
/// flags too (no `preserves_flags`).
macro_rules! sve_tile_asm {
    (($k:ident, $a:ident, $b:ident, $ldb:ident, $c:ident, $rsc:ident, $alpha:ident,
      $beta:ident, $bias:ident), [$($extra:ident),*], $($line:expr),* $(,)?) => {
        asm!(
            $($line,)*
            k = inout(reg) $k => _,
            a = inout(reg) $a => _,
            b = inout(reg) $b => _,
            ldb = in(reg) $ldb,
            c = inout(reg) $c => _,
            rsc = in(reg) $rsc * 4,
            alpha = in(reg) $alpha.to_bits(),
            alpha1 = in(reg) ($alpha == 1.0) as u64,
            beta = in(reg) $beta.to_bits(),
            betaf = in(reg) ($beta != 0.0) as u64,
            bias = in(reg) $bias,
            n = out(reg) _,
            t = out(reg) _,
            $($extra = out(reg) _,)*
            o2 = out(reg) _,
            o3 = out(reg) _,
            o4 = out(reg) _,
            o5 = out(reg) _,
            o6 = out(reg) _,
            o7 = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _,
            out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _,
            out("v17") _, out("v18") _, out("v19") _, out("v20") _, out("v21") _,
            out("v22") _, out("v23") _, out("v24") _, out("v25") _, out("v26") _,
            out("v27") _, out("v28") _, out("v29") _, out("v30") _, out("v31") _,
            out("p0") _,
            options(nostack),
        )
    };
}

/// The SVE2 kernel body for the current vector length.
///
/// Layout contract (the [`MicroKernel`] one with `MR = 8`, `NR = 3·W`, `W = cntw()`):
/// `a[p*8 + i] = A(i, p)`, `b[p*ldb + j] = B(p, j)`, C element `(i, j)` at `c[i*rsc + j]`
///
/// # Safety
/// The contract above and a CPU with SVE2 whose vector length gives `NR`.
#[target_feature(enable = "sve2")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_sve2_rows(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: the loads read exactly 8·k floats from `a` (ld1rqw of 4 floats at a + 32p and
    // a + 32p + 16 bytes) and, for p < k, 3·VL bytes = NR floats at `b + p·ldb` (the B rows
    // of the contract; ld3w reads those NR contiguous floats); the optional beta loads and
    // the stores touch C rows i < 8 at `c + i*rsc`, NR contiguous floats each, and
    // the bias load reads NR floats — all guaranteed by the contract. Every vector and
    // predicate register the block writes is declared clobbered (z8–z31 alias v8–v31, so the
    // compiler preserves the callee-saved d8–d15 itself); flags are clobbered (no
    // `preserves_flags`). SVE2 is present (caller, target_feature).
    unsafe {
        sve_tile_asm!(
            (k, a, b, ldb, c, rsc, alpha, beta, bias),
            [],
            "ptrue p0.s",
            sve_zero24!(),
            // 8 depth steps per iteration: A at immediate offsets from {a} + 128 bytes, the B
            // rows at register offsets j·ldb (floats) from {b}.
            "lsr {n}, {k}, #3",
            "cbz {n}, 3f",
            "lsl {o2}, {ldb}, #1",
            "add {o3}, {o2}, {ldb}",
            "lsl {o4}, {ldb}, #2",
            "add {o5}, {o4}, {ldb}",
            "add {o6}, {o4}, {o2}",
            "add {o7}, {o4}, {o3}",
            "add {a}, {a}, #128",
            "2:",
            sve_step!("-128", "-112", ""),
            sve_step!("-96", "-80", ", {ldb}, lsl #2"),
            sve_step!("-64", "-48", ", {o2}, lsl #2"),
            sve_step!("-32", "-16", ", {o3}, lsl #2"),
            sve_step!("0", "16", ", {o4}, lsl #2"),
            sve_step!("32", "48", ", {o5}, lsl #2"),
            sve_step!("64", "80", ", {o6}, lsl #2"),
            sve_step!("96", "112", ", {o7}, lsl #2"),
            "add {a}, {a}, #256",
            "add {b}, {b}, {o4}, lsl #3",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "sub {a}, {a}, #128",
            "3:",
            "ands {k}, {k}, #7",
            "b.eq 5f",
            "4:",
            sve_step!("0", "16", ""),
            "add {a}, {a}, #32",
            "add {b}, {b}, {ldb}, lsl #2",
            "subs {k}, {k}, #1",
            "b.ne 4b",
            "5:",
            sve_epilogue!(),
        );
    }
}

/// The SVE2 `8 × 3·VL/32` micro-kernel, vector-length agnostic.
///
/// Layout contract: that of [`MicroKernel`] with `MR = 8` and `NR = 3·cntw()` (12 at VL 128,
/// 24 at 256, 48 at 512 bits): `a[p*8 + i] = A(i, p)`, `b[p*ldb + j] = B(p, j)`, C element
/// `(i, j)` at `c[i*rsc + j]`, `c = alpha·AB (+ beta·c if beta ≠ 0) (+ bias)`. (A plain-`fn`
/// shim over the `target_feature` body, for the `MicroKernelFn` pointer type.)
///
/// # Safety
/// The [`MicroKernel`] contract with that `NR`, on a CPU with SVE2.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_vla(
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
    // SAFETY: SVE2 is present and NR = 3·cntw (the caller's contract; the statics below are
    // only handed out by `kernel()` after checking both); the clamp reads and writes the
    // same 8 × NR tile the kernel stored.
    unsafe {
        kernel_sve2_rows(k, a, b, ldb, c, rsc, alpha, beta, bias);
        clamp_tile(c, rsc, MR, 3 * cntw(), lo, hi);
    }
}

/// The SVE2 kernel body reading A from wide panels ([`WideA`]: one `ld4w` per two depth
/// steps instead of four `ld1rqw`): 48 FMLA per 51 instructions. A B read in place (rows
/// `ldb` apart) goes 8 steps per iteration with the row offsets in registers; a packed B
/// (`ldb == NR`, consecutive rows 3 vectors apart) 16 steps with immediate offsets
/// (408 + 4 instructions per 384 FMLA).
///
/// Layout contract: the [`MicroKernel`] one with `MR = 8`, `NR = 3·W`, `W = cntw()`, except
/// that `a` is a wide panel of `k` steps (`⌈k/2⌉·16·W/4` floats, see [`WideA`]).
///
/// # Safety
/// The contract above and a CPU with SVE2 whose vector length gives `NR`.
#[target_feature(enable = "sve2")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_sve2_wide_rows(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: the `ld4w` loads read the ⌈k/2⌉ blocks of 4 vectors of the wide panel (the
    // last one also for an odd k, where its second step is padding and only z0/z1 are
    // used); for p < k one `ld3w` reads the NR contiguous floats of B row p (at p·ldb
    // floats from `b`; packed: 3 vectors apart, the immediate offsets below are rows
    // -8..7 from {b} biased by 8 rows); beta loads, bias load and stores as in
    // `kernel_sve2_rows` (the shared epilogue), inside the contract's C tile and bias.
    // Every vector/predicate register the block writes is declared clobbered; flags too.
    // SVE2 is present (caller, target_feature).
    unsafe {
        sve_tile_asm!(
            (k, a, b, ldb, c, rsc, alpha, beta, bias),
            [u],
            "ptrue p0.s",
            sve_zero24!(),
            "cntw {t}",
            "add {t}, {t}, {t}, lsl #1",
            "cmp {ldb}, {t}",
            "b.eq 40f",
            // B in place: 8 steps per iteration, row offsets j·ldb in registers.
            "lsr {n}, {k}, #3",
            "cbz {n}, 43f",
            "lsl {o2}, {ldb}, #1",
            "add {o3}, {o2}, {ldb}",
            "lsl {o4}, {ldb}, #2",
            "add {o5}, {o4}, {ldb}",
            "add {o6}, {o4}, {o2}",
            "add {o7}, {o4}, {o3}",
            "2:",
            wide_pair!("0", "{b}", "{b}, {ldb}, lsl #2"),
            wide_pair!("4", "{b}, {o2}, lsl #2", "{b}, {o3}, lsl #2"),
            wide_pair!("8", "{b}, {o4}, lsl #2", "{b}, {o5}, lsl #2"),
            wide_pair!("12", "{b}, {o6}, lsl #2", "{b}, {o7}, lsl #2"),
            "addvl {a}, {a}, #16",
            "add {b}, {b}, {o4}, lsl #3",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "and {k}, {k}, #7",
            "b 43f",
            // Packed B: 16 steps per iteration over the immediate ranges (ld4w -32..28,
            // ld3w -24..21 vectors), {b} biased by 8 rows; {u} = 32 vectors of A, {t} = 16
            // B rows (48 vectors), in bytes.
            "40:",
            "lsr {n}, {k}, #4",
            "cbz {n}, 42f",
            "rdvl {u}, #16",
            "lsl {u}, {u}, #1",
            "rdvl {t}, #24",
            "lsl {t}, {t}, #1",
            "addvl {b}, {b}, #24",
            "41:",
            wide_pair!("0", "{b}, #-24, mul vl", "{b}, #-21, mul vl"),
            wide_pair!("4", "{b}, #-18, mul vl", "{b}, #-15, mul vl"),
            wide_pair!("8", "{b}, #-12, mul vl", "{b}, #-9, mul vl"),
            wide_pair!("12", "{b}, #-6, mul vl", "{b}, #-3, mul vl"),
            wide_pair!("16", "{b}", "{b}, #3, mul vl"),
            wide_pair!("20", "{b}, #6, mul vl", "{b}, #9, mul vl"),
            wide_pair!("24", "{b}, #12, mul vl", "{b}, #15, mul vl"),
            wide_pair!("28", "{b}, #18, mul vl", "{b}, #21, mul vl"),
            "add {a}, {a}, {u}",
            "add {b}, {b}, {t}",
            "subs {n}, {n}, #1",
            "b.ne 41b",
            "addvl {b}, {b}, #-24",
            "42:",
            "and {k}, {k}, #15",
            // The remaining steps: pairs, then an odd last step (rows in z0/z1).
            "43:",
            "lsr {n}, {k}, #1",
            "cbz {n}, 45f",
            "44:",
            wide_pair!("0", "{b}", "{b}, {ldb}, lsl #2"),
            "addvl {a}, {a}, #4",
            "add {b}, {b}, {ldb}, lsl #3",
            "subs {n}, {n}, #1",
            "b.ne 44b",
            "45:",
            "tbz {k}, #0, 5f",
            "ld4w {{z0.s, z1.s, z2.s, z3.s}}, p0/z, [{a}]",
            "ld3w {{z4.s, z5.s, z6.s}}, p0/z, [{b}]",
            fmla24!("z0", "z1", "z4", "z5", "z6"),
            "5:",
            sve_epilogue!(),
        );
    }
}

/// [`kernel_vla`] reading A from a wide panel ([`WideA`], `rep = cntw()/4`).
///
/// # Safety
/// The [`MicroKernel`] contract with `NR = 3·cntw()` and A a wide panel, on a CPU with SVE2.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_vla_wide(
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
    // SAFETY: as `kernel_vla`, with the wide panel the caller passes.
    unsafe {
        kernel_sve2_wide_rows(k, a, b, ldb, c, rsc, alpha, beta, bias);
        clamp_tile(c, rsc, MR, 3 * cntw(), lo, hi);
    }
}

/// Expands MR-interleaved A panels into wide ones ([`ExpandFn`] contract, `rep = cntw()/4`):
/// per block of two depth steps, four `ld1rqw` (each 4-row group replicated into every
/// 128-bit segment) and one `st4w`, which interleaves them as the kernel's `ld4w` takes
/// them apart; two blocks per iteration (6.5 instructions per 16 floats).
///
/// # Safety
/// The [`ExpandFn`] contract for `rep = cntw()/4`, on a CPU with SVE2.
pub unsafe fn expand_wide(src: *const f32, panels: usize, kc: usize, dst: *mut f32) {
    let rep = {
        // SAFETY: SVE is present (caller).
        unsafe { cntw() / 4 }
    };
    let len = kc.div_ceil(2) * 16 * rep;
    for q in 0..panels {
        // SAFETY: panel q reads its kc·8 floats at src + q·kc·8 (pairs of steps, 16 floats
        // each, then 8 for an odd kc) and writes ⌈kc/2⌉ blocks of 4 vectors (16·rep floats)
        // at dst + q·len; each block's loads come before its store, and with `src` at the
        // end of the area (contract) the output never reaches input not yet read.
        unsafe { expand_panel(src.add(q * kc * 8), kc, dst.add(q * len)) };
    }
}

/// One panel of [`expand_wide`].
///
/// # Safety
/// As [`expand_wide`] for one panel.
#[target_feature(enable = "sve2")]
unsafe fn expand_panel(src: *const f32, kc: usize, dst: *mut f32) {
    // SAFETY: see `expand_wide`: reads 8·kc floats from `src`, writes ⌈kc/2⌉·4 vectors at
    // `dst`; z0–z7 and p0 are declared clobbered.
    unsafe {
        asm!(
            "ptrue p0.s",
            // Two blocks per iteration while four or more steps remain.
            "lsr {n}, {kc}, #2",
            "cbz {n}, 6f",
            "5:",
            "ld1rqw {{z0.s}}, p0/z, [{s}]",
            "ld1rqw {{z1.s}}, p0/z, [{s}, #16]",
            "ld1rqw {{z2.s}}, p0/z, [{s}, #32]",
            "ld1rqw {{z3.s}}, p0/z, [{s}, #48]",
            "ld1rqw {{z4.s}}, p0/z, [{s}, #64]",
            "ld1rqw {{z5.s}}, p0/z, [{s}, #80]",
            "ld1rqw {{z6.s}}, p0/z, [{s}, #96]",
            "ld1rqw {{z7.s}}, p0/z, [{s}, #112]",
            "add {s}, {s}, #128",
            "st4w {{z0.s, z1.s, z2.s, z3.s}}, p0, [{d}]",
            "st4w {{z4.s, z5.s, z6.s, z7.s}}, p0, [{d}, #4, mul vl]",
            "addvl {d}, {d}, #8",
            "subs {n}, {n}, #1",
            "b.ne 5b",
            "6:",
            "tbz {kc}, #1, 3f",
            "ld1rqw {{z0.s}}, p0/z, [{s}]",
            "ld1rqw {{z1.s}}, p0/z, [{s}, #16]",
            "ld1rqw {{z2.s}}, p0/z, [{s}, #32]",
            "ld1rqw {{z3.s}}, p0/z, [{s}, #48]",
            "add {s}, {s}, #64",
            "st4w {{z0.s, z1.s, z2.s, z3.s}}, p0, [{d}]",
            "addvl {d}, {d}, #4",
            "3:",
            "tbz {kc}, #0, 4f",
            "ld1rqw {{z0.s}}, p0/z, [{s}]",
            "ld1rqw {{z1.s}}, p0/z, [{s}, #16]",
            "dup z2.s, #0",
            "dup z3.s, #0",
            "st4w {{z0.s, z1.s, z2.s, z3.s}}, p0, [{d}]",
            "4:",
            kc = in(reg) kc,
            s = inout(reg) src => _,
            d = inout(reg) dst => _,
            n = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _,
            out("v6") _, out("v7") _,
            out("p0") _,
            options(nostack),
        );
    }
}

// SAFETY: `kernel_vla` implements the contract for MR = 8, NR = 3·cntw() (and the Neon
// `pack_runs_x4` the PackFn contract for w = 8 and w = NR, both multiples of 4; Neon is
// always present); each
// static declares NR for one vector length and `kernel()` hands it out only when SVE2 is
// present and cntw() matches.
static SVE2_VL128: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 12, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
        .with_wide(1, kernel_vla_wide, expand_wide)
};
// SAFETY: see above.
static SVE2_VL256: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 24, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
        .with_wide(2, kernel_vla_wide, expand_wide)
};
// SAFETY: see above.
static SVE2_VL384: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 36, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
        .with_wide(3, kernel_vla_wide, expand_wide)
};
// SAFETY: see above.
static SVE2_VL512: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 48, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
        .with_wide(4, kernel_vla_wide, expand_wide)
};

/// The SVE2 kernel for the current vector length, if SVE2 is present and VL ≤ 512 bits.
/// (The vector length is read now; a process that changes it later must select again.)
pub fn kernel() -> Option<&'static MicroKernel> {
    if !crate::linalg::cpu::features().sve2 {
        return None;
    }
    // SAFETY: SVE is present (checked above).
    match unsafe { cntw() } {
        4 => Some(&SVE2_VL128),
        8 => Some(&SVE2_VL256),
        12 => Some(&SVE2_VL384),
        16 => Some(&SVE2_VL512),
        _ => None,
    }
}
