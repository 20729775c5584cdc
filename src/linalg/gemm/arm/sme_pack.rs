//! The ZA-transpose packers of the SME / SME2 micro-kernels ([`super::sme`]): `2S`
//! depth-contiguous runs (rows of A, or columns of a transposed B) into the `2S`-interleaved
//! panel the kernels read, through horizontal-slice loads and vertical-slice stores.

use super::streaming::streaming_asm;

/// The loads of one depth chunk of [`pack_za`] / [`pack_za2`] as asm text: runs `i` and
/// `S + i` (from `{rp}`, `{rq}`, at column `{k0}`) into the horizontal slices `i` of `za0` and
/// `za1`, four runs per iteration, lanes at or past `{kc}` zero (`p1`); then `{cnt}` = the
/// chunk's depth steps, `min(S, kc − k0)`.
macro_rules! za_pack_loads {
    () => {
        concat!(
            "whilelt p1.s, {k0}, {kc}\n",
            "add {rp}, {src}, {k0}, lsl #2\n", // run 0 at column k0
            "add {rq}, {rp}, {t}\n",           // run S
            "mov w12, #0\n",
            "3:\n",
            "ld1w {{za0h.s[w12, 0]}}, p1/z, [{rp}]\n",
            "ld1w {{za0h.s[w12, 1]}}, p1/z, [{rp}, {lda}, lsl #2]\n",
            "ld1w {{za0h.s[w12, 2]}}, p1/z, [{rp}, {l2}, lsl #2]\n",
            "ld1w {{za0h.s[w12, 3]}}, p1/z, [{rp}, {l3}, lsl #2]\n",
            "ld1w {{za1h.s[w12, 0]}}, p1/z, [{rq}]\n",
            "ld1w {{za1h.s[w12, 1]}}, p1/z, [{rq}, {lda}, lsl #2]\n",
            "ld1w {{za1h.s[w12, 2]}}, p1/z, [{rq}, {l2}, lsl #2]\n",
            "ld1w {{za1h.s[w12, 3]}}, p1/z, [{rq}, {l3}, lsl #2]\n",
            "add {rp}, {rp}, {lda4}, lsl #2\n",
            "add {rq}, {rq}, {lda4}, lsl #2\n",
            "add w12, w12, #4\n",
            "cmp w12, {s:w}\n",
            "b.lo 3b\n",
            "sub {cnt}, {kc}, {k0}\n",
            "cmp {cnt}, {s}\n",
            "csel {cnt}, {cnt}, {s}, lo",
        )
    };
}

/// The end of a depth chunk of [`pack_za`] / [`pack_za2`] as asm text: the steps `w12 ..
/// {cnt}` one vertical slice pair at a time (`{dp}`, `{dq}`), then the next chunk (back to
/// label 2) while `{k0} < {kc}`.
macro_rules! za_pack_tail {
    () => {
        concat!(
            "6:\n",
            "st1w {{za0v.s[w12, 0]}}, p0, [{dp}]\n",
            "st1w {{za1v.s[w12, 0]}}, p0, [{dq}]\n",
            "add {dp}, {dp}, {mr4}\n",
            "add {dq}, {dq}, {mr4}\n",
            "add w12, w12, #1\n",
            "cmp w12, {cnt:w}\n",
            "b.lo 6b\n",
            "7:\n",
            "add {k0}, {k0}, {s}\n",
            "cmp {k0}, {kc}\n",
            "b.lo 2b",
        )
    };
}

