//! `XnnpackBackend`: executes XNNPACK delegate payloads produced by stock ExecuTorch, without
//! XNNPACK, on ptera's own kernels.
//!
//! At load ([`Backend::prepare`]/[`Backend::init`]) the payload header and `XNNGraph`
//! flatbuffer are verified; every value is classified (external = DelegateCall argument,
//! constant = bytes borrowed in place from the payload or the program's named data, internal
//! = intermediate) and every node's dims are checked. Internal values get offsets from the
//! static [`crate::planner`] in the shared scratch arena; the FullyConnected/BatchMatMul GEMM
//! packs panels into a fixed [`gemm::GEMM_SCRATCH_F32`] area behind them. Weights are never
//! copied or repacked into RAM. The translated plan (one [`Loc`] per value) lives in the
//! method's metadata buffer.

mod chunk;
mod constant;
use constant::constant_offset;
mod execute;
mod fold;
mod fuse;
pub mod graph;
pub mod header;
mod plan;
mod qs8;
pub mod run;
mod step;

pub use execute::execute_plan;
use plan::*;
pub use plan::{arg_access_of, Loc, MAX_EXTERNS, MAX_NODES, MAX_VALUES};

use core::mem::size_of;

use crate::delegate::{ArgAccess, Backend, DelegateInit, Requirements};
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::kernel_api::KernelCtx;
use crate::linalg::gemm;
use crate::linalg::quant;
use crate::linalg::quant::packed::Int8Layout;
use crate::planner::{self, Interval};
use crate::shape::Shape;
use graph::{bad, last_dim, Op, INVALID_ID, MAX_DIMS};

/// The backend id programs use.
pub const ID: &str = "XnnpackBackend";

const VERIFIER: flatbuffers::VerifierOptions = flatbuffers::VerifierOptions {
    max_depth: 32,
    max_tables: 1_000_000,
    max_apparent_size: 1 << 31,
    ignore_missing_null_terminator: false,
};

/// The XNNPACK delegate backend (stateless; plans live in each method's metadata).
///
/// Two ways to treat the fp32 filters of fully-connected and one-group convolution nodes:
/// [`IN_PLACE`](Self::IN_PLACE) reads them where the program holds them (from flash or a
/// mapped file: no RAM for weights) and packs each product's panels as it runs;
/// [`PACKING`](Self::PACKING) packs them once at load into the method's metadata buffer (the
/// delegate state grows by about the filters' size; no packing per forward), as ExecuTorch's
/// XNNPACK does. Filters packed ahead by `xtask lower` are read in place either way.
pub struct XnnpackBackend {
    pack_at_load: bool,
}

impl XnnpackBackend {
    /// Filters read in place, packed per product at run time.
    pub const IN_PLACE: XnnpackBackend = XnnpackBackend {
        pack_at_load: false,
    };
    /// fp32 filters packed at load into the delegate state.
    pub const PACKING: XnnpackBackend = XnnpackBackend { pack_at_load: true };
}

/// The registry entry of [`Registry::standard`](crate::Registry::standard): filters in place.
pub static BACKEND: XnnpackBackend = XnnpackBackend::IN_PLACE;

/// The registry entry of [`Registry::packing`](crate::Registry::packing): fp32 filters packed
/// at load.
pub static BACKEND_PACKING: XnnpackBackend = XnnpackBackend::PACKING;

/// Where the bytes of a fully-connected filter come from instead of its own constant data
/// (given by ptera's own backend for the XNNPACK graphs `xtask lower` wraps): the filter's
/// named data is not looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterOverride {
    /// Graph value id of the filter.
    pub value: u32,
    /// Byte offset inside the program and the bytes available there.
    pub offset: u64,
    pub len: u64,
    /// `Some(nr)`: [`gemm::PackedB`] panels of width `nr` (exactly their size); `None`: the
    /// filter's own fp32 layout (e.g. the same bytes as a constant the program already has).
    pub nr: Option<u32>,
    /// The fp32 filter quantized ahead (`offset`/`len` are then its rows, `[N, K]` whatever
    /// the node's transpose flag): the node quantizes its input per row at run time.
    pub quant: Option<QuantFilter>,
}

pub use plan::QuantFilter;

/// The verified graph, the flatbuffer's (offset, len) and the constant region, if any.
pub type GraphParts<'a> = (xf::XNNGraph<'a>, (usize, usize), Option<(usize, usize)>);

/// The verified graph of a payload, the flatbuffer's (offset, len) inside it and the constant
/// region, if any (also for host tools such as `xtask lower`).
pub fn graph_of(payload: &[u8]) -> Result<GraphParts<'_>, KernelError> {
    let layout = header::parse(payload)?;
    let (off, len) = layout.flatbuffer;
    let fb = &payload[off..off + len];
    let id_ok = flatbuffers::buffer_has_identifier(fb, "XN01", false)
        || flatbuffers::buffer_has_identifier(fb, "XN00", false);
    if !id_ok {
        return Err(bad(
            "XNNPACK graph: bad flatbuffer identifier (expected XN01 or XN00)",
        ));
    }
    let g = flatbuffers::root_with_opts::<xf::XNNGraph>(&VERIFIER, fb)
        .map_err(|_| bad("XNNPACK graph: flatbuffer failed verification"))?;
    Ok((g, layout.flatbuffer, layout.constants))
}

