#!/usr/bin/env python3
"""Writes src/linalg/gemm/arm/generated/neon_loops.rs: the depth loops of the Neon fp32 GEMM
micro-kernels (8 x 12, 8 x 8, 4 x 16) as one `asm!` each, whose FMLA pattern is regular but too
long to write by hand:

  scripts/gen-neon-gemm-asm.py > src/linalg/gemm/arm/generated/neon_loops.rs
  scripts/gen-neon-gemm-asm.py rows > src/linalg/gemm/arm/generated/neon_rows_loops.rs && cargo fmt

Per kernel MR x 4·NV: accumulators v8.. (row i, vector v in v(8 + NV·i + v)); A from its packed
panel two depth steps per `ld1` (2·MR floats into v0.., MR/4 vectors per step), B one row per
step (`ld1` of NV vectors into v4.., post-increment by the register `ldb`); 8 steps per
iteration, then single steps (one A `ld1` of MR floats). Row i of a step multiplies B by lane
i % 4 of A vector i / 4 of that step.

A kernel with NV <= 2 (8 x 8) has a second 8-step loop for contiguous B (`ldb` = 4·NV floats,
a packed panel): two B rows per `ld1` (2·NV vectors into v4..), four instructions fewer per
iteration; the loop is picked by one compare of `ldb` per call.
"""

import sys

KERNELS = [("8x12", 8, 3), ("8x8", 8, 2), ("4x16", 4, 4)]


def regs(first, n):
    return ", ".join(f"v{first + j}.4s" for j in range(n))


def step(mr, nv, a0, b0=4, load=True):
    lines = [f'"ld1 {{{{{regs(4, nv)}}}}}, [{{bp}}], {{ldb}}",'] if load else []
    for i in range(mr):
        a = a0 + i // 4
        for v in range(nv):
            lines.append(f'"fmla v{8 + nv * i + v}.4s, v{b0 + v}.4s, v{a}.s[{i % 4}]",')
    return lines


def gen(name, mr, nv, rows=None):
    """The depth loop of an MR x 4·NV tile, or (`rows` < MR) of its first `rows` rows: the
    same loads of the MR-wide A panel, the FMLAs of those rows only."""
    macro = f"neon_depth_{name}_asm" if rows is None else f"neon_depth_r{rows}_{name}_asm"
    what = f"The {name} depth loop" if rows is None else f"The depth loop of rows 0..{rows} of the {name} tile"
    panel = mr
    mr = mr if rows is None else rows
    av = panel // 4  # A vectors per step
    body = []
    for _ in range(4):
        body.append(f'"ld1 {{{{{regs(0, 2 * av)}}}}}, [{{ap}}], #{32 * av}",')
        body += step(mr, nv, 0)
        body += step(mr, nv, av)
    one = [f'"ld1 {{{{{regs(0, av)}}}}}, [{{ap}}], #{16 * av}",'] + step(mr, nv, 0)
    # Contiguous B (NV <= 2): two rows per load, into v4 .. v(4 + 2·NV).
    pair = []
    if nv <= 2:
        for _ in range(4):
            pair.append(f'"ld1 {{{{{regs(0, 2 * av)}}}}}, [{{ap}}], #{32 * av}",')
            pair.append(f'"ld1 {{{{{regs(4, 2 * nv)}}}}}, [{{bp}}], #{32 * nv}",')
            pair += step(mr, nv, 0, 4, False)
            pair += step(mr, nv, av, 4 + nv, False)
    ind = " " * 12
    accs = "\n".join(
        f'{ind}inout("v{8 + nv * i + v}") $acc[{i}][{v}],' for i in range(mr) for v in range(nv)
    )
    breg = 2 * nv if pair else nv
    clob = ", ".join(f'out("v{r}") _' for r in sorted(set(range(2 * av)) | set(range(4, 4 + breg))))
    if pair:
        pick = f'''
            "cmp {{ldb}}, #{16 * nv}",
            "b.ne 2f",
            "6:",
{chr(10).join(ind + l for l in pair)}
            "subs {{n8}}, {{n8}}, #1",
            "b.ne 6b",
            "b 3f",'''
        pdoc = f"""
/// With `ldb` = {16 * nv} bytes (B a packed panel) the iterations take the second loop: two B
/// rows per `ld1`, {8 * (mr * nv)} FMLA in {8 * (mr * nv) + 4 + 4 + 2} instructions."""
    else:
        pick = ""
        pdoc = ""
    print(f"""
/// {what} as one `asm!`: `k / 8` iterations of 8 steps ({8 * (mr * nv)} FMLA in
/// {8 * (mr * nv) + 4 + 8 + 2} instructions), then `k % 8` single steps; the {mr * nv} accumulators
/// live in v8–v{7 + mr * nv} throughout. Must run inside the kernel's `unsafe` block (see its
/// SAFETY comment): it reads `{panel}·k` floats of A at `ap` and `k` rows of {4 * nv} floats of B at
/// `bp`, `ldb` bytes apart.{pdoc}
macro_rules! {macro} {{
    ($acc:ident, $ap:ident, $bp:ident, $ldb:ident, $k:ident) => {{{{
        // SAFETY: reads at most {panel}·k floats of the A panel and k B rows (the kernel's
        // contract); writes only the named vector registers and the pointer/count operands.
        core::arch::asm!(
            "cbz {{n8}}, 3f",{pick}
            "2:",
{chr(10).join(ind + l for l in body)}
            "subs {{n8}}, {{n8}}, #1",
            "b.ne 2b",
            "3:",
            "cbz {{n1}}, 5f",
            "4:",
{chr(10).join(ind + l for l in one)}
            "subs {{n1}}, {{n1}}, #1",
            "b.ne 4b",
            "5:",
            ap = inout(reg) $ap => _,
            bp = inout(reg) $bp => _,
            ldb = in(reg) $ldb,
            n8 = inout(reg) $k / 8 => _,
            n1 = inout(reg) $k % 8 => _,
{accs}
            {clob},
            options(nostack, readonly),
        );
    }}}};
}}""")


