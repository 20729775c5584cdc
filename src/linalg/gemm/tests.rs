//! Tests of the GEMM driver against a scalar reference: every micro-kernel of this CPU, odd
//! shapes, strided and transposed operands, alpha/beta/bias, blocking edges, pre-packed B.

use super::batch::*;
use super::contract::*;
use super::driver::*;
use super::matref::MatRef;
use super::pack_rhs_nr_whole_k::{pack_b_ahead, PackedB};
use super::portable::PORTABLE;
use super::select::*;
use super::split::SplitHint;
use crate::error::KernelError;
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

fn kernels() -> Vec<&'static MicroKernel> {
    let mut v = vec![];
    if crate::testing::isa_tested("generic") {
        v.push(&PORTABLE);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx2_fma() {
        v.push(k);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = crate::linalg::gemm::select::avx512() {
        v.push(k);
    }
    #[cfg(target_arch = "aarch64")]
    for isa in crate::linalg::gemm::select::Isa::ALL {
        if let Some(k) = crate::linalg::gemm::select::kernel_for(isa) {
            if crate::testing::isa_tested(isa.name()) {
                v.push(k);
            }
        }
    }
    #[cfg(target_arch = "arm")]
    {
        let k = arm32_neon_vfpv4();
        // qemu-arm emulates a Cortex-A15 class CPU: Neon and VFPv4 are there.
        assert!(k.is_some(), "no Neon + VFPv4 kernel on this 32-bit Arm CPU");
        v.extend(k);
    }
    #[cfg(target_arch = "aarch64")]
    if crate::testing::isa_tested("neon") {
        v.push(&crate::linalg::gemm::arm::neon::NEON_8X8);
        v.push(&crate::linalg::gemm::arm::neon::NEON_4X16);
    }
    v
}

/// Builds an m×k (or k×n) operand, optionally stored transposed, optionally with padded
/// strides (neither stride 1) to exercise the general packing path.
fn operand(rng: &mut Rng, rows: usize, cols: usize, layout: u8) -> (Vec<f32>, usize, usize) {
    match layout {
        0 => (rng.vec(rows * cols), cols, 1),             // row-major
        1 => (rng.vec(rows * cols), 1, rows),             // column-major (transposed storage)
        _ => (rng.vec(rows * cols * 6 + 3), 3 * cols, 2), // general strides
    }
}

#[allow(clippy::too_many_arguments)]
fn check(
    uk: &MicroKernel,
    rng: &mut Rng,
    m: usize,
    n: usize,
    k: usize,
    la: u8,
    lb: u8,
    alpha: f32,
    beta: f32,
    with_bias: bool,
    ldc_pad: usize,
) {
    check_with(
        uk,
        rng,
        (m, n, k),
        la,
        lb,
        alpha,
        beta,
        with_bias,
        ldc_pad,
        0,
    )
}

/// [`check`] with `prepack`: 0 B as given, 1 B pre-packed for `uk`'s width
/// ([`sgemm_prepacked_with`]), 2 pre-packed for a width no kernel has
/// ([`sgemm_prepacked`]'s per-panel fallback), 3 pre-packed for `uk`'s width through
/// [`sgemm_prepacked`] (its kernel choice, or the GEMV for a few rows).
#[allow(clippy::too_many_arguments)]
fn check_with(
    uk: &MicroKernel,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    la: u8,
    lb: u8,
    alpha: f32,
    beta: f32,
    with_bias: bool,
    ldc_pad: usize,
    prepack: u8,
) {
    let (ad, ars, acs) = operand(rng, m, k, la);
    let (bd, brs, bcs) = operand(rng, k, n, lb);
    let a = MatRef::new(&ad, m, k, ars, acs).unwrap();
    let b = MatRef::new(&bd, k, n, brs, bcs).unwrap();
    let ldc = n + ldc_pad;
    let c_len = if m == 0 {
        0
    } else {
        (m - 1) * ldc + n + ldc_pad
    };
    let mut c = if beta == 0.0 {
        vec![f32::NAN; c_len]
    } else {
        rng.vec(c_len)
    };
    let c0 = c.clone();
    let bias = rng.vec(n);
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    let bias_opt = with_bias.then_some(&bias[..]);
    if prepack == 0 {
        sgemm_with(uk, a, b, &mut c, ldc, alpha, beta, bias_opt, &mut scratch).unwrap();
    } else {
        // 1 and 3: packed for this kernel's width; 2: for a width no kernel has (5).
        let nr = if prepack == 2 { 5 } else { uk.nr };
        let mut pd = vec![f32::NAN; PackedB::len_for(k, n, nr).unwrap()];
        pack_b_ahead(b, nr, &mut pd).unwrap();
        let pb = PackedB::new(&pd, k, n, nr).unwrap();
        if prepack == 1 {
            sgemm_prepacked_with(uk, a, pb, &mut c, ldc, alpha, beta, bias_opt, &mut scratch)
        } else {
            sgemm_prepacked(a, pb, &mut c, ldc, alpha, beta, bias_opt, &mut scratch)
        }
        .unwrap();
    }
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut sa) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = a.get(i, p).unwrap() as f64 * b.get(p, j).unwrap() as f64;
                s += t;
                sa += t.abs();
            }
            let mut want = alpha as f64 * s;
            let mut mag = (alpha as f64).abs() * sa;
            if beta != 0.0 {
                want += beta as f64 * c0[i * ldc + j] as f64;
                mag += (beta as f64 * c0[i * ldc + j] as f64).abs();
            }
            if with_bias {
                want += bias[j] as f64;
                mag += (bias[j] as f64).abs();
            }
            let got = c[i * ldc + j] as f64;
            let tol = (k as f64 + 3.0) * 1.2e-7 * mag + 1e-30;
            assert!(
                (got - want).abs() <= tol,
                "{} m={m} n={n} k={k} la={la} lb={lb} prepack={prepack} alpha={alpha} \
                 beta={beta} bias={with_bias} at ({i},{j}): got {got}, want {want}",
                uk.name
            );
        }
        // Padding between rows is untouched.
        for j in n..ldc {
            if i * ldc + j < c.len() {
                assert!(c[i * ldc + j].to_bits() == c0[i * ldc + j].to_bits());
            }
        }
    }
}

