//! Test support (`std` feature or unit tests): builds real one-instruction `.pte` programs
//! (flatbuffer + `eh00` header + constant segment) and runs them through the real loader and
//! executor, so kernel tests exercise the same path as model programs.

use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use crate::dtype::DType;
use crate::error::Error;
use crate::exec::Registry;
use crate::format::{fb, Program};
use crate::host::AlignedBuf;
use crate::kernel_api::Value;
use crate::method::MethodMeta;
use crate::method::OwnedArenas;
use crate::tensor::{read_f64, read_i64, Shape};

#[derive(Clone, Debug)]
enum Spec {
    None,
    Int(i64),
    Double(f64),
    Bool(bool),
    Str(String),
    IntList(Vec<i32>),
    DoubleList(Vec<f64>),
    BoolList(Vec<bool>),
    TensorList(Vec<i32>),
    OptTensorList(Vec<i32>),
    Tensor(TensorSpec),
}

#[derive(Clone, Debug)]
struct TensorSpec {
    dtype: DType,
    sizes: Vec<i32>,
    dim_order: Vec<u8>,
    /// Offset in arena 1, or None for a constant / unplanned tensor.
    offset: Option<u64>,
    /// Constant data (becomes a constant-segment entry).
    constant: Option<Vec<u8>>,
    dynamic: bool,
}

/// A tensor read back from a test run.
#[derive(Clone, Debug, PartialEq)]
pub struct TestTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl TestTensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// Elements as f64 (any dtype).
    pub fn f64(&self) -> Vec<f64> {
        (0..self.numel())
            .map(|i| read_f64(self.dtype, &self.bytes, i))
            .collect()
    }
    /// Elements as f32; panics unless the dtype is float32.
    pub fn f32(&self) -> Vec<f32> {
        assert_eq!(self.dtype, DType::F32, "output dtype");
        self.bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
    /// Elements as i64 (any integer or bool dtype).
    pub fn i64(&self) -> Vec<i64> {
        (0..self.numel())
            .map(|i| read_i64(self.dtype, &self.bytes, i))
            .collect()
    }
    /// Elements as bools (nonzero = true).
    pub fn bools(&self) -> Vec<bool> {
        self.i64().into_iter().map(|v| v != 0).collect()
    }
}

/// One instruction of a multi-instruction test program (see [`OpTest::steps`]).
#[derive(Clone, Debug)]
pub enum Step {
    /// KernelCall of operator `key` (`"aten::tanh.out"`) with these value indices; in a
    /// [`OpTest::delegate`] test an empty `key` is the DelegateCall instead.
    Kernel(String, Vec<i32>),
    /// MoveCall `from` → `to`.
    Move(i32, i32),
    /// JumpFalseCall on `cond` to instruction `dest`.
    JumpFalse(i32, i32),
    /// FreeCall of a tensor value.
    Free(i32),
}

/// What [`OpTest::run_inspect`] saw.
#[derive(Debug, Default)]
pub struct Inspected {
    pub outputs: Vec<TestTensor>,
    pub demands: Vec<crate::exec::demand::RowDemand>,
    pub tensors: Vec<TestTensor>,
    /// Calls prepared at load ([`crate::method::Method::prepared_calls`]).
    pub prepared: usize,
    /// Calls run at load ([`crate::method::Method::folded_calls`]).
    pub folded: usize,
}

/// One-operator program builder and runner.
pub struct OpTest {
    op: String,
    values: Vec<Spec>,
    inputs: Vec<(i32, Vec<u8>)>,
    outputs: Vec<i32>,
    args: Vec<i32>,
    arena: u64,
    registry: Registry<'static>,
    /// When set, the instruction is a DelegateCall to this backend with this payload (stored
    /// in its own 128-aligned segment, as the exporter does).
    delegate: Option<(String, Vec<u8>)>,
    /// Explicit instruction list (overrides the single call).
    steps: Vec<Step>,
}

fn to_bytes<T: Copy>(data: &[T]) -> Vec<u8> {
    let n = core::mem::size_of_val(data);
    // SAFETY: `data` is a live slice of plain numeric values (callers pass f32/i64/u8/...),
    // viewed as its n bytes for copying.
    unsafe { core::slice::from_raw_parts(data.as_ptr() as *const u8, n) }.to_vec()
}

