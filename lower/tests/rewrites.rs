//! The graph rewrites on small `OpTest` programs: the instruction list before and after, and
//! the outputs, which must not change. `--backend none` keeps every rewrite in standard
//! kernel calls (no regions), so these compare the rewritten program alone.

use ptera::host::AlignedBuf;
use ptera::testing::{OpTest, Rng, Step, TestTensor};
use ptera::{DType, Program};
use ptera_lower::{lower_with, Lowered, Options, Rewrites, Target};

fn lowered(t: &OpTest, rewrites: Rewrites) -> Lowered {
    lowered_replan(t, rewrites, Options::default().replan)
}

/// [`lowered`] with the activation re-plan on or off.
fn lowered_replan(t: &OpTest, rewrites: Rewrites, replan: bool) -> Lowered {
    let opts = Options {
        rewrites,
        regions: false,
        replan,
        ..Options::default()
    };
    lower_with(
        &t.build(),
        &Target::parse("neon").unwrap(),
        opts,
        &mut |_, _| {},
    )
    .expect("lowering")
}

/// Operator of every instruction of the first method (`name.overload`; delegate calls as
/// `delegate`).
fn ops(bytes: &[u8]) -> Vec<String> {
    let buf = AlignedBuf::from_bytes(bytes);
    let p = Program::load(buf.as_slice()).unwrap();
    let plan = p.methods().next().unwrap();
    let names: Vec<String> = plan
        .operators()
        .unwrap()
        .iter()
        .map(|o| format!("{}.{}", o.name().unwrap(), o.overload().unwrap()))
        .collect();
    plan.chains()
        .unwrap()
        .get(0)
        .instructions()
        .unwrap()
        .iter()
        .map(|i| match i.instr_args_as_kernel_call() {
            Some(k) => names[k.op_index() as usize].clone(),
            None => "delegate".to_string(),
        })
        .collect()
}

/// Whether every list value of the first method names only values before it (ExecuTorch
/// parses the value table in order and refuses a list whose items come later).
fn lists_name_earlier_values(bytes: &[u8]) -> bool {
    let buf = AlignedBuf::from_bytes(bytes);
    let p = Program::load(buf.as_slice()).unwrap();
    let plan = p.methods().next().unwrap();
    plan.values().unwrap().iter().enumerate().all(|(i, e)| {
        let items: Vec<i64> = match (e.val_as_tensor_list(), e.val_as_int_list()) {
            (Some(l), _) => l.items().unwrap().iter().map(i64::from).collect(),
            (_, Some(l)) => l.items().unwrap().iter().collect(),
            _ => Vec::new(),
        };
        items.iter().all(|&v| v < i as i64)
    })
}

fn same(a: &[TestTensor], b: &[TestTensor]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.shape, y.shape);
        assert_eq!(x.bytes, y.bytes, "outputs differ");
    }
}

/// A causal-mask construction like the language-model exports': `arange` → `unsqueeze` (twice)
/// → `le` → `where(mask, x, -inf)`. Only `where` reads the input.
fn masked(t_len: usize, seed: u64) -> OpTest {
    let mut rng = Rng(seed);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[t_len, t_len], &rng.f32s(t_len * t_len, -1.0, 1.0));
    let (zero, end, one) = (t.int(0), t.int(t_len as i64), t.int(1));
    let pos = t.intermediate(DType::I64, &[t_len]);
    let (d0, d1) = (t.int(0), t.int(1));
    let row = t.intermediate(DType::I64, &[1, t_len]);
    let col = t.intermediate(DType::I64, &[t_len, 1]);
    let mask = t.intermediate(DType::Bool, &[t_len, t_len]);
    let ninf = t.constant_f32(&[], &[f32::NEG_INFINITY]);
    let y = t.output(DType::F32, &[t_len, t_len]);
    t.steps(&[
        Step::Kernel(
            "aten::arange.start_out".into(),
            vec![zero, end, one, pos, pos],
        ),
        Step::Kernel("aten::unsqueeze_copy.out".into(), vec![pos, d0, row, row]),
        Step::Kernel("aten::unsqueeze_copy.out".into(), vec![pos, d1, col, col]),
        Step::Kernel("aten::le.Tensor_out".into(), vec![row, col, mask, mask]),
        Step::Kernel("aten::where.self_out".into(), vec![mask, x, ninf, y, y]),
    ]);
    t
}

