//! What `cargo xtask qemu`, `deploy` and `bench gemm` share: building the bare-metal firmware
//! (`boards/`) for one
//! model and board, run it under `qemu-system-aarch64` or write the files a board boots from.
//!
//! The firmware is specialised per model at build time: this module computes the method's memory
//! needs with [`MethodMeta`] and writes `config.rs`, `model.bin` and `inputs.bin` into
//! `target/firmware/gen`, which the firmware's build script and `include!`s pick up. Builds are
//! serialised by a lock file, so concurrent invocations (tests) never mix models.

pub mod boards;
pub mod console;
pub mod cores;
pub mod elf;
pub mod gemm;

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use ptera::{MethodMeta, Program};

use crate::npy::HostTensor;
pub use boards::{Board, Smp};
pub use cores::{CallCount, CoreCounter, CoreCounts, Marks};
pub use gemm::{gemm_icount, GemmRequest};

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

pub(crate) fn firmware_dir() -> PathBuf {
    root().join("target/firmware")
}

/// The model, its bytes and method facts, and the inputs to bundle.
pub(crate) struct Job {
    pub(crate) model: PathBuf,
    pub(crate) bytes: Vec<u8>,
    pub(crate) arenas: Vec<u64>,
    pub(crate) metadata: usize,
    pub(crate) inputs: Vec<HostTensor>,
    pub(crate) outputs: usize,
    /// A BundledProgram (`.bpte`): its test cases, which the firmware runs and checks itself
    /// (`bytes` is the whole file; `arenas` and `metadata` fit every suite's method).
    pub(crate) bundled_cases: Option<usize>,
}

pub(crate) fn default_inputs(model: &Path) -> Vec<PathBuf> {
    let stem = model.with_extension("");
    (0..)
        .map(|i| PathBuf::from(format!("{}.in{i}.npy", stem.display())))
        .take_while(|p| p.is_file())
        .collect()
}

/// The job for `model`: a program with its inputs, or a BundledProgram with its test cases.
pub(crate) fn prepare_any(model: &Path, inputs: &[PathBuf]) -> Result<Job> {
    if crate::cmd::run::is_bundled(model) {
        ensure!(
            inputs.is_empty(),
            "{}: a BundledProgram carries its own inputs (no --input)",
            model.display()
        );
        prepare_bundled(model)
    } else {
        prepare(model, inputs)
    }
}

/// A BundledProgram: the arenas and metadata buffer sized for the largest of its suites'
/// methods (the firmware loads them one after the other into the same static memory).
pub(crate) fn prepare_bundled(model: &Path) -> Result<Job> {
    let file = crate::host::load_file(model)?;
    let bundled = ptera::format::bundled::Bundled::load(file.as_slice())
        .with_context(|| format!("{}", model.display()))?;
    let program = Program::load(bundled.program())
        .with_context(|| format!("{}: embedded program", model.display()))?;
    let registry = crate::firmware_registry();
    let (mut arenas, mut metadata, mut cases) = (Vec::<u64>::new(), 0usize, 0usize);
    for suite in bundled.suites() {
        let meta = MethodMeta::new(&program, suite.method(), &registry)
            .with_context(|| format!("{}: method `{}`", model.display(), suite.method()))?;
        ensure!(
            meta.arena_count() <= 16,
            "{}: method `{}` plans {} arenas; the firmware supports up to 16",
            model.display(),
            suite.method(),
            meta.arena_count()
        );
        for k in 0..meta.arena_count() {
            if k == arenas.len() {
                arenas.push(0);
            }
            arenas[k] = arenas[k].max(meta.arena_size(k));
        }
        metadata = metadata.max(meta.metadata_bytes());
        cases += suite.cases().count();
    }
    ensure!(cases > 0, "{}: no test cases", model.display());
    Ok(Job {
        model: model.to_path_buf(),
        bytes: file.as_slice().to_vec(),
        arenas,
        metadata,
        inputs: Vec::new(),
        outputs: 0,
        bundled_cases: Some(cases),
    })
}

pub(crate) fn prepare(model: &Path, inputs: &[PathBuf]) -> Result<Job> {
    let file = crate::host::load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let registry = crate::firmware_registry();
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
    let (tensors, names) = crate::host::read_inputs(&paths)?;
    crate::host::check_inputs(&meta, &tensors, &names).with_context(|| {
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
        bundled_cases: None,
    })
}

