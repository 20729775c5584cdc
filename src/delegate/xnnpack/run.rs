//! f32 compute for XNNPACK graph nodes over plain slices (contiguous, row-major; NHWC for
//! convolution and pooling, as the XNNPACK graph stores them).

use super::graph::{Binary, Op, Unary, Window, MAX_DIMS};
use crate::error::KernelError;
use crate::linalg::conv::transposed::ConvTranspose2d;
use crate::linalg::conv::{self, Conv2d};
use crate::linalg::gemm::{self, MatRef};
use crate::linalg::vecmath as vec;
use crate::parallel;
use crate::shape::{NdIndex, Shape};

/// Elements per unit when elementwise work is split across cores: whole vector blocks, so every
/// part but the last runs only the kernels' main loops, as one core would on those elements.
pub(super) const CHUNK: usize = 64;

/// Row-major strides of `d`, with 0 for broadcast (size-1) dims when aligned to `out`.
fn bcast_strides(d: &Shape, out: &Shape) -> [usize; MAX_DIMS] {
    let mut st = [0usize; MAX_DIMS];
    let off = out.rank() - d.rank();
    let mut acc = 1;
    for i in (0..d.rank()).rev() {
        st[off + i] = if d.dims()[i] == 1 { 0 } else { acc };
        acc *= d.dims()[i];
    }
    st
}

#[inline]
fn apply(op: Binary, x: f32, y: f32) -> f32 {
    match op {
        Binary::Add => x + y,
        Binary::Sub => x - y,
        Binary::Mul => x * y,
        Binary::Div => x / y,
        Binary::Min => x.min(y),
        Binary::Max => x.max(y),
    }
}

/// The shared slice kernel for `op`, or `None` for min/max (XNNPACK's min/max ignore NaN,
/// unlike ATen's `minimum`/`maximum` in `kernels::vec`).
fn vec_op(op: Binary) -> Option<vec::BinOp> {
    match op {
        Binary::Add => Some(vec::BinOp::Add),
        Binary::Sub => Some(vec::BinOp::Sub),
        Binary::Mul => Some(vec::BinOp::Mul),
        Binary::Div => Some(vec::BinOp::Div),
        Binary::Min | Binary::Max => None,
    }
}

/// The common prefix of an input and an output slice (the graph checks make them equal).
fn common<'x, 'o>(x: &'x [f32], out: &'o mut [f32]) -> (&'x [f32], &'o mut [f32]) {
    let n = x.len().min(out.len());
    (&x[..n], &mut out[..n])
}

pub(super) fn zip_with(op: Binary, a: &[f32], b: &[f32], out: &mut [f32]) {
    let n = a.len().min(b.len()).min(out.len());
    let (a, b, out) = (&a[..n], &b[..n], &mut out[..n]);
    parallel::for_chunks(out, CHUNK, CHUNK * 2, |u, o, _| {
        let r = u * CHUNK..u * CHUNK + o.len();
        zip_with_here(op, &a[r.clone()], &b[r], o)
    });
}

/// This core's part of [`zip_with`] (or one row of a broadcast): the plain slice loop, no
/// further splitting.
fn zip_with_here(op: Binary, a: &[f32], b: &[f32], out: &mut [f32]) {
    if let Some(v) = vec_op(op) {
        vec::binary_here(v, a, b, out);
        return;
    }
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = apply(op, x, y);
    }
}

/// `out = a op s` (`swap`: `s op a`).
fn zip_scalar(op: Binary, a: &[f32], s: f32, swap: bool, out: &mut [f32]) {
    let (a, out) = common(a, out);
    parallel::for_chunks(out, CHUNK, CHUNK * 2, |u, o, _| {
        zip_scalar_here(op, &a[u * CHUNK..u * CHUNK + o.len()], s, swap, o)
    });
}

/// This core's part of [`zip_scalar`] (or one row of a broadcast), no further splitting.
fn zip_scalar_here(op: Binary, a: &[f32], s: f32, swap: bool, out: &mut [f32]) {
    match (vec_op(op), swap) {
        (Some(v), false) => vec::binary_scalar_here(v, a, s, out),
        (Some(v), true) => vec::scalar_binary_here(v, s, a, out),
        (None, false) => out
            .iter_mut()
            .zip(a)
            .for_each(|(o, &x)| *o = apply(op, x, s)),
        (None, true) => out
            .iter_mut()
            .zip(a)
            .for_each(|(o, &x)| *o = apply(op, s, x)),
    }
}

