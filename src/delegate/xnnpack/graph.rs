//! Decoding, validation and shape checking of an `XNNGraph` (schema `schema/xnnpack.fbs`).
//!
//! Every node is decoded into an [`Op`] with its value ids; `check` verifies ids, dtypes,
//! and that each node's declared output dims follow from its inputs. Execution decodes the
//! same way (decoding is a handful of table reads per node).

use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;
use crate::shape::{broadcast_shapes, Shape};

/// XNNPACK's "no value" id.
pub const INVALID_ID: u32 = u32::MAX;
/// XNNPACK's highest tensor rank.
pub const MAX_DIMS: usize = 6;
/// `XNN_FLAG_TRANSPOSE_WEIGHTS` / `TRANSPOSE_B`.
pub const FLAG_TRANSPOSE: u32 = 1;

pub(crate) fn bad(detail: &'static str) -> KernelError {
    KernelError::Value { arg: 0, detail }
}

/// Elementwise binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

impl Binary {
    /// Every elementwise binary operator.
    pub const ALL: [Binary; 6] = [
        Binary::Add,
        Binary::Sub,
        Binary::Mul,
        Binary::Div,
        Binary::Min,
        Binary::Max,
    ];
}

/// Elementwise unary operators.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    Copy,
    Clamp,
    Abs,
    Neg,
    Square,
    Sqrt,
    Rsqrt,
    Floor,
    Ceil,
    Exp,
    Log,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Gelu,
    Hardswish,
    LeakyRelu(f32),
    Elu(f32),
}

/// 2-D window geometry (convolution or pooling), NHWC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub pad_top: usize,
    pub pad_left: usize,
    pub pad_bottom: usize,
    pub pad_right: usize,
    pub kh: usize,
    pub kw: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub dil_h: usize,
    pub dil_w: usize,
}

impl Window {
    /// Output height and width of a transposed convolution over an `h` × `w` input with
    /// adjustments `adj_h`, `adj_w` (`None` where the size is not positive).
    pub fn transposed_out_hw(
        &self,
        h: usize,
        w: usize,
        adj_h: usize,
        adj_w: usize,
    ) -> (Option<usize>, Option<usize>) {
        use crate::linalg::conv::transposed::out_len;
        let (ph, pw) = (
            self.pad_top.checked_add(self.pad_bottom),
            self.pad_left.checked_add(self.pad_right),
        );
        (
            ph.and_then(|p| out_len(h, self.kh, self.stride_h, self.dil_h, p, adj_h)),
            pw.and_then(|p| out_len(w, self.kw, self.stride_w, self.dil_w, p, adj_w)),
        )
    }

    /// Output height and width for an input of `h` × `w`, or None where the window does not fit.
    pub fn out_hw(&self, h: usize, w: usize) -> (Option<usize>, Option<usize>) {
        (
            Self::out_dim(
                h,
                self.pad_top,
                self.pad_bottom,
                self.kh,
                self.stride_h,
                self.dil_h,
            ),
            Self::out_dim(
                w,
                self.pad_left,
                self.pad_right,
                self.kw,
                self.stride_w,
                self.dil_w,
            ),
        )
    }

    /// Output extent for an input extent, or None if the window does not fit.
    pub fn out_dim(
        inp: usize,
        pad_a: usize,
        pad_b: usize,
        k: usize,
        stride: usize,
        dil: usize,
    ) -> Option<usize> {
        let eff = dil.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
        let padded = inp.checked_add(pad_a)?.checked_add(pad_b)?;
        if stride == 0 || padded < eff {
            return None;
        }
        Some((padded - eff) / stride + 1)
    }
}

