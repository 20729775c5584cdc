//! Shared helpers for integration tests: fixture discovery, .npy reading, tolerance checks.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};

use ptera::host::AlignedBuf;
use ptera::DType;

/// `tests/fixtures` of the workspace root (these helpers are also included by the tests of
/// workspace members, whose manifest directory is one level down).
pub fn fixtures_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let own = here.join("tests/fixtures");
    if own.join("manifest.json").exists() {
        own
    } else {
        here.join("../tests/fixtures")
    }
}

/// Case names from `tests/fixtures/manifest.json`.
pub fn cases() -> Vec<String> {
    let text =
        std::fs::read_to_string(fixtures_dir().join("manifest.json")).expect("manifest.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c.as_str().expect("name").to_string())
        .collect()
}

pub fn case_json(case: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(fixtures_dir().join(format!("{case}.json"))).expect("case json");
    serde_json::from_str(&text).expect("case JSON")
}

pub fn pte(case: &str) -> AlignedBuf {
    AlignedBuf::read(fixtures_dir().join(format!("{case}.pte"))).expect("read .pte")
}

pub struct Npy {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl Npy {
    pub fn f64(&self) -> Vec<f64> {
        (0..self.shape.iter().product())
            .map(|i| ptera::tensor::read_f64(self.dtype, &self.bytes, i))
            .collect()
    }
}

pub fn read_npy(path: &Path) -> Npy {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(std::io::BufReader::new(f)).expect("npy header");
    let descr = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => panic!("unsupported dtype {other:?}"),
    };
    let dtype = match descr.as_str() {
        "<f4" => DType::F32,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|b1" => DType::Bool,
        "<f8" => DType::F64,
        d => panic!("unsupported dtype {d}"),
    };
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let mut bytes = vec![0u8; shape.iter().product::<usize>() * dtype.size()];
    npy.into_inner().read_exact(&mut bytes).expect("npy data");
    Npy {
        dtype,
        shape,
        bytes,
    }
}

/// Inputs `<case>.in0.npy`, `.in1.npy`, ... in order.
pub fn inputs(case: &str) -> Vec<Npy> {
    (0..)
        .map(|i| fixtures_dir().join(format!("{case}.in{i}.npy")))
        .take_while(|p| p.exists())
        .map(|p| read_npy(&p))
        .collect()
}

/// Reference outputs `<case>.out0.npy`, ...
pub fn outputs(case: &str) -> Vec<Npy> {
    (0..)
        .map(|i| fixtures_dir().join(format!("{case}.out{i}.npy")))
        .take_while(|p| p.exists())
        .map(|p| read_npy(&p))
        .collect()
}

/// Asserts |got - want| ≤ 1e-4 + 1e-4·|want| elementwise (NaN must match NaN).
pub fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: element count");
    let mut worst = (0usize, 0.0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() && g.is_nan() {
            continue;
        }
        let err = (g - w).abs();
        let tol = 1e-4 + 1e-4 * w.abs();
        assert!(
            err <= tol || (g == w),
            "{what}: element {i}: got {g}, want {w} (|diff| {err} > {tol})"
        );
        if err > worst.1 {
            worst = (i, err);
        }
    }
}

/// Outputs of one run: dtype, shape, values.
pub type Outputs = Vec<(DType, Vec<usize>, Vec<f64>)>;

/// Runs method `forward` of the program `bytes` (any build of fixture `case`: as exported,
/// or lowered) with that fixture's inputs.
// ptera::Error is large by design (context inline, no allocation in the core).
#[allow(clippy::result_large_err)]
pub fn run_program(
    bytes: &[u8],
    case: &str,
    registry: &ptera::Registry<'static>,
) -> Result<Outputs, ptera::Error> {
    use ptera::{MethodMeta, OwnedArenas, Program, Shape};
    let buf;
    let data = if (bytes.as_ptr() as usize).is_multiple_of(16) {
        bytes
    } else {
        buf = AlignedBuf::from_bytes(bytes);
        buf.as_slice()
    };
    let program = Program::load(data)?;
    let meta = MethodMeta::new(&program, "forward", registry)?;
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    let mut method = bufs.load(meta, registry)?;
    for (i, inp) in inputs(case).iter().enumerate() {
        method.set_input(i, inp.dtype, &Shape::new(&inp.shape).unwrap(), &inp.bytes)?;
    }
    method.execute()?;
    let mut outs = Vec::new();
    for i in 0..method.num_outputs() {
        let o = method.output(i)?;
        outs.push((
            o.dtype(),
            o.dims().to_vec(),
            (0..o.numel()).map(|k| o.get_f64(k)).collect(),
        ));
    }
    Ok(outs)
}

/// Asserts that `got` matches fixture `case`'s reference outputs (dtype, shape, values).
pub fn check_outputs(what: &str, got: &Outputs, case: &str) {
    let want = outputs(case);
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (i, ((dt, shape, vals), w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(*dt, w.dtype, "{what} output {i} dtype");
        assert_eq!(shape, &w.shape, "{what} output {i} shape");
        assert_close(&format!("{what} output {i}"), vals, &w.f64());
    }
}
