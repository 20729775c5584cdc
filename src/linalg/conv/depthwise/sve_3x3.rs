//! The SVE2 3×3 depthwise kernel: NHWC, channel multiplier 1, stride 1 or 2 across (any
//! stride down), dilation 1, output clamp fused into the stores; for vector lengths of 256 bits
//! and more (at 128 bits the Neon kernel, with post-indexed loads, needs fewer instructions).
//!
//! Layout contract: that of the Neon kernel (input `[N, H, W, C]`, filter `[1, 3, 3, C]`,
//! bias `[C]`, output `[N, OH, OW, C]`, f32, contiguous). Channels go one vector (`VL/32`) at a
//! time under a `whilelt` predicate, so a channel count that the vector length does not divide
//! needs no scalar tail. Each output row runs, per channel block, its border columns (only
//! their valid taps) and its interior in blocks of 8, 4, 2 and 1 neighbouring outputs; one
//! `asm!` computes a block over all of the row's valid input rows (their row and filter-tap
//! pointers in a small array it walks), streaming each row's columns once and adding each
//! column's products into every output of the block that reads it, then clamps and stores.
//! Stable Rust has no SVE intrinsics, hence `asm!` (one function per block shape, written by
//! `scripts/gen-depthwise-asm.py sve`).

use core::arch::asm;

use super::geometry_3x3::valid_rows;
use crate::linalg::conv::Conv2d;

/// One block's operands (read by the `asm!` bodies through a reference).
///
/// Contract: `rows[..nr]` point at channel `c0` of the block's first input column in each
/// valid input row and `taps[..nr]` at channel `c0` of the first filter tap it uses in the
/// matching filter row; every column the block reads (`step` bytes apart) and every tap (also
/// `step` bytes apart, `step = 4·C`) holds the lanes of channels `c0 .. min(c0 + VL, C)`;
/// `out` points at channel `c0` of the first output column, `N` columns `step` apart writable
/// for those lanes; `bias` is null or points at channel `c0` of the bias. `c0 < c = C`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Block {
    rows: *const *const f32,
    taps: *const *const f32,
    nr: usize,
    out: *mut f32,
    step: usize,
    bias: *const f32,
    clamp: bool,
    lo: f32,
    hi: f32,
    c0: usize,
    c: usize,
}

/// Whether this kernel runs here: SVE2 with vectors of at least 256 bits, and a scalable GEMM
/// ISA selected (forcing `neon` or `generic` keeps the Neon kernel).
fn usable() -> bool {
    use crate::linalg::gemm::{select, Isa};
    crate::linalg::cpu::features().sve2
        && matches!(select::selected(), Isa::Sve2 | Isa::Sme | Isa::Sme2)
        // SAFETY: SVE2 (hence SVE) is present, checked first.
        && unsafe { crate::linalg::gemm::arm::sve::cntw() } >= 8
}

/// Computes one image (`out`: `[OH, OW, OC]`, `OC = C`; `img`: its first input pixel) of a
/// call that `geometry_3x3::accepts` took, when the CPU runs this kernel ([`usable`]), and
/// returns `true`; `false` (nothing written) otherwise.
pub(super) fn image(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    img: usize,
    range: Option<(f32, f32)>,
) -> bool {
    if !usable() {
        return false;
    }
    let s = p.stride_w;
    let range = range.filter(|&(lo, hi)| lo != f32::NEG_INFINITY || hi != f32::INFINITY);
    // SAFETY: SVE2 is present (`usable`); the lengths were checked by `geometry_3x3::accepts`.
    unsafe {
        if s == 1 {
            image_with::<1>(p, x, w, bias, out, img, range)
        } else {
            image_with::<2>(p, x, w, bias, out, img, range)
        }
    }
    true
}