/// Are `small`'s dims (leading 1s ignored) the trailing dims of `big`?
fn is_trailing(small: &Shape, big: &Shape) -> bool {
    let s = small.dims();
    let lead = s.iter().take_while(|&&d| d == 1).count();
    let s = &s[lead..];
    let b = big.dims();
    s.len() <= b.len() && s == &b[b.len() - s.len()..]
}

/// `out[r] = x[r] op row` for every `row.len()`-element chunk (`swap`: `row op x[r]`),
/// split as [`vec::for_row_pieces`] splits (a few long rows still share evenly).
fn rows_with(op: Binary, x: &[f32], row: &[f32], swap: bool, out: &mut [f32]) {
    let l = row.len();
    let n = x.len().min(out.len()) / l.max(1) * l;
    let (x, out) = (&x[..n], &mut out[..n]);
    vec::for_row_pieces(out, l, 2, |at, r0, o| {
        let len = o.len();
        let (Some(xs), Some(rs)) = (x.get(at..at + len), row.get(r0..r0 + len)) else {
            return;
        };
        if swap {
            zip_with_here(op, rs, xs, o);
        } else {
            zip_with_here(op, xs, rs, o);
        }
    });
}

/// `out = a op b` with NumPy broadcasting; `od` is the broadcast shape.
pub fn binary(
    op: Binary,
    a: &[f32],
    ad: &Shape,
    b: &[f32],
    bd: &Shape,
    out: &mut [f32],
    od: &Shape,
) {
    let n = out.len();
    if a.len() == n && b.len() == n {
        return zip_with(op, a, b, out);
    }
    // Block broadcast: one operand's dims (leading 1s ignored) are the trailing dims of the
    // output, so it repeats as one contiguous block (a bias row, a [1, 1, T, T] mask against
    // [1, H, T, T] scores).
    if b.len() > 1 && a.len() == n && is_trailing(bd, od) {
        return rows_with(op, a, b, false, out);
    }
    if a.len() > 1 && b.len() == n && is_trailing(ad, od) {
        return rows_with(op, b, a, true, out);
    }
    if b.len() == 1 && a.len() == n {
        return zip_scalar(op, a, b[0], false, out);
    }
    if a.len() == 1 && b.len() == n {
        return zip_scalar(op, b, a[0], true, out);
    }
    // General broadcast: contiguous runs along the last output dim (each operand either runs
    // along it or repeats one element), the outer dims walked by NdIndex.
    let r = od.rank();
    let Some(&last) = od.dims().last() else {
        return zip_with(op, a, b, out);
    };
    if last == 0 {
        return;
    }
    let (sa, sb) = (bcast_strides(ad, od), bcast_strides(bd, od));
    let mut it = NdIndex::new(&od.dims()[..r - 1]);
    let (ja, jb) = (it.jumps(&sa[..r - 1]), it.jumps(&sb[..r - 1]));
    let (mut ia, mut ib) = (0usize, 0usize);
    for orow in out.chunks_exact_mut(last) {
        match (sa[r - 1] != 0, sb[r - 1] != 0) {
            (true, true) => zip_with_here(op, &a[ia..ia + last], &b[ib..ib + last], orow),
            (true, false) => zip_scalar_here(op, &a[ia..ia + last], b[ib], false, orow),
            (false, true) => zip_scalar_here(op, &b[ib..ib + last], a[ia], true, orow),
            (false, false) => orow.fill(apply(op, a[ia], b[ib])),
        }
        if let Some(d) = it.advance() {
            ia = ia.wrapping_add(ja[d]);
            ib = ib.wrapping_add(jb[d]);
        }
    }
}

/// `out = op(x)`. Copies, exp, sin, cos, tanh, sigmoid and GELU (erf form) run the shared
/// `vecmath` kernels (accuracy table there), which split across cores themselves; the other
/// maps are split here.
pub fn unary(op: Unary, x: &[f32], out: &mut [f32]) {
    let (x, out) = common(x, out);
    if let Some(f) = shared_unary(op) {
        // Equal lengths (`common`), so this cannot fail.
        let _ = f(x, out);
        return;
    }
    let cost = match op {
        Unary::Abs | Unary::Neg | Unary::Square => 1,
        _ => 12,
    };
    parallel::for_chunks(out, CHUNK, CHUNK * cost, |u, o, _| {
        unary_here(op, &x[u * CHUNK..u * CHUNK + o.len()], o)
    });
}

