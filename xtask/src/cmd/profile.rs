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
use crate::{registry, Weights};

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

/// What the firmware's `k`-th dispatched call is, for `k` = 1, 2, ... (index `k - 1`):
/// "instruction PC: operator". The program is loaded on the host as the firmware loads it
/// (weights in place), so the copies elided there are elided here too.
pub(crate) fn call_labels(model: &Path) -> Result<Vec<String>> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice())?;
    let registry = crate::firmware_registry();
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let plan = meta.plan();
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let method = bufs.load(meta, &registry)?;
    Ok(method
        .dispatched_calls()
        .map(|pc| format!("instruction {pc}: {}", what(plan, pc as u32)))
        .collect())
}

/// Where one profiled forward went: per operator group and per instruction, in the unit of
/// the clock (nanoseconds on the host, instructions on a board under `-icount`).
#[derive(Default)]
struct Tally {
    /// (group) -> (time, calls)
    by_op: BTreeMap<String, (u64, usize)>,
    by_ins: BTreeMap<u32, u64>,
    total: u64,
}

impl Tally {
    /// Adds one run's events (in the order a `Recorder` gives them: each region operation
    /// after its region's event).
    fn add(&mut self, plan: fb::ExecutionPlan<'_>, recorded: &[Event]) {
        for (k, e) in recorded.iter().enumerate() {
            let ns = e.end.saturating_sub(e.start);
            match e.kind {
                Kind::Execute => self.total += ns,
                Kind::Operator => {
                    let v = self.by_op.entry(what(plan, e.instruction)).or_default();
                    v.0 += ns;
                    v.1 += 1;
                    *self.by_ins.entry(e.instruction).or_default() += ns;
                }
                Kind::Delegate => {
                    *self.by_ins.entry(e.instruction).or_default() += ns;
                    // Region time outside its operations (binding, region bookkeeping).
                    let inner: u64 = recorded[k + 1..]
                        .iter()
                        .take_while(|x| x.kind == Kind::RegionOp)
                        .map(|x| x.end.saturating_sub(x.start))
                        .sum();
                    let v = self
                        .by_op
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
                    let v = self
                        .by_op
                        .entry(format!("{region}: {}", e.op_kind))
                        .or_default();
                    v.0 += ns;
                    v.1 += 1;
                }
            }
        }
    }

    /// Prints the tables (or one JSON object): `runs` forwards were added; `unit` names the
    /// clock's unit, `per_run` turns a total into the figure shown per forward.
    #[allow(clippy::too_many_arguments)]
    fn report(
        self,
        plan: fb::ExecutionPlan<'_>,
        header: &str,
        runs: usize,
        top: usize,
        json: Option<serde_json::Value>,
        unit: Unit,
    ) {
        let mut ops: Vec<(String, u64, usize)> = self
            .by_op
            .into_iter()
            .map(|(k, (t, n))| (k, t, n))
            .collect();
        ops.sort_by_key(|o| std::cmp::Reverse(o.1));
        let mut ins: Vec<(u32, u64)> = self.by_ins.into_iter().collect();
        ins.sort_by_key(|i| std::cmp::Reverse(i.1));
        let total = self.total;
        let share = |t: u64| 100.0 * t as f64 / total.max(1) as f64;
        let per_run = |t: u64| t as f64 / runs.max(1) as f64;
        let shown = |t: u64| match unit {
            Unit::Nanoseconds => per_run(t) / 1e6,
            Unit::Instructions => per_run(t),
        };
        let runs_n = runs.max(1);
        let value = |t: u64| -> serde_json::Value {
            match unit {
                Unit::Nanoseconds => shown(t).into(),
                Unit::Instructions => (shown(t).round() as u64).into(),
            }
        };
        if let Some(mut j) = json {
            let key = match unit {
                Unit::Nanoseconds => "ms",
                Unit::Instructions => "instructions",
            };
            j["runs"] = runs.into();
            j[format!("forward_{key}")] = value(total);
            j["operators"] = ops
                .iter()
                .map(|(k, t, n)| {
                    serde_json::json!({
                        "operator": k, key: value(*t), "share": share(*t) / 100.0,
                        "calls": n / runs_n,
                    })
                })
                .collect::<Vec<_>>()
                .into();
            j["instructions"] = ins
                .iter()
                .take(top)
                .map(|(pc, t)| {
                    serde_json::json!({
                        "instruction": pc, "what": what(plan, *pc), key: value(*t),
                        "share": share(*t) / 100.0,
                    })
                })
                .collect::<Vec<_>>()
                .into();
            println!("{j}");
            return;
        }
        let fmt = |t: u64| match unit {
            Unit::Nanoseconds => format!("{:9.3} ms", shown(t)),
            Unit::Instructions => format!("{:>12} instructions", shown(t) as u64),
        };
        println!("{header}: forward {}", fmt(total).trim_start());
        println!("top operators:");
        for (k, t, n) in ops.iter().take(top) {
            println!(
                "  {:6.2} %  {}  {:4} calls  {k}",
                share(*t),
                fmt(*t),
                n / runs_n
            );
        }
        println!("top instructions:");
        for (pc, t) in ins.iter().take(top) {
            println!(
                "  {:6.2} %  {}  instruction {pc}: {}",
                share(*t),
                fmt(*t),
                what(plan, *pc)
            );
        }
    }
}