#[test]
fn odd_shapes_all_layouts() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let dims = [1usize, 3, 17, 129];
    for uk in kernels() {
        for &m in &dims {
            for &n in &dims {
                for &k in &dims {
                    let la = ((m + 2 * n + k) % 3) as u8;
                    let lb = ((m + n + 2 * k) % 3) as u8;
                    check(uk, &mut rng, m, n, k, la, lb, 1.0, 0.0, false, 0);
                }
            }
        }
    }
}

#[test]
fn transposes_alpha_beta_bias() {
    let mut rng = Rng(12345);
    for uk in kernels() {
        for la in 0..3 {
            for lb in 0..3 {
                for &(alpha, beta, bias) in &[
                    (1.0, 0.0, false),
                    (0.5, 0.0, true),
                    (2.0, 1.0, false),
                    (-1.0, 0.25, true),
                    (1.0, 1.0, true),
                ] {
                    check(uk, &mut rng, 19, 37, 23, la, lb, alpha, beta, bias, 0);
                    check(uk, &mut rng, 7, 16, 1, la, lb, alpha, beta, bias, 3);
                }
            }
        }
    }
}

#[test]
fn crosses_cache_blocks() {
    // m > MC, n > NC, k > KC (two depth blocks: beta applied once, bias added once).
    let mut rng = Rng(777);
    for uk in kernels() {
        check(
            uk,
            &mut rng,
            MC + 13,
            NC + 21,
            KC + 45,
            0,
            1,
            0.75,
            0.5,
            true,
            5,
        );
        check(
            uk,
            &mut rng,
            2 * MC + 1,
            2 * NC + 3,
            2 * KC + 1,
            1,
            0,
            1.0,
            0.0,
            true,
            0,
        );
        check(uk, &mut rng, 1, 3 * NC + 1, KC + 1, 0, 1, 1.0, 0.0, true, 0);
    }
}

