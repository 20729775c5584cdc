//! [`KernelCtx`]: checked access to one instruction's arguments.

use core::marker::PhantomData;

use super::prepared::Prepared;
use super::value::{Dynamism, TensorSlot, Value};
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::shape::Shape;
use crate::tensor::{TensorMut, TensorRef};
use flatbuffers::Vector;

/// Up to this many int-list items are read per argument.
pub const MAX_LIST: usize = 64;
/// Fixed-capacity int list read from an `IntList` argument.
pub type IntList = heapless::Vec<i64, MAX_LIST>;

/// How many outputs one call may request.
const MAX_OUTPUTS: usize = 64;

/// Checked access to one instruction's arguments. `'a` is the lifetime of arena and program
/// memory, `'p` of the program flatbuffer.
#[repr(C)]
pub struct KernelCtx<'c, 'a, 'p> {
    pub(crate) values: &'c mut [Value<'p>],
    pub(crate) tensors: &'c mut [TensorSlot],
    pub(crate) args: &'p [i32],
    pub(crate) scratch: &'c mut [u8],
    /// How many outputs were handed out: their data ranges are the first `outputs_len`
    /// entries of `outputs`.
    pub(crate) outputs_len: usize,
    /// Arguments whose tensors were handed out for reading: bit `a` for argument `a`, bit 63
    /// for every argument from 63 on. An output may not be the tensor of another argument
    /// already read (the views would alias).
    pub(crate) read: core::cell::Cell<u64>,
    /// `(value, lo, hi)`: only rows `lo..hi` of tensor value `value` are read afterwards.
    pub(crate) rows: Option<(usize, usize, usize)>,
    /// Who watches this execution, if anyone ([`Observer`]).
    pub(crate) observer: Option<&'c mut dyn Observer>,
    /// The call's outputs were proved at load not to alias its other arguments
    /// (`exec::alias`): [`KernelCtx::output`] skips its overlap check, keeping only the rule
    /// for positions that name one tensor twice.
    pub(crate) alias_proof: AliasProof,
    /// The call's record prepared at load (a delegate call's bindings), if any.
    pub(crate) prepared: Option<Prepared>,
    pub(crate) _mem: PhantomData<&'a mut [u8]>,
    /// Data ranges of outputs already handed out (`outputs_len` of them). Left uninitialised
    /// and last (`repr(C)`), so that making a context per call stores nothing here (as a
    /// `heapless::Vec` between zeroed fields, the compiler zeroed all 1 KiB with them).
    pub(crate) outputs: core::mem::MaybeUninit<[(usize, usize); MAX_OUTPUTS]>,
}

/// What load-time analysis proved of a call: 0 when nothing. `exec::alias`: bit 63 set when
/// its outputs cannot alias its other arguments, bits `0..62` the argument positions whose
/// tensor is also named at another position. `exec::elide`: [`AliasProof::ELIDED`] alone, a
/// copy whose output was placed over its input's bytes, which the instruction loop skips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AliasProof(pub u64);

impl AliasProof {
    pub const NONE: AliasProof = AliasProof(0);
    const PROVED: u64 = 1 << 63;
    /// A call with nothing left to do at run time (`exec::elide`).
    pub const ELIDED: AliasProof = AliasProof(1 << 62);

    /// A call run once at load (`exec::fold`): skipped like an elided copy.
    pub const FOLDED: AliasProof = AliasProof(1 << 62 | 1);

    /// The call is skipped: its output already holds its result (an elided copy, or a call
    /// folded at load).
    pub fn elided(self) -> bool {
        self == Self::ELIDED || self == Self::FOLDED
    }

    /// The call was run at load (`exec::fold`).
    pub fn folded(self) -> bool {
        self == Self::FOLDED
    }

    /// A proved call whose `shared` positions name one tensor twice.
    pub fn proved_with(shared: u64) -> AliasProof {
        AliasProof(Self::PROVED | (shared & !(Self::PROVED | Self::ELIDED.0)))
    }

    pub fn proved(self) -> bool {
        self.0 & Self::PROVED != 0
    }

    /// Positions sharing their tensor with another position.
    pub fn shared(self) -> u64 {
        self.0 & !(Self::PROVED | Self::ELIDED.0)
    }
}

