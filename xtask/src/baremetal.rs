//! `cargo xtask qemu` and `cargo xtask deploy`: build the bare-metal firmware (`boards/`) for one
//! model and board, run it under `qemu-system-aarch64` or write the files a board boots from.
//!
//! The firmware is specialised per model at build time: this module computes the method's memory
//! needs with [`MethodMeta`] and writes `config.rs`, `model.bin` and `inputs.bin` into
//! `target/firmware/gen`, which the firmware's build script and `include!`s pick up. Builds are
//! serialised by a lock file, so concurrent invocations (tests) never mix models.

mod boards;
mod console;
mod elf;
mod gemm;

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use ptera::{MethodMeta, Program};

use crate::npy::HostTensor;
pub use boards::Board;
pub use gemm::{gemm_icount, GemmRequest};

/// `cargo xtask qemu`.
#[derive(clap::Args)]
pub struct QemuArgs {
    /// The .pte to run; without it the bundled example (tests/fixtures/gpt2_portable.pte and its
    /// inputs).
    pub model: Option<PathBuf>,
    /// qemu-virt, raspi4b, raspi3b or imx8mp-evk.
    #[arg(long, default_value = "qemu-virt")]
    pub board: String,
    /// CPU model for qemu-virt (max, cortex-a53, cortex-a72, neoverse-v1, ...); the Pi and i.MX
    /// machines have a fixed core.
    #[arg(long)]
    pub cpu: Option<String>,
    /// Input .npy files in method input order; default: MODEL.in0.npy, MODEL.in1.npy, ... next
    /// to the model.
    #[arg(long = "input")]
    pub inputs: Vec<PathBuf>,
    /// Directory for output-0.npy, output-1.npy, ...
    #[arg(long, default_value = "out")]
    pub output_dir: PathBuf,
    /// Extra `-M` options, e.g. `virtualization=on` (qemu-virt then enters at EL2) or `secure=on`
    /// (EL3); the boot stub drops to EL1 from either.
    #[arg(long)]
    pub machine_opts: Option<String>,
    /// Deterministic run: `-icount shift=0,sleep=off`, one counter tick per instruction.
    #[arg(long)]
    pub icount: bool,
    /// Seconds before QEMU is stopped and the run fails.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Leave the model out of the image: QEMU's loader places it at the board's load address,
    /// as the Pi firmware or U-Boot would.
    #[arg(long)]
    pub load_model: bool,
    /// Testing: the blob QEMU's loader places instead of MODEL (implies --load-model), e.g. a
    /// corrupted copy.
    #[arg(long, hide = true)]
    pub blob: Option<PathBuf>,
    /// Testing: build the firmware's panic self-test (it panics right after boot).
    #[arg(long, hide = true)]
    pub selftest_panic: bool,
    /// Testing: build every arena this many bytes smaller than the program needs.
    #[arg(long, hide = true)]
    pub shrink_arenas: Option<u64>,
}

