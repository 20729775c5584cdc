//! Tests of the Arm micro-kernels against a scalar (f64) reference, each ISA forced.
//! Run under qemu-user (`scripts/test-arm.sh` varies the vector lengths); ISAs the emulated
//! CPU lacks are skipped with a message.

#[cfg(target_arch = "aarch64")]
use super::{sme, sve};
use crate::linalg::cpu::{features, Features, IdRegs};
use crate::linalg::gemm::select::*;
use crate::linalg::gemm::{sgemm, sgemm_with, MatRef, MicroKernel, GEMM_SCRATCH_F32};
use crate::testing::Rng;
use std::vec;
#[cfg_attr(not(target_arch = "aarch64"), allow(unused_imports))]
use std::vec::Vec;

/// Serialises the tests that read or change the process-wide selection.
static SELECTION: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One product through `uk` (row-major or transposed operands) checked against f64.
#[allow(clippy::too_many_arguments)]
fn check(
    uk: &MicroKernel,
    rng: &mut Rng,
    m: usize,
    n: usize,
    k: usize,
    trans: (bool, bool),
    alpha: f32,
    beta: f32,
    bias: bool,
    ldc_pad: usize,
) {
    let ad = rng.vec(m * k);
    let bd = rng.vec(k * n);
    let a = if trans.0 {
        MatRef::row_major(&ad, k, m).unwrap().t()
    } else {
        MatRef::row_major(&ad, m, k).unwrap()
    };
    let b = if trans.1 {
        MatRef::row_major(&bd, n, k).unwrap().t()
    } else {
        MatRef::row_major(&bd, k, n).unwrap()
    };
    let ldc = n + ldc_pad;
    let c_len = m * ldc;
    let mut c = if beta == 0.0 {
        vec![f32::NAN; c_len]
    } else {
        rng.vec(c_len)
    };
    let c0 = c.clone();
    let bv = rng.vec(n);
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    sgemm_with(
        uk,
        a,
        b,
        &mut c,
        ldc,
        alpha,
        beta,
        bias.then_some(&bv[..]),
        &mut scratch,
    )
    .unwrap();
    for i in 0..m {
        for j in 0..ldc {
            let got = c[i * ldc + j];
            if j >= n {
                assert_eq!(got.to_bits(), c0[i * ldc + j].to_bits(), "padding touched");
                continue;
            }
            let (mut s, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = a.get(i, p).unwrap() as f64 * b.get(p, j).unwrap() as f64;
                s += t;
                mag += t.abs();
            }
            let mut want = alpha as f64 * s;
            mag *= (alpha as f64).abs();
            if beta != 0.0 {
                want += beta as f64 * c0[i * ldc + j] as f64;
                mag += (beta as f64 * c0[i * ldc + j] as f64).abs();
            }
            if bias {
                want += bv[j] as f64;
                mag += (bv[j] as f64).abs();
            }
            let tol = (k as f64 + 4.0) * 1.2e-7 * mag + 1e-30;
            assert!(
                (got as f64 - want).abs() <= tol,
                "{} m={m} n={n} k={k} trans={trans:?} alpha={alpha} beta={beta} bias={bias} \
                 at ({i},{j}): got {got}, want {want}",
                uk.name()
            );
        }
    }
}