#[test]
fn long_depth_blocks_and_in_place_b() {
    // k beyond every kernel's depth block (SME asks for up to 1024): several blocks
    // with in-place B (layout 0) and packed B (layout 1), C reloaded between blocks.
    let mut rng = Rng(99);
    for uk in kernels() {
        check(uk, &mut rng, 33, 40, 1500, 0, 0, 1.0, 0.0, false, 0);
        check(uk, &mut rng, 33, 40, 1500, 0, 1, 1.0, 1.0, true, 2);
        check(uk, &mut rng, 65, 97, 1029, 0, 0, 0.5, 0.25, true, 1);
    }
}

#[test]
fn edge_panels_through_kernel_packers() {
    // Row and column tails that are multiples of 4 (the shared packer interleaves them with
    // Neon, lanes beyond zeroed) and ones that are not (the rest lane by lane), or a kernel's
    // edge packer (SME2); B stored transposed.
    let mut rng = Rng(2024);
    for uk in kernels() {
        for &(m, n, k) in &[
            (20, 28, 70),
            (12, 44, 9),
            (4, 4, 5),
            (21, 30, 7),
            (36, 20, 3),
        ] {
            check(uk, &mut rng, m, n, k, 0, 1, 1.0, 0.0, true, 0);
            check(uk, &mut rng, m, n, k, 0, 0, 0.5, 1.0, false, 3);
        }
    }
}

#[test]
fn tall_products_in_whole_row_panels() {
    // More rows than one A block of the in-place loop nest (256): the block must hold whole
    // MR panels for every kernel (the AVX2 kernel's MR = 6 does not divide 256), with B in
    // place, transposed and pre-packed.
    let mut rng = Rng(0x7a11);
    for uk in kernels() {
        for &(m, n, k) in &[(300, 20, 27), (257, 16, 5), (600, 7, 33)] {
            check(uk, &mut rng, m, n, k, 0, 0, 1.0, 0.0, true, 0);
            check(uk, &mut rng, m, n, k, 0, 1, 1.0, 0.0, false, 0);
            check_with(uk, &mut rng, (m, n, k), 0, 0, 1.0, 0.0, true, 0, 1);
        }
    }
}

#[test]
fn prepacked_b() {
    // Pre-packed B on every kernel: odd edges, one and several depth blocks, tails in M
    // and N, alpha/beta/bias, padded C; then the per-panel fallback for a width no kernel
    // has, and a mismatched width refused.
    let mut rng = Rng(0x5eed);
    for uk in kernels() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 17, 129),
            (17, 129, 3),
            (129, 3, 17),
            (33, 40, 1500),
            (64, 96, 64),
        ] {
            check_with(uk, &mut rng, (m, n, k), 0, 0, 1.0, 0.0, true, 0, 1);
            check_with(uk, &mut rng, (m, n, k), 1, 1, 0.5, 0.25, false, 3, 1);
        }
    }
    for &(m, n, k) in &[(1, 1, 1), (17, 23, 9), (40, 12, 300)] {
        check_with(&PORTABLE, &mut rng, (m, n, k), 0, 0, 1.0, 1.0, true, 1, 2);
    }
    // Products of at most 4 rows through `sgemm_prepacked` (the GEMV panel by panel where
    // the CPU has one), at each kernel's own width and at a width no kernel has.
    for uk in kernels() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (1, 129, 17),
            (2, 40, 300),
            (3, 17, 129),
            (4, 64, 64),
        ] {
            check_with(uk, &mut rng, (m, n, k), 0, 0, 1.0, 0.0, true, 0, 3);
            check_with(uk, &mut rng, (m, n, k), 1, 0, -0.5, 0.75, false, 2, 3);
            check_with(uk, &mut rng, (m, n, k), 0, 1, 1.0, 0.0, true, 1, 2);
        }
    }
    let d = vec![0.0f32; PackedB::len_for(4, 4, 5).unwrap()];
    let pb = PackedB::new(&d, 4, 4, 5).unwrap();
    let a = [0.0f32; 8];
    let mut c = [0.0f32; 8];
    let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
    let am = MatRef::row_major(&a, 2, 4).unwrap();
    assert!(matches!(
        sgemm_prepacked_with(&PORTABLE, am, pb, &mut c, 4, 1.0, 0.0, None, &mut s),
        Err(KernelError::Unsupported { .. })
    ));
    assert!(PackedB::new(&d[1..], 4, 4, 5).is_err());
    assert!(PackedB::new(&d, 4, 4, 0).is_err());
}

