//! Running a region's `Linear` operations: binding their tensors (from the call's record
//! prepared at load, or through the arguments), the product on packed or argument weights, the
//! quantized products, and the bias scaling and activation after them.

use super::record::bad;
use crate::delegate::xnnpack;
use crate::error::KernelError;
use crate::format::region_fb as rf;
use crate::kernel_api::{KernelCtx, Prepared, TensorSlot};
use crate::linalg::gemm::{self, MatRef, PackedB, SplitHint, GEMM_SCRATCH_F32};
use crate::linalg::quant::{self, packed::Int8Layout, QParams, QWeights};
use crate::linalg::vecmath as vec;

/// One validated linear operation.
#[derive(Clone, Copy)]
pub(super) struct Linear {
    pub(super) input: usize,
    pub(super) output: usize,
    pub(super) bias: Option<usize>,
    pub(super) k: usize,
    pub(super) n: usize,
    pub(super) alpha: f32,
    pub(super) beta: f32,
    pub(super) act: rf::Activation,
    pub(super) weight: WeightRef,
}

/// Where a linear operation's weight comes from.
#[derive(Clone, Copy)]
pub(super) enum WeightRef {
    /// Packed panels of width `nr` in named data `key`.
    Packed { nr: usize },
    /// Quantized rows (int8, or 4-bit with scales per `group` inputs; int8 rows may be packed
    /// `qc8w_p4x4` or `qc8w_p8x8`), their scales and column sums in named data; the input is
    /// quantized per row at run time.
    Quant {
        four_bit: bool,
        group: usize,
        packed: Int8Layout,
    },
    /// A constant argument, `[K, N]` (`transposed == false`) or `[N, K]`.
    Arg { arg: usize, transposed: bool },
}

/// Floats of scratch a quantized operation needs for `m` rows: the rows' parameters (two
/// floats each), the int8 rows (whole 64-byte lines), and the packed activations of the SME2
/// tile (weights packed `qc8w_pNx4`) or the `SMMLA` tile (`qc8w_p8x8`).
pub(super) fn quant_scratch_f32(m: usize, k: usize, layout: Int8Layout) -> Option<usize> {
    let za = match layout {
        Int8Layout::PNx4(nb) => quant::pnx4_scratch_f32(m, k, nb),
        Int8Layout::P8x8 => quant::p8x8_scratch_f32(m, k),
        _ => 0,
    };
    m.checked_mul(2)?
        .checked_add(m.checked_mul(k)?.div_ceil(64).checked_mul(16)?)?
        .checked_add(za)
}

/// Whether an output of dims `od` holds `m` rows of `n` as it is (last dim `n`, `m · n`
/// elements): then it keeps its shape.
fn holds_rows(od: &[usize], m: usize, n: usize) -> bool {
    od.last() == Some(&n)
        && od.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) == m.checked_mul(n)
}

/// The tensors of one product bound to raw storage: `m` rows of the input, the bias and the
/// output.
struct Bound<'t> {
    m: usize,
    x: &'t [f32],
    bias: Option<&'t [f32]>,
    out: &'t mut [f32],
}

/// A one-product region's tensors from the call's record prepared at load
/// ([`PteraBackend::prepare_call`]: slots input, output, bias), when they still are what the
/// product takes: f32 and contiguous, the input `[.., k]`, the output `m · n` elements ending
/// in `n`, the bias `n` elements. `None`: the general path binds them (and reports what is
/// wrong).
fn bind_prepared<'t>(
    p: &Prepared,
    tensors: &[TensorSlot],
    (k, n): (usize, usize),
) -> Option<Bound<'t>> {
    let xd = tensors.get(p.slots[0] as usize)?.shape.dims();
    let (&xk, lead) = xd.split_last()?;
    let m = lead.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    let od = tensors.get(p.slots[1] as usize)?.shape.dims();
    if xk != k || !holds_rows(od, m, n) {
        return None;
    }
    let bias = match tensors.get(p.slots[2] as usize) {
        None => None,
        Some(b) if b.shape.numel() != n => return None,
        // SAFETY: the record of this call, prepared at load for a call whose outputs were
        // proved to overlap no other argument; read while the call runs. Its `n` elements are
        // the whole tensor (checked above).
        Some(_) => Some(unsafe { p.input_counted::<f32>(tensors, 2, n) }?),
    };
    // SAFETY: as the bias (the input is `m` rows of `k`, the output `m · n` elements: both
    // whole, checked above); the output is bound once, here.
    let (x, out) = unsafe {
        (
            p.input_counted(tensors, 0, m.checked_mul(k)?)?,
            p.output_counted(tensors, 1, m.checked_mul(n)?)?,
        )
    };
    Some(Bound { m, x, bias, out })
}

