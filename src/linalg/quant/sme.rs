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

use super::arm::{Packed4Columns, PackedColumns};
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

/// Scratch bytes the `SMOPA` products need for `m` rows of depth `k` with tile width
/// `w2 = 2S`: every row block packed ([`pack_rows_za`]), a copy of a partial block, and one
/// tile of fp32 partial sums (the 4-bit tile's groups, one core).
pub fn smopa_scratch_bytes(m: usize, k: usize, w2: usize) -> Option<usize> {
    let block = w2.checked_mul(k)?;
    m.div_ceil(w2.max(1))
        .checked_add(1)?
        .checked_mul(block)?
        .checked_add(w2.checked_mul(w2)?.checked_mul(4)?)
}

/// Packs the `m` quantized rows `a` (`[m, k]`) for the `SMOPA` tiles: row blocks of `2S`
/// rows, block `b` at `scratch + b·2S·k` (`k / 4` chunks of `2S` words, word `i` holding row
/// `i`'s 4 bytes of the chunk), each a transpose of 32-bit words through ZA
/// ([`pack_za2`]). A partial last block is first copied behind the packed blocks so that the
/// packer reads whole rows; its missing rows are whatever the scratch held (their outputs
/// are never stored). Returns the packed bytes' length.
///
/// # Safety
/// SME2 (`w2 ==` [`smopa_width`] `> 0`), not in streaming mode; `k % 16 == 0`; `a` valid for
/// `m·k` reads; `scratch` writable for `(ceil(m / w2) + 1)·w2·k` bytes, 4-byte aligned,
/// disjoint from `a`.
pub unsafe fn pack_rows_za(w2: usize, a: *const i8, m: usize, k: usize, scratch: *mut u8) -> usize {
    let block = w2 * k;
    let blocks = m.div_ceil(w2);
    let copy = scratch.wrapping_add(blocks * block);
    for b in 0..blocks {
        let (i0, rows) = (b * w2, (m - b * w2).min(w2));
        // SAFETY: block b's rows·k activation bytes are inside `a` (i0 + rows ≤ m); the copy
        // area (`block` bytes behind the packed blocks) holds a partial block's rows; the
        // packer reads w2 rows of k bytes from `src` and writes `block` bytes at b·block.
        unsafe {
            let mut src = a.add(i0 * k) as *const u8;
            if rows < w2 {
                core::ptr::copy_nonoverlapping(src, copy, rows * k);
                src = copy;
            }
            pack_za2(
                src as *const f32,
                k / 4,
                w2,
                w2,
                k / 4,
                scratch.add(b * block) as *mut f32,
            );
        }
    }
    blocks * block
}

/// The parameters of rows `i0..i0 + rows` (`rows ≤ 128`), padded to a multiple of 4 (the
/// epilogues read them four rows at a time).
///
/// # Safety
/// `ap` valid for `i0 + rows` reads.
unsafe fn block_params(ap: *const QParams, i0: usize, rows: usize) -> [QParams; 128] {
    let mut params = [QParams::default(); 128];
    // SAFETY: rows ≤ 128 and `ap` holds i0 + rows parameters (caller).
    unsafe { core::ptr::copy_nonoverlapping(ap.add(i0), params.as_mut_ptr(), rows.min(128)) };
    params
}