impl OpTest {
    /// A test of operator `key` (`"aten::add.out"`, `"aten::copy_"`, ...), portable registry.
    pub fn new(key: &str) -> OpTest {
        OpTest {
            op: key.to_string(),
            values: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            args: Vec::new(),
            arena: 0,
            registry: Registry::portable(),
            delegate: None,
            steps: Vec::new(),
        }
    }

    /// Declares arena 1 `extra` bytes larger than its tensors need (a plan that asks for
    /// more memory, e.g. more than the target can address).
    pub fn grow_arena(&mut self, extra: u64) {
        self.arena = self.arena.saturating_add(extra);
    }

    /// A test of one DelegateCall to `backend` with `payload`, standard registry.
    pub fn delegate(backend: &str, payload: Vec<u8>) -> OpTest {
        let mut t = OpTest::new("");
        t.registry = Registry::standard();
        t.delegate = Some((backend.to_string(), payload));
        t
    }

    /// Uses another registry (e.g. with a test backend).
    pub fn with_registry(mut self, registry: Registry<'static>) -> OpTest {
        self.registry = registry;
        self
    }

    fn push(&mut self, s: Spec) -> i32 {
        self.values.push(s);
        (self.values.len() - 1) as i32
    }

    fn planned(&mut self, dtype: DType, dims: &[usize], dynamic: bool) -> i32 {
        let nbytes: usize = dims.iter().product::<usize>() * dtype.size();
        let off = self.arena;
        self.arena += (nbytes as u64).div_ceil(16) * 16 + 16;
        self.push(Spec::Tensor(TensorSpec {
            dtype,
            sizes: dims.iter().map(|&d| d as i32).collect(),
            dim_order: (0..dims.len() as u8).collect(),
            offset: Some(off),
            constant: None,
            dynamic,
        }))
    }

    /// A planned input tensor with raw little-endian bytes.
    pub fn input(&mut self, dtype: DType, dims: &[usize], bytes: &[u8]) -> i32 {
        assert_eq!(
            bytes.len(),
            dims.iter().product::<usize>() * dtype.size(),
            "input byte count"
        );
        let v = self.planned(dtype, dims, false);
        self.inputs.push((v, bytes.to_vec()));
        v
    }

    pub fn input_f32(&mut self, dims: &[usize], data: &[f32]) -> i32 {
        self.input(DType::F32, dims, &to_bytes(data))
    }
    pub fn input_f64(&mut self, dims: &[usize], data: &[f64]) -> i32 {
        self.input(DType::F64, dims, &to_bytes(data))
    }
    pub fn input_i64(&mut self, dims: &[usize], data: &[i64]) -> i32 {
        self.input(DType::I64, dims, &to_bytes(data))
    }
    pub fn input_i32(&mut self, dims: &[usize], data: &[i32]) -> i32 {
        self.input(DType::I32, dims, &to_bytes(data))
    }
    pub fn input_bool(&mut self, dims: &[usize], data: &[bool]) -> i32 {
        let b: Vec<u8> = data.iter().map(|&x| x as u8).collect();
        self.input(DType::Bool, dims, &b)
    }

    /// An input in a non-contiguous dim order; `data` is laid out in that memory order.
    pub fn input_dim_order(
        &mut self,
        dtype: DType,
        dims: &[usize],
        dim_order: &[u8],
        bytes: &[u8],
    ) -> i32 {
        let v = self.input(dtype, dims, bytes);
        if let Spec::Tensor(t) = &mut self.values[v as usize] {
            t.dim_order = dim_order.to_vec();
        }
        v
    }

    /// A read-only constant tensor stored in the program's constant segment.
    pub fn constant(&mut self, dtype: DType, dims: &[usize], bytes: &[u8]) -> i32 {
        assert_eq!(
            bytes.len(),
            dims.iter().product::<usize>() * dtype.size(),
            "constant byte count"
        );
        self.push(Spec::Tensor(TensorSpec {
            dtype,
            sizes: dims.iter().map(|&d| d as i32).collect(),
            dim_order: (0..dims.len() as u8).collect(),
            offset: None,
            constant: Some(bytes.to_vec()),
            dynamic: false,
        }))
    }

