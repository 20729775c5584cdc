//! Broadcasting (NumPy rules): the allocation-free broadcast iterator `Bcast` of the
//! elementwise kernels and their typed loops `map1`/`zip2`/`zip3` (one, two and three
//! operands), and the broadcast copy of an f32 operand into a full output (the bias of `addmm`,
//! `baddbmm`, `linear`).
//!
//! `Bcast` coalesces contiguous dims, so same-shape, row-vector and scalar operands become flat
//! loops; when every operand already has the compute dtype the loops run over typed slices (no
//! per-element dtype dispatch), and otherwise a generic path converts element by element.

use super::common::{checked_prod, shape_err, Res};
use super::compute::Ct;
use crate::error::KernelError;
use crate::shape::broadcast_shapes;
use crate::tensor::{NdIndex, Shape, TensorMut, TensorRef, MAX_RANK};
use core::iter::repeat;

/// Broadcast iteration of `N` contiguous inputs against a contiguous output of rank ≤ 16.
///
/// Size-1 output dims are dropped and adjacent dims whose strides chain for every input are
/// merged, so the walk is a sequence of runs along the innermost (coalesced) dim, in which
/// every input has stride 0 (broadcast) or 1. Same-shape operands become one run.
struct Bcast<const N: usize> {
    /// Number of outer dims (walked by an [`NdIndex`] over `dims[..outer]`).
    outer: usize,
    dims: [usize; MAX_RANK],
    /// Per input, its offset step when the outer index advances at each dim
    /// ([`NdIndex::jumps`] of its strides).
    jumps: [[usize; MAX_RANK]; N],
    /// Per input, its element stride along each outer dim.
    strides: [[usize; MAX_RANK]; N],
    /// Length of each run.
    inner: usize,
    /// Per input, 0 or 1: its stride along the run.
    step: [usize; N],
    empty: bool,
}

impl<const N: usize> Bcast<N> {
    /// `None` when an input does not broadcast to `out`.
    fn new(out: &Shape, ins: [&Shape; N]) -> Option<Bcast<N>> {
        let r = out.rank();
        let od = out.dims();
        let mut st = [[0usize; MAX_RANK]; N];
        for (k, s) in ins.iter().enumerate() {
            let rk = s.rank();
            if rk > r {
                return None;
            }
            let cs = s.strides();
            for (j, &d) in s.dims().iter().enumerate() {
                let i = j + r - rk;
                st[k][i] = if d == od[i] && d != 1 {
                    cs[j]
                } else if d == 1 {
                    0
                } else {
                    return None;
                };
            }
        }
        let mut dims = [0usize; MAX_RANK];
        let mut strides = [[0usize; MAX_RANK]; N];
        let mut m = 0usize;
        for (i, &d) in od.iter().enumerate() {
            if d == 1 {
                continue;
            }
            if m > 0 && (0..N).all(|k| strides[k][m - 1] == st[k][i].wrapping_mul(d)) {
                dims[m - 1] = dims[m - 1].saturating_mul(d);
                for k in 0..N {
                    strides[k][m - 1] = st[k][i];
                }
            } else {
                dims[m] = d;
                for k in 0..N {
                    strides[k][m] = st[k][i];
                }
                m += 1;
            }
        }
        let (inner, step) = if m == 0 {
            (1, [0; N])
        } else {
            m -= 1;
            (dims[m], core::array::from_fn(|k| strides[k][m]))
        };
        // The innermost non-1 dim of a contiguous input has stride 1 (or 0 when broadcast).
        debug_assert!(step.iter().all(|&s| s <= 1));
        let walk = NdIndex::new(&dims[..m]);
        Some(Bcast {
            outer: m,
            dims,
            jumps: core::array::from_fn(|k| walk.jumps(&strides[k][..m])),
            strides,
            inner,
            step,
            empty: od.contains(&0),
        })
    }

    /// Calls `f(input offsets, output offset, run length)` for every run, in output order.
    #[inline(always)]
    fn for_each(&self, mut f: impl FnMut([usize; N], usize, usize)) {
        if self.empty {
            return;
        }
        if self.outer == 0 {
            // One run: same-shape and scalar operands.
            f([0; N], 0, self.inner);
            return;
        }
        let mut idx = NdIndex::new(&self.dims[..self.outer]);
        let mut off = [0usize; N];
        let mut o = 0usize;
        loop {
            f(off, o, self.inner);
            o += self.inner;
            let Some(d) = idx.advance() else {
                return;
            };
            for (x, j) in off.iter_mut().zip(&self.jumps) {
                *x = x.wrapping_add(j[d]);
            }
        }
    }
}

