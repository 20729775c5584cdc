//! Load-time constant folding (`exec::fold`): calls whose operands are all constants run once
//! at load; the forward reads their results from the metadata buffer.

mod common;

use common::{inputs, pte};
use ptera::exec::fold::DEFAULT_BUDGET;
use ptera::testing::{OpTest, Step};
use ptera::{DType, MethodMeta, OwnedArenas, Program, Registry, Shape};

/// Outputs of two forwards of fixture `case` loaded once with at most `budget` folded bytes:
/// the fixture's inputs, then the same inputs with every int64 element but the first of each
/// input set to 1 (another attention mask, other tokens), then the fixture's inputs again.
/// Also the folded calls and the metadata bytes they keep.
fn three_runs(case: &str, budget: usize) -> (Vec<Vec<u8>>, usize, usize) {
    let buf = pte(case);
    let reg = Registry::standard();
    let p = Program::load(buf.as_slice()).unwrap();
    let meta = MethodMeta::new(&p, "forward", &reg)
        .unwrap()
        .with_fold_budget(budget)
        .unwrap();
    let (bytes, planned) = (meta.folded_bytes(), meta.folded_calls());
    let mut a = OwnedArenas::for_meta(&meta).unwrap();
    let mut m = a.load(meta, &reg).unwrap();
    // What `MethodMeta` counted is what the load folded.
    assert_eq!(m.folded_calls(), planned, "{case}");
    let ins = inputs(case);
    let mut outs = Vec::new();
    for round in 0..3 {
        for (i, inp) in ins.iter().enumerate() {
            let mut data = inp.bytes.clone();
            if round == 1 && inp.dtype == DType::I64 {
                for e in data.chunks_exact_mut(8).skip(1) {
                    e.copy_from_slice(&1i64.to_le_bytes());
                }
            }
            let shape = Shape::new(&inp.shape).unwrap();
            m.set_input(i, inp.dtype, &shape, &data).unwrap();
        }
        m.execute().unwrap();
        for o in 0..m.num_outputs() {
            outs.push(m.output(o).unwrap().bytes().to_vec());
        }
    }
    (outs, m.folded_calls(), bytes)
}

/// The mask and position calls of the language models fold: their outputs are bit-identical
/// to forwards that run every call, on the fixture's inputs and on other inputs (the parts of
/// the mask that depend on the attention mask stay in the forward), forward after forward.
/// Counts at the time of writing (GPT-2: the causal mask's `arange`s, `unsqueeze`s, `le`,
/// `bitwise_and` with `full`, the scalars of the `where`, the position ids and their
/// embedding; OPT besides: its constant weights' transposes, within the budget).
#[test]
fn constant_calls_fold_at_load_with_the_same_outputs() {
    for (case, calls) in [
        ("gpt2_portable", 23),
        ("opt_portable", 22),
        ("gpt2_xnnpack", 10),
        ("llama_portable", 39),
        ("bert_portable", 28),
    ] {
        let (folded, n, bytes) = three_runs(case, DEFAULT_BUDGET);
        let (plain, none, no_bytes) = three_runs(case, 0);
        assert_eq!((n, none, no_bytes), (calls, 0, 0), "{case}");
        assert!(
            bytes > 0 && bytes <= DEFAULT_BUDGET,
            "{case}: {bytes} bytes"
        );
        assert_eq!(folded, plain, "{case}");
        // The second forward saw other inputs: its outputs differ from the first's.
        let per = folded.len() / 3;
        assert_ne!(folded[..per], folded[per..2 * per], "{case}");
        assert_eq!(folded[..per], folded[2 * per..], "{case}");
    }
}

/// The budget bounds the bytes kept: a smaller one folds fewer calls (OPT's weight
/// transposes, 16 KiB each, go first), and the outputs stay the same.
#[test]
fn the_fold_budget_bounds_the_bytes_kept() {
    let (all, n_all, b_all) = three_runs("opt_portable", DEFAULT_BUDGET);
    let (some, n_some, b_some) = three_runs("opt_portable", 4096);
    assert!(b_some <= 4096 && b_some < b_all, "{b_some} vs {b_all}");
    assert!(0 < n_some && n_some < n_all, "{n_some} vs {n_all}");
    assert_eq!(all, some);
}

fn k(key: &str, args: &[i32]) -> Step {
    Step::Kernel(key.to_string(), args.to_vec())
}

