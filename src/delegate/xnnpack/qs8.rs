//! Statically quantized int8 nodes (XNNPACK's QS8, from ExecuTorch's static int8 flow):
//! converts between fp32 and per-tensor int8 values, fully-connected products and
//! convolutions of int8 values with int8 per-channel filters and int32 biases into int8
//! values, and max pooling of int8 values. The arithmetic is [`crate::linalg::quant::qs8`]'s.
//!
//! QS8 values live inside a graph only (one byte per element in the planned scratch); the
//! graph's inputs and outputs are fp32, converted at its edges.

use super::graph::{bad, Op, Unary, INVALID_ID};
use super::plan::*;
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::linalg::quant::qs8::{self as kernels, Qs8};
use crate::linalg::quant::{packed, QuantKernel};
use crate::shape::Shape;

/// `Loc::aux` of a `qint8` value (its per-tensor scale and zero point) or of an int32 bias
/// (0), after checking where each may be: `qint8` values are internal, biases constants.
pub(super) fn value(
    t: &xf::XNNTensorValue<'_>,
    q: &xf::XNNQuantizedTensorValue<'_>,
) -> Result<u64, KernelError> {
    if t.datatype() == xf::XNNDatatype::xnn_datatype_qint8 {
        let p = q
            .quant_params_as_per_tensor_quant()
            .ok_or(bad("qint8 value without per-tensor parameters"))?;
        let (scale, zero_point) = (p.scale(), p.zero_point());
        if !(scale.is_finite() && scale > 0.0 && (-128..=127).contains(&zero_point)) {
            return Err(bad(
                "qint8 value: scale not positive or zero point outside int8",
            ));
        }
        if t.constant_buffer_idx() != 0 || t.flags() != 0 {
            return Err(KernelError::Unsupported {
                detail: "qint8 value other than an intermediate of the graph",
            });
        }
        return Ok(qs8_aux(Qs8 { scale, zero_point }));
    }
    if t.constant_buffer_idx() == 0 || t.flags() != 0 {
        return Err(bad("int32 value other than a constant bias"));
    }
    Ok(0)
}

/// Whether a node reads or writes a QS8 value (or an int32 bias).
pub(super) fn involved(op: &Op, dt_of: &dyn Fn(u32) -> u32) -> bool {
    let (ins, n) = op.inputs();
    ins[..n]
        .iter()
        .chain([op.output()].iter())
        .any(|&v| matches!(dt_of(v), DT_QS8 | DT_QI32))
}

/// Whether a node that [`involved`] QS8 values is one this module runs: fp32 ↔ QS8
/// converts, QS8 fully-connected products (filter `[N, K]`) and one-filter-per-group
/// convolutions (OHWI filters) with int8 per-channel filters and int32 (or no) biases, QS8
/// max pooling, and reshapes that keep the quantization.
pub(super) fn node_ok(op: &Op, dt_of: &dyn Fn(u32) -> u32, dims: &[Shape]) -> bool {
    let bias_ok = |b: u32| b == INVALID_ID || dt_of(b) == DT_QI32;
    let rank = |v: u32| dims.get(v as usize).map_or(0, |d| d.rank());
    match *op {
        Op::Unary {
            op: Unary::Copy,
            x,
            out,
        } => matches!((dt_of(x), dt_of(out)), (DT_F32, DT_QS8) | (DT_QS8, DT_F32)),
        Op::FullyConnected {
            x,
            w,
            bias,
            out,
            transpose_w: false,
        } => {
            dt_of(x) == DT_QS8
                && dt_of(w) == DT_QC8W
                && rank(w) == 2
                && bias_ok(bias)
                && dt_of(out) == DT_QS8
        }
        Op::Conv {
            x,
            w,
            bias,
            out,
            depthwise: false,
            ..
        } => {
            dt_of(x) == DT_QS8
                && dt_of(w) == DT_QC8W
                && rank(w) == 4
                && bias_ok(bias)
                && dt_of(out) == DT_QS8
        }
        Op::Pool {
            x, out, max: true, ..
        } => dt_of(x) == DT_QS8 && dt_of(out) == DT_QS8,
        Op::Reshape { x, out } | Op::Transpose { x, out, .. } => {
            dt_of(x) == DT_QS8 && dt_of(out) == DT_QS8
        }
        _ => false,
    }
}