impl<const N: usize> Bcast<N> {
    /// [`Bcast::for_each`] across the installed team of cores, by ranges of output elements
    /// (`work`: cost of one element for the split decision): `f` gets the runs of its range,
    /// cut where the range starts or ends, from any core, each output element exactly once.
    /// `false`, calling nothing, when the team would not split.
    fn for_each_split(&self, work: usize, f: impl Fn([usize; N], usize, usize) + Sync) -> bool {
        const PIECE: usize = 256;
        if self.empty {
            return false;
        }
        let outer = self.outer;
        let runs: usize = self.dims[..outer].iter().product();
        let total = runs * self.inner;
        crate::parallel::try_split(total.div_ceil(PIECE), PIECE * work, |lo, hi, _| {
            let (e0, e1) = (lo * PIECE, (hi * PIECE).min(total));
            let inner = self.inner;
            // The outer index and input offsets of the run holding e0.
            let mut idx = NdIndex::at(&self.dims[..outer], e0 / inner);
            let mut off = [0usize; N];
            for (o, st) in off.iter_mut().zip(&self.strides) {
                *o = idx.index().iter().zip(st).map(|(i, s)| i * s).sum();
            }
            let mut d0 = e0 / inner * inner;
            while d0 < e1 {
                let (a, b) = (d0.max(e0), (d0 + inner).min(e1));
                f(
                    core::array::from_fn(|k| off[k] + (a - d0) * self.step[k]),
                    a,
                    b - a,
                );
                d0 += inner;
                let Some(d) = idx.advance() else { break };
                for (x, j) in off.iter_mut().zip(&self.jumps) {
                    *x = x.wrapping_add(j[d]);
                }
            }
        })
    }
}

/// Work of one element of a typed elementwise loop, for the split decision.
const ELEMENT_WORK: usize = 2;

/// Runs `body(offsets, out, len)` over every run of `bc`, with `out` the run's elements of
/// `os`: split across the installed team when that pays, else in order on this core.
#[inline(always)]
fn runs_into<const N: usize, T: Send>(
    bc: &Bcast<N>,
    os: &mut [T],
    work: usize,
    body: impl Fn([usize; N], &mut [T], usize) + Sync,
) {
    let split = {
        let len = os.len();
        let shared = crate::parallel::SharedSlice::new(&mut *os);
        bc.for_each_split(work, |offs, o, n| {
            // SAFETY: `for_each_split` hands each output element to one call only.
            let d = unsafe { shared.range(o, (o + n).min(len)) };
            body(offs, d, n)
        })
    };
    if !split {
        bc.for_each(|offs, o, n| body(offs, &mut os[o..o + n], n));
    }
}

/// The error for operand `arg` when the operands' shapes do not broadcast.
pub(super) fn bcast_err(arg: usize) -> KernelError {
    KernelError::Shape {
        arg,
        detail: "shapes are not broadcastable",
    }
}

/// The broadcast shape of two operands (the error names `b`).
pub(super) fn bshape(a: &TensorRef<'_>, b: &TensorRef<'_>) -> Result<Shape, KernelError> {
    broadcast_shapes(a.shape(), b.shape()).ok_or(bcast_err(b.arg()))
}

/// `out[i] = f(x[i])`, out has x's shape.
#[inline(always)]
pub(super) fn map1<A: Ct, U: Ct>(
    x: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(A) -> U + Sync,
) -> Res {
    let n = x.numel();
    if out.numel() != n {
        return Err(KernelError::Shape {
            arg: out.arg(),
            detail: "output shape differs from input",
        });
    }
    if x.dtype() == A::DT && out.dtype() == U::DT {
        const UNIT: usize = 1024;
        let xs = x.as_slice::<A::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        // Elementwise, in chunks across the team's cores.
        crate::parallel::for_chunks(os, UNIT, UNIT * ELEMENT_WORK, |u, os, _| {
            let xs = xs.get(u * UNIT..).unwrap_or(&[]);
            for (o, &v) in os.iter_mut().zip(xs) {
                *o = f(A::ld(v)).st();
            }
        });
    } else {
        let (xd, od) = (x.dtype(), out.dtype());
        let xb = x.bytes();
        let ob = out.bytes_mut();
        for i in 0..n {
            f(A::load(xd, xb, i)).store(od, ob, i);
        }
    }
    Ok(())
}

