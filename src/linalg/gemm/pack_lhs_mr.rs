//! Packs A into MR-row-interleaved micro-panels (the layout every micro-kernel reads A in).

use super::contract::MicroKernel;
use super::matref::MatRef;
use super::pack_panel::{kernel_pack, pack_panel};

/// Packs `A[ic..ic+mcb, pc..pc+kc]` into MR-row-interleaved micro-panels: panel `q` (rows
/// `ic + q·mr ..`) occupies `dst[q·kc·mr ..][.. kc·mr]` with `dst[p·mr + i] = A(row i, pc+p)`,
/// rows past `mcb` zero. Panels of a row-major A use the kernel's own packer if it has one
/// (its edge packer for the edge panel, [`kernel_pack`]); others the shared one.
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
        // contiguous when cs = 1: the kernel's packer (its edge packer for an edge panel), or
        // the shared one.
        if !(a.cs == 1 && kernel_pack(uk, a.data, base, a.rs, rows, mr, kc, d)) {
            pack_panel(a.data, base, a.rs, a.cs, rows, mr, kc, d);
        }
    }
}
