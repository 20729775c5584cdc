//! The instruction loop: runs the chains of a loaded method over its runtime tables, with no
//! allocation. Indices in instructions were validated by `exec::validate` before loading.

use crate::delegate::DelegateSlot;
use crate::dtype::DType;
use crate::error::{self, Error};
use crate::format::fb;
use crate::kernel_api::{KernelCtx, KernelFn, Observer, TensorSlot, Value};

use super::decoded::{Decoded, Kind};

/// Default budget of executed instructions per `execute` (`Method::set_step_limit` changes
/// it): a program may loop with `JumpFalseCall`, and the caller decides how long it may run.
pub const DEFAULT_STEP_LIMIT: u64 = 10_000_000;

/// What one execution works on: the plan and the method's tables.
pub struct Frame<'c, 'a, 'p> {
    pub plan: fb::ExecutionPlan<'p>,
    pub values: &'c mut [Value<'p>],
    pub tensors: &'c mut [TensorSlot],
    pub kernels: &'c [KernelFn],
    pub delegates: &'c [DelegateSlot<'a, 'p>],
    pub scratch: &'c mut [u8],
    /// Executed instructions allowed in this run ([`Error::StepLimit`] past it).
    pub step_limit: u64,
    /// Whether the load-time row restrictions (`exec::demand`, in `decoded`) apply: a whole
    /// run in program order.
    pub rows: bool,
    /// The instructions decoded at load (`exec::decoded`), numbered across chains.
    pub decoded: &'c [Decoded<'p>],
    /// Instructions (numbered across chains) proved free of output aliasing at load
    /// (`exec::alias`; the others are checked as they run), or elided copies
    /// (`exec::elide`), which are skipped.
    pub proved: &'c [super::alias::Proof],
    /// Who watches this execution, if anyone.
    pub observer: Option<&'c mut dyn Observer>,
}

/// `name.overload` of operator `op`, for error messages.
fn op_name(plan: fb::ExecutionPlan<'_>, op: usize) -> error::Name {
    let mut n = error::Name::new();
    if let Some(o) = plan.operators().filter(|v| op < v.len()).map(|v| v.get(op)) {
        error::push_truncated(&mut n, o.name().unwrap_or("?"));
        let ov = o.overload().unwrap_or("");
        if !ov.is_empty() {
            error::push_truncated(&mut n, ".");
            error::push_truncated(&mut n, ov);
        }
    }
    n
}

impl<'c, 'p> Frame<'c, '_, 'p> {
    /// Runs every chain of the plan once.
    pub fn run(&mut self) -> Result<(), Error> {
        let plan = self.plan;
        let mut base = 0usize;
        for (ci, chain) in plan.chains().unwrap_or_default().iter().enumerate() {
            let instrs = chain.instructions().unwrap_or_default();
            let proved = self.proved.get(base..base + instrs.len()).unwrap_or(&[]);
            // The table borrowed for the frame's lifetime, not through `self`: each call is
            // handed its entry by reference.
            let all: &'c [Decoded<'p>] = self.decoded;
            let decoded = all.get(base..base + instrs.len()).unwrap_or(&[]);
            base += instrs.len();
            let mut pc = 0usize;
            let mut steps = 0u64;
            while pc < instrs.len() {
                steps += 1;
                if steps > self.step_limit {
                    return Err(Error::StepLimit {
                        chain: ci,
                        instruction: pc,
                        limit: self.step_limit,
                    });
                }
                if let Some(o) = self.observer.as_deref_mut() {
                    o.instruction(ci, pc);
                }
                let sure = proved.get(pc).copied().unwrap_or_default();
                pc = if sure.elided() {
                    pc + 1
                } else {
                    match decoded.get(pc) {
                        Some(d) if d.kind != Kind::Other => self.call(pc, d, sure)?,
                        _ => self.step(pc, instrs.get(pc))?,
                    }
                };
            }
        }
        if let Some(o) = self.observer.as_deref_mut() {
            o.finished();
        }
        Ok(())
    }

    /// Executes instruction `pc` of chain `chain` alone (no jump is followed, no step is
    /// counted). Host tools use it to evaluate instructions whose inputs are all constants.
    /// An elided copy does nothing (its output is its input's bytes).
    pub fn run_one(&mut self, chain: usize, pc: usize) -> Result<(), Error> {
        let chains = self.plan.chains().unwrap_or_default();
        let ins = chains
            .iter()
            .nth(chain)
            .and_then(|c| c.instructions())
            .filter(|l| pc < l.len())
            .map(|l| l.get(pc))
            .ok_or(Error::Execution {
                instruction: pc,
                detail: "no such instruction",
            })?;
        let before: usize = chains
            .iter()
            .take(chain)
            .map(|c| c.instructions().map_or(0, |l| l.len()))
            .sum();
        if self.proved.get(before + pc).is_some_and(|p| p.elided()) {
            return Ok(());
        }
        let all: &'c [Decoded<'p>] = self.decoded;
        match all.get(before + pc) {
            Some(d) if d.kind != Kind::Other => self.call(pc, d, super::alias::Proof::NONE),
            _ => self.step(pc, ins),
        }
        .map(|_| ())
    }

    /// Executes the kernel or delegate call `d` (instruction `pc` of its chain); returns the
    /// next pc.
    fn call(
        &mut self,
        pc: usize,
        d: &Decoded<'p>,
        proved: super::alias::Proof,
    ) -> Result<usize, Error> {
        let index = d.index as usize;
        if let Some((p, run)) = d.prepared.as_ref().and_then(|p| Some((p, p.run?))) {
            // Decided at load (`exec::prepared`); `false`: a tensor changed since, so the
            // kernel runs as usual.
            match run(p, self.tensors, self.scratch) {
                Ok(true) => return Ok(pc + 1),
                Ok(false) => {}
                Err(source) => {
                    return Err(Error::Kernel {
                        instruction: pc,
                        operator: op_name(self.plan, index),
                        source,
                    })
                }
            }
        }
        let rows = d
            .rows
            .filter(|_| self.rows)
            .map(|(v, lo, hi)| (v as usize, lo as usize, hi as usize));
        let mut ctx = KernelCtx::new(self.values, self.tensors, d.args, self.scratch)
            .with_rows(rows)
            .with_alias_proof(proved)
            .with_prepared(d.prepared)
            .with_observer(
                self.observer
                    .as_mut()
                    .map(|o| &mut **o as &mut dyn Observer),
            );
        if d.kind == Kind::Kernel {
            let f = *self.kernels.get(index).ok_or(Error::Execution {
                instruction: pc,
                detail: "operator index out of range",
            })?;
            f(&mut ctx).map_err(|source| Error::Kernel {
                instruction: pc,
                operator: op_name(self.plan, index),
                source,
            })?;
        } else {
            let slot = self.delegates.get(index).ok_or(Error::Execution {
                instruction: pc,
                detail: "delegate index out of range",
            })?;
            slot.backend
                .execute(&slot.init, slot.state, &mut ctx)
                .map_err(|source| Error::Delegate {
                    instruction: pc,
                    backend: error::name(slot.backend.id()),
                    source,
                })?;
        }
        Ok(pc + 1)
    }

    /// Executes a move, jump or free (kernel and delegate calls go through [`Frame::call`]);
    /// returns the next pc.
    fn step(&mut self, pc: usize, ins: fb::Instruction<'p>) -> Result<usize, Error> {
        let broken = Error::Execution {
            instruction: pc,
            detail: "malformed instruction",
        };
        match ins.instr_args_type() {
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
