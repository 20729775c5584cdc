//! Every committed fixture, lowered for every target family, still matches ExecuTorch 1.5.1's
//! own outputs (1e-4 abs + 1e-4 rel) on whatever CPU runs the test: when the CPU's kernel has
//! another tile width than the target's, the region runs on the panels as packed (slower, same
//! result). Under `scripts/test-arm.sh` this runs once per forced ISA and vector length.
//! `PTERA_LOWER_TARGETS` (comma-separated target specs) replaces the target list: the Arm
//! matrix runs every target at its first configuration and, at the other vector lengths, the
//! target of the forced ISA at that length plus one whose tile differs.

#![allow(clippy::result_large_err)]

#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use ptera::Registry;
use ptera_lower::{lower, Target};

const TARGETS: [&str; 6] = [
    "generic",
    "neon",
    "sve2:256",
    "sme:512",
    "sme2:512",
    "x86-64-v3",
];

/// The targets to lower for: `PTERA_LOWER_TARGETS` when set, else [`TARGETS`].
fn targets() -> Vec<String> {
    match std::env::var("PTERA_LOWER_TARGETS") {
        Ok(list) if !list.trim().is_empty() => {
            list.split(',').map(|t| t.trim().to_string()).collect()
        }
        _ => TARGETS.iter().map(|t| t.to_string()).collect(),
    }
}

fn check(case: &str, target: &str, bytes: &[u8]) {
    let got = run_program(bytes, case, &Registry::standard())
        .unwrap_or_else(|e| panic!("{case} lowered for {target}: {e}"));
    check_outputs(&format!("{case} lowered for {target}"), &got, case);
}

/// Lowers every `(case, target)` pair of the cases that `pick` selects, runs the result and
/// checks it against ExecuTorch's outputs; returns (regions made, XNNPACK regions converted,
/// filters packed).
fn lower_and_check(pick: impl Fn(&str) -> bool) -> (usize, usize, usize) {
    let (mut regions, mut converted, mut packed_filters) = (0, 0, 0);
    let targets = targets();
    for case in cases().into_iter().filter(|c| pick(c)) {
        let input = pte(&case);
        for t in &targets {
            let target = Target::parse(t).unwrap_or_else(|e| panic!("PTERA_LOWER_TARGETS: {e}"));
            let out = lower(input.as_slice(), &target, &mut |_, _| {})
                .unwrap_or_else(|e| panic!("lowering {case} for {t}: {e}"));
            regions += out
                .report
                .methods
                .iter()
                .map(|m| m.regions.len())
                .sum::<usize>();
            for m in &out.report.methods {
                // Every XNNPACK region becomes a PteraBackend region.
                assert!(
                    m.other_delegates
                        .iter()
                        .all(|(id, _)| id != "XnnpackBackend"),
                    "{case} ({t}): XNNPACK regions left unconverted"
                );
                converted += m.converted.len();
                packed_filters += m.converted.iter().map(|c| c.packed_filters).sum::<usize>();
            }
            check(&case, t, &out.bytes);
        }
    }
    (regions, converted, packed_filters)
}

// The fixtures in two halves (portable programs, and the rest), one test each, so that the
// test harness runs them on two threads (under qemu-user too).

#[test]
fn every_portable_fixture_lowered_for_every_target_matches_executorch() {
    let (regions, converted, _) = lower_and_check(|c| c.ends_with("_portable"));
    // The portable language models and MLPs must actually be lowered (not passed through).
    let per_target = 100 / TARGETS.len();
    let n = targets().len();
    assert!(
        regions > per_target * n,
        "only {regions} regions made over the portable fixtures and targets"
    );
    assert_eq!(converted, 0, "portable programs have no XNNPACK regions");
}

#[test]
fn every_delegated_fixture_lowered_for_every_target_matches_executorch() {
    let (_, converted, packed_filters) = lower_and_check(|c| !c.ends_with("_portable"));
    let per_target = 100 / TARGETS.len();
    let n = targets().len();
    assert!(
        converted > per_target * n && packed_filters > per_target * n,
        "{converted} XNNPACK regions converted, {packed_filters} filters packed"
    );
}

