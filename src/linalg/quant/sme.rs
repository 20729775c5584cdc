//! SME2 int8 tile: 4-way `SMOPA` (int8 × int8 → int32) into the four ZA tiles, over weights
//! packed `qc8w_pNx4` with `N = 2S` ([`super::packed`]; `S = SVL / 32`).
//!
//! The tile is `2S × 2S` outputs (16 × 16 at SVL 256, 32 × 32 at SVL 512): `za0` = rows
//! `0..S` × channels `0..S`, `za1` = rows `0..S` × channels `S..2S`, `za2`/`za3` the rows
//! `S..2S`. One `SMOPA za.s, z_a.b, z_w.b` adds, for every row `i` and channel `j` of its tile,
//! the dot product of 4 consecutive depths: `z_a` holds the 4 activations of each of `S` rows
//! (32-bit lane `i` = row `i`), `z_w` the 4 weights of each of `S` channels. So the
//! activations are packed as the weights are: per row block of `2S` rows, chunk `c` (depths
//! `4c..4c + 4`) is `2S` words, word `i` holding row `i`'s 4 bytes. That is a transpose of
//! 32-bit words, done through ZA by the fp32 packer
//! ([`crate::linalg::gemm::arm::sme::pack_za2`]) on the rows viewed as words.
//!
//! Layout contract of [`gemm_smopa_2x2za_qc8w_pnx4`]: `pa` is one packed row block (`k / 4`
//! chunks of `8S` bytes: rows `0..S` then rows `S..2S`), `w` the first of the column tiles
//! (blocks of `2S` channels, `2S·k` bytes each, chunk `c` at `8S·c`: channels `0..S` then
//! `S..2S`). Per 8 chunks (32 depths) the loop does 4 four-vector loads of A and 4 of the
//! weights (each two chunks) and 32 `SMOPA`s; a tail of 4 chunks when `k % 32 == 16`.
//!
//! Epilogue per four rows of a tile half: one 4-vector `mova` per ZA tile, the row
//! parameters by two `ld1rqw` (scale, zero point of two rows each), then
//! `out = (f32(acc - zp·Σw) · row_scale) · channel_scale + bias` with indexed `mls` and
//! `fmul`, multi-vector `scvtf`, and multi-vector `fmax`/`fmin` for the clamp: the arithmetic,
//! and so the bits, of the reference and the Neon tiles. A row is one strided 2-vector store
//! predicated by the columns present.

use core::ops::Range;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::arm::PackedColumns;
use super::dynamic::QParams;
use crate::linalg::gemm::arm::sme::{pack_za2, streaming_asm, svl_bytes};

/// The tile width `2S` of the SME2 `SMOPA` kernel on this CPU (`SVL / 16` channels), or 0
/// where there is no SME2 with int8 outer products. Read from the ID registers once.
pub fn smopa_width() -> usize {
    static WIDTH: AtomicUsize = AtomicUsize::new(usize::MAX);
    match WIDTH.load(Ordering::Relaxed) {
        usize::MAX => {
            let f = crate::linalg::cpu::features();
            let w = if f.sme2 && f.sme_i8i32 {
                svl_bytes() / 2
            } else {
                0
            };
            WIDTH.store(w, Ordering::Relaxed);
            w
        }
        w => w,
    }
}

/// Scratch bytes [`gemm_qd8_f32_smopa`] needs for depth `k` and tile width `w2 = 2S`: one
/// packed row block and a copy of a partial one.
pub fn smopa_scratch_bytes(k: usize, w2: usize) -> Option<usize> {
    w2.checked_mul(k)?.checked_mul(2)
}

