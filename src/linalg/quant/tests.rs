//! The quantizer against hand-computed rows, every kernel against the scalar reference on
//! random shapes with odd edges (1, 3, 17, 129 and group boundaries).

use super::gemm::{self, gemm_qd8_f32, QuantKernel};
use super::reference::gemm_qd8_f32_ref;
use super::*;
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

#[test]
fn quantizer_matches_hand_computed_rows() {
    // [-1, 3]: s = 255/4 = 63.75; zero point from the min end: -128 + 63.75 = -64.25 → -64.
    let x = [-1.0f32, 0.0, 3.0, 1.0, 0.5];
    let mut q = [0i8; 5];
    let p = quantize_row_qd8(&x, &mut q);
    assert_eq!(p.zero_point, -64);
    assert_eq!(p.scale, 1.0 / 63.75);
    // round(-63.75) = -64 → -128; 0 → -64; 191.25 → 191 clamped to 127 - (-64) = 191 → 127.
    assert_eq!(q, [-128, -64, 127, 0, -32]);
    // All positive: the range is widened to 0.
    let p = quantize_row_qd8(&[2.0, 4.0], &mut q[..2]);
    assert_eq!((p.zero_point, &q[..2]), (-128, &[0i8, 127][..]));
    // All zero: scale 1; (-128 + 0) + (127 + 0) < 0 takes the max end: zero point 127.
    let p = quantize_row_qd8(&[0.0; 3], &mut q[..3]);
    assert_eq!((p.scale, p.zero_point), (1.0, 127));
    assert_eq!(&q[..3], &[127; 3]);
    // Ties round to even: x·s = 0.5 → 0, 1.5 → 2.
    let (s, _) = qd8_params(-255.0 / 255.0, 1.0);
    let half = 0.5 / s;
    let p = quantize_row_qd8(&[-1.0, 1.0, half], &mut q[..3]);
    assert_eq!(q[2] as i32 - p.zero_point, 0);
}

#[test]
fn quantized_rows_dequantize_within_half_a_step() {
    let mut rng = Rng(7);
    for len in [1usize, 3, 17, 129] {
        let x = rng.f32s(len, -3.0, 5.0);
        let mut q = vec![0i8; len];
        let p = quantize_row_qd8(&x, &mut q);
        for (&v, &qv) in x.iter().zip(&q) {
            let back = (qv as i32 - p.zero_point) as f32 * p.scale;
            assert!(
                (back - v).abs() <= 0.5 * p.scale * 1.001 + 1e-6,
                "{v} -> {qv} -> {back}"
            );
        }
    }
}

fn random_case(rng: &mut Rng, m: usize, k: usize) -> (Vec<i8>, Vec<QParams>) {
    let mut a = vec![0i8; m * k];
    let mut ap = Vec::new();
    for i in 0..m {
        let x = rng.f32s(k, -2.0 + i as f32 * 0.1, 3.0);
        ap.push(quantize_row_qd8(&x, &mut a[i * k..(i + 1) * k]));
    }
    (a, ap)
}

/// The portable code, this CPU's kernel, and on AArch64 the base-Neon tiles (`NeonMull`)
/// wherever they are not already the CPU's.
fn kernels() -> Vec<QuantKernel> {
    let mut v = vec![QuantKernel::Portable];
    if QuantKernel::select() != QuantKernel::Portable {
        v.push(QuantKernel::select());
    }
    if cfg!(target_arch = "aarch64") && !v.contains(&QuantKernel::NeonMull) {
        v.push(QuantKernel::NeonMull);
    }
    v
}

/// Every kernel, with the column sums computed per call and precomputed by `column_sums`.
fn kernels_and_sums(w: &QWeights<'_>, n: usize, k: usize) -> Vec<(QuantKernel, Option<Vec<f32>>)> {
    let mut sums = vec![0f32; n];
    gemm::column_sums(w, n, k, &mut sums).unwrap();
    kernels()
        .into_iter()
        .flat_map(|kern| [(kern, None), (kern, Some(sums.clone()))])
        .collect()
}

