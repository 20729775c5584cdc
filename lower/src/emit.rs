//! Rebuilds the `Program` flatbuffer with the flatbuffers builder: every table is copied from
//! the input (read with ptera's own reader), except what the lowering changes: absorbed
//! instructions become `DelegateCall`s to `PteraBackend`, removed ones disappear (jump targets
//! renumbered), weights that were packed are dropped from the constant segment (their values
//! become `Null`), and the new payloads and packed panels are appended as segments.

use std::collections::{BTreeMap, BTreeSet};

use flatbuffers::{FlatBufferBuilder, ForwardsUOffset, Vector, WIPOffset};
use ptera::format::fb;

/// Changes to one method.
#[derive(Default)]
pub struct PlanEdit {
    /// Instructions of chain 0 that disappear.
    pub removed: BTreeSet<usize>,
    /// Instructions of chain 0 replaced by a DelegateCall: pc → (index into `new_delegates`, args).
    pub replaced: BTreeMap<usize, (usize, Vec<i32>)>,
    /// Values that become `Null` (no instruction names them any more).
    pub nulled: BTreeSet<usize>,
    /// New delegates of this method: segment index of each payload (in the output's list).
    pub new_delegates: Vec<u32>,
    /// Existing delegates converted to `PteraBackend`: delegate index → payload segment.
    pub converted: BTreeMap<usize, u32>,
    /// A new memory plan: value → (memory id, byte offset) for every planned tensor it moves.
    pub alloc: BTreeMap<usize, (u32, u64)>,
    /// The new `non_const_buffer_sizes` (with its placeholder 0 first), when re-planned.
    pub arena_sizes: Option<Vec<i64>>,
    /// Values given a new definition (a planned tensor made a constant, ...).
    pub replace_values: BTreeMap<usize, NewValue>,
    /// Values appended after the existing ones (their indices continue the table).
    pub new_values: Vec<NewValue>,
    /// Kernel calls inserted before instruction `pc` of chain 0 (in this order).
    pub inserted: BTreeMap<usize, Vec<NewCall>>,
    /// New argument lists of kept kernel and delegate calls of chain 0.
    pub args: BTreeMap<usize, Vec<i32>>,
    /// Instructions of chain 0 replaced by another kernel call.
    pub calls: BTreeMap<usize, NewCall>,
}

/// A value written by the lowering.
#[derive(Clone, Debug, PartialEq)]
pub enum NewValue {
    Int(i64),
    Str(String),
    Tensor(NewTensor),
    /// An int list: the indices of its Int values.
    IntList(Vec<i64>),
    /// A tensor list: the indices of its tensors.
    TensorList(Vec<i32>),
}

/// A tensor value written by the lowering: a constant (`buffer` > 0, no `alloc`) or planned.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTensor {
    pub scalar_type: i8,
    pub sizes: Vec<i32>,
    pub dim_order: Vec<u8>,
    pub buffer: u32,
    pub alloc: Option<(u32, u64)>,
}

/// A kernel call written by the lowering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCall {
    pub name: String,
    pub overload: String,
    pub args: Vec<i32>,
}

/// Changes to the whole program.
pub struct ProgramEdit {
    pub plans: Vec<PlanEdit>,
    /// Old constant buffer index → new index (buffers absent here are dropped).
    pub buffer_map: BTreeMap<u32, u32>,
    /// New constant segment offsets (`[0]` placeholder first), or `None` to keep the table.
    pub constant_offsets: Option<Vec<u64>>,
    /// Every segment of the output, in order (original ones first, same indices).
    pub segment_sizes: Vec<usize>,
    /// Input segment index → output index (`None`: dropped).
    pub segment_map: Vec<Option<u32>>,
    /// Named data to add: (key, segment index).
    pub new_named: Vec<(String, u32)>,
    /// Named-data keys removed (their blobs were packed).
    pub dropped_keys: BTreeSet<String>,
    /// Segment of a constant segment the input did not have (with `constant_offsets`).
    pub new_constant_segment: Option<u32>,
}

