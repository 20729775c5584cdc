//! Running a BundledProgram's test cases (`format::bundled`) on a loaded method: inputs set in
//! order, one execute per case, every output compared with the expected one elementwise,
//! `|got - want| <= atol + rtol * |want|` (NaN equals NaN), shapes equal. No heap: a bare-metal
//! image checks itself the same way.

use crate::error::Error;
use crate::format::bundled::{BundledValue, Case};
use crate::method::Method;
use crate::tensor::read_f64;

/// What one test case gave.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcome {
    pub outputs: usize,
    /// Elements outside the tolerance (a shape or dtype mismatch counts every element).
    pub mismatches: usize,
    /// The largest |got - want| and where: (output, element).
    pub worst: f64,
    pub worst_at: (usize, usize),
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// Runs `case` on `method` and compares its outputs.
pub fn run_case(
    method: &mut Method<'_, '_>,
    case: &Case<'_>,
    atol: f64,
    rtol: f64,
) -> Result<Outcome, Error> {
    for (i, v) in case.inputs().enumerate() {
        match v? {
            BundledValue::Tensor {
                dtype,
                shape,
                bytes,
            } => method.set_input(i, dtype, &shape, bytes)?,
            _ => {
                return Err(Error::Invalid {
                    what: "bundled input",
                    index: i,
                    detail: "only tensor inputs can be set",
                })
            }
        }
    }
    method.execute()?;
    let mut out = Outcome::default();
    let n = method.num_outputs();
    for (k, want) in case.expected_outputs().enumerate() {
        out.outputs += 1;
        let want = want?;
        if k >= n {
            out.mismatches += 1;
            continue;
        }
        let got = method.output(k)?;
        let BundledValue::Tensor {
            dtype,
            shape,
            bytes,
        } = want
        else {
            out.mismatches += 1;
            continue;
        };
        if got.dims() != shape.dims() || got.dtype() != dtype {
            out.mismatches += shape.numel().max(1);
            continue;
        }
        for e in 0..shape.numel() {
            let (g, w) = (got.get_f64(e), read_f64(dtype, bytes, e));
            if g.is_nan() && w.is_nan() {
                continue;
            }
            let d = (g - w).abs();
            // A NaN difference (one side NaN) is outside any tolerance.
            let within = d <= atol + rtol * w.abs();
            if !within {
                out.mismatches += 1;
            }
            if d > out.worst || d.is_nan() {
                out.worst = d;
                out.worst_at = (k, e);
            }
        }
    }
    if out.outputs != n {
        out.mismatches += 1;
    }
    Ok(out)
}