/// One decoded node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Binary {
        op: Binary,
        a: u32,
        b: u32,
        out: u32,
    },
    Unary {
        op: Unary,
        x: u32,
        out: u32,
    },
    /// Softmax over the last dim of `s·x`, `s` the one element of value `scale`, or of `x`
    /// when `scale` is [`INVALID_ID`] (as decoded: the delegate folds a preceding multiply
    /// by a one-element value into the softmax at load).
    Softmax {
        x: u32,
        out: u32,
        scale: u32,
    },
    FullyConnected {
        x: u32,
        w: u32,
        bias: u32,
        out: u32,
        transpose_w: bool,
    },
    BatchMatMul {
        a: u32,
        b: u32,
        out: u32,
        transpose_b: bool,
    },
    Transpose {
        x: u32,
        out: u32,
        perm: [u8; MAX_DIMS],
        rank: u8,
    },
    Reshape {
        x: u32,
        out: u32,
    },
    Slice {
        x: u32,
        out: u32,
        offsets: [u32; MAX_DIMS],
    },
    Concat {
        inputs: [u32; 5],
        n: u8,
        axis: u32,
        out: u32,
    },
    Pad {
        x: u32,
        out: u32,
        pre: [u32; MAX_DIMS],
        value: f32,
    },
    Conv {
        x: u32,
        w: u32,
        bias: u32,
        out: u32,
        win: Window,
        groups: usize,
        depthwise: bool,
    },
    /// Transposed convolution (XNNPACK deconvolution): filter `[OC, KH, KW, C/groups]`,
    /// output size `(in − 1)·stride + dil·(k − 1) + 1 + adj − pad_begin − pad_end`.
    ConvTranspose {
        x: u32,
        w: u32,
        bias: u32,
        out: u32,
        win: Window,
        groups: usize,
        adj_h: usize,
        adj_w: usize,
    },
    Pool {
        x: u32,
        out: u32,
        win: Window,
        max: bool,
    },
    GlobalAvgPool {
        x: u32,
        out: u32,
    },
}

/// Node name for messages (the schema's union member name).
pub fn node_name(t: xf::XNodeUnion) -> &'static str {
    t.variant_name().unwrap_or("unknown node type")
}

fn list6(
    v: Option<flatbuffers::Vector<'_, u32>>,
    what: &'static str,
) -> Result<([u32; MAX_DIMS], usize), KernelError> {
    let v = v.ok_or(bad(what))?;
    if v.len() > MAX_DIMS {
        return Err(bad("node parameter list longer than 6"));
    }
    let mut out = [0u32; MAX_DIMS];
    for (i, x) in v.iter().enumerate() {
        out[i] = x;
    }
    Ok((out, v.len()))
}

/// The union member table of `node` viewed as `T`.
///
/// # Safety
/// `T` must be the table type the schema assigns to `node`'s union tag (aliases such as
/// `XNNMultiply: _XNNNode2x1` share one type). The verifier checked the member as that type.
unsafe fn body<'a, T>(
    node: xf::XNode<'a>,
    make: unsafe fn(flatbuffers::Table<'a>) -> T,
) -> Result<T, KernelError> {
    let t = node.xnode_union().ok_or(bad("node body missing"))?;
    // SAFETY: guaranteed by the caller (tag ↔ type) and by verification of the buffer.
    Ok(unsafe { make(t) })
}