/// The `vecmath` kernel of `op`, if it has one.
fn shared_unary(op: Unary) -> Option<fn(&[f32], &mut [f32]) -> Result<(), KernelError>> {
    Some(match op {
        Unary::Copy | Unary::Clamp => vec::copy,
        Unary::Exp => vec::exp,
        Unary::Sin => vec::sin,
        Unary::Cos => vec::cos,
        Unary::Tanh => vec::tanh,
        Unary::Sigmoid => vec::sigmoid,
        Unary::Gelu => vec::gelu_erf,
        _ => return None,
    })
}

/// One part of [`unary`] for the ops without a shared kernel.
fn unary_here(op: Unary, x: &[f32], out: &mut [f32]) {
    macro_rules! map {
        ($f:expr) => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = $f(v);
            }
        };
    }
    match op {
        Unary::Abs => map!(|v: f32| v.abs()),
        Unary::Neg => map!(|v: f32| -v),
        Unary::Square => map!(|v: f32| v * v),
        Unary::Sqrt => map!(libm::sqrtf),
        Unary::Rsqrt => map!(|v: f32| 1.0 / libm::sqrtf(v)),
        Unary::Floor => map!(libm::floorf),
        Unary::Ceil => map!(libm::ceilf),
        Unary::Log => map!(libm::logf),
        Unary::Hardswish => map!(|v: f32| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        Unary::LeakyRelu(s) => map!(|v: f32| if v >= 0.0 { v } else { v * s }),
        Unary::Elu(a) => map!(|v: f32| if v > 0.0 {
            v
        } else {
            a * (libm::expf(v) - 1.0)
        }),
        // The ops of `shared_unary` (whole slices there; correct here too).
        Unary::Copy
        | Unary::Clamp
        | Unary::Exp
        | Unary::Sin
        | Unary::Cos
        | Unary::Tanh
        | Unary::Sigmoid
        | Unary::Gelu => {
            if let Some(f) = shared_unary(op) {
                let _ = f(x, out);
            }
        }
    }
}

/// Clamps every element into `[lo, hi]`.
/// [`clamp`] of one part, no further splitting (a fused run's: `fuse::run_part`).
pub(super) fn clamp_part(out: &mut [f32], lo: f32, hi: f32) {
    if lo == f32::NEG_INFINITY && hi == f32::INFINITY {
        return;
    }
    for v in out {
        *v = v.max(lo).min(hi);
    }
}

/// [`zip_with`]'s work on one part (a fused run's: `fuse::run_part`).
pub(super) fn zip_with_part(op: Binary, a: &[f32], b: &[f32], out: &mut [f32]) {
    zip_with_here(op, a, b, out)
}

/// `out = a op s` (`swap`: `s op a`) on one part (a fused run's: `fuse::run_part`).
pub(super) fn zip_scalar_part(op: Binary, a: &[f32], s: f32, swap: bool, out: &mut [f32]) {
    zip_scalar_here(op, a, s, swap, out)
}

/// [`unary`]'s work on one part (a fused run's: `fuse::run_part`): the same kernel on this
/// part's elements (inside a split job it does not split again).
pub(super) fn unary_part(op: Unary, x: &[f32], out: &mut [f32]) {
    let (x, out) = common(x, out);
    match shared_unary(op) {
        // Equal lengths (`common`), so this cannot fail.
        Some(f) => {
            let _ = f(x, out);
        }
        None => unary_here(op, x, out),
    }
}

pub fn clamp(out: &mut [f32], lo: f32, hi: f32) {
    if lo == f32::NEG_INFINITY && hi == f32::INFINITY {
        return;
    }
    parallel::for_chunks(out, CHUNK, CHUNK, |_, o, _| {
        for v in o {
            *v = v.max(lo).min(hi);
        }
    });
}

/// Softmax over rows of length `n` (stable: max subtracted; `kernels::vec::softmax_rows`).
pub fn softmax_rows(x: &[f32], out: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    // Whole rows of the common length: the graph checks make x and out the same size.
    let len = x.len().min(out.len()) / n * n;
    // Whole rows of equal lengths: cannot fail; splits across cores by rows itself.
    let _ = vec::softmax_rows(&x[..len], &mut out[..len], n);
}

/// Softmax over rows of length `n` of `scale·x` (a multiply by a one-element value folded
/// in at load; `scale = 1` is [`softmax_rows`]).
pub fn softmax_rows_scaled(x: &[f32], out: &mut [f32], n: usize, scale: f32) {
    if scale == 1.0 || n == 0 {
        softmax_rows(x, out, n);
        return;
    }
    let len = x.len().min(out.len()) / n * n;
    // Whole rows of equal lengths: cannot fail.
    let _ = vec::softmax_rows_scaled(&x[..len], &mut out[..len], n, scale);
}