/// The clock of the profiled events.
#[derive(Clone, Copy)]
enum Unit {
    Nanoseconds,
    Instructions,
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
    let registry = registry(Weights::Packed);
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let plan = meta.plan();
    let tensors = forward_inputs(&meta, inputs)?;
    crate::host::check_memory(&meta)?;
    let n_ins = instruction_count(plan);
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let mut method = bufs.load(meta, &registry)?;
    let mut events = vec![Event::EMPTY; 1 + 4 * n_ins + (1 << 16)];
    let mut tally = Tally::default();
    let runs = iters.max(2);
    for run in 0..runs {
        for (i, t) in tensors.iter().enumerate() {
            method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
        }
        let t0 = Instant::now();
        let mut rec = Recorder::new(plan, &mut events, || t0.elapsed().as_nanos() as u64);
        method.execute_observed(&mut rec)?;
        // The first run warms caches and is not counted.
        if run > 0 {
            tally.add(plan, rec.events());
        }
    }
    let header = format!(
        "{}: host, mean of {} runs after one warm-up, {n_ins} instructions",
        model.display(),
        runs - 1
    );
    let j = json.then(|| serde_json::json!({ "model": model.display().to_string() }));
    tally.report(plan, &header, runs - 1, top, j, Unit::Nanoseconds);
    Ok(())
}

