//! SME / SME2 micro-kernels: FMOPA fp32 outer products into the four ZA tiles.
//!
//! With `S = SVL/32` lanes, the tile is `2S × 2S` (8 × 8 at SVL 128, 32 × 32 at SVL 512):
//! `za0` = rows 0..S × cols 0..S, `za1` = rows 0..S × cols S..2S, `za2`/`za3` the rows S..2S.
//! Each depth step loads one A column pair (2 vectors, from the MR-interleaved packed A: the
//! column for depth `p` is exactly `a[p*MR..][..MR]`) and one B row pair (2 vectors) and does
//! 4 FMOPAs. SME1 uses single-vector `ld1w` (4 loads per 4 FMOPA: density bound 0.5); SME2
//! loads two depth steps of A and of B with one 4-vector `ld1w {z0.s-z3.s}` each (bound 0.8).
//!
//! Each kernel is one `asm!` block that enters streaming mode (`smstart`), works, and leaves it
//! (`smstop`) — the compiler knows nothing about PSTATE.SM/ZA, so no Rust code runs in
//! between. `smstart`/`smstop` zero the vector and predicate registers, so every vector
//! register (v0–v31: the compiler then saves the callee-saved d8–d15 itself) and every
//! predicate register is declared clobbered. `sme`/`sme2` target features are unstable in
//! Rust 1.95, hence the `.arch_extension` directive at the top of each block.
//!
//! Epilogues: mode 1 (`alpha = 1, beta = 0`, no bias) stores ZA slices straight to C; mode 2
//! (`alpha = 1, beta = 1`, no bias) first loads C into ZA, then accumulates and stores; mode 0
//! (anything else) moves each slice to a vector, scales, adds `beta·C` and the bias.

use core::arch::asm;

use crate::kernels::gemm::MicroKernel;

/// Streaming vector length in bytes (`rdsvl`, legal outside streaming mode).
pub fn svl_bytes() -> usize {
    if !super::features().sme {
        return 0;
    }
    let n: usize;
    // SAFETY: SME is present (checked above); RDSVL only reads the streaming vector length
    // and is legal in non-streaming mode. Not `pure`: SVL is run-time state.
    unsafe {
        asm!(".arch_extension sme", "rdsvl {}, #1", out(reg) n,
            options(nomem, nostack, preserves_flags))
    };
    n
}