#[test]
fn constant_subgraphs_are_evaluated_at_lower_time() {
    for n in [1, 3, 17, 129] {
        let t = masked(n, n as u64);
        let want = t.run().unwrap();
        let before = ops(&t.build());
        assert_eq!(before.len(), 5);
        let l = lowered(&t, Rewrites::ALL);
        let m = &l.report.rewrites.methods[0];
        assert_eq!(m.folded.len(), 4, "T = {n}: {:?}", m.folded);
        // The mask became one constant of T·T bools.
        assert_eq!(m.constants.len(), 1);
        assert_eq!(m.constants[0].1, vec![n, n]);
        assert_eq!(m.constants[0].2, n * n);
        assert_eq!(ops(&l.bytes), ["aten::where.self_out"]);
        same(&t.run_program(&l.bytes).unwrap(), &want);
        // Off: the program keeps its five calls.
        let off = lowered(&t, Rewrites::NONE);
        assert_eq!(ops(&off.bytes).len(), 5);
        same(&t.run_program(&off.bytes).unwrap(), &want);
    }
}

/// What reads an input is never folded, and neither is a call writing a method output (the
/// output keeps its own storage).
#[test]
fn inputs_and_outputs_stop_folding() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let (zero, end, one) = (t.int(0), t.int(4), t.int(1));
    let pos = t.output(DType::I64, &[4]);
    let alpha = t.int(1);
    let c = t.constant_f32(&[4], &[0.5, 0.25, 0.125, 1.0]);
    let y = t.output(DType::F32, &[4]);
    t.steps(&[
        Step::Kernel(
            "aten::arange.start_out".into(),
            vec![zero, end, one, pos, pos],
        ),
        Step::Kernel("aten::add.out".into(), vec![x, c, alpha, y, y]),
    ]);
    let l = lowered(&t, Rewrites::ALL);
    assert!(l.report.rewrites.methods[0].folded.is_empty());
    assert_eq!(ops(&l.bytes).len(), 2);
    same(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// `x → clone → add(·, c) → y`: the clone goes, `add` reads `x`'s bytes.
fn cloned(n: usize, overwrite: Overwrite) -> OpTest {
    let mut rng = Rng(n as u64);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[n], &rng.f32s(n, -1.0, 1.0));
    let none = t.none();
    let d = t.intermediate_f32(&[n]);
    let c = t.constant_f32(&[n], &rng.f32s(n, -1.0, 1.0));
    let alpha = t.int(1);
    let y = t.output(DType::F32, &[n]);
    let mut steps = vec![Step::Kernel("aten::clone.out".into(), vec![x, none, d, d])];
    if overwrite != Overwrite::No {
        // `z` on x's bytes, written with 2·d after the clone and before the clone's output
        // is read again.
        let z = t.view_of(x, &[n]);
        let two = t.constant_f32(&[], &[2.0]);
        steps.push(Step::Kernel("aten::mul.out".into(), vec![d, two, z, z]));
    }
    // Reading x at the end makes `z` a view of the live x (written through it): y = d + x.
    let second = if overwrite == Overwrite::ThroughAView {
        x
    } else {
        c
    };
    steps.push(Step::Kernel(
        "aten::add.out".into(),
        vec![d, second, alpha, y, y],
    ));
    t.steps(&steps);
    t
}

/// What [`cloned`] writes over the clone's input.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overwrite {
    No,
    /// Another tensor placed over x's bytes once x is dead (ExecuTorch reuses them).
    PlacedOver,
    /// x itself, through a view, while x is still read afterwards.
    ThroughAView,
}

