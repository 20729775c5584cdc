//! XNNPACK regions of an input program: which fully-connected filters can be packed ahead.
//!
//! Every `XnnpackBackend` delegate becomes a `PteraBackend` region that wraps the unchanged
//! XNNPACK payload (`XnnGraph` in `schema/ptera.fbs`). A filter is packed when it is an fp32
//! constant stored in the program's named data and read only as the filter of
//! fully-connected nodes (2-D) or of one-group convolutions (4-D `[OC, KH, KW, C]`, packed as
//! the `K × OC` matrix their implicit GEMM multiplies by); its named-data blob is dropped when
//! no other value refers to it.

use std::collections::BTreeMap;

use ptera::delegate::xnnpack::graph::{self, Op};
use ptera::delegate::xnnpack::graph_of;
use ptera::format::fb;
use ptera::format::generated::xnnpack::fb_xnnpack as xf;
use ptera::Program;

use crate::partition::Orient;

/// A filter to pack.
#[derive(Clone, Debug)]
pub struct Filter {
    /// Graph value id.
    pub value: u32,
    pub key: String,
    pub orient: Orient,
    pub k: usize,
    pub n: usize,
    /// Most rows of a product reading it (the fully-connected input's rows, the
    /// convolution's output pixels): the tile width may depend on them.
    pub m: usize,
    /// A one-group convolution's filter (else a fully-connected node's).
    pub conv: bool,
}

/// One XNNPACK delegate of a method.
#[derive(Clone, Debug)]
pub struct Region {
    /// Index in `ExecutionPlan.delegates`.
    pub delegate: usize,
    /// Segment holding its payload.
    pub segment: u32,
    pub filters: Vec<Filter>,
    /// Fully-connected nodes, and how many of them read a packed filter.
    pub fc_nodes: usize,
    /// One-group, non-depthwise convolutions (their filters may be packed too).
    pub conv_nodes: usize,
    /// Other node kinds and their counts (what the region holds around its products).
    pub nodes: BTreeMap<&'static str, usize>,
    /// Stock quantized filters of fully-connected nodes repacked for lane-indexed SDOT: int8
    /// per-channel (`qcint8`, as `qc8w_p4x4`) and 4-bit group-wise (`qbint4`, as
    /// `qb4w_p4x4`).
    pub stock: Vec<StockFilter>,
}

/// A stock quantized filter read only as the `[N, K]` filter of fully-connected nodes, its
/// rows and its scales in named data: `qcint8` (`group` 0, fp32 scales `[N]`, `K % 16 == 0`)
/// or `qbint4` (bf16 scales `[N, K / group]`, `group % 16 == 0`).
#[derive(Clone, Debug)]
pub struct StockFilter {
    pub value: u32,
    pub key: String,
    pub scales_key: String,
    pub k: usize,
    pub n: usize,
    pub group: usize,
}

