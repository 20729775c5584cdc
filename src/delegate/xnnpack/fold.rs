//! Load-time folds of the node graph: a multiply of the attention scores by a one-element
//! value folded into the softmax after it ([`scale_folds`]), a value quantized again by
//! a second convert read from the first ([`repeated_converts`]), and an intermediate a
//! reshape only copies into a region output written there directly ([`output_forwards`]).

use super::graph::{self, Binary, Op};
use super::plan::{DT_F32, DT_QD8, KIND_EXTERNAL_OUT, KIND_INTERNAL, KIND_PACKED, MAX_VALUES};
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::shape::Shape;

/// A multiply folded into the softmax right after it ([`scale_folds`]).
#[derive(Clone, Copy)]
pub(super) struct ScaleFold {
    /// The multiply node.
    pub(super) step: u32,
    /// Its tensor input and its output (the softmax's input).
    pub(super) x: u32,
    pub(super) y: u32,
    /// The one-element value it multiplies by.
    pub(super) scale: u32,
}

/// Most folds per region (more are left as they are).
const MAX_FOLDS: usize = 64;

/// The attention-score scale, `softmax(x·c)`: a multiply node (no output clamp) of an fp32
/// intermediate `x` by a one-element fp32 value `c` (a constant, a region input or an
/// intermediate: read at run time) whose output `y`, an intermediate of `x`'s dims, only the
/// next node reads, and that node a softmax of `y`. The softmax computes `exp(c·(x − m))`
/// itself (`m` the row maximum of `x`, or its minimum for `c < 0`), so the multiply's pass
/// over the scores goes; the multiply becomes a reshape of `x` into `y`, a view at no cost,
/// and the softmax reads `c` (its lifetime extends to it).
pub(super) fn scale_folds(
    nodes: &flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<xf::XNode<'_>>>,
    kinds: &[(u32, u32, u64)],
    qinfo: &[(u32, u32, u64, bool)],
    dims: &[Shape],
    readers: &[u16; MAX_VALUES],
) -> Result<heapless::Vec<ScaleFold, MAX_FOLDS>, KernelError> {
    let mut folds = heapless::Vec::new();
    let f32_internal = |id: u32| {
        kinds.get(id as usize).is_some_and(|k| k.0 == KIND_INTERNAL)
            && qinfo.get(id as usize).is_some_and(|q| q.0 == DT_F32)
    };
    let scalar = |id: u32| {
        kinds.get(id as usize).is_some_and(|k| k.0 != KIND_PACKED)
            && qinfo.get(id as usize).is_some_and(|q| q.0 == DT_F32)
            && dims.get(id as usize).is_some_and(|d| d.numel() == 1)
    };
    for step in 0..nodes.len().saturating_sub(1) {
        let (op, clamp) = graph::decode(nodes.get(step))?;
        let Op::Binary {
            op: Binary::Mul,
            a,
            b,
            out: y,
        } = op
        else {
            continue;
        };
        if clamp.is_some_and(|(lo, hi)| lo > f32::NEG_INFINITY || hi < f32::INFINITY) {
            continue;
        }
        let Op::Softmax { x: sx, .. } = graph::decode(nodes.get(step + 1))?.0 else {
            continue;
        };
        let (x, c) = match (scalar(a), scalar(b)) {
            (false, true) => (a, b),
            (true, false) => (b, a),
            _ => continue,
        };
        let same = dims
            .get(x as usize)
            .zip(dims.get(y as usize))
            .is_some_and(|(dx, dy)| dx == dy);
        if sx == y
            && c != y
            && same
            && f32_internal(x)
            && f32_internal(y)
            && readers.get(y as usize) == Some(&1)
        {
            let _ = folds.push(ScaleFold {
                step: step as u32,
                x,
                y,
                scale: c,
            });
        }
    }
    Ok(folds)
}

/// How many nodes read each value (a node reading it twice counts twice): what
/// [`scale_folds`] and [`output_forwards`] ask of a value's readers.
pub(super) fn readers(
    nodes: &flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<xf::XNode<'_>>>,
) -> Result<[u16; MAX_VALUES], KernelError> {
    let mut readers = [0u16; MAX_VALUES];
    for node in nodes.iter() {
        let (op, _) = graph::decode(node)?;
        let (ins, n) = op.inputs();
        for &id in &ins[..n] {
            if let Some(r) = readers.get_mut(id as usize) {
                *r = r.saturating_add(1);
            }
        }
    }
    Ok(readers)
}