#[test]
fn copies_that_change_nothing_are_removed() {
    for n in [1, 3, 17, 129] {
        let t = cloned(n, Overwrite::No);
        let l = lowered(&t, Rewrites::ALL);
        let m = &l.report.rewrites.methods[0];
        assert_eq!(m.copies.len(), 1, "n = {n}");
        assert_eq!(m.copies[0].1, "aten::clone.out");
        assert_eq!(ops(&t.build()), ["aten::clone.out", "aten::add.out"]);
        assert_eq!(ops(&l.bytes), ["aten::add.out"]);
        same(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
    }
}

/// `x [1, 3, 1, n] → permute_copy(perm) → add(·, c) → y`.
fn permuted(n: usize, perm: &[i64]) -> OpTest {
    let mut rng = Rng(n as u64 + 7);
    let mut t = OpTest::new("");
    let sizes = [1usize, 3, 1, n];
    let x = t.input_f32(&sizes, &rng.f32s(3 * n, -1.0, 1.0));
    let out: Vec<usize> = perm.iter().map(|&p| sizes[p as usize]).collect();
    let p = t.int_list(perm);
    let d = t.intermediate_f32(&out);
    let c = t.constant_f32(&out, &rng.f32s(3 * n, -1.0, 1.0));
    let alpha = t.int(1);
    let y = t.output(DType::F32, &out);
    t.steps(&[
        Step::Kernel("aten::permute_copy.out".into(), vec![x, p, d, d]),
        Step::Kernel("aten::add.out".into(), vec![d, c, alpha, y, y]),
    ]);
    t
}

/// A permutation that moves only dims of size 1 is a reshape: removed; one that reorders
/// dims of more than one element stays.
#[test]
fn permutes_of_size_one_dims_only_are_removed() {
    for (n, perm, removed) in [
        (17, [2, 1, 0, 3], true),
        (1, [0, 3, 2, 1], true),
        (129, [2, 0, 1, 3], true),
        (129, [0, 2, 3, 1], false),
        (3, [0, 3, 2, 1], false),
        (17, [3, 1, 2, 0], false),
    ] {
        let t = permuted(n, &perm);
        let want = t.run().unwrap();
        let l = lowered(&t, Rewrites::ALL);
        let copies = &l.report.rewrites.methods[0].copies;
        assert_eq!(copies.len(), usize::from(removed), "n = {n}, perm {perm:?}");
        let kept = if removed {
            vec!["aten::add.out"]
        } else {
            vec!["aten::permute_copy.out", "aten::add.out"]
        };
        assert_eq!(ops(&l.bytes), kept, "n = {n}, perm {perm:?}");
        same(&t.run_program(&l.bytes).unwrap(), &want);
    }
}

/// A tensor ExecuTorch placed over the copy's input after its last use keeps the copy only
/// when the plan is kept: with the re-plan, every tensor first gets bytes of its own, the copy
/// goes and the new plan keeps x's bytes alive until the copy's output is read.
#[test]
fn a_copy_whose_source_bytes_are_reused_goes_with_the_replan() {
    for n in [1, 3, 17, 129] {
        let t = cloned(n, Overwrite::PlacedOver);
        let want = t.run().unwrap();
        let kept = lowered_replan(&t, Rewrites::ALL, false);
        assert!(kept.report.rewrites.methods[0].copies.is_empty());
        assert_eq!(
            ops(&kept.bytes),
            ["aten::clone.out", "aten::mul.out", "aten::add.out"]
        );
        same(&t.run_program(&kept.bytes).unwrap(), &want);
        let l = lowered(&t, Rewrites::ALL);
        assert_eq!(l.report.rewrites.methods[0].copies.len(), 1, "n = {n}");
        assert_eq!(ops(&l.bytes), ["aten::mul.out", "aten::add.out"]);
        same(&t.run_program(&l.bytes).unwrap(), &want);
    }
}

/// Writing the copy's input through a view before the copy's output is read keeps the copy,
/// re-plan or not.
#[test]
fn a_copy_whose_source_is_overwritten_stays() {
    for replan in [true, false] {
        let t = cloned(17, Overwrite::ThroughAView);
        let want = t.run().unwrap();
        let l = lowered_replan(&t, Rewrites::ALL, replan);
        assert!(l.report.rewrites.methods[0].copies.is_empty());
        assert_eq!(
            ops(&l.bytes),
            ["aten::clone.out", "aten::mul.out", "aten::add.out"]
        );
        same(&t.run_program(&l.bytes).unwrap(), &want);
    }
}

/// `logits = mm(h, W)` over T rows, then `select_copy(logits viewed [1, T, V], 1, index)`.
fn lm_head(t_len: usize, k: usize, v: usize, index: i64, extra_reader: bool) -> OpTest {
    let mut rng = Rng((t_len * 31 + v) as u64);
    let mut t = OpTest::new("");
    let h = t.input_f32(&[t_len, k], &rng.f32s(t_len * k, -1.0, 1.0));
    let w = t.constant_f32(&[k, v], &rng.f32s(k * v, -1.0, 1.0));
    let x = t.intermediate_f32(&[t_len, v]);
    let xv = t.view_of(x, &[1, t_len, v]);
    let (dim, idx) = (t.int(1), t.int(index));
    let out = t.output(DType::F32, &[1, v]);
    let mut steps = vec![
        Step::Kernel("aten::mm.out".into(), vec![h, w, x, x]),
        Step::Kernel(
            "aten::select_copy.int_out".into(),
            vec![xv, dim, idx, out, out],
        ),
    ];
    if extra_reader {
        let s = t.output(DType::F32, &[1, v]);
        let (dim0, i0) = (t.int(1), t.int(0));
        steps.push(Step::Kernel(
            "aten::select_copy.int_out".into(),
            vec![xv, dim0, i0, s, s],
        ));
    }
    t.steps(&steps);
    t
}

#[test]
fn the_lm_head_computes_only_the_row_kept() {
    for (t_len, k, v, index) in [
        (3, 1, 1, -1),
        (17, 3, 129, -1),
        (5, 17, 3, 2),
        (129, 4, 17, -129),
    ] {
        let t = lm_head(t_len, k, v, index, false);
        let want = t.run().unwrap();
        let l = lowered(&t, Rewrites::ALL);
        let m = &l.report.rewrites.methods[0];
        assert_eq!(m.lm_heads.len(), 1, "T = {t_len}");
        let row = if index < 0 {
            index + t_len as i64
        } else {
            index
        };
        assert_eq!(m.lm_heads[0].row as i64, row);
        assert_eq!(m.lm_heads[0].rows, t_len);
        assert_eq!(
            ops(&l.bytes),
            ["aten::slice_copy.Tensor_out", "aten::mm.out"]
        );
        same(&t.run_program(&l.bytes).unwrap(), &want);
        // The [T, V] product left the plan: what is alive at once is the input, one row of it
        // and the output row.
        let p = &l.report.plans[0];
        assert!(p.kept_because.is_none());
        let row_bytes = |n: usize| (n * 4).div_ceil(16) * 16;
        assert!(
            (p.after[1] as usize) <= row_bytes(t_len * k) + row_bytes(k) + row_bytes(v) + 64,
            "T = {t_len}: arena {} bytes",
            p.after[1]
        );
    }
}

#[test]
fn an_lm_head_read_elsewhere_keeps_every_row() {
    let t = lm_head(17, 3, 129, -1, true);
    let l = lowered(&t, Rewrites::ALL);
    assert!(l.report.rewrites.methods[0].lm_heads.is_empty());
    assert_eq!(ops(&l.bytes).len(), 3);
    same(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// GPT-2's GELU as exported: eight elementwise calls after a product.
fn gelu_chain(m: usize, n: usize, seed: u64) -> OpTest {
    let mut rng = Rng(seed);
    let mut t = OpTest::new("");
    let k = 5;
    let h = t.input_f32(&[m, k], &rng.f32s(m * k, -2.0, 2.0));
    let w = t.constant_f32(&[k, n], &rng.f32s(k * n, -1.0, 1.0));
    let x = t.intermediate_f32(&[m, n]);
    let c = |t: &mut OpTest, v: f32| t.constant_f32(&[], &[v]);
    let (half, kappa, beta, one) = (
        c(&mut t, 0.5),
        c(&mut t, 0.044715),
        c(&mut t, (2.0f64 / std::f64::consts::PI).sqrt() as f32),
        c(&mut t, 1.0),
    );
    let three = t.double(3.0);
    let (al1, al2) = (t.int(1), t.int(1));
    let inter: Vec<i32> = (0..7).map(|_| t.intermediate_f32(&[m, n])).collect();
    let y = t.output(DType::F32, &[m, n]);
    let (a, p, q, s, u, th, cc) = (
        inter[0], inter[1], inter[2], inter[3], inter[4], inter[5], inter[6],
    );
    let k = |name: &str, args: Vec<i32>| Step::Kernel(name.into(), args);
    t.steps(&[
        k("aten::mm.out", vec![h, w, x, x]),
        k("aten::mul.out", vec![x, half, a, a]),
        k("aten::pow.Tensor_Scalar_out", vec![x, three, p, p]),
        k("aten::mul.out", vec![p, kappa, q, q]),
        k("aten::add.out", vec![x, q, al1, s, s]),
        k("aten::mul.out", vec![s, beta, u, u]),
        k("aten::tanh.out", vec![u, th, th]),
        k("aten::add.out", vec![th, one, al2, cc, cc]),
        k("aten::mul.out", vec![a, cc, y, y]),
    ]);
    t
}

fn close(a: &[TestTensor], b: &[TestTensor], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.shape, y.shape);
        for (i, (p, q)) in x.f32().iter().zip(y.f32()).enumerate() {
            assert!(
                (p - q).abs() <= tol + tol * q.abs(),
                "element {i}: {p} vs {q}"
            );
        }
    }
}

#[test]
fn a_decomposed_gelu_becomes_one_call_and_fuses_into_the_product() {
    for (m, n) in [(1, 1), (3, 17), (17, 129)] {
        let t = gelu_chain(m, n, (m * n) as u64);
        let want = t.run().unwrap();
        assert_eq!(ops(&t.build()).len(), 9);
        let l = lowered(&t, Rewrites::ALL);
        assert_eq!(l.report.rewrites.methods[0].gelus, vec![8]);
        assert_eq!(ops(&l.bytes), ["aten::mm.out", "aten::gelu.out"]);
        // The formula and the kernel round differently (a few ulps).
        close(&t.run_program(&l.bytes).unwrap(), &want, 1e-5);
        // With ptera's regions the activation is fused into the product's store.
        let opts = Options {
            rewrites: Rewrites::ALL,
            ..Options::default()
        };
        let r = lower_with(
            &t.build(),
            &Target::parse("neon").unwrap(),
            opts,
            &mut |_, _| {},
        )
        .unwrap();
        let g = &r.report.methods[0].regions;
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].absorbed, ["aten::mm.out", "aten::gelu.out"]);
        assert_eq!(ops(&r.bytes), ["delegate"]);
        close(&t.run_program(&r.bytes).unwrap(), &want, 1e-5);
    }
}