fn each_isa(mut f: impl FnMut(Isa, &'static MicroKernel)) {
    for isa in Isa::ALL {
        match kernel_for(isa) {
            Some(uk) if crate::testing::isa_tested(isa.name()) => f(isa, uk),
            Some(_) => std::println!("ISA {}: not in PTERA_TEST_ISAS, skipped", isa.name()),
            None => std::println!("ISA {}: not supported by this CPU, skipped", isa.name()),
        }
    }
}

#[test]
fn parse_names() {
    for isa in Isa::ALL {
        assert_eq!(Isa::parse(isa.name()), Some(isa));
    }
    assert_eq!(Isa::parse("PORTABLE"), Some(Isa::Generic));
    assert_eq!(Isa::parse("avx"), None);
}

#[test]
fn decode_id_registers() {
    // Values read from qemu -cpu max (system mode): SVE, SVE2, SME1, SMFR0 with F32F32.
    let r = IdRegs {
        pfr0: 1 << 32,
        pfr1: 1 << 24,
        zfr0: 0x110110100210021,
        smfr0: 0x80f100fd00000000,
        // DP = 1 (bits 47:44), I8MM = 1 (bits 55:52).
        isar0: 1 << 44,
        isar1: 1 << 52,
    };
    let f = r.features();
    assert!(f.sve && f.sve2 && f.sme && f.sme_f32f32 && !f.sme2);
    assert!(f.dotprod && f.i8mm);
    // SMFR0 says SME2 but PFR1 says SME1 (QEMU 10.0 -cpu max quirk): no SME2.
    let r2 = IdRegs {
        smfr0: r.smfr0 | (1 << 56),
        ..r
    };
    assert!(!r2.features().sme2);
    let r3 = IdRegs {
        pfr1: 2 << 24,
        ..r2
    };
    assert!(r3.features().sme2);
    assert_eq!(IdRegs::default().features(), Features::default());
}

#[test]
fn report_and_env_selection() {
    let _g = SELECTION.lock().unwrap_or_else(|e| e.into_inner());
    let f = features();
    std::println!("arm features: {f:?}; best ISA: {}", best().name());
    #[cfg(target_arch = "aarch64")]
    {
        if f.sve {
            // SAFETY: SVE present.
            std::println!("SVE VL = {} bits", unsafe { sve::cntw() } * 32);
        }
        if f.sme {
            std::println!("SME SVL = {} bits", sme::svl_bytes() * 8);
        }
    }
    // A forced ISA (PTERA_ISA) that the CPU cannot run is an error, not a silent fallback.
    if let Ok(v) = std::env::var("PTERA_ISA") {
        let isa = Isa::parse(&v).expect("PTERA_ISA: unknown ISA name");
        assert!(supported(isa), "PTERA_ISA={v} but this CPU cannot run it");
        assert_eq!(selected(), isa);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(
            crate::linalg::gemm::micro_kernel().name(),
            kernel_for(isa).unwrap().name()
        );
    }
}

#[test]
fn edge_shapes_each_isa() {
    let dims = [1usize, 3, 17, 129];
    each_isa(|isa, uk| {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ isa as u64);
        for &m in &dims {
            for &n in &dims {
                for &k in &dims {
                    let t = ((m + n + k) % 2 == 0, (m + 2 * n + k) % 3 == 0);
                    check(uk, &mut rng, m, n, k, t, 1.0, 0.0, false, 0);
                }
            }
        }
        std::println!("{}: edge shapes ok ({} x {})", isa.name(), uk.mr(), uk.nr());
    });
}

#[test]
fn alpha_beta_bias_tails_each_isa() {
    each_isa(|isa, uk| {
        let mut rng = Rng(4242 + isa as u64);
        let (mr, nr) = (uk.mr(), uk.nr());
        for &(alpha, beta, bias) in &[
            (1.0, 0.0, false),
            (0.5, 0.0, true),
            (2.0, 1.0, false),
            (-1.0, 0.25, true),
            (1.0, 1.0, true),
            (1.0, 1.0, false),
        ] {
            // Exact tiles, M/N tails, K = 1, odd K, and a padded ldc.
            for &(m, n, k) in &[
                (mr, nr, 1),
                (mr, nr, 7),
                (2 * mr + 1, 2 * nr - 1, 9),
                (mr - 1, nr + 3, 33),
                (1, 3 * nr + 1, 64),
            ] {
                check(uk, &mut rng, m, n, k, (false, false), alpha, beta, bias, 3);
                check(uk, &mut rng, m, n, k, (true, true), alpha, beta, bias, 0);
            }
        }
    });
}

#[test]
fn random_shapes_each_isa() {
    each_isa(|isa, uk| {
        let mut rng = Rng(99 + isa as u64);
        let mut pick = Rng(7);
        for _ in 0..24 {
            let mut d = || (((pick.next() + 1.0) * 100.0) as usize).max(1);
            let (m, n, k) = (d(), d(), d());
            let beta = if pick.next() > 0.0 { 0.0 } else { 0.5 };
            check(
                uk,
                &mut rng,
                m,
                n,
                k,
                (false, false),
                1.0,
                beta,
                pick.next() > 0.0,
                0,
            );
        }
    });
}

#[test]
fn crosses_cache_blocks_each_isa() {
    use crate::linalg::gemm::{KC, MC, NC};
    each_isa(|isa, uk| {
        let mut rng = Rng(31337 + isa as u64);
        // Later depth blocks with alpha = 1, beta = 1 and no bias (the SME kernels' ZA-preload
        // epilogue), beta = 0 on the first block (their direct-store epilogue).
        check(
            uk,
            &mut rng,
            2 * MC + 3,
            NC - 5,
            2 * KC + 7,
            (true, false),
            1.0,
            0.0,
            false,
            0,
        );
        check(
            uk,
            &mut rng,
            MC + 13,
            NC + 21,
            KC + 45,
            (false, true),
            0.75,
            0.5,
            true,
            5,
        );
    });
}

#[test]
fn force_switches_sgemm() {
    let _g = SELECTION.lock().unwrap_or_else(|e| e.into_inner());
    let saved = selected();
    each_isa(|isa, uk| {
        force(isa).unwrap();
        // Off AArch64, gemm keeps its own (x86) selection; the forced value is still recorded.
        assert_eq!(selected(), isa);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(crate::linalg::gemm::micro_kernel().name(), uk.name());
        #[cfg(not(target_arch = "aarch64"))]
        let _ = uk;
        let a = [1.0f32, 2.0, 3.0, 4.0];
        let b = [5.0f32, 6.0, 7.0, 8.0];
        let mut c = [0.0f32; 4];
        let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
        let (a, b) = (
            MatRef::row_major(&a, 2, 2).unwrap(),
            MatRef::row_major(&b, 2, 2).unwrap(),
        );
        sgemm(a, b, &mut c, 2, 1.0, 0.0, None, &mut s).unwrap();
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
    });
    force(saved).unwrap();
}

