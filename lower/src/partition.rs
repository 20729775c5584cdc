//! The partitioner: which instructions of a method become operations of ptera's own regions,
//! and why the others stay portable.
//!
//! On a portable program it absorbs `aten::addmm.out`, `aten::mm.out` and `aten::linear.out`
//! whose weight is a constant 2-D f32 tensor, directly or through the `permute_copy`/`t_copy`
//! that transposes it (the copy is removed), together with an adjacent `aten::relu.out` or
//! `aten::gelu.out` over its result. Each absorbed product becomes one `Linear` operation.
//! A weight is packed for the target's tile when every reader of its constant buffer is an
//! absorbed product reading it the same way; otherwise it stays where it is and the region
//! reads it as an argument (e.g. GPT-2's token embedding, also read by `embedding`).

use std::collections::{BTreeMap, BTreeSet};

use ptera::format::fb;
use ptera::DType;

/// How a product reads its constant weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Orient {
    /// The constant is `[K, N]` (the product's B as stored).
    KxN,
    /// The constant is `[N, K]` (B is its transpose: `linear`, or a `permute`d weight).
    NxK,
}

/// Elementwise function fused after a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    None,
    Relu,
    GeluErf,
    GeluTanh,
}

/// One absorbed product.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Instruction of the product (the DelegateCall takes its place).
    pub pc: usize,
    /// Instructions removed with it (the weight's transpose, the fused activation).
    pub removed: Vec<usize>,
    pub x: i32,
    /// The constant weight value and its buffer.
    pub w: i32,
    pub buffer: u32,
    pub orient: Orient,
    pub bias: Option<i32>,
    pub alpha: f32,
    pub beta: f32,
    pub act: Act,
    /// Final output value (the activation's output when one is fused).
    pub out: i32,
    pub k: usize,
    pub n: usize,
    pub max_m: usize,
    /// Operator keys absorbed, in program order.
    pub absorbed: Vec<String>,
    /// Set by [`decide_packing`]: the weight is packed (else read as an argument).
    pub packed: bool,
}

/// What happened to one matmul-like instruction.
#[derive(Clone, Debug)]
pub struct Decision {
    pub pc: usize,
    pub operator: String,
    /// `None`: absorbed; `Some(reason)`: stayed portable.
    pub kept_because: Option<String>,
}

/// A tensor value's metadata.
#[derive(Clone, Debug)]
pub struct TensorMeta {
    pub dtype: Option<DType>,
    pub sizes: Vec<usize>,
    pub contiguous: bool,
    pub buffer: u32,
    pub planned: bool,
    /// Planned storage: (memory_id, byte offset, bytes).
    pub alloc: Option<(u32, u64, u64)>,
}

impl TensorMeta {
    pub fn is_constant(&self) -> bool {
        self.buffer > 0 && !self.planned
    }
    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }
    /// Whether both are planned and their bytes overlap.
    pub fn overlaps(&self, o: &TensorMeta) -> bool {
        match (self.alloc, o.alloc) {
            (Some((ma, a, la)), Some((mb, b, lb))) => ma == mb && a < b + lb && b < a + la,
            _ => false,
        }
    }
}

/// A method's values and instructions, read once.
pub struct PlanView<'a> {
    pub plan: fb::ExecutionPlan<'a>,
    pub tensors: Vec<Option<TensorMeta>>,
    /// Per instruction of chain 0: operator key for kernel calls (else empty) and args.
    pub instrs: Vec<(String, Vec<i32>)>,
    /// Instructions naming each value (as an argument, inside a list, or in a move/jump/free).
    pub named_by: Vec<BTreeSet<usize>>,
    /// Values that are method inputs or outputs.
    pub io: BTreeSet<i32>,
}

/// Value `v`, bounds-checked (indices come from the file).
fn value_at<'a>(plan: &fb::ExecutionPlan<'a>, v: i64) -> Option<fb::EValue<'a>> {
    let values = plan.values()?;
    let i = usize::try_from(v).ok().filter(|&i| i < values.len())?;
    Some(values.get(i))
}

