//! Every committed fixture, lowered for every target family, still matches ExecuTorch 1.5.1's
//! own outputs (1e-4 abs + 1e-4 rel) on whatever CPU runs the test: when the CPU's kernel has
//! another tile width than the target's, the region runs on the panels as packed (slower, same
//! result). Under `scripts/test-arm.sh` this runs once per forced ISA and vector length.

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

fn check(case: &str, target: &str, bytes: &[u8]) {
    let got = run_program(bytes, case, &Registry::standard())
        .unwrap_or_else(|e| panic!("{case} lowered for {target}: {e}"));
    check_outputs(&format!("{case} lowered for {target}"), &got, case);
}

#[test]
fn every_fixture_lowered_for_every_target_matches_executorch() {
    let (mut regions, mut converted, mut packed_filters) = (0, 0, 0);
    for case in cases() {
        let input = pte(&case);
        for t in TARGETS {
            let target = Target::parse(t).unwrap();
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
    // The portable language models and MLPs must actually be lowered (not passed through).
    assert!(
        regions > 100,
        "only {regions} regions made over all fixtures and targets"
    );
    assert!(
        converted > 100 && packed_filters > 100,
        "{converted} XNNPACK regions converted, {packed_filters} filters packed"
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

/// Packed weights replace the originals: the portable programs grow by at most 1 % plus the
/// zero columns that pad each weight's last panel to the tile width (none when the width
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
            let limit = 1.01 * r.input_bytes as f64 + padded as f64;
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

/// The re-planned language models keep the load-time proof that only the last position's
/// logits are read (`exec::demand`), so their LM head still computes one row.
#[test]
fn lowered_language_models_keep_their_row_demand() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program};
    for case in [
        "gpt2_portable",
        "gpt2_xnnpack",
        "opt_portable",
        "optb_portable",
    ] {
        let out = lower(
            pte(case).as_slice(),
            &Target::parse("neon").unwrap(),
            &mut |_, _| {},
        )
        .unwrap();
        assert!(
            out.report.plans[0].kept_because.is_none(),
            "{case}: not re-planned"
        );
        let buf = AlignedBuf::from_bytes(&out.bytes);
        let reg = Registry::standard();
        let program = Program::load(buf.as_slice()).unwrap();
        let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
        let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
        let method = bufs.load(meta, &reg).unwrap();
        assert_eq!(
            method.row_demands().len(),
            1,
            "{case}: no row demand after lowering"
        );
    }
}