#[test]
fn per_shape_kernel_choice() {
    let _g = SELECTION.lock().unwrap_or_else(|e| e.into_inner());
    let saved = selected();
    if force(Isa::Neon).is_err() {
        return; // not an AArch64 CPU
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::linalg::gemm::micro_kernel_for;
        // 12 ∤ 64, 256, 512 but 8 | them: 8 × 8 leaves no column tail. Neither divides 7,
        // 29, 37: 8 × 8 pads fewer columns (40 instead of 48 for 37) by more than its lower
        // FMA share.
        for n in [8, 64, 256, 512, 7, 29, 37] {
            assert_eq!(micro_kernel_for(16, n, 64).name(), "neon-8x8", "n = {n}");
        }
        // 12 | 768, 3072 (and 24); neither divides 17 or 50257, where 12 pads as few columns.
        for n in [12, 24, 768, 3072, 50257, 17] {
            assert_eq!(micro_kernel_for(16, n, 64).name(), "neon-8x12", "n = {n}");
        }
        // A 1–4-row remainder mod 8 with 16 | n: 4 × 16 (no padded half tile); 5–7 rows left
        // or 16 ∤ n: the 8-row tiles.
        for (m, n) in [(20, 80), (4, 64), (12, 768), (17, 320)] {
            assert_eq!(micro_kernel_for(m, n, 64).name(), "neon-4x16", "{m} x {n}");
        }
        for (m, n) in [(22, 80), (16, 80), (20, 72), (20, 50257)] {
            assert_ne!(micro_kernel_for(m, n, 64).name(), "neon-4x16", "{m} x {n}");
        }
        // sgemm with the chosen kernel and its scratch length agrees with the reference.
        let (m, n, k) = (20, 64, 33);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut c = vec![f32::NAN; m * n];
        let mut s = vec![0.0f32; crate::linalg::gemm::sgemm_scratch_len(m, n, k)];
        sgemm(
            MatRef::row_major(&a, m, k).unwrap(),
            MatRef::row_major(&b, k, n).unwrap(),
            &mut c,
            n,
            1.0,
            0.0,
            None,
            &mut s,
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert_eq!(c[i * n + j], want, "({i}, {j})");
            }
        }
    }
    force(saved).unwrap();
}

#[test]
fn gemv_every_isa() {
    // M = 1 with each ISA selected: SME2 takes blocks of 16·SVL/32 columns of a row-major B
    // (the last one narrower, under predicates), so n spans several blocks plus a tail at
    // every SVL, and k has a remainder mod 4.
    let _g = SELECTION.lock().unwrap_or_else(|e| e.into_inner());
    let saved = selected();
    let mut rng = Rng(31337);
    each_isa(|isa, uk| {
        force(isa).unwrap();
        for &(n, k) in &[
            (600, 67),
            (1100, 1),
            (257, 300),
            (1024, 4),
            (64, 5),
            (3, 17),
            (129, 3),
            (17, 129),
        ] {
            for trans_b in [false, true] {
                check(uk, &mut rng, 1, n, k, (false, trans_b), 1.0, 0.0, false, 0);
                check(uk, &mut rng, 1, n, k, (false, trans_b), 0.5, 0.75, true, 0);
            }
        }
    });
    force(saved).unwrap();
}

