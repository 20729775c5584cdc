//! Typed errors. Every error says where it happened: which value, instruction, operator,
//! argument, arena or segment. No allocation: names are copied into fixed-size strings.

use core::fmt::{self, Write};

use crate::dtype::DType;
use crate::shape::Shape;

/// A short owned name (operator, backend, method) carried by an error.
pub type Name = heapless::String<96>;

/// Copies `s` into a [`Name`], cutting it (on a char boundary, with `...`) if it is too long.
pub fn name(s: &str) -> Name {
    let mut out = Name::new();
    push_truncated(&mut out, s);
    out
}

pub(crate) fn push_truncated<const N: usize>(out: &mut heapless::String<N>, s: &str) {
    if out.push_str(s).is_ok() {
        return;
    }
    for c in s.chars() {
        if out.len() + c.len_utf8() + 3 > N {
            break;
        }
        let _ = out.push(c);
    }
    let _ = out.push_str("...");
}

/// Errors from loading a program, loading a method, binding inputs or executing.
// Variants carry their context inline (no allocation); errors are rare, so size is fine.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The buffer ends before a structure that must be there.
    Truncated {
        what: &'static str,
        needed: u64,
        len: u64,
    },
    /// Bytes 4..8 are not the `ET12` file identifier.
    BadIdentifier { found: [u8; 4] },
    /// The `eh00` extended header is inconsistent.
    BadHeader { detail: &'static str },
    /// The program buffer does not start at a 16-byte aligned address.
    MisalignedBuffer { address: usize },
    /// The flatbuffer verifier rejected the program table.
    InvalidFlatbuffer { detail: heapless::String<160> },
    /// A required table field is absent.
    MissingField {
        table: &'static str,
        field: &'static str,
        index: usize,
    },
    /// An index stored in the file points outside the table it indexes.
    IndexOutOfRange {
        what: &'static str,
        at: usize,
        index: i64,
        len: usize,
    },
    /// A segment, constant or payload extends past the data it lives in.
    OutOfBounds {
        what: &'static str,
        index: usize,
        offset: u64,
        size: u64,
        limit: u64,
    },
    /// A structural rule of the format is broken (see `detail`).
    Invalid {
        what: &'static str,
        index: usize,
        detail: &'static str,
    },
    /// A tensor uses an element type ptera does not execute.
    UnsupportedDType { value: usize, code: i8 },
    /// Constant data of a tensor is not aligned for its element type.
    MisalignedConstant {
        value: usize,
        offset: u64,
        align: usize,
    },
    /// No execution plan has this name.
    MethodNotFound { name: Name },
    /// The caller passed the wrong number of planned arenas.
    ArenaCount { expected: usize, got: usize },
    /// A planned arena is smaller than the program's memory plan needs.
    ArenaTooSmall {
        memory_id: usize,
        needed: u64,
        got: usize,
    },
    /// A planned arena does not start at a 16-byte aligned address.
    ArenaMisaligned { memory_id: usize },
    /// The metadata buffer is too small for the method's runtime tables.
    MetadataTooSmall { needed: usize, got: usize },
    /// Operators with no kernel in the registry (all of them, comma separated).
    MissingOperators {
        count: usize,
        names: heapless::String<1024>,
    },
    /// A `DelegateCall` names a backend that is not registered.
    UnknownBackend { delegate: usize, backend: Name },
    /// A backend rejected its payload at load time.
    DelegateInit {
        delegate: usize,
        backend: Name,
        detail: Name,
    },
    /// `set_input` index past the method's inputs.
    InputIndex { index: usize, count: usize },
    /// Input of the wrong kind (tensor vs scalar) or dtype.
    InputDType {
        index: usize,
        expected: DType,
        got: DType,
    },
    /// Input whose shape does not fit the planned tensor.
    InputShape {
        index: usize,
        expected: Shape,
        got: Shape,
    },
    /// A primitive input differs from the value baked in at export.
    InputValue { index: usize },
    /// `execute` called before every input was set.
    InputNotSet { index: usize },
    /// A kernel failed; carries the instruction, operator and the kernel's own error.
    Kernel {
        instruction: usize,
        operator: Name,
        source: KernelError,
    },
    /// A delegate failed at run time.
    Delegate {
        instruction: usize,
        backend: Name,
        source: KernelError,
    },
    /// Control flow went wrong (bad jump target, non-boolean condition, runaway loop).
    Execution {
        instruction: usize,
        detail: &'static str,
    },
    /// The run executed more instructions than its budget (`Method::set_step_limit`; a
    /// program may loop with `JumpFalseCall`).
    StepLimit {
        chain: usize,
        instruction: usize,
        limit: u64,
    },
    /// Output index past the method's outputs, or an output that is not a tensor.
    OutputIndex { index: usize, count: usize },
    /// An output tensor has no storage after `execute` (declared without a memory plan or
    /// data, or freed by a `FreeCall`), so there is nothing to read.
    OutputNoData { index: usize, value: usize },
    /// The host could not allocate the buffers a method asks for (`std` helpers only).
    HostAllocation { bytes: u64 },
}

