//! A product split across cores gives the same bits as on one core: every kernel of this CPU,
//! row and column splits, in-place, strided, pre-packed B and pre-packed A, odd edges.

use super::batch::*;
use super::contract::*;
use super::driver::*;
use super::gemv_panels::GEMV_ROWS;
use super::matref::MatRef;
use super::pack_lhs_mr_whole_k::{pack_a_runs, PackedA};
use super::pack_rhs_nr_whole_k::{pack_b_ahead, PackedB};
use super::portable::PORTABLE;
use super::split::*;
use crate::parallel::{scoped, Team};
use crate::testing::CountingTeam;
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

fn kernels() -> Vec<&'static MicroKernel> {
    let mut v = vec![super::select::micro_kernel_for(64, 64, 64)];
    if crate::testing::isa_tested("generic") {
        v.push(&PORTABLE);
    }
    #[cfg(target_arch = "arm")]
    v.extend(super::select::arm32_neon_vfpv4());
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = super::select::avx2_fma() {
        v.push(k);
    }
    #[cfg(target_arch = "aarch64")]
    for isa in super::select::Isa::ALL {
        if let Some(k) = super::select::kernel_for(isa) {
            if crate::testing::isa_tested(isa.name()) {
                v.push(k);
            }
        }
    }
    v
}

/// The four operand forms of one product, computed with whatever team is installed.
fn products(
    uk: &MicroKernel,
    a: &[f32],
    b: &[f32],
    bias: &[f32],
    (m, n, k): (usize, usize, usize),
) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    let ldc = n + 3;
    let am = MatRef::row_major(a, m, k).unwrap();
    // B in place (row-major), beta = 0.5 over a non-zero C, with bias.
    let bm = MatRef::row_major(b, k, n).unwrap();
    let mut c: Vec<f32> = (0..m * ldc).map(|i| (i % 7) as f32).collect();
    sgemm_with(uk, am, bm, &mut c, ldc, 1.25, 0.5, Some(bias), &mut scratch).unwrap();
    out.push(c);
    // B strided (an [N, K] weight viewed transposed): the packed loop nest.
    let bt = MatRef::new(b, k, n, 1, k).unwrap();
    let mut c = vec![f32::NAN; m * ldc];
    sgemm_with(uk, am, bt, &mut c, ldc, 1.0, 0.0, None, &mut scratch).unwrap();
    out.push(c);
    // B pre-packed for the kernel's width.
    let mut pbd = vec![0.0f32; PackedB::len_for(k, n, uk.nr()).unwrap()];
    pack_b_ahead(bm, uk.nr(), &mut pbd).unwrap();
    let pb = PackedB::new(&pbd, k, n, uk.nr()).unwrap();
    let mut c = vec![f32::NAN; m * ldc];
    sgemm_prepacked_with(uk, am, pb, &mut c, ldc, 1.0, 0.0, Some(bias), &mut scratch).unwrap();
    out.push(c);
    // A and B pre-packed.
    let mr = uk.mr();
    let mut pad = vec![0.0f32; PackedA::len_for(m, k, mr).unwrap()];
    for (q, panel) in pad.chunks_exact_mut(k * mr).enumerate() {
        let runs = mr.min(m - q * mr);
        pack_a_runs(uk, a, q * mr * k, k, runs, 0, 0, k, panel).unwrap();
    }
    let pa = PackedA::new(&pad, m, k, mr).unwrap();
    let mut c = vec![f32::NAN; m * ldc];
    sgemm_packed_with(
        uk,
        pa,
        pb,
        &mut c,
        ldc,
        1.0,
        0.0,
        Some(bias),
        None,
        &mut scratch,
    )
    .unwrap();
    out.push(c);
    out
}

fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|c| c.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn split_products_are_bit_identical() {
    let mut rng = Rng(0x5911);
    let teams: Vec<CountingTeam> = [2, 3, 4].iter().map(|&n| CountingTeam::new(n)).collect();
    for uk in kernels() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 17, 129),
            (17, 3, 9),
            (129, 17, 3),
            (16, 768, 64),
            (200, 24, 40),
            (33, 129, 300),
            (8, 40, 1500),
            (17, 20, 5),
            (64, 64, 64),
            (40, 40, 17),
        ] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let bias = rng.vec(n);
            let one = bits(&products(uk, &a, &b, &bias, (m, n, k)));
            for team in &teams {
                let before = team.splits();
                let many = scoped(team, || bits(&products(uk, &a, &b, &bias, (m, n, k))));
                assert!(
                    one == many,
                    "{} {m}x{n}x{k} on {} cores differs from one core",
                    uk.name(),
                    team.cores()
                );
                // Every form splits once it has two tiles of work in some direction.
                if m.div_ceil(uk.mr()) > 1 || n.div_ceil(uk.nr()) > 1 {
                    assert_eq!(team.splits() - before, 4, "{m}x{n}x{k}");
                }
            }
            // Fewer tiles than cores each way, two column panels and two or three row tiles:
            // a 2 × 2 grid of parts.
            let (rt, cp) = (m.div_ceil(uk.mr()), n.div_ceil(uk.nr()));
            if rt.max(cp) < 4 && rt >= 2 && cp == 2 {
                let four = CountingTeam::new(4);
                let many = scoped(&four, || bits(&products(uk, &a, &b, &bias, (m, n, k))));
                assert!(one == many, "{} {m}x{n}x{k} on a 2 x 2 grid", uk.name());
                assert_eq!(four.widest(), 4, "{} {m}x{n}x{k}", uk.name());
            }
        }
    }
}

