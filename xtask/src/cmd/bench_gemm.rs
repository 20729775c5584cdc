//! `cargo xtask bench gemm`: exact instruction count of one GEMM call on AArch64.
//!
//! Two methods:
//!
//! * `icount` (default except for sme2; "qemu-system icount"): the bare-metal firmware's GEMM
//!   bench mode under `qemu-system-aarch64 -M virt -cpu max -icount shift=0,sleep=off`, where
//!   CNTVCT advances one tick per executed instruction; the firmware reads it around one `sgemm`
//!   call (after a warm-up call) and checks C (see `baremetal::gemm_icount`). Needs no trace and
//!   runs at emulation speed. SME2 needs QEMU ≥ 10.1, which only exists here as the user-mode
//!   qemu 11 (scripts/fetch-qemu11.sh), so sme2 keeps the trace.
//! * `trace` ("qemu-user exec trace", below).
//!
//! Method "qemu-user exec trace": the tiny Linux program `benches/gemm-count` is built for
//! `aarch64-unknown-linux-gnu` and run under `qemu-aarch64 -d in_asm,exec,nochain`. QEMU logs
//! every translated block ("IN:" followed by its instructions) and, with chaining off, every
//! execution of a block ("Trace ... [../PC/..] symbol"). The executed instructions are the sum
//! of the lengths of the blocks executed between the program's two mark functions
//! (`ptera_bench_mark_begin` / `_end`), which bracket the `sgemm` call. The count is exact and
//! repeats run to run. The log is streamed through a FIFO, never stored.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct GemmArgs {
    /// Micro-kernel ISA: generic, neon, sve2, sme, sme2 (AArch64), or neon32 (the ARMv7-A Neon +
    /// VFPv4 kernel, icount on qemu-virt-a15 under qemu-system-arm).
    #[arg(long, default_value = "neon")]
    isa: String,
    #[arg(long, default_value_t = 0)]
    m: usize,
    #[arg(long, default_value_t = 0)]
    k: usize,
    #[arg(long, default_value_t = 0)]
    n: usize,
    /// Instead of one GEMM, count one `forward` of this .pte (after a warm-up forward) with
    /// the ISA forced (benches/gemm-count `pte-count`).
    #[arg(long)]
    pte: Option<PathBuf>,
    /// Instead of one GEMM, count one convolution of `linalg::conv` (benches/gemm-count
    /// `conv-count`, trace method): `LAYOUT,H,W,C,OC,KH,KW,STRIDE,PAD,GROUPS` with LAYOUT
    /// `nhwc` or `nchw` (GROUPS = C: depthwise). Density = MACs / (lanes × instructions).
    #[arg(long)]
    conv: Option<String>,
    /// SVE / SME vector length in bits. icount: the firmware writes ZCR_EL1.LEN / SMCR_EL1.LEN
    /// (default 512 for both); trace: qemu `sve-`/`sme-default-vector-length` (default: qemu's,
    /// SVE 512, SME 256 in user mode).
    #[arg(long)]
    vl: Option<usize>,
    /// qemu-aarch64 to use (default: `qemu-aarch64`, or target/qemu11's for sme2).
    #[arg(long)]
    qemu: Option<PathBuf>,
    /// `icount` (bare-metal firmware under qemu-system-aarch64 -icount) or `trace` (qemu-user
    /// exec trace of benches/gemm-count). Default: icount, except trace for sme2 and --pte.
    #[arg(long)]
    method: Option<String>,
    /// icount: seconds before QEMU is stopped and the run fails.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// icount: build the bench firmware with the target's default `+strict-align` (default:
    /// `-strict-align`, as every firmware and the Linux build; see baremetal/gemm.rs).
    #[arg(long)]
    strict_align: bool,
    /// B pre-packed for the kernel's tile width before the counted call (`sgemm_prepacked`:
    /// weights stored packed by `xtask lower`); default: row-major B read in place (`sgemm`).
    #[arg(long)]
    prepacked_b: bool,
    /// Instead of an fp32 GEMM, one dynamically quantized int8 product through an integer tile
    /// (benches/gemm-count `qgemm-count`, trace method): `sdot` (`qc8w_p4x4`), `mull` (the
    /// same packing in base Neon), `smmla` (`qc8w_p8x8`) or `smopa` (SME2, `qc8w_pNx4`).
    /// Density = multiply-adds / (multiply-adds per MAC instruction) / instructions.
    #[arg(long)]
    quant: Option<String>,
    /// Testing (icount): the firmware damages one entry of C after the call; the run must fail.
    #[arg(long, hide = true)]
    corrupt_c: bool,
    #[arg(long)]
    json: bool,
}