/// A fully-connected node's sizes: depth `k`, outputs `n`, and whether the filter is stored
/// `[K, N]` (`transpose_w`) rather than XNNPACK's `[N, K]`.
#[derive(Clone, Copy)]
pub struct Fc {
    pub k: usize,
    pub n: usize,
    pub transpose_w: bool,
}

/// Fully connected: `out[m, n] = clamp(x[m, k] · Wᵀ + bias)` with W `[n, k]` (or `[k, n]`
/// when `transpose_w`), split across the team as `hint` decided at load, if it was.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    Fc { k, n, transpose_w }: Fc,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
    hint: gemm::SplitHint,
) -> Result<(), KernelError> {
    let m = x.len().checked_div(k).unwrap_or(0);
    let a = MatRef::row_major(x, m, k)?;
    let b = if transpose_w {
        MatRef::row_major(w, k, n)?
    } else {
        MatRef::row_major(w, n, k)?.t()
    };
    gemm::sgemm_hinted(a, b, out, n, (1.0, 0.0, bias, range), scratch, hint)
}

/// Fully connected with the filter packed ahead ([`gemm::PackedB`], `k × n`):
/// `out[m, n] = clamp(x[m, k] · B + bias)`, split as `hint` decided at load, if it was.
pub fn fully_connected_packed(
    x: &[f32],
    w: gemm::PackedB<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
    hint: gemm::SplitHint,
) -> Result<(), KernelError> {
    let (k, n) = (w.k(), w.n());
    let m = x.len().checked_div(k).unwrap_or(0);
    let a = MatRef::row_major(x, m, k)?;
    gemm::sgemm_prepacked_hinted(a, w, out, n, (1.0, 0.0, bias, range), scratch, hint)
}