/// [`image`] once its geometry and lengths are checked (`img`: the image's first input
/// pixel), at stride `S` across.
///
/// # Safety
/// SVE2 present; `x` holds the image's `H·W·C` floats from pixel `img`, `w` `9·C`, `out`
/// `OH·OW·C`, `bias` (if any) `C`.
#[target_feature(enable = "sve2")]
unsafe fn image_with<const S: usize>(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    img: usize,
    range: Option<(f32, f32)>,
) {
    // SAFETY: SVE present (caller).
    let vl = unsafe { crate::linalg::gemm::arm::sve::cntw() };
    let (c, ow, pad) = (p.in_c, p.out_w, p.pad_left);
    let step = c * 4;
    let (lo, _) = p.valid_cols(0);
    let (_, hi) = p.valid_cols(2);
    let hi = hi.max(lo);
    let (clamp, rlo, rhi) = match range {
        Some((l, h)) => (true, l, h),
        None => (false, 0.0, 0.0),
    };
    for c0 in (0..c).step_by(vl) {
        for oy in 0..p.out_h {
            // Valid kernel rows are consecutive: the first, their count, its input row.
            let (ky0, nr, iy0) = valid_rows(p, oy);
            let mut rows = [core::ptr::null::<f32>(); 3];
            let mut taps = [core::ptr::null::<f32>(); 3];
            for k in 0..nr {
                // In bounds: input row iy0 + k < H of this image, channel c0 < C; filter
                // row ky0 + k < 3, channel c0 (lengths checked by `geometry_3x3::accepts`).
                rows[k] = x[(img + (iy0 + k) * p.in_w) * c + c0..].as_ptr();
                taps[k] = w[3 * (ky0 + k) * c + c0..].as_ptr();
            }
            let o = out[oy * ow * c + c0..].as_mut_ptr();
            let blk = Block {
                rows: rows.as_ptr(),
                taps: taps.as_ptr(),
                nr,
                out: o,
                step,
                bias: bias.map_or(core::ptr::null(), |bb| bb[c0..].as_ptr()),
                clamp,
                lo: rlo,
                hi: rhi,
                c0,
                c,
            };
            // Border columns: only the taps inside the input (none: the bias).
            for ox in (0..lo).chain(hi..ow) {
                let base = ox * S; // input column of tap 0, plus `pad`
                let ka = pad.saturating_sub(base).min(3);
                let kb = (p.in_w + pad).saturating_sub(base).min(3);
                let (ka, kb) = if ka < kb { (ka, kb) } else { (0, 0) };
                let col = (base + ka).wrapping_sub(pad).wrapping_mul(step);
                let er = rows.map(|r| r.wrapping_byte_add(col));
                let et = taps.map(|t| t.wrapping_add(ka * c));
                let e = Block {
                    rows: er.as_ptr(),
                    taps: et.as_ptr(),
                    nr: if kb > ka { nr } else { 0 },
                    out: o.wrapping_byte_add(ox * step),
                    ..blk
                };
                // SAFETY: taps ka .. kb of column ox read input columns base + ka − pad ..
                // base + kb − pad, inside 0 .. W (`ka`, `kb` above), filter taps ka .. kb of the
                // valid rows, and write output column ox < OW: the Block contract. SVE2 present.
                unsafe {
                    match kb - ka {
                        3 => n1t3(&e),
                        2 => n1t2(&e),
                        _ => n1t1(&e),
                    }
                }
            }
            if lo >= hi {
                continue;
            }
            // Interior columns lo .. hi in blocks of 8, 4, 2, 1.
            let mut ir = rows.map(|r| r.wrapping_byte_add((S * lo - pad) * step));
            let mut oo = o.wrapping_byte_add(lo * step);
            let mut n = hi - lo;
            while n > 0 {
                let take = [8, 4, 2, 1].into_iter().find(|&t| t <= n).unwrap_or(1);
                let bk = Block {
                    rows: ir.as_ptr(),
                    out: oo,
                    ..blk
                };
                // SAFETY: outputs oo .. oo + take are interior columns (< hi ≤ OW), whose
                // three taps read input columns S·ox − pad .. S·ox + 2 − pad inside 0 .. W
                // (`valid_cols`): the Block contract. SVE2 present.
                unsafe {
                    match (S, take) {
                        (1, 8) => s1n8(&bk),
                        (1, 4) => s1n4(&bk),
                        (1, 2) => s1n2(&bk),
                        (_, 8) => s2n8(&bk),
                        (_, 4) => s2n4(&bk),
                        (_, 2) => s2n2(&bk),
                        _ => n1t3(&bk),
                    }
                }
                ir = ir.map(|r| r.wrapping_byte_add(S * take * step));
                oo = oo.wrapping_byte_add(take * step);
                n -= take;
            }
        }
    }
}

