//! Every committed fixture runs through ptera and matches ExecuTorch 1.5.1's own outputs
//! within 1e-4 abs + 1e-4 rel, portable, XNNPACK-lowered and quantized (dynamic int8
//! activations, int8 or int4 weights) alike. The quantized programs meet the same tolerance:
//! ptera quantizes each row with XNNPACK's arithmetic, so the integers are the same and only
//! the fp32 epilogue's rounding can differ (measured: at most 3.1e-7 of the largest output).

#![allow(clippy::result_large_err)]

mod common;

use common::*;
use ptera::Registry;
use ptera::{Error, MethodMeta, OwnedArenas, Program, Shape};

/// Cases whose program holds XNNPACK regions (fp32 or quantized).
fn delegated(case: &str) -> bool {
    ["_xnnpack", "_qd8", "_8da4w", "_qs8"]
        .iter()
        .any(|k| case.ends_with(k))
}

fn run_case(case: &str, registry: &Registry<'static>) -> Result<Outputs, Error> {
    run_program(pte(case).as_slice(), case, registry)
}

fn check_case(case: &str, registry: &Registry<'static>) {
    let got = run_case(case, registry).unwrap_or_else(|e| panic!("{case}: {e}"));
    check_outputs(case, &got, case);
}

#[test]
fn portable_fixtures_match_executorch() {
    let cases: Vec<String> = cases()
        .into_iter()
        .filter(|c| c.ends_with("_portable"))
        .collect();
    assert!(
        cases.len() >= 6,
        "expected portable fixtures of every family"
    );
    for case in &cases {
        check_case(case, &Registry::portable());
    }
}

#[test]
fn xnnpack_fixtures_match_executorch() {
    let cases: Vec<String> = cases()
        .into_iter()
        .filter(|c| c.ends_with("_xnnpack"))
        .collect();
    assert!(
        cases.len() >= 6,
        "expected XNNPACK fixtures of every family"
    );
    for case in &cases {
        check_case(case, &Registry::standard());
    }
}

#[test]
fn quantized_fixtures_match_executorch() {
    let cases: Vec<String> = cases()
        .into_iter()
        .filter(|c| c.ends_with("_qd8") || c.ends_with("_8da4w") || c.ends_with("_qs8"))
        .collect();
    assert!(
        cases.len() >= 10,
        "expected qd8 and 8da4w fixtures of the MLP and the language models, qs8 of the MLP \
         and the CNN"
    );
    for case in &cases {
        check_case(case, &Registry::standard());
    }
    // Without a delegate: the quantized_decomposed operators as portable kernels.
    let portable: Vec<String> = common::cases()
        .into_iter()
        .filter(|c| c.ends_with("_qs8p") || c.ends_with("_qd8p"))
        .collect();
    assert!(
        portable.len() >= 3,
        "expected static and dynamic int8 portable fixtures"
    );
    for case in &portable {
        check_case(case, &Registry::portable());
    }
}

/// A static int8 program whose output is an int8 value converted to fp32 (the CNN's last
/// product): ptera's integers are ExecuTorch's (XNNPACK's requantization, its rounding of
/// ties to even, its order of `(input_scale · weight_scale) / output_scale`), so the output
/// is the same bits, not merely close.
#[test]
fn static_int8_outputs_are_executorch_bits() {
    let got = run_case("cnn_qs8", &Registry::standard()).unwrap();
    let want = outputs("cnn_qs8");
    assert_eq!(got.len(), want.len());
    for ((_, _, g), w) in got.iter().zip(&want) {
        assert_eq!(g, &w.f64(), "cnn_qs8 output");
    }
}

/// The wide quantized GPT-2 (`gpt2w_8da4w`: T = 128, MLP width 1,024) runs its GELU region in
/// chunks of rows (`delegate::xnnpack`'s row chunks): three of its seven `[128, 1024]` fp32
/// intermediates are alive at once, 1.5 MiB of scratch; a chunk of 32 rows needs a quarter of
/// that. Its outputs match ExecuTorch above; here the method's kernel scratch (the largest
/// region's: attention, 0.75 MiB) stays under 1 MiB.
#[test]
fn wide_row_regions_run_in_chunks_of_rows() {
    let registry = Registry::standard();
    let file = pte("gpt2w_8da4w");
    let program = Program::load(file.as_slice()).unwrap();
    let meta = MethodMeta::new(&program, "forward", &registry).unwrap();
    let scratch = meta.kernel_scratch_bytes();
    assert!(scratch < 1 << 20, "kernel scratch {scratch} bytes");
}