/// Views 4-byte aligned bytes as floats (`None` if misaligned or not a whole number of floats).
pub fn as_f32(bytes: &[u8]) -> Option<&[f32]> {
    // SAFETY: f32 is plain old data (no padding, every bit pattern valid, align 4);
    // `align_to` only puts correctly aligned whole elements in the middle slice.
    let (pre, mid, post) = unsafe { bytes.align_to::<f32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// Batched matmul over leading dims: `[.., m, k] × [.., k, n]` (or `[.., n, k]` transposed).
#[allow(clippy::too_many_arguments)]
pub fn batch_matmul(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    transpose_b: bool,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let operands = |i: usize| -> Result<(MatRef<'_>, MatRef<'_>), KernelError> {
        let ai = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k)?;
        let bs = &b[i * k * n..(i + 1) * k * n];
        let bi = if transpose_b {
            MatRef::row_major(bs, n, k)?.t()
        } else {
            MatRef::row_major(bs, k, n)?
        };
        Ok((ai, bi))
    };
    let mn = m * n;
    let out = &mut out[..batch * mn];
    if batch == 1 {
        // A single product splits inside the GEMM.
        let (ai, bi) = operands(0)?;
        return gemm::sgemm(ai, bi, out, n, 1.0, 0.0, None, scratch);
    }
    // Across the cores by whole products or parts of them, each computed as one core computes
    // it (the same bits); else one after the other with one kernel choice and set of checks.
    if gemm::sgemm_batch_split((m, n, k), batch, operands, out)? {
        return Ok(());
    }
    gemm::sgemm_batch((m, n, k), batch, operands, out, scratch)
}

/// `out.dims[i] = x.dims[perm[i]]`. Shape are simplified first (size-1 dims dropped, dims
/// adjacent in both orders merged); then an innermost run contiguous in the input is copied
/// row by row, a swap of the last two dims goes through the blocked `vec::transpose32`, and
/// anything else is gathered element by element.
pub fn transpose(x: &[f32], xd: &Shape, perm: &[u8], out: &mut [f32]) {
    let r = xd.rank().min(perm.len());
    let mut xs = [0usize; MAX_DIMS];
    let mut acc = 1;
    for i in (0..r).rev() {
        xs[i] = acc;
        acc *= xd.dims()[i];
    }
    // Output dims and input strides, simplified.
    let mut od = [0usize; MAX_DIMS];
    let mut st = [0usize; MAX_DIMS];
    let mut k = 0;
    for &p in &perm[..r] {
        let (d, s) = (xd.dims()[p as usize], xs[p as usize]);
        if d == 1 {
            continue;
        }
        if k > 0 && st[k - 1] == s * d {
            od[k - 1] *= d;
            st[k - 1] = s;
        } else {
            od[k] = d;
            st[k] = s;
            k += 1;
        }
    }
    let n = out.len().min(x.len());
    if k == 0 {
        let _ = vec::copy(&x[..n], &mut out[..n]);
        return;
    }
    let inner = od[k - 1];
    if st[k - 1] == 1 {
        // Rows of `inner` contiguous elements, a block of od[k-2] rows st[k-2] apart at a time.
        let (rows, rs) = if k >= 2 {
            (od[k - 2], st[k - 2])
        } else {
            (1, 0)
        };
        let outer = k.saturating_sub(2);
        gather_blocks(&od[..outer], &st[..outer], rows * inner, out, |o, src| {
            if let (Some(s), Some(o)) = (x.get(src..), o) {
                let _ = vec::copy_rows(s, rs, o, inner, inner, rows);
            }
        });
        return;
    }
    if k >= 2 && st[k - 2] == 1 {
        // dst[a][b] = src[a + b·st] over a block of od[k-2] × inner.
        let rows = od[k - 2];
        let block = rows * inner;
        let cs = st[k - 1];
        gather_blocks(&od[..k - 2], &st[..k - 2], block, out, |o, src| {
            if let (Some(s), Some(o)) = (x.get(src..), o) {
                let _ = vec::transpose32(s, cs, o, inner, rows, inner);
            }
        });
        return;
    }
    gather_blocks(&od[..k - 1], &st[..k - 1], inner, out, |o, src| {
        if let Some(o) = o {
            for (j, v) in o.iter_mut().enumerate() {
                *v = x.get(src + j * st[k - 1]).copied().unwrap_or(0.0);
            }
        }
    });
}

/// Walks the outer dims `od` (input strides `st`) in row-major order and calls `f` with each
/// consecutive `block`-element output chunk (`None` if `out` is too short) and the input
/// offset of its first element.
fn gather_blocks(
    od: &[usize],
    st: &[usize],
    block: usize,
    out: &mut [f32],
    f: impl Fn(Option<&mut [f32]>, usize) + Sync,
) {
    let outer: usize = od.iter().product();
    let block = block.max(1);
    let n = (outer * block).min(out.len());
    let r = od.len();
    // src offset change when dim d advances by one and the dims after it wrap to 0.
    let mut jumps = [0isize; MAX_DIMS];
    for d in 0..r {
        let back: usize = (d + 1..r).map(|e| (od[e] - 1) * st[e]).sum();
        jumps[d] = st[d] as isize - back as isize;
    }
    // Whole blocks across cores; each part starts its odometer at its first block.
    parallel::for_chunks(&mut out[..n], block, block * 2, |b0, o, _| {
        let mut idx = [0usize; MAX_DIMS];
        let mut rest = b0;
        for d in (0..r).rev() {
            idx[d] = rest % od[d].max(1);
            rest /= od[d].max(1);
        }
        let mut src: usize = (0..r).map(|d| idx[d] * st[d]).sum();
        for chunk in o.chunks_mut(block) {
            let whole = chunk.len() == block;
            f(whole.then_some(chunk), src);
            let Some(d) = (0..r).rev().find(|&d| idx[d] + 1 < od[d]) else {
                break;
            };
            idx[d] += 1;
            // The dims after d wrap to 0: a fixed-length pass over the small index array
            // (a variable-length fill would be a library call per block).
            for (e, v) in idx.iter_mut().enumerate() {
                if e > d {
                    *v = 0;
                }
            }
            src = src.wrapping_add_signed(jumps[d]);
        }
    });
}

/// Calls `f(row, start, n, rows, stride)` for every group of rows of the `block` placed at
/// `offsets` inside `outer`: a row is a run of `n` elements along the last dim (after merging
/// trailing dims the block covers whole); a group is the `rows` consecutive rows along the dim
/// before it, `stride` elements apart in `outer`. `row` counts rows of the block (the group's
/// first), `start` is its first element in `outer`. An odometer over the remaining dims steps
/// `start` (no per-row index arithmetic); the group is one strided copy for the callers.
fn block_rows(
    block: &Shape,
    outer: &Shape,
    offsets: &[u32],
    mut f: impl FnMut(usize, usize, usize, usize, usize),
) {
    let r = block.rank();
    if r == 0 || block.numel() == 0 {
        if r == 0 {
            f(0, 0, 1, 1, 0);
        }
        return;
    }
    // Element strides of `outer`; merge the trailing dims the block spans whole.
    let mut st = [0usize; MAX_DIMS];
    let mut acc = 1;
    for i in (0..r).rev() {
        st[i] = acc;
        acc *= outer.dims()[i];
    }
    let mut last = r - 1;
    let mut inner = block.dims()[last];
    let mut start0 = offsets[last] as usize;
    while last > 0
        && block.dims()[last] == outer.dims()[last]
        && offsets[last] == 0
        && inner == st[last - 1]
    {
        last -= 1;
        inner *= block.dims()[last];
        start0 = offsets[last] as usize * st[last];
    }
    for d in 0..last {
        start0 += offsets[d] as usize * st[d];
    }
    // Groups along dim `last - 1`; odometer over the dims before it.
    let (outer_dims, group, stride) = if last > 0 {
        (last - 1, block.dims()[last - 1], st[last - 1])
    } else {
        (0, 1, 0)
    };
    let mut idx = [0usize; MAX_DIMS];
    let groups = block.numel() / (inner * group);
    let mut start = start0;
    for g in 0..groups {
        f(g * group, start, inner, group, stride);
        let mut d = outer_dims;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            start += st[d];
            if idx[d] < block.dims()[d] {
                break;
            }
            start -= block.dims()[d] * st[d];
            idx[d] = 0;
        }
    }
}