/// `out = f(x, y)` with broadcasting; out already has the broadcast shape.
#[inline(always)]
pub(super) fn zip2<A: Ct, B: Ct, U: Ct>(
    x: &TensorRef<'_>,
    y: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(A, B) -> U + Sync,
) -> Res {
    let bc = Bcast::new(out.shape(), [x.shape(), y.shape()]).ok_or(bcast_err(y.arg()))?;
    let [sx, sy] = bc.step;
    if x.dtype() == A::DT && y.dtype() == B::DT && out.dtype() == U::DT {
        let xs = x.as_slice::<A::S>()?;
        let ys = y.as_slice::<B::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        let g = |p: A::S, q: B::S| f(A::ld(p), B::ld(q)).st();
        runs_into(&bc, os, ELEMENT_WORK, |[ox, oy], d, n| match (sx, sy) {
            (1, 1) => {
                for ((d, &p), &q) in d.iter_mut().zip(&xs[ox..ox + n]).zip(&ys[oy..oy + n]) {
                    *d = g(p, q);
                }
            }
            (1, _) => {
                let q = ys[oy];
                for (d, &p) in d.iter_mut().zip(&xs[ox..ox + n]) {
                    *d = g(p, q);
                }
            }
            (_, 1) => {
                let p = xs[ox];
                for (d, &q) in d.iter_mut().zip(&ys[oy..oy + n]) {
                    *d = g(p, q);
                }
            }
            _ => d.fill(g(xs[ox], ys[oy])),
        });
    } else {
        let (xd, yd, od) = (x.dtype(), y.dtype(), out.dtype());
        let (xb, yb) = (x.bytes(), y.bytes());
        let ob = out.bytes_mut();
        bc.for_each(|[ox, oy], o, n| {
            for i in 0..n {
                f(A::load(xd, xb, ox + i * sx), B::load(yd, yb, oy + i * sy)).store(od, ob, o + i);
            }
        });
    }
    Ok(())
}

/// `out = f(x, y, z)` with broadcasting; out already has the broadcast shape.
#[inline(always)]
pub(super) fn zip3<A: Ct, B: Ct, C: Ct, U: Ct>(
    x: &TensorRef<'_>,
    y: &TensorRef<'_>,
    z: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(A, B, C) -> U + Sync,
) -> Res {
    let bc =
        Bcast::new(out.shape(), [x.shape(), y.shape(), z.shape()]).ok_or(bcast_err(z.arg()))?;
    let [sx, sy, sz] = bc.step;
    if x.dtype() == A::DT && y.dtype() == B::DT && z.dtype() == C::DT && out.dtype() == U::DT {
        let xs = x.as_slice::<A::S>()?;
        let ys = y.as_slice::<B::S>()?;
        let zs = z.as_slice::<C::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        let g = |p: A::S, q: B::S, r: C::S| f(A::ld(p), B::ld(q), C::ld(r)).st();
        runs_into(&bc, os, ELEMENT_WORK, |[ox, oy, oz], d, n| {
            let xr = &xs[ox..ox + if sx == 1 { n } else { 1 }];
            let yr = &ys[oy..oy + if sy == 1 { n } else { 1 }];
            let zr = &zs[oz..oz + if sz == 1 { n } else { 1 }];
            macro_rules! run {
                ($p:expr, $q:expr, $r:expr) => {
                    for (((d, p), q), r) in d.iter_mut().zip($p).zip($q).zip($r) {
                        *d = g(p, q, r);
                    }
                };
            }
            match (sx, sy, sz) {
                (1, 1, 1) => run!(xr.iter().copied(), yr.iter().copied(), zr.iter().copied()),
                (1, 1, _) => run!(xr.iter().copied(), yr.iter().copied(), repeat(zr[0])),
                (1, _, 1) => run!(xr.iter().copied(), repeat(yr[0]), zr.iter().copied()),
                (_, 1, 1) => run!(repeat(xr[0]), yr.iter().copied(), zr.iter().copied()),
                (1, _, _) => run!(xr.iter().copied(), repeat(yr[0]), repeat(zr[0])),
                (_, 1, _) => run!(repeat(xr[0]), yr.iter().copied(), repeat(zr[0])),
                (_, _, 1) => run!(repeat(xr[0]), repeat(yr[0]), zr.iter().copied()),
                _ => d.fill(g(xr[0], yr[0], zr[0])),
            }
        });
    } else {
        let (xd, yd, zd, od) = (x.dtype(), y.dtype(), z.dtype(), out.dtype());
        let (xb, yb, zb) = (x.bytes(), y.bytes(), z.bytes());
        let ob = out.bytes_mut();
        bc.for_each(|[ox, oy, oz], o, n| {
            for i in 0..n {
                f(
                    A::load(xd, xb, ox + i * sx),
                    B::load(yd, yb, oy + i * sy),
                    C::load(zd, zb, oz + i * sz),
                )
                .store(od, ob, o + i);
            }
        });
    }
    Ok(())
}

