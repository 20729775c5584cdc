//! Neon (Advanced SIMD) 8 × 12, 8 × 8 and 4 × 16 micro-kernels (depth loops in `asm!`,
//! epilogues with `core::arch::aarch64` intrinsics), and the Neon panel packer. Their row
//! kernels for the M edge (`RowKernels`) are in `neon_rows`.
//!
//! Register tile of the 8 × 12 kernel: 24 accumulators (8 rows × 3 quad-vectors, v8–v31), its
//! depth loop one `asm!`: A from its packed panel two depth steps at a time (one 4-vector
//! post-increment `ld1` into v0–v3), B one row per step (one 3-vector `ld1` into v4–v6 whose
//! increment is the register `ldb`, so a row-major B is read in place at no extra cost), 24
//! `fmla v.4s, v.4s, v.s[lane]` per step, 8 steps per iteration: 192 FMA in 206 instructions
//! (0.932). (With the FMAs as intrinsics LLVM cannot keep 31 live vectors in place and adds
//! moves and spills.) The 8 × 8 and 4 × 16 kernels (16 accumulators) have the same loop; the 8 × 8
//! one has a second for a packed B panel (`ldb` = 8: two B rows per `ld1`, 138 instructions
//! per 128 FMLA), picked by one compare per call. The
//! loops are generated (`generated/neon_loops.rs`, `scripts/gen-neon-gemm-asm.py`); the epilogues are
//! here. Each kernel also has a run entry (`run_8x12`, ...: the same tile body in a loop over
//! a row of tiles), so that a row of small tiles costs no call and no register reloads per
//! tile.

use core::arch::aarch64::*;

use super::neon_epilogue::{start, store_row, store_tile_cols};
use super::neon_rows::*;
use crate::linalg::gemm::contract::{clamps, MicroKernel, RowKernels};

/// Rows of the register tile.
pub const MR: usize = 8;
/// Columns of the main register tile.
pub const NR: usize = 12;

/// The general epilogue of the tile's rows (1, 2, 4 or 8): `neon_store!(MR, general ...)`
/// through [`store_row`] (the plain one, clamp only, is the generated `neon_store_*_asm!`).
macro_rules! neon_store {
    (1, $($t:tt)*) => { neon_store!(@rows $($t)*; 0) };
    (2, $($t:tt)*) => { neon_store!(@rows $($t)*; 0 1) };
    (4, $($t:tt)*) => { neon_store!(@rows $($t)*; 0 1 2 3) };
    (8, $($t:tt)*) => { neon_store!(@rows $($t)*; 0 1 2 3 4 5 6 7) };
    (@rows general, $acc:ident, $c:ident, $rsc:ident, $alpha:ident, $beta:ident, $bias:ident,
     $range:ident; $($i:literal)*) => {
        $(store_row($acc[$i], $c.offset($i * $rsc), $alpha, $beta, $bias, $range);)*
    };

}

/// The body of one Neon `MR × 4·NV` tile: accumulators started ([`start`]), the depth loop
/// (`$depth`, from `generated/neon_loops.rs`), the epilogue. Shared by a kernel and its run entry.
macro_rules! neon_tile_body {
    ($depth:ident, $store:ident, $mr:tt, $nv:literal, ($k:ident, $a:ident, $b:ident,
     $ldb:ident, $c:ident, $rsc:ident, $alpha:ident, $beta:ident, $bias:ident, $lo:ident,
     $hi:ident) $(, $dargs:tt)*) => {{
        let (mut acc, plain) = start::<$mr, $nv>($c, $rsc, $alpha, $beta, $bias);
        let (ap, bp) = ($a, $b);
        let ldb_bytes = $ldb * 4;
        $depth!(acc, ap, bp, ldb_bytes, $k $(, $dargs)*);
        // Unrolled by hand so that the accumulators stay in registers (a loop over
        // the array made LLVM keep it on the stack).
        let clamp = clamps($lo, $hi);
        let (vlo, vhi) = (vdupq_n_f32($lo), vdupq_n_f32($hi));
        let c = $c;
        let rsc = $rsc;
        if plain && clamp {
            $store!(acc, c, rsc * 4, vlo, vhi, clamp);
        } else if plain {
            $store!(acc, c, rsc * 4, vlo, vhi, noclamp);
        } else {
            let (alpha, beta, bias) = ($alpha, $beta, $bias);
            let range = clamp.then_some((vlo, vhi));
            neon_store!($mr, general, acc, c, rsc, alpha, beta, bias, range);
        }
    }};
}

