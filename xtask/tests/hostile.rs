//! `cargo xtask run` on hostile files: any byte string ends with status 0, or status 1 and
//! one error line; never a panic (status 101), an abort or a signal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ptera::testing::{OpTest, Rng};
use ptera::DType;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn xtask(args: &[&str], max_memory: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(root())
        .env("PTERA_MAX_MEMORY", max_memory)
        .output()
        .expect("run xtask")
}

/// Exit status 0, or 1 with exactly one line on stderr.
fn check(out: &Output, case: &str) {
    match out.status.code() {
        Some(0) => {}
        Some(1) => {
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                err.trim_end().lines().count(),
                1,
                "{case}: one error line expected: {err}"
            );
        }
        other => panic!(
            "{case}: status {other:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn run_file(dir: &Path, name: &str, bytes: &[u8], inputs: &[&str]) -> Output {
    let file = dir.join(name);
    std::fs::write(&file, bytes).unwrap();
    let out_dir = dir.join("out");
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ];
    for i in inputs {
        args.extend(["--input", i]);
    }
    xtask(&args, "2000000000")
}

#[test]
fn run_on_hostile_bytes_exits_with_one_line() {
    let dir = std::env::temp_dir().join(format!("ptera-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng(0x5eed_f022);
    // Random byte strings, some behind a valid identifier.
    for k in 0..12 {
        let n = 8 + rng.below(4096) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
        if k % 2 == 1 {
            b[4..8].copy_from_slice(b"ET12");
        }
        check(
            &run_file(&dir, "random.pte", &b, &[]),
            &format!("random {k}"),
        );
    }
    // Corrupted and truncated fixtures, run with their own inputs.
    for case in ["mlp_portable", "cnn_xnnpack", "gpt2_portable"] {
        let fixture = root().join(format!("tests/fixtures/{case}.pte"));
        let good = std::fs::read(fixture).unwrap();
        let inputs: Vec<String> = (0..4)
            .map(|i| root().join(format!("tests/fixtures/{case}.in{i}.npy")))
            .filter(|p| p.exists())
            .map(|p| p.to_str().unwrap().to_string())
            .collect();
        let inputs: Vec<&str> = inputs.iter().map(|s| s.as_str()).collect();
        // Within the flatbuffer (where sizes, offsets and indices live) most of the time.
        let program_size = u64::from_le_bytes(good[16..24].try_into().unwrap()) as usize;
        for k in 0..16 {
            let mut b = good.clone();
            for _ in 0..1 + k % 3 {
                let at = rng.below(program_size.min(b.len()) as u64) as usize;
                b[at] = match k % 4 {
                    0 => 0xff,
                    1 => 0,
                    2 => b[at] ^ 0x80,
                    _ => rng.below(256) as u8,
                };
            }
            check(
                &run_file(&dir, "corrupt.pte", &b, &inputs),
                &format!("{case} corrupted {k}"),
            );
        }
        let cut = rng.below(good.len() as u64) as usize;
        check(
            &run_file(&dir, "cut.pte", &good[..cut], &inputs),
            &format!("{case} cut at {cut}"),
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_refuses_an_absurd_arena_by_name() {
    let dir = std::env::temp_dir().join(format!("ptera-absurd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A program whose one output asks for a 16 TiB arena.
    let mut t = OpTest::new("aten::zeros.out");
    let size = t.int_list(&[1 << 20, 1 << 20, 4]);
    let out = t.output(DType::F32, &[1 << 20, 1 << 20, 4]);
    t.call(&[size, out]);
    let o = run_file(&dir, "absurd.pte", &t.build(), &[]);
    check(&o, "absurd arena");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("arena 1 of 17592186044"), "{err}");
    // The same within the memory it asks for, but not within a small budget.
    let mlp = root().join("tests/fixtures/mlp_portable.pte");
    let input = root().join("tests/fixtures/mlp_portable.in0.npy");
    let out_dir = dir.join("out");
    let o = xtask(
        &[
            "run",
            mlp.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ],
        "1000",
    );
    check(&o, "small budget");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("more than the 1000 bytes"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// An 87-byte `.npy` whose header declares 2^40 float32 elements: refused as truncated data
/// before anything is allocated (the reader used to allocate what the header declared).
#[test]
fn run_refuses_an_npy_larger_than_its_file() {
    let dir = std::env::temp_dir().join(format!("ptera-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&[0; 8]);
    let input = dir.join("huge.npy");
    std::fs::write(&input, &npy).unwrap();
    let mlp = root().join("tests/fixtures/mlp_portable.pte");
    let o = xtask(
        &[
            "run",
            mlp.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--output-dir",
            dir.join("out").to_str().unwrap(),
        ],
        "2000000000",
    );
    check(&o, "huge npy");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("truncated .npy data"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
