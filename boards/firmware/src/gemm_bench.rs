//! GEMM bench mode (feature `gemm-bench`, boards with a bench region: qemu-virt, and
//! qemu-virt-a15 for the ARMv7 kernel): exact instruction count of one
//! `ptera::linalg::gemm::sgemm` call under `qemu-system-aarch64` (or `qemu-system-arm`)
//! `-icount shift=0,sleep=off`, where CNTVCT advances with executed instructions
//! (`cargo xtask bench gemm`).
//!
//! The run is described by a parameter block that xtask places at the start of the board's bench
//! region with `-device loader,addr=BENCH_RAM.0,file=params.bin` (so one firmware build serves
//! every shape and ISA):
//!
//! | offset | field |
//! |---|---|
//! | 0 | magic `PTGB` |
//! | 4 | version u32 = 1 |
//! | 8 | ISA u32 (`ptera::linalg::gemm::select::Isa` code: 1 generic, 2 neon, 3 sve2, 4 sme, 5 sme2) |
//! | 12, 16, 20 | M, K, N u32 |
//! | 24 | vector length in bits u32 (0: the firmware default, 512) |
//! | 28 | flags u32: bit 0 (testing) corrupts one entry of C after the measured call; bit 1: B is
//! pre-packed (`gemm::pack_b_ahead` for the kernel's tile width, before the counted calls) and the
//! call is `sgemm_prepacked`, as for weights stored packed by `xtask lower` |
//!
//! A `[M,K]`, B `[K,N]` (row-major, the same deterministic values as `benches/gemm-count`), C
//! `[M,N]` and the GEMM scratch follow the parameter page in the same region (B of the GPT-2
//! logits GEMV, 768 × 50257 floats, is 154 MB: far too large for the image's `.bss`, which
//! aarch64-rt would also zero at every boot). The firmware forces the ISA, sets ZCR_EL1 /
//! SMCR_EL1.LEN, runs a warm-up call, then reads CNTVCT around one more call. C is then checked
//! against scalar f64 dot products (a grid of entries including every edge) and, for every row,
//! against a Freivalds product `A·(B·w)` with pseudo-random weights `w`, so a kernel that drops
//! or corrupts any part of C fails the run instead of producing a count.
//!
//! Result: a BENCH packet (console channel 7, layout at [`send`]) before the DONE report.

use core::hint::black_box;

use defmt::Debug2Format;
use ptera::linalg::gemm::select::{self, Isa};
use ptera::linalg::gemm::{
    pack_b_ahead, prepack_nr, sgemm, sgemm_prepacked, sgemm_scratch_len, MatRef, PackedB,
};

use crate::board::BENCH_RAM;
use crate::console::{self, Report};
use crate::cpu;
use crate::StageError;

const MAGIC: u32 = u32::from_le_bytes(*b"PTGB");
const VERSION: u32 = 1;
/// The parameter block's page; the matrices start after it.
const PARAM_BYTES: usize = 4096;
/// Alignment of each matrix inside the region (one cache line).
const ALIGN: usize = 64;

struct Params {
    isa: Isa,
    m: usize,
    k: usize,
    n: usize,
    vl_bits: u32,
    /// Testing: damage C after the call, to prove the checks catch it.
    corrupt: bool,
    /// B pre-packed for the kernel ([`PackedB`]) before the counted calls.
    prepacked: bool,
}

fn invalid(detail: &'static str) -> StageError {
    (
        "gemm bench",
        ptera::Error::Invalid {
            what: "gemm bench",
            index: 0,
            detail,
        },
    )
}

