//! The `xtask` CLI end to end: inspect counts agree with ExecuTorch's own (the generator's
//! JSON), `run` writes the reference outputs, and bad invocations fail with one clear line.

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

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run xtask")
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn cases() -> Vec<String> {
    json(&fixture("manifest.json"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn inspect_counts_match_executorch() {
    for case in cases() {
        let pte = fixture(&format!("{case}.pte"));
        let out = xtask(&["inspect", pte.to_str().unwrap(), "--json"]);
        assert!(
            out.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = json(&fixture(&format!("{case}.json")));
        assert_eq!(got["size_bytes"], want["size_bytes"], "{case}");
        let m = &got["methods"][0];
        assert_eq!(m["name"], "forward");
        for key in [
            "instructions",
            "kernel_calls",
            "delegate_calls",
            "operators",
            "delegates",
            "inputs",
            "outputs",
        ] {
            assert_eq!(m[key], want[key], "{case}: {key}");
        }
        let sizes = want["non_const_buffer_sizes"].as_array().unwrap();
        assert_eq!(
            m["planned_arena_bytes"].as_array().unwrap()[..],
            sizes[1..],
            "{case}: arenas"
        );
        assert!(m["metadata_bytes"].as_u64().unwrap() > 0);
        if case.ends_with("_portable") {
            assert!(
                got["constant_bytes"].as_u64().unwrap() > 0,
                "{case}: constants"
            );
        }
    }
}

#[test]
fn inspect_text_lists_operators() {
    let out = xtask(&["inspect", fixture("gpt2_portable.pte").to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("aten::native_layer_norm.out: 5"), "{text}");
    assert!(text.contains("input 0: int64 [1, 16]"), "{text}");
    assert!(text.contains("output 0: float32 [1, 512]"), "{text}");
}

fn read_npy_f32(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let npy = npyz::NpyFile::new(std::fs::File::open(path).unwrap()).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f32>().unwrap())
}

#[test]
fn run_writes_executorch_outputs() {
    let dir = std::env::temp_dir().join(format!("ptera-cli-{}", std::process::id()));
    for case in cases() {
        let case = case.as_str();
        let mut args = vec![
            "run".to_string(),
            fixture(&format!("{case}.pte")).display().to_string(),
        ];
        for i in 0.. {
            let p = fixture(&format!("{case}.in{i}.npy"));
            if !p.exists() {
                break;
            }
            args.push("--input".into());
            args.push(p.display().to_string());
        }
        args.push("--output-dir".into());
        args.push(dir.display().to_string());
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let out = xtask(&a);
        assert!(
            out.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for i in 0.. {
            let want = fixture(&format!("{case}.out{i}.npy"));
            if !want.exists() {
                break;
            }
            let (ws, wv) = read_npy_f32(&want);
            let (gs, gv) = read_npy_f32(&dir.join(format!("output-{i}.npy")));
            assert_eq!(gs, ws, "{case} output {i} shape");
            for (g, w) in gv.iter().zip(&wv) {
                assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "{case}: {g} vs {w}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success(), "should fail");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    err
}

#[test]
fn run_rejects_wrong_inputs_with_one_line() {
    let pte = fixture("gpt2_portable.pte");
    let pte = pte.to_str().unwrap();
    let in0 = fixture("gpt2_portable.in0.npy");
    let in0 = in0.to_str().unwrap();
    let mlp_in = fixture("mlp_portable.in0.npy");
    let mlp_in = mlp_in.to_str().unwrap();
    let err = one_line_error(&xtask(&["run", pte, "--input", in0]));
    assert!(err.contains("takes 2 input(s), 1 given"), "{err}");
    let err = one_line_error(&xtask(&["run", pte, "--input", mlp_in, "--input", in0]));
    assert!(err.contains("expected dtype int64, got float32"), "{err}");
    let gpt2b = fixture("gpt2b_portable.in0.npy");
    let err = one_line_error(&xtask(&[
        "run",
        pte,
        "--input",
        gpt2b.to_str().unwrap(),
        "--input",
        in0,
    ]));
    assert!(err.contains("expected shape [1, 16], got [1, 24]"), "{err}");
    let err = one_line_error(&xtask(&["run", "no/such/file.pte"]));
    assert!(err.contains("cannot read"), "{err}");
}

/// Node histograms of the 15 XNNPACK regions of the GPT-2 fixture. The expected totals were
/// counted independently (flatc --json over each payload's XNNGraph).
#[test]
fn inspect_shows_xnnpack_regions() {
    let out = xtask(&[
        "inspect",
        fixture("gpt2_xnnpack.pte").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success());
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let regions = got["methods"][0]["delegate_regions"].as_array().unwrap();
    assert_eq!(regions.len(), 15);
    let mut totals = std::collections::BTreeMap::new();
    for r in regions {
        assert_eq!(r["backend"], "XnnpackBackend");
        assert!(r.get("error").is_none(), "{r}");
        assert!(!r["outputs"].as_array().unwrap().is_empty());
        assert!(r["scratch_bytes"].as_u64().unwrap() <= 512 * 1024);
        for (k, v) in r["nodes"].as_object().unwrap() {
            *totals.entry(k.clone()).or_insert(0) += v.as_u64().unwrap();
        }
    }
    let want = [
        ("XNNAdd", 11),
        ("XNNBatchMatrixMultiply", 4),
        ("XNNFullyConnected", 9),
        ("XNNMultiply", 10),
        ("XNNSoftmax", 2),
        ("XNNStaticReshape", 37),
        ("XNNStaticTranspose", 10),
        ("XNNTanh", 2),
    ];
    let want: std::collections::BTreeMap<String, u64> =
        want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(totals, want);
    let text = String::from_utf8(
        xtask(&["inspect", fixture("gpt2_xnnpack.pte").to_str().unwrap()]).stdout,
    )
    .unwrap();
    assert!(text.contains("delegate #1 XnnpackBackend"), "{text}");
    assert!(
        text.contains("nodes: XNNFullyConnected: 1, XNNStaticReshape: 2"),
        "{text}"
    );
}
