//! `cargo xtask lower`: host-side lowering (the `ptera-lower` crate) of a `.pte` for a target.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use ptera::host::AlignedBuf;
use ptera_lower::{check, lower_owned_to, Options, Report, Rewrites, Target};

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
    /// `ptera`: form ptera's regions (the default); `none`: only the rewrites and the re-plan,
    /// every operator stays a standard kernel call (the file also runs in stock ExecuTorch).
    #[arg(long, default_value = "ptera", value_parser = ["ptera", "none"])]
    pub backend: String,
    /// Do not evaluate constant subgraphs at lower time.
    #[arg(long)]
    pub no_fold: bool,
    /// Keep GELU spelled out in elementwise calls instead of one `aten::gelu` call.
    #[arg(long)]
    pub no_gelu: bool,
    /// Keep copies that change nothing (clone, alias_copy, same-shape expand, reshapes).
    #[arg(long)]
    pub no_copy_removal: bool,
    /// Keep the LM head computing every row before `select_copy` keeps one.
    #[arg(long)]
    pub no_lm_head: bool,
    /// Keep every row of the operators whose output only a row slice reads (a decoder's last
    /// layer computes every position instead of the last one).
    #[arg(long)]
    pub no_rows: bool,
    /// Leave attention chains (`bmm`, `mul`, mask `add`, `_softmax`, `bmm` and the head
    /// permutes around them) as portable calls instead of one `Attention` region each.
    #[arg(long)]
    pub no_attention: bool,
    /// Quantize the weights of the matmul regions: `int8` (symmetric, per output channel) or
    /// `int4:G` (symmetric, bf16 scales per output channel and group of G inputs); inputs are
    /// quantized per row at run time (dynamic int8). No calibration data.
    #[arg(long, value_name = "int8|int4:G")]
    pub quantize: Option<String>,
}

