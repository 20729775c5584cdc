//! Static memory: what a method needs before it is loaded ([`MethodMeta`]) and the bump
//! allocator that lays the runtime tables out in the caller's metadata buffer.
//!
//! [`MethodMeta::new`] is also where a method is validated: every value, tensor, list,
//! instruction, operator and delegate is checked against the program, so that loading and
//! execution can rely on indices being in range.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};

use crate::delegate::{Backend, DelegateInit, Requirements};
use crate::dtype::DType;
use crate::error::{self, Error};
use crate::exec::value::{TensorSlot, Value};
use crate::exec::DelegateSlot;
use crate::format::{fb, Program};
use crate::kernels::{KernelFn, Registry};
use crate::tensor::{Shape, MAX_RANK};

/// Alignment of arenas, metadata and scratch.
pub const ARENA_ALIGN: usize = 16;

/// Sizes and facts about one method, computed from the program alone.
pub struct MethodMeta<'p> {
    pub(crate) program: Program<'p>,
    pub(crate) plan: fb::ExecutionPlan<'p>,
    pub(crate) name: &'p str,
    pub(crate) num_values: usize,
    pub(crate) num_tensors: usize,
    pub(crate) kernel_scratch: usize,
    pub(crate) delegate_state: usize,
    pub(crate) metadata_bytes: usize,
}

/// Static facts about one tensor input or output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Shape,
}

