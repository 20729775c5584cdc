//! Inputs the fuzz targets (`fuzz/`, docs/fuzzing.md) found, replayed through exactly the
//! fuzzed paths: each file `tests/fuzz-regressions/TARGET-NAME.bin` goes through target
//! TARGET's harness and must end in a value (a result or a typed error), never a panic, an
//! abort or a hang; the named tests below also check the error each finding now gives.

#[path = "../fuzz/src/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../fuzz/src/hosts.rs"]
#[allow(dead_code)]
mod hosts;

use std::path::PathBuf;

use harness::Host;
use ptera::host::AlignedBuf;
use ptera::{Error, Program};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
}

fn input(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs one regression input through its target's path; the error text, if any.
fn replay(name: &str, bytes: &[u8]) -> Option<String> {
    let target = name.split('-').next().unwrap_or("");
    let host = |hosts: &[(&str, &[u8])]| {
        hosts::split_host(bytes, hosts.len()).map(|(h, payload)| (Host::new(hosts[h].1), payload))
    };
    match target {
        "load" => harness::load(bytes).err().map(|e| e.to_string()),
        "execute" => harness::execute(bytes).1.err().map(|e| e.to_string()),
        "xnnpack" => host(hosts::XNNPACK_HOSTS)
            .and_then(|(mut h, p)| harness::xnnpack(&mut h, p).err())
            .map(|e| e.to_string()),
        "lowered" => host(hosts::LOWERED_HOSTS)
            .and_then(|(mut h, p)| harness::lowered(&mut h, p).err())
            .map(|e| e.to_string()),
        "npy" => ptera::host::npy::parse(bytes).err().map(|e| e.to_string()),
        "bundled" => harness::bundled(bytes).err().map(|e| e.to_string()),
        "etdump" => harness::etdump(bytes)
            .is_none()
            .then(|| "not a valid ETDump".to_string()),
        other => panic!("{name}: unknown target {other}"),
    }
}

#[test]
fn every_regression_input_ends_in_a_value() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bin"))
        .collect();
    names.sort();
    for name in &names {
        let bytes = input(name);
        if let Some(e) = replay(name, &bytes) {
            assert!(!e.contains('\n'), "{name}: error on several lines: {e}");
        }
    }
}

/// The flatbuffer verifier reports a failure with a trace over several lines; the error
/// ptera gives is one line (host tools print it as such).
#[test]
fn verifier_errors_are_one_line() {
    let file = AlignedBuf::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mlp_portable.pte"
    ))
    .unwrap();
    let bytes = file.as_slice();
    let program_size = Program::load(bytes).unwrap().header().unwrap().program_size as usize;
    let mut traced = 0;
    for i in 0..program_size {
        let mut b = bytes.to_vec();
        b[i] ^= 0xff;
        if let Err(e @ Error::InvalidFlatbuffer { .. }) =
            Program::load(AlignedBuf::from_bytes(&b).as_slice())
        {
            let text = e.to_string();
            assert!(!text.contains(['\n', '\t']), "byte {i}: {text:?}");
            traced += text.contains("while verifying") as usize;
        }
    }
    assert!(traced > 0, "no verifier trace seen");
}

/// `execute-cast-copy-in-place.bin` (from `structured`): a copy kernel whose `self` is also its
/// `out`. The kernel held the input for reading when it asked for the output, so both views
/// covered the same bytes (undefined behaviour; the debug precondition check of
/// `copy_nonoverlapping` aborted). `KernelCtx::output` now refuses an output that is the
/// tensor of another argument already read.
#[test]
fn output_that_is_an_input_already_read_is_aliasing() {
    use ptera::testing::OpTest;
    use ptera::KernelError;
    let aliasing = |t: &OpTest| match t.run() {
        Err(Error::Kernel {
            source: KernelError::Aliasing { .. },
            ..
        }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    };
    let mut t = OpTest::new("aten::clone.out");
    let x = t.input_f32(&[3], &[1.0, 2.0, 3.0]);
    let n = t.none();
    t.call(&[x, n, x, x]);
    aliasing(&t);
    // `copy_(x, x)`: the source is the destination.
    let mut t = OpTest::new("aten::copy_");
    let x = t.input_f32(&[2], &[1.0, 2.0]);
    let nb = t.boolean(false);
    t.call(&[x, x, nb, x]);
    aliasing(&t);
    // The in-place form itself stays valid: self written, its return the same tensor.
    let mut t = OpTest::new("aten::copy_");
    let x = t.input_f32(&[2], &[1.0, 2.0]);
    let src = t.constant_f32(&[2], &[5.0, 6.0]);
    let nb = t.boolean(false);
    t.call(&[x, src, nb, x]);
    t.run().unwrap();
    let (stage, r) = harness::execute(&input("execute-cast-copy-in-place.bin"));
    assert!(stage >= harness::Stage::Execute, "{stage:?} {r:?}");
    assert!(
        matches!(
            r,
            Err(Error::Kernel {
                source: KernelError::Aliasing { .. },
                ..
            })
        ),
        "{r:?}"
    );
}

/// `npy-huge-shape.bin`: an 87-byte `.npy` declaring 2^40 float32 elements. The reader of the
/// host tools allocated what the header declared (an allocation abort); it now checks the
/// declared size against the bytes present (`ptera::host::npy::parse`).
#[test]
fn npy_larger_than_its_file_is_truncated() {
    match ptera::host::npy::parse(&input("npy-huge-shape.bin")) {
        Err(ptera::host::npy::NpyError::Truncated {
            what: "data",
            needed,
            len: 87,
        }) => assert_eq!(needed, 79 + (4u64 << 40)),
        other => panic!("{other:?}"),
    }
}