impl ProgramEdit {
    /// Output index of input segment `i` (`lower` drops a segment only when nothing refers
    /// to it any more).
    fn seg(&self, i: u32) -> u32 {
        self.segment_map
            .get(i as usize)
            .copied()
            .flatten()
            .unwrap_or(i)
    }
}

type Off<T> = WIPOffset<T>;

fn s<'b>(b: &mut FlatBufferBuilder<'b>, v: Option<&str>) -> Option<Off<&'b str>> {
    v.map(|x| b.create_string(x))
}

fn tensor<'b>(
    b: &mut FlatBufferBuilder<'b>,
    t: fb::Tensor<'_>,
    map: &BTreeMap<u32, u32>,
    place: Option<(u32, u64)>,
) -> Off<fb::Tensor<'b>> {
    let sizes = t
        .sizes()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    let dim_order = t
        .dim_order()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    let alloc = t.allocation_info().map(|a| {
        let (memory_id, lo, hi) = match place {
            Some((id, off)) => (id, off as u32, (off >> 32) as u32),
            None => (a.memory_id(), a.memory_offset_low(), a.memory_offset_high()),
        };
        fb::AllocationDetails::create(
            b,
            &fb::AllocationDetailsArgs {
                memory_id,
                memory_offset_low: lo,
                memory_offset_high: hi,
            },
        )
    });
    let extra = t.extra_tensor_info().map(|e| {
        let fqn = s(b, e.fully_qualified_name());
        fb::ExtraTensorInfo::create(
            b,
            &fb::ExtraTensorInfoArgs {
                mutable_data_segments_idx: e.mutable_data_segments_idx(),
                fully_qualified_name: fqn,
                location: e.location(),
                device_type: e.device_type(),
                device_index: e.device_index(),
            },
        )
    });
    // Constants are renumbered; mutable initial state (planned) keeps its index, which points
    // into the mutable segment, not the constant one.
    let idx = t.data_buffer_idx();
    let data_buffer_idx = if idx > 0 && t.allocation_info().is_none() {
        map.get(&idx).copied().unwrap_or(idx)
    } else {
        idx
    };
    fb::Tensor::create(
        b,
        &fb::TensorArgs {
            scalar_type: t.scalar_type(),
            storage_offset: t.storage_offset(),
            sizes,
            dim_order,
            requires_grad: t.requires_grad(),
            data_buffer_idx,
            allocation_info: alloc,
            layout: t.layout(),
            shape_dynamism: t.shape_dynamism(),
            extra_tensor_info: extra,
        },
    )
}

fn evalue<'b>(
    b: &mut FlatBufferBuilder<'b>,
    e: fb::EValue<'_>,
    map: &BTreeMap<u32, u32>,
    null: bool,
    place: Option<(u32, u64)>,
) -> Off<fb::EValue<'b>> {
    use fb::KernelTypes as K;
    let (ty, val) = if null {
        (
            K::Null,
            fb::Null::create(b, &fb::NullArgs {}).as_union_value(),
        )
    } else {
        match e.val_type() {
            K::Int => {
                let v = e.val_as_int().map_or(0, |x| x.int_val());
                (
                    K::Int,
                    fb::Int::create(b, &fb::IntArgs { int_val: v }).as_union_value(),
                )
            }
            K::Bool => {
                let v = e.val_as_bool().is_some_and(|x| x.bool_val());
                (
                    K::Bool,
                    fb::Bool::create(b, &fb::BoolArgs { bool_val: v }).as_union_value(),
                )
            }
            K::Double => {
                let v = e.val_as_double().map_or(0.0, |x| x.double_val());
                (
                    K::Double,
                    fb::Double::create(b, &fb::DoubleArgs { double_val: v }).as_union_value(),
                )
            }
            K::String => {
                let v = s(b, e.val_as_string().and_then(|x| x.string_val()));
                (
                    K::String,
                    fb::String::create(b, &fb::StringArgs { string_val: v }).as_union_value(),
                )
            }
            K::Tensor => match e.val_as_tensor() {
                Some(t) => (K::Tensor, tensor(b, t, map, place).as_union_value()),
                None => (
                    K::Null,
                    fb::Null::create(b, &fb::NullArgs {}).as_union_value(),
                ),
            },
            K::IntList => {
                let items = e
                    .val_as_int_list()
                    .and_then(|l| l.items())
                    .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
                (
                    K::IntList,
                    fb::IntList::create(b, &fb::IntListArgs { items }).as_union_value(),
                )
            }
            K::DoubleList => {
                let items = e
                    .val_as_double_list()
                    .and_then(|l| l.items())
                    .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
                (
                    K::DoubleList,
                    fb::DoubleList::create(b, &fb::DoubleListArgs { items }).as_union_value(),
                )
            }
            K::BoolList => {
                let items = e
                    .val_as_bool_list()
                    .and_then(|l| l.items())
                    .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
                (
                    K::BoolList,
                    fb::BoolList::create(b, &fb::BoolListArgs { items }).as_union_value(),
                )
            }
            K::TensorList => {
                let items = e
                    .val_as_tensor_list()
                    .and_then(|l| l.items())
                    .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
                (
                    K::TensorList,
                    fb::TensorList::create(b, &fb::TensorListArgs { items }).as_union_value(),
                )
            }
            K::OptionalTensorList => {
                let items = e
                    .val_as_optional_tensor_list()
                    .and_then(|l| l.items())
                    .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
                (
                    K::OptionalTensorList,
                    fb::OptionalTensorList::create(b, &fb::OptionalTensorListArgs { items })
                        .as_union_value(),
                )
            }
            _ => (
                K::Null,
                fb::Null::create(b, &fb::NullArgs {}).as_union_value(),
            ),
        }
    };
    fb::EValue::create(
        b,
        &fb::EValueArgs {
            val_type: ty,
            val: Some(val),
        },
    )
}

