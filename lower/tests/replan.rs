//! The memory re-plan on small `OpTest` programs (whose own plans give every tensor its own
//! bytes): the arena shrinks to what is alive at once, views keep reading what was written
//! through their base, and the outputs stay the same.

use ptera::testing::{OpTest, Rng, Step};
use ptera::DType;
use ptera_lower::{lower, lower_with, Options, Target};

fn k(key: &str, args: &[i32]) -> Step {
    Step::Kernel(key.to_string(), args.to_vec())
}

fn arena(report: &ptera_lower::Report) -> (i64, i64) {
    let p = &report.plans[0];
    assert!(p.kept_because.is_none(), "{:?}", p.kept_because);
    (p.before[1], p.after[1])
}

#[test]
fn a_chain_needs_only_what_is_alive_at_once() {
    let mut rng = Rng(11);
    let n = 1000;
    let mut t = OpTest::new("");
    let x = t.input_f32(&[n], &rng.f32s(n, -1.0, 1.0));
    let a = t.intermediate_f32(&[n]);
    let b = t.intermediate_f32(&[n]);
    let c = t.intermediate_f32(&[n]);
    let out = t.output(DType::F32, &[n]);
    t.steps(&[
        k("aten::abs.out", &[x, a, a]),
        k("aten::neg.out", &[a, b, b]),
        k("aten::abs.out", &[b, c, c]),
        k("aten::neg.out", &[c, out, out]),
    ]);
    let target = Target::parse("neon").unwrap();
    let l = lower(&t.build(), &target, &mut |_, _| {}).unwrap();
    let (before, after) = arena(&l.report);
    // Five 4000-byte tensors before; x, out and one intermediate pair alive at once after.
    assert!(before >= 5 * 4000, "{before}");
    assert!(after <= 4 * 4016 && after < before, "{before} -> {after}");
    assert_eq!(
        t.run_program(&l.bytes).unwrap()[0].f32(),
        t.run().unwrap()[0].f32()
    );
    // What is alive at the high-water mark adds up to it, largest first.
    let p = &l.report.plans[0];
    let live: u64 = p.peak_values.iter().map(|v| v.1).sum();
    assert_eq!(live, p.peak_live_bytes);
    assert_eq!(p.peak_values.len(), p.peak_groups);
    assert!(p.peak_values.windows(2).all(|w| w[0].1 >= w[1].1));
    // Without the re-plan the file keeps ExecuTorch's sizes.
    let kept = lower_with(
        &t.build(),
        &target,
        Options {
            replan: false,
            ..Options::default()
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert!(kept.report.plans.is_empty());
}

/// `v` is a view of `a` (same bytes, another shape) that is read only after another tensor
/// was written and `a` itself is no longer named: the re-plan must keep `v` on `a`'s bytes.
#[test]
fn a_view_read_later_keeps_its_base_bytes() {
    let mut rng = Rng(12);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 6], &rng.f32s(12, -1.0, 1.0));
    let a = t.intermediate_f32(&[2, 6]);
    let v = t.view_of(a, &[3, 4]);
    let c = t.intermediate_f32(&[2, 6]);
    let d = t.output(DType::F32, &[2, 6]);
    let out = t.output(DType::F32, &[3, 4]);
    t.steps(&[
        k("aten::abs.out", &[x, a, a]),
        k("aten::neg.out", &[x, c, c]),
        k("aten::abs.out", &[c, d, d]),
        k("aten::neg.out", &[v, out, out]),
    ]);
    let l = lower(&t.build(), &Target::parse("neon").unwrap(), &mut |_, _| {}).unwrap();
    let (before, after) = arena(&l.report);
    assert!(after <= before);
    let want = t.run().unwrap();
    let got = t.run_program(&l.bytes).unwrap();
    assert_eq!(got[0].f32(), want[0].f32());
    assert_eq!(got[1].f32(), want[1].f32());
}

/// The lowered file records both plans (named data `LOWERING_RECORD`, JSON) for
/// `xtask inspect`; the runtime ignores it.
#[test]
fn the_file_records_both_plans() {
    let mut rng = Rng(13);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[64], &rng.f32s(64, -1.0, 1.0));
    let a = t.intermediate_f32(&[64]);
    let out = t.output(DType::F32, &[64]);
    t.steps(&[
        k("aten::abs.out", &[x, a, a]),
        k("aten::neg.out", &[a, out, out]),
    ]);
    let l = lower(&t.build(), &Target::parse("neon").unwrap(), &mut |_, _| {}).unwrap();
    let buf = ptera::host::AlignedBuf::from_bytes(&l.bytes);
    let program = ptera::Program::load(buf.as_slice()).unwrap();
    let rec: serde_json::Value =
        serde_json::from_slice(program.named_data(ptera_lower::LOWERING_RECORD).unwrap()).unwrap();
    let (before, after) = arena(&l.report);
    assert_eq!(rec["target"], "neon");
    assert_eq!(rec["memory_plans"][0]["executorch_arena_bytes"][0], before);
    assert_eq!(rec["memory_plans"][0]["ptera_arena_bytes"][0], after);
    assert_eq!(
        t.run_program(&l.bytes).unwrap()[0].f32(),
        t.run().unwrap()[0].f32()
    );
}
