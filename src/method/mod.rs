//! The public API of one method: [`MethodMeta`] (validation and exact memory needs, before
//! loading) and [`Method`] (loaded into caller buffers, inputs in, `execute`, outputs out).
//!
//! [`Method::load`] lays the runtime tables out in the caller's metadata buffer
//! (`exec::layout`), points every tensor at program bytes (constants) or a planned arena and
//! copies initial state of mutable buffers (`exec::values`), and resolves kernels and
//! delegates. [`Method::execute`] then runs the instruction loop (`exec::run`) with no
//! allocation.

mod meta;

pub use meta::{MethodMeta, TensorInfo};

use core::marker::PhantomData;

use crate::delegate::{self, DelegateInit, DelegateSlot};
use crate::dtype::DType;
use crate::error::Error;
use crate::exec::demand::{self, RowDemand};
use crate::exec::layout::{Bump, Tables, ARENA_ALIGN};
use crate::exec::run::Frame;
use crate::exec::{values, Registry};
use crate::kernel_api::{Dynamism, Observer, Value};
use crate::shape::Shape;
use crate::tensor::TensorRef;

/// A loaded method, ready to execute. Borrows the program (`'p`) and the caller's arenas and
/// metadata buffer (`'a`).
pub struct Method<'a, 'p> {
    meta: MethodMeta<'p>,
    tables: Tables<'a, 'p>,
    /// Output rows the program reads of some matmuls' outputs ([`demand`]).
    demand: heapless::Vec<RowDemand, { demand::MAX_DEMANDS }>,
    /// Calls run once at load (`exec::fold`).
    folded: usize,
    /// Executed instructions one `execute` may take.
    step_limit: u64,
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
            if !(arena.as_ptr() as usize).is_multiple_of(ARENA_ALIGN) {
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
        let program = *meta.program();
        let plan = meta.plan();
        let mut tables = Tables::carve(&meta.counts, program, &mut bump)?;
        values::fill(&program, plan, tables.values, tables.tensors, &bases)?;
        let ops = plan.operators().unwrap_or_default();
        for (i, op) in ops.iter().enumerate() {
            let k = registry
                .kernel(op.name().unwrap_or(""), op.overload().unwrap_or(""))
                .ok_or(Error::MissingOperators {
                    count: 1,
                    names: heapless::String::new(),
                })?;
            if let Some(slot) = tables.kernels.get_mut(i) {
                *slot = k.run;
            }
            if let Some(slot) = tables.prepares.get_mut(i) {
                *slot = k.prepare;
            }
        }
        // Calls whose operands are all constants run now, once (`exec::fold`), before the
        // analyses below see the tables.
        let fold = crate::exec::fold::plan(&program, plan, meta.fold_budget);
        let folded = crate::exec::fold::apply(&program, plan, &fold, &mut tables);
        // Each delegate's state area follows the previous one in delegate order (as
        // `MethodMeta` counted them: 16-byte rounded).
        let mut rest: &'a mut [u8] = core::mem::take(&mut tables.delegate_state);
        let dels = plan.delegates().unwrap_or_default();
        for (d, del) in dels.iter().enumerate() {
            let (backend, payload) = registry.delegate(&program, d, del)?;
            let init = DelegateInit {
                program,
                payload,
                index: d,
            };
            let req = backend
                .prepare(&init)
                .map_err(|e| delegate::init_error(d, backend.id(), e))?;
            let take = req.state.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
            if take > rest.len() || req.state > take {
                return Err(Error::MetadataTooSmall { needed, got: take });
            }
            let (mine, tail) = core::mem::take(&mut rest).split_at_mut(take);
            rest = tail;
            backend
                .init(&init, &mut mine[..req.state])
                .map_err(|e| delegate::init_error(d, backend.id(), e))?;
            if let Some(slot) = tables.delegates.get_mut(d) {
                *slot = DelegateSlot {
                    backend,
                    init,
                    state: mine,
                };
            }
        }
        let demand = demand::analyse(plan, tables.values, tables.tensors);
        crate::exec::elide::elide(
            plan,
            tables.values,
            tables.tensors,
            tables.delegates,
            tables.proved,
        );
        crate::exec::alias::prove(plan, tables.values, tables.tensors, tables.proved);
        crate::exec::decoded::decode(plan, &demand, tables.decoded)?;
        crate::exec::prepared::prepare(
            tables.values,
            tables.tensors,
            tables.prepares,
            tables.delegates,
            tables.proved,
            tables.decoded,
        );
        Ok(Method {
            meta,
            tables,
            folded,
            demand,
            step_limit: crate::exec::run::DEFAULT_STEP_LIMIT,
            _arenas: PhantomData,
        })
    }

