//! Method loading and the instruction loop.
//!
//! [`Method::load`] builds the runtime value table in the caller's metadata buffer, points
//! every tensor at program bytes (constants) or a planned arena, copies initial state of
//! mutable buffers, and resolves kernels and delegates. [`Method::execute`] then runs chain
//! instructions with no allocation.

pub mod demand;
pub mod value;

use core::marker::PhantomData;

use crate::delegate::{Backend, DelegateInit};
use crate::dtype::DType;
use crate::error::{self, Error};
use crate::format::fb;
use crate::kernels::{KernelCtx, KernelFn, Registry};
use crate::memory::{delegate_error, Bump, MethodMeta, ARENA_ALIGN};
use crate::tensor::{Shape, TensorRef, MAX_RANK};
use value::{Dynamism, TensorSlot, Value};

/// Executed-instruction limit per `execute` (guards against runaway jump loops).
pub const MAX_STEPS: usize = 10_000_000;

/// A resolved delegate: its backend and payload.
#[derive(Clone, Copy)]
pub struct DelegateSlot<'a, 'p> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) init: DelegateInit<'p>,
    /// The backend's translated plan (in the metadata buffer).
    pub(crate) state: &'a [u8],
}

fn placeholder_kernel(_: &mut KernelCtx<'_, '_, '_>) -> Result<(), crate::KernelError> {
    Err(crate::KernelError::Unsupported {
        detail: "unresolved operator",
    })
}

/// A loaded method, ready to execute. Borrows the program (`'p`) and the caller's arenas and
/// metadata buffer (`'a`).
pub struct Method<'a, 'p> {
    meta: MethodMeta<'p>,
    values: &'a mut [Value<'p>],
    tensors: &'a mut [TensorSlot],
    kernels: &'a mut [KernelFn],
    delegates: &'a mut [DelegateSlot<'a, 'p>],
    input_set: &'a mut [bool],
    scratch: &'a mut [u8],
    /// Output rows the program reads of some matmuls' outputs ([`demand`]).
    demand: heapless::Vec<demand::RowDemand, { demand::MAX_DEMANDS }>,
    _arenas: PhantomData<&'a mut [u8]>,
}