/// Validates the whole region; fills `locs` (when given) and returns the requirements. With
/// `pack_at_load`, the fp32 constant filters that only fully-connected and one-group
/// convolution nodes read get [`PACKED_IN_STATE`] panels behind the column sums.
fn analyze(
    init: &DelegateInit<'_>,
    locs: Option<&mut [Loc]>,
    mut steps: Option<&mut [step::Step]>,
    packed: &[FilterOverride],
    pack_at_load: bool,
) -> Result<(Requirements, Head), KernelError> {
    let (g, _, constants) = graph_of(init.payload)?;
    let values = g.xvalues().ok_or(bad("XNNPACK graph: xvalues missing"))?;
    let nodes = g.xnodes().ok_or(bad("XNNPACK graph: xnodes missing"))?;
    let nv = values.len();
    if nv > MAX_VALUES {
        return Err(KernelError::Unsupported {
            detail: "XNNPACK region with more than 1024 values",
        });
    }
    if nodes.len() > MAX_NODES {
        return Err(KernelError::Unsupported {
            detail: "XNNPACK region with more than 4096 nodes",
        });
    }
    let num_externs = g.num_externs() as usize;
    if num_externs > MAX_EXTERNS {
        return Err(KernelError::Unsupported {
            detail: "XNNPACK region with more than 64 externals",
        });
    }
    // Pass 1: values.
    let mut ext_seen = [false; MAX_EXTERNS];
    let mut dims_tab = heapless::Vec::<Shape, MAX_VALUES>::new();
    let mut kinds = heapless::Vec::<(u32, u32, u64), MAX_VALUES>::new();
    // Per value: (element type, group, program offset of the scales, quantized ahead by an
    // override: rows `[N, K]` whatever the transpose flag).
    let mut qinfo = heapless::Vec::<(u32, u32, u64, bool), MAX_VALUES>::new();
    let base = init.program.bytes().as_ptr() as usize;
    for xv in values.iter() {
        let (t, q) = match xv.xvalue_union_type() {
            xf::XValueUnion::XNNTensorValue => (
                xv.xvalue_union_as_xnntensor_value()
                    .ok_or(bad("value body missing"))?,
                None,
            ),
            xf::XValueUnion::XNNQuantizedTensorValue => {
                let q = xv
                    .xvalue_union_as_xnnquantized_tensor_value()
                    .ok_or(bad("value body missing"))?;
                (
                    q.tensor_value()
                        .ok_or(bad("quantized value without its tensor"))?,
                    Some(q),
                )
            }
            _ => return Err(bad("XNNPACK value of unknown type")),
        };
        use xf::XNNDatatype as Dt;
        let dt = match (t.datatype(), q.is_some()) {
            (Dt::xnn_datatype_fp32, false) => DT_F32,
            (Dt::xnn_datatype_qdint8, true) => DT_QD8,
            (Dt::xnn_datatype_qcint8, true) => DT_QC8W,
            (Dt::xnn_datatype_qcint4, true) => DT_QC4W,
            (Dt::xnn_datatype_qbint4, true) => DT_QB4W,
            (Dt::xnn_datatype_qint8, true) => DT_QS8,
            (Dt::xnn_datatype_qint32 | Dt::xnn_datatype_qcint32, true) => DT_QI32,
            (Dt::xnn_datatype_fp32, true) => {
                return Err(bad("fp32 value with quantization parameters"))
            }
            _ => {
                return Err(KernelError::Unsupported {
                    detail: "XNNPACK value dtype other than fp32, qdint8, qint8, qint32, qcint8, \
                             qcint4 and qbint4",
                })
            }
        };
        let dl = t.dims().ok_or(bad("XNNPACK value without dims"))?;
        if dl.len() > MAX_DIMS || dl.len() != t.num_dims() as usize {
            return Err(bad(
                "XNNPACK value: num_dims disagrees with dims or exceeds 6",
            ));
        }
        let mut d = Shape::scalar();
        let mut numel: usize = 1;
        for x in dl.iter() {
            d.push(x as usize)
                .ok_or(bad("XNNPACK value: rank exceeds 6"))?;
            numel = numel
                .checked_mul(x as usize)
                .ok_or(bad("XNNPACK value size overflows"))?;
        }
        let overflow = || bad("XNNPACK value size overflows");
        let nbytes = match dt {
            DT_F32 | DT_QI32 => numel.checked_mul(4).ok_or_else(overflow)?,
            DT_QS8 => numel,
            DT_QD8 => {
                let rows = numel.checked_div(last_dim(&d)).unwrap_or(0);
                qd8_bytes(numel, rows).ok_or_else(overflow)?
            }
            DT_QC8W => numel,
            _ if d.rank() == 2 => d.dims()[0]
                .checked_mul(d.dims()[1].div_ceil(2))
                .ok_or_else(overflow)?,
            _ => 0, // rejected below (quantized weights are 2-D)
        };
        // Quantized values: activations live inside the graph, weights are 2-D constants
        // with their scales in named data (or inline in the graph).
        let mut qi = (dt, 0u32, 0u64, false);
        if let Some(q) = q {
            if matches!(dt, DT_QS8 | DT_QI32) {
                qi.2 = qs8::value(&t, &q)?;
            } else if dt == DT_QD8 {
                let per_row = q
                    .quant_params_as_per_token_dynamic_quant()
                    .is_some_and(|p| p.num_nonbatch_dims() == 1);
                if !per_row || t.constant_buffer_idx() != 0 || t.flags() != 0 {
                    return Err(KernelError::Unsupported {
                        detail: "qdint8 value other than an internal per-row dynamic quantization",
                    });
                }
            } else {
                // (4-D: an int8 convolution filter, OHWI.)
                let rank_ok = d.rank() == 2 || dt == DT_QC8W && d.rank() == 4;
                if !rank_ok || t.constant_buffer_idx() == 0 || t.flags() != 0 {
                    return Err(bad("quantized weights must be 2-D (or 4-D int8) constants"));
                }
                let n = d.dims()[0];
                let scale_at = |idx: u32, inline: Option<&[u8]>, bytes: usize| {
                    if idx > 0 {
                        constant_offset(init, &g, constants, idx, bytes, 1)
                    } else {
                        match inline {
                            Some(v) if v.len() >= bytes => Ok((v.as_ptr() as usize - base) as u64),
                            _ => Err(bad("quantized weights without enough scales")),
                        }
                    }
                };
                if dt == DT_QB4W {
                    let p = q
                        .quant_params_as_per_channel_group_quant()
                        .ok_or(bad("qbint4 weights without group-wise parameters"))?;
                    let grp = p.group_size();
                    let k = d.dims()[1];
                    if p.channel_dim() != 0
                        || grp <= 0
                        || grp % 2 != 0
                        || !k.is_multiple_of(grp as usize)
                        || p.num_scales() as usize != n * (k / grp as usize)
                    {
                        return Err(bad(
                            "qbint4 weights: group size or scale count disagrees with dims",
                        ));
                    }
                    let inline = p.scale_bf16().map(|v| v.bytes());
                    qi.1 = grp as u32;
                    qi.2 = scale_at(p.scale_buffer_idx(), inline, 2 * p.num_scales() as usize)?;
                } else {
                    let p = q
                        .quant_params_as_per_channel_quant()
                        .ok_or(bad("per-channel weights without per-channel parameters"))?;
                    if p.channel_dim() != 0
                        || p.num_scales() as usize != n && p.scale_buffer_idx() > 0
                    {
                        return Err(bad(
                            "per-channel weights: scale count or channel dim disagrees",
                        ));
                    }
                    let inline = p.scale().map(|v| v.bytes());
                    qi.2 = scale_at(p.scale_buffer_idx(), inline, 4 * n)?;
                }
            }
        }
        let flags = t.flags();
        if flags & !3 != 0 {
            return Err(bad("XNNPACK value with unknown flags"));
        }
        let vid = kinds.len() as u32;
        let (kind, ext, offset) = if let Some(p) = packed.iter().find(|p| p.value == vid) {
            // fp32 filters may be packed, aliased or quantized ahead; int8 and group-wise
            // 4-bit ones repacked (4-bit in their own groups).
            let repack = match p.quant {
                Some(q) if dt == DT_QC8W => q.group == 0,
                Some(q) if dt == DT_QB4W => q.layout != Int8Layout::RowMajor && q.group == qi.1,
                _ => false,
            };
            if !(dt == DT_F32 || repack)
                || t.constant_buffer_idx() == 0
                || flags != 0
                || !(dl.len() == 2 || dl.len() == 4)
            {
                return Err(bad("overridden filter is not a 2-D or 4-D constant"));
            }
            let base = init.program.bytes().as_ptr() as u64;
            if let Some(q) = p.quant {
                // Sizes are checked against the node's (n, k) in the node pass.
                if dl.len() != 2
                    || (q.group > 0
                        && (q.group % 2 != 0
                            || q.layout != Int8Layout::RowMajor && q.group % 16 != 0))
                {
                    return Err(bad(
                        "quantized filter override is not 2-D or its group is odd",
                    ));
                }
                qi = (
                    if q.group == 0 { DT_QC8W } else { DT_QB4W },
                    q.group,
                    q.scales.0,
                    true,
                );
            }
            match p.nr {
                _ if p.quant.is_some() => (KIND_CONSTANT, 0, p.offset),
                Some(nr) => (KIND_PACKED, nr, p.offset),
                None if p.len < nbytes as u64 || !(base + p.offset).is_multiple_of(4) => {
                    return Err(bad("aliased filter data too short or misaligned"))
                }
                None => (KIND_CONSTANT, 0, p.offset),
            }
        } else if t.constant_buffer_idx() > 0 {
            if flags != 0 {
                return Err(bad("XNNPACK constant marked external"));
            }
            (
                KIND_CONSTANT,
                0,
                constant_offset(
                    init,
                    &g,
                    constants,
                    t.constant_buffer_idx(),
                    nbytes,
                    if matches!(dt, DT_F32 | DT_QI32) { 4 } else { 1 },
                )?,
            )
        } else if flags != 0 {
            let ext = t.external_id();
            if ext as usize >= num_externs {
                return Err(KernelError::IndexOutOfBounds {
                    arg: 0,
                    index: ext as i64,
                    size: num_externs,
                });
            }
            if core::mem::replace(&mut ext_seen[ext as usize], true) {
                return Err(bad("XNNPACK graph: two values name the same external"));
            }
            (
                if flags & 1 != 0 {
                    KIND_EXTERNAL_IN
                } else {
                    KIND_EXTERNAL_OUT
                },
                ext,
                0,
            )
        } else {
            (KIND_INTERNAL, 0, nbytes as u64)
        };
        let _ = dims_tab.push(d);
        let _ = kinds.push((kind, ext, offset));
        let _ = qinfo.push(qi);
    }
    // A row-by-row region with large intermediates runs in chunks of rows (`chunk`).
    let chunks = chunk::plan(&nodes, &mut kinds, &mut dims_tab, &qinfo)?;
    let readers = fold::readers(&nodes)?;
    let folds = fold::scale_folds(&nodes, &kinds, &qinfo, &dims_tab, &readers)?;
    let repeats = fold::repeated_converts(&nodes, &kinds, &qinfo, &dims_tab)?;
    // Intermediates that a reshape only copies into a region output take the output's bytes.
    let forwards = match chunks.count {
        1 => fold::output_forwards(&nodes, &kinds, &qinfo, &dims_tab, &readers)?,
        _ => heapless::Vec::new(),
    };
    for &(x, out) in forwards.iter() {
        kinds[x as usize] = kinds[out as usize];
    }
    let forwarded = |i: usize| forwards.iter().any(|f| f.0 as usize == i);
    // Pass 2: nodes (decode, ids, shapes) and lifetimes of internal values.
    const UNSET: u32 = u32::MAX;
    let mut life = heapless::Vec::<Interval, MAX_VALUES>::new();
    for &(kind, _, size) in kinds.iter() {
        let mut it = Interval::new(
            if kind == KIND_INTERNAL {
                size as usize
            } else {
                0
            },
            UNSET,
            0,
        );
        it.offset = 0;
        let _ = life.push(it);
    }
    // A reshape of an internal value into an internal value is a view: the output shares
    // its root's storage (`alias`, followed through chains of reshapes), takes no space of its
    // own, and every read of it extends the root's lifetime.
    let mut alias = heapless::Vec::<u32, MAX_VALUES>::new();
    for i in 0..nv {
        let _ = alias.push(i as u32);
    }
    // External outputs: bit 0 written by a fully-connected node, bit 1 read by some node.
    let mut ext_use = heapless::Vec::<u8, MAX_VALUES>::new();
    for _ in 0..nv {
        let _ = ext_use.push(0);
    }
    // Floats of the area behind the intermediates: GEMM packing, convolution patches.
    let mut work_f32 = 0usize;
    // Filters packed at load: per value, 0 while no node has read it, LOAD_PLAIN once a
    // node needs its own layout, else the tile width, with (k, n, whether the constant is
    // stored as B = k × n rather than as its transpose) in `load_kn`.
    const LOAD_PLAIN: u32 = u32::MAX;
    let mut load_nr = heapless::Vec::<u32, MAX_VALUES>::new();
    let mut load_kn = heapless::Vec::<(usize, usize, bool), MAX_VALUES>::new();
    for _ in 0..nv {
        let _ = load_nr.push(0);
        let _ = load_kn.push((0, 0, false));
    }
    // (filter, output) of every fully-connected node reading a filter it may pack.
    let mut fc_outs = heapless::Vec::<(u32, u32), MAX_VALUES>::new();
    for (step, node) in nodes.iter().enumerate() {
        let (mut op, mut clamp) = graph::decode(node)?;
        // A multiply folded into the softmax after it: a view of its input (the softmax
        // reads that with the scale), which takes no storage and no time.
        if let Some(f) = folds.iter().find(|f| f.step as usize == step) {
            (op, clamp) = (Op::Reshape { x: f.x, out: f.y }, None);
        }
        // A value quantized again: a view of the first convert's output.
        if let Some(r) = repeats.iter().find(|r| r.step as usize == step) {
            (op, clamp) = (
                Op::Reshape {
                    x: r.first,
                    out: r.out,
                },
                None,
            );
        }
        if let (Some(f), Op::Softmax { scale, .. }) =
            (folds.iter().find(|f| f.step as usize + 1 == step), &mut op)
        {
            *scale = f.scale;
        }
        // The node table that a forward reads instead of the flatbuffer.
        if let Some(s) = steps.as_deref_mut().and_then(|t| t.get_mut(step)) {
            *s = step::Step::new(&op, clamp, node.xnode_union_type());
            // A fully-connected node's split across the team installed at load (its rows as
            // planned; a region run in row chunks decides per chunk).
            if let (
                Op::FullyConnected {
                    x, w, transpose_w, ..
                },
                1,
            ) = (op, chunks.count)
            {
                let (xd, wd) = (dims_tab.get(x as usize), dims_tab.get(w as usize));
                if let (Some(xd), Some(&[w0, w1])) = (xd, wd.map(|d| d.dims())) {
                    let (k, n) = if transpose_w { (w0, w1) } else { (w1, w0) };
                    let m = xd.numel().checked_div(k).unwrap_or(0);
                    let hint = match kinds.get(w as usize) {
                        Some(&(KIND_PACKED, nr, _)) => {
                            gemm::split_hint_prepacked(m, n, k, nr as usize)
                        }
                        _ => gemm::split_hint(m, n, k, transpose_w),
                    };
                    s.set_split_hint(hint);
                }
            }
        }
        if matches!(op, Op::FullyConnected { .. } | Op::BatchMatMul { .. }) {
            work_f32 = work_f32.max(gemm::GEMM_SCRATCH_F32);
        }
        if let Some(f) = run::conv_node_scratch_f32(&op, &|id| dims_tab.get(id as usize)) {
            work_f32 = work_f32.max(f);
        }
        let (ins, n) = op.inputs();
        let out = op.output();
        for (slot, &id) in ins[..n].iter().enumerate() {
            let Some(&(KIND_PACKED, nr, _)) = kinds.get(id as usize) else {
                continue;
            };
            let wd = dims_tab[id as usize];
            // (depth, width) of the GEMM the packed filter is B of.
            let (kk, nn) = match op {
                Op::FullyConnected { transpose_w, .. } if slot == 1 && wd.rank() == 2 => {
                    if transpose_w {
                        (wd.dims()[0], wd.dims()[1])
                    } else {
                        (wd.dims()[1], wd.dims()[0])
                    }
                }
                // A one-group convolution's `[OC, KH, KW, C]` filter as its `K × OC` matrix.
                Op::Conv {
                    groups: 1,
                    depthwise: false,
                    ..
                } if slot == 1 && wd.rank() == 4 => (wd.dims()[1..].iter().product(), wd.dims()[0]),
                _ => {
                    return Err(bad(
                        "packed filter read other than as a fully-connected or one-group convolution filter",
                    ))
                }
            };
            let want = gemm::PackedB::len_for(kk, nn, nr as usize).and_then(|f| f.checked_mul(4));
            let p = packed.iter().find(|p| p.value == id);
            if p.is_none_or(|p| Some(p.len as usize) != want) {
                return Err(bad(
                    "packed filter size does not match its dims and tile width",
                ));
            }
        }
        let optional_ok = |slot: usize| {
            matches!(
                op,
                Op::FullyConnected { .. } | Op::Conv { .. } | Op::ConvTranspose { .. }
            ) && slot == 2
        };
        for (slot, &id) in ins[..n].iter().enumerate() {
            if id == INVALID_ID && optional_ok(slot) {
                continue;
            }
            if id as usize >= nv {
                return Err(KernelError::IndexOutOfBounds {
                    arg: 0,
                    index: id as i64,
                    size: nv,
                });
            }
            if id == out {
                return Err(bad("XNNPACK node reads its own output"));
            }
            let (kind, _, _) = kinds[id as usize];
            if kind == KIND_EXTERNAL_OUT {
                ext_use[id as usize] |= 2;
            }
            if kind == KIND_INTERNAL {
                let l = &mut life[id as usize];
                if l.first == UNSET {
                    return Err(bad("XNNPACK node reads a value before it is written"));
                }
                l.last = step as u32;
                life[alias[id as usize] as usize].last = step as u32;
            }
        }
        if out as usize >= nv {
            return Err(KernelError::IndexOutOfBounds {
                arg: 0,
                index: out as i64,
                size: nv,
            });
        }
        match kinds[out as usize].0 {
            KIND_CONSTANT | KIND_PACKED | KIND_EXTERNAL_IN => {
                return Err(bad("XNNPACK node writes a constant or an input"))
            }
            KIND_INTERNAL => {
                let l = &mut life[out as usize];
                if l.first != UNSET {
                    return Err(bad("XNNPACK value written twice"));
                }
                l.first = step as u32;
                l.last = step as u32;
            }
            _ => {
                if matches!(op, Op::FullyConnected { .. }) {
                    ext_use[out as usize] |= 1;
                }
            }
        }
        graph::check_shapes(&op, &|id| dims_tab[id as usize])?;
        if pack_at_load {
            let (ins, n_in) = op.inputs();
            for (slot, &id) in ins[..n_in].iter().enumerate() {
                let i = id as usize;
                let plain_f32 = i < nv
                    && kinds[i].0 == KIND_CONSTANT
                    && qinfo[i].0 == DT_F32
                    && !packed.iter().any(|p| p.value == id);
                if !plain_f32 {
                    continue;
                }
                let wd = dims_tab[i];
                // (k, n, stored as B, rows of the products) of the GEMM this filter is B of.
                let gemm_use = match op {
                    Op::FullyConnected {
                        x,
                        transpose_w,
                        out,
                        ..
                    } if slot == 1 && wd.rank() == 2 => {
                        if fc_outs.push((id, out)).is_err() {
                            load_nr[i] = LOAD_PLAIN;
                            continue;
                        }
                        let (k, n) = if transpose_w {
                            (wd.dims()[0], wd.dims()[1])
                        } else {
                            (wd.dims()[1], wd.dims()[0])
                        };
                        Some((k, n, transpose_w, dims_tab[x as usize].numel() / k.max(1)))
                    }
                    Op::Conv {
                        x,
                        out,
                        win,
                        groups: 1,
                        depthwise: false,
                        ..
                    } if slot == 1 && wd.rank() == 4 => {
                        run::conv_geometry(&dims_tab[x as usize], &dims_tab[out as usize], &win, 1)
                            .map(|p| {
                                let rows = crate::linalg::conv::nhwc::chunk_rows(&p);
                                (p.depth(), p.out_c, false, rows)
                            })
                    }
                    _ => None,
                };
                load_nr[i] = match gemm_use {
                    Some((k, n, t, _)) if load_nr[i] != 0 && load_kn[i] == (k, n, t) => load_nr[i],
                    Some((k, n, t, m)) if load_nr[i] == 0 => {
                        load_kn[i] = (k, n, t);
                        gemm::prepack_nr(m, n, k) as u32
                    }
                    _ => LOAD_PLAIN,
                };
            }
        }
        let dt_of = |id: u32| qinfo.get(id as usize).map_or(DT_F32, |q| q.0);
        let dtypes_ok = match op {
            _ if qs8::involved(&op, &dt_of) => qs8::node_ok(&op, &dt_of, &dims_tab),
            Op::Unary {
                op: graph::Unary::Copy,
                x,
                out,
            } => dt_of(x) == DT_F32 && matches!(dt_of(out), DT_F32 | DT_QD8),
            // A repeated convert's view of the first one's output (`fold::repeated_converts`).
            Op::Reshape { x, out }
                if dt_of(x) == DT_QD8
                    && repeats
                        .iter()
                        .any(|r| r.step as usize == step && r.first == x) =>
            {
                dt_of(out) == DT_QD8
            }
            Op::FullyConnected {
                x,
                w,
                bias,
                out,
                transpose_w,
            } => {
                let fp = dt_of(out) == DT_F32 && dt_of(bias) == DT_F32;
                let ahead = qinfo.get(w as usize).is_some_and(|q| q.3);
                // Filters packed for the SME2 `SMOPA` tile or the int8 `SMMLA` tile pack their
                // activations in the work area (behind the quantized rows of a filter
                // quantized ahead).
                let za = match packed.iter().find(|p| p.value == w).and_then(|p| p.quant) {
                    Some(QuantFilter { layout, .. })
                        if matches!(layout, Int8Layout::PNx4(_) | Int8Layout::P8x8) =>
                    {
                        let wd = dims_tab[w as usize].dims();
                        let k = if transpose_w { wd.first() } else { wd.get(1) };
                        let k = k.copied().unwrap_or(0);
                        let rows = dims_tab[x as usize].numel() / k.max(1);
                        match layout {
                            Int8Layout::PNx4(nb) => quant::pnx4_scratch_f32(rows, k, nb),
                            _ => quant::p8x8_scratch_f32(rows, k),
                        }
                        .saturating_add(16)
                    }
                    _ => 0,
                };
                work_f32 = work_f32.max(za);
                match dt_of(w) {
                    DT_F32 => fp && dt_of(x) == DT_F32,
                    DT_QC8W | DT_QC4W | DT_QB4W if ahead => {
                        let wd = dims_tab[w as usize];
                        let (n, k) = if transpose_w {
                            (wd.dims()[1], wd.dims()[0])
                        } else {
                            (wd.dims()[0], wd.dims()[1])
                        };
                        let o = packed.iter().find(|p| p.value == w);
                        let sizes_ok = o
                            .and_then(|o| o.quant.map(|q| (o.len, q)))
                            .is_some_and(|(len, q)| q.sizes_fit(len, n, k));
                        if !sizes_ok {
                            return Err(bad(
                                "quantized filter override sizes disagree with the node's dims",
                            ));
                        }
                        // fp32 input: quantized per row into the work area at run time.
                        let rows = dims_tab[x as usize].numel() / k.max(1);
                        let need = qd8_bytes(rows * k, rows).unwrap_or(usize::MAX);
                        work_f32 = work_f32.max((need.div_ceil(4) + 16).saturating_add(za));
                        fp && matches!(dt_of(x), DT_F32 | DT_QD8)
                    }
                    DT_QC8W | DT_QC4W | DT_QB4W => fp && dt_of(x) == DT_QD8 && !transpose_w,
                    _ => false,
                }
            }
            _ => {
                let (ins, n) = op.inputs();
                ins[..n].iter().all(|&i| dt_of(i) == DT_F32) && dt_of(op.output()) == DT_F32
            }
        };
        if !dtypes_ok {
            return Err(KernelError::Unsupported {
                detail: "XNNPACK node with quantized operands other than a dynamic-quantization \
                         convert or a quantized fully-connected product",
            });
        }
        if let Op::Reshape { x, .. } = op {
            let (xk, xe, xo) = kinds[x as usize];
            if xk == KIND_INTERNAL && kinds[out as usize].0 == KIND_INTERNAL {
                let root = alias[x as usize];
                alias[out as usize] = root;
                life[out as usize].size = 0;
                life[root as usize].last = step as u32;
            } else if matches!(xk, KIND_EXTERNAL_IN | KIND_CONSTANT)
                && kinds[out as usize].0 == KIND_INTERNAL
                && qinfo[x as usize].0 == DT_F32
            {
                // A reshape of a region input or of a constant into an intermediate: the
                // intermediate is read-only (nodes write only their own outputs, and this one
                // is written here), so it becomes another name of the same bytes (the node is
                // skipped at run time: same pointer) and takes no scratch.
                kinds[out as usize] = (xk, xe, xo);
                life[out as usize] = Interval::new(0, 0, 0);
            }
        }
    }
    for l in life.iter_mut() {
        if l.first == UNSET {
            // Never written: takes no space (reading it was rejected above).
            *l = Interval::new(0, 0, 0);
        }
    }
    let mut order = heapless::Vec::<u32, MAX_VALUES>::new();
    for _ in 0..life.len() {
        let _ = order.push(0);
    }
    let too_big = || bad("XNNPACK region: intermediate values exceed the address space");
    let planned = planner::plan(&mut life, &mut order, 16).ok_or_else(too_big)?;
    let gemm_off = planned.div_ceil(64).checked_mul(64).ok_or_else(too_big)?;
    let scratch = work_f32
        .checked_mul(4)
        .and_then(|w| w.checked_add(gemm_off))
        .ok_or_else(too_big)?;
    let head = Head {
        n_values: nv as u32,
        num_externs: num_externs as u32,
        n_steps: nodes.len() as u32,
        chunks: chunks.count as u32,
        gemm_off: gemm_off as u64,
        n_sums: 0,
    };
    // Column sums of the quantized filters: one f32 per output channel, in value order.
    let sums_of = |i: usize| -> u64 {
        let q = qinfo[i];
        if q.3 {
            // Quantized ahead: its column sums come with it.
            let o = packed.iter().find(|p| p.value == i as u32);
            o.and_then(|o| o.quant).map_or(0, |q| q.sums.1 / 4)
        } else if matches!(q.0, DT_QC8W | DT_QC4W | DT_QB4W) {
            dims_tab[i].dims().first().copied().unwrap_or(0) as u64
        } else {
            0
        }
    };
    // A product whose output only the program reads may compute just the rows it reads
    // ([`ROWS_LOCAL`], e.g. a language model head's last row): one row goes to the GEMV,
    // which streams the filter's own rows faster than it walks panels. Such filters stay.
    for &(w, out) in fc_outs.iter() {
        if ext_use[out as usize] == 1 {
            load_nr[w as usize] = LOAD_PLAIN;
        }
    }
    let mut head = head;
    head.n_sums = (0..nv).map(sums_of).sum();
    // Filters packed at load: their panels one after another behind the column sums, each
    // 64-byte rounded; (state offset, bytes) per value.
    let n_steps = nodes.len();
    let mut state_end = state_bytes(nv, n_steps, num_externs, head.n_sums as usize);
    let mut load_at = heapless::Vec::<(usize, usize), MAX_VALUES>::new();
    let mut next = packed_area_start(nv, n_steps, num_externs, head.n_sums as usize);
    for i in 0..nv {
        let nr = load_nr[i];
        let (k, n, _) = load_kn[i];
        let bytes = match nr {
            0 | LOAD_PLAIN => None,
            _ => gemm::PackedB::len_for(k, n, nr as usize).and_then(|f| f.checked_mul(4)),
        };
        let _ = load_at.push(match bytes {
            Some(b) => {
                let at = next;
                next = next
                    .checked_add(b)
                    .and_then(|e| e.checked_next_multiple_of(64))
                    .ok_or_else(too_big)?;
                state_end = next;
                (at, b)
            }
            None => (0, 0),
        });
    }
    if let Some(locs) = locs {
        let mut sums_at = 0u64;
        for i in 0..nv {
            let (kind, ext, offset) = kinds[i];
            let d = dims_tab[i];
            let mut dims = [0u32; MAX_DIMS];
            for (dk, &v) in dims.iter_mut().zip(d.dims()) {
                *dk = v as u32;
            }
            let (at, bytes) = load_at[i];
            if bytes > 0 {
                // Packed at load (the plain fp32 constant it comes from stays in `aux`).
                locs[i] = Loc {
                    kind: KIND_PACKED,
                    ext: load_nr[i],
                    offset: at as u64,
                    rank: d.rank() as u32,
                    dims,
                    flags: PACKED_IN_STATE,
                    dt: DT_F32,
                    group: load_kn[i].2 as u32,
                    aux: offset,
                    sums: 0,
                    numel: d.numel() as u64,
                };
                continue;
            }
            locs[i] = Loc {
                kind,
                ext,
                offset: if kind == KIND_INTERNAL {
                    life[alias[i] as usize].offset as u64
                } else {
                    offset
                },
                rank: d.rank() as u32,
                dims,
                flags: if ext_use[i] == 1 { ROWS_LOCAL } else { 0 }
                    | if forwarded(i) { FORWARDED } else { 0 }
                    | match kind {
                        KIND_EXTERNAL_IN | KIND_EXTERNAL_OUT if chunks.is_chunked(i) => ROW_CHUNKED,
                        _ => 0,
                    }
                    | if qinfo[i].3 { QUANT_AHEAD } else { 0 }
                    | match packed
                        .iter()
                        .find(|p| p.value == i as u32)
                        .and_then(|p| p.quant)
                    {
                        Some(q) => layout_flags(q.layout),
                        None => 0,
                    },
                dt: qinfo[i].0,
                group: qinfo[i].1,
                aux: qinfo[i].2,
                sums: sums_at,
                // An external's whole tensor (its dims are one chunk's).
                numel: match kind {
                    KIND_EXTERNAL_IN | KIND_EXTERNAL_OUT if chunks.is_chunked(i) => {
                        d.numel().saturating_mul(chunks.count) as u64
                    }
                    _ => d.numel() as u64,
                },
            };
            sums_at += sums_of(i);
        }
        // Runs of elementwise nodes, as one parallel step each (`fuse`).
        if let Some(steps) = steps {
            fuse::mark(steps, locs, chunks.count);
        }
    }
    Ok((
        Requirements {
            state: state_end,
            scratch,
        },
        head,
    ))
}

