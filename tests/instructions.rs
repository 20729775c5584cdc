//! Every instruction kind through the real loader and executor: KernelCall, MoveCall,
//! JumpFalseCall (bool values and bool tensors, forward and backward jumps), FreeCall, and the
//! runaway-loop guard.

use ptera::testing::{OpTest, Step};
use ptera::{DType, Error, KernelError};

fn k(key: &str, args: &[i32]) -> Step {
    Step::Kernel(key.to_string(), args.to_vec())
}

/// `out = cond ? tanh(x) : -x`, with the condition a bool tensor input.
fn branch(cond: bool) -> Vec<f32> {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[3], &[0.5, -1.0, 2.0]);
    let c = t.input_bool(&[1], &[cond]);
    let never = t.boolean(false);
    let out = t.output(DType::F32, &[3]);
    t.steps(&[
        Step::JumpFalse(c, 3),
        k("aten::tanh.out", &[x, out, out]),
        Step::JumpFalse(never, 4),
        k("aten::neg.out", &[x, out, out]),
    ]);
    t.run().unwrap()[0].f32()
}

#[test]
fn jump_false_selects_a_branch() {
    let x = [0.5f32, -1.0, 2.0];
    let taken: Vec<f32> = x.iter().map(|v| v.tanh()).collect();
    let not_taken: Vec<f32> = x.iter().map(|v| -v).collect();
    let got = branch(true);
    for (g, w) in got.iter().zip(&taken) {
        assert!((g - w).abs() < 1e-6);
    }
    assert_eq!(branch(false), not_taken);
}

#[test]
fn move_call_aliases_the_tensor_handle() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2], &[1.0, -2.0]);
    let a = t.output(DType::F32, &[2]);
    let b = t.output(DType::F32, &[2]);
    t.steps(&[k("aten::abs.out", &[x, a, a]), Step::Move(a, b)]);
    let out = t.run().unwrap();
    assert_eq!(out[0].f32(), vec![1.0, 2.0]);
    assert_eq!(
        out[1].f32(),
        vec![1.0, 2.0],
        "output 1 now refers to output 0's tensor"
    );
}

#[test]
fn free_call_unbinds_data() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2], &[1.0, -2.0]);
    let a = t.output(DType::F32, &[2]);
    t.steps(&[Step::Free(x), k("aten::abs.out", &[x, a, a])]);
    match t.run() {
        Err(Error::Kernel {
            instruction: 1,
            operator,
            source: KernelError::NoData { arg: 0 },
        }) => {
            assert_eq!(operator.as_str(), "aten::abs.out")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn loop_runs_until_the_condition_fails() {
    // i = 0; do { i = i + 1 } while (i < 5): a counter tensor and a backward jump.
    let mut t = OpTest::new("");
    let i = t.input_f32(&[1], &[0.0]);
    let one = t.double(1.0);
    let limit = t.double(5.0);
    let flag = t.output(DType::Bool, &[1]);
    let done = t.output(DType::Bool, &[1]);
    let tmp = t.output(DType::F32, &[1]);
    let alpha = t.int(1);
    let no = t.boolean(false);
    t.steps(&[
        k("aten::add.Scalar_out", &[i, one, alpha, tmp, tmp]),
        k("aten::copy_", &[i, tmp, no, i]),
        k("aten::lt.Scalar_out", &[i, limit, flag, flag]),
        k("aten::logical_not.out", &[flag, done, done]),
        Step::JumpFalse(done, 0),
    ]);
    let out = t.run().unwrap();
    assert_eq!(out[2].f32(), vec![5.0]);
}

#[test]
fn runaway_loops_hit_the_instruction_limit() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1], &[0.0]);
    let o = t.output(DType::F32, &[1]);
    let never = t.boolean(false);
    t.steps(&[k("aten::neg.out", &[x, o, o]), Step::JumpFalse(never, 0)]);
    match t.run() {
        Err(Error::StepLimit { limit, .. }) => {
            assert_eq!(limit, ptera::exec::run::DEFAULT_STEP_LIMIT)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn jump_targets_are_validated_at_load() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1], &[0.0]);
    let never = t.boolean(false);
    t.steps(&[Step::JumpFalse(never, 7), Step::Free(x)]);
    assert!(matches!(
        t.run(),
        Err(Error::IndexOutOfRange {
            what: "JumpFalseCall.destination_instruction",
            ..
        })
    ));
    let mut t = OpTest::new("");
    t.input_f32(&[1], &[0.0]);
    t.steps(&[Step::Move(0, 99)]);
    assert!(matches!(
        t.run(),
        Err(Error::IndexOutOfRange {
            what: "MoveCall.move_to",
            ..
        })
    ));
}