/// One Neon `MR × 4·NV` micro-kernel (MR = 8 or 4 rows; NV B vectors per depth step;
/// `$depth` the macro of its depth loop, from `generated/neon_loops.rs`) and its run entry `$run`
/// ([`TileRunFn`](crate::linalg::gemm::TileRunFn): the same body in a loop over a row of tiles).
macro_rules! neon_kernel {
    ($(#[$doc:meta])* $name:ident, $run:ident, $edge:ident, $depth:ident, $bias_asm:ident,
     $store:ident, $mr:tt, $nv:literal $(, $dargs:tt)*) => {
        $(#[$doc])*
        ///
        /// Layout contract (that of [`MicroKernel`], with `NR = 4·NV`): `a` holds `k` groups
        /// of MR floats (`a[p*MR + i] = A(i, p)`), `b` holds `k` rows of NR floats
        /// `ldb` apart (`b[p*ldb + j] = B(p, j)`: packed panels have `ldb = NR`, in-place B
        /// its row stride); C element `(i, j)` is `c[i*rsc + j]`; it stores
        /// `alpha·Σ_p A(i,p)·B(p,j) (+ beta·C if beta ≠ 0) (+ bias[j] if bias is non-null)`
        /// clamped into `[lo, hi]`. With `alpha = 1` and `beta = 0` the accumulators start
        /// from the bias, with `alpha = beta = 1` and no bias from C, and the stores only
        /// clamp. No alignment beyond f32 is required.
        ///
        /// # Safety
        /// The [`MicroKernel`] contract for an `MR × 4·NV` tile.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(
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
            // SAFETY: (whole body) per the contract `a` holds MR·k floats and `b` k rows of
            // 4·NV readable floats `ldb` apart, so the loads at `a + MR·p` (MR floats) and
            // `b + p·ldb` (4·NV floats) for p < k are in bounds; C rows i < MR at
            // `c + i*rsc` hold 4·NV contiguous elements (contract), bias 4·NV floats.
            unsafe {
                neon_tile_body!($depth, $store, $mr, $nv,
                    (k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) $(, $dargs)*)
            }
        }

        #[doc = concat!("The run entry of [`", stringify!($name), "`]: `np` tiles of a row of")]
        /// tiles, tile `q` reading B at `b + q·stride` and writing C at `c + q·NR` with bias
        /// `bias + q·NR` ([`TileRunFn`](crate::linalg::gemm::TileRunFn)), each computed by the tile's body.
        ///
        /// # Safety
        /// The [`TileRunFn`](crate::linalg::gemm::TileRunFn) contract for an `MR × 4·NV` tile.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $run(
            np: usize,
            stride: usize,
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
            const NR: usize = 4 * $nv;
            if alpha == 1.0 && beta == 0.0 {
                // The common case, decided once for the run: accumulators from the bias (or
                // 0), stores that only clamp. The same operations as the tile body takes for
                // these arguments (its `plain` path), so the same bits.
                // SAFETY: Neon is part of the aarch64 baseline; register operations.
                let (vlo, vhi) = unsafe { (vdupq_n_f32(lo), vdupq_n_f32(hi)) };
                macro_rules! plain_tiles {
                    ($with_bias:literal, $clamp:literal) => {
                        for q in 0..np {
                            // SAFETY: (whole body) tile q of the run contract, as below; the
                            // bias (when non-null) holds NR floats from q·NR on.
                            unsafe {
                                let bq = b.add(q * stride);
                                let cq = c.add(q * NR);
                                let mut acc = [[vdupq_n_f32(0.0); $nv]; $mr];
                                if $with_bias {
                                    // Straight into the accumulators' registers.
                                    $bias_asm!(acc, bias.add(q * NR));
                                }
                                let (ap, bp) = (a, bq);
                                let ldb_bytes = ldb * 4;
                                $depth!(acc, ap, bp, ldb_bytes, k $(, $dargs)*);
                                if $clamp {
                                    $store!(acc, cq, rsc * 4, vlo, vhi, clamp);
                                } else {
                                    $store!(acc, cq, rsc * 4, vlo, vhi, noclamp);
                                }
                            }
                        }
                    };
                }
                match (bias.is_null(), clamps(lo, hi)) {
                    (true, false) => plain_tiles!(false, false),
                    (true, true) => plain_tiles!(false, true),
                    (false, false) => plain_tiles!(true, false),
                    (false, true) => plain_tiles!(true, true),
                }
                return;
            }
            for q in 0..np {
                // SAFETY: (whole body) tile q of the run contract: B at b + q·stride (k rows
                // of NR floats ldb apart), C at c + q·NR (MR rows rsc apart), bias q·NR on
                // (or null), A as for one tile; the body reads and writes exactly what the
                // tile kernel does for those pointers.
                unsafe {
                    let bq = b.add(q * stride);
                    let cq = c.add(q * NR);
                    let biasq = if bias.is_null() { bias } else { bias.add(q * NR) };
                    neon_tile_body!($depth, $store, $mr, $nv,
                        (k, a, bq, ldb, cq, rsc, alpha, beta, biasq, lo, hi) $(, $dargs)*)
                }
            }
        }

        #[doc = concat!("The N-edge entry of [`", stringify!($name), "`] ([`EdgeFn`]): the tile with")]
        /// `alpha = 1`, `beta = 0`, accumulators started from the bias (or 0) as the tile
        /// kernel starts them, stored in its first `nc` columns only.
        ///
        /// # Safety
        /// The [`EdgeFn`] contract for an `MR × 4·NV` tile.
        ///
        /// [`EdgeFn`]: crate::linalg::gemm::EdgeFn
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $edge(
            k: usize,
            a: *const f32,
            b: *const f32,
            ldb: usize,
            c: *mut f32,
            rsc: isize,
            nc: usize,
            bias: *const f32,
            lo: f32,
            hi: f32,
        ) {
            // SAFETY: (whole body) A and B as for the tile kernel (contract); `start` with
            // alpha = 1, beta = 0 reads only the bias (4·NV floats when non-null), never C;
            // the stores write columns j < nc of rows i < MR at `c + i·rsc`, which the
            // contract makes writable.
            unsafe {
                let (mut acc, _) = start::<$mr, $nv>(c, rsc, 1.0, 0.0, bias);
                let (ap, bp) = (a, b);
                let ldb_bytes = ldb * 4;
                $depth!(acc, ap, bp, ldb_bytes, k $(, $dargs)*);
                let (vlo, vhi) = (vdupq_n_f32(lo), vdupq_n_f32(hi));
                let nc = nc.min(4 * $nv);
                if clamps(lo, hi) {
                    store_tile_cols::<$mr, $nv, true>(&acc, c, rsc, nc, vlo, vhi);
                } else {
                    store_tile_cols::<$mr, $nv, false>(&acc, c, rsc, nc, vlo, vhi);
                }
            }
        }
    };
}