fn print_rewrites(r: &ptera_lower::RewriteReport) {
    for m in &r.methods {
        if let Some(why) = &m.skipped {
            println!("rewrites `{}`: {why}", m.method);
        }
        if !m.folded.is_empty() {
            let mut ops: std::collections::BTreeMap<&str, usize> = Default::default();
            for (_, op) in &m.folded {
                *ops.entry(op.as_str()).or_default() += 1;
            }
            let ops: Vec<String> = ops.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let bytes: usize = m.constants.iter().map(|c| c.2).sum();
            println!(
                "constant folding `{}`: {} calls evaluated ({}); {} tensors became constants ({})",
                m.method,
                m.folded.len(),
                ops.join(", "),
                m.constants.len(),
                mib(bytes)
            );
            for (v, sizes, b) in &m.constants {
                println!("  value {v}: {sizes:?}, {b} bytes");
            }
        }
        if !m.gelus.is_empty() {
            println!(
                "GELU `{}`: {} decomposed GELUs (8 elementwise calls each) became aten::gelu (tanh)",
                m.method,
                m.gelus.len()
            );
        }
        for (list, when) in [
            (&m.copies, ""),
            (&m.copies_after_rows, " after the row rewrites"),
        ] {
            if list.is_empty() {
                continue;
            }
            let mut ops: std::collections::BTreeMap<&str, usize> = Default::default();
            for (_, op) in list {
                *ops.entry(op.as_str()).or_default() += 1;
            }
            let ops: Vec<String> = ops.iter().map(|(k, n)| format!("{n} {k}")).collect();
            println!(
                "copies removed{when} `{}`: {} ({}); their outputs now share their inputs' bytes",
                m.method,
                list.len(),
                ops.join(", ")
            );
        }
        for h in &m.lm_heads {
            println!(
                "LM head `{}`: instruction {} ({}) computes row {} of {} only; select_copy at {} removed",
                m.method, h.product, h.operator, h.row, h.rows, h.select
            );
        }
        if !m.rows.shrunk.is_empty() {
            let (lo, hi) = (m.rows.shrunk[0].0, m.rows.shrunk[m.rows.shrunk.len() - 1].0);
            let (before, now) = (m.rows.shrunk[0].2, m.rows.shrunk[0].3);
            println!(
                "rows `{}`: {} operators (instructions {lo}..={hi}) compute {now} of {before} rows; {} row slices kept (before instructions {:?})",
                m.method,
                m.rows.shrunk.len(),
                m.rows.slices.len(),
                m.rows.slices
            );
        }
        if m.dropped_values > 0 {
            println!(
                "  {} constants nothing reads any more dropped",
                m.dropped_values
            );
        }
    }
    if r.added_constant_bytes > 0 || r.dropped_constant_bytes > 0 {
        println!(
            "constants: {} added, {} dropped",
            mib(r.added_constant_bytes),
            mib(r.dropped_constant_bytes)
        );
    }
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
    print_rewrites(&r.rewrites);
    if !r.regions {
        println!("backend none: no regions formed, every operator is a standard kernel call");
    }
    for m in &r.methods {
        println!(
            "method `{}`: {} regions made, {} XNNPACK regions converted",
            m.name,
            m.regions.len(),
            m.converted.len()
        );
        for g in &m.regions {
            let w = match (&g.quant, g.packed_nr) {
                (Some(q), _) => format!(
                    "weight {}: {} bytes (fp32 {}), largest error {:.2e} of max |w|",
                    q.scheme, q.bytes, q.fp32_bytes, q.max_rel_err
                ),
                (None, Some(nr)) => format!("weight packed, NR {nr}"),
                (None, None) => "weight read in place (other readers)".to_string(),
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
        for a in &m.attentions {
            println!(
                "  instruction {}: {} calls ({}) -> Attention, {} heads of {} ({} K/V heads), \
                 query rows {}, key rows {}, {}",
                a.instruction,
                a.absorbed.len(),
                a.absorbed.join(" + "),
                a.heads,
                a.head_dim,
                a.heads / a.kv_group.max(1),
                a.q_rows,
                a.kv_rows,
                if a.masked { "masked" } else { "no mask" }
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
            for q in &c.quantized_filters {
                println!(
                    "    filter quantized {}: {} bytes (fp32 {}), largest error {:.2e} of max |w|",
                    q.scheme, q.bytes, q.fp32_bytes, q.max_rel_err
                );
            }
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
    let meta_before = bookkeeping(input.as_slice());
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
        rewrites: Rewrites {
            fold: !args.no_fold,
            gelu: !args.no_gelu,
            copies: !args.no_copy_removal,
            lm_head: !args.no_lm_head,
            rows: !args.no_rows,
        },
        regions: args.backend == "ptera",
        attention: !args.no_attention,
        quantize: args
            .quantize
            .as_deref()
            .map(ptera_lower::quantize::Scheme::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
    };
    // By value: the input is freed as soon as the rewrites have made their copy.
    let report = lower_owned_to(input, &target, opts, &mut progress, &mut w)
        .with_context(|| format!("lowering {}", args.model.display()))?;
    w.flush()
        .with_context(|| format!("writing {}", args.output.display()))?;
    drop(w);
    // The written file must load and validate like its input.
    let written = AlignedBuf::read(&args.output)
        .with_context(|| format!("reading back {}", args.output.display()))?;
    check(written.as_slice())?;
    let meta_after = bookkeeping(written.as_slice());
    if args.json {
        let mut j = report.to_json();
        j["runtime_metadata"] = serde_json::json!(meta_before
            .iter()
            .zip(&meta_after)
            .map(|(b, a)| serde_json::json!({
                "method": b.0,
                "executorch_plan": {"metadata_bytes": b.1, "values": b.2, "kernel_scratch_bytes": b.3},
                "ptera": {"metadata_bytes": a.1, "values": a.2, "kernel_scratch_bytes": a.3},
            }))
            .collect::<Vec<_>>());
        println!("{j}");
    } else {
        print_report(&report, &args.output);
        for (b, a) in meta_before.iter().zip(&meta_after) {
            println!(
                "runtime metadata `{}`: {} bytes ({} values, kernel scratch {} bytes) -> {} bytes ({} values, kernel scratch {} bytes)",
                b.0, b.1, b.2, b.3, a.1, a.2, a.3
            );
        }
    }
    Ok(())
}

/// Per method: name, the method's bookkeeping buffer (`MethodMeta::metadata_bytes`), values,
/// kernel scratch. Methods that do not validate are left out.
fn bookkeeping(bytes: &[u8]) -> Vec<(String, usize, usize, usize)> {
    let Ok(p) = ptera::Program::load(bytes) else {
        return Vec::new();
    };
    let reg = ptera::Registry::standard();
    p.methods()
        .filter_map(|plan| {
            let name = plan.name().unwrap_or("");
            let (m, _) = ptera::MethodMeta::new_lenient(&p, name, &reg).ok()?;
            Some((
                name.to_string(),
                m.metadata_bytes(),
                m.num_values(),
                m.kernel_scratch_bytes(),
            ))
        })
        .collect()
}
