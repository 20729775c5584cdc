//! ptera bare-metal firmware: boots an AArch64 board with no OS, runs method `forward` of one
//! `.pte` program held in flash (or placed in RAM by the boot loader) with `static` arenas, and
//! reports outputs, logs and timing over the console UART (see `console`).
//!
//! Boot flow: `boot::ptera_boot` (park secondary cores, drop from EL3/EL2 to EL1) →
//! aarch64-rt `entry` (MMU and caches on with the board's page table, zero .bss, stack) →
//! [`main`] (console, FP/SVE/SME access, heap for the flatbuffers verifier) → [`run`].
#![no_std]
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
// ptera::Error carries its context inline (no allocation); it only travels on failure paths.
#![allow(clippy::result_large_err)]

// Per architecture (`arch/aarch64`, `arch/arm`), under one set of names: reset path and
// exceptions (`boot`), CPU controls and counters (`cpu`), ending a run (`exit`), page tables
// (`pagetable`), the other cores (`smp`), `memcpy`/`memset` (`mem`).
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/boot.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/boot.rs")]
mod boot;
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/cpu.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/cpu.rs")]
mod cpu;
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/exit.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/exit.rs")]
mod exit;
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/mem.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/mem.rs")]
mod mem;
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/pagetable.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/pagetable.rs")]
mod pagetable;
#[cfg(not(feature = "gemm-bench"))]
#[cfg_attr(target_arch = "aarch64", path = "arch/aarch64/smp.rs")]
#[cfg_attr(target_arch = "arm", path = "arch/arm/smp.rs")]
mod smp;

mod board;
mod console;
mod drivers;
#[cfg(feature = "gemm-bench")]
mod gemm_bench;
mod mmu;
#[cfg(not(feature = "gemm-bench"))]
mod model;
#[cfg(all(feature = "etdump", not(feature = "gemm-bench")))]
mod profile;
mod stack;

use defmt::{Debug2Format, Display2Format};
#[cfg(not(feature = "gemm-bench"))]
use ptera::Registry;
#[cfg(not(feature = "gemm-bench"))]
use ptera::{DType, Method, MethodMeta, Program, Shape};

#[cfg(feature = "gemm-bench")]
use gemm_bench::run;

use crate::console::{Report, Status};

/// Pages (4 KiB) of the boot stack (384 KiB; the memory budget shows it and the deepest use:
/// an XNNPACK region's load-time tables take about 240 KiB at the 1024-value limit). The
/// architecture's `boot` reserves it and enters [`main`] on it.
const STACK_PAGES: usize = 96;

/// The `flatbuffers` crate links `alloc` (its verifier builds error traces); ptera's loading and
/// inference never allocate. This bounded heap exists only to satisfy that link and to absorb an
/// error trace when a corrupted program is rejected.
#[global_allocator]
static HEAP: embedded_alloc::LlffHeap = embedded_alloc::LlffHeap::empty();
const HEAP_BYTES: usize = 16 * 1024;

defmt::timestamp!("{=u64:us}", cpu::micros());

fn main() -> ! {
    board::init_console();
    console::hello();
    if mmu::protect().is_err() {
        console::text(format_args!(
            "page tables: the firmware's table pool (mmu.rs POOL_TABLES) is too small for this map"
        ));
        exit::exit(Status::Exception as u32);
    }
    boot::enter_core(0);
    // SAFETY: called once, before anything allocates; the macro reserves a static buffer.
    unsafe {
        embedded_alloc::init!(HEAP, HEAP_BYTES);
    }
    selftest();
    let features = cpu::enable_simd();
    let stack_mark = stack::paint_stack();
    defmt::info!(
        "{} EL{=u32} MIDR {=u64:#x} SVE VL {=u32} bits SME SVL {=u32} bits",
        board::NAME,
        features.el,
        features.midr,
        features.sve_vl_bits,
        features.sme_svl_bits
    );
    let mut report = Report {
        status: Status::Ok,
        cntfrq: cpu::cntfrq(),
        load_ticks: 0,
        execute_ticks: 0,
        features,
        heap_used: 0,
        stack_used: 0,
        isa: "",
        cores: 1,
    };
    match run(&mut report) {
        Ok(()) => defmt::info!("forward done in {=u64} ticks", report.execute_ticks),
        Err((stage, e)) => {
            defmt::error!(
                "{=str} failed: {} ({})",
                stage,
                Display2Format(&e),
                Debug2Format(&e)
            );
            report.status = Status::EngineError;
        }
    }
    // The GEMM micro-kernel the engine dispatched to on this core (ID registers + CPACR_EL1).
    #[cfg(target_arch = "aarch64")]
    {
        report.isa = ptera::linalg::gemm::select::selected().name();
    }
    #[cfg(target_arch = "arm")]
    {
        report.isa = ptera::linalg::gemm::select::micro_kernel().name();
    }
    report.heap_used = HEAP.used() as u32;
    report.stack_used = stack::stack_used(stack_mark) as u32;
    console::done(&report);
    crate::exit::exit(report.status as u32)
}

