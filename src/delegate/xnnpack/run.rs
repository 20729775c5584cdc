//! f32 compute for XNNPACK graph nodes over plain slices (contiguous, row-major; NHWC for
//! convolution and pooling, as the XNNPACK graph stores them).

use super::graph::{Binary, Dims, Unary, Window, MAX_DIMS};
use crate::error::KernelError;
use crate::kernels::gemm::{self, MatRef};
use crate::kernels::vec;

/// Row-major strides of `d`, with 0 for broadcast (size-1) dims when aligned to `out`.
fn bcast_strides(d: &Dims, out: &Dims) -> [usize; MAX_DIMS] {
    let mut st = [0usize; MAX_DIMS];
    let off = out.rank - d.rank;
    let mut acc = 1;
    for i in (0..d.rank).rev() {
        st[off + i] = if d.d[i] == 1 { 0 } else { acc };
        acc *= d.d[i];
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

fn zip_with(op: Binary, a: &[f32], b: &[f32], out: &mut [f32]) {
    let n = a.len().min(b.len()).min(out.len());
    let (a, b, out) = (&a[..n], &b[..n], &mut out[..n]);
    if let Some(v) = vec_op(op) {
        // Lengths are equal by construction, so this cannot fail.
        let _ = vec::binary(v, a, b, out);
        return;
    }
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = apply(op, x, y);
    }
}

/// `out = a op s` (`swap`: `s op a`).
fn zip_scalar(op: Binary, a: &[f32], s: f32, swap: bool, out: &mut [f32]) {
    let (a, out) = common(a, out);
    match (vec_op(op), swap) {
        (Some(v), false) => {
            let _ = vec::binary_scalar(v, a, s, out);
        }
        (Some(v), true) => {
            let _ = vec::scalar_binary(v, s, a, out);
        }
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

/// `out = a op b` with NumPy broadcasting; `od` is the broadcast shape.
pub fn binary(op: Binary, a: &[f32], ad: &Dims, b: &[f32], bd: &Dims, out: &mut [f32], od: &Dims) {
    let n = out.len();
    if a.len() == n && b.len() == n {
        return zip_with(op, a, b, out);
    }
    let inner = od.last();
    // Row broadcast: one operand is a single row repeated (e.g. bias add, scaling by a vector).
    if a.len() == n && b.len() == inner && bd.last() == inner {
        for (orow, arow) in out.chunks_exact_mut(inner).zip(a.chunks_exact(inner)) {
            zip_with(op, arow, b, orow);
        }
        return;
    }
    if b.len() == n && a.len() == inner && ad.last() == inner {
        for (orow, brow) in out.chunks_exact_mut(inner).zip(b.chunks_exact(inner)) {
            zip_with(op, a, brow, orow);
        }
        return;
    }
    if b.len() == 1 && a.len() == n {
        return zip_scalar(op, a, b[0], false, out);
    }
    if a.len() == 1 && b.len() == n {
        return zip_scalar(op, b, a[0], true, out);
    }
    let (sa, sb) = (bcast_strides(ad, od), bcast_strides(bd, od));
    let mut idx = [0usize; MAX_DIMS];
    let (mut ia, mut ib) = (0usize, 0usize);
    for o in out.iter_mut() {
        *o = apply(op, a[ia], b[ib]);
        for d in (0..od.rank).rev() {
            idx[d] += 1;
            ia += sa[d];
            ib += sb[d];
            if idx[d] < od.d[d] {
                break;
            }
            ia -= sa[d] * idx[d];
            ib -= sb[d] * idx[d];
            idx[d] = 0;
        }
    }
}

/// `out = op(x)`. Exp, tanh, sigmoid and GELU (erf form) use the shared polynomial kernels of
/// `kernels::vec` (accuracy table there).
pub fn unary(op: Unary, x: &[f32], out: &mut [f32]) {
    let (x, out) = common(x, out);
    macro_rules! map {
        ($f:expr) => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = $f(v);
            }
        };
    }
    match op {
        Unary::Copy | Unary::Clamp => out.copy_from_slice(x),
        Unary::Abs => map!(|v: f32| v.abs()),
        Unary::Neg => map!(|v: f32| -v),
        Unary::Square => map!(|v: f32| v * v),
        Unary::Sqrt => map!(libm::sqrtf),
        Unary::Rsqrt => map!(|v: f32| 1.0 / libm::sqrtf(v)),
        Unary::Floor => map!(libm::floorf),
        Unary::Ceil => map!(libm::ceilf),
        Unary::Exp => {
            let _ = vec::exp(x, out);
        }
        Unary::Log => map!(libm::logf),
        Unary::Sin => map!(libm::sinf),
        Unary::Cos => map!(libm::cosf),
        Unary::Tanh => {
            let _ = vec::tanh(x, out);
        }
        Unary::Sigmoid => {
            let _ = vec::sigmoid(x, out);
        }
        Unary::Gelu => {
            let _ = vec::gelu_erf(x, out);
        }
        Unary::Hardswish => map!(|v: f32| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        Unary::LeakyRelu(s) => map!(|v: f32| if v >= 0.0 { v } else { v * s }),
        Unary::Elu(a) => map!(|v: f32| if v > 0.0 {
            v
        } else {
            a * (libm::expf(v) - 1.0)
        }),
    }
}

/// Clamps every element into `[lo, hi]`.
pub fn clamp(out: &mut [f32], lo: f32, hi: f32) {
    if lo == f32::NEG_INFINITY && hi == f32::INFINITY {
        return;
    }
    for v in out {
        *v = v.max(lo).min(hi);
    }
}

/// Softmax over rows of length `n` (stable: max subtracted; `kernels::vec::softmax`).
pub fn softmax_rows(x: &[f32], out: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let _ = vec::softmax(xr, or);
    }
}

/// Fully connected: `out[m, n] = x[m, k] · W + bias`, W `[n, k]` or (`transpose_w`) `[k, n]`.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    k: usize,
    n: usize,
    transpose_w: bool,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let m = x.len().checked_div(k).unwrap_or(0);
    let a = MatRef::row_major(x, m, k)?;
    let b = if transpose_w {
        MatRef::row_major(w, k, n)?
    } else {
        MatRef::row_major(w, n, k)?.t()
    };
    gemm::sgemm(a, b, out, n, 1.0, 0.0, bias, scratch)
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
    for i in 0..batch {
        let ai = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k)?;
        let bs = &b[i * k * n..(i + 1) * k * n];
        let bi = if transpose_b {
            MatRef::row_major(bs, n, k)?.t()
        } else {
            MatRef::row_major(bs, k, n)?
        };
        gemm::sgemm(
            ai,
            bi,
            &mut out[i * m * n..(i + 1) * m * n],
            n,
            1.0,
            0.0,
            None,
            scratch,
        )?;
    }
    Ok(())
}