/// All `m` quantized rows `a` (`[m, k]`, parameters `ap`) times the column tiles `tiles`
/// (`2S` channels each) of a filter packed `qc8w_pNx4` with `N = 2S` ([`smopa_width`]): row
/// blocks of `2S` packed into `scratch` through ZA (a partial block first copied behind it, so
/// that the packer reads whole rows), then [`gemm_smopa_2x2za_qc8w_pnx4`]. `out` is the
/// output's column 0, rows `ldo` apart.
///
/// # Safety
/// SME2 with `I8I32` ([`smopa_width`] `== w2 > 0`), not in streaming mode; `k % 16 == 0`,
/// `0 < k ≤ 65536`; `a` valid for `m·k` reads, `ap` for `m`; `w` for `2S·k` bytes per tile up
/// to `tiles.end`, `c` as [`PackedColumns`] with `2S·(tiles.end - 1) < c.n`; `out` writable
/// at columns `2S·tiles.start..min(c.n, 2S·tiles.end)` of each of the `m` rows; `scratch`
/// writable for [`smopa_scratch_bytes`] bytes, 16-byte aligned, disjoint from the rest.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_qd8_f32_smopa(
    w2: usize,
    a: *const i8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    tiles: Range<usize>,
    out: *mut f32,
    ldo: usize,
    scratch: *mut u8,
) {
    let block = w2 * k;
    let (packed, copy) = (scratch, scratch.wrapping_add(block));
    let mut i0 = 0;
    while i0 < m {
        let rows = (m - i0).min(w2);
        // SAFETY: (whole body) the row block's `rows·k` activation bytes and `rows`
        // parameters are inside `a`/`ap` (i0 + rows ≤ m); the packer reads `w2` rows of `k`
        // bytes from `src` (the block itself when whole, else the copy: `block` bytes in
        // the scratch's second half, its first `rows·k` copied from `a`, the rest whatever
        // the scratch held: those rows' outputs are never stored) and writes `block` bytes
        // to the scratch's first half; the kernel's extents are the caller's.
        unsafe {
            let mut src = a.add(i0 * k) as *const u8;
            if rows < w2 {
                core::ptr::copy_nonoverlapping(src, copy, rows * k);
                src = copy;
            }
            pack_za2(src as *const f32, k / 4, w2, w2, k / 4, packed as *mut f32);
            // Parameters of the block, padded to a multiple of 4 rows (the epilogue reads
            // them four rows at a time).
            let mut params = [QParams::default(); 128];
            core::ptr::copy_nonoverlapping(ap.add(i0), params.as_mut_ptr(), rows);
            gemm_smopa_2x2za_qc8w_pnx4(
                packed,
                params.as_ptr(),
                rows,
                k,
                w.add(tiles.start * block),
                c,
                tiles.clone(),
                out.add(i0 * ldo),
                ldo,
            );
        }
        i0 += w2;
    }
}

/// Eight `SMOPA`s of one chunk pair: A chunks in `z0`–`z3` (chunk 0 rows `0..S`, `S..2S`,
/// chunk 1 the same), weight chunks in `z4`–`z7`.
macro_rules! smopa8 {
    () => {
        concat!(
            "smopa za0.s, p0/m, p0/m, z0.b, z4.b\n",
            "smopa za1.s, p0/m, p0/m, z0.b, z5.b\n",
            "smopa za2.s, p0/m, p0/m, z1.b, z4.b\n",
            "smopa za3.s, p0/m, p0/m, z1.b, z5.b\n",
            "smopa za0.s, p0/m, p0/m, z2.b, z6.b\n",
            "smopa za1.s, p0/m, p0/m, z2.b, z7.b\n",
            "smopa za2.s, p0/m, p0/m, z3.b, z6.b\n",
            "smopa za3.s, p0/m, p0/m, z3.b, z7.b\n",
        )
    };
}

/// Loads of chunk pair `$q` (immediate offset `4·$q` vectors) and its eight `SMOPA`s.
macro_rules! pair {
    ($q:literal) => {
        concat!(
            "ld1b {{z0.b-z3.b}}, pn8/z, [{xa}, #",
            $q,
            ", mul vl]\n",
            "ld1b {{z4.b-z7.b}}, pn8/z, [{xw}, #",
            $q,
            ", mul vl]\n",
            smopa8!(),
        )
    };
}

/// One row of the epilogue: store row `$r` of the group (`{z$r, z$r+8}`), then leave the
/// half when it was its last row.
macro_rules! store_row {
    ($a:literal, $b:literal, $exit:literal) => {
        concat!(
            "st1w {{",
            $a,
            ".s, ",
            $b,
            ".s}}, pn9, [{o}]\n",
            "add {o}, {o}, {ldo4}\n",
            "subs {rv}, {rv}, #1\n",
            "b.eq ",
            $exit,
            "\n",
        )
    };
}

