//! `cargo xtask bench run`: median end-to-end `forward` time on the host (`--threads N`: the
//! forward's products split across N threads of one pool).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use ptera::{MethodMeta, OwnedArenas, Program};

use crate::host::{forward_inputs, load_file};
use crate::{registry, Weights};

pub fn bench_run(
    model: &Path,
    inputs: &[PathBuf],
    iters: usize,
    threads: usize,
    weights: Weights,
    json: bool,
) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice())?;
    let registry = registry(weights);
    let meta = MethodMeta::new(&program, "forward", &registry)?;
    let tensors = forward_inputs(&meta, inputs)?;
    crate::host::check_memory(&meta)?;
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
            serde_json::json!({"model": model.display().to_string(), "iters": times.len(), "threads": threads, "median_s": median,
                               "min_s": times[0], "max_s": times[times.len() - 1]})
        );
    } else {
        println!(
            "{}: median {:.4} s over {} run(s) on {} thread(s) (min {:.4}, max {:.4})",
            model.display(),
            median,
            times.len(),
            threads,
            times[0],
            times[times.len() - 1]
        );
    }
    Ok(())
}