#[test]
fn plans_fit_the_scratch() {
    for uk in kernels() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (128, 768, 768),
            (128, 50257, 768),
            (7, 3, 100_000),
        ] {
            for direct in [true, false] {
                let p = plan(uk, m, n, k, direct);
                assert!(p.kc >= 1 && p.kc <= k && p.mc >= uk.mr && p.mc.is_multiple_of(uk.mr));
                assert!(ALIGN_F32 + p.a_len + p.b_len <= GEMM_SCRATCH_F32, "{p:?}");
            }
            assert!(scratch_len_for(uk, m, n, k) <= GEMM_SCRATCH_F32);
        }
    }
}

#[test]
fn auto_selected_kernel() {
    let mut rng = Rng(4242);
    check(
        micro_kernel(),
        &mut rng,
        129,
        17,
        129,
        0,
        1,
        1.0,
        0.0,
        true,
        0,
    );
    #[cfg(target_arch = "x86_64")]
    if crate::linalg::cpu::x86_avx512f() && std::env::var_os("PTERA_NO_AVX512").is_none() {
        assert_eq!(micro_kernel().name(), "avx512-12x32");
    } else if crate::linalg::cpu::x86_avx2_fma() {
        assert_eq!(micro_kernel().name(), "avx2-fma");
    }
}