fn new_value<'b>(b: &mut FlatBufferBuilder<'b>, v: &NewValue) -> Off<fb::EValue<'b>> {
    let (ty, val) = match v {
        NewValue::Int(i) => (
            fb::KernelTypes::Int,
            fb::Int::create(b, &fb::IntArgs { int_val: *i }).as_union_value(),
        ),
        NewValue::Str(v) => {
            let string_val = Some(b.create_string(v));
            (
                fb::KernelTypes::String,
                fb::String::create(b, &fb::StringArgs { string_val }).as_union_value(),
            )
        }
        NewValue::Tensor(t) => {
            let sizes = Some(b.create_vector(&t.sizes));
            let dim_order = Some(b.create_vector(&t.dim_order));
            let allocation_info = t.alloc.map(|(memory_id, off)| {
                fb::AllocationDetails::create(
                    b,
                    &fb::AllocationDetailsArgs {
                        memory_id,
                        memory_offset_low: off as u32,
                        memory_offset_high: (off >> 32) as u32,
                    },
                )
            });
            let t = fb::Tensor::create(
                b,
                &fb::TensorArgs {
                    scalar_type: fb::ScalarType(t.scalar_type),
                    storage_offset: 0,
                    sizes,
                    dim_order,
                    requires_grad: false,
                    data_buffer_idx: t.buffer,
                    allocation_info,
                    layout: 0,
                    shape_dynamism: fb::TensorShapeDynamism::STATIC,
                    extra_tensor_info: None,
                },
            );
            (fb::KernelTypes::Tensor, t.as_union_value())
        }
        NewValue::IntList(items) => {
            let items = Some(b.create_vector(items));
            (
                fb::KernelTypes::IntList,
                fb::IntList::create(b, &fb::IntListArgs { items }).as_union_value(),
            )
        }
        NewValue::TensorList(items) => {
            let items = Some(b.create_vector(items));
            (
                fb::KernelTypes::TensorList,
                fb::TensorList::create(b, &fb::TensorListArgs { items }).as_union_value(),
            )
        }
    };
    fb::EValue::create(
        b,
        &fb::EValueArgs {
            val_type: ty,
            val: Some(val),
        },
    )
}