/// `profile --board B`: one forward of the firmware under `qemu-system-aarch64 -icount`
/// (`cargo xtask qemu --icount --etdump`, its output on stderr), the ETDump read back into
/// events, every figure an exact instruction count.
pub fn profile_board(
    model: &Path,
    inputs: &[PathBuf],
    board: &str,
    cpu: Option<&str>,
    top: usize,
    json: bool,
) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice())?;
    // What the board's firmware loads: weights in place.
    let registry = crate::firmware_registry();
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let plan = meta.plan();
    // The firmware bundles its inputs: without --input or MODEL.in*.npy, the synthesised ones.
    let synth = if inputs.is_empty() && crate::baremetal::default_inputs(model).is_empty() {
        forward_inputs(&meta, &[])?
    } else {
        Vec::new()
    };
    let dir = std::env::temp_dir().join(format!("ptera-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = profile_board_in(&dir, model, plan, inputs, &synth, board, cpu, top, json);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[allow(clippy::too_many_arguments)]
fn profile_board_in(
    dir: &Path,
    model: &Path,
    plan: fb::ExecutionPlan<'_>,
    inputs: &[PathBuf],
    synth: &[crate::npy::HostTensor],
    board: &str,
    cpu: Option<&str>,
    top: usize,
    json: bool,
) -> Result<()> {
    let mut inputs = inputs.to_vec();
    for (i, t) in synth.iter().enumerate() {
        let p = dir.join(format!("in{i}.npy"));
        t.write(&p)?;
        inputs.push(p);
    }
    let etdump = dir.join("forward.etdp");
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg("qemu")
        .arg(model)
        .args(["--board", board, "--icount", "--etdump"])
        .arg(&etdump)
        .arg("--output-dir")
        .arg(dir.join("out"));
    if let Some(c) = cpu {
        cmd.args(["--cpu", c]);
    }
    for p in &inputs {
        cmd.arg("--input").arg(p);
    }
    // Progress and the run's own report go to stderr; stdout is the profile.
    let out = cmd.stdout(std::process::Stdio::piped()).output()?;
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
    anyhow::ensure!(out.status.success(), "the board run failed (see above)");
    let bytes = std::fs::read(&etdump)?;
    let events = events_of_etdump(&bytes)?;
    let mut tally = Tally::default();
    tally.add(plan, &events);
    let header = format!(
        "{}: {board}{}, one forward under -icount, {} instructions in the plan",
        model.display(),
        cpu.map(|c| format!(" -cpu {c}")).unwrap_or_default(),
        instruction_count(plan)
    );
    let j = json.then(
        || serde_json::json!({ "model": model.display().to_string(), "board": board, "cpu": cpu }),
    );
    tally.report(plan, &header, 1, top, j, Unit::Instructions);
    Ok(())
}

/// The events of the first "Execute" run of an ETDump written by ptera (`devtools::etdump::encode`), in
/// the order a `Recorder` gives them (by start; a region before its operations).
pub(crate) fn events_of_etdump(bytes: &[u8]) -> Result<Vec<Event>> {
    use ptera::format::etdump_fb;
    let dump = etdump_fb::size_prefixed_root_as_etdump(bytes)
        .map_err(|e| anyhow::anyhow!("not an ETDump: {e}"))?;
    let run = dump
        .run_data()
        .and_then(|r| r.iter().find(|r| r.name() == Some("Execute")))
        .ok_or_else(|| anyhow::anyhow!("the ETDump holds no \"Execute\" run"))?;
    let mut kinds: Vec<&'static str> = Vec::new();
    let mut out = Vec::new();
    for e in run.events().into_iter().flatten() {
        let Some(p) = e.profile_event() else { continue };
        let (kind, op_kind, region_op) = match (p.name(), p.delegate_debug_id_str()) {
            (Some("OPERATOR_CALL"), _) => (Kind::Operator, "", 0),
            (Some("DELEGATE_CALL"), _) => (Kind::Delegate, "", 0),
            (Some("Method::execute"), _) => (Kind::Execute, "", 0),
            (None, Some(id)) => {
                let (k, n) = id.split_once(" #").unwrap_or((id, "0"));
                // A few distinct kinds per program, interned for the events' `&'static str`.
                let k = match kinds.iter().find(|x| **x == k) {
                    Some(x) => *x,
                    None => {
                        let x: &'static str = Box::leak(k.to_string().into_boxed_str());
                        kinds.push(x);
                        x
                    }
                };
                (Kind::RegionOp, k, n.parse().unwrap_or(0))
            }
            // native_call_* repeats its OPERATOR_CALL.
            _ => continue,
        };
        out.push(Event {
            kind,
            chain: p.chain_index().max(0) as u32,
            instruction: p.instruction_id().max(0) as u32,
            region_op,
            op_kind,
            start: p.start_time(),
            end: p.end_time(),
        });
    }
    let rank = |k: Kind| match k {
        Kind::Execute => 0,
        Kind::Operator | Kind::Delegate => 1,
        Kind::RegionOp => 2,
    };
    out.sort_by_key(|e| (e.start, rank(e.kind)));
    Ok(out)
}