/// The registry that packs the XNNPACK regions' fp32 filters at load gives the same outputs,
/// and does pack: the metadata buffer of every fp32 XNNPACK fixture grows by at least its
/// fully-connected and convolution filters.
#[test]
fn xnnpack_fixtures_match_executorch_with_filters_packed_at_load() {
    let cases: Vec<String> = cases().into_iter().filter(|c| delegated(c)).collect();
    assert!(
        cases.len() >= 14,
        "expected fp32 and quantized XNNPACK fixtures"
    );
    for case in &cases {
        check_case(case, &Registry::packing());
        let file = pte(case);
        let program = Program::load(file.as_slice()).unwrap();
        let meta = |r: &Registry<'static>| {
            MethodMeta::new(&program, "forward", r)
                .unwrap()
                .metadata_bytes()
        };
        let (plain, packing) = (meta(&Registry::standard()), meta(&Registry::packing()));
        if case.ends_with("_xnnpack") {
            // Every fp32 fixture has filters of at least 4 KiB.
            assert!(
                packing >= plain + 4096,
                "{case}: metadata {plain} B in place, {packing} B packing: nothing packed"
            );
        } else {
            assert!(packing >= plain, "{case}");
        }
    }
}

#[test]
fn portable_fixtures_also_run_with_the_standard_registry() {
    for case in cases().into_iter().filter(|c| c.ends_with("_portable")) {
        check_case(&case, &Registry::standard());
    }
}

#[test]
fn xnnpack_fixtures_without_backend_fail_at_load_naming_it() {
    for case in cases().into_iter().filter(|c| delegated(c)) {
        match run_case(&case, &Registry::portable()) {
            Err(Error::UnknownBackend { backend, .. }) => {
                assert_eq!(backend.as_str(), "XnnpackBackend", "{case}")
            }
            other => panic!(
                "{case}: expected an unknown-backend error, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

#[test]
fn outputs_are_deterministic_across_runs() {
    let a = run_case("gpt2_portable", &Registry::portable()).unwrap();
    let b = run_case("gpt2_portable", &Registry::portable()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn language_model_heads_compute_only_the_last_position() {
    // Every GPT-2 / OPT fixture ends with logits over all T positions and a select of the last
    // one: the head (portable mm, or the XNNPACK fully-connected region) is told to compute
    // only row T - 1, and the outputs above still match ExecuTorch.
    let registry = Registry::standard();
    for case in ["gpt2", "gpt2b", "opt", "optb"] {
        for kind in ["portable", "xnnpack"] {
            let case = format!("{case}_{kind}");
            let file = pte(&case);
            let program = Program::load(file.as_slice()).unwrap();
            let meta = MethodMeta::new(&program, "forward", &registry).unwrap();
            let t = meta.input(0).unwrap().shape.dims()[1];
            let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
            let method = bufs.load(meta, &registry).unwrap();
            let d = method.row_demands();
            assert_eq!(d.len(), 1, "{case}: {d:?}");
            assert_eq!((d[0].lo, d[0].hi), (t as u32 - 1, t as u32), "{case}");
        }
    }
}

/// An observer sees every executed instruction once, in order, then `finished`; inside XNNPACK
/// regions every node, with its type, output size and multiply-adds.
#[test]
fn observer_sees_every_instruction_and_region_node() {
    #[derive(Default)]
    struct Seen {
        instructions: Vec<(usize, usize)>,
        nodes: Vec<(usize, &'static str, usize, u64)>,
        finished: usize,
    }
    impl ptera::kernel_api::Observer for Seen {
        fn instruction(&mut self, chain: usize, pc: usize) {
            self.instructions.push((chain, pc));
        }
        fn region_op(&mut self, index: usize, kind: &'static str, out_elems: usize, macs: u64) {
            self.nodes.push((index, kind, out_elems, macs));
        }
        fn finished(&mut self) {
            self.finished += 1;
        }
    }
    for case in ["gpt2_xnnpack", "mbv2_xnnpack", "gpt2_portable"] {
        let registry = Registry::standard();
        let file = pte(case);
        let program = Program::load(file.as_slice()).unwrap();
        let meta = MethodMeta::new(&program, "forward", &registry).unwrap();
        let n_instr = meta.num_instructions();
        let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
        let mut method = bufs.load(meta, &registry).unwrap();
        for (i, inp) in inputs(case).iter().enumerate() {
            method
                .set_input(i, inp.dtype, &Shape::new(&inp.shape).unwrap(), &inp.bytes)
                .unwrap();
        }
        let mut seen = Seen::default();
        method.execute_observed(&mut seen).unwrap();
        // Straight-line programs: every instruction once, in order.
        let want: Vec<(usize, usize)> = (0..n_instr).map(|pc| (0, pc)).collect();
        assert_eq!(seen.instructions, want, "{case}");
        assert_eq!(seen.finished, 1, "{case}");
        if delegated(case) {
            assert!(!seen.nodes.is_empty(), "{case}: region nodes");
            assert!(
                seen.nodes.iter().all(|n| !n.1.is_empty() && n.2 > 0),
                "{case}"
            );
            // Products report their multiply-adds.
            assert!(
                seen.nodes.iter().any(|n| n.3 > 0),
                "{case}: some node with multiply-adds"
            );
        } else {
            assert!(seen.nodes.is_empty(), "{case}: no regions");
        }
        if case == "mbv2_xnnpack" {
            // The MobileNet region has convolution nodes with their multiply-adds.
            let conv = seen.nodes.iter().find(|n| n.1 == "XNNConv2d");
            assert!(
                conv.is_some_and(|n| n.3 > 0),
                "mbv2_xnnpack: XNNConv2d with MACs"
            );
        }
    }
}