fn instruction<'b>(
    b: &mut FlatBufferBuilder<'b>,
    ins: fb::Instruction<'_>,
    renumber: &dyn Fn(i32) -> i32,
    new_args: Option<&Vec<i32>>,
) -> Off<fb::Instruction<'b>> {
    use fb::InstructionArguments as I;
    let ints = |b: &mut FlatBufferBuilder<'b>, v: Option<Vector<'_, i32>>| {
        v.map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()))
    };
    let (ty, body) = match ins.instr_args_type() {
        I::KernelCall => {
            let k = ins.instr_args_as_kernel_call();
            let args = match new_args {
                Some(a) => Some(b.create_vector(a)),
                None => ints(b, k.and_then(|k| k.args())),
            };
            let op_index = k.map_or(0, |k| k.op_index());
            (
                I::KernelCall,
                fb::KernelCall::create(b, &fb::KernelCallArgs { op_index, args }).as_union_value(),
            )
        }
        I::DelegateCall => {
            let d = ins.instr_args_as_delegate_call();
            let args = match new_args {
                Some(a) => Some(b.create_vector(a)),
                None => ints(b, d.and_then(|d| d.args())),
            };
            let delegate_index = d.map_or(0, |d| d.delegate_index());
            (
                I::DelegateCall,
                fb::DelegateCall::create(
                    b,
                    &fb::DelegateCallArgs {
                        delegate_index,
                        args,
                    },
                )
                .as_union_value(),
            )
        }
        I::MoveCall => {
            let m = ins.instr_args_as_move_call();
            let a = fb::MoveCallArgs {
                move_from: m.map_or(0, |m| m.move_from()),
                move_to: m.map_or(0, |m| m.move_to()),
            };
            (I::MoveCall, fb::MoveCall::create(b, &a).as_union_value())
        }
        I::JumpFalseCall => {
            let j = ins.instr_args_as_jump_false_call();
            let a = fb::JumpFalseCallArgs {
                cond_value_index: j.map_or(0, |j| j.cond_value_index()),
                destination_instruction: renumber(j.map_or(0, |j| j.destination_instruction())),
            };
            (
                I::JumpFalseCall,
                fb::JumpFalseCall::create(b, &a).as_union_value(),
            )
        }
        _ => {
            let f = ins.instr_args_as_free_call();
            let a = fb::FreeCallArgs {
                value_index: f.map_or(0, |f| f.value_index()),
            };
            (I::FreeCall, fb::FreeCall::create(b, &a).as_union_value())
        }
    };
    fb::Instruction::create(
        b,
        &fb::InstructionArgs {
            instr_args_type: ty,
            instr_args: Some(body),
        },
    )
}

fn chain<'b>(
    b: &mut FlatBufferBuilder<'b>,
    c: fb::Chain<'_>,
    edit: Option<&PlanEdit>,
    first_new_delegate: i32,
    op_index: &dyn Fn(&str, &str) -> u32,
) -> Off<fb::Chain<'b>> {
    let list = c.instructions().unwrap_or_default();
    let empty = PlanEdit::default();
    let edit = edit.unwrap_or(&empty);
    // Old pc → new pc; a removed instruction's target is the next kept one, and a jump to an
    // instruction lands on the calls inserted before it.
    let mut new_pc = Vec::with_capacity(list.len() + 1);
    let mut at = 0i32;
    for pc in 0..list.len() {
        new_pc.push(at);
        at += edit.inserted.get(&pc).map_or(0, |v| v.len() as i32);
        if !edit.removed.contains(&pc) {
            at += 1;
        }
    }
    new_pc.push(at);
    let renumber = |d: i32| {
        usize::try_from(d)
            .ok()
            .and_then(|d| new_pc.get(d).copied())
            .unwrap_or(d)
    };
    let mut out = Vec::new();
    for (pc, ins) in list.iter().enumerate() {
        let replaced = edit.calls.get(&pc).filter(|_| !edit.removed.contains(&pc));
        for call in edit.inserted.get(&pc).into_iter().flatten().chain(replaced) {
            let args = b.create_vector(&call.args);
            let k = fb::KernelCall::create(
                b,
                &fb::KernelCallArgs {
                    op_index: op_index(&call.name, &call.overload) as i32,
                    args: Some(args),
                },
            );
            out.push(fb::Instruction::create(
                b,
                &fb::InstructionArgs {
                    instr_args_type: fb::InstructionArguments::KernelCall,
                    instr_args: Some(k.as_union_value()),
                },
            ));
        }
        if edit.removed.contains(&pc) || replaced.is_some() {
            continue;
        }
        if let Some((di, args)) = edit.replaced.get(&pc) {
            let args = b.create_vector(args);
            let call = fb::DelegateCall::create(
                b,
                &fb::DelegateCallArgs {
                    delegate_index: first_new_delegate + *di as i32,
                    args: Some(args),
                },
            );
            out.push(fb::Instruction::create(
                b,
                &fb::InstructionArgs {
                    instr_args_type: fb::InstructionArguments::DelegateCall,
                    instr_args: Some(call.as_union_value()),
                },
            ));
        } else {
            out.push(instruction(b, ins, &renumber, edit.args.get(&pc)));
        }
    }
    let instructions = b.create_vector(&out);
    let inputs = c
        .inputs()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    let outputs = c
        .outputs()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    // Stack traces are debug information keyed by instruction position; they are dropped.
    fb::Chain::create(
        b,
        &fb::ChainArgs {
            inputs,
            outputs,
            instructions: Some(instructions),
            stacktrace: None,
        },
    )
}