    pub fn constant_f32(&mut self, dims: &[usize], data: &[f32]) -> i32 {
        self.constant(DType::F32, dims, &to_bytes(data))
    }

    /// A planned f32 tensor that is neither an input nor an output (an intermediate).
    pub fn intermediate_f32(&mut self, dims: &[usize]) -> i32 {
        self.planned(DType::F32, dims, false)
    }

    /// A planned intermediate of any dtype.
    pub fn intermediate(&mut self, dtype: DType, dims: &[usize]) -> i32 {
        self.planned(dtype, dims, false)
    }

    /// A planned tensor sharing `of`'s storage (same arena offset) with other dims: a view,
    /// as ExecuTorch's memory planner emits for `view`/`reshape`.
    pub fn view_of(&mut self, of: i32, dims: &[usize]) -> i32 {
        let Spec::Tensor(t) = self.values[of as usize].clone() else {
            panic!("view_of: value {of} is not a tensor");
        };
        self.push(Spec::Tensor(TensorSpec {
            sizes: dims.iter().map(|&d| d as i32).collect(),
            dim_order: (0..dims.len() as u8).collect(),
            ..t
        }))
    }

    /// A planned, statically shaped output tensor.
    pub fn output(&mut self, dtype: DType, dims: &[usize]) -> i32 {
        let v = self.planned(dtype, dims, false);
        self.outputs.push(v);
        v
    }

    /// An output tensor with no planned memory (a kernel such as `et_view` binds it).
    pub fn output_unplanned(&mut self, dtype: DType, dims: &[usize]) -> i32 {
        let v = self.push(Spec::Tensor(TensorSpec {
            dtype,
            sizes: dims.iter().map(|&d| d as i32).collect(),
            dim_order: (0..dims.len() as u8).collect(),
            offset: None,
            constant: None,
            dynamic: false,
        }));
        self.outputs.push(v);
        v
    }

    /// A planned dynamic-bound output whose capacity is `dims`.
    pub fn output_dynamic(&mut self, dtype: DType, dims: &[usize]) -> i32 {
        let v = self.planned(dtype, dims, true);
        self.outputs.push(v);
        v
    }

    pub fn none(&mut self) -> i32 {
        self.push(Spec::None)
    }
    pub fn int(&mut self, v: i64) -> i32 {
        self.push(Spec::Int(v))
    }
    pub fn double(&mut self, v: f64) -> i32 {
        self.push(Spec::Double(v))
    }
    pub fn boolean(&mut self, v: bool) -> i32 {
        self.push(Spec::Bool(v))
    }
    pub fn string(&mut self, s: &str) -> i32 {
        self.push(Spec::Str(s.to_string()))
    }
    /// An int list (each item becomes its own Int value, as the emitter does).
    pub fn int_list(&mut self, items: &[i64]) -> i32 {
        let idx: Vec<i32> = items.iter().map(|&v| self.int(v)).collect();
        self.push(Spec::IntList(idx))
    }
    /// An int list over existing Int values (e.g. placeholders written by prim ops).
    pub fn int_list_of(&mut self, values: &[i32]) -> i32 {
        self.push(Spec::IntList(values.to_vec()))
    }
    pub fn double_list(&mut self, items: &[f64]) -> i32 {
        self.push(Spec::DoubleList(items.to_vec()))
    }
    pub fn bool_list(&mut self, items: &[bool]) -> i32 {
        self.push(Spec::BoolList(items.to_vec()))
    }
    pub fn tensor_list(&mut self, items: &[i32]) -> i32 {
        self.push(Spec::TensorList(items.to_vec()))
    }
    pub fn opt_tensor_list(&mut self, items: &[Option<i32>]) -> i32 {
        self.push(Spec::OptTensorList(
            items.iter().map(|v| v.unwrap_or(-1)).collect(),
        ))
    }

    /// Uses an explicit instruction list instead of the single call.
    pub fn steps(&mut self, steps: &[Step]) {
        self.steps = steps.to_vec();
    }

    /// The instruction list set with [`OpTest::steps`].
    pub fn steps_list(&self) -> Vec<Step> {
        self.steps.clone()
    }