/// The XNNPACK regions of `plan` and, per named-data key, how many graph values (in these
/// regions) refer to it.
pub fn regions(
    program: &Program<'_>,
    plan: fb::ExecutionPlan<'_>,
    key_refs: &mut BTreeMap<String, usize>,
) -> Result<Vec<Region>, String> {
    let mut out = Vec::new();
    for (d, del) in plan.delegates().unwrap_or_default().iter().enumerate() {
        if del.id() != Some(ptera::delegate::xnnpack::ID) {
            continue;
        }
        let processed = del
            .processed()
            .ok_or_else(|| format!("delegate {d}: no payload reference"))?;
        if processed.location() != fb::DataLocation::SEGMENT {
            return Err(format!(
                "delegate {d}: inline XNNPACK payloads are not lowered"
            ));
        }
        let payload = program
            .delegate_data(processed)
            .map_err(|e| format!("delegate {d}: {e}"))?;
        let (g, _, _) = graph_of(payload).map_err(|e| format!("delegate {d}: {e}"))?;
        let values = g.xvalues().unwrap_or_default();
        let table = g.constant_data();
        let tensor = |id: u32| {
            let i = id as usize;
            (i < values.len())
                .then(|| values.get(i))
                .and_then(|v| v.xvalue_union_as_xnntensor_value())
        };
        let key_of = |t: &xf::XNNTensorValue<'_>| {
            let idx = t.constant_buffer_idx() as usize;
            if idx == 0 {
                return None;
            }
            let table = table?;
            (idx < table.len())
                .then(|| table.get(idx))
                .and_then(|e| e.named_key())
                .map(str::to_string)
        };
        for i in 0..values.len() {
            // Quantized values' data counts too (they are never packed here).
            let any = tensor(i as u32).or_else(|| {
                values
                    .get(i)
                    .xvalue_union_as_xnnquantized_tensor_value()
                    .and_then(|q| q.tensor_value())
            });
            if let Some(key) = any.as_ref().and_then(key_of) {
                *key_refs.entry(key).or_default() += 1;
            }
        }
        // Readers of every value: (as FC filter with orientation) or anything else.
        let mut filter_use: BTreeMap<u32, Option<(Orient, bool)>> = BTreeMap::new();
        // Most product rows reading each filter.
        let mut filter_rows: BTreeMap<u32, usize> = BTreeMap::new();
        let dims_of = |id: u32| -> Vec<usize> {
            tensor(id)
                .and_then(|t| t.dims())
                .map(|d| d.iter().map(|x| x as usize).collect())
                .unwrap_or_default()
        };
        // Elements of a value over its last dimension (its rows as a matrix).
        let rows_of = |id: u32| -> usize {
            let d = dims_of(id);
            match d.split_last() {
                Some((&last, _)) if last > 0 => d.iter().product::<usize>() / last,
                _ => 0,
            }
        };
        let is_qint8 = |id: u32| {
            let i = id as usize;
            (i < values.len())
                .then(|| values.get(i))
                .and_then(|v| v.xvalue_union_as_xnnquantized_tensor_value())
                .and_then(|q| q.tensor_value())
                .is_some_and(|t| t.datatype() == xf::XNNDatatype::xnn_datatype_qint8)
        };
        let mut other_use: Vec<u32> = Vec::new();
        let mut nodes: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut fc_nodes, mut conv_nodes) = (0, 0);
        for node in g.xnodes().unwrap_or_default().iter() {
            *nodes
                .entry(graph::node_name(node.xnode_union_type()))
                .or_default() += 1;
            let (op, _) = graph::decode(node).map_err(|e| format!("delegate {d}: {e}"))?;
            let (ins, n) = op.inputs();
            // Filters read as a GEMM's B: fully-connected (either way) and one-group,
            // non-depthwise convolutions (`[OC, KH, KW, C]`, B = its `[OC, K]` view transposed).
            let filter = match op {
                // A statically quantized product (int8 input) reads its int8 filter row-major
                // (as any other reader: never repacked).
                Op::FullyConnected { x, .. } if is_qint8(x) => {
                    fc_nodes += 1;
                    None
                }
                Op::FullyConnected {
                    x, w, transpose_w, ..
                } => {
                    fc_nodes += 1;
                    let e = filter_rows.entry(w).or_default();
                    *e = (*e).max(rows_of(x));
                    let o = if transpose_w {
                        Orient::KxN
                    } else {
                        Orient::NxK
                    };
                    Some((w, o, false))
                }
                Op::Conv {
                    w,
                    out,
                    groups: 1,
                    depthwise: false,
                    ..
                } => {
                    conv_nodes += 1;
                    let e = filter_rows.entry(w).or_default();
                    *e = (*e).max(rows_of(out));
                    Some((w, Orient::NxK, true))
                }
                _ => None,
            };
            match filter {
                Some((w, o, conv)) => {
                    let e = filter_use.entry(w).or_insert(Some((o, conv)));
                    if *e != Some((o, conv)) {
                        *e = None;
                    }
                    other_use.extend(ins[..n].iter().copied().filter(|&i| i != w));
                }
                None => other_use.extend(ins[..n].iter().copied()),
            }
        }
        // Stock int8 filters: qcint8 values read only as non-transposed FC filters.
        let key_at = |idx: u32| -> Option<String> {
            let table = table?;
            let idx = idx as usize;
            (idx > 0 && idx < table.len())
                .then(|| table.get(idx))
                .and_then(|e| e.named_key())
                .map(str::to_string)
        };
        let mut fc_transposed: Vec<u32> = Vec::new();
        for node in g.xnodes().unwrap_or_default().iter() {
            if let Ok((
                Op::FullyConnected {
                    w,
                    transpose_w: true,
                    ..
                },
                _,
            )) = graph::decode(node)
            {
                fc_transposed.push(w);
            }
        }
        let mut stock = Vec::new();
        for (&value, orient) in &filter_use {
            if orient.is_none() || other_use.contains(&value) || fc_transposed.contains(&value) {
                continue;
            }
            let Some(q) = ((value as usize) < values.len())
                .then(|| values.get(value as usize))
                .and_then(|v| v.xvalue_union_as_xnnquantized_tensor_value())
            else {
                continue;
            };
            let Some(t) = q.tensor_value() else { continue };
            let dims: Vec<usize> = t
                .dims()
                .map(|d| d.iter().map(|x| x as usize).collect())
                .unwrap_or_default();
            if dims.len() != 2 || dims.contains(&0) {
                continue;
            }
            let (n, k) = (dims[0], dims[1]);
            // (scales buffer, group) of the two repackable kinds.
            let found = match t.datatype() {
                xf::XNNDatatype::xnn_datatype_qcint8 => q
                    .quant_params_as_per_channel_quant()
                    .filter(|pc| {
                        k.is_multiple_of(16)
                            && pc.channel_dim() == 0
                            && pc.num_scales() as usize == n
                    })
                    .map(|pc| (pc.scale_buffer_idx(), 0)),
                xf::XNNDatatype::xnn_datatype_qbint4 => q
                    .quant_params_as_per_channel_group_quant()
                    .filter(|pg| {
                        let g = pg.group_size() as usize;
                        pg.channel_dim() == 0
                            && ptera::linalg::quant::packed::packs4(k, g)
                            && pg.num_scales() as usize == n * (k / g)
                    })
                    .map(|pg| (pg.scale_buffer_idx(), pg.group_size() as usize)),
                _ => None,
            };
            let Some((scales_idx, group)) = found else {
                continue;
            };
            let (Some(key), Some(scales_key)) =
                (key_at(t.constant_buffer_idx()), key_at(scales_idx))
            else {
                continue;
            };
            stock.push(StockFilter {
                value,
                key,
                scales_key,
                k,
                n,
                group,
            });
        }
        let mut filters = Vec::new();
        for (&value, orient) in &filter_use {
            let Some((orient, conv)) = *orient else {
                continue;
            };
            if other_use.contains(&value) {
                continue;
            }
            let Some(t) = tensor(value) else { continue };
            if t.datatype() != xf::XNNDatatype::xnn_datatype_fp32 {
                continue;
            }
            let dims: Vec<usize> = t
                .dims()
                .map(|d| d.iter().map(|x| x as usize).collect())
                .unwrap_or_default();
            let Some(key) = key_of(&t) else { continue };
            if dims.len() != if conv { 4 } else { 2 } || dims.contains(&0) {
                continue;
            }
            let (k, n) = match orient {
                Orient::NxK => (dims[1..].iter().product(), dims[0]),
                Orient::KxN => (dims[0], dims[1]),
            };
            filters.push(Filter {
                value,
                key,
                orient,
                k,
                n,
                m: filter_rows.get(&value).copied().unwrap_or(0),
                conv,
            });
        }
        out.push(Region {
            delegate: d,
            segment: processed.index(),
            filters,
            fc_nodes,
            conv_nodes,
            nodes,
            stock,
        });
    }
    Ok(out)
}

