//! Bare-metal acceptance: the firmware built by `cargo xtask qemu` runs the fixtures under
//! qemu-system-aarch64 on every board and matches ExecuTorch; broken set-ups fail loudly with the
//! engine's typed error; `deploy` writes boot files.
//!
//! These need qemu-system-aarch64 (scripts/setup-qemu.sh) and build firmware, so they are
//! `#[ignore]`d in the plain workspace test run; scripts/test-baremetal.sh runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

fn out_dir(name: &str) -> PathBuf {
    let d = root().join("target/firmware/test-out").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(root())
        .env_remove("DEFMT_LOG")
        .output()
        .expect("run xtask")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `case` bare-metal and compares every output with ExecuTorch's (1e-4 abs + 1e-4 rel).
fn run_case(case: &str, board: &str, extra: &[&str]) -> String {
    run_file(&fixture(&format!("{case}.pte")), case, board, extra)
}

/// Runs the program `pte` with the inputs of fixture `case` and compares its outputs with
/// that fixture's references.
fn run_file(pte: &Path, case: &str, board: &str, extra: &[&str]) -> String {
    let stem = pte.file_stem().unwrap().to_str().unwrap();
    let out = out_dir(&format!(
        "{stem}-{board}-{}",
        extra.join("").replace('-', "")
    ));
    let in_args: Vec<String> = (0..)
        .map(|k| fixture(&format!("{case}.in{k}.npy")))
        .take_while(|p| p.is_file())
        .flat_map(|p| ["--input".to_string(), p.to_str().unwrap().to_string()])
        .collect();
    let mut args = vec![
        "qemu",
        pte.to_str().unwrap(),
        "--board",
        board,
        "--output-dir",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(in_args.iter().map(|s| s.as_str()));
    let o = xtask(&args);
    let log = text(&o);
    assert!(
        o.status.success(),
        "{case} on {board} {extra:?} failed:\n{log}"
    );
    // Loading and inference never allocate: the verifier-only heap stays empty.
    assert!(
        log.contains("; heap in use 0 B;"),
        "{case} on {board}: {log}"
    );
    let mut k = 0;
    while fixture(&format!("{case}.out{k}.npy")).is_file() {
        let got = out.join(format!("output-{k}.npy"));
        assert!(got.is_file(), "{case} on {board}: no output-{k}.npy\n{log}");
        let want = fixture(&format!("{case}.out{k}.npy"));
        let c = xtask(&[
            "compare",
            got.to_str().unwrap(),
            want.to_str().unwrap(),
            "--atol",
            "1e-4",
            "--rtol",
            "1e-4",
        ]);
        assert!(
            c.status.success(),
            "{case} on {board} output {k}:\n{}",
            text(&c)
        );
        k += 1;
    }
    assert!(k > 0, "{case}: no reference outputs");
    assert!(
        !out.join(format!("output-{k}.npy")).exists(),
        "{case}: more outputs than ExecuTorch's"
    );
    log
}

macro_rules! virt_fixture_tests {
    ($($name:ident => $case:literal),* $(,)?) => {
        $(
            #[test]
            #[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
            fn $name() {
                run_case($case, "qemu-virt", &[]);
            }
        )*
        /// Every fixture of the list, for the boards that run them all in one test.
        const FIXTURES: &[&str] = &[$($case),*];
    };
}

virt_fixture_tests! {
    virt_gpt2_portable => "gpt2_portable",
    virt_gpt2_xnnpack => "gpt2_xnnpack",
    virt_gpt2b_portable => "gpt2b_portable",
    virt_gpt2b_xnnpack => "gpt2b_xnnpack",
    virt_opt_portable => "opt_portable",
    virt_opt_xnnpack => "opt_xnnpack",
    virt_optb_portable => "optb_portable",
    virt_optb_xnnpack => "optb_xnnpack",
    virt_mlp_portable => "mlp_portable",
    virt_mlp_xnnpack => "mlp_xnnpack",
    virt_cnn_portable => "cnn_portable",
    virt_cnn_xnnpack => "cnn_xnnpack",
    virt_mbv2_portable => "mbv2_portable",
    virt_mbv2_xnnpack => "mbv2_xnnpack",
    virt_mbv2v_portable => "mbv2v_portable",
    virt_mbv2v_xnnpack => "mbv2v_xnnpack",
    virt_unet_portable => "unet_portable",
    virt_unet_xnnpack => "unet_xnnpack",
    virt_unetv_portable => "unetv_portable",
    virt_unetv_xnnpack => "unetv_xnnpack",
    virt_vit_portable => "vit_portable",
    virt_vit_xnnpack => "vit_xnnpack",
    virt_vitv_portable => "vitv_portable",
    virt_vitv_xnnpack => "vitv_xnnpack",
    virt_llama_portable => "llama_portable",
    virt_llama_xnnpack => "llama_xnnpack",
    virt_llamav_portable => "llamav_portable",
    virt_llamav_xnnpack => "llamav_xnnpack",
    virt_bert_portable => "bert_portable",
    virt_bert_xnnpack => "bert_xnnpack",
    virt_bertv_portable => "bertv_portable",
    virt_bertv_xnnpack => "bertv_xnnpack",
    virt_gpt2t64_portable => "gpt2t64_portable",
    virt_gpt2t64_xnnpack => "gpt2t64_xnnpack",
    virt_gpt2t128_portable => "gpt2t128_portable",
    virt_gpt2t128_xnnpack => "gpt2t128_xnnpack",
    virt_gpt2t256_portable => "gpt2t256_portable",
    virt_gpt2t256_xnnpack => "gpt2t256_xnnpack",
    virt_optt64_portable => "optt64_portable",
    virt_optt64_xnnpack => "optt64_xnnpack",
    virt_optt128_portable => "optt128_portable",
    virt_optt128_xnnpack => "optt128_xnnpack",
    virt_optt256_portable => "optt256_portable",
    virt_optt256_xnnpack => "optt256_xnnpack",
    virt_mlp_qd8 => "mlp_qd8",
    virt_mlp_8da4w => "mlp_8da4w",
    virt_opt_qd8 => "opt_qd8",
    virt_opt_8da4w => "opt_8da4w",
    virt_gpt2_qd8 => "gpt2_qd8",
    virt_gpt2_8da4w => "gpt2_8da4w",
    virt_llama_qd8 => "llama_qd8",
    virt_llama_8da4w => "llama_8da4w",
    virt_mlp_qs8p => "mlp_qs8p",
    virt_mlp_qs8 => "mlp_qs8",
    virt_cnn_qs8 => "cnn_qs8",
    virt_cnn_qs8p => "cnn_qs8p",
    virt_mlp_qd8p => "mlp_qd8p",
    virt_gpt2w_8da4w => "gpt2w_8da4w",
}

/// Every fixture on a 32-bit QEMU `virt` board (`armv7a-none-eabihf` firmware under
/// qemu-system-arm) against ExecuTorch's outputs; all are run, the failures listed at the end.
fn arm32_every_fixture(board: &str, core: &str, kernel: &str) {
    let mut failed = Vec::new();
    for case in FIXTURES {
        match std::panic::catch_unwind(|| run_case(case, board, &[])) {
            Ok(log) => assert!(
                log.contains(&format!("on {board} -cpu {core}: AArch32 PL1 MIDR 0x41"))
                    && log.contains(&format!("GEMM kernel {kernel}")),
                "{case} on {board}: {log}"
            ),
            Err(_) => failed.push(*case),
        }
    }
    assert!(
        failed.is_empty(),
        "on {board} these differ or fail: {failed:?}"
    );
}

#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn virt_a15_runs_every_fixture() {
    arm32_every_fixture("qemu-virt-a15", "cortex-a15", "neon-vfpv4-4x12");
}

#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn virt_a7_runs_every_fixture() {
    arm32_every_fixture("qemu-virt-a7", "cortex-a7", "neon-vfpv4-4x12");
}