impl Backend for XnnpackBackend {
    fn id(&self) -> &'static str {
        ID
    }

    fn prepare(&self, init: &DelegateInit<'_>) -> Result<Requirements, KernelError> {
        analyze(init, None, None, &[], self.pack_at_load).map(|r| r.0)
    }

    fn init(&self, init: &DelegateInit<'_>, state: &mut [u8]) -> Result<(), KernelError> {
        init_with(init, state, &[], self.pack_at_load)
    }

    fn execute(
        &self,
        init: &DelegateInit<'_>,
        state: &[u8],
        ctx: &mut KernelCtx<'_, '_, '_>,
    ) -> Result<(), KernelError> {
        execute_plan(init, state, ctx)
    }

    /// As [`arg_access_of`].
    fn arg_access(&self, _: &DelegateInit<'_>, state: &[u8], arg: usize) -> ArgAccess {
        arg_access_of(state, arg)
    }
}

/// [`Backend::prepare`] of a graph whose fully-connected filters `packed` are given as
/// pre-packed panels.
pub fn prepare_packed(
    init: &DelegateInit<'_>,
    packed: &[FilterOverride],
) -> Result<Requirements, KernelError> {
    analyze(init, None, None, packed, false).map(|r| r.0)
}

/// [`Backend::init`] with pre-packed filters (the same `packed` as [`prepare_packed`]).
pub fn init_packed(
    init: &DelegateInit<'_>,
    state: &mut [u8],
    packed: &[FilterOverride],
) -> Result<(), KernelError> {
    init_with(init, state, packed, false)
}

