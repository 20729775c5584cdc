//! Output-row demand (`ptera::exec::demand`): a matmul whose result only feeds
//! `select_copy(dim = -2, index)` computes only that row, and only when no other instruction
//! or method output can see the other rows.

use ptera::testing::{OpTest, Step, TestTensor};
use ptera::DType;

fn k(key: &str, args: &[i32]) -> Step {
    Step::Kernel(key.to_string(), args.to_vec())
}

const M: usize = 4;
const K: usize = 3;
const N: usize = 5;

fn x_data() -> Vec<f32> {
    (0..M * K).map(|i| 0.25 * i as f32 + 0.5).collect()
}
fn w_data() -> Vec<f32> {
    (0..K * N).map(|i| 0.1 * i as f32 - 0.7).collect()
}

/// `x @ w` row `i` (w `[K, N]`).
fn row(i: usize) -> Vec<f32> {
    let (x, w) = (x_data(), w_data());
    (0..N)
        .map(|j| (0..K).map(|p| x[i * K + p] * w[p * N + j]).sum())
        .collect()
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// Builds `y = matmul(x, w)` with `op` (`mm`, `addmm` with a zero bias, `linear` with w
/// transposed), `logits = view(y, [1, M, N])`, `out = select_copy(logits, dim, index)`, plus
/// `extra` steps; returns the test, y's and the view's value ids.
fn lm_head(
    op: &str,
    dim: i64,
    index: i64,
    extra: impl Fn(&mut OpTest, i32) -> Vec<Step>,
) -> (OpTest, i32) {
    let mut t = OpTest::new("");
    let x = t.input_f32(&[M, K], &x_data());
    let y = t.intermediate_f32(&[M, N]);
    let logits = t.view_of(y, &[1, M, N]);
    let sel_dims: Vec<usize> = if dim == 1 || dim == -2 {
        vec![1, N]
    } else {
        vec![1, M]
    };
    let out = t.output(DType::F32, &sel_dims);
    let (d, i) = (t.int(dim), t.int(index));
    let mm = match op {
        "mm" => {
            let w = t.constant_f32(&[K, N], &w_data());
            k("aten::mm.out", &[x, w, y, y])
        }
        "addmm" => {
            let w = t.constant_f32(&[K, N], &w_data());
            let b = t.constant_f32(&[N], &[0.0; N]);
            let (one, one2) = (t.int(1), t.int(1));
            k("aten::addmm.out", &[b, x, w, one, one2, y, y])
        }
        _ => {
            let wd = w_data();
            let wt: Vec<f32> = (0..N * K).map(|q| wd[(q % K) * N + q / K]).collect();
            let w = t.constant_f32(&[N, K], &wt);
            let none = t.none();
            k("aten::linear.out", &[x, w, none, y, y])
        }
    };
    let mut steps = vec![
        mm,
        k("aten::select_copy.int_out", &[logits, d, i, out, out]),
    ];
    steps.extend(extra(&mut t, y));
    t.steps(&steps);
    (t, y)
}

fn rows_of(t: &TestTensor) -> Vec<Vec<f32>> {
    t.f32().chunks(N).map(|r| r.to_vec()).collect()
}

#[test]
fn last_row_only_for_mm_addmm_linear() {
    for op in ["mm", "addmm", "linear"] {
        for index in [-1i64, 2] {
            let (t, y) = lm_head(op, 1, index, |_, _| vec![]);
            let r = t.run_inspect(&[y]).unwrap();
            let want = if index < 0 { M - 1 } else { index as usize };
            assert_eq!(r.demands.len(), 1, "{op}");
            let d = r.demands[0];
            assert_eq!(
                (d.chain, d.pc, d.value, d.lo, d.hi),
                (0, 0, y as u32, want as u32, want as u32 + 1)
            );
            close(&r.outputs[0].f32(), &row(want));
            // The selected row was computed, the others were never written (arena zeros).
            let ys = rows_of(&r.tensors[0]);
            for (i, yr) in ys.iter().enumerate() {
                if i == want {
                    close(yr, &row(i));
                } else {
                    assert!(yr.iter().all(|&v| v == 0.0), "{op}: row {i} was computed");
                }
            }
        }
    }
}

fn assert_all_rows(t: &OpTest, y: i32) {
    let r = t.run_inspect(&[y]).unwrap();
    assert!(r.demands.is_empty(), "{:?}", r.demands);
    for (i, yr) in rows_of(&r.tensors[0]).iter().enumerate() {
        close(yr, &row(i));
    }
}

#[test]
fn every_row_when_another_instruction_reads_the_matrix() {
    let (t, y) = lm_head("mm", -2, -1, |t, y| {
        let o = t.output(DType::F32, &[M, N]);
        vec![k("aten::abs.out", &[y, o, o])]
    });
    assert_all_rows(&t, y);
}

#[test]
fn every_row_when_the_matrix_is_an_output() {
    // The LM-head program again, but with the matrix itself a method output.
    let mut t2 = OpTest::new("");
    let x = t2.input_f32(&[M, K], &x_data());
    let w = t2.constant_f32(&[K, N], &w_data());
    let y2 = t2.output(DType::F32, &[M, N]);
    let logits = t2.view_of(y2, &[1, M, N]);
    let out = t2.output(DType::F32, &[1, N]);
    let (d, i) = (t2.int(1), t2.int(-1));
    t2.steps(&[
        k("aten::mm.out", &[x, w, y2, y2]),
        k("aten::select_copy.int_out", &[logits, d, i, out, out]),
    ]);
    assert_all_rows(&t2, y2);
}

#[test]
fn every_row_for_a_column_select_or_a_jump() {
    // dim 2 selects a column: every row contributes.
    let (t, y) = lm_head("mm", 2, -1, |_, _| vec![]);
    assert_all_rows(&t, y);
    // Any jump in the chain: no position-based reasoning.
    let (t, y) = lm_head("linear", 1, -1, |t, _| {
        let never = t.boolean(true);
        vec![Step::JumpFalse(never, 0)]
    });
    assert_all_rows(&t, y);
}

#[test]
fn every_row_when_the_index_is_computed_at_run_time() {
    // index = 0 + (M - 1) by a prim op before the head: at load it still reads 0, so the load
    // step must not trust it (a stale reading would compute the wrong row).
    let mut t = OpTest::new("");
    let x = t.input_f32(&[M, K], &x_data());
    let w = t.constant_f32(&[K, N], &w_data());
    let y = t.intermediate_f32(&[M, N]);
    let logits = t.view_of(y, &[1, M, N]);
    let out = t.output(DType::F32, &[1, N]);
    let (zero, last, dim) = (t.int(0), t.int(M as i64 - 1), t.int(1));
    let index = t.int(0);
    t.steps(&[
        k("executorch_prim::add.Scalar", &[zero, last, index]),
        k("aten::mm.out", &[x, w, y, y]),
        k("aten::select_copy.int_out", &[logits, dim, index, out, out]),
    ]);
    let r = t.run_inspect(&[y]).unwrap();
    assert!(r.demands.is_empty(), "{:?}", r.demands);
    close(&r.outputs[0].f32(), &row(M - 1));
}