    /// Sets the KernelCall arguments.
    pub fn call(&mut self, args: &[i32]) {
        self.args = args.to_vec();
    }

    /// The serialized program (with header and constant segment).
    pub fn build(&self) -> Vec<u8> {
        let mut b = FlatBufferBuilder::new();
        let mut constants: Vec<u8> = Vec::new();
        let mut offsets: Vec<u64> = vec![0];
        let mut evs = Vec::new();
        for v in &self.values {
            let (tag, off) = match v {
                Spec::None => (
                    fb::KernelTypes::Null,
                    fb::Null::create(&mut b, &fb::NullArgs {}).as_union_value(),
                ),
                Spec::Int(x) => (
                    fb::KernelTypes::Int,
                    fb::Int::create(&mut b, &fb::IntArgs { int_val: *x }).as_union_value(),
                ),
                Spec::Double(x) => (
                    fb::KernelTypes::Double,
                    fb::Double::create(&mut b, &fb::DoubleArgs { double_val: *x }).as_union_value(),
                ),
                Spec::Bool(x) => (
                    fb::KernelTypes::Bool,
                    fb::Bool::create(&mut b, &fb::BoolArgs { bool_val: *x }).as_union_value(),
                ),
                Spec::Str(s) => {
                    let s = b.create_string(s);
                    (
                        fb::KernelTypes::String,
                        fb::String::create(
                            &mut b,
                            &fb::StringArgs {
                                string_val: Some(s),
                            },
                        )
                        .as_union_value(),
                    )
                }
                Spec::IntList(items) => {
                    let items: Vec<i64> = items.iter().map(|&i| i as i64).collect();
                    let items = b.create_vector(&items);
                    (
                        fb::KernelTypes::IntList,
                        fb::IntList::create(&mut b, &fb::IntListArgs { items: Some(items) })
                            .as_union_value(),
                    )
                }
                Spec::DoubleList(items) => {
                    let items = b.create_vector(items);
                    (
                        fb::KernelTypes::DoubleList,
                        fb::DoubleList::create(&mut b, &fb::DoubleListArgs { items: Some(items) })
                            .as_union_value(),
                    )
                }
                Spec::BoolList(items) => {
                    let items = b.create_vector(items);
                    (
                        fb::KernelTypes::BoolList,
                        fb::BoolList::create(&mut b, &fb::BoolListArgs { items: Some(items) })
                            .as_union_value(),
                    )
                }
                Spec::TensorList(items) => {
                    let items = b.create_vector(items);
                    (
                        fb::KernelTypes::TensorList,
                        fb::TensorList::create(&mut b, &fb::TensorListArgs { items: Some(items) })
                            .as_union_value(),
                    )
                }
                Spec::OptTensorList(items) => {
                    let items = b.create_vector(items);
                    (
                        fb::KernelTypes::OptionalTensorList,
                        fb::OptionalTensorList::create(
                            &mut b,
                            &fb::OptionalTensorListArgs { items: Some(items) },
                        )
                        .as_union_value(),
                    )
                }
                Spec::Tensor(t) => {
                    let sizes = b.create_vector(&t.sizes);
                    let dim_order = b.create_vector(&t.dim_order);
                    let allocation_info = t.offset.map(|o| {
                        fb::AllocationDetails::create(
                            &mut b,
                            &fb::AllocationDetailsArgs {
                                memory_id: 1,
                                memory_offset_low: o as u32,
                                memory_offset_high: (o >> 32) as u32,
                            },
                        )
                    });
                    let mut data_buffer_idx = 0;
                    if let Some(c) = &t.constant {
                        while !constants.len().is_multiple_of(16) {
                            constants.push(0);
                        }
                        offsets.push(constants.len() as u64);
                        constants.extend_from_slice(c);
                        data_buffer_idx = (offsets.len() - 1) as u32;
                    }
                    let args = fb::TensorArgs {
                        scalar_type: fb::ScalarType(t.dtype as u8 as i8),
                        sizes: Some(sizes),
                        dim_order: Some(dim_order),
                        data_buffer_idx,
                        allocation_info,
                        shape_dynamism: if t.dynamic {
                            fb::TensorShapeDynamism::DYNAMIC_BOUND
                        } else {
                            fb::TensorShapeDynamism::STATIC
                        },
                        ..Default::default()
                    };
                    (
                        fb::KernelTypes::Tensor,
                        fb::Tensor::create(&mut b, &args).as_union_value(),
                    )
                }
            };
            evs.push(fb::EValue::create(
                &mut b,
                &fb::EValueArgs {
                    val_type: tag,
                    val: Some(off),
                },
            ));
        }
        let values = b.create_vector(&evs);
        let inputs: Vec<i32> = self.inputs.iter().map(|(v, _)| *v).collect();
        let inputs = b.create_vector(&inputs);
        let outputs = b.create_vector(&self.outputs);
        let steps: Vec<Step> = if self.steps.is_empty() {
            vec![Step::Kernel(self.op.clone(), self.args.clone())]
        } else {
            self.steps.clone()
        };
        let mut keys: Vec<String> = Vec::new();
        let mut instrs = Vec::new();
        for step in &steps {
            let (tag, body) = match step {
                Step::Kernel(key, args) if self.delegate.is_none() || !key.is_empty() => {
                    let op_index = match keys.iter().position(|k| k == key) {
                        Some(i) => i,
                        None => {
                            keys.push(key.clone());
                            keys.len() - 1
                        }
                    } as i32;
                    let args = b.create_vector(args);
                    let kc = fb::KernelCall::create(
                        &mut b,
                        &fb::KernelCallArgs {
                            op_index,
                            args: Some(args),
                        },
                    );
                    (fb::InstructionArguments::KernelCall, kc.as_union_value())
                }
                Step::Kernel(_, args) => {
                    let args = b.create_vector(args);
                    let dc = fb::DelegateCall::create(
                        &mut b,
                        &fb::DelegateCallArgs {
                            delegate_index: 0,
                            args: Some(args),
                        },
                    );
                    (fb::InstructionArguments::DelegateCall, dc.as_union_value())
                }
                Step::Move(from, to) => {
                    let m = fb::MoveCall::create(
                        &mut b,
                        &fb::MoveCallArgs {
                            move_from: *from,
                            move_to: *to,
                        },
                    );
                    (fb::InstructionArguments::MoveCall, m.as_union_value())
                }
                Step::JumpFalse(cond, dest) => {
                    let j = fb::JumpFalseCall::create(
                        &mut b,
                        &fb::JumpFalseCallArgs {
                            cond_value_index: *cond,
                            destination_instruction: *dest,
                        },
                    );
                    (fb::InstructionArguments::JumpFalseCall, j.as_union_value())
                }
                Step::Free(v) => {
                    let f = fb::FreeCall::create(&mut b, &fb::FreeCallArgs { value_index: *v });
                    (fb::InstructionArguments::FreeCall, f.as_union_value())
                }
            };
            instrs.push(fb::Instruction::create(
                &mut b,
                &fb::InstructionArgs {
                    instr_args_type: tag,
                    instr_args: Some(body),
                },
            ));
        }
        let instructions = b.create_vector(&instrs);
        let chain = fb::Chain::create(
            &mut b,
            &fb::ChainArgs {
                instructions: Some(instructions),
                ..Default::default()
            },
        );
        let chains = b.create_vector(&[chain]);
        let mut ops = Vec::new();
        for key in &keys {
            let (name, overload) = split_key(key);
            let opname = b.create_string(name);
            let opover = b.create_string(overload);
            ops.push(fb::Operator::create(
                &mut b,
                &fb::OperatorArgs {
                    name: Some(opname),
                    overload: Some(opover),
                },
            ));
        }
        let ops = b.create_vector(&ops);
        let sizes = b.create_vector(&[0i64, self.arena as i64]);
        let mut delegates: Vec<WIPOffset<fb::BackendDelegate>> = Vec::new();
        if let Some((id, _)) = &self.delegate {
            let id = b.create_string(id);
            let processed = fb::BackendDelegateDataReference::create(
                &mut b,
                &fb::BackendDelegateDataReferenceArgs {
                    location: fb::DataLocation::SEGMENT,
                    index: 1,
                },
            );
            delegates.push(fb::BackendDelegate::create(
                &mut b,
                &fb::BackendDelegateArgs {
                    id: Some(id),
                    processed: Some(processed),
                    compile_specs: None,
                },
            ));
        }
        let delegates = b.create_vector(&delegates);
        let mname = b.create_string("forward");
        let plan = fb::ExecutionPlan::create(
            &mut b,
            &fb::ExecutionPlanArgs {
                name: Some(mname),
                values: Some(values),
                inputs: Some(inputs),
                outputs: Some(outputs),
                chains: Some(chains),
                operators: Some(ops),
                delegates: Some(delegates),
                non_const_buffer_sizes: Some(sizes),
                ..Default::default()
            },
        );
        let plans = b.create_vector(&[plan]);
        let mut blobs: Vec<&[u8]> = vec![&constants];
        if let Some((_, payload)) = &self.delegate {
            blobs.push(payload);
        }
        let mut segs = Vec::new();
        let mut at = 0u64;
        for blob in &blobs {
            segs.push(fb::DataSegment::create(
                &mut b,
                &fb::DataSegmentArgs {
                    offset: at,
                    size: blob.len() as u64,
                },
            ));
            at = (at + blob.len() as u64).div_ceil(128) * 128;
        }
        let segments = b.create_vector(&segs);
        let offsets = b.create_vector(&offsets);
        let cs = fb::SubsegmentOffsets::create(
            &mut b,
            &fb::SubsegmentOffsetsArgs {
                segment_index: 0,
                offsets: Some(offsets),
            },
        );
        let root = fb::Program::create(
            &mut b,
            &fb::ProgramArgs {
                execution_plan: Some(plans),
                segments: Some(segments),
                constant_segment: Some(cs),
                ..Default::default()
            },
        );
        fb::finish_program_buffer(&mut b, root);
        with_segments(b.finished_data(), &blobs)
    }

