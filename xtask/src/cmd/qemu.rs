//! `cargo xtask qemu`: builds the firmware for one model and board and runs it under
//! `qemu-system-aarch64`, writing the outputs and printing the memory budget and counts.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::baremetal::*;

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
    /// Deterministic run: `-icount shift=0,sleep=off`, one counter tick per instruction. With
    /// `--smp N` (N > 1) also each core's instructions and the critical path of the forward,
    /// from QEMU's execution trace (slower).
    #[arg(long)]
    pub icount: bool,
    /// Cores the firmware starts and the forward uses (QEMU `-smp`); outputs are
    /// bit-identical to one core.
    #[arg(long, default_value_t = 1)]
    pub smp: usize,
    /// Record the forward into an ETDump (ExecuTorch's format) written to this file: one event
    /// per executed instruction and per delegate-region operation, in nanoseconds of the
    /// generic timer (with `--icount`: exact instruction counts).
    #[arg(long, value_name = "FILE")]
    pub etdump: Option<PathBuf>,
    /// For a BundledProgram (.bpte): absolute tolerance of the check the firmware makes.
    #[arg(long, default_value_t = 1e-4)]
    pub atol: f64,
    /// For a BundledProgram (.bpte): relative tolerance of the check the firmware makes.
    #[arg(long, default_value_t = 1e-4)]
    pub rtol: f64,
    /// Print a JSON object as the last line (counts, cores, outputs).
    #[arg(long)]
    pub json: bool,
    /// With `--icount`: count per core from QEMU's trace also with one core (to compare a
    /// one-core profile with `--serial-top`).
    #[arg(long)]
    pub trace_cores: bool,
    /// With a traced count: the N functions where core 0 spends most instructions outside
    /// parallel steps (what limits the speed-up).
    #[arg(long, default_value_t = 0)]
    pub serial_top: usize,
    /// With `--serial-top`: the functions of this call only (its number in the by-call list).
    #[arg(long)]
    pub serial_call: Option<usize>,
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
    /// Testing: build a failure-path self-test into the firmware (it panics or faults right
    /// after boot).
    #[arg(long, hide = true, value_enum)]
    pub selftest: Option<crate::baremetal::SelfTest>,
    /// Testing: build every arena this many bytes smaller than the program needs.
    #[arg(long, hide = true)]
    pub shrink_arenas: Option<u64>,
}

