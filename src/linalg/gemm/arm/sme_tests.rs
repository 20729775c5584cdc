//! Tests of the SME2 edge tiles: the partial tile (`PartFn`) against an f64 reference and
//! the tile kernel, the short tile (`sme_short`) against the partial tile it stands in for.

use super::sme;
use super::tests::{epilogue_args, TileRef};
use crate::testing::Rng;
use std::format;

/// The SME2 partial tile (`PartFn`) against an f64 reference for every edge shape (rows and
/// columns 1, 3, S − 1, S, S + 1, 2S − 1, 2S), odd depths, B packed and in place, each
/// epilogue: A rows and B columns past the edge are NaN and C outside the part keeps its
/// values (nothing else read or written); where the tile kernel runs its general epilogue
/// (alpha ≠ 1, a bias or a clamp), the part has the tile kernel's bits.
#[cfg(target_arch = "aarch64")]
#[test]
fn sme2_partial_tiles_match_the_reference() {
    let Some(uk) = sme::kernel_sme2_for_cpu() else {
        std::println!("SME2: not supported by this CPU, skipped");
        return;
    };
    let part = uk.part.expect("the SME2 tile has a partial-tile entry");
    let (mr, nr) = (uk.mr(), uk.nr());
    let s = mr / 2;
    let mut rng = Rng(0x5a27_ed6e);
    let edges = [1, 3, s - 1, s, s + 1, 2 * s - 1, 2 * s];
    // (alpha, beta, bias, clamp)
    let epilogues = [
        (1.0f32, 0.0f32, false, false),
        (1.0, 1.0, false, false),
        (0.5, 0.75, true, true),
        (1.0, 0.0, true, false),
        (-2.0, 0.0, false, true),
    ];
    for &rows in &edges {
        for &cols in &edges {
            for &k in &[1usize, 5, 17] {
                for ldb in [nr, nr + 3] {
                    for &(alpha, beta, with_bias, clamp) in &epilogues {
                        let mut a = rng.vec(k * mr);
                        let mut b = rng.vec(k * ldb);
                        for p in 0..k {
                            a[p * mr + rows..(p + 1) * mr].fill(f32::NAN);
                            b[p * ldb + cols..p * ldb + nr].fill(f32::NAN);
                        }
                        let rsc = nr + 5;
                        let c0 = rng.vec(mr * rsc);
                        let mut c = c0.clone();
                        let bias = rng.vec(nr);
                        let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                        // SAFETY: the PartFn contract: k·mr floats of A, k rows of nr floats
                        // ldb apart, rows < rows of C hold cols floats rsc apart, bias nr.
                        unsafe {
                            part(
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
                                rows,
                                cols,
                            )
                        };
                        let at = format!("rows {rows} cols {cols} k {k} ldb {ldb} alpha {alpha} beta {beta} bias {with_bias} clamp {clamp}");
                        for i in 0..mr {
                            for j in 0..rsc {
                                let (got, was) = (c[i * rsc + j], c0[i * rsc + j]);
                                if i >= rows || j >= cols {
                                    assert_eq!(
                                        got.to_bits(),
                                        was.to_bits(),
                                        "{at}: ({i}, {j}) written"
                                    );
                                    continue;
                                }
                                let bias = with_bias.then_some(&bias[..]);
                                let tile = TileRef {
                                    a: &a,
                                    b: &b,
                                    mr,
                                    ldb,
                                    k,
                                    bias,
                                    clamp,
                                };
                                tile.assert_near(&at, (i, j), (alpha, beta), got, was);
                            }
                        }
                        if alpha == 1.0 && !with_bias && !clamp {
                            continue;
                        }
                        // The tile kernel over the same operands (NaN lanes made finite: it
                        // stores every lane) gives the same bits on the part.
                        for p in 0..k {
                            a[p * mr + rows..(p + 1) * mr].fill(0.0);
                            b[p * ldb + cols..p * ldb + nr].fill(0.0);
                        }
                        let mut t = c0.clone();
                        // SAFETY: the MicroKernel contract: the same panels, a whole mr × nr
                        // tile of C (rsc ≥ nr), nr bias floats.
                        unsafe {
                            (uk.kernel)(
                                k,
                                a.as_ptr(),
                                b.as_ptr(),
                                ldb,
                                t.as_mut_ptr(),
                                rsc as isize,
                                alpha,
                                beta,
                                bias_ptr,
                                lo,
                                hi,
                            )
                        };
                        for i in 0..rows {
                            for j in 0..cols {
                                assert_eq!(
                                    t[i * rsc + j].to_bits(),
                                    c[i * rsc + j].to_bits(),
                                    "{at}: ({i}, {j}) differs from the tile kernel"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The SME2 short tile (`ShortFn`) against the partial tile it stands in for: every row
/// count up to S (1, 3, S − 1, S), both halves and each one alone, column edges (1, 3,
/// S − 1, S, and past S over both halves), depths through every loop (single steps, pairs,
/// 16-step blocks), B packed and in place, each epilogue. The same bits as the partial tile
/// on its columns, within 1e-4 of an f64 reference; A rows past `rows` and B columns outside
/// the window are NaN, and C outside the window keeps its values.
#[cfg(target_arch = "aarch64")]
#[test]
fn sme2_short_tiles_have_the_partial_tiles_bits() {
    let Some(uk) = sme::kernel_sme2_for_cpu() else {
        std::println!("SME2: not supported by this CPU, skipped");
        return;
    };
    let part = uk.part.expect("the SME2 tile has a partial-tile entry");
    let short = uk.short.expect("the SME2 tile has a short-tile entry");
    let (mr, nr) = (uk.mr(), uk.nr());
    let s = mr / 2;
    let mut rng = Rng(0x5407_7113);
    // (alpha, beta, bias, clamp)
    let epilogues = [
        (1.0f32, 0.0f32, false, false),
        (1.0, 1.0, false, false),
        (0.5, 0.75, true, true),
        (1.0, 0.0, true, false),
        (-2.0, 0.0, false, true),
    ];
    let mut calls = 0;
    for rows in [1, 3, s - 1, s] {
        for first in [0, s] {
            for cols in [1, 3, s - 1, s, s + 1, 2 * s - 1, 2 * s] {
                if first + cols > nr {
                    continue;
                }
                for k in [1usize, 2, 7, 16, 35, 50] {
                    for ldb in [nr, nr + 3] {
                        for &(alpha, beta, with_bias, clamp) in &epilogues {
                            let mut a = rng.vec(k * mr);
                            let mut b = rng.vec(k * ldb);
                            for p in 0..k {
                                a[p * mr + rows..(p + 1) * mr].fill(f32::NAN);
                                b[p * ldb..p * ldb + first].fill(f32::NAN);
                                b[p * ldb + first + cols..p * ldb + nr].fill(f32::NAN);
                            }
                            let rsc = nr + 5;
                            let c0 = rng.vec(mr * rsc);
                            let bias = rng.vec(nr);
                            let (lo, hi, bias_ptr) = epilogue_args(clamp, with_bias, &bias);
                            let mut c = c0.clone();
                            // SAFETY: the ShortFn contract: k·mr floats of A, k rows of nr
                            // floats ldb apart, rows < rows of C hold columns first ..
                            // first + cols (rsc ≥ nr apart), nr bias floats.
                            unsafe {
                                short(
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
                                    rows,
                                    cols,
                                    first,
                                )
                            };
                            let mut t = c0.clone();
                            // SAFETY: the PartFn contract over the same operands, columns
                            // 0 .. first + cols.
                            unsafe {
                                part(
                                    k,
                                    a.as_ptr(),
                                    b.as_ptr(),
                                    ldb,
                                    t.as_mut_ptr(),
                                    rsc as isize,
                                    alpha,
                                    beta,
                                    bias_ptr,
                                    lo,
                                    hi,
                                    rows,
                                    first + cols,
                                )
                            };
                            calls += 1;
                            let at = format!("rows {rows} first {first} cols {cols} k {k} ldb {ldb} alpha {alpha} beta {beta} bias {with_bias} clamp {clamp}");
                            for i in 0..mr {
                                for j in 0..rsc {
                                    let (got, was) = (c[i * rsc + j], c0[i * rsc + j]);
                                    if i >= rows || j < first || j >= first + cols {
                                        assert_eq!(
                                            got.to_bits(),
                                            was.to_bits(),
                                            "{at}: ({i}, {j}) written"
                                        );
                                        continue;
                                    }
                                    assert_eq!(
                                        got.to_bits(),
                                        t[i * rsc + j].to_bits(),
                                        "{at}: ({i}, {j}) differs from the partial tile"
                                    );
                                    let bias = with_bias.then_some(&bias[..]);
                                    let tile = TileRef {
                                        a: &a,
                                        b: &b,
                                        mr,
                                        ldb,
                                        k,
                                        bias,
                                        clamp,
                                    };
                                    tile.assert_near(&at, (i, j), (alpha, beta), got, was);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    std::println!("SME2 short tiles: {calls} calls, the partial tile's bits");
}
