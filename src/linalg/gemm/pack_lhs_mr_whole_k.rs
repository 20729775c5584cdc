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
/// else a plain copy. [`pack_a_taps`] with one tap.
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
    pack_a_taps(uk, src, base, ld, runs, lane0, p0, kc, 1, 0, panel)
}

/// [`pack_a_runs`] for `taps` blocks of runs at once, checked once: block `t` reads the runs
/// at `base + t·tap_stride` and fills depths `p0 + t·kc ..`, so
/// `panel[(p0 + t·kc + p)·mr + lane0 + i] = src[base + t·tap_stride + i·ld + p]` for
/// `t < taps`, `i < runs`, `p < kc`. A convolution's kernel rows (or the separate column taps
/// of a dilated row) are such blocks: one call per output-pixel group instead of one per tap.
#[allow(clippy::too_many_arguments)]
pub fn pack_a_taps(
    uk: &MicroKernel,
    src: &[f32],
    base: usize,
    ld: usize,
    runs: usize,
    lane0: usize,
    p0: usize,
    kc: usize,
    taps: usize,
    tap_stride: usize,
    panel: &mut [f32],
) -> Result<(), KernelError> {
    let mr = uk.mr;
    if runs == 0 || kc == 0 || taps == 0 {
        return Ok(());
    }
    let last_src = (runs - 1)
        .checked_mul(ld)
        .and_then(|o| o.checked_add((taps - 1).checked_mul(tap_stride)?))
        .and_then(|o| o.checked_add(base))
        .and_then(|o| o.checked_add(kc));
    let depth_end = taps.checked_mul(kc).and_then(|d| d.checked_add(p0));
    if lane0 + runs > mr
        || last_src.is_none_or(|e| e > src.len())
        || depth_end
            .and_then(|d| d.checked_mul(mr))
            .is_none_or(|e| e > panel.len())
    {
        return Err(shape_err("gemm: packed A run outside its panel or source"));
    }
    for t in 0..taps {
        let (from, at) = (base + t * tap_stride, (p0 + t * kc) * mr + lane0);
        if let Some(pack) = uk.pack {
            // SAFETY: the PackFn contract with w = mr (this kernel's), 1 ≤ runs ≤ mr - lane0:
            // runs i < runs at src + from + i·ld hold kc readable floats (checked above for
            // the last tap, whose runs end last: from + (runs − 1)·ld + kc ≤ src.len());
            // panel + at holds (p0 + (t + 1)·kc)·mr − at ≥ (kc − 1)·mr + runs writable floats
            // ((p0 + taps·kc)·mr ≤ panel.len() and lane0 + runs ≤ mr, checked); kc ≥ 1.
            if unsafe {
                pack(
                    src.as_ptr().add(from),
                    ld,
                    runs,
                    mr,
                    kc,
                    panel.as_mut_ptr().add(at),
                )
            } {
                continue;
            }
        }
        declined(src, from, ld, runs, mr, kc, &mut panel[at..]);
    }
    Ok(())
}

/// The runs a kernel's packer declined (or a kernel without one): Neon's interleave for the
/// runs in groups of four, the rest one by one; `dst[p·w + i] = src[from + i·ld + p]`. Kept
/// out of line so that [`pack_a_taps`]'s loop does not carry its set-up.
#[cold]
#[inline(never)]
fn declined(
    src: &[f32],
    from: usize,
    ld: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: &mut [f32],
) {
    #[cfg_attr(not(target_arch = "aarch64"), allow(unused_mut))]
    let mut i = neon_run_groups(src, from, ld, runs, w, kc, dst);
    #[cfg(target_arch = "aarch64")]
    {
        // The rest two at a time, four depth steps per round: two loads, two zips and four
        // 8-byte stores (a pair of lanes of one depth step each) where the plain copy takes
        // a load and a store per element.
        let (slen, dlen) = (src.len(), dst.len());
        let fits = |i: usize, n: usize| {
            kc >= 4
                && (i + n - 1)
                    .checked_mul(ld)
                    .and_then(|o| o.checked_add(from + kc))
                    .is_some_and(|e| e <= slen)
                && (kc - 1)
                    .checked_mul(w)
                    .and_then(|o| o.checked_add(i + n))
                    .is_some_and(|e| e <= dlen)
        };
        while i + 2 <= runs && fits(i, 2) {
            // SAFETY: runs i and i + 1 hold kc floats from `from + i·ld` inside `src`, and
            // `dst` holds lanes i, i + 1 of depth steps 0 .. kc (both checked by `fits`); the
            // loads read p .. p + 4 ≤ kc of each run, the stores lanes i, i + 1 of steps
            // p .. p + 4 ≤ kc. Neon is in the AArch64 baseline; no alignment is required.
            unsafe {
                use core::arch::aarch64::*;
                let (r0, r1) = (
                    src.as_ptr().add(from + i * ld),
                    src.as_ptr().add(from + (i + 1) * ld),
                );
                let d = dst.as_mut_ptr().add(i);
                let mut p = 0;
                while p + 4 <= kc {
                    let (a, b) = (vld1q_f32(r0.add(p)), vld1q_f32(r1.add(p)));
                    let lo = vreinterpretq_f64_f32(vzip1q_f32(a, b));
                    let hi = vreinterpretq_f64_f32(vzip2q_f32(a, b));
                    let q = d.add(p * w) as *mut f64;
                    vst1q_lane_f64::<0>(q, lo);
                    vst1q_lane_f64::<1>(d.add((p + 1) * w) as *mut f64, lo);
                    vst1q_lane_f64::<0>(d.add((p + 2) * w) as *mut f64, hi);
                    vst1q_lane_f64::<1>(d.add((p + 3) * w) as *mut f64, hi);
                    p += 4;
                }
                while p < kc {
                    *d.add(p * w) = *r0.add(p);
                    *d.add(p * w + 1) = *r1.add(p);
                    p += 1;
                }
            }
            i += 2;
        }
    }
    for i in i..runs {
        let run = &src[from + i * ld..][..kc];
        for (p, &v) in run.iter().enumerate() {
            dst[p * w + i] = v;
        }
    }
}