/// Copies the block at `offsets` with the output's dims.
pub fn slice(x: &[f32], xd: &Shape, offsets: &[u32], out: &mut [f32], od: &Shape) {
    block_rows(od, xd, offsets, |row, src, n, rows, stride| {
        let _ = vec::copy_rows(&x[src..], stride, &mut out[row * n..], n, n, rows);
    });
}

/// Concatenation along `axis`: inputs are copied block-wise.
pub fn concat(inputs: &[(&[f32], Shape)], axis: usize, out: &mut [f32], od: &Shape) {
    let outer: usize = od.dims()[..axis].iter().product();
    let inner: usize = od.dims()[axis + 1..].iter().product();
    let row = od.dims()[axis] * inner;
    let mut at = 0;
    for (x, d) in inputs {
        let chunk = d.dims()[axis] * inner;
        let _ = vec::copy_rows(x, chunk, &mut out[at..], row, chunk, outer);
        at += chunk;
    }
}

/// Constant padding: `out` filled with `value`, `x` placed at offsets `pre`.
pub fn pad(x: &[f32], xd: &Shape, pre: &[u32], value: f32, out: &mut [f32], od: &Shape) {
    out.fill(value);
    block_rows(xd, od, pre, |row, dst, n, rows, stride| {
        let _ = vec::copy_rows(&x[row * n..], n, &mut out[dst..], stride, n, rows);
    });
}

/// The convolution geometry of an NHWC node: input `xd` `[N, H, W, C]`, output `od`
/// `[N, OH, OW, OC]` (`None` unless both have rank 4).
pub fn conv_geometry(xd: &Shape, od: &Shape, win: &Window, groups: usize) -> Option<Conv2d> {
    let (&[n, h, w, c], &[_, oh, ow, oc]) = (xd.dims(), od.dims()) else {
        return None;
    };
    Some(Conv2d {
        batch: n,
        in_h: h,
        in_w: w,
        in_c: c,
        out_h: oh,
        out_w: ow,
        out_c: oc,
        kh: win.kh,
        kw: win.kw,
        stride_h: win.stride_h,
        stride_w: win.stride_w,
        dil_h: win.dil_h,
        dil_w: win.dil_w,
        pad_top: win.pad_top,
        pad_left: win.pad_left,
        groups,
    })
}

/// The geometry of an NHWC transposed convolution node: input `xd` `[N, H, W, C]`, output
/// `od` `[N, OH, OW, OC]` (`None` unless both have rank 4).
pub fn conv_transpose_geometry(
    xd: &Shape,
    od: &Shape,
    win: &Window,
    groups: usize,
) -> Option<ConvTranspose2d> {
    conv_geometry(xd, od, win, groups).map(ConvTranspose2d::from)
}

/// Scratch floats a (plain or transposed) convolution node needs, from its input and output
/// dims (`None`: not a convolution, or dims not known or not of rank 4).
pub fn conv_node_scratch_f32<'s>(
    op: &Op,
    dims: &dyn Fn(u32) -> Option<&'s Shape>,
) -> Option<usize> {
    match *op {
        Op::Conv {
            x,
            out,
            win,
            groups,
            depthwise,
            ..
        } => conv_geometry(dims(x)?, dims(out)?, &win, groups)
            .map(|p| conv_scratch_f32(&p, depthwise)),
        Op::ConvTranspose {
            x,
            out,
            win,
            groups,
            ..
        } => conv_transpose_geometry(dims(x)?, dims(out)?, &win, groups)
            .map(|p| conv::transposed::scratch_f32_nhwc(&p)),
        _ => None,
    }
}