/// Products of at most `mr/2` rows, with a kernel that has short tiles, split by half
/// panels: two panels go to four cores, and parts start and end mid-panel (3 cores over 4
/// halves, odd half counts, a last half cut at `n`); every operand form gives one core's
/// bits. (Kernels without short tiles, e.g. on x86 or Neon, have nothing here to split.)
#[test]
fn short_products_split_by_half_panels() {
    let mut rng = Rng(0x4a1f);
    for uk in kernels().into_iter().filter(|uk| uk.short.is_some()) {
        let (mr, nr) = (uk.mr(), uk.nr());
        for &(m, n, k) in &[
            (mr / 2, 2 * nr, 64),
            (3, 2 * nr - 5, 37),
            (mr / 2, 3 * nr / 2 + 1, 129),
            (1, 5 * nr / 2, 17),
            (mr / 2 - 1, 7 * nr / 2, 300),
        ] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let bias = rng.vec(n);
            let one = bits(&products(uk, &a, &b, &bias, (m, n, k)));
            let halves = n.div_ceil(nr / 2);
            for cores in [2, 3, 4] {
                let team = CountingTeam::new(cores);
                let many = scoped(&team, || bits(&products(uk, &a, &b, &bias, (m, n, k))));
                assert!(
                    one == many,
                    "{} {m}x{n}x{k} on {cores} cores differs from one core",
                    uk.name()
                );
                assert_eq!(
                    team.widest(),
                    cores.min(halves),
                    "{} {m}x{n}x{k}: parts on {cores} cores",
                    uk.name()
                );
            }
        }
    }
}

/// Two row tiles by three column panels on 4 cores: a 2 × 2 grid (each part packs one row
/// tile of A) instead of 3 column parts that each pack both; the same bits either way.
#[test]
fn two_by_three_tiles_split_on_a_grid() {
    let mut rng = Rng(0x2b3);
    for uk in kernels() {
        let (m, n, k) = (2 * uk.mr() - 1, 3 * uk.nr() - 2, 37);
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let bias = rng.vec(n);
        let one = bits(&products(uk, &a, &b, &bias, (m, n, k)));
        let four = CountingTeam::new(4);
        let many = scoped(&four, || bits(&products(uk, &a, &b, &bias, (m, n, k))));
        assert!(one == many, "{} {m}x{n}x{k} on 4 cores", uk.name());
        assert_eq!(four.widest(), 4, "{} {m}x{n}x{k}", uk.name());
    }
}

/// Products of at most 4 rows over pre-packed B go through the GEMV panel by panel
/// (`sgemm_prepacked_clamped`); split across cores they give one core's bits, and where the
/// GEMV reads panels as row-major matrices (widths without a panel kernel, e.g. the 32 and
/// 64 of SME2 tiles) a product of fewer panels than cores is split by columns and still uses
/// every core.
#[test]
fn few_row_products_over_packed_panels_split_to_every_core() {
    let mut rng = Rng(0x6e77);
    let teams: Vec<CountingTeam> = [2, 3, 4].iter().map(|&n| CountingTeam::new(n)).collect();
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    for nr in [8, 12, 16, 32, 64] {
        for &(m, n, k) in &[
            (1, 64, 64),
            (1, 3, 17),
            (2, 17, 129),
            (4, 129, 3),
            (3, 70, 1),
        ] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let bias = rng.vec(n);
            let bm = MatRef::row_major(&b, k, n).unwrap();
            let mut pbd = vec![0.0f32; PackedB::len_for(k, n, nr).unwrap()];
            pack_b_ahead(bm, nr, &mut pbd).unwrap();
            let pb = PackedB::new(&pbd, k, n, nr).unwrap();
            let am = MatRef::row_major(&a, m, k).unwrap();
            let run = |scratch: &mut [f32]| {
                let mut c: Vec<f32> = (0..m * n).map(|i| (i % 5) as f32).collect();
                sgemm_prepacked_clamped(
                    am,
                    pb,
                    &mut c,
                    n,
                    1.5,
                    0.25,
                    Some(&bias),
                    Some((-2.0, 2.0)),
                    scratch,
                )
                .unwrap();
                c.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
            };
            let one = run(&mut scratch);
            for team in &teams {
                let many = scoped(team, || run(&mut scratch));
                assert!(
                    one == many,
                    "{m}x{n}x{k}, panels of {nr}, on {} cores differs from one core",
                    team.cores()
                );
            }
            let by_columns = super::select::gemv_for_single_rows()
                && super::gemv::four_column_units(nr)
                && !super::gemv::panels_accepted(k, nr);
            if by_columns && n >= 64 {
                let four = CountingTeam::new(4);
                let many = scoped(&four, || run(&mut scratch));
                assert!(one == many);
                assert!(
                    four.widest() >= 4,
                    "{m}x{n}x{k} in panels of {nr}: {} parts on 4 cores",
                    four.widest()
                );
            }
        }
    }
}

