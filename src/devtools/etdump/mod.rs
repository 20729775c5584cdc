//! ETDump profiles in ExecuTorch's own format (`schema/etdump.fbs`: size-prefixed flatbuffer,
//! identifier `ED00`, version 0), which ExecuTorch's devtools `Inspector` reads.
//!
//! [`Recorder`] is an [`Observer`]: passed to `Method::execute_observed`, it stores one
//! [`Event`] per executed instruction, per operation inside delegate regions and per execute,
//! stamped by a clock the caller supplies (host: monotonic nanoseconds; bare metal: the
//! generic timer, which under QEMU's `-icount` advances one tick per instruction). Events go
//! into a caller-provided slice; [`encode`] then writes the file into a caller-provided byte
//! buffer. Neither allocates, so a bare-metal image can profile itself.
//!
//! What is written follows what ExecuTorch's runtime writes: per run a `RunData` named
//! `"Execute"` holding, in execution order, for each kernel call a `"OPERATOR_CALL"` event and
//! a `"native_call_<operator>.<overload>"` event (both with the chain and instruction id), for
//! each operation of a delegate region an unnamed event with `delegate_debug_id_str` = its kind
//! and index in the region (`"XNNFullyConnected #3"`), then a `"DELEGATE_CALL"` event for the
//! region, and last `"Method::execute"` (chain -1, instruction 0).

pub mod encode;

use crate::format::fb;
use crate::kernel_api::Observer;

pub use encode::Full;
use encode::{Field, Writer};

/// What an event measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A kernel call (instruction).
    Operator,
    /// A delegate call (instruction), the whole region.
    Delegate,
    /// One operation inside a delegate region (`region_op` is its index, `op_kind` its kind).
    RegionOp,
    /// The whole `execute`.
    Execute,
}

/// One timed event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    pub chain: u32,
    pub instruction: u32,
    pub region_op: u32,
    pub op_kind: &'static str,
    pub start: u64,
    pub end: u64,
}

impl Event {
    pub const EMPTY: Event = Event {
        kind: Kind::Execute,
        chain: 0,
        instruction: 0,
        region_op: 0,
        op_kind: "",
        start: 0,
        end: 0,
    };
}

/// Records the events of one execution into a caller's slice.
pub struct Recorder<'e, 'p, C: FnMut() -> u64> {
    plan: fb::ExecutionPlan<'p>,
    events: &'e mut [Event],
    len: usize,
    dropped: usize,
    clock: C,
    /// Open events (indices into `events`): the running instruction, region operation, run.
    open_ins: Option<usize>,
    open_op: Option<usize>,
    run: Option<usize>,
}

impl<'e, 'p, C: FnMut() -> u64> Recorder<'e, 'p, C> {
    /// A recorder for one execution of `plan`, storing into `events` (events past its length
    /// are counted in [`Recorder::dropped`], not stored).
    pub fn new(plan: fb::ExecutionPlan<'p>, events: &'e mut [Event], clock: C) -> Self {
        Recorder {
            plan,
            events,
            len: 0,
            dropped: 0,
            clock,
            open_ins: None,
            open_op: None,
            run: None,
        }
    }

    /// The events recorded, in execution order (the run's own event first).
    pub fn events(&self) -> &[Event] {
        &self.events[..self.len]
    }

    /// Events that did not fit.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    fn open(&mut self, e: Event) -> Option<usize> {
        if self.len < self.events.len() {
            self.events[self.len] = e;
            self.len += 1;
            Some(self.len - 1)
        } else {
            self.dropped += 1;
            None
        }
    }

    fn close(&mut self, i: Option<usize>, now: u64) {
        if let Some(e) = i.and_then(|i| self.events.get_mut(i)) {
            e.end = now;
        }
    }

    fn is_delegate(&self, chain: usize, pc: usize) -> bool {
        self.plan
            .chains()
            .filter(|c| chain < c.len())
            .and_then(|c| c.get(chain).instructions())
            .filter(|l| pc < l.len())
            .is_some_and(|l| l.get(pc).instr_args_type() == fb::InstructionArguments::DelegateCall)
    }
}

impl<C: FnMut() -> u64> Observer for Recorder<'_, '_, C> {
    fn instruction(&mut self, chain: usize, pc: usize) {
        let now = (self.clock)();
        if self.run.is_none() {
            self.run = self.open(Event {
                start: now,
                ..Event::EMPTY
            });
        }
        let (op, ins) = (self.open_op.take(), self.open_ins.take());
        self.close(op, now);
        self.close(ins, now);
        let kind = if self.is_delegate(chain, pc) {
            Kind::Delegate
        } else {
            Kind::Operator
        };
        self.open_ins = self.open(Event {
            kind,
            chain: chain as u32,
            instruction: pc as u32,
            start: now,
            ..Event::EMPTY
        });
    }

