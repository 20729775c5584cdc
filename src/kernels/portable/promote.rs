//! ATen type promotion and cast rules shared by the kernel families.

use crate::dtype::DType;

/// ATen `canCast`: no float → integral/bool and no non-bool → bool.
pub(super) fn can_cast(from: DType, to: DType) -> bool {
    let float_to_int = from.is_float() && !to.is_float();
    let to_bool = from != DType::Bool && to == DType::Bool;
    !float_to_int && !to_bool
}