/// Packs `w = 2S` depth-contiguous runs (rows of A, or columns of a transposed B) into the
/// 2S-interleaved panel through ZA (`PackFn` contract): per depth chunk of S steps, the
/// horizontal-slice loads of runs 0..S into `za0` and S..2S into `za1` (`whilelt`-predicated
/// at the depth tail) and two vertical-slice stores per depth step:
/// `dst[p*2S + h*S + i] = src[(h*S + i)*lda + p]`.
///
/// # Safety
/// `w == 2S` (`runs < w` is declined); runs `i < 2S` at `src + i*lda` hold `kc ≥ 1`
/// readable floats, `dst` holds
/// `2S·kc` writable floats; the CPU has SME and the caller is not in streaming mode.
pub unsafe fn pack_za(
    src: *const f32,
    lda: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: *mut f32,
) -> bool {
    if runs != w {
        return false; // the edge panel: the driver packs it
    }
    // SAFETY: loads read, for runs r < 2S, floats k0 .. k0 + min(S, kc - k0) of run r (the
    // `whilelt` predicate masks lanes at or past kc); stores write S floats at
    // dst + (k0 + j)·MR + h·S for j < min(S, kc - k0), inside the 2S·kc floats of `dst`.
    // Streaming mode and ZA are entered and left inside the block; every vector/predicate
    // register, x12 and the flags are declared clobbered. SME present (caller).
    unsafe {
        streaming_asm!(
        ".arch_extension sme",
        "smstart",
        "ptrue p0.s",
        "cntw {s}",
        "lsl {mr4}, {s}, #3",           // MR·4 bytes = 2S·4
        "lsl {lda4}, {lda}, #2",
        "lsl {l2}, {lda}, #1",          // run offsets 1..3 (floats): lda, l2, l3
        "add {l3}, {l2}, {lda}",
        "lsl {m1}, {s}, #1",            // MR floats: vertical slices j·MR apart
        "lsl {m2}, {s}, #2",
        "add {m3}, {m2}, {m1}",
        "mul {t}, {s}, {lda4}",         // bytes from run i to run S + i
        "mov {k0}, #0",
        "2:",                           // depth chunk k0 .. k0 + S
        za_pack_loads!(),
        "madd {dp}, {k0}, {mr4}, {dst}",
        "add {dq}, {dp}, {s}, lsl #2",    // second half: + S floats
        "mov w12, #0",
        "and {c4}, {cnt}, #-4",
        "cbz {c4}, 5f",
        "4:",                           // 4 vertical slices of each tile per iteration
        "st1w {{za0v.s[w12, 0]}}, p0, [{dp}]",
        "st1w {{za1v.s[w12, 0]}}, p0, [{dq}]",
        "st1w {{za0v.s[w12, 1]}}, p0, [{dp}, {m1}, lsl #2]",
        "st1w {{za1v.s[w12, 1]}}, p0, [{dq}, {m1}, lsl #2]",
        "st1w {{za0v.s[w12, 2]}}, p0, [{dp}, {m2}, lsl #2]",
        "st1w {{za1v.s[w12, 2]}}, p0, [{dq}, {m2}, lsl #2]",
        "st1w {{za0v.s[w12, 3]}}, p0, [{dp}, {m3}, lsl #2]",
        "st1w {{za1v.s[w12, 3]}}, p0, [{dq}, {m3}, lsl #2]",
        "add {dp}, {dp}, {mr4}, lsl #2",
        "add {dq}, {dq}, {mr4}, lsl #2",
        "add w12, w12, #4",
        "cmp w12, {c4:w}",
        "b.lo 4b",
        "5:",
        "cmp w12, {cnt:w}",
        "b.hs 7f",
        za_pack_tail!(),
        "smstop",
        src = in(reg) src,
        lda = in(reg) lda,
        kc = in(reg) kc,
        dst = in(reg) dst,
        s = out(reg) _,
        mr4 = out(reg) _,
        lda4 = out(reg) _,
        rq = out(reg) _,
        dq = out(reg) _,
        k0 = out(reg) _,
        t = out(reg) _,
        rp = out(reg) _,
        cnt = out(reg) _,
        dp = out(reg) _,
        l2 = out(reg) _,
        l3 = out(reg) _,
        m1 = out(reg) _,
        m2 = out(reg) _,
        m3 = out(reg) _,
        c4 = out(reg) _,
        out("x12") _,
        );
    }
    true
}