#[test]
fn k_zero_and_empty() {
    let e: [f32; 0] = [];
    let a = MatRef::row_major(&e, 2, 0).unwrap();
    let b = MatRef::row_major(&e, 0, 3).unwrap();
    let mut c = [f32::NAN; 6];
    sgemm(a, b, &mut c, 3, 1.0, 0.0, Some(&[1.0, 2.0, 3.0]), &mut []).unwrap();
    assert_eq!(c, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let mut c = [1.0f32; 6];
    sgemm(a, b, &mut c, 3, 1.0, 2.0, None, &mut []).unwrap();
    assert_eq!(c, [2.0; 6]);
    // m = 0 / n = 0: nothing to do, C untouched.
    let a0 = MatRef::row_major(&e, 0, 4).unwrap();
    let b4 = [0.0f32; 8];
    let b = MatRef::row_major(&b4, 4, 2).unwrap();
    sgemm(a0, b, &mut [], 2, 1.0, 0.0, None, &mut []).unwrap();
}

#[test]
fn errors() {
    let d = [0.0f32; 12];
    assert!(MatRef::new(&d, 3, 4, 4, 1).is_ok());
    assert!(MatRef::new(&d, 3, 5, 4, 1).is_err());
    assert!(MatRef::new(&d, 2, 2, usize::MAX, 1).is_err());
    let a = MatRef::row_major(&d, 3, 4).unwrap();
    let b = MatRef::row_major(&d, 4, 3).unwrap();
    let mut c = [0.0f32; 9];
    let mut small = [0.0f32; 8];
    assert!(matches!(
        sgemm(a, b, &mut c, 3, 1.0, 0.0, None, &mut small),
        Err(KernelError::Scratch { .. })
    ));
    let mut s = vec![0.0f32; sgemm_scratch_len(3, 3, 4)];
    assert!(s.len() <= GEMM_SCRATCH_F32);
    sgemm(a, b, &mut c, 3, 1.0, 0.0, None, &mut s).unwrap();
    // inner dimension mismatch, short C, ldc < n, short bias
    assert!(sgemm(a, a, &mut c, 3, 1.0, 0.0, None, &mut s).is_err());
    assert!(sgemm(a, b, &mut c[..8], 3, 1.0, 0.0, None, &mut s).is_err());
    assert!(sgemm(a, b, &mut c, 2, 1.0, 0.0, None, &mut s).is_err());
    assert!(sgemm(a, b, &mut c, 3, 1.0, 0.0, Some(&[1.0, 2.0]), &mut s).is_err());
}

#[test]
fn beta_zero_overwrites_nan_and_transpose_view() {
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
    let am = MatRef::row_major(&a, 2, 3).unwrap();
    // A · Aᵀ through a transposed view of the same data.
    let mut c = [f32::NAN; 4];
    let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
    sgemm(am, am.t(), &mut c, 2, 1.0, 0.0, None, &mut s).unwrap();
    assert_eq!(c, [14.0, 32.0, 32.0, 77.0]);
}

/// The output clamp (`sgemm_clamped` and friends): every kernel of this CPU through the
/// driver, whole and edge tiles, several depth blocks, each epilogue form (bias folded into
/// the accumulators, alpha scaling, a C read), against the clamped scalar reference; NaN
/// becomes `lo`; rows outside C's `n` columns are untouched.
#[test]
fn output_clamp_every_kernel_and_path() {
    let mut rng = Rng(0x000C_1A39);
    let (lo, hi) = (-0.25f32, 0.4f32);
    let shapes = [
        (1, 1, 1),
        (3, 17, 5),
        (17, 3, 129),
        (9, 13, 1),
        (33, 40, 17),
        (8, 12, 300),
    ];
    let forms = [
        (1.0, 0.0, true),
        (1.0, 0.0, false),
        (0.5, 0.0, true),
        (1.0, 0.75, true),
    ];
    // path 0: a chosen kernel; 1: `sgemm_clamped` (GEMV for one row); 2: pre-packed B.
    for path in 0..3 {
        let uks = if path == 0 {
            kernels()
        } else {
            vec![micro_kernel()]
        };
        for uk in uks {
            for &(m, n, k) in &shapes {
                for &(alpha, beta, with_bias) in &forms {
                    let mut ad = rng.vec(m * k);
                    if m * k > 4 {
                        ad[m * k / 2] = f32::NAN;
                    }
                    let bd = rng.vec(k * n);
                    let a = MatRef::row_major(&ad, m, k).unwrap();
                    let b = MatRef::row_major(&bd, k, n).unwrap();
                    let ldc = n + 1;
                    let c0 = rng.vec(m * ldc);
                    let mut c = c0.clone();
                    let bias = rng.vec(n);
                    let bias_opt = with_bias.then_some(&bias[..]);
                    let range = Some((lo, hi));
                    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
                    match path {
                        0 => with_kernel(
                            uk,
                            a,
                            b,
                            &mut c,
                            ldc,
                            alpha,
                            beta,
                            bias_opt,
                            range,
                            &mut scratch,
                            SplitHint::NONE,
                        ),
                        1 => sgemm_clamped(
                            a,
                            b,
                            &mut c,
                            ldc,
                            alpha,
                            beta,
                            bias_opt,
                            range,
                            &mut scratch,
                        ),
                        _ => {
                            let nr = uk.nr;
                            let mut pd = vec![f32::NAN; PackedB::len_for(k, n, nr).unwrap()];
                            pack_b_ahead(b, nr, &mut pd).unwrap();
                            let pb = PackedB::new(&pd, k, n, nr).unwrap();
                            sgemm_prepacked_clamped(
                                a,
                                pb,
                                &mut c,
                                ldc,
                                alpha,
                                beta,
                                bias_opt,
                                range,
                                &mut scratch,
                            )
                        }
                    }
                    .unwrap();
                    for i in 0..m {
                        let nan_row = (0..k).any(|p| ad[i * k + p].is_nan());
                        for j in 0..n {
                            let got = c[i * ldc + j];
                            let what = std::format!(
                                "{} path {path} m={m} n={n} k={k} alpha={alpha} beta={beta} \
                                 bias={with_bias} at ({i},{j})",
                                uk.name
                            );
                            if nan_row {
                                assert_eq!(got, lo, "{what}: NaN must clamp to lo");
                                continue;
                            }
                            let s: f64 = (0..k)
                                .map(|p| ad[i * k + p] as f64 * bd[p * n + j] as f64)
                                .sum();
                            let mag: f64 = (0..k)
                                .map(|p| (ad[i * k + p] as f64 * bd[p * n + j] as f64).abs())
                                .sum::<f64>()
                                + 2.0;
                            let mut want = alpha as f64 * s + beta as f64 * c0[i * ldc + j] as f64;
                            if with_bias {
                                want += bias[j] as f64;
                            }
                            let want = want.max(lo as f64).min(hi as f64);
                            let tol = (k as f64 + 3.0) * 1.2e-7 * mag;
                            assert!(
                                (got as f64 - want).abs() <= tol,
                                "{what}: got {got}, want {want}"
                            );
                            assert!(got >= lo && got <= hi, "{what}: {got} outside the range");
                        }
                        assert_eq!(c[i * ldc + n].to_bits(), c0[i * ldc + n].to_bits());
                    }
                }
            }
        }
    }
}

/// Every kernel's edge packer (SME2's: fewer runs than the panel's width) against its
/// definition: each run count below the width, depths with and without a 4-step remainder
/// and across depth chunks; lanes past the runs zero, nothing written past the panel. Then
/// the driver over edge panels that reach it (A rows and transposed-B columns short of a
/// tile) against the reference.
#[test]
fn edge_packers_fill_the_whole_panel() {
    use super::pack_panel::kernel_pack;
    let mut rng = Rng(0xed9e);
    let mut tried = 0;
    for uk in kernels().into_iter().filter(|uk| uk.pack_edge.is_some()) {
        for w in [uk.mr, uk.nr] {
            for kc in [1usize, 3, 4, 5, 16, 17, 37, 70] {
                let ld = kc + 3;
                let src: Vec<f32> = (0..w * ld).map(|_| rng.next()).collect();
                for runs in 1..w {
                    let mut panel = vec![f32::NAN; kc * w + 8];
                    assert!(
                        kernel_pack(uk, &src, 0, ld, runs, w, kc, &mut panel),
                        "{} declined {runs} runs",
                        uk.name
                    );
                    for p in 0..kc {
                        for i in 0..w {
                            let want = if i < runs { src[i * ld + p] } else { 0.0 };
                            let got = panel[p * w + i];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{} w {w} kc {kc} runs {runs}: step {p} lane {i}",
                                uk.name
                            );
                        }
                    }
                    assert!(
                        panel[kc * w..].iter().all(|v| v.is_nan()),
                        "{} past the panel",
                        uk.name
                    );
                    tried += 1;
                }
            }
            for &(m, n, k) in &[(w / 2, 2 * w + 3, 37), (w - 1, w + 1, 70), (3, 5, 17)] {
                check(uk, &mut rng, m, n, k, 0, 1, 1.0, 0.0, true, 0);
                check(uk, &mut rng, m, n, k, 0, 1, 0.5, 1.0, false, 3);
            }
        }
    }
    std::println!("edge packers: {tried} panels");
}

