//! Validation of a method against its program: every value, tensor, list, input, output and
//! instruction is checked, so that loading and execution can rely on indices being in range
//! and tensor data lying inside the program or a planned arena.

use crate::dtype::DType;
use crate::error::Error;
use crate::format::{fb, Program};
use crate::shape::{Shape, MAX_RANK};

use super::layout::{arena_count, arena_size};

/// Checks every EValue; returns the number of tensors.
pub fn values<'p>(program: &Program<'p>, plan: fb::ExecutionPlan<'p>) -> Result<usize, Error> {
    let values = plan.values().unwrap_or_default();
    let n = values.len();
    let mut tensors = 0;
    for (i, ev) in values.iter().enumerate() {
        let tag = ev.val_type();
        let missing = || Error::Invalid {
            what: "value",
            index: i,
            detail: "union member missing",
        };
        let check_idx = |idx: i64, what: &'static str| -> Result<(), Error> {
            if idx < 0 || idx as usize >= n {
                Err(Error::IndexOutOfRange {
                    what,
                    at: i,
                    index: idx,
                    len: n,
                })
            } else {
                Ok(())
            }
        };
        let tensor_at =
            |idx: i32| -> bool { values.get(idx as usize).val_type() == fb::KernelTypes::Tensor };
        match tag {
            fb::KernelTypes::Null => {}
            fb::KernelTypes::Int => drop(ev.val_as_int().ok_or_else(missing)?),
            fb::KernelTypes::Bool => drop(ev.val_as_bool().ok_or_else(missing)?),
            fb::KernelTypes::Double => drop(ev.val_as_double().ok_or_else(missing)?),
            fb::KernelTypes::String => {
                ev.val_as_string().ok_or_else(missing)?;
            }
            fb::KernelTypes::IntList => {
                for idx in ev
                    .val_as_int_list()
                    .ok_or_else(missing)?
                    .items()
                    .unwrap_or_default()
                {
                    check_idx(idx, "IntList item")?;
                }
            }
            fb::KernelTypes::DoubleList => drop(ev.val_as_double_list().ok_or_else(missing)?),
            fb::KernelTypes::BoolList => drop(ev.val_as_bool_list().ok_or_else(missing)?),
            fb::KernelTypes::TensorList | fb::KernelTypes::OptionalTensorList => {
                let (items, optional) = if tag == fb::KernelTypes::TensorList {
                    (ev.val_as_tensor_list().ok_or_else(missing)?.items(), false)
                } else {
                    (
                        ev.val_as_optional_tensor_list()
                            .ok_or_else(missing)?
                            .items(),
                        true,
                    )
                };
                for idx in items.unwrap_or_default() {
                    if optional && idx == -1 {
                        continue;
                    }
                    check_idx(idx as i64, "TensorList item")?;
                    if !tensor_at(idx) {
                        return Err(Error::Invalid {
                            what: "value",
                            index: i,
                            detail: "tensor list item is not a Tensor",
                        });
                    }
                }
            }
            fb::KernelTypes::Tensor => {
                let t = ev.val_as_tensor().ok_or_else(missing)?;
                check_tensor(program, plan, i, t)?;
                tensors += 1;
            }
            _ => {
                return Err(Error::Invalid {
                    what: "value",
                    index: i,
                    detail: "unknown EValue type",
                })
            }
        }
    }
    if tensors > u32::MAX as usize {
        return Err(Error::Invalid {
            what: "method",
            index: 0,
            detail: "too many tensors",
        });
    }
    Ok(tensors)
}