/// The caller sets the budget: the same endless loop stops after exactly the instructions it
/// allows, with the limit and the instruction in the error.
#[test]
fn the_caller_sets_the_step_limit() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program, Registry, Shape};
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1], &[0.0]);
    let o = t.output(DType::F32, &[1]);
    let never = t.boolean(false);
    t.steps(&[k("aten::neg.out", &[x, o, o]), Step::JumpFalse(never, 0)]);
    let bytes = AlignedBuf::from_bytes(&t.build());
    let program = Program::load(bytes.as_slice()).unwrap();
    let reg = Registry::portable();
    let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
    let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
    let mut m = bufs.load(meta, &reg).unwrap();
    for limit in [1u64, 7, 1000] {
        m.set_input(
            0,
            DType::F32,
            &Shape::new(&[1]).unwrap(),
            &0f32.to_le_bytes(),
        )
        .unwrap();
        m.set_step_limit(limit);
        match m.execute() {
            Err(Error::StepLimit {
                chain: 0,
                instruction,
                limit: l,
            }) => {
                assert_eq!(l, limit);
                // Two instructions per iteration: the (limit+1)-th step is at pc limit % 2.
                assert_eq!(instruction as u64, limit % 2);
            }
            other => panic!("limit {limit}: {other:?}"),
        }
    }
}

