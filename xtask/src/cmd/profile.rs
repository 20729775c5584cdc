//! `cargo xtask profile`: where a forward's time goes on the host, from the same events an
//! ETDump holds (`ptera::devtools::etdump::Recorder`): the top operators (kernel calls by
//! operator, delegate-region operations by backend and kind) with their share of the
//! forward, and the top single instructions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use ptera::devtools::etdump::{Event, Kind, Recorder};
use ptera::format::fb;
use ptera::{MethodMeta, OwnedArenas, Program};

use crate::host::{forward_inputs, instruction_count, load_file};
use crate::registry;

/// `name.overload` of kernel call `pc`, or the backend id of delegate call `pc`.
fn what(plan: fb::ExecutionPlan<'_>, pc: u32) -> String {
    let Some(ins) = plan
        .chains()
        .and_then(|c| (!c.is_empty()).then(|| c.get(0)))
        .and_then(|c| c.instructions())
        .filter(|l| (pc as usize) < l.len())
        .map(|l| l.get(pc as usize))
    else {
        return "?".into();
    };
    if let Some(k) = ins.instr_args_as_kernel_call() {
        let ops = plan.operators().unwrap_or_default();
        let i = k.op_index() as usize;
        if i < ops.len() {
            let o = ops.get(i);
            return format!("{}.{}", o.name().unwrap_or(""), o.overload().unwrap_or(""));
        }
    }
    if let Some(d) = ins.instr_args_as_delegate_call() {
        let dels = plan.delegates().unwrap_or_default();
        let i = d.delegate_index() as usize;
        if i < dels.len() {
            return format!("{} region", dels.get(i).id().unwrap_or("?"));
        }
    }
    "?".into()
}

pub fn profile(
    model: &Path,
    inputs: &[PathBuf],
    iters: usize,
    top: usize,
    json: bool,
) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice())?;
    let registry = registry();
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let plan = meta.plan();
    let tensors = forward_inputs(&meta, inputs)?;
    crate::host::check_memory(&meta)?;
    let n_ins = instruction_count(plan);
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let mut method = bufs.load(meta, &registry)?;
    let mut events = vec![Event::EMPTY; 1 + 4 * n_ins + (1 << 16)];
    // (group, kind) -> (nanoseconds, calls); per instruction: nanoseconds.
    let mut by_op: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    let mut by_ins: BTreeMap<u32, u64> = BTreeMap::new();
    let mut total = 0u64;
    let runs = iters.max(2);
    for run in 0..runs {
        for (i, t) in tensors.iter().enumerate() {
            method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
        }
        let t0 = Instant::now();
        let mut rec = Recorder::new(plan, &mut events, || t0.elapsed().as_nanos() as u64);
        method.execute_observed(&mut rec)?;
        // The first run warms caches and is not counted.
        if run == 0 {
            continue;
        }
        let recorded = rec.events();
        for (k, e) in recorded.iter().enumerate() {
            let ns = e.end.saturating_sub(e.start);
            match e.kind {
                Kind::Execute => total += ns,
                Kind::Operator => {
                    let v = by_op.entry(what(plan, e.instruction)).or_default();
                    v.0 += ns;
                    v.1 += 1;
                    *by_ins.entry(e.instruction).or_default() += ns;
                }
                Kind::Delegate => {
                    *by_ins.entry(e.instruction).or_default() += ns;
                    // Region time outside its operations (binding, region bookkeeping).
                    let inner: u64 = recorded[k + 1..]
                        .iter()
                        .take_while(|x| x.kind == Kind::RegionOp)
                        .map(|x| x.end.saturating_sub(x.start))
                        .sum();
                    let v = by_op
                        .entry(format!(
                            "{} (outside its operations)",
                            what(plan, e.instruction)
                        ))
                        .or_default();
                    v.0 += ns.saturating_sub(inner);
                    v.1 += 1;
                }
                Kind::RegionOp => {
                    let region = recorded[..k]
                        .iter()
                        .rev()
                        .find(|x| x.kind == Kind::Delegate)
                        .map_or("region".to_string(), |d| what(plan, d.instruction));
                    let v = by_op.entry(format!("{region}: {}", e.op_kind)).or_default();
                    v.0 += ns;
                    v.1 += 1;
                }
            }
        }
    }
    let counted = (runs - 1) as f64;
    let mut ops: Vec<(String, u64, usize)> =
        by_op.into_iter().map(|(k, (t, n))| (k, t, n)).collect();
    ops.sort_by_key(|o| std::cmp::Reverse(o.1));
    let mut ins: Vec<(u32, u64)> = by_ins.into_iter().collect();
    ins.sort_by_key(|i| std::cmp::Reverse(i.1));
    let share = |t: u64| 100.0 * t as f64 / total.max(1) as f64;
    let ms = |t: u64| t as f64 / counted / 1e6;
    if json {
        let j = serde_json::json!({
            "model": model.display().to_string(),
            "runs": runs - 1,
            "forward_ms": ms(total),
            "operators": ops.iter().map(|(k, t, n)| serde_json::json!({
                "operator": k, "ms": ms(*t), "share": share(*t) / 100.0, "calls": n / (runs - 1),
            })).collect::<Vec<_>>(),
            "instructions": ins.iter().take(top).map(|(pc, t)| serde_json::json!({
                "instruction": pc, "what": what(plan, *pc), "ms": ms(*t), "share": share(*t) / 100.0,
            })).collect::<Vec<_>>(),
        });
        println!("{j}");
        return Ok(());
    }
    println!(
        "{}: forward {:.3} ms (mean of {} runs after one warm-up), {n_ins} instructions",
        model.display(),
        ms(total),
        runs - 1
    );
    println!("top operators:");
    for (k, t, n) in ops.iter().take(top) {
        println!(
            "  {:6.2} %  {:9.3} ms  {:4} calls  {k}",
            share(*t),
            ms(*t),
            n / (runs - 1)
        );
    }
    println!("top instructions:");
    for (pc, t) in ins.iter().take(top) {
        println!(
            "  {:6.2} %  {:9.3} ms  instruction {pc}: {}",
            share(*t),
            ms(*t),
            what(plan, *pc)
        );
    }
    Ok(())
}