/// Watches one execution of a method (profilers, ETDump writers, per-operator instruction
/// counts): the instruction loop reports each instruction before it runs, and a delegate
/// backend each operation of its region before it runs. Every method has an empty default.
/// Calls happen on the executing core, in program order, with no allocation by the engine.
pub trait Observer {
    /// Instruction `pc` of chain `chain` is about to run.
    fn instruction(&mut self, chain: usize, pc: usize) {
        let _ = (chain, pc);
    }
    /// Operation `index` of the running delegate region is about to run: its kind (e.g. the
    /// XNNPACK node type), output elements, and multiply-adds (0 where not a product).
    fn region_op(&mut self, index: usize, kind: &'static str, out_elems: usize, macs: u64) {
        let _ = (index, kind, out_elems, macs);
    }
    /// The last instruction has finished.
    fn finished(&mut self) {}
}

impl<'c, 'a, 'p> KernelCtx<'c, 'a, 'p> {
    pub(crate) fn new(
        values: &'c mut [Value<'p>],
        tensors: &'c mut [TensorSlot],
        args: &'p [i32],
        scratch: &'c mut [u8],
    ) -> Self {
        KernelCtx {
            values,
            tensors,
            args,
            scratch,
            outputs_len: 0,
            read: core::cell::Cell::new(0),
            rows: None,
            observer: None,
            alias_proof: AliasProof::NONE,
            prepared: None,
            _mem: PhantomData,
            outputs: core::mem::MaybeUninit::uninit(),
        }
    }

    /// The data ranges of the outputs handed out so far.
    fn handed_out(&self) -> &[(usize, usize)] {
        let n = self.outputs_len.min(MAX_OUTPUTS);
        // SAFETY: entries `..outputs_len` (≤ MAX_OUTPUTS) were written by `hand_out`; the
        // pointer is to the array of MAX_OUTPUTS pairs.
        unsafe { core::slice::from_raw_parts(self.outputs.as_ptr() as *const (usize, usize), n) }
    }

    /// Records an output's data range; `false` when MAX_OUTPUTS are recorded already.
    fn hand_out(&mut self, range: (usize, usize)) -> bool {
        if self.outputs_len >= MAX_OUTPUTS {
            return false;
        }
        // SAFETY: outputs_len < MAX_OUTPUTS: inside the array.
        unsafe {
            (self.outputs.as_mut_ptr() as *mut (usize, usize))
                .add(self.outputs_len)
                .write(range)
        };
        self.outputs_len += 1;
        true
    }

    /// The same context reporting to `observer`.
    pub(crate) fn with_observer(mut self, observer: Option<&'c mut dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Whether an [`Observer`] watches this execution (backends skip computing what they would
    /// report when nobody does).
    pub fn observed(&self) -> bool {
        self.observer.is_some()
    }

    /// Tells the observer, if any, that operation `index` of this delegate region (`kind`,
    /// `out_elems` outputs, `macs` multiply-adds) is about to run. Backends call it per
    /// operation; it costs one branch when nobody watches.
    pub fn region_op(&mut self, index: usize, kind: &'static str, out_elems: usize, macs: u64) {
        if let Some(o) = self.observer.as_deref_mut() {
            o.region_op(index, kind, out_elems, macs);
        }
    }

    /// The same context with what loading proved of the call's aliasing.
    pub(crate) fn with_alias_proof(mut self, proof: AliasProof) -> Self {
        self.alias_proof = proof;
        self
    }

    /// The same context with the call's record prepared at load (see [`KernelCtx::prepared`]).
    pub(crate) fn with_prepared(mut self, prepared: Option<Prepared>) -> Self {
        self.prepared = prepared;
        self
    }

    /// The record this call was prepared with at load (a delegate call's bindings, made by
    /// its backend's [`prepare_call`](crate::delegate::Backend::prepare_call)), and the
    /// method's tensor table its slots index: bind them with [`Prepared::input`] /
    /// [`Prepared::output`] under their contract.
    pub fn prepared(&self) -> Option<(&Prepared, &[TensorSlot])> {
        Some((self.prepared.as_ref()?, &*self.tensors))
    }

    /// The same context with a row demand `(value, lo, hi)` (see [`KernelCtx::demanded_rows`]).
    pub(crate) fn with_rows(mut self, rows: Option<(usize, usize, usize)>) -> Self {
        self.rows = rows;
        self
    }

    /// Rows `lo..hi` of argument `arg`'s tensor (viewed as `[numel / last_dim, last_dim]`)
    /// when the rest of the program reads only those (`crate::exec::demand`); a kernel may
    /// then leave the other rows unwritten. `None`: every row is needed.
    pub fn demanded_rows(&self, arg: usize) -> Option<(usize, usize)> {
        let (v, lo, hi) = self.rows?;
        (self.index(arg).ok()? == v).then_some((lo, hi))
    }

    /// Number of arguments (the appended return included).
    pub fn nargs(&self) -> usize {
        self.args.len()
    }

    /// Fails unless the call has exactly `n` arguments.
    pub fn expect_args(&self, n: usize) -> Result<(), KernelError> {
        if self.nargs() != n {
            return Err(KernelError::ArgCount {
                expected: n,
                got: self.nargs(),
            });
        }
        Ok(())
    }

    fn index(&self, arg: usize) -> Result<usize, KernelError> {
        // Indices were validated against the value table at load.
        match self.args.get(arg) {
            Some(&v) => Ok(v as usize),
            None => Err(KernelError::ArgCount {
                expected: arg + 1,
                got: self.args.len(),
            }),
        }
    }

    /// The raw value of argument `arg`.
    pub fn value(&self, arg: usize) -> Result<Value<'p>, KernelError> {
        Ok(self.values[self.index(arg)?])
    }

    /// Overwrites the value of argument `arg` (prim ops write their result this way).
    pub fn set_value(&mut self, arg: usize, v: Value<'p>) -> Result<(), KernelError> {
        let i = self.index(arg)?;
        if matches!(self.values[i], Value::Tensor(_)) {
            return Err(KernelError::ArgType {
                arg,
                expected: "scalar placeholder",
                got: "Tensor",
            });
        }
        self.values[i] = v;
        Ok(())
    }

    fn type_err(&self, arg: usize, expected: &'static str) -> KernelError {
        let got = self.value(arg).map_or("nothing", |v| v.kind());
        KernelError::ArgType { arg, expected, got }
    }

    pub fn is_none(&self, arg: usize) -> Result<bool, KernelError> {
        Ok(matches!(self.value(arg)?, Value::None))
    }

    pub fn int(&self, arg: usize) -> Result<i64, KernelError> {
        match self.value(arg)? {
            Value::Int(v) => Ok(v),
            Value::Bool(b) => Ok(b as i64),
            _ => Err(self.type_err(arg, "Int")),
        }
    }

    pub fn opt_int(&self, arg: usize) -> Result<Option<i64>, KernelError> {
        match self.value(arg)? {
            Value::None => Ok(None),
            _ => self.int(arg).map(Some),
        }
    }

    pub fn bool(&self, arg: usize) -> Result<bool, KernelError> {
        match self.value(arg)? {
            Value::Bool(v) => Ok(v),
            Value::Int(v) => Ok(v != 0),
            _ => Err(self.type_err(arg, "Bool")),
        }
    }

    pub fn double(&self, arg: usize) -> Result<f64, KernelError> {
        match self.value(arg)? {
            Value::Double(v) => Ok(v),
            Value::Int(v) => Ok(v as f64),
            _ => Err(self.type_err(arg, "Double")),
        }
    }

    /// An ATen `Scalar` (Int, Double or Bool).
    pub fn scalar(&self, arg: usize) -> Result<Scalar, KernelError> {
        match self.value(arg)? {
            Value::Int(v) => Ok(Scalar::Int(v)),
            Value::Double(v) => Ok(Scalar::Double(v)),
            Value::Bool(v) => Ok(Scalar::Bool(v)),
            _ => Err(self.type_err(arg, "Scalar")),
        }
    }

    pub fn opt_scalar(&self, arg: usize) -> Result<Option<Scalar>, KernelError> {
        match self.value(arg)? {
            Value::None => Ok(None),
            _ => self.scalar(arg).map(Some),
        }
    }

    pub fn string(&self, arg: usize) -> Result<&'p str, KernelError> {
        match self.value(arg)? {
            Value::Str(s) => Ok(s),
            _ => Err(self.type_err(arg, "String")),
        }
    }

    /// An `int[]`/`SymInt[]` argument, each item read from its Int value now.
    #[inline(always)]
    pub fn int_list(&self, arg: usize) -> Result<IntList, KernelError> {
        let items = match self.value(arg)? {
            Value::IntList(v) => v,
            _ => return Err(self.type_err(arg, "IntList")),
        };
        let mut out = IntList::new();
        for idx in items.iter() {
            let v = match self.values.get(idx as usize) {
                Some(Value::Int(v)) => *v,
                _ => {
                    return Err(KernelError::Value {
                        arg,
                        detail: "IntList item is not an Int",
                    })
                }
            };
            out.push(v).map_err(|_| KernelError::Value {
                arg,
                detail: "int list longer than 64",
            })?;
        }
        Ok(out)
    }

    /// An `int[]?` argument (None → `None`).
    pub fn opt_int_list(&self, arg: usize) -> Result<Option<IntList>, KernelError> {
        match self.value(arg)? {
            Value::None => Ok(None),
            _ => self.int_list(arg).map(Some),
        }
    }

    pub fn double_list(&self, arg: usize) -> Result<Vector<'p, f64>, KernelError> {
        match self.value(arg)? {
            Value::DoubleList(v) => Ok(v),
            _ => Err(self.type_err(arg, "DoubleList")),
        }
    }

    pub fn bool_list(&self, arg: usize) -> Result<Vector<'p, bool>, KernelError> {
        match self.value(arg)? {
            Value::BoolList(v) => Ok(v),
            _ => Err(self.type_err(arg, "BoolList")),
        }
    }

    /// Whether the tensor at `arg` is also named at another position of a call proved at load
    /// (`exec::alias`: in a proved call only the last argument, the return, repeats a tensor;
    /// an input named elsewhere is also the call's output). `false` when nothing was proved.
    pub fn named_elsewhere(&self, arg: usize) -> bool {
        self.alias_proof.shared() & (1u64 << arg.min(63)) != 0
    }

    /// The tensor-table slot of the tensor at `arg`: what a kernel's load-time preparation
    /// ([`PrepareFn`](super::PrepareFn)) records of the tensors it binds.
    pub fn tensor_slot(&self, arg: usize) -> Result<usize, KernelError> {
        self.slot_of(arg)
    }

    fn slot_of(&self, arg: usize) -> Result<usize, KernelError> {
        match self.value(arg)? {
            Value::Tensor(t) => Ok(t as usize),
            _ => Err(self.type_err(arg, "Tensor")),
        }
    }

    /// The checks of a read of slot `slot` (argument `arg`), which is then marked read.
    #[inline(always)]
    fn check_read(
        &self,
        slot: usize,
        arg: usize,
        any_order: bool,
    ) -> Result<&TensorSlot, KernelError> {
        let t = &self.tensors[slot];
        if !any_order && !t.contiguous {
            return Err(KernelError::NonContiguous { arg });
        }
        if t.data.is_null() && t.nbytes() > 0 {
            return Err(KernelError::NoData { arg });
        }
        // Outputs handed out so far (none in a call proved at load).
        let out = self.handed_out();
        if !out.is_empty() {
            let (lo, hi) = t.range();
            if lo != hi && out.iter().any(|&(a, b)| lo < b && a < hi) {
                return Err(KernelError::Aliasing { arg });
            }
        }
        self.read.set(self.read.get() | 1 << arg.min(63));
        Ok(t)
    }

    #[inline(always)]
    fn view(&self, slot: usize, arg: usize, any_order: bool) -> Result<TensorRef<'a>, KernelError> {
        let t = self.check_read(slot, arg, any_order)?;
        Ok(TensorRef {
            dtype: t.dtype,
            shape: t.shape,
            dim_order: t.dim_order,
            data: t.data,
            arg,
            _life: PhantomData,
        })
    }

    /// The contiguous input tensor at `arg` as `(data, bytes, dtype)`, with the checks of
    /// [`input`](Self::input) but no view built: for a delegate binding many arguments to raw
    /// storage. The range `data..data + bytes` is the tensor's, readable while the call runs
    /// (and not written by any output of it: the same rules as a view).
    #[inline]
    pub fn input_raw(&self, arg: usize) -> Result<(*const u8, usize, DType), KernelError> {
        let t = self.check_read(self.slot_of(arg)?, arg, false)?;
        Ok((t.data, t.nbytes(), t.dtype))
    }

    /// Item `k` of the tensor list at `arg` as raw storage `(data, bytes, dtype)` with the
    /// checks of [`input_raw`](Self::input_raw), and its current dims (`None`: a `-1` entry of
    /// an optional list): for a kernel binding a list's tensors without views.
    pub fn list_input_raw(
        &self,
        arg: usize,
        k: usize,
    ) -> Result<Option<(*const u8, usize, DType, &[usize])>, KernelError> {
        let Some(s) = self.list_slot(arg, k)? else {
            return Ok(None);
        };
        let t = self.check_read(s, arg, false)?;
        Ok(Some((t.data, t.nbytes(), t.dtype, t.shape.dims())))
    }

    /// The output tensor at `arg` at its current shape as `(data, bytes, dtype)`: the checks
    /// of [`output`](Self::output) (writable, contiguous, no overlap with the call's other
    /// arguments), no resize and no view built. The range is the caller's to write while the
    /// call runs.
    pub fn output_raw(&mut self, arg: usize) -> Result<(*mut u8, usize, DType), KernelError> {
        let slot = self.slot_of(arg)?;
        let (dtype, data, bytes) = self.bind_output(slot, arg, None)?;
        Ok((data, bytes, dtype))
    }

    /// The current dims of the tensor at `arg`, with no view made and nothing checked but
    /// the argument's type: to compare shapes before binding raw storage.
    pub fn dims(&self, arg: usize) -> Result<&[usize], KernelError> {
        Ok(self.tensors[self.slot_of(arg)?].shape.dims())
    }

    /// The table entry of argument `arg`'s tensor: dtype, dynamism, layout (what a load-time
    /// preparation inspects).
    pub fn entry(&self, arg: usize) -> Result<&TensorSlot, KernelError> {
        Ok(&self.tensors[self.slot_of(arg)?])
    }

    /// The f32 input at `arg`, which must hold exactly `len` elements, bound to its storage
    /// with the checks of a view ([`input_raw`](Self::input_raw)) and none of its copies.
    #[inline]
    pub fn input_f32s(&self, arg: usize, len: usize) -> Result<&'a [f32], KernelError> {
        let (p, bytes, dtype) = self.input_raw(arg)?;
        f32s_check(arg, p as usize, bytes, dtype, len)?;
        Ok(if len == 0 {
            &[]
        } else {
            // SAFETY: `input_raw` hands out `bytes` (= 4·len, checked) readable bytes at `p`,
            // f32 aligned (checked), not written by any output of this call while it runs (the
            // rules of a view), for the call's data lifetime `'a`.
            unsafe { core::slice::from_raw_parts(p as *const f32, len) }
        })
    }

    /// The f32 output at `arg` at its current shape, which must hold exactly `len` elements
    /// ([`output_raw`](Self::output_raw): no resize).
    #[inline]
    pub fn output_f32s(&mut self, arg: usize, len: usize) -> Result<&'a mut [f32], KernelError> {
        let (p, bytes, dtype) = self.output_raw(arg)?;
        // SAFETY: `output_raw` binds the output through `bind_output`.
        unsafe { f32s_mut(arg, p, bytes, dtype, len) }
    }

    /// The f32 output at `arg` resized to `shape` (as [`output`](Self::output) resizes), bound
    /// to its storage with the checks of an output and none of a view's copies.
    pub fn output_f32s_shaped(
        &mut self,
        arg: usize,
        shape: &Shape,
    ) -> Result<&'a mut [f32], KernelError> {
        let slot = self.slot_of(arg)?;
        let (dtype, p, bytes) = self.bind_output(slot, arg, Some(shape))?;
        // SAFETY: `p` and `bytes` are `bind_output`'s.
        unsafe { f32s_mut(arg, p, bytes, dtype, shape.numel()) }
    }

    /// A contiguous input tensor.
    #[inline]
    pub fn input(&self, arg: usize) -> Result<TensorRef<'a>, KernelError> {
        self.view(self.slot_of(arg)?, arg, false)
    }

    /// An input tensor in any dim order (for dim-order conversion kernels).
    pub fn input_any_order(&self, arg: usize) -> Result<TensorRef<'a>, KernelError> {
        self.view(self.slot_of(arg)?, arg, true)
    }

    /// A `Tensor?` input.
    pub fn opt_input(&self, arg: usize) -> Result<Option<TensorRef<'a>>, KernelError> {
        match self.value(arg)? {
            Value::None => Ok(None),
            _ => self.input(arg).map(Some),
        }
    }

    fn list(&self, arg: usize) -> Result<(Vector<'p, i32>, bool), KernelError> {
        match self.value(arg)? {
            Value::TensorList(v) => Ok((v, false)),
            Value::OptTensorList(v) => Ok((v, true)),
            _ => Err(self.type_err(arg, "TensorList")),
        }
    }

    /// Length of a `Tensor[]` / `Tensor?[]` argument.
    pub fn list_len(&self, arg: usize) -> Result<usize, KernelError> {
        Ok(self.list(arg)?.0.len())
    }

    fn list_slot(&self, arg: usize, k: usize) -> Result<Option<usize>, KernelError> {
        let (items, _) = self.list(arg)?;
        if k >= items.len() {
            return Err(KernelError::IndexOutOfBounds {
                arg,
                index: k as i64,
                size: items.len(),
            });
        }
        let vi = items.get(k);
        if vi < 0 {
            return Ok(None);
        }
        match self.values[vi as usize] {
            Value::Tensor(t) => Ok(Some(t as usize)),
            _ => Err(KernelError::Value {
                arg,
                detail: "tensor list item is not a Tensor",
            }),
        }
    }

    /// The tensor-table slot of item `k` of the tensor list at `arg` (`None` for a `-1`
    /// entry): what a preparation records of a list's tensors.
    pub fn list_tensor_slot(&self, arg: usize, k: usize) -> Result<Option<usize>, KernelError> {
        self.list_slot(arg, k)
    }

    /// The tensor-table entry of slot `s` (from [`list_tensor_slot`](Self::list_tensor_slot)).
    pub fn tensor_at(&self, s: usize) -> Option<&TensorSlot> {
        self.tensors.get(s)
    }

    /// Item `k` of a tensor list (None for a `-1` entry of an optional list).
    pub fn list_input(&self, arg: usize, k: usize) -> Result<Option<TensorRef<'a>>, KernelError> {
        match self.list_slot(arg, k)? {
            Some(s) => self.view(s, arg, false).map(Some),
            None => Ok(None),
        }
    }

    /// Current shape of the tensor at `arg` (input or output), without taking a view.
    pub fn tensor_shape(&self, arg: usize) -> Result<Shape, KernelError> {
        Ok(self.tensors[self.slot_of(arg)?].shape)
    }

    /// Dtype of the output tensor at `arg`, before it is resized.
    pub fn out_dtype(&self, arg: usize) -> Result<DType, KernelError> {
        Ok(self.tensors[self.slot_of(arg)?].dtype)
    }

    /// Dtype of output `k` of the tensor list at `arg`.
    pub fn list_out_dtype(&self, arg: usize, k: usize) -> Result<DType, KernelError> {
        let s = self.list_slot(arg, k)?.ok_or(KernelError::Value {
            arg,
            detail: "None output",
        })?;
        Ok(self.tensors[s].dtype)
    }

    /// Resizes the output tensor at `arg` to `shape` and returns a writable view.
    /// Fails if the shape does not fit (static shape or capacity), if the tensor is read-only,
    /// or if its memory overlaps any other tensor argument of this call (the same tensor at
    /// another argument only if that argument was read).
    pub fn output(&mut self, arg: usize, shape: &Shape) -> Result<TensorMut<'a>, KernelError> {
        let slot = self.slot_of(arg)?;
        self.output_slot(slot, arg, shape)
    }

    /// Like [`output`](Self::output) for item `k` of a `Tensor[] out` list.
    pub fn list_output(
        &mut self,
        arg: usize,
        k: usize,
        shape: &Shape,
    ) -> Result<TensorMut<'a>, KernelError> {
        let slot = self.list_slot(arg, k)?.ok_or(KernelError::Value {
            arg,
            detail: "None output",
        })?;
        self.output_slot(slot, arg, shape)
    }

    fn output_slot(
        &mut self,
        slot: usize,
        arg: usize,
        shape: &Shape,
    ) -> Result<TensorMut<'a>, KernelError> {
        let (dtype, data, _) = self.bind_output(slot, arg, Some(shape))?;
        Ok(TensorMut {
            dtype,
            shape: *shape,
            data,
            arg,
            _life: PhantomData,
        })
    }

    /// The checks and bookkeeping of handing out slot `slot` (argument `arg`) as an output,
    /// resized to `shape` (`None`: its current shape): `(dtype, data, bytes)`. Inlined into
    /// both callers, so that each keeps only its own branch.
    #[inline(always)]
    fn bind_output(
        &mut self,
        slot: usize,
        arg: usize,
        shape: Option<&Shape>,
    ) -> Result<(DType, *mut u8, usize), KernelError> {
        let (dtype, data, lo, hi) = {
            let t = &mut self.tensors[slot];
            if !t.writable {
                return Err(KernelError::ReadOnly { arg });
            }
            if !t.contiguous {
                return Err(KernelError::NonContiguous { arg });
            }
            let (need, same) = match shape {
                Some(shape) => (
                    shape.numel().saturating_mul(t.dtype.size()),
                    t.shape.same_dims(shape),
                ),
                None => (t.nbytes(), true),
            };
            let fits = match t.dynamism {
                Dynamism::Static => same || need == t.nbytes(),
                Dynamism::Bound => need <= t.capacity,
            };
            if !fits || need > t.capacity {
                return Err(KernelError::Resize {
                    arg,
                    needed: shape.copied().unwrap_or(t.shape),
                    capacity_bytes: t.capacity,
                    is_static: t.dynamism == Dynamism::Static,
                });
            }
            if t.data.is_null() && need > 0 {
                return Err(KernelError::NoData { arg });
            }
            // A static tensor keeps its shape: no 136-byte store when nothing changes.
            if let (Some(shape), false) = (shape, same) {
                t.shape = *shape;
            }
            let lo = t.data as usize;
            (t.dtype, t.data, lo, if need == 0 { lo } else { lo + need })
        };
        if lo != hi && self.alias_proof.proved() {
            // Proved at load: only an output naming the tensor of another position the kernel
            // already read is left to refuse.
            let shared = self.alias_proof.shared();
            let me = 1u64 << arg.min(63);
            if shared & me != 0 && self.read.get() & shared & !me != 0 {
                return Err(KernelError::Aliasing { arg });
            }
        } else if lo != hi {
            // Every other tensor argument (direct or in a list) must not overlap this output.
            for (a, &vi) in self.args.iter().enumerate() {
                let vi = vi as usize;
                // The same tensor at another argument is fine (an in-place op's return, an
                // `.out` op's out and return) unless the kernel already holds it for reading.
                let read = a != arg && self.read.get() & (1 << a.min(63)) != 0;
                let overlaps = |s: usize| -> bool {
                    if s == slot {
                        return read;
                    }
                    let (l2, h2) = self.tensors[s].range();
                    l2 < hi && lo < h2
                };
                let bad = match self.values[vi] {
                    Value::Tensor(s) => overlaps(s as usize),
                    Value::TensorList(items) | Value::OptTensorList(items) => items.iter().any(|i| {
                        i >= 0 && matches!(self.values[i as usize], Value::Tensor(s) if overlaps(s as usize))
                    }),
                    _ => false,
                };
                if bad {
                    return Err(KernelError::Aliasing { arg });
                }
            }
            if self.handed_out().iter().any(|&(a, b)| lo < b && a < hi) {
                return Err(KernelError::Aliasing { arg });
            }
            if !self.hand_out((lo, hi)) {
                return Err(KernelError::Unsupported {
                    detail: "more than 64 outputs in one call",
                });
            }
        }
        Ok((dtype, data, hi - lo))
    }

    /// Points the output tensor at `arg` at the data of input `src_arg` with a new shape
    /// (`et_view`: an alias, no copy). The shapes must hold the same bytes.
    pub fn alias_output(
        &mut self,
        arg: usize,
        src_arg: usize,
        shape: &Shape,
    ) -> Result<(), KernelError> {
        let src = self.tensors[self.slot_of(src_arg)?];
        let slot = self.slot_of(arg)?;
        let t = &mut self.tensors[slot];
        if t.dtype != src.dtype {
            return Err(KernelError::DTypeMismatch {
                arg,
                expected: src.dtype,
                got: t.dtype,
            });
        }
        if shape.numel() != src.shape.numel() {
            return Err(KernelError::Shape {
                arg,
                detail: "view must keep the number of elements",
            });
        }
        t.data = src.data;
        t.capacity = src.capacity;
        t.writable = src.writable;
        t.shape = *shape;
        Ok(())
    }

    /// The kernel's scratch area (as many bytes as its [`KernelDef::scratch`](super::KernelDef::scratch) declared).
    pub fn scratch(&mut self) -> &mut [u8] {
        self.scratch
    }

    /// Scratch viewed as `n` f32 (aligned); error if it is too small. Borrowed, not taken:
    /// the operations of one delegate call (a region's products) each get it in turn.
    pub fn scratch_f32(&mut self, n: usize) -> Result<&mut [f32], KernelError> {
        f32_scratch(self.scratch, n)
    }
}