/// The epilogue of one tile half (`$t0`/`$t1`: its two ZA tiles' horizontal slices), `{rv}`
/// rows from `{o}` with parameters from `{q}`; `$l`/`$exit` local labels.
macro_rules! half {
    ($t0:literal, $t1:literal, $l:literal, $exit:literal) => {
        concat!(
            "mov w12, #0\n",
            $l,
            ":\n",
            "mova {{z0.s-z3.s}}, ",
            $t0,
            ".s[w12, 0:3]\n",
            "mova {{z8.s-z11.s}}, ",
            $t1,
            ".s[w12, 0:3]\n",
            "ld1rqw {{z4.s}}, p0/z, [{q}]\n",
            "ld1rqw {{z5.s}}, p0/z, [{q}, #16]\n",
            // acc - zp·Σw (the zero point in lanes 1 and 3 of each row pair)
            "mls z0.s, z16.s, z4.s[1]\n",
            "mls z8.s, z17.s, z4.s[1]\n",
            "mls z1.s, z16.s, z4.s[3]\n",
            "mls z9.s, z17.s, z4.s[3]\n",
            "mls z2.s, z16.s, z5.s[1]\n",
            "mls z10.s, z17.s, z5.s[1]\n",
            "mls z3.s, z16.s, z5.s[3]\n",
            "mls z11.s, z17.s, z5.s[3]\n",
            "scvtf {{z0.s-z3.s}}, {{z0.s-z3.s}}\n",
            "scvtf {{z8.s-z11.s}}, {{z8.s-z11.s}}\n",
            // · row scale (lanes 0 and 2)
            "fmul z0.s, z0.s, z4.s[0]\n",
            "fmul z8.s, z8.s, z4.s[0]\n",
            "fmul z1.s, z1.s, z4.s[2]\n",
            "fmul z9.s, z9.s, z4.s[2]\n",
            "fmul z2.s, z2.s, z5.s[0]\n",
            "fmul z10.s, z10.s, z5.s[0]\n",
            "fmul z3.s, z3.s, z5.s[2]\n",
            "fmul z11.s, z11.s, z5.s[2]\n",
            // · channel scale + bias
            "fmul z0.s, z0.s, z18.s\n",
            "fmul z1.s, z1.s, z18.s\n",
            "fmul z2.s, z2.s, z18.s\n",
            "fmul z3.s, z3.s, z18.s\n",
            "fmul z8.s, z8.s, z19.s\n",
            "fmul z9.s, z9.s, z19.s\n",
            "fmul z10.s, z10.s, z19.s\n",
            "fmul z11.s, z11.s, z19.s\n",
            "fadd z0.s, z0.s, z20.s\n",
            "fadd z1.s, z1.s, z20.s\n",
            "fadd z2.s, z2.s, z20.s\n",
            "fadd z3.s, z3.s, z20.s\n",
            "fadd z8.s, z8.s, z21.s\n",
            "fadd z9.s, z9.s, z21.s\n",
            "fadd z10.s, z10.s, z21.s\n",
            "fadd z11.s, z11.s, z21.s\n",
            "cbz {clampf}, 7f\n",
            "fmax {{z0.s-z3.s}}, {{z0.s-z3.s}}, z12.s\n",
            "fmax {{z8.s-z11.s}}, {{z8.s-z11.s}}, z12.s\n",
            "fmin {{z0.s-z3.s}}, {{z0.s-z3.s}}, z13.s\n",
            "fmin {{z8.s-z11.s}}, {{z8.s-z11.s}}, z13.s\n",
            "7:\n",
            store_row!("z0", "z8", $exit),
            store_row!("z1", "z9", $exit),
            store_row!("z2", "z10", $exit),
            store_row!("z3", "z11", $exit),
            "add {q}, {q}, #32\n",
            "add w12, w12, #4\n",
            "b ",
            $l,
            "b\n",
        )
    };
}

