//! Neon (Advanced SIMD) 8 × 12 micro-kernel written with `core::arch::aarch64` intrinsics.
//!
//! Register tile: 24 accumulators (8 rows × 3 quad-vectors), 2 vectors of A and 3 of B per
//! depth step loaded with single multi-register post-increment `ld1` instructions (a two-line
//! `asm!`: the load intrinsics do not lower to them; B's increment is the register `ldb`, so
//! a row-major B is read in place at no extra cost), 24 `fmla v.4s, v.4s, v.s[lane]`
//! intrinsics per step, 4 steps per loop iteration: 96 FMA in 106 instructions (0.906).

use core::arch::aarch64::*;

use crate::kernels::gemm::MicroKernel;

/// Rows of the register tile.
pub const MR: usize = 8;
/// Columns of the register tile.
pub const NR: usize = 12;

/// Epilogue for one row: `c = alpha·acc (+ beta·c) (+ bias)` on 12 columns.
///
/// # Safety
/// `crow + j*csc` valid for reads/writes for `j < 12`; `bias` null or valid for 12 reads.
#[inline(always)]
unsafe fn store_row(
    acc: [float32x4_t; 3],
    crow: *mut f32,
    csc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: (whole body) the caller guarantees 12 valid C elements at stride `csc` and 12
    // bias reads; Neon is part of the aarch64 baseline. Contiguous rows use unaligned
    // vector accesses, which AArch64 permits on normal memory.
    unsafe {
        let va = vdupq_n_f32(alpha);
        let mut r = [
            vmulq_f32(acc[0], va),
            vmulq_f32(acc[1], va),
            vmulq_f32(acc[2], va),
        ];
        if csc == 1 {
            if beta != 0.0 {
                let cv = vld1q_f32_x3(crow);
                r[0] = vfmaq_n_f32(r[0], cv.0, beta);
                r[1] = vfmaq_n_f32(r[1], cv.1, beta);
                r[2] = vfmaq_n_f32(r[2], cv.2, beta);
            }
            if !bias.is_null() {
                let bv = vld1q_f32_x3(bias);
                r[0] = vaddq_f32(r[0], bv.0);
                r[1] = vaddq_f32(r[1], bv.1);
                r[2] = vaddq_f32(r[2], bv.2);
            }
            vst1q_f32_x3(crow, float32x4x3_t(r[0], r[1], r[2]));
        } else {
            let mut t = [0.0f32; NR];
            vst1q_f32_x3(t.as_mut_ptr(), float32x4x3_t(r[0], r[1], r[2]));
            for (j, &x) in t.iter().enumerate() {
                let p = crow.offset(j as isize * csc);
                let mut y = x;
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

/// Neon 8 × 12 micro-kernel.
///
/// Layout contract (that of [`MicroKernel`], with `MR = 8`, `NR = 12`): `a` holds `k` groups
/// of 8 floats (`a[p*8 + i] = A(i, p)`), `b` holds `k` rows of 12 floats `ldb` apart
/// (`b[p*ldb + j] = B(p, j)`: packed panels have `ldb = 12`, in-place B its row stride); C element `(i, j)` is `c[i*rsc + j*csc]`; it stores
/// `alpha·Σ_p A(i,p)·B(p,j) (+ beta·C if beta ≠ 0) (+ bias[j] if bias is non-null)`.
/// No alignment beyond f32 is required.
///
/// # Safety
/// The [`MicroKernel`] contract for an 8 × 12 tile.
#[allow(clippy::too_many_arguments)]
pub unsafe fn kernel_8x12(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    csc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: (whole body) per the contract `a` holds 8·k floats and `b` k rows of 12
    // readable floats `ldb` apart, so the loads at `a + 8p` (8 floats) and `b + p·ldb`
    // (12 floats) for p < k are in bounds;
    // C rows i < 8 at `c + i*rsc` hold 12 elements at stride csc (contract), bias 12 floats.
    unsafe {
        let z = vdupq_n_f32(0.0);
        let mut acc = [[z; 3]; MR];
        let mut ap = a;
        let mut bp = b;
        let ldb_bytes = ldb * 4;
        // One depth step: A (8 floats) and B (12 floats) each come in with ONE multi-register
        // `ld1` with post-increment (the intrinsics `vld1q_f32_x2/x3` are lowered to
        // `ldp`+`ldr` plus separate pointer adds, 2.5 extra instructions per step); the 24
        // FMAs are intrinsics, so the compiler still allocates the accumulators.
        macro_rules! step {
            () => {{
                let (a0, a1, b0, b1, b2): (
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                    float32x4_t,
                );
                // SAFETY: reads 8 floats at `ap` and 12 at `bp` (in bounds: at most k steps
                // of the A panel and of the B rows, see above) and advances `ap` past them,
                // `bp` to the next B row (`ldb` floats on).
                core::arch::asm!(
                    "ld1 {{v0.4s, v1.4s}}, [{ap}], #32",
                    "ld1 {{v2.4s, v3.4s, v4.4s}}, [{bp}], {ldb}",
                    ap = inout(reg) ap,
                    bp = inout(reg) bp,
                    ldb = in(reg) ldb_bytes,
                    out("v0") a0,
                    out("v1") a1,
                    out("v2") b0,
                    out("v3") b1,
                    out("v4") b2,
                    options(nostack, readonly, preserves_flags),
                );
                macro_rules! row {
                    ($i:literal, $v:ident, $l:literal) => {
                        acc[$i][0] = vfmaq_laneq_f32::<$l>(acc[$i][0], b0, $v);
                        acc[$i][1] = vfmaq_laneq_f32::<$l>(acc[$i][1], b1, $v);
                        acc[$i][2] = vfmaq_laneq_f32::<$l>(acc[$i][2], b2, $v);
                    };
                }
                row!(0, a0, 0);
                row!(1, a0, 1);
                row!(2, a0, 2);
                row!(3, a0, 3);
                row!(4, a1, 0);
                row!(5, a1, 1);
                row!(6, a1, 2);
                row!(7, a1, 3);
            }};
        }
        let mut n = k;
        while n >= 4 {
            step!();
            step!();
            step!();
            step!();
            n -= 4;
        }
        while n > 0 {
            step!();
            n -= 1;
        }
        // Unrolled by hand so that the accumulators stay in registers (a loop over the array
        // made LLVM keep it on the stack).
        macro_rules! store {
            ($($i:literal)*) => {
                $(store_row(acc[$i], c.offset($i * rsc), csc, alpha, beta, bias);)*
            };
        }
        store!(0 1 2 3 4 5 6 7);
    }
}

/// Panel packer (`PackFn` contract) for any width `w` that is a multiple of 4:
/// `dst[p*w + i] = src[i*ld + p]` for `i < w`, `p < kc` — `w` depth-contiguous runs (rows of
/// A, or columns of a transposed B) interleaved.
///
/// A 4 × 4 block (four runs, four depth steps) is four 4-float loads and four single-lane
/// `st4` stores: `st4 {v0.s-v3.s}[l]` writes lane `l` of the four runs — the four values of
/// depth step `p + l` — as one contiguous group, so the store is the transpose (about half an
/// instruction per element).
///
/// # Safety
/// `w % 4 == 0`; runs `i < w` at `src + i*ld` hold `kc` readable floats; `dst` holds `w·kc`
/// writable floats.
pub unsafe fn pack_runs_x4(src: *const f32, ld: usize, w: usize, kc: usize, dst: *mut f32) {
    // SAFETY: (whole body) the run loads read src[i*ld + p .. p+4] with i < w, p + 4 ≤ kc,
    // and the tail reads single elements with p < kc, inside the runs the caller vouches
    // for; the stores write dst[(p+l)*w + g .. +4] with l < 4, p + l < kc, g + 4 ≤ w, inside
    // the w·kc floats of `dst`. Neon is in the aarch64 baseline; all accesses are
    // unaligned-safe on normal memory.
    unsafe {
        let mut g = 0;
        while g + 4 <= w {
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
}

// SAFETY: `kernel_8x12` implements the MicroKernel contract for an 8 × 12 tile and
// `pack_runs_x4` the PackFn contract for w = 8 and 12 (multiples of 4); both use only Neon, which every AArch64 CPU
// has (it is in the aarch64 targets' baseline).
/// The Neon 8 × 12 micro-kernel.
pub static NEON_8X12: MicroKernel =
    unsafe { MicroKernel::new("neon-8x12", MR, NR, kernel_8x12).with_packer(pack_runs_x4) };