    fn region_op(&mut self, index: usize, kind: &'static str, _out: usize, _macs: u64) {
        let now = (self.clock)();
        let op = self.open_op.take();
        self.close(op, now);
        let (chain, instruction) = self
            .open_ins
            .and_then(|i| self.events.get(i))
            .map_or((0, 0), |e| (e.chain, e.instruction));
        self.open_op = self.open(Event {
            kind: Kind::RegionOp,
            chain,
            instruction,
            region_op: index as u32,
            op_kind: kind,
            start: now,
            end: now,
        });
    }

    fn finished(&mut self) {
        let now = (self.clock)();
        let (op, ins, run) = (self.open_op.take(), self.open_ins.take(), self.run.take());
        self.close(op, now);
        self.close(ins, now);
        self.close(run, now);
    }
}

/// `name` and `overload` of the operator of kernel call `pc` in `chain`.
fn operator_of<'p>(plan: fb::ExecutionPlan<'p>, chain: u32, pc: u32) -> Option<(&'p str, &'p str)> {
    let c = plan.chains().filter(|c| (chain as usize) < c.len())?;
    let l = c.get(chain as usize).instructions()?;
    let k = (pc as usize) < l.len();
    let k = k.then(|| l.get(pc as usize).instr_args_as_kernel_call())??;
    let ops = plan.operators()?;
    let i = usize::try_from(k.op_index())
        .ok()
        .filter(|&i| i < ops.len())?;
    let o = ops.get(i);
    Some((o.name().unwrap_or(""), o.overload().unwrap_or("")))
}

/// ProfileEvent fields (slots of `schema/etdump.fbs`).
const PE_NAME: u16 = 0;
const PE_CHAIN: u16 = 1;
const PE_INSTRUCTION: u16 = 2;
const PE_DEBUG_STR: u16 = 4;
const PE_START: u16 = 6;
const PE_END: u16 = 7;

/// Calls `f` with the index of every recorded event in the reverse of ExecuTorch's order
/// (ExecuTorch's: instructions as they ran, a region's operations before its
/// `DELEGATE_CALL`, the run's own event last; recorded: the run first, then each instruction
/// followed by its region's operations).
fn reverse_et_order(
    events: &[Event],
    mut f: impl FnMut(usize) -> Result<(), Full>,
) -> Result<(), Full> {
    let n = events.len();
    if n == 0 {
        return Ok(());
    }
    let run = events[0].kind == Kind::Execute;
    if run {
        f(0)?;
    }
    let first = usize::from(run);
    let mut j = n;
    while j > first {
        let i = j - 1;
        if events[i].kind == Kind::RegionOp {
            let mut s = i;
            while s > first && events[s].kind == Kind::RegionOp {
                s -= 1;
            }
            // `s` is the region's delegate call unless the record starts with operations.
            let head = events[s].kind != Kind::RegionOp;
            if head {
                f(s)?;
            }
            let lo = if head { s + 1 } else { s };
            for k in (lo..=i).rev() {
                f(k)?;
            }
            j = if head { s } else { first };
        } else {
            f(i)?;
            j = i;
        }
    }
    Ok(())
}

/// When the method was loaded, in the clock of the events: `load_method` spans the whole
/// load (ptera: `MethodMeta::new` and `Method::load`), `init` the method's initialisation
/// inside it (`Method::load`). Written like ExecuTorch's runtime writes them: a first
/// `RunData` named "Default" with a "Method::init" and a "Program::load_method" event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Load {
    pub load_method: (u64, u64),
    pub init: (u64, u64),
}

/// Writes an ETDump of `runs` (one `RunData` "Execute" each, events as a [`Recorder`] gave
/// them) of method `plan` into `out`; returns its length ([`Full`] when `out` is too small).
/// `positions` must hold two entries per recorded event of the largest run (where the tables
/// went, kept between the two passes of the writer).
pub fn encode(
    plan: fb::ExecutionPlan<'_>,
    runs: &[&[Event]],
    positions: &mut [[u32; 2]],
    out: &mut [u8],
) -> Result<usize, Full> {
    encode_with_load(plan, None, runs, positions, out)
}