/// The memory a QS8 node works on: its values' bytes by id, the program, the plan.
pub(super) struct Values<'a> {
    pub(super) locs: &'a [Loc],
    pub(super) program: &'a [u8],
    /// fp32 elements of a value (constants, externals, intermediates).
    pub(super) f32s: &'a dyn Fn(u32) -> Result<(*mut f32, usize), KernelError>,
    /// The planned scratch and the end of its value area.
    pub(super) scratch: *mut u8,
    pub(super) gemm_off: usize,
}

impl Values<'_> {
    fn loc(&self, id: u32) -> Result<&Loc, KernelError> {
        self.locs
            .get(id as usize)
            .ok_or(bad("value id out of range"))
    }

    /// A QS8 value's bytes and quantization.
    fn qs8(&self, id: u32) -> Result<(*mut i8, usize, Qs8), KernelError> {
        let l = self.loc(id)?;
        let n = l.dims().numel();
        let end = (l.offset as usize).checked_add(n);
        if l.dt != DT_QS8 || l.kind != KIND_INTERNAL || end.is_none_or(|e| e > self.gemm_off) {
            return Err(bad("int8 value outside the planned scratch"));
        }
        // SAFETY: offset + numel ≤ gemm_off ≤ the scratch length (checked above).
        Ok((
            unsafe { self.scratch.add(l.offset as usize) } as *mut i8,
            n,
            aux_qs8(l.aux),
        ))
    }

    /// An int32 bias of `n` channels (a constant in the program, 4-byte aligned at load).
    fn bias(&self, id: u32, n: usize) -> Result<Option<&[i32]>, KernelError> {
        if id == INVALID_ID {
            return Ok(None);
        }
        let l = self.loc(id)?;
        let bytes = n.checked_mul(4).ok_or(bad("bias size overflows"))?;
        let b = self
            .program
            .get(l.offset as usize..)
            .and_then(|b| b.get(..bytes))
            .filter(|b| l.kind == KIND_CONSTANT && l.dims().numel() == n && b.len() == bytes)
            .ok_or(bad("int32 bias outside the program or of the wrong size"))?;
        // SAFETY: n·4 bytes inside the program; constants are 4-byte aligned (checked at
        // load for int32 values); any bit pattern is an i32.
        let (pre, ints, _) = unsafe { b.align_to::<i32>() };
        if !pre.is_empty() || ints.len() != n {
            return Err(bad("int32 bias misaligned"));
        }
        Ok(Some(ints))
    }

    /// The row-major int8 filter `w` (`[n, k]`, or OHWI with `k = KH·KW·C`) and its fp32
    /// scales.
    fn row_major(&self, w: u32, n: usize, k: usize) -> Result<(&[u8], &[u8]), KernelError> {
        let l = self.loc(w)?;
        let len = n.checked_mul(k).ok_or(bad("int8 filter size overflows"))?;
        let data = self
            .program
            .get(l.offset as usize..)
            .and_then(|d| d.get(..len))
            .filter(|_| flags_layout(l.flags) == packed::Int8Layout::RowMajor)
            .ok_or(bad("int8 filter outside the program or repacked"))?;
        Ok((data, self.scales(l, n)?))
    }

    /// The `n` fp32 scales of an int8 filter (little-endian bytes).
    fn scales(&self, l: &Loc, n: usize) -> Result<&[u8], KernelError> {
        self.program
            .get(l.aux as usize..)
            .and_then(|s| s.get(..n.checked_mul(4)?))
            .ok_or(bad("int8 filter scales outside the program"))
    }

    /// The int8 filter `w` of `n` channels of `k` inputs: its weight accessor (row-major or
    /// repacked for an integer tile by the lowering) and its fp32 scales.
    fn filter(
        &self,
        w: u32,
        n: usize,
        k: usize,
    ) -> Result<(impl Fn(usize, usize) -> i32 + '_, &[u8]), KernelError> {
        let l = self.loc(w)?;
        let layout = flags_layout(l.flags);
        let len = layout.len(n, k).ok_or(bad("int8 filter size overflows"))?;
        let data = self
            .program
            .get(l.offset as usize..)
            .and_then(|d| d.get(..len))
            .ok_or(bad("int8 filter outside the program"))?;
        let scales = self.scales(l, n)?;
        let weight = move |j: usize, t: usize| match layout {
            packed::Int8Layout::RowMajor => data[j * k + t] as i8 as i32,
            packed::Int8Layout::P4x4 => packed::packed_weight(data, k, j, t),
            packed::Int8Layout::P8x8 => packed::packed8_weight(data, k, j, t),
            packed::Int8Layout::PNx4(nb) => packed::packed_n_weight(data, k, nb, j, t),
        };
        Ok((weight, scales))
    }
}

