//! The instructions decoded once at load: per instruction (across chains, in order) its kind,
//! its operator or delegate index, its argument list as a plain slice of the program bytes, and
//! the output rows the program reads of it (`exec::demand`). The instruction loop reads this
//! table and nothing of the flatbuffer for kernel and delegate calls.
//!
//! Indices were validated by `exec::validate` before decoding; an argument list that is not a
//! 4-byte-aligned little-endian `i32` array (flatbuffers aligns vectors to their element size
//! within a buffer that `Program::load` requires 16-byte aligned) is refused here.

use crate::error::Error;
use crate::format::fb;
use crate::kernel_api::Prepared;

use super::demand::RowDemand;

/// What an instruction is, for the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Kernel,
    Delegate,
    /// Moves, jumps and frees: decoded from the flatbuffer as they run.
    Other,
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug)]
pub struct Decoded<'p> {
    pub kind: Kind,
    /// Operator index of a kernel call, delegate index of a delegate call.
    pub index: u32,
    /// The call's arguments (value indices, each checked against the value table at load).
    pub args: &'p [i32],
    /// `(value, lo, hi)`: the call only needs rows `lo..hi` of its tensor argument `value`.
    pub rows: Option<(u32, u32, u32)>,
    /// A kernel call's work decided at load (`exec::prepared`), run instead of the kernel.
    pub prepared: Option<Prepared>,
}

impl Decoded<'static> {
    /// A placeholder (an instruction not decoded yet).
    pub const NONE: Decoded<'static> = Decoded {
        kind: Kind::Other,
        index: 0,
        args: &[],
        rows: None,
        prepared: None,
    };
}

/// The argument vector as a slice of the program bytes, if it is a 4-byte-aligned `i32` array
/// on a little-endian machine.
pub(crate) fn as_slice(v: flatbuffers::Vector<'_, i32>) -> Option<&[i32]> {
    let bytes = v.bytes();
    if cfg!(target_endian = "big") || !(bytes.as_ptr() as usize).is_multiple_of(4) {
        return None;
    }
    // SAFETY: `bytes` holds exactly `v.len()` little-endian i32 (flatbuffers vector layout),
    // the pointer is 4-byte aligned (checked above) and this machine is little-endian, so the
    // bytes are `v.len()` valid `i32`; they are borrowed from the program for its lifetime.
    Some(unsafe { core::slice::from_raw_parts(bytes.as_ptr() as *const i32, v.len()) })
}

/// Fills `out` (one entry per instruction, across chains in order) for `plan`, with the row
/// restrictions `demand`.
pub fn decode<'p>(
    plan: fb::ExecutionPlan<'p>,
    demand: &[RowDemand],
    out: &mut [Decoded<'p>],
) -> Result<(), Error> {
    let mut at = 0usize;
    for (ci, chain) in plan.chains().unwrap_or_default().iter().enumerate() {
        for (pc, ins) in chain.instructions().unwrap_or_default().iter().enumerate() {
            let misaligned = Error::Invalid {
                what: "instruction",
                index: pc,
                detail: "argument list not a 4-byte-aligned int array",
            };
            let call = |kind, index: i32, args: Option<flatbuffers::Vector<'p, i32>>| {
                let args = match args {
                    Some(a) => as_slice(a).ok_or(misaligned)?,
                    None => &[],
                };
                Ok::<_, Error>((kind, index as u32, args))
            };
            let (kind, index, args) = match ins.instr_args_type() {
                fb::InstructionArguments::KernelCall => match ins.instr_args_as_kernel_call() {
                    Some(k) => call(Kind::Kernel, k.op_index(), k.args())?,
                    None => (Kind::Other, 0, &[][..]),
                },
                fb::InstructionArguments::DelegateCall => match ins.instr_args_as_delegate_call() {
                    Some(d) => call(Kind::Delegate, d.delegate_index(), d.args())?,
                    None => (Kind::Other, 0, &[][..]),
                },
                _ => (Kind::Other, 0, &[][..]),
            };
            let rows = demand
                .iter()
                .find(|d| d.chain as usize == ci && d.pc as usize == pc)
                .map(|d| (d.value, d.lo, d.hi));
            if let Some(slot) = out.get_mut(at) {
                *slot = Decoded {
                    kind,
                    index,
                    args,
                    rows,
                    prepared: None,
                };
            }
            at += 1;
        }
    }
    Ok(())
}
