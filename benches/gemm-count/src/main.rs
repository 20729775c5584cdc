//! `gemm-count ISA M K N [in-place|prepacked]`: one `sgemm` call (or, `prepacked`, one
//! `sgemm_prepacked` call on B packed beforehand for the kernel's tile width) (row-major A, B, C; beta 0, no bias) with the ISA
//! forced, bracketed by calls to the never-inlined marks `ptera_bench_mark_begin` and
//! `ptera_bench_mark_end`, so that an instruction trace of the process (qemu-user
//! `-d in_asm,exec,nochain`) can count exactly the instructions of the call.
//! Prints `vector_bits=<bits>` (the vector length the kernel uses) on stdout.

mod shared;

use shared::{ptera_bench_mark_begin, ptera_bench_mark_end};
use std::hint::black_box;

use ptera::linalg::gemm::select::{self, Isa};
use ptera::linalg::gemm::{
    pack_b_ahead, prepack_nr, sgemm, sgemm_prepacked, sgemm_scratch_len, MatRef, PackedB,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !(4..=5).contains(&args.len()) {
        eprintln!("usage: gemm-count ISA M K N [in-place|prepacked]");
        std::process::exit(2);
    }
    let isa = Isa::parse(&args[0]).unwrap_or_else(|| {
        eprintln!("unknown ISA {}", args[0]);
        std::process::exit(2)
    });
    let dim = |s: &str| -> usize { s.parse().expect("dimension") };
    let (m, k, n) = (dim(&args[1]), dim(&args[2]), dim(&args[3]));
    if let Err(e) = select::force(isa) {
        eprintln!("{e}");
        std::process::exit(3);
    }
    let bits = match isa {
        Isa::Generic | Isa::Neon => 128,
        #[cfg(target_arch = "aarch64")]
        // SAFETY: `force` succeeded, so SVE2 is present.
        Isa::Sve2 => (unsafe { ptera::linalg::gemm::arm::sve::cntw() }) * 32,
        #[cfg(target_arch = "aarch64")]
        Isa::Sme | Isa::Sme2 => ptera::linalg::gemm::arm::sme::svl_bytes() * 8,
        #[cfg(not(target_arch = "aarch64"))]
        _ => 0,
    };
    println!("vector_bits={bits}");
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5) % 11) as f32 * 0.1 - 0.5)
        .collect();
    let mut c = vec![0.0f32; m * n];
    let mut scratch = vec![0.0f32; sgemm_scratch_len(m, n, k)];
    let am = MatRef::row_major(&a, m, k).unwrap();
    let bm = MatRef::row_major(&b, k, n).unwrap();
    let prepacked = args.get(4).is_some_and(|s| s == "prepacked");
    let mut pd = Vec::new();
    if prepacked {
        let nr = prepack_nr(m, n, k);
        pd = vec![0.0f32; PackedB::len_for(k, n, nr).expect("packed size")];
        pack_b_ahead(bm, nr, &mut pd).expect("pack B");
    }
    let pb = prepacked.then(|| PackedB::new(&pd, k, n, prepack_nr(m, n, k)).expect("packed B"));
    ptera_bench_mark_begin();
    let r = match pb {
        Some(pb) => sgemm_prepacked(am, pb, &mut c, n, 1.0, 0.0, None, &mut scratch),
        None => sgemm(am, bm, &mut c, n, 1.0, 0.0, None, &mut scratch),
    };
    ptera_bench_mark_end();
    r.expect("sgemm");
    // Spot check one element against a scalar dot product.
    let (i, j) = (m / 2, n / 2);
    let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
    let got = black_box(&c)[i * n + j];
    assert!(
        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
    println!("checksum={}", c.iter().map(|&x| x as f64).sum::<f64>());
}