/// 8 neighbouring outputs at stride 1, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 8`, `S = 1`, `T = 3` (10 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s1n8(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 10 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 8 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "mov z2.d, z8.d",
            "mov z3.d, z8.d",
            "mov z4.d, z8.d",
            "mov z5.d, z8.d",
            "mov z6.d, z8.d",
            "mov z7.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "fmla z1.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z10.s",
            "fmla z2.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z14.s, z11.s",
            "fmla z2.s, p0/m, z14.s, z10.s",
            "fmla z3.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z15.s, z11.s",
            "fmla z3.s, p0/m, z15.s, z10.s",
            "fmla z4.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z3.s, p0/m, z16.s, z11.s",
            "fmla z4.s, p0/m, z16.s, z10.s",
            "fmla z5.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z4.s, p0/m, z14.s, z11.s",
            "fmla z5.s, p0/m, z14.s, z10.s",
            "fmla z6.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z5.s, p0/m, z15.s, z11.s",
            "fmla z6.s, p0/m, z15.s, z10.s",
            "fmla z7.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z6.s, p0/m, z16.s, z11.s",
            "fmla z7.s, p0/m, z16.s, z10.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "fmla z7.s, p0/m, z14.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "fmaxnm z2.s, p0/m, z2.s, z12.s",
            "fminnm z2.s, p0/m, z2.s, z13.s",
            "fmaxnm z3.s, p0/m, z3.s, z12.s",
            "fminnm z3.s, p0/m, z3.s, z13.s",
            "fmaxnm z4.s, p0/m, z4.s, z12.s",
            "fminnm z4.s, p0/m, z4.s, z13.s",
            "fmaxnm z5.s, p0/m, z5.s, z12.s",
            "fminnm z5.s, p0/m, z5.s, z13.s",
            "fmaxnm z6.s, p0/m, z6.s, z12.s",
            "fminnm z6.s, p0/m, z6.s, z13.s",
            "fmaxnm z7.s, p0/m, z7.s, z12.s",
            "fminnm z7.s, p0/m, z7.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z2.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z3.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z4.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z5.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z6.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z7.s}}, p0, [{out}]",
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
    }
}

/// 4 neighbouring outputs at stride 1, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 4`, `S = 1`, `T = 3` (6 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s1n4(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 6 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 4 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "mov z2.d, z8.d",
            "mov z3.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "fmla z1.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z10.s",
            "fmla z2.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z14.s, z11.s",
            "fmla z2.s, p0/m, z14.s, z10.s",
            "fmla z3.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z15.s, z11.s",
            "fmla z3.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "fmla z3.s, p0/m, z16.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "fmaxnm z2.s, p0/m, z2.s, z12.s",
            "fminnm z2.s, p0/m, z2.s, z13.s",
            "fmaxnm z3.s, p0/m, z3.s, z12.s",
            "fminnm z3.s, p0/m, z3.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z2.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z3.s}}, p0, [{out}]",
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
    }
}

/// 2 neighbouring outputs at stride 1, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 2`, `S = 1`, `T = 3` (4 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s1n2(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 4 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 2 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "fmla z1.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z10.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "fmla z1.s, p0/m, z14.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
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
    }
}

/// 8 neighbouring outputs at stride 2, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 8`, `S = 2`, `T = 3` (17 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s2n8(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 17 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 8 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "mov z2.d, z8.d",
            "mov z3.d, z8.d",
            "mov z4.d, z8.d",
            "mov z5.d, z8.d",
            "mov z6.d, z8.d",
            "mov z7.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z14.s, z10.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z15.s, z11.s",
            "fmla z2.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z16.s, z10.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z14.s, z11.s",
            "fmla z3.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z3.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z3.s, p0/m, z16.s, z11.s",
            "fmla z4.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z4.s, p0/m, z14.s, z10.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z4.s, p0/m, z15.s, z11.s",
            "fmla z5.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z5.s, p0/m, z16.s, z10.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z5.s, p0/m, z14.s, z11.s",
            "fmla z6.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z6.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z6.s, p0/m, z16.s, z11.s",
            "fmla z7.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z7.s, p0/m, z14.s, z10.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "fmla z7.s, p0/m, z15.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "fmaxnm z2.s, p0/m, z2.s, z12.s",
            "fminnm z2.s, p0/m, z2.s, z13.s",
            "fmaxnm z3.s, p0/m, z3.s, z12.s",
            "fminnm z3.s, p0/m, z3.s, z13.s",
            "fmaxnm z4.s, p0/m, z4.s, z12.s",
            "fminnm z4.s, p0/m, z4.s, z13.s",
            "fmaxnm z5.s, p0/m, z5.s, z12.s",
            "fminnm z5.s, p0/m, z5.s, z13.s",
            "fmaxnm z6.s, p0/m, z6.s, z12.s",
            "fminnm z6.s, p0/m, z6.s, z13.s",
            "fmaxnm z7.s, p0/m, z7.s, z12.s",
            "fminnm z7.s, p0/m, z7.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z2.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z3.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z4.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z5.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z6.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z7.s}}, p0, [{out}]",
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
    }
}