    /// Builds, loads and runs the program; returns the declared outputs in order.
    pub fn run(&self) -> Result<Vec<TestTensor>, Error> {
        self.run_inner().map(|r| r.0)
    }

    /// Runs and returns the scalar values of the value table afterwards (lists and tensors
    /// read as `Value::None`), to observe what prim ops wrote.
    pub fn run_values(&self) -> Result<Vec<Value<'static>>, Error> {
        self.run_inner().map(|r| r.1)
    }

    /// Runs and returns the outputs, the method's row demands and the tensors `values` as the
    /// run left them.
    pub fn run_inspect(&self, values: &[i32]) -> Result<Inspected, Error> {
        let mut seen = Inspected::default();
        self.run_with(|m| {
            seen.demands = m.row_demands().to_vec();
            seen.prepared = m.prepared_calls();
            seen.folded = m.folded_calls();
            seen.tensors = values
                .iter()
                .map(|&v| {
                    let t = m.tensor(v as usize).expect("a tensor value");
                    TestTensor {
                        dtype: t.dtype(),
                        shape: t.dims().to_vec(),
                        bytes: t.bytes().to_vec(),
                    }
                })
                .collect();
        })
        .map(|r| {
            seen.outputs = r.0;
            seen
        })
    }

    fn run_inner(&self) -> Result<(Vec<TestTensor>, Vec<Value<'static>>), Error> {
        self.run_with(|_| {})
    }

    /// Runs `program` (a transformed build of this test's program, e.g. a lowered one, with
    /// the same inputs) with the standard registry; returns its outputs.
    pub fn run_program(&self, program: &[u8]) -> Result<Vec<TestTensor>, Error> {
        self.run_bytes(program, &Registry::standard(), |_| {})
            .map(|r| r.0)
    }

    fn run_with(
        &self,
        after: impl FnMut(&crate::method::Method<'_, '_>),
    ) -> Result<(Vec<TestTensor>, Vec<Value<'static>>), Error> {
        self.run_bytes(&self.build(), &self.registry, after)
    }

    /// The metadata buffer size this test's program asks for with its registry
    /// ([`MethodMeta::metadata_bytes`]: runtime tables and delegate state).
    pub fn metadata_bytes(&self) -> Result<usize, Error> {
        let bytes = AlignedBuf::from_bytes(&self.build());
        let program = Program::load(bytes.as_slice())?;
        Ok(MethodMeta::new(&program, "forward", &self.registry)?.metadata_bytes())
    }

    /// The kernel scratch this test's program asks for ([`MethodMeta::kernel_scratch_bytes`]).
    pub fn kernel_scratch_bytes(&self) -> Result<usize, Error> {
        let bytes = AlignedBuf::from_bytes(&self.build());
        let program = Program::load(bytes.as_slice())?;
        Ok(MethodMeta::new(&program, "forward", &self.registry)?.kernel_scratch_bytes())
    }

    fn run_bytes(
        &self,
        program: &[u8],
        registry: &Registry<'static>,
        mut after: impl FnMut(&crate::method::Method<'_, '_>),
    ) -> Result<(Vec<TestTensor>, Vec<Value<'static>>), Error> {
        let bytes = AlignedBuf::from_bytes(program);
        let program = Program::load(bytes.as_slice())?;
        let meta = MethodMeta::new(&program, "forward", registry)?;
        let mut bufs = OwnedArenas::for_meta(&meta)?;
        let mut method = bufs.load(meta, registry)?;
        for (k, (v, data)) in self.inputs.iter().enumerate() {
            let Spec::Tensor(t) = &self.values[*v as usize] else {
                unreachable!()
            };
            let dims: Vec<usize> = t.sizes.iter().map(|&d| d as usize).collect();
            method.set_input(k, t.dtype, &Shape::new(&dims).expect("rank"), data)?;
        }
        method.execute()?;
        after(&method);
        let mut out = Vec::new();
        for i in 0..method.num_outputs() {
            let t = method.output(i)?;
            out.push(TestTensor {
                dtype: t.dtype(),
                shape: t.dims().to_vec(),
                bytes: t.bytes().to_vec(),
            });
        }
        let values = method
            .values()
            .iter()
            .map(|v| match *v {
                Value::Int(x) => Value::Int(x),
                Value::Double(x) => Value::Double(x),
                Value::Bool(x) => Value::Bool(x),
                _ => Value::None,
            })
            .collect();
        Ok((out, values))
    }

    /// Runs and returns the kernel error (panics if the run succeeds or fails elsewhere).
    pub fn run_kernel_err(&self) -> crate::error::KernelError {
        match self.run() {
            Err(Error::Kernel { source, .. }) => source,
            other => panic!("expected a kernel error, got {other:?}"),
        }
    }
}

