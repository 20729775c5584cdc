//! Running a translated region: externals bound to the DelegateCall's tensors, every node's
//! operands located in the program (constants, packed or quantized filters), the argument
//! tensors or the planned scratch, and computed in graph order.

use super::graph::{self, bad, last_dim, Op, INVALID_ID};
use super::plan::*;
use super::run;
use crate::delegate::DelegateInit;
use crate::dtype::DType;
use crate::error::KernelError;
use crate::kernel_api::KernelCtx;
use crate::linalg::gemm::{self, SplitHint};
use crate::linalg::quant::packed::Int8Layout;
use crate::linalg::quant::{self, QParams, QWeights};
use crate::shape::Shape;
use core::mem::MaybeUninit;
/// The panels of a [`KIND_PACKED`] filter (`k × n`, tile width `Loc::ext`, at `Loc::offset` in
/// the program, or in the state area when [`PACKED_IN_STATE`]; sizes checked at load).
fn packed_filter<'p>(
    program: &'p [u8],
    state: &'p [u8],
    wl: &Loc,
    k: usize,
    n: usize,
) -> Result<gemm::PackedB<'p>, KernelError> {
    let nr = wl.ext as usize;
    let len = gemm::PackedB::len_for(k, n, nr).unwrap_or(0) * 4;
    let bytes = if wl.flags & PACKED_IN_STATE != 0 {
        state
    } else {
        program
    };
    let panels = bytes
        .get(wl.offset as usize..wl.offset as usize + len)
        .and_then(run::as_f32)
        .ok_or(bad("packed filter outside the program or misaligned"))?;
    gemm::PackedB::new(panels, k, n, nr)
}

/// The quantized `[n, k]` filter described by `wl` (data and scales in the program, extents
/// checked here; their presence was checked at load).
pub(super) fn quant_weights<'p>(
    program: &'p [u8],
    wl: &Loc,
    n: usize,
    k: usize,
) -> Result<QWeights<'p>, KernelError> {
    let outside = || bad("quantized weights outside the program");
    let at = |off: u64, len: Option<usize>| {
        let len = len.ok_or_else(outside)?;
        program
            .get(off as usize..(off as usize).checked_add(len).ok_or_else(outside)?)
            .ok_or_else(outside)
    };
    let groups = if wl.group > 0 {
        k / wl.group as usize
    } else {
        1
    };
    Ok(match wl.dt {
        DT_QC8W => QWeights::Qc8w {
            data: at(wl.offset, n.checked_mul(k))?,
            scales: at(wl.aux, n.checked_mul(4))?,
        },
        DT_QC4W => QWeights::Qc4w {
            data: at(wl.offset, n.checked_mul(k.div_ceil(2)))?,
            scales: at(wl.aux, n.checked_mul(4))?,
        },
        DT_QB4W => QWeights::Qb4w {
            data: at(wl.offset, n.checked_mul(k.div_ceil(2)))?,
            scales: at(wl.aux, n.checked_mul(groups).and_then(|v| v.checked_mul(2)))?,
            group: wl.group as usize,
        },
        _ => return Err(bad("fully-connected filter of an unknown quantized type")),
    })
}