/// `pack_a_taps` (the convolutions' patch packer) against its definition: every kernel,
/// every lane offset and run count that fits a panel, depths with and without a 4-step
/// remainder, one and several taps. The runs the kernel's packer declines (fewer than four,
/// or from a lane it does not start at) take the pairwise path and the plain copy.
#[test]
fn patch_runs_pack_as_defined_at_every_lane() {
    use super::pack_lhs_mr_whole_k::pack_a_taps;
    let mut rng = Rng(77);
    for uk in kernels() {
        let mr = uk.mr;
        for (kc, taps) in [(1usize, 1usize), (3, 2), (4, 1), (9, 3), (24, 2)] {
            let (ld, tap_stride) = (kc + 5, 3 * (kc + 5) * mr);
            let k = 2 + taps * kc;
            let src: Vec<f32> = (0..taps * tap_stride + mr * ld + kc)
                .map(|_| rng.next())
                .collect();
            for lane0 in 0..mr {
                for runs in 1..=mr - lane0 {
                    let mut panel = vec![f32::NAN; k * mr];
                    pack_a_taps(
                        uk, &src, 1, ld, runs, lane0, 2, kc, taps, tap_stride, &mut panel,
                    )
                    .unwrap();
                    for d in 0..k {
                        for lane in 0..mr {
                            let got = panel[d * mr + lane];
                            let (t, p) = ((d.wrapping_sub(2)) / kc, (d.wrapping_sub(2)) % kc);
                            if d >= 2 && lane >= lane0 && lane < lane0 + runs {
                                let i = lane - lane0;
                                let want = src[1 + t * tap_stride + i * ld + p];
                                assert_eq!(
                                    got, want,
                                    "{} kc {kc} taps {taps} lane0 {lane0} runs {runs} d {d}",
                                    uk.name
                                );
                            } else {
                                assert!(got.is_nan(), "{} wrote outside its lanes", uk.name);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `sgemm_batch` gives each product exactly the bits `sgemm` gives it alone: odd shapes,
/// B in place and transposed, M = 1 (the GEMV), K = 0; an operand of another shape and a
/// short C are errors.
#[test]
fn batched_products_match_one_call_each() {
    let mut rng = Rng(91);
    for &(m, n, k) in &[
        (1, 17, 9),
        (3, 5, 1),
        (17, 17, 16),
        (29, 16, 29),
        (37, 37, 16),
        (9, 129, 3),
        (4, 3, 0),
    ] {
        for transpose_b in [false, true] {
            let count = 3;
            let a: Vec<f32> = (0..count * m * k).map(|_| rng.next()).collect();
            let b: Vec<f32> = (0..count * k * n).map(|_| rng.next()).collect();
            let operands = |i: usize| -> Result<(MatRef<'_>, MatRef<'_>), KernelError> {
                let ai = MatRef::row_major(&a[i * m * k..][..m * k], m, k)?;
                let bs = &b[i * k * n..][..k * n];
                let bi = if transpose_b {
                    MatRef::row_major(bs, n, k)?.t()
                } else {
                    MatRef::row_major(bs, k, n)?
                };
                Ok((ai, bi))
            };
            let mut scratch = vec![0.0; sgemm_scratch_len(m, n, k)];
            let mut got = vec![f32::NAN; count * m * n];
            sgemm_batch((m, n, k), count, operands, &mut got, &mut scratch).unwrap();
            let mut want = vec![f32::NAN; count * m * n];
            for (i, w) in want.chunks_exact_mut((m * n).max(1)).enumerate() {
                let (ai, bi) = operands(i).unwrap();
                sgemm(ai, bi, w, n, 1.0, 0.0, None, &mut scratch).unwrap();
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{m}x{n}x{k} transpose_b {transpose_b}"
            );
            if m * n > 0 {
                let mut short = vec![0.0; count * m * n - 1];
                assert!(sgemm_batch((m, n, k), count, operands, &mut short, &mut scratch).is_err());
                let other = |_: usize| {
                    Ok((
                        MatRef::row_major(&a[..m * k], m, k)?,
                        MatRef::row_major(&b[..k * n], n, k)?,
                    ))
                };
                if n != k {
                    assert!(sgemm_batch((m, n, k), count, other, &mut got, &mut scratch).is_err());
                }
            }
        }
    }
}