/// What the firmware build needs beyond the job.
pub(crate) struct BuildOptions<'a> {
    pub(crate) board: &'a Board,
    pub(crate) link_model: bool,
    pub(crate) semihosting: bool,
    pub(crate) shrink_arenas: u64,
    /// A failure-path self-test built into the firmware (its feature `selftest-KIND`).
    pub(crate) selftest: Option<SelfTest>,
    /// Cores the image starts and uses (1: core 0 only).
    pub(crate) cores: usize,
    /// Record the forward into an ETDump (firmware feature `etdump`) with room for this many
    /// events and encoded bytes ([`etdump_size`]).
    pub(crate) etdump: Option<(usize, usize)>,
    /// Tolerances of a BundledProgram's output check, |got - want| <= atol + rtol * |want|.
    pub(crate) tolerance: (f64, f64),
}

/// Failure paths the firmware can be built to take right after boot (`qemu --selftest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SelfTest {
    /// Panic: the message, its location and exit status 101.
    Panic,
    /// Recurse until core 0's stack runs into its guard page.
    StackOverflow,
    /// Write one byte of the read-only program image.
    WriteImage,
    /// Jump into the arenas (not executable).
    ExecArena,
    /// Write RAM outside every region the firmware uses (unmapped).
    WriteOutside,
}

impl SelfTest {
    fn feature(self) -> &'static str {
        match self {
            SelfTest::Panic => "selftest-panic",
            SelfTest::StackOverflow => "selftest-stack-overflow",
            SelfTest::WriteImage => "selftest-write-image",
            SelfTest::ExecArena => "selftest-exec-arena",
            SelfTest::WriteOutside => "selftest-write-outside",
        }
    }
}

/// Room for the firmware's ETDump of one forward of `job`: (events, encoded bytes), from a
/// recorded host run of the same program and inputs, with a margin for what a board may do
/// differently (a data-dependent jump) and for wider timestamps.
pub(crate) fn etdump_size(job: &Job) -> Result<(usize, usize)> {
    use ptera::devtools::etdump::{encode, Event, Recorder};
    let program = Program::load(&job.bytes)?;
    let registry = crate::firmware_registry();
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    crate::host::check_memory(&meta)?;
    let plan = meta.plan();
    let n = crate::host::instruction_count(plan);
    let mut bufs = ptera::OwnedArenas::for_meta(&meta)?;
    let mut method = bufs.load(meta, &registry)?;
    for (i, t) in job.inputs.iter().enumerate() {
        method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
    }
    let mut events = vec![Event::EMPTY; 1 + 4 * n + (1 << 16)];
    let mut tick = u64::MAX / 2;
    let mut rec = Recorder::new(plan, &mut events, || {
        tick += 1;
        tick
    });
    method.execute_observed(&mut rec)?;
    let recorded = rec.events().to_vec();
    let mut positions = vec![[0u32; 2]; recorded.len()];
    let mut out = vec![0u8; 4096 + 512 * recorded.len()];
    let bytes = encode(plan, &[&recorded], &mut positions, &mut out)
        .map_err(|_| anyhow::anyhow!("ETDump larger than its buffer"))?;
    let events = recorded.len() + recorded.len() / 8 + 16;
    Ok((events, bytes + bytes / 8 + 4096))
}

pub(crate) fn round16(n: u64) -> u64 {
    n.div_ceil(16) * 16
}

pub(crate) fn config_rs(job: &Job, opts: &BuildOptions<'_>) -> Result<(String, Vec<u8>)> {
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
         pub const INPUTS: [InputSpec; {}] = [\n{specs}];\n\
         pub const CORES: usize = {};\n\
         pub const ETDUMP_EVENTS: usize = {};\n\
         pub const ETDUMP_BYTES: usize = {};\n\
         pub const BUNDLED: bool = {};\n\
         pub const ATOL: f64 = {:?};\n\
         pub const RTOL: f64 = {:?};\n",
        job.model.display(),
        opts.board.name,
        job.bytes.len(),
        opts.link_model,
        arenas.len(),
        arenas.join(", "),
        job.metadata,
        inputs_bin.len(),
        job.inputs.len(),
        opts.cores.max(1),
        opts.etdump.map_or(0, |e| e.0),
        opts.etdump.map_or(0, |e| e.1),
        job.bundled_cases.is_some(),
        opts.tolerance.0,
        opts.tolerance.1,
    );
    Ok((config, inputs_bin))
}

