//! BundledProgram fixtures (`tests/fixtures/bundled/*.bpte`, written by ExecuTorch 1.5.1's
//! bundled-program serializer): every test case of the good files passes on the host, the
//! corrupted twin fails on its last case only, and damaged files give typed errors.

use ptera::devtools::bundled::{run_case, Outcome};
use ptera::format::bundled::Bundled;
use ptera::host::AlignedBuf;
use ptera::{MethodMeta, OwnedArenas, Program, Registry};

fn bpte(name: &str) -> AlignedBuf {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bundled/");
    AlignedBuf::read(format!("{p}{name}.bpte")).unwrap()
}

/// Outcomes of every case of every suite.
#[allow(clippy::result_large_err)]
fn run_all(bytes: &[u8]) -> Result<Vec<Outcome>, ptera::Error> {
    let b = Bundled::load(bytes)?;
    let program = Program::load(b.program())?;
    let reg = Registry::standard();
    let mut out = Vec::new();
    for suite in b.suites() {
        let meta = MethodMeta::new(&program, suite.method(), &reg)?;
        let mut bufs = OwnedArenas::for_meta(&meta)?;
        let mut m = bufs.load(meta, &reg)?;
        for case in suite.cases() {
            out.push(run_case(&mut m, &case, 1e-4, 1e-4)?);
        }
    }
    Ok(out)
}

#[test]
fn bundled_fixtures_pass_and_the_corrupted_one_fails() {
    for (name, cases) in [("gpt2_xnnpack", 2), ("mlp_portable", 3)] {
        let b = bpte(name);
        let bundled = Bundled::load(b.as_slice()).unwrap();
        assert_eq!(bundled.version(), 2, "{name}");
        // The embedded program is read in place, aligned for the loader.
        assert!((bundled.program().as_ptr() as usize).is_multiple_of(16));
        let outs = run_all(b.as_slice()).unwrap();
        assert_eq!(outs.len(), cases, "{name}");
        for (i, o) in outs.iter().enumerate() {
            assert!(o.passed(), "{name} case {i}: {o:?}");
            assert!(o.outputs >= 1 && o.worst < 1e-4, "{name} case {i}: {o:?}");
        }
    }
    let outs = run_all(bpte("mlp_portable_bad").as_slice()).unwrap();
    assert!(outs[0].passed());
    let last = outs.last().unwrap();
    assert!(!last.passed());
    assert_eq!(last.worst_at, (0, 0));
    assert!((last.worst - 0.5).abs() < 1e-3, "{last:?}");
}

#[test]
fn damaged_bundled_programs_are_typed_errors() {
    let good = bpte("mlp_portable");
    let g = good.as_slice();
    // Truncations and single-byte changes: an error or a run, never a panic.
    for len in [0, 4, 8, 12, 64, g.len() / 2, g.len() - 1] {
        let b = AlignedBuf::from_bytes(&g[..len]);
        assert!(run_all(b.as_slice()).is_err(), "truncated to {len}");
    }
    let step = (g.len() / 509).max(1);
    for i in (0..g.len()).step_by(step) {
        let mut v = g.to_vec();
        v[i] ^= 0x5a;
        let b = AlignedBuf::from_bytes(&v);
        let _ = run_all(b.as_slice());
    }
    // A program is not a BundledProgram.
    let pte = AlignedBuf::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/mlp_portable.pte"
    ))
    .unwrap();
    assert!(Bundled::load(pte.as_slice()).is_err());
}
