//! Output-row demand: which rows of a matmul's output the rest of the program reads.
//!
//! Language-model exports end with `logits = lm_head(hidden)` over every position followed by
//! `select_copy(logits, dim = -2, index = -1)`: only the last position's row is ever read. For
//! GPT-2 at T = 128 the LM head is about 30 % of the forward's MACs, 127/128 of them for rows
//! nobody reads. [`analyse`] finds that pattern when loading a method; the instruction that
//! produces the matrix is then told (through `KernelCtx::demanded_rows`) that only rows
//! `lo..hi` of that output argument are needed, and matmul kernels (portable `mm`, `addmm`,
//! `linear`; the XNNPACK delegate's fully-connected nodes) compute only those rows. The other
//! rows are left unwritten: their storage is dead by construction.
//!
//! The pattern is accepted only when it is provably safe, from the program alone:
//! * the chain has no jumps (straight-line code, so "before" and "after" are positions);
//! * `select_copy.int_out(X, dim, index, out)` with a static X of rank ≥ 2 whose leading dims
//!   before `dim = rank - 2` are all 1, so row `index` is one contiguous run;
//! * the instruction right before it writes a tensor argument at X's exact address with X's
//!   byte size (X is that tensor or a view of it) and is a `KernelCall` to `aten::mm.out`,
//!   `aten::addmm.out`, `aten::linear.out` or a `DelegateCall`;
//! * `dim` and `index` are Int values no other instruction names (prim ops write Ints at run
//!   time; a load-time reading must be the value the select will see);
//! * the select's output does not overlap X, no method output overlaps X, and no later
//!   instruction (in this chain or a later one) names any tensor overlapping X's bytes.

use crate::format::fb;

use crate::kernel_api::{Dynamism, TensorSlot, Value};

/// Instruction `pc` of chain `chain` only needs rows `lo..hi` of its tensor argument `value`
/// (the tensor viewed as `[numel / last_dim, last_dim]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowDemand {
    pub chain: u32,
    pub pc: u32,
    pub value: u32,
    pub lo: u32,
    pub hi: u32,
}

/// At most this many restrictions are kept per method (one per language-model head).
pub const MAX_DEMANDS: usize = 4;

/// Matmul kernels that honour a row demand on their output.
const ROW_KERNELS: [(&str, &str); 3] = [
    ("aten::mm", "out"),
    ("aten::addmm", "out"),
    ("aten::linear", "out"),
];