/// Decodes a node; unsupported node types are an error naming them.
#[inline(always)]
pub fn decode(node: xf::XNode<'_>) -> Result<(Op, Option<(f32, f32)>), KernelError> {
    let t = node.xnode_union_type();
    let clamp = node
        .output_min_max()
        .map(|m| (m.output_min(), m.output_max()));
    let missing = bad("node body missing");
    let bin = |op| -> Result<Op, KernelError> {
        // SAFETY: only called for tags whose member type is _XNNNode2x1.
        let n = unsafe { body(node, xf::_XNNNode2x1::init_from_table) }?;
        Ok(Op::Binary {
            op,
            a: n.input1_id(),
            b: n.input2_id(),
            out: n.output_id(),
        })
    };
    let un = |op| -> Result<Op, KernelError> {
        // SAFETY: only called for tags whose member type is _XNNNode1x1.
        let n = unsafe { body(node, xf::_XNNNode1x1::init_from_table) }?;
        Ok(Op::Unary {
            op,
            x: n.input_id(),
            out: n.output_id(),
        })
    };
    use xf::XNodeUnion as U;
    let op = match t {
        U::XNNAdd => bin(Binary::Add)?,
        U::XNNSubtract => bin(Binary::Sub)?,
        U::XNNMultiply => bin(Binary::Mul)?,
        U::XNNDiv => bin(Binary::Div)?,
        U::XNNMinimum => bin(Binary::Min)?,
        U::XNNMaximum => bin(Binary::Max)?,
        U::XNNCopy | U::XNNConvert => un(Unary::Copy)?,
        U::XNNClamp => un(Unary::Clamp)?,
        U::XNNAbs => un(Unary::Abs)?,
        U::XNNNegate => un(Unary::Neg)?,
        U::XNNSquare => un(Unary::Square)?,
        U::XNNSquareRoot => un(Unary::Sqrt)?,
        U::XNNReciprocalSquareRoot => un(Unary::Rsqrt)?,
        U::XNNFloor => un(Unary::Floor)?,
        U::XNNCeiling => un(Unary::Ceil)?,
        U::XNNExp => un(Unary::Exp)?,
        U::XNNLog => un(Unary::Log)?,
        U::XNNSin => un(Unary::Sin)?,
        U::XNNCos => un(Unary::Cos)?,
        U::XNNTanh => un(Unary::Tanh)?,
        U::XNNSigmoid => un(Unary::Sigmoid)?,
        U::XNNGelu => un(Unary::Gelu)?,
        U::XNNHardswish => un(Unary::Hardswish)?,
        U::XNNLeakyReLU => {
            let n = node.xnode_union_as_xnnleaky_re_lu().ok_or(missing)?;
            Op::Unary {
                op: Unary::LeakyRelu(n.negative_slope()),
                x: n.input_id(),
                out: n.output_id(),
            }
        }
        U::XNNELU => {
            let n = node.xnode_union_as_xnnelu().ok_or(missing)?;
            Op::Unary {
                op: Unary::Elu(n.alpha()),
                x: n.input_id(),
                out: n.output_id(),
            }
        }
        U::XNNSoftmax => {
            // SAFETY: XNNSoftmax uses _XNNNode1x1.
            let n = unsafe { body(node, xf::_XNNNode1x1::init_from_table) }?;
            Op::Softmax {
                x: n.input_id(),
                out: n.output_id(),
                scale: INVALID_ID,
            }
        }
        U::XNNGlobalAvgPooling2d => {
            // SAFETY: XNNGlobalAvgPooling2d uses _XNNNode1x1.
            let n = unsafe { body(node, xf::_XNNNode1x1::init_from_table) }?;
            Op::GlobalAvgPool {
                x: n.input_id(),
                out: n.output_id(),
            }
        }
        U::XNNFullyConnected => {
            let n = node.xnode_union_as_xnnfully_connected().ok_or(missing)?;
            if n.flags() & !FLAG_TRANSPOSE != 0 {
                return Err(bad("XNNFullyConnected: unsupported flags"));
            }
            Op::FullyConnected {
                x: n.input1_id(),
                w: n.filter_id(),
                bias: n.bias_id(),
                out: n.output_id(),
                transpose_w: n.flags() & FLAG_TRANSPOSE != 0,
            }
        }
        U::XNNBatchMatrixMultiply => {
            // SAFETY: XNNBatchMatrixMultiply uses _XNNNode2x1.
            let n = unsafe { body(node, xf::_XNNNode2x1::init_from_table) }?;
            if n.flags() & !FLAG_TRANSPOSE != 0 {
                return Err(bad("XNNBatchMatrixMultiply: unsupported flags"));
            }
            Op::BatchMatMul {
                a: n.input1_id(),
                b: n.input2_id(),
                out: n.output_id(),
                transpose_b: n.flags() != 0,
            }
        }
        U::XNNStaticTranspose => {
            let n = node.xnode_union_as_xnnstatic_transpose().ok_or(missing)?;
            let (p, len) = list6(n.perm(), "XNNStaticTranspose: perm missing")?;
            let mut perm = [0u8; MAX_DIMS];
            let mut seen = [false; MAX_DIMS];
            for i in 0..len {
                let d = p[i] as usize;
                if d >= len || seen[d] {
                    return Err(bad("XNNStaticTranspose: perm is not a permutation"));
                }
                seen[d] = true;
                perm[i] = d as u8;
            }
            Op::Transpose {
                x: n.input_id(),
                out: n.output_id(),
                perm,
                rank: len as u8,
            }
        }
        U::XNNStaticReshape => {
            let n = node.xnode_union_as_xnnstatic_reshape().ok_or(missing)?;
            Op::Reshape {
                x: n.input_id(),
                out: n.output_id(),
            }
        }
        U::XNNStaticSlice => {
            let n = node.xnode_union_as_xnnstatic_slice().ok_or(missing)?;
            let (offsets, _) = list6(n.offsets(), "XNNStaticSlice: offsets missing")?;
            Op::Slice {
                x: n.input_id(),
                out: n.output_id(),
                offsets,
            }
        }
        U::XNNConcatenate2 | U::XNNConcatenate3 | U::XNNConcatenate4 | U::XNNConcatenate5 => {
            // SAFETY: the XNNConcatenate2..5 tags all use _XNNCat.
            let n = unsafe { body(node, xf::_XNNCat::init_from_table) }?;
            let count = match t {
                U::XNNConcatenate2 => 2,
                U::XNNConcatenate3 => 3,
                U::XNNConcatenate4 => 4,
                _ => 5,
            };
            let inputs = [
                n.input1_id(),
                n.input2_id(),
                n.input3_id(),
                n.input4_id(),
                n.input5_id(),
            ];
            Op::Concat {
                inputs,
                n: count,
                axis: n.axis(),
                out: n.output_id(),
            }
        }
        U::XNNStaticConstantPad => {
            let n = node
                .xnode_union_as_xnnstatic_constant_pad()
                .ok_or(missing)?;
            let (pre, _) = list6(
                n.pre_paddings(),
                "XNNStaticConstantPad: pre_paddings missing",
            )?;
            Op::Pad {
                x: n.input_id(),
                out: n.output_id(),
                pre,
                value: n.padding_value(),
            }
        }
        U::XNNConv2d | U::XNNDepthwiseConv2d | U::XNNConvTranspose2d => {
            // SAFETY: XNNConv2d, XNNDepthwiseConv2d and XNNConvTranspose2d all use
            // _XNNNodeConv.
            let n = unsafe { body(node, xf::_XNNNodeConv::init_from_table) }?;
            let win = Window {
                pad_top: n.padding_top() as usize,
                pad_left: n.padding_left() as usize,
                pad_bottom: n.padding_bottom() as usize,
                pad_right: n.padding_right() as usize,
                kh: n.kernel_height() as usize,
                kw: n.kernel_width() as usize,
                stride_h: n.subsampling_height() as usize,
                stride_w: n.subsampling_width() as usize,
                dil_h: n.dilation_height() as usize,
                dil_w: n.dilation_width() as usize,
            };
            if n.flags() != 0 {
                return Err(bad("convolution: unsupported flags"));
            }
            if t == U::XNNConvTranspose2d {
                return Ok((
                    Op::ConvTranspose {
                        x: n.input1_id(),
                        w: n.filter_id(),
                        bias: n.bias_id(),
                        out: n.output_id(),
                        win,
                        groups: n.groups() as usize,
                        adj_h: n.adjustment_height() as usize,
                        adj_w: n.adjustment_width() as usize,
                    },
                    clamp,
                ));
            }
            Op::Conv {
                x: n.input1_id(),
                w: n.filter_id(),
                bias: n.bias_id(),
                out: n.output_id(),
                win,
                groups: n.groups() as usize,
                depthwise: t == U::XNNDepthwiseConv2d,
            }
        }
        U::XNNMaxPooling2d | U::XNNAvgPooling2d => {
            // SAFETY: XNNMaxPooling2d and XNNAvgPooling2d both use _XNNPooling2D.
            let n = unsafe { body(node, xf::_XNNPooling2D::init_from_table) }?;
            let max = t == U::XNNMaxPooling2d;
            let win = Window {
                pad_top: n.padding_top() as usize,
                pad_left: n.padding_left() as usize,
                pad_bottom: n.padding_bottom() as usize,
                pad_right: n.padding_right() as usize,
                kh: n.pooling_height() as usize,
                kw: n.pooling_width() as usize,
                stride_h: n.stride_height() as usize,
                stride_w: n.stride_width() as usize,
                // Average pooling leaves dilation 0 (unused).
                dil_h: (n.dilation_height() as usize).max(1),
                dil_w: (n.dilation_width() as usize).max(1),
            };
            Op::Pool {
                x: n.input_id(),
                out: n.output_id(),
                win,
                max,
            }
        }
        _ => {
            return Err(KernelError::Unsupported {
                detail: node_name(t),
            })
        }
    };
    Ok((op, clamp))
}

