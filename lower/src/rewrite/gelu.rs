//! Decomposed GELU (tanh form) back to one call. GPT-2's exports spell the activation out as
//! eight elementwise calls over the MLP's widest tensor:
//!
//! ```text
//! a = x * 0.5;  p = pow(x, 3);  m = p * 0.044715;  s = x + m;  u = s * sqrt(2/pi)
//! t = tanh(u);  c = t + 1;  y = a * c
//! ```
//!
//! which is `aten::gelu(x, approximate = "tanh")`, a standard operator (ExecuTorch's portable
//! kernels have it; ptera's partition fuses it into the product before it). The eight calls
//! become one: seven passes over the tensor and up to three live copies of it disappear.
//!
//! Matched by following bytes ([`Graph::sources`]), in either operand order, with the
//! constants checked to within rounding of their exact values; every intermediate must be read
//! by the pattern only, and `x` must still hold its data where `y` was computed.

use std::collections::BTreeSet;

use ptera::format::fb;
use ptera::Program;

use super::graph::{Graph, Source};

/// One decomposed GELU.
#[derive(Clone, Debug)]
pub struct Match {
    /// The final multiply (replaced by the `gelu` call) and the calls removed.
    pub last: usize,
    pub removed: Vec<usize>,
    pub x: usize,
    pub y: usize,
}

/// The one instruction whose output holds exactly the bytes of `v` when `pc` reads it.
pub(crate) fn producer(g: &Graph<'_>, v: usize, pc: usize) -> Option<usize> {
    let src = g.sources(v, pc)?;
    let [Source::Ins(j)] = src.iter().copied().collect::<Vec<_>>()[..] else {
        return None;
    };
    let a = g.alloc[v]?;
    g.ins[j]
        .writes
        .iter()
        .any(|&w| g.alloc[w] == Some(a))
        .then_some(j)
}