/// Writes `path` only when its contents change, so an unchanged model does not rebuild.
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if fs::read(path).ok().as_deref() != Some(bytes) {
        fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Builds the firmware and copies the ELF to `dest`. Holds `target/firmware/build.lock`
/// while the generated files and the shared build output are in use.
pub(crate) fn build_firmware(job: &Job, opts: &BuildOptions<'_>, dest: &Path) -> Result<()> {
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

    let mut features = Vec::new();
    if opts.semihosting {
        features.push("semihosting");
    }
    if let Some(test) = opts.selftest {
        features.push(test.feature());
    }
    if opts.etdump.is_some() {
        features.push("etdump");
    }
    cargo_build_firmware(opts.board, &features.join(","), Some(&gen)).map_err(|e| {
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
    let elf = firmware_elf(&dir, opts.board);
    fs::copy(&elf, dest).with_context(|| format!("cannot copy {}", elf.display()))?;
    Ok(())
}

/// Code generation of every firmware build: `aarch64-unknown-none` and `armv7a-none-eabihf`
/// default to `+strict-align`, under which LLVM splits each vector load/store it cannot prove
/// aligned into byte accesses (the Neon GEMM runs 20 % more instructions). All Rust code of the
/// firmware runs after the boot code turned the MMU on (aarch64-rt's `enable_mmu`, the ARMv7
/// `_start`: assembly, before the Rust entry), on Normal memory with alignment checking off,
/// where unaligned accesses are allowed, and MMIO goes through aligned volatile accesses; so
/// the firmware is built without strict-align (rustc notes that the feature name is unstable).
pub(crate) const FIRMWARE_RUSTFLAGS: &str = "-C target-feature=-strict-align";

/// Extra code generation for the ARMv7-A firmware: every 32-bit board's core (Cortex-A7, A9,
/// A15) has Neon with 32 double registers, which the target's baseline (VFPv3-D16) leaves out.
/// VFPv4 (fused multiply-add) is not assumed: the Cortex-A9 lacks it, and the GEMM picks its
/// VFPv4 kernel at run time (MVFR1).
pub(crate) const ARMV7_RUSTFLAGS: &str = "-C target-feature=+neon,+d32";

/// The toolchain that builds the ARMv7-A firmware: `armv7a-none-eabihf` has no prebuilt `core`
/// in rustup, so a nightly builds it from source (`-Zbuild-std`, needs `rust-src`);
/// `scripts/setup-rust.sh` installs it.
pub(crate) const ARMV7_TOOLCHAIN: &str = "nightly";

/// Where `cargo build` of the firmware for `board` leaves the ELF, under target directory `dir`.
pub(crate) fn firmware_elf(dir: &Path, board: &Board) -> PathBuf {
    dir.join(board.target()).join("release/ptera-firmware")
}

/// Runs `cargo build` of the firmware (`boards/`) for `board` (`PTERA_BOARD`) with `features`
/// into `target/firmware`; the caller holds the build lock. `gen`: the generated model files
/// (`PTERA_FW_GEN`), if any.
pub(crate) fn cargo_build_firmware(
    board: &Board,
    features: &str,
    gen: Option<&Path>,
) -> Result<()> {
    cargo_build_firmware_in(
        &firmware_dir(),
        board,
        features,
        gen,
        Some(FIRMWARE_RUSTFLAGS),
    )
}

/// [`cargo_build_firmware`] into target directory `dir`, with extra `rustflags` for the
/// firmware's target, if any.
pub(crate) fn cargo_build_firmware_in(
    dir: &Path,
    board: &Board,
    features: &str,
    gen: Option<&Path>,
    rustflags: Option<&str>,
) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let t0 = Instant::now();
    let target = board.target();
    let mut cmd = match board.arch {
        boards::Arch::Aarch64 => Command::new(cargo),
        boards::Arch::Armv7 => {
            // Through rustup's proxy, which the `+toolchain` argument needs.
            let mut c = Command::new("cargo");
            c.arg(format!("+{ARMV7_TOOLCHAIN}"))
                .env_remove("RUSTUP_TOOLCHAIN")
                .env_remove("RUSTC")
                .env_remove("CARGO");
            c
        }
    };
    cmd.arg("build");
    if board.arch == boards::Arch::Armv7 {
        cmd.arg("-Zbuild-std=core,alloc");
    }
    let mut flags = rustflags.unwrap_or_default().to_string();
    if board.arch == boards::Arch::Armv7 {
        flags = format!("{flags} {ARMV7_RUSTFLAGS}");
    }
    cmd.current_dir(root())
        .args([
            "--release",
            "--quiet",
            "--manifest-path",
            "boards/Cargo.toml",
        ])
        .args(["--target", target, "--features", features])
        .env("PTERA_BOARD", board.name)
        .env("CARGO_TARGET_DIR", dir)
        .env(
            "DEFMT_LOG",
            std::env::var("DEFMT_LOG").unwrap_or_else(|_| "error".into()),
        )
        .stdout(Stdio::inherit());
    if let Some(g) = gen {
        cmd.env("PTERA_FW_GEN", g);
    }
    let flags_var = format!(
        "CARGO_TARGET_{}_RUSTFLAGS",
        target.to_uppercase().replace('-', "_")
    );
    if !flags.trim().is_empty() {
        cmd.env(flags_var, flags.trim());
    }
    let out = cmd.output().context("cannot run cargo")?;
    if !out.status.success() {
        bail!(
            "firmware build failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!(
        "firmware ({}{}{features}) built in {:.1} s",
        board.name,
        if features.is_empty() { "" } else { ", " },
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Sizes for the memory budget, from the linked image and the method's plan.
pub(crate) struct Budget {
    pub(crate) code: u64,
    pub(crate) rodata: u64,
    pub(crate) flash: u64,
    pub(crate) data_bss: u64,
    pub(crate) stack: u64,
    pub(crate) image_bytes: u64,
    /// Of `.data + .bss`: the other cores' stacks and every core's GEMM scratch (`smp.rs`),
    /// 0 on a one-core image.
    pub(crate) core_stacks: u64,
    pub(crate) core_scratch: u64,
}

pub(crate) fn budget(elf_bytes: &[u8], board: &Board) -> Result<Budget> {
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
    // The multi-core statics of `boards/firmware/src/arch/aarch64/smp.rs`, by their (mangled) names.
    let symbols = elf::functions(elf_bytes)?;
    let object = |part: &str| -> u64 {
        symbols
            .iter()
            .filter(|(_, _, name)| name.contains("3smp") && name.contains(part))
            .map(|(_, size, _)| *size)
            .max()
            .unwrap_or(0)
    };
    Ok(Budget {
        core_stacks: object("6STACKS"),
        core_scratch: object("7SCRATCH"),
        code: size(&[".init", ".text"]),
        rodata: size(&[".rodata", ".got"]),
        flash: size(&[".flash"]),
        data_bss: size(&[".data", ".bss"]),
        stack: size(&[".stack"]),
        image_bytes: end.saturating_sub(board.image_origin),
    })
}

pub(crate) fn print_budget(
    job: &Job,
    b: &Budget,
    board: &Board,
    link_model: bool,
    stack_used: Option<u32>,
) {
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
    if b.core_stacks + b.core_scratch > 0 {
        println!("    other cores' stacks   {}", kib(b.core_stacks));
        println!("    cores' GEMM scratch   {}", kib(b.core_scratch));
    }
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

pub(crate) fn check_fits(job: &Job, b: &Budget, board: &Board, link_model: bool) -> Result<()> {
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
pub(crate) fn precheck(job: &Job, board: &Board, link_model: bool) -> Result<()> {
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
        core_stacks: 0,
        core_scratch: 0,
    };
    check_fits(job, &b, board, link_model)
}

pub(crate) fn run_dir() -> Result<PathBuf> {
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
            bundled_cases: None,
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
            selftest: None,
            cores: 1,
            etdump: None,
            tolerance: (1e-4, 1e-4),
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
