//! Programs generated from the fuzzer's bytes (`ptera_fuzz::structured`), run through the
//! whole path. With `PTERA_FUZZ_STATS=1` it prints, at every power of two from 1024 runs, the
//! share of generated programs that reached `execute` and that executed without error. With
//! `PTERA_FUZZ_DUMP=FILE` it writes each generated program to FILE before running it (to turn
//! a finding into an `execute` regression input).
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use ptera_fuzz::harness::{self, Stage};

static RUNS: AtomicU64 = AtomicU64::new(0);
static BUILT: AtomicU64 = AtomicU64::new(0);
static REACHED: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

fuzz_target!(|data: &[u8]| {
    let runs = RUNS.fetch_add(1, Relaxed) + 1;
    if let Ok(program) = ptera_fuzz::structured::program(&mut Unstructured::new(data)) {
        BUILT.fetch_add(1, Relaxed);
        if let Some(path) = std::env::var_os("PTERA_FUZZ_DUMP") {
            let _ = std::fs::write(path, &program);
        }
        let (stage, result) = harness::execute(&program);
        if stage >= Stage::Execute {
            REACHED.fetch_add(1, Relaxed);
        }
        if result.is_ok() {
            DONE.fetch_add(1, Relaxed);
        }
    }
    if runs >= 1024 && runs.is_power_of_two() && std::env::var_os("PTERA_FUZZ_STATS").is_some() {
        let (b, r, d) = (
            BUILT.load(Relaxed),
            REACHED.load(Relaxed),
            DONE.load(Relaxed),
        );
        let pct = |x: u64| 100.0 * x as f64 / runs as f64;
        eprintln!(
            "structured: {runs} inputs, {b} built ({:.1}%), {r} reached execute ({:.1}%), \
             {d} executed without error ({:.1}%)",
            pct(b),
            pct(r),
            pct(d)
        );
    }
});