/// Runs a graph planned by `init`/`init_packed` (the plan in `state` says which filters are
/// pre-packed).
pub fn execute_plan(
    init: &DelegateInit<'_>,
    state: &[u8],
    ctx: &mut KernelCtx<'_, '_, '_>,
) -> Result<(), KernelError> {
    let StateView {
        head,
        locs,
        steps,
        externs,
        sums,
    } = state_view(state)?;
    if ctx.nargs() < head.num_externs as usize {
        return Err(KernelError::ArgCount {
            expected: head.num_externs as usize,
            got: ctx.nargs(),
        });
    }
    // Externals: inputs as read-only views, outputs resized to their graph dims.
    // Entries `..ne` only are initialised (to "unbound"): zeroing 2 KiB per call cost more
    // than a small region's nodes.
    let ne = (head.num_externs as usize).min(MAX_EXTERNS);
    let mut ext_in = [const { MaybeUninit::<(*const f32, usize)>::uninit() }; MAX_EXTERNS];
    let mut ext_out = [const { MaybeUninit::<(*mut f32, usize)>::uninit() }; MAX_EXTERNS];
    for (i, o) in ext_in.iter_mut().zip(ext_out.iter_mut()).take(ne) {
        i.write((core::ptr::null(), 0));
        o.write((core::ptr::null_mut(), 0));
    }
    // The values the arguments bind, from the externals table made at init (an argument no
    // value names, `NO_VALUE`, is no index: skipped; `locate` refuses any external left
    // unbound).
    let bound = || {
        externs
            .iter()
            .filter_map(|&id| Some((id, locs.get(id as usize)?)))
    };
    // Bound to raw storage (no view per argument): an f32 tensor of the graph's size, f32
    // aligned (what a typed view would check).
    let f32s = |arg: usize, data: usize, bytes: usize, dtype: DType, numel: u64, what| {
        if dtype != DType::F32 {
            return Err(KernelError::DTypeMismatch {
                arg,
                expected: DType::F32,
                got: dtype,
            });
        }
        if bytes as u64 != numel * 4 {
            return Err(KernelError::Shape { arg, detail: what });
        }
        if !data.is_multiple_of(4) {
            return Err(KernelError::Misaligned { arg });
        }
        Ok(bytes / 4)
    };
    for (_, l) in bound().filter(|(_, l)| l.kind == KIND_EXTERNAL_IN) {
        let arg = l.ext as usize;
        let (p, bytes, dtype) = ctx.input_raw(arg)?;
        let n = f32s(
            arg,
            p as usize,
            bytes,
            dtype,
            l.numel,
            "input size differs from the delegate graph",
        )?;
        let e = ext_in[..ne]
            .get_mut(arg)
            .ok_or(bad("external index out of range"))?;
        e.write((p as *const f32, n));
    }
    for (_, l) in bound().filter(|(_, l)| l.kind == KIND_EXTERNAL_OUT) {
        let arg = l.ext as usize;
        let dtype = ctx.out_dtype(arg)?;
        if dtype != DType::F32 {
            return Err(KernelError::UnsupportedDType { arg, dtype });
        }
        let (p, bytes, dtype) = ctx.output_raw(arg)?;
        let n = f32s(
            arg,
            p as usize,
            bytes,
            dtype,
            l.numel,
            "output size differs from the delegate graph",
        )?;
        let e = ext_out[..ne]
            .get_mut(arg)
            .ok_or(bad("external index out of range"))?;
        e.write((p as *mut f32, n));
    }
    let program = init.program.bytes();
    let (sp, slen) = {
        let s = ctx.scratch();
        (s.as_mut_ptr(), s.len())
    };
    let gemm_len = slen.saturating_sub(head.gemm_off as usize) / 4;
    if !(sp as usize).is_multiple_of(16) || slen < head.gemm_off as usize {
        return Err(KernelError::Scratch {
            needed: head.gemm_off as usize,
            got: slen,
        });
    }
    // The chunk of rows the nodes are running on (`Head::chunks`).
    let chunks = (head.chunks as usize).max(1);
    let chunk = core::cell::Cell::new(0usize);
    // Raw location of value `id`: (pointer, elements).
    let locate = |id: u32| -> Result<(*mut f32, usize), KernelError> {
        let l = locs.get(id as usize).ok_or(bad("value id out of range"))?;
        if l.dt != DT_F32 {
            return Err(bad("quantized value read as fp32"));
        }
        let n = l.numel as usize;
        // A chunked external: this chunk's part of the tensor (`skip` elements in).
        let (n, skip) = if l.flags & ROW_CHUNKED != 0 {
            (n / chunks, n / chunks * chunk.get())
        } else {
            (n, 0)
        };
        Ok(match l.kind {
            // Bound above, with their lengths (an argument no table entry bound has none).
            KIND_EXTERNAL_IN | KIND_EXTERNAL_OUT => {
                let e = l.ext as usize;
                let (p, len) = if e >= ne {
                    (core::ptr::null_mut(), 0)
                } else if l.kind == KIND_EXTERNAL_IN {
                    // SAFETY: entries below `ne` were initialised above.
                    let (p, len) = unsafe { ext_in[e].assume_init() };
                    (p as *mut f32, len)
                } else {
                    // SAFETY: as above.
                    unsafe { ext_out[e].assume_init() }
                };
                if skip + n > len {
                    return Err(bad("external value larger than its argument"));
                }
                if skip == 0 {
                    (p, n)
                } else {
                    // SAFETY: skip + n ≤ len, the elements of the bound argument.
                    (unsafe { p.add(skip) }, n)
                }
            }
            KIND_CONSTANT => {
                let end = l.offset as usize + n * 4;
                if end > program.len() {
                    return Err(bad("constant outside the program"));
                }
                (program[l.offset as usize..].as_ptr() as *mut f32, n)
            }
            KIND_PACKED => return Err(bad("packed filter read as plain data")),
            _ => {
                if l.offset as usize + n * 4 > head.gemm_off as usize {
                    return Err(bad("intermediate outside the planned scratch"));
                }
                // SAFETY: offset + n*4 ≤ gemm_off ≤ scratch length (checked above).
                (unsafe { sp.add(l.offset as usize) } as *mut f32, n)
            }
        })
    };
    // SAFETY (for `rd`/`wr` below): every pointer comes from `locate`, which yields ranges
    // inside the program bytes (constants, borrowed immutably), the argument tensors
    // (checked by KernelCtx: outputs overlap no input), or the planned scratch. The planner
    // gives values whose lifetimes overlap disjoint ranges; a node's inputs and its output
    // are alive at the same step and are distinct values (checked at load), so the `&mut`
    // output never aliases an input slice — except a reshape planned as a view of its
    // input (same storage), which is skipped before any slice of it is made. Alignment: constants and tensors were checked
    // for f32 alignment, scratch offsets are multiples of 16 from a 16-aligned base.
    let rd = |id: u32| -> Result<&[f32], KernelError> {
        let (p, n) = locate(id)?;
        Ok(if n == 0 {
            &[]
        } else {
            // SAFETY: see the block comment above.
            unsafe { core::slice::from_raw_parts(p as *const f32, n) }
        })
    };
    let gemm_scratch: &mut [f32] = {
        // SAFETY: [gemm_off, gemm_off + gemm_len*4) is inside the scratch (gemm_len is
        // clamped to what remains), disjoint from every planned value (all end at or before
        // gemm_off), and 64-byte aligned. The GEMM reports a too-small scratch itself.
        unsafe {
            core::slice::from_raw_parts_mut(sp.add(head.gemm_off as usize) as *mut f32, gemm_len)
        }
    };
    let dims = |id: u32| locs[id as usize].dims();
    // A dynamically quantized value: (its int8 elements, numel, rows), parameters behind.
    let qd8 = |id: u32| -> Result<(*mut u8, usize, usize), KernelError> {
        let l = locs.get(id as usize).ok_or(bad("value id out of range"))?;
        let d = l.dims();
        let numel = d.numel();
        let rows = numel.checked_div(last_dim(&d)).unwrap_or(0);
        let end = qd8_bytes(numel, rows).and_then(|b| b.checked_add(l.offset as usize));
        if l.dt != DT_QD8
            || l.kind != KIND_INTERNAL
            || end.is_none_or(|e| e > head.gemm_off as usize)
        {
            return Err(bad("quantized activations outside the planned scratch"));
        }
        // SAFETY: offset + its bytes ≤ gemm_off ≤ scratch length (checked above).
        Ok((unsafe { sp.add(l.offset as usize) }, numel, rows))
    };
    // Rows of an external output the program reads (`exec::demand`), e.g. only the last
    // position of a language-model head: the fully-connected node writing that output
    // ([`ROWS_LOCAL`], found at init) computes only those rows.
    // (A region run in chunks computes every row.)
    let demanded = bound()
        .filter(|(_, l)| l.kind == KIND_EXTERNAL_OUT && l.flags & ROWS_LOCAL != 0)
        .filter(|_| chunks == 1)
        .find_map(|(id, l)| ctx.demanded_rows(l.ext as usize).map(|r| (id, r)));
    let qkernel = quant::QuantKernel::select();
    // Every node on the first chunk of rows, then on the next, ...
    let runs = (0..chunks).flat_map(|c| steps.iter().enumerate().map(move |s| (c, s)));
    // Nodes left to skip: run with the fused run that starts before them.
    let mut skip = 0usize;
    let observed = ctx.observed();
    for (c, (index, step)) in runs {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        chunk.set(c);
        // A run of elementwise nodes, as one parallel step (`fuse`; one by one when an
        // observer wants each node reported).
        let fused = step.fused();
        if fused >= 2 && !observed {
            let run = steps
                .get(index..index + fused)
                .ok_or(bad("fused run past the last node"))?;
            run_fused(run, &locate)?;
            skip = fused - 1;
            continue;
        }
        // A view planned onto its input's storage (see `analyze`: reshapes of intermediates,
        // inputs and constants, and repeated converts) has nothing to do.
        if let Some((x, out)) = step.reshape_ids() {
            let at = |id: u32| locs.get(id as usize).map(|l| (l.kind, l.ext, l.offset));
            if at(x).is_some() && at(x) == at(out) {
                continue;
            }
        }
        let (op, clamp) = step.op()?;
        // The output's id, without a call on the decoded node.
        let out_id = op.output();
        let dt = |id: u32| locs.get(id as usize).map_or(DT_F32, |l| l.dt);
        let out_dt = dt(out_id);
        // Every static int8 node writes an int8 value but the convert back to fp32.
        let int8_in = matches!(op, Op::Unary { x, .. } if dt(x) == DT_QS8);
        if out_dt == DT_QS8 || int8_in {
            // Static int8: converts at the graph's edges, int8 products and pooling.
            if ctx.observed() {
                let od = dims(out_id);
                let m = macs(&op, &|id| dims(id), &od);
                ctx.region_op(index, graph::node_name(step.node()), od.numel(), m);
            }
            let values = super::qs8::Values {
                locs,
                program,
                f32s: &locate,
                scratch: sp,
                gemm_off: head.gemm_off as usize,
            };
            super::qs8::run(&op, clamp, &values)?;
            continue;
        }
        if out_dt == DT_QD8 {
            // fp32 rows → int8 rows and their parameters (a convert node, checked at load).
            let Op::Unary { x, .. } = op else {
                return Err(bad("quantized output of a node other than a convert"));
            };
            let od = dims(out_id);
            if ctx.observed() {
                ctx.region_op(index, graph::node_name(step.node()), od.numel(), 0);
            }
            let xs = rd(x)?;
            let (qp, numel, rows) = qd8(out_id)?;
            let k = last_dim(&od);
            // SAFETY: `qd8` checked that the value's elements and, 16 bytes aligned behind
            // them, its `rows` parameters lie inside the planned scratch; the scratch base
            // and offsets are 16-aligned (QParams needs 4); the input is a distinct live
            // value (planned disjoint, see the block comment above `rd`).
            let (q, params) = unsafe {
                (
                    core::slice::from_raw_parts_mut(qp as *mut i8, numel),
                    core::slice::from_raw_parts_mut(
                        qp.add(numel.next_multiple_of(16)) as *mut QParams,
                        rows,
                    ),
                )
            };
            if xs.len() != numel {
                return Err(bad("convert: input and output sizes differ"));
            }
            quant::quantize_rows_qd8(xs, k, q, params);
            continue;
        }
        let (po, no) = locate(out_id)?;
        // SAFETY: see the block comment above `rd`.
        let out: &mut [f32] = if no == 0 {
            &mut []
        } else {
            // SAFETY: see the block comment above `rd`.
            unsafe { core::slice::from_raw_parts_mut(po, no) }
        };
        // The output's dims, built only by the nodes that read them.
        let od = || dims(out_id);
        if ctx.observed() {
            let od = od();
            ctx.region_op(
                index,
                graph::node_name(step.node()),
                od.numel(),
                macs(&op, &|id| dims(id), &od),
            );
        }
        match op {
            Op::Binary { op, a, b, .. } => {
                let (xa, xb) = (rd(a)?, rd(b)?);
                if xa.len() == out.len() && xb.len() == out.len() {
                    // Same shapes: no broadcast, no dims needed.
                    run::zip_with(op, xa, xb, out)
                } else {
                    run::binary(op, xa, &dims(a), xb, &dims(b), out, &od())
                }
            }
            Op::Unary { op, x, .. } => run::unary(op, rd(x)?, out),
            Op::Softmax { x, scale, .. } => {
                let s = if scale == INVALID_ID {
                    1.0
                } else {
                    *rd(scale)?
                        .first()
                        .ok_or(bad("softmax scale without an element"))?
                };
                run::softmax_rows_scaled(rd(x)?, out, last_dim(&od()), s)
            }
            Op::FullyConnected {
                x,
                w,
                bias,
                transpose_w,
                ..
            } => {
                let wd = dims(w);
                let (n, k) = if transpose_w {
                    (wd.dims()[1], wd.dims()[0])
                } else {
                    (wd.dims()[0], wd.dims()[1])
                };
                let b = if bias == INVALID_ID {
                    None
                } else {
                    Some(rd(bias)?)
                };
                let wl = &locs[w as usize];
                if wl.dt != DT_F32 {
                    let qw = quant_weights(program, wl, n, k)?;
                    let wsums = sums
                        .get(wl.sums as usize..(wl.sums as usize).saturating_add(n))
                        .ok_or(bad("column sums outside the state"))?;
                    let x_rows = dims(x).numel() / k.max(1);
                    let (lo, hi) = match demanded {
                        Some((id, (lo, hi))) if id == out_id && hi <= x_rows => (lo, hi),
                        _ => (0, x_rows),
                    };
                    if hi * n > out.len() {
                        return Err(bad("fully-connected output smaller than its rows"));
                    }
                    let o = &mut out[lo * n..hi * n];
                    // Row-major weights, or int8 / group-wise 4-bit rows packed ahead for
                    // lane-indexed SDOT (`wl.group` > 0: 4-bit, with packed fp32 scales).
                    let group = wl.group as usize;
                    let layout = flags_layout(wl.flags);
                    let packed_rows = if layout != Int8Layout::RowMajor {
                        let (len, slen) = match (group > 0, layout) {
                            (true, Int8Layout::P8x8) => (
                                quant::packed::packed4x8_len(n, k),
                                quant::packed::packed4x8_scales_len(n, k, group)
                                    .and_then(|s| s.checked_mul(4)),
                            ),
                            (true, Int8Layout::PNx4(nb)) => (
                                quant::packed::packed4n_len(n, k, nb),
                                quant::packed::packed4n_scales_len(n, k, group, nb)
                                    .and_then(|s| s.checked_mul(4)),
                            ),
                            (true, _) => (
                                quant::packed::packed4_len(n, k),
                                quant::packed::packed4_scales_len(n, k, group)
                                    .and_then(|s| s.checked_mul(4)),
                            ),
                            (false, _) => (layout.len(n, k), n.checked_mul(4)),
                        };
                        let (Some(len), Some(slen)) = (len, slen) else {
                            return Err(bad("packed filter size overflows"));
                        };
                        let at = |off: u64, len: usize| {
                            program
                                .get(off as usize..(off as usize).saturating_add(len))
                                .ok_or(bad("packed filter outside the program"))
                        };
                        Some((at(wl.offset, len)?, at(wl.aux, slen)?))
                    } else {
                        None
                    };
                    let product = |a: &[i8],
                                   ap: &[QParams],
                                   m: usize,
                                   o: &mut [f32],
                                   work: &mut [f32]| {
                        match (packed_rows, layout) {
                            (Some((data, scales)), Int8Layout::P8x8) if group > 0 => {
                                quant::gemm_qd8_f32_qb4w_p8x8(
                                    qkernel, a, ap, m, k, data, scales, n, group, b, wsums, o,
                                    clamp,
                                )
                            }
                            (Some((data, scales)), Int8Layout::PNx4(nb)) if group > 0 => {
                                quant::gemm_qd8_f32_qb4w_pnx4(
                                    qkernel,
                                    a,
                                    ap,
                                    m,
                                    k,
                                    (data, nb),
                                    scales,
                                    n,
                                    group,
                                    b,
                                    wsums,
                                    o,
                                    clamp,
                                    work,
                                )
                            }
                            (Some((data, scales)), _) if group > 0 => {
                                quant::gemm_qd8_f32_qb4w_p4x4(
                                    qkernel, a, ap, m, k, data, scales, n, group, b, wsums, o,
                                    clamp,
                                )
                            }
                            (Some((data, scales)), Int8Layout::P8x8) => quant::gemm_qd8_f32_p8x8(
                                qkernel, a, ap, m, k, data, scales, n, b, wsums, o, clamp, work,
                            ),
                            (Some((data, scales)), Int8Layout::PNx4(nb)) => {
                                quant::gemm_qd8_f32_pnx4(
                                    qkernel,
                                    a,
                                    ap,
                                    m,
                                    k,
                                    (data, nb),
                                    scales,
                                    n,
                                    b,
                                    wsums,
                                    o,
                                    clamp,
                                    work,
                                )
                            }
                            (Some((data, scales)), _) => quant::gemm_qd8_f32_p4x4(
                                qkernel, a, ap, m, k, data, scales, n, b, wsums, o, clamp,
                            ),
                            (None, _) => quant::gemm_qd8_f32(
                                qkernel,
                                a,
                                ap,
                                m,
                                k,
                                &qw,
                                n,
                                b,
                                Some(wsums),
                                o,
                                clamp,
                            ),
                        }
                    };
                    if locs[x as usize].dt == DT_QD8 {
                        let (qp, numel, rows) = qd8(x)?;
                        if rows != x_rows {
                            return Err(bad("quantized activations: rows disagree"));
                        }
                        // SAFETY: as for the convert above (`qd8` checked the extents);
                        // read-only views of a value distinct from this node's output.
                        let (a, ap) = unsafe {
                            (
                                core::slice::from_raw_parts(qp as *const i8, numel),
                                core::slice::from_raw_parts(
                                    qp.add(numel.next_multiple_of(16)) as *const QParams,
                                    rows,
                                ),
                            )
                        };
                        let (a, ap) = (&a[lo * k..hi * k], &ap[lo..hi]);
                        product(a, ap, hi - lo, o, &mut *gemm_scratch)?
                    } else {
                        // A filter quantized ahead: the fp32 rows are quantized here, into the
                        // work area (sized for every row at load), parameters first.
                        let xs = rd(x)?;
                        let rows = hi - lo;
                        let (pf, rest) = gemm_scratch
                            .split_at_mut_checked(2 * rows)
                            .ok_or(bad("work area too small for quantized rows"))?;
                        let (rest, work) = rest
                            .split_at_mut_checked((rows * k).div_ceil(64) * 16)
                            .ok_or(bad("work area too small for quantized rows"))?;
                        if hi * k > xs.len() {
                            return Err(bad("work area too small for quantized rows"));
                        }
                        // SAFETY: `pf` holds 2·rows f32 = rows QParams (repr(C) f32 + i32,
                        // align 4); `rest` holds ≥ rows·k bytes (checked); disjoint exclusive
                        // parts of the work area, which no planned value overlaps.
                        let (ap, a) = unsafe {
                            (
                                core::slice::from_raw_parts_mut(
                                    pf.as_mut_ptr() as *mut QParams,
                                    rows,
                                ),
                                core::slice::from_raw_parts_mut(
                                    rest.as_mut_ptr() as *mut i8,
                                    rows * k,
                                ),
                            )
                        };
                        quant::quantize_rows_qd8(&xs[lo * k..hi * k], k, a, ap);
                        product(a, ap, rows, o, work)?
                    }
                    // The node's clamp went into the product's stores.
                    continue;
                } else {
                    // The split decided at load covers the node's whole rows (a region run in
                    // row chunks has none: `analyze` makes hints only for unchunked ones).
                    let (xs, o, hint) = match demanded {
                        Some((id, (lo, hi))) if id == out_id && hi * n <= out.len() => {
                            let xs = rd(x)?;
                            if hi * k > xs.len() {
                                return Err(bad("demanded rows outside the input"));
                            }
                            let o = &mut out[lo * n..hi * n];
                            (&xs[lo * k..hi * k], o, SplitHint::NONE)
                        }
                        _ => (rd(x)?, &mut out[..], step.split_hint()),
                    };
                    // The node's clamp goes into the product's stores.
                    if wl.kind == KIND_PACKED {
                        let packed = packed_filter(program, state, wl, k, n)?;
                        run::fully_connected_packed(xs, packed, b, o, clamp, gemm_scratch, hint)?
                    } else {
                        let w = rd(w)?;
                        let fc = run::Fc { k, n, transpose_w };
                        run::fully_connected(xs, w, b, o, fc, clamp, gemm_scratch, hint)?
                    }
                    continue;
                }
            }
            Op::BatchMatMul {
                a, b, transpose_b, ..
            } => {
                let ad = dims(a);
                let r = ad.rank();
                let (m, k) = (ad.dims()[r - 2], ad.dims()[r - 1]);
                let n = od().dims()[r - 1];
                let batch = ad.dims()[..r - 2].iter().product();
                run::batch_matmul(
                    rd(a)?,
                    rd(b)?,
                    out,
                    batch,
                    m,
                    k,
                    n,
                    transpose_b,
                    gemm_scratch,
                )?
            }
            Op::Transpose { x, perm, rank, .. } => {
                run::transpose(rd(x)?, &dims(x), &perm[..rank as usize], out)
            }
            Op::Reshape { x, .. } => crate::linalg::vecmath::copy(rd(x)?, out)?,
            Op::Slice { x, offsets, .. } => run::slice(rd(x)?, &dims(x), &offsets, out, &od()),
            Op::Concat {
                inputs, n, axis, ..
            } => {
                let mut parts: heapless::Vec<(&[f32], Shape), 5> = heapless::Vec::new();
                for &id in &inputs[..n as usize] {
                    let _ = parts.push((rd(id)?, dims(id)));
                }
                run::concat(&parts, axis as usize, out, &od())
            }
            Op::Pad { x, pre, value, .. } => run::pad(rd(x)?, &dims(x), &pre, value, out, &od()),
            Op::Conv {
                x,
                w,
                bias,
                win,
                groups,
                depthwise,
                ..
            } => {
                let b = if bias == INVALID_ID {
                    None
                } else {
                    Some(rd(bias)?)
                };
                let p = run::conv_geometry(&dims(x), &od(), &win, groups)
                    .ok_or(bad("convolution: input or output is not rank 4"))?;
                let wl = &locs[w as usize];
                if wl.kind == KIND_PACKED {
                    // A one-group filter (checked at load): B is K x OC.
                    let packed = packed_filter(program, state, wl, p.depth(), p.out_c)?;
                    let x = rd(x)?;
                    crate::linalg::conv::nhwc::conv2d_prepacked(
                        &p,
                        x,
                        packed,
                        b,
                        out,
                        clamp,
                        &mut *gemm_scratch,
                    )?;
                } else {
                    run::conv2d_nhwc(&p, rd(x)?, rd(w)?, b, out, depthwise, clamp, gemm_scratch)?;
                }
                continue;
            }
            Op::ConvTranspose {
                x,
                w,
                bias,
                win,
                groups,
                ..
            } => {
                let b = if bias == INVALID_ID {
                    None
                } else {
                    Some(rd(bias)?)
                };
                let p = run::conv_transpose_geometry(&dims(x), &od(), &win, groups)
                    .ok_or(bad("transposed convolution: input or output is not rank 4"))?;
                crate::linalg::conv::transposed::conv_transpose2d_nhwc(
                    &p,
                    rd(x)?,
                    rd(w)?,
                    b,
                    out,
                    clamp,
                    &mut *gemm_scratch,
                )?;
                continue;
            }
            Op::Pool { x, win, max, .. } => run::pool_nhwc(rd(x)?, &dims(x), out, &od(), &win, max),
            Op::GlobalAvgPool { x, .. } => run::global_avg_pool_nhwc(rd(x)?, &dims(x), out),
        }
        if let Some((lo, hi)) = clamp {
            run::clamp(out, lo, hi);
        }
    }
    Ok(())
}

