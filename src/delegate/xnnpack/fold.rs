//! Load-time folds of the node graph: a multiply of the attention scores by a one-element
//! value folded into the softmax after it ([`scale_folds`]).

use super::graph::{self, Binary, Op};
use super::plan::{DT_F32, KIND_INTERNAL, KIND_PACKED, MAX_VALUES};
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
) -> Result<heapless::Vec<ScaleFold, MAX_FOLDS>, KernelError> {
    let mut folds = heapless::Vec::new();
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