fn read_params() -> Result<Params, StageError> {
    let word = |i: usize| -> u32 {
        // SAFETY: the bench region (board memory map) is RAM mapped Normal by the board's page
        // table and lies above the image; its first page holds the parameter block placed by
        // QEMU's loader before the core started (zero if none was given). Aligned u32 reads.
        unsafe { core::ptr::read_volatile((BENCH_RAM.0 as *const u32).add(i)) }
    };
    if word(0) != MAGIC || word(1) != VERSION {
        return Err(invalid(
            "no parameter block at the bench region (pass one with -device loader)",
        ));
    }
    let isa = match word(2) {
        1 => Isa::Generic,
        2 => Isa::Neon,
        3 => Isa::Sve2,
        4 => Isa::Sme,
        5 => Isa::Sme2,
        _ => return Err(invalid("unknown ISA code in the parameter block")),
    };
    let (m, k, n) = (word(3) as usize, word(4) as usize, word(5) as usize);
    if m == 0 || k == 0 || n == 0 {
        return Err(invalid("M, K and N must be positive"));
    }
    let vl_bits = word(6);
    if vl_bits != 0 && (vl_bits % 128 != 0 || vl_bits > 2048) {
        return Err(invalid(
            "vector length must be a multiple of 128 up to 2048",
        ));
    }
    Ok(Params {
        isa,
        m,
        k,
        n,
        vl_bits,
        corrupt: word(7) & 1 != 0,
        prepacked: word(7) & 2 != 0,
    })
}

const fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Carves `len` values of `T` out of the bench region at `*offset` (64-byte aligned) and
/// initialises them with successive `value()`s.
fn carve<T>(
    offset: &mut usize,
    len: usize,
    mut value: impl FnMut() -> T,
) -> Result<&'static mut [T], StageError> {
    const { assert!(core::mem::align_of::<T>() <= ALIGN) };
    let start = *offset;
    let bytes = len
        .checked_mul(core::mem::size_of::<T>())
        .ok_or(invalid("size overflow"))?;
    let end = start
        .checked_add(align_up(bytes))
        .ok_or(invalid("size overflow"))?;
    if end > BENCH_RAM.1 {
        return Err(invalid(
            "A, B, C and the scratch do not fit the bench region (256 MiB)",
        ));
    }
    *offset = end;
    let p = (BENCH_RAM.0 + start) as *mut T;
    for i in 0..len {
        // SAFETY: [start, end) lies inside the bench region (checked above), which is RAM mapped
        // Normal, above the image, and used by nothing else; each range is handed out once.
        // `p` is 64-byte aligned, enough for T (asserted above).
        unsafe { p.add(i).write(value()) };
    }
    // SAFETY: the `len` values at `p` were all initialised above, are aligned, and no other
    // reference to this range exists or will be made (`offset` only moves forward).
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// `((i · step) mod modulus) · 0.1 − shift` for i = 0, 1, ... (the values of benches/gemm-count),
/// without a division per element.
fn pattern(step: usize, modulus: usize, shift: f32) -> impl FnMut() -> f32 {
    let mut r = 0usize;
    move || {
        let v = r as f32 * 0.1 - shift;
        r += step;
        if r >= modulus {
            r -= modulus;
        }
        v
    }
}

