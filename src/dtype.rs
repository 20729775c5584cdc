//! Element types of tensors (ExecuTorch `ScalarType`) and the conversions kernels need.

use core::fmt;

/// Element type of a tensor. Discriminants are ExecuTorch's `ScalarType` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    U8 = 0,
    I8 = 1,
    I16 = 2,
    I32 = 3,
    I64 = 4,
    F16 = 5,
    F32 = 6,
    F64 = 7,
    Bool = 11,
    BF16 = 15,
    U16 = 27,
    U32 = 28,
    U64 = 29,
}

impl DType {
    /// Maps a serialized `ScalarType` value; `None` for reserved or unsupported codes
    /// (quantized and float8 types are not executed by ptera).
    pub fn from_scalar_type(code: i8) -> Option<DType> {
        Some(match code {
            0 => DType::U8,
            1 => DType::I8,
            2 => DType::I16,
            3 => DType::I32,
            4 => DType::I64,
            5 => DType::F16,
            6 => DType::F32,
            7 => DType::F64,
            11 => DType::Bool,
            15 => DType::BF16,
            27 => DType::U16,
            28 => DType::U32,
            29 => DType::U64,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::I16 | DType::F16 | DType::BF16 | DType::U16 => 2,
            DType::I32 | DType::F32 | DType::U32 => 4,
            DType::I64 | DType::F64 | DType::U64 => 8,
        }
    }

    /// Floating point types (the ones ATen promotes integers to).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64 | DType::BF16)
    }

    /// Integral types, `Bool` excluded.
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8
                | DType::I8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }

    /// The numpy name (`float32`, `int64`, `bool`, ...), used by the CLI and `.npy` files.
    pub const fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bool => "bool",
            DType::BF16 => "bfloat16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }

    /// Kind rank used by type promotion: bool < integral < floating.
    const fn category(self) -> u8 {
        if matches!(self, DType::Bool) {
            0
        } else if self.is_float() {
            2
        } else {
            1
        }
    }

    /// ATen's `promote_types` for the types ptera computes in.
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        let (ca, cb) = (a.category(), b.category());
        if ca != cb {
            return if ca > cb { a } else { b };
        }
        match ca {
            2 => {
                // f16 with bf16 promotes to f32, otherwise the wider float wins.
                if a.size() == b.size() {
                    DType::F32
                } else if a.size() > b.size() {
                    a
                } else {
                    b
                }
            }
            1 => {
                let signed =
                    |d: DType| matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64);
                if signed(a) == signed(b) {
                    if a.size() >= b.size() {
                        a
                    } else {
                        b
                    }
                } else {
                    // mixed signedness: the smallest signed type holding both
                    let (s, u) = if signed(a) { (a, b) } else { (b, a) };
                    if s.size() > u.size() {
                        s
                    } else {
                        match u.size() {
                            1 => DType::I16,
                            2 => DType::I32,
                            _ => DType::I64,
                        }
                    }
                }
            }
            _ => DType::Bool,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime scalar (ATen `Scalar`): what `Int`, `Double` and `Bool` EValues carry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Int(i64),
    Double(f64),
    Bool(bool),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::Double(v) => v,
            Scalar::Bool(v) => v as u8 as f64,
        }
    }

    /// Integer value; doubles truncate toward zero like a C cast.
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Int(v) => v,
            Scalar::Double(v) => v as i64,
            Scalar::Bool(v) => v as i64,
        }
    }

    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Int(v) => v != 0,
            Scalar::Double(v) => v != 0.0,
            Scalar::Bool(v) => v,
        }
    }

    /// The dtype this scalar has when it takes part in type promotion
    /// (`Int` → int64, `Double` → float32 default dtype, `Bool` → bool).
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Int(_) => DType::I64,
            Scalar::Double(_) => DType::F32,
            Scalar::Bool(_) => DType::Bool,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_aten() {
        assert_eq!(DType::promote(DType::I64, DType::F32), DType::F32);
        assert_eq!(DType::promote(DType::Bool, DType::I64), DType::I64);
        assert_eq!(DType::promote(DType::Bool, DType::F32), DType::F32);
        assert_eq!(DType::promote(DType::I32, DType::I64), DType::I64);
        assert_eq!(DType::promote(DType::U8, DType::I8), DType::I16);
        assert_eq!(DType::promote(DType::F16, DType::BF16), DType::F32);
        assert_eq!(DType::promote(DType::F64, DType::F32), DType::F64);
    }

    #[test]
    fn scalar_type_codes_round_trip() {
        for code in 0i8..40 {
            if let Some(d) = DType::from_scalar_type(code) {
                assert_eq!(d as u8 as i8, code);
            }
        }
        assert_eq!(DType::from_scalar_type(12), None);
    }
}
