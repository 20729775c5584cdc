//! The 8-row × 8-channel `SMMLA` tile (FEAT_I8MM), in assembly, over activations packed in
//! row pairs once per product ([`pack_rows_p8x8`]) and weights packed `qc8w_p8x8` (see
//! [`super::packed`]).
//!
//! Both operands come in the `2 × 8` form `SMMLA` multiplies: per 8 depth steps one
//! four-vector load of activations (4 row pairs), one of weights (4 channel pairs) and 16
//! `SMMLA`s into 16 accumulators (`v16`-`v31`, each the `2 × 2` block `[r0·c0, r0·c1, r1·c0,
//! r1·c1]`). The depth loop runs 128 steps per pass (256 `SMMLA`s, 32 loads, 2 loop
//! instructions), then 16 at a time. The activation zero point enters through the
//! accumulators' start values (`-zp · Σ w`, 16 `MUL`s), the epilogue works in the `2 × 2`
//! layout with per-tile vectors of row and column constants, and each output row leaves with
//! one single-lane `ST4` (the tile's 4 channel pairs of that row, 32 bytes). In all about 1,890
//! instructions per 1,536 `SMMLA`s at depth 768.

use core::arch::asm;

use super::dynamic::QParams;

/// Bytes of row constants behind each packed panel: per row pair the negated zero points
/// `[-z0, -z0, -z1, -z1]` (4 × `i32`), then the scales `[s0, s0, s1, s1]` (4 × `f32`).
const PANEL_CONSTANTS: usize = 128;

/// Bytes [`pack_rows_p8x8`] writes for `m` rows of depth `k` (`None` on overflow).
pub fn packed_rows_len(m: usize, k: usize) -> Option<usize> {
    m.div_ceil(8)
        .checked_mul(k.checked_mul(8)?.checked_add(PANEL_CONSTANTS)?)
}

/// Packs the `m` quantized rows `a` (`[m, k]`) and their parameters for
/// [`neon_smmla_8x8_qc8w_p8x8`]. Layout contract: panels of 8 rows, panel `p` at
/// `dst + p·(8·k + 128)`: `k / 8` chunks of 64 bytes, chunk `c` holding row pair `q`'s
/// 16-byte `2 × 8` operand at byte `16·q` (rows `8p + 2q` and `8p + 2q + 1`, depths
/// `8c..8c + 8`, the first row first), then the panel's row constants (see
/// [`PANEL_CONSTANTS`]). A partial last panel repeats its last row (the tile's copies of it
/// are never stored).
///
/// # Safety
/// `m ≥ 1`; `k % 16 == 0`; `a` valid for `m·k` reads, `ap` for `m`; `dst` writable for
/// [`packed_rows_len`]`(m, k)` bytes, disjoint from both.
pub unsafe fn pack_rows_p8x8(a: *const i8, ap: *const QParams, m: usize, k: usize, dst: *mut u8) {
    use core::arch::aarch64::*;
    let panel = 8 * k + PANEL_CONSTANTS;
    for p in 0..m.div_ceil(8) {
        let idx: [usize; 8] = core::array::from_fn(|r| (8 * p + r).min(m - 1));
        // SAFETY: rows are clamped to m - 1 and read 16 bytes at t < k; panel p's bytes
        // (k / 16 runs of 128, then 128 of constants) end at (p + 1)·panel ≤ the packed
        // length; Neon is part of the AArch64 baseline.
        unsafe {
            let rows = idx.map(|i| a.add(i * k));
            let d = dst.add(p * panel);
            let mut t = 0;
            while t < k {
                let pair = |q: usize| {
                    let r0 = vreinterpretq_s64_s8(vld1q_s8(rows[2 * q].add(t)));
                    let r1 = vreinterpretq_s64_s8(vld1q_s8(rows[2 * q + 1].add(t)));
                    (
                        vreinterpretq_s8_s64(vzip1q_s64(r0, r1)),
                        vreinterpretq_s8_s64(vzip2q_s64(r0, r1)),
                    )
                };
                let (q0, q1, q2, q3) = (pair(0), pair(1), pair(2), pair(3));
                let o = d.add(8 * t) as *mut i8;
                vst1q_s8_x4(o, int8x16x4_t(q0.0, q1.0, q2.0, q3.0));
                vst1q_s8_x4(o.add(64), int8x16x4_t(q0.1, q1.1, q2.1, q3.1));
                t += 16;
            }
            let params = idx.map(|i| *ap.add(i));
            let c = d.add(8 * k);
            for q in 0..4 {
                let (p0, p1) = (params[2 * q], params[2 * q + 1]);
                let z = [p0.zero_point, p0.zero_point, p1.zero_point, p1.zero_point];
                let s = [p0.scale, p0.scale, p1.scale, p1.scale];
                vst1q_s32(
                    c.add(16 * q) as *mut i32,
                    vld1q_s32(z.map(i32::wrapping_neg).as_ptr()),
                );
                vst1q_f32(c.add(64 + 16 * q) as *mut f32, vld1q_f32(s.as_ptr()));
            }
        }
    }
}