impl<'p> MethodMeta<'p> {
    /// Validates method `name` of `program` against `registry` and computes its memory needs.
    pub fn new(
        program: &Program<'p>,
        name: &str,
        registry: &Registry<'_>,
    ) -> Result<MethodMeta<'p>, Error> {
        let (meta, unresolved) = Self::new_lenient(program, name, registry)?;
        match unresolved {
            Some(e) => Err(e),
            None => Ok(meta),
        }
    }

    /// Like [`new`](Self::new), but operator and delegate resolution failures are returned
    /// beside the meta instead of failing (for inspection tools). Sizes then count only what
    /// resolved.
    pub fn new_lenient(
        program: &Program<'p>,
        name: &str,
        registry: &Registry<'_>,
    ) -> Result<(MethodMeta<'p>, Option<Error>), Error> {
        let plan = program.method(name)?;
        let name = plan.name().unwrap_or("");
        let req = |field: &'static str| Error::MissingField {
            table: "ExecutionPlan",
            field,
            index: 0,
        };
        let values = plan.values().ok_or(req("values"))?;
        plan.inputs().ok_or(req("inputs"))?;
        plan.outputs().ok_or(req("outputs"))?;
        plan.chains().ok_or(req("chains"))?;
        let sizes = plan
            .non_const_buffer_sizes()
            .ok_or(req("non_const_buffer_sizes"))?;
        if let Some(k) = sizes.iter().position(|s| s < 0) {
            return Err(Error::Invalid {
                what: "non_const_buffer_sizes",
                index: k,
                detail: "negative arena size",
            });
        }
        let mut meta = MethodMeta {
            program: *program,
            plan,
            name,
            num_values: values.len(),
            num_tensors: 0,
            kernel_scratch: 0,
            delegate_state: 0,
            metadata_bytes: 0,
        };
        meta.num_tensors = meta.validate_values()?;
        meta.validate_io()?;
        meta.validate_instructions()?;
        let (scratch, mut unresolved) = meta.resolve_operators(registry)?;
        meta.kernel_scratch = scratch;
        match meta.prepare_delegates(registry) {
            Ok(r) => {
                meta.kernel_scratch = meta.kernel_scratch.max(r.scratch);
                meta.delegate_state = r.state;
            }
            Err(e) => {
                unresolved.get_or_insert(e);
            }
        }
        meta.metadata_bytes = meta.layout(&mut Bump::counting())?;
        Ok((meta, unresolved))
    }

    pub fn name(&self) -> &'p str {
        self.name
    }

    pub fn plan(&self) -> fb::ExecutionPlan<'p> {
        self.plan
    }

    pub fn program(&self) -> &Program<'p> {
        &self.program
    }

    /// Number of planned arenas the caller passes (memory ids 1..=n).
    pub fn arena_count(&self) -> usize {
        self.plan
            .non_const_buffer_sizes()
            .map_or(0, |v| v.len().saturating_sub(1))
    }

    /// Bytes of the arena for memory id `k + 1`.
    pub fn arena_size(&self, k: usize) -> u64 {
        self.plan
            .non_const_buffer_sizes()
            .map_or(0, |v| v.get(k + 1).max(0) as u64)
    }

    /// Bytes of runtime metadata: EValue table, tensor descriptors, resolved kernels,
    /// delegate handles, input flags and the largest kernel scratch, each 16-byte aligned.
    pub fn metadata_bytes(&self) -> usize {
        self.metadata_bytes
    }

    /// Largest scratch any kernel or delegate of this method declared.
    pub fn kernel_scratch_bytes(&self) -> usize {
        self.kernel_scratch
    }

    pub fn num_values(&self) -> usize {
        self.num_values
    }

    pub fn num_instructions(&self) -> usize {
        self.plan
            .chains()
            .into_iter()
            .flatten()
            .map(|c| c.instructions().map_or(0, |i| i.len()))
            .sum()
    }

    pub fn num_inputs(&self) -> usize {
        self.plan.inputs().map_or(0, |v| v.len())
    }

    pub fn num_outputs(&self) -> usize {
        self.plan.outputs().map_or(0, |v| v.len())
    }

    /// Dtype and (serialized, upper-bound) shape of input `i`, if it is a tensor.
    pub fn input(&self, i: usize) -> Option<TensorInfo> {
        let v = self.plan.inputs()?;
        (i < v.len())
            .then(|| self.tensor_info(v.get(i) as usize))
            .flatten()
    }

    /// Dtype and shape of output `i`, if it is a tensor.
    pub fn output(&self, i: usize) -> Option<TensorInfo> {
        let v = self.plan.outputs()?;
        (i < v.len())
            .then(|| self.tensor_info(v.get(i) as usize))
            .flatten()
    }

    fn tensor_info(&self, value: usize) -> Option<TensorInfo> {
        let t = self.plan.values()?.get(value).val_as_tensor()?;
        let dtype = DType::from_scalar_type(t.scalar_type().0)?;
        let mut shape = Shape::scalar();
        for d in t.sizes()?.iter() {
            shape.push(d.max(0) as usize)?;
        }
        Some(TensorInfo { dtype, shape })
    }

    /// Checks every EValue; returns the number of tensors.
    fn validate_values(&self) -> Result<usize, Error> {
        let values = self.plan.values().unwrap_or_default();
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
            let tensor_at = |idx: i32| -> bool {
                values.get(idx as usize).val_type() == fb::KernelTypes::Tensor
            };
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
                    self.check_tensor(i, t)?;
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
    pub(crate) fn check_tensor(
        &self,
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
            if id == 0 || id > self.arena_count() {
                return Err(Error::IndexOutOfRange {
                    what: "tensor memory_id",
                    at: i,
                    index: id as i64,
                    len: self.arena_count() + 1,
                });
            }
            let off = ((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64;
            let size = self.arena_size(id - 1);
            if off.checked_add(nbytes as u64).is_none_or(|end| end > size) {
                return Err(Error::OutOfBounds {
                    what: "planned tensor",
                    index: i,
                    offset: off,
                    size: nbytes as u64,
                    limit: size,
                });
            }
            if off % dtype.size() as u64 != 0 {
                return Err(bad("planned offset not aligned to its dtype"));
            }
            if t.data_buffer_idx() > 0 {
                self.program
                    .mutable_initial(t.data_buffer_idx(), nbytes as u64, i)?;
            }
        } else if t.data_buffer_idx() > 0 {
            let data = self
                .program
                .constant(t.data_buffer_idx(), nbytes as u64, i)?;
            if nbytes > 0 && (data.as_ptr() as usize) % dtype.size() != 0 {
                let off = data.as_ptr() as usize - self.program.bytes().as_ptr() as usize;
                return Err(Error::MisalignedConstant {
                    value: i,
                    offset: off as u64,
                    align: dtype.size(),
                });
            }
        }
        Ok((dtype, shape, nbytes))
    }

    fn validate_io(&self) -> Result<(), Error> {
        let n = self.num_values;
        for (what, list) in [
            ("method input", self.plan.inputs()),
            ("method output", self.plan.outputs()),
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

    fn validate_instructions(&self) -> Result<(), Error> {
        let n = self.num_values;
        let ops = self.plan.operators().map_or(0, |v| v.len());
        let dels = self.plan.delegates().map_or(0, |v| v.len());
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
        for chain in self.plan.chains().unwrap_or_default() {
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

    /// Resolves every operator; all missing ones are reported together.
    /// Returns the largest scratch a resolved kernel declared, and the missing-operators error.
    fn resolve_operators(&self, registry: &Registry<'_>) -> Result<(usize, Option<Error>), Error> {
        let mut scratch = 0;
        let mut count = 0;
        let mut names = heapless::String::<1024>::new();
        for (i, op) in self.plan.operators().unwrap_or_default().iter().enumerate() {
            let name = op.name().ok_or(Error::MissingField {
                table: "Operator",
                field: "name",
                index: i,
            })?;
            let overload = op.overload().unwrap_or("");
            match registry.kernel(name, overload) {
                Some(k) => scratch = scratch.max(k.scratch),
                None => {
                    if count > 0 {
                        error::push_truncated(&mut names, ", ");
                    }
                    error::push_truncated(&mut names, name);
                    if !overload.is_empty() {
                        error::push_truncated(&mut names, ".");
                        error::push_truncated(&mut names, overload);
                    }
                    count += 1;
                }
            }
        }
        let missing = (count > 0).then_some(Error::MissingOperators { count, names });
        Ok((scratch, missing))
    }

    /// Checks that every delegate's backend exists and accepts its payload.
    /// Checks that every delegate's backend exists and accepts its payload. Returns the
    /// largest scratch and the total (16-byte rounded) state bytes.
    fn prepare_delegates(&self, registry: &Registry<'_>) -> Result<Requirements, Error> {
        let mut total = Requirements::default();
        for (d, del) in self.plan.delegates().unwrap_or_default().iter().enumerate() {
            let (backend, payload) = self.delegate_backend(d, del, registry)?;
            let init = DelegateInit {
                program: self.program,
                payload,
                index: d,
            };
            let r = backend
                .prepare(&init)
                .map_err(|e| delegate_error(d, backend.id(), e))?;
            total.scratch = total.scratch.max(r.scratch);
            total.state += r.state.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        }
        Ok(total)
    }

    pub(crate) fn delegate_backend<'r>(
        &self,
        d: usize,
        del: fb::BackendDelegate<'p>,
        registry: &Registry<'r>,
    ) -> Result<(&'r dyn Backend, &'p [u8]), Error> {
        let id = del.id().ok_or(Error::MissingField {
            table: "BackendDelegate",
            field: "id",
            index: d,
        })?;
        let backend = registry.backend(id).ok_or_else(|| Error::UnknownBackend {
            delegate: d,
            backend: error::name(id),
        })?;
        let processed = del.processed().ok_or(Error::MissingField {
            table: "BackendDelegate",
            field: "processed",
            index: d,
        })?;
        Ok((backend, self.program.delegate_data(processed)?))
    }

    /// Lays out (or counts) the runtime tables in `bump`; returns bytes used.
    pub(crate) fn layout(&self, bump: &mut Bump<'_>) -> Result<usize, Error> {
        bump.reserve::<Value<'p>>(self.num_values)?;
        bump.reserve::<TensorSlot>(self.num_tensors)?;
        bump.reserve::<KernelFn>(self.plan.operators().map_or(0, |v| v.len()))?;
        bump.reserve::<DelegateSlot<'static, 'p>>(self.plan.delegates().map_or(0, |v| v.len()))?;
        bump.reserve::<u8>(self.delegate_state)?;
        bump.reserve::<bool>(self.num_inputs())?;
        bump.reserve::<u8>(self.kernel_scratch)?;
        Ok(bump.used())
    }
}

/// Bump allocator over the caller's metadata buffer (or a dry run that only counts).
/// Every allocation starts at a multiple of [`ARENA_ALIGN`] relative to a 16-aligned base.
pub(crate) struct Bump<'a> {
    base: *mut u8,
    len: usize,
    used: usize,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> Bump<'a> {
    pub fn counting() -> Bump<'static> {
        Bump {
            base: core::ptr::null_mut(),
            len: usize::MAX,
            used: 0,
            _buf: PhantomData,
        }
    }

    pub fn new(buf: &'a mut [u8]) -> Result<Bump<'a>, Error> {
        if buf.as_ptr() as usize % ARENA_ALIGN != 0 {
            return Err(Error::Invalid {
                what: "metadata buffer",
                index: 0,
                detail: "not 16-byte aligned",
            });
        }
        Ok(Bump {
            base: buf.as_mut_ptr(),
            len: buf.len(),
            used: 0,
            _buf: PhantomData,
        })
    }

    pub fn used(&self) -> usize {
        self.used
    }

    fn reserve<T>(&mut self, n: usize) -> Result<usize, Error> {
        debug_assert!(align_of::<T>() <= ARENA_ALIGN);
        let start = self.used.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        let bytes = n
            .checked_mul(size_of::<T>())
            .ok_or(Error::MetadataTooSmall {
                needed: usize::MAX,
                got: self.len,
            })?;
        let end = start.checked_add(bytes).ok_or(Error::MetadataTooSmall {
            needed: usize::MAX,
            got: self.len,
        })?;
        self.used = end;
        Ok(start)
    }

    /// Allocates `n` copies of `fill`.
    pub fn alloc<T: Copy>(
        &mut self,
        n: usize,
        fill: T,
        needed: usize,
    ) -> Result<&'a mut [T], Error> {
        let start = self.reserve::<T>(n)?;
        if self.base.is_null() || self.used > self.len {
            return Err(Error::MetadataTooSmall {
                needed,
                got: self.len,
            });
        }
        // SAFETY: `start..start + n*size_of::<T>()` lies inside the buffer borrowed mutably for
        // 'a (checked just above: used ≤ len), ranges handed out never overlap (bump only moves
        // forward), and `start` is a multiple of 16 from a 16-aligned base, so the pointer is
        // aligned for T (align ≤ 16). Each element is written before the slice is formed.
        unsafe {
            let p = self.base.add(start) as *mut T;
            for k in 0..n {
                p.add(k).write(fill);
            }
            Ok(core::slice::from_raw_parts_mut(p, n))
        }
    }
}

/// Wraps a backend's load-time error with the delegate index and backend id.
pub(crate) fn delegate_error(d: usize, backend: &str, e: crate::error::KernelError) -> Error {
    let mut detail = error::Name::new();
    let _ = core::fmt::write(&mut detail, format_args!("{e}"));
    Error::DelegateInit {
        delegate: d,
        backend: error::name(backend),
        detail,
    }
}
