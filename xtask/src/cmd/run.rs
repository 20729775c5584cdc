//! `cargo xtask run`: runs method `forward` on the host and writes the outputs as `.npy`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use ptera::{MethodMeta, OwnedArenas, Program};

use crate::host::{check_inputs, load_file, read_inputs};
use crate::npy::HostTensor;
use crate::{registry, Weights};

pub fn run(
    model: &Path,
    inputs: &[PathBuf],
    out_dir: &Path,
    max_instructions: u64,
    etdump: Option<&Path>,
    weights: Weights,
) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let registry = registry(weights);
    let (tensors, names) = read_inputs(inputs)?;
    // One clock for every ETDump event: nanoseconds since the method started loading.
    let origin = Instant::now();
    let (meta, unresolved) = MethodMeta::new_lenient(&program, "forward", &registry)?;
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
    let init_start = origin.elapsed().as_nanos() as u64;
    let mut method = bufs.load(meta, &registry)?;
    let load = t0.elapsed();
    let init_end = origin.elapsed().as_nanos() as u64;
    let load_span = ptera::devtools::etdump::Load {
        // MethodMeta::new (with the memory checks), then Method::load.
        load_method: (0, init_end),
        init: (init_start, init_end),
    };
    method.set_step_limit(max_instructions);
    for (i, t) in tensors.iter().enumerate() {
        method.set_input(i, t.dtype, &t.shape()?, &t.bytes)?;
    }
    let plan = method.meta().plan();
    let t1 = Instant::now();
    let mut events = Vec::new();
    if etdump.is_some() {
        // The run's own event, one per instruction (loops run some again) and one per
        // delegate-region operation.
        let n = crate::host::instruction_count(plan);
        events = vec![ptera::devtools::etdump::Event::EMPTY; 1 + 4 * n + (1 << 16)];
        let mut rec = ptera::devtools::etdump::Recorder::new(plan, &mut events, || {
            origin.elapsed().as_nanos() as u64
        });
        method.execute_observed(&mut rec)?;
        if rec.dropped() > 0 {
            eprintln!(
                "etdump: {} events did not fit and are not in the file",
                rec.dropped()
            );
        }
        let len = rec.events().len();
        events.truncate(len);
    } else {
        method.execute()?;
    }
    let exec = t1.elapsed();
    if let Some(path) = etdump {
        let mut positions = vec![[0u32; 2]; events.len()];
        // Far more than the events need (each under 200 bytes with its strings).
        let mut out = vec![0u8; 4096 + 512 * events.len()];
        let n = ptera::devtools::etdump::encode_with_load(
            plan,
            Some(load_span),
            &[&events],
            &mut positions,
            &mut out,
        )
        .map_err(|_| anyhow::anyhow!("ETDump larger than its buffer"))?;
        std::fs::write(path, &out[..n])
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!(
            "etdump: {} events -> {} ({n} bytes)",
            events.len(),
            path.display()
        );
    }
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

/// Whether `model` is a BundledProgram (identifier `BP08`).
pub fn is_bundled(model: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(model)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && ptera::format::bundled::is_bundled(&head)
}

/// Runs every test case of a BundledProgram and checks its outputs; fails when one fails.
pub fn run_bundled(
    model: &Path,
    max_instructions: u64,
    atol: f64,
    rtol: f64,
    weights: Weights,
) -> Result<()> {
    use ptera::devtools::bundled::run_case;
    use ptera::format::bundled::Bundled;
    let file = load_file(model)?;
    let bundled = Bundled::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let program = Program::load(bundled.program())
        .with_context(|| format!("{}: embedded program", model.display()))?;
    let registry = registry(weights);
    let (mut passed, mut failed) = (0usize, 0usize);
    for suite in bundled.suites() {
        let meta = MethodMeta::new(&program, suite.method(), &registry)
            .with_context(|| format!("method `{}`", suite.method()))?;
        crate::host::check_memory(&meta)?;
        let mut bufs = OwnedArenas::for_meta(&meta)?;
        let mut method = bufs.load(meta, &registry)?;
        method.set_step_limit(max_instructions);
        for (i, case) in suite.cases().enumerate() {
            let o = run_case(&mut method, &case, atol, rtol)
                .with_context(|| format!("method `{}` case {i}", suite.method()))?;
            let verdict = if o.passed() { "pass" } else { "FAIL" };
            println!(
                "method `{}` case {i}: {verdict}: {} outputs, largest |diff| {:.3e} at output {} element {}, {} outside atol {atol:e} + rtol {rtol:e}",
                suite.method(),
                o.outputs,
                o.worst,
                o.worst_at.0,
                o.worst_at.1,
                o.mismatches
            );
            if o.passed() {
                passed += 1;
            } else {
                failed += 1;
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        anyhow::bail!("{failed} bundled test case(s) failed");
    }
    Ok(())
}