/// `Prepared::param` flag of a one-product region decided whole at load: `sizes` are
/// `[k, n, packed panels' program offset, nr]`, bits 8..16 of `param` the activation.
pub(super) const DECIDED: u32 = 1 << 31;

/// Runs a one-product region decided whole at load ([`PteraBackend::prepare_call`]): binds
/// the prepared tensors and the panels, and runs the product with the split decided then.
/// `None` (nothing read or written): not such a call, an observer wants the operation
/// reported, or a tensor is no longer what the product takes; the general path runs it.
pub(super) fn linear_prepared(
    ctx: &mut KernelCtx<'_, '_, '_>,
    program: &[u8],
) -> Option<Result<(), KernelError>> {
    let (p, tensors) = ctx.prepared()?;
    if p.param & DECIDED == 0 || ctx.observed() {
        return None;
    }
    let [k, n, off, nr] = p.sizes.map(|s| s as usize);
    let (act, hint) = (
        rf::Activation((p.param >> 8) as u8 as i8),
        SplitHint::from_bits(p.hint),
    );
    let len = PackedB::len_for(k, n, nr)?.checked_mul(4)?;
    let data = xnnpack::run::as_f32(program.get(off..off.checked_add(len)?)?)?;
    let b = PackedB::new(data, k, n, nr).ok()?;
    let Bound { m, x, bias, out } = bind_prepared(p, tensors, (k, n))?;
    Some((|| {
        let scratch = ctx.scratch_f32(GEMM_SCRATCH_F32)?;
        let a = MatRef::row_major(x, m, k)?;
        gemm::sgemm_prepacked_hinted(a, b, out, n, (1.0, 0.0, bias, None), scratch, hint)?;
        activate(act, out)
    })())
}

/// Runs one linear operation: `out = act(alpha · x · W + beta · bias)`.
pub(super) fn linear(
    ctx: &mut KernelCtx<'_, '_, '_>,
    index: usize,
    l: &Linear,
    packed: Option<PackedB<'_>>,
) -> Result<(), KernelError> {
    // A call prepared at load binds its tensors from the record (one product with packed
    // panels); any other, or one whose tensors changed, binds them here.
    let prepared = match (ctx.prepared(), &packed) {
        (Some((p, tensors)), Some(_)) => bind_prepared(p, tensors, (l.k, l.n)).map(|b| (b, p.hint)),
        _ => None,
    };
    let (bound, plain, hint) = match prepared {
        Some((b, hint)) => (b, None, SplitHint::from_bits(hint)),
        None => {
            let (b, plain) = bind(ctx, l)?;
            (b, plain, SplitHint::NONE)
        }
    };
    let Bound { m, x, bias, out } = bound;
    let (lo, hi) = match ctx.demanded_rows(l.output) {
        Some((lo, hi)) if lo < hi && hi <= m => (lo, hi),
        _ => (0, m),
    };
    if ctx.observed() {
        ctx.region_op(index, "Linear", m * l.n, ((hi - lo) * l.n * l.k) as u64);
    }
    let (k, n) = (l.k, l.n);
    let rows = hi - lo;
    // `beta` scales the bias; the GEMM adds its bias unscaled.
    let direct_bias = if l.beta == 1.0 { bias } else { None };
    // The whole declared scratch: the kernel that reads these panels may not be the one
    // `sgemm_scratch_len` assumes for this shape (another tile width, or the per-panel
    // fallback), and every GEMM fits in GEMM_SCRATCH_F32.
    let scratch = ctx.scratch_f32(GEMM_SCRATCH_F32)?;
    let a = MatRef::row_major(&x[lo * k..], rows, k)?;
    let c = &mut out[lo * n..hi * n];
    match (packed, plain) {
        (Some(b), _) => {
            // The hint was made for all `m` rows.
            let hint = if rows == m { hint } else { SplitHint::NONE };
            gemm::sgemm_prepacked_hinted(
                a,
                b,
                c,
                n,
                (l.alpha, 0.0, direct_bias, None),
                scratch,
                hint,
            )?
        }
        (None, Some(b)) => gemm::sgemm(a, b, c, n, l.alpha, 0.0, direct_bias, scratch)?,
        (None, None) => return Err(bad("ptera region: linear without weight")),
    }
    finish(l, bias, c)
}

