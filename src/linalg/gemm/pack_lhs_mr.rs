//! Packs A into MR-row-interleaved micro-panels (the layout every micro-kernel reads A in).

use super::contract::MicroKernel;
use super::matref::MatRef;
use super::pack_panel::{kernel_pack, kernel_pack_edge, pack_panel};

/// Packs `A[ic..ic+mcb, pc..pc+kc]` into MR-row-interleaved micro-panels: panel `q` (rows
/// `ic + q·mr ..`) occupies `dst[q·kc·mr ..][.. kc·mr]` with `dst[p·mr + i] = A(row i, pc+p)`,
/// rows past `mcb` zero. Whole panels of a row-major A use the kernel's own packer if it
/// has one; edge panels the shared one.
pub(super) fn pack_a(
    uk: &MicroKernel,
    a: &MatRef<'_>,
    ic: usize,
    mcb: usize,
    pc: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let mr = uk.mr;
    for (q, ir) in (0..mcb).step_by(mr).enumerate() {
        let rows = mr.min(mcb - ir);
        let d = &mut dst[q * kc * mr..(q + 1) * kc * mr];
        let base = (ic + ir) * a.rs + pc * a.cs;
        // Runs (rows ic+ir .. +rows ≤ m, columns pc .. pc+kc ≤ k of a validated view) are
        // contiguous when cs = 1. An edge panel goes to `pack_panel` directly (it zero-fills
        // once and takes Neon's interleave for whole groups of four itself, where a packer
        // that declines the row count would cost a second fill), unless the kernel has an
        // edge packer, which writes the zeros itself.
        let own = a.cs == 1
            && if rows == mr {
                kernel_pack(uk, a.data, base, a.rs, rows, mr, kc, d)
            } else {
                kernel_pack_edge(uk, a.data, base, a.rs, rows, mr, kc, d)
            };
        if !own {
            pack_panel(a.data, base, a.rs, a.cs, rows, mr, kc, d);
        }
    }
}
