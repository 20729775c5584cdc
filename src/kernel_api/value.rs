//! Runtime values: the decoded EValue table and tensor descriptors, stored in the caller's
//! metadata buffer.

use crate::dtype::DType;
use crate::tensor::{Shape, MAX_RANK};
use flatbuffers::Vector;

/// One runtime EValue. Lists borrow the program's flatbuffer vectors (no copies).
#[derive(Clone, Copy, Debug)]
pub enum Value<'p> {
    None,
    Int(i64),
    Bool(bool),
    Double(f64),
    Str(&'p str),
    /// Indices of Int values (read at use time, so SymInts computed at run time flow in).
    IntList(Vector<'p, i64>),
    DoubleList(Vector<'p, f64>),
    BoolList(Vector<'p, bool>),
    /// Indices of Tensor values.
    TensorList(Vector<'p, i32>),
    /// Indices of Tensor values, -1 = None.
    OptTensorList(Vector<'p, i32>),
    /// Index into the method's tensor table.
    Tensor(u32),
}

impl Value<'_> {
    /// Kind name for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Int(_) => "Int",
            Value::Bool(_) => "Bool",
            Value::Double(_) => "Double",
            Value::Str(_) => "String",
            Value::IntList(_) => "IntList",
            Value::DoubleList(_) => "DoubleList",
            Value::BoolList(_) => "BoolList",
            Value::TensorList(_) => "TensorList",
            Value::OptTensorList(_) => "OptionalTensorList",
            Value::Tensor(_) => "Tensor",
        }
    }
}

/// Shape dynamism of a tensor (`TensorShapeDynamism`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dynamism {
    Static,
    Bound,
}

/// Runtime descriptor of one Tensor EValue.
#[derive(Clone, Copy, Debug)]
pub struct TensorSlot {
    pub dtype: DType,
    pub dynamism: Dynamism,
    /// Memory-planned (inputs are copied in) vs bound at run time.
    pub planned: bool,
    /// False for constants that live in the program bytes.
    pub writable: bool,
    pub contiguous: bool,
    pub dim_order: [u8; MAX_RANK],
    /// Current shape (kernels may resize bound tensors).
    pub shape: Shape,
    /// Data pointer (null when unbound).
    pub data: *mut u8,
    /// Bytes available at `data`.
    pub capacity: usize,
}

impl TensorSlot {
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.shape.numel() * self.dtype.size()
    }

    /// Address range of the current data, empty when there is none.
    pub fn range(&self) -> (usize, usize) {
        let n = self.nbytes();
        if self.data.is_null() || n == 0 {
            (0, 0)
        } else {
            (self.data as usize, self.data as usize + n)
        }
    }
}