fn init_with(
    init: &DelegateInit<'_>,
    state: &mut [u8],
    packed: &[FilterOverride],
    pack_at_load: bool,
) -> Result<(), KernelError> {
    let g = graph_of(init.payload)?.0;
    let n = g.xvalues().map_or(0, |v| v.len());
    let ns = g.xnodes().map_or(0, |v| v.len());
    let ne = g.num_externs() as usize;
    if n > MAX_VALUES
        || ns > MAX_NODES
        || ne > MAX_EXTERNS
        || state.len() < state_bytes(n, ns, ne, 0)
        || !(state.as_ptr() as usize).is_multiple_of(16)
    {
        return Err(bad("XNNPACK state area too small or misaligned"));
    }
    // SAFETY: `state` is exclusively borrowed, 16-aligned and holds state_bytes(n, ns, ne, 0)
    // bytes (checked); Loc and Step are repr(C) plain data, so writing them through properly
    // aligned pointers is sound: Locs at offset 32 (8-byte alignment), Steps behind them at
    // steps_at(n) = 32 + 80·n (Step needs 4); the two tables are disjoint.
    let (locs, steps) = unsafe {
        let p = state.as_mut_ptr().add(size_of::<Head>()) as *mut Loc;
        for i in 0..n {
            p.add(i).write(Loc::default());
        }
        let q = state.as_mut_ptr().add(steps_at(n)) as *mut step::Step;
        for i in 0..ns {
            q.add(i).write(step::Step::default());
        }
        (
            core::slice::from_raw_parts_mut(p, n),
            core::slice::from_raw_parts_mut(q, ns),
        )
    };
    let (req, head) = analyze(init, Some(&mut *locs), Some(steps), packed, pack_at_load)?;
    // `req.state` covers header, tables, column sums and the filters packed at load.
    if state.len() < req.state {
        return Err(bad("XNNPACK state area too small"));
    }
    // The externals table: argument → the one value naming it (`analyze` refused two).
    let mut externs = [NO_VALUE; MAX_EXTERNS];
    for (i, l) in locs.iter().enumerate() {
        if matches!(l.kind, KIND_EXTERNAL_IN | KIND_EXTERNAL_OUT) && l.flags & FORWARDED == 0 {
            if let Some(e) = externs.get_mut(l.ext as usize) {
                *e = i as u32;
            }
        }
    }
    let table = externs_at(n, ns);
    for (e, &id) in externs[..ne].iter().enumerate() {
        let at = table + e * size_of::<u32>();
        state
            .get_mut(at..at + size_of::<u32>())
            .ok_or(bad("XNNPACK state area too small"))?
            .copy_from_slice(&id.to_ne_bytes());
    }
    // Behind the value table: the quantized filters' column sums, then the filters packed at
    // load.
    let program = init.program.bytes();
    let sums_off = sums_at(n, ns, ne);
    for i in 0..n {
        // SAFETY: Loc i was written by `analyze` above (same area, offset 32 + 80·i).
        let l = unsafe { *(state.as_ptr().add(size_of::<Head>()) as *const Loc).add(i) };
        if l.flags & PACKED_IN_STATE != 0 {
            pack_at_load_into(program, &l, state)?;
            continue;
        }
        if !matches!(l.dt, DT_QC8W | DT_QC4W | DT_QB4W) {
            continue;
        }
        let at = sums_off + l.sums as usize * size_of::<f32>();
        if l.flags & QUANT_AHEAD != 0 {
            // Column sums written by the lowering: copied (sizes checked by `analyze`).
            let q = packed
                .iter()
                .find(|p| p.value == i as u32)
                .and_then(|p| p.quant)
                .ok_or(bad("quantized filter override missing"))?;
            let src = usize::try_from(q.sums.0)
                .ok()
                .and_then(|o| program.get(o..o.checked_add(q.sums.1 as usize)?))
                .ok_or(bad("quantized filter sums outside the program"))?;
            state
                .get_mut(at..at + src.len())
                .ok_or(bad("XNNPACK state area too small"))?
                .copy_from_slice(src);
            continue;
        }
        let d = l.dims();
        let &[rows, k] = d.dims() else {
            continue; // a 4-D int8 convolution filter: no sums (its products are QS8)
        };
        let qw = execute::quant_weights(program, &l, rows, k)?;
        // SAFETY: the sums table lies inside the checked `req.state` bytes (which cover
        // state_bytes(n, ns, ne, head.n_sums)); its entries for this filter, [sums, sums + rows),
        // are within head.n_sums (assigned in order by `analyze`); 4-byte aligned (sums_off is a
        // multiple of 8); no other live borrow.
        let out = unsafe {
            core::slice::from_raw_parts_mut(state.as_mut_ptr().add(at) as *mut f32, rows)
        };
        quant::column_sums(&qw, rows, k, out)?;
    }
    // SAFETY: offset 0 of the same checked, 16-aligned area; Head is repr(C) plain data.
    unsafe { (state.as_mut_ptr() as *mut Head).write(head) };
    Ok(())
}