/// Whether the GEMM unit tests run the kernels of the ISA named `isa` (`generic`, `neon`,
/// `sve2`, `sme`, `sme2`): every ISA unless `PTERA_TEST_ISAS` lists some, comma-separated. The
/// Arm matrix lists the scalable ones at its second and third vector lengths, where the
/// generic and Neon kernels, which read no vector length, would repeat the first run.
pub fn isa_tested(isa: &str) -> bool {
    match std::env::var("PTERA_TEST_ISAS") {
        Ok(list) if !list.trim().is_empty() => list.split(',').any(|s| s.trim() == isa),
        _ => true,
    }
}

/// The one deterministic test RNG (xorshift64*): every randomised test draws from it, so a
/// failing case is reproduced by its seed alone.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        // A zero state would stay zero.
        if self.0 == 0 {
            self.0 = 0x9e37_79b9_7f4a_7c15;
        }
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `[0, 1)` with 24 random bits.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in `[-1, 1)`.
    #[allow(clippy::should_implement_trait)] // not an iterator: an f32 draw
    pub fn next(&mut self) -> f32 {
        self.unit() * 2.0 - 1.0
    }
    /// `n` values uniform in `[-1, 1)`.
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
    /// `n` values uniform in `[lo, hi)`.
    pub fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| lo + (hi - lo) * self.unit()).collect()
    }
    /// Uniform in `0..m` (`m > 0`).
    pub fn below(&mut self, m: u64) -> u64 {
        self.next_u64() % m
    }
    /// `n` integers uniform in `lo..=hi`.
    pub fn i64s(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n)
            .map(|_| lo + self.below((hi - lo + 1) as u64) as i64)
            .collect()
    }
    pub fn bools(&mut self, n: usize) -> Vec<bool> {
        (0..n).map(|_| self.next_u64() & 1 == 1).collect()
    }
}