#[test]
fn qc8w_products_match_the_reference_exactly() {
    let mut rng = Rng(11);
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 17, 5),
        (4, 16, 4),
        (17, 129, 3),
        (5, 64, 33),
        (129, 48, 17),
        (2, 300, 9),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let data: Vec<u8> = (0..n * k)
            .map(|_| (rng.below(255) as i32 - 127) as i8 as u8)
            .collect();
        let scales: Vec<u8> = rng
            .f32s(n, 0.001, 0.05)
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let bias = rng.vec(n);
        let w = QWeights::Qc8w {
            data: &data,
            scales: &scales,
        };
        let mut want = vec![0f32; m * n];
        gemm_qd8_f32_ref(
            &a,
            &ap,
            m,
            k,
            &w,
            n,
            Some(&bias),
            &mut want,
            Some((-0.5, 0.7)),
        );
        for (kern, sums) in kernels_and_sums(&w, n, k) {
            let mut got = vec![f32::NAN; m * n];
            gemm_qd8_f32(
                kern,
                &a,
                &ap,
                m,
                k,
                &w,
                n,
                Some(&bias),
                sums.as_deref(),
                &mut got,
                Some((-0.5, 0.7)),
            )
            .unwrap();
            assert_eq!(
                got,
                want,
                "{kern:?} sums {} m={m} k={k} n={n}",
                sums.is_some()
            );
        }
    }
}

fn four_bit(rng: &mut Rng, n: usize, k: usize) -> Vec<u8> {
    let rb = k.div_ceil(2);
    let mut d = vec![0u8; n * rb];
    for j in 0..n {
        for t in 0..k {
            let v = rng.below(16) as u8;
            d[j * rb + t / 2] |= if t % 2 == 0 { v } else { v << 4 };
        }
    }
    d
}

#[test]
fn qc4w_products_match_the_reference_exactly() {
    let mut rng = Rng(13);
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 17, 5),
        (4, 32, 4),
        (17, 129, 3),
        (5, 96, 33),
        (6, 64, 7),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let data = four_bit(&mut rng, n, k);
        let scales: Vec<u8> = rng
            .f32s(n, 0.01, 0.2)
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let w = QWeights::Qc4w {
            data: &data,
            scales: &scales,
        };
        let mut want = vec![0f32; m * n];
        gemm_qd8_f32_ref(&a, &ap, m, k, &w, n, None, &mut want, None);
        for (kern, sums) in kernels_and_sums(&w, n, k) {
            let mut got = vec![f32::NAN; m * n];
            gemm_qd8_f32(
                kern,
                &a,
                &ap,
                m,
                k,
                &w,
                n,
                None,
                sums.as_deref(),
                &mut got,
                None,
            )
            .unwrap();
            assert_eq!(
                got,
                want,
                "{kern:?} sums {} m={m} k={k} n={n}",
                sums.is_some()
            );
        }
    }
}