    /// The runtime value table (for inspection and tests).
    pub fn values(&self) -> &[Value<'p>] {
        self.tables.values
    }

    /// Calls whose outputs were proved at load not to alias their other arguments
    /// (`exec::alias`): the run-time overlap check is skipped for these.
    pub fn alias_proved_calls(&self) -> usize {
        self.tables.proved.iter().filter(|p| p.proved()).count()
    }

    /// Kernel calls prepared at load (`exec::prepared`): each run goes straight to the work
    /// decided then, with no argument decoding.
    pub fn prepared_calls(&self) -> usize {
        self.prepared_of(crate::exec::decoded::Kind::Kernel)
    }

    /// Delegate calls whose backend bound their tensors at load
    /// ([`Backend::prepare_call`](crate::delegate::Backend::prepare_call)).
    pub fn prepared_delegate_calls(&self) -> usize {
        self.prepared_of(crate::exec::decoded::Kind::Delegate)
    }

    fn prepared_of(&self, kind: crate::exec::decoded::Kind) -> usize {
        let decoded = self.tables.decoded.iter();
        decoded
            .filter(|d| d.kind == kind && d.prepared.is_some())
            .count()
    }

    /// Copies removed at load (`exec::elide`): their outputs were placed over their inputs'
    /// bytes, and `execute` skips them.
    pub fn elided_calls(&self) -> usize {
        let proved = self.tables.proved.iter();
        proved.filter(|p| p.elided() && !p.folded()).count()
    }

    /// Calls run once at load (`exec::fold`: their operands are all constants); `execute`
    /// skips them and the forward reads their results from the metadata buffer.
    pub fn folded_calls(&self) -> usize {
        self.folded
    }

