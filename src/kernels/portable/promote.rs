//! ATen type promotion: the `result_type` of a kernel's operands (`Promo`: dimensioned
//! tensors over zero-dim tensors over Python scalars, combined by category), the cast rule
//! from the computation dtype to the out dtype (`can_cast`, `check_cast`), the rounding of a
//! wider computation back through the common dtype (`renormalize`), and the right operand of a
//! binary op, tensor or Scalar (`Rhs`).

use super::common::Res;
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::tensor::{read_f64, read_i64, write_f64, write_i64, TensorMut, TensorRef};

/// ATen `result_type` state: dimensioned tensors, zero-dim tensors and wrapped scalars are
/// promoted separately, then combined by category.
#[derive(Default, Clone, Copy)]
pub(super) struct Promo {
    dim: Option<DType>,
    zero: Option<DType>,
    wrapped: Option<DType>,
}

fn join(a: Option<DType>, b: DType) -> Option<DType> {
    Some(a.map_or(b, |a| DType::promote(a, b)))
}

/// ATen `combine_categories(higher, lower)`.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_float() {
                Some(h)
            } else if h == DType::Bool || l.is_float() {
                Some(DType::promote(h, l))
            } else {
                Some(h)
            }
        }
    }
}

impl Promo {
    pub(super) fn tensor(mut self, t: &TensorRef<'_>) -> Promo {
        if t.rank() == 0 {
            self.zero = join(self.zero, t.dtype());
        } else {
            self.dim = join(self.dim, t.dtype());
        }
        self
    }
    /// A Python scalar (`Double` counts as the default dtype float32).
    pub(super) fn scalar(mut self, s: Scalar) -> Promo {
        self.wrapped = join(self.wrapped, s.dtype());
        self
    }
    pub(super) fn rhs(self, r: Rhs<'_>) -> Promo {
        match r {
            Rhs::T(t) => self.tensor(&t),
            Rhs::S(s) => self.scalar(s),
        }
    }
    pub(super) fn result(self) -> DType {
        combine(self.dim, combine(self.zero, self.wrapped)).unwrap_or(DType::F32)
    }
}

/// ATen `canCast`: no float → integral/bool and no non-bool → bool.
pub(super) fn can_cast(from: DType, to: DType) -> bool {
    let float_to_int = from.is_float() && !to.is_float();
    let to_bool = from != DType::Bool && to == DType::Bool;
    !float_to_int && !to_bool
}

/// [`can_cast`] as a check: `DTypeMismatch` on argument `arg` when `from` may not be cast to `to`.
pub(super) fn check_cast(from: DType, to: DType, arg: usize) -> Res {
    if can_cast(from, to) {
        Ok(())
    } else {
        Err(KernelError::DTypeMismatch {
            arg,
            expected: from,
            got: to,
        })
    }
}

/// Rounds every output element through the `common` dtype when the computation ran in a
/// wider type than ATen's (bool, narrow integers, half floats) and the out dtype differs:
/// ATen computes in the common dtype and only then casts to out.
pub(super) fn renormalize(out: &mut TensorMut<'_>, common: DType) {
    let od = out.dtype();
    if od == common || matches!(common, DType::F32 | DType::F64 | DType::I64 | DType::U64) {
        return;
    }
    let n = out.numel();
    let b = out.bytes_mut();
    let mut t = [0u8; 8];
    for i in 0..n {
        if common.is_float() {
            write_f64(common, &mut t, 0, read_f64(od, b, i));
            write_f64(od, b, i, read_f64(common, &t, 0));
        } else {
            write_i64(common, &mut t, 0, read_i64(od, b, i));
            write_i64(od, b, i, read_i64(common, &t, 0));
        }
    }
}

/// The right operand of a binary op: a tensor, or a Scalar (the `.Scalar_out` overloads).
#[derive(Clone, Copy)]
pub(super) enum Rhs<'a> {
    T(TensorRef<'a>),
    S(Scalar),
}

impl Rhs<'_> {
    pub(super) fn dtype(&self) -> DType {
        match self {
            Rhs::T(t) => t.dtype(),
            Rhs::S(s) => s.dtype(),
        }
    }
}