/// One 8-channel block's constants in the tile's `2 × 2` layout: for channel pair `q`
/// (channels `2q`, `2q + 1` of the block) the weight sums `[Σw0, Σw1, Σw0, Σw1]`, the scales
/// and the biases alike; then the clamp bounds in every lane.
#[repr(C, align(16))]
pub struct BlockVectors {
    pub sums: [[i32; 4]; 4],
    pub scales: [[f32; 4]; 4],
    pub bias: [[f32; 4]; 4],
    pub lo: [f32; 4],
    pub hi: [f32; 4],
}

impl BlockVectors {
    /// From per-channel values of the block's 8 channels (zeros past the filter's end).
    pub fn new(sums: [i32; 8], scales: [f32; 8], bias: [f32; 8], clamp: (f32, f32)) -> Self {
        let pairs = |v: [f32; 8]| core::array::from_fn(|q| [v[2 * q], v[2 * q + 1]].repeat2());
        BlockVectors {
            sums: core::array::from_fn(|q| [sums[2 * q], sums[2 * q + 1]].repeat2()),
            scales: pairs(scales),
            bias: pairs(bias),
            lo: [clamp.0; 4],
            hi: [clamp.1; 4],
        }
    }
}

/// `[x, y]` → `[x, y, x, y]`.
trait Repeat2<T> {
    fn repeat2(self) -> [T; 4];
}

impl<T: Copy> Repeat2<T> for [T; 2] {
    fn repeat2(self) -> [T; 4] {
        [self[0], self[1], self[0], self[1]]
    }
}

/// `op d.4s, d.4s, src`.
macro_rules! op {
    ($op:literal, $d:literal, $src:literal) => {
        concat!($op, " ", $d, ".4s, ", $d, ".4s, ", $src, "\n")
    };
}

/// `op!` on the four accumulators `d0`..`d3`.
macro_rules! four {
    ($op:literal, $d0:literal, $d1:literal, $d2:literal, $d3:literal, $src:literal) => {
        concat!(
            op!($op, $d0, $src),
            op!($op, $d1, $src),
            op!($op, $d2, $src),
            op!($op, $d3, $src),
        )
    };
}