/// `cargo xtask deploy`.
#[derive(clap::Args)]
pub struct DeployArgs {
    pub model: PathBuf,
    /// raspi4b, raspi3b, imx8mp-evk (or qemu-virt).
    #[arg(long)]
    pub board: String,
    /// Directory for the boot files.
    #[arg(long)]
    pub out: PathBuf,
    /// Input .npy files bundled in the image; default: MODEL.inK.npy next to the model.
    #[arg(long = "input")]
    pub inputs: Vec<PathBuf>,
    /// Link the model into the image instead of shipping it as a separate blob.
    #[arg(long)]
    pub link_model: bool,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn firmware_dir() -> PathBuf {
    root().join("target/firmware")
}

/// The model, its bytes and method facts, and the inputs to bundle.
struct Job {
    model: PathBuf,
    bytes: Vec<u8>,
    arenas: Vec<u64>,
    metadata: usize,
    inputs: Vec<HostTensor>,
    outputs: usize,
}

fn default_inputs(model: &Path) -> Vec<PathBuf> {
    let stem = model.with_extension("");
    (0..)
        .map(|i| PathBuf::from(format!("{}.in{i}.npy", stem.display())))
        .take_while(|p| p.is_file())
        .collect()
}

fn prepare(model: &Path, inputs: &[PathBuf]) -> Result<Job> {
    let file = crate::load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let registry = crate::registry();
    let meta = MethodMeta::new(&program, "forward", &registry)
        .with_context(|| format!("{}", model.display()))?;
    ensure!(
        meta.arena_count() <= 16,
        "{} plans {} arenas; the firmware supports up to 16",
        model.display(),
        meta.arena_count()
    );
    let paths = if inputs.is_empty() {
        default_inputs(model)
    } else {
        inputs.to_vec()
    };
    let (tensors, names) = crate::read_inputs(&paths)?;
    crate::check_inputs(&meta, &tensors, &names).with_context(|| {
        format!(
            "inputs for {} (pass them with --input IN.npy)",
            model.display()
        )
    })?;
    Ok(Job {
        model: model.to_path_buf(),
        bytes: file.as_slice().to_vec(),
        arenas: (0..meta.arena_count())
            .map(|k| meta.arena_size(k))
            .collect(),
        metadata: meta.metadata_bytes(),
        inputs: tensors,
        outputs: meta.num_outputs(),
    })
}

/// What the firmware build needs beyond the job.
struct BuildOptions<'a> {
    board: &'a Board,
    link_model: bool,
    semihosting: bool,
    shrink_arenas: u64,
    selftest_panic: bool,
}

fn round16(n: u64) -> u64 {
    n.div_ceil(16) * 16
}

fn config_rs(job: &Job, opts: &BuildOptions<'_>) -> Result<(String, Vec<u8>)> {
    let mut inputs_bin = Vec::new();
    let mut specs = String::new();
    for t in &job.inputs {
        let offset = inputs_bin.len();
        inputs_bin.extend_from_slice(&t.bytes);
        inputs_bin.resize(round16(inputs_bin.len() as u64) as usize, 0);
        let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
        writeln!(
            specs,
            "    InputSpec {{ dtype: {}, dims: &[{}], offset: {offset}, len: {} }},",
            t.dtype as u8,
            dims.join(", "),
            t.bytes.len()
        )?;
    }
    let arenas: Vec<String> = job
        .arenas
        .iter()
        .map(|&a| a.saturating_sub(opts.shrink_arenas).to_string())
        .collect();
    let config = format!(
        "// Generated by `cargo xtask` from {} for board {}; do not edit.\n\
         pub const METHOD: &str = \"forward\";\n\
         pub const MODEL_LEN: usize = {};\n\
         pub const MODEL_LINKED: bool = {};\n\
         pub const ARENA_SIZES: [usize; {}] = [{}];\n\
         pub const METADATA_BYTES: usize = {};\n\
         pub const INPUTS_LEN: usize = {};\n\
         pub const INPUTS: [InputSpec; {}] = [\n{specs}];\n",
        job.model.display(),
        opts.board.name,
        job.bytes.len(),
        opts.link_model,
        arenas.len(),
        arenas.join(", "),
        job.metadata,
        inputs_bin.len(),
        job.inputs.len(),
    );
    Ok((config, inputs_bin))
}

/// Writes `path` only when its contents change, so an unchanged model does not rebuild.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(path).ok().as_deref() != Some(bytes) {
        fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Builds the firmware and copies the ELF to `dest`. Holds `target/firmware/build.lock`