/// The MLP and GPT-2 fixtures on a 32-bit board with a fixed core, against ExecuTorch.
fn arm32_board_test(board: &str, midr: &str, kernel: &str) {
    for case in ["mlp_portable", "gpt2_portable"] {
        let log = run_case(case, board, &[]);
        assert!(
            log.contains(&format!(
                "on {board}: AArch32 PL1 MIDR {midr}, GEMM kernel {kernel}"
            )),
            "{log}"
        );
    }
}

#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn raspi2b_runs_mlp_and_gpt2() {
    arm32_board_test("raspi2b", "0x410fc075", "neon-vfpv4-4x12");
}

#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn mcimx6ul_evk_runs_mlp_and_gpt2() {
    arm32_board_test("mcimx6ul-evk", "0x410fc075", "neon-vfpv4-4x12");
}

#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn orangepi_pc_runs_mlp_and_gpt2() {
    arm32_board_test("orangepi-pc", "0x410fc075", "neon-vfpv4-4x12");
}

/// A Cortex-A9 has Neon but no fused multiply-add (MVFR1): the portable kernel runs.
#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn sabrelite_runs_mlp_and_gpt2() {
    arm32_board_test("sabrelite", "0x410fc090", "portable");
}

/// The last line of a `--json` run.
fn last_json(log: &str) -> serde_json::Value {
    let line = log
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line:\n{log}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// A forward on 2 and 4 cores (secondary cores started by PSCI, work split by the engine's
/// spin team) gives the same output bytes as on one core, and matches ExecuTorch.
#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn virt_multicore_outputs_are_bit_identical() {
    for case in [
        "gpt2_xnnpack",
        "gpt2_portable",
        "opt_xnnpack",
        "llama_xnnpack",
        "mbv2_xnnpack",
        "bert_portable",
        "gpt2_8da4w",
        // Its GELU region runs in chunks of rows, each split across the cores.
        "gpt2w_8da4w",
    ] {
        // run_file's output directory for these arguments.
        let output = |tag: &str| {
            let p = root()
                .join("target/firmware/test-out")
                .join(format!("{case}-qemu-virt-{tag}"))
                .join("output-0.npy");
            std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        run_case(case, "qemu-virt", &[]);
        let one = output("");
        for smp in ["2", "4"] {
            let log = run_case(case, "qemu-virt", &["--smp", smp]);
            assert!(log.contains(&format!("cores: {smp} ran")), "{case}: {log}");
            // The budget shows the other cores' static stacks and scratch.
            assert!(log.contains("other cores' stacks"), "{case}: {log}");
            assert!(
                output(&format!("smp{smp}")) == one,
                "{case}: output on {smp} cores differs from one core"
            );
        }
    }
}

/// `--smp N --icount --json` reports each core's instructions and the critical path (core 0's
/// serial work and each parallel step's longest part); on 4 cores the critical path of the
/// GPT-2 fixture is well below its one-core count, every core worked, and the counts repeat
/// exactly.
#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn virt_multicore_counts_per_core() {
    let run = |smp: &str| {
        last_json(&run_case(
            "gpt2_xnnpack",
            "qemu-virt",
            &["--cpu", "cortex-a76", "--icount", "--json", "--smp", smp],
        ))
    };
    let one = run("1");
    assert_eq!(one["cores"], 1);
    let single = one["critical_path"].as_u64().unwrap();
    assert_eq!(one["instructions_per_core"], serde_json::json!([single]));
    assert_eq!(one["forward_instructions"].as_u64(), Some(single));
    let four = run("4");
    let per: Vec<u64> = four["instructions_per_core"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), 4, "{four}");
    assert!(per.iter().all(|&n| n > 10_000), "{four}");
    // Core 0's serial work plus, per parallel step, the longest part: at least core 0's own
    // count (its part of a step is never longer than the longest), at most every core's.
    let critical = four["critical_path"].as_u64().unwrap();
    assert!(
        critical >= per[0] && critical <= per.iter().sum::<u64>(),
        "{four}"
    );
    assert!(
        critical * 10 < single * 7,
        "4 cores: critical path {critical} vs one core {single}"
    );
    assert!(four["parallel_steps"].as_u64().unwrap() > 10, "{four}");
    assert_eq!(run("4"), four, "traced counts repeat exactly");
}