/// 8 depth steps: the activations' and the weights' chunk, and the 16 products
/// (accumulator `v16 + 4·rp + cp` gets row pair `rp` (`v{rp}`) times channel pair `cp`
/// (`v{4 + cp}`)).
macro_rules! chunk {
    () => {
        concat!(
            "ld1 {{v0.16b, v1.16b, v2.16b, v3.16b}}, [{a}], #64\n",
            "ld1 {{v4.16b, v5.16b, v6.16b, v7.16b}}, [{w}], #64\n",
            "smmla v16.4s, v0.16b, v4.16b\n",
            "smmla v17.4s, v0.16b, v5.16b\n",
            "smmla v18.4s, v0.16b, v6.16b\n",
            "smmla v19.4s, v0.16b, v7.16b\n",
            "smmla v20.4s, v1.16b, v4.16b\n",
            "smmla v21.4s, v1.16b, v5.16b\n",
            "smmla v22.4s, v1.16b, v6.16b\n",
            "smmla v23.4s, v1.16b, v7.16b\n",
            "smmla v24.4s, v2.16b, v4.16b\n",
            "smmla v25.4s, v2.16b, v5.16b\n",
            "smmla v26.4s, v2.16b, v6.16b\n",
            "smmla v27.4s, v2.16b, v7.16b\n",
            "smmla v28.4s, v3.16b, v4.16b\n",
            "smmla v29.4s, v3.16b, v5.16b\n",
            "smmla v30.4s, v3.16b, v6.16b\n",
            "smmla v31.4s, v3.16b, v7.16b\n",
        )
    };
}

