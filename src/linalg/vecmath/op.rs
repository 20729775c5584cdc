//! The operator enums of the slice kernels.

/// Binary arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `min` with NaN propagation (ATen `minimum`).
    Min,
    /// `max` with NaN propagation (ATen `maximum`).
    Max,
}

/// Comparison operators (result 0 or 1 in a `u8` mask).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}