neon_kernel!(
    /// Neon 8 × 12 micro-kernel: 24 accumulators, per two depth steps one `ld1` of A (4
    /// vectors), per step one of B (3 vectors) and 24 `fmla v.4s, v.4s, v.s[lane]`.
    kernel_8x12,
    run_8x12,
    edge_8x12,
    neon_depth_8x12_asm,
    neon_bias_8x12_asm,
    neon_store_8x12_asm,
    8,
    3
);

neon_kernel!(
    /// Neon 8 × 8 micro-kernel (for N that 12 does not divide but 8 does: the column tail
    /// then costs nothing): 16 accumulators, 8 steps (128 FMLA) in 142 instructions.
    kernel_8x8,
    run_8x8,
    edge_8x8,
    neon_depth_8x8_asm,
    neon_bias_8x8_asm,
    neon_store_8x8_asm,
    8,
    2
);

neon_kernel!(
    /// Neon 4 × 16 micro-kernel (for M with a 4-row remainder, e.g. 20: no padded half tile):
    /// 16 accumulators, per two depth steps one `ld1` of A (2 vectors), per step one of B (4
    /// vectors) and 16 FMLA, as dense as 8 × 8.
    kernel_4x16,
    run_4x16,
    edge_4x16,
    neon_depth_4x16_asm,
    neon_bias_4x16_asm,
    neon_store_4x16_asm,
    4,
    4
);

