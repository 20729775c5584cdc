//! `cargo xtask run`: runs method `forward` on the host and writes the outputs as `.npy`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use ptera::{MethodMeta, OwnedArenas, Program};

use crate::host::{check_inputs, load_file, read_inputs};
use crate::npy::HostTensor;
use crate::registry;

pub fn run(model: &Path, inputs: &[PathBuf], out_dir: &Path, max_instructions: u64) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let registry = registry();
    let (meta, unresolved) = MethodMeta::new_lenient(&program, "forward", &registry)?;
    let (tensors, names) = read_inputs(inputs)?;
    check_inputs(&meta, &tensors, &names)?;
    if let Some(e) = unresolved {
        return Err(e.into());
    }
    if let Some(note) = crate::host::lowered_note(&program) {
        println!("{note}");
    }
    crate::host::check_memory(&meta)?;
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let t0 = Instant::now();
    let mut method = bufs.load(meta, &registry)?;
    let load = t0.elapsed();
    method.set_step_limit(max_instructions);
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