macro_rules! sme_kernel {
    ($(#[$doc:meta])* $name:ident, $($line:literal,)*) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The [`MicroKernel`] contract with `MR = NR = 2·SVL/32` and `csc == 1`, on a CPU
        /// with the extension, called from non-streaming mode with ZA off.
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(
            k: usize,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            rsc: isize,
            alpha: f32,
            beta: f32,
            bias: *const f32,
        ) {
            let mode: u64 = if alpha == 1.0 && bias.is_null() && beta == 0.0 {
                1
            } else if alpha == 1.0 && bias.is_null() && beta == 1.0 {
                2
            } else {
                0
            };
            // SAFETY: reads `k·MR` floats of `a` and `k·NR` of `b` (2 vectors of S floats per
            // depth step each, MR = NR = 2S); C rows i < 2S at `c + i·rsc` with 2S contiguous
            // floats (csc == 1), read only when beta ≠ 0 (mode 2 or the beta path of mode 0);
            // bias read (2S floats) only when non-null. All vector/predicate registers, x12
            // (the slice index) and the flags are clobbered; streaming mode and ZA are left
            // off at the end (smstop). The extension is present (caller).
            unsafe {
                asm!(
                    $($line,)*
                    k = inout(reg) k => _,
                    a = inout(reg) a => _,
                    b = inout(reg) b => _,
                    c = inout(reg) c => _,
                    rsc = in(reg) rsc * 4,
                    alpha = in(reg) alpha.to_bits(),
                    beta = in(reg) beta.to_bits(),
                    betaf = in(reg) (beta != 0.0) as u64,
                    bias = in(reg) bias,
                    mode = in(reg) mode,
                    n = out(reg) _,
                    s = out(reg) _,
                    t = out(reg) _,
                    u = out(reg) _,
                    out("x12") _,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
                    out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
                    out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
                    out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
                    out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
                    out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
                    out("v30") _, out("v31") _,
                    out("p0") _, out("p1") _, out("p2") _, out("p3") _, out("p4") _,
                    out("p5") _, out("p6") _, out("p7") _, out("p8") _, out("p9") _,
                    out("p10") _, out("p11") _, out("p12") _, out("p13") _, out("p14") _,
                    out("p15") _, out("ffr") _,
                    options(nostack),
                );
            }
        }
    };
}

sme_kernel!(
    /// SME1 body: single-vector loads, 8 depth steps per loop iteration.
    sme1_rows,
            ".arch_extension sme",
            "smstart",
            "ptrue p0.s",
            "cntw {s}",
            "cmp {mode}, #2",
            "b.ne 10f",
            "mov w12, #0",
            "mov {t}, {c}",
            "madd {u}, {s}, {rsc}, {c}",
            "11:",
            "ld1w {{za0h.s[w12, 0]}}, p0/z, [{t}]",
            "ld1w {{za1h.s[w12, 0]}}, p0/z, [{t}, {s}, lsl #2]",
            "ld1w {{za2h.s[w12, 0]}}, p0/z, [{u}]",
            "ld1w {{za3h.s[w12, 0]}}, p0/z, [{u}, {s}, lsl #2]",
            "add {t}, {t}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 11b",
            "b 12f",
            "10:",
            "zero {{za}}",
            "12:",
            "lsr {n}, {k}, #3",
            "cbz {n}, 3f",
            "addvl {a}, {a}, #8",
            "addvl {b}, {b}, #8",
            "2:",
            "ld1w {{z0.s}}, p0/z, [{a}, #-8, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #-7, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #-8, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #-7, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #-6, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #-5, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #-6, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #-5, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #-4, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #-3, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #-4, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #-3, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #-2, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #-1, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #-2, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #-1, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #0, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #1, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #0, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #1, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #2, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #3, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #2, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #3, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #4, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #5, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #4, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #5, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "ld1w {{z0.s}}, p0/z, [{a}, #6, mul vl]",
            "ld1w {{z1.s}}, p0/z, [{a}, #7, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}, #6, mul vl]",
            "ld1w {{z3.s}}, p0/z, [{b}, #7, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "addvl {a}, {a}, #16",
            "addvl {b}, {b}, #16",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "addvl {a}, {a}, #-8",
            "addvl {b}, {b}, #-8",
            "3:",
            "ands {k}, {k}, #7",
            "b.eq 5f",
            "4:",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z1.s}}, p0/z, [{a}, #1, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}]",
            "ld1w {{z3.s}}, p0/z, [{b}, #1, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "addvl {a}, {a}, #2",
            "addvl {b}, {b}, #2",
            "subs {k}, {k}, #1",
            "b.ne 4b",
            "5:",
            "mov w12, #0",
            "madd {u}, {s}, {rsc}, {c}",
            "cbz {mode}, 20f",
            "21:",
            "st1w {{za0h.s[w12, 0]}}, p0, [{c}]",
            "st1w {{za1h.s[w12, 0]}}, p0, [{c}, {s}, lsl #2]",
            "st1w {{za2h.s[w12, 0]}}, p0, [{u}]",
            "st1w {{za3h.s[w12, 0]}}, p0, [{u}, {s}, lsl #2]",
            "add {c}, {c}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 21b",
            "b 29f",
            "20:",
            "dup z4.s, {alpha:w}",
            "dup z5.s, {beta:w}",
            "dup z6.s, #0",
            "dup z7.s, #0",
            "cbz {bias}, 22f",
            "ld1w {{z6.s}}, p0/z, [{bias}]",
            "ld1w {{z7.s}}, p0/z, [{bias}, #1, mul vl]",
            "22:",
            "mova z0.s, p0/m, za0h.s[w12, 0]",
            "mova z1.s, p0/m, za1h.s[w12, 0]",
            "mova z2.s, p0/m, za2h.s[w12, 0]",
            "mova z3.s, p0/m, za3h.s[w12, 0]",
            "fmul z0.s, p0/m, z0.s, z4.s",
            "fmul z1.s, p0/m, z1.s, z4.s",
            "fmul z2.s, p0/m, z2.s, z4.s",
            "fmul z3.s, p0/m, z3.s, z4.s",
            "cbz {betaf}, 23f",
            "ld1w {{z8.s}}, p0/z, [{c}]",
            "ld1w {{z9.s}}, p0/z, [{c}, #1, mul vl]",
            "ld1w {{z10.s}}, p0/z, [{u}]",
            "ld1w {{z11.s}}, p0/z, [{u}, #1, mul vl]",
            "fmla z0.s, p0/m, z8.s, z5.s",
            "fmla z1.s, p0/m, z9.s, z5.s",
            "fmla z2.s, p0/m, z10.s, z5.s",
            "fmla z3.s, p0/m, z11.s, z5.s",
            "23:",
            "fadd z0.s, p0/m, z0.s, z6.s",
            "fadd z1.s, p0/m, z1.s, z7.s",
            "fadd z2.s, p0/m, z2.s, z6.s",
            "fadd z3.s, p0/m, z3.s, z7.s",
            "st1w {{z0.s}}, p0, [{c}]",
            "st1w {{z1.s}}, p0, [{c}, #1, mul vl]",
            "st1w {{z2.s}}, p0, [{u}]",
            "st1w {{z3.s}}, p0, [{u}, #1, mul vl]",
            "add {c}, {c}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 22b",
            "29:",
            "smstop",
);

sme_kernel!(
    /// SME2 body: 4-vector loads (two depth steps of A, of B), 16 depth steps per iteration.
    sme2_rows,
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.s",
            "ptrue pn8.s",
            "cntw {s}",
            "cmp {mode}, #2",
            "b.ne 10f",
            "mov w12, #0",
            "mov {t}, {c}",
            "madd {u}, {s}, {rsc}, {c}",
            "11:",
            "ld1w {{za0h.s[w12, 0]}}, p0/z, [{t}]",
            "ld1w {{za1h.s[w12, 0]}}, p0/z, [{t}, {s}, lsl #2]",
            "ld1w {{za2h.s[w12, 0]}}, p0/z, [{u}]",
            "ld1w {{za3h.s[w12, 0]}}, p0/z, [{u}, {s}, lsl #2]",
            "add {t}, {t}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 11b",
            "b 12f",
            "10:",
            "zero {{za}}",
            "12:",
            "lsr {n}, {k}, #4",
            "cbz {n}, 3f",
            "lsl {t}, {s}, #7",
            "2:",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #0, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #0, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #4, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #4, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #8, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #8, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #12, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #12, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #16, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #16, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #20, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #20, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #24, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #24, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "ld1w {{z0.s-z3.s}}, pn8/z, [{a}, #28, mul vl]",
            "ld1w {{z4.s-z7.s}}, pn8/z, [{b}, #28, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z4.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z5.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z4.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z5.s",
            "fmopa za0.s, p0/m, p0/m, z2.s, z6.s",
            "fmopa za1.s, p0/m, p0/m, z2.s, z7.s",
            "fmopa za2.s, p0/m, p0/m, z3.s, z6.s",
            "fmopa za3.s, p0/m, p0/m, z3.s, z7.s",
            "add {a}, {a}, {t}",
            "add {b}, {b}, {t}",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            "3:",
            "ands {k}, {k}, #15",
            "b.eq 5f",
            "4:",
            "ld1w {{z0.s}}, p0/z, [{a}]",
            "ld1w {{z1.s}}, p0/z, [{a}, #1, mul vl]",
            "ld1w {{z2.s}}, p0/z, [{b}]",
            "ld1w {{z3.s}}, p0/z, [{b}, #1, mul vl]",
            "fmopa za0.s, p0/m, p0/m, z0.s, z2.s",
            "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
            "fmopa za2.s, p0/m, p0/m, z1.s, z2.s",
            "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
            "addvl {a}, {a}, #2",
            "addvl {b}, {b}, #2",
            "subs {k}, {k}, #1",
            "b.ne 4b",
            "5:",
            "mov w12, #0",
            "madd {u}, {s}, {rsc}, {c}",
            "cbz {mode}, 20f",
            "21:",
            "st1w {{za0h.s[w12, 0]}}, p0, [{c}]",
            "st1w {{za1h.s[w12, 0]}}, p0, [{c}, {s}, lsl #2]",
            "st1w {{za2h.s[w12, 0]}}, p0, [{u}]",
            "st1w {{za3h.s[w12, 0]}}, p0, [{u}, {s}, lsl #2]",
            "add {c}, {c}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 21b",
            "b 29f",
            "20:",
            "dup z4.s, {alpha:w}",
            "dup z5.s, {beta:w}",
            "dup z6.s, #0",
            "dup z7.s, #0",
            "cbz {bias}, 22f",
            "ld1w {{z6.s}}, p0/z, [{bias}]",
            "ld1w {{z7.s}}, p0/z, [{bias}, #1, mul vl]",
            "22:",
            "mova z0.s, p0/m, za0h.s[w12, 0]",
            "mova z1.s, p0/m, za1h.s[w12, 0]",
            "mova z2.s, p0/m, za2h.s[w12, 0]",
            "mova z3.s, p0/m, za3h.s[w12, 0]",
            "fmul z0.s, p0/m, z0.s, z4.s",
            "fmul z1.s, p0/m, z1.s, z4.s",
            "fmul z2.s, p0/m, z2.s, z4.s",
            "fmul z3.s, p0/m, z3.s, z4.s",
            "cbz {betaf}, 23f",
            "ld1w {{z8.s}}, p0/z, [{c}]",
            "ld1w {{z9.s}}, p0/z, [{c}, #1, mul vl]",
            "ld1w {{z10.s}}, p0/z, [{u}]",
            "ld1w {{z11.s}}, p0/z, [{u}, #1, mul vl]",
            "fmla z0.s, p0/m, z8.s, z5.s",
            "fmla z1.s, p0/m, z9.s, z5.s",
            "fmla z2.s, p0/m, z10.s, z5.s",
            "fmla z3.s, p0/m, z11.s, z5.s",
            "23:",
            "fadd z0.s, p0/m, z0.s, z6.s",
            "fadd z1.s, p0/m, z1.s, z7.s",
            "fadd z2.s, p0/m, z2.s, z6.s",
            "fadd z3.s, p0/m, z3.s, z7.s",
            "st1w {{z0.s}}, p0, [{c}]",
            "st1w {{z1.s}}, p0, [{c}, #1, mul vl]",
            "st1w {{z2.s}}, p0, [{u}]",
            "st1w {{z3.s}}, p0, [{u}, #1, mul vl]",
            "add {c}, {c}, {rsc}",
            "add {u}, {u}, {rsc}",
            "add w12, w12, #1",
            "cmp w12, {s:w}",
            "b.ne 22b",
            "29:",
            "smstop",
);

/// Runs `body` for any `csc`: directly when `csc == 1`, else through a local tile.
///
/// # Safety
/// As the [`MicroKernel`] contract with `MR = NR = 2·SVL/32 ≤ 32`; `body` as `sme1_rows`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn any_csc(
    body: unsafe fn(usize, *const f32, *const f32, *mut f32, isize, f32, f32, *const f32),
    k: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: the contract is forwarded; the local tile has 32·32 ≥ MR·NR floats with row
    // stride NR, and C elements (i, j) for i, j < 2S are valid (contract).
    unsafe {
        if csc == 1 {
            return body(k, a, b, c, rsc, alpha, beta, bias);
        }
        let nr = 2 * svl_bytes() / 4;
        let mut t = [0.0f32; 32 * 32];
        body(
            k,
            a,
            b,
            t.as_mut_ptr(),
            nr as isize,
            alpha,
            0.0,
            core::ptr::null(),
        );
        for i in 0..nr {
            for j in 0..nr {
                let p = c.offset(i as isize * rsc + j as isize * csc);
                let mut y = t[i * nr + j];
                if beta != 0.0 {
                    y += beta * *p;
                }
                if !bias.is_null() {
                    y += *bias.add(j);
                }
                *p = y;
            }
        }
    }
}