/// One 8 × 8 output tile: `out[i][j] = clamp(((Σ_t (a[i][t] - zp_i)·w[j][t]) · s_i) ·
/// scale_j + bias_j)` for the 8 rows of a panel packed by [`pack_rows_p8x8`] and the 8
/// channels of one block of a filter packed `qc8w_p8x8`, the reference's operations in its
/// order (bit for bit). Row `i` of the tile is stored at `out + i·ldo` (bytes), 8 floats.
///
/// # Safety
/// FEAT_I8MM; `k % 16 == 0`; `panel` valid for `8·k + 128` reads (one panel as
/// packed), `w` for `8·k` (one block); `out + i·ldo` writable for 32 bytes, `i < 8`.
#[inline(always)]
pub unsafe fn neon_smmla_8x8_qc8w_p8x8(
    panel: *const u8,
    w: *const u8,
    k: usize,
    c: &BlockVectors,
    out: *mut f32,
    ldo: usize,
) {
    // SAFETY: the depth loops read k / 8 chunks of 64 bytes from `panel` and from `w` (128
    // per pass of the first loop, 16 per pass of the second: k = 128·n128 + 16·n16); the
    // row constants are the 128 bytes behind the chunks, the block's 224 bytes are `c`; the
    // 8 single-lane ST4s write 32 bytes at out + i·ldo. FEAT_I8MM is the caller's
    // guarantee; only v0-v7 and v16-v31 (caller-saved) are written.
    unsafe {
        asm!(
            ".arch_extension i8mm",
            // Start values: -zp_row · Σw_col.
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{rc}], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{cc}], #64",
            "mul v16.4s, v0.4s, v4.4s", "mul v17.4s, v0.4s, v5.4s",
            "mul v18.4s, v0.4s, v6.4s", "mul v19.4s, v0.4s, v7.4s",
            "mul v20.4s, v1.4s, v4.4s", "mul v21.4s, v1.4s, v5.4s",
            "mul v22.4s, v1.4s, v6.4s", "mul v23.4s, v1.4s, v7.4s",
            "mul v24.4s, v2.4s, v4.4s", "mul v25.4s, v2.4s, v5.4s",
            "mul v26.4s, v2.4s, v6.4s", "mul v27.4s, v2.4s, v7.4s",
            "mul v28.4s, v3.4s, v4.4s", "mul v29.4s, v3.4s, v5.4s",
            "mul v30.4s, v3.4s, v6.4s", "mul v31.4s, v3.4s, v7.4s",
            "cbz {n128}, 3f",
            "2:",
            chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(),
            chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(), chunk!(),
            "subs {n128}, {n128}, #1",
            "b.ne 2b",
            "3:",
            "cbz {n16}, 5f",
            "4:",
            chunk!(), chunk!(),
            "subs {n16}, {n16}, #1",
            "b.ne 4b",
            "5:",
            // (acc · s_row) · scale_col + bias_col, clamped.
            "scvtf v16.4s, v16.4s", "scvtf v17.4s, v17.4s", "scvtf v18.4s, v18.4s",
            "scvtf v19.4s, v19.4s", "scvtf v20.4s, v20.4s", "scvtf v21.4s, v21.4s",
            "scvtf v22.4s, v22.4s", "scvtf v23.4s, v23.4s", "scvtf v24.4s, v24.4s",
            "scvtf v25.4s, v25.4s", "scvtf v26.4s, v26.4s", "scvtf v27.4s, v27.4s",
            "scvtf v28.4s, v28.4s", "scvtf v29.4s, v29.4s", "scvtf v30.4s, v30.4s",
            "scvtf v31.4s, v31.4s",
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{rc}]",
            four!("fmul", "v16", "v17", "v18", "v19", "v0.4s"),
            four!("fmul", "v20", "v21", "v22", "v23", "v1.4s"),
            four!("fmul", "v24", "v25", "v26", "v27", "v2.4s"),
            four!("fmul", "v28", "v29", "v30", "v31", "v3.4s"),
            "ld1 {{v0.4s, v1.4s, v2.4s, v3.4s}}, [{cc}], #64",
            "ld1 {{v4.4s, v5.4s, v6.4s, v7.4s}}, [{cc}], #64",
            four!("fmul", "v16", "v20", "v24", "v28", "v0.4s"),
            four!("fmul", "v17", "v21", "v25", "v29", "v1.4s"),
            four!("fmul", "v18", "v22", "v26", "v30", "v2.4s"),
            four!("fmul", "v19", "v23", "v27", "v31", "v3.4s"),
            four!("fadd", "v16", "v20", "v24", "v28", "v4.4s"),
            four!("fadd", "v17", "v21", "v25", "v29", "v5.4s"),
            four!("fadd", "v18", "v22", "v26", "v30", "v6.4s"),
            four!("fadd", "v19", "v23", "v27", "v31", "v7.4s"),
            "ld1 {{v0.4s, v1.4s}}, [{cc}]",
            four!("fmax", "v16", "v17", "v18", "v19", "v0.4s"),
            four!("fmax", "v20", "v21", "v22", "v23", "v0.4s"),
            four!("fmax", "v24", "v25", "v26", "v27", "v0.4s"),
            four!("fmax", "v28", "v29", "v30", "v31", "v0.4s"),
            four!("fmin", "v16", "v17", "v18", "v19", "v1.4s"),
            four!("fmin", "v20", "v21", "v22", "v23", "v1.4s"),
            four!("fmin", "v24", "v25", "v26", "v27", "v1.4s"),
            four!("fmin", "v28", "v29", "v30", "v31", "v1.4s"),
            // Row 2·rp + r is lane r of each of its pair's four accumulators.
            "st4 {{v16.d, v17.d, v18.d, v19.d}}[0], [{o}], {ldo}",
            "st4 {{v16.d, v17.d, v18.d, v19.d}}[1], [{o}], {ldo}",
            "st4 {{v20.d, v21.d, v22.d, v23.d}}[0], [{o}], {ldo}",
            "st4 {{v20.d, v21.d, v22.d, v23.d}}[1], [{o}], {ldo}",
            "st4 {{v24.d, v25.d, v26.d, v27.d}}[0], [{o}], {ldo}",
            "st4 {{v24.d, v25.d, v26.d, v27.d}}[1], [{o}], {ldo}",
            "st4 {{v28.d, v29.d, v30.d, v31.d}}[0], [{o}], {ldo}",
            "st4 {{v28.d, v29.d, v30.d, v31.d}}[1], [{o}], {ldo}",
            a = inout(reg) panel => _,
            w = inout(reg) w => _,
            rc = inout(reg) panel.add(8 * k) => _,
            cc = inout(reg) c as *const BlockVectors => _,
            o = inout(reg) out => _,
            ldo = in(reg) ldo,
            n128 = inout(reg) k / 128 => _,
            n16 = inout(reg) (k % 128) / 16 => _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _,
            out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _, out("v31") _,
            options(nostack),
        );
    }
}