/// The SME2 GEMV over a row-major B: every width (blocks of 16·SVL/32 columns and a narrower
/// last one under predicates) against an f64 reference; B ends exactly at its last column
/// and y is followed by guard values, which stay untouched; any split into two column ranges
/// (4-aligned or not) gives the same bits as one call, so a split across cores cannot change
/// an output.
#[cfg(target_arch = "aarch64")]
#[test]
fn sme2_gemv_every_width_and_any_column_split() {
    if !crate::linalg::cpu::has_sme2() {
        std::println!("SME2: not supported by this CPU, skipped");
        return;
    }
    let mut rng = Rng(0x6e_3a11);
    for &(n, k) in &[
        (1usize, 1usize),
        (3, 17),
        (17, 4),
        (63, 5),
        (65, 129),
        (129, 3),
        (255, 2),
        (257, 33),
        (700, 96),
    ] {
        for &(alpha, beta, with_bias) in &[(1.0f32, 0.0f32, false), (0.5, 0.75, true)] {
            let brs = n + 3;
            let x = rng.vec(k);
            // Row p's columns at p·brs..p·brs + n; the slice ends at the last column read.
            let b = rng.vec((k - 1) * brs + n);
            let bias = rng.vec(n);
            let y0 = rng.vec(n);
            let guard = 8;
            let run = |lo: usize, hi: usize, y: &mut Vec<f32>| {
                let bias_q = with_bias.then(|| &bias[lo..hi]);
                assert!(super::gemv::sgemv(
                    k,
                    hi - lo,
                    &x,
                    &b[lo..],
                    brs,
                    1,
                    &mut y[lo..hi + guard],
                    alpha,
                    beta,
                    bias_q,
                    true,
                ));
            };
            let fresh = || {
                let mut y = y0.clone();
                y.extend(std::iter::repeat_n(f32::NAN, guard));
                y
            };
            let mut whole = fresh();
            run(0, n, &mut whole);
            assert!(whole[n..].iter().all(|v| v.is_nan()), "n={n}: wrote past n");
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| x[p] as f64 * b[p * brs + j] as f64).sum();
                let mut want = alpha as f64 * dot + beta as f64 * y0[j] as f64;
                if with_bias {
                    want += bias[j] as f64;
                }
                let got = whole[j] as f64;
                assert!(
                    (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                    "n={n} k={k} column {j}: {got} vs {want}"
                );
            }
            for cut in [1, 4, 5, 64, 65, 256, 300].into_iter().filter(|&c| c < n) {
                let mut two = fresh();
                // The second range first: the first must not touch it.
                run(cut, n, &mut two);
                run(0, cut, &mut two);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
                assert_eq!(
                    bits(&two[..n]),
                    bits(&whole[..n]),
                    "n={n} k={k} cut at {cut}"
                );
            }
        }
    }
}

/// The operands of a direct kernel call, for an f64 reference of its tile: A MR-interleaved
/// (`mr` floats a depth step), `k` rows of B `ldb` apart, the bias (if any) and whether the
/// call clamped into `[-0.5, 0.5]` (as [`epilogue_args`] sets it up).
#[cfg(target_arch = "aarch64")]
pub(super) struct TileRef<'t> {
    pub(super) a: &'t [f32],
    pub(super) b: &'t [f32],
    pub(super) mr: usize,
    pub(super) ldb: usize,
    pub(super) k: usize,
    pub(super) bias: Option<&'t [f32]>,
    pub(super) clamp: bool,
}

#[cfg(target_arch = "aarch64")]
impl TileRef<'_> {
    /// Asserts that element `(i, j)`, `was` before the call and `got` after, is within 1e-4
    /// (relative, plus 1e-4) of `alpha·Σ a(i,p)·b(p,j) (+ beta·was) (+ bias[j])`, clamped.
    pub(super) fn assert_near(
        &self,
        at: &str,
        (i, j): (usize, usize),
        (alpha, beta): (f32, f32),
        got: f32,
        was: f32,
    ) {
        let dot: f64 = (0..self.k)
            .map(|p| self.a[p * self.mr + i] as f64 * self.b[p * self.ldb + j] as f64)
            .sum();
        let mut want = alpha as f64 * dot;
        if beta != 0.0 {
            want += beta as f64 * was as f64;
        }
        if let Some(bv) = self.bias {
            want += bv[j] as f64;
        }
        if self.clamp {
            want = want.clamp(-0.5, 0.5);
        }
        assert!(
            (got as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "{at}: ({i}, {j}) {got} vs {want}"
        );
    }
}

#[cfg(target_arch = "aarch64")]
/// The clamp range (`[-0.5, 0.5]` or none) and bias pointer (or null) of a direct kernel call.
pub(super) fn epilogue_args(clamp: bool, with_bias: bool, bias: &[f32]) -> (f32, f32, *const f32) {
    let (lo, hi) = if clamp {
        (-0.5, 0.5)
    } else {
        (f32::NEG_INFINITY, f32::INFINITY)
    };
    let bias_ptr = if with_bias {
        bias.as_ptr()
    } else {
        core::ptr::null()
    };
    (lo, hi, bias_ptr)
}