/// The value of a scalar operand: a Double or Int value, or a one-element f32 constant.
pub(crate) fn scalar(g: &Graph<'_>, program: &Program<'_>, v: usize) -> Option<f64> {
    match g.kind_of(v)? {
        fb::KernelTypes::Double => {
            let vals = g.view.plan.values()?;
            vals.get(v).val_as_double().map(|d| d.double_val())
        }
        fb::KernelTypes::Int => g.int(v).map(|i| i as f64),
        fb::KernelTypes::Tensor => {
            let t = g.tensor(v)?;
            if !g.is_constant(v) || t.numel() != 1 || t.dtype != Some(ptera::DType::F32) {
                return None;
            }
            let b = program.constant(t.buffer, 4, v).ok()?;
            Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        }
        _ => None,
    }
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// Value arguments of a kept call with operator `key`.
pub(crate) fn args_of(g: &Graph<'_>, pc: usize, key: &str, n: usize) -> Option<Vec<usize>> {
    let i = &g.ins[pc];
    if i.removed || i.key != key || i.args.len() != n {
        return None;
    }
    i.args.iter().map(|&a| usize::try_from(a).ok()).collect()
}

/// `pc` is `mul(v, c)` or `mul(c, v)` with scalar `c` ≈ `want`: returns `v`.
fn mul_by(g: &Graph<'_>, p: &Program<'_>, pc: usize, want: f64) -> Option<usize> {
    let a = args_of(g, pc, "aten::mul.out", 4)?;
    for (v, c) in [(a[0], a[1]), (a[1], a[0])] {
        if scalar(g, p, c).is_some_and(|x| near(x, want)) && g.alloc[v].is_some() {
            return Some(v);
        }
    }
    None
}

/// `pc` is `add(u, v, alpha = 1)`: returns `(u, v)`.
fn add_of(g: &Graph<'_>, pc: usize) -> Option<(usize, usize)> {
    let a = args_of(g, pc, "aten::add.out", 5)?;
    (g.int(a[2]) == Some(1)).then_some((a[0], a[1]))
}

/// Same bytes, same data: `a` read at `pa` and `b` read at `pb` hold one value.
fn same(g: &Graph<'_>, a: usize, pa: usize, b: usize, pb: usize) -> bool {
    g.alloc[a].is_some()
        && g.alloc[a] == g.alloc[b]
        && g.tensor(a).map(|t| (t.dtype, t.numel())) == g.tensor(b).map(|t| (t.dtype, t.numel()))
        && g.sources(a, pa) == g.sources(b, pb)
}

/// The decomposed GELU ending at multiply `f`, if it is one.
pub fn match_at(g: &Graph<'_>, p: &Program<'_>, f: usize) -> Option<Match> {
    let fa = args_of(g, f, "aten::mul.out", 4)?;
    let y = fa[2];
    for (pa, pc) in [(fa[0], fa[1]), (fa[1], fa[0])] {
        let Some(ja) = producer(g, pa, f) else {
            continue;
        };
        let Some(x) = mul_by(g, p, ja, 0.5) else {
            continue;
        };
        let Some(jb) = producer(g, pc, f) else {
            continue;
        };
        let Some((b0, b1)) = add_of(g, jb) else {
            continue;
        };
        let t = if scalar(g, p, b1).is_some_and(|v| near(v, 1.0)) {
            b0
        } else if scalar(g, p, b0).is_some_and(|v| near(v, 1.0)) {
            b1
        } else {
            continue;
        };
        let Some(jc) = producer(g, t, jb) else {
            continue;
        };
        let Some(ta) = args_of(g, jc, "aten::tanh.out", 3) else {
            continue;
        };
        let Some(jd) = producer(g, ta[0], jc) else {
            continue;
        };
        let k2 = (2.0 / std::f64::consts::PI).sqrt();
        let Some(s) = mul_by(g, p, jd, k2) else {
            continue;
        };
        let Some(je) = producer(g, s, jd) else {
            continue;
        };
        let Some((e0, e1)) = add_of(g, je) else {
            continue;
        };
        // One operand of the add is x, the other 0.044715 · x³.
        let mut found = None;
        for (xe, m) in [(e0, e1), (e1, e0)] {
            if !same(g, xe, je, x, ja) {
                continue;
            }
            let Some(jf) = producer(g, m, je) else {
                continue;
            };
            let Some(pw) = mul_by(g, p, jf, 0.044715) else {
                continue;
            };
            let Some(jg) = producer(g, pw, jf) else {
                continue;
            };
            let Some(ga) = args_of(g, jg, "aten::pow.Tensor_Scalar_out", 4) else {
                continue;
            };
            if scalar(g, p, ga[1]).is_some_and(|v| near(v, 3.0)) && same(g, ga[0], jg, x, ja) {
                found = Some((jf, jg));
            }
        }
        let Some((jf, jg)) = found else { continue };
        let removed = vec![ja, jb, jc, jd, je, jf, jg];
        if safe(g, f, &removed, x, y) {
            return Some(Match {
                last: f,
                removed,
                x,
                y,
            });
        }
    }
    None
}

/// The intermediates are read by the pattern only, `x` keeps its data until `f`, and the
/// output does not overlap `x` (elementwise kernels must not write over their input).
fn safe(g: &Graph<'_>, f: usize, removed: &[usize], x: usize, y: usize) -> bool {
    let chain: BTreeSet<usize> = removed.iter().copied().chain([f]).collect();
    let n = g.ins.len();
    for (j, i) in g.ins.iter().enumerate() {
        if i.removed || chain.contains(&j) {
            continue;
        }
        for &r in &i.reads {
            if g.alloc.get(r).copied().flatten().is_some()
                && g.sources(r, j).is_some_and(|s| {
                    s.iter()
                        .any(|s| matches!(s, Source::Ins(k) if removed.contains(k)))
                })
            {
                return false;
            }
        }
    }
    for &o in &g.outputs {
        if g.sources(o, n).is_some_and(|s| {
            s.iter()
                .any(|s| matches!(s, Source::Ins(k) if removed.contains(k)))
        }) {
            return false;
        }
    }
    let first = removed.iter().copied().min().unwrap_or(f);
    for j in first..f {
        let i = &g.ins[j];
        if i.removed || chain.contains(&j) {
            continue;
        }
        if i.writes.iter().any(|&w| g.overlap(w, x)) {
            return false;
        }
    }
    !g.overlap(x, y)
}

/// Every decomposed GELU of the method.
pub fn find(g: &Graph<'_>, p: &Program<'_>) -> Vec<Match> {
    let mut out: Vec<Match> = Vec::new();
    let mut used: BTreeSet<usize> = BTreeSet::new();
    for f in 0..g.ins.len() {
        if let Some(m) = match_at(g, p, f) {
            if m.removed.iter().all(|r| !used.contains(r)) {
                used.extend(m.removed.iter().copied());
                used.insert(f);
                out.push(m);
            }
        }
    }
    out
}