fn delegate<'b>(
    b: &mut FlatBufferBuilder<'b>,
    id: &str,
    location: fb::DataLocation,
    index: u32,
    specs: Option<Vector<'_, ForwardsUOffset<fb::CompileSpec<'_>>>>,
) -> Off<fb::BackendDelegate<'b>> {
    let id = b.create_string(id);
    let processed = fb::BackendDelegateDataReference::create(
        b,
        &fb::BackendDelegateDataReferenceArgs { location, index },
    );
    let compile_specs = specs.map(|v| {
        let items: Vec<_> = v
            .iter()
            .map(|cs| {
                let key = s(b, cs.key());
                let value = cs.value().map(|x| b.create_vector(x.bytes()));
                fb::CompileSpec::create(b, &fb::CompileSpecArgs { key, value })
            })
            .collect();
        b.create_vector(&items)
    });
    fb::BackendDelegate::create(
        b,
        &fb::BackendDelegateArgs {
            id: Some(id),
            processed: Some(processed),
            compile_specs,
        },
    )
}

fn plan<'b>(
    b: &mut FlatBufferBuilder<'b>,
    p: fb::ExecutionPlan<'_>,
    edit: Option<&PlanEdit>,
    pe: &ProgramEdit,
) -> Off<fb::ExecutionPlan<'b>> {
    let map = &pe.buffer_map;
    let name = s(b, p.name());
    let meta = p.container_meta_type().map(|m| {
        let i = s(b, m.encoded_inp_str());
        let o = s(b, m.encoded_out_str());
        fb::ContainerMetadata::create(
            b,
            &fb::ContainerMetadataArgs {
                encoded_inp_str: i,
                encoded_out_str: o,
            },
        )
    });
    let mut vals: Vec<_> = p
        .values()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, e)| {
            if let Some(nv) = edit.and_then(|ed| ed.replace_values.get(&i)) {
                return new_value(b, nv);
            }
            let null = edit.is_some_and(|ed| ed.nulled.contains(&i));
            let place = edit.and_then(|ed| ed.alloc.get(&i).copied());
            evalue(b, e, map, null, place)
        })
        .collect();
    for nv in edit.map(|ed| ed.new_values.as_slice()).unwrap_or_default() {
        vals.push(new_value(b, nv));
    }
    let values = b.create_vector(&vals);
    let inputs = p
        .inputs()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    let outputs = p
        .outputs()
        .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>()));
    let old_delegates = p.delegates().map_or(0, |d| d.len()) as i32;
    // Operators: the input's, then those only inserted calls use.
    let mut op_names: Vec<(String, String)> = p
        .operators()
        .unwrap_or_default()
        .iter()
        .map(|o| {
            (
                o.name().unwrap_or("").to_string(),
                o.overload().unwrap_or("").to_string(),
            )
        })
        .collect();
    let old_ops = op_names.len();
    for call in edit
        .into_iter()
        .flat_map(|e| e.inserted.values().flatten().chain(e.calls.values()))
    {
        let key = (call.name.clone(), call.overload.clone());
        if !op_names.contains(&key) {
            op_names.push(key);
        }
    }
    let op_index = |n: &str, o: &str| {
        op_names
            .iter()
            .position(|(a, b)| a == n && b == o)
            .unwrap_or(0) as u32
    };
    let chains: Vec<_> = p
        .chains()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let e = if ci == 0 { edit } else { None };
            chain(b, c, e, old_delegates, &op_index)
        })
        .collect();
    let chains = b.create_vector(&chains);
    let mut ops: Vec<_> = p
        .operators()
        .unwrap_or_default()
        .iter()
        .map(|o| {
            let n = s(b, o.name());
            let ov = s(b, o.overload());
            fb::Operator::create(
                b,
                &fb::OperatorArgs {
                    name: n,
                    overload: ov,
                },
            )
        })
        .collect();
    for (n, o) in &op_names[old_ops..] {
        let name = Some(b.create_string(n));
        let overload = Some(b.create_string(o));
        ops.push(fb::Operator::create(
            b,
            &fb::OperatorArgs { name, overload },
        ));
    }
    let operators = b.create_vector(&ops);
    let mut dels: Vec<_> = p
        .delegates()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(di, d)| {
            if let Some(&seg) = edit.and_then(|e| e.converted.get(&di)) {
                let id = ptera::delegate::ptera::ID;
                return delegate(b, id, fb::DataLocation::SEGMENT, seg, None);
            }
            let (loc, idx) = d
                .processed()
                .map_or((fb::DataLocation::INLINE, 0), |r| (r.location(), r.index()));
            let idx = if loc == fb::DataLocation::SEGMENT {
                pe.seg(idx)
            } else {
                idx
            };
            delegate(b, d.id().unwrap_or(""), loc, idx, d.compile_specs())
        })
        .collect();
    if let Some(ed) = edit {
        for &seg in &ed.new_delegates {
            dels.push(delegate(
                b,
                ptera::delegate::ptera::ID,
                fb::DataLocation::SEGMENT,
                seg,
                None,
            ));
        }
    }
    let delegates = b.create_vector(&dels);
    let sizes = match edit.and_then(|e| e.arena_sizes.as_ref()) {
        Some(new) => Some(b.create_vector(new)),
        None => p
            .non_const_buffer_sizes()
            .map(|v| b.create_vector(&v.iter().collect::<Vec<_>>())),
    };
    let devices = p.non_const_buffer_device().map(|v| {
        let items: Vec<_> = v
            .iter()
            .map(|d| {
                fb::NonConstBufferDevice::create(
                    b,
                    &fb::NonConstBufferDeviceArgs {
                        buffer_idx: d.buffer_idx(),
                        device_type: d.device_type(),
                        device_index: d.device_index(),
                    },
                )
            })
            .collect();
        b.create_vector(&items)
    });
    fb::ExecutionPlan::create(
        b,
        &fb::ExecutionPlanArgs {
            name,
            container_meta_type: meta,
            values: Some(values),
            inputs,
            outputs,
            chains: Some(chains),
            operators: Some(operators),
            delegates: Some(delegates),
            non_const_buffer_sizes: sizes,
            non_const_buffer_device: devices,
        },
    )
}