/// Every Neon row kernel (`RowKernels`: r < MR rows of a tile) against an f64 reference,
/// straight through its function pointer: odd depths, a packed and a strided B, a strided C, each epilogue
/// (bias, clamp, alpha/beta, accumulate into C). The panel's rows r.. are NaN, so a kernel
/// that read a row it does not compute would show it; C rows r.. must stay untouched.
#[cfg(target_arch = "aarch64")]
#[test]
fn neon_row_kernels_match_the_reference() {
    use super::neon::{NEON_4X16, NEON_8X12, NEON_8X8};
    let mut rng = Rng(0x5eed_0a11);
    // (alpha, beta, bias, clamp)
    let epilogues = [
        (1.0f32, 0.0f32, true, false),
        (1.0, 0.0, false, true),
        (0.5, 0.75, true, true),
        (1.0, 1.0, false, false),
        (-2.0, 0.0, false, false),
    ];
    for uk in [&NEON_8X12, &NEON_8X8, &NEON_4X16] {
        let (mr, nr) = (uk.mr(), uk.nr());
        let rows = uk.rows.expect("Neon tiles have row kernels");
        for r in 1..mr {
            let f = rows
                .for_rows(r)
                .unwrap_or_else(|| panic!("{}: no kernel for {r} rows", uk.name()));
            // B packed (ldb = NR: the 8-column rows' paired loads) and strided.
            let shapes = [1usize, 2, 3, 4, 5, 6, 7, 8, 12, 17, 129]
                .into_iter()
                .flat_map(|k| [(k, nr), (k, nr + 3)]);
            for (k, ldb) in shapes {
                for &(alpha, beta, with_bias, clamp) in &epilogues {
                    let mut a = rng.vec(k * mr);
                    for p in 0..k {
                        a[p * mr + r..(p + 1) * mr].fill(f32::NAN);
                    }
                    let b = rng.vec(k * ldb);
                    let rsc = nr + 5;
                    let mut c = rng.vec((r + 1) * rsc);
                    let c0 = c.clone();
                    let bias = rng.vec(nr);
                    let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                    // SAFETY: the RowKernels contract: k groups of mr floats, k rows of nr
                    // floats ldb apart, r rows of nr floats rsc apart, nr bias floats.
                    unsafe {
                        f(
                            k,
                            a.as_ptr(),
                            b.as_ptr(),
                            ldb,
                            c.as_mut_ptr(),
                            rsc as isize,
                            alpha,
                            beta,
                            bias_ptr,
                            lo,
                            hi,
                        )
                    };
                    for i in 0..r {
                        for j in 0..nr {
                            let dot: f64 = (0..k)
                                .map(|p| a[p * mr + i] as f64 * b[p * ldb + j] as f64)
                                .sum();
                            let mut want = alpha as f64 * dot;
                            if beta != 0.0 {
                                want += beta as f64 * c0[i * rsc + j] as f64;
                            }
                            if with_bias {
                                want += bias[j] as f64;
                            }
                            let want = want.clamp(lo as f64, hi as f64);
                            let got = c[i * rsc + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-4 * (1.0 + want.abs()) * (k as f64).sqrt(),
                                "{} rows {r}, k {k}, ldb {ldb}, epilogue {:?}: C({i},{j}) = {got}, want {want}",
                                uk.name(),
                                (alpha, beta, with_bias, clamp)
                            );
                        }
                        // Padding between rows of C is untouched.
                        assert_eq!(
                            &c[i * rsc + nr..(i + 1) * rsc],
                            &c0[i * rsc + nr..(i + 1) * rsc]
                        );
                    }
                    assert_eq!(
                        &c[r * rsc..],
                        &c0[r * rsc..],
                        "{} rows {r}: row {r} written",
                        uk.name()
                    );
                }
            }
        }
        assert!(rows.for_rows(mr).is_none() && rows.for_rows(0).is_none());
    }
}

/// Every Neon N-edge entry (`EdgeFn`: the tile stored in its first nc columns) against an
/// f64 reference, for every nc from 1 to NR, odd depths, a packed and a strided B, a strided C, with and without
/// bias and clamp: columns nc.. of every row and the rows' padding must stay untouched, and
/// the stored columns equal the whole tile kernel's bits.
#[cfg(target_arch = "aarch64")]
#[test]
fn neon_edge_entries_match_the_reference_and_the_tile() {
    use super::neon::{NEON_4X16, NEON_8X12, NEON_8X8};
    let mut rng = Rng(0x5eed_ed9e);
    for uk in [&NEON_8X12, &NEON_8X8, &NEON_4X16] {
        let (mr, nr) = (uk.mr(), uk.nr());
        let edge = uk.edge.expect("Neon tiles have an edge entry");
        for nc in 1..=nr {
            // B packed (ldb = NR: the 8 × 8 paired loop) and strided.
            let shapes = [1usize, 3, 4, 8, 17, 129]
                .into_iter()
                .flat_map(|k| [(k, nr), (k, nr + 3)]);
            for (k, ldb) in shapes {
                for (with_bias, clamp) in
                    [(true, false), (false, true), (true, true), (false, false)]
                {
                    let a = rng.vec(k * mr);
                    let b = rng.vec(k * ldb);
                    let rsc = nr + 5;
                    let mut c = rng.vec(mr * rsc);
                    let c0 = c.clone();
                    let bias = rng.vec(nr);
                    let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                    // SAFETY: the EdgeFn contract: k groups of mr floats, k rows of nr floats
                    // ldb apart, mr rows of nc ≤ nr floats rsc apart, nr bias floats.
                    unsafe {
                        edge(
                            k,
                            a.as_ptr(),
                            b.as_ptr(),
                            ldb,
                            c.as_mut_ptr(),
                            rsc as isize,
                            nc,
                            bias_ptr,
                            lo,
                            hi,
                        )
                    };
                    let mut whole = vec![f32::NAN; mr * nr];
                    // SAFETY: the MicroKernel contract for the same operands, C an mr × nr
                    // tile with row stride nr.
                    unsafe {
                        (uk.kernel)(
                            k,
                            a.as_ptr(),
                            b.as_ptr(),
                            ldb,
                            whole.as_mut_ptr(),
                            nr as isize,
                            1.0,
                            0.0,
                            bias_ptr,
                            lo,
                            hi,
                        )
                    };
                    for i in 0..mr {
                        for j in 0..nc {
                            let dot: f64 = (0..k)
                                .map(|p| a[p * mr + i] as f64 * b[p * ldb + j] as f64)
                                .sum();
                            let want = (dot + if with_bias { bias[j] as f64 } else { 0.0 })
                                .clamp(lo as f64, hi as f64);
                            let got = c[i * rsc + j];
                            assert!(
                                (got as f64 - want).abs()
                                    <= 1e-4 * (1.0 + want.abs()) * (k as f64).sqrt(),
                                "{} nc {nc}, k {k}, ldb {ldb}: C({i},{j}) = {got}, want {want}",
                                uk.name()
                            );
                            assert_eq!(
                                got.to_bits(),
                                whole[i * nr + j].to_bits(),
                                "{} nc {nc}, k {k}: C({i},{j}) differs from the tile kernel",
                                uk.name()
                            );
                        }
                        assert_eq!(
                            &c[i * rsc + nc..(i + 1) * rsc],
                            &c0[i * rsc + nc..(i + 1) * rsc],
                            "{} nc {nc}, k {k}: row {i} written past column {nc}",
                            uk.name()
                        );
                    }
                }
            }
        }
    }
}