/// Self-tests of the failure paths, one per build feature (xtask `qemu --selftest KIND`): the
/// panic report, and the faults the page tables (`mmu`) must turn into reports: a stack
/// overflow into the guard page, a write to the program image, a jump into the arenas, a write
/// to RAM outside every region.
fn selftest() {
    #[cfg(feature = "selftest-panic")]
    panic!("self-test: panic requested at build time (feature selftest-panic)");
    #[cfg(feature = "selftest-stack-overflow")]
    {
        /// Recurses with a 1 KiB frame until the stack runs out.
        #[inline(never)]
        fn deeper(depth: u64) -> u64 {
            let frame = core::hint::black_box([depth as u8; 1024]);
            if core::hint::black_box(depth) == u64::MAX {
                return 0;
            }
            deeper(depth + 1) + u64::from(frame[1023])
        }
        core::hint::black_box(deeper(0));
    }
    #[cfg(all(feature = "selftest-write-image", not(feature = "gemm-bench")))]
    {
        let program = model::program_bytes().as_ptr().cast_mut();
        // SAFETY: deliberately invalid (a write to the read-only program): the page tables must
        // turn it into a permission fault, reported before anything reads the byte.
        unsafe { core::ptr::write_volatile(program, 0) };
    }
    #[cfg(all(feature = "selftest-exec-arena", not(feature = "gemm-bench")))]
    {
        let (begin, _, _) = model::memory_ranges()[0];
        // SAFETY: deliberately invalid (a jump into the arenas, which hold zeros): the page
        // tables mark them not executable, so the fetch faults before any instruction runs.
        let f: extern "C" fn() = unsafe { core::mem::transmute(begin) };
        f();
    }
    #[cfg(feature = "selftest-write-outside")]
    {
        extern "C" {
            static image_end: u8;
        }
        // SAFETY: only the address of the linker symbol is taken.
        let end = unsafe { &raw const image_end } as usize;
        // SAFETY: deliberately invalid (RAM past the image, in no region): unmapped, so the
        // write faults.
        unsafe { core::ptr::write_volatile((end + (1 << 20)) as *mut u64, 0) };
    }
}

