//! `cargo xtask`: host tools for ptera. One file per verb in `cmd/`; what several verbs share
//! in `host.rs` (inputs), `npy.rs` and `baremetal/` (firmware build, QEMU, boards).
// ptera::Error is large by design (context inline, no allocation in the core).
#![allow(clippy::result_large_err)]

mod baremetal;
mod cmd;
mod host;
mod npy;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ptera::Registry;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "ptera host tools")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Summarise a .pte: methods, inputs/outputs, instructions, operators, delegates, memory.
    Inspect {
        model: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Write every method as a Model Explorer graph (JSON graph format) to this file:
        /// a node per instruction, delegate regions as namespaces of their operations.
        #[arg(long, value_name = "OUT.json")]
        graph: Option<PathBuf>,
        /// With --graph: also write OUT.nodedata.json, each node's time (or instructions)
        /// from this ETDump (`run`/`qemu --etdump`), for Model Explorer to colour.
        #[arg(long, value_name = "FILE.etdp", requires = "graph")]
        etdump: Option<PathBuf>,
    },
    /// Run method `forward` on the host and write outputs as .npy files; for a BundledProgram
    /// (.bpte), run every test case of every method and check its outputs.
    Run {
        model: PathBuf,
        /// Input .npy files, in method input order.
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        /// Directory for output-0.npy, output-1.npy, ...
        #[arg(long, default_value = "out")]
        output_dir: PathBuf,
        /// Most instructions one forward may execute (programs may loop).
        #[arg(long, default_value_t = ptera::exec::run::DEFAULT_STEP_LIMIT)]
        max_instructions: u64,
        /// Also write an ETDump profile of the forward (ExecuTorch's format, for its
        /// Inspector): one event per instruction and per delegate-region operation.
        #[arg(long, value_name = "FILE.etdp")]
        etdump: Option<PathBuf>,
        /// Cores (threads) one forward may use; products are split across them with
        /// bit-identical results.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// XNNPACK fp32 filters: packed at load, or read in place and packed per product.
        #[arg(long, value_enum, default_value_t = Weights::Packed)]
        weights: Weights,
        /// For a BundledProgram (.bpte): absolute tolerance of the output check.
        #[arg(long, default_value_t = 1e-4)]
        atol: f64,
        /// For a BundledProgram (.bpte): relative tolerance of the output check.
        #[arg(long, default_value_t = 1e-4)]
        rtol: f64,
    },
    /// Compare two .npy files elementwise (|a-b| <= atol + rtol*|b|); non-zero exit on mismatch.
    Compare {
        got: PathBuf,
        want: PathBuf,
        #[arg(long, default_value_t = 1e-4)]
        atol: f64,
        #[arg(long, default_value_t = 1e-4)]
        rtol: f64,
    },
    /// Lower a .pte for a target: matmul regions on ptera's own backend, weights pre-packed.
    Lower(cmd::lower::LowerArgs),
    /// Where a forward's time goes: top operators (by operator and by delegate region
    /// operation) and top instructions, with their share of the forward. On the host (time),
    /// or with `--board` on the bare-metal firmware under QEMU `-icount` (exact instructions,
    /// from the firmware's ETDump).
    Profile {
        model: PathBuf,
        /// Profile on this board's firmware under qemu-system-aarch64 (`cargo xtask boards`).
        #[arg(long, conflicts_with = "host")]
        board: Option<String>,
        /// With --board: the QEMU CPU (qemu-virt; default: the board's).
        #[arg(long, requires = "board")]
        cpu: Option<String>,
        /// Profile on the host (the default).
        #[arg(long)]
        host: bool,
        /// Input .npy files; without them, deterministic inputs are synthesised.
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        /// Forwards measured (after one warm-up).
        #[arg(long, default_value_t = 5)]
        iters: usize,
        /// Rows in each table.
        #[arg(long, default_value_t = 15)]
        top: usize,
        #[arg(long)]
        json: bool,
    },
    /// Build the bare-metal firmware for a model and board and run it under qemu-system-aarch64.
    Qemu(cmd::qemu::QemuArgs),
    /// Write the boot files for a board (kernel8.img + config.txt, or image + U-Boot commands).
    Deploy(cmd::deploy::DeployArgs),
    /// Each thread's instructions and the critical path of one forward of a program run with
    /// several threads under qemu-user, from QEMU's execution trace
    /// (`-d in_asm,exec,nochain -D TRACE`; scripts/armpeer.sh --threads N).
    TraceCores {
        /// The traced program (its symbol table gives the forward and team marks).
        program: PathBuf,
        /// The trace file or FIFO.
        trace: PathBuf,
        /// Threads the program ran (threads that never ran count 0).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        #[arg(long)]
        json: bool,
    },
    /// List the boards the firmware runs on (from boards/boards.rs).
    Boards {
        /// Only the board names, one per line (for scripts).
        #[arg(long)]
        names: bool,
        /// Each board's name and the Rust target of its firmware, one board per line.
        #[arg(long)]
        targets: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Time `forward` end to end (median of N runs).
    Run {
        model: PathBuf,
        /// Input .npy files; without them, deterministic inputs are synthesised
        /// (int tensors = 1, float tensors = small ramps).
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        #[arg(long, default_value_t = 5)]
        iters: usize,
        /// Cores (threads) one forward may use (a pool created once for all runs).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// XNNPACK fp32 filters: packed at load, or read in place and packed per product.
        #[arg(long, value_enum, default_value_t = Weights::Packed)]
        weights: Weights,
        #[arg(long)]
        json: bool,
    },
    /// Exact instruction count and FMA density of one GEMM call (AArch64; bare-metal
    /// qemu-system -icount, or a qemu-user exec trace).
    Gemm(cmd::bench_gemm::GemmArgs),
    /// Exact AArch64 instructions of every operator (and XNNPACK node) of one forward
    /// (qemu-user trace): instructions per output element, MACs per instruction.
    Ops(cmd::bench_ops::OpsArgs),
}

