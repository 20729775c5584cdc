//! 32-bit Arm (ARMv7-A) micro-kernels.
//!
//! `neon_vfpv4_4x12`: a 4 × 12 tile on Neon with VFPv4's fused multiply-add (`vfma.f32` on q
//! registers): twelve q accumulators (q4–q15, one row of the tile in three), a B row in
//! q0–q2, each A value loaded to all four lanes of q3 (`vld1.32 {d6[], d7[]}`), so one depth
//! step is 2 loads of B, 4 of A and 12 fused multiply-adds. VFPv4's `vfma` has no by-element
//! form (unlike AArch64's `fmla v, v, v.s[i]`): each A value costs a broadcast load, which
//! bounds the share of multiply-adds at 12 / 18 = 0.67 per step (0.65 with the loop counter
//! and branch, the depth loop being unrolled by four).
//! With 16 q registers (12 accumulators, three B vectors, one broadcast) no tile of broadcast
//! loads does better; an A packed with every value already in four lanes, two per load, would
//! let a 6 × 8 tile reach 12 / 16.25 = 0.74 (docs/benchmarks.md, "32-bit ARMv7-A boards").
//!
//! The plain product (alpha 1, beta 0, no clamp; bias added in registers) and its later depth
//! blocks (beta 1, no bias: the accumulators start from C) are stored straight to C; otherwise
//! the tile goes to a stack buffer and alpha, beta, bias and the clamp are applied from there
//! (the tile is still in L1).
//!
//! Chosen when the CPU has Neon and VFPv4 (`cpu::arm32_neon_vfpv4`: the Linux auxiliary
//! vector on a `std` build, the MVFR0/MVFR1 feature registers on bare metal).

use super::contract::{clamp, clamps, MicroKernel};

const MR: usize = 4;
const NR: usize = 12;

/// One depth step of the 4 × 12 tile: B's row (12 floats, two loads, then to the next row),
/// each of the four A values broadcast to q3 and multiplied into one row of accumulators.
macro_rules! depth_step {
    () => {
        concat!(
            "vld1.32 {{d0-d3}}, [r2]!\n",
            "vld1.32 {{d4-d5}}, [r2], r12\n",
            "vld1.32 {{d6[], d7[]}}, [r1]!\n",
            "vfma.f32 q4, q0, q3\n",
            "vfma.f32 q5, q1, q3\n",
            "vfma.f32 q6, q2, q3\n",
            "vld1.32 {{d6[], d7[]}}, [r1]!\n",
            "vfma.f32 q7, q0, q3\n",
            "vfma.f32 q8, q1, q3\n",
            "vfma.f32 q9, q2, q3\n",
            "vld1.32 {{d6[], d7[]}}, [r1]!\n",
            "vfma.f32 q10, q0, q3\n",
            "vfma.f32 q11, q1, q3\n",
            "vfma.f32 q12, q2, q3\n",
            "vld1.32 {{d6[], d7[]}}, [r1]!\n",
            "vfma.f32 q13, q0, q3\n",
            "vfma.f32 q14, q1, q3\n",
            "vfma.f32 q15, q2, q3\n",
        )
    };
}