/// Static int8 regions (`_qs8`: int8 activations, `qcint8` filters) are converted like the
/// others, but their filters stay row-major: the static products read them so (`--target`s
/// with every integer tile: lane-indexed `SDOT`, `SMMLA`, `SMOPA`). Their outputs are checked
/// by the tests above.
#[test]
fn static_int8_filters_stay_row_major() {
    for case in ["mlp_qs8", "cnn_qs8"] {
        let input = pte(case);
        for t in ["neon", "sve2:256", "sme2:512"] {
            let out = lower(input.as_slice(), &Target::parse(t).unwrap(), &mut |_, _| {}).unwrap();
            for m in &out.report.methods {
                assert!(!m.converted.is_empty(), "{case} ({t}): no region converted");
                for c in &m.converted {
                    let repacked = c.repacked_int8_filters + c.packed_filters;
                    assert_eq!(repacked, 0, "{case} ({t}): an int8 filter repacked");
                }
            }
        }
    }
}

/// `--backend none`: only the rewrites and the re-plan. Every fixture keeps standard kernel
/// calls (no PteraBackend delegate appears, XNNPACK regions stay XNNPACK's) and still matches
/// ExecuTorch; over the fixtures the rewrites fold, remove copies and rewrite LM heads.
#[test]
fn every_fixture_rewritten_without_regions_matches_executorch() {
    use ptera::host::AlignedBuf;
    use ptera::Program;
    use ptera_lower::{lower_with, Options};
    let opts = Options {
        regions: false,
        ..Options::default()
    };
    let target = Target::parse("neon").unwrap();
    let (mut folded, mut copies, mut heads) = (0, 0, 0);
    for case in cases() {
        let input = pte(&case);
        let out = lower_with(input.as_slice(), &target, opts, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("rewriting {case}: {e}"));
        for m in &out.report.rewrites.methods {
            folded += m.folded.len();
            copies += m.copies.len();
            heads += m.lm_heads.len();
        }
        let buf = AlignedBuf::from_bytes(&out.bytes);
        let p = Program::load(buf.as_slice()).unwrap();
        for plan in p.methods() {
            for d in plan.delegates().unwrap_or_default().iter() {
                assert_ne!(d.id(), Some(ptera::delegate::ptera::ID), "{case}: a region");
            }
        }
        check(&case, "none", &out.bytes);
    }
    assert!(
        folded > 100 && copies > 20 && heads >= 4,
        "{folded} calls folded, {copies} copies removed, {heads} LM heads rewritten"
    );
}

#[test]
fn lowering_is_deterministic() {
    for case in ["gpt2_portable", "opt_portable", "mlp_portable"] {
        let input = pte(case);
        let target = Target::parse("neon").unwrap();
        let a = lower(input.as_slice(), &target, &mut |_, _| {}).unwrap();
        let b = lower(input.as_slice(), &target, &mut |_, _| {}).unwrap();
        assert_eq!(a.bytes, b.bytes, "{case}: two lowerings differ");
    }
}

/// Packed weights replace the originals: the portable programs grow by at most 1 % plus what
/// constant folding added (net) plus the zero columns that pad each weight's last panel to the tile width (none when the width
/// divides, e.g. Neon's 8 or 12 on 64- and 192-wide weights; SVE2 at 256 bits packs 24 wide,
/// so a 64-wide weight becomes 72), and the packed bytes are exactly the removed weights plus
/// that padding.
#[test]
fn lowered_portable_programs_replace_their_weights() {
    for case in [
        "gpt2_portable",
        "gpt2b_portable",
        "opt_portable",
        "optb_portable",
        "llama_portable",
        "bert_portable",
    ] {
        let input = pte(case);
        for t in ["generic", "neon", "sme2:512", "sve2:256"] {
            let target = Target::parse(t).unwrap();
            let out = lower(input.as_slice(), &target, &mut |_, _| {}).unwrap();
            let r = &out.report;
            assert!(r.packed_weights > 0, "{case} ({t}): nothing packed");
            // (Each packed weight of these programs has one reader.)
            let padded: usize = r.methods[0]
                .regions
                .iter()
                .filter_map(|g| {
                    g.packed_nr
                        .map(|nr| g.k * (g.n.div_ceil(nr) * nr - g.n) * 4)
                })
                .sum();
            assert_eq!(
                r.packed_bytes,
                r.removed_weight_bytes + padded,
                "{case} ({t}): packed size"
            );
            // Folded tables (masks, rotary cos/sin) may add what the constants they replace
            // did not hold.
            let folded = r
                .rewrites
                .added_constant_bytes
                .saturating_sub(r.rewrites.dropped_constant_bytes);
            let limit = 1.01 * r.input_bytes as f64 + padded as f64 + folded as f64;
            assert!(
                (r.output_bytes as f64) <= limit,
                "{case} ({t}): {} -> {} bytes ({padded} bytes of panel padding)",
                r.input_bytes,
                r.output_bytes
            );
        }
    }
}

