//! Shared panel packing: a kernel's own packer, or the generic interleave into one
//! zero-padded micro-panel.

use super::contract::MicroKernel;

/// The kernel's own packer on `runs` depth-contiguous runs `data[base + i·ld ..][..kc]`
/// (`i < runs ≤ w`, all inside `data`: the caller's validated view) into the whole width-`w`
/// panel `d`: a whole panel (`runs == w`) by its packer, an edge panel by its edge packer
/// ([`MicroKernel::with_edge_packer`], which zeroes lanes `runs..w` itself); `false` when the
/// kernel has none for this count or declines (nothing written then: the caller packs the
/// panel with [`pack_panel`], which zero-fills once and interleaves groups of four by Neon).
#[allow(clippy::too_many_arguments)]
pub(super) fn kernel_pack(
    uk: &MicroKernel,
    data: &[f32],
    base: usize,
    ld: usize,
    runs: usize,
    w: usize,
    kc: usize,
    d: &mut [f32],
) -> bool {
    let pack = if runs == w { uk.pack } else { uk.pack_edge };
    let Some(pack) = pack else {
        return false;
    };
    let d = &mut d[..kc * w];
    let src = &data[base..];
    // SAFETY: the PackFn contract (the edge packer's for runs < w): w is this kernel's mr or
    // nr (callers), runs i < runs ≤ w at src + i·ld hold kc readable floats (inside `data`,
    // caller), `d` holds kc·w floats (the whole panel, from its lane 0), kc ≥ 1 (the driver
    // never packs an empty depth block).
    unsafe { pack(src.as_ptr(), ld, runs, w, kc, d.as_mut_ptr()) }
}

/// Packs the whole groups of four among `runs` depth-contiguous runs
/// `src[base + i·ld ..][..kc]` into lanes `0 .. 4·⌊runs/4⌋` of the width-`w` panel `dst`
/// (`dst[p·w + i]`) with Neon's interleave ([`super::arm::neon::pack_runs_x4`]), for a
/// kernel without a packer that takes them (SME's takes whole panels only) or a panel filled
/// from another lane (`dst` then starting at that lane). Returns how many runs it packed:
/// 0 off AArch64, for a width that is not a multiple of 4, or when the runs or `dst` would
/// not hold them (nothing written then); the caller packs the rest.
#[allow(clippy::too_many_arguments)]
pub(super) fn neon_run_groups(
    src: &[f32],
    base: usize,
    ld: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: &mut [f32],
) -> usize {
    if !cfg!(target_arch = "aarch64") {
        return 0;
    }
    let whole = runs.min(w) / 4 * 4;
    let src_end = (whole.saturating_sub(1))
        .checked_mul(ld)
        .and_then(|o| o.checked_add(base))
        .and_then(|o| o.checked_add(kc));
    let dst_end = kc
        .saturating_sub(1)
        .checked_mul(w)
        .and_then(|o| o.checked_add(whole));
    let fits = whole > 0
        && kc > 0
        && w.is_multiple_of(4)
        && src_end.is_some_and(|e| e <= src.len())
        && dst_end.is_some_and(|e| e <= dst.len());
    if !fits {
        return 0;
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: the PackFn contract with width w: runs i < whole ≤ w at src + base + i·ld
        // hold kc readable floats (the last ends inside `src`, checked above, the others
        // start before it), `dst` holds (kc − 1)·w + whole writable floats (checked), kc ≥ 1;
        // Neon is in the AArch64 baseline.
        let packed = unsafe {
            super::arm::neon::pack_runs_x4(src[base..].as_ptr(), ld, whole, w, kc, dst.as_mut_ptr())
        };
        if packed {
            return whole;
        }
    }
    0
}