/// Shape, dtype, dim order and data location of one tensor (no memory touched).
/// Returns (dtype, shape, nbytes).
pub fn check_tensor<'p>(
    program: &Program<'p>,
    plan: fb::ExecutionPlan<'p>,
    i: usize,
    t: fb::Tensor<'p>,
) -> Result<(DType, Shape, usize), Error> {
    let bad = |detail| Error::Invalid {
        what: "tensor value",
        index: i,
        detail,
    };
    let dtype = DType::from_scalar_type(t.scalar_type().0).ok_or(Error::UnsupportedDType {
        value: i,
        code: t.scalar_type().0,
    })?;
    if t.storage_offset() != 0 {
        return Err(bad("storage_offset must be 0"));
    }
    let sizes = t.sizes().ok_or(Error::MissingField {
        table: "Tensor",
        field: "sizes",
        index: i,
    })?;
    let order = t.dim_order().ok_or(Error::MissingField {
        table: "Tensor",
        field: "dim_order",
        index: i,
    })?;
    if sizes.len() > MAX_RANK {
        return Err(bad("rank above 16"));
    }
    if order.len() != sizes.len() {
        return Err(bad("dim_order length differs from rank"));
    }
    let mut seen = [false; MAX_RANK];
    for d in order.iter() {
        let d = d as usize;
        if d >= sizes.len() || seen[d] {
            return Err(bad("dim_order is not a permutation"));
        }
        seen[d] = true;
    }
    let mut shape = Shape::scalar();
    let mut nbytes = dtype.size();
    for s in sizes.iter() {
        if s < 0 {
            return Err(bad("negative size"));
        }
        shape.push(s as usize).ok_or(bad("rank above 16"))?;
        nbytes = nbytes
            .checked_mul(s as usize)
            .ok_or(bad("size overflows"))?;
    }
    match t.shape_dynamism() {
        fb::TensorShapeDynamism::STATIC | fb::TensorShapeDynamism::DYNAMIC_BOUND => {}
        _ => return Err(bad("unbounded dynamic shapes are not supported")),
    }
    if let Some(x) = t.extra_tensor_info() {
        if x.location() == fb::TensorDataLocation::EXTERNAL {
            return Err(bad("external (.ptd) tensor data is not supported"));
        }
    }
    if let Some(a) = t.allocation_info() {
        let id = a.memory_id() as usize;
        if id == 0 || id > arena_count(plan) {
            return Err(Error::IndexOutOfRange {
                what: "tensor memory_id",
                at: i,
                index: id as i64,
                len: arena_count(plan) + 1,
            });
        }
        let off = ((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64;
        let size = arena_size(plan, id - 1);
        if off.checked_add(nbytes as u64).is_none_or(|end| end > size) {
            return Err(Error::OutOfBounds {
                what: "planned tensor",
                index: i,
                offset: off,
                size: nbytes as u64,
                limit: size,
            });
        }
        if !off.is_multiple_of(dtype.size() as u64) {
            return Err(bad("planned offset not aligned to its dtype"));
        }
        if t.data_buffer_idx() > 0 {
            program.mutable_initial(t.data_buffer_idx(), nbytes as u64, i)?;
        }
    } else if t.data_buffer_idx() > 0 {
        let data = program.constant(t.data_buffer_idx(), nbytes as u64, i)?;
        if nbytes > 0 && !(data.as_ptr() as usize).is_multiple_of(dtype.size()) {
            let off = data.as_ptr() as usize - program.bytes().as_ptr() as usize;
            return Err(Error::MisalignedConstant {
                value: i,
                offset: off as u64,
                align: dtype.size(),
            });
        }
    }
    Ok((dtype, shape, nbytes))
}

pub fn io(plan: fb::ExecutionPlan<'_>) -> Result<(), Error> {
    let n = plan.values().map_or(0, |v| v.len());
    for (what, list) in [
        ("method input", plan.inputs()),
        ("method output", plan.outputs()),
    ] {
        for (k, idx) in list.unwrap_or_default().iter().enumerate() {
            if idx < 0 || idx as usize >= n {
                return Err(Error::IndexOutOfRange {
                    what,
                    at: k,
                    index: idx as i64,
                    len: n,
                });
            }
        }
    }
    Ok(())
}

pub fn instructions(plan: fb::ExecutionPlan<'_>) -> Result<(), Error> {
    let n = plan.values().map_or(0, |v| v.len());
    let ops = plan.operators().map_or(0, |v| v.len());
    let dels = plan.delegates().map_or(0, |v| v.len());
    let value = |at: usize, what: &'static str, idx: i32| -> Result<(), Error> {
        if idx < 0 || idx as usize >= n {
            Err(Error::IndexOutOfRange {
                what,
                at,
                index: idx as i64,
                len: n,
            })
        } else {
            Ok(())
        }
    };
    for chain in plan.chains().unwrap_or_default() {
        let instrs = chain.instructions().ok_or(Error::MissingField {
            table: "Chain",
            field: "instructions",
            index: 0,
        })?;
        let count = instrs.len();
        for (pc, ins) in instrs.iter().enumerate() {
            let missing = Error::Invalid {
                what: "instruction",
                index: pc,
                detail: "arguments missing",
            };
            match ins.instr_args_type() {
                fb::InstructionArguments::KernelCall => {
                    let k = ins.instr_args_as_kernel_call().ok_or(missing)?;
                    if k.op_index() < 0 || k.op_index() as usize >= ops {
                        return Err(Error::IndexOutOfRange {
                            what: "KernelCall.op_index",
                            at: pc,
                            index: k.op_index() as i64,
                            len: ops,
                        });
                    }
                    for a in k.args().unwrap_or_default() {
                        value(pc, "KernelCall argument", a)?;
                    }
                }
                fb::InstructionArguments::DelegateCall => {
                    let d = ins.instr_args_as_delegate_call().ok_or(missing)?;
                    if d.delegate_index() < 0 || d.delegate_index() as usize >= dels {
                        return Err(Error::IndexOutOfRange {
                            what: "DelegateCall.delegate_index",
                            at: pc,
                            index: d.delegate_index() as i64,
                            len: dels,
                        });
                    }
                    for a in d.args().unwrap_or_default() {
                        value(pc, "DelegateCall argument", a)?;
                    }
                }
                fb::InstructionArguments::MoveCall => {
                    let m = ins.instr_args_as_move_call().ok_or(missing)?;
                    value(pc, "MoveCall.move_from", m.move_from())?;
                    value(pc, "MoveCall.move_to", m.move_to())?;
                }
                fb::InstructionArguments::JumpFalseCall => {
                    let j = ins.instr_args_as_jump_false_call().ok_or(missing)?;
                    value(pc, "JumpFalseCall.cond_value_index", j.cond_value_index())?;
                    let d = j.destination_instruction();
                    if d < 0 || d as usize > count {
                        return Err(Error::IndexOutOfRange {
                            what: "JumpFalseCall.destination_instruction",
                            at: pc,
                            index: d as i64,
                            len: count + 1,
                        });
                    }
                }
                fb::InstructionArguments::FreeCall => {
                    let f = ins.instr_args_as_free_call().ok_or(missing)?;
                    value(pc, "FreeCall.value_index", f.value_index())?;
                }
                _ => {
                    return Err(Error::Invalid {
                        what: "instruction",
                        index: pc,
                        detail: "unknown instruction type",
                    })
                }
            }
        }
    }
    Ok(())
}