/// [`encode`] with the method's load as its own events first (see [`Load`]).
pub fn encode_with_load(
    plan: fb::ExecutionPlan<'_>,
    load: Option<Load>,
    runs: &[&[Event]],
    positions: &mut [[u32; 2]],
    out: &mut [u8],
) -> Result<usize, Full> {
    let mut w = Writer::new(out);
    let op_call = w.string("OPERATOR_CALL")?;
    let del_call = w.string("DELEGATE_CALL")?;
    let execute = w.string("Method::execute")?;
    let run_name = w.string("Execute")?;
    let mut run_tables: heapless::Vec<u32, 64> = heapless::Vec::new();
    if let Some(load) = load {
        let span = |(start, end): (u64, u64)| Event {
            start,
            end,
            ..Event::EMPTY
        };
        let init_name = w.string("Method::init")?;
        let load_name = w.string("Program::load_method")?;
        let init = event(&mut w, &span(load.init), Some(init_name))?;
        let whole = event(&mut w, &span(load.load_method), Some(load_name))?;
        // Stored as they end: the init inside the load first (the vector last element first).
        let events_vec = w.offsets_rev(2, [whole, init].into_iter())?;
        let default = w.string("Default")?;
        let rd = w.table(&[
            (0, Field::Offset(default)),
            (1, Field::I32(-1)),
            (3, Field::Offset(events_vec)),
        ])?;
        run_tables.push(rd).map_err(|_| Full)?;
    }
    for events in runs {
        if positions.len() < events.len() {
            return Err(Full);
        }
        let mut count = 0usize;
        for (e, pos) in events.iter().zip(positions.iter_mut()) {
            match e.kind {
                Kind::Operator => {
                    let (name, overload) =
                        operator_of(plan, e.chain, e.instruction).unwrap_or(("", ""));
                    // ExecuTorch names the event by the operator without its namespace
                    // ("native_call_addmm.out" for aten::addmm.out).
                    let name = name.rsplit("::").next().unwrap_or(name);
                    let native = if overload.is_empty() {
                        w.string_of(&["native_call_", name])?
                    } else {
                        w.string_of(&["native_call_", name, ".", overload])?
                    };
                    pos[1] = event(&mut w, e, Some(native))?;
                    pos[0] = event(&mut w, e, Some(op_call))?;
                    count += 2;
                }
                Kind::Delegate => {
                    pos[0] = event(&mut w, e, Some(del_call))?;
                    count += 1;
                }
                Kind::RegionOp => {
                    pos[0] = event(&mut w, e, None)?;
                    count += 1;
                }
                Kind::Execute => {
                    pos[0] = event(&mut w, e, Some(execute))?;
                    count += 1;
                }
            }
        }
        // The vector of Event offsets, last element first. Within a kernel call, ExecuTorch
        // stores the inner native_call event before OPERATOR_CALL (events are added as they
        // end).
        w.begin_offsets(count)?;
        reverse_et_order(events, |i| {
            let (e, pos) = (&events[i], positions[i]);
            w.offset_element(pos[0])?;
            if e.kind == Kind::Operator {
                w.offset_element(pos[1])?;
            }
            Ok(())
        })?;
        let events_vec = w.end_offsets(count)?;
        let rd = w.table(&[
            (0, Field::Offset(run_name)),
            (1, Field::I32(-1)),
            (3, Field::Offset(events_vec)),
        ])?;
        run_tables.push(rd).map_err(|_| Full)?;
    }
    let runs_vec = w.offsets_rev(run_tables.len(), run_tables.iter().rev().copied())?;
    let root = w.table(&[(0, Field::U32(0)), (1, Field::Offset(runs_vec))])?;
    w.finish(root, b"ED00")
}

/// One `Event { profile_event: ProfileEvent {..} }`; returns the Event table's position.
fn event(w: &mut Writer<'_>, e: &Event, name: Option<u32>) -> Result<u32, Full> {
    let (chain, ins) = match e.kind {
        Kind::Execute => (-1, 0),
        _ => (e.chain as i32, e.instruction as i32),
    };
    // A region operation is named by its kind and index ("XNNFullyConnected #3"), the way
    // ExecuTorch's XNNPACK backend names its operators.
    let debug_str = if e.kind == Kind::RegionOp {
        let mut digits = [0u8; 10];
        let mut n = e.region_op;
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let num = core::str::from_utf8(&digits[at..]).unwrap_or("0");
        Some(w.string_of(&[e.op_kind, " #", num])?)
    } else {
        None
    };
    let mut fields: heapless::Vec<(u16, Field), 8> = heapless::Vec::new();
    let mut add = |f: (u16, Field)| fields.push(f).map_err(|_| Full);
    add((PE_CHAIN, Field::I32(chain)))?;
    add((PE_INSTRUCTION, Field::I32(ins)))?;
    add((PE_START, Field::U64(e.start)))?;
    add((PE_END, Field::U64(e.end)))?;
    if let Some(n) = name {
        add((PE_NAME, Field::Offset(n)))?;
    }
    if let Some(d) = debug_str {
        add((PE_DEBUG_STR, Field::Offset(d)))?;
    }
    let pe = w.table(&fields)?;
    w.table(&[(0, Field::Offset(pe))])
}