/// The Raspberry Pi boards release their secondary cores through the boot stub (QEMU starts
/// every core there) and the spin table (the Pi's own firmware): 2 and 4 cores give one
/// core's output bytes.
#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn raspi_and_imx8mp_boards_run_on_several_cores() {
    for board in ["raspi3b", "raspi4b", "imx8mp-evk"] {
        let output = |tag: &str| {
            let p = root()
                .join("target/firmware/test-out")
                .join(format!("gpt2_portable-{board}-{tag}"))
                .join("output-0.npy");
            std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        run_case("gpt2_portable", board, &[]);
        let one = output("");
        for smp in ["2", "4"] {
            let log = run_case("gpt2_portable", board, &["--smp", smp]);
            assert!(log.contains(&format!("cores: {smp} ran")), "{board}: {log}");
            assert!(
                output(&format!("smp{smp}")) == one,
                "{board}: {smp} cores differ"
            );
        }
    }
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn smp_on_a_board_without_secondary_start_fails_clearly() {
    let o = xtask(&[
        "qemu",
        fixture("mlp_portable.pte").to_str().unwrap(),
        "--board",
        "raspi2b",
        "--smp",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("runs on one core for now"),
        "{}",
        text(&o)
    );
}

/// Programs lowered by `cargo xtask lower` run bare-metal and match ExecuTorch: for the
/// board's CPU (`max`: SME2 panels at SVL 256) and for another target (Neon panels, computed
/// through the GEMV or panel by panel by the CPU's own kernels).
#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn virt_lowered_programs() {
    let dir = out_dir("lowered");
    std::fs::create_dir_all(&dir).unwrap();
    let fp32 = [
        "gpt2_portable",
        "gpt2_xnnpack",
        "llama_portable",
        "mlp_xnnpack",
        "cnn_xnnpack",
    ]
    .map(|case| (case, ["max", "neon"].as_slice()));
    // An int8 program packed for `SMMLA` (an Armv9 target without SME2; `max` has FEAT_I8MM)
    // and for `SMOPA`.
    let int8 = [("opt_qd8", ["neoverse-n2", "max"].as_slice())];
    for (case, targets) in fp32.into_iter().chain(int8) {
        for &target in targets {
            let lowered = dir.join(format!("{case}-{target}.pte"));
            let pte = fixture(&format!("{case}.pte"));
            let o = xtask(&[
                "lower",
                pte.to_str().unwrap(),
                "--target",
                target,
                "-o",
                lowered.to_str().unwrap(),
            ]);
            assert!(
                o.status.success(),
                "lowering {case} for {target}:\n{}",
                text(&o)
            );
            run_file(&lowered, case, "qemu-virt", &[]);
        }
    }
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn every_manifest_case_has_a_virt_test() {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("manifest.json")).unwrap()).unwrap();
    let source = include_str!("baremetal.rs");
    for case in manifest["cases"].as_array().unwrap() {
        let case = case.as_str().unwrap();
        assert!(
            source.contains(&format!("=> \"{case}\"")),
            "no bare-metal test for {case}"
        );
    }
}