/// A wrong constant (0.05 instead of 0.044715) is not GELU: nothing changes.
#[test]
fn a_chain_with_other_constants_is_left_alone() {
    let mut t = gelu_chain(3, 17, 5);
    let want = t.run().unwrap();
    // The first multiply by 0.5 becomes a multiply by 0.6.
    let bad = t.constant_f32(&[], &[0.6]);
    let mut steps = t.steps_list();
    if let Step::Kernel(_, args) = &mut steps[1] {
        args[1] = bad;
    }
    t.steps(&steps);
    let want_bad = t.run().unwrap();
    assert_ne!(want_bad[0].bytes, want[0].bytes);
    let l = lowered(&t, Rewrites::ALL);
    assert!(l.report.rewrites.methods[0].gelus.is_empty());
    same(&t.run_program(&l.bytes).unwrap(), &want_bad);
}

/// A decoder's last layer as exported, ending in a slice of rows `lo..hi` and a product on
/// them: layer norm, query/key/value products, heads by permutes, scores, a mask added,
/// softmax, the attention product, the output projection, the residual add and a ReLU. With
/// `extra_reader` a second output reads the residual sum whole.
fn last_layer(t_len: usize, lo: usize, hi: usize, extra_reader: bool) -> OpTest {
    let (e, h, v) = (8usize, 2usize, 5usize);
    let d = e / h;
    let mut rng = Rng((t_len * 131 + lo) as u64);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, t_len, e], &rng.f32s(t_len * e, -1.0, 1.0));
    let mask = t.input_f32(&[1, 1, t_len, t_len], &rng.f32s(t_len * t_len, -2.0, 0.0));
    let lw = t.constant_f32(&[e], &rng.f32s(e, 0.5, 1.5));
    let lb = t.constant_f32(&[e], &rng.f32s(e, -0.5, 0.5));
    let ln = t.intermediate_f32(&[1, t_len, e]);
    let mean = t.intermediate_f32(&[1, t_len, 1]);
    let rstd = t.intermediate_f32(&[1, t_len, 1]);
    let ln_list = t.tensor_list(&[ln, mean, rstd]);
    let (ns, eps) = (t.int_list(&[e as i64]), t.double(1e-5));
    let hv = t.view_of(ln, &[t_len, e]);
    let one = t.int(1);
    let mut steps = vec![Step::Kernel(
        "aten::native_layer_norm.out".into(),
        vec![x, ns, lw, lb, eps, ln, mean, rstd, ln_list],
    )];
    // Query, key and value: [T, E] products viewed [1, T, H, D], heads first.
    let mut heads = Vec::new();
    for perm in [[0i64, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]] {
        let w = t.constant_f32(&[e, e], &rng.f32s(e * e, -0.5, 0.5));
        let b = t.constant_f32(&[e], &rng.f32s(e, -0.5, 0.5));
        let y = t.intermediate_f32(&[t_len, e]);
        let yv = t.view_of(y, &[1, t_len, h, d]);
        let dims: Vec<usize> = perm.iter().map(|&p| [1, t_len, h, d][p as usize]).collect();
        let p = t.intermediate_f32(&dims);
        let pv = t.view_of(p, &dims[1..]);
        let pl = t.int_list(&perm);
        steps.push(Step::Kernel(
            "aten::addmm.out".into(),
            vec![b, hv, w, one, one, y, y],
        ));
        steps.push(Step::Kernel(
            "aten::permute_copy.out".into(),
            vec![yv, pl, p, p],
        ));
        heads.push(pv);
    }
    let s = t.intermediate_f32(&[h, t_len, t_len]);
    let sv = t.view_of(s, &[1, h, t_len, t_len]);
    let sm = t.intermediate_f32(&[1, h, t_len, t_len]);
    let p = t.intermediate_f32(&[1, h, t_len, t_len]);
    let pv = t.view_of(p, &[h, t_len, t_len]);
    let o = t.intermediate_f32(&[h, t_len, d]);
    let ov = t.view_of(o, &[1, h, t_len, d]);
    let op = t.intermediate_f32(&[1, t_len, h, d]);
    let opv = t.view_of(op, &[t_len, e]);
    let (last, f) = (t.int(-1), t.boolean(false));
    let swap = t.int_list(&[0, 2, 1, 3]);
    let wo = t.constant_f32(&[e, e], &rng.f32s(e * e, -0.5, 0.5));
    let bo = t.constant_f32(&[e], &rng.f32s(e, -0.5, 0.5));
    let y = t.intermediate_f32(&[t_len, e]);
    let yv = t.view_of(y, &[1, t_len, e]);
    let z = t.intermediate_f32(&[1, t_len, e]);
    let r = t.intermediate_f32(&[1, t_len, e]);
    let rows = hi - lo;
    // The final layer norm before the head.
    let fw = t.constant_f32(&[e], &rng.f32s(e, 0.5, 1.5));
    let fb = t.constant_f32(&[e], &rng.f32s(e, -0.5, 0.5));
    let fo = t.intermediate_f32(&[1, t_len, e]);
    let fmean = t.intermediate_f32(&[1, t_len, 1]);
    let frstd = t.intermediate_f32(&[1, t_len, 1]);
    let f_list = t.tensor_list(&[fo, fmean, frstd]);
    let rv = t.view_of(fo, &[t_len, e]);
    let sl = t.intermediate_f32(&[rows, e]);
    let (zero, lo_v, hi_v) = (t.int(0), t.int(lo as i64), t.int(hi as i64));
    let wl = t.constant_f32(&[e, v], &rng.f32s(e * v, -0.5, 0.5));
    let logits = t.output(DType::F32, &[rows, v]);
    steps.extend([
        Step::Kernel("aten::bmm.out".into(), vec![heads[0], heads[1], s, s]),
        Step::Kernel("aten::add.out".into(), vec![sv, mask, one, sm, sm]),
        Step::Kernel("aten::_softmax.out".into(), vec![sm, last, f, p, p]),
        Step::Kernel("aten::bmm.out".into(), vec![pv, heads[2], o, o]),
        Step::Kernel("aten::permute_copy.out".into(), vec![ov, swap, op, op]),
        Step::Kernel("aten::addmm.out".into(), vec![bo, opv, wo, one, one, y, y]),
        Step::Kernel("aten::add.out".into(), vec![x, yv, one, z, z]),
        Step::Kernel("aten::relu.out".into(), vec![z, r, r]),
        Step::Kernel(
            "aten::native_layer_norm.out".into(),
            vec![r, ns, fw, fb, eps, fo, fmean, frstd, f_list],
        ),
        Step::Kernel(
            "aten::slice_copy.Tensor_out".into(),
            vec![rv, zero, lo_v, hi_v, one, sl, sl],
        ),
        Step::Kernel("aten::mm.out".into(), vec![sl, wl, logits, logits]),
    ]);
    if extra_reader {
        let whole = t.output(DType::F32, &[1, t_len, e]);
        steps.push(Step::Kernel(
            "aten::clone.out".into(),
            vec![z, t.none(), whole, whole],
        ));
    }
    t.steps(&steps);
    t
}