impl<'a, 'p: 'a> Method<'a, 'p> {
    /// Loads a method whose [`MethodMeta`] was computed with the same `registry`.
    ///
    /// `arenas` yields one buffer per memory id (1, 2, ...), each 16-byte aligned and at least
    /// `meta.arena_size(k)` bytes; `metadata` must hold `meta.metadata_bytes()` bytes.
    pub fn load<I>(
        meta: MethodMeta<'p>,
        registry: &Registry<'a>,
        arenas: I,
        metadata: &'a mut [u8],
    ) -> Result<Self, Error>
    where
        I: IntoIterator<Item = &'a mut [u8]>,
    {
        let needed = meta.metadata_bytes();
        if metadata.len() < needed {
            return Err(Error::MetadataTooSmall {
                needed,
                got: metadata.len(),
            });
        }
        let mut bases: heapless::Vec<(*mut u8, usize), 16> = heapless::Vec::new();
        let expected = meta.arena_count();
        let mut got = 0;
        for (k, arena) in arenas.into_iter().enumerate() {
            got += 1;
            if k >= expected {
                continue;
            }
            if (arena.len() as u64) < meta.arena_size(k) {
                return Err(Error::ArenaTooSmall {
                    memory_id: k + 1,
                    needed: meta.arena_size(k),
                    got: arena.len(),
                });
            }
            if arena.as_ptr() as usize % ARENA_ALIGN != 0 {
                return Err(Error::ArenaMisaligned { memory_id: k + 1 });
            }
            bases
                .push((arena.as_mut_ptr(), arena.len()))
                .map_err(|_| Error::Invalid {
                    what: "method",
                    index: 0,
                    detail: "more than 16 arenas",
                })?;
        }
        if got != expected {
            return Err(Error::ArenaCount { expected, got });
        }

        let mut bump = Bump::new(metadata)?;
        let plan = meta.plan();
        let fb_values = plan.values().unwrap_or_default();
        let values = bump.alloc(meta.num_values, Value::None, needed)?;
        let empty = TensorSlot {
            dtype: DType::U8,
            dynamism: Dynamism::Static,
            planned: false,
            writable: false,
            contiguous: true,
            dim_order: [0; MAX_RANK],
            shape: Shape::scalar(),
            data: core::ptr::null_mut(),
            capacity: 0,
        };
        let tensors = bump.alloc(meta.num_tensors, empty, needed)?;
        let mut next_tensor = 0usize;
        for (i, ev) in fb_values.iter().enumerate() {
            values[i] = match ev.val_type() {
                fb::KernelTypes::Int => Value::Int(ev.val_as_int().map_or(0, |v| v.int_val())),
                fb::KernelTypes::Bool => {
                    Value::Bool(ev.val_as_bool().is_some_and(|v| v.bool_val()))
                }
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
                    tensors[next_tensor] = Self::tensor_slot(&meta, i, t, &bases)?;
                    next_tensor += 1;
                    Value::Tensor((next_tensor - 1) as u32)
                }
                _ => Value::None,
            };
        }
        // Tensor lists were validated to reference Tensor values; now that every tensor has a
        // slot the list items resolve through `values`.

        let ops = plan.operators().unwrap_or_default();
        let kernels = bump.alloc(ops.len(), placeholder_kernel as KernelFn, needed)?;
        for (i, op) in ops.iter().enumerate() {
            let k = registry
                .kernel(op.name().unwrap_or(""), op.overload().unwrap_or(""))
                .ok_or(Error::MissingOperators {
                    count: 1,
                    names: heapless::String::new(),
                })?;
            kernels[i] = k.run;
        }
        let dels = plan.delegates().unwrap_or_default();
        // A fill value for the slot table (every slot is overwritten below).
        let first = match dels.iter().next() {
            Some(del) => {
                let (backend, payload) = meta.delegate_backend(0, del, registry)?;
                let init = DelegateInit {
                    program: *meta.program(),
                    payload,
                    index: 0,
                };
                Some(DelegateSlot {
                    backend,
                    init,
                    state: &[],
                })
            }
            None => None,
        };
        let delegates = match first {
            Some(f) => {
                let slots = bump.alloc(dels.len(), f, needed)?;
                // State areas follow the slots, in delegate order (as `MethodMeta::layout`
                // counts them: one 16-aligned reservation of the rounded total).
                let state_all = bump.alloc(meta.delegate_state, 0u8, needed)?;
                let mut rest: &'a mut [u8] = state_all;
                for (d, del) in dels.iter().enumerate() {
                    let (backend, payload) = meta.delegate_backend(d, del, registry)?;
                    let init = DelegateInit {
                        program: *meta.program(),
                        payload,
                        index: d,
                    };
                    let req = backend
                        .prepare(&init)
                        .map_err(|e| delegate_error(d, backend.id(), e))?;
                    let take = req.state.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
                    if take > rest.len() {
                        return Err(Error::MetadataTooSmall { needed, got: take });
                    }
                    let (mine, tail) = core::mem::take(&mut rest).split_at_mut(take);
                    rest = tail;
                    backend
                        .init(&init, &mut mine[..req.state])
                        .map_err(|e| delegate_error(d, backend.id(), e))?;
                    slots[d] = DelegateSlot {
                        backend,
                        init,
                        state: mine,
                    };
                }
                slots
            }
            None => {
                bump.alloc(meta.delegate_state, 0u8, needed)?;
                &mut []
            }
        };
        let input_set = bump.alloc(meta.num_inputs(), false, needed)?;
        let scratch = bump.alloc(meta.kernel_scratch_bytes(), 0u8, needed)?;
        let demand = demand::analyse(plan, values, tensors);
        Ok(Method {
            meta,
            values,
            tensors,
            kernels,
            delegates,
            input_set,
            scratch,
            demand,
            _arenas: PhantomData,
        })
    }

    /// Builds the descriptor of tensor value `i` (validated by `MethodMeta`).
    fn tensor_slot(
        meta: &MethodMeta<'p>,
        i: usize,
        t: fb::Tensor<'p>,
        arenas: &[(*mut u8, usize)],
    ) -> Result<TensorSlot, Error> {
        let (dtype, shape, nbytes) = meta.check_tensor(i, t)?;
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
            let off =
                (((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64) as usize;
            let (base, len) = arenas[a.memory_id() as usize - 1];
            // MethodMeta checked off + nbytes ≤ planned size ≤ len.
            debug_assert!(off + nbytes <= len);
            // SAFETY: `off + nbytes <= arena length` (checked by MethodMeta::check_tensor against
            // the plan and by `load` against the real arena), so the pointer stays in bounds of
            // the arena borrowed for 'a.
            slot.data = unsafe { base.add(off) };
            slot.planned = true;
            slot.writable = true;
            if t.data_buffer_idx() > 0 {
                let init = meta
                    .program()
                    .mutable_initial(t.data_buffer_idx(), nbytes as u64, i)?;
                // SAFETY: destination range checked as above; the source is program bytes, which
                // never overlap a caller arena borrowed mutably.
                unsafe { core::ptr::copy_nonoverlapping(init.as_ptr(), slot.data, nbytes) };
            }
        } else if t.data_buffer_idx() > 0 {
            let data = meta
                .program()
                .constant(t.data_buffer_idx(), nbytes as u64, i)?;
            // Constants are read-only: `writable` stays false, so no kernel ever writes here.
            slot.data = data.as_ptr() as *mut u8;
        }
        Ok(slot)
    }

    /// The runtime value table (for inspection and tests).
    pub fn values(&self) -> &[Value<'p>] {
        self.values
    }

    /// The output-row restrictions found at load ([`demand`]).
    pub fn row_demands(&self) -> &[demand::RowDemand] {
        &self.demand
    }

    pub fn meta(&self) -> &MethodMeta<'p> {
        &self.meta
    }

    fn input_slot(&self, index: usize) -> Result<usize, Error> {
        let inputs = self.meta.plan().inputs().unwrap_or_default();
        if index >= inputs.len() {
            return Err(Error::InputIndex {
                index,
                count: inputs.len(),
            });
        }
        match self.values[inputs.get(index) as usize] {
            Value::Tensor(s) => Ok(s as usize),
            _ => Err(Error::Invalid {
                what: "input",
                index,
                detail: "input is not a tensor",
            }),
        }
    }

    /// Copies a tensor input into its planned storage (resizing a dynamic input).
    /// `data` holds `shape.numel()` little-endian elements of `dtype`.
    pub fn set_input(
        &mut self,
        index: usize,
        dtype: DType,
        shape: &Shape,
        data: &[u8],
    ) -> Result<(), Error> {
        let slot = self.input_slot(index)?;
        let t = &mut self.tensors[slot];
        if t.dtype != dtype {
            return Err(Error::InputDType {
                index,
                expected: t.dtype,
                got: dtype,
            });
        }
        let nbytes = shape.numel() * dtype.size();
        let fits = match t.dynamism {
            Dynamism::Static => shape.dims() == t.shape.dims(),
            Dynamism::Bound => shape.rank() == t.shape.rank() && nbytes <= t.capacity,
        };
        if !fits {
            return Err(Error::InputShape {
                index,
                expected: t.shape,
                got: *shape,
            });
        }
        if data.len() != nbytes {
            return Err(Error::Invalid {
                what: "input",
                index,
                detail: "data length differs from shape and dtype",
            });
        }
        if !t.planned || t.data.is_null() {
            return Err(Error::Invalid {
                what: "input",
                index,
                detail: "input tensor is not memory planned",
            });
        }
        t.shape = *shape;
        // SAFETY: `t.data` points into a planned arena with at least `capacity ≥ nbytes` bytes
        // (checked above and at load); `data` is a caller slice that cannot overlap an arena the
        // method borrows mutably.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), t.data, nbytes) };
        self.input_set[index] = true;
        Ok(())
    }

    /// Convenience for `f32` inputs.
    pub fn set_input_f32(
        &mut self,
        index: usize,
        shape: &Shape,
        data: &[f32],
    ) -> Result<(), Error> {
        // SAFETY: any f32 slice is also a valid byte slice of 4x the length.
        let bytes =
            unsafe { core::slice::from_raw_parts(data.as_ptr() as *const u8, data.len() * 4) };
        self.set_input(index, DType::F32, shape, bytes)
    }

    /// Convenience for `i64` inputs.
    pub fn set_input_i64(
        &mut self,
        index: usize,
        shape: &Shape,
        data: &[i64],
    ) -> Result<(), Error> {
        // SAFETY: any i64 slice is also a valid byte slice of 8x the length.
        let bytes =
            unsafe { core::slice::from_raw_parts(data.as_ptr() as *const u8, data.len() * 8) };
        self.set_input(index, DType::I64, shape, bytes)
    }

    pub fn num_outputs(&self) -> usize {
        self.meta.num_outputs()
    }

    /// View of any tensor value `value` (an intermediate, after `execute`: what the last
    /// instruction writing it left there; rows outside a [`Method::row_demands`] restriction
    /// are unspecified). For debugging and tests; `None` if `value` is not a tensor.
    pub fn tensor(&self, value: usize) -> Option<TensorRef<'_>> {
        let Some(Value::Tensor(s)) = self.values.get(value) else {
            return None;
        };
        let t = self.tensors.get(*s as usize)?;
        Some(TensorRef {
            dtype: t.dtype,
            shape: t.shape,
            dim_order: t.dim_order,
            data: t.data,
            arg: value,
            _life: PhantomData,
        })
    }

    /// View of output `index` after `execute`.
    pub fn output(&self, index: usize) -> Result<TensorRef<'_>, Error> {
        let outputs = self.meta.plan().outputs().unwrap_or_default();
        if index >= outputs.len() {
            return Err(Error::OutputIndex {
                index,
                count: outputs.len(),
            });
        }
        let slot = match self.values[outputs.get(index) as usize] {
            Value::Tensor(s) => s as usize,
            _ => {
                return Err(Error::OutputIndex {
                    index,
                    count: outputs.len(),
                })
            }
        };
        let t = &self.tensors[slot];
        Ok(TensorRef {
            dtype: t.dtype,
            shape: t.shape,
            dim_order: t.dim_order,
            data: t.data,
            arg: index,
            _life: PhantomData,
        })
    }

    fn op_name(&self, op: usize) -> error::Name {
        let mut n = error::Name::new();
        if let Some(o) = self.meta.plan().operators().map(|v| v.get(op)) {
            error::push_truncated(&mut n, o.name().unwrap_or("?"));
            let ov = o.overload().unwrap_or("");
            if !ov.is_empty() {
                error::push_truncated(&mut n, ".");
                error::push_truncated(&mut n, ov);
            }
        }
        n
    }

    /// Runs every chain of the method once.
    ///
    /// Inputs must be set again before the next call: the program's memory plan may reuse an
    /// input's storage once the input has been consumed, so stale inputs are never reused.
    pub fn execute(&mut self) -> Result<(), Error> {
        if let Some(i) = self.input_set.iter().position(|s| !s) {
            return Err(Error::InputNotSet { index: i });
        }
        self.input_set.iter_mut().for_each(|s| *s = false);
        let plan = self.meta.plan();
        for (ci, chain) in plan.chains().unwrap_or_default().iter().enumerate() {
            let instrs = chain.instructions().unwrap_or_default();
            let mut pc = 0usize;
            let mut steps = 0usize;
            while pc < instrs.len() {
                steps += 1;
                if steps > MAX_STEPS {
                    return Err(Error::Execution {
                        instruction: pc,
                        detail: "instruction limit exceeded",
                    });
                }
                pc = self.step(ci, pc, instrs.get(pc))?;
            }
        }
        Ok(())
    }

    /// Executes one instruction; returns the next pc.
    fn step(&mut self, chain: usize, pc: usize, ins: fb::Instruction<'p>) -> Result<usize, Error> {
        let broken = Error::Execution {
            instruction: pc,
            detail: "malformed instruction",
        };
        let rows = self
            .demand
            .iter()
            .find(|d| d.chain as usize == chain && d.pc as usize == pc)
            .map(|d| (d.value as usize, d.lo as usize, d.hi as usize));
        match ins.instr_args_type() {
            fb::InstructionArguments::KernelCall => {
                let k = ins.instr_args_as_kernel_call().ok_or(broken)?;
                let op = k.op_index() as usize;
                let f = self.kernels[op];
                let mut ctx = KernelCtx::new(
                    self.values,
                    self.tensors,
                    k.args().unwrap_or_default(),
                    self.scratch,
                )
                .with_rows(rows);
                f(&mut ctx).map_err(|source| Error::Kernel {
                    instruction: pc,
                    operator: self.op_name(op),
                    source,
                })?;
                Ok(pc + 1)
            }
            fb::InstructionArguments::DelegateCall => {
                let d = ins.instr_args_as_delegate_call().ok_or(broken)?;
                let slot = self.delegates[d.delegate_index() as usize];
                let mut ctx = KernelCtx::new(
                    self.values,
                    self.tensors,
                    d.args().unwrap_or_default(),
                    self.scratch,
                )
                .with_rows(rows);
                slot.backend
                    .execute(&slot.init, slot.state, &mut ctx)
                    .map_err(|source| Error::Delegate {
                        instruction: pc,
                        backend: error::name(slot.backend.id()),
                        source,
                    })?;
                Ok(pc + 1)
            }
            fb::InstructionArguments::MoveCall => {
                let m = ins.instr_args_as_move_call().ok_or(broken)?;
                self.values[m.move_to() as usize] = self.values[m.move_from() as usize];
                Ok(pc + 1)
            }
            fb::InstructionArguments::JumpFalseCall => {
                let j = ins.instr_args_as_jump_false_call().ok_or(broken)?;
                let cond = match self.values[j.cond_value_index() as usize] {
                    Value::Bool(b) => b,
                    Value::Tensor(s) => {
                        let t = &self.tensors[s as usize];
                        if t.dtype != DType::Bool || (t.data.is_null() && t.nbytes() > 0) {
                            return Err(Error::Execution {
                                instruction: pc,
                                detail: "jump condition is not a bool tensor",
                            });
                        }
                        let n = t.nbytes();
                        // SAFETY: a bool tensor's data range (n bytes) lies in program or arena
                        // memory borrowed for the method's lifetime; no &mut to it is live here.
                        let bytes: &[u8] = if n == 0 {
                            &[]
                        } else {
                            // SAFETY: see above.
                            unsafe { core::slice::from_raw_parts(t.data, n) }
                        };
                        bytes.iter().all(|&b| b != 0)
                    }
                    _ => {
                        return Err(Error::Execution {
                            instruction: pc,
                            detail: "jump condition is not a bool",
                        })
                    }
                };
                Ok(if cond {
                    pc + 1
                } else {
                    j.destination_instruction() as usize
                })
            }
            fb::InstructionArguments::FreeCall => {
                let f = ins.instr_args_as_free_call().ok_or(broken)?;
                if let Value::Tensor(s) = self.values[f.value_index() as usize] {
                    let t = &mut self.tensors[s as usize];
                    t.data = core::ptr::null_mut();
                    t.capacity = 0;
                }
                Ok(pc + 1)
            }
            _ => Err(broken),
        }
    }
}