/// [`pack_za`] for SME2: the same horizontal-slice loads, then per four depth steps one
/// 4-vector `mova` of vertical slices from each tile (za0 → z0–z3, za1 → z8–z11) and one
/// strided 2-vector store per depth step ({z0, z8}: the step's 2S floats), where `pack_za`
/// stores each vertical slice on its own (10 instructions per four steps instead of 13).
///
/// # Safety
/// `w == 2S` (`runs < w` is declined); runs `i < 2S` at `src + i*lda` hold `kc ≥ 1`
/// readable floats, `dst` holds
/// `2S·kc` writable floats; the CPU has SME2 and the caller is not in streaming mode.
pub unsafe fn pack_za2(
    src: *const f32,
    lda: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: *mut f32,
) -> bool {
    if runs != w {
        return false; // the edge panel: the driver packs it
    }
    // SAFETY: loads read, for runs r < 2S, floats k0 .. k0 + min(S, kc - k0) of run r (the
    // `whilelt` predicate masks lanes at or past kc); stores write S floats at
    // dst + (k0 + j)·MR + h·S for j < min(S, kc - k0), inside the 2S·kc floats of `dst`.
    // Streaming mode and ZA are entered and left inside the block; every vector/predicate
    // register, x12–x15 and the flags are declared clobbered. SME2 present (caller). The
    // unrolled chunks (S = 16, k0 + 16 ≤ kc) read and write exactly what the loops would.
    unsafe {
        streaming_asm!(
        ".arch_extension sme2",
        "smstart",
        "ptrue p0.s",
        "ptrue pn8.s",
        "cntw {s}",
        "lsl {mr4}, {s}, #3",           // MR·4 bytes = 2S·4
        "lsl {lda4}, {lda}, #2",
        "lsl {l2}, {lda}, #1",          // run offsets 1..3 (floats): lda, l2, l3
        "add {l3}, {l2}, {lda}",
        "mul {t}, {s}, {lda4}",         // bytes from run i to run S + i
        "mov {k0}, #0",
        // SVL 512 (S = 16), whole chunks: the 16 slices of each tile by the four slice
        // registers w12–w15 (0, 4, 8, 12) with immediate offsets, no index updates; the
        // stores of the 16 steps unrolled the same way.
        "cmp {s}, #16",
        "b.ne 2f",
        "mov w12, #0",
        "mov w13, #4",
        "mov w14, #8",
        "mov w15, #12",
        "80:",
        "add {cnt}, {k0}, #16",
        "cmp {cnt}, {kc}",
        "b.hi 81f",
        "add {rp}, {src}, {k0}, lsl #2",
        "add {rq}, {rp}, {t}",
        "ld1w {{za0h.s[w12, 0]}}, p0/z, [{rp}]",
        "ld1w {{za0h.s[w12, 1]}}, p0/z, [{rp}, {lda}, lsl #2]",
        "ld1w {{za0h.s[w12, 2]}}, p0/z, [{rp}, {l2}, lsl #2]",
        "ld1w {{za0h.s[w12, 3]}}, p0/z, [{rp}, {l3}, lsl #2]",
        "ld1w {{za1h.s[w12, 0]}}, p0/z, [{rq}]",
        "ld1w {{za1h.s[w12, 1]}}, p0/z, [{rq}, {lda}, lsl #2]",
        "ld1w {{za1h.s[w12, 2]}}, p0/z, [{rq}, {l2}, lsl #2]",
        "ld1w {{za1h.s[w12, 3]}}, p0/z, [{rq}, {l3}, lsl #2]",
        "add {rp}, {rp}, {lda4}, lsl #2",
        "add {rq}, {rq}, {lda4}, lsl #2",
        "ld1w {{za0h.s[w13, 0]}}, p0/z, [{rp}]",
        "ld1w {{za0h.s[w13, 1]}}, p0/z, [{rp}, {lda}, lsl #2]",
        "ld1w {{za0h.s[w13, 2]}}, p0/z, [{rp}, {l2}, lsl #2]",
        "ld1w {{za0h.s[w13, 3]}}, p0/z, [{rp}, {l3}, lsl #2]",
        "ld1w {{za1h.s[w13, 0]}}, p0/z, [{rq}]",
        "ld1w {{za1h.s[w13, 1]}}, p0/z, [{rq}, {lda}, lsl #2]",
        "ld1w {{za1h.s[w13, 2]}}, p0/z, [{rq}, {l2}, lsl #2]",
        "ld1w {{za1h.s[w13, 3]}}, p0/z, [{rq}, {l3}, lsl #2]",
        "add {rp}, {rp}, {lda4}, lsl #2",
        "add {rq}, {rq}, {lda4}, lsl #2",
        "ld1w {{za0h.s[w14, 0]}}, p0/z, [{rp}]",
        "ld1w {{za0h.s[w14, 1]}}, p0/z, [{rp}, {lda}, lsl #2]",
        "ld1w {{za0h.s[w14, 2]}}, p0/z, [{rp}, {l2}, lsl #2]",
        "ld1w {{za0h.s[w14, 3]}}, p0/z, [{rp}, {l3}, lsl #2]",
        "ld1w {{za1h.s[w14, 0]}}, p0/z, [{rq}]",
        "ld1w {{za1h.s[w14, 1]}}, p0/z, [{rq}, {lda}, lsl #2]",
        "ld1w {{za1h.s[w14, 2]}}, p0/z, [{rq}, {l2}, lsl #2]",
        "ld1w {{za1h.s[w14, 3]}}, p0/z, [{rq}, {l3}, lsl #2]",
        "add {rp}, {rp}, {lda4}, lsl #2",
        "add {rq}, {rq}, {lda4}, lsl #2",
        "ld1w {{za0h.s[w15, 0]}}, p0/z, [{rp}]",
        "ld1w {{za0h.s[w15, 1]}}, p0/z, [{rp}, {lda}, lsl #2]",
        "ld1w {{za0h.s[w15, 2]}}, p0/z, [{rp}, {l2}, lsl #2]",
        "ld1w {{za0h.s[w15, 3]}}, p0/z, [{rp}, {l3}, lsl #2]",
        "ld1w {{za1h.s[w15, 0]}}, p0/z, [{rq}]",
        "ld1w {{za1h.s[w15, 1]}}, p0/z, [{rq}, {lda}, lsl #2]",
        "ld1w {{za1h.s[w15, 2]}}, p0/z, [{rq}, {l2}, lsl #2]",
        "ld1w {{za1h.s[w15, 3]}}, p0/z, [{rq}, {l3}, lsl #2]",
        "madd {dp}, {k0}, {mr4}, {dst}",
        "mova {{z0.s-z3.s}}, za0v.s[w12, 0:3]",
        "mova {{z8.s-z11.s}}, za1v.s[w12, 0:3]",
        "st1w {{z0.s, z8.s}}, pn8, [{dp}]",
        "st1w {{z1.s, z9.s}}, pn8, [{dp}, #2, mul vl]",
        "st1w {{z2.s, z10.s}}, pn8, [{dp}, #4, mul vl]",
        "st1w {{z3.s, z11.s}}, pn8, [{dp}, #6, mul vl]",
        "mova {{z0.s-z3.s}}, za0v.s[w13, 0:3]",
        "mova {{z8.s-z11.s}}, za1v.s[w13, 0:3]",
        "st1w {{z0.s, z8.s}}, pn8, [{dp}, #8, mul vl]",
        "st1w {{z1.s, z9.s}}, pn8, [{dp}, #10, mul vl]",
        "st1w {{z2.s, z10.s}}, pn8, [{dp}, #12, mul vl]",
        "st1w {{z3.s, z11.s}}, pn8, [{dp}, #14, mul vl]",
        "addvl {dp}, {dp}, #16",
        "mova {{z0.s-z3.s}}, za0v.s[w14, 0:3]",
        "mova {{z8.s-z11.s}}, za1v.s[w14, 0:3]",
        "st1w {{z0.s, z8.s}}, pn8, [{dp}]",
        "st1w {{z1.s, z9.s}}, pn8, [{dp}, #2, mul vl]",
        "st1w {{z2.s, z10.s}}, pn8, [{dp}, #4, mul vl]",
        "st1w {{z3.s, z11.s}}, pn8, [{dp}, #6, mul vl]",
        "mova {{z0.s-z3.s}}, za0v.s[w15, 0:3]",
        "mova {{z8.s-z11.s}}, za1v.s[w15, 0:3]",
        "st1w {{z0.s, z8.s}}, pn8, [{dp}, #8, mul vl]",
        "st1w {{z1.s, z9.s}}, pn8, [{dp}, #10, mul vl]",
        "st1w {{z2.s, z10.s}}, pn8, [{dp}, #12, mul vl]",
        "st1w {{z3.s, z11.s}}, pn8, [{dp}, #14, mul vl]",
        "mov {k0}, {cnt}",
        "b 80b",
        "81:",
        "cmp {k0}, {kc}",
        "b.hs 9f",
        "2:",                           // depth chunk k0 .. k0 + S
        za_pack_loads!(),
        "madd {dp}, {k0}, {mr4}, {dst}",
        "mov w12, #0",
        "and {c4}, {cnt}, #-4",
        "cbz {c4}, 5f",
        "4:",                           // depth steps w12 .. w12 + 4: 8 vectors at dp
        "mova {{z0.s-z3.s}}, za0v.s[w12, 0:3]",
        "mova {{z8.s-z11.s}}, za1v.s[w12, 0:3]",
        "st1w {{z0.s, z8.s}}, pn8, [{dp}]",
        "st1w {{z1.s, z9.s}}, pn8, [{dp}, #2, mul vl]",
        "st1w {{z2.s, z10.s}}, pn8, [{dp}, #4, mul vl]",
        "st1w {{z3.s, z11.s}}, pn8, [{dp}, #6, mul vl]",
        "addvl {dp}, {dp}, #8",
        "add w12, w12, #4",
        "cmp w12, {c4:w}",
        "b.lo 4b",
        "5:",
        "add {dq}, {dp}, {s}, lsl #2",    // second half of a step: + S floats
        "cmp w12, {cnt:w}",
        "b.hs 7f",
        za_pack_tail!(),
        "9:",
        "smstop",
        src = in(reg) src,
        lda = in(reg) lda,
        kc = in(reg) kc,
        dst = in(reg) dst,
        s = out(reg) _,
        mr4 = out(reg) _,
        lda4 = out(reg) _,
        rq = out(reg) _,
        dq = out(reg) _,
        k0 = out(reg) _,
        t = out(reg) _,
        rp = out(reg) _,
        cnt = out(reg) _,
        dp = out(reg) _,
        l2 = out(reg) _,
        l3 = out(reg) _,
        c4 = out(reg) _,
        out("x12") _,
        out("x13") _,
        out("x14") _,
        out("x15") _,
        );
    }
    true
}

