//! `qgemm-count TILE M K N`: one dynamically quantized int8 product (`linalg::quant`: QD8 rows
//! times int8 per-channel weights, fp32 out, bias and clamp) through one integer tile, its
//! weights packed for that tile beforehand, bracketed by the marks the trace counter looks for
//! (`ptera_bench_mark_begin` / `_end`). The rows are quantized before the first mark: the count
//! is the product alone. TILE:
//! - `sdot`: `qc8w_p4x4`, lane-indexed `SDOT` (FEAT_DotProd), 16 multiply-adds per `SDOT`;
//! - `mull`: `qc8w_p4x4` in base Neon (`SMULL`/`SADALP`), 8 products per `SMULL`;
//! - `smmla`: `qc8w_p8x8`, `SMMLA` (FEAT_I8MM), 32 per `SMMLA` (the count includes packing
//!   the rows in pairs);
//! - `smopa`: `qc8w_pNx4` with `N = 2S`, SME2 `SMOPA`, `4·S²` per `SMOPA` (`S = SVL / 32`).
//!
//! Prints `macs_per_instruction=<n>` and `vector_bits=<bits>`, then checks three rows of the
//! result against the scalar reference (bit for bit).

#[path = "../shared.rs"]
mod shared;

use shared::{ptera_bench_mark_begin, ptera_bench_mark_end};
use std::hint::black_box;

use ptera::linalg::quant::{self, packed, reference, QParams, QWeights, QuantKernel};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: qgemm-count sdot|mull|smmla|smopa M K N");
        std::process::exit(2);
    }
    let dim = |s: &str| -> usize { s.parse().expect("dimension") };
    let (m, k, n) = (dim(&args[1]), dim(&args[2]), dim(&args[3]));
    if k % 16 != 0 {
        eprintln!("K must be a multiple of 16");
        std::process::exit(2);
    }
    let tile = args[0].as_str();
    let f = ptera::linalg::cpu::features();
    let w2 = quant::smopa_width();
    let (per, bits) = match tile {
        "sdot" if f.dotprod => (16, 128),
        "mull" => (8, 128),
        "smmla" if f.i8mm => (32, 128),
        "smopa" if w2 > 0 => ((w2 / 2) * (w2 / 2) * 4, w2 * 16),
        "sdot" | "smmla" | "smopa" => {
            eprintln!("this CPU has no {tile} tile");
            std::process::exit(3);
        }
        _ => {
            eprintln!("unknown tile {tile}");
            std::process::exit(2);
        }
    };
    println!("macs_per_instruction={per}");
    println!("vector_bits={bits}");
    // Activations quantized per row, symmetric int8 weights, per-channel scales, a bias.
    let x: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7) % 23) as f32 * 0.1 - 1.1)
        .collect();
    let mut a = vec![0i8; m * k];
    let mut ap = vec![QParams::default(); m];
    quant::quantize_rows_qd8(&x, k, &mut a, &mut ap);
    let rows: Vec<u8> = (0..n * k)
        .map(|i| (((i * 5) % 255) as i32 - 127) as i8 as u8)
        .collect();
    let scales: Vec<u8> = (0..n)
        .flat_map(|j| (0.01 + (j % 7) as f32 * 0.002).to_le_bytes())
        .collect();
    let bias: Vec<f32> = (0..n).map(|j| (j % 5) as f32 * 0.1).collect();
    let w = QWeights::Qc8w {
        data: &rows,
        scales: &scales,
    };
    let mut sums = vec![0f32; n];
    quant::column_sums(&w, n, k, &mut sums).expect("column sums");
    let layout = match tile {
        "smmla" => packed::Int8Layout::P8x8,
        "smopa" => packed::Int8Layout::PNx4(w2),
        _ => packed::Int8Layout::P4x4,
    };
    let mut data = vec![0u8; layout.len(n, k).expect("packed size")];
    match layout {
        packed::Int8Layout::P8x8 => packed::pack_qc8w_p8x8(&rows, n, k, &mut data),
        packed::Int8Layout::PNx4(nb) => packed::pack_qc8w_pnx4(&rows, n, k, nb, &mut data),
        _ => packed::pack_qc8w_p4x4(&rows, n, k, &mut data),
    }
    .expect("pack");
    let kernel = if tile == "mull" {
        QuantKernel::NeonMull
    } else {
        QuantKernel::select()
    };
    let mut scratch =
        vec![0f32; quant::pnx4_scratch_f32(m, k, w2).max(quant::p8x8_scratch_f32(m, k))];
    let mut out = vec![0f32; m * n];
    let clamp = Some((-50.0, 50.0));
    ptera_bench_mark_begin();
    let r = match layout {
        packed::Int8Layout::P8x8 => quant::gemm_qd8_f32_p8x8(
            kernel,
            &a,
            &ap,
            m,
            k,
            &data,
            &scales,
            n,
            Some(&bias),
            &sums,
            &mut out,
            clamp,
            &mut scratch,
        ),
        packed::Int8Layout::PNx4(nb) => quant::gemm_qd8_f32_pnx4(
            kernel,
            &a,
            &ap,
            m,
            k,
            (&data, nb),
            &scales,
            n,
            Some(&bias),
            &sums,
            &mut out,
            clamp,
            &mut scratch,
        ),
        _ => quant::gemm_qd8_f32_p4x4(
            kernel,
            &a,
            &ap,
            m,
            k,
            &data,
            &scales,
            n,
            Some(&bias),
            &sums,
            &mut out,
            clamp,
        ),
    };
    ptera_bench_mark_end();
    r.expect("quantized product");
    // Rows 0, m / 2 and m - 1 against the scalar reference, bit for bit (the whole product
    // under the trace would take longer than the counted call).
    let got = black_box(&out);
    for i in [0, m / 2, m - 1] {
        let mut want = vec![0f32; n];
        reference::gemm_qd8_f32_ref(
            &a[i * k..(i + 1) * k],
            &ap[i..i + 1],
            1,
            k,
            &w,
            n,
            Some(&bias),
            &mut want,
            clamp,
        );
        if got[i * n..(i + 1) * n] != want[..] {
            eprintln!("row {i} differs from the reference");
            std::process::exit(4);
        }
    }
    println!("checksum={}", got.iter().map(|&v| v as f64).sum::<f64>());
}