/// # Safety
/// The [`MicroKernel`] contract for a 4 × 12 tile, on a CPU with Neon and VFPv4.
///
/// The depth loop runs four steps per iteration (the `k mod 4` others one at a time first). With
/// `alpha = 1`, no clamp and `beta = 0` (the plain product, the bias added in registers) or
/// `beta = 1` without bias (a later depth block: the accumulators start from C) the tile goes
/// straight to C; otherwise the tile goes to a
/// stack buffer and alpha, beta, bias and the clamp are applied from there (still in L1).
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_neon_vfpv4_4x12(
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
    let mut t = [0f32; MR * NR];
    // Bytes from the end of a B row's first 8 floats to the start of the next row.
    let step = (ldb * 4) as isize - 32;
    // The plain product (beta 0, bias added in registers) or a later depth block of it (beta
    // 1, no bias: the accumulators start from C) goes straight to C.
    let direct =
        alpha == 1.0 && !clamps(lo, hi) && (beta == 0.0 || (beta == 1.0 && bias.is_null()));
    // Where the tile's rows go (and, with beta 1, come from), and the bytes from the end of a
    // row's first 8 floats to the next row: C itself, or the 12-float rows of `t`.
    let (dst, dst_step, add_bias, init) = if direct {
        let init = if beta == 1.0 {
            c.cast_const()
        } else {
            core::ptr::null()
        };
        (c, rsc * 4 - 32, bias, init)
    } else {
        let t = t.as_mut_ptr();
        (
            t,
            (NR * 4) as isize - 32,
            core::ptr::null(),
            core::ptr::null(),
        )
    };
    // SAFETY: the contract gives `k * 4` readable floats at `a` and, for each of the `k`
    // rows, 12 readable floats at `b + p * ldb` (only f32-aligned: the loads carry no
    // alignment qualifier); `dst` is C's tile (4 rows of 12 writable floats, `rsc` apart,
    // contract) or `t`; `init`, when not null, is C's tile (readable: beta is not zero);
    // `add_bias`, when not null, holds 12 floats (contract). The CPU has
    // Neon and VFPv4 (the kernel is only handed out after `cpu::arm32_neon_vfpv4`), hence 32 D
    // registers. d0–d7 are declared clobbered; d8–d31 are saved and restored around the loop
    // (the compiler may know only d0–d15 on a VFPv3-D16 target, so they cannot be declared).
    unsafe {
        core::arch::asm!(
            ".fpu neon-vfpv4",
            "vpush {{d8-d15}}",
            "vpush {{d16-d31}}",
            "cmp {init}, #0",
            "beq 5f",
            "vld1.32 {{d8-d11}}, [{init}]!",
            "vld1.32 {{d12-d13}}, [{init}], {dst_step}",
            "vld1.32 {{d14-d17}}, [{init}]!",
            "vld1.32 {{d18-d19}}, [{init}], {dst_step}",
            "vld1.32 {{d20-d23}}, [{init}]!",
            "vld1.32 {{d24-d25}}, [{init}], {dst_step}",
            "vld1.32 {{d26-d29}}, [{init}]!",
            "vld1.32 {{d30-d31}}, [{init}]",
            "b 6f",
            "5:",
            "vmov.i32 q4, #0",
            "vmov.i32 q5, #0",
            "vmov.i32 q6, #0",
            "vmov.i32 q7, #0",
            "vmov.i32 q8, #0",
            "vmov.i32 q9, #0",
            "vmov.i32 q10, #0",
            "vmov.i32 q11, #0",
            "vmov.i32 q12, #0",
            "vmov.i32 q13, #0",
            "vmov.i32 q14, #0",
            "vmov.i32 q15, #0",
            "6:",
            "ands {rem}, r0, #3",
            "beq 3f",
            "7:",
            depth_step!(),
            "subs {rem}, {rem}, #1",
            "bne 7b",
            "3:",
            "lsrs r0, r0, #2",
            "beq 2f",
            "1:",
            depth_step!(),
            depth_step!(),
            depth_step!(),
            depth_step!(),
            "subs r0, r0, #1",
            "bne 1b",
            "2:",
            "cmp {bias}, #0",
            "beq 4f",
            "vld1.32 {{d0-d3}}, [{bias}]!",
            "vld1.32 {{d4-d5}}, [{bias}]",
            "vadd.f32 q4, q4, q0",
            "vadd.f32 q5, q5, q1",
            "vadd.f32 q6, q6, q2",
            "vadd.f32 q7, q7, q0",
            "vadd.f32 q8, q8, q1",
            "vadd.f32 q9, q9, q2",
            "vadd.f32 q10, q10, q0",
            "vadd.f32 q11, q11, q1",
            "vadd.f32 q12, q12, q2",
            "vadd.f32 q13, q13, q0",
            "vadd.f32 q14, q14, q1",
            "vadd.f32 q15, q15, q2",
            "4:",
            "vst1.32 {{d8-d11}}, [r3]!",
            "vst1.32 {{d12-d13}}, [r3], {dst_step}",
            "vst1.32 {{d14-d17}}, [r3]!",
            "vst1.32 {{d18-d19}}, [r3], {dst_step}",
            "vst1.32 {{d20-d23}}, [r3]!",
            "vst1.32 {{d24-d25}}, [r3], {dst_step}",
            "vst1.32 {{d26-d29}}, [r3]!",
            "vst1.32 {{d30-d31}}, [r3]",
            "vpop {{d16-d31}}",
            "vpop {{d8-d15}}",
            // r0 = k, r1 = a, r2 = b, r3 = where the rows go, r12 = B's row step.
            inout("r0") k => _,
            inout("r1") a => _,
            inout("r2") b => _,
            inout("r3") dst => _,
            in("r12") step,
            bias = inout(reg) add_bias => _,
            init = inout(reg) init => _,
            rem = out(reg) _,
            dst_step = in(reg) dst_step,
            out("d0") _,
            out("d1") _,
            out("d2") _,
            out("d3") _,
            out("d4") _,
            out("d5") _,
            out("d6") _,
            out("d7") _,
        );
    }
    if direct {
        return;
    }
    for (i, row) in t.chunks_exact(NR).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: element (i, j) of the tile, i < 4, j < 12 (contract).
            let cij = unsafe { c.offset(i as isize * rsc + j as isize) };
            let mut x = alpha * v;
            if beta != 0.0 {
                // SAFETY: as above; read only when beta is not zero (contract).
                x += beta * unsafe { *cij };
            }
            if !bias.is_null() {
                // SAFETY: `bias` holds NR floats when not null (contract).
                x += unsafe { *bias.add(j) };
            }
            // SAFETY: as above.
            unsafe { *cij = clamp(x, lo, hi) };
        }
    }
}

