//! `pte-count ISA MODEL.pte`: loads a program, runs `forward` once (warm-up), then once more
//! between the marks `ptera_bench_mark_begin` / `_end` (counted by `cargo xtask bench gemm
//! --pte`). Inputs are synthesised (int tensors = 1, float tensors = small ramps).

#[path = "../shared.rs"]
mod shared;

use shared::{ptera_bench_mark_begin, ptera_bench_mark_end};
use std::hint::black_box;

use ptera::host::AlignedBuf;
use ptera::linalg::gemm::select::{self, Isa};
use ptera::Registry;
use ptera::{MethodMeta, OwnedArenas, Program, Shape};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 2 {
        eprintln!("usage: pte-count ISA MODEL.pte");
        std::process::exit(2);
    }
    let isa = Isa::parse(&args[0]).expect("ISA");
    select::force(isa).expect("ISA not supported");
    println!("vector_bits=0");
    let file = AlignedBuf::read(std::path::Path::new(&args[1])).expect("read model");
    let registry = Registry::standard();
    let program = Program::load(file.as_slice()).expect("load");
    let meta = MethodMeta::new(&program, "forward", &registry).expect("meta");
    let inputs = shared::synth_inputs(&meta);
    let mut bufs = OwnedArenas::for_meta(&meta).expect("arenas");
    let mut method = bufs.load(meta, &registry).expect("load method");
    for round in 0..2 {
        for (i, (dt, shape, bytes)) in inputs.iter().enumerate() {
            let shape = Shape::new(shape.dims()).unwrap();
            method.set_input(i, *dt, &shape, bytes).expect("input");
        }
        if round == 1 {
            ptera_bench_mark_begin();
        }
        method.execute().expect("execute");
        if round == 1 {
            ptera_bench_mark_end();
        }
    }
    let o = method.output(0).expect("output");
    println!("output0[0]={}", black_box(o.get_f64(0)));
}
