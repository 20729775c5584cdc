//! [`MethodMeta`]: what a method needs before it is loaded, computed from the program alone.
//!
//! [`MethodMeta::new`] is also where a method is validated (`exec::validate`: every value,
//! tensor, list and instruction; here: every operator and delegate against the registry), so
//! that loading and execution can rely on indices being in range. Its sizes are exact: the
//! arenas of the program's memory plan, and the metadata buffer as `exec::layout` lays it out.

use crate::delegate::{self, DelegateInit, Requirements};
use crate::dtype::DType;
use crate::error::{self, Error};
use crate::exec::layout::{self, Counts, Tables, ARENA_ALIGN};
use crate::exec::{fold, validate, Registry};
use crate::format::{fb, Program};
use crate::shape::Shape;

/// Sizes and facts about one method, computed from the program alone.
pub struct MethodMeta<'p> {
    pub(crate) program: Program<'p>,
    pub(crate) plan: fb::ExecutionPlan<'p>,
    pub(crate) name: &'p str,
    /// Entries of every runtime table (`exec::layout`).
    pub(crate) counts: Counts,
    pub(crate) metadata_bytes: usize,
    /// Most bytes of values folded at load (`exec::fold`) the metadata buffer keeps.
    pub(crate) fold_budget: usize,
    /// Calls folded at load within that budget.
    pub(crate) fold_calls: usize,
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
        // An arena must be addressable on this target (a 32-bit core cannot hold one of 4 GiB
        // or more): refused here rather than truncated later.
        if let Some(k) = sizes.iter().position(|s| usize::try_from(s).is_err()) {
            return Err(Error::Invalid {
                what: "non_const_buffer_sizes",
                index: k,
                detail: "arena larger than this target's address space",
            });
        }
        let mut meta = MethodMeta {
            program: *program,
            plan,
            name,
            counts: Counts {
                values: values.len(),
                operators: plan.operators().map_or(0, |v| v.len()),
                delegates: plan.delegates().map_or(0, |v| v.len()),
                inputs: plan.inputs().map_or(0, |v| v.len()),
                instructions: plan
                    .chains()
                    .into_iter()
                    .flatten()
                    .map(|c| c.instructions().map_or(0, |i| i.len()))
                    .sum(),
                ..Counts::default()
            },
            metadata_bytes: 0,
            fold_budget: fold::DEFAULT_BUDGET,
            fold_calls: 0,
        };
        meta.counts.tensors = validate::values(program, plan)?;
        validate::io(plan)?;
        validate::instructions(plan)?;
        let (scratch, mut unresolved) = meta.resolve_operators(registry)?;
        meta.counts.scratch = scratch;
        match meta.prepare_delegates(registry) {
            Ok(r) => {
                meta.counts.scratch = meta.counts.scratch.max(r.scratch);
                meta.counts.delegate_state = r.state;
            }
            Err(e) => {
                unresolved.get_or_insert(e);
            }
        }
        let f = fold::plan(&meta.program, plan, meta.fold_budget);
        (meta.counts.fold, meta.fold_calls) = (f.bytes, f.calls());
        meta.metadata_bytes = Tables::bytes(&meta.counts, meta.program)?;
        Ok((meta, unresolved))
    }

    /// The same method with at most `bytes` of values folded at load (`exec::fold`: calls
    /// whose operands are all constants run once, at load, and their results the forward
    /// reads are kept in the metadata buffer). 0 folds nothing: every call runs in every
    /// forward (host tools that read intermediate values want that). The default is
    /// [`exec::fold::DEFAULT_BUDGET`](crate::exec::fold::DEFAULT_BUDGET).
    pub fn with_fold_budget(mut self, bytes: usize) -> Result<Self, Error> {
        self.fold_budget = bytes;
        let f = fold::plan(&self.program, self.plan, bytes);
        (self.counts.fold, self.fold_calls) = (f.bytes, f.calls());
        self.metadata_bytes = Tables::bytes(&self.counts, self.program)?;
        Ok(self)
    }

    /// Bytes of the metadata buffer that hold values folded at load.
    pub fn folded_bytes(&self) -> usize {
        self.counts.fold
    }

    /// Calls that run once at load rather than in every forward (`exec::fold`; a load can
    /// fold none of them if one fails, and the forward then reports the error).
    pub fn folded_calls(&self) -> usize {
        self.fold_calls
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
        layout::arena_count(self.plan)
    }

    /// Bytes of the arena for memory id `k + 1`.
    pub fn arena_size(&self, k: usize) -> u64 {
        layout::arena_size(self.plan, k)
    }

    /// Bytes of runtime metadata: EValue table, tensor descriptors, resolved kernels,
    /// delegate handles, input flags and the largest kernel scratch, each 16-byte aligned.
    pub fn metadata_bytes(&self) -> usize {
        self.metadata_bytes
    }

    /// Largest scratch any kernel or delegate of this method declared.
    pub fn kernel_scratch_bytes(&self) -> usize {
        self.counts.scratch
    }

    pub fn num_values(&self) -> usize {
        self.counts.values
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

    /// Checks that every delegate's backend exists and accepts its payload. Returns the
    /// largest scratch and the total (16-byte rounded) state bytes.
    fn prepare_delegates(&self, registry: &Registry<'_>) -> Result<Requirements, Error> {
        let mut total = Requirements::default();
        for (d, del) in self.plan.delegates().unwrap_or_default().iter().enumerate() {
            let (backend, payload) = registry.delegate(&self.program, d, del)?;
            let init = DelegateInit {
                program: self.program,
                payload,
                index: d,
            };
            let r = backend
                .prepare(&init)
                .map_err(|e| delegate::init_error(d, backend.id(), e))?;
            total.scratch = total.scratch.max(r.scratch);
            total.state += r.state.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        }
        Ok(total)
    }
}