/// Errors raised by one kernel (or delegate node) about its arguments.
/// `arg` is the position in the instruction's argument list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelError {
    ArgCount {
        expected: usize,
        got: usize,
    },
    ArgType {
        arg: usize,
        expected: &'static str,
        got: &'static str,
    },
    UnsupportedDType {
        arg: usize,
        dtype: DType,
    },
    DTypeMismatch {
        arg: usize,
        expected: DType,
        got: DType,
    },
    Shape {
        arg: usize,
        detail: &'static str,
    },
    /// An output cannot take the computed shape (capacity or static shape).
    Resize {
        arg: usize,
        needed: Shape,
        capacity_bytes: usize,
        is_static: bool,
    },
    NonContiguous {
        arg: usize,
    },
    /// An output overlaps an input of the same call.
    Aliasing {
        arg: usize,
    },
    Misaligned {
        arg: usize,
    },
    /// The output is a constant (read-only program data).
    ReadOnly {
        arg: usize,
    },
    /// The tensor has no data pointer (unplanned and never bound).
    NoData {
        arg: usize,
    },
    Value {
        arg: usize,
        detail: &'static str,
    },
    IndexOutOfBounds {
        arg: usize,
        index: i64,
        size: usize,
    },
    Scratch {
        needed: usize,
        got: usize,
    },
    Unsupported {
        detail: &'static str,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use KernelError::*;
        match self {
            ArgCount { expected, got } => write!(f, "expected {expected} arguments, got {got}"),
            ArgType { arg, expected, got } => {
                write!(f, "argument {arg}: expected {expected}, got {got}")
            }
            UnsupportedDType { arg, dtype } => {
                write!(f, "argument {arg}: dtype {dtype} not supported")
            }
            DTypeMismatch { arg, expected, got } => {
                write!(f, "argument {arg}: expected dtype {expected}, got {got}")
            }
            Shape { arg, detail } => write!(f, "argument {arg}: {detail}"),
            Resize {
                arg,
                needed,
                capacity_bytes,
                is_static,
            } => {
                if *is_static {
                    write!(
                        f,
                        "argument {arg}: static output cannot take shape {needed}"
                    )
                } else {
                    write!(
                        f,
                        "argument {arg}: shape {needed} exceeds capacity of {capacity_bytes} bytes"
                    )
                }
            }
            NonContiguous { arg } => {
                write!(f, "argument {arg}: non-contiguous dim_order not supported")
            }
            Aliasing { arg } => write!(f, "argument {arg}: output overlaps an input"),
            Misaligned { arg } => write!(f, "argument {arg}: data not aligned for its dtype"),
            ReadOnly { arg } => write!(f, "argument {arg}: output is read-only constant data"),
            NoData { arg } => write!(f, "argument {arg}: tensor has no data"),
            Value { arg, detail } => write!(f, "argument {arg}: {detail}"),
            IndexOutOfBounds { arg, index, size } => {
                write!(
                    f,
                    "argument {arg}: index {index} out of bounds for size {size}"
                )
            }
            Scratch { needed, got } => write!(
                f,
                "kernel scratch too small: need {needed} bytes, have {got}"
            ),
            Unsupported { detail } => write!(f, "unsupported: {detail}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Error::*;
        match self {
            Truncated { what, needed, len } => {
                write!(
                    f,
                    "truncated file: {what} needs {needed} bytes, buffer has {len}"
                )
            }
            BadIdentifier { found } => {
                f.write_str("not an ExecuTorch program: file identifier is ")?;
                for b in found {
                    if b.is_ascii_graphic() {
                        f.write_char(*b as char)?;
                    } else {
                        write!(f, "\\x{b:02x}")?;
                    }
                }
                f.write_str(", expected ET12")
            }
            BadHeader { detail } => write!(f, "bad extended header: {detail}"),
            MisalignedBuffer { address } => {
                write!(f, "program buffer at {address:#x} is not 16-byte aligned")
            }
            InvalidFlatbuffer { detail } => write!(f, "invalid program flatbuffer: {detail}"),
            MissingField {
                table,
                field,
                index,
            } => write!(f, "{table} #{index}: missing required field `{field}`"),
            IndexOutOfRange {
                what,
                at,
                index,
                len,
            } => {
                write!(f, "{what} (at #{at}): index {index} out of range 0..{len}")
            }
            OutOfBounds {
                what,
                index,
                offset,
                size,
                limit,
            } => write!(
                f,
                "{what} #{index}: bytes {offset}..{} exceed the available {limit} bytes",
                offset.saturating_add(*size)
            ),
            Invalid {
                what,
                index,
                detail,
            } => write!(f, "{what} #{index}: {detail}"),
            UnsupportedDType { value, code } => {
                write!(f, "value #{value}: scalar type {code} not supported")
            }
            MisalignedConstant {
                value,
                offset,
                align,
            } => {
                write!(
                    f,
                    "value #{value}: constant data at offset {offset} is not {align}-byte aligned"
                )
            }
            MethodNotFound { name } => write!(f, "no method named `{name}`"),
            ArenaCount { expected, got } => {
                write!(f, "memory plan has {expected} arenas, {got} given")
            }
            ArenaTooSmall {
                memory_id,
                needed,
                got,
            } => {
                write!(
                    f,
                    "arena for memory_id {memory_id} too small: need {needed} bytes, got {got}"
                )
            }
            ArenaMisaligned { memory_id } => {
                write!(f, "arena for memory_id {memory_id} is not 16-byte aligned")
            }
            MetadataTooSmall { needed, got } => {
                write!(
                    f,
                    "metadata buffer too small: need {needed} bytes, got {got}"
                )
            }
            MissingOperators { count, names } => {
                write!(f, "{count} operator(s) have no kernel: {names}")
            }
            UnknownBackend { delegate, backend } => {
                write!(
                    f,
                    "delegate #{delegate}: backend `{backend}` is not registered"
                )
            }
            DelegateInit {
                delegate,
                backend,
                detail,
            } => {
                write!(f, "delegate #{delegate} ({backend}): {detail}")
            }
            InputIndex { index, count } => write!(f, "input {index}: method has {count} inputs"),
            InputDType {
                index,
                expected,
                got,
            } => {
                write!(f, "input {index}: expected dtype {expected}, got {got}")
            }
            InputShape {
                index,
                expected,
                got,
            } => {
                write!(f, "input {index}: expected shape {expected}, got {got}")
            }
            InputValue { index } => write!(
                f,
                "input {index}: value differs from the one fixed at export"
            ),
            InputNotSet { index } => write!(f, "input {index} was not set"),
            StepLimit {
                chain,
                instruction,
                limit,
            } => write!(
                f,
                "chain {chain}, instruction {instruction}: more than {limit} instructions executed \
                 (the run's step limit)"
            ),
            OutputNoData { index, value } => write!(
                f,
                "output {index} (value {value}) has no storage: it is neither memory-planned nor written"
            ),
            Kernel {
                instruction,
                operator,
                source,
            } => {
                write!(f, "instruction {instruction} ({operator}): {source}")
            }
            Delegate {
                instruction,
                backend,
                source,
            } => {
                write!(
                    f,
                    "instruction {instruction} (delegate {backend}): {source}"
                )
            }
            Execution {
                instruction,
                detail,
            } => write!(f, "instruction {instruction}: {detail}"),
            OutputIndex { index, count } => {
                write!(f, "output {index}: method has {count} tensor outputs")
            }
            HostAllocation { bytes } => {
                write!(f, "cannot allocate {bytes} bytes for the method's buffers")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
#[cfg(feature = "std")]
impl std::error::Error for KernelError {}
