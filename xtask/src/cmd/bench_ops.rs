//! `cargo xtask bench ops MODEL.pte`: exact AArch64 instructions of every operator of one
//! forward, under qemu-user (the trace method of `bench gemm`). benches/gemm-count's
//! `op-profile` runs the program with an observer that calls a mark before every instruction
//! and before every operation inside a delegate region (each XNNPACK node); the trace counter
//! sums the executed instructions between consecutive marks. Prints, per operator (kernel
//! name, or XNNPACK node type), calls, instructions, share of the forward, output elements,
//! instructions per output element, and for products the multiply-adds per instruction.
//! A delegate call's own line is its region's overhead outside the nodes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::bench_gemm::{build_bench, run_traced};

#[derive(Args, Debug)]
pub struct OpsArgs {
    model: PathBuf,
    /// GEMM ISA to force: generic, neon, sve2, sme, sme2.
    #[arg(long, default_value = "neon")]
    isa: String,
    /// qemu `-cpu` (default: cortex-a76 for generic/neon, max otherwise).
    #[arg(long)]
    cpu: Option<String>,
    /// qemu-aarch64 to use (default: `qemu-aarch64`, or target/qemu11's for sme2).
    #[arg(long)]
    qemu: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Also list every call in forward order (its own instructions, output elements and
    /// multiply-adds), not only the per-operator sums.
    #[arg(long)]
    calls: bool,
}

#[derive(Default)]
struct Row {
    calls: u64,
    instructions: u64,
    elems: u64,
    macs: u64,
}

pub fn bench_ops(args: OpsArgs) -> Result<()> {
    let isa = args.isa.to_ascii_lowercase();
    if !["generic", "neon", "sve2", "sme", "sme2"].contains(&isa.as_str()) {
        bail!("--isa must be one of generic, neon, sve2, sme, sme2");
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = build_bench()?;
    let qemu = match &args.qemu {
        Some(q) => q.clone(),
        None if isa == "sme2" => root.join("target/qemu11/usr/bin/qemu-aarch64"),
        None => PathBuf::from("qemu-aarch64"),
    };
    let cpu = args.cpu.clone().unwrap_or_else(|| {
        if isa == "generic" || isa == "neon" {
            "cortex-a76".into()
        } else {
            "max".into()
        }
    });
    let model = std::fs::canonicalize(&args.model)
        .with_context(|| format!("cannot find {}", args.model.display()))?;
    let program = [
        dir.join("op-profile").into_os_string(),
        isa.clone().into(),
        model.into_os_string(),
    ];
    let (tc, out) = run_traced(&qemu, &cpu, &program, Some("ptera_bench_mark_op"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<(String, String, u64, u64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("op "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
            (
                f.get(1).unwrap_or(&"?").to_string(),
                f.get(2).unwrap_or(&"?").to_string(),
                num(3),
                num(4),
            )
        })
        .collect();
    if tc.segments.len() != events.len() + 1 {
        bail!(
            "{} segments for {} events: the trace and the run disagree",
            tc.segments.len(),
            events.len()
        );
    }
    let total: u64 = tc.segments.iter().sum();
    let calls: Vec<_> = events.iter().zip(&tc.segments[1..]).collect();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for &(e, &n) in &calls {
        let key = match e.0.as_str() {
            "delegate" => format!("{} (region overhead)", e.1),
            _ => e.1.clone(),
        };
        let r = rows.entry(key).or_default();
        r.calls += 1;
        r.instructions += n;
        r.elems += e.2;
        r.macs += e.3;
    }
    let mut v: Vec<_> = rows.into_iter().collect();
    v.sort_by_key(|r| std::cmp::Reverse(r.1.instructions));
    if args.json {
        let ops: Vec<_> = v
            .iter()
            .map(|(k, r)| {
                serde_json::json!({
                    "operator": k, "calls": r.calls, "instructions": r.instructions,
                    "output_elements": r.elems, "macs": r.macs,
                })
            })
            .collect();
        let mut j = serde_json::json!({
            "model": args.model.display().to_string(), "isa": isa, "cpu": cpu,
            "instructions_per_forward": total, "outside_instructions": tc.segments[0],
            "method": "qemu-user exec trace", "operators": ops,
        });
        if args.calls {
            j["calls"] = calls
                .iter()
                .map(|(e, &n)| {
                    serde_json::json!({
                        "kind": e.0, "operator": e.1, "instructions": n,
                        "output_elements": e.2, "macs": e.3,
                    })
                })
                .collect();
        }
        println!("{j}");
        return Ok(());
    }
    println!(
        "{} ({isa}, -cpu {cpu}): {total} instructions per forward (observer marks included)",
        args.model.display()
    );
    println!(
        "{:<44} {:>6} {:>12} {:>6} {:>10} {:>9} {:>8}",
        "operator", "calls", "instructions", "%", "out elems", "instr/el", "MAC/ins"
    );
    for (k, r) in &v {
        let per = if r.elems > 0 {
            format!("{:.2}", r.instructions as f64 / r.elems as f64)
        } else {
            "-".into()
        };
        let mpi = if r.macs > 0 {
            format!("{:.2}", r.macs as f64 / r.instructions.max(1) as f64)
        } else {
            "-".into()
        };
        println!(
            "{:<44} {:>6} {:>12} {:>6.1} {:>10} {:>9} {:>8}",
            k,
            r.calls,
            r.instructions,
            r.instructions as f64 * 100.0 / total.max(1) as f64,
            r.elems,
            per,
            mpi
        );
    }
    if args.calls {
        println!();
        println!(
            "{:>5} {:<36} {:>12} {:>10} {:>9} {:>12} {:>8}",
            "call", "operator", "instructions", "out elems", "instr/el", "MACs", "MAC/ins"
        );
        for (i, (e, &n)) in calls.iter().enumerate() {
            let per = |num: u64, den: u64| {
                if num > 0 && den > 0 {
                    format!("{:.2}", num as f64 / den as f64)
                } else {
                    "-".into()
                }
            };
            println!(
                "{:>5} {:<36} {:>12} {:>10} {:>9} {:>12} {:>8}",
                i,
                e.1,
                n,
                e.2,
                per(n, e.2),
                e.3,
                per(e.3, n)
            );
        }
    }
    Ok(())
}