/// Panel packer (`PackFn` contract) for a multiple of 4 runs into a width `w` that is a
/// multiple of 4: `dst[p*w + i] = src[i*ld + p]` for `i < runs`, `p < kc` — depth-contiguous
/// runs (rows of A, or columns of a transposed B) interleaved; declines other run counts.
///
/// A 4 × 4 block (four runs, four depth steps) is four 4-float loads and four single-lane
/// `st4` stores: `st4 {v0.s-v3.s}[l]` writes lane `l` of the four runs — the four values of
/// depth step `p + l` — as one contiguous group, so the store is the transpose (about half an
/// instruction per element).
///
/// # Safety
/// Runs `i < runs` at `src + i*ld` hold `kc` readable floats; `dst` holds `(kc − 1)·w + runs`
/// writable floats (it writes lanes `i < runs` only).
pub unsafe fn pack_runs_x4(
    src: *const f32,
    ld: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: *mut f32,
) -> bool {
    if !runs.is_multiple_of(4) || !w.is_multiple_of(4) || runs > w {
        return false;
    }
    if runs == 8 && kc >= 4 {
        // SAFETY: the contract of this function, for eight runs and kc ≥ 4.
        unsafe { pack_runs_8(src, ld, w, kc, dst) };
        return true;
    }
    // SAFETY: (whole body) the run loads read src[i*ld + p .. p+4] with i < runs, p + 4 ≤ kc,
    // and the tail reads single elements with p < kc, inside the runs the caller vouches
    // for; the stores write dst[(p+l)*w + g .. +4] with l < 4, p + l < kc, g + 4 ≤ runs,
    // inside the (kc − 1)·w + runs floats of `dst` (the tail stores too: lanes g..g+4 ≤ runs
    // of depth p < kc). Neon is in the aarch64 baseline; all accesses are
    // unaligned-safe on normal memory.
    unsafe {
        let mut g = 0;
        while g + 4 <= runs {
            let r0 = src.add(g * ld);
            let (r1, r2, r3) = (r0.add(ld), r0.add(2 * ld), r0.add(3 * ld));
            let mut d = dst.add(g);
            let blocks = kc / 4;
            let mut p = blocks * 4;
            if blocks > 0 {
                // SAFETY: reads 4·blocks ≤ kc floats from each of the four runs and writes
                // 4·blocks groups of 4 floats at d, d + w, … (depth steps < kc), as above.
                core::arch::asm!(
                    "2:",
                    "ldr q0, [{r0}], #16",
                    "ldr q1, [{r1}], #16",
                    "ldr q2, [{r2}], #16",
                    "ldr q3, [{r3}], #16",
                    "st4 {{v0.s, v1.s, v2.s, v3.s}}[0], [{d}], {w4}",
                    "st4 {{v0.s, v1.s, v2.s, v3.s}}[1], [{d}], {w4}",
                    "st4 {{v0.s, v1.s, v2.s, v3.s}}[2], [{d}], {w4}",
                    "st4 {{v0.s, v1.s, v2.s, v3.s}}[3], [{d}], {w4}",
                    "subs {n}, {n}, #1",
                    "b.ne 2b",
                    r0 = inout(reg) r0 => _,
                    r1 = inout(reg) r1 => _,
                    r2 = inout(reg) r2 => _,
                    r3 = inout(reg) r3 => _,
                    d = inout(reg) d,
                    n = inout(reg) blocks => _,
                    w4 = in(reg) w * 4,
                    out("v0") _, out("v1") _, out("v2") _, out("v3") _,
                    options(nostack),
                );
            }
            if p < kc && kc >= 4 {
                // The last 1–3 depth steps: the runs' last four floats (overlapping the
                // blocks above) and one lane store per remaining step.
                // SAFETY: reads src[i*ld + kc − 4 .. kc] (kc ≥ 4) of the four runs; writes
                // the groups of depth steps p .. kc at d, d + w, …, as the loop below would.
                let q = float32x4x4_t(
                    vld1q_f32(r0.add(kc - 4)),
                    vld1q_f32(r1.add(kc - 4)),
                    vld1q_f32(r2.add(kc - 4)),
                    vld1q_f32(r3.add(kc - 4)),
                );
                match kc - p {
                    1 => vst4q_lane_f32::<3>(d, q),
                    2 => {
                        vst4q_lane_f32::<2>(d, q);
                        vst4q_lane_f32::<3>(d.add(w), q);
                    }
                    _ => {
                        vst4q_lane_f32::<1>(d, q);
                        vst4q_lane_f32::<2>(d.add(w), q);
                        vst4q_lane_f32::<3>(d.add(2 * w), q);
                    }
                }
                p = kc;
            }
            while p < kc {
                *d = *r0.add(p);
                *d.add(1) = *r1.add(p);
                *d.add(2) = *r2.add(p);
                *d.add(3) = *r3.add(p);
                d = d.add(w);
                p += 1;
            }
            g += 4;
        }
    }
    true
}