/// Element strides of `sdims` broadcast (NumPy rules, right-aligned) to `ddims` (0 on
/// broadcast dims); fails unless `sdims` broadcasts to exactly `ddims`.
pub(super) fn bcast_strides(
    sdims: &[usize],
    ddims: &[usize],
    arg: usize,
) -> Result<[usize; MAX_RANK], KernelError> {
    let r = ddims.len();
    let bad = shape_err(arg, "tensor does not broadcast to the output shape");
    if sdims.len() > r {
        return Err(bad);
    }
    let lead = r - sdims.len();
    let mut sstr = [0usize; MAX_RANK];
    let mut acc = 1usize;
    for i in (0..r).rev() {
        let sd = if i >= lead { sdims[i - lead] } else { 1 };
        if sd == ddims[i] {
            sstr[i] = if sd == 1 { 0 } else { acc };
        } else if sd == 1 {
            sstr[i] = 0;
        } else {
            return Err(bad);
        }
        acc = acc.saturating_mul(sd);
    }
    Ok(sstr)
}

/// Writes `src` (shape `sdims`) broadcast to `ddims` into `dst` (row-major).
pub(super) fn broadcast_into(
    src: &[f32],
    sdims: &[usize],
    dst: &mut [f32],
    ddims: &[usize],
    arg: usize,
) -> Res {
    let r = ddims.len();
    let sstr = bcast_strides(sdims, ddims, arg)?;
    let total = checked_prod(ddims, arg)?;
    if total == 0 {
        return Ok(());
    }
    if r == 0 {
        dst[0] = src[0];
        return Ok(());
    }
    let inner = ddims[r - 1];
    let istr = sstr[r - 1];
    let outer = &ddims[..r - 1];
    // Whole rows per core; each part starts its outer index (dims 0..r-1) at its first row.
    crate::parallel::for_chunks(&mut dst[..total], inner, inner / 4 + 8, |r0, part, _| {
        let mut idx = [0usize; MAX_RANK];
        let mut rest = r0;
        let mut soff = 0usize;
        for d in (0..r - 1).rev() {
            idx[d] = rest % outer[d];
            rest /= outer[d];
            soff += idx[d] * sstr[d];
        }
        for row in part.chunks_exact_mut(inner) {
            if istr == 0 {
                row.fill(src[soff]);
            } else {
                row.copy_from_slice(&src[soff..soff + inner]);
            }
            // Next row: the last outer dim that has room advances, the ones after it wrap.
            if let Some(d) = (0..r - 1).rev().find(|&d| idx[d] + 1 < outer[d]) {
                idx[d] += 1;
                soff += sstr[d];
                for e in d + 1..r - 1 {
                    soff -= idx[e] * sstr[e];
                    idx[e] = 0;
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
#[path = "broadcast_tests.rs"]
mod tests;

/// Is `small` equal to `big` except for a last dim of 1 (a per-row scalar)?
pub(super) fn is_column(small: &[usize], big: &[usize]) -> bool {
    let n = big.len();
    n >= 2
        && small.len() == n
        && crate::shape::dims_eq(&small[..n - 1], &big[..n - 1])
        && small[n - 1] == 1
}

/// Is `small` (leading 1s ignored) equal to the trailing dims of `big`? (An operand that
/// repeats along `big`'s leading dims: a row vector, a per-position mask.)
pub(super) fn is_trailing(small: &[usize], big: &[usize]) -> bool {
    let lead = small.iter().take_while(|&&d| d == 1).count();
    let s = &small[lead..];
    s.len() <= big.len() && crate::shape::dims_eq(s, &big[big.len() - s.len()..])
}
