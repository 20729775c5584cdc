//! `pte-count ISA MODEL.pte`: loads a program, runs `forward` once (warm-up), then once more
//! between the marks `ptera_bench_mark_begin` / `_end` (counted by `cargo xtask bench gemm
//! --pte`). Inputs are synthesised (int tensors = 1, float tensors = small ramps).

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use ptera::host::AlignedBuf;
use ptera::linalg::gemm::select::{self, Isa};
use ptera::Registry;
use ptera::{MethodMeta, OwnedArenas, Program, Shape};

static MARKS: AtomicU32 = AtomicU32::new(0);

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_bench_mark_begin() {
    MARKS.fetch_add(1, Ordering::SeqCst);
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_bench_mark_end() {
    MARKS.fetch_add(2, Ordering::SeqCst);
}

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
    let mut inputs = Vec::new();
    for i in 0..meta.num_inputs() {
        let info = meta.input(i).expect("tensor input");
        let n = info.shape.numel();
        let mut bytes = vec![0u8; n * info.dtype.size()];
        for k in 0..n {
            if info.dtype.is_float() {
                ptera::tensor::write_f64(info.dtype, &mut bytes, k, ((k % 17) as f64 - 8.0) / 8.0);
            } else {
                ptera::tensor::write_i64(info.dtype, &mut bytes, k, 1);
            }
        }
        inputs.push((info.dtype, info.shape, bytes));
    }
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