/// The general binding of one linear operation's tensors through the call's arguments, with
/// a weight given as an argument viewed as `[K, N]`.
fn bind<'a>(
    ctx: &mut KernelCtx<'_, 'a, '_>,
    l: &Linear,
) -> Result<(Bound<'a>, Option<MatRef<'a>>), KernelError> {
    // The input's and the output's shapes compared in place; the tensors bound to raw storage
    // (no views, no shape copies: this runs once per product).
    let (m, out_shaped) = {
        let xd = ctx.dims(l.input)?;
        let r = xd.len();
        if r == 0 || xd[r - 1] != l.k {
            return Err(KernelError::Shape {
                arg: l.input,
                detail: "ptera linear: input's last dimension differs from the weight's depth",
            });
        }
        // Saturating, as `Shape::numel`: a size no tensor has fails the size checks below.
        let m = xd[..r - 1].iter().fold(1usize, |a, &d| a.saturating_mul(d));
        // An output already holding `m` rows of `n` keeps its shape (the program's: a product
        // of a 3-D input's rows declared 2-D stays 2-D); any other is resized below.
        (m, holds_rows(ctx.dims(l.output)?, m, l.n))
    };
    let x = ctx.input_f32s(l.input, m.saturating_mul(l.k))?;
    let bias = match l.bias {
        Some(b) => Some(ctx.input_f32s(b, l.n)?),
        None => None,
    };
    let plain = match l.weight {
        WeightRef::Arg { arg, transposed } => {
            let w = ctx.input(arg)?;
            let wd = w.as_slice::<f32>()?;
            if w.numel() != l.k * l.n {
                return Err(KernelError::Shape {
                    arg,
                    detail: "ptera linear: weight size differs from k·n",
                });
            }
            Some(if transposed {
                MatRef::row_major(wd, l.n, l.k)?.t()
            } else {
                MatRef::row_major(wd, l.k, l.n)?
            })
        }
        WeightRef::Packed { .. } | WeightRef::Quant { .. } => None,
    };
    let out: &mut [f32] = if out_shaped {
        ctx.output_f32s(l.output, m.saturating_mul(l.n))?
    } else {
        // Resized to the input's shape with the last dim `n`.
        let mut shape = *ctx.input(l.input)?.shape();
        let last = shape.rank() - 1;
        shape.dims_mut()[last] = l.n;
        let mut out = ctx.output(l.output, &shape)?;
        out.as_mut_slice::<f32>()?
    };
    Ok((Bound { m, x, bias, out }, plain))
}

/// A quantized weight: rows in a [`QWeights`] layout, or int8 rows packed `qc8w_p4x4`.
pub(super) enum QuantW<'p> {
    Rows(QWeights<'p>),
    /// int8 rows packed `qc8w_p4x4` or `qc8w_p8x8` (`layout`), fp32 scales.
    Packed {
        data: &'p [u8],
        scales: &'p [u8],
        layout: Int8Layout,
    },
}

/// The tail of a linear operation: `beta · bias` where `beta` is not 1 (a bias of weight 1
/// went into the product), then the activation.
fn finish(l: &Linear, bias: Option<&[f32]>, c: &mut [f32]) -> Result<(), KernelError> {
    if let (Some(bv), true) = (bias, l.beta != 1.0) {
        for row in c.chunks_exact_mut(l.n) {
            for (o, b) in row.iter_mut().zip(bv) {
                *o += l.beta * b;
            }
        }
    }
    activate(l.act, c)
}