impl Op {
    /// Value ids the node reads (INVALID_ID entries skipped by callers).
    pub fn inputs(&self) -> ([u32; 5], usize) {
        let mut v = [INVALID_ID; 5];
        let n = match *self {
            Op::Binary { a, b, .. } | Op::BatchMatMul { a, b, .. } => {
                v[0] = a;
                v[1] = b;
                2
            }
            Op::Softmax { x, scale, .. } if scale != INVALID_ID => {
                v[0] = x;
                v[1] = scale;
                2
            }
            Op::Unary { x, .. }
            | Op::Softmax { x, .. }
            | Op::Transpose { x, .. }
            | Op::Reshape { x, .. }
            | Op::Slice { x, .. }
            | Op::Pad { x, .. }
            | Op::Pool { x, .. }
            | Op::GlobalAvgPool { x, .. } => {
                v[0] = x;
                1
            }
            Op::FullyConnected { x, w, bias, .. }
            | Op::Conv { x, w, bias, .. }
            | Op::ConvTranspose { x, w, bias, .. } => {
                v[0] = x;
                v[1] = w;
                v[2] = bias;
                3
            }
            Op::Concat { inputs, n, .. } => {
                v[..n as usize].copy_from_slice(&inputs[..n as usize]);
                n as usize
            }
        };
        (v, n)
    }