const TARGET: &str = "aarch64-unknown-linux-gnu";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `program` (an aarch64 Linux binary and its arguments) under `qemu -cpu cpu` with the
/// exec trace streamed through a FIFO into a [`TraceCounter`] (with `segment_mark`, if any);
/// fails unless the program succeeds and both marks were seen.
pub(crate) fn run_traced(
    qemu: &Path,
    cpu: &str,
    program: &[std::ffi::OsString],
    segment_mark: Option<&'static str>,
) -> Result<(TraceCounter, std::process::Output)> {
    let tmp = std::env::temp_dir().join(format!("ptera-trace-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let fifo = tmp.join("trace.fifo");
    let _ = std::fs::remove_file(&fifo);
    if !Command::new("mkfifo").arg(&fifo).status()?.success() {
        bail!("mkfifo failed");
    }
    let child = Command::new(qemu)
        .args(["-L", "/usr/aarch64-linux-gnu", "-cpu", cpu])
        .args(["-d", "in_asm,exec,nochain", "-D"])
        .arg(&fifo)
        .args(program)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", qemu.display()))?;
    let mut tc = TraceCounter {
        segment_mark,
        ..TraceCounter::default()
    };
    {
        let f = std::fs::File::open(&fifo).context("open trace FIFO")?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if r.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            let l = String::from_utf8_lossy(&buf);
            tc.line(l.trim_end_matches('\n'))?;
        }
    }
    let out = child.wait_with_output()?;
    let _ = std::fs::remove_dir_all(&tmp);
    if !out.status.success() {
        bail!(
            "{} failed under {} -cpu {cpu}",
            program.first().map_or("?".into(), |p| p.to_string_lossy()),
            qemu.display()
        );
    }
    if tc.state != 3 {
        bail!("marks not found in the trace");
    }
    Ok((tc, out))
}

pub(crate) fn build_bench() -> Result<PathBuf> {
    let root = root();
    let tdir = root.join("target/gemm-count");
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            TARGET,
            "--manifest-path",
        ])
        .arg(root.join("benches/gemm-count/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &tdir)
        .status()
        .context("cannot run cargo")?;
    if !st.success() {
        bail!("building benches/gemm-count failed");
    }
    Ok(tdir.join(TARGET).join("release"))
}

/// Counts the instructions executed between the two marks in a `-d in_asm,exec,nochain` log.
#[derive(Default)]
pub(crate) struct TraceCounter {
    /// Instructions of each translated block, by guest PC (latest translation wins).
    tb_len: HashMap<u64, u64>,
    /// PC of the "IN:" block being read, and its instruction count so far.
    cur: Option<(u64, u64)>,
    /// 0 = before the begin mark, 1 = inside the begin mark, 2 = counting, 3 = done.
    state: u8,
    count: u64,
    blocks: u64,
    /// Instructions by function symbol (as QEMU names it).
    by_symbol: HashMap<String, u64>,
    /// With a segment mark: instructions between consecutive calls of it (the first entry is
    /// what ran between the begin mark and the first segment mark; the last ends at the end
    /// mark).
    segment_mark: Option<&'static str>,
    pub(crate) segments: Vec<u64>,
    seg: u64,
}

const BEGIN: &str = "ptera_bench_mark_begin";
const END: &str = "ptera_bench_mark_end";

impl TraceCounter {
    fn finish_block(&mut self) {
        if let Some((pc, n)) = self.cur.take() {
            self.tb_len.insert(pc, n);
        }
    }

    pub(crate) fn line(&mut self, l: &str) -> Result<()> {
        if l.starts_with("IN:") {
            self.finish_block();
            self.cur = Some((u64::MAX, 0));
        } else if let Some(rest) = l.strip_prefix("0x") {
            // "0x0000ffff...:  d503201f  nop" inside an IN: block.
            if let Some((pc, n)) = self.cur.as_mut() {
                if *n == 0 {
                    let hex = rest.split(':').next().unwrap_or("");
                    *pc = u64::from_str_radix(hex, 16).context("bad IN: address")?;
                }
                *n += 1;
            }
        } else if let Some(rest) = l.strip_prefix("Trace ") {
            self.finish_block();
            // "Trace 0: 0xHOST [flags/PC/../..] symbol"
            let (fields, sym) = match (rest.find('['), rest.find(']')) {
                (Some(a), Some(b)) if a < b => (&rest[a + 1..b], rest[b + 1..].trim()),
                _ => bail!("unexpected Trace line: {l}"),
            };
            let pc_hex = fields.split('/').nth(1).context("Trace line without PC")?;
            let pc = u64::from_str_radix(pc_hex, 16).context("bad Trace PC")?;
            match self.state {
                0 if sym == BEGIN => self.state = 1,
                1 if sym != BEGIN => self.state = 2,
                _ => {}
            }
            if self.state == 2 {
                if sym == END {
                    if self.segment_mark.is_some() {
                        self.segments.push(self.seg);
                    }
                    self.state = 3;
                } else {
                    if self.segment_mark == Some(sym) {
                        self.segments.push(self.seg);
                        self.seg = 0;
                    }
                    let n = *self
                        .tb_len
                        .get(&pc)
                        .with_context(|| format!("executed block {pc:#x} never translated"))?;
                    self.count += n;
                    self.seg += n;
                    self.blocks += 1;
                    *self.by_symbol.entry(sym.to_string()).or_default() += n;
                }
            }
        } else if l.trim().is_empty() {
            self.finish_block();
        }
        Ok(())
    }
}

pub fn bench_gemm(args: GemmArgs) -> Result<()> {
    if let Some(tile) = &args.quant {
        return bench_quant(&args, tile);
    }
    let isa = args.isa.to_ascii_lowercase();
    if !["generic", "neon", "sve2", "sme", "sme2", "neon32"].contains(&isa.as_str()) {
        bail!("--isa must be one of generic, neon, sve2, sme, sme2, neon32");
    }
    if isa == "neon32"
        && (args.method.as_deref().unwrap_or("icount") != "icount" || args.vl.is_some())
    {
        bail!("neon32 is measured with --method icount (qemu-system-arm), at its 128-bit vectors");
    }
    if args.pte.is_none() && args.conv.is_none() && (args.m == 0 || args.k == 0 || args.n == 0) {
        bail!("--m, --k and --n are required (and > 0) unless --pte or --conv is given");
    }
    let conv: Option<Vec<String>> = args
        .conv
        .as_ref()
        .map(|c| c.split(',').map(str::to_string).collect());
    if conv.as_ref().is_some_and(|c| c.len() != 10) {
        bail!("--conv takes LAYOUT,H,W,C,OC,KH,KW,STRIDE,PAD,GROUPS");
    }
    if let Some(vl) = args.vl {
        if vl % 128 != 0 || vl == 0 || vl > 2048 {
            bail!("--vl must be a multiple of 128 up to 2048");
        }
    }
    let method = match args.method.as_deref() {
        Some("icount") => {
            if args.pte.is_some() || args.conv.is_some() {
                bail!("--pte and --conv are measured with --method trace only");
            }
            if isa == "sme2" {
                bail!("sme2 under qemu-system needs QEMU >= 10.1 (system QEMU is older): use --method trace");
            }
            "icount"
        }
        Some("trace") => "trace",
        Some(other) => bail!("--method must be icount or trace, not {other}"),
        None if isa == "neon32" => "icount",
        None if isa == "sme2" || args.pte.is_some() || args.conv.is_some() => "trace",
        None => "icount",
    };
    if method == "icount" {
        return bench_icount(&args, &isa);
    }
    let dir = build_bench()?;
    let (qemu, cpu) = (user_qemu(&args, isa == "sme2", &isa)?, user_cpu(&args));
    let program: Vec<std::ffi::OsString> = match (&args.pte, &conv) {
        (None, Some(c)) => {
            let mut v = vec![dir.join("conv-count").into_os_string(), isa.clone().into()];
            v.extend(c.iter().map(|s| s.clone().into()));
            v
        }
        (Some(p), _) => vec![
            dir.join("pte-count").into_os_string(),
            isa.clone().into(),
            std::fs::canonicalize(p)
                .with_context(|| format!("cannot find {}", p.display()))?
                .into_os_string(),
        ],
        (None, None) => vec![
            dir.join("gemm-count").into_os_string(),
            isa.clone().into(),
            args.m.to_string().into(),
            args.k.to_string().into(),
            args.n.to_string().into(),
            if args.prepacked_b {
                "prepacked"
            } else {
                "in-place"
            }
            .into(),
        ],
    };
    let (tc, out) = run_traced(&qemu, &cpu, &program, None)?;
    if let Some(p) = &args.pte {
        if args.json {
            let v = serde_json::json!({
                "isa": isa, "pte": p.display().to_string(), "instructions_per_forward": tc.count,
                "method": "qemu-user exec trace",
            });
            println!("{v}");
        } else {
            println!(
                "{isa} {}: {} instructions per forward",
                p.display(),
                tc.count
            );
            print_top(&tc);
        }
        return Ok(());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(c) = &conv {
        let field = |k: &str| -> Result<u128> {
            Ok(stdout
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .with_context(|| format!("no {k} from conv-count"))?
                .trim()
                .parse()?)
        };
        let (macs, bits) = (field("macs=")?, field("vector_bits=")?);
        let ideal = macs.div_ceil((bits / 32).max(1));
        let density = ideal as f64 / tc.count as f64;
        if args.json {
            let v = serde_json::json!({
                "isa": isa, "conv": c.join(","), "macs": macs as u64, "vector_bits": bits as u64,
                "instructions": tc.count, "fma_instructions_ideal": ideal as u64,
                "density": (density * 10000.0).round() / 10000.0,
                "method": "qemu-user exec trace",
            });
            println!("{v}");
        } else {
            println!(
                "{isa} conv {} at {bits} bits: {} MACs, {} instructions, ideal FMA {ideal}, density {density:.4}",
                c.join(","), macs, tc.count
            );
            print_top(&tc);
        }
        return Ok(());
    }
    let bits: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("vector_bits="))
        .context("no vector_bits from gemm-count")?
        .trim()
        .parse()?;
    let ideal = ideal_fma(&isa, bits, args.m, args.k, args.n);
    let density = ideal as f64 / tc.count as f64;
    if args.json {
        let v = serde_json::json!({
            "isa": isa, "m": args.m, "k": args.k, "n": args.n, "vector_bits": bits,
            "instructions": tc.count, "fma_instructions_ideal": ideal as u64,
            "density": (density * 10000.0).round() / 10000.0,
            "b": if args.prepacked_b { "prepacked" } else { "in place" },
            "method": "qemu-user exec trace",
        });
        println!("{v}");
    } else {
        println!(
            "{isa} {}x{}x{} at {bits} bits, B {}: {} instructions ({} blocks), ideal FMA {}, density {:.4}",
            args.m, args.k, args.n, if args.prepacked_b { "prepacked" } else { "in place" }, tc.count, tc.blocks, ideal, density
        );
        print_top(&tc);
    }
    Ok(())
}

/// The qemu-user to trace with: `--qemu`, else qemu 11 (`scripts/fetch-qemu11.sh`) where
/// `what` needs SME2, else the system's `qemu-aarch64`.
fn user_qemu(args: &GemmArgs, sme2: bool, what: &str) -> Result<PathBuf> {
    Ok(match &args.qemu {
        Some(q) => q.clone(),
        None if sme2 => {
            let q = root().join("target/qemu11/usr/bin/qemu-aarch64");
            if !q.exists() {
                bail!("{what} needs qemu-aarch64 >= 10.1: run scripts/fetch-qemu11.sh (or --qemu)");
            }
            q
        }
        None => PathBuf::from("qemu-aarch64"),
    })
}

/// qemu-user's `-cpu`: `max`, with `--vl` as both the SVE and the SME vector length.
fn user_cpu(args: &GemmArgs) -> String {
    let mut cpu = String::from("max");
    if let Some(vl) = args.vl {
        cpu += &format!(
            ",sve-default-vector-length={0},sme-default-vector-length={0}",
            vl / 8
        );
    }
    cpu
}

/// `--quant TILE`: one int8 product through `qgemm-count` under the exec trace.
fn bench_quant(args: &GemmArgs, tile: &str) -> Result<()> {
    if !["sdot", "mull", "smmla", "smopa"].contains(&tile) {
        bail!("--quant must be one of sdot, mull, smmla, smopa");
    }
    if args.m == 0 || args.k == 0 || args.n == 0 || !args.k.is_multiple_of(16) {
        bail!("--m, --k and --n are required (> 0, K a multiple of 16) with --quant");
    }
    if args.method.as_deref().is_some_and(|m| m != "trace") || args.pte.is_some() {
        bail!("--quant is measured with --method trace, one product");
    }
    let dir = build_bench()?;
    let (qemu, cpu) = (user_qemu(args, tile == "smopa", tile)?, user_cpu(args));
    let program: Vec<std::ffi::OsString> = vec![
        dir.join("qgemm-count").into_os_string(),
        tile.into(),
        args.m.to_string().into(),
        args.k.to_string().into(),
        args.n.to_string().into(),
    ];
    let (tc, out) = run_traced(&qemu, &cpu, &program, None)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> Result<u128> {
        Ok(stdout
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .with_context(|| format!("no {k} from qgemm-count"))?
            .trim()
            .parse()?)
    };
    let (per, bits) = (field("macs_per_instruction=")?, field("vector_bits=")?);
    let macs = (args.m * args.k * args.n) as u128;
    let ideal = macs.div_ceil(per.max(1));
    let density = ideal as f64 / tc.count as f64;
    if args.json {
        let v = serde_json::json!({
            "quant": tile, "m": args.m, "k": args.k, "n": args.n, "vector_bits": bits as u64,
            "instructions": tc.count, "mac_instructions_ideal": ideal as u64,
            "macs_per_instruction": per as u64,
            "density": (density * 10000.0).round() / 10000.0,
            "method": "qemu-user exec trace",
        });
        println!("{v}");
    } else {
        println!(
            "int8 {tile} {}x{}x{} at {bits} bits: {} instructions, ideal MAC instructions {ideal} ({per} multiply-adds each), density {density:.4}",
            args.m, args.k, args.n, tc.count
        );
        print_top(&tc);
    }
    Ok(())
}

/// The functions that executed the most instructions, with their share of the count.
fn print_top(tc: &TraceCounter) {
    let mut v: Vec<_> = tc.by_symbol.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1));
    for (sym, n) in v.into_iter().take(16) {
        let short: String = sym.chars().take(90).collect();
        println!(
            "  {:>12} {:5.1}%  {short}",
            n,
            *n as f64 * 100.0 / tc.count.max(1) as f64
        );
    }
}

