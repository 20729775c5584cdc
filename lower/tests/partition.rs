//! The partitioner's decisions on small programs built with `OpTest`: what is absorbed into
//! PteraBackend regions, what stays portable and why, and that the lowered program computes
//! what the original did.

use ptera::testing::{OpTest, Rng, Step, TestTensor};
use ptera::DType;
use ptera_lower::{lower, lower_with, Lowered, Options, Rewrites, Target};

fn rand(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.f32s(n, -1.0, 1.0)
}

/// Lowered without the graph rewrites (folding would evaluate these small programs' weight
/// transposes at lower time; `tests/rewrites.rs` covers that).
fn lowered(t: &OpTest, target: &str) -> Lowered {
    let opts = Options {
        rewrites: Rewrites::NONE,
        ..Options::default()
    };
    lower_with(
        &t.build(),
        &Target::parse(target).unwrap(),
        opts,
        &mut |_, _| {},
    )
    .expect("lowering")
}

fn close(a: &[TestTensor], b: &[TestTensor]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.shape, y.shape);
        for (i, (p, q)) in x.f32().iter().zip(y.f32()).enumerate() {
            assert!(
                (p - q).abs() <= 1e-5 + 1e-5 * q.abs(),
                "element {i}: {p} vs {q}"
            );
        }
    }
}

/// `permute_copy(W) -> addmm(bias, x, W^T) -> relu`, like a `torch.nn.Linear` + ReLU export.
fn linear_relu(m: usize, k: usize, n: usize, seed: u64) -> OpTest {
    let mut rng = Rng(seed);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[m, k], &rand(&mut rng, m * k));
    let w = t.constant_f32(&[n, k], &rand(&mut rng, n * k));
    let b = t.constant_f32(&[n], &rand(&mut rng, n));
    let dims = t.int_list(&[1, 0]);
    let wt = t.intermediate_f32(&[k, n]);
    let one = t.int(1);
    let one2 = t.int(1);
    let y = t.intermediate_f32(&[m, n]);
    let z = t.output(DType::F32, &[m, n]);
    t.steps(&[
        Step::Kernel("aten::permute_copy.out".into(), vec![w, dims, wt, wt]),
        Step::Kernel("aten::addmm.out".into(), vec![b, x, wt, one, one2, y, y]),
        Step::Kernel("aten::relu.out".into(), vec![y, z, z]),
    ]);
    t
}

#[test]
fn linear_with_its_transpose_and_relu_is_one_region_with_a_packed_weight() {
    for (m, k, n) in [(1, 1, 1), (3, 17, 5), (17, 3, 129), (4, 64, 48)] {
        let t = linear_relu(m, k, n, 7 + m as u64);
        let want = t.run().unwrap();
        for target in ["generic", "neon", "sve2:512", "sme2:256"] {
            let l = lowered(&t, target);
            let r = &l.report.methods[0];
            assert_eq!(r.regions.len(), 1, "{target}");
            assert_eq!(
                r.regions[0].absorbed,
                [
                    "aten::permute_copy.out",
                    "aten::addmm.out",
                    "aten::relu.out"
                ]
            );
            assert!(
                r.regions[0].packed_nr.is_some(),
                "{target}: weight not packed"
            );
            assert!(r.portable.is_empty());
            assert_eq!(l.report.packed_weights, 1);
            assert_eq!(
                l.report.removed_weight_bytes.div_ceil(16) * 16,
                (n * k * 4).div_ceil(16) * 16
            );
            close(&t.run_program(&l.bytes).unwrap(), &want);
        }
    }
}

