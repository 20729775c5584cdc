//! Packs B into NR-column-interleaved micro-panels (one depth block of the packed loop nest,
//! and the column tail of an in-place B).

use super::contract::MicroKernel;
use super::matref::MatRef;
use super::pack_panel::{kernel_pack, pack_panel};

/// Packs `B[pc..pc+kc, jc..jc+nc]` into NR-column-interleaved micro-panels: panel `q`
/// (columns `jc + q·nr ..`) occupies `dst[q·kc·nr ..][.. kc·nr]` with
/// `dst[p·nr + j] = B(pc+p, col j)`, columns past `nc` zero. Panels of a transposed B (unit
/// row stride) use the kernel's own packer if it has one (its edge packer for the column
/// tail, [`kernel_pack`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_b(
    uk: &MicroKernel,
    b: &MatRef<'_>,
    pc: usize,
    kc: usize,
    jc: usize,
    nc: usize,
    dst: &mut [f32],
) {
    let nr = uk.nr;
    for (q, jr) in (0..nc).step_by(nr).enumerate() {
        let cols = nr.min(nc - jr);
        let d = &mut dst[q * kc * nr..(q + 1) * kc * nr];
        let base = pc * b.rs + (jc + jr) * b.cs;
        // Runs (columns jc+jr .. +cols ≤ n, rows pc .. pc+kc ≤ k of a validated view) are
        // contiguous when rs = 1 (column j's run is data[base + j·cs ..][..kc]): the kernel's
        // packer (its edge packer for the column tail), or the shared one.
        if !(b.rs == 1 && kernel_pack(uk, b.data, base, b.cs, cols, nr, kc, d)) {
            pack_panel(b.data, base, b.cs, b.rs, cols, nr, kc, d);
        }
    }
}