/// Packs the fp32 constant behind a [`PACKED_IN_STATE`] filter's `Loc::aux` into its panels at
/// `Loc::offset` in the state area (placed and sized by `analyze`).
fn pack_at_load_into(program: &[u8], l: &Loc, state: &mut [u8]) -> Result<(), KernelError> {
    let d = l.dims();
    // `analyze` packs 2-D fully-connected filters (`[N, K]`, or `[K, N]` when its node
    // transposes) and 4-D one-group convolution filters (`[OC, KH, KW, C]`, B = K × OC).
    let (rows, cols) = match *d.dims() {
        [a, b] => (a, b),
        [oc, ..] => (oc, d.numel() / oc.max(1)),
        _ => return Err(bad("filter packed at load is not 2-D or 4-D")),
    };
    let nr = l.ext as usize;
    let src = usize::try_from(l.aux)
        .ok()
        .and_then(|o| program.get(o..o.checked_add(rows.checked_mul(cols)?.checked_mul(4)?)?))
        .and_then(run::as_f32)
        .ok_or(bad(
            "filter packed at load outside the program or misaligned",
        ))?;
    let plain = gemm::MatRef::row_major(src, rows, cols)?;
    // B is k × n: a filter stored `[N, K]` is B transposed; the transposed fully-connected
    // filter (`[K, N]`, `Loc::group` 1) is B itself.
    let b = if l.group == 1 { plain } else { plain.t() };
    let (k, nn) = (b.rows(), b.cols());
    let len = gemm::PackedB::len_for(k, nn, nr).ok_or(bad("packed filter too large"))?;
    let at = l.offset as usize;
    let end = at
        .checked_add(len * 4)
        .ok_or(bad("packed filter too large"))?;
    let dst = state
        .get_mut(at..end)
        .ok_or(bad("XNNPACK state area too small"))?;
    // SAFETY: `dst` is an exclusively borrowed part of the state area, 4-byte aligned (the
    // area is 16-aligned and `at` a multiple of 64) and `len` floats long; f32 is plain
    // data with every bit pattern valid.
    let dst = unsafe { core::slice::from_raw_parts_mut(dst.as_mut_ptr() as *mut f32, len) };
    gemm::pack_b_ahead(b, nr, dst)
}

