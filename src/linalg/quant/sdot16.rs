//! The 4-row × 16-channel `SDOT` tile's depth loop, in assembly: over weights packed
//! `qc8w_p4x4`, four consecutive 4-channel blocks at once.
//!
//! Per 16 depth steps: 4 loads of activations (one 16-byte run per row), 4 four-vector loads
//! of weights (one 64-byte chunk per block) and 64 lane-indexed `SDOT`s, with 16
//! accumulators (`v16`-`v31`) kept in registers for the whole depth: 64 of 74 instructions
//! multiply (0.86). The compiler's version of the same loop, generic over the block count,
//! keeps the accumulators of 4 blocks in memory.

use core::arch::aarch64::*;
use core::arch::asm;

/// `sums[b][i]`: lane `j` holds `Σ_{t<k} a[i][t] · W[4·b + j][t]`, row `i` of the activations
/// times channel `j` of block `b` (the same integers as the intrinsic tile).
///
/// Layout contract: `a[i]` addresses `k` int8 activations of row `i` (rows may repeat);
/// `w[b]` addresses block `b`'s `4·k` packed bytes (`k / 4` chunks of 4 channels × 4 depths,
/// see [`super::packed`]).
///
/// # Safety
/// FEAT_DotProd; `k % 16 == 0`; each `a[i]` valid for `k` reads, each `w[b]` for `4·k`.
#[inline(always)]
pub unsafe fn neon_sdot_4x16_qc8w_p4x4(
    a: [*const i8; 4],
    w: [*const u8; 4],
    k: usize,
) -> [[int32x4_t; 4]; 4] {
    // SAFETY: Neon is part of the AArch64 baseline.
    let mut s = [unsafe { vdupq_n_s32(0) }; 16];
    if k >= 16 {
        // SAFETY: the loop runs k / 16 ≥ 1 times, reading 16 bytes per row and 64 per block
        // each time: within the caller's extents; FEAT_DotProd is the caller's guarantee.
        unsafe {
            asm!(
            ".arch_extension dotprod",
            "movi v16.16b, #0", "movi v17.16b, #0", "movi v18.16b, #0", "movi v19.16b, #0",
            "movi v20.16b, #0", "movi v21.16b, #0", "movi v22.16b, #0", "movi v23.16b, #0",
            "movi v24.16b, #0", "movi v25.16b, #0", "movi v26.16b, #0", "movi v27.16b, #0",
            "movi v28.16b, #0", "movi v29.16b, #0", "movi v30.16b, #0", "movi v31.16b, #0",
            "2:",
            "ldr q0, [{a0}], #16", "ldr q1, [{a1}], #16", "ldr q2, [{a2}], #16", "ldr q3, [{a3}], #16",
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w0}], #64",
            "sdot v16.4s, v4.16b, v0.4b[0]", "sdot v17.4s, v4.16b, v1.4b[0]", "sdot v18.4s, v4.16b, v2.4b[0]", "sdot v19.4s, v4.16b, v3.4b[0]",
            "sdot v16.4s, v5.16b, v0.4b[1]", "sdot v17.4s, v5.16b, v1.4b[1]", "sdot v18.4s, v5.16b, v2.4b[1]", "sdot v19.4s, v5.16b, v3.4b[1]",
            "sdot v16.4s, v6.16b, v0.4b[2]", "sdot v17.4s, v6.16b, v1.4b[2]", "sdot v18.4s, v6.16b, v2.4b[2]", "sdot v19.4s, v6.16b, v3.4b[2]",
            "sdot v16.4s, v7.16b, v0.4b[3]", "sdot v17.4s, v7.16b, v1.4b[3]", "sdot v18.4s, v7.16b, v2.4b[3]", "sdot v19.4s, v7.16b, v3.4b[3]",
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w1}], #64",
            "sdot v20.4s, v4.16b, v0.4b[0]", "sdot v21.4s, v4.16b, v1.4b[0]", "sdot v22.4s, v4.16b, v2.4b[0]", "sdot v23.4s, v4.16b, v3.4b[0]",
            "sdot v20.4s, v5.16b, v0.4b[1]", "sdot v21.4s, v5.16b, v1.4b[1]", "sdot v22.4s, v5.16b, v2.4b[1]", "sdot v23.4s, v5.16b, v3.4b[1]",
            "sdot v20.4s, v6.16b, v0.4b[2]", "sdot v21.4s, v6.16b, v1.4b[2]", "sdot v22.4s, v6.16b, v2.4b[2]", "sdot v23.4s, v6.16b, v3.4b[2]",
            "sdot v20.4s, v7.16b, v0.4b[3]", "sdot v21.4s, v7.16b, v1.4b[3]", "sdot v22.4s, v7.16b, v2.4b[3]", "sdot v23.4s, v7.16b, v3.4b[3]",
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w2}], #64",
            "sdot v24.4s, v4.16b, v0.4b[0]", "sdot v25.4s, v4.16b, v1.4b[0]", "sdot v26.4s, v4.16b, v2.4b[0]", "sdot v27.4s, v4.16b, v3.4b[0]",
            "sdot v24.4s, v5.16b, v0.4b[1]", "sdot v25.4s, v5.16b, v1.4b[1]", "sdot v26.4s, v5.16b, v2.4b[1]", "sdot v27.4s, v5.16b, v3.4b[1]",
            "sdot v24.4s, v6.16b, v0.4b[2]", "sdot v25.4s, v6.16b, v1.4b[2]", "sdot v26.4s, v6.16b, v2.4b[2]", "sdot v27.4s, v6.16b, v3.4b[2]",
            "sdot v24.4s, v7.16b, v0.4b[3]", "sdot v25.4s, v7.16b, v1.4b[3]", "sdot v26.4s, v7.16b, v2.4b[3]", "sdot v27.4s, v7.16b, v3.4b[3]",
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w3}], #64",
            "sdot v28.4s, v4.16b, v0.4b[0]", "sdot v29.4s, v4.16b, v1.4b[0]", "sdot v30.4s, v4.16b, v2.4b[0]", "sdot v31.4s, v4.16b, v3.4b[0]",
            "sdot v28.4s, v5.16b, v0.4b[1]", "sdot v29.4s, v5.16b, v1.4b[1]", "sdot v30.4s, v5.16b, v2.4b[1]", "sdot v31.4s, v5.16b, v3.4b[1]",
            "sdot v28.4s, v6.16b, v0.4b[2]", "sdot v29.4s, v6.16b, v1.4b[2]", "sdot v30.4s, v6.16b, v2.4b[2]", "sdot v31.4s, v6.16b, v3.4b[2]",
            "sdot v28.4s, v7.16b, v0.4b[3]", "sdot v29.4s, v7.16b, v1.4b[3]", "sdot v30.4s, v7.16b, v2.4b[3]", "sdot v31.4s, v7.16b, v3.4b[3]",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            a0 = inout(reg) a[0] => _,
            a1 = inout(reg) a[1] => _,
            a2 = inout(reg) a[2] => _,
            a3 = inout(reg) a[3] => _,
            w0 = inout(reg) w[0] => _,
            w1 = inout(reg) w[1] => _,
            w2 = inout(reg) w[2] => _,
            w3 = inout(reg) w[3] => _,
            n = inout(reg) k / 16 => _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("v16") s[0],
            out("v17") s[1],
            out("v18") s[2],
            out("v19") s[3],
            out("v20") s[4],
            out("v21") s[5],
            out("v22") s[6],
            out("v23") s[7],
            out("v24") s[8],
            out("v25") s[9],
            out("v26") s[10],
            out("v27") s[11],
            out("v28") s[12],
            out("v29") s[13],
            out("v30") s[14],
            out("v31") s[15],
            options(nostack, readonly),
            );
        }
    }
    core::array::from_fn(|b| core::array::from_fn(|i| s[4 * b + i]))
}
