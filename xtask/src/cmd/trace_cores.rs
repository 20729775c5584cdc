//! `cargo xtask trace-cores PROGRAM TRACE`: each thread's executed instructions and the
//! critical path of one forward of a Linux program run with several threads under qemu-user
//! (`-d in_asm,exec,nochain -D TRACE`), as `cargo xtask qemu --icount --smp N` counts each core
//! of the bare-metal firmware.
//!
//! The program (`benches/gemm-count`'s `ptera-run` with `PTERA_THREADS=N`) brackets the
//! counted forward with `ptera_mark_forward_begin`/`_end` on thread 0, and the engine's thread
//! team calls `ptera_team_fork`/`_join` around every split job; their addresses come from the
//! program's symbol table. Threads are the trace's CPUs (thread 0 = CPU 0). A thread waiting
//! for work sleeps in the kernel and executes nothing, so its count is its share of the work.
//! `TRACE` may be a FIFO, read as QEMU writes it.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::baremetal::{CoreCounter, Marks};

pub fn trace_cores(program: &Path, trace: &Path, threads: usize, json: bool) -> Result<()> {
    let elf = fs::read(program).with_context(|| format!("cannot read {}", program.display()))?;
    let marks = Marks::from_elf(&elf).with_context(|| format!("{}", program.display()))?;
    let f = fs::File::open(trace).with_context(|| format!("cannot open {}", trace.display()))?;
    let mut counter = CoreCounter::for_user_threads(marks);
    counter.read_all(f)?;
    let c = counter.finish(threads.max(1))?;
    let sum: u64 = c.per_core.iter().sum();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "instructions_per_thread": c.per_core,
                "critical_path": c.critical_path,
                "parallel_steps": c.steps,
                "sum": sum,
            })
        );
    } else {
        println!(
            "forward on {} threads: instructions per thread {:?} (sum {sum}); critical path {} \
             ({} parallel steps)",
            c.per_core.len(),
            c.per_core,
            c.critical_path,
            c.steps
        );
    }
    Ok(())
}
