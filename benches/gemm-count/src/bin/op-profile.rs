//! `op-profile ISA MODEL.pte`: runs `forward` once (warm-up), then once more between the marks
//! `ptera_bench_mark_begin` / `_end` with an [`Observer`] that calls the never-inlined mark
//! `ptera_bench_mark_op` before every instruction and before every operation inside a delegate
//! region, recording what it is. `cargo xtask bench ops` counts the instructions between
//! consecutive marks in a qemu-user trace, so each segment is one instruction's (or one region
//! operation's) exact cost, plus the observer's own few instructions.
//!
//! After the run it prints one line per segment, in order:
//! `op <i> <kind> <name> <out_elems> <macs>` (kind `kernel`, `delegate`, `node` or `other`).

#[path = "../shared.rs"]
mod shared;

use shared::{ptera_bench_mark_begin, ptera_bench_mark_end};
use std::hint::black_box;

use ptera::format::fb;
use ptera::host::AlignedBuf;
use ptera::kernel_api::{Observer, Value};
use ptera::linalg::gemm::select::{self, Isa};
use ptera::Registry;
use ptera::{Method, MethodMeta, OwnedArenas, Program, Shape};

/// One translated block (no outlined atomic helper), so that each call is one trace entry.
#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_bench_mark_op() {
    // SAFETY: an empty instruction sequence; only keeps the function from being optimised away.
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}

/// One marked segment: an instruction (chain, pc) or a region operation.
enum Event {
    Instruction(usize, usize),
    Node(&'static str, usize, u64),
}

struct Marker {
    events: Vec<Event>,
}

impl Observer for Marker {
    fn instruction(&mut self, chain: usize, pc: usize) {
        self.events.push(Event::Instruction(chain, pc));
        ptera_bench_mark_op();
    }
    fn region_op(&mut self, _index: usize, kind: &'static str, out_elems: usize, macs: u64) {
        self.events.push(Event::Node(kind, out_elems, macs));
        ptera_bench_mark_op();
    }
}

/// Elements of tensor value `v`, and its dims.
fn tensor_dims(method: &Method<'_, '_>, v: usize) -> Option<Vec<usize>> {
    method.tensor(v).map(|t| t.dims().to_vec())
}

/// Name, output elements and multiply-adds of instruction `pc` of chain `chain`.
fn describe(
    method: &Method<'_, '_>,
    chain: usize,
    pc: usize,
) -> (&'static str, String, usize, u64) {
    let plan = method.meta().plan();
    let ins = plan
        .chains()
        .map(|c| c.get(chain))
        .and_then(|c| c.instructions())
        .map(|i| i.get(pc));
    let Some(ins) = ins else {
        return ("other", "?".into(), 0, 0);
    };
    let value_of = |a: i32| -> Option<Vec<usize>> {
        match method.values().get(a as usize)? {
            Value::Tensor(_) => tensor_dims(method, a as usize),
            _ => None,
        }
    };
    match ins.instr_args_type() {
        fb::InstructionArguments::KernelCall => {
            let k = ins.instr_args_as_kernel_call().unwrap();
            let op = plan.operators().unwrap().get(k.op_index() as usize);
            let name = match op.overload() {
                Some(o) if !o.is_empty() => format!("{}.{o}", op.name().unwrap_or("?")),
                _ => op.name().unwrap_or("?").to_string(),
            };
            let args: Vec<i32> = k.args().map(|a| a.iter().collect()).unwrap_or_default();
            // The main output: the first of the trailing `out` arguments.
            let outs = match op.name().unwrap_or("") {
                "aten::native_layer_norm" | "aten::_native_batch_norm_legit_no_training" => 3,
                "aten::max_pool2d_with_indices" => 2,
                _ => 1,
            };
            let out = args
                .len()
                .checked_sub(outs)
                .and_then(|i| value_of(args[i]))
                .unwrap_or_default();
            let elems: usize = out.iter().product();
            // Multiply-adds of the product-like operators: each output element sums one row.
            let inner = |arg: usize| {
                args.get(arg)
                    .and_then(|&a| value_of(a))
                    .and_then(|d| d.last().copied())
                    .unwrap_or(0)
            };
            let macs = match op.name().unwrap_or("") {
                "aten::mm" | "aten::bmm" | "aten::linear" => elems * inner(0),
                "aten::addmm" => elems * inner(1),
                "aten::convolution" => {
                    let w = args.get(1).and_then(|&a| value_of(a)).unwrap_or_default();
                    elems * w.iter().skip(1).product::<usize>()
                }
                _ => 0,
            };
            ("kernel", name, elems, macs as u64)
        }
        fb::InstructionArguments::DelegateCall => {
            let d = ins.instr_args_as_delegate_call().unwrap();
            let id = plan
                .delegates()
                .map(|v| v.get(d.delegate_index() as usize))
                .and_then(|b| b.id())
                .unwrap_or("?");
            ("delegate", id.to_string(), 0, 0)
        }
        _ => ("other", format!("{:?}", ins.instr_args_type()), 0, 0),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 2 {
        eprintln!("usage: op-profile ISA MODEL.pte");
        std::process::exit(2);
    }
    let isa = Isa::parse(&args[0]).expect("ISA");
    select::force(isa).expect("ISA not supported");
    let file = AlignedBuf::read(std::path::Path::new(&args[1])).expect("read model");
    let registry = Registry::standard();
    let program = Program::load(file.as_slice()).expect("load");
    let meta = MethodMeta::new(&program, "forward", &registry).expect("meta");
    let inputs = shared::synth_inputs(&meta);
    let mut bufs = OwnedArenas::for_meta(&meta).expect("arenas");
    let mut method = bufs.load(meta, &registry).expect("load method");
    let mut marker = Marker {
        events: Vec::with_capacity(1 << 16),
    };
    for round in 0..2 {
        for (i, (dt, shape, bytes)) in inputs.iter().enumerate() {
            let shape = Shape::new(shape.dims()).unwrap();
            method.set_input(i, *dt, &shape, bytes).expect("input");
        }
        if round == 1 {
            ptera_bench_mark_begin();
            method.execute_observed(&mut marker).expect("execute");
            ptera_bench_mark_end();
        } else {
            method.execute().expect("execute");
        }
    }
    for (i, e) in marker.events.iter().enumerate() {
        match *e {
            Event::Instruction(chain, pc) => {
                let (kind, name, elems, macs) = describe(&method, chain, pc);
                println!("op {i} {kind} {name} {elems} {macs}");
            }
            Event::Node(kind, elems, macs) => println!("op {i} node {kind} {elems} {macs}"),
        }
    }
    let o = method.output(0).expect("output");
    println!("output0[0]={}", black_box(o.get_f64(0)));
}
