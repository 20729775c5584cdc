//! The value table of a loaded method: every EValue decoded from the plan, every tensor
//! pointed at program bytes (constants) or its planned arena, initial state of mutable
//! buffers copied in.

use crate::error::Error;
use crate::format::{fb, Program};
use crate::kernel_api::{Dynamism, TensorSlot, Value};
use crate::shape::MAX_RANK;

use super::validate::check_tensor;

/// Fills `values` and `tensors` (sized by `MethodMeta`: one entry per EValue and per tensor)
/// from a validated `plan`. `arenas[k]` is the base and length of memory id `k + 1`.
pub fn fill<'p>(
    program: &Program<'p>,
    plan: fb::ExecutionPlan<'p>,
    values: &mut [Value<'p>],
    tensors: &mut [TensorSlot],
    arenas: &[(*mut u8, usize)],
) -> Result<(), Error> {
    let mut next_tensor = 0usize;
    for (i, ev) in plan.values().unwrap_or_default().iter().enumerate() {
        values[i] = match ev.val_type() {
            fb::KernelTypes::Int => Value::Int(ev.val_as_int().map_or(0, |v| v.int_val())),
            fb::KernelTypes::Bool => Value::Bool(ev.val_as_bool().is_some_and(|v| v.bool_val())),
            fb::KernelTypes::Double => {
                Value::Double(ev.val_as_double().map_or(0.0, |v| v.double_val()))
            }
            fb::KernelTypes::String => Value::Str(
                ev.val_as_string()
                    .and_then(|s| s.string_val())
                    .unwrap_or(""),
            ),
            fb::KernelTypes::IntList => Value::IntList(
                ev.val_as_int_list()
                    .and_then(|l| l.items())
                    .unwrap_or_default(),
            ),
            fb::KernelTypes::DoubleList => Value::DoubleList(
                ev.val_as_double_list()
                    .and_then(|l| l.items())
                    .unwrap_or_default(),
            ),
            fb::KernelTypes::BoolList => Value::BoolList(
                ev.val_as_bool_list()
                    .and_then(|l| l.items())
                    .unwrap_or_default(),
            ),
            fb::KernelTypes::TensorList => Value::TensorList(
                ev.val_as_tensor_list()
                    .and_then(|l| l.items())
                    .unwrap_or_default(),
            ),
            fb::KernelTypes::OptionalTensorList => Value::OptTensorList(
                ev.val_as_optional_tensor_list()
                    .and_then(|l| l.items())
                    .unwrap_or_default(),
            ),
            fb::KernelTypes::Tensor => {
                let t = ev.val_as_tensor().ok_or(Error::Invalid {
                    what: "value",
                    index: i,
                    detail: "union member missing",
                })?;
                tensors[next_tensor] = tensor_slot(program, plan, i, t, arenas)?;
                next_tensor += 1;
                Value::Tensor((next_tensor - 1) as u32)
            }
            _ => Value::None,
        };
    }
    Ok(())
}

/// Builds the descriptor of tensor value `i` (validated by `MethodMeta`).
fn tensor_slot<'p>(
    program: &Program<'p>,
    plan: fb::ExecutionPlan<'p>,
    i: usize,
    t: fb::Tensor<'p>,
    arenas: &[(*mut u8, usize)],
) -> Result<TensorSlot, Error> {
    let (dtype, shape, nbytes) = check_tensor(program, plan, i, t)?;
    let mut dim_order = [0u8; MAX_RANK];
    let order = t.dim_order().unwrap_or_default();
    let mut contiguous = true;
    for (k, d) in order.iter().enumerate() {
        dim_order[k] = d;
        contiguous &= d as usize == k;
    }
    let dynamism = if t.shape_dynamism() == fb::TensorShapeDynamism::STATIC {
        Dynamism::Static
    } else {
        Dynamism::Bound
    };
    let mut slot = TensorSlot {
        dtype,
        dynamism,
        planned: false,
        writable: false,
        contiguous,
        dim_order,
        shape,
        data: core::ptr::null_mut(),
        capacity: nbytes,
    };
    if let Some(a) = t.allocation_info() {
        let off64 = ((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64;
        // Beyond the address space (a 32-bit target): out of bounds of every arena.
        let off = usize::try_from(off64).unwrap_or(usize::MAX);
        let id = a.memory_id() as usize;
        let &(base, len) =
            id.checked_sub(1)
                .and_then(|k| arenas.get(k))
                .ok_or(Error::IndexOutOfRange {
                    what: "tensor memory_id",
                    at: i,
                    index: id as i64,
                    len: arenas.len() + 1,
                })?;
        if off.checked_add(nbytes).is_none_or(|end| end > len) {
            return Err(Error::OutOfBounds {
                what: "planned tensor",
                index: i,
                offset: off64,
                size: nbytes as u64,
                limit: len as u64,
            });
        }
        // SAFETY: `off + nbytes <= len`, the length of the arena borrowed for the method's
        // lifetime (checked just above), so the pointer stays in bounds of that arena.
        slot.data = unsafe { base.add(off) };
        slot.planned = true;
        slot.writable = true;
        if t.data_buffer_idx() > 0 {
            let init = program.mutable_initial(t.data_buffer_idx(), nbytes as u64, i)?;
            // SAFETY: destination range `off..off + nbytes` checked above; the source is program bytes, which
            // never overlap a caller arena borrowed mutably.
            unsafe { core::ptr::copy_nonoverlapping(init.as_ptr(), slot.data, nbytes) };
        }
    } else if t.data_buffer_idx() > 0 {
        let data = program.constant(t.data_buffer_idx(), nbytes as u64, i)?;
        // Constants are read-only: `writable` stays false, so no kernel ever writes here.
        slot.data = data.as_ptr() as *mut u8;
    }
    Ok(slot)
}
