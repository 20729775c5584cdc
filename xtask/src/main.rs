//! `cargo xtask`: host tools for ptera (inspect, run, bench).
// ptera::Error is large by design (context inline, no allocation in the core).
#![allow(clippy::result_large_err)]

mod baremetal;
mod bench_gemm;
mod inspect;
mod npy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use ptera::host::AlignedBuf;
use ptera::Registry;
use ptera::{MethodMeta, OwnedArenas, Program};

use npy::HostTensor;

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
    },
    /// Run method `forward` on the host and write outputs as .npy files.
    Run {
        model: PathBuf,
        /// Input .npy files, in method input order.
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        /// Directory for output-0.npy, output-1.npy, ...
        #[arg(long, default_value = "out")]
        output_dir: PathBuf,
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
    /// Build the bare-metal firmware for a model and board and run it under qemu-system-aarch64.
    Qemu(baremetal::QemuArgs),
    /// Write the boot files for a board (kernel8.img + config.txt, or image + U-Boot commands).
    Deploy(baremetal::DeployArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Time `forward` end to end (median of N runs, one thread).
    Run {
        model: PathBuf,
        /// Input .npy files; without them, deterministic inputs are synthesised
        /// (int tensors = 1, float tensors = small ramps).
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        #[arg(long, default_value_t = 5)]
        iters: usize,
        #[arg(long)]
        json: bool,
    },
    /// Exact instruction count and FMA density of one GEMM call (AArch64; bare-metal
    /// qemu-system -icount, or a qemu-user exec trace).
    Gemm(bench_gemm::GemmArgs),
}

/// The registry the host tools use: every kernel and backend ptera has.
pub fn registry() -> Registry<'static> {
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
        Cmd::Inspect { model, json } => inspect::inspect(&model, json),
        Cmd::Run {
            model,
            inputs,
            output_dir,
        } => run(&model, &inputs, &output_dir),
        Cmd::Compare {
            got,
            want,
            atol,
            rtol,
        } => compare(&got, &want, atol, rtol),
        Cmd::Qemu(args) => baremetal::qemu(args),
        Cmd::Deploy(args) => baremetal::deploy(args),
        Cmd::Bench {
            what:
                BenchCmd::Run {
                    model,
                    inputs,
                    iters,
                    json,
                },
        } => bench_run(&model, &inputs, iters, json),
        Cmd::Bench {
            what: BenchCmd::Gemm(args),
        } => bench_gemm::bench_gemm(args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub fn load_file(path: &Path) -> Result<AlignedBuf> {
    AlignedBuf::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Checks inputs against the method's signature; one clear message on mismatch.
fn check_inputs(meta: &MethodMeta<'_>, inputs: &[HostTensor], names: &[String]) -> Result<()> {
    if inputs.len() != meta.num_inputs() {
        bail!(
            "method `{}` takes {} input(s), {} given",
            meta.name(),
            meta.num_inputs(),
            inputs.len()
        );
    }
    for (i, (t, name)) in inputs.iter().zip(names).enumerate() {
        let info = meta
            .input(i)
            .with_context(|| format!("input {i} is not a tensor input"))?;
        if info.dtype != t.dtype {
            bail!(
                "input {i} ({name}): expected dtype {}, got {}",
                info.dtype,
                t.dtype
            );
        }
        if info.shape.dims() != t.shape.as_slice() {
            bail!(
                "input {i} ({name}): expected shape {}, got {}",
                info.shape,
                t.shape()?
            );
        }
    }
    Ok(())
}

fn read_inputs(paths: &[PathBuf]) -> Result<(Vec<HostTensor>, Vec<String>)> {
    let tensors = paths
        .iter()
        .map(|p| HostTensor::read(p))
        .collect::<Result<Vec<_>>>()?;
    let names = paths.iter().map(|p| p.display().to_string()).collect();
    Ok((tensors, names))
}

fn run(model: &Path, inputs: &[PathBuf], out_dir: &Path) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let registry = registry();
    let (meta, unresolved) = MethodMeta::new_lenient(&program, "forward", &registry)?;
    let (tensors, names) = read_inputs(inputs)?;
    check_inputs(&meta, &tensors, &names)?;
    if let Some(e) = unresolved {
        return Err(e.into());
    }
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let t0 = Instant::now();
    let mut method = bufs.load(meta, &registry)?;
    let load = t0.elapsed();
    for (i, t) in tensors.iter().enumerate() {
        method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
    }
    let t1 = Instant::now();
    method.execute()?;
    let exec = t1.elapsed();
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    for i in 0..method.num_outputs() {
        let o = method.output(i)?;
        let host = HostTensor {
            dtype: o.dtype(),
            shape: o.dims().to_vec(),
            bytes: o.bytes().to_vec(),
        };
        let path = out_dir.join(format!("output-{i}.npy"));
        host.write(&path)?;
        println!(
            "output {i}: {} {} -> {}",
            o.dtype(),
            o.shape(),
            path.display()
        );
    }
    println!(
        "load {:.3} ms, forward {:.3} ms",
        load.as_secs_f64() * 1e3,
        exec.as_secs_f64() * 1e3
    );
    Ok(())
}

fn synth_inputs(meta: &MethodMeta<'_>) -> Result<Vec<HostTensor>> {
    (0..meta.num_inputs())
        .map(|i| {
            let info = meta
                .input(i)
                .with_context(|| format!("input {i} is not a tensor"))?;
            let n = info.shape.numel();
            let mut bytes = vec![0u8; n * info.dtype.size()];
            for k in 0..n {
                if info.dtype.is_float() {
                    ptera::tensor::write_f64(
                        info.dtype,
                        &mut bytes,
                        k,
                        ((k % 17) as f64 - 8.0) / 8.0,
                    );
                } else {
                    ptera::tensor::write_i64(info.dtype, &mut bytes, k, 1);
                }
            }
            Ok(HostTensor {
                dtype: info.dtype,
                shape: info.shape.dims().to_vec(),
                bytes,
            })
        })
        .collect()
}

fn bench_run(model: &Path, inputs: &[PathBuf], iters: usize, json: bool) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice())?;
    let registry = registry();
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let tensors = if inputs.is_empty() {
        synth_inputs(&meta)?
    } else {
        let (t, names) = read_inputs(inputs)?;
        check_inputs(&meta, &t, &names)?;
        t
    };
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let mut method = bufs.load(meta, &registry)?;
    let mut times = Vec::new();
    for it in 0..iters.max(1) {
        for (i, t) in tensors.iter().enumerate() {
            method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
        }
        let t0 = Instant::now();
        method.execute()?;
        let dt = t0.elapsed().as_secs_f64();
        if !json {
            eprintln!("run {}: {:.4} s", it + 1, dt);
        }
        times.push(dt);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    if json {
        println!(
            "{}",
            serde_json::json!({"model": model.display().to_string(), "iters": times.len(), "median_s": median,
                               "min_s": times[0], "max_s": times[times.len() - 1]})
        );
    } else {
        println!(
            "{}: median {:.4} s over {} run(s) (min {:.4}, max {:.4})",
            model.display(),
            median,
            times.len(),
            times[0],
            times[times.len() - 1]
        );
    }
    Ok(())
}

fn compare(got: &Path, want: &Path, atol: f64, rtol: f64) -> Result<()> {
    let (g, w) = (HostTensor::read(got)?, HostTensor::read(want)?);
    if g.dtype != w.dtype || g.shape != w.shape {
        bail!(
            "{} is {} {}, {} is {} {}",
            got.display(),
            g.dtype,
            g.shape()?,
            want.display(),
            w.dtype,
            w.shape()?
        );
    }
    let n: usize = g.shape.iter().product();
    let (mut worst, mut worst_i, mut bad) = (0f64, 0usize, 0usize);
    for i in 0..n {
        let (a, b) = (
            ptera::tensor::read_f64(g.dtype, &g.bytes, i),
            ptera::tensor::read_f64(w.dtype, &w.bytes, i),
        );
        if a.is_nan() && b.is_nan() {
            continue;
        }
        let d = (a - b).abs();
        if d.is_nan() || d > atol + rtol * b.abs() {
            bad += 1;
        }
        if d > worst || d.is_nan() {
            worst = d;
            worst_i = i;
        }
    }
    println!(
        "{} vs {}: {} {} elements, max |diff| {:.3e} at {}, {} outside atol {:e} + rtol {:e}",
        got.display(),
        want.display(),
        n,
        g.dtype,
        worst,
        worst_i,
        bad,
        atol,
        rtol
    );
    if bad > 0 {
        bail!("{bad} of {n} elements differ");
    }
    Ok(())
}