/// The first `n` f32-aligned floats of a byte scratch ([`KernelCtx::scratch_f32`]; a prepared
/// call's runner gets the scratch as bytes).
pub fn f32_scratch(bytes: &mut [u8], n: usize) -> Result<&mut [f32], KernelError> {
    let off = bytes.as_ptr().align_offset(core::mem::align_of::<f32>());
    let got = bytes.len();
    if off > got || (got - off) / 4 < n {
        return Err(KernelError::Scratch {
            needed: n * 4 + 3,
            got,
        });
    }
    let (_, rest) = bytes.split_at_mut(off);
    let (use_, _) = rest.split_at_mut(n * 4);
    // SAFETY: `use_` is a live, exclusively borrowed byte range of exactly 4*n bytes whose
    // start is 4-byte aligned (align_offset above); every bit pattern is a valid f32.
    Ok(unsafe { core::slice::from_raw_parts_mut(use_.as_mut_ptr() as *mut f32, n) })
}

/// The checks of [`KernelCtx::input_f32s`] and [`KernelCtx::output_f32s`]: f32, `len`
/// elements, f32 aligned.
#[inline]
/// An output's storage as `len` f32s, after [`f32s_check`].
///
/// # Safety
/// `p` and `bytes` come from `bind_output`: `bytes` writable bytes at `p`, overlapping no
/// other argument of the call, for `'a`.
unsafe fn f32s_mut<'a>(
    arg: usize,
    p: *mut u8,
    bytes: usize,
    dtype: DType,
    len: usize,
) -> Result<&'a mut [f32], KernelError> {
    f32s_check(arg, p as usize, bytes, dtype, len)?;
    Ok(if len == 0 {
        &mut []
    } else {
        // SAFETY: `bytes` writable bytes at `p` for `'a` (this function's contract), = 4·len
        // and f32 aligned (checked above).
        unsafe { core::slice::from_raw_parts_mut(p as *mut f32, len) }
    })
}