fn board_test(board: &str, core_midr: &str) {
    let log = run_case("mlp_portable", board, &[]);
    assert!(
        log.contains(&format!("on {board}: EL1 MIDR {core_midr}")),
        "{log}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn raspi4b_runs_mlp() {
    board_test("raspi4b", "0x410fd083"); // Cortex-A72, dropped from EL3 to EL1
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn raspi3b_runs_mlp() {
    board_test("raspi3b", "0x410fd034"); // Cortex-A53
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn imx8mp_evk_runs_mlp() {
    board_test("imx8mp-evk", "0x410fd034"); // Cortex-A53
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn virt_cpus_get_their_vector_units() {
    // The engine's GEMM dispatch per core: Neon without SVE2, SVE2 without SME, SME when present
    // (vector lengths requested at 512 bits, clamped by the core).
    for (cpu, sve, sme, isa) in [
        ("cortex-a53", 0, 0, "neon"),
        ("cortex-a72", 0, 0, "neon"),
        ("neoverse-v1", 256, 0, "neon"),
        ("max,sme=off", 512, 0, "sve2"),
        ("max", 512, 512, "sme"),
    ] {
        let log = run_case("gpt2_portable", "qemu-virt", &["--cpu", cpu]);
        let want = format!("-cpu {cpu}: EL1 MIDR");
        assert!(log.contains(&want), "{log}");
        let want = format!("SVE VL {sve} bits, SME SVL {sme} bits, GEMM kernel {isa}\n");
        assert!(log.contains(&want), "{cpu}: want {want}\n{log}");
    }
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn virt_entered_at_el2_or_el3_drops_to_el1_with_full_vector_lengths() {
    // virtualization=on enters at EL2, secure=on at EL3: the boot stub must leave SVE/SME
    // untrapped and ZCR/SMCR of the higher levels at full length, or EL1 would see 128 bits.
    for opts in [
        "virtualization=on",
        "secure=on",
        "secure=on,virtualization=on",
    ] {
        let log = run_case("mlp_portable", "qemu-virt", &["--machine-opts", opts]);
        assert!(
            log.contains(
                "-cpu max: EL1 MIDR 0xf0510, SVE VL 512 bits, SME SVL 512 bits, GEMM kernel sme"
            ),
            "{opts}: {log}"
        );
    }
}

fn instructions(log: &str) -> String {
    log.lines()
        .find(|l| l.starts_with("instructions (icount)"))
        .unwrap_or_else(|| panic!("no icount line:\n{log}"))
        .to_string()
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn icount_runs_are_deterministic() {
    let a = instructions(&run_case("mlp_portable", "qemu-virt", &["--icount"]));
    let b = instructions(&run_case("mlp_portable", "qemu-virt", &["--icount"]));
    assert_eq!(a, b);
    let forward: u64 = a
        .split("forward ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(forward > 10_000, "{a}");
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn model_placed_by_the_loader_runs() {
    let log = run_case("mlp_xnnpack", "qemu-virt", &["--load-model"]);
    assert!(log.contains("model (at 0x70000000)"), "{log}");
    run_case("mlp_portable", "imx8mp-evk", &["--load-model"]);
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn arenas_too_small_report_the_typed_error() {
    let pte = fixture("mlp_portable.pte");
    let out = out_dir("shrunk");
    let o = xtask(&[
        "qemu",
        pte.to_str().unwrap(),
        "--shrink-arenas",
        "16",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("ERROR Method::load failed"), "{log}");
    assert!(
        log.contains("ArenaTooSmall { memory_id: 1, needed: 18432, got: 18416 }"),
        "{log}"
    );
    assert!(!out.join("output-0.npy").exists());
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn corrupted_model_blob_reports_the_typed_error() {
    let pte = fixture("mlp_portable.pte");
    let bytes = std::fs::read(&pte).unwrap();
    let dir = out_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, fn(&mut Vec<u8>), &str); 2] = [
        (
            "table",
            |b| b[64..96].iter_mut().for_each(|x| *x ^= 0xff),
            "InvalidFlatbuffer",
        ),
        (
            "identifier",
            |b| b[4..8].copy_from_slice(b"XXXX"),
            "BadIdentifier",
        ),
    ];
    for (name, corrupt, want) in cases {
        let mut blob = bytes.clone();
        corrupt(&mut blob);
        let path = dir.join(format!("{name}.pte"));
        std::fs::write(&path, &blob).unwrap();
        let o = xtask(&[
            "qemu",
            pte.to_str().unwrap(),
            "--blob",
            path.to_str().unwrap(),
            "--output-dir",
            dir.to_str().unwrap(),
        ]);
        let log = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {log}");
        assert!(log.contains("ERROR Program::load failed"), "{name}: {log}");
        assert!(log.contains(want), "{name}: want {want}\n{log}");
        assert!(!dir.join("output-0.npy").exists());
    }
    // The intact blob through the same path runs.
    let path = dir.join("intact.pte");
    std::fs::write(&path, &bytes).unwrap();
    let o = xtask(&[
        "qemu",
        pte.to_str().unwrap(),
        "--blob",
        path.to_str().unwrap(),
        "--output-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn panic_prints_where_and_why_and_exits_non_zero() {
    let pte = fixture("mlp_portable.pte");
    let out = out_dir("panic");
    let o = xtask(&[
        "qemu",
        pte.to_str().unwrap(),
        "--selftest",
        "panic",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("panicked at firmware/src/main.rs:"), "{log}");
    assert!(
        log.contains("self-test: panic requested at build time"),
        "{log}"
    );
    assert!(log.contains("QEMU exit status: 101"), "{log}");
}

/// Builds the firmware with the page-table self-test `kind` and returns its log, after checking
/// that the run failed with the CPU-exception status.
fn fault_selftest(kind: &str) -> String {
    fault_selftest_on("qemu-virt", kind)
}

fn fault_selftest_on(board: &str, kind: &str) -> String {
    let pte = fixture("mlp_portable.pte");
    let out = out_dir(&format!("fault-{board}-{kind}"));
    let o = xtask(&[
        "qemu",
        pte.to_str().unwrap(),
        "--board",
        board,
        "--selftest",
        kind,
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("QEMU exit status: 3"), "{log}");
    log
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn stack_overflow_hits_the_guard_page_and_is_reported() {
    let log = fault_selftest("stack-overflow");
    assert!(
        log.contains("stack overflow: data abort at EL1 on core 0: write to"),
        "{log}"
    );
    assert!(
        log.contains(
            "translation fault (unmapped) at level 3: the guard page below core 0's stack"
        ),
        "{log}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn the_program_image_is_read_only() {
    let log = fault_selftest("write-image");
    assert!(
        log.contains("data abort at EL1 on core 0: write to"),
        "{log}"
    );
    assert!(
        log.contains("permission fault at level 3: the program and its inputs in flash (.flash)"),
        "{log}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn the_arenas_are_not_executable() {
    let log = fault_selftest("exec-arena");
    assert!(
        log.contains("instruction abort at EL1 on core 0: instruction fetch from"),
        "{log}"
    );
    assert!(
        log.contains(
            "permission fault at level 3: the planned arenas (.bss) (read-write, not executable)"
        ),
        "{log}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn ram_outside_every_region_is_unmapped() {
    let log = fault_selftest("write-outside");
    // The write goes 1 MiB past the image: a level-3 fault when that is inside the last 2 MiB
    // block the page tables split into pages, a level-2 fault past it (the image's size
    // decides which).
    assert!(
        ["2", "3"].iter().any(|level| log.contains(&format!(
            "translation fault (unmapped) at level {level}: outside every region the firmware uses"
        ))),
        "{log}"
    );
}

/// The ARMv7 page tables (short-descriptor sections and small pages) catch the same faults,
/// reported with the same regions.
#[test]
#[ignore = "needs qemu-system-arm; run by scripts/test-baremetal.sh"]
fn arm32_page_tables_catch_every_fault() {
    let board = "qemu-virt-a15";
    let log = fault_selftest_on(board, "stack-overflow");
    assert!(
        log.contains("stack overflow: data abort at PL1 on core 0: write to")
            && log.contains(
                "translation fault (unmapped) at level 2: the guard page below core 0's stack"
            ),
        "{log}"
    );
    let log = fault_selftest_on(board, "write-image");
    assert!(
        log.contains("data abort at PL1 on core 0: write to")
            && log.contains(
                "permission fault at level 2: the program and its inputs in flash (.flash)"
            ),
        "{log}"
    );
    let log = fault_selftest_on(board, "exec-arena");
    assert!(
        log.contains("prefetch abort at PL1 on core 0: instruction fetch from")
            && log.contains("permission fault at level 2: the planned arenas"),
        "{log}"
    );
    let log = fault_selftest_on(board, "write-outside");
    assert!(
        log.contains("translation fault (unmapped) at level 1: outside every region"),
        "{log}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn timeout_fails_clearly() {
    let pte = fixture("gpt2_portable.pte");
    let out = out_dir("timeout");
    let o = xtask(&[
        "qemu",
        pte.to_str().unwrap(),
        "--timeout",
        "0",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("QEMU timed out after 0 s"),
        "{}",
        text(&o)
    );
}

fn elf_entry(path: &Path) -> u64 {
    let b = std::fs::read(path).unwrap();
    u64::from_le_bytes(b[0x18..0x20].try_into().unwrap())
}

#[test]
#[ignore = "builds firmware; run by scripts/test-baremetal.sh"]
fn deploy_writes_boot_files() {
    let pte = fixture("mlp_portable.pte");
    let model = std::fs::read(&pte).unwrap();
    for board in ["raspi4b", "raspi3b"] {
        let out = out_dir(&format!("deploy-{board}"));
        let o = xtask(&[
            "deploy",
            pte.to_str().unwrap(),
            "--board",
            board,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let img = std::fs::read(out.join("kernel8.img")).unwrap();
        assert!(img.len() > 64 * 1024, "kernel8.img is {} bytes", img.len());
        assert_eq!(
            elf_entry(&out.join("ptera-firmware.elf")),
            0x80000,
            "the boot stub is the first instruction"
        );
        let cfg = std::fs::read_to_string(out.join("config.txt")).unwrap();
        assert!(
            cfg.contains("kernel=kernel8.img") && cfg.contains("initramfs model.pte 0x30000000"),
            "{cfg}"
        );
        assert_eq!(std::fs::read(out.join("model.pte")).unwrap(), model);
    }
    let out = out_dir("deploy-imx8mp-evk");
    let o = xtask(&[
        "deploy",
        pte.to_str().unwrap(),
        "--board",
        "imx8mp-evk",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let cmds = std::fs::read_to_string(out.join("boot.cmd")).unwrap();
    assert!(
        cmds.contains("fatload mmc 1:1 0x40480000 ptera.bin") && cmds.contains("go 0x40480000"),
        "{cmds}"
    );
    assert_eq!(elf_entry(&out.join("ptera-firmware.elf")), 0x4048_0000);
    assert!(out.join("ptera.bin").is_file() && out.join("model.pte").is_file());
}

#[test]
#[ignore = "builds firmware; run by scripts/test-baremetal.sh"]
fn deployed_pi_image_boots_as_a_raw_kernel() {
    // The flat kernel8.img (not the ELF) with the model placed by a loader, as the Pi firmware
    // does it: QEMU's raspi3b boot path loads a raw image at 0x80000.
    let pte = fixture("mlp_portable.pte");
    let out = out_dir("deploy-raw-raspi3b");
    let o = xtask(&[
        "deploy",
        pte.to_str().unwrap(),
        "--board",
        "raspi3b",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let uart = out.join("uart.bin");
    let status = Command::new("timeout")
        .args([
            "5",
            "qemu-system-aarch64",
            "-M",
            "raspi3b",
            "-display",
            "none",
            "-monitor",
            "none",
        ])
        .arg("-serial")
        .arg(format!("file:{}", uart.display()))
        .arg("-kernel")
        .arg(out.join("kernel8.img"))
        .arg("-device")
        .arg(format!(
            "loader,file={},addr=0x30000000,force-raw=on",
            out.join("model.pte").display()
        ))
        .status()
        .expect("run qemu");
    // Without semihosting the deployed image parks after its report: `timeout` ends QEMU.
    assert_eq!(status.code(), Some(124));
    let stream = std::fs::read(&uart).unwrap();
    assert!(
        stream
            .windows(14)
            .any(|w| w == b"\xA5\x06\x0a\x00ptera-fw/1"),
        "no hello on the console"
    );
    // The DONE packet (channel 4): status 0 first, then the selected GEMM ISA (a Cortex-A53 has
    // Neon only) and the cores that ran (one). Layout in boards/firmware/src/console.rs.
    let want_tail = b"\x04neon\x01\x00\x00\x00";
    let len = 56 + want_tail.len();
    let done = stream
        .windows(4)
        .position(|w| w == [0xA5, 4, len as u8, 0])
        .expect("no DONE packet");
    let payload = &stream[done + 4..done + 4 + len];
    assert_eq!(&payload[..4], &[0, 0, 0, 0], "non-zero status");
    assert_eq!(&payload[56..], want_tail);
}

/// Raspberry Pi 2: `kernel7.img` and a 32-bit `config.txt`; the flat image boots from where
/// the Pi firmware puts it (`kernel_address`, here by QEMU's loader) and reports status 0 with
/// the VFPv4 kernel.
#[test]
#[ignore = "builds firmware; run by scripts/test-baremetal.sh"]
fn deployed_pi2_image_boots_as_a_raw_kernel() {
    let pte = fixture("mlp_portable.pte");
    let out = out_dir("deploy-raw-raspi2b");
    let o = xtask(&[
        "deploy",
        pte.to_str().unwrap(),
        "--board",
        "raspi2b",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let cfg = std::fs::read_to_string(out.join("config.txt")).unwrap();
    assert!(
        cfg.contains("arm_64bit=0")
            && cfg.contains("kernel=kernel7.img")
            && cfg.contains("kernel_address=0x8000")
            && cfg.contains("initramfs model.pte 0x30000000"),
        "{cfg}"
    );
    let uart = out.join("uart.bin");
    let kernel = out.join("kernel7.img");
    let status = Command::new("timeout")
        .args(["5", "qemu-system-arm", "-M", "raspi2b", "-display", "none"])
        .args(["-monitor", "none", "-serial"])
        .arg(format!("file:{}", uart.display()))
        .arg("-device")
        .arg(format!(
            "loader,file={},addr=0x8000,force-raw=on",
            kernel.display()
        ))
        .args(["-device", "loader,addr=0x8000,cpu-num=0", "-device"])
        .arg(format!(
            "loader,file={},addr=0x30000000,force-raw=on",
            out.join("model.pte").display()
        ))
        .status()
        .expect("run qemu");
    assert_eq!(status.code(), Some(124));
    let stream = std::fs::read(&uart).unwrap();
    let done = stream
        .windows(2)
        .rposition(|w| w == [0xA5, 4])
        .expect("no DONE packet");
    let len = usize::from(stream[done + 2]) | usize::from(stream[done + 3]) << 8;
    let payload = &stream[done + 4..done + 4 + len];
    assert_eq!(&payload[..4], &[0, 0, 0, 0], "non-zero status");
    assert!(
        payload.windows(15).any(|w| w == b"neon-vfpv4-4x12"),
        "the DONE report names another kernel"
    );
}

/// The i.MX 6 boards (and the H3 one): a flat image at U-Boot's load address and the U-Boot
/// commands for their SD card slot.
#[test]
#[ignore = "builds firmware; run by scripts/test-baremetal.sh"]
fn deploy_writes_uboot_commands_for_32_bit_boards() {
    let pte = fixture("mlp_portable.pte");
    for (board, mmc, load) in [
        ("mcimx6ul-evk", "1:1", 0x8080_0000u64),
        ("sabrelite", "0:1", 0x1200_0000),
        ("orangepi-pc", "0:1", 0x4200_0000),
    ] {
        let out = out_dir(&format!("deploy-{board}"));
        let o = xtask(&[
            "deploy",
            pte.to_str().unwrap(),
            "--board",
            board,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let cmds = std::fs::read_to_string(out.join("boot.cmd")).unwrap();
        assert!(
            cmds.contains(&format!("fatload mmc {mmc} {load:#x} ptera.bin"))
                && cmds.contains(&format!("go {load:#x}")),
            "{board}: {cmds}"
        );
        let img = std::fs::read(out.join("ptera.bin")).unwrap();
        let elf = std::fs::read(out.join("ptera-firmware.elf")).unwrap();
        assert_eq!(&elf[..5], b"\x7fELF\x01", "{board}: an ELF32 image");
        let entry = u32::from_le_bytes(elf[0x18..0x1c].try_into().unwrap());
        assert_eq!(
            u64::from(entry),
            load,
            "{board}: the vector table is the first word"
        );
        // The first word is the reset vector, `ldr pc, [pc, #imm]` (0xe59ff000 | imm).
        assert_eq!(img[3], 0xe5, "{board}: {:x?}", &img[..4]);
        assert_eq!(img[2] & 0xf0, 0x90, "{board}: {:x?}", &img[..4]);
    }
}

/// `cargo xtask bench gemm --method icount --json` on the firmware's GEMM bench mode.
fn gemm_icount(isa: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench", "gemm", "--isa", isa, "--m", "32", "--k", "64", "--n", "48", "--method", "icount",
        "--json",
    ];
    args.extend_from_slice(extra);
    xtask(&args)
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn gemm_bench_icount_counts_one_checked_sgemm_call() {
    // neon32: the ARMv7 kernel on qemu-virt-a15 (qemu-system-arm).
    for (isa, bits) in [("neon", 128), ("sme", 512), ("neon32", 128)] {
        let o = gemm_icount(isa, &[]);
        let log = text(&o);
        assert!(o.status.success(), "{isa}: {log}");
        let line = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(line.trim().lines().last().unwrap())
            .unwrap_or_else(|e| panic!("{isa}: {e}: {log}"));
        assert_eq!(v["method"], "qemu-system icount", "{v}");
        assert_eq!(v["isa"], isa, "{v}");
        assert_eq!(
            (&v["m"], &v["k"], &v["n"]),
            (&32.into(), &64.into(), &48.into()),
            "{v}"
        );
        assert_eq!(v["vector_bits"], bits, "{v}");
        let insns = v["instructions"].as_u64().unwrap();
        let ideal = v["fma_instructions_ideal"].as_u64().unwrap();
        // 32·48·64 MACs: 4 per Neon FMA, 16·16 per FMOPA at SVL 512.
        assert_eq!(ideal, if isa == "sme" { 384 } else { 24576 }, "{v}");
        assert!(insns > ideal, "{v}");
        let density = v["density"].as_f64().unwrap();
        assert!(density > 0.0 && density <= 1.0, "{v}");
        assert!((density - ideal as f64 / insns as f64).abs() < 1e-4, "{v}");
        // icount is deterministic: a second run counts the same instructions.
        let again = gemm_icount(isa, &[]);
        assert!(again.status.success(), "{}", text(&again));
        let w: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&again.stdout).trim()).unwrap();
        assert_eq!(w["instructions"], v["instructions"], "{isa}");
    }
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn gemm_bench_icount_fails_on_a_wrong_result() {
    let o = gemm_icount("neon", &["--corrupt-c"]);
    let log = text(&o);
    assert!(!o.status.success(), "{log}");
    assert!(log.contains("C is wrong"), "{log}");
    assert!(log.contains("the GEMM result is wrong"), "{log}");
}

/// Runs fixture `case` on qemu-virt under `-icount` with `--etdump` and checks the file the
/// firmware sent: ExecuTorch's ETDump format, one event per executed instruction (two per
/// kernel call: OPERATOR_CALL and its native_call), one per region operation, and the forward's
/// `Method::execute` last, whose duration is the forward's exact instruction count.
fn etdump_on_board(case: &str) {
    use ptera::format::etdump_fb;
    let out = out_dir(&format!("etdump-{case}"));
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("forward.etdp");
    let o = xtask(&[
        "qemu",
        fixture(&format!("{case}.pte")).to_str().unwrap(),
        "--icount",
        "--json",
        "--etdump",
        file.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let log = text(&o);
    assert!(o.status.success(), "{log}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let j: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let forward = j["forward_instructions"].as_u64().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    let dump = etdump_fb::size_prefixed_root_as_etdump(&bytes).unwrap();
    // First the method's load, as ExecuTorch writes it: a "Default" block with Method::init
    // inside Program::load_method; then the forward.
    let runs = dump.run_data().unwrap();
    assert_eq!(runs.len(), 2, "{case}");
    let load = runs.get(0);
    assert_eq!(load.name(), Some("Default"));
    let load: Vec<_> = load
        .events()
        .unwrap()
        .iter()
        .map(|e| e.profile_event().unwrap())
        .collect();
    assert_eq!(load.len(), 2);
    assert_eq!(load[0].name(), Some("Method::init"));
    assert_eq!(load[1].name(), Some("Program::load_method"));
    assert!(load[1].start_time() <= load[0].start_time());
    assert!(load[0].start_time() < load[0].end_time());
    assert!(load[0].end_time() <= load[1].end_time());
    let run = runs.get(1);
    assert_eq!(run.name(), Some("Execute"));
    let events: Vec<_> = run
        .events()
        .unwrap()
        .iter()
        .map(|e| e.profile_event().unwrap())
        .collect();
    // The plan's instructions (straight-line programs: each runs once).
    let pte = std::fs::read(fixture(&format!("{case}.pte"))).unwrap();
    let program = ptera::Program::load(&pte).unwrap();
    let plan = program.methods().next().unwrap();
    let instrs = plan.chains().unwrap().get(0).instructions().unwrap();
    let kernels = instrs
        .iter()
        .filter(|i| i.instr_args_as_kernel_call().is_some())
        .count();
    let delegates = instrs
        .iter()
        .filter(|i| i.instr_args_as_delegate_call().is_some())
        .count();
    let named = |n: &str| events.iter().filter(|e| e.name() == Some(n)).count();
    assert_eq!(named("OPERATOR_CALL"), kernels, "{case}");
    assert_eq!(named("DELEGATE_CALL"), delegates, "{case}");
    assert_eq!(named("Method::execute"), 1, "{case}");
    let natives = events
        .iter()
        .filter(|e| e.name().is_some_and(|n| n.starts_with("native_call_")))
        .count();
    assert_eq!(natives, kernels, "{case}");
    let ops = events.iter().filter(|e| e.name().is_none()).count();
    assert_eq!(events.len(), 2 * kernels + delegates + ops + 1, "{case}");
    // Every instruction of the plan ran once, in order.
    let pcs: Vec<i32> = events
        .iter()
        .filter(|e| matches!(e.name(), Some("OPERATOR_CALL" | "DELEGATE_CALL")))
        .map(|e| e.instruction_id())
        .collect();
    assert_eq!(pcs, (0..instrs.len() as i32).collect::<Vec<_>>(), "{case}");
    // Durations are instruction counts: the run's event is the forward (the firmware reads
    // the counter around it, a few instructions outside), its instructions fit inside it.
    let last = events.last().unwrap();
    assert_eq!(last.name(), Some("Method::execute"));
    let execute = last.end_time() - last.start_time();
    assert!(
        execute <= forward && forward - execute < 1000,
        "{case}: execute event {execute}, forward {forward}"
    );
    let inside: u64 = events
        .iter()
        .filter(|e| matches!(e.name(), Some("OPERATOR_CALL" | "DELEGATE_CALL")))
        .map(|e| e.end_time() - e.start_time())
        .sum();
    assert!(
        inside <= execute && inside * 10 > execute * 9,
        "{case}: {inside} of {execute}"
    );
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn etdump_from_the_board_gpt2_xnnpack() {
    etdump_on_board("gpt2_xnnpack");
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn etdump_from_the_board_opt_portable() {
    etdump_on_board("opt_portable");
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn profile_on_a_board_counts_instructions_per_operator() {
    let o = xtask(&[
        "profile",
        fixture("mlp_xnnpack.pte").to_str().unwrap(),
        "--board",
        "qemu-virt",
        "--cpu",
        "cortex-a76",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let total = j["forward_instructions"].as_u64().unwrap();
    assert!(total > 0);
    let ops = j["operators"].as_array().unwrap();
    assert!(!ops.is_empty());
    let sum: u64 = ops
        .iter()
        .map(|o| o["instructions"].as_u64().unwrap())
        .sum();
    assert!(sum <= total && sum * 10 > total * 9, "{sum} of {total}");
    assert!(
        ops.iter().any(|o| o["operator"]
            .as_str()
            .unwrap()
            .contains("XnnpackBackend region: XNN")),
        "{j}"
    );
}

/// Runs a BundledProgram on qemu-virt: the firmware runs and checks every test case itself.
fn bundled_on_board(name: &str) -> Output {
    let out = out_dir(&format!("bundled-{name}"));
    xtask(&[
        "qemu",
        root()
            .join("tests/fixtures/bundled")
            .join(format!("{name}.bpte"))
            .to_str()
            .unwrap(),
        "--cpu",
        "cortex-a76",
        "--output-dir",
        out.to_str().unwrap(),
    ])
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn bundled_programs_pass_on_the_board() {
    for (name, cases) in [("mlp_portable", 3), ("gpt2_xnnpack", 2)] {
        let o = bundled_on_board(name);
        let log = text(&o);
        assert!(o.status.success(), "{name}: {log}");
        for i in 0..cases {
            assert!(
                log.contains(&format!("method `forward` case {i}: pass: ")),
                "{name}: {log}"
            );
        }
        assert!(
            log.contains(&format!("{cases} passed, 0 failed on qemu-virt")),
            "{name}: {log}"
        );
    }
}

#[test]
#[ignore = "needs qemu-system-aarch64; run by scripts/test-baremetal.sh"]
fn a_bundled_program_with_a_wrong_expectation_fails_on_the_board() {
    let o = bundled_on_board("mlp_portable_bad");
    let log = text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert!(log.contains("method `forward` case 0: pass: "), "{log}");
    assert!(
        log.contains("method `forward` case 1: FAIL: 2 outputs, largest |diff| 5.000e-1 at output 0 element 0, 1 outside"),
        "{log}"
    );
    assert!(
        log.contains("1 bundled test case(s) failed on qemu-virt"),
        "{log}"
    );
}