    #[inline]
    pub fn output(&self) -> u32 {
        match *self {
            Op::Binary { out, .. }
            | Op::Unary { out, .. }
            | Op::Softmax { out, .. }
            | Op::FullyConnected { out, .. }
            | Op::BatchMatMul { out, .. }
            | Op::Transpose { out, .. }
            | Op::Reshape { out, .. }
            | Op::Slice { out, .. }
            | Op::Concat { out, .. }
            | Op::Pad { out, .. }
            | Op::Conv { out, .. }
            | Op::ConvTranspose { out, .. }
            | Op::Pool { out, .. }
            | Op::GlobalAvgPool { out, .. } => out,
        }
    }
}

/// Size of the last dim (1 for a scalar).
pub fn last_dim(d: &Shape) -> usize {
    d.dims().last().copied().unwrap_or(1)
}

/// Checks that `op`'s declared output dims follow from its inputs (`dims(id)`).
pub fn check_shapes(op: &Op, dims: &dyn Fn(u32) -> Shape) -> Result<(), KernelError> {
    let mismatch = |what| Err(bad(what));
    let out = dims(op.output());
    match *op {
        Op::Binary { a, b, .. } => {
            if broadcast_shapes(&dims(a), &dims(b)).map(|d| d.numel()) != Some(out.numel())
                || broadcast_shapes(&dims(a), &dims(b)).is_none_or(|d| d.dims() != out.dims())
            {
                return mismatch(
                    "binary node: output dims differ from the broadcast of its inputs",
                );
            }
        }
        Op::Unary { x, .. } | Op::Softmax { x, .. } => {
            if dims(x).dims() != out.dims() {
                return mismatch("elementwise node: output dims differ from input dims");
            }
        }
        Op::FullyConnected {
            x,
            w,
            bias,
            transpose_w,
            ..
        } => {
            let (xd, wd) = (dims(x), dims(w));
            if wd.rank() != 2 {
                return mismatch("XNNFullyConnected: filter must be 2-D");
            }
            let (n, k) = if transpose_w {
                (wd.dims()[1], wd.dims()[0])
            } else {
                (wd.dims()[0], wd.dims()[1])
            };
            if last_dim(&xd) != k
                || k == 0
                || last_dim(&out) != n
                || (xd.numel() / k).checked_mul(n) != Some(out.numel())
            {
                return mismatch("XNNFullyConnected: input, filter and output dims disagree");
            }
            if bias != INVALID_ID && dims(bias).numel() != n {
                return mismatch("XNNFullyConnected: bias size differs from output channels");
            }
        }
        Op::BatchMatMul {
            a, b, transpose_b, ..
        } => {
            let (ad, bd) = (dims(a), dims(b));
            if ad.rank() < 2 || bd.rank() != ad.rank() || out.rank() != ad.rank() {
                return mismatch("XNNBatchMatrixMultiply: ranks disagree");
            }
            let r = ad.rank();
            let (m, k) = (ad.dims()[r - 2], ad.dims()[r - 1]);
            let (kb, n) = if transpose_b {
                (bd.dims()[r - 1], bd.dims()[r - 2])
            } else {
                (bd.dims()[r - 2], bd.dims()[r - 1])
            };
            if k != kb
                || out.dims()[r - 2] != m
                || out.dims()[r - 1] != n
                || ad.dims()[..r - 2] != bd.dims()[..r - 2]
                || ad.dims()[..r - 2] != out.dims()[..r - 2]
            {
                return mismatch("XNNBatchMatrixMultiply: dims disagree");
            }
        }
        Op::Transpose { x, perm, rank, .. } => {
            let xd = dims(x);
            if xd.rank() != rank as usize
                || out.rank() != xd.rank()
                || (0..xd.rank()).any(|i| out.dims()[i] != xd.dims()[perm[i] as usize])
            {
                return mismatch("XNNStaticTranspose: output dims are not the permuted input dims");
            }
        }
        Op::Reshape { x, .. } => {
            if dims(x).numel() != out.numel() {
                return mismatch("XNNStaticReshape: element count changes");
            }
        }
        Op::Slice { x, offsets, .. } => {
            let xd = dims(x);
            if xd.rank() != out.rank()
                || (0..xd.rank())
                    .any(|i| (offsets[i] as usize).saturating_add(out.dims()[i]) > xd.dims()[i])
            {
                return mismatch("XNNStaticSlice: slice exceeds the input");
            }
        }
        Op::Concat {
            inputs, n, axis, ..
        } => {
            let axis = axis as usize;
            let first = dims(inputs[0]);
            if axis >= first.rank() || out.rank() != first.rank() {
                return mismatch("concatenate: axis out of range");
            }
            let mut total = 0;
            for &id in &inputs[..n as usize] {
                let d = dims(id);
                if d.rank() != first.rank()
                    || (0..d.rank()).any(|i| i != axis && d.dims()[i] != out.dims()[i])
                {
                    return mismatch("concatenate: input dims disagree");
                }
                total += d.dims()[axis];
            }
            if total != out.dims()[axis] {
                return mismatch("concatenate: output size along axis");
            }
        }
        Op::Pad { x, pre, .. } => {
            let xd = dims(x);
            if xd.rank() != out.rank()
                || (0..xd.rank())
                    .any(|i| out.dims()[i] < xd.dims()[i].saturating_add(pre[i] as usize))
            {
                return mismatch("XNNStaticConstantPad: output smaller than padded input");
            }
        }
        Op::Conv {
            x,
            w,
            bias,
            win,
            groups,
            depthwise,
            ..
        } => {
            let (xd, wd) = (dims(x), dims(w));
            if xd.rank() != 4 || wd.rank() != 4 || out.rank() != 4 || groups == 0 {
                return mismatch("convolution: NHWC input, 4-D filter and output expected");
            }
            let (c, oc) = (xd.dims()[3], out.dims()[3]);
            let ok_filter = if depthwise {
                wd.dims() == [1, win.kh, win.kw, oc] && groups == c && oc % c == 0
            } else {
                wd.dims() == [oc, win.kh, win.kw, c / groups] && c % groups == 0 && oc % groups == 0
            };
            let (oh, ow) = win.out_hw(xd.dims()[1], xd.dims()[2]);
            if !ok_filter
                || out.dims()[0] != xd.dims()[0]
                || oh != Some(out.dims()[1])
                || ow != Some(out.dims()[2])
            {
                return mismatch("convolution: input, filter and output dims disagree");
            }
            if bias != INVALID_ID && dims(bias).numel() != oc {
                return mismatch("convolution: bias size differs from output channels");
            }
        }
        Op::ConvTranspose {
            x,
            w,
            bias,
            win,
            groups,
            adj_h,
            adj_w,
            ..
        } => {
            let (xd, wd) = (dims(x), dims(w));
            if xd.rank() != 4 || wd.rank() != 4 || out.rank() != 4 || groups == 0 {
                return mismatch(
                    "transposed convolution: NHWC input, 4-D filter and output expected",
                );
            }
            let (c, oc) = (xd.dims()[3], out.dims()[3]);
            let ok_filter = wd.dims() == [oc, win.kh, win.kw, c / groups]
                && c % groups == 0
                && oc % groups == 0;
            let (oh, ow) = win.transposed_out_hw(xd.dims()[1], xd.dims()[2], adj_h, adj_w);
            if !ok_filter
                || out.dims()[0] != xd.dims()[0]
                || oh != Some(out.dims()[1])
                || ow != Some(out.dims()[2])
            {
                return mismatch("transposed convolution: input, filter and output dims disagree");
            }
            if bias != INVALID_ID && dims(bias).numel() != oc {
                return mismatch("transposed convolution: bias size differs from output channels");
            }
        }
        Op::Pool { x, win, .. } => {
            let xd = dims(x);
            let (oh, ow) = win.out_hw(xd.dims()[1], xd.dims()[2]);
            if xd.rank() != 4
                || out.rank() != 4
                || out.dims()[0] != xd.dims()[0]
                || out.dims()[3] != xd.dims()[3]
                || oh != Some(out.dims()[1])
                || ow != Some(out.dims()[2])
            {
                return mismatch("pooling: input and output dims disagree");
            }
        }
        Op::GlobalAvgPool { x, .. } => {
            let xd = dims(x);
            if xd.rank() != 4 || out.numel() != xd.dims()[0] * xd.dims()[3] {
                return mismatch("global average pooling: dims disagree");
            }
        }
    }
    Ok(())
}