/// From an XNNPACK input the language models' lowered files are smaller than their inputs:
/// the LM head's filter (a copy of the token embedding in XNNPACK's named data) is read from
/// the embedding constant instead, and packed filters replace their originals.
#[test]
fn lowered_xnnpack_language_models_shrink() {
    for case in [
        "gpt2_xnnpack",
        "gpt2b_xnnpack",
        "opt_xnnpack",
        "optb_xnnpack",
    ] {
        let input = pte(case);
        // Tiles of 8 to 16 columns (32- and 48-wide ones pad these models' 48- and 80-wide
        // weights by up to a third, which can outweigh the saving on a file this small).
        for t in ["neon", "generic", "x86-64-v3", "sme2:256"] {
            let out = lower(input.as_slice(), &Target::parse(t).unwrap(), &mut |_, _| {}).unwrap();
            let r = &out.report;
            let aliased: usize = r.methods[0]
                .converted
                .iter()
                .map(|c| c.aliased_filters)
                .sum();
            assert_eq!(aliased, 1, "{case} ({t}): the tied LM head");
            assert!(
                r.output_bytes < r.input_bytes,
                "{case} ({t}): {} -> {} bytes",
                r.input_bytes,
                r.output_bytes
            );
        }
    }
}

/// The language models' LM heads compute one row: rewritten at lower time (the product's
/// input is sliced first; no load-time proof needed), on the portable programs and on an
/// XNNPACK head region (its payload narrowed to one row: the `[T, vocab]` logits leave the
/// arena), and, when that rewrite is off, still proven at load time (`exec::demand`) after
/// the re-plan.
#[test]
fn lowered_language_models_compute_one_logits_row() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program};
    use ptera_lower::{lower_with, Options, Rewrites};
    let demands = |bytes: &[u8]| {
        let buf = AlignedBuf::from_bytes(bytes);
        let reg = Registry::standard();
        let program = Program::load(buf.as_slice()).unwrap();
        let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
        let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
        let method = bufs.load(meta, &reg).unwrap();
        method.row_demands().len()
    };
    let neon = Target::parse("neon").unwrap();
    let without_head_rewrite = |case: &str| {
        let opts = Options {
            rewrites: Rewrites {
                lm_head: false,
                ..Rewrites::ALL
            },
            ..Options::default()
        };
        lower_with(pte(case).as_slice(), &neon, opts, &mut |_, _| {}).unwrap()
    };
    for case in ["gpt2_portable", "opt_portable", "optb_portable"] {
        let out = lower(pte(case).as_slice(), &neon, &mut |_, _| {}).unwrap();
        let r = &out.report;
        assert!(r.plans[0].kept_because.is_none(), "{case}: not re-planned");
        assert_eq!(r.rewrites.methods[0].lm_heads.len(), 1, "{case}: LM head");
        let head = r.methods[0].regions.last().unwrap();
        assert_eq!(head.max_m, 1, "{case}: the LM head region computes one row");
        assert_eq!(demands(&out.bytes), 0, "{case}: nothing left to prove");
        let out = without_head_rewrite(case);
        assert!(out.report.rewrites.methods[0].lm_heads.is_empty());
        assert_eq!(
            demands(&out.bytes),
            1,
            "{case}: no row demand without the rewrite"
        );
    }
    for case in ["gpt2_xnnpack", "gpt2_8da4w", "opt_qd8"] {
        let out = lower(pte(case).as_slice(), &neon, &mut |_, _| {}).unwrap();
        let r = &out.report;
        assert!(r.plans[0].kept_because.is_none());
        let heads = &r.rewrites.methods[0].lm_heads;
        assert_eq!(heads.len(), 1, "{case}: the XNNPACK head region");
        assert_eq!(heads[0].operator, "XNNPACK region");
        assert_eq!(demands(&out.bytes), 0, "{case}: nothing left to prove");
        // No planned tensor holds more than one row of logits any more (T = 16 before).
        let vocab = *outputs(case)[0].shape.last().unwrap();
        let planned_logits = |bytes: &[u8]| {
            let buf = AlignedBuf::from_bytes(bytes);
            let program = Program::load(buf.as_slice()).unwrap();
            let plan = program.methods().next().unwrap();
            ptera_lower::partition::PlanView::new(plan)
                .tensors
                .iter()
                .flatten()
                .filter(|t| t.alloc.is_some() && t.sizes.last() == Some(&vocab))
                .map(|t| t.sizes.iter().product::<usize>() / vocab)
                .max()
                .unwrap_or(0)
        };
        assert_eq!(planned_logits(pte(case).as_slice()), 16, "{case}: input");
        assert_eq!(planned_logits(&out.bytes), 1, "{case}: lowered");
        let (before, after) = (&r.plans[0].before, &r.plans[0].after);
        assert!(
            after[1] < before[1],
            "{case}: arena {before:?} -> {after:?}"
        );
        let out = without_head_rewrite(case);
        assert_eq!(
            demands(&out.bytes),
            1,
            "{case}: proven at load without the rewrite"
        );
    }
}

