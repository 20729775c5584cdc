use super::*;
use crate::parallel::threads::ThreadTeam;
use crate::testing::Rng;
use std::format;
use std::vec;
use std::vec::Vec;

/// The attention in f64, element by element, straight from the layout contract.
fn reference(a: &Attention, q: &[f32], k: &[f32], v: &[f32], mask: Option<&[f32]>) -> Vec<f32> {
    let (h, d, tq, tk) = (a.heads, a.head_dim, a.q_rows, a.kv_rows);
    let at = |x: &HeadView, hh: usize, t: usize, dd: usize| {
        x.offset + hh * x.head_stride + t * x.row_stride + dd
    };
    let g = a.kv_group;
    let mut out = vec![0f32; tq * h * d];
    for hh in 0..h {
        for i in 0..tq {
            let mut s: Vec<f64> = (0..tk)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|dd| {
                            let qv = (a.q_scale * q[at(&a.q, hh, i, dd)]) as f64;
                            qv * k[at(&a.k, hh / g, j, dd)] as f64
                        })
                        .sum();
                    let m = mask.map_or(0.0, |m| {
                        m[hh * a.mask_strides.0 + i * a.mask_strides.1 + j] as f64
                    });
                    dot * a.scale as f64 + m
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            s.iter_mut().for_each(|x| *x = (*x - mx).exp());
            let sum: f64 = s.iter().sum();
            for dd in 0..d {
                let o: f64 = (0..tk)
                    .map(|j| s[j] / sum * v[at(&a.v, hh / g, j, dd)] as f64)
                    .sum();
                out[i * h * d + hh * d + dd] = o as f32;
            }
        }
    }
    out
}

/// Operands for one shape: `fused` reads Q, K and V from one `[rows, 3·H·D]` projection
/// (as GPT-2's `c_attn` writes them), else each from its own `[H, rows, D]` tensor;
/// `mask`: none, one shared `[tq, tk]` (causal, large negative above the diagonal, offset so
/// that the last query row sees every key), or one per head.
struct Case {
    a: Attention,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    mask: Option<Vec<f32>>,
}

fn case(
    rng: &mut Rng,
    (h, d, tq, tk): (usize, usize, usize, usize),
    fused: bool,
    mask: u8,
    q_scale: f32,
) -> Case {
    let c = h * d;
    let views = |rows: usize, which: usize| {
        if fused {
            HeadView {
                offset: which * c,
                head_stride: d,
                row_stride: 3 * c,
            }
        } else {
            HeadView {
                offset: 0,
                head_stride: rows * d,
                row_stride: d,
            }
        }
    };
    let (qv, kv, vv) = (views(tq, 0), views(tk, 1), views(tk, 2));
    let len = |rows: usize| if fused { rows * 3 * c } else { h * rows * d };
    let (q, k, v) = (rng.vec(len(tq)), rng.vec(len(tk)), rng.vec(len(tk)));
    let causal = |i: usize, j: usize| {
        if j + tq > i + tk {
            -3.4e38f32
        } else {
            0.0
        }
    };
    let (mask, strides) = match mask {
        0 => (None, (0, 0)),
        1 => (
            Some(
                (0..tq * tk)
                    .map(|x| causal(x / tk, x % tk))
                    .collect::<Vec<_>>(),
            ),
            (0, tk),
        ),
        _ => (Some(rng.vec(h * tq * tk)), (tq * tk, tk)),
    };
    Case {
        a: Attention {
            heads: h,
            head_dim: d,
            q_rows: tq,
            kv_rows: tk,
            q: qv,
            k: kv,
            v: vv,
            mask_strides: strides,
            scale: 1.0 / (d as f32).sqrt(),
            q_scale,
            kv_group: 1,
        },
        q,
        k,
        v,
        mask,
    }
}

fn run(c: &Case) -> Result<Vec<f32>, KernelError> {
    let mut out = vec![f32::NAN; c.a.q_rows * c.a.heads * c.a.head_dim];
    let mut scratch = vec![0f32; c.a.scratch_len().unwrap()];
    c.a.run(&c.q, &c.k, &c.v, c.mask.as_deref(), &mut out, &mut scratch)?;
    Ok(out)
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-5 + 2e-5 * w.abs(),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn heads_read_in_place_match_the_reference() {
    let mut rng = Rng(41);
    for &(h, d) in &[(1, 1), (3, 17), (6, 16), (2, 3)] {
        for &(tq, tk) in &[(1, 1), (3, 3), (17, 17), (1, 17), (129, 129), (3, 129)] {
            for fused in [false, true] {
                for mask in 0..3u8 {
                    let qs = if mask == 2 { 0.125 } else { 1.0 };
                    let c = case(&mut rng, (h, d, tq, tk), fused, mask, qs);
                    let what = format!("h {h} d {d} tq {tq} tk {tk} fused {fused} mask {mask}");
                    let want = reference(&c.a, &c.q, &c.k, &c.v, c.mask.as_deref());
                    close(&run(&c).unwrap(), &want, &what);
                }
            }
        }
    }
}

#[test]
fn every_team_gives_the_same_bits() {
    let mut rng = Rng(7);
    for &(h, d, tq, tk) in &[
        (6, 16, 64, 64),
        (6, 16, 1, 64),
        (3, 17, 129, 129),
        (12, 8, 17, 17),
    ] {
        let qs = if tq == 17 { 0.125 } else { 1.0 };
        let c = case(&mut rng, (h, d, tq, tk), true, 1, qs);
        let one = run(&c).unwrap();
        for cores in [2, 3, 4] {
            let team = ThreadTeam::with_min_work(cores, GEMM_SCRATCH_F32, 1);
            let got = crate::parallel::scoped(&team, || run(&c).unwrap());
            let same = one
                .iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "h {h} d {d} tq {tq} tk {tk}: {cores} cores differ from one"
            );
        }
    }
}