/// Deterministic weight in [0.5, 1.5) for index `i` (splitmix64 of `i` and `seed`).
fn weight(seed: u64, i: usize) -> f64 {
    let mut z = seed.wrapping_add((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    0.5 + (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Outcome of the correctness checks on C.
#[derive(Default)]
struct Check {
    entries: u32,
    bad_entries: u32,
    rows: u32,
    bad_rows: u32,
    /// Largest |error| / tolerance seen (< 1 when everything passes).
    worst: f32,
}

impl Check {
    fn record(&mut self, err: f64, tol: f64, entry: bool) {
        let ratio = (err / tol) as f32;
        if ratio > self.worst || ratio.is_nan() {
            self.worst = ratio;
        }
        // NaN (an unwritten entry) fails too.
        let bad = err.is_nan() || err > tol;
        if entry {
            self.entries += 1;
            self.bad_entries += u32::from(bad);
        } else {
            self.rows += 1;
            self.bad_rows += u32::from(bad);
        }
    }
}

/// f32 accumulation error allowance: `2·sqrt(K)·ε` times the sum of |products|.
fn tolerance(k: usize, abs_sum: f64) -> f64 {
    2.0 * libm_sqrt(k as f64) * f64::from(f32::EPSILON) * abs_sum + 1e-30
}

/// sqrt without `std` or a libm dependency (Newton iterations on f64; x ≥ 1 here).
fn libm_sqrt(x: f64) -> f64 {
    let mut r = x.max(1.0);
    for _ in 0..64 {
        r = 0.5 * (r + x / r);
    }
    r
}

/// Scratch of the row check: the weights `w` (N values) and `B·w`, `|B|·w` (K values each).
struct RowCheck<'a> {
    w: &'a mut [f64],
    bw: &'a mut [f64],
    babs: &'a mut [f64],
}

fn check(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, k, n): (usize, usize, usize),
    rc: RowCheck<'_>,
) -> Check {
    let mut out = Check::default();
    // 1. Single entries against f64 dot products: a grid over the first, second, middle and last
    //    two rows and columns (every edge tile), plus 16 pseudo-random entries.
    let entry = |i: usize, j: usize, out: &mut Check| {
        let (mut dot, mut abs) = (0f64, 0f64);
        for p in 0..k {
            let t = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            dot += t;
            abs += t.abs();
        }
        out.record(
            (f64::from(c[i * n + j]) - dot).abs(),
            tolerance(k, abs),
            true,
        );
    };
    let rows = [0, 1, m / 3, m / 2, m.saturating_sub(2), m - 1];
    let cols = [0, 1, n / 3, n / 2, n.saturating_sub(2), n - 1];
    for &i in rows.iter().filter(|&&i| i < m) {
        for &j in cols.iter().filter(|&&j| j < n) {
            entry(i, j, &mut out);
        }
    }
    for s in 0..16 {
        let i = ((weight(1, s) - 0.5) * m as f64) as usize;
        let j = ((weight(2, s) - 0.5) * n as f64) as usize;
        entry(i.min(m - 1), j.min(n - 1), &mut out);
    }
    // 2. Every row (Freivalds): C·w against A·(B·w) with w in [0.5, 1.5); a wrong entry
    //    anywhere in C shifts its row's sum.
    for (j, w) in rc.w.iter_mut().enumerate() {
        *w = weight(3, j);
    }
    for p in 0..k {
        let (mut bw, mut babs) = (0f64, 0f64);
        for (&bpj, &w) in b[p * n..(p + 1) * n].iter().zip(rc.w.iter()) {
            let x = f64::from(bpj) * w;
            bw += x;
            babs += x.abs();
        }
        rc.bw[p] = bw;
        rc.babs[p] = babs;
    }
    for i in 0..m {
        let got: f64 = c[i * n..(i + 1) * n]
            .iter()
            .zip(rc.w.iter())
            .map(|(&x, &w)| f64::from(x) * w)
            .sum();
        let (mut want, mut abs) = (0f64, 0f64);
        for p in 0..k {
            let aip = f64::from(a[i * k + p]);
            want += aip * rc.bw[p];
            abs += aip.abs() * rc.babs[p];
        }
        out.record((got - want).abs(), tolerance(k, abs), false);
    }
    out
}

/// The BENCH packet (channel 7): ISA code u8, M u32, K u32, N u32, vector bits u32, ticks of
/// the measured call u64, ticks of an empty counter bracket u64, ticks of the warm-up call u64,
/// entries checked u32, bad entries u32, rows checked u32, bad rows u32, worst error/tolerance
/// f32.
fn send(p: &Params, vector_bits: u32, ticks: [u64; 3], c: &Check) {
    let mut b = [0u8; 64];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&[p.isa as u8]);
    for v in [p.m as u32, p.k as u32, p.n as u32, vector_bits] {
        put(&v.to_le_bytes());
    }
    for t in ticks {
        put(&t.to_le_bytes());
    }
    for v in [c.entries, c.bad_entries, c.rows, c.bad_rows] {
        put(&v.to_le_bytes());
    }
    put(&c.worst.to_le_bytes());
    console::bench(&b[..at]);
}

pub fn run(report: &mut Report) -> Result<(), StageError> {
    let p = read_params()?;
    #[cfg(target_arch = "aarch64")]
    {
        if p.vl_bits != 0 {
            report.features = cpu::enable_simd_len(u64::from(p.vl_bits / 128 - 1));
        }
        if select::force(p.isa).is_err() {
            return Err(invalid(
                "the core cannot run the requested ISA's kernel (the SVE2 and SME kernels need a vector length of at most 512 bits)",
            ));
        }
    }
    // ARMv7-A: one Neon kernel, which the core must have (Neon with VFPv4, from MVFR1).
    #[cfg(target_arch = "arm")]
    if p.isa != Isa::Neon || select::micro_kernel().name() != "neon-vfpv4-4x12" {
        return Err(invalid(
            "on a 32-bit core the bench measures the Neon + VFPv4 kernel, which this core lacks",
        ));
    }
    let vector_bits = match p.isa {
        Isa::Generic | Isa::Neon => 128,
        Isa::Sve2 => report.features.sve_vl_bits,
        Isa::Sme | Isa::Sme2 => report.features.sme_svl_bits,
    };
    if p.vl_bits != 0 && !matches!(p.isa, Isa::Generic | Isa::Neon) && vector_bits != p.vl_bits {
        return Err(invalid(
            "the core does not implement the requested vector length",
        ));
    }
    let (m, k, n) = (p.m, p.k, p.n);
    defmt::info!(
        "gemm bench: {=str} {=usize}x{=usize}x{=usize} at {=u32} bits",
        p.isa.name(),
        m,
        k,
        n,
        vector_bits
    );
    let mut offset = PARAM_BYTES;
    let a = carve(&mut offset, m * k, pattern(7, 13, 0.6))?;
    let b = carve(&mut offset, k * n, pattern(5, 11, 0.5))?;
    let c = carve(&mut offset, m * n, || 0.0)?;
    let scratch = carve(&mut offset, sgemm_scratch_len(m, n, k), || 0.0)?;
    let am = MatRef::row_major(a, m, k).map_err(|_| invalid("A shape"))?;
    let bm = MatRef::row_major(b, k, n).map_err(|_| invalid("B shape"))?;

    let packed = if p.prepacked {
        let nr = prepack_nr(m, n, k);
        let len = PackedB::len_for(k, n, nr).ok_or(invalid("packed B size overflows"))?;
        let d = carve(&mut offset, len, || 0.0)?;
        pack_b_ahead(bm, nr, d).map_err(|_| invalid("packing B"))?;
        Some(PackedB::new(d, k, n, nr).map_err(|_| invalid("packed B"))?)
    } else {
        None
    };
    let call = |c: &mut [f32], scratch: &mut [f32]| match packed {
        Some(pb) => sgemm_prepacked(black_box(am), black_box(pb), c, n, 1.0, 0.0, None, scratch),
        None => sgemm(black_box(am), black_box(bm), c, n, 1.0, 0.0, None, scratch),
    };
    let e0 = cpu::cntvct();
    let e1 = cpu::cntvct();
    let w0 = cpu::cntvct();
    let warm = call(c, scratch);
    let w1 = cpu::cntvct();
    if let Err(e) = warm {
        defmt::error!("sgemm failed: {}", Debug2Format(&e));
        return Err(invalid("sgemm returned an error"));
    }
    c.fill(f32::NAN);
    let t0 = cpu::cntvct();
    let r = call(c, scratch);
    let t1 = cpu::cntvct();
    if let Err(e) = r {
        defmt::error!("sgemm failed: {}", Debug2Format(&e));
        return Err(invalid("sgemm returned an error"));
    }
    report.execute_ticks = t1 - t0;
    if p.corrupt {
        c[(m - 1) * n + n / 2] += 0.25;
    }
    let rc = RowCheck {
        w: carve(&mut offset, n, || 0.0)?,
        bw: carve(&mut offset, k, || 0.0)?,
        babs: carve(&mut offset, k, || 0.0)?,
    };
    let checked = check(a, b, c, (m, k, n), rc);
    send(&p, vector_bits, [t1 - t0, e1 - e0, w1 - w0], &checked);
    if checked.bad_entries > 0 || checked.bad_rows > 0 {
        defmt::error!(
            "C is wrong: {=u32} of {=u32} sampled entries and {=u32} of {=u32} row checks fail (worst error {=f32} x tolerance)",
            checked.bad_entries,
            checked.entries,
            checked.bad_rows,
            checked.rows,
            checked.worst
        );
        return Err(invalid("the GEMM result is wrong"));
    }
    Ok(())
}