// SAFETY: `kernel_neon_vfpv4_4x12` implements the contract for a 4 × 12 tile; this static
// is handed out only after `cpu::arm32_neon_vfpv4` (`select::micro_kernel`).
pub(in crate::linalg::gemm) static NEON_VFPV4_4X12: MicroKernel =
    unsafe { MicroKernel::new("neon-vfpv4-4x12", MR, NR, kernel_neon_vfpv4_4x12) };

/// `y[j] = alpha·v + beta·y[j] (+ bias[j])`, the `beta` term omitted when `beta == 0`: the
/// GEMVs' last step for column `j` (`j` < the lengths their callers checked).
#[inline(always)]
fn finish_gemv(j: usize, v: f32, y: &mut [f32], alpha: f32, beta: f32, bias: Option<&[f32]>) {
    let mut r = alpha * v;
    if beta != 0.0 {
        r += beta * y[j];
    }
    if let Some(s) = bias {
        r += s[j];
    }
    y[j] = r;
}

/// Columns of one GEMV block (four q accumulators).
const GEMV_COLS: usize = 16;

/// `y[j] = alpha·Σ_p x[p]·B(p, j) + beta·y[j] (+ bias[j])` for `j < n` (the `beta` term
/// omitted when `beta == 0`), B row-major with row stride `rs` (`B(p, j) = b[p·rs + j]`):
/// blocks of 16 columns on Neon + VFPv4 (x[p] loaded to all lanes, one `vfma` per four
/// columns), the last `n % 16` columns in scalar code (mul + add), each column summed in
/// increasing `p`.
/// Returns `false`, touching nothing, when a slice is too short for `k`, `n` and `rs`.
///
/// Only on a CPU with Neon and VFPv4 (`select::arm32_neon_vfpv4`).
#[allow(clippy::too_many_arguments)]
pub(in crate::linalg::gemm) fn sgemv_rows(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    rs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> bool {
    let b_needed = k
        .checked_sub(1)
        .and_then(|p| p.checked_mul(rs))
        .and_then(|o| o.checked_add(n));
    if k == 0
        || n == 0
        || x.len() < k
        || y.len() < n
        || bias.is_some_and(|s| s.len() < n)
        || b_needed.is_none_or(|need| b.len() < need)
        || rs < n
    {
        return false;
    }
    let finish = |j: usize, v: f32, y: &mut [f32]| finish_gemv(j, v, y, alpha, beta, bias);
    let step = (rs * 4) as isize - 32;
    let full = n - n % GEMV_COLS;
    for j0 in (0..full).step_by(GEMV_COLS) {
        let mut t = [0f32; GEMV_COLS];
        // SAFETY: `k` floats of `x` (checked); for each row p < k the 16 floats at
        // `b[p·rs + j0 ..]` lie inside `b` (j0 + 16 <= n and (k-1)·rs + n <= b.len(),
        // checked); `t` holds the 16 floats stored. Neon + VFPv4 are present (only called
        // after `select::arm32_neon_vfpv4`), hence 32 D registers; d0–d7 are declared
        // clobbered, d16–d31 saved and restored (not declarable on a VFPv3-D16 target).
        unsafe {
            core::arch::asm!(
                ".fpu neon-vfpv4",
                "vpush {{d16-d31}}",
                "vmov.i32 q8, #0",
                "vmov.i32 q9, #0",
                "vmov.i32 q10, #0",
                "vmov.i32 q11, #0",
                "1:",
                "vld1.32 {{d0[], d1[]}}, [r1]!",
                "vld1.32 {{d4-d7}}, [r2]!",
                "vld1.32 {{d24-d27}}, [r2], r12",
                "vfma.f32 q8, q2, q0",
                "vfma.f32 q9, q3, q0",
                "vfma.f32 q10, q12, q0",
                "vfma.f32 q11, q13, q0",
                "subs r0, r0, #1",
                "bne 1b",
                "vst1.32 {{d16-d19}}, [r3]!",
                "vst1.32 {{d20-d23}}, [r3]",
                "vpop {{d16-d31}}",
                // r0 = k (> 0), r1 = x, r2 = B at column j0, r3 = t, r12 = B's row step.
                inout("r0") k => _,
                inout("r1") x.as_ptr() => _,
                inout("r2") b.as_ptr().add(j0) => _,
                inout("r3") t.as_mut_ptr() => _,
                in("r12") step,
                out("d0") _,
                out("d1") _,
                out("d4") _,
                out("d5") _,
                out("d6") _,
                out("d7") _,
            );
        }
        for (c, &v) in t.iter().enumerate() {
            finish(j0 + c, v, y);
        }
    }
    for j in full..n {
        let mut acc = 0f32;
        for p in 0..k {
            acc += x[p] * b[p * rs + j];
        }
        finish(j, acc, y);
    }
    true
}

/// Columns of one transposed-B GEMV block (four q accumulators, one per column).
const GEMV_T_COLS: usize = 4;

/// `y[j] = alpha·Σ_p x[p]·B(p, j) + beta·y[j] (+ bias[j])` for `j < n` (the `beta` term
/// omitted when `beta == 0`), B stored transposed with column stride `cs`
/// (`B(p, j) = b[j·cs + p]`: each column, a row of the `[N, K]` weights of a linear layer, is
/// contiguous): blocks of four columns on Neon + VFPv4, four depths per step (x[p..p+4] times
/// each column's four values, one `vfma` per column), each column's four lanes summed
/// pairwise at the end; the `k mod 4` last depths and the `n mod 4` last columns in scalar
/// code (mul + add). Returns `false`, touching nothing, when a slice is too short for `k`,
/// `n` and `cs` or `cs < k`.
#[allow(clippy::too_many_arguments)]
pub(in crate::linalg::gemm) fn sgemv_cols(
    k: usize,
    n: usize,
    x: &[f32],
    b: &[f32],
    cs: usize,
    y: &mut [f32],
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> bool {
    let b_needed = n
        .checked_sub(1)
        .and_then(|j| j.checked_mul(cs))
        .and_then(|o| o.checked_add(k));
    if k == 0
        || n == 0
        || x.len() < k
        || y.len() < n
        || bias.is_some_and(|s| s.len() < n)
        || b_needed.is_none_or(|need| b.len() < need)
        || cs < k
    {
        return false;
    }
    let finish = |j: usize, v: f32, y: &mut [f32]| finish_gemv(j, v, y, alpha, beta, bias);
    let k4 = k - k % 4;
    let tail = |j: usize, acc: f32| -> f32 {
        let col = &b[j * cs..j * cs + k];
        let mut acc = acc;
        for p in k4..k {
            acc += x[p] * col[p];
        }
        acc
    };
    let full = if k4 > 0 { n - n % GEMV_T_COLS } else { 0 };
    let col_bytes = cs * 4;
    for j0 in (0..full).step_by(GEMV_T_COLS) {
        let mut t = [0f32; GEMV_T_COLS];
        // SAFETY: `k4` (≥ 4) floats of `x` and, for the four columns j0..j0+4 (< n), `k4`
        // floats at `b[j·cs ..]` (j·cs + k ≤ (n-1)·cs + k ≤ b.len(), checked); `t` holds the
        // 4 floats stored. Neon + VFPv4 are present (only called after
        // `select::arm32_neon_vfpv4`); q0–q7 (d0–d15) are declared clobbered.
        unsafe {
            core::arch::asm!(
                ".fpu neon-vfpv4",
                "add {c1}, r2, {cb}",
                "add {c2}, {c1}, {cb}",
                "add {c3}, {c2}, {cb}",
                "vmov.i32 q4, #0",
                "vmov.i32 q5, #0",
                "vmov.i32 q6, #0",
                "vmov.i32 q7, #0",
                "1:",
                "vld1.32 {{d0-d1}}, [r1]!",
                "vld1.32 {{d2-d3}}, [r2]!",
                "vld1.32 {{d4-d5}}, [{c1}]!",
                "vfma.f32 q4, q0, q1",
                "vld1.32 {{d6-d7}}, [{c2}]!",
                "vfma.f32 q5, q0, q2",
                "vld1.32 {{d2-d3}}, [{c3}]!",
                "vfma.f32 q6, q0, q3",
                "vfma.f32 q7, q0, q1",
                "subs r0, r0, #1",
                "bne 1b",
                // Lanes pairwise: q4..q7 -> [Σ4, Σ5] in d8, [Σ6, Σ7] in d9.
                "vpadd.f32 d8, d8, d9",
                "vpadd.f32 d10, d10, d11",
                "vpadd.f32 d12, d12, d13",
                "vpadd.f32 d14, d14, d15",
                "vpadd.f32 d8, d8, d10",
                "vpadd.f32 d9, d12, d14",
                "vst1.32 {{d8-d9}}, [r3]",
                // r0 = depth steps of four, r1 = x, r2 = column j0, r3 = t.
                inout("r0") k4 / 4 => _,
                inout("r1") x.as_ptr() => _,
                inout("r2") b.as_ptr().add(j0 * cs) => _,
                in("r3") t.as_mut_ptr(),
                cb = in(reg) col_bytes,
                c1 = out(reg) _,
                c2 = out(reg) _,
                c3 = out(reg) _,
                out("d0") _,
                out("d1") _,
                out("d2") _,
                out("d3") _,
                out("d4") _,
                out("d5") _,
                out("d6") _,
                out("d7") _,
                out("d8") _,
                out("d9") _,
                out("d10") _,
                out("d11") _,
                out("d12") _,
                out("d13") _,
                out("d14") _,
                out("d15") _,
            );
        }
        for (c, &v) in t.iter().enumerate() {
            finish(j0 + c, tail(j0 + c, v), y);
        }
    }
    for j in full..n {
        let col = &b[j * cs..j * cs + k];
        let mut acc = 0f32;
        for p in 0..k {
            acc += x[p] * col[p];
        }
        finish(j, acc, y);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;
    use std::vec::Vec;

    /// The transposed-B GEMV against an f64 reference on odd shapes (depths 1, 3, 4, 17, 129,
    /// columns 1, 3, 4, 5, 17, 129), padded column strides, with and without beta and bias.
    #[test]
    fn gemv_cols_matches_the_reference() {
        if !crate::linalg::cpu::arm32_neon_vfpv4() {
            return;
        }
        let mut rng = Rng(78);
        for &k in &[1usize, 3, 4, 17, 129] {
            for &n in &[1usize, 3, 4, 5, 17, 129] {
                for &(pad, beta, with_bias) in &[(0usize, 0.0f32, false), (3, 0.5, true)] {
                    let cs = k + pad;
                    let x: Vec<f32> = (0..k).map(|_| rng.unit() - 0.5).collect();
                    let b: Vec<f32> = (0..n * cs).map(|_| rng.unit() - 0.5).collect();
                    let bias: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
                    let y0: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
                    let mut y = y0.clone();
                    let bias_arg = with_bias.then_some(&bias[..]);
                    assert!(sgemv_cols(k, n, &x, &b, cs, &mut y, 1.5, beta, bias_arg));
                    for j in 0..n {
                        let mut r: f64 = (0..k).map(|p| x[p] as f64 * b[j * cs + p] as f64).sum();
                        r *= 1.5;
                        if beta != 0.0 {
                            r += beta as f64 * y0[j] as f64;
                        }
                        if with_bias {
                            r += bias[j] as f64;
                        }
                        let tol = 1e-5 * (k as f64).sqrt() * (1.0 + r.abs());
                        assert!(
                            (y[j] as f64 - r).abs() <= tol,
                            "k {k} n {n} pad {pad} col {j}: {} vs {r}",
                            y[j]
                        );
                    }
                }
            }
        }
    }

    /// The GEMV against an f64 reference on odd shapes (1, 3, 17, 129 and block edges),
    /// padded row strides, with and without beta and bias.
    #[test]
    fn gemv_rows_matches_the_reference() {
        if !crate::linalg::cpu::arm32_neon_vfpv4() {
            return;
        }
        let mut rng = Rng(77);
        for &k in &[1usize, 3, 17, 129] {
            for &n in &[1usize, 3, 15, 16, 17, 33, 129] {
                for &(pad, beta, with_bias) in &[(0usize, 0.0f32, false), (5, 0.5, true)] {
                    let rs = n + pad;
                    let x: Vec<f32> = (0..k).map(|_| rng.unit() - 0.5).collect();
                    let b: Vec<f32> = (0..k * rs).map(|_| rng.unit() - 0.5).collect();
                    let bias: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
                    let y0: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
                    let mut y = y0.clone();
                    let bias_arg = with_bias.then_some(&bias[..]);
                    assert!(sgemv_rows(k, n, &x, &b, rs, &mut y, 1.5, beta, bias_arg));
                    for j in 0..n {
                        let mut r: f64 = (0..k).map(|p| x[p] as f64 * b[p * rs + j] as f64).sum();
                        r *= 1.5;
                        if beta != 0.0 {
                            r += beta as f64 * y0[j] as f64;
                        }
                        if with_bias {
                            r += bias[j] as f64;
                        }
                        let tol = 1e-5 * (k as f64).sqrt() * (1.0 + r.abs());
                        assert!(
                            (y[j] as f64 - r).abs() <= tol,
                            "k {k} n {n} pad {pad} col {j}: {} vs {r}",
                            y[j]
                        );
                    }
                }
            }
        }
        // Too-short slices are refused, nothing written.
        let mut y = [7.0f32; 4];
        assert!(!sgemv_cols(
            2, 4, &[1.0; 2], &[1.0; 7], 2, &mut y, 1.0, 0.0, None
        ));
        assert!(!sgemv_cols(
            3, 4, &[1.0; 3], &[1.0; 12], 2, &mut y, 1.0, 0.0, None
        ));
        assert!(!sgemv_rows(
            2, 4, &[1.0; 2], &[1.0; 7], 4, &mut y, 1.0, 0.0, None
        ));
        assert_eq!(y, [7.0; 4]);
    }
}