#[test]
fn scratch_holds_the_scores_and_the_heads() {
    let mut rng = Rng(3);
    let mut len = |h: usize, tq: usize, tk: usize, q_scale: f32| {
        case(&mut rng, (h, 16, tq, tk), true, 0, q_scale)
            .a
            .scratch_len()
            .unwrap()
    };
    // Scores and probabilities, the heads' outputs before interleaving, the product scratch.
    assert_eq!(
        len(6, 64, 64, 1.0),
        2 * 6 * 64 * 64 + 6 * 64 * 16 + GEMM_SCRATCH_F32
    );
    // One query row: the heads are already interleaved.
    assert_eq!(len(6, 1, 64, 0.5), 2 * 6 * 64 + GEMM_SCRATCH_F32);
    assert_eq!(len(1, 17, 3, 1.0), 2 * 17 * 3 + GEMM_SCRATCH_F32);
}

#[test]
fn short_operands_and_long_keys_are_errors() {
    let mut rng = Rng(5);
    let c = case(&mut rng, (3, 17, 17, 17), false, 2, 1.0);
    let mut out = vec![0f32; 17 * 3 * 17];
    let mut scratch = vec![0f32; c.a.scratch_len().unwrap()];
    let m = c.mask.as_deref().unwrap();
    let (q, k, v) = (&c.q[..], &c.k[..], &c.v[..]);
    let short = |x: &[f32]| x[..x.len() - 1].to_vec();
    for (which, r) in [
        (
            "q",
            c.a.run(&short(q), k, v, Some(m), &mut out, &mut scratch),
        ),
        (
            "k",
            c.a.run(q, &short(k), v, Some(m), &mut out, &mut scratch),
        ),
        (
            "v",
            c.a.run(q, k, &short(v), Some(m), &mut out, &mut scratch),
        ),
        (
            "mask",
            c.a.run(q, k, v, Some(&short(m)), &mut out, &mut scratch),
        ),
        (
            "out",
            c.a.run(q, k, v, Some(m), &mut out[1..], &mut scratch),
        ),
    ] {
        assert!(
            matches!(r, Err(KernelError::Shape { .. })),
            "{which}: {r:?}"
        );
    }
    let short_scratch = scratch.len() - 1;
    let r =
        c.a.run(q, k, v, Some(m), &mut out, &mut scratch[..short_scratch]);
    assert!(matches!(r, Err(KernelError::Scratch { .. })), "{r:?}");
}

#[test]
fn grouped_query_heads_share_their_kv_head() {
    let mut rng = Rng(13);
    for &(h, group, tq, tk) in &[(4, 2, 17, 17), (6, 3, 1, 129), (4, 4, 3, 3), (2, 1, 5, 5)] {
        let d = 16;
        // Q `[h, tq, d]`, K and V `[h / group, tk, d]`, each its own tensor.
        let hkv = h / group;
        let view = |rows: usize| HeadView {
            offset: 0,
            head_stride: rows * d,
            row_stride: d,
        };
        let c = Case {
            a: Attention {
                heads: h,
                head_dim: d,
                q_rows: tq,
                kv_rows: tk,
                q: view(tq),
                k: view(tk),
                v: view(tk),
                mask_strides: (0, 0),
                scale: 0.25,
                q_scale: 1.0,
                kv_group: group,
            },
            q: rng.vec(h * tq * d),
            k: rng.vec(hkv * tk * d),
            v: rng.vec(hkv * tk * d),
            mask: None,
        };
        let want = reference(&c.a, &c.q, &c.k, &c.v, None);
        close(
            &run(&c).unwrap(),
            &want,
            &format!("h {h} group {group} tq {tq} tk {tk}"),
        );
        // The K/V tensors hold only h / group heads: one head more would overrun them.
        let mut bad = c.a;
        bad.kv_group = 1;
        assert!(bad
            .check(&c.q, &c.k, &c.v, None, &[0.0; 0], usize::MAX)
            .is_err());
    }
    let mut c = case(&mut rng, (3, 4, 2, 2), false, 0, 1.0);
    c.a.kv_group = 2;
    assert!(
        matches!(run(&c), Err(KernelError::Shape { .. })),
        "3 heads in groups of 2"
    );
}
