//! BundledProgram files (`.bpte`, `schema/bundled_program.fbs`): a complete `.pte` plus, per
//! method, test cases (inputs and expected outputs), as ExecuTorch's bundled-program
//! serializer writes them. Read in place like programs: the flatbuffer is verified, the
//! embedded program is borrowed (32-byte aligned inside a 16-aligned file, so it loads with
//! no copy), and every test tensor's byte count is checked against its dtype and shape.

use crate::dtype::DType;
use crate::error::Error;
use crate::shape::Shape;

use super::generated::bundled_program::bundled_program_flatbuffer as bfb;

/// File identifier of a BundledProgram (bytes 4..8).
pub const IDENTIFIER: &[u8; 4] = b"BP08";

const VERIFIER: flatbuffers::VerifierOptions = flatbuffers::VerifierOptions {
    max_depth: 64,
    max_tables: 4_000_000,
    // As large as addresses go (1 TiB on 64-bit targets).
    max_apparent_size: if usize::BITS > 32 {
        1 << 40
    } else {
        usize::MAX
    },
    ignore_missing_null_terminator: false,
};

/// Whether `bytes` look like a BundledProgram (identifier only; [`Bundled::load`] checks all).
pub fn is_bundled(bytes: &[u8]) -> bool {
    bytes.get(4..8) == Some(&IDENTIFIER[..])
}

fn invalid(what: &'static str, index: usize, detail: &'static str) -> Error {
    Error::Invalid {
        what,
        index,
        detail,
    }
}

/// A verified BundledProgram.
#[derive(Clone, Copy)]
pub struct Bundled<'a> {
    root: bfb::BundledProgram<'a>,
    program: &'a [u8],
}

/// One value of a test case.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BundledValue<'a> {
    Tensor {
        dtype: DType,
        shape: Shape,
        bytes: &'a [u8],
    },
    Int(i64),
    Bool(bool),
    Double(f64),
}

/// The test cases of one method.
#[derive(Clone, Copy)]
pub struct Suite<'a> {
    suite: bfb::BundledMethodTestSuite<'a>,
}

/// One test case: inputs in method-input order, expected outputs in method-output order.
#[derive(Clone, Copy)]
pub struct Case<'a> {
    case: bfb::BundledMethodTestCase<'a>,
}

impl<'a> Bundled<'a> {
    /// Verifies `bytes` (16-byte aligned, like a program) as a BundledProgram.
    pub fn load(bytes: &'a [u8]) -> Result<Bundled<'a>, Error> {
        if !is_bundled(bytes) {
            return Err(invalid("bundled program", 0, "identifier BP08 missing"));
        }
        let root = bfb::root_as_bundled_program_with_opts(&VERIFIER, bytes).map_err(|e| {
            let mut detail = heapless::String::<160>::new();
            let mut w = super::TruncWriter(&mut detail);
            let _ = core::fmt::write(&mut w, format_args!("{e}"));
            Error::InvalidFlatbuffer { detail }
        })?;
        let program = root
            .program()
            .map(|p| p.bytes())
            .filter(|p| !p.is_empty())
            .ok_or_else(|| invalid("bundled program", 0, "no embedded program"))?;
        let b = Bundled { root, program };
        // Every test tensor must hold exactly what its dtype and shape say.
        for (si, s) in b.suites().enumerate() {
            for c in s.cases() {
                for v in c.inputs().chain(c.expected_outputs()) {
                    v.map_err(|_| invalid("bundled test tensor", si, "bad dtype, shape or size"))?;
                }
            }
        }
        Ok(b)
    }

    /// The embedded `.pte` (load it with `Program::load`).
    pub fn program(&self) -> &'a [u8] {
        self.program
    }

    pub fn version(&self) -> u32 {
        self.root.version()
    }

    pub fn suites(&self) -> impl Iterator<Item = Suite<'a>> + 'a {
        self.root
            .method_test_suites()
            .into_iter()
            .flatten()
            .map(|suite| Suite { suite })
    }
}

impl<'a> Suite<'a> {
    pub fn method(&self) -> &'a str {
        self.suite.method_name().unwrap_or("")
    }

    pub fn cases(&self) -> impl Iterator<Item = Case<'a>> + 'a {
        self.suite
            .test_cases()
            .into_iter()
            .flatten()
            .map(|case| Case { case })
    }
}

fn value(v: bfb::Value<'_>) -> Result<BundledValue<'_>, Error> {
    let bad = || invalid("bundled value", 0, "unsupported or malformed value");
    match v.val_type() {
        bfb::ValueUnion::Tensor => {
            let t = v.val_as_tensor().ok_or_else(bad)?;
            let dtype = DType::from_scalar_type(t.scalar_type().0).ok_or_else(bad)?;
            let dims: heapless::Vec<usize, { crate::shape::MAX_RANK }> = t
                .sizes()
                .into_iter()
                .flatten()
                .map(|d| usize::try_from(d).map_err(|_| bad()))
                .collect::<Result<_, _>>()
                .map_err(|_| bad())?;
            let shape = Shape::new(&dims).ok_or_else(bad)?;
            let bytes = t.data().map(|d| d.bytes()).unwrap_or_default();
            let want = shape.numel().checked_mul(dtype.size()).ok_or_else(bad)?;
            if bytes.len() != want {
                return Err(bad());
            }
            // Only contiguous (default dim order) tensors are compared.
            if let Some(order) = t.dim_order() {
                if order.iter().enumerate().any(|(i, d)| d as usize != i) {
                    return Err(bad());
                }
            }
            Ok(BundledValue::Tensor {
                dtype,
                shape,
                bytes,
            })
        }
        bfb::ValueUnion::Int => Ok(BundledValue::Int(v.val_as_int().ok_or_else(bad)?.int_val())),
        bfb::ValueUnion::Bool => Ok(BundledValue::Bool(
            v.val_as_bool().ok_or_else(bad)?.bool_val(),
        )),
        bfb::ValueUnion::Double => Ok(BundledValue::Double(
            v.val_as_double().ok_or_else(bad)?.double_val(),
        )),
        _ => Err(bad()),
    }
}

impl<'a> Case<'a> {
    pub fn inputs(&self) -> impl Iterator<Item = Result<BundledValue<'a>, Error>> + 'a {
        self.case.inputs().into_iter().flatten().map(value)
    }

    pub fn expected_outputs(&self) -> impl Iterator<Item = Result<BundledValue<'a>, Error>> + 'a {
        self.case
            .expected_outputs()
            .into_iter()
            .flatten()
            .map(value)
    }
}