/// while the generated files and the shared build output are in use.
fn build_firmware(job: &Job, opts: &BuildOptions<'_>, dest: &Path) -> Result<()> {
    let dir = firmware_dir();
    let gen = dir.join("gen");
    fs::create_dir_all(&gen).with_context(|| format!("cannot create {}", gen.display()))?;
    let lock = File::create(dir.join("build.lock"))?;
    #[allow(clippy::incompatible_msrv)] // the toolchain is pinned (rust-toolchain.toml)
    lock.lock()
        .context("cannot lock target/firmware/build.lock")?;

    let (config, inputs_bin) = config_rs(job, opts)?;
    write_if_changed(&gen.join("config.rs"), config.as_bytes())?;
    write_if_changed(
        &gen.join("model.bin"),
        if opts.link_model { &job.bytes } else { &[] },
    )?;
    write_if_changed(&gen.join("inputs.bin"), &inputs_bin)?;

    let mut features = opts.board.name.to_string();
    if opts.semihosting {
        features.push_str(",semihosting");
    }
    if opts.selftest_panic {
        features.push_str(",selftest-panic");
    }
    cargo_build_firmware(&features, Some(&gen)).map_err(|e| {
        let msg = format!("{e:#}");
        if msg.contains("will not fit in region") || msg.contains("overflowed by") {
            anyhow::anyhow!(
                "{} does not fit on {}: model + arenas + code exceed the image window of {} MiB\n{msg}",
                job.model.display(),
                opts.board.name,
                opts.board.image_len >> 20
            )
        } else {
            e
        }
    })?;
    let elf = dir.join("aarch64-unknown-none/release/ptera-firmware");
    fs::copy(&elf, dest).with_context(|| format!("cannot copy {}", elf.display()))?;
    Ok(())
}

/// Code generation of every firmware build: `aarch64-unknown-none` defaults to
/// `+strict-align`, under which LLVM splits each vector load/store it cannot prove aligned into
/// byte accesses (the Neon GEMM runs 20 % more instructions). All Rust code of the firmware
/// runs after aarch64-rt's `enable_mmu` (assembly, before the Rust entry), on Normal memory with
/// SCTLR_EL1.A = 0, where unaligned accesses are allowed, and MMIO goes through aligned
/// volatile accesses; so the firmware is built without strict-align (rustc notes that the
/// feature name is unstable).
pub(crate) const FIRMWARE_RUSTFLAGS: &str = "-C target-feature=-strict-align";

/// Runs `cargo build` of the firmware (`boards/`) with `features` into `target/firmware`; the
/// caller holds the build lock. `gen`: the generated model files (`PTERA_FW_GEN`), if any.
fn cargo_build_firmware(features: &str, gen: Option<&Path>) -> Result<()> {
    cargo_build_firmware_in(&firmware_dir(), features, gen, Some(FIRMWARE_RUSTFLAGS))
}