/// Which XNNPACK regions are row regions (each output row from the same input row), and a
/// head region narrowed to one row is one of one row.
#[test]
fn xnnpack_row_regions_are_the_row_by_row_ones() {
    use ptera::format::fb;
    use ptera::host::AlignedBuf;
    use ptera::Program;
    use ptera_lower::xnn::{narrow_rows, row_region};
    let buf: AlignedBuf = pte("gpt2_8da4w");
    let program = Program::load(buf.as_slice()).unwrap();
    let plan = program.methods().next().unwrap();
    let (mut rows, mut others) = (0, 0);
    let mut last = None;
    for del in plan.delegates().unwrap().iter() {
        let processed = del.processed().unwrap();
        assert_eq!(processed.location(), fb::DataLocation::SEGMENT);
        let payload = program.delegate_data(processed).unwrap();
        let (g, _, _) = ptera::delegate::xnnpack::graph_of(payload).unwrap();
        let kinds: Vec<_> = g
            .xnodes()
            .unwrap()
            .iter()
            .map(|n| ptera::delegate::xnnpack::graph::node_name(n.xnode_union_type()))
            .collect();
        let r = row_region(payload);
        // Products over rows, softmax-free: row regions exactly when no node mixes rows.
        let mixes = kinds.iter().any(|k| {
            matches!(
                *k,
                "XNNBatchMatrixMultiply" | "XNNStaticTranspose" | "XNNStaticReshape" | "XNNSoftmax"
            )
        });
        match r {
            Some(r) => {
                assert!(!mixes, "{kinds:?}");
                assert_eq!(r.rows, 16, "{kinds:?}");
                rows += 1;
                last = Some((payload.to_vec(), r));
            }
            None => others += 1,
        }
    }
    assert!(
        rows >= 5 && others >= 4,
        "{rows} row regions, {others} others"
    );
    // The last one is the LM head: narrowed, the same region over one row, same size.
    let (payload, r) = last.unwrap();
    let narrowed = narrow_rows(&payload, r.rows, 1).unwrap();
    assert_eq!(narrowed.len(), payload.len());
    assert!(
        row_region(&narrowed).is_none(),
        "one row: nothing to narrow"
    );
    // Every non-constant value now has one row; the constants kept their dims.
    let dims = |p: &[u8]| -> Vec<(bool, Vec<u32>)> {
        let (g, _, _) = ptera::delegate::xnnpack::graph_of(p).unwrap();
        g.xvalues()
            .unwrap()
            .iter()
            .filter_map(|v| {
                v.xvalue_union_as_xnntensor_value().or_else(|| {
                    v.xvalue_union_as_xnnquantized_tensor_value()
                        .and_then(|q| q.tensor_value())
                })
            })
            .map(|t| {
                (
                    t.constant_buffer_idx() != 0,
                    t.dims().unwrap().iter().collect(),
                )
            })
            .collect()
    };
    let (before, after) = (dims(&payload), dims(&narrowed));
    assert_eq!(before.len(), after.len());
    for ((konst, b), (_, a)) in before.iter().zip(&after) {
        if *konst {
            assert_eq!(a, b);
        } else {
            let r = b.len();
            assert_eq!(b[r - 2], 16);
            assert_eq!(a[..r - 2], b[..r - 2]);
            assert_eq!((a[r - 2], a[r - 1]), (1, b[r - 1]), "{b:?} -> {a:?}");
        }
    }
}