fn subsegment<'b>(
    b: &mut FlatBufferBuilder<'b>,
    segment_index: u32,
    offsets: &[u64],
) -> Off<fb::SubsegmentOffsets<'b>> {
    let offsets = b.create_vector(offsets);
    fb::SubsegmentOffsets::create(
        b,
        &fb::SubsegmentOffsetsArgs {
            segment_index,
            offsets: Some(offsets),
        },
    )
}

/// The new `Program` flatbuffer (finished, with the `ET12` identifier, no extended header).
pub fn program(root: fb::Program<'_>, edit: &ProgramEdit) -> Vec<u8> {
    let mut b = FlatBufferBuilder::with_capacity(1 << 16);
    let plans: Vec<_> = root
        .execution_plan()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, p)| plan(&mut b, p, edit.plans.get(i), edit))
        .collect();
    let plans = b.create_vector(&plans);
    // Inline buffers (legacy constants, inline payloads) are refused by `crate::lower`
    // before this point: the builder cannot force their 16-byte alignment.
    let constant_buffer = root.constant_buffer().map(|v| {
        let items: Vec<_> = v
            .iter()
            .map(|_| fb::Buffer::create(&mut b, &fb::BufferArgs { storage: None }))
            .collect();
        b.create_vector(&items)
    });
    let inline: Option<Off<Vector<'_, ForwardsUOffset<fb::BackendDelegateInlineData<'_>>>>> = None;
    let offsets = ptera::format::write::segment_offsets(&edit.segment_sizes);
    let segs: Vec<_> = edit
        .segment_sizes
        .iter()
        .zip(&offsets)
        .map(|(&size, &offset)| {
            fb::DataSegment::create(
                &mut b,
                &fb::DataSegmentArgs {
                    offset,
                    size: size as u64,
                },
            )
        })
        .collect();
    let segments = b.create_vector(&segs);
    let constant_segment = match (root.constant_segment(), edit.new_constant_segment) {
        (Some(cs), _) => {
            let offs: Vec<u64> = match &edit.constant_offsets {
                Some(o) => o.clone(),
                None => cs.offsets().map(|v| v.iter().collect()).unwrap_or_default(),
            };
            Some(subsegment(&mut b, edit.seg(cs.segment_index()), &offs))
        }
        (None, Some(seg)) => {
            let offs = edit.constant_offsets.clone().unwrap_or_else(|| vec![0]);
            Some(subsegment(&mut b, seg, &offs))
        }
        (None, None) => None,
    };
    let mutable = root.mutable_data_segments().map(|v| {
        let items: Vec<_> = v
            .iter()
            .map(|m| {
                let offs: Vec<u64> = m.offsets().map(|o| o.iter().collect()).unwrap_or_default();
                subsegment(&mut b, edit.seg(m.segment_index()), &offs)
            })
            .collect();
        b.create_vector(&items)
    });
    let mut named: Vec<_> = root
        .named_data()
        .unwrap_or_default()
        .iter()
        .filter(|n| n.key().is_none_or(|k| !edit.dropped_keys.contains(k)))
        .map(|n| {
            let key = s(&mut b, n.key());
            fb::NamedData::create(
                &mut b,
                &fb::NamedDataArgs {
                    key,
                    segment_index: edit.seg(n.segment_index()),
                },
            )
        })
        .collect();
    for (k, seg) in &edit.new_named {
        let key = b.create_string(k);
        named.push(fb::NamedData::create(
            &mut b,
            &fb::NamedDataArgs {
                key: Some(key),
                segment_index: *seg,
            },
        ));
    }
    let named_data =
        (root.named_data().is_some() || !named.is_empty()).then(|| b.create_vector(&named));
    let r = fb::Program::create(
        &mut b,
        &fb::ProgramArgs {
            version: root.version(),
            execution_plan: Some(plans),
            constant_buffer,
            backend_delegate_data: inline,
            segments: Some(segments),
            constant_segment,
            mutable_data_segments: mutable,
            named_data,
        },
    );
    fb::finish_program_buffer(&mut b, r);
    b.finished_data().to_vec()
}

/// The finished program flatbuffer `fbytes` again, with one more named-data entry `key` for
/// the last of `segment_sizes` (a segment appended after the ones it already names).
pub fn add_named(fbytes: &[u8], segment_sizes: &[usize], key: &str) -> Result<Vec<u8>, String> {
    let root = fb::root_as_program(fbytes).map_err(|e| format!("named data: {e}"))?;
    let n = root.execution_plan().map_or(0, |p| p.len());
    let edit = ProgramEdit {
        plans: (0..n).map(|_| PlanEdit::default()).collect(),
        buffer_map: BTreeMap::new(),
        constant_offsets: None,
        segment_sizes: segment_sizes.to_vec(),
        segment_map: (0..segment_sizes.len() as u32).map(Some).collect(),
        new_named: vec![(key.to_string(), segment_sizes.len() as u32 - 1)],
        dropped_keys: BTreeSet::new(),
        new_constant_segment: None,
    };
    Ok(program(root, &edit))
}