/// Reference broadcast (NumPy rules, right-aligned) of two dim lists, written independently of
/// the kernels' own shape code so tests can check it: each output dim is the non-1 one.
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], d: usize| {
        if d + s.len() >= r {
            s[d + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|d| {
            let (x, y) = (at(a, d), at(b, d));
            if x == 1 {
                y
            } else {
                x
            }
        })
        .collect()
}

/// Index into `xs`-shaped data of element `o` of the `os`-shaped broadcast result (naive
/// reference for broadcasting kernels).
pub fn broadcast_index(o: usize, os: &[usize], xs: &[usize]) -> usize {
    let (mut rem, mut idx, mut stride) = (o, 0, 1);
    let off = os.len() - xs.len();
    for d in (0..os.len()).rev() {
        let c = rem % os[d];
        rem /= os[d];
        if d >= off {
            if xs[d - off] != 1 {
                idx += c * stride;
            }
            stride *= xs[d - off];
        }
    }
    idx
}

/// `"aten::add.out"` → (`"aten::add"`, `"out"`); no overload → empty.
pub fn split_key(key: &str) -> (&str, &str) {
    let ns = key.find("::").map_or(0, |p| p + 2);
    match key[ns..].find('.') {
        Some(p) => (&key[..ns + p], &key[ns + p + 1..]),
        None => (key, ""),
    }
}

/// Inserts a 32-byte `eh00` header after the identifier and appends `segments` from a
/// 128-aligned base, each 128-aligned, as ExecuTorch's serializer does.
pub fn with_segments(flatbuffer: &[u8], segments: &[&[u8]]) -> Vec<u8> {
    crate::format::write::container(flatbuffer, segments)
}

/// A thread team ([`crate::parallel::threads::ThreadTeam`]) that splits every job it can
/// (`min_work` 1, GEMM-sized scratch) and counts the jobs it split, so that a test of
/// bit-identical multi-core results knows splits really happened.
pub struct CountingTeam {
    team: crate::parallel::threads::ThreadTeam,
    splits: core::sync::atomic::AtomicUsize,
    widest: core::sync::atomic::AtomicUsize,
}

impl CountingTeam {
    pub fn new(cores: usize) -> CountingTeam {
        CountingTeam {
            team: crate::parallel::threads::ThreadTeam::with_min_work(
                cores,
                crate::linalg::gemm::GEMM_SCRATCH_F32,
                1,
            ),
            splits: core::sync::atomic::AtomicUsize::new(0),
            widest: core::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The most parts one job was split into so far.
    pub fn widest(&self) -> usize {
        self.widest.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// Jobs run on more than one core so far.
    pub fn splits(&self) -> usize {
        self.splits.load(core::sync::atomic::Ordering::Relaxed)
    }
}

impl crate::parallel::Team for CountingTeam {
    fn cores(&self) -> usize {
        self.team.cores()
    }
    fn min_work(&self) -> usize {
        self.team.min_work()
    }
    fn scratch_f32(&self) -> usize {
        self.team.scratch_f32()
    }
    fn busy(&self) -> bool {
        self.team.busy()
    }
    fn run(&self, parts: usize, job: &crate::parallel::Job<'_>) {
        if parts > 1 {
            self.splits
                .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            self.widest
                .fetch_max(parts, core::sync::atomic::Ordering::Relaxed);
        }
        self.team.run(parts, job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_split() {
        assert_eq!(split_key("aten::add.out"), ("aten::add", "out"));
        assert_eq!(split_key("aten::copy_"), ("aten::copy_", ""));
        assert_eq!(
            split_key("executorch_prim::et_view.default"),
            ("executorch_prim::et_view", "default")
        );
    }

    #[test]
    fn unknown_operator_fails_at_load() {
        let mut t = OpTest::new("aten::nonexistent.out");
        let a = t.input_f32(&[2], &[1.0, 2.0]);
        let o = t.output(DType::F32, &[2]);
        t.call(&[a, o, o]);
        match t.run() {
            Err(Error::MissingOperators { count: 1, names }) => {
                assert_eq!(names.as_str(), "aten::nonexistent.out")
            }
            other => panic!("{other:?}"),
        }
    }
}