/// [`cargo_build_firmware`] into target directory `dir`, with extra `rustflags` for the
/// aarch64-unknown-none target, if any.
fn cargo_build_firmware_in(
    dir: &Path,
    features: &str,
    gen: Option<&Path>,
    rustflags: Option<&str>,
) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let t0 = Instant::now();
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root())
        .args([
            "build",
            "--release",
            "--quiet",
            "--manifest-path",
            "boards/Cargo.toml",
        ])
        .args(["--target", "aarch64-unknown-none", "--features", features])
        .env("CARGO_TARGET_DIR", dir)
        .env(
            "DEFMT_LOG",
            std::env::var("DEFMT_LOG").unwrap_or_else(|_| "error".into()),
        )
        .stdout(Stdio::inherit());
    if let Some(g) = gen {
        cmd.env("PTERA_FW_GEN", g);
    }
    if let Some(f) = rustflags {
        cmd.env("CARGO_TARGET_AARCH64_UNKNOWN_NONE_RUSTFLAGS", f);
    }
    let out = cmd.output().context("cannot run cargo")?;
    if !out.status.success() {
        bail!(
            "firmware build failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!(
        "firmware ({features}) built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Sizes for the memory budget, from the linked image and the method's plan.
struct Budget {
    code: u64,
    rodata: u64,
    flash: u64,
    data_bss: u64,
    stack: u64,
    image_bytes: u64,
}

fn budget(elf_bytes: &[u8], board: &Board) -> Result<Budget> {
    let sections = elf::sections(elf_bytes)?;
    let size = |names: &[&str]| -> u64 {
        sections
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .map(|s| s.size)
            .sum()
    };
    let end = sections
        .iter()
        .filter(|s| s.alloc)
        .map(|s| s.addr + s.size)
        .max()
        .unwrap_or(board.image_origin);
    Ok(Budget {
        code: size(&[".init", ".text"]),
        rodata: size(&[".rodata", ".got"]),
        flash: size(&[".flash"]),
        data_bss: size(&[".data", ".bss"]),
        stack: size(&[".stack"]),
        image_bytes: end.saturating_sub(board.image_origin),
    })
}

fn print_budget(job: &Job, b: &Budget, board: &Board, link_model: bool, stack_used: Option<u32>) {
    let kib = |n: u64| format!("{:>12} B  ({:.1} KiB)", n, n as f64 / 1024.0);
    println!(
        "memory budget on {} (image window {:#x}..{:#x}):",
        board.name,
        board.image_origin,
        board.image_origin + board.image_len
    );
    println!("  code (.init + .text)    {}", kib(b.code));
    println!("  read-only data          {}", kib(b.rodata));
    if link_model {
        println!("  model (.flash)          {}", kib(job.bytes.len() as u64));
    } else {
        println!(
            "  model (at {:#x})   {}",
            board.model_addr,
            kib(job.bytes.len() as u64)
        );
    }
    println!(
        "  inputs (.flash)         {}",
        kib(b.flash.saturating_sub(if link_model {
            job.bytes.len() as u64
        } else {
            0
        }))
    );
    for (k, a) in job.arenas.iter().enumerate() {
        println!("  arena {} (memory id {})   {}", k, k + 1, kib(*a));
    }
    println!("  metadata                {}", kib(job.metadata as u64));
    println!("  .data + .bss (all)      {}", kib(b.data_bss));
    match stack_used {
        Some(u) => println!(
            "  stack                   {}  deepest use {u} B",
            kib(b.stack)
        ),
        None => println!("  stack                   {}", kib(b.stack)),
    }
    println!(
        "  image total             {}  of {} MiB",
        kib(b.image_bytes),
        board.image_len >> 20
    );
}

fn check_fits(job: &Job, b: &Budget, board: &Board, link_model: bool) -> Result<()> {
    ensure!(
        b.image_bytes <= board.image_len,
        "{} does not fit on {}: image (code + model + arenas + stack) is {} bytes, the board has {} bytes for it",
        job.model.display(),
        board.name,
        b.image_bytes,
        board.image_len
    );
    if !link_model {
        ensure!(
            job.bytes.len() as u64 <= board.model_window,
            "{} does not fit on {}: the model blob is {} bytes, the load window at {:#x} holds {} bytes",
            job.model.display(),
            board.name,
            job.bytes.len(),
            board.model_addr,
            board.model_window
        );
    }
    Ok(())
}

/// Quick check before building: model + arenas + metadata alone must fit.
fn precheck(job: &Job, board: &Board, link_model: bool) -> Result<()> {
    let data: u64 = job.arenas.iter().map(|&a| round16(a)).sum::<u64>() + job.metadata as u64;
    let model = if link_model {
        job.bytes.len() as u64
    } else {
        0
    };
    let b = Budget {
        code: 0,
        rodata: 0,
        flash: 0,
        data_bss: 0,
        stack: 0,
        image_bytes: data + model,
    };
    check_fits(job, &b, board, link_model)
}

fn run_dir() -> Result<PathBuf> {
    let base = firmware_dir().join("runs");
    for n in 0.. {
        let d = base.join(format!("{}-{n}", std::process::id()));
        if !d.exists() {
            fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
            return Ok(d);
        }
    }
    unreachable!()
}

pub fn qemu(args: QemuArgs) -> Result<()> {
    let board = Board::by_name(&args.board)?;
    let cpu = board.cpu(args.cpu.as_deref())?;
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| root().join("tests/fixtures/gpt2_portable.pte"));
    let job = prepare(&model, &args.inputs)?;
    let link_model = !(args.load_model || args.blob.is_some());
    precheck(&job, board, link_model)?;
    let dir = run_dir()?;
    let elf_path = dir.join("firmware.elf");
    let opts = BuildOptions {
        board,
        link_model,
        semihosting: true,
        shrink_arenas: args.shrink_arenas.unwrap_or(0),
        selftest_panic: args.selftest_panic,
    };
    build_firmware(&job, &opts, &elf_path)?;
    let elf_bytes = fs::read(&elf_path)?;
    let b = budget(&elf_bytes, board)?;
    check_fits(&job, &b, board, link_model)?;

    let uart = dir.join("uart.bin");
    let blob = match (&args.blob, link_model) {
        (Some(p), _) => Some(p.clone()),
        (None, false) => {
            let p = dir.join("model.pte");
            fs::write(&p, &job.bytes)?;
            Some(p)
        }
        (None, true) => None,
    };
    let mut cmd = Command::new("qemu-system-aarch64");
    cmd.args(board.qemu_args(cpu.as_deref(), args.machine_opts.as_deref()))
        .args([
            "-display",
            "none",
            "-monitor",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
        ]);
    for _ in 0..board.serial_index {
        cmd.args(["-serial", "null"]);
    }
    cmd.arg("-serial").arg(format!("file:{}", uart.display()));
    if args.icount {
        cmd.args(["-icount", "shift=0,sleep=off"]);
    }
    if let Some(p) = &blob {
        cmd.arg("-device").arg(format!(
            "loader,file={},addr={:#x},force-raw=on",
            p.display(),
            board.model_addr
        ));
    }
    cmd.arg("-kernel").arg(&elf_path).stdin(Stdio::null());
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .context("cannot start qemu-system-aarch64 (run scripts/setup-qemu.sh)")?;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(args.timeout) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall = t0.elapsed();
    let stream = fs::read(&uart).unwrap_or_default();
    let run = console::decode(&stream, &elf_bytes)?;
    for line in &run.log {
        eprintln!("[fw] {line}");
    }
    for line in &run.text {
        eprintln!("[fw] {line}");
    }
    let Some(status) = status else {
        bail!(
            "QEMU timed out after {} s on {} ({}); the firmware sent {} console bytes",
            args.timeout,
            board.name,
            job.model.display(),
            stream.len()
        );
    };
    let report = run.report.as_ref();
    print_budget(&job, &b, board, link_model, report.map(|r| r.stack_used));
    let Some(report) = report else {
        bail!(
            "the firmware stopped without a report (QEMU {status}); console: {} [run files in {}]",
            run.summary(),
            dir.display()
        );
    };
    if report.status != 0 || !status.success() {
        bail!(
            "the firmware failed on {} (status {}, QEMU exit code {}): {} [run files in {}]",
            board.name,
            report.status,
            status.code().map_or("none".to_string(), |c| c.to_string()),
            run.summary(),
            dir.display()
        );
    }
    if u64::from(report.stack_used) * 10 > b.stack * 9 {
        eprintln!(
            "warning: the run used {} of {} stack bytes; the stack has no guard page (raise STACK_PAGES in boards/firmware/src/main.rs)",
            report.stack_used, b.stack
        );
    }
    fs::create_dir_all(&args.output_dir)
        .with_context(|| format!("cannot create {}", args.output_dir.display()))?;
    ensure!(
        run.tensors.len() == job.outputs,
        "the firmware sent {} outputs, the method has {}",
        run.tensors.len(),
        job.outputs
    );
    for (i, t) in run.tensors.iter().enumerate() {
        let path = args.output_dir.join(format!("output-{i}.npy"));
        t.write(&path)?;
        println!(
            "output {i}: {} {:?} -> {}",
            t.dtype,
            t.shape,
            path.display()
        );
    }
    println!(
        "{} on {}{}: EL{} MIDR {:#x}, SVE VL {} bits, SME SVL {} bits, GEMM kernel {}",
        job.model.display(),
        board.name,
        cpu.as_deref()
            .map(|c| format!(" -cpu {c}"))
            .unwrap_or_default(),
        report.el,
        report.midr,
        report.sve_vl_bits,
        report.sme_svl_bits,
        report.isa
    );
    let freq = report.cntfrq.max(1);
    let ms = |ticks: u64| ticks as f64 * 1e3 / freq as f64;
    println!(
        "load {} ticks ({:.3} ms), forward {} ticks ({:.3} ms) at CNTFRQ {} Hz; heap in use {} B; QEMU wall time {:.2} s",
        report.load_ticks,
        ms(report.load_ticks),
        report.execute_ticks,
        ms(report.execute_ticks),
        freq,
        report.heap_used,
        wall.as_secs_f64()
    );
    if args.icount {
        // shift=0: one instruction per nanosecond of virtual time.
        let insns = |ticks: u64| u128::from(ticks) * 1_000_000_000 / u128::from(freq);
        let granule = 1_000_000_000 / freq;
        println!(
            "instructions (icount): load {}, forward {}{}",
            insns(report.load_ticks),
            insns(report.execute_ticks),
            if granule > 1 {
                format!(" (counter granule {granule} instructions)")
            } else {
                String::new()
            }
        );
    }
    let _ = fs::remove_dir_all(&dir);
    Ok(())
}

pub fn deploy(args: DeployArgs) -> Result<()> {
    let board = Board::by_name(&args.board)?;
    let job = prepare(&args.model, &args.inputs)?;
    let link_model = args.link_model;
    precheck(&job, board, link_model)?;
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let elf_path = args.out.join("ptera-firmware.elf");
    let opts = BuildOptions {
        board,
        link_model,
        semihosting: false,
        shrink_arenas: 0,
        selftest_panic: false,
    };
    build_firmware(&job, &opts, &elf_path)?;
    let elf_bytes = fs::read(&elf_path)?;
    let b = budget(&elf_bytes, board)?;
    if let Err(e) = check_fits(&job, &b, board, link_model) {
        let _ = fs::remove_file(&elf_path);
        return Err(e);
    }
    let (flat, base) = elf::flat_image(&elf_bytes)?;
    ensure!(
        base == board.image_origin,
        "image base {base:#x} is not the board's load address {:#x}",
        board.image_origin
    );
    let files = boards::boot_files(
        board,
        &flat,
        if link_model { None } else { Some(&job.bytes) },
    )?;
    for (name, bytes) in &files {
        fs::write(args.out.join(name), bytes).with_context(|| format!("cannot write {name}"))?;
    }
    print_budget(&job, &b, board, link_model, None);
    println!("wrote to {}:", args.out.display());
    for (name, bytes) in &files {
        println!("  {name} ({} bytes)", bytes.len());
    }
    println!("  ptera-firmware.elf (for debuggers and `cargo xtask` log decoding)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(model_bytes: usize, arenas: Vec<u64>) -> Job {
        Job {
            model: "m.pte".into(),
            bytes: vec![0; model_bytes],
            arenas,
            metadata: 4096,
            inputs: vec![],
            outputs: 1,
        }
    }

    #[test]
    fn precheck_refuses_what_does_not_fit() {
        let pi3 = Board::by_name("raspi3b").unwrap();
        assert!(precheck(&job(1 << 20, vec![1 << 20]), pi3, true).is_ok());
        let too_big = precheck(&job(1 << 20, vec![1 << 30]), pi3, true)
            .unwrap_err()
            .to_string();
        assert!(too_big.contains("does not fit on raspi3b"), "{too_big}");
        // A separate blob must fit the loader's window.
        let blob = precheck(&job(512 << 20, vec![16]), pi3, false)
            .unwrap_err()
            .to_string();
        assert!(blob.contains("load window"), "{blob}");
    }

    #[test]
    fn config_lists_arenas_and_inputs() {
        let mut j = job(100, vec![1000, 24]);
        j.inputs.push(HostTensor {
            dtype: ptera::DType::I64,
            shape: vec![1, 3],
            bytes: vec![1; 24],
        });
        let board = Board::by_name("qemu-virt").unwrap();
        let opts = BuildOptions {
            board,
            link_model: true,
            semihosting: true,
            shrink_arenas: 8,
            selftest_panic: false,
        };
        let (cfg, bin) = config_rs(&j, &opts).unwrap();
        assert!(cfg.contains("ARENA_SIZES: [usize; 2] = [992, 16]"), "{cfg}");
        assert!(
            cfg.contains("InputSpec { dtype: 4, dims: &[1, 3], offset: 0, len: 24 }"),
            "{cfg}"
        );
        assert!(cfg.contains("MODEL_LEN: usize = 100"), "{cfg}");
        assert_eq!(bin.len(), 32);
    }
}