/// Runs one quantized linear operation: the input rows quantized to int8 (per row, XNNPACK's
/// arithmetic) into the scratch, `out = act(dequant(q) · dequant(W)ᵀ + beta · bias)`.
pub(super) fn linear_quant(
    ctx: &mut KernelCtx<'_, '_, '_>,
    index: usize,
    l: &Linear,
    w: &QuantW<'_>,
    sums: &[f32],
) -> Result<(), KernelError> {
    let x = ctx.input(l.input)?;
    let xd = x.as_slice::<f32>()?;
    if x.rank() == 0 || x.dims()[x.rank() - 1] != l.k {
        return Err(KernelError::Shape {
            arg: l.input,
            detail: "ptera linear: input's last dimension differs from the weight's depth",
        });
    }
    let (k, n) = (l.k, l.n);
    let m = x.numel() / k;
    let mut shape = *x.shape();
    let last = shape.rank() - 1;
    shape.dims_mut()[last] = n;
    let bias = match l.bias {
        Some(b) => {
            let v = ctx.input(b)?.as_slice::<f32>()?;
            if v.len() != n {
                return Err(KernelError::Shape {
                    arg: b,
                    detail: "ptera linear: bias length differs from the output width",
                });
            }
            Some(v)
        }
        None => None,
    };
    let (lo, hi) = match ctx.demanded_rows(l.output) {
        Some((lo, hi)) if lo < hi && hi <= m => (lo, hi),
        _ => (0, m),
    };
    if ctx.observed() {
        ctx.region_op(index, "QuantizedLinear", m * n, ((hi - lo) * n * k) as u64);
    }
    let rows = hi - lo;
    let layout = match w {
        QuantW::Packed { layout, .. } => *layout,
        QuantW::Rows(_) => Int8Layout::RowMajor,
    };
    let need = quant_scratch_f32(rows, k, layout)
        .ok_or(bad("ptera region: quantized scratch overflows"))?;
    let scratch = ctx.scratch_f32(need)?;
    let (params_f, q_f) = scratch.split_at_mut(2 * rows);
    let (q_f, work) = q_f.split_at_mut((rows * k).div_ceil(64) * 16);
    // SAFETY: `params_f` holds 2·rows f32 (4-byte aligned): exactly `rows` QParams (repr(C)
    // f32 + i32, size 8, align 4, every bit pattern valid); `q_f` holds ≥ rows·k bytes, and
    // i8 has alignment 1; `work` is the rest. All are exclusive borrows of disjoint scratch
    // parts, which no output overlaps.
    let (params, q, work) = unsafe {
        (
            core::slice::from_raw_parts_mut(params_f.as_mut_ptr() as *mut QParams, rows),
            core::slice::from_raw_parts_mut(q_f.as_mut_ptr() as *mut i8, rows * k),
            core::slice::from_raw_parts_mut(work.as_mut_ptr(), work.len()),
        )
    };
    quant::quantize_rows_qd8(&xd[lo * k..hi * k], k, q, params);
    let mut out = ctx.output(l.output, &shape)?;
    let od = out.as_mut_slice::<f32>()?;
    let c = &mut od[lo * n..hi * n];
    let direct_bias = if l.beta == 1.0 { bias } else { None };
    let kernel = quant::QuantKernel::select();
    match w {
        QuantW::Rows(w) => quant::gemm_qd8_f32(
            kernel,
            q,
            params,
            rows,
            k,
            w,
            n,
            direct_bias,
            Some(sums),
            c,
            None,
        )?,
        QuantW::Packed {
            data,
            scales,
            layout,
        } => {
            // The SMMLA and SME2 tiles pack the rows in `work`.
            match *layout {
                Int8Layout::P8x8 => quant::gemm_qd8_f32_p8x8(
                    kernel,
                    q,
                    params,
                    rows,
                    k,
                    data,
                    scales,
                    n,
                    direct_bias,
                    sums,
                    c,
                    None,
                    work,
                )?,
                Int8Layout::PNx4(nb) => quant::gemm_qd8_f32_pnx4(
                    kernel,
                    q,
                    params,
                    rows,
                    k,
                    (data, nb),
                    scales,
                    n,
                    direct_bias,
                    sums,
                    c,
                    None,
                    work,
                )?,
                _ => quant::gemm_qd8_f32_p4x4(
                    kernel,
                    q,
                    params,
                    rows,
                    k,
                    data,
                    scales,
                    n,
                    direct_bias,
                    sums,
                    c,
                    None,
                )?,
            }
        }
    }
    finish(l, bias, c)
}

/// Applies the activation in place, through a small stack buffer (the vector functions take
/// distinct input and output slices).
fn activate(act: rf::Activation, c: &mut [f32]) -> Result<(), KernelError> {
    const CHUNK: usize = 256;
    // The function and its cost per chunk (for the split decision).
    let (f, work): (fn(&[f32], &mut [f32]) -> Result<(), KernelError>, usize) = match act {
        rf::Activation::Relu => (vec::relu, CHUNK / 2),
        rf::Activation::GeluErf => (vec::gelu_erf, CHUNK * 16),
        rf::Activation::GeluTanh => (vec::gelu_tanh, CHUNK * 16),
        _ => return Ok(()),
    };
    // Elementwise; split in units of 64 elements (a one-row 384-wide product's activation
    // on 4 cores, not 256 + 128 on 2), each part in CHUNKs from its start: every element
    // keeps its place in a vector of up to 64 lanes, so any team gives the same bits.
    const UNIT: usize = 64;
    let errors = crate::parallel::FirstError::default();
    crate::parallel::for_chunks(c, UNIT, work / (CHUNK / UNIT), |_, part, _| {
        let mut tmp = [0f32; CHUNK];
        for chunk in part.chunks_mut(CHUNK) {
            let t = &mut tmp[..chunk.len()];
            t.copy_from_slice(chunk);
            if let Err(e) = f(t, chunk) {
                errors.put(e);
                return;
            }
        }
    });
    errors.result()
}