/// [`pack_runs_x4`] for eight runs (an 8-row A panel) and `kc ≥ 4`: both groups of four in
/// one loop (per four depth steps eight `ldr` and eight `st4`, the second group's stores
/// through a pointer 16 bytes on), so that a panel costs one short setup, not one per group.
/// The last `kc mod 4` steps re-read each run's last four floats (overlapping the loop's)
/// and store only their lanes.
///
/// # Safety
/// As [`pack_runs_x4`] with `runs = 8`, `w ≥ 8` a multiple of 4, and `kc ≥ 4`.
#[inline(always)]
unsafe fn pack_runs_8(src: *const f32, ld: usize, w: usize, kc: usize, dst: *mut f32) {
    let blocks = kc / 4;
    // SAFETY: (whole body) each run i < 8 at src + i·ld holds kc floats: the loop reads
    // floats 0 .. 4·blocks ≤ kc of each, the tail floats kc − 4 .. kc (kc ≥ 4); the stores
    // write lanes 0 .. 8 ≤ w of the groups of depth steps 0 .. kc, at dst + p·w, inside the
    // (kc − 1)·w + 8 floats of `dst`. Neon is in the aarch64 baseline; unaligned accesses are
    // allowed on normal memory.
    unsafe {
        let (s0, s4) = (src, src.add(4 * ld));
        let d = dst;
        core::arch::asm!(
            "add {r1}, {r0}, {ld4}",
            "add {r2}, {r1}, {ld4}",
            "add {r3}, {r2}, {ld4}",
            "add {r5}, {r4}, {ld4}",
            "add {r6}, {r5}, {ld4}",
            "add {r7}, {r6}, {ld4}",
            "add {d1}, {d0}, #16",
            "2:",
            "ldr q0, [{r0}], #16",
            "ldr q1, [{r1}], #16",
            "ldr q2, [{r2}], #16",
            "ldr q3, [{r3}], #16",
            "ldr q4, [{r4}], #16",
            "ldr q5, [{r5}], #16",
            "ldr q6, [{r6}], #16",
            "ldr q7, [{r7}], #16",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[0], [{d0}], {w4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[0], [{d1}], {w4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[1], [{d0}], {w4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[1], [{d1}], {w4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[2], [{d0}], {w4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[2], [{d1}], {w4}",
            "st4 {{v0.s, v1.s, v2.s, v3.s}}[3], [{d0}], {w4}",
            "st4 {{v4.s, v5.s, v6.s, v7.s}}[3], [{d1}], {w4}",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            r0 = inout(reg) s0 => _,
            r4 = inout(reg) s4 => _,
            r1 = out(reg) _,
            r2 = out(reg) _,
            r3 = out(reg) _,
            r5 = out(reg) _,
            r6 = out(reg) _,
            r7 = out(reg) _,
            d0 = inout(reg) d => _,
            d1 = out(reg) _,
            n = inout(reg) blocks => _,
            ld4 = in(reg) ld * 4,
            w4 = in(reg) w * 4,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            options(nostack),
        );
        let left = kc % 4;
        if left > 0 {
            let t = kc - 4;
            let g = |i: usize| vld1q_f32(src.add(i * ld + t));
            let lo = float32x4x4_t(g(0), g(1), g(2), g(3));
            let hi = float32x4x4_t(g(4), g(5), g(6), g(7));
            let p = dst.add((kc - left) * w);
            macro_rules! lanes {
                ($($l:literal @ $j:literal),*) => {{
                    $(
                        vst4q_lane_f32::<$l>(p.add($j * w), lo);
                        vst4q_lane_f32::<$l>(p.add($j * w + 4), hi);
                    )*
                }};
            }
            match left {
                1 => lanes!(3 @ 0),
                2 => lanes!(2 @ 0, 3 @ 1),
                _ => lanes!(1 @ 0, 2 @ 1, 3 @ 2),
            }
        }
    }
}

// SAFETY: `kernel_8x12` implements the MicroKernel contract for an 8 × 12 tile, `run_8x12`
// the TileRunFn contract for it (the same body per tile), `edge_8x12` the EdgeFn contract (the
// same body, stores of the first nc columns), `rows1..7_of8_x12` (`neon_rows`) the RowKernels contract for it (1 to 7 of the panel's
// 8 rows, 12 columns) and `pack_runs_x4` the PackFn contract for w = 8 and 12 (multiples of 4); all use
// only Neon, which every AArch64 CPU has (it is in the aarch64 targets' baseline).
/// The Neon 8 × 12 micro-kernel.
pub static NEON_8X12: MicroKernel = unsafe {
    MicroKernel::new("neon-8x12", MR, NR, kernel_8x12)
        .with_run(run_8x12)
        .with_edge(edge_8x12)
        .with_packer(pack_runs_x4)
        .with_rows(RowKernels::new([
            Some(rows1_of8_x12),
            Some(rows2_of8_x12),
            Some(rows3_of8_x12),
            Some(rows4_of8_x12),
            Some(rows5_of8_x12),
            Some(rows6_of8_x12),
            Some(rows7_of8_x12),
        ]))
}
.with_kc_max(KC_MAX);

// SAFETY: as NEON_8X12, for `kernel_4x16`/`run_4x16`/`edge_4x16` and a 4 × 16 tile (row kernels `rows1..3_of4_x16`,
// w = 4 and 16 for the packer).
/// The Neon 4 × 16 micro-kernel.
pub static NEON_4X16: MicroKernel = unsafe {
    MicroKernel::new("neon-4x16", 4, 16, kernel_4x16)
        .with_run(run_4x16)
        .with_edge(edge_4x16)
        .with_packer(pack_runs_x4)
        .with_rows(RowKernels::new([
            Some(rows1_of4_x16),
            Some(rows2_of4_x16),
            Some(rows3_of4_x16),
            None,
            None,
            None,
            None,
        ]))
}
.with_kc_max(KC_MAX);

// SAFETY: as NEON_8X12, for `kernel_8x8`/`run_8x8`/`edge_8x8` and an 8 × 8 tile (row kernels `rows1..7_of8_x8`,
// w = 8 for the packer).
/// The Neon 8 × 8 micro-kernel.
pub static NEON_8X8: MicroKernel = unsafe {
    MicroKernel::new("neon-8x8", MR, 8, kernel_8x8)
        .with_run(run_8x8)
        .with_edge(edge_8x8)
        .with_packer(pack_runs_x4)
        .with_rows(RowKernels::new([
            Some(rows1_of8_x8),
            Some(rows2_of8_x8),
            Some(rows3_of8_x8),
            Some(rows4_of8_x8),
            Some(rows5_of8_x8),
            Some(rows6_of8_x8),
            Some(rows7_of8_x8),
        ]))
}
.with_kc_max(KC_MAX);

/// Preferred depth block: GPT-2's depths (768, 3072) in one or few blocks, so each C tile is
/// reloaded and stored fewer times (an 8 × 1024 A micro-panel is 32 KiB).
const KC_MAX: usize = 1024;