def ends(name, mr, nv, nrows=None):
    """The plain ends of a tile (or of its first `nrows` rows): accumulators from the bias, and
    the clamped store."""
    suffix = name if nrows is None else f"r{nrows}_{name}"
    what = name if nrows is None else f"{name} rows 0..{nrows}"
    mr = mr if nrows is None else nrows
    ind = " " * 12
    rows = [regs(8 + nv * i, nv) for i in range(mr)]
    loads = "\n".join(f'{ind}"ld1 {{{{{r}}}}}, [{{b}}]",' for r in rows)
    outs = "\n".join(
        f'{ind}out("v{8 + nv * i + v}") $acc[{i}][{v}],' for i in range(mr) for v in range(nv)
    )
    ins = "\n".join(
        f'{ind}inout("v{8 + nv * i + v}") $acc[{i}][{v}] => _,'
        for i in range(mr)
        for v in range(nv)
    )
    accs = [f"v{8 + j}" for j in range(mr * nv)]
    clamp = "\n".join(f'{ind}"fmaxnm {a}.4s, {a}.4s, {{lo:v}}.4s",' for a in accs)
    clamp += "\n" + "\n".join(f'{ind}"fminnm {a}.4s, {a}.4s, {{hi:v}}.4s",' for a in accs)
    stores = "\n".join(f'{ind}"st1 {{{{{r}}}}}, [{{c}}], {{rsc}}",' for r in rows)
    print(f"""
/// The {what} accumulators from the bias: one `ld1` of its {4 * nv} floats per row, straight
/// into the row's registers (v8–v{7 + mr * nv}, where the depth loop keeps them). Must run inside the
/// kernel's `unsafe` block: it reads {4 * nv} floats at `bias`.
macro_rules! neon_bias_{suffix}_asm {{
    ($acc:ident, $bias:expr) => {{{{
        // SAFETY: reads the {4 * nv} bias floats (the kernel's contract); writes only the
        // named vector registers.
        core::arch::asm!(
{loads}
            b = in(reg) $bias,
{outs}
            options(nostack, readonly, preserves_flags),
        );
    }}}};
}}

/// The plain {what} store: each accumulator clamped in place (`fmaxnm` then `fminnm`, as
/// `store_row`'s clamp) when the arm is `clamp`, then one post-indexed `st1` of a whole row
/// per C row ({mr} stores, `rsc` bytes apart). Must run inside the kernel's `unsafe` block: it
/// writes {4 * nv} floats at each of `c + i·rsc`, i < {mr}.
macro_rules! neon_store_{suffix}_asm {{
    ($acc:ident, $c:expr, $rsc:expr, $lo:expr, $hi:expr, clamp) => {{{{
        // SAFETY: writes the tile's rows of C (the kernel's contract); clobbers only the
        // accumulators (dead after the store) and the pointer operand.
        core::arch::asm!(
{clamp}
{stores}
            c = inout(reg) $c => _,
            rsc = in(reg) $rsc,
            lo = in(vreg) $lo,
            hi = in(vreg) $hi,
{ins}
            options(nostack, preserves_flags),
        );
    }}}};
    ($acc:ident, $c:expr, $rsc:expr, $lo:expr, $hi:expr, noclamp) => {{{{
        // SAFETY: as above.
        core::arch::asm!(
{stores}
            c = inout(reg) $c => _,
            rsc = in(reg) $rsc,
{ins}
            options(nostack, preserves_flags),
        );
    }}}};
}}""")


ROWS = [("8x12", 8, 3, range(1, 8)), ("8x8", 8, 2, range(1, 8)), ("4x16", 4, 4, range(1, 4))]

if len(sys.argv) > 1 and sys.argv[1] == "rows":
    print("""//! Generated by `scripts/gen-neon-gemm-asm.py rows` (do not edit by hand): the depth loops
//! of the row kernels of [`crate::linalg::gemm::arm::neon_rows`] (the first R rows of a Neon tile, for the M
//! edge), one `asm!` each, with the register layout and loads of the tile's own loop.""")
    for name, mr, nv, rs in ROWS:
        for r in rs:
            gen(name, mr, nv, r)
            ends(name, mr, nv, r)
    sys.exit(0)

print("""//! Generated by `scripts/gen-neon-gemm-asm.py` (do not edit by hand): the depth loops of the
//! Neon micro-kernels of [`crate::linalg::gemm::arm::neon`] as one `asm!` each (see that module's doc for the register
//! tile and why the loop is not written with intrinsics).""")
for k in KERNELS:
    gen(*k)
    ends(*k)