/// Runs one QS8 node (checked by [`node_ok`] at load), its output clamp `clamp`.
pub(super) fn run(op: &Op, clamp: Option<(f32, f32)>, v: &Values<'_>) -> Result<(), KernelError> {
    // `qs8` and `f32s` give ranges inside the scratch, the program or the bound arguments; a
    // node's inputs and output are distinct live values, planned disjoint (as in
    // `execute_plan`): the slices below never alias a slice written at the same time.
    let q_in = |id: u32| -> Result<(&[i8], Qs8), KernelError> {
        let (p, n, q) = v.qs8(id)?;
        // SAFETY: see above; `p` holds n bytes.
        Ok((unsafe { core::slice::from_raw_parts(p, n) }, q))
    };
    let q_out = |id: u32| -> Result<(&mut [i8], Qs8), KernelError> {
        let (p, n, q) = v.qs8(id)?;
        // SAFETY: see above; `p` holds n bytes, the node's output alone.
        Ok((unsafe { core::slice::from_raw_parts_mut(p, n) }, q))
    };
    // fp32 values: read (the input may be a constant, in the program) or written.
    let f32_in = |id: u32| -> Result<&[f32], KernelError> {
        let (p, n) = (v.f32s)(id)?;
        Ok(if n == 0 {
            &[]
        } else {
            // SAFETY: see above; `p` holds n floats, 4-byte aligned.
            unsafe { core::slice::from_raw_parts(p as *const f32, n) }
        })
    };
    let f32_out = |id: u32| -> Result<&mut [f32], KernelError> {
        let (p, n) = (v.f32s)(id)?;
        Ok(if n == 0 {
            &mut []
        } else {
            // SAFETY: see above; `p` holds n floats, 4-byte aligned, the node's output alone
            // (never a constant: outputs are internal or external values).
            unsafe { core::slice::from_raw_parts_mut(p, n) }
        })
    };
    let dims = |id: u32| v.loc(id).map(|l| l.dims());
    let sizes = || bad("int8 node: value sizes disagree with its dims");
    match *op {
        Op::Unary { x, out, .. } if v.loc(out)?.dt == DT_QS8 => {
            let (xs, (o, q)) = (f32_in(x)?, q_out(out)?);
            if xs.len() != o.len() {
                return Err(sizes());
            }
            kernels::quantize(xs, q, o);
        }
        Op::Unary { x, out, .. } => {
            let ((xs, q), o) = (q_in(x)?, f32_out(out)?);
            if xs.len() != o.len() {
                return Err(sizes());
            }
            kernels::dequantize(xs, q, o);
        }
        Op::FullyConnected {
            x, w, bias, out, ..
        } => {
            let wd = dims(w)?;
            let &[n, k] = wd.dims() else {
                return Err(sizes());
            };
            let ((a, qa), (o, qo)) = (q_in(x)?, q_out(out)?);
            let m = a.len().checked_div(k).unwrap_or(0);
            if m * k != a.len() || m * n != o.len() {
                return Err(sizes());
            }
            let l = v.loc(w)?;
            let b = v.bias(bias, n)?;
            if flags_layout(l.flags) == packed::Int8Layout::RowMajor {
                let (rows, scales) = v.row_major(w, n, k)?;
                let kernel = QuantKernel::select();
                kernels::fully_connected_rows(
                    kernel, a, qa, m, k, rows, n, b, scales, qo, clamp, o,
                );
            } else {
                let (weight, scales) = v.filter(w, n, k)?;
                kernels::fully_connected(a, qa, m, k, &weight, n, b, scales, qo, clamp, o);
            }
        }
        Op::Conv {
            x,
            w,
            bias,
            out,
            win,
            groups,
            ..
        } => {
            let p = super::run::conv_geometry(&dims(x)?, &dims(out)?, &win, groups)
                .ok_or(bad("convolution: input or output is not rank 4"))?;
            let wd = dims(w)?;
            let ((xs, qx), (o, qo)) = (q_in(x)?, q_out(out)?);
            let (n, k) = (p.out_c, p.kh * p.kw * p.icg());
            let ok = groups > 0
                && p.in_c % groups == 0
                && n % groups == 0
                && wd.dims() == [n, p.kh, p.kw, p.icg()]
                && xs.len() == p.batch * p.in_h * p.in_w * p.in_c
                && o.len() == p.batch * p.out_h * p.out_w * n;
            if !ok {
                return Err(sizes());
            }
            let (filt, scales) = v.row_major(w, n, k)?;
            // SAFETY: bytes reinterpreted as int8, same size and alignment.
            let filt = unsafe { core::slice::from_raw_parts(filt.as_ptr() as *const i8, n * k) };
            let b = v.bias(bias, n)?;
            let kernel = QuantKernel::select();
            kernels::conv2d_nhwc_rows(kernel, &p, xs, qx, filt, b, scales, qo, clamp, o);
        }
        Op::Pool { x, out, win, .. } => {
            let (xd, od) = (dims(x)?, dims(out)?);
            let (&[nb, h, wi, c], &[onb, oh, ow, oc]) = (xd.dims(), od.dims()) else {
                return Err(sizes());
            };
            let ((xs, qx), (o, qo)) = (q_in(x)?, q_out(out)?);
            if nb != onb || c != oc || xs.len() != nb * h * wi * c || o.len() != nb * oh * ow * c {
                return Err(sizes());
            }
            if qx != qo {
                return Err(bad(
                    "int8 max pooling with different input and output quantization",
                ));
            }
            let geometry = kernels::Pool {
                input: (nb, h, wi, c),
                output: (oh, ow),
                window: (win.kh, win.kw),
                stride: (win.stride_h, win.stride_w),
                dilation: (win.dil_h, win.dil_w),
                pad: (win.pad_top, win.pad_left),
            };
            kernels::max_pool_nhwc(xs, &geometry, qo.range(clamp), o);
        }
        Op::Reshape { x, out } => {
            let ((xs, _), (o, _)) = (q_in(x)?, q_out(out)?);
            if xs.len() != o.len() {
                return Err(sizes());
            }
            o.copy_from_slice(xs);
        }
        Op::Transpose { x, out, perm, rank } => {
            let xd = dims(x)?;
            let ((xs, _), (o, _)) = (q_in(x)?, q_out(out)?);
            let perm = &perm[..rank as usize];
            if xs.len() != o.len() || perm.len() != xd.rank() {
                return Err(sizes());
            }
            transpose_bytes(xs, xd.dims(), perm, o);
        }
        _ => return Err(bad("int8 node of a kind checked out at load")),
    }
    Ok(())
}

/// `out` = `x` (dims `xd`) permuted: output dim `i` is input dim `perm[i]` (a permutation of
/// `0..rank`, checked at load).
fn transpose_bytes(x: &[i8], xd: &[usize], perm: &[u8], out: &mut [i8]) {
    let r = xd.len();
    let mut stride = [0usize; 8];
    let mut acc = 1;
    for i in (0..r).rev() {
        stride[i] = acc;
        acc *= xd[i];
    }
    // Output dims and the input stride of each.
    let od: [usize; 8] = core::array::from_fn(|i| perm.get(i).map_or(1, |&p| xd[p as usize]));
    let os: [usize; 8] = core::array::from_fn(|i| perm.get(i).map_or(0, |&p| stride[p as usize]));
    let mut idx = [0usize; 8];
    for o in out.iter_mut() {
        *o = x[(0..r).map(|i| idx[i] * os[i]).sum::<usize>()];
        for i in (0..r).rev() {
            idx[i] += 1;
            if idx[i] < od[i] {
                break;
            }
            idx[i] = 0;
        }
    }
}