pub fn qemu(args: QemuArgs) -> Result<()> {
    let board = Board::by_name(&args.board)?;
    ensure!(args.smp >= 1, "--smp must be at least 1");
    if args.smp > 1 {
        ensure!(
            board.smp != Smp::None,
            "{} runs on one core for now (--smp {} needs a board whose secondary cores the firmware can start: qemu-virt, raspi3b, raspi4b, imx8mp-evk)",
            board.name,
            args.smp
        );
        ensure!(
            args.smp <= board.cores,
            "{} has {} cores; --smp {} asks for more",
            board.name,
            board.cores,
            args.smp
        );
        ensure!(
            args.machine_opts.is_none(),
            "--smp with --machine-opts is not supported (QEMU then changes the PSCI conduit)"
        );
    }
    let cpu = board.cpu(args.cpu.as_deref())?;
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| root().join("tests/fixtures/gpt2_portable.pte"));
    let job = prepare_any(&model, &args.inputs)?;
    ensure!(
        job.bundled_cases.is_none() || args.etdump.is_none(),
        "--etdump records a forward; a BundledProgram runs test cases (run its program instead)"
    );
    {
        // The guest picks its own kernels; say what the program was packed for.
        let file = crate::host::load_file(&model)?;
        if let Ok(p) = ptera::Program::load(file.as_slice()) {
            if let Some(note) = crate::host::lowered_target(&p) {
                println!("{note}");
            }
        }
    }
    let link_model = !(args.load_model || args.blob.is_some());
    precheck(&job, board, link_model)?;
    let dir = run_dir()?;
    let elf_path = dir.join("firmware.elf");
    let opts = BuildOptions {
        board,
        link_model,
        semihosting: true,
        shrink_arenas: args.shrink_arenas.unwrap_or(0),
        selftest: args.selftest,
        cores: args.smp,
        tolerance: (args.atol, args.rtol),
        etdump: match &args.etdump {
            Some(_) => Some(etdump_size(&job).context("sizing the ETDump (host run)")?),
            None => None,
        },
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
    let mut cmd = Command::new(board.qemu_binary());
    cmd.args(board.qemu_args(cpu.as_deref(), args.machine_opts.as_deref()))
        .args([
            "-display",
            "none",
            "-monitor",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
        ]);
    for _ in 0..board.qemu_serial {
        cmd.args(["-serial", "null"]);
    }
    cmd.arg("-serial").arg(format!("file:{}", uart.display()));
    // PSCI boards (QEMU virt, the i.MX 8M Plus) get exactly the cores asked for; the Pi
    // machines always have their four, and the image uses the first N.
    if args.smp > 1 && matches!(board.smp, Smp::Psci { .. }) {
        cmd.arg("-smp").arg(args.smp.to_string());
    }
    if args.icount {
        cmd.args(["-icount", "shift=0,sleep=off"]);
    }
    let trace = args.icount && (args.smp > 1 || args.trace_cores);
    let fifo = dir.join("trace.fifo");
    if trace {
        let _ = fs::remove_file(&fifo);
        ensure!(
            Command::new("mkfifo").arg(&fifo).status()?.success(),
            "mkfifo {} failed",
            fifo.display()
        );
        cmd.args(["-d", "in_asm,exec,nochain", "-D"]).arg(&fifo);
        if !args.json {
            eprintln!("counting each core's instructions from QEMU's execution trace (slower)");
        }
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
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "cannot start {} (run scripts/setup-qemu.sh)",
            board.qemu_binary()
        )
    })?;
    let marks = if trace {
        Marks::from_elf(&fs::read(&elf_path)?)?
    } else {
        Marks::default()
    };
    let serial_call = args.serial_call;
    let reader = trace.then(|| {
        let fifo = fifo.clone();
        std::thread::spawn(move || -> Result<CoreCounter> {
            let f = fs::File::open(&fifo).context("open the trace FIFO")?;
            let mut counter = CoreCounter::new(marks).only_call(serial_call);
            counter.read_all(f)?;
            Ok(counter)
        })
    });
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
    let counter = match reader {
        Some(h) => Some(
            h.join()
                .map_err(|_| anyhow::anyhow!("the trace reader panicked"))??,
        ),
        None => None,
    };
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
    let failed_cases = run.cases.iter().filter(|c| !c.passed()).count();
    if job.bundled_cases.is_some() {
        for c in &run.cases {
            println!(
                "method `{}` case {}: {}: {} outputs, largest |diff| {:.3e} at output {} element {}, {} outside atol {:e} + rtol {:e}",
                c.method,
                c.index,
                if c.passed() { "pass" } else { "FAIL" },
                c.outputs,
                c.worst,
                c.worst_output,
                c.worst_element,
                c.mismatches,
                args.atol,
                args.rtol
            );
        }
        println!(
            "{} passed, {failed_cases} failed on {}",
            run.cases.len() - failed_cases,
            board.name
        );
    }
    let Some(report) = report else {
        bail!(
            "the firmware stopped without a report (QEMU {status}); console: {} [run files in {}]",
            run.summary(),
            dir.display()
        );
    };
    if let Some(n) = job.bundled_cases {
        ensure!(
            failed_cases == 0 && report.status != 2,
            "{failed_cases} bundled test case(s) failed on {}",
            board.name
        );
        ensure!(
            run.cases.len() == n || report.status != 0,
            "the firmware reported {} of the {n} test cases",
            run.cases.len()
        );
    }
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
            "warning: the run used {} of {} stack bytes; an overflow faults at the guard page (raise STACK_PAGES in boards/firmware/src/main.rs)",
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
    let core = match board.arch {
        crate::baremetal::boards::Arch::Aarch64 => format!(
            "EL{} MIDR {:#x}, SVE VL {} bits, SME SVL {} bits",
            report.el, report.midr, report.sve_vl_bits, report.sme_svl_bits
        ),
        crate::baremetal::boards::Arch::Armv7 => {
            format!("AArch32 PL{} MIDR {:#x}", report.el, report.midr)
        }
    };
    println!(
        "{} on {}{}: {core}, GEMM kernel {}",
        job.model.display(),
        board.name,
        cpu.as_deref()
            .map(|c| format!(" -cpu {c}"))
            .unwrap_or_default(),
        report.isa
    );
    println!("cores: {} ran the forward", report.cores);
    if let Some(path) = &args.etdump {
        let Some(file) = &run.etdump else {
            bail!("the firmware sent no ETDump: {}", run.summary());
        };
        let events = ptera::format::etdump_fb::size_prefixed_root_as_etdump(file)
            .ok()
            .and_then(|d| d.run_data())
            .map_or(0, |r| {
                r.iter().map(|r| r.events().map_or(0, |e| e.len())).sum()
            });
        fs::write(path, file).with_context(|| format!("cannot write {}", path.display()))?;
        println!(
            "etdump: {events} events -> {} ({} bytes)",
            path.display(),
            file.len()
        );
    }
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
    ensure!(
        report.cores as usize == args.smp,
        "the firmware ran on {} core(s), {} asked for",
        report.cores,
        args.smp
    );
    // shift=0: one instruction per nanosecond of virtual time.
    let insns = |ticks: u64| (u128::from(ticks) * 1_000_000_000 / u128::from(freq)) as u64;
    let mut per_core: Option<CoreCounts> = None;
    if args.icount {
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
        per_core = Some(match counter {
            Some(c) => c.finish(args.smp)?,
            // One core: the machine's count is the core's.
            None => CoreCounts {
                per_core: vec![insns(report.execute_ticks)],
                critical_path: insns(report.execute_ticks),
                steps: 0,
                serial_by_pc: Default::default(),
                step_by_pc: Default::default(),
                by_call: Vec::new(),
                call_steps: Vec::new(),
            },
        });
    }
    if let Some(c) = &per_core {
        if args.smp > 1 || args.trace_cores {
            let one = c.per_core.iter().sum::<u64>();
            println!(
                "forward on {} cores: instructions per core {:?} (sum {one}); critical path {} ({} parallel steps)",
                args.smp, c.per_core, c.critical_path, c.steps
            );
            if args.serial_top > 0 {
                let syms = crate::baremetal::elf::functions(&elf_bytes)?;
                let serial: u64 = c.serial_by_pc.values().sum();
                match args.serial_call {
                    Some(k) => println!(
                        "core 0 outside parallel steps, call #{k}: {serial} instructions; by function:"
                    ),
                    None => println!(
                        "core 0 outside parallel steps: {serial} instructions; by function:"
                    ),
                }
                for (name, n) in c.serial_by_function(&syms).iter().take(args.serial_top) {
                    let share = *n as f64 * 100.0 / serial.max(1) as f64;
                    println!("  {n:>10}  {share:5.1} %  {name}");
                }
                let in_steps: u64 = c.step_by_pc.values().sum();
                if in_steps > 0 {
                    println!(
                        "core 1 inside parallel steps{}: {in_steps} instructions; by function:",
                        args.serial_call
                            .map_or(String::new(), |k| format!(", call #{k}"))
                    );
                    for (name, n) in c.step_by_function(&syms).iter().take(args.serial_top) {
                        let share = *n as f64 * 100.0 / in_steps as f64;
                        println!("  {n:>10}  {share:5.1} %  {name}");
                    }
                }
                if let Some(k) = args.serial_call {
                    let mut blocks: Vec<(u64, u64)> =
                        c.serial_by_pc.iter().map(|(&pc, &n)| (pc, n)).collect();
                    blocks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    println!("call #{k}: its busiest serial blocks (start address, instructions):");
                    for (pc, n) in blocks.iter().take(args.serial_top) {
                        println!("  {pc:#x} {n:>8}  {}", CoreCounts::function_at(&syms, *pc));
                    }
                    println!("call #{k}: its parallel steps, each core's instructions, and what split them:");
                    for (i, st) in c.call_steps.iter().enumerate() {
                        // The newest serial function before the fork outside the team's own.
                        let from = st
                            .before
                            .iter()
                            .rev()
                            .map(|&pc| CoreCounts::function_at(&syms, pc))
                            .find(|f| !f.contains("parallel") && !f.contains("ptera_team"))
                            .unwrap_or("?");
                        println!("  step {i:<3} {:?}  {from}", st.per_core);
                    }
                }
                if !c.by_call.is_empty() {
                    // What each call is (a program the host cannot load gets no labels).
                    let labels = crate::cmd::profile::call_labels(&model).unwrap_or_default();
                    let label = |k: usize| match k {
                        0 => "before the first call".to_string(),
                        k => labels.get(k - 1).cloned().unwrap_or_default(),
                    };
                    let mut calls: Vec<(usize, &CallCount)> =
                        c.by_call.iter().enumerate().collect();
                    let list = |calls: &[(usize, &CallCount)]| {
                        for (k, n) in calls.iter().take(args.serial_top) {
                            println!(
                                "  call #{k:<4} {:>10} {:>10} {:>10} {:>4}  {}",
                                n.serial,
                                n.in_steps,
                                n.in_steps_all,
                                n.steps,
                                label(*k)
                            );
                        }
                    };
                    calls.sort_by(|a, b| b.1.serial.cmp(&a.1.serial).then(a.0.cmp(&b.0)));
                    println!(
                        "by call (the forward's k-th dispatched kernel or delegate call; copies elided at load are not calls; #0 is before the first): serial, in parallel steps (critical, all cores), steps"
                    );
                    list(&calls);
                    calls.sort_by(|a, b| {
                        let waste = |c: &CallCount| {
                            (c.in_steps * args.smp as u64).saturating_sub(c.in_steps_all)
                        };
                        waste(b.1).cmp(&waste(a.1)).then(a.0.cmp(&b.0))
                    });
                    println!("by call, the most uneven parallel steps (critical × cores − all cores' instructions):");
                    list(&calls);
                }
            }
        }
    }
    if args.json {
        let outputs: Vec<serde_json::Value> = run
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                serde_json::json!({
                    "path": args.output_dir.join(format!("output-{i}.npy")).display().to_string(),
                    "dtype": t.dtype.to_string(),
                    "shape": t.shape,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "model": job.model.display().to_string(),
                "board": board.name,
                "cpu": cpu,
                "cores": report.cores,
                "isa": report.isa,
                "icount": args.icount,
                "load_instructions": args.icount.then(|| insns(report.load_ticks)),
                "forward_instructions": args.icount.then(|| insns(report.execute_ticks)),
                "instructions_per_core": per_core.as_ref().map(|c| c.per_core.clone()),
                "critical_path": per_core.as_ref().map(|c| c.critical_path),
                "parallel_steps": per_core.as_ref().map(|c| c.steps),
                "outputs": outputs,
            })
        );
    }
    let _ = fs::remove_dir_all(&dir);
    Ok(())
}