/// The SVE2 kernel's wide entry ([`crate::linalg::gemm::WideA`]): `expand_wide` run in
/// place as the driver places it (plain panels at the end of the area), then
/// `kernel_vla_wide` on each panel, must store bit for bit what `kernel_vla` stores from the
/// plain panel (same FMLAs in the same order), for B in place (`ldb > NR`: the 8-step loop)
/// and packed (`ldb = NR`: the 16-step loop), odd and even depths, every epilogue.
#[cfg(target_arch = "aarch64")]
#[test]
fn sve2_wide_panels_match_the_plain_kernel() {
    if !features().sve2 {
        std::println!("sve2: not on this CPU, skipped");
        return;
    }
    let Some(uk) = sve::kernel() else {
        std::println!("sve2: no kernel for this vector length, skipped");
        return;
    };
    let w = uk.wide.expect("the SVE2 kernel has a wide entry");
    // SAFETY: SVE2 present (checked above).
    let lanes = unsafe { sve::cntw() };
    assert_eq!(w.rep, lanes / 4);
    let (mr, nr) = (uk.mr(), uk.nr());
    let mut rng = Rng(0x3d1d_e5ee);
    for k in [1usize, 2, 3, 7, 15, 16, 17, 33, 129] {
        for ldb in [nr, nr + 5] {
            for &(alpha, beta, with_bias, clamp) in &[
                (1.0f32, 0.0f32, false, false),
                (0.5, 0.75, true, true),
                (1.0, 1.0, true, false),
            ] {
                let panels = 3;
                let plain = rng.vec(panels * k * mr);
                let len = w.panel_len(k);
                let mut area = vec![f32::NAN; panels * len];
                let at = area.len() - plain.len();
                area[at..].copy_from_slice(&plain);
                let p = area.as_mut_ptr();
                // SAFETY: the ExpandFn contract: `panels` plain panels of k steps at the end
                // of an area of panels·panel_len(k) floats.
                unsafe { (w.expand)(p.add(at), panels, k, p) };
                let b = rng.vec(k * ldb);
                let bias = rng.vec(nr);
                let rsc = nr + 2;
                let c0 = rng.vec(mr * rsc);
                let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                for q in 0..panels {
                    let (mut want, mut got) = (c0.clone(), c0.clone());
                    // SAFETY: the MicroKernel contract for 8 × NR: a plain panel of k steps
                    // (resp. a wide one of panel_len(k) floats), k rows of NR floats ldb
                    // apart, an 8 × NR tile rsc apart, NR bias floats.
                    unsafe {
                        sve::kernel_vla(
                            k,
                            plain[q * k * mr..].as_ptr(),
                            b.as_ptr(),
                            ldb,
                            want.as_mut_ptr(),
                            rsc as isize,
                            alpha,
                            beta,
                            bias_ptr,
                            lo,
                            hi,
                        );
                        sve::kernel_vla_wide(
                            k,
                            area[q * len..].as_ptr(),
                            b.as_ptr(),
                            ldb,
                            got.as_mut_ptr(),
                            rsc as isize,
                            alpha,
                            beta,
                            bias_ptr,
                            lo,
                            hi,
                        );
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "k {k}, ldb {ldb}, panel {q}, epilogue {:?}",
                        (alpha, beta, with_bias, clamp)
                    );
                }
            }
        }
    }
}