/// The output-aliasing check moves to load time where the plan proves it (`exec::alias`):
/// every call of these language models is proved; a call naming one tensor at two argument
/// positions (an input and its output, or twice as input: `mul(x, x)`), an output planned
/// over an input, or a method with moves keep the run-time check (and still fail it).
#[test]
fn output_aliasing_is_proved_at_load_where_the_plan_allows() {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program, Registry};
    let proved = |bytes: &[u8]| {
        let buf = AlignedBuf::from_bytes(bytes);
        let reg = Registry::standard();
        let p = Program::load(buf.as_slice()).unwrap();
        let meta = MethodMeta::new(&p, "forward", &reg).unwrap();
        let n = meta.num_instructions();
        let mut a = OwnedArenas::for_meta(&meta).unwrap();
        let m = a.load(meta, &reg).unwrap();
        // Calls removed or run at load (`exec::elide`, `exec::fold`) need no proof.
        let skipped = m.elided_calls() + m.folded_calls();
        (m.alias_proved_calls(), skipped, n)
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    for case in ["gpt2_portable", "opt_xnnpack", "optt128_portable"] {
        let bytes = std::fs::read(format!("{dir}{case}.pte")).unwrap();
        let (got, skipped, n) = proved(&bytes);
        assert_eq!(got + skipped, n, "{case}");
    }
    // clone(x, out = x): not proved, and the run-time check refuses it.
    let mut t = OpTest::new("aten::clone.out");
    let x = t.input_f32(&[3], &[1.0, 2.0, 3.0]);
    let none = t.none();
    t.call(&[x, none, x, x]);
    assert_eq!(proved(&t.build()), (0, 0, 1));
    assert!(matches!(
        t.run(),
        Err(Error::Kernel {
            source: KernelError::Aliasing { .. },
            ..
        })
    ));
    // An output planned over its input's bytes: not proved.
    let mut t = OpTest::new("aten::neg.out");
    let x = t.input_f32(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let y = t.view_of(x, &[4]);
    t.call(&[x, y, y]);
    assert_eq!(proved(&t.build()).0, 0);
}

/// `f` of program `bytes`'s `forward`, loaded with the standard registry.
fn with_method<R>(bytes: &[u8], f: impl FnOnce(&ptera::Method<'_, '_>) -> R) -> R {
    with_method_folding(bytes, ptera::exec::fold::DEFAULT_BUDGET, f)
}

/// `f` of program `bytes`'s `forward`, loaded with the standard registry and at most
/// `budget` bytes of values folded at load (`exec::fold`; 0: none).
fn with_method_folding<R>(
    bytes: &[u8],
    budget: usize,
    f: impl FnOnce(&ptera::Method<'_, '_>) -> R,
) -> R {
    use ptera::host::AlignedBuf;
    use ptera::{MethodMeta, OwnedArenas, Program, Registry};
    let buf = AlignedBuf::from_bytes(bytes);
    let reg = Registry::standard();
    let p = Program::load(buf.as_slice()).unwrap();
    let meta = MethodMeta::new(&p, "forward", &reg).unwrap();
    let meta = meta.with_fold_budget(budget).unwrap();
    let mut a = OwnedArenas::for_meta(&meta).unwrap();
    let m = a.load(meta, &reg).unwrap();
    f(&m)
}

/// Copies removed at load (`exec::elide`) in program `bytes`, nothing folded (folding runs
/// first and takes some copies of constants).
fn elided_calls(bytes: &[u8]) -> usize {
    with_method_folding(bytes, 0, |m| m.elided_calls())
}

/// The instructions `execute` dispatches in program `bytes` (`Method::dispatched_calls`).
fn dispatched(bytes: &[u8]) -> Vec<usize> {
    with_method(bytes, |m| m.dispatched_calls().collect())
}

/// A copy that changes nothing (`view_copy`, `squeeze_copy`, `expand_copy` to the same
/// count, ...) is removed at load when the plan allows its output to sit on its input's
/// bytes; the outputs are the same either way. Each refused case is a way the elision would
/// give wrong outputs, and each would fail its output check if it were elided.
#[test]
fn identity_copies_are_elided_at_load_where_the_plan_allows() {
    let xs = [1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0];
    let neg: Vec<f32> = xs.iter().map(|v| -v).collect();
    let abs: Vec<f32> = xs.iter().map(|v| v.abs()).collect();
    let check = |t: &OpTest, elided: usize, want: &[&[f32]]| {
        assert_eq!(elided_calls(&t.build()), elided);
        let got = t.run().unwrap();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.f32(), *w);
        }
    };
    // neg → view_copy → neg: the view goes.
    let plain = |t: &mut OpTest| {
        let x = t.input_f32(&[2, 3], &xs);
        let a = t.intermediate_f32(&[2, 3]);
        let size = t.int_list(&[3, 2]);
        let b = t.intermediate_f32(&[3, 2]);
        (x, a, size, b)
    };
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 1, &[&xs]);
    // The elided view is no dispatched call: the forward's calls are instructions 0 and 2.
    assert_eq!(dispatched(&t.build()), vec![0, 2]);

    // Chained: squeeze_copy then expand_copy to the same shape, both go.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, 2, 3], &xs);
    let a = t.intermediate_f32(&[1, 2, 3]);
    let dims = t.int_list(&[0]);
    let b = t.intermediate_f32(&[2, 3]);
    let size = t.int_list(&[2, 3]);
    let implicit = t.boolean(false);
    let c = t.intermediate_f32(&[2, 3]);
    let y = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::squeeze_copy.dims_out", &[a, dims, b, b]),
        k("aten::expand_copy.out", &[b, size, implicit, c, c]),
        k("aten::neg.out", &[c, y, y]),
    ]);
    check(&t, 2, &[&xs]);

    // The copy's output storage is reused after its last read (written, then read): it goes.
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let y = t.output(DType::F32, &[3, 2]);
    let r = t.view_of(b, &[6]);
    let z = t.output(DType::F32, &[6]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, y, y]),
        k("aten::abs.out", &[x, r, r]),
        k("aten::neg.out", &[r, z, z]),
    ]);
    let neg_abs: Vec<f32> = abs.iter().map(|v| -v).collect();
    check(&t, 1, &[&xs, &neg_abs]);

    // A copy there and a copy back: ExecuTorch plans the second copy's output over the first
    // copy's input (a squeeze, then an expand to the same shape). Both go: the first moves
    // its output onto the input's bytes, which makes the second write what is already there
    // (without that rule only the second goes). The input is a method input, so it cannot
    // move onto the output's bytes instead.
    let there_and_back = |t: &mut OpTest| {
        let x = t.input_f32(&[2, 3], &xs);
        let size = t.int_list(&[3, 2]);
        let b = t.intermediate_f32(&[3, 2]);
        let size2 = t.int_list(&[2, 3]);
        let c = t.view_of(x, &[2, 3]);
        (x, size, b, size2, c)
    };
    let mut t = OpTest::new("");
    let (x, size, b, size2, c) = there_and_back(&mut t);
    let y = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::view_copy.out", &[b, size2, c, c]),
        k("aten::neg.out", &[c, y, y]),
    ]);
    check(&t, 2, &[&neg]);

    // The same, but the input's bytes are written (another value planned there) before the
    // copy back reads the first copy's output: the first copy stays (its output would read
    // the other value); the copy back still goes, onto its own input's bytes.
    let mut t = OpTest::new("");
    let (x, size, b, size2, c) = there_and_back(&mut t);
    let x2 = t.input_f32(&[2, 3], &neg);
    let w = t.view_of(x, &[2, 3]);
    let y1 = t.output(DType::F32, &[2, 3]);
    let y2 = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::abs.out", &[x2, w, w]),
        k("aten::neg.out", &[w, y1, y1]),
        k("aten::view_copy.out", &[b, size2, c, c]),
        k("aten::neg.out", &[c, y2, y2]),
    ]);
    let neg_abs1: Vec<f32> = abs.iter().map(|v| -v).collect();
    check(&t, 1, &[&neg_abs1, &neg]);

    // A view of the output written in place while the output is still read: kept (the
    // output would no longer see the write). The input is a method input, so it cannot move.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let x2 = t.input_f32(&[3, 2], &abs);
    let size = t.int_list(&[3, 2]);
    let b = t.intermediate_f32(&[3, 2]);
    let bv = t.view_of(b, &[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::abs.out", &[x2, bv, bv]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    let neg_abs0: Vec<f32> = abs.iter().map(|v| -v).collect();
    check(&t, 0, &[&neg_abs0]);

    // From here on the copy's input is a method input, which may not move onto the output's
    // bytes: only the output may move onto the input's bytes.
    // A view planned over the copy's output (ExecuTorch's removed `view_copy`), read after
    // it: it moves with the output, and the copy goes.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let size = t.int_list(&[3, 2]);
    let b = t.intermediate_f32(&[3, 2]);
    let v = t.view_of(b, &[6]);
    let y = t.output(DType::F32, &[6]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::neg.out", &[v, y, y]),
    ]);
    check(&t, 1, &[&neg]);

    // ... but a tensor planned there that is read only after another tensor was written over
    // those bytes names that tensor's data, not the copy's output: it stays, reading what the
    // other tensor wrote (|x|), and the copy still goes. (Moved along, `v` would read x.)
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let size = t.int_list(&[3, 2]);
    let b = t.intermediate_f32(&[3, 2]);
    let w = t.view_of(b, &[2, 3]);
    let v = t.view_of(b, &[6]);
    let y1 = t.output(DType::F32, &[3, 2]);
    let y = t.output(DType::F32, &[6]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::neg.out", &[b, y1, y1]),
        k("aten::abs.out", &[x, w, w]),
        k("aten::neg.out", &[v, y, y]),
    ]);
    check(&t, 1, &[&neg, &neg_abs0]);

    // The input's bytes written over before the output is read: kept.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let x2 = t.input_f32(&[2, 3], &abs);
    let size = t.int_list(&[3, 2]);
    let b = t.intermediate_f32(&[3, 2]);
    let w = t.view_of(x, &[2, 3]);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::neg.out", &[x2, w, w]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 0, &[&neg]);

    // The output written again while the input is still read: kept.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let x2 = t.input_f32(&[3, 2], &abs);
    let size = t.int_list(&[3, 2]);
    let b = t.intermediate_f32(&[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    let z = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::view_copy.out", &[x, size, b, b]),
        k("aten::neg.out", &[b, y, y]),
        k("aten::abs.out", &[x2, b, b]),
        k("aten::neg.out", &[x, z, z]),
    ]);
    check(&t, 0, &[&neg, &neg]);

    // The input moves onto the output's bytes (its writer writes there) when the consumer
    // writes over the input's bytes, as ExecuTorch's plans do once the input is dead.
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let w = t.view_of(a, &[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, w, w]),
        k("aten::neg.out", &[w, y, y]),
    ]);
    check(&t, 1, &[&neg]);

    // ... but not when a view of the input's own bytes is read after its writer (it would
    // read bytes nothing writes any more).
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let va = t.view_of(a, &[6]);
    let y1 = t.output(DType::F32, &[6]);
    let w = t.view_of(a, &[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[va, y1, y1]),
        k("aten::neg.out", &[b, w, w]),
        k("aten::neg.out", &[w, y, y]),
    ]);
    check(&t, 0, &[&xs, &neg]);

    // ... nor when the output is written again while the input is still read.
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let x2 = t.input_f32(&[3, 2], &abs);
    let w = t.view_of(a, &[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    let z = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, y, y]),
        k("aten::abs.out", &[x2, b, b]),
        k("aten::neg.out", &[a, z, z]),
        k("aten::neg.out", &[b, w, w]),
    ]);
    check(&t, 0, &[&xs, &xs]);

    // ... but not when that writer reads the output's bytes (a transpose over its own input).
    let mut t = OpTest::new("");
    let x = t.input_f32(&[3, 2], &xs);
    let u = t.intermediate_f32(&[3, 2]);
    let perm = t.int_list(&[1, 0]);
    let a = t.intermediate_f32(&[2, 3]);
    let size = t.int_list(&[6]);
    let b = t.view_of(u, &[6]);
    let w = t.view_of(a, &[6]);
    let y = t.output(DType::F32, &[6]);
    t.steps(&[
        k("aten::neg.out", &[x, u, u]),
        k("aten::permute_copy.out", &[u, perm, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, w, w]),
        k("aten::neg.out", &[w, y, y]),
    ]);
    // x as [3, 2] transposed, negated three times.
    let xt = [-1.0f32, -3.0, -5.0, 2.0, 4.0, 6.0];
    check(&t, 0, &[&xt]);

    // ... nor when another instruction uses the output's bytes between that writer and the
    // copy.
    let mut t = OpTest::new("");
    let (x, a, size, b) = plain(&mut t);
    let q = t.view_of(b, &[2, 3]);
    let r = t.output(DType::F32, &[2, 3]);
    let w = t.view_of(a, &[3, 2]);
    let y = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::abs.out", &[x, q, q]),
        k("aten::neg.out", &[q, r, r]),
        k("aten::view_copy.out", &[a, size, b, b]),
        k("aten::neg.out", &[b, w, w]),
        k("aten::neg.out", &[w, y, y]),
    ]);
    let neg_abs: Vec<f32> = abs.iter().map(|v| -v).collect();
    check(&t, 0, &[&neg_abs, &neg]);

    // A method output: kept (the caller reads it after the run, at its own bytes).
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2, 3], &xs);
    let a = t.intermediate_f32(&[2, 3]);
    let size = t.int_list(&[3, 2]);
    let b = t.output(DType::F32, &[3, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::view_copy.out", &[a, size, b, b]),
    ]);
    check(&t, 0, &[&neg]);

    // expand_copy that broadcasts is not a copy of the same bytes: kept.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, 3], &xs[..3]);
    let a = t.intermediate_f32(&[1, 3]);
    let size = t.int_list(&[2, 3]);
    let implicit = t.boolean(false);
    let b = t.intermediate_f32(&[2, 3]);
    let y = t.output(DType::F32, &[2, 3]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::expand_copy.out", &[a, size, implicit, b, b]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 0, &[&[1.0, -2.0, 3.0, 1.0, -2.0, 3.0]]);

    // On exported programs (outputs checked by the fixture tests): the XNNPACK regions say
    // which arguments they read and write (`Backend::arg_access`), which the proofs need
    // around the regions. Counts at the time of writing; fewer means a proof got weaker.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    for (case, want) in [
        ("vit_xnnpack", 11),
        ("bert_xnnpack", 13),
        ("gpt2_portable", 12),
    ] {
        let bytes = std::fs::read(format!("{dir}{case}.pte")).unwrap();
        assert_eq!(elided_calls(&bytes), want, "{case}");
    }
}