/// What `xtask inspect` shows about one region.
pub struct RegionSummary<'p> {
    graph: xf::XNNGraph<'p>,
    /// Load-time requirements (scratch includes the GEMM packing area).
    pub requirements: Requirements,
}

impl<'p> RegionSummary<'p> {
    /// Validates the region like loading does and summarises it.
    pub fn new(init: &DelegateInit<'p>) -> Result<RegionSummary<'p>, KernelError> {
        let (requirements, _) = analyze(init, None, None, &[], false)?;
        let (graph, _, _) = graph_of(init.payload)?;
        Ok(RegionSummary {
            graph,
            requirements,
        })
    }

    /// Node type names in graph order (`XNNFullyConnected`, `XNNAdd`, ...).
    pub fn node_types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.graph
            .xnodes()
            .into_iter()
            .flatten()
            .map(|n| graph::node_name(n.xnode_union_type()))
    }

    /// External values: (DelegateCall argument index, is_input, dims), in argument order.
    pub fn externals(&self) -> impl Iterator<Item = (u32, bool, Shape)> + '_ {
        let mut v: heapless::Vec<(u32, bool, Shape), MAX_EXTERNS> = heapless::Vec::new();
        for xv in self.graph.xvalues().into_iter().flatten() {
            if let Some(t) = xv.xvalue_union_as_xnntensor_value() {
                if t.flags() & 3 != 0 && t.constant_buffer_idx() == 0 {
                    let mut d = Shape::scalar();
                    for x in t.dims().into_iter().flatten().take(MAX_DIMS) {
                        let _ = d.push(x as usize); // ≤ MAX_DIMS < MAX_RANK dims
                    }
                    let _ = v.push((t.external_id(), t.flags() & 1 != 0, d));
                }
            }
        }
        v.sort_unstable_by_key(|e| e.0);
        v.into_iter()
    }

    /// Bytes of constants the region reads in place (from named data or its payload).
    pub fn constant_count(&self) -> usize {
        self.graph
            .xvalues()
            .into_iter()
            .flatten()
            .filter(|v| {
                v.xvalue_union_as_xnntensor_value()
                    .is_some_and(|t| t.constant_buffer_idx() > 0)
            })
            .count()
    }
}

#[cfg(test)]
mod tests;