/// `y = x + (−a)` then `z = y + (−b)` with `−b` planned over `−a`'s bytes (free once `y` is
/// computed): both negations fold, and `−a` is kept before `−b` overwrites its arena bytes at
/// load. A method output computed from constants alone is not folded (it keeps its own
/// storage), nor is a constant result a kept call writes again.
#[test]
fn folded_results_are_kept_before_their_bytes_are_reused() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[3], &[1.0, 2.0, 3.0]);
    let a = t.constant_f32(&[3], &[10.0, 20.0, 30.0]);
    let b = t.constant_f32(&[3], &[100.0, 200.0, 300.0]);
    let na = t.intermediate_f32(&[3]);
    let nb = t.view_of(na, &[3]);
    let y = t.intermediate_f32(&[3]);
    let z = t.output(DType::F32, &[3]);
    let one = t.int(1);
    t.steps(&[
        k("aten::neg.out", &[a, na, na]),
        k("aten::add.out", &[x, na, one, y, y]),
        k("aten::neg.out", &[b, nb, nb]),
        k("aten::add.out", &[y, nb, one, z, z]),
    ]);
    let seen = t.run_inspect(&[]).unwrap();
    assert_eq!(seen.folded, 2);
    assert_eq!(seen.outputs[0].f32(), [-109.0, -218.0, -327.0]);

    // An output of constants alone: computed in the forward.
    let mut t = OpTest::new("");
    let a = t.constant_f32(&[2], &[1.0, -2.0]);
    let y = t.output(DType::F32, &[2]);
    t.steps(&[k("aten::neg.out", &[a, y, y])]);
    let seen = t.run_inspect(&[]).unwrap();
    assert_eq!((seen.folded, seen.outputs[0].f32()), (0, vec![-1.0, 2.0]));

    // −a read, then overwritten by a kept call (x + x into the same tensor), then read again:
    // not folded, so every forward computes −a afresh before the first read.
    let mut t = OpTest::new("");
    let x = t.input_f32(&[2], &[1.0, 2.0]);
    let a = t.constant_f32(&[2], &[10.0, 20.0]);
    let na = t.intermediate_f32(&[2]);
    let y = t.intermediate_f32(&[2]);
    let z = t.output(DType::F32, &[2]);
    let one = t.int(1);
    t.steps(&[
        k("aten::neg.out", &[a, na, na]),
        k("aten::add.out", &[x, na, one, y, y]),
        k("aten::add.out", &[x, x, one, na, na]),
        k("aten::add.out", &[y, na, one, z, z]),
    ]);
    let seen = t.run_inspect(&[]).unwrap();
    assert_eq!((seen.folded, seen.outputs[0].f32()), (0, vec![-7.0, -14.0]));
}

/// A call whose Int list holds a value another call computes as the method runs (a roll by
/// `sym_size` of an input) is not folded: at load the list would hold the program's initial
/// 0, and the roll would keep its input as it is.
#[test]
fn calls_reading_run_time_ints_are_not_folded() {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[1], &[0.5]);
    let c = t.constant_f32(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let (zero, s) = (t.int(0), t.int(0));
    let shifts = t.int_list_of(&[s]);
    let dims = t.int_list(&[0]);
    let r = t.intermediate_f32(&[4]);
    let y = t.output(DType::F32, &[4]);
    t.steps(&[
        k("aten::sym_size.int", &[x, zero, s]),
        k("aten::roll.out", &[c, shifts, dims, r, r]),
        k("aten::neg.out", &[r, y, y]),
    ]);
    let seen = t.run_inspect(&[]).unwrap();
    assert_eq!(seen.folded, 0);
    assert_eq!(seen.outputs[0].f32(), [-4.0, -1.0, -2.0, -3.0]);
}

/// The analysis has a work bound: a program whose byte walks would visit more than
/// `MAX_WALK` instructions folds nothing (and still runs). `−a` read by `calls` adds, each a
/// walk back to it: 1,000 adds fold it, 2,000 (about 2 M instructions walked) do not.
#[test]
fn the_analysis_stops_at_its_work_bound() {
    use ptera::exec::fold::MAX_WALK;
    let run = |calls: usize| {
        let mut t = OpTest::new("");
        let x = t.input_f32(&[2], &[1.0, 2.0]);
        let a = t.constant_f32(&[2], &[10.0, 20.0]);
        let na = t.intermediate_f32(&[2]);
        let one = t.int(1);
        let mut steps = vec![k("aten::neg.out", &[a, na, na])];
        let mut acc = x;
        for i in 0..calls {
            let y = if i + 1 == calls {
                t.output(DType::F32, &[2])
            } else {
                t.intermediate_f32(&[2])
            };
            steps.push(k("aten::add.out", &[acc, na, one, y, y]));
            acc = y;
        }
        t.steps(&steps);
        let seen = t.run_inspect(&[]).unwrap();
        let n = calls as f32;
        assert_eq!(seen.outputs[0].f32(), [1.0 - 10.0 * n, 2.0 - 20.0 * n]);
        seen.folded
    };
    assert!(1000 * 1000 / 2 < MAX_WALK as usize && 2000 * 2000 / 2 > MAX_WALK as usize);
    assert_eq!(run(1000), 1);
    assert_eq!(run(2000), 0);
}