/// How `run`, `bench run` and `profile` treat the fp32 filters of XNNPACK regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Weights {
    /// Packed once at load into the method's metadata (more RAM, no packing per forward;
    /// what ExecuTorch's XNNPACK delegate does).
    Packed,
    /// Read in place from the file and packed per product (what the firmware does).
    InPlace,
}

/// The registry the host tools run programs with: every kernel and backend ptera has, the
/// XNNPACK filters packed at load or read in place.
pub fn registry(weights: Weights) -> Registry<'static> {
    match weights {
        Weights::Packed => Registry::packing(),
        Weights::InPlace => Registry::standard(),
    }
}

/// The registry of the firmware images and of what describes a program's own needs
/// (`inspect`, the bare-metal memory budgets): every weight read in place.
pub fn firmware_registry() -> Registry<'static> {
    Registry::standard()
}

/// Restores the default SIGPIPE action, so that `cargo xtask inspect M.pte | head` ends quietly
/// when the reader closes the pipe instead of panicking in `println!` (Rust starts programs with
/// SIGPIPE ignored).
#[cfg(target_os = "linux")]
fn default_sigpipe() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    // SAFETY: signal(2) with SIGPIPE (13 on Linux) and SIG_DFL (0) only sets this process's
    // disposition for that signal; called first thing in `main`, before any thread exists.
    unsafe {
        signal(13, 0);
    }
}

#[cfg(not(target_os = "linux"))]
fn default_sigpipe() {}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Inspect {
            model,
            graph: Some(out),
            etdump,
            ..
        } => cmd::graph::export(&model, &out, etdump.as_deref()).map(|paths| {
            for p in paths {
                println!("wrote {}", p.display());
            }
        }),
        Cmd::Inspect { model, json, .. } => cmd::inspect::inspect(&model, json),
        Cmd::Run {
            model,
            inputs,
            output_dir,
            max_instructions,
            etdump,
            threads,
            weights,
            atol,
            rtol,
        } => crate::host::with_threads(threads, || {
            if cmd::run::is_bundled(&model) {
                cmd::run::run_bundled(&model, max_instructions, atol, rtol, weights)
            } else {
                cmd::run::run(
                    &model,
                    &inputs,
                    &output_dir,
                    max_instructions,
                    etdump.as_deref(),
                    weights,
                )
            }
        }),
        Cmd::Compare {
            got,
            want,
            atol,
            rtol,
        } => cmd::compare::compare(&got, &want, atol, rtol),
        Cmd::Lower(args) => cmd::lower::lower_cmd(args),
        Cmd::Profile {
            model,
            board: Some(board),
            cpu,
            inputs,
            top,
            json,
            ..
        } => cmd::profile::profile_board(&model, &inputs, &board, cpu.as_deref(), top, json),
        Cmd::Profile {
            model,
            inputs,
            iters,
            top,
            json,
            ..
        } => cmd::profile::profile(&model, &inputs, iters + 1, top, json),
        Cmd::Qemu(args) => cmd::qemu::qemu(args),
        Cmd::Deploy(args) => cmd::deploy::deploy(args),
        Cmd::TraceCores {
            program,
            trace,
            threads,
            json,
        } => cmd::trace_cores::trace_cores(&program, &trace, threads, json),
        Cmd::Boards {
            names,
            targets,
            json,
        } => cmd::boards::boards(names, targets, json),
        Cmd::Bench {
            what:
                BenchCmd::Run {
                    model,
                    inputs,
                    iters,
                    threads,
                    weights,
                    json,
                },
        } => crate::host::with_threads(threads, || {
            cmd::bench_run::bench_run(&model, &inputs, iters, threads, weights, json)
        }),
        Cmd::Bench {
            what: BenchCmd::Gemm(args),
        } => cmd::bench_gemm::bench_gemm(args),
        Cmd::Bench {
            what: BenchCmd::Ops(args),
        } => cmd::bench_ops::bench_ops(args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