/// One packed micro-panel of width `w`: `d[p·w + l] = src[base + l·ls + p·ps]` for `l < n`
/// (`n ≤ w` valid lanes, the rest zero) and `p < kc`. `ls` is the stride between lanes
/// (rows of A, columns of B), `ps` the stride along the depth.
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_panel(
    src: &[f32],
    base: usize,
    ls: usize,
    ps: usize,
    n: usize,
    w: usize,
    kc: usize,
    d: &mut [f32],
) {
    // Whole panels with a fixed-width copy or interleave; the last, partial panel of a
    // product whose width the tile does not divide zeroed and filled.
    let part = n > 0 && n < w;
    macro_rules! fixed {
        ($($w:literal),*) => {
            match w {
                $($w if n == w && ps == 1 => return interleave::<$w>(src, base, ls, kc, d),
                  $w if n == w && ls == 1 => return copy_rows::<$w>(src, base, ps, kc, d),
                  $w if part && (ps == 1 || ls == 1) => {
                      return partial::<$w>(src, base, ls, ps, n, kc, d)
                  })*
                _ => {}
            }
        };
    }
    fixed!(4, 6, 8, 12, 16, 24, 32, 36, 48);
    for (p, dp) in d[..kc * w].chunks_exact_mut(w).enumerate() {
        for (l, x) in dp[..n].iter_mut().enumerate() {
            *x = src[base + l * ls + p * ps];
        }
        dp[n..].fill(0.0);
    }
}

/// [`pack_panel`] for `0 < n < W` lanes with `ls == 1` (rows copied) or `ps == 1` (runs
/// interleaved eight depth steps at a time: each lane's eight values land at fixed offsets of
/// the block), lanes `n..W` zero.
fn partial<const W: usize>(
    src: &[f32],
    base: usize,
    ls: usize,
    ps: usize,
    n: usize,
    kc: usize,
    d: &mut [f32],
) {
    let d = &mut d[..kc * W];
    d.fill(0.0);
    if ls == 1 {
        for (p, row) in d.chunks_exact_mut(W).enumerate() {
            let (from, to) = (&src[base + p * ps..][..n], &mut row[..n]);
            // Below 16 lanes without a library call; the library's copy from there on.
            if n < 16 {
                crate::linalg::vecmath::copy_run(from, to);
            } else {
                to.copy_from_slice(from);
            }
        }
        return;
    }
    let runs = |l: usize| &src[base + l * ls..][..kc];
    // Whole groups of four runs by Neon's interleave, the rest lane by lane below.
    let first = neon_run_groups(src, base, ls, n.min(W), W, kc, d);
    let mut blocks = d.chunks_exact_mut(8 * W);
    let mut p = 0;
    for blk in &mut blocks {
        let blk: &mut [[f32; W]] = blk.as_chunks_mut::<W>().0;
        for l in first..n.min(W) {
            if let Some(seg) = runs(l)[p..].first_chunk::<8>() {
                for (row, &v) in blk.iter_mut().zip(seg) {
                    row[l] = v;
                }
            }
        }
        p += 8;
    }
    for (i, row) in blocks.into_remainder().chunks_exact_mut(W).enumerate() {
        for (l, x) in row[..n].iter_mut().enumerate().skip(first) {
            *x = runs(l)[p + i];
        }
    }
}

/// `d[p·W + l] = src[base + l·ls + p]`: `W` contiguous runs interleaved, transposed in
/// 8-deep blocks so that every store is a whole `W`-wide row.
fn interleave<const W: usize>(src: &[f32], base: usize, ls: usize, kc: usize, d: &mut [f32]) {
    let runs: [&[f32]; W] = core::array::from_fn(|l| &src[base + l * ls..][..kc]);
    let mut blocks = d[..kc * W].chunks_exact_mut(8 * W);
    let mut p = 0;
    for blk in &mut blocks {
        let mut t = [[0.0f32; W]; 8];
        for (l, run) in runs.iter().enumerate() {
            let seg = &run[p..p + 8];
            for u in 0..8 {
                t[u][l] = seg[u];
            }
        }
        for (row, tr) in blk.chunks_exact_mut(W).zip(&t) {
            row.copy_from_slice(tr);
        }
        p += 8;
    }
    for (i, row) in blocks.into_remainder().chunks_exact_mut(W).enumerate() {
        for (l, x) in row.iter_mut().enumerate() {
            *x = runs[l][p + i];
        }
    }
}

/// `d[p·W + l] = src[base + p·ps + l]`: `W`-wide rows copied with a fixed-size copy.
fn copy_rows<const W: usize>(src: &[f32], base: usize, ps: usize, kc: usize, d: &mut [f32]) {
    for (p, row) in d[..kc * W].chunks_exact_mut(W).enumerate() {
        row.copy_from_slice(&src[base + p * ps..][..W]);
    }
}