/// A lowered language model takes its last layer's rows with slices of one contiguous block
/// (the last position's hidden state, its mask row), read by ptera regions through views:
/// each is elided at load (`exec::elide`), which needs the regions to say which arguments
/// they only read (`Backend::arg_access`) and the views to move with the slice's output.
#[test]
fn lowered_language_models_elide_their_row_slices() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program};
    let neon = Target::parse("neon").unwrap();
    for case in ["gpt2_portable", "opt_portable"] {
        let out = lower(pte(case).as_slice(), &neon, &mut |_, _| {}).unwrap();
        let buf = AlignedBuf::from_bytes(&out.bytes);
        let reg = Registry::standard();
        let program = Program::load(buf.as_slice()).unwrap();
        let plan = program.methods().next().unwrap();
        let ops = plan.operators().unwrap();
        let chain = plan.chains().unwrap().get(0);
        let slices: Vec<usize> = chain
            .instructions()
            .unwrap()
            .iter()
            .enumerate()
            .filter_map(|(i, ins)| {
                let k = ins.instr_args_as_kernel_call()?;
                let name = ops.get(k.op_index() as usize).name()?;
                matches!(name, "aten::slice_copy" | "aten::select_copy").then_some(i)
            })
            .collect();
        assert!(!slices.is_empty(), "{case}: no slices");
        let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
        let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
        let method = bufs.load(meta, &reg).unwrap();
        let dispatched: Vec<usize> = method.dispatched_calls().collect();
        for i in &slices {
            assert!(!dispatched.contains(i), "{case}: slice {i} still runs");
        }
        drop(method);
        check(case, "neon", &out.bytes);
    }
}

/// Operator keys of the kernel calls of method 0's chain 0.
fn kernel_ops(bytes: &[u8]) -> Vec<String> {
    let buf = ptera::host::AlignedBuf::from_bytes(bytes);
    let program = ptera::Program::load(buf.as_slice()).unwrap();
    let plan = program.methods().next().unwrap();
    ptera_lower::partition::PlanView::new(plan)
        .instrs
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| !k.is_empty())
        .collect()
}

/// Every attention of the decoders (Llama's grouped-query heads too), encoders and the ViT
/// becomes one `Attention` region (the two products, the scale, the mask, the softmax and the
/// head permutes, splits, slices and K/V head repeats around them: no `bmm` or `_softmax`
/// call is left), a decoder's last layer for its last query row only; the lowered programs still match ExecuTorch and give the same bits on 2
/// and 4 cores as on one. Without it (`attention: false`) the chains stay portable calls.
#[test]
fn attention_chains_become_one_region_each() {
    use ptera::parallel::{scoped, Team};
    use ptera::testing::CountingTeam;
    use ptera_lower::{lower_with, Options};
    let neon = Target::parse("neon").unwrap();
    let registry = Registry::standard();
    let bits = |o: &Outputs| -> Vec<Vec<u64>> {
        o.iter()
            .map(|(_, _, v)| v.iter().map(|x| x.to_bits()).collect())
            .collect()
    };
    let teams = [CountingTeam::new(2), CountingTeam::new(4)];
    for (case, layers, decoder) in [
        ("gpt2_portable", 2, true),
        ("opt_portable", 2, true),
        ("gpt2t64_portable", 2, true),
        ("optt64_portable", 2, true),
        ("optb_portable", 3, true),
        ("llama_portable", 2, true),
        ("bert_portable", 2, false),
        ("vit_portable", 2, false),
    ] {
        let out = lower(pte(case).as_slice(), &neon, &mut |_, _| {}).unwrap();
        let a = &out.report.methods[0].attentions;
        assert_eq!(a.len(), layers, "{case}: attention regions");
        for (i, r) in a.iter().enumerate() {
            let least = if decoder { 9 } else { 5 };
            assert!(r.absorbed.len() >= least, "{case}: {:?}", r.absorbed);
            assert!(r.absorbed.iter().any(|k| k == "aten::_softmax.out"));
            // Llama's 4 query heads share 2 K/V heads.
            let group = if case == "llama_portable" { 2 } else { 1 };
            assert_eq!(r.kv_group, group, "{case}: query heads per K/V head");
            let last = i + 1 == layers;
            if decoder {
                assert!(r.masked, "{case}: a decoder's attention is masked");
                assert_eq!(
                    r.q_rows == 1,
                    last,
                    "{case} layer {i}: {} query rows",
                    r.q_rows
                );
            }
        }
        let ops = kernel_ops(&out.bytes);
        for gone in ["aten::bmm.out", "aten::_softmax.out"] {
            assert!(!ops.iter().any(|k| k == gone), "{case}: {gone} left");
        }
        check(case, "neon", &out.bytes);
        let one = run_program(&out.bytes, case, &registry).unwrap();
        for team in &teams {
            let many = scoped(team, || run_program(&out.bytes, case, &registry)).unwrap();
            assert!(
                bits(&one) == bits(&many),
                "{case} lowered: {} cores differ from one",
                team.cores()
            );
        }
        let opts = Options {
            attention: false,
            ..Options::default()
        };
        let kept = lower_with(pte(case).as_slice(), &neon, opts, &mut |_, _| {}).unwrap();
        assert!(kept.report.methods[0].attentions.is_empty());
        let softmaxes = kernel_ops(&kept.bytes)
            .iter()
            .filter(|k| *k == "aten::_softmax.out")
            .count();
        assert_eq!(softmaxes, layers, "{case} without attention regions");
        check(case, "neon (no attention regions)", &kept.bytes);
    }
    for team in &teams {
        assert!(
            team.splits() > 10,
            "{} cores: {}",
            team.cores(),
            team.splits()
        );
    }
}