/// An XNNPACK region that computes every row of its one output from the same row of its one
/// input: its nodes are fully-connected products (constant filter and bias), unary and
/// binary elementwise operators (constants broadcast along the rows) and dynamic row
/// quantizations, and every other value it names has the same `rows` (leading dimensions 1).
/// A language model's head is one: `Convert` + `FullyConnected`, or the product alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowRegion {
    /// Delegate-call argument positions of the input and of the output.
    pub input: usize,
    pub output: usize,
    pub rows: usize,
}

/// A value's tensor (plain, or the tensor of a quantized value).
fn any_tensor<'a>(v: xf::XValue<'a>) -> Option<xf::XNNTensorValue<'a>> {
    v.xvalue_union_as_xnntensor_value().or_else(|| {
        v.xvalue_union_as_xnnquantized_tensor_value()
            .and_then(|q| q.tensor_value())
    })
}

/// Rows of a non-constant value: `dims[rank - 2]` when every dimension before it is 1.
fn value_rows(dims: &[usize]) -> Option<usize> {
    let r = dims.len();
    (r >= 2 && dims[..r - 2].iter().all(|&d| d == 1)).then(|| dims[r - 2])
}

/// The region of `payload` as a [`RowRegion`], if it is one.
pub fn row_region(payload: &[u8]) -> Option<RowRegion> {
    let (g, _, _) = graph_of(payload).ok()?;
    let values = g.xvalues()?;
    let tensor = |id: u32| {
        let i = id as usize;
        (i < values.len())
            .then(|| values.get(i))
            .and_then(any_tensor)
    };
    let dims = |t: &xf::XNNTensorValue<'_>| -> Vec<usize> {
        t.dims()
            .map(|d| d.iter().map(|x| x as usize).collect())
            .unwrap_or_default()
    };
    let (mut input, mut output) = (None, None);
    for v in values.iter() {
        let Some(t) = any_tensor(v) else { continue };
        if t.constant_buffer_idx() != 0 {
            continue;
        }
        let slot = match t.flags() & 3 {
            0 => continue,
            1 => &mut input,
            2 => &mut output,
            _ => return None,
        };
        if slot.replace((t.external_id() as usize, dims(&t))).is_some() {
            return None;
        }
    }
    let ((input, in_dims), (output, _)) = (input?, output?);
    let rows = value_rows(&in_dims).filter(|&r| r >= 2)?;
    // Every non-constant value a node names has those rows; constants are filters, biases,
    // or broadcast along the rows.
    let row_value = |id: u32| -> bool {
        tensor(id)
            .is_some_and(|t| t.constant_buffer_idx() == 0 && value_rows(&dims(&t)) == Some(rows))
    };
    let constant = |id: u32| tensor(id).is_some_and(|t| t.constant_buffer_idx() != 0);
    let broadcast = |id: u32| {
        tensor(id).is_some_and(|t| {
            let d = dims(&t);
            t.constant_buffer_idx() != 0 && d.iter().rev().skip(1).all(|&x| x == 1)
        })
    };
    for node in g.xnodes()?.iter() {
        let (op, _) = graph::decode(node).ok()?;
        let ok = match op {
            Op::FullyConnected {
                x, w, bias, out, ..
            } => {
                row_value(x)
                    && row_value(out)
                    && constant(w)
                    && (bias == graph::INVALID_ID || constant(bias))
            }
            Op::Unary { x, out, .. } => row_value(x) && row_value(out),
            Op::Binary { a, b, out, .. } => {
                (row_value(a) || broadcast(a)) && (row_value(b) || broadcast(b)) && row_value(out)
            }
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(RowRegion {
        input,
        output,
        rows,
    })
}

/// A copy of the [`RowRegion`] `payload` computing `to` rows instead of its `from`: the row
/// dimension of every non-constant value is rewritten in place (the flatbuffer keeps its
/// layout and size).
pub fn narrow_rows(payload: &[u8], from: usize, to: usize) -> Result<Vec<u8>, String> {
    let (g, _, _) = graph_of(payload).map_err(|e| e.to_string())?;
    let to = u32::try_from(to).map_err(|_| format!("{to} rows do not fit a dimension"))?;
    let mut out = payload.to_vec();
    let base = payload.as_ptr() as usize;
    for v in g.xvalues().into_iter().flatten() {
        let Some(t) = any_tensor(v).filter(|t| t.constant_buffer_idx() == 0) else {
            continue;
        };
        let Some(d) = t.dims() else { continue };
        let dv: Vec<usize> = d.iter().map(|x| x as usize).collect();
        if value_rows(&dv) != Some(from) {
            continue;
        }
        // The dims vector's elements lie inside `payload` (the graph borrows from it).
        let at = (d.bytes().as_ptr() as usize)
            .checked_sub(base)
            .map(|o| o + 4 * (dv.len() - 2))
            .ok_or_else(|| "dims of a value outside the payload".to_string())?;
        out.get_mut(at..at + 4)
            .ok_or_else(|| format!("dims of a value at byte {at} outside the payload"))?
            .copy_from_slice(&to.to_le_bytes());
    }
    Ok(out)
}