fn f32s_check(
    arg: usize,
    addr: usize,
    bytes: usize,
    dtype: DType,
    len: usize,
) -> Result<(), KernelError> {
    if dtype != DType::F32 {
        return Err(KernelError::DTypeMismatch {
            arg,
            expected: DType::F32,
            got: dtype,
        });
    }
    if Some(bytes) != len.checked_mul(4) {
        return Err(KernelError::Shape {
            arg,
            detail: "tensor size differs from the operation's",
        });
    }
    if !addr.is_multiple_of(4) {
        return Err(KernelError::Misaligned { arg });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(data: *mut u8, dims: &[usize], writable: bool) -> TensorSlot {
        TensorSlot {
            dtype: DType::F32,
            dynamism: Dynamism::Static,
            planned: true,
            writable,
            contiguous: true,
            dim_order: core::array::from_fn(|i| i as u8),
            shape: Shape::new(dims).unwrap(),
            data,
            capacity: dims.iter().product::<usize>() * 4,
        }
    }

    /// The raw bindings of a delegate keep the rules of views: the tensor's range and dtype,
    /// no output over an argument read or another output, read-only and non-contiguous
    /// tensors refused.
    #[test]
    fn raw_bindings_keep_the_rules_of_views() {
        let mut mem = [0.0f32; 16];
        let base = mem.as_mut_ptr() as *mut u8;
        // SAFETY: offsets inside `mem` (16 floats = 64 bytes).
        let at = |off: usize| unsafe { base.add(off) };
        let mut values = [
            Value::Tensor(0),
            Value::Tensor(1),
            Value::Tensor(2),
            Value::Tensor(3),
        ];
        // 0: [2, 2] at 0; 1: [4] at 16 bytes; 2: [2] at 8 bytes (inside 0); 3: read-only.
        let mut tensors = [
            slot(at(0), &[2, 2], true),
            slot(at(16), &[4], true),
            slot(at(8), &[2], true),
            slot(at(48), &[4], false),
        ];
        let args = [0, 1, 2, 3];
        let mut scratch = [0u8; 0];
        let mut ctx = KernelCtx::new(&mut values, &mut tensors, &args, &mut scratch);
        let (p, bytes, dt) = ctx.input_raw(0).unwrap();
        assert_eq!((p, bytes, dt), (at(0) as *const u8, 16, DType::F32));
        let (q, bytes, _) = ctx.output_raw(1).unwrap();
        assert_eq!((q, bytes), (at(16), 16));
        // Inside the input read at 0, and the output handed out at 1 may not be read.
        assert!(matches!(
            ctx.output_raw(2),
            Err(KernelError::Aliasing { arg: 2 })
        ));
        assert!(matches!(
            ctx.input_raw(1),
            Err(KernelError::Aliasing { arg: 1 })
        ));
        assert!(matches!(
            ctx.output_raw(3),
            Err(KernelError::ReadOnly { arg: 3 })
        ));
        tensors[1].contiguous = false;
        let mut ctx = KernelCtx::new(&mut values, &mut tensors, &args, &mut scratch);
        assert!(matches!(
            ctx.input_raw(1),
            Err(KernelError::NonContiguous { arg: 1 })
        ));
        assert!(matches!(
            ctx.output_raw(1),
            Err(KernelError::NonContiguous { arg: 1 })
        ));
    }
}