#[test]
fn qb4w_products_match_the_reference_within_rounding() {
    let mut rng = Rng(17);
    for &(m, k, n, g) in &[
        (1, 32, 1, 32),
        (3, 64, 5, 32),
        (17, 128, 3, 64),
        (5, 256, 33, 128),
        (4, 96, 4, 32),
        (2, 34, 3, 2),
        (129, 64, 6, 16),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let data = four_bit(&mut rng, n, k);
        let scales: Vec<u8> = rng
            .f32s(n * k / g, 0.01, 0.2)
            .iter()
            .flat_map(|s| ((s.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let w = QWeights::Qb4w {
            data: &data,
            scales: &scales,
            group: g,
        };
        let bias = rng.vec(n);
        let mut want = vec![0f32; m * n];
        gemm_qd8_f32_ref(&a, &ap, m, k, &w, n, Some(&bias), &mut want, None);
        for (kern, sums) in kernels_and_sums(&w, n, k) {
            let mut got = vec![f32::NAN; m * n];
            gemm_qd8_f32(
                kern,
                &a,
                &ap,
                m,
                k,
                &w,
                n,
                Some(&bias),
                sums.as_deref(),
                &mut got,
                None,
            )
            .unwrap();
            for (i, (&x, &y)) in got.iter().zip(&want).enumerate() {
                // Both sum the same exact integers; fp32 rounding of the k/g scaled partial
                // sums and of the zero-point term differ (a few ulps of the largest term).
                let tol = 1e-5 * (1.0 + y.abs()) * (k as f32 / g as f32).max(1.0) * 8.0;
                assert!(
                    (x - y).abs() <= tol,
                    "{kern:?} m={m} k={k} n={n} g={g} [{i}]: {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn bad_weights_are_typed_errors() {
    let a = [0i8; 8];
    let ap = [QParams::default(); 2];
    let mut out = [0f32; 4];
    let short = QWeights::Qc8w {
        data: &[0; 7],
        scales: &[0; 8],
    };
    assert!(gemm_qd8_f32(
        QuantKernel::Portable,
        &a,
        &ap,
        2,
        4,
        &short,
        2,
        None,
        None,
        &mut out,
        None
    )
    .is_err());
    let odd_group = QWeights::Qb4w {
        data: &[0; 8],
        scales: &[0; 8],
        group: 3,
    };
    assert!(gemm_qd8_f32(
        QuantKernel::Portable,
        &a,
        &ap,
        2,
        4,
        &odd_group,
        2,
        None,
        None,
        &mut out,
        None
    )
    .is_err());
}

#[test]
fn quantizer_matches_its_definition_on_random_rows() {
    let mut rng = Rng(9);
    for len in [1usize, 3, 7, 8, 16, 17, 33, 64, 129, 300] {
        for shift in [-1.0f32, 0.0, 2.5] {
            let mut x = rng.f32s(len, -3.0 + shift, 2.0 + shift);
            // Exact halves after scaling hit the ties-to-even rule.
            if len > 4 {
                x[1] = 0.0;
                x[2] = x[0] / 2.0;
            }
            // A NaN inside a 16-element vector and one in the tail: both go to the lower bound.
            if len > 20 {
                x[18] = f32::NAN;
                x[len - 1] = f32::NAN;
            }
            let mut q = vec![0i8; len];
            let p = quantize_row_qd8(&x, &mut q);
            let lo = x.iter().fold(f32::INFINITY, |m, &v| m.min(v));
            let hi = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let (s, want) = qd8_params(lo, hi);
            assert_eq!(p, want, "len {len}");
            let zp = p.zero_point as f32;
            for (i, (&v, &got)) in x.iter().zip(&q).enumerate() {
                let r = (v * s).max(-128.0 - zp).min(127.0 - zp).round_ties_even() + zp;
                assert_eq!(got as f32, r, "len {len} [{i}] x={v}");
            }
        }
    }
}

#[test]
fn packed_int8_products_match_the_reference_exactly() {
    let mut rng = Rng(21);
    for &(m, k, n) in &[
        (1, 16, 1),
        (3, 64, 5),
        (17, 32, 3),
        (4, 128, 8),
        (129, 48, 17),
        (2, 16, 12),
        (9, 16, 4),
        (5, 32, 12),
        (8, 64, 9),
        // Depths past one pass of the SMMLA tile's 128-step loop, with and without a rest.
        (8, 256, 16),
        (17, 272, 129),
        (3, 144, 1),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let rows: Vec<u8> = (0..n * k)
            .map(|_| (rng.below(255) as i32 - 127) as i8 as u8)
            .collect();
        let scales: Vec<u8> = rng
            .f32s(n, 0.001, 0.05)
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let bias = rng.vec(n);
        let w = QWeights::Qc8w {
            data: &rows,
            scales: &scales,
        };
        let mut sums = vec![0f32; n];
        gemm::column_sums(&w, n, k, &mut sums).unwrap();
        let mut want = vec![0f32; m * n];
        gemm_qd8_f32_ref(
            &a,
            &ap,
            m,
            k,
            &w,
            n,
            Some(&bias),
            &mut want,
            Some((-0.4, 0.6)),
        );
        let mut packed = vec![0u8; packed::packed_len(n, k).unwrap()];
        packed::pack_qc8w_p4x4(&rows, n, k, &mut packed).unwrap();
        let mut packed8 = vec![0u8; packed::packed8_len(n, k).unwrap()];
        packed::pack_qc8w_p8x8(&rows, n, k, &mut packed8).unwrap();
        for j in 0..n {
            for t in 0..k {
                assert_eq!(
                    packed::packed8_weight(&packed8, k, j, t),
                    rows[j * k + t] as i8 as i32
                );
            }
        }
        for kern in kernels() {
            let mut got = vec![f32::NAN; m * n];
            gemm::gemm_qd8_f32_p4x4(
                kern,
                &a,
                &ap,
                m,
                k,
                &packed,
                &scales,
                n,
                Some(&bias),
                &sums,
                &mut got,
                Some((-0.4, 0.6)),
            )
            .unwrap();
            assert_eq!(got, want, "{kern:?} m={m} k={k} n={n}");
            // The SMMLA layout: its tile where the CPU has FEAT_I8MM and the scratch holds the
            // rows packed in pairs, else the portable loop (no scratch).
            for scratch_f32 in [gemm::p8x8_scratch_f32(m, k), 0] {
                let mut got = vec![f32::NAN; m * n];
                let mut scratch = vec![f32::NAN; scratch_f32];
                gemm::gemm_qd8_f32_p8x8(
                    kern,
                    &a,
                    &ap,
                    m,
                    k,
                    &packed8,
                    &scales,
                    n,
                    Some(&bias),
                    &sums,
                    &mut got,
                    Some((-0.4, 0.6)),
                    &mut scratch,
                )
                .unwrap();
                assert_eq!(
                    got, want,
                    "p8x8 {kern:?} m={m} k={k} n={n} scratch {scratch_f32}"
                );
            }
        }
    }
    // A depth that is not a multiple of 16 cannot be packed.
    assert!(packed::pack_qc8w_p4x4(&[0; 20], 1, 20, &mut [0; 80]).is_err());
    assert!(packed::pack_qc8w_p8x8(&[0; 20], 1, 20, &mut [0; 160]).is_err());
}

/// `qc8w_pNx4` for SME2 `SMOPA`: packed with the CPU's tile width (its tile runs: `-cpu max`
/// in the aarch64 matrix) and with other widths (the portable loop), against the reference
/// bit for bit: row blocks whole and partial, depths with and without the 4-chunk tail,
/// column tiles whole and partial, with and without bias and clamp.
#[test]
fn smopa_products_match_the_reference_exactly() {
    let mut rng = Rng(57);
    let tile = gemm::smopa_width();
    let f = crate::linalg::cpu::features();
    assert_eq!(
        tile > 0,
        f.sme2 && f.sme_i8i32,
        "the SME2 tile is taken where it exists"
    );
    let mut widths = vec![4, 8, 32];
    if tile > 0 {
        widths.insert(0, tile);
    }
    for &(m, k, n) in &[
        (1, 16, 1),
        (3, 64, 5),
        (17, 32, 3),
        (16, 48, 16),
        (40, 160, 33),
        (129, 16, 17),
        (8, 96, 40),
        (33, 64, 64),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let rows: Vec<u8> = (0..n * k)
            .map(|_| (rng.below(256) as i32 - 128) as i8 as u8)
            .collect();
        let scales: Vec<u8> = rng
            .f32s(n, 0.001, 0.05)
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let bias = rng.vec(n);
        let w = QWeights::Qc8w {
            data: &rows,
            scales: &scales,
        };
        let mut sums = vec![0f32; n];
        gemm::column_sums(&w, n, k, &mut sums).unwrap();
        for (bias, clamp) in [(Some(&bias[..]), Some((-0.4f32, 0.6f32))), (None, None)] {
            let mut want = vec![0f32; m * n];
            gemm_qd8_f32_ref(&a, &ap, m, k, &w, n, bias, &mut want, clamp);
            for &nb in &widths {
                let mut packed = vec![0u8; packed::packed_n_len(n, k, nb).unwrap()];
                packed::pack_qc8w_pnx4(&rows, n, k, nb, &mut packed).unwrap();
                for j in 0..n {
                    for t in 0..k {
                        assert_eq!(
                            packed::packed_n_weight(&packed, k, nb, j, t),
                            rows[j * k + t] as i8 as i32
                        );
                    }
                }
                let mut scratch = vec![0f32; gemm::pnx4_scratch_f32(m, k, nb)];
                for kern in kernels() {
                    let mut got = vec![f32::NAN; m * n];
                    gemm::gemm_qd8_f32_pnx4(
                        kern,
                        &a,
                        &ap,
                        m,
                        k,
                        (&packed, nb),
                        &scales,
                        n,
                        bias,
                        &sums,
                        &mut got,
                        clamp,
                        &mut scratch,
                    )
                    .unwrap();
                    assert_eq!(
                        got,
                        want,
                        "{kern:?} nb={nb} (tile {tile}) m={m} k={k} n={n} bias {}",
                        bias.is_some()
                    );
                }
            }
        }
    }
    // `qc8w_p4x4` is `qc8w_pNx4` with blocks of 4.
    let rows: Vec<u8> = (0..5 * 32).map(|i| (i * 7 % 251) as u8).collect();
    let (mut p4, mut pn) = (vec![0u8; 8 * 32], vec![0u8; 8 * 32]);
    packed::pack_qc8w_p4x4(&rows, 5, 32, &mut p4).unwrap();
    packed::pack_qc8w_pnx4(&rows, 5, 32, 4, &mut pn).unwrap();
    assert_eq!(p4, pn);
    // Widths that are not multiples of 4 and short scratch are refused or fall back.
    assert!(packed::pack_qc8w_pnx4(&rows, 5, 32, 6, &mut [0; 192]).is_err());
    assert!(packed::packed_n_len(5, 32, 0).is_none());
}

/// `qb4w_pNx4` for SME2 `SMOPA`: with the CPU's tile width its tile runs and must give the
/// Neon 4-bit tiles' bits (the row-major tile, groups that are multiples of 32); every width
/// stays within rounding of the reference (the portable loop elsewhere).
#[test]
fn smopa_qb4w_products_match_the_neon_tiles() {
    let mut rng = Rng(71);
    let tile = gemm::smopa_width();
    let mut widths = vec![8, 32];
    if tile > 0 {
        widths.insert(0, tile);
    }
    for &(m, k, n, g) in &[
        (1, 32, 1, 32),
        (3, 64, 5, 32),
        (17, 128, 3, 64),
        (40, 256, 33, 128),
        (16, 96, 16, 32),
        (33, 64, 40, 16),
        (2, 48, 17, 16),
        (20, 64, 64, 64),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let data = four_bit(&mut rng, n, k);
        let scales: Vec<u8> = rng
            .f32s(n * k / g, 0.01, 0.2)
            .iter()
            .flat_map(|s| ((s.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let w = QWeights::Qb4w {
            data: &data,
            scales: &scales,
            group: g,
        };
        let bias = rng.vec(n);
        let mut sums = vec![0f32; n];
        gemm::column_sums(&w, n, k, &mut sums).unwrap();
        for (bias, clamp) in [(Some(&bias[..]), Some((-4.0f32, 4.5f32))), (None, None)] {
            let mut want = vec![0f32; m * n];
            gemm_qd8_f32_ref(&a, &ap, m, k, &w, n, bias, &mut want, clamp);
            let mut row_major = vec![f32::NAN; m * n];
            gemm_qd8_f32(
                QuantKernel::select(),
                &a,
                &ap,
                m,
                k,
                &w,
                n,
                bias,
                Some(&sums),
                &mut row_major,
                clamp,
            )
            .unwrap();
            for &nb in &widths {
                let mut packed = vec![0u8; packed::packed4n_len(n, k, nb).unwrap()];
                let mut pscales = vec![0f32; packed::packed4n_scales_len(n, k, g, nb).unwrap()];
                packed::pack_qb4w_pnx4(&data, &scales, n, k, g, nb, &mut packed, &mut pscales)
                    .unwrap();
                for j in 0..n {
                    for t in 0..k {
                        assert_eq!(
                            packed::packed4n_weight(&packed, k, nb, j, t),
                            reference::weight(&w, k, j, t),
                            "nb={nb} ({j}, {t})"
                        );
                    }
                }
                let pbytes: Vec<u8> = pscales.iter().flat_map(|s| s.to_le_bytes()).collect();
                let mut scratch = vec![0f32; gemm::pnx4_scratch_f32(m, k, nb)];
                for kern in kernels() {
                    let mut got = vec![f32::NAN; m * n];
                    gemm::gemm_qd8_f32_qb4w_pnx4(
                        kern,
                        &a,
                        &ap,
                        m,
                        k,
                        (&packed, nb),
                        &pbytes,
                        n,
                        g,
                        bias,
                        &sums,
                        &mut got,
                        clamp,
                        &mut scratch,
                    )
                    .unwrap();
                    let what = format!("{kern:?} nb={nb} (tile {tile}) m={m} k={k} n={n} g={g}");
                    if nb == tile && kern != QuantKernel::Portable && g % 32 == 0 {
                        assert_eq!(got, row_major, "{what}");
                    }
                    for (i, (&x, &y)) in got.iter().zip(&want).enumerate() {
                        let tol = 1e-5 * (1.0 + y.abs()) * (k as f32 / g as f32).max(1.0) * 8.0;
                        assert!((x - y).abs() <= tol, "{what} [{i}]: {x} vs {y}");
                    }
                }
            }
        }
    }
    assert!(packed::pack_qb4w_pnx4(
        &[0; 16],
        &[0; 2],
        1,
        32,
        32,
        12,
        &mut [0; 96],
        &mut [0.0; 12]
    )
    .is_err());
}

#[test]
fn packed_qb4w_products_match_the_row_major_kernel() {
    let mut rng = Rng(33);
    for &(m, k, n, g) in &[
        (1, 32, 1, 32),
        (3, 64, 5, 32),
        (17, 128, 3, 64),
        (5, 256, 33, 128),
        (4, 96, 4, 32),
        (129, 64, 6, 16),
        (2, 48, 17, 16),
    ] {
        let (a, ap) = random_case(&mut rng, m, k);
        let data = four_bit(&mut rng, n, k);
        let scales: Vec<u8> = rng
            .f32s(n * k / g, 0.01, 0.2)
            .iter()
            .flat_map(|s| ((s.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let w = QWeights::Qb4w {
            data: &data,
            scales: &scales,
            group: g,
        };
        let bias = rng.vec(n);
        let clamp = Some((-4.0, 4.5));
        let mut sums = vec![0f32; n];
        gemm::column_sums(&w, n, k, &mut sums).unwrap();
        let mut packed = vec![0u8; packed::packed4_len(n, k).unwrap()];
        let mut pscales = vec![0f32; packed::packed4_scales_len(n, k, g).unwrap()];
        packed::pack_qb4w_p4x4(&data, &scales, n, k, g, &mut packed, &mut pscales).unwrap();
        for j in 0..n {
            for t in 0..k {
                assert_eq!(
                    packed::packed4_weight(&packed, k, j, t),
                    reference::weight(&w, k, j, t),
                    "({j}, {t})"
                );
            }
        }
        let pscale_bytes: Vec<u8> = pscales.iter().flat_map(|s| s.to_le_bytes()).collect();
        // The SMMLA layout.
        let mut packed8 = vec![0u8; packed::packed4x8_len(n, k).unwrap()];
        let mut pscales8 = vec![0f32; packed::packed4x8_scales_len(n, k, g).unwrap()];
        packed::pack_qb4w_p8x8(&data, &scales, n, k, g, &mut packed8, &mut pscales8).unwrap();
        for j in 0..n {
            for t in 0..k {
                assert_eq!(
                    packed::packed4x8_weight(&packed8, k, j, t),
                    reference::weight(&w, k, j, t),
                    "p8x8 ({j}, {t})"
                );
            }
        }
        let pscale8_bytes: Vec<u8> = pscales8.iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut want = vec![0f32; m * n];
        gemm_qd8_f32_ref(&a, &ap, m, k, &w, n, Some(&bias), &mut want, clamp);
        let mut neon_tile: Option<Vec<f32>> = None;
        for kern in kernels() {
            let mut row_major = vec![f32::NAN; m * n];
            gemm_qd8_f32(
                kern,
                &a,
                &ap,
                m,
                k,
                &w,
                n,
                Some(&bias),
                Some(&sums),
                &mut row_major,
                clamp,
            )
            .unwrap();
            let mut got8 = vec![f32::NAN; m * n];
            gemm::gemm_qd8_f32_qb4w_p8x8(
                kern,
                &a,
                &ap,
                m,
                k,
                &packed8,
                &pscale8_bytes,
                n,
                g,
                Some(&bias),
                &sums,
                &mut got8,
                clamp,
            )
            .unwrap();
            let mut got = vec![f32::NAN; m * n];
            gemm::gemm_qd8_f32_qb4w_p4x4(
                kern,
                &a,
                &ap,
                m,
                k,
                &packed,
                &pscale_bytes,
                n,
                g,
                Some(&bias),
                &sums,
                &mut got,
                clamp,
            )
            .unwrap();
            if kern == QuantKernel::NeonDot && g % 32 == 0 {
                // The same sums, scales and fused multiply-adds in the same order (the
                // row-major Neon tile takes groups that are multiples of 32).
                assert_eq!(got, row_major, "{kern:?} m={m} k={k} n={n} g={g}");
            }
            if kern != QuantKernel::Portable {
                // The SDOT and base-Neon tiles: the same integers, the same fp32 steps.
                if let Some(prev) = &neon_tile {
                    assert_eq!(&got, prev, "{kern:?} m={m} k={k} n={n} g={g}");
                }
                neon_tile = Some(got.clone());
            }
            if kern != QuantKernel::Portable {
                // The SMMLA tile (where the CPU has FEAT_I8MM, else the portable loop) does
                // the same per-element operations as the SDOT tile.
                let neon = !cfg!(target_arch = "aarch64") || crate::linalg::cpu::features().i8mm;
                if neon {
                    assert_eq!(got8, got, "p8x8 {kern:?} m={m} k={k} n={n} g={g}");
                }
            }
            for (i, (&x, &y)) in got8.iter().zip(&want).enumerate() {
                let tol = 1e-5 * (1.0 + y.abs()) * (k as f32 / g as f32).max(1.0) * 8.0;
                assert!(
                    (x - y).abs() <= tol,
                    "p8x8 {kern:?} m={m} k={k} n={n} g={g} [{i}]: {x} vs {y}"
                );
            }
            for (i, (&x, &y)) in got.iter().zip(&want).enumerate() {
                // As in `qb4w_products_match_the_reference_within_rounding`.
                let tol = 1e-5 * (1.0 + y.abs()) * (k as f32 / g as f32).max(1.0) * 8.0;
                assert!(
                    (x - y).abs() <= tol,
                    "{kern:?} m={m} k={k} n={n} g={g} [{i}]: {x} vs {y}"
                );
            }
        }
    }
    // Groups that are not a multiple of 16 cannot be packed.
    let mut s = [0f32; 4];
    assert!(packed::pack_qb4w_p4x4(&[0; 4], &[0; 2], 1, 8, 8, &mut [0; 16], &mut s).is_err());
}

/// The SME2 tiles split their column tiles across cores (every core reading the same packed
/// rows; the 4-bit tile's partial sums in each core's own scratch): the same bits as one core,
/// and the split really happens where the tile runs.
#[test]
fn smopa_products_split_across_cores_bit_identically() {
    use crate::parallel::{scoped, Team};
    use crate::testing::CountingTeam;
    let tile = gemm::smopa_width();
    let nb = if tile > 0 { tile } else { 16 };
    let mut rng = Rng(83);
    let teams: Vec<CountingTeam> = [2, 4].iter().map(|&c| CountingTeam::new(c)).collect();
    for &(m, k, n, g) in &[(20, 64, 100, 32), (3, 128, 33, 64), (40, 96, 70, 32)] {
        let (a, ap) = random_case(&mut rng, m, k);
        let rows: Vec<u8> = (0..n * k)
            .map(|_| (rng.below(255) as i32 - 127) as i8 as u8)
            .collect();
        let scales: Vec<u8> = rng
            .f32s(n, 0.001, 0.05)
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        let w8 = QWeights::Qc8w {
            data: &rows,
            scales: &scales,
        };
        let data4 = four_bit(&mut rng, n, k);
        let scales4: Vec<u8> = rng
            .f32s(n * k / g, 0.01, 0.2)
            .iter()
            .flat_map(|s| ((s.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let w4 = QWeights::Qb4w {
            data: &data4,
            scales: &scales4,
            group: g,
        };
        let bias = rng.vec(n);
        let (mut sums8, mut sums4) = (vec![0f32; n], vec![0f32; n]);
        gemm::column_sums(&w8, n, k, &mut sums8).unwrap();
        gemm::column_sums(&w4, n, k, &mut sums4).unwrap();
        let mut p8 = vec![0u8; packed::packed_n_len(n, k, nb).unwrap()];
        packed::pack_qc8w_pnx4(&rows, n, k, nb, &mut p8).unwrap();
        let mut p4 = vec![0u8; packed::packed4n_len(n, k, nb).unwrap()];
        let mut s4 = vec![0f32; packed::packed4n_scales_len(n, k, g, nb).unwrap()];
        packed::pack_qb4w_pnx4(&data4, &scales4, n, k, g, nb, &mut p4, &mut s4).unwrap();
        let s4: Vec<u8> = s4.iter().flat_map(|s| s.to_le_bytes()).collect();
        let products = || {
            let kern = QuantKernel::select();
            let mut scratch = vec![0f32; gemm::pnx4_scratch_f32(m, k, nb)];
            let (mut o8, mut o4) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
            let clamp = Some((-3.0, 3.5));
            gemm::gemm_qd8_f32_pnx4(
                kern,
                &a,
                &ap,
                m,
                k,
                (&p8, nb),
                &scales,
                n,
                Some(&bias),
                &sums8,
                &mut o8,
                clamp,
                &mut scratch,
            )
            .unwrap();
            gemm::gemm_qd8_f32_qb4w_pnx4(
                kern,
                &a,
                &ap,
                m,
                k,
                (&p4, nb),
                &s4,
                n,
                g,
                Some(&bias),
                &sums4,
                &mut o4,
                clamp,
                &mut scratch,
            )
            .unwrap();
            [o8, o4].map(|o| o.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
        };
        let one = products();
        for team in &teams {
            let before = team.splits();
            let many = scoped(team, products);
            assert!(one == many, "m={m} k={k} n={n} on {} cores", team.cores());
            if tile > 0 && n.div_ceil(nb) > 1 {
                assert_eq!(team.splits() - before, 2, "m={m} k={k} n={n}");
            }
        }
    }
}