fn scalar_of(plan: &fb::ExecutionPlan<'_>, v: i32) -> Option<f64> {
    let e = value_at(plan, v as i64)?;
    match e.val_type() {
        fb::KernelTypes::Int => e.val_as_int().map(|i| i.int_val() as f64),
        fb::KernelTypes::Double => e.val_as_double().map(|d| d.double_val()),
        _ => None,
    }
}

fn int_list(plan: &fb::ExecutionPlan<'_>, v: i32) -> Option<Vec<i64>> {
    let e = value_at(plan, v as i64)?;
    let items = e.val_as_int_list()?.items()?;
    items
        .iter()
        .map(|i| value_at(plan, i)?.val_as_int().map(|x| x.int_val()))
        .collect()
}

fn string_of<'a>(plan: &fb::ExecutionPlan<'a>, v: i32) -> Option<&'a str> {
    value_at(plan, v as i64)?.val_as_string()?.string_val()
}

fn is_none(plan: &fb::ExecutionPlan<'_>, v: i32) -> bool {
    usize::try_from(v)
        .ok()
        .and_then(|i| plan.values().map(|vals| (i, vals)))
        .is_some_and(|(i, vals)| i < vals.len() && vals.get(i).val_type() == fb::KernelTypes::Null)
}

impl<'a> PlanView<'a> {
    /// Reads a method (only chain 0 is partitioned; programs have one chain).
    pub fn new(plan: fb::ExecutionPlan<'a>) -> PlanView<'a> {
        let values = plan.values().unwrap_or_default();
        let mut tensors = Vec::with_capacity(values.len());
        for e in values.iter() {
            tensors.push(e.val_as_tensor().map(|t| {
                let sizes: Vec<usize> = t
                    .sizes()
                    .map(|s| s.iter().map(|d| d.max(0) as usize).collect())
                    .unwrap_or_default();
                let order: Vec<u8> = t
                    .dim_order()
                    .map(|d| d.iter().collect())
                    .unwrap_or_default();
                TensorMeta {
                    dtype: DType::from_scalar_type(t.scalar_type().0),
                    contiguous: order.iter().enumerate().all(|(i, &d)| d as usize == i),
                    sizes,
                    buffer: t.data_buffer_idx(),
                    planned: t.allocation_info().is_some(),
                    alloc: t.allocation_info().map(|a| {
                        let off =
                            ((a.memory_offset_high() as u64) << 32) | a.memory_offset_low() as u64;
                        let elem = DType::from_scalar_type(t.scalar_type().0)
                            .map_or(1, |d| d.size() as u64);
                        let n: u64 = t
                            .sizes()
                            .map_or(0, |s| s.iter().map(|d| d.max(0) as u64).product());
                        (a.memory_id(), off, n * elem)
                    }),
                }
            }));
        }
        let ops = plan.operators();
        let mut instrs = Vec::new();
        let mut named_by = vec![BTreeSet::new(); values.len()];
        let name = |v: i32, pc: usize, named_by: &mut Vec<BTreeSet<usize>>| {
            if let Some(s) = usize::try_from(v).ok().and_then(|i| named_by.get_mut(i)) {
                s.insert(pc);
            }
        };
        let chain = plan
            .chains()
            .and_then(|c| (!c.is_empty()).then(|| c.get(0)));
        let list = chain.and_then(|c| c.instructions()).unwrap_or_default();
        for (pc, ins) in list.iter().enumerate() {
            let mut args: Vec<i32> = Vec::new();
            let mut key = String::new();
            match ins.instr_args_type() {
                fb::InstructionArguments::KernelCall => {
                    if let Some(k) = ins.instr_args_as_kernel_call() {
                        args = k.args().map(|a| a.iter().collect()).unwrap_or_default();
                        if let Some(op) = ops.and_then(|o| {
                            usize::try_from(k.op_index())
                                .ok()
                                .filter(|&i| i < o.len())
                                .map(|i| o.get(i))
                        }) {
                            let (n, o) = (op.name().unwrap_or(""), op.overload().unwrap_or(""));
                            key = if o.is_empty() {
                                n.to_string()
                            } else {
                                format!("{n}.{o}")
                            };
                        }
                    }
                }
                fb::InstructionArguments::DelegateCall => {
                    if let Some(d) = ins.instr_args_as_delegate_call() {
                        args = d.args().map(|a| a.iter().collect()).unwrap_or_default();
                    }
                }
                fb::InstructionArguments::MoveCall => {
                    if let Some(m) = ins.instr_args_as_move_call() {
                        args = vec![m.move_from(), m.move_to()];
                    }
                }
                fb::InstructionArguments::JumpFalseCall => {
                    if let Some(j) = ins.instr_args_as_jump_false_call() {
                        args = vec![j.cond_value_index()];
                    }
                }
                fb::InstructionArguments::FreeCall => {
                    if let Some(f) = ins.instr_args_as_free_call() {
                        args = vec![f.value_index()];
                    }
                }
                _ => {}
            }
            for &a in &args {
                name(a, pc, &mut named_by);
                // Tensor lists name their items too.
                if let Some(e) = usize::try_from(a)
                    .ok()
                    .filter(|&i| i < values.len())
                    .map(|i| values.get(i))
                {
                    let items = e
                        .val_as_tensor_list()
                        .and_then(|l| l.items())
                        .or_else(|| e.val_as_optional_tensor_list().and_then(|l| l.items()));
                    for it in items.into_iter().flatten() {
                        name(it, pc, &mut named_by);
                    }
                }
            }
            instrs.push((key, args));
        }
        let io = plan
            .inputs()
            .into_iter()
            .flatten()
            .chain(plan.outputs().into_iter().flatten())
            .collect();
        PlanView {
            plan,
            tensors,
            instrs,
            named_by,
            io,
        }
    }

    fn tensor(&self, v: i32) -> Option<&TensorMeta> {
        self.tensors.get(usize::try_from(v).ok()?)?.as_ref()
    }

    /// Whether `v` is named by exactly the instructions `pcs` (and is no method input/output).
    fn named_only_by(&self, v: i32, pcs: &[usize]) -> bool {
        let Some(set) = usize::try_from(v).ok().and_then(|i| self.named_by.get(i)) else {
            return false;
        };
        !self.io.contains(&v) && set.len() == pcs.len() && pcs.iter().all(|p| set.contains(p))
    }

    /// The instruction before `pc` that transposes a constant 2-D weight into `w`:
    /// `(pc of the copy, constant value)`.
    fn transpose_source(&self, w: i32, pc: usize) -> Option<(usize, i32)> {
        let set = self.named_by.get(usize::try_from(w).ok()?)?;
        let &src_pc = set.iter().find(|&&p| p < pc)?;
        let (key, args) = &self.instrs[src_pc];
        let (src, out) = match key.as_str() {
            "aten::permute_copy.out" if args.len() == 4 => {
                let dims = int_list(&self.plan, args[1])?;
                if !(dims == [1, 0] || dims == [-1, -2] || dims == [1, -2] || dims == [-1, 0]) {
                    return None;
                }
                (args[0], args[2])
            }
            "aten::t_copy.out" if args.len() == 3 => (args[0], args[1]),
            _ => return None,
        };
        (out == w).then_some((src_pc, src))
    }
}

/// Whether tensor `v`, planned over the bytes a product at `pc` writes and its activation at
/// `pc + 1` reads, holds another value: it is named only before `pc`, or, when first named
/// after `pc + 1`, some instruction in between (or that one) wrote over those bytes (so it is
/// not a view reading the product's output).
fn other_value_at(view: &PlanView<'_>, v: i32, pc: usize) -> bool {
    let Some(names) = usize::try_from(v).ok().and_then(|i| view.named_by.get(i)) else {
        return false;
    };
    let Some(tv) = view.tensor(v) else {
        return false;
    };
    let after: Vec<usize> = names.iter().copied().filter(|&p| p > pc + 1).collect();
    let before = names.iter().any(|&p| p < pc);
    match after.first() {
        None => true,
        Some(_) if before => false,
        Some(&first) => (pc + 2..=first).any(|q| {
            view.instrs[q]
                .1
                .last()
                .and_then(|&w| view.tensor(w))
                .is_some_and(|tw| tw.overlaps(tv))
        }),
    }
}

/// Finds the absorbable products of chain 0 and the reasons the others stay portable.
pub fn partition(view: &PlanView<'_>) -> (Vec<Candidate>, Vec<Decision>) {
    let mut cands = Vec::new();
    let mut decisions = Vec::new();
    let mut claimed: BTreeSet<usize> = BTreeSet::new();
    for pc in 0..view.instrs.len() {
        let key = view.instrs[pc].0.as_str();
        if !matches!(key, "aten::addmm.out" | "aten::mm.out" | "aten::linear.out") {
            continue;
        }
        let res = candidate(view, pc, &claimed);
        match res {
            Ok(c) => {
                claimed.insert(c.pc);
                claimed.extend(c.removed.iter().copied());
                decisions.push(Decision {
                    pc,
                    operator: key.to_string(),
                    kept_because: None,
                });
                cands.push(c);
            }
            Err(reason) => decisions.push(Decision {
                pc,
                operator: key.to_string(),
                kept_because: Some(reason),
            }),
        }
    }
    decide_packing(view, &mut cands);
    (cands, decisions)
}

fn f32_tensor<'v>(view: &'v PlanView<'_>, v: i32, what: &str) -> Result<&'v TensorMeta, String> {
    let t = view
        .tensor(v)
        .ok_or_else(|| format!("{what} (value {v}) is not a tensor"))?;
    if t.dtype != Some(DType::F32) {
        return Err(format!("{what} (value {v}) is {:?}, not float32", t.dtype));
    }
    if !t.contiguous {
        return Err(format!("{what} (value {v}) is not contiguous"));
    }
    Ok(t)
}

fn candidate(
    view: &PlanView<'_>,
    pc: usize,
    claimed: &BTreeSet<usize>,
) -> Result<Candidate, String> {
    let (key, args) = &view.instrs[pc];
    // (x, weight, bias, out, alpha, beta, weight as stored is [K, N])
    let (x, w, bias, out, alpha, beta, kxn) = match key.as_str() {
        "aten::addmm.out" if args.len() == 7 => {
            let s = |v| {
                scalar_of(&view.plan, v)
                    .ok_or_else(|| format!("alpha/beta (value {v}) is not a constant number"))
            };
            (
                args[1],
                args[2],
                Some(args[0]),
                args[5],
                s(args[4])?,
                s(args[3])?,
                true,
            )
        }
        "aten::mm.out" if args.len() == 4 => (args[0], args[1], None, args[2], 1.0, 1.0, true),
        "aten::linear.out" if args.len() == 5 => {
            let b = (!is_none(&view.plan, args[2])).then_some(args[2]);
            (args[0], args[1], b, args[3], 1.0, 1.0, false)
        }
        _ => return Err("unexpected argument count".into()),
    };
    let xt = f32_tensor(view, x, "input")?;
    let mut removed = Vec::new();
    let mut absorbed = Vec::new();
    // The weight: a constant, or the transpose of one.
    let (wc, orient) = match view.tensor(w) {
        Some(t) if t.is_constant() => (w, if kxn { Orient::KxN } else { Orient::NxK }),
        Some(_) => match view.transpose_source(w, pc) {
            Some((tpc, src))
                if view.tensor(src).is_some_and(|t| t.is_constant())
                    && view.named_only_by(w, &[tpc, pc])
                    && !claimed.contains(&tpc) =>
            {
                removed.push(tpc);
                absorbed.push(view.instrs[tpc].0.clone());
                (src, if kxn { Orient::NxK } else { Orient::KxN })
            }
            _ => return Err("weight is not a constant (nor the transpose of one)".into()),
        },
        None => return Err("weight is not a tensor".into()),
    };
    let wt = f32_tensor(view, wc, "weight")?;
    if wt.sizes.len() != 2 {
        return Err(format!("weight (value {wc}) is not 2-D"));
    }
    let (k, n) = match orient {
        Orient::KxN => (wt.sizes[0], wt.sizes[1]),
        Orient::NxK => (wt.sizes[1], wt.sizes[0]),
    };
    if k == 0 || n == 0 {
        return Err("empty weight".into());
    }
    if xt.sizes.last() != Some(&k) || (key != "aten::linear.out" && xt.sizes.len() != 2) {
        return Err(format!(
            "input shape {:?} does not match the weight's depth {k}",
            xt.sizes
        ));
    }
    if let Some(b) = bias {
        let bt = f32_tensor(view, b, "bias")?;
        if bt.numel() != n || bt.sizes.len() > 2 || (bt.sizes.len() == 2 && bt.sizes[0] != 1) {
            return Err(format!("bias shape {:?} is not a row of {n}", bt.sizes));
        }
    }
    let ot = f32_tensor(view, out, "output")?;
    if ot.numel() != xt.numel() / k * n {
        return Err("output size does not match input and weight".into());
    }
    absorbed.push(key.clone());
    // An adjacent activation over the product alone.
    let mut act = Act::None;
    let mut final_out = out;
    if let Some((akey, aargs)) = view.instrs.get(pc + 1) {
        // The activation reads the product's output, or a view with exactly its bytes (a
        // reshape ExecuTorch planned over it); nothing else names those bytes.
        let same_bytes = |a: i32| {
            view.tensor(a).is_some_and(|t| {
                t.alloc.is_some() && t.alloc == ot.alloc && t.numel() == ot.numel()
            })
        };
        let reads_out = |a: i32| {
            a == out
                || (same_bytes(a)
                    && view.named_only_by(a, &[pc + 1])
                    && view.named_only_by(out, &[pc])
                    && (0..view.tensors.len() as i32)
                        .filter(|&v| v != a && v != out && same_bytes(v))
                        .all(|v| other_value_at(view, v, pc)))
        };
        let fused = match akey.as_str() {
            "aten::relu.out" if aargs.len() == 3 && reads_out(aargs[0]) => {
                Some((Act::Relu, aargs[1]))
            }
            "aten::gelu.out" if aargs.len() == 4 && reads_out(aargs[0]) => {
                match string_of(&view.plan, aargs[1]) {
                    Some("none") => Some((Act::GeluErf, aargs[2])),
                    Some("tanh") => Some((Act::GeluTanh, aargs[2])),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((a, aout)) = fused {
            // The region writes the activation's output while reading x and the bias: the
            // memory plan may have put the activation's output over them (it ran after).
            let clear = |t: &TensorMeta| {
                !t.overlaps(xt)
                    && bias
                        .and_then(|b| view.tensor(b))
                        .is_none_or(|bt| !t.overlaps(bt))
            };
            let named = if aargs[0] == out {
                view.named_only_by(out, &[pc, pc + 1])
            } else {
                true
            };
            let ok = named
                && f32_tensor(view, aout, "activation output")
                    .is_ok_and(|t| t.numel() == ot.numel() && clear(t));
            if ok {
                act = a;
                final_out = aout;
                removed.push(pc + 1);
                absorbed.push(akey.clone());
            }
        }
    }
    let buffer = view.tensor(wc).map_or(0, |t| t.buffer);
    Ok(Candidate {
        pc,
        removed,
        x,
        w: wc,
        buffer,
        orient,
        bias,
        alpha: alpha as f32,
        beta: beta as f32,
        act,
        out: final_out,
        k,
        n,
        max_m: xt.numel() / k,
        absorbed,
        packed: false,
    })
}

/// Packs a weight buffer only when every value stored in it is read by absorbed products
/// alone, all the same way (so the original bytes can go).
fn decide_packing(view: &PlanView<'_>, cands: &mut [Candidate]) {
    // Instructions that disappear or become region calls.
    let absorbed_pcs: BTreeSet<usize> = cands
        .iter()
        .flat_map(|c| std::iter::once(c.pc).chain(c.removed.iter().copied()))
        .collect();
    let mut orient_of: BTreeMap<u32, BTreeSet<Orient>> = BTreeMap::new();
    for c in cands.iter() {
        orient_of.entry(c.buffer).or_default().insert(c.orient);
    }
    let weights: BTreeSet<i32> = cands.iter().map(|c| c.w).collect();
    for c in cands.iter_mut() {
        let same_way = orient_of.get(&c.buffer).is_some_and(|s| s.len() == 1);
        let exclusive = view.tensors.iter().enumerate().all(|(v, t)| match t {
            Some(t) if t.buffer == c.buffer && !t.planned => {
                weights.contains(&(v as i32))
                    && !view.io.contains(&(v as i32))
                    && view.named_by[v].iter().all(|p| absorbed_pcs.contains(p))
            }
            _ => true,
        });
        c.packed = same_way && exclusive;
    }
}