/// One packed row block (`rows ≤ 2S` valid rows) times the column tiles `tiles` of a filter
/// packed `qc8w_pNx4` with `N = 2S`, into `out` (row 0, column 0 of the output, rows `ldo`
/// apart): see the module documentation for the layouts and the arithmetic.
///
/// # Safety
/// SME2 with `I8I32`, not in streaming mode; `k % 16 == 0`, `k > 0`; `pa` readable for
/// `2S·k` bytes; `ap` for `rows` rounded up to a multiple of 4 parameters; `w` (the first
/// tile, `tiles.start`) for `2S·k` bytes per tile; `c` as [`PackedColumns`] with
/// `2S·(tiles.end - 1) < c.n`, `c.sums`/`c.bias` 4-byte aligned; `out` writable at columns
/// `2S·tiles.start..min(c.n, 2S·tiles.end)` of `rows` rows.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_smopa_2x2za_qc8w_pnx4(
    pa: *const u8,
    ap: *const QParams,
    rows: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    tiles: Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    if tiles.is_empty() || rows == 0 {
        return;
    }
    let w2 = smopa_width();
    let j0 = tiles.start * w2;
    let jend = (tiles.end * w2).min(c.n);
    let clampf = (c.lo != f32::NEG_INFINITY || c.hi != f32::INFINITY) as usize;
    // SAFETY: loads read, per tile, chunks 0..k/4 of `pa` (8S bytes each, within 2S·k) and
    // of the tile's weights (2S·k bytes from `w`, advanced by 2S·k per tile); the constants
    // of columns j0..min(j0 + 2S, jend) (predicated by pn9/pn10) from `c`'s arrays, whose
    // lengths are c.n ≥ jend; the parameters of the row groups up to `rows` rounded up to 4.
    // Stores write columns j0..min(j0 + 2S, jend) (pn9) of rows 0..rows (the row count
    // leaves each half), within the caller's extents. Streaming mode and ZA are entered and
    // left inside the block; every vector and predicate register, x12 and the flags are
    // declared clobbered; the caller guarantees SME2 with I8I32.
    unsafe {
        streaming_asm!(
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.b",
            "ptrue pn8.b",
            "cntw {s}",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "lsl {ldo4}, {ldo4}, #2",
            "mul {tb}, {s}, {k}",
            "lsl {tb}, {tb}, #1",           // bytes per column tile: 2S·k
            "1:",
            "zero {{za}}",
            "mov {xa}, {pa}",
            "mov {xw}, {w}",
            "lsr {cnt}, {k}, #5",
            "cbz {cnt}, 3f",
            "2:",
            pair!("0"),
            pair!("4"),
            pair!("8"),
            pair!("12"),
            "addvl {xa}, {xa}, #16",
            "addvl {xw}, {xw}, #16",
            "subs {cnt}, {cnt}, #1",
            "b.ne 2b",
            "3:",
            "tbz {k}, #4, 4f",
            pair!("0"),
            pair!("4"),
            "4:",
            // Column constants of the tile (columns j0 .. min(j0 + 2S, jend)).
            "whilelt pn9.s, {j0}, {jend}, vlx2",
            "lsl {t}, {j0}, #2",
            "lsl {o}, {jend}, #2",
            "whilelt pn10.b, {t}, {o}, vlx2",
            "ldr {o}, [{c}, #{off_sums}]",
            "add {o}, {o}, {t}",
            "ld1w {{z16.s-z17.s}}, pn9/z, [{o}]",
            "fcvtzs z16.s, p0/m, z16.s",
            "fcvtzs z17.s, p0/m, z17.s",
            "ldr {o}, [{c}, #{off_scales}]",
            "add {o}, {o}, {t}",
            "ld1b {{z18.b-z19.b}}, pn10/z, [{o}]",
            "dup z20.s, #0",
            "dup z21.s, #0",
            "ldr {o}, [{c}, #{off_bias}]",
            "cbz {o}, 5f",
            "add {o}, {o}, {t}",
            "ld1w {{z20.s-z21.s}}, pn9/z, [{o}]",
            "5:",
            // Rows 0..min(rows, S) from za0/za1, then rows S..rows from za2/za3.
            "add {o}, {out}, {t}",
            "mov {q}, {ap}",
            "cmp {rows}, {s}",
            "csel {rv}, {rows}, {s}, lo",
            half!("za0h", "za1h", "20", "29f"),
            "29:",
            "subs {rv}, {rows}, {s}",
            "b.ls 39f",
            "add {o}, {out}, {t}",
            "madd {o}, {s}, {ldo4}, {o}",
            "add {q}, {ap}, {s}, lsl #3",
            half!("za2h", "za3h", "30", "39f"),
            "39:",
            "add {w}, {w}, {tb}",
            "add {j0}, {j0}, {s}, lsl #1",
            "cmp {j0}, {jend}",
            "b.lo 1b",
            "smstop",
            pa = in(reg) pa,
            ap = in(reg) ap,
            rows = in(reg) rows,
            k = in(reg) k,
            w = inout(reg) w => _,
            c = in(reg) c as *const PackedColumns,
            j0 = inout(reg) j0 => _,
            jend = in(reg) jend,
            out = in(reg) out,
            ldo4 = inout(reg) ldo => _,
            lo = in(reg) c.lo.to_bits(),
            hi = in(reg) c.hi.to_bits(),
            clampf = in(reg) clampf,
            off_sums = const core::mem::offset_of!(PackedColumns, sums),
            off_scales = const core::mem::offset_of!(PackedColumns, scales),
            off_bias = const core::mem::offset_of!(PackedColumns, bias),
            s = out(reg) _,
            tb = out(reg) _,
            xa = out(reg) _,
            xw = out(reg) _,
            cnt = out(reg) _,
            t = out(reg) _,
            o = out(reg) _,
            q = out(reg) _,
            rv = out(reg) _,
            out("x12") _,
        );
    }
}