/// Runs the nodes `run` of a fused run (`fuse`): binds every node's values through `locate`,
/// checks them against the run's element count, and passes each core's range of elements
/// through every node in order.
fn run_fused(
    run: &[super::step::Step],
    locate: &dyn Fn(u32) -> Result<(*mut f32, usize), KernelError>,
) -> Result<(), KernelError> {
    use super::fuse::{elementwise, run_part, Bound, Elem, MAX_RUN};
    let mut nodes = heapless::Vec::<Bound, MAX_RUN>::new();
    let mut n = 0usize;
    // Element operations per element of the run, for the split decision.
    let mut cost = 0usize;
    for s in run {
        let (op, clamp) = s.op()?;
        let (elem, ins, n_in, out) =
            elementwise(&op).ok_or(bad("fused run holds a node that is not elementwise"))?;
        let (po, no) = locate(out)?;
        if nodes.is_empty() {
            n = no;
        }
        let (a, b) = (locate(ins[0])?, locate(ins[n_in - 1])?);
        let fits = |l: usize| l == n || l == 1;
        if no != n || !fits(a.1) || !fits(b.1) || (a.1 == 1 && b.1 == 1) {
            return Err(bad("fused run's values differ in size"));
        }
        cost += match elem {
            Elem::Binary(_) => 2,
            Elem::Unary(_) => 12,
        };
        let bound = Bound {
            elem,
            a: (a.0 as *const f32, a.1),
            b: (b.0 as *const f32, b.1),
            out: po,
            clamp,
        };
        nodes
            .push(bound)
            .map_err(|_| bad("fused run longer than its limit"))?;
    }
    /// The bound nodes, shared by the parts of the step.
    struct Nodes<'a>(&'a [Bound]);
    // SAFETY: the pointers are only dereferenced by `run_part`, each part on its own range
    // of elements (see its contract, established at load by `fuse::mark`).
    unsafe impl Sync for Nodes<'_> {}
    let shared = Nodes(&nodes);
    let chunk = run::CHUNK;
    crate::parallel::for_units(n.div_ceil(chunk), chunk * cost, |lo, hi, _| {
        let shared = &shared;
        // SAFETY: every node's values hold `n` elements (or one, a scalar operand: checked
        // above); parts get disjoint unit ranges, and `fuse::mark` proved that no range of one
        // value of the run shares storage with another range of it or of another value.
        unsafe { run_part(shared.0, lo * chunk, (hi * chunk).min(n)) }
    });
    Ok(())
}