/// A dynamic-quantization convert of a value an earlier convert already quantized
/// ([`repeated_converts`]).
#[derive(Clone, Copy)]
pub(super) struct RepeatedConvert {
    /// The repeated convert node.
    pub(super) step: u32,
    /// The earlier convert's output and this one's.
    pub(super) first: u32,
    pub(super) out: u32,
}

/// Converts that quantize the same fp32 value again: ExecuTorch's partitioner gives every
/// quantized fully-connected node its own `fp32 → qdint8` convert, so the key and value
/// projections of one input quantize it twice (same rows, same arithmetic, the same bytes).
/// A repeat whose output has the earlier output's dims, both intermediates, becomes a reshape
/// of the earlier output: a view at no cost (values are written once, so the earlier output
/// still holds the same bytes; its lifetime extends to the repeat's readers).
pub(super) fn repeated_converts(
    nodes: &flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<xf::XNode<'_>>>,
    kinds: &[(u32, u32, u64)],
    qinfo: &[(u32, u32, u64, bool)],
    dims: &[Shape],
) -> Result<heapless::Vec<RepeatedConvert, MAX_FOLDS>, KernelError> {
    let mut out = heapless::Vec::new();
    // (input, output) of the first convert of each input seen so far.
    let mut firsts = heapless::Vec::<(u32, u32), MAX_FOLDS>::new();
    let qd8_internal = |id: u32| {
        kinds.get(id as usize).is_some_and(|k| k.0 == KIND_INTERNAL)
            && qinfo.get(id as usize).is_some_and(|q| q.0 == DT_QD8)
    };
    for step in 0..nodes.len() {
        let (op, _) = graph::decode(nodes.get(step))?;
        let Op::Unary {
            op: graph::Unary::Copy,
            x,
            out: y,
        } = op
        else {
            continue;
        };
        if !qd8_internal(y) || qinfo.get(x as usize).is_none_or(|q| q.0 != DT_F32) {
            continue;
        }
        match firsts.iter().find(|f| f.0 == x) {
            Some(&(_, first)) if dims.get(first as usize) == dims.get(y as usize) => {
                let _ = out.push(RepeatedConvert {
                    step: step as u32,
                    first,
                    out: y,
                });
            }
            Some(_) => {}
            None => {
                let _ = firsts.push((x, y));
            }
        }
    }
    Ok(out)
}

/// `(x, out)` of every reshape that copies an fp32 intermediate `x` into a region output
/// `out` of the same element count, where the reshape is the only node reading `x` and no
/// node reads `out`: `x` can take the output's bytes (its producer writes the output
/// directly, the reshape becomes a view and is skipped at run time; ExecuTorch's partitioner
/// ends most regions with such a reshape, a copy of the whole output on one core). The
/// caller applies them only to a region run whole (a region run in row chunks cuts its
/// outputs per chunk, not its intermediates).
pub(super) fn output_forwards(
    nodes: &flatbuffers::Vector<'_, flatbuffers::ForwardsUOffset<xf::XNode<'_>>>,
    kinds: &[(u32, u32, u64)],
    qinfo: &[(u32, u32, u64, bool)],
    dims: &[Shape],
    readers: &[u16; MAX_VALUES],
) -> Result<heapless::Vec<(u32, u32), MAX_FOLDS>, KernelError> {
    let mut out = heapless::Vec::new();
    let kind = |id: u32| kinds.get(id as usize).map(|k| k.0);
    let f32_value = |id: u32| qinfo.get(id as usize).is_some_and(|q| q.0 == DT_F32);
    let numel = |id: u32| dims.get(id as usize).map(|d| d.numel());
    for node in nodes.iter() {
        let (Op::Reshape { x, out: y }, _) = graph::decode(node)? else {
            continue;
        };
        if kind(x) == Some(KIND_INTERNAL)
            && kind(y) == Some(KIND_EXTERNAL_OUT)
            && f32_value(x)
            && f32_value(y)
            && numel(x).is_some()
            && numel(x) == numel(y)
            && readers.get(x as usize) == Some(&1)
            && readers.get(y as usize) == Some(&0)
        {
            let _ = out.push((x, y));
        }
    }
    Ok(out)
}