/// The grid search never gives a part more tiles than the split it replaces, and takes a grid
/// only for fewer packings.
#[test]
fn grids_replace_splits_that_pack_more() {
    let any = usize::MAX;
    // 2 × 3 tiles by columns (3 parts, each packing both A row tiles) → 2 × 2 (one each).
    assert_eq!(fewer_packs((2, 3), 4, (1, 3), (true, false), any), (2, 2));
    // Nothing to pack: the split stays.
    assert_eq!(fewer_packs((2, 3), 4, (1, 3), (false, false), any), (1, 3));
    // 2 × 9 tiles by columns, 4 parts of up to 3 panels (6 tiles, 2 packs) → 2 × 2 grid:
    // 5 tiles and one pack.
    assert_eq!(fewer_packs((2, 9), 4, (1, 4), (true, false), any), (2, 2));
    // Rows already one tile per part: no grid gives fewer tiles and packs.
    assert_eq!(fewer_packs((4, 3), 4, (4, 1), (true, false), any), (4, 1));
    // B strided: a grid of 2 × 2 on 2 × 3 packs 1 + 2 = 3 as columns do (2 + 1): stays.
    assert_eq!(fewer_packs((2, 3), 4, (1, 3), (true, true), any), (1, 3));
    // Not allowed (too little work for 4 parts): the split stays.
    assert_eq!(fewer_packs((2, 3), 4, (1, 3), (true, false), 3), (1, 3));
    // 3 cores: 2 × 2 needs 4 parts; 2 × 1 has more tiles per part.
    assert_eq!(fewer_packs((2, 3), 3, (1, 3), (true, false), any), (1, 3));
}

/// Batches split in parts of products (6 heads on 4 cores: halves of row tiles) or whole
/// products give one core's bits: every kernel, B in place and transposed, one-row products.
#[test]
fn batch_split_into_parts_of_products_is_bit_identical() {
    let mut rng = Rng(0xba7c);
    let teams: Vec<CountingTeam> = [2, 3, 4].iter().map(|&n| CountingTeam::new(n)).collect();
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    let mr = super::select::micro_kernel_for(64, 64, 16).mr();
    for &(count, m, n, k) in &[
        (6, 2 * mr, 17, 16),
        (6, 3 * mr - 1, 64, 3),
        (3, 4 * mr, 20, 9),
        (5, 2 * mr + 1, 33, 17),
        (6, 1, 129, 16),
        (1, 3, 17, 129),
        (1, 4 * mr, 17, 9),
        (4, mr, 8, 8),
    ] {
        let a = rng.vec(count * m * k);
        let b = rng.vec(count * k * n);
        for transposed in [false, true] {
            let operands = |i: usize| {
                let ai = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k)?;
                let bs = &b[i * k * n..(i + 1) * k * n];
                let bi = if transposed {
                    MatRef::row_major(bs, n, k)?.t()
                } else {
                    MatRef::row_major(bs, k, n)?
                };
                Ok((ai, bi))
            };
            let mut one = vec![f32::NAN; count * m * n];
            sgemm_batch((m, n, k), count, operands, &mut one, &mut scratch).unwrap();
            let one = bits(&[one]);
            assert!(!sgemm_batch_split((m, n, k), count, operands, &mut [0.0; 0]).unwrap());
            for team in &teams {
                let mut many = vec![f32::NAN; count * m * n];
                let split = scoped(team, || {
                    sgemm_batch_split((m, n, k), count, operands, &mut many).unwrap()
                });
                if !split {
                    sgemm_batch((m, n, k), count, operands, &mut many, &mut scratch).unwrap();
                }
                assert!(
                    one == bits(&[many]),
                    "{count} × {m}x{n}x{k} (B transposed: {transposed}) on {} cores",
                    team.cores()
                );
                assert_eq!(split, count > 1, "{count} × {m}x{n}x{k}");
            }
        }
    }
}