/// 4 neighbouring outputs at stride 2, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 4`, `S = 2`, `T = 3` (9 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s2n4(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 9 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 4 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "mov z2.d, z8.d",
            "mov z3.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z14.s, z10.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z15.s, z11.s",
            "fmla z2.s, p0/m, z15.s, z9.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z16.s, z10.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z2.s, p0/m, z14.s, z11.s",
            "fmla z3.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z3.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "fmla z3.s, p0/m, z16.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "fmaxnm z2.s, p0/m, z2.s, z12.s",
            "fminnm z2.s, p0/m, z2.s, z13.s",
            "fmaxnm z3.s, p0/m, z3.s, z12.s",
            "fminnm z3.s, p0/m, z3.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z2.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z3.s}}, p0, [{out}]",
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
    }
}

/// 2 neighbouring outputs at stride 2, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 2`, `S = 2`, `T = 3` (5 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn s2n2(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 5 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 2 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "mov z1.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "fmla z1.s, p0/m, z16.s, z9.s",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z1.s, p0/m, z14.s, z10.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "fmla z1.s, p0/m, z15.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "fmaxnm z1.s, p0/m, z1.s, z12.s",
            "fminnm z1.s, p0/m, z1.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
            "add {out}, {out}, {step}",
            "st1w {{z1.s}}, p0, [{out}]",
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
    }
}

/// 1 neighbouring outputs at stride 1, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 1`, `S = 1`, `T = 3` (3 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn n1t3(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 3 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 3 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 1 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z11.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "ld1w {{z16.s}}, p0/z, [{p}]",
            "fmla z0.s, p0/m, z16.s, z11.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
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
    }
}

/// One border output with 2 valid column taps, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 1`, `S = 1`, `T = 2` (2 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn n1t2(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 2 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 2 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 1 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "add {w}, {w}, {step}",
            "ld1w {{z10.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "add {p}, {p}, {step}",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "ld1w {{z15.s}}, p0/z, [{p}]",
            "fmla z0.s, p0/m, z15.s, z10.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
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
    }
}

/// One border output with 1 valid column tap, one channel block: see [`Block`].
///
/// # Safety
/// [`Block`]'s contract with `N = 1`, `S = 1`, `T = 1` (1 columns per row); SVE2 present.
#[target_feature(enable = "sve2")]
unsafe fn n1t1(k: &Block) {
    // SAFETY: reads `k.nr` row and tap pointers, 1 filter vectors per row (`step` bytes
    // apart from its tap pointer) and 1 input columns per row (`step` bytes apart from its
    // row pointer), the bias vector when non-null, and writes 1 output vectors `step` bytes
    // apart: all inside the caller's operands ([`Block`]), with the lanes of channels
    // `c0 .. min(c0 + VL, C)` only (predicate p0). z0–z16 and p0 are clobbered; flags too.
    unsafe {
        asm!(
            "/* one column per row: {step} unused */",
            "whilelt p0.s, {c0}, {c}",
            "cbz {bias}, 1f",
            "ld1w {{z8.s}}, p0/z, [{bias}]",
            "b 2f",
            "1:",
            "dup z8.s, #0",
            "2:",
            "mov z0.d, z8.d",
            "cbz {nr}, 4f",
            "3:",
            "ldr {p}, [{rows}], #8",
            "ldr {w}, [{taps}], #8",
            "ld1w {{z9.s}}, p0/z, [{w}]",
            "ld1w {{z14.s}}, p0/z, [{p}]",
            "fmla z0.s, p0/m, z14.s, z9.s",
            "subs {nr}, {nr}, #1",
            "b.ne 3b",
            "4:",
            "cbz {clampf}, 5f",
            "dup z12.s, {lo:w}",
            "dup z13.s, {hi:w}",
            "fmaxnm z0.s, p0/m, z0.s, z12.s",
            "fminnm z0.s, p0/m, z0.s, z13.s",
            "5:",
            "st1w {{z0.s}}, p0, [{out}]",
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
    }
}
