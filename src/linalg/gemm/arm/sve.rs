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

use core::arch::asm;

use crate::linalg::gemm::contract::{clamp_tile, MicroKernel};

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
            "fmla z8.s, z2.s, z0.s[0]\n",
            "fmla z9.s, z3.s, z0.s[0]\n",
            "fmla z10.s, z4.s, z0.s[0]\n",
            "fmla z11.s, z2.s, z0.s[1]\n",
            "fmla z12.s, z3.s, z0.s[1]\n",
            "fmla z13.s, z4.s, z0.s[1]\n",
            "fmla z14.s, z2.s, z0.s[2]\n",
            "fmla z15.s, z3.s, z0.s[2]\n",
            "fmla z16.s, z4.s, z0.s[2]\n",
            "fmla z17.s, z2.s, z0.s[3]\n",
            "fmla z18.s, z3.s, z0.s[3]\n",
            "fmla z19.s, z4.s, z0.s[3]\n",
            "fmla z20.s, z2.s, z1.s[0]\n",
            "fmla z21.s, z3.s, z1.s[0]\n",
            "fmla z22.s, z4.s, z1.s[0]\n",
            "fmla z23.s, z2.s, z1.s[1]\n",
            "fmla z24.s, z3.s, z1.s[1]\n",
            "fmla z25.s, z4.s, z1.s[1]\n",
            "fmla z26.s, z2.s, z1.s[2]\n",
            "fmla z27.s, z3.s, z1.s[2]\n",
            "fmla z28.s, z4.s, z1.s[2]\n",
            "fmla z29.s, z2.s, z1.s[3]\n",
            "fmla z30.s, z3.s, z1.s[3]\n",
            "fmla z31.s, z4.s, z1.s[3]",
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
        asm!(
            "ptrue p0.s",
            "dup z8.s, #0",
            "dup z9.s, #0",
            "dup z10.s, #0",
            "dup z11.s, #0",
            "dup z12.s, #0",
            "dup z13.s, #0",
            "dup z14.s, #0",
            "dup z15.s, #0",
            "dup z16.s, #0",
            "dup z17.s, #0",
            "dup z18.s, #0",
            "dup z19.s, #0",
            "dup z20.s, #0",
            "dup z21.s, #0",
            "dup z22.s, #0",
            "dup z23.s, #0",
            "dup z24.s, #0",
            "dup z25.s, #0",
            "dup z26.s, #0",
            "dup z27.s, #0",
            "dup z28.s, #0",
            "dup z29.s, #0",
            "dup z30.s, #0",
            "dup z31.s, #0",
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
            "cbnz {alpha1}, 9f",
            "dup z0.s, {alpha:w}",
            "fmul z8.s, z8.s, z0.s",
            "fmul z9.s, z9.s, z0.s",
            "fmul z10.s, z10.s, z0.s",
            "fmul z11.s, z11.s, z0.s",
            "fmul z12.s, z12.s, z0.s",
            "fmul z13.s, z13.s, z0.s",
            "fmul z14.s, z14.s, z0.s",
            "fmul z15.s, z15.s, z0.s",
            "fmul z16.s, z16.s, z0.s",
            "fmul z17.s, z17.s, z0.s",
            "fmul z18.s, z18.s, z0.s",
            "fmul z19.s, z19.s, z0.s",
            "fmul z20.s, z20.s, z0.s",
            "fmul z21.s, z21.s, z0.s",
            "fmul z22.s, z22.s, z0.s",
            "fmul z23.s, z23.s, z0.s",
            "fmul z24.s, z24.s, z0.s",
            "fmul z25.s, z25.s, z0.s",
            "fmul z26.s, z26.s, z0.s",
            "fmul z27.s, z27.s, z0.s",
            "fmul z28.s, z28.s, z0.s",
            "fmul z29.s, z29.s, z0.s",
            "fmul z30.s, z30.s, z0.s",
            "fmul z31.s, z31.s, z0.s",
            "9:",
            "cbz {betaf}, 6f",
            "dup z1.s, {beta:w}",
            "mov {t}, {c}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z8.s, p0/m, z5.s, z1.s",
            "fmla z9.s, p0/m, z6.s, z1.s",
            "fmla z10.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z11.s, p0/m, z5.s, z1.s",
            "fmla z12.s, p0/m, z6.s, z1.s",
            "fmla z13.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z14.s, p0/m, z5.s, z1.s",
            "fmla z15.s, p0/m, z6.s, z1.s",
            "fmla z16.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z17.s, p0/m, z5.s, z1.s",
            "fmla z18.s, p0/m, z6.s, z1.s",
            "fmla z19.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z20.s, p0/m, z5.s, z1.s",
            "fmla z21.s, p0/m, z6.s, z1.s",
            "fmla z22.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z23.s, p0/m, z5.s, z1.s",
            "fmla z24.s, p0/m, z6.s, z1.s",
            "fmla z25.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z26.s, p0/m, z5.s, z1.s",
            "fmla z27.s, p0/m, z6.s, z1.s",
            "fmla z28.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "ld3w {{z5.s, z6.s, z7.s}}, p0/z, [{t}]",
            "fmla z29.s, p0/m, z5.s, z1.s",
            "fmla z30.s, p0/m, z6.s, z1.s",
            "fmla z31.s, p0/m, z7.s, z1.s",
            "add {t}, {t}, {rsc}",
            "6:",
            "cbz {bias}, 7f",
            "ld3w {{z2.s, z3.s, z4.s}}, p0/z, [{bias}]",
            "fadd z8.s, z8.s, z2.s",
            "fadd z9.s, z9.s, z3.s",
            "fadd z10.s, z10.s, z4.s",
            "fadd z11.s, z11.s, z2.s",
            "fadd z12.s, z12.s, z3.s",
            "fadd z13.s, z13.s, z4.s",
            "fadd z14.s, z14.s, z2.s",
            "fadd z15.s, z15.s, z3.s",
            "fadd z16.s, z16.s, z4.s",
            "fadd z17.s, z17.s, z2.s",
            "fadd z18.s, z18.s, z3.s",
            "fadd z19.s, z19.s, z4.s",
            "fadd z20.s, z20.s, z2.s",
            "fadd z21.s, z21.s, z3.s",
            "fadd z22.s, z22.s, z4.s",
            "fadd z23.s, z23.s, z2.s",
            "fadd z24.s, z24.s, z3.s",
            "fadd z25.s, z25.s, z4.s",
            "fadd z26.s, z26.s, z2.s",
            "fadd z27.s, z27.s, z3.s",
            "fadd z28.s, z28.s, z4.s",
            "fadd z29.s, z29.s, z2.s",
            "fadd z30.s, z30.s, z3.s",
            "fadd z31.s, z31.s, z4.s",
            "7:",
            "st3w {{z8.s, z9.s, z10.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z11.s, z12.s, z13.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z14.s, z15.s, z16.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z17.s, z18.s, z19.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z20.s, z21.s, z22.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z23.s, z24.s, z25.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z26.s, z27.s, z28.s}}, p0, [{c}]",
            "add {c}, {c}, {rsc}",
            "st3w {{z29.s, z30.s, z31.s}}, p0, [{c}]",
            k = inout(reg) k => _,
            a = inout(reg) a => _,
            b = inout(reg) b => _,
            ldb = in(reg) ldb,
            c = inout(reg) c => _,
            rsc = in(reg) rsc * 4,
            alpha = in(reg) alpha.to_bits(),
            alpha1 = in(reg) (alpha == 1.0) as u64,
            beta = in(reg) beta.to_bits(),
            betaf = in(reg) (beta != 0.0) as u64,
            bias = in(reg) bias,
            n = out(reg) _,
            t = out(reg) _,
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

// SAFETY: `kernel_vla` implements the contract for MR = 8, NR = 3·cntw() (and the Neon
// `pack_runs_x4` the PackFn contract for w = 8 and w = NR, both multiples of 4; Neon is
// always present); each
// static declares NR for one vector length and `kernel()` hands it out only when SVE2 is
// present and cntw() matches.
static SVE2_VL128: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 12, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
};
// SAFETY: see above.
static SVE2_VL256: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 24, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
};
// SAFETY: see above.
static SVE2_VL384: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 36, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
};
// SAFETY: see above.
static SVE2_VL512: MicroKernel = unsafe {
    MicroKernel::new("sve2-8x3vl", MR, 48, kernel_vla)
        .with_packer(super::neon::pack_runs_x4)
        .with_kc_max(KC_MAX)
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