fn tensor<'t>(values: &[Value<'_>], tensors: &'t [TensorSlot], v: i32) -> Option<&'t TensorSlot> {
    match values.get(usize::try_from(v).ok()?)? {
        Value::Tensor(t) => tensors.get(*t as usize),
        _ => None,
    }
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// Whether an instruction names a tensor whose bytes overlap `x` (as an argument or inside a
/// tensor list); a move of such a tensor, an unknown instruction kind or an unreadable
/// argument count as naming it.
fn touches(
    ins: fb::Instruction<'_>,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
    x: (usize, usize),
) -> bool {
    let args = match ins.instr_args_type() {
        fb::InstructionArguments::KernelCall => {
            ins.instr_args_as_kernel_call().and_then(|k| k.args())
        }
        fb::InstructionArguments::DelegateCall => {
            ins.instr_args_as_delegate_call().and_then(|d| d.args())
        }
        fb::InstructionArguments::MoveCall => {
            // A move of X's value elsewhere would let a later reader see it.
            return ins.instr_args_as_move_call().is_none_or(|m| {
                tensor(values, tensors, m.move_from()).is_none_or(|t| overlaps(t.range(), x))
            });
        }
        fb::InstructionArguments::FreeCall => return false,
        _ => return true,
    };
    let Some(args) = args else {
        return false;
    };
    for a in args.iter() {
        let hit = |i: i32| tensor(values, tensors, i).is_some_and(|t| overlaps(t.range(), x));
        let Some(v) = usize::try_from(a).ok().and_then(|i| values.get(i)) else {
            return true;
        };
        let listed = match v {
            Value::TensorList(l) | Value::OptTensorList(l) => l.iter().any(hit),
            _ => hit(a),
        };
        if listed {
            return true;
        }
    }
    false
}

/// Whether any instruction other than `skip` (chain, pc) names value `v` as an argument or a
/// move target.
fn named_elsewhere(
    chains: flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<fb::Chain<'_>>>,
    skip: (usize, usize),
    v: i32,
) -> bool {
    for (ci, chain) in chains.iter().enumerate() {
        for (pc, ins) in chain.instructions().unwrap_or_default().iter().enumerate() {
            if (ci, pc) == skip {
                continue;
            }
            let hit = match ins.instr_args_type() {
                fb::InstructionArguments::KernelCall => ins
                    .instr_args_as_kernel_call()
                    .and_then(|k| k.args())
                    .is_some_and(|a| a.iter().any(|x| x == v)),
                fb::InstructionArguments::DelegateCall => ins
                    .instr_args_as_delegate_call()
                    .and_then(|d| d.args())
                    .is_some_and(|a| a.iter().any(|x| x == v)),
                fb::InstructionArguments::MoveCall => ins
                    .instr_args_as_move_call()
                    .is_none_or(|m| m.move_to() == v),
                _ => false,
            };
            if hit {
                return true;
            }
        }
    }
    false
}

/// Row demands of a loaded method's chains (see the module documentation for the rules).
pub fn analyse(
    plan: fb::ExecutionPlan<'_>,
    values: &[Value<'_>],
    tensors: &[TensorSlot],
) -> heapless::Vec<RowDemand, MAX_DEMANDS> {
    let mut out = heapless::Vec::new();
    let ops = plan.operators().unwrap_or_default();
    let op_is = |k: fb::KernelCall<'_>, name: &str, overload: &str| {
        let i = k.op_index() as usize;
        i < ops.len() && {
            let op = ops.get(i);
            op.name() == Some(name) && op.overload().unwrap_or("") == overload
        }
    };
    let chains = plan.chains().unwrap_or_default();
    let outputs = plan.outputs().unwrap_or_default();
    for (ci, chain) in chains.iter().enumerate() {
        let instrs = chain.instructions().unwrap_or_default();
        if instrs
            .iter()
            .any(|i| i.instr_args_type() == fb::InstructionArguments::JumpFalseCall)
        {
            continue;
        }
        for pc in 1..instrs.len() {
            let Some(sel) = instrs.get(pc).instr_args_as_kernel_call() else {
                continue;
            };
            if !op_is(sel, "aten::select_copy", "int_out") {
                continue;
            }
            let Some(args) = sel.args() else { continue };
            if args.len() < 4 {
                continue;
            }
            let Some(x) = tensor(values, tensors, args.get(0)) else {
                continue;
            };
            let Some(o) = tensor(values, tensors, args.get(3)) else {
                continue;
            };
            let int = |i: i32| match usize::try_from(i).ok().and_then(|i| values.get(i)) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
            let (Some(dim), Some(index)) = (int(args.get(1)), int(args.get(2))) else {
                continue;
            };
            if named_elsewhere(chains, (ci, pc), args.get(1))
                || named_elsewhere(chains, (ci, pc), args.get(2))
            {
                continue;
            }
            let dims = x.shape.dims();
            let r = dims.len();
            if r < 2 || x.dynamism != Dynamism::Static || !x.contiguous || !x.planned {
                continue;
            }
            let d = if dim < 0 { dim + r as i64 } else { dim };
            if d != r as i64 - 2 || dims[..r - 2].iter().any(|&s| s != 1) {
                continue;
            }
            let rows = dims[r - 2] as i64;
            let row = if index < 0 { index + rows } else { index };
            if !(0..rows).contains(&row) {
                continue;
            }
            let xr = x.range();
            if xr.0 == xr.1 || overlaps(o.range(), xr) {
                continue;
            }
            if outputs
                .iter()
                .any(|v| tensor(values, tensors, v).is_none_or(|t| overlaps(t.range(), xr)))
            {
                continue;
            }
            // The producer: the instruction right before, writing X's exact bytes.
            let prev = instrs.get(pc - 1);
            let prev_args = match prev.instr_args_type() {
                fb::InstructionArguments::KernelCall => {
                    prev.instr_args_as_kernel_call().and_then(|k| {
                        ROW_KERNELS
                            .iter()
                            .any(|&(n, o)| op_is(k, n, o))
                            .then(|| k.args())
                            .flatten()
                    })
                }
                fb::InstructionArguments::DelegateCall => {
                    prev.instr_args_as_delegate_call().and_then(|d| d.args())
                }
                _ => None,
            };
            let Some(prev_args) = prev_args else { continue };
            let Some(y) = prev_args.iter().find(|&a| {
                tensor(values, tensors, a).is_some_and(|t| {
                    t.range() == xr
                        && t.dynamism == Dynamism::Static
                        && t.contiguous
                        && t.shape.dims().last() == dims.last()
                })
            }) else {
                continue;
            };
            // Nobody reads X's bytes afterwards.
            let later = instrs.iter().skip(pc + 1).chain(
                chains
                    .iter()
                    .skip(ci + 1)
                    .flat_map(|c| c.instructions().unwrap_or_default().iter()),
            );
            let mut read_later = false;
            for ins in later {
                if touches(ins, values, tensors, xr) {
                    read_later = true;
                    break;
                }
            }
            if read_later {
                continue;
            }
            let d = RowDemand {
                chain: ci as u32,
                pc: (pc - 1) as u32,
                value: y as u32,
                lo: row as u32,
                hi: row as u32 + 1,
            };
            if out.push(d).is_err() {
                return out;
            }
        }
    }
    out
}
