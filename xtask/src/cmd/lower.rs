//! `cargo xtask lower`: host-side lowering (the `ptera-lower` crate) of a `.pte` for a target.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use ptera::host::AlignedBuf;
use ptera_lower::{check, lower_to, Options, Report, Target};

#[derive(Args)]
pub struct LowerArgs {
    /// The program to lower (portable, or with XNNPACK regions).
    pub model: PathBuf,
    /// CPU name (cortex-a53, cortex-a76, neoverse-n2, ...), ISA (generic, neon, sve2:256,
    /// sme:512, sme2:512) or host (x86-64-v3, x86-64-v4, native).
    #[arg(long)]
    pub target: String,
    /// Where to write the lowered program.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Keep ExecuTorch's memory plan instead of re-planning the activations.
    #[arg(long)]
    pub no_replan: bool,
}

fn mib(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{b} bytes ({:.1} MiB)", b as f64 / (1 << 20) as f64)
    } else {
        format!("{b} bytes")
    }
}

fn print_report(r: &Report, out: &Path) {
    println!(
        "lowered for {} ({}{}) in {:.2} s",
        r.target,
        r.isa,
        if r.vector_bits > 0 {
            format!(", {}-bit vectors", r.vector_bits)
        } else {
            String::new()
        },
        r.seconds
    );
    if let Some(n) = &r.note {
        println!("note: {n}");
    }
    for m in &r.methods {
        println!(
            "method `{}`: {} regions made, {} XNNPACK regions converted",
            m.name,
            m.regions.len(),
            m.converted.len()
        );
        for g in &m.regions {
            let w = match g.packed_nr {
                Some(nr) => format!("weight packed, NR {nr}"),
                None => "weight read in place (other readers)".to_string(),
            };
            println!(
                "  instruction {}: {} -> Linear M<={} K={} N={}, {w}",
                g.instruction,
                g.absorbed.join(" + "),
                g.max_m,
                g.k,
                g.n
            );
        }
        for c in &m.converted {
            let nodes: Vec<String> = c.nodes.iter().map(|(k, n)| format!("{n} {k}")).collect();
            println!(
                "  delegate {}: XNNPACK region -> PteraBackend ({}); filters of {} fully-connected \
                 and {} one-group convolution nodes: {} packed, {} read from a program constant \
                 with the same bytes",
                c.delegate,
                nodes.join(", "),
                c.fully_connected,
                c.convolutions,
                c.packed_filters,
                c.aliased_filters
            );
        }
        for (pc, op, why) in &m.portable {
            println!("  instruction {pc}: {op} stays portable: {why}");
        }
        for (id, n) in &m.other_delegates {
            println!("  {n} {id} region(s) kept as they are");
        }
    }
    for p in &r.plans {
        match &p.kept_because {
            Some(why) => println!("memory plan `{}`: ExecuTorch's kept ({why})", p.method),
            None => {
                for (k, (b, a)) in p.before.iter().zip(&p.after).enumerate().skip(1) {
                    println!(
                        "memory plan `{}`, arena {k}: ExecuTorch {} -> ptera {} ({} unused values dropped)",
                        p.method,
                        mib(*b as usize),
                        mib(*a as usize),
                        p.dropped_values
                    );
                }
                println!(
                    "  high-water mark: {} alive at instruction {} ({} tensors with their views)",
                    mib(p.peak_live_bytes as usize),
                    p.peak_instruction,
                    p.peak_groups
                );
            }
        }
    }
    println!(
        "packed weights: {} ({}); original weights removed: {}",
        r.packed_weights,
        mib(r.packed_bytes),
        mib(r.removed_weight_bytes)
    );
    let change = (r.output_bytes as f64 / r.input_bytes.max(1) as f64 - 1.0) * 100.0;
    println!(
        "{}: {} (input {}, {change:+.2} %)",
        out.display(),
        mib(r.output_bytes),
        mib(r.input_bytes)
    );
}

pub fn lower_cmd(args: LowerArgs) -> Result<()> {
    let target = Target::parse(&args.target).map_err(anyhow::Error::msg)?;
    // Read into an aligned buffer once: the lowering borrows every weight from it.
    let input = AlignedBuf::read(&args.model)
        .with_context(|| format!("reading {}", args.model.display()))?;
    let show = !args.json && input.len() > (32 << 20);
    let mut progress = |done: usize, total: usize| {
        if show && total > 0 {
            let width = 30;
            let filled = done * width / total;
            eprint!(
                "\rpacking weights [{}{}] {done}/{total}",
                "#".repeat(filled),
                " ".repeat(width - filled)
            );
            if done == total {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    };
    let file = std::fs::File::create(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let opts = Options {
        replan: !args.no_replan,
    };
    let report = lower_to(input.as_slice(), &target, opts, &mut progress, &mut w)
        .with_context(|| format!("lowering {}", args.model.display()))?;
    w.flush()
        .with_context(|| format!("writing {}", args.output.display()))?;
    drop(w);
    drop(input);
    // The written file must load and validate like its input.
    let written = AlignedBuf::read(&args.output)
        .with_context(|| format!("reading back {}", args.output.display()))?;
    check(written.as_slice())?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print_report(&report, &args.output);
    }
    Ok(())
}