/// Multiply-adds of a product-like node (fully connected, batch matmul, convolution), for
/// profiles; 0 for the others. Saturating (the dims were checked at load).
fn macs(op: &Op, dims: &dyn Fn(u32) -> Shape, od: &Shape) -> u64 {
    let n = od.numel() as u64;
    let last = |id: u32| dims(id).dims().last().copied().unwrap_or(1) as u64;
    match *op {
        // Every output element sums one input row.
        Op::FullyConnected { x, .. } => n.saturating_mul(last(x)),
        Op::BatchMatMul { a, .. } => n.saturating_mul(last(a)),
        Op::Conv {
            x,
            win,
            groups,
            depthwise,
            ..
        } => {
            let taps = (win.kh * win.kw) as u64;
            let per = if depthwise {
                taps
            } else {
                taps.saturating_mul(last(x) / groups.max(1) as u64)
            };
            n.saturating_mul(per)
        }
        // Every input element meets every tap and output channel of its group.
        Op::ConvTranspose { x, win, groups, .. } => {
            let taps = (win.kh * win.kw) as u64;
            let ocg = od.dims().last().copied().unwrap_or(1) / groups.max(1);
            (dims(x).numel() as u64)
                .saturating_mul(taps)
                .saturating_mul(ocg as u64)
        }
        _ => 0,
    }
}