/// The SME2 edge packer: `1 ≤ runs ≤ 2S` depth-contiguous runs into a whole `2S`-interleaved
/// panel, lanes `runs .. 2S` zero (the `pack_edge` contract of
/// [`MicroKernel::with_edge_packer`](crate::linalg::gemm::MicroKernel::with_edge_packer)):
/// `dst[p*2S + i] = src[i*lda + p]` for `i < runs`, 0 for `runs ≤ i < 2S`, `p < kc`. Per depth
/// chunk of S steps ZA is zeroed, runs `0 .. min(runs, S)` are loaded into `za0`'s horizontal
/// slices and the rest into `za1`'s (four per iteration), and each group of four steps leaves
/// through one 4-vector `mova` of vertical slices per tile and one strided 2-vector store per
/// step, as [`pack_za2`]: a 16-row A at SVL 512 costs about 6 instructions a depth step, where
/// zero-filling the panel and interleaving the rows with Neon cost 12.
///
/// # Safety
/// `w == 2S` (the packer's kernel's tile: the caller's guarantee), `1 ≤ runs ≤ w`; runs `i < runs` at `src + i*lda`
/// hold `kc ≥ 1` readable floats, `dst` holds `2S·kc` writable floats; the CPU has SME2 and
/// the caller is not in streaming mode.
pub unsafe fn pack_za2_edge(
    src: *const f32,
    lda: usize,
    runs: usize,
    w: usize,
    kc: usize,
    dst: *mut f32,
) -> bool {
    if runs == 0 || runs > w || kc == 0 {
        return false;
    }
    // SAFETY: loads read, for runs r < runs, floats k0 .. k0 + min(S, kc − k0) of run r
    // (`whilelt` masks lanes at or past kc); stores write the 2S floats of steps k0 .. k0 +
    // min(S, kc − k0), inside the 2S·kc floats of `dst`. Streaming mode and ZA are entered and
    // left inside the block; every vector/predicate register, x12 and the flags are declared
    // clobbered. SME2 present (caller).
    unsafe {
        streaming_asm!(
            ".arch_extension sme2",
            "smstart",
            "ptrue p0.s",
            "ptrue pn8.s",
            "cntw {s}",
            "lsl {mr4}, {s}, #3", // one step, bytes: 2S floats
            "lsl {lda4}, {lda}, #2",
            "lsl {l2}, {lda}, #1",
            "add {l3}, {l2}, {lda}",
            "cmp {runs}, {s}",
            "csel {r0}, {runs}, {s}, lo", // runs into za0
            "sub {r1}, {runs}, {r0}",     // runs into za1
            "mov {k0}, #0",
            "2:",
            "zero {{za}}",
            "whilelt p1.s, {k0}, {kc}",
            "add {rp}, {src}, {k0}, lsl #2",
            // za0: four runs an iteration, then one at a time.
            "mov w12, #0",
            "and {g}, {r0}, #-4",
            "3:",
            "cmp x12, {g}",
            "b.hs 4f",
            "ld1w {{za0h.s[w12, 0]}}, p1/z, [{rp}]",
            "ld1w {{za0h.s[w12, 1]}}, p1/z, [{rp}, {lda}, lsl #2]",
            "ld1w {{za0h.s[w12, 2]}}, p1/z, [{rp}, {l2}, lsl #2]",
            "ld1w {{za0h.s[w12, 3]}}, p1/z, [{rp}, {l3}, lsl #2]",
            "add {rp}, {rp}, {lda4}, lsl #2",
            "add w12, w12, #4",
            "b 3b",
            "4:",
            "cmp x12, {r0}",
            "b.hs 5f",
            "ld1w {{za0h.s[w12, 0]}}, p1/z, [{rp}]",
            "add {rp}, {rp}, {lda4}",
            "add w12, w12, #1",
            "b 4b",
            // za1: runs S .. runs (rp is at run S when there are any).
            "5:",
            "mov w12, #0",
            "and {g}, {r1}, #-4",
            "6:",
            "cmp x12, {g}",
            "b.hs 7f",
            "ld1w {{za1h.s[w12, 0]}}, p1/z, [{rp}]",
            "ld1w {{za1h.s[w12, 1]}}, p1/z, [{rp}, {lda}, lsl #2]",
            "ld1w {{za1h.s[w12, 2]}}, p1/z, [{rp}, {l2}, lsl #2]",
            "ld1w {{za1h.s[w12, 3]}}, p1/z, [{rp}, {l3}, lsl #2]",
            "add {rp}, {rp}, {lda4}, lsl #2",
            "add w12, w12, #4",
            "b 6b",
            "7:",
            "cmp x12, {r1}",
            "b.hs 8f",
            "ld1w {{za1h.s[w12, 0]}}, p1/z, [{rp}]",
            "add {rp}, {rp}, {lda4}",
            "add w12, w12, #1",
            "b 7b",
            // The chunk's steps: four at a time, then one at a time.
            "8:",
            "sub {cnt}, {kc}, {k0}",
            "cmp {cnt}, {s}",
            "csel {cnt}, {cnt}, {s}, lo",
            "mov w12, #0",
            "and {g}, {cnt}, #-4",
            "9:",
            "cmp x12, {g}",
            "b.hs 10f",
            "mova {{z0.s-z3.s}}, za0v.s[w12, 0:3]",
            "mova {{z8.s-z11.s}}, za1v.s[w12, 0:3]",
            "st1w {{z0.s, z8.s}}, pn8, [{dst}]",
            "st1w {{z1.s, z9.s}}, pn8, [{dst}, #2, mul vl]",
            "st1w {{z2.s, z10.s}}, pn8, [{dst}, #4, mul vl]",
            "st1w {{z3.s, z11.s}}, pn8, [{dst}, #6, mul vl]",
            "addvl {dst}, {dst}, #8",
            "add w12, w12, #4",
            "b 9b",
            "10:",
            "cmp x12, {cnt}",
            "b.hs 11f",
            "st1w {{za0v.s[w12, 0]}}, p0, [{dst}]",
            "st1w {{za1v.s[w12, 0]}}, p0, [{dst}, {s}, lsl #2]",
            "add {dst}, {dst}, {mr4}",
            "add w12, w12, #1",
            "b 10b",
            "11:",
            "add {k0}, {k0}, {s}",
            "cmp {k0}, {kc}",
            "b.lo 2b",
            "smstop",
            src = in(reg) src,
            lda = in(reg) lda,
            runs = in(reg) runs,
            kc = in(reg) kc,
            dst = inout(reg) dst => _,
            s = out(reg) _,
            mr4 = out(reg) _,
            lda4 = out(reg) _,
            l2 = out(reg) _,
            l3 = out(reg) _,
            r0 = out(reg) _,
            r1 = out(reg) _,
            k0 = out(reg) _,
            rp = out(reg) _,
            cnt = out(reg) _,
            g = out(reg) _,
            out("x12") _,
        );
    }
    true
}
