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
        (m.alias_proved_calls(), n)
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    for case in ["gpt2_portable", "opt_xnnpack", "optt128_portable"] {
        let bytes = std::fs::read(format!("{dir}{case}.pte")).unwrap();
        let (got, n) = proved(&bytes);
        assert_eq!(got, n, "{case}");
    }
    // clone(x, out = x): not proved, and the run-time check refuses it.
    let mut t = OpTest::new("aten::clone.out");
    let x = t.input_f32(&[3], &[1.0, 2.0, 3.0]);
    let none = t.none();
    t.call(&[x, none, x, x]);
    assert_eq!(proved(&t.build()), (0, 1));
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