#[test]
fn operators_compute_only_the_rows_a_slice_reads() {
    for (t_len, lo, hi) in [(3, 2, 3), (17, 16, 17), (17, 1, 3), (129, 128, 129)] {
        let t = last_layer(t_len, lo, hi, false);
        let want = t.run().unwrap();
        let before = ops(&t.build());
        let l = lowered(&t, Rewrites::ALL);
        let m = &l.report.rewrites.methods[0].rows;
        // Everything from the query product on computes `hi - lo` rows; the layer norm's
        // output, the residual input and the mask are read whole too, so one slice each.
        let shrunk: Vec<&str> = m.shrunk.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(
            shrunk,
            [
                "aten::addmm.out",
                "aten::permute_copy.out",
                "aten::bmm.out",
                "aten::add.out",
                "aten::_softmax.out",
                "aten::bmm.out",
                "aten::permute_copy.out",
                "aten::addmm.out",
                "aten::add.out",
                "aten::relu.out",
                "aten::native_layer_norm.out",
            ],
            "T = {t_len}"
        );
        assert!(m.shrunk.iter().all(|s| s.2 == t_len && s.3 == hi - lo));
        assert_eq!(m.slices.len(), 3);
        // The seed slice is gone and three slices came in; with one row kept, both head
        // permutes move only size-1 dims and the second copy pass removes them.
        let again = &l.report.rewrites.methods[0].copies_after_rows;
        let permutes = if hi - lo == 1 { 2 } else { 0 };
        assert_eq!(again.len(), permutes, "T = {t_len}");
        assert!(again.iter().all(|(_, op)| op == "aten::permute_copy.out"));
        let after = ops(&l.bytes);
        assert_eq!(after.len(), before.len() + 2 - permutes);
        let slices = |o: &[String]| o.iter().filter(|k| k.contains("slice_copy")).count();
        assert_eq!((slices(&before), slices(&after)), (1, 3));
        assert!(lists_name_earlier_values(&l.bytes), "T = {t_len}");
        // One row of a product and of a softmax sums in another order than all rows do.
        close(&t.run_program(&l.bytes).unwrap(), &want, 1e-5);
        // Without the rewrite nothing changes.
        let off = lowered(
            &t,
            Rewrites {
                rows: false,
                ..Rewrites::ALL
            },
        );
        assert!(off.report.rewrites.methods[0].rows.shrunk.is_empty());
        assert_eq!(ops(&off.bytes), before);
    }
}

#[test]
fn a_value_read_whole_stops_the_rows() {
    let t = last_layer(17, 16, 17, true);
    let want = t.run().unwrap();
    let l = lowered(&t, Rewrites::ALL);
    let m = &l.report.rewrites.methods[0].rows;
    // The residual sum is an output: only the ReLU and the layer norm after it compute one
    // row.
    let shrunk: Vec<&str> = m.shrunk.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(shrunk, ["aten::relu.out", "aten::native_layer_norm.out"]);
    assert_eq!(m.slices.len(), 1);
    close(&t.run_program(&l.bytes).unwrap(), &want, 1e-5);
}
