//! `conv-count ISA LAYOUT H W C OC KH KW STRIDE PAD GROUPS`: one 2-D convolution of
//! `ptera::linalg::conv` (LAYOUT `nhwc` or `nchw`; GROUPS = C with OC a multiple of C takes the
//! depthwise kernels) with the ISA forced, batch 1, dilation 1, bias, no clamp, after a
//! warm-up call, bracketed by the never-inlined marks `ptera_bench_mark_begin` /
//! `ptera_bench_mark_end` (counted by `cargo xtask bench gemm --conv`). Prints
//! `macs=<multiply-adds>` and the vector length on stdout, and checks one output element.

// ptera errors are large by design (context inline, no allocation in the core).
#![allow(clippy::result_large_err)]

#[path = "../shared.rs"]
mod shared;

use shared::{ptera_bench_mark_begin, ptera_bench_mark_end};
use std::hint::black_box;

use ptera::linalg::conv::{depthwise, nchw, nhwc, Conv2d};
use ptera::linalg::gemm::select::{self, Isa};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 11 {
        eprintln!("usage: conv-count ISA nhwc|nchw H W C OC KH KW STRIDE PAD GROUPS");
        std::process::exit(2);
    }
    let isa = Isa::parse(&args[0]).unwrap_or_else(|| {
        eprintln!("unknown ISA {}", args[0]);
        std::process::exit(2)
    });
    let nhwc_layout = match args[1].as_str() {
        "nhwc" => true,
        "nchw" => false,
        l => {
            eprintln!("unknown layout {l}");
            std::process::exit(2)
        }
    };
    let v: Vec<usize> = args[2..]
        .iter()
        .map(|s| s.parse().expect("a number"))
        .collect();
    let [h, w, c, oc, kh, kw, s, pad, groups] = v[..] else {
        unreachable!()
    };
    if let Err(e) = select::force(isa) {
        eprintln!("{e}");
        std::process::exit(3);
    }
    let out = |len: usize, k: usize| (len + 2 * pad - k) / s + 1;
    let p = Conv2d {
        batch: 1,
        in_h: h,
        in_w: w,
        in_c: c,
        out_h: out(h, kh),
        out_w: out(w, kw),
        out_c: oc,
        kh,
        kw,
        stride_h: s,
        stride_w: s,
        dil_h: 1,
        dil_w: 1,
        pad_top: pad,
        pad_left: pad,
        groups,
    };
    let (nin, nw, nout) = p.check().expect("geometry");
    let x: Vec<f32> = (0..nin)
        .map(|i| ((i * 7) % 13) as f32 * 0.1 - 0.6)
        .collect();
    let wt: Vec<f32> = (0..nw).map(|i| ((i * 5) % 11) as f32 * 0.1 - 0.5).collect();
    let bias: Vec<f32> = (0..oc).map(|i| i as f32 * 0.01).collect();
    let mut y = vec![0.0f32; nout];
    let scratch_len = match (p.is_depthwise(), nhwc_layout) {
        (true, true) => 0,
        (true, false) => depthwise::nchw_scratch_f32(&p),
        (false, true) => nhwc::scratch_f32(&p),
        (false, false) => nchw::scratch_f32(&p),
    };
    let mut scratch = vec![0.0f32; scratch_len];
    let mut run = |y: &mut [f32]| match (p.is_depthwise(), nhwc_layout) {
        (true, true) => depthwise::depthwise_nhwc(&p, &x, &wt, Some(&bias), y, None),
        (true, false) => depthwise::depthwise_nchw(&p, &x, &wt, Some(&bias), y, None, &mut scratch),
        (false, true) => nhwc::conv2d(&p, &x, &wt, Some(&bias), y, None, &mut scratch),
        (false, false) => nchw::conv2d(&p, &x, &wt, Some(&bias), y, None, &mut scratch),
    };
    run(&mut y).expect("conv");
    ptera_bench_mark_begin();
    let r = run(&mut y);
    ptera_bench_mark_end();
    r.expect("conv");
    let macs = p.batch * p.pixels() * p.out_c * p.kh * p.kw * p.icg();
    println!("macs={macs}");
    println!(
        "vector_bits={}",
        match isa {
            Isa::Generic | Isa::Neon => 128,
            #[cfg(target_arch = "aarch64")]
            // SAFETY: `force` succeeded, so SVE2 is present.
            Isa::Sve2 => (unsafe { ptera::linalg::gemm::arm::sve::cntw() }) * 32,
            #[cfg(target_arch = "aarch64")]
            Isa::Sme | Isa::Sme2 => ptera::linalg::gemm::arm::sme::svl_bytes() * 8,
            #[cfg(not(target_arch = "aarch64"))]
            _ => 0,
        }
    );
    // One interior output element against its definition.
    let (oy, ox, o) = (p.out_h / 2, p.out_w / 2, oc / 2);
    let (cg, ocg) = (p.icg(), p.ocg());
    let g = o / ocg;
    let mut want = bias[o] as f64;
    for i in 0..cg {
        for ky in 0..kh {
            for kx in 0..kw {
                let (iy, ix) = (
                    (oy * s + ky) as isize - pad as isize,
                    (ox * s + kx) as isize - pad as isize,
                );
                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                    continue;
                }
                let (iy, ix, ci) = (iy as usize, ix as usize, g * cg + i);
                let (xv, wv) = if nhwc_layout {
                    let wi = if p.is_depthwise() {
                        (ky * kw + kx) * oc + o
                    } else {
                        ((o * kh + ky) * kw + kx) * cg + i
                    };
                    (x[(iy * w + ix) * c + ci], wt[wi])
                } else {
                    (
                        x[(ci * h + iy) * w + ix],
                        wt[((o * cg + i) * kh + ky) * kw + kx],
                    )
                };
                want += xv as f64 * wv as f64;
            }
        }
    }
    let at = if nhwc_layout {
        (oy * p.out_w + ox) * oc + o
    } else {
        (o * p.out_h + oy) * p.out_w + ox
    };
    let got = black_box(&y)[at] as f64;
    assert!(
        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}