/// A slice that is one contiguous block of its input (`slice_copy.Tensor` with step 1,
/// `select_copy.int`, every dim before the sliced one 1) is removed at load when the plan
/// allows its output to sit on that block's bytes. Each refused case would give wrong
/// outputs, or the kernel's own, if it were elided.
#[test]
fn contiguous_slices_are_elided_at_load_where_the_plan_allows() {
    // x: [1, 3, 2] = rows (1, -2), (3, -4), (5, -6).
    let xs = [1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0];
    let check = |t: &OpTest, elided: usize, want: &[f32]| {
        assert_eq!(elided_calls(&t.build()), elided);
        let got = t.run().unwrap();
        assert_eq!(got[0].f32(), want);
    };
    // neg → slice rows start..end of dim 1 → neg.
    let slice = |start: Option<i64>, end: Option<i64>, step: i64, rows: usize, want: &[f32]| {
        let mut t = OpTest::new("");
        let x = t.input_f32(&[1, 3, 2], &xs);
        let a = t.intermediate_f32(&[1, 3, 2]);
        let dim = t.int(1);
        let mut opt = |v: Option<i64>| match v {
            Some(v) => t.int(v),
            None => t.none(),
        };
        let (s, e) = (opt(start), opt(end));
        let st = t.int(step);
        let b = t.intermediate_f32(&[1, rows, 2]);
        let y = t.output(DType::F32, &[1, rows, 2]);
        t.steps(&[
            k("aten::neg.out", &[x, a, a]),
            k("aten::slice_copy.Tensor_out", &[a, dim, s, e, st, b, b]),
            k("aten::neg.out", &[b, y, y]),
        ]);
        (t, want.to_vec())
    };
    // The last row (negative start, end None), the middle one, the last two: elided, and the
    // outputs are the rows themselves.
    let (t, want) = slice(Some(-1), None, 1, 1, &[5.0, -6.0]);
    check(&t, 1, &want);
    assert_eq!(dispatched(&t.build()), vec![0, 2]);
    let (t, want) = slice(Some(1), Some(2), 1, 1, &[3.0, -4.0]);
    check(&t, 1, &want);
    let (t, want) = slice(Some(1), Some(i64::MAX), 1, 2, &[3.0, -4.0, 5.0, -6.0]);
    check(&t, 1, &want);
    // Step 2 takes rows 0 and 2, which are not one block: kept.
    let (t, want) = slice(None, None, 2, 2, &[1.0, -2.0, 5.0, -6.0]);
    check(&t, 0, &want);

    // select_copy of the last row: elided.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, 3, 2], &xs);
    let a = t.intermediate_f32(&[1, 3, 2]);
    let dim = t.int(-2);
    let index = t.int(-1);
    let b = t.intermediate_f32(&[1, 2]);
    let y = t.output(DType::F32, &[1, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::select_copy.int_out", &[a, dim, index, b, b]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 1, &[5.0, -6.0]);

    // A leading dim that is not 1: the slice of dim 1 of [3, 2] takes one element of every
    // row, not a block: kept.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[3, 2], &xs);
    let a = t.intermediate_f32(&[3, 2]);
    let dim = t.int(1);
    let (s, e, st) = (t.int(1), t.int(2), t.int(1));
    let b = t.intermediate_f32(&[3, 1]);
    let y = t.output(DType::F32, &[3, 1]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::slice_copy.Tensor_out", &[a, dim, s, e, st, b, b]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 0, &[-2.0, -4.0, -6.0]);

    // The input's bytes written over (another value planned there) before the slice's output
    // is read: kept (the output would read the other value).
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, 3, 2], &xs);
    let x2 = t.input_f32(&[1, 3, 2], &[0.5; 6]);
    let a = t.intermediate_f32(&[1, 3, 2]);
    let dim = t.int(1);
    let index = t.int(2);
    let b = t.intermediate_f32(&[1, 2]);
    let w = t.view_of(a, &[1, 3, 2]);
    let y1 = t.output(DType::F32, &[1, 3, 2]);
    let y = t.output(DType::F32, &[1, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::select_copy.int_out", &[a, dim, index, b, b]),
        k("aten::neg.out", &[x2, w, w]),
        k("aten::neg.out", &[w, y1, y1]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    assert_eq!(elided_calls(&t.build()), 0);
    let got = t.run().unwrap();
    assert_eq!(got[1].f32(), [5.0, -6.0]);

    // The index is an Int an instruction computes at run time (`sym_size` of x's dim 2
    // writes 2 into it): kept, and not prepared at load either (`exec::prepared` leaves every
    // call that reads such a value to the kernel). Its value in the program, 0, would have
    // selected row 0.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1, 3, 2], &xs);
    let a = t.intermediate_f32(&[1, 3, 2]);
    let two = t.int(2);
    let index = t.int(0);
    let dim = t.int(1);
    let b = t.intermediate_f32(&[1, 2]);
    let y = t.output(DType::F32, &[1, 2]);
    t.steps(&[
        k("aten::neg.out", &[x, a, a]),
        k("aten::sym_size.int", &[x, two, index]),
        k("aten::select_copy.int_out", &[a, dim, index, b, b]),
        k("aten::neg.out", &[b, y, y]),
    ]);
    check(&t, 0, &[5.0, -6.0]);
}

/// The layer norms, the adds and multiplies, the matrix products, the permutes and the
/// identity copies of these language models are prepared at load (`exec::prepared`: the
/// instruction loop runs the work decided then, not the kernel); `tests/fixtures.rs` checks
/// the outputs are still ExecuTorch's. GPT-2: its 5 layer norms, its 21 float adds and
/// multiplies (residuals, the GELU's scalings by one-element constants, the mask added to
/// every head), its 8 `addmm` and 4 `bmm` (not the logits' `mm`, whose last row alone is
/// demanded), its 11 permutes (heads and key transposes), 7 copies of their input's bytes
/// (expands to the same shape, clones: kept because the planner reuses the input's bytes
/// while the output is read), its 2 splits of the fused Q/K/V product, the token embedding,
/// the attention mask's conversion to bool, the last row's selection; its 3 int64 position
/// sums are constant and run at load (`exec::fold`, `tests/fold.rs`). OPT: 5 layer norms,
/// its 16 adds, multiplies and subtractions, its 12 `addmm` and 4 `bmm`, its permutes
/// (heads, keys, and the weight transposes the fold budget leaves in the forward), 1 copy,
/// its 2 embeddings (tokens, and positions from the attention mask), the mask's conversion,
/// the last row's selection.
#[test]
fn language_model_layers_are_prepared_at_load() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    for (case, want) in [("gpt2_portable", 61), ("opt_portable", 60)] {
        let bytes = std::fs::read(format!("{dir}{case}.pte")).unwrap();
        assert_eq!(with_method(&bytes, |m| m.prepared_calls()), want, "{case}");
    }
}