/// FMA-class instructions a perfect kernel needs: m·n·k MACs over (Neon 4, SVE VL/32, FMOPA
/// (SVL/32)²) per instruction; generic counts as Neon.
fn ideal_fma(isa: &str, bits: usize, m: usize, k: usize, n: usize) -> u128 {
    let lanes = (bits / 32).max(1) as u128;
    let macs = (m * n * k) as u128;
    let per_insn = match isa {
        "sme" | "sme2" => lanes * lanes,
        _ => lanes,
    };
    macs.div_ceil(per_insn)
}

fn bench_icount(args: &GemmArgs, isa: &str) -> Result<()> {
    // neon32: the firmware's Neon code on a 32-bit board (its one Neon kernel).
    let (board, cpu, name) = match isa {
        "neon32" => ("qemu-virt-a15", "cortex-a15", "neon"),
        other => ("qemu-virt", "max", other),
    };
    let code = ptera::linalg::gemm::select::Isa::parse(name).context("unknown ISA")? as u32;
    let t0 = std::time::Instant::now();
    let r = crate::baremetal::gemm_icount(&crate::baremetal::GemmRequest {
        board,
        isa_code: code,
        m: args.m,
        k: args.k,
        n: args.n,
        vl: args.vl,
        cpu: cpu.into(),
        timeout: std::time::Duration::from_secs(args.timeout),
        strict_align: args.strict_align,
        corrupt_c: args.corrupt_c,
        prepacked_b: args.prepacked_b,
    })?;
    let bits = r.vector_bits as usize;
    let insns = r.instructions();
    let ideal = ideal_fma(isa, bits, args.m, args.k, args.n);
    let density = ideal as f64 / insns as f64;
    if args.json {
        let v = serde_json::json!({
            "isa": isa, "m": args.m, "k": args.k, "n": args.n, "vector_bits": bits,
            "instructions": insns, "fma_instructions_ideal": ideal as u64,
            "density": (density * 10000.0).round() / 10000.0,
            "b": if args.prepacked_b { "prepacked" } else { "in place" },
            "method": if args.strict_align { "qemu-system icount (strict-align)" } else { "qemu-system icount" },
        });
        println!("{v}");
    } else {
        println!(
            "{isa} {}x{}x{} at {bits} bits, B {}: {insns} instructions (qemu-system icount), ideal FMA {ideal}, density {:.4}",
            args.m, args.k, args.n, if args.prepacked_b { "prepacked" } else { "in place" }, density
        );
        println!(
            "  counter ticks around the call {}, empty bracket {}, warm-up call {}; CNTFRQ {} Hz",
            r.ticks, r.bracket_ticks, r.warmup_ticks, r.cntfrq
        );
        println!(
            "  C checked: {} entries against f64 dot products, {} rows (Freivalds), worst error {:.3} x tolerance",
            r.entries_checked, r.rows_checked, r.worst_error_ratio
        );
        println!(
            "  QEMU {:.2} s, total {:.2} s",
            r.wall.as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