/// The SME1 `2S × 2S` micro-kernel (`S = SVL/32`).
///
/// Layout contract: that of [`MicroKernel`] with `MR = NR = 2S`: `a[p*MR + i] = A(i, p)`,
/// `b[p*NR + j] = B(p, j)`, C element `(i, j)` at `c[i*rsc + j*csc]`,
/// `c = alpha·AB (+ beta·c if beta ≠ 0) (+ bias)`. No alignment beyond f32 is needed.
///
/// # Safety
/// That contract on a CPU with SME (FEAT_SME, F32F32), called outside streaming mode.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_sme1(
    k: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: forwarded contract; SME present (caller).
    unsafe { any_csc(sme1_rows, k, a, b, c, rsc, csc, alpha, beta, bias) }
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
    c: *mut f32,
    rsc: isize,
    csc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: forwarded contract; SME2 present (caller).
    unsafe { any_csc(sme2_rows, k, a, b, c, rsc, csc, alpha, beta, bias) }
}

macro_rules! statics {
    ($f:ident, $name:literal, $($id:ident = $t:literal),*) => {
        $(
            // SAFETY: the kernel implements the contract for MR = NR = 2·SVL/32; each static
            // declares the tile of one SVL and is handed out only when the CPU has the
            // extension and its SVL matches (`pick`).
            static $id: MicroKernel = unsafe { MicroKernel::new($name, $t, $t, $f) };
        )*
    };
}
statics!(
    kernel_sme1,
    "sme-2x2za",
    SME1_8 = 8,
    SME1_16 = 16,
    SME1_32 = 32
);
statics!(
    kernel_sme2,
    "sme2-2x2za",
    SME2_8 = 8,
    SME2_16 = 16,
    SME2_32 = 32
);

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
    let f = super::features();
    if !(f.sme && f.sme_f32f32) {
        return None;
    }
    pick([&SME1_8, &SME1_16, &SME1_32])
}

/// The SME2 kernel for the current SVL, if SME2 is present.
pub fn kernel_sme2_for_cpu() -> Option<&'static MicroKernel> {
    let f = super::features();
    if !(f.sme2 && f.sme_f32f32) {
        return None;
    }
    pick([&SME2_8, &SME2_16, &SME2_32])
}