/// The regions of one product over packed panels bind their input, output and bias at load
/// (`Backend::prepare_call`), and run from that record (the outputs match ExecuTorch: the
/// tests above run the same programs). Lowered for Neon, GPT-2 has eight such regions and OPT
/// twelve (Q, K and V are products of their own); their LM heads read the weight as an
/// argument and attention regions bind their tensors per call.
#[test]
fn one_product_regions_bind_their_tensors_at_load() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program};
    let neon = Target::parse("neon").unwrap();
    for (case, want) in [("gpt2_portable", 8), ("opt_portable", 12)] {
        let out = lower(pte(case).as_slice(), &neon, &mut |_, _| {}).unwrap();
        let buf = AlignedBuf::from_bytes(&out.bytes);
        let reg = Registry::standard();
        let program = Program::load(buf.as_slice()).unwrap();
        let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
        let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
        let method = bufs.load(meta, &reg).unwrap();
        assert_eq!(method.prepared_delegate_calls(), want, "{case}");
    }
}

/// Lowered language models loaded with a team installed (their products' splits decided then,
/// `gemm::SplitHint`) give one core's bits: run on that team, on a team of another size (the
/// decisions are then ignored) and on one core; and loaded without a team, run on a team.
#[test]
fn lowered_programs_split_as_decided_at_load_keep_one_cores_bits() {
    use ptera::host::AlignedBuf;
    use ptera::parallel::scoped;
    use ptera::testing::CountingTeam;
    use ptera::{MethodMeta, OwnedArenas, Program, Shape};
    let (two, four) = (CountingTeam::new(2), CountingTeam::new(4));
    let reg = Registry::standard();
    for case in ["gpt2_portable", "opt_portable", "gpt2_xnnpack"] {
        for t in ["neon", "x86-64-v3"] {
            let out = lower(
                pte(case).as_slice(),
                &Target::parse(t).unwrap(),
                &mut |_, _| {},
            )
            .unwrap();
            let buf = AlignedBuf::from_bytes(&out.bytes);
            let program = Program::load(buf.as_slice()).unwrap();
            // Loaded on `load_on`, run on `run_on` (None: one core); the outputs' bits.
            let run = |load_on: Option<&CountingTeam>, run_on: Option<&CountingTeam>| {
                let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
                let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
                let load = || bufs.load(meta, &reg);
                let mut method = match load_on {
                    Some(team) => scoped(team, load),
                    None => load(),
                }
                .unwrap();
                for (i, inp) in inputs(case).iter().enumerate() {
                    let shape = Shape::new(&inp.shape).unwrap();
                    method.set_input(i, inp.dtype, &shape, &inp.bytes).unwrap();
                }
                match run_on {
                    Some(team) => scoped(team, || method.execute()),
                    None => method.execute(),
                }
                .unwrap();
                let o = method.output(0).unwrap();
                (0..o.numel())
                    .map(|k| o.get_f64(k).to_bits())
                    .collect::<Vec<_>>()
            };
            let one = run(None, None);
            let splits = four.splits();
            for (load_on, run_on) in [
                (Some(&four), Some(&four)),
                (Some(&four), Some(&two)),
                (Some(&two), Some(&four)),
                (Some(&four), None),
                (None, Some(&four)),
            ] {
                assert!(
                    run(load_on, run_on) == one,
                    "{case} lowered for {t}: loaded on {:?} cores, run on {:?}",
                    load_on.map(ptera::parallel::Team::cores),
                    run_on.map(ptera::parallel::Team::cores),
                );
            }
            assert!(four.splits() > splits, "{case} ({t}): nothing split");
        }
    }
}
