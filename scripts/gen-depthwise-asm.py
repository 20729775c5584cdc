#!/usr/bin/env python3
"""Writes the `asm!` bodies of the 3x3 depthwise kernels, whose FMLA pattern (which input
column feeds which output with which filter tap) is regular but too long to write by hand:

  scripts/gen-depthwise-asm.py neon   the `row_s{S}n{N}` functions of
                                      src/linalg/conv/depthwise/neon_3x3.rs
  scripts/gen-depthwise-asm.py sve    the block functions of
                                      src/linalg/conv/depthwise/sve_3x3.rs

Paste the output over the generated functions and run `cargo fmt`. Output `j` of a block reads
columns `S*j .. S*j + T` of each input row (T filter taps per row: 3, or fewer for a border
column); each column is loaded once and multiplied into every output that reads it, taps in
increasing order per output (the order the scalar reference adds them in).
"""
import sys

def gen_neon(S, N, name):
    ncols=S*(N-1)+3
    lines=[]
    temps=['t0','t1','t2']
    for i in range(ncols):
        t=temps[i%3]
        lines.append(f'"ld1 {{{{{{{t}:v}}.4s}}}}, [{{p}}], {{step}}",')
        for j in range(N):
            k=i-S*j
            if 0<=k<3:
                lines.append(f'"fmla {{a{j}:v}}.4s, {{{t}:v}}.4s, {{w{k}:v}}.4s",')
    back=ncols-S*N
    body='\n'.join('                '+l for l in lines)
    accs='\n'.join(f'                a{j} = inout(vreg) a[{j}],' for j in range(N))
    art = "an" if N == 8 else "a"
    tap = "j + k" if S == 1 else f"{S}·j + k"
    return f'''    /// One input row of {art} {N}-output block at stride {S}: loads the row's {ncols} columns
    /// (post-indexed `ld1`, `step` bytes apart) and adds each one's products into the outputs
    /// that read it (`a[j] += x[{tap}]·w[k]`, taps in increasing `k` per output), then moves
    /// `*p` to the next block's first column ({S*N} columns on). One `asm!` per row keeps the
    /// live registers at {N} accumulators, 3 filter vectors and 3 columns.
    ///
    /// # Safety
    /// `*p + i·step` holds 4 readable floats for `i < {ncols}`.
    #[inline(always)]
    unsafe fn {name}(a: &mut [float32x4_t; {N}], p: &mut *const f32, w: &[float32x4_t; 3], step: usize) {{
        // SAFETY: reads the {ncols} columns the caller vouches for; no stack, flags kept.
        unsafe {{
            core::arch::asm!(
{body}
                "sub {{p}}, {{p}}, {{back}}",
                p = inout(reg) *p,
                step = in(reg) step,
                back = in(reg) step * {back},
{accs}
                w0 = in(vreg) w[0],
                w1 = in(vreg) w[1],
                w2 = in(vreg) w[2],
                t0 = out(vreg) _,
                t1 = out(vreg) _,
                t2 = out(vreg) _,
                options(nostack, readonly, preserves_flags),
            );
        }}
    }}
'''

def gen_sve(S, N, T, name):
    cols = S*(N-1)+T
    L = []
    a = L.append
    if cols == 1:
        a('"/* one column per row: {step} unused */",')
    a('"whilelt p0.s, {c0}, {c}",')
    a('"cbz {bias}, 1f",')
    a('"ld1w {{z8.s}}, p0/z, [{bias}]",')
    a('"b 2f",')
    a('"1:",')
    a('"dup z8.s, #0",')
    a('"2:",')
    for j in range(N):
        a(f'"mov z{j}.d, z8.d",')
    a('"cbz {nr}, 4f",')
    a('"3:",')
    a('"ldr {p}, [{rows}], #8",')
    a('"ldr {w}, [{taps}], #8",')
    for k in range(T):
        a(f'"ld1w {{{{z{9+k}.s}}}}, p0/z, [{{w}}]",')
        if k < T-1:
            a('"add {w}, {w}, {step}",')
    for i in range(cols):
        t = 14 + i % 3
        a(f'"ld1w {{{{z{t}.s}}}}, p0/z, [{{p}}]",')
        if i < cols-1:
            a('"add {p}, {p}, {step}",')
        for j in range(N):
            k = i - S*j
            if 0 <= k < T:
                a(f'"fmla z{j}.s, p0/m, z{t}.s, z{9+k}.s",')
    a('"subs {nr}, {nr}, #1",')
    a('"b.ne 3b",')
    a('"4:",')
    a('"cbz {clampf}, 5f",')
    a('"dup z12.s, {lo:w}",')
    a('"dup z13.s, {hi:w}",')
    for j in range(N):
        a(f'"fmaxnm z{j}.s, p0/m, z{j}.s, z12.s",')
        a(f'"fminnm z{j}.s, p0/m, z{j}.s, z13.s",')
    a('"5:",')
    for j in range(N):
        a(f'"st1w {{{{z{j}.s}}}}, p0, [{{out}}]",')
        if j < N-1:
            a('"add {out}, {out}, {step}",')
    body = '\n'.join('            ' + l for l in L)
    what = f'{N} neighbouring outputs at stride {S}' if T == 3 else f'one border output with {T} valid column tap{"s" if T > 1 else ""}'
    return f'''/// {what[0].upper() + what[1:]}, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = {N}`, `S = {S}`, `T = {T}` ({cols} columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn {name}(k: &Block) {{
    // SAFETY: reads `k.nr` row and tap pointers, {T} filter vectors per row (`step` bytes
    // apart from its tap pointer) and {cols} input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes {N} output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {{
        asm!(
{body}
            rows = inout(reg) k.rows => _,
            taps = inout(reg) k.taps => _,
            nr = inout(reg) k.nr => _,
            out = inout(reg) k.out => _,
            step = in(reg) k.step,
            bias = in(reg) k.bias,
            clampf = in(reg) k.clamp as u64,
            lo = in(reg) k.lo.to_bits(),
            hi = in(reg) k.hi.to_bits(),
            c0 = in(reg) k.c0,
            c = in(reg) k.c,
            p = out(reg) _,
            w = out(reg) _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _,
            out("v6") _, out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _, out("v16") _,
            out("p0") _,
            options(nostack),
        );
    }}
}}
'''


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    if which == "neon":
        for s, n in [(1, 8), (1, 4), (2, 4), (2, 8)]:
            print(gen_neon(s, n, f"row_s{s}n{n}"))
    elif which == "sve":
        out = []
        for s in (1, 2):
            for n in (8, 4, 2):
                out.append(gen_sve(s, n, 3, f"s{s}n{n}"))
        for t in (3, 2, 1):
            out.append(gen_sve(1, 1, t, f"n1t{t}"))
        print("\n".join(out))
    else:
        sys.exit("usage: scripts/gen-depthwise-asm.py neon|sve")
