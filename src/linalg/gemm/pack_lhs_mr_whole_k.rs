//! A packed ahead of time ([`PackedA`]): whole-depth panels of `mr` rows, the layout the
//! micro-kernels read A in. Producers that compute A's rows on the fly (a convolution's
//! patches: implicit GEMM) write it run by run with [`pack_a_runs`], so A never exists as a
//! plain matrix.

use super::contract::{MicroKernel, MAX_MR};
use super::matref::shape_err;
use super::pack_panel::neon_run_groups;
use crate::error::KernelError;

/// An `[M, K]` A packed for micro-kernels of height `mr`.
///
/// Layout: `ceil(m / mr)` panels, panel `q` = rows `q·mr ..`, each `k` groups of `mr` floats:
/// `data[q·k·mr + p·mr + i] = A(q·mr + i, p)`, zero for rows `≥ m`. Whole-depth panels make the
/// layout independent of the driver's depth blocking.
#[derive(Clone, Copy, Debug)]
pub struct PackedA<'a> {
    pub(in crate::linalg::gemm) data: &'a [f32],
    pub(in crate::linalg::gemm) m: usize,
    pub(in crate::linalg::gemm) k: usize,
    pub(in crate::linalg::gemm) mr: usize,
}

impl<'a> PackedA<'a> {
    /// Floats of a packed `m × k` A for tile height `mr` (`None` on overflow or `mr = 0`).
    pub fn len_for(m: usize, k: usize, mr: usize) -> Option<usize> {
        if mr == 0 {
            return None;
        }
        m.div_ceil(mr).checked_mul(k)?.checked_mul(mr)
    }

    /// A packed view; `data` must hold at least [`PackedA::len_for`]`(m, k, mr)` floats.
    pub fn new(data: &'a [f32], m: usize, k: usize, mr: usize) -> Result<PackedA<'a>, KernelError> {
        if mr == 0 || mr > MAX_MR {
            return Err(shape_err("gemm: packed A tile height out of range"));
        }
        let len = PackedA::len_for(m, k, mr).ok_or(shape_err("gemm: packed A size overflows"))?;
        let data = data
            .get(..len)
            .ok_or(shape_err("gemm: packed A shorter than m, k, mr"))?;
        Ok(PackedA { data, m, k, mr })
    }

    pub fn m(&self) -> usize {
        self.m
    }

    /// Rows `i0 .. i0 + h` (`i0` a multiple of `mr`, `i0 + h ≤ m`): their whole panels.
    pub(in crate::linalg::gemm) fn panel_range(&self, i0: usize, h: usize) -> PackedA<'a> {
        debug_assert!(i0.is_multiple_of(self.mr) && i0 + h <= self.m);
        PackedA {
            data: &self.data[i0 / self.mr * self.k * self.mr..],
            m: h,
            k: self.k,
            mr: self.mr,
        }
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn mr(&self) -> usize {
        self.mr
    }
}

/// Writes `runs` rows of A, depth `p0 .. p0 + kc`, into lanes `lane0 .. lane0 + runs` of one
/// packed panel: `panel[(p0 + p)·mr + lane0 + i] = src[base + i·ld + p]` for `i < runs`,
/// `p < kc`, with `mr = uk.mr()` and `panel` one whole panel (`k·mr` floats). Other lanes and
/// depths are untouched. Uses the kernel's own packer when it takes the runs (whole groups of
/// 4 on Neon, from any lane: a convolution's panel may start a new output row mid-panel),
/// else a plain copy.
#[allow(clippy::too_many_arguments)]
pub fn pack_a_runs(
    uk: &MicroKernel,
    src: &[f32],
    base: usize,
    ld: usize,
    runs: usize,
    lane0: usize,
    p0: usize,
    kc: usize,
    panel: &mut [f32],
) -> Result<(), KernelError> {
    let mr = uk.mr;
    if runs == 0 || kc == 0 {
        return Ok(());
    }
    let last_src = (runs - 1)
        .checked_mul(ld)
        .and_then(|o| o.checked_add(base))
        .and_then(|o| o.checked_add(kc));
    if lane0 + runs > mr
        || last_src.is_none_or(|e| e > src.len())
        || (p0 + kc).checked_mul(mr).is_none_or(|e| e > panel.len())
    {
        return Err(shape_err("gemm: packed A run outside its panel or source"));
    }
    if let Some(pack) = uk.pack {
        let dst = &mut panel[p0 * mr + lane0..];
        // SAFETY: the PackFn contract with w = mr (this kernel's), 1 ≤ runs ≤ mr - lane0:
        // runs i < runs at src + base + i·ld hold kc readable floats (checked above: the last
        // one ends at or before src.len()); dst holds (p0 + kc)·mr − p0·mr − lane0 ≥
        // (kc − 1)·mr + runs writable floats ((p0 + kc)·mr ≤ panel.len() and lane0 + runs ≤
        // mr, checked); kc ≥ 1.
        if unsafe { pack(src[base..].as_ptr(), ld, runs, mr, kc, dst.as_mut_ptr()) } {
            return Ok(());
        }
    }
    // The kernel's packer declined: Neon's interleave for the runs in groups of four.
    let done = neon_run_groups(src, base, ld, runs, mr, kc, &mut panel[p0 * mr + lane0..]);
    for i in done..runs {
        let run = &src[base + i * ld..][..kc];
        for (p, &v) in run.iter().enumerate() {
            panel[(p0 + p) * mr + lane0 + i] = v;
        }
    }
    Ok(())
}