/// A split decided ahead (`split_hint`, with the team installed) is the split the call would
/// decide, the hinted call splits into exactly its parts, and whatever the hint (decided,
/// made for another team size, valid but unlike the decision, forged bits) the result has one
/// core's bits: B in place and pre-packed, odd edges, one-row products.
#[test]
fn hinted_products_split_as_decided_with_one_cores_bits() {
    let mut rng = Rng(0x4147);
    let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
    let forged = [
        SplitHint::from_bits(0xA504_0303), // 9 parts for 4 cores
        SplitHint::from_bits(0x1204_0202), // not a hint's tag
        SplitHint::from_bits(0xA504_0002), // no row group
        SplitHint::from_bits(u32::MAX),
    ];
    for &(m, n, k) in &[
        (1, 129, 17),
        (3, 17, 129),
        (16, 64, 64),
        (16, 192, 64),
        (17, 3, 9),
        (33, 129, 300),
        (129, 17, 3),
        (64, 64, 64),
    ] {
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let bias = rng.vec(n);
        let am = MatRef::row_major(&a, m, k).unwrap();
        let bm = MatRef::row_major(&b, k, n).unwrap();
        let nr = super::select::prepack_nr(m, n, k);
        let mut pbd = vec![0.0f32; PackedB::len_for(k, n, nr).unwrap()];
        pack_b_ahead(bm, nr, &mut pbd).unwrap();
        let pb = PackedB::new(&pbd, k, n, nr).unwrap();
        let run = |hint: SplitHint, prepacked: bool, scratch: &mut [f32]| {
            let mut c = vec![f32::NAN; m * n];
            if prepacked {
                sgemm_prepacked_hinted(
                    am,
                    pb,
                    &mut c,
                    n,
                    (1.0, 0.0, Some(&bias), None),
                    scratch,
                    hint,
                )
            } else {
                sgemm_hinted(
                    am,
                    bm,
                    &mut c,
                    n,
                    (1.0, 0.0, Some(&bias), None),
                    scratch,
                    hint,
                )
            }
            .unwrap();
            bits(&[c])
        };
        for prepacked in [false, true] {
            let one = run(SplitHint::NONE, prepacked, &mut scratch);
            let made = |cores: usize| {
                let t = CountingTeam::new(cores);
                scoped(&t, || {
                    if prepacked {
                        split_hint_prepacked(m, n, k, nr)
                    } else {
                        split_hint(m, n, k, true)
                    }
                })
            };
            assert_eq!(made(1), SplitHint::NONE, "a one-core team decides nothing");
            for cores in [2, 3, 4] {
                let hint = made(cores);
                let (pr, pc) = hint.for_cores(cores).expect("a hint for this team");
                let fresh = CountingTeam::new(cores);
                // The hint is the call's own decision: deciding as it runs splits alike.
                let decided = scoped(&fresh, || run(SplitHint::NONE, prepacked, &mut scratch));
                assert_eq!(decided, one, "{m}x{n}x{k} decided on {cores}");
                let hinted = CountingTeam::new(cores);
                let got = scoped(&hinted, || run(hint, prepacked, &mut scratch));
                assert_eq!(got, one, "{m}x{n}x{k} hinted on {cores}");
                assert_eq!(hinted.widest(), fresh.widest(), "{m}x{n}x{k} on {cores}");
                // Products of a few rows may take a GEMV path of this CPU, which has its own
                // split: the loop nest's parts are checked on the others.
                let gemv = m <= 1 || (prepacked && m <= GEMV_ROWS);
                let parts = if pr * pc > 1 { pr * pc } else { 0 };
                if !gemv {
                    let what = format!("{m}x{n}x{k} ({pr}, {pc}) on {cores}");
                    assert_eq!(hinted.widest(), parts, "{what}");
                }
                // A valid hint unlike the decision is followed, with the same bits.
                let other = SplitHint::from_bits(0xA500_0102 | (cores as u32) << 16);
                let t = CountingTeam::new(cores);
                assert_eq!(scoped(&t, || run(other, prepacked, &mut scratch)), one);
                if !gemv {
                    assert_eq!(t.widest(), 2, "{m}x{n}x{k}: the hint (1, 2) is followed");
                }
            }
            // Made for 2 cores, run on 4; forged bits: ignored, decided as it runs.
            let two = made(2);
            for hint in forged.iter().copied().chain([two]) {
                let t = CountingTeam::new(4);
                let fresh = CountingTeam::new(4);
                assert_eq!(scoped(&t, || run(hint, prepacked, &mut scratch)), one);
                scoped(&fresh, || run(SplitHint::NONE, prepacked, &mut scratch));
                assert_eq!(t.widest(), fresh.widest(), "{hint:?} {m}x{n}x{k}");
            }
        }
    }
}