/// `out.dims[i] = x.dims[perm[i]]`. Dims are simplified first (size-1 dims dropped, dims
/// adjacent in both orders merged); then an innermost run contiguous in the input is copied
/// row by row, a swap of the last two dims goes through the blocked `vec::transpose32`, and
/// anything else is gathered element by element.
pub fn transpose(x: &[f32], xd: &Dims, perm: &[u8], out: &mut [f32]) {
    let r = xd.rank.min(perm.len());
    let mut xs = [0usize; MAX_DIMS];
    let mut acc = 1;
    for i in (0..r).rev() {
        xs[i] = acc;
        acc *= xd.d[i];
    }
    // Output dims and input strides, simplified.
    let mut od = [0usize; MAX_DIMS];
    let mut st = [0usize; MAX_DIMS];
    let mut k = 0;
    for &p in &perm[..r] {
        let (d, s) = (xd.d[p as usize], xs[p as usize]);
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
        out[..n].copy_from_slice(&x[..n]);
        return;
    }
    let inner = od[k - 1];
    if st[k - 1] == 1 {
        // Rows of `inner` contiguous elements.
        gather_blocks(&od[..k - 1], &st[..k - 1], inner, out, |o, src| {
            if let (Some(s), Some(o)) = (x.get(src..src + inner), o) {
                o.copy_from_slice(s);
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
    mut f: impl FnMut(Option<&mut [f32]>, usize),
) {
    let mut idx = [0usize; MAX_DIMS];
    let mut src = 0usize;
    let outer: usize = od.iter().product();
    for b in 0..outer {
        f(out.get_mut(b * block..(b + 1) * block), src);
        for d in (0..od.len()).rev() {
            idx[d] += 1;
            src += st[d];
            if idx[d] < od[d] {
                break;
            }
            src -= st[d] * idx[d];
            idx[d] = 0;
        }
    }
}

/// Walks the rows (innermost runs) of a `block` placed at `offsets` inside a row-major
/// `outer` tensor: calls `f(row, start)` with the row's index in the block and the element
/// offset of its first element in `outer`.
fn block_rows(block: &Dims, outer: &Dims, offsets: &[u32], mut f: impl FnMut(usize, usize)) {
    let r = block.rank;
    let mut st = [0usize; MAX_DIMS];
    let mut acc = 1;
    for i in (0..r).rev() {
        st[i] = acc;
        acc *= outer.d[i];
    }
    let inner = block.last();
    let rows = block.numel().checked_div(inner).unwrap_or(0);
    let mut idx = [0usize; MAX_DIMS];
    for row in 0..rows {
        let start = (0..r)
            .map(|d| (if d + 1 == r { 0 } else { idx[d] } + offsets[d] as usize) * st[d])
            .sum();
        f(row, start);
        for d in (0..r.saturating_sub(1)).rev() {
            idx[d] += 1;
            if idx[d] < block.d[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Copies the block at `offsets` with the output's dims.
pub fn slice(x: &[f32], xd: &Dims, offsets: &[u32], out: &mut [f32], od: &Dims) {
    let inner = od.last();
    block_rows(od, xd, offsets, |row, src| {
        out[row * inner..(row + 1) * inner].copy_from_slice(&x[src..src + inner])
    });
}

/// Concatenation along `axis`: inputs are copied block-wise.
pub fn concat(inputs: &[(&[f32], Dims)], axis: usize, out: &mut [f32], od: &Dims) {
    let outer: usize = od.d[..axis].iter().product();
    let inner: usize = od.d[axis + 1..od.rank].iter().product();
    let row = od.d[axis] * inner;
    let mut at = 0;
    for (x, d) in inputs {
        let chunk = d.d[axis] * inner;
        for o in 0..outer {
            out[o * row + at..o * row + at + chunk].copy_from_slice(&x[o * chunk..(o + 1) * chunk]);
        }
        at += chunk;
    }
}

/// Constant padding: `out` filled with `value`, `x` placed at offsets `pre`.
pub fn pad(x: &[f32], xd: &Dims, pre: &[u32], value: f32, out: &mut [f32], od: &Dims) {
    out.fill(value);
    let inner = xd.last();
    block_rows(xd, od, pre, |row, dst| {
        out[dst..dst + inner].copy_from_slice(&x[row * inner..(row + 1) * inner])
    });
}

/// NHWC convolution. `w` is `[OC, KH, KW, IC/groups]` (or `[1, KH, KW, OC]` depthwise).
#[allow(clippy::too_many_arguments)]
pub fn conv2d_nhwc(
    x: &[f32],
    xd: &Dims,
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    od: &Dims,
    win: &Window,
    groups: usize,
    depthwise: bool,
) {
    let (nb, h, wi, c) = (xd.d[0], xd.d[1], xd.d[2], xd.d[3]);
    let (oh, ow, oc) = (od.d[1], od.d[2], od.d[3]);
    let icg = c / groups;
    let ocg = oc / groups;
    for b in 0..nb {
        for y in 0..oh {
            for xo in 0..ow {
                let obase = ((b * oh + y) * ow + xo) * oc;
                for o in 0..oc {
                    let g = o / ocg;
                    let mut acc = bias.map_or(0.0, |bv| bv[o]);
                    for ky in 0..win.kh {
                        let iy =
                            (y * win.stride_h + ky * win.dil_h) as isize - win.pad_top as isize;
                        if iy < 0 || iy as usize >= h {
                            continue;
                        }
                        for kx in 0..win.kw {
                            let ix = (xo * win.stride_w + kx * win.dil_w) as isize
                                - win.pad_left as isize;
                            if ix < 0 || ix as usize >= wi {
                                continue;
                            }
                            let ibase = ((b * h + iy as usize) * wi + ix as usize) * c;
                            if depthwise {
                                acc += x[ibase + g] * w[(ky * win.kw + kx) * oc + o];
                            } else {
                                let wbase = ((o * win.kh + ky) * win.kw + kx) * icg;
                                let xs = &x[ibase + g * icg..ibase + (g + 1) * icg];
                                acc += xs
                                    .iter()
                                    .zip(&w[wbase..wbase + icg])
                                    .map(|(a, b)| a * b)
                                    .sum::<f32>();
                            }
                        }
                    }
                    out[obase + o] = acc;
                }
            }
        }
    }
}

/// NHWC max or average pooling (average counts only elements inside the input).
pub fn pool_nhwc(x: &[f32], xd: &Dims, out: &mut [f32], od: &Dims, win: &Window, max: bool) {
    let (nb, h, wi, c) = (xd.d[0], xd.d[1], xd.d[2], xd.d[3]);
    let (oh, ow) = (od.d[1], od.d[2]);
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
pub fn global_avg_pool_nhwc(x: &[f32], xd: &Dims, out: &mut [f32]) {
    let (nb, hw, c) = (xd.d[0], xd.d[1] * xd.d[2], xd.d[3]);
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