type StageError = (&'static str, ptera::Error);

#[cfg(not(feature = "gemm-bench"))]
fn stage<T>(name: &'static str, r: Result<T, ptera::Error>) -> Result<T, StageError> {
    r.map_err(|e| (name, e))
}

/// Loads the program from flash, loads `forward` into the static arenas, sets the bundled inputs,
/// executes once and sends every output to the host.
#[cfg(not(feature = "gemm-bench"))]
fn run(report: &mut Report) -> Result<(), StageError> {
    if model::BUNDLED {
        return run_bundled(report);
    }
    let t0 = cpu::cntvct();
    let program = stage("Program::load", Program::load(model::program_bytes()))?;
    let registry = Registry::standard();
    let t_meta = cpu::cntvct();
    let meta = stage(
        "MethodMeta::new",
        MethodMeta::new(&program, model::METHOD, &registry),
    )?;
    let (arenas, metadata) = model::take_memory();
    // The secondary cores start before the method loads: loading with the team installed
    // decides the products' splits for it once (`gemm::SplitHint`) instead of on every run.
    let team = smp::start();
    let t_init = cpu::cntvct();
    let load = || Method::load(meta, &registry, arenas, metadata);
    let loaded = match team {
        Some((team, _)) => ptera::parallel::scoped(team, load),
        None => load(),
    };
    let mut method = stage("Method::load", loaded)?;
    let t_loaded = cpu::cntvct();
    for (i, input) in model::INPUTS.iter().enumerate() {
        let dtype = DType::from_scalar_type(input.dtype as i8).ok_or((
            "set_input",
            ptera::Error::UnsupportedDType {
                value: i,
                code: input.dtype as i8,
            },
        ))?;
        let shape = Shape::new(input.dims).ok_or((
            "set_input",
            ptera::Error::Invalid {
                what: "input",
                index: i,
                detail: "rank above the engine's limit",
            },
        ))?;
        stage(
            "set_input",
            method.set_input(i, dtype, &shape, model::input_bytes(input)),
        )?;
    }
    if let Some((_, cores)) = team {
        report.cores = cores as u32;
        defmt::info!("{=usize} cores online", cores);
    }
    let t1 = cpu::cntvct();
    ptera_mark_forward_begin();
    let done = match team {
        Some((team, _)) => ptera::parallel::scoped(team, || forward(&mut method)),
        None => forward(&mut method),
    };
    ptera_mark_forward_end();
    let t2 = cpu::cntvct();
    stage("execute", done)?;
    report.load_ticks = t1 - t0;
    report.execute_ticks = t2 - t1;
    for i in 0..method.num_outputs() {
        let out = stage("output", method.output(i))?;
        console::tensor(i as u32, out.dtype() as u8, out.dims(), out.bytes());
    }
    #[cfg(feature = "etdump")]
    {
        let frq = cpu::cntfrq();
        let ns = |t| profile::ticks_ns(t, frq);
        let load = ptera::devtools::etdump::Load {
            load_method: (ns(t_meta), ns(t_loaded)),
            init: (ns(t_init), ns(t_loaded)),
        };
        profile::send(&method, load);
    }
    #[cfg(not(feature = "etdump"))]
    let _ = (t_meta, t_init, t_loaded);
    Ok(())
}

/// A BundledProgram: every test case of every suite (inputs set, one execute, each output
/// compared with the expected one, `|got - want| <= ATOL + RTOL * |want|`), a CASE packet per
/// case; status `TestFailed` when any fails. Each suite's method loads into the same static
/// memory (sized by xtask for the largest).
#[cfg(not(feature = "gemm-bench"))]
fn run_bundled(report: &mut Report) -> Result<(), StageError> {
    use ptera::devtools::bundled::run_case;
    use ptera::format::bundled::Bundled;
    let t0 = cpu::cntvct();
    let bundled = stage("Bundled::load", Bundled::load(model::program_bytes()))?;
    let program = stage("Program::load", Program::load(bundled.program()))?;
    let registry = Registry::standard();
    let (mut arenas, metadata) = model::take_memory();
    let t1 = cpu::cntvct();
    let mut failed = 0usize;
    for suite in bundled.suites() {
        let meta = stage(
            "MethodMeta::new",
            MethodMeta::new(&program, suite.method(), &registry),
        )?;
        let mut method = stage(
            "Method::load",
            Method::load(
                meta,
                &registry,
                arenas.iter_mut().map(|a| &mut **a),
                &mut *metadata,
            ),
        )?;
        for (i, case) in suite.cases().enumerate() {
            let outcome = stage(
                "test case",
                run_case(&mut method, &case, model::ATOL, model::RTOL),
            )?;
            if !outcome.passed() {
                failed += 1;
                defmt::error!(
                    "method {=str} case {=usize}: {=usize} elements outside the tolerance, largest |diff| {=f64}",
                    suite.method(),
                    i,
                    outcome.mismatches,
                    outcome.worst
                );
            }
            console::case(suite.method(), i as u32, &outcome);
        }
    }
    let t2 = cpu::cntvct();
    report.load_ticks = t1 - t0;
    report.execute_ticks = t2 - t1;
    if failed > 0 {
        report.status = Status::TestFailed;
    }
    Ok(())
}

/// Marks around the measured forward (core 0), found by symbol in an execution trace
/// (`cargo xtask qemu --icount --smp N`); distinct bodies, so never folded into one address.
#[cfg(not(feature = "gemm-bench"))]
#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_begin() {
    core::hint::black_box(0x4245_4749_u32); // "BEGI"
}

#[cfg(not(feature = "gemm-bench"))]
#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_end() {
    core::hint::black_box(0x454e_4421_u32); // "END!"
}

/// One forward: recorded into an ETDump with feature `etdump`, else a plain execute.
#[cfg(not(feature = "gemm-bench"))]
fn forward(method: &mut Method<'_, '_>) -> Result<(), ptera::Error> {
    #[cfg(feature = "etdump")]
    return profile::execute(method);
    #[cfg(not(feature = "etdump"))]
    method.execute()
}