/// All `m` rows, packed by [`pack_rows_za`] at `packed`, times the column tiles `tiles`
/// (`2S` channels each) of a filter packed `qc8w_pNx4` with `N = 2S`: every row block
/// through [`gemm_smopa_2x2za_qc8w_pnx4`]. `w` is the filter's first tile, `out` the output's
/// column 0, rows `ldo` apart.
///
/// # Safety
/// SME2 with `I8I32` ([`smopa_width`] `== w2 > 0`), not in streaming mode; `k % 16 == 0`,
/// `0 < k ≤ 65536`; `packed` as [`pack_rows_za`] wrote it for these `m` rows; `ap` valid for
/// `m` reads; `w` for `2S·k` bytes per tile up to `tiles.end`; `c` as [`PackedColumns`] with
/// `2S·(tiles.end - 1) < c.n`; `out` writable at columns `2S·tiles.start..min(c.n,
/// 2S·tiles.end)` of each of the `m` rows.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_qd8_f32_smopa(
    w2: usize,
    packed: *const u8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &PackedColumns,
    tiles: Range<usize>,
    out: *mut f32,
    ldo: usize,
) {
    let block = w2 * k;
    for b in 0..m.div_ceil(w2) {
        let (i0, rows) = (b * w2, (m - b * w2).min(w2));
        // SAFETY: the caller's extents; block b of `packed`, rows i0..i0 + rows of `out`.
        unsafe {
            let params = block_params(ap, i0, rows);
            gemm_smopa_2x2za_qc8w_pnx4(
                packed.add(b * block),
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
    }
}

/// The first and one-past-last output column of the tiles `tiles` of an `n`-column output,
/// and whether the clamp `(lo, hi)` does anything (1) or not (0).
fn columns(tiles: &Range<usize>, n: usize, (lo, hi): (f32, f32)) -> (usize, usize, usize) {
    let w2 = smopa_width();
    let clampf = lo != f32::NEG_INFINITY || hi != f32::INFINITY;
    (tiles.start * w2, (tiles.end * w2).min(n), clampf as usize)
}

/// The tiles' common entry, as asm text: streaming mode and ZA on, all-true `p0` and `pn8`,
/// `{s}` = S, the clamp bounds in `z12`/`z13`, the output's row stride in bytes in `{ldo4}`.
macro_rules! enter {
    () => {
        concat!(
            "smstart\n",
            "ptrue p0.b\n",
            "ptrue pn8.b\n",
            "cntw {s}\n",
            "dup z12.s, {lo:w}\n",
            "dup z13.s, {hi:w}\n",
            "lsl {ldo4}, {ldo4}, #2\n",
        )
    };
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

/// Four finished rows, `$a` (channels `0..S`) and `$b` (`S..2S`), each four consecutive
/// registers: clamped into `[z12, z13]` when `{clampf}` (multi-vector `FMAX`/`FMIN`; `$l` a
/// local label), then stored row by row, leaving for `$exit` after the half's last row.
macro_rules! clamp_store4 {
    (
        $l:literal,
        [$a0:literal, $a1:literal, $a2:literal, $a3:literal],
        [$b0:literal, $b1:literal, $b2:literal, $b3:literal],
        $exit:literal
    ) => {
        concat!(
            "cbz {clampf}, ",
            $l,
            "f\n",
            "fmax {{",
            $a0,
            ".s-",
            $a3,
            ".s}}, {{",
            $a0,
            ".s-",
            $a3,
            ".s}}, z12.s\n",
            "fmax {{",
            $b0,
            ".s-",
            $b3,
            ".s}}, {{",
            $b0,
            ".s-",
            $b3,
            ".s}}, z12.s\n",
            "fmin {{",
            $a0,
            ".s-",
            $a3,
            ".s}}, {{",
            $a0,
            ".s-",
            $a3,
            ".s}}, z13.s\n",
            "fmin {{",
            $b0,
            ".s-",
            $b3,
            ".s}}, {{",
            $b0,
            ".s-",
            $b3,
            ".s}}, z13.s\n",
            $l,
            ":\n",
            store_row!($a0, $b0, $exit),
            store_row!($a1, $b1, $exit),
            store_row!($a2, $b2, $exit),
            store_row!($a3, $b3, $exit),
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
            clamp_store4!(
                "7",
                ["z0", "z1", "z2", "z3"],
                ["z8", "z9", "z10", "z11"],
                $exit
            ),
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
    let (j0, jend, clampf) = columns(&tiles, c.n, (c.lo, c.hi));
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
            enter!(),
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

/// [`gemm_qd8_f32_smopa`] for a group-wise 4-bit filter packed `qb4w_pNx4` with `N = 2S`,
/// through [`gemm_smopa_2x2za_qb4w_pnx4`]; `c.scales` are the packed fp32 group scales,
/// `fbuf` the tile's partial sums.
///
/// # Safety
/// As [`gemm_qd8_f32_smopa`], with `w` holding `S·k` bytes per tile, `c.scales` `8S·k /
/// group` bytes per tile, `c.group % 16 == 0`, `k % c.group == 0`, and `fbuf` writable for
/// `4S²` floats, 4-byte aligned, this call's alone.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_qd8_f32_smopa_qb4w(
    w2: usize,
    packed: *const u8,
    ap: *const QParams,
    m: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    tiles: Range<usize>,
    out: *mut f32,
    ldo: usize,
    fbuf: *mut f32,
) {
    let skip = tiles.start * w2;
    // SAFETY: the tiles start at tile `tiles.start` of `w` (S·k bytes per tile) and of the
    // scales (2S·k / group floats per tile); the rest is the caller's.
    let c = unsafe {
        Packed4Columns {
            scales: c.scales.add(4 * skip * (k / c.group)),
            ..*c
        }
    };
    for b in 0..m.div_ceil(w2) {
        let (i0, rows) = (b * w2, (m - b * w2).min(w2));
        // SAFETY: the caller's extents; block b of `packed`, rows i0..i0 + rows of `out`.
        unsafe {
            let params = block_params(ap, i0, rows);
            gemm_smopa_2x2za_qb4w_pnx4(
                packed.add(b * w2 * k),
                params.as_ptr(),
                rows,
                k,
                w.add(skip * k / 2),
                &c,
                tiles.clone(),
                out.add(i0 * ldo),
                ldo,
                fbuf,
            );
        }
    }
}

/// Loads of 4-bit chunk pair `$q` (A at `4·$q` vectors, packed weights at `2·$q`), the
/// nibbles widened to `16·w` (`LSL #4`: channels `0..S`, `AND 0xF0`: `S..2S`), and the
/// pair's eight `SMOPA`s.
macro_rules! pair4 {
    ($qa:literal, $qw:literal) => {
        concat!(
            "ld1b {{z0.b-z3.b}}, pn8/z, [{xa}, #",
            $qa,
            ", mul vl]\n",
            "ld1b {{z14.b-z15.b}}, pn8/z, [{xw}, #",
            $qw,
            ", mul vl]\n",
            "lsl z4.b, z14.b, #4\n",
            "and z5.d, z14.d, z30.d\n",
            "lsl z6.b, z15.b, #4\n",
            "and z7.d, z15.d, z30.d\n",
            smopa8!(),
        )
    };
}

/// Partial sums of four rows (`{z16-z19}`, `{z24-z27}`: the two halves) `+=` the four ZA
/// rows (`$t0`/`$t1` slices `w12..w12 + 4`) times the group's scales (`z20`, `z21`); the
/// partial sums zeroed first in the tile's first group (`{g} == 1`), else loaded from `{fb}`.
macro_rules! accumulate4 {
    ($t0:literal, $t1:literal) => {
        concat!(
            "mova {{z0.s-z3.s}}, ",
            $t0,
            ".s[w12, 0:3]\n",
            "mova {{z8.s-z11.s}}, ",
            $t1,
            ".s[w12, 0:3]\n",
            "scvtf {{z0.s-z3.s}}, {{z0.s-z3.s}}\n",
            "scvtf {{z8.s-z11.s}}, {{z8.s-z11.s}}\n",
            "cmp {g}, #1\n",
            "b.ne 41f\n",
            "dup z16.s, #0\n",
            "dup z17.s, #0\n",
            "dup z18.s, #0\n",
            "dup z19.s, #0\n",
            "dup z24.s, #0\n",
            "dup z25.s, #0\n",
            "dup z26.s, #0\n",
            "dup z27.s, #0\n",
            "b 42f\n",
            "41:\n",
            "ld1w {{z16.s, z24.s}}, pn8/z, [{fb}]\n",
            "ld1w {{z17.s, z25.s}}, pn8/z, [{fb}, #2, mul vl]\n",
            "ld1w {{z18.s, z26.s}}, pn8/z, [{fb}, #4, mul vl]\n",
            "ld1w {{z19.s, z27.s}}, pn8/z, [{fb}, #6, mul vl]\n",
            "42:\n",
            "fmla z16.s, p0/m, z0.s, z20.s\n",
            "fmla z17.s, p0/m, z1.s, z20.s\n",
            "fmla z18.s, p0/m, z2.s, z20.s\n",
            "fmla z19.s, p0/m, z3.s, z20.s\n",
            "fmla z24.s, p0/m, z8.s, z21.s\n",
            "fmla z25.s, p0/m, z9.s, z21.s\n",
            "fmla z26.s, p0/m, z10.s, z21.s\n",
            "fmla z27.s, p0/m, z11.s, z21.s\n",
        )
    };
}

/// A middle group's epilogue of one tile half: its `S` rows' partial sums to `{fb}`.
macro_rules! middle_half {
    ($t0:literal, $t1:literal, $l:literal) => {
        concat!(
            "mov w12, #0\n",
            $l,
            ":\n",
            accumulate4!($t0, $t1),
            "st1w {{z16.s, z24.s}}, pn8, [{fb}]\n",
            "st1w {{z17.s, z25.s}}, pn8, [{fb}, #2, mul vl]\n",
            "st1w {{z18.s, z26.s}}, pn8, [{fb}, #4, mul vl]\n",
            "st1w {{z19.s, z27.s}}, pn8, [{fb}, #6, mul vl]\n",
            "addvl {fb}, {fb}, #8\n",
            "add w12, w12, #4\n",
            "cmp w12, {s:w}\n",
            "b.lo ",
            $l,
            "b\n",
        )
    };
}

/// `v = bias + (f - Σw·zp)·row_scale` (fused, as the Neon tiles) for rows `r` of the four
/// (`$zp`: the row pair's parameters converted, lane 1 / 3 the zero point; `$p`/`$l`: their
/// raw parameters, lane `$l` the scale) on both halves.
macro_rules! final_row {
    ($lo:literal, $hi:literal, $zp:literal, $p:literal, $lz:literal, $ls:literal) => {
        concat!(
            "fmls ", $lo, ".s, z22.s, ", $zp, ".s[", $lz, "]\n",
            "fmls ", $hi, ".s, z23.s, ", $zp, ".s[", $lz, "]\n",
            "dup z14.s, ", $p, ".s[", $ls, "]\n",
            "fmad ", $lo, ".s, p0/m, z14.s, z28.s\n",
            "fmad ", $hi, ".s, p0/m, z14.s, z29.s\n",
        )
    };
}

/// The last group's epilogue of one tile half: `{rv}` rows from `{o}` (parameters at `{q}`),
/// partial sums from `{fb}`; `$l`/`$exit` local labels.
macro_rules! last_half {
    ($t0:literal, $t1:literal, $l:literal, $exit:literal) => {
        concat!(
            "mov w12, #0\n",
            $l,
            ":\n",
            accumulate4!($t0, $t1),
            "ld1rqw {{z4.s}}, p0/z, [{q}]\n",
            "ld1rqw {{z5.s}}, p0/z, [{q}, #16]\n",
            "scvtf z6.s, p0/m, z4.s\n",
            "scvtf z7.s, p0/m, z5.s\n",
            final_row!("z16", "z24", "z6", "z4", "1", "0"),
            final_row!("z17", "z25", "z6", "z4", "3", "2"),
            final_row!("z18", "z26", "z7", "z5", "1", "0"),
            final_row!("z19", "z27", "z7", "z5", "3", "2"),
            clamp_store4!(
                "47",
                ["z16", "z17", "z18", "z19"],
                ["z24", "z25", "z26", "z27"],
                $exit
            ),
            "addvl {fb}, {fb}, #8\n",
            "add {q}, {q}, #32\n",
            "add w12, w12, #4\n",
            "b ",
            $l,
            "b\n",
        )
    };
}

/// [`gemm_smopa_2x2za_qc8w_pnx4`] for group-wise 4-bit weights packed `qb4w_pNx4` with
/// `N = 2S` ([`super::packed`]): per group, `SMOPA`s of the group's chunks into a zeroed ZA
/// (per chunk pair one 4-vector load of A, one 2-vector load of packed weights, 4 bit
/// operations, 8 `SMOPA`s), then each output's partial sum `f += f32(16·dot) · (scale / 16)`
/// (fused, `fmla`), kept in `fbuf` between groups; after the last group
/// `out = bias + (f - Σw·zp) · row_scale` (fused, `fmls` / `fmad`) and the clamp, the
/// arithmetic of the Neon 4-bit tiles (bit for bit).
///
/// # Safety
/// SME2 with `I8I32`, not in streaming mode; `c.group % 16 == 0`, `k % c.group == 0`,
/// `k > 0`; `pa` readable for `2S·k` bytes; `ap` for `rows` rounded up to a multiple of 4
/// parameters; `w` (the first tile, `tiles.start`) for `S·k` bytes per tile; `c.scales` (the
/// first tile's) for `8S·k / group` bytes per tile, `c.sums`/`c.bias` for `c.n` floats
/// (4-byte aligned) with `2S·(tiles.end - 1) < c.n`; `out` writable at columns
/// `2S·tiles.start..min(c.n, 2S·tiles.end)` of `rows` rows; `fbuf` writable for `4S²`
/// floats, 4-byte aligned.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm_smopa_2x2za_qb4w_pnx4(
    pa: *const u8,
    ap: *const QParams,
    rows: usize,
    k: usize,
    w: *const u8,
    c: &Packed4Columns,
    tiles: Range<usize>,
    out: *mut f32,
    ldo: usize,
    fbuf: *mut f32,
) {
    if tiles.is_empty() || rows == 0 {
        return;
    }
    let (j0, jend, clampf) = columns(&tiles, c.n, (c.lo, c.hi));
    let groups = k / c.group;
    // SAFETY: loads read, per tile, chunks 0..k/4 of `pa` (8S bytes each, within 2S·k), the
    // tile's packed weights (4S bytes per chunk, S·k per tile, `xw` walking them in order
    // across tiles) and its group scales (8S bytes per group, `xs` walking them in order);
    // the column sums and biases of columns j0..min(j0 + 2S, jend) (pn9) from `c`'s arrays
    // of c.n ≥ jend floats; the parameters of the row groups up to `rows` rounded up to 4;
    // `fbuf` (4S² floats: 2S rows of 2S). Stores write `fbuf` and columns
    // j0..min(j0 + 2S, jend) (pn9) of rows 0..rows of `out`. Streaming mode and ZA are
    // entered and left inside the block; every vector and predicate register, x12 and the
    // flags are declared clobbered; the caller guarantees SME2 with I8I32.
    unsafe {
        streaming_asm!(
            ".arch_extension sme2",
            enter!(),
            "dup z30.b, #-16",              // 0xF0
            "ldr {xs}, [{c}, #{off_scales}]",
            "mov {xw}, {w}",
            "1:",
            "whilelt pn9.s, {j0}, {jend}, vlx2",
            "lsl {t}, {j0}, #2",
            "ldr {o}, [{c}, #{off_sums}]",
            "add {o}, {o}, {t}",
            "ld1w {{z22.s-z23.s}}, pn9/z, [{o}]",
            "dup z28.s, #0",
            "dup z29.s, #0",
            "ldr {o}, [{c}, #{off_bias}]",
            "cbz {o}, 5f",
            "add {o}, {o}, {t}",
            "ld1w {{z28.s-z29.s}}, pn9/z, [{o}]",
            "5:",
            "mov {xa}, {pa}",
            "mov {g}, #0",
            // Group loop.
            "10:",
            "zero {{za}}",
            "lsr {cnt}, {group}, #5",
            "cbz {cnt}, 12f",
            "11:",
            pair4!("0", "0"),
            pair4!("4", "2"),
            pair4!("8", "4"),
            pair4!("12", "6"),
            "addvl {xa}, {xa}, #16",
            "addvl {xw}, {xw}, #8",
            "subs {cnt}, {cnt}, #1",
            "b.ne 11b",
            "12:",
            "tbz {group}, #4, 13f",
            pair4!("0", "0"),
            pair4!("4", "2"),
            "addvl {xa}, {xa}, #8",
            "addvl {xw}, {xw}, #4",
            "13:",
            "ld1w {{z20.s-z21.s}}, pn8/z, [{xs}]",
            "addvl {xs}, {xs}, #2",
            "add {g}, {g}, #1",
            "mov {fb}, {fbuf}",
            "cmp {g}, {groups}",
            "b.eq 14f",
            middle_half!("za0h", "za1h", "20"),
            middle_half!("za2h", "za3h", "21"),
            "b 10b",
            // The last group: the outputs.
            "14:",
            "add {o}, {out}, {t}",
            "mov {q}, {ap}",
            "cmp {rows}, {s}",
            "csel {rv}, {rows}, {s}, lo",
            last_half!("za0h", "za1h", "30", "39f"),
            "39:",
            "subs {rv}, {rows}, {s}",
            "b.ls 49f",
            "add {o}, {out}, {t}",
            "madd {o}, {s}, {ldo4}, {o}",
            "add {q}, {ap}, {s}, lsl #3",
            "mul {fb}, {s}, {s}",           // row S of the partial sums: S·8S bytes on
            "add {fb}, {fbuf}, {fb}, lsl #3",
            last_half!("za2h", "za3h", "40", "49f"),
            "49:",
            "add {j0}, {j0}, {s}, lsl #1",
            "cmp {j0}, {jend}",
            "b.lo 1b",
            "smstop",
            pa = in(reg) pa,
            ap = in(reg) ap,
            rows = in(reg) rows,
            group = in(reg) c.group,
            groups = in(reg) groups,
            w = in(reg) w,
            c = in(reg) c as *const Packed4Columns,
            j0 = inout(reg) j0 => _,
            jend = in(reg) jend,
            out = in(reg) out,
            ldo4 = inout(reg) ldo => _,
            fbuf = in(reg) fbuf,
            lo = in(reg) c.lo.to_bits(),
            hi = in(reg) c.hi.to_bits(),
            clampf = in(reg) clampf,
            off_sums = const core::mem::offset_of!(Packed4Columns, sums),
            off_scales = const core::mem::offset_of!(Packed4Columns, scales),
            off_bias = const core::mem::offset_of!(Packed4Columns, bias),
            s = out(reg) _,
            xs = out(reg) _,
            xa = out(reg) _,
            xw = out(reg) _,
            cnt = out(reg) _,
            g = out(reg) _,
            fb = out(reg) _,
            t = out(reg) _,
            o = out(reg) _,
            q = out(reg) _,
            rv = out(reg) _,
            out("x12") _,
        );
    }
}