/// Owned, aligned buffers for a method on a host with an allocator (`std` feature).
#[cfg(any(test, feature = "std"))]
pub struct OwnedArenas {
    pub arenas: std::vec::Vec<crate::host::AlignedBuf>,
    pub metadata: crate::host::AlignedBuf,
}

#[cfg(any(test, feature = "std"))]
impl OwnedArenas {
    /// Allocates exactly what `meta` asks for; fails (instead of aborting) when the host
    /// cannot provide that much memory.
    pub fn for_meta(meta: &MethodMeta<'_>) -> Result<OwnedArenas, Error> {
        let alloc = |bytes: u64| {
            usize::try_from(bytes)
                .ok()
                .and_then(crate::host::AlignedBuf::try_zeroed)
                .ok_or(Error::HostAllocation { bytes })
        };
        let arenas = (0..meta.arena_count())
            .map(|k| alloc(meta.arena_size(k)))
            .collect::<Result<_, _>>()?;
        Ok(OwnedArenas {
            arenas,
            metadata: alloc(meta.metadata_bytes() as u64)?,
        })
    }

    /// Loads the method into these buffers.
    pub fn load<'a, 'p: 'a>(
        &'a mut self,
        meta: MethodMeta<'p>,
        registry: &Registry<'a>,
    ) -> Result<Method<'a, 'p>, Error> {
        let OwnedArenas { arenas, metadata } = self;
        Method::load(
            meta,
            registry,
            arenas.iter_mut().map(|a| a.as_mut_slice()),
            metadata.as_mut_slice(),
        )
    }
}