#[test]
fn a_weight_that_is_not_a_constant_stays_portable() {
    let mut rng = Rng(3);
    let mut t = OpTest::new("aten::mm.out");
    let a = t.input_f32(&[4, 8], &rand(&mut rng, 32));
    let b = t.input_f32(&[8, 5], &rand(&mut rng, 40));
    let o = t.output(DType::F32, &[4, 5]);
    t.call(&[a, b, o, o]);
    let l = lowered(&t, "neon");
    let r = &l.report.methods[0];
    assert!(r.regions.is_empty());
    assert_eq!(r.portable.len(), 1);
    assert!(
        r.portable[0].2.contains("not a constant"),
        "{}",
        r.portable[0].2
    );
    close(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

#[test]
fn a_bias_that_is_not_a_row_stays_portable() {
    let mut rng = Rng(4);
    let mut t = OpTest::new("aten::addmm.out");
    let bias = t.input_f32(&[3, 5], &rand(&mut rng, 15));
    let x = t.input_f32(&[3, 4], &rand(&mut rng, 12));
    let w = t.constant_f32(&[4, 5], &rand(&mut rng, 20));
    let (one, two) = (t.int(1), t.int(1));
    let o = t.output(DType::F32, &[3, 5]);
    t.call(&[bias, x, w, one, two, o, o]);
    let l = lowered(&t, "neon");
    let r = &l.report.methods[0];
    assert!(r.regions.is_empty());
    assert!(r.portable[0].2.contains("bias"), "{}", r.portable[0].2);
    close(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// alpha and beta other than 1 are carried into the region.
#[test]
fn addmm_alpha_and_beta_are_kept() {
    let mut rng = Rng(5);
    let mut t = OpTest::new("aten::addmm.out");
    let bias = t.constant_f32(&[7], &rand(&mut rng, 7));
    let x = t.input_f32(&[5, 6], &rand(&mut rng, 30));
    let w = t.constant_f32(&[6, 7], &rand(&mut rng, 42));
    let beta = t.double(0.5);
    let alpha = t.double(-2.0);
    let o = t.output(DType::F32, &[5, 7]);
    t.call(&[bias, x, w, beta, alpha, o, o]);
    let l = lowered(&t, "neon");
    assert_eq!(l.report.methods[0].regions.len(), 1);
    close(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// A constant also read by another operator (GPT-2's token embedding is its LM head) is not
/// packed: the region reads it in place as an argument, and it stays in the file once.
#[test]
fn a_weight_with_other_readers_is_read_in_place() {
    let mut rng = Rng(6);
    let (vocab, d, m) = (11, 6, 4);
    let mut t = OpTest::new("");
    let ids = t.input_i64(&[m], &[1, 0, 10, 3]);
    let wte = t.constant_f32(&[vocab, d], &rand(&mut rng, vocab * d));
    let (pad, f1, f2) = (t.int(-1), t.boolean(false), t.boolean(false));
    let h = t.intermediate_f32(&[m, d]);
    let dims = t.int_list(&[1, 0]);
    let wt = t.intermediate_f32(&[d, vocab]);
    let logits = t.output(DType::F32, &[m, vocab]);
    t.steps(&[
        Step::Kernel(
            "aten::embedding.out".into(),
            vec![wte, ids, pad, f1, f2, h, h],
        ),
        Step::Kernel("aten::permute_copy.out".into(), vec![wte, dims, wt, wt]),
        Step::Kernel("aten::mm.out".into(), vec![h, wt, logits, logits]),
    ]);
    let l = lowered(&t, "neon");
    let r = &l.report.methods[0];
    assert_eq!(r.regions.len(), 1);
    assert_eq!(
        r.regions[0].absorbed,
        ["aten::permute_copy.out", "aten::mm.out"]
    );
    assert_eq!(r.regions[0].packed_nr, None);
    assert_eq!(l.report.packed_weights, 0);
    close(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// The activation is not fused when the memory plan put its output over the product's input
/// (the region would write what it still reads); it stays a portable call.
#[test]
fn an_activation_over_the_input_is_not_fused() {
    let mut rng = Rng(8);
    let (m, k, n) = (4, 6, 6);
    let mut t = OpTest::new("");
    let x = t.input_f32(&[m, k], &rand(&mut rng, m * k));
    let w = t.constant_f32(&[k, n], &rand(&mut rng, k * n));
    let y = t.intermediate_f32(&[m, n]);
    let z = t.view_of(x, &[m, n]);
    let out = t.output(DType::F32, &[m, n]);
    t.steps(&[
        Step::Kernel("aten::mm.out".into(), vec![x, w, y, y]),
        Step::Kernel("aten::relu.out".into(), vec![y, z, z]),
        Step::Kernel("aten::abs.out".into(), vec![z, out, out]),
    ]);
    let l = lowered(&t, "neon");
    let r = &l.report.methods[0];
    assert_eq!(r.regions.len(), 1);
    assert_eq!(r.regions[0].absorbed, ["aten::mm.out"]);
    close(&t.run_program(&l.bytes).unwrap(), &t.run().unwrap());
}

/// Bad input to `lower`: an error, never a panic; whatever it accepts loads and validates.
#[test]
fn hostile_inputs_give_errors() {
    let t = linear_relu(4, 16, 8, 9);
    let good = t.build();
    let target = Target::parse("neon").unwrap();
    for len in [0, 7, 8, 40, good.len() / 2, good.len() - 1] {
        assert!(
            lower(&good[..len], &target, &mut |_, _| {}).is_err(),
            "truncated to {len}"
        );
    }
    let mut accepted = 0;
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0x5a;
        if lower(&b, &target, &mut |_, _| {}).is_ok() {
            accepted += 1;
        }
    }
    assert!(accepted < good.len());
    assert!(Target::parse("cortex-q9").is_err());
    assert!(Target::parse("sve2:100").is_err());
    assert!(Target::parse("neon:256").is_err());
}

#[test]
fn targets_map_to_the_kernels_tiles() {
    let nr = |t: &str, n| Target::parse(t).unwrap().nr(0, n);
    assert_eq!(nr("cortex-a53", 768), 12);
    assert_eq!(nr("cortex-a76", 64), 8);
    // Neon with the products' rows known: 4 × 16 where an 8-row tile would leave a 1–4-row
    // edge (20 rows = 5 × 4; 17 = 4 × 4 + 1), the 8-row tiles otherwise.
    let neon = Target::parse("cortex-a76").unwrap();
    assert_eq!(neon.nr(20, 80), 16);
    assert_eq!(neon.nr(17, 64), 16);
    assert_eq!(neon.nr(16, 80), 8);
    assert_eq!(neon.nr(29, 80), 8);
    assert_eq!(neon.nr(20, 72), 12);
    assert_eq!(neon.nr(20, 40), 8);
    assert_eq!(Target::parse("sve2:256").unwrap().nr(20, 768), 24);
    assert_eq!(nr("neoverse-n2", 768), 12);
    assert_eq!(nr("sve2:256", 768), 24);
    assert_eq!(nr("sve2:512", 768), 48);
    assert_eq!(nr("sme:512", 768), 32);
    assert_eq!(nr("sme2:128", 768), 8);
    assert_eq!(nr("max", 768), 16);
    assert_eq!(nr("generic", 768), 16);
    assert_eq!(nr("x86-64-v3", 768), 16);
    assert_eq!(nr("x86-64-v4", 768), 32);
}

/// A `[K, N]`-weight Linear operation `(input, weight argument, output)` of `(k, n, max_m)`.
fn linear_op<'b>(
    b: &mut flatbuffers::FlatBufferBuilder<'b>,
    (input, arg, output): (u32, i32, u32),
    (k, n, max_m): (u32, u32, u32),
    activation: ptera::format::region_fb::Activation,
) -> flatbuffers::WIPOffset<ptera::format::region_fb::Operation<'b>> {
    use ptera::format::region_fb as rf;
    let w = rf::Weight::create(
        b,
        &rf::WeightArgs {
            layout: rf::WeightLayout::KxN,
            key: None,
            nr: 0,
            arg,
            ..Default::default()
        },
    );
    let lin = rf::Linear::create(
        b,
        &rf::LinearArgs {
            input,
            output,
            bias: -1,
            weight: Some(w),
            k,
            n,
            max_m,
            alpha: 1.0,
            beta: 1.0,
            activation,
        },
    );
    rf::Operation::create(
        b,
        &rf::OperationArgs {
            op_type: rf::Op::Linear,
            op: Some(lin.as_union_value()),
            absorbed: None,
        },
    )
}

/// A `[K, N]`-weight Linear region payload written by hand, with the given ABI version.
fn region_payload(abi: u32) -> Vec<u8> {
    region_payload_of(abi, &[(0, 1, 2, 3, 2)])
}

/// A region of `[K, N]`-weight Linear operations with ReLU, each `(input, weight, output, k,
/// n)` (DelegateCall argument positions), at most 2 rows.
fn region_payload_of(abi: u32, linears: &[(u32, i32, u32, u32, u32)]) -> Vec<u8> {
    use ptera::format::region_fb as rf;
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let mut ops = Vec::new();
    for &(input, arg, output, k, n) in linears {
        ops.push(linear_op(
            &mut b,
            (input, arg, output),
            (k, n, 2),
            rf::Activation::Relu,
        ));
    }
    let ops = b.create_vector(&ops);
    let root = rf::Region::create(
        &mut b,
        &rf::RegionArgs {
            abi,
            isa: None,
            vector_bits: 0,
            ops: Some(ops),
        },
    );
    b.finish(root, Some(ptera::delegate::ptera::IDENTIFIER));
    b.finished_data().to_vec()
}

fn region_test(payload: Vec<u8>) -> OpTest {
    let mut t = OpTest::delegate("PteraBackend", payload);
    let x = t.input_f32(&[2, 3], &[1.0, 2.0, 3.0, -1.0, -2.0, -3.0]);
    let w = t.constant_f32(&[3, 2], &[1.0, 0.5, 1.0, 0.5, 1.0, 0.5]);
    let y = t.output(DType::F32, &[2, 2]);
    t.call(&[x, w, y]);
    t
}

/// The region runtime on a hand-written payload: it computes relu(x·W); a payload of another
/// ABI version, a truncated one, or one that is not a region is refused when the method is
/// validated, with the backend named.
#[test]
fn region_payloads_are_validated_at_load() {
    let got = region_test(region_payload(ptera::delegate::ptera::ABI))
        .run()
        .unwrap();
    assert_eq!(got[0].f32(), [6.0, 3.0, 0.0, 0.0]);
    let good = region_payload(ptera::delegate::ptera::ABI);
    for (what, bad) in [
        ("ABI 2", region_payload(2)),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("not a region", vec![0x5a; 64]),
    ] {
        match region_test(bad).run() {
            Err(ptera::Error::DelegateInit { backend, .. }) => {
                assert_eq!(backend.as_str(), "PteraBackend", "{what}")
            }
            other => panic!("{what}: expected a DelegateInit error, got {other:?}"),
        }
    }
}

/// A region of two operations, the second reading the first's output: both run (each gets
/// the region's scratch), relu(relu(x·W)·V).
#[test]
fn a_region_of_two_linear_operations_runs_both() {
    let payload = region_payload_of(
        ptera::delegate::ptera::ABI,
        &[(0, 1, 2, 3, 2), (2, 3, 4, 2, 2)],
    );
    let mut t = OpTest::delegate("PteraBackend", payload);
    let x = t.input_f32(&[2, 3], &[1.0, 2.0, 3.0, -1.0, -2.0, -3.0]);
    let w = t.constant_f32(&[3, 2], &[1.0, 0.5, 1.0, 0.5, 1.0, 0.5]);
    let y = t.output(DType::F32, &[2, 2]);
    let v = t.constant_f32(&[2, 2], &[1.0, -1.0, 2.0, 0.25]);
    let z = t.output(DType::F32, &[2, 2]);
    t.call(&[x, w, y, v, z]);
    let got = t.run().unwrap();
    // y = relu([[6, 3], [-6, -3]]) = [[6, 3], [0, 0]]; z = relu(y·V) = [[12, 0], [0, 0]].
    assert_eq!(got[0].f32(), [6.0, 3.0, 0.0, 0.0]);
    assert_eq!(got[1].f32(), [12.0, 0.0, 0.0, 0.0]);
}

/// An `Attention` region payload over arguments q = k = v = 0 (one `[t, 3·h·d]` tensor),
/// mask 1 (`[t, t]`, shared by the heads), output 2, with `q_off` as the queries' offset.
fn attention_payload(h: u32, d: u32, t: u32, q_off: u32, with_linear: bool) -> Vec<u8> {
    use ptera::format::region_fb as rf;
    let mut b = flatbuffers::FlatBufferBuilder::new();
    let c = h * d;
    let view = |off: u32| rf::HeadView::new(off, d, 3 * c);
    let (qv, kv, vv) = (view(q_off), view(c), view(2 * c));
    let att = rf::Attention::create(
        &mut b,
        &rf::AttentionArgs {
            q: 0,
            k: 0,
            v: 0,
            mask: 1,
            output: 2,
            heads: h,
            head_dim: d,
            q_rows: t,
            kv_rows: t,
            q_view: Some(&qv),
            k_view: Some(&kv),
            v_view: Some(&vv),
            mask_head_stride: 0,
            mask_row_stride: t,
            scale: 0.5,
            q_scale: 1.0,
            kv_group: 1,
        },
    );
    let mut ops = vec![rf::Operation::create(
        &mut b,
        &rf::OperationArgs {
            op_type: rf::Op::Attention,
            op: Some(att.as_union_value()),
            absorbed: None,
        },
    )];
    if with_linear {
        ops.push(linear_op(
            &mut b,
            (0, 1, 2),
            (1, 1, 1),
            rf::Activation::None,
        ));
    }
    let ops = b.create_vector(&ops);
    let root = rf::Region::create(
        &mut b,
        &rf::RegionArgs {
            abi: ptera::delegate::ptera::ABI,
            isa: None,
            vector_bits: 0,
            ops: Some(ops),
        },
    );
    b.finish(root, Some(ptera::delegate::ptera::IDENTIFIER));
    b.finished_data().to_vec()
}

/// A hand-written `Attention` region computes causal attention over a fused `[t, 3·h·d]`
/// projection (checked against the formula in f64); queries placed past the end of their
/// tensor are an error naming their argument, not a read out of bounds; an Attention
/// sharing its region with another operation is refused at load.
#[test]
fn attention_regions_compute_and_refuse_views_outside_their_tensors() {
    let (h, d, t) = (2usize, 3usize, 5usize);
    let c = h * d;
    let mut rng = Rng(11);
    let qkv = rand(&mut rng, t * 3 * c);
    let mask: Vec<f32> = (0..t * t)
        .map(|x| if x % t > x / t { -1e9 } else { 0.0 })
        .collect();
    let build = |payload: Vec<u8>| {
        let mut op = OpTest::delegate("PteraBackend", payload);
        let x = op.input_f32(&[1, t, 3 * c], &qkv);
        let m = op.input_f32(&[1, 1, t, t], &mask);
        let y = op.output(DType::F32, &[1, t, h, d]);
        op.call(&[x, m, y]);
        op
    };
    let got = build(attention_payload(h as u32, d as u32, t as u32, 0, false))
        .run()
        .unwrap();
    let got = got[0].f32();
    for hh in 0..h {
        for i in 0..t {
            let s: Vec<f64> = (0..t)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|e| {
                            qkv[i * 3 * c + hh * d + e] as f64
                                * qkv[j * 3 * c + c + hh * d + e] as f64
                        })
                        .sum();
                    dot * 0.5 + mask[i * t + j] as f64
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = s.iter().map(|x| (x - mx).exp()).sum();
            for e in 0..d {
                let want: f64 = (0..t)
                    .map(|j| (s[j] - mx).exp() / sum * qkv[j * 3 * c + 2 * c + hh * d + e] as f64)
                    .sum();
                let g = got[i * c + hh * d + e] as f64;
                assert!(
                    (g - want).abs() < 1e-5,
                    "head {hh} row {i} [{e}]: {g} vs {want}"
                );
            }
        }
    }
    // Queries starting one column into the values' last row overrun the tensor: an error
    // naming the queries' argument.
    let past = (2 * c + 1) as u32;
    match build(attention_payload(h as u32, d as u32, t as u32, past, false)).run() {
        Err(ptera::Error::Delegate {
            source: ptera::error::KernelError::Shape { arg: 0, .. },
            ..
        }) => {}
        other => panic!("queries past their tensor: expected a shape error, got {other:?}"),
    }
    match build(attention_payload(h as u32, d as u32, t as u32, 0, true)).run() {
        Err(ptera::Error::DelegateInit { backend, .. }) => {
            assert_eq!(backend.as_str(), "PteraBackend")
        }
        other => panic!("attention with a linear: expected a DelegateInit error, got {other:?}"),
    }
}

/// `softmax(0.5 · Q·Kᵀ + mask)·V` over `[1, t, h, d]` queries, keys and values, with the
/// head permutes, the key transpose and the permute back, as an exported attention spells
/// it; `scores_out`: the scaled scores are a method output as well.
fn attention_program(h: usize, t: usize, d: usize, scores_out: bool, seed: u64) -> OpTest {
    let mut rng = Rng(seed);
    let mut p = OpTest::new("");
    let q = p.input_f32(&[1, t, h, d], &rand(&mut rng, t * h * d));
    let k = p.input_f32(&[1, t, h, d], &rand(&mut rng, t * h * d));
    let v = p.input_f32(&[1, t, h, d], &rand(&mut rng, t * h * d));
    let mask: Vec<f32> = (0..t * t)
        .map(|x| if x % t > x / t { -1e9 } else { 0.0 })
        .collect();
    let m = p.input_f32(&[1, 1, t, t], &mask);
    let c = p.constant_f32(&[], &[0.5]);
    let qd = p.int_list(&[0, 2, 1, 3]);
    let kd = p.int_list(&[0, 2, 3, 1]);
    let vd = p.int_list(&[0, 2, 1, 3]);
    let od = p.int_list(&[0, 2, 1, 3]);
    let qp = p.intermediate_f32(&[1, h, t, d]);
    let q3 = p.view_of(qp, &[h, t, d]);
    let kp = p.intermediate_f32(&[1, h, d, t]);
    let k3 = p.view_of(kp, &[h, d, t]);
    let vp = p.intermediate_f32(&[1, h, t, d]);
    let v3 = p.view_of(vp, &[h, t, d]);
    let s = p.intermediate_f32(&[h, t, t]);
    let s4 = p.view_of(s, &[1, h, t, t]);
    let sc = if scores_out {
        p.output(DType::F32, &[1, h, t, t])
    } else {
        p.intermediate_f32(&[1, h, t, t])
    };
    let one = p.int(1);
    let sm = p.intermediate_f32(&[1, h, t, t]);
    let last = p.int(-1);
    let no = p.boolean(false);
    let pr = p.intermediate_f32(&[1, h, t, t]);
    let p3 = p.view_of(pr, &[h, t, t]);
    let o = p.intermediate_f32(&[h, t, d]);
    let o4 = p.view_of(o, &[1, h, t, d]);
    let y = p.output(DType::F32, &[1, t, h, d]);
    p.steps(&[
        Step::Kernel("aten::permute_copy.out".into(), vec![q, qd, qp, qp]),
        Step::Kernel("aten::permute_copy.out".into(), vec![k, kd, kp, kp]),
        Step::Kernel("aten::permute_copy.out".into(), vec![v, vd, vp, vp]),
        Step::Kernel("aten::bmm.out".into(), vec![q3, k3, s, s]),
        Step::Kernel("aten::mul.out".into(), vec![s4, c, sc, sc]),
        Step::Kernel("aten::add.out".into(), vec![sc, m, one, sm, sm]),
        Step::Kernel("aten::_softmax.out".into(), vec![sm, last, no, pr, pr]),
        Step::Kernel("aten::bmm.out".into(), vec![p3, v3, o, o]),
        Step::Kernel("aten::permute_copy.out".into(), vec![o4, od, y, y]),
    ]);
    p
}

/// The chain above is one Attention region computing what the portable calls computed; when
/// something else reads the scores (here: they are also an output) it stays portable.
#[test]
fn an_attention_chain_is_one_region_unless_its_inner_values_are_read() {
    for (h, t, d) in [(3, 5, 4), (1, 17, 8), (2, 1, 3)] {
        let prog = attention_program(h, t, d, false, 7);
        let want = prog.run().unwrap();
        let out = lowered(&prog, "neon");
        let a = &out.report.methods[0].attentions;
        assert_eq!(a.len(), 1, "h {h} t {t} d {d}");
        assert_eq!(
            (a[0].heads, a[0].head_dim, a[0].q_rows, a[0].kv_rows),
            (h, d, t, t)
        );
        assert_eq!(a[0].absorbed.len(), 9);
        close(&prog.run_program(&out.bytes).unwrap(), &want);
        let prog = attention_program(h, t, d, true, 7);
        let out = lowered(&prog, "neon");
        assert!(
            out.report.methods[0].attentions.is_empty(),
            "scores read elsewhere"
        );
        close(&prog.run_program(&out.bytes).unwrap(), &prog.run().unwrap());
    }
}