    /// The instructions `execute` dispatches to a kernel or a delegate, in order (indices
    /// across chains, as in the plan): moves, jumps, frees and elided copies are not among
    /// them. In a plan without jumps, the `k`-th of these is the forward's `k`-th call
    /// (profilers attribute per-call figures this way).
    pub fn dispatched_calls(&self) -> impl Iterator<Item = usize> + '_ {
        self.tables
            .decoded
            .iter()
            .zip(self.tables.proved.iter())
            .enumerate()
            .filter(|(_, (d, p))| d.kind != crate::exec::decoded::Kind::Other && !p.elided())
            .map(|(i, _)| i)
    }

    /// The output-row restrictions found at load ([`demand`]).
    pub fn row_demands(&self) -> &[RowDemand] {
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
        match self.tables.values[inputs.get(index) as usize] {
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
        let t = &mut self.tables.tensors[slot];
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
        self.tables.input_set[index] = true;
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
        let Some(Value::Tensor(s)) = self.tables.values.get(value) else {
            return None;
        };
        let t = self.tables.tensors.get(*s as usize)?;
        if t.data.is_null() && t.nbytes() > 0 {
            return None;
        }
        Some(TensorRef {
            dtype: t.dtype,
            shape: t.shape,
            dim_order: t.dim_order,
            data: t.data,
            arg: value,
            _life: PhantomData,
        })
    }

    /// Executes instruction `pc` of chain `chain` on its own, out of order: no input needs to
    /// be set and no row restriction applies. For host tools that evaluate instructions whose
    /// operands are all constants (or outputs of instructions they evaluated before, in
    /// program order); what any other instruction would read is whatever the arenas hold.
    pub fn execute_instruction(&mut self, chain: usize, pc: usize) -> Result<(), Error> {
        self.frame(false, None).run_one(chain, pc)
    }

    /// The instruction loop over this method's tables: with the load-time row demands and
    /// alias proofs for a whole run (`whole`), without them for one instruction out of order.
    fn frame<'c>(
        &'c mut self,
        whole: bool,
        observer: Option<&'c mut dyn Observer>,
    ) -> Frame<'c, 'a, 'p> {
        let t = &mut self.tables;
        Frame {
            plan: self.meta.plan(),
            values: t.values,
            tensors: t.tensors,
            kernels: t.kernels,
            delegates: t.delegates,
            scratch: t.scratch,
            rows: whole,
            // Alias proofs and elided copies are facts about storage, true in any order.
            proved: t.proved,
            decoded: t.decoded,
            step_limit: self.step_limit,
            observer,
        }
    }

    /// Sets how many instructions one [`Method::execute`] may execute before it stops with
    /// [`Error::StepLimit`] (default [`crate::exec::run::DEFAULT_STEP_LIMIT`]). Programs may
    /// loop (`JumpFalseCall` backwards); the caller decides the budget, e.g. from the time a
    /// forward may take.
    pub fn set_step_limit(&mut self, limit: u64) {
        self.step_limit = limit;
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
        let value = outputs.get(index) as usize;
        let slot = match self.tables.values.get(value) {
            Some(Value::Tensor(s)) => *s as usize,
            _ => {
                return Err(Error::OutputIndex {
                    index,
                    count: outputs.len(),
                })
            }
        };
        let t = self.tables.tensors.get(slot).ok_or(Error::OutputIndex {
            index,
            count: outputs.len(),
        })?;
        // A view over a null pointer would be undefined behaviour in `TensorRef::bytes`.
        if t.data.is_null() && t.nbytes() > 0 {
            return Err(Error::OutputNoData { index, value });
        }
        Ok(TensorRef {
            dtype: t.dtype,
            shape: t.shape,
            dim_order: t.dim_order,
            data: t.data,
            arg: index,
            _life: PhantomData,
        })
    }

    /// Runs every chain of the method once.
    ///
    /// Inputs must be set again before the next call: the program's memory plan may reuse an
    /// input's storage once the input has been consumed, so stale inputs are never reused.
    pub fn execute(&mut self) -> Result<(), Error> {
        self.run(None)
    }

    /// [`Method::execute`] reporting each instruction (and each operation inside delegate
    /// regions) to `observer` before it runs.
    pub fn execute_observed(&mut self, observer: &mut dyn Observer) -> Result<(), Error> {
        self.run(Some(observer))
    }

    fn run(&mut self, observer: Option<&mut dyn Observer>) -> Result<(), Error> {
        let t = &mut self.tables;
        if let Some(i) = t.input_set.iter().position(|s| !s) {
            return Err(Error::InputNotSet { index: i });
        }
        t.input_set.iter_mut().for_each(|s| *s = false);
        self.frame(true, observer.map(|o| o as &mut dyn Observer))
            .run()?;
        // Every tensor output must have storage to be read from (see `Method::output`).
        let outputs = self.meta.plan().outputs().unwrap_or_default();
        for (index, value) in outputs.iter().enumerate() {
            if let Some(Value::Tensor(s)) = self.tables.values.get(value as usize) {
                if let Some(t) = self.tables.tensors.get(*s as usize) {
                    if t.data.is_null() && t.nbytes() > 0 {
                        return Err(Error::OutputNoData {
                            index,
                            value: value as usize,
                        });
                    }
                }
            }
        }
        Ok(())
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