/// Every kernel's run entry (`TileRunFn`: a row of whole tiles in one call) stores bit for
/// bit what one tile-kernel call per tile stores: B in place (`ldb > NR`, tiles NR columns
/// apart) and packed (`ldb = NR`, panels `k·NR` apart), 1 to 5 tiles, odd and even depths,
/// every epilogue (bias per tile, clamp, alpha/beta, accumulate into C).
#[cfg(target_arch = "aarch64")]
#[test]
fn run_entries_match_one_call_per_tile() {
    use super::neon::{NEON_4X16, NEON_8X12, NEON_8X8};
    let mut rng = Rng(0x7a11_5eed);
    // The four plain ones (alpha = 1, beta = 0: bias or not, clamp or not) take the run
    // entry's specialised loops; the others its general one.
    let epilogues = [
        (1.0f32, 0.0f32, false, false),
        (1.0, 0.0, true, true),
        (1.0, 0.0, true, false),
        (1.0, 0.0, false, true),
        (0.5, 0.75, true, true),
        (1.0, 1.0, false, false),
    ];
    let mut checked = 0;
    for uk in [&NEON_8X12, &NEON_8X8, &NEON_4X16] {
        let run = uk.run.expect("the Neon kernels have a run entry");
        let (mr, nr) = (uk.mr(), uk.nr());
        for k in [1usize, 2, 3, 8, 17, 64] {
            for np in [1usize, 2, 5] {
                for packed in [false, true] {
                    let (ldb, stride) = if packed {
                        (nr, k * nr)
                    } else {
                        (np * nr + 3, nr)
                    };
                    let b = rng.vec(if packed { np * k * nr } else { k * ldb });
                    let a = rng.vec(k * mr);
                    let bias = rng.vec(np * nr);
                    let rsc = np * nr + 1;
                    let c0 = rng.vec(mr * rsc);
                    for &(alpha, beta, with_bias, clamp) in &epilogues {
                        let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                        let (mut want, mut got) = (c0.clone(), c0.clone());
                        // SAFETY: the MicroKernel contract for each tile q (B at q·stride:
                        // k rows of NR floats ldb apart inside `b`; C at q·NR, MR rows rsc
                        // apart inside `want`; NR bias floats at q·NR) and the TileRunFn
                        // contract for the same np tiles; Neon is in the baseline.
                        unsafe {
                            for q in 0..np {
                                (uk.kernel)(
                                    k,
                                    a.as_ptr(),
                                    b.as_ptr().add(q * stride),
                                    ldb,
                                    want.as_mut_ptr().add(q * nr),
                                    rsc as isize,
                                    alpha,
                                    beta,
                                    if with_bias {
                                        bias_ptr.add(q * nr)
                                    } else {
                                        bias_ptr
                                    },
                                    lo,
                                    hi,
                                );
                            }
                            run(
                                np,
                                stride,
                                k,
                                a.as_ptr(),
                                b.as_ptr(),
                                ldb,
                                got.as_mut_ptr(),
                                rsc as isize,
                                alpha,
                                beta,
                                bias_ptr,
                                lo,
                                hi,
                            );
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{}: k {k}, {np} tiles, packed {packed}, epilogue {:?}",
                            uk.name,
                            (alpha, beta, with_bias, clamp)
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 6 * 3 * 2 * 6);
}

/// The Neon panel packer (`pack_runs_x4`) against its definition, straight through the
/// function: 4 to 16 runs into widths 8, 12 and 16, every depth from 1 to 9 and 17 (the
/// four-step blocks, the overlapping last load for the 1–3 steps after them, and the scalar
/// path below 4 steps); lanes past the runs and floats past the panel stay untouched, and a
/// run count that is not a multiple of four is declined without a write.
#[cfg(target_arch = "aarch64")]
#[test]
fn neon_packer_interleaves_runs_at_every_depth() {
    use super::neon::pack_runs_x4;
    let mut rng = Rng(0x9ac4_0001);
    for w in [8usize, 12, 16] {
        for runs in (4..=w).step_by(4) {
            for kc in (1..=9).chain([17]) {
                let ld = kc + 3;
                let src = rng.vec(runs * ld);
                let len = (kc - 1) * w + runs;
                let mut dst = vec![f32::NAN; len + 5];
                // SAFETY: runs i < runs at src + i·ld hold kc floats; dst holds
                // (kc − 1)·w + runs writable floats (and five more, checked untouched).
                let took = unsafe { pack_runs_x4(src.as_ptr(), ld, runs, w, kc, dst.as_mut_ptr()) };
                assert!(took, "w {w}, {runs} runs declined");
                for p in 0..kc {
                    for l in 0..w {
                        let at = p * w + l;
                        if at >= len {
                            continue;
                        }
                        let got = dst[at];
                        if l < runs {
                            assert_eq!(
                                got,
                                src[l * ld + p],
                                "w {w}, {runs} runs, kc {kc}: ({p}, {l})"
                            );
                        } else {
                            assert!(
                                got.is_nan(),
                                "w {w}, {runs} runs, kc {kc}: lane {l} written"
                            );
                        }
                    }
                }
                assert!(
                    dst[len..].iter().all(|v| v.is_nan()),
                    "w {w} kc {kc}: past the panel"
                );
            }
        }
        let mut dst = vec![f32::NAN; 64];
        let src = rng.vec(64);
        // SAFETY: declined before any access (3 runs is not a multiple of four).
        let took = unsafe { pack_runs_x4(src.as_ptr(), 8, 3, w, 4, dst.as_mut_ptr()) };
        assert!(!took && dst.iter().all(|v| v.is_nan()));
    }
}

/// The Neon GEMV over packed panels against an f64 reference: every supported panel width,
/// odd depths and widths (partial last panel, partial last group of panels), each epilogue.
/// The padding columns of the last panel are NaN, and y past `n` must stay untouched.
#[cfg(target_arch = "aarch64")]
#[test]
fn gemv_over_packed_panels_matches_the_reference() {
    use super::gemv::panels;
    let mut rng = Rng(0x9a4e15);
    // Neon widths, and with SME2 its panels of 2·SVL/32 columns (blocks of 8, 4, 2 and 1
    // panels: counts 1 to 17).
    let mut widths = vec![(8usize, false), (12, false), (16, false)];
    if crate::linalg::cpu::has_sme2() {
        widths.push((2 * super::sme::svl_bytes() / 4, true));
    } else {
        std::println!("SME2: not supported by this CPU, its panels skipped");
    }
    for (nr, sme2) in widths {
        let mut ns = vec![1usize, 3, 8, 17, 49, 129, 250];
        if sme2 {
            ns.extend([
                2 * nr,
                3 * nr + 1,
                4 * nr,
                7 * nr - 5,
                10 * nr,
                14 * nr,
                16 * nr + 1,
            ]);
        }
        for &k in &[1usize, 3, 4, 17, 64, 129] {
            for &n in &ns {
                for (alpha, beta, with_bias) in [(1.0f32, 0.0f32, false), (0.5, 0.75, true)] {
                    let x = rng.f32s(k, -1.0, 1.0);
                    let bm = rng.f32s(k * n, -1.0, 1.0);
                    let count = n.div_ceil(nr);
                    let mut packed = vec![f32::NAN; count * k * nr];
                    for j in 0..n {
                        let (q, c) = (j / nr, j % nr);
                        for p in 0..k {
                            packed[q * k * nr + p * nr + c] = bm[p * n + j];
                        }
                    }
                    let bias = rng.f32s(n, -1.0, 1.0);
                    let y0 = rng.f32s(n + 3, -1.0, 1.0);
                    let mut y = y0.clone();
                    let bias_arg = with_bias.then_some(&bias[..]);
                    assert!(panels(
                        k, n, nr, &x, &packed, &mut y, alpha, beta, bias_arg, sme2
                    ));
                    for j in 0..n {
                        let dot: f64 = (0..k).map(|p| x[p] as f64 * bm[p * n + j] as f64).sum();
                        let mut want = alpha as f64 * dot + beta as f64 * y0[j] as f64;
                        if with_bias {
                            want += bias[j] as f64;
                        }
                        let tol = 1e-5
                            * (1.0
                                + (0..k)
                                    .map(|p| (x[p] * bm[p * n + j]).abs() as f64)
                                    .sum::<f64>());
                        assert!(
                            (y[j] as f64 - want).abs() <= tol,
                            "nr {nr} k {k} n {n} column {j}: {} vs {want}",
                            y[j]
                        );
                    }
                    assert_eq!(&y[n..], &y0[n..], "nr {nr} k {k} n {n}: wrote past n");
                    if !sme2 {
                        continue;
                    }
                    // Any split by whole panels (as across cores) gives the same bits.
                    for cut in 1..count {
                        let mut two = y0.clone();
                        let j0 = cut * nr;
                        let bias_hi = with_bias.then_some(&bias[j0..]);
                        let (lo, hi) = two.split_at_mut(j0);
                        assert!(panels(
                            k,
                            n - j0,
                            nr,
                            &x,
                            &packed[cut * k * nr..],
                            hi,
                            alpha,
                            beta,
                            bias_hi,
                            true
                        ));
                        assert!(panels(
                            k, j0, nr, &x, &packed, lo, alpha, beta, bias_arg, true
                        ));
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
                        assert_eq!(
                            bits(&two),
                            bits(&y),
                            "nr {nr} k {k} n {n} cut at panel {cut}"
                        );
                    }
                }
            }
        }
    }
    // Other widths are refused (and touch nothing).
    let mut y = [1.0f32; 4];
    for sme2 in [false, true] {
        assert!(!panels(
            4, 4, 4, &[0.0; 4], &[0.0; 16], &mut y, 1.0, 0.0, None, sme2
        ));
    }
    assert_eq!(y, [1.0; 4]);
}