/// Scratch floats a convolution node needs ([`conv2d_nhwc`]).
pub fn conv_scratch_f32(p: &Conv2d, depthwise: bool) -> usize {
    if depthwise {
        0
    } else {
        conv::nhwc::scratch_f32(p)
    }
}

/// An XNNPACK `Conv2d` (filter `[OC, KH, KW, C/groups]`) or `DepthwiseConv2d` (filter
/// `[1, KH, KW, OC]`) node on `linalg::conv`, bias and output clamp fused.
#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    depthwise: bool,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if depthwise {
        conv::depthwise::depthwise_nhwc(p, x, w, bias, out, range)
    } else {
        conv::nhwc::conv2d(p, x, w, bias, out, range, scratch)
    }
}

/// NHWC max or average pooling (average counts only elements inside the input).
pub fn pool_nhwc(x: &[f32], xd: &Shape, out: &mut [f32], od: &Shape, win: &Window, max: bool) {
    let (nb, h, wi, c) = (xd.dims()[0], xd.dims()[1], xd.dims()[2], xd.dims()[3]);
    let (oh, ow) = (od.dims()[1], od.dims()[2]);
    for b in 0..nb {
        for y in 0..oh {
            for xo in 0..ow {
                let obase = ((b * oh + y) * ow + xo) * c;
                let o = &mut out[obase..obase + c];
                o.fill(if max { f32::NEG_INFINITY } else { 0.0 });
                let mut count = 0usize;
                for ky in 0..win.kh {
                    let iy = (y * win.stride_h + ky * win.dil_h) as isize - win.pad_top as isize;
                    if iy < 0 || iy as usize >= h {
                        continue;
                    }
                    for kx in 0..win.kw {
                        let ix =
                            (xo * win.stride_w + kx * win.dil_w) as isize - win.pad_left as isize;
                        if ix < 0 || ix as usize >= wi {
                            continue;
                        }
                        count += 1;
                        let ibase = ((b * h + iy as usize) * wi + ix as usize) * c;
                        for (ov, &iv) in o.iter_mut().zip(&x[ibase..ibase + c]) {
                            *ov = if max { ov.max(iv) } else { *ov + iv };
                        }
                    }
                }
                if !max && count > 0 {
                    let inv = 1.0 / count as f32;
                    o.iter_mut().for_each(|v| *v *= inv);
                }
            }
        }
    }
}

/// Mean over H and W of an NHWC tensor → `[N, C]`.
pub fn global_avg_pool_nhwc(x: &[f32], xd: &Shape, out: &mut [f32]) {
    let (nb, hw, c) = (xd.dims()[0], xd.dims()[1] * xd.dims()[2], xd.dims()[3]);
    for b in 0..nb {
        let o = &mut out[b * c..(b + 1) * c];
        o.fill(0.0);
        for p in 0..hw {
            let base = (b * hw + p) * c;
            o.iter_mut()
                .zip(&x[base..base + c])
                .for_each(|(a, &v)| *a += v);
        }
        let inv = 1.0 / hw.max(1) as f32;
        o.iter_mut().for_each(|v| *v *= inv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{broadcast_dims, broadcast_index};

    fn shape_of(d: &[usize]) -> Shape {
        Shape::new(d).expect("test shapes have rank <= 16")
    }
    use std::vec::Vec;

    fn ramp(n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|k| (((k * 7919) % 1000) as f32 / 500.0 - 1.0) * scale + 0.375)
            .collect()
    }

    #[test]
    fn binary_broadcast_forms() {
        let cases: [(&[usize], &[usize]); 15] = [
            (&[17], &[17]),
            // Rows of whole chunks: split by chunks, parts starting inside a row.
            (&[1, 6, 16, 64], &[1, 1, 16, 64]),
            (&[1, 1, 16, 64], &[1, 6, 16, 64]),
            (&[3, 192], &[192]),
            (&[1, 4, 16, 16], &[1, 1, 16, 16]),
            (&[1, 1, 16, 16], &[1, 4, 16, 16]),
            (&[3, 129], &[129]),
            (&[1, 16, 64], &[1]),
            (&[1], &[2, 3]),
            (&[4, 1], &[1, 3]),
            (&[2, 3, 5], &[3, 1]),
            (&[1, 3], &[5, 3]),
            // Runs along the last dim: one operand repeats one element per row (a column),
            // both repeat (last dim 1), outer dims broadcast on both sides.
            (&[2, 1, 5], &[1, 4, 1]),
            (&[4, 1], &[2, 1, 1]),
            (&[3, 1, 7], &[3, 2, 7]),
        ];
        let ops = Binary::ALL;
        for (as_, bs) in cases {
            let os = broadcast_dims(as_, bs);
            let a = ramp(as_.iter().product(), 3.0);
            let b = ramp(bs.iter().product(), -2.0);
            let n: usize = os.iter().product();
            // One core, and split over 4 (every split gives the same elements).
            for (op, team) in ops.into_iter().flat_map(|op| [(op, 1), (op, 4)]) {
                let mut out = std::vec![f32::NAN; n];
                let run = |out: &mut [f32]| {
                    binary(
                        op,
                        &a,
                        &shape_of(as_),
                        &b,
                        &shape_of(bs),
                        out,
                        &shape_of(&os),
                    )
                };
                if team > 1 {
                    let team = crate::testing::CountingTeam::new(team);
                    crate::parallel::scoped(&team, || run(&mut out));
                } else {
                    run(&mut out);
                }
                for (o, &g) in out.iter().enumerate() {
                    let w = apply(
                        op,
                        a[broadcast_index(o, &os, as_)],
                        b[broadcast_index(o, &os, bs)],
                    );
                    assert_eq!(g, w, "{op:?} {as_:?} {bs:?} at {o}");
                }
            }
        }
    }

    #[test]
    fn unary_and_softmax_use_shared_kernels() {
        for n in [0usize, 1, 3, 17, 129] {
            let x = ramp(n, 6.0);
            let mut y = std::vec![0.0f32; n];
            type R = fn(f64) -> f64;
            // (op, reference, absolute floor of the tolerance 3e-6·max(|y|, floor))
            let cases: [(Unary, R, f64); 4] = [
                (Unary::Tanh, f64::tanh, 0.03),
                (Unary::Exp, f64::exp, 0.03),
                (Unary::Sigmoid, |v| 1.0 / (1.0 + (-v).exp()), 0.03),
                // The rational erf's absolute error (vecmath::gelu_erf).
                (
                    Unary::Gelu,
                    |v| 0.5 * v * libm::erfc(-v / core::f64::consts::SQRT_2),
                    0.33,
                ),
            ];
            for (op, r, floor) in cases {
                unary(op, &x, &mut y);
                for (g, &v) in y.iter().zip(&x) {
                    let w = r(v as f64);
                    assert!(
                        (*g as f64 - w).abs() <= 3e-6 * w.abs().max(floor),
                        "{op:?}({v}) = {g}, want {w}"
                    );
                }
            }
            if n > 0 {
                let rows = 3;
                let xr = ramp(rows * n, 5.0);
                let mut yr = std::vec![0.0f32; rows * n];
                softmax_rows(&xr, &mut yr, n);
                for r in 0..rows {
                    let row = &xr[r * n..(r + 1) * n];
                    let mx = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                    let s: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
                    for j in 0..n {
                        let w = (row[j] as f64 - mx).exp() / s;
                        assert!((yr[r * n + j] as f64 - w).abs() <= 1e-6 * w + 1e-9);
                    }
                }
            }
        }
    }

    #[test]
    fn transposes_match_reference() {
        let cases: [(&[usize], &[u8]); 8] = [
            (&[4, 4], &[1, 0]),
            (&[17, 129], &[1, 0]),
            (&[1, 16, 4, 16], &[0, 2, 1, 3]),
            (&[1, 4, 16, 16], &[0, 1, 3, 2]),
            (&[2, 3, 5, 7], &[3, 2, 1, 0]),
            (&[2, 3, 5, 7], &[0, 3, 1, 2]),
            (&[3, 1, 5], &[2, 1, 0]),
            (&[1, 1], &[1, 0]),
        ];
        for (d, perm) in cases {
            let x = ramp(d.iter().product(), 1.0);
            let od: Vec<usize> = perm.iter().map(|&p| d[p as usize]).collect();
            let mut out = std::vec![f32::NAN; x.len()];
            transpose(&x, &shape_of(d), perm, &mut out);
            // Reference: walk output multi-indices.
            for (o, &g) in out.iter().enumerate() {
                let mut rem = o;
                let mut oi = std::vec![0usize; d.len()];
                for k in (0..d.len()).rev() {
                    oi[k] = rem % od[k];
                    rem /= od[k];
                }
                let mut xi = std::vec![0usize; d.len()];
                for (k, &p) in perm.iter().enumerate() {
                    xi[p as usize] = oi[k];
                }
                let src = xi.iter().zip(d).fold(0, |acc, (&i, &n)| acc * n + i);
                assert_eq!(g, x[src], "{d:?} {perm:?} at {o}");
            }
        }
    }
}
