//! A region's nodes as the run loop reads them: decoded from the XNNPACK flatbuffer once, at
//! init, into fixed-size plain records ([`Step`]) in the state area, so that a forward does no
//! flatbuffer reads and no per-node union dispatch. A record is plain data (any bit pattern is
//! a value); [`Step::op`] turns it back into the [`Op`] it was made from and refuses a record
//! that names no operator.

use super::graph::{bad, Binary, Op, Unary, Window, MAX_DIMS};
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;

/// Words of operator parameters: a transposed convolution's window (10), groups and the two
/// adjustments.
const PARAMS: usize = 14;

/// One decoded node. `kind` says which [`Op`] it is (`K_*`), `sub` the elementwise operator
/// or a flag, `ids` its value ids (inputs, then the output last used by the variant), `p` its
/// parameters; `node` is the flatbuffer's union tag (for the node's name in profiles).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Step {
    kind: u32,
    sub: u32,
    ids: [u32; 6],
    p: [u32; PARAMS],
    clamp: [f32; 2],
    has_clamp: u32,
    node: u32,
}

const K_BINARY: u32 = 1;
const K_UNARY: u32 = 2;
const K_SOFTMAX: u32 = 3;
const K_FC: u32 = 4;
const K_BMM: u32 = 5;
const K_TRANSPOSE: u32 = 6;
const K_RESHAPE: u32 = 7;
const K_SLICE: u32 = 8;
const K_CONCAT: u32 = 9;
const K_PAD: u32 = 10;
const K_CONV: u32 = 11;
const K_CONV_T: u32 = 12;
const K_POOL: u32 = 13;
const K_GAP: u32 = 14;

/// The unary operators without a parameter, in code order; `LeakyRelu` and `Elu` follow.
const UNARIES: [Unary; 17] = [
    Unary::Copy,
    Unary::Clamp,
    Unary::Abs,
    Unary::Neg,
    Unary::Square,
    Unary::Sqrt,
    Unary::Rsqrt,
    Unary::Floor,
    Unary::Ceil,
    Unary::Exp,
    Unary::Log,
    Unary::Sin,
    Unary::Cos,
    Unary::Tanh,
    Unary::Sigmoid,
    Unary::Gelu,
    Unary::Hardswish,
];
const U_LEAKY: u32 = UNARIES.len() as u32;
const U_ELU: u32 = U_LEAKY + 1;

fn win_words(w: &Window) -> [u32; 10] {
    [
        w.pad_top,
        w.pad_left,
        w.pad_bottom,
        w.pad_right,
        w.kh,
        w.kw,
        w.stride_h,
        w.stride_w,
        w.dil_h,
        w.dil_w,
    ]
    .map(|v| v as u32)
}

fn win_of(p: &[u32; PARAMS]) -> Window {
    Window {
        pad_top: p[0] as usize,
        pad_left: p[1] as usize,
        pad_bottom: p[2] as usize,
        pad_right: p[3] as usize,
        kh: p[4] as usize,
        kw: p[5] as usize,
        stride_h: p[6] as usize,
        stride_w: p[7] as usize,
        dil_h: p[8] as usize,
        dil_w: p[9] as usize,
    }
}

fn six(v: [u32; MAX_DIMS]) -> [u32; PARAMS] {
    let mut p = [0; PARAMS];
    p[..MAX_DIMS].copy_from_slice(&v);
    p
}

fn first6(p: &[u32; PARAMS]) -> [u32; MAX_DIMS] {
    let mut v = [0; MAX_DIMS];
    v.copy_from_slice(&p[..MAX_DIMS]);
    v
}

impl Step {
    /// The record of `op` with its output clamp, decoded from a node with union tag `node`.
    /// Lossless: every window, group and adjustment field came from a `u32` of the flatbuffer.
    pub fn new(op: &Op, clamp: Option<(f32, f32)>, node: xf::XNodeUnion) -> Step {
        let (lo, hi) = clamp.unwrap_or((0.0, 0.0));
        let mut s = Step {
            clamp: [lo, hi],
            has_clamp: clamp.is_some() as u32,
            node: node.0 as u32,
            ..Step::default()
        };
        match *op {
            Op::Binary { op, a, b, out } => {
                s.kind = K_BINARY;
                s.sub = Binary::ALL.iter().position(|&v| v == op).unwrap_or(0) as u32;
                s.ids[..3].copy_from_slice(&[a, b, out]);
            }
            Op::Unary { op, x, out } => {
                s.kind = K_UNARY;
                (s.sub, s.p[0]) = match op {
                    Unary::LeakyRelu(v) => (U_LEAKY, v.to_bits()),
                    Unary::Elu(v) => (U_ELU, v.to_bits()),
                    u => (UNARIES.iter().position(|&v| v == u).unwrap_or(0) as u32, 0),
                };
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::Softmax { x, out, scale } => {
                s.kind = K_SOFTMAX;
                s.p[0] = scale;
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::FullyConnected {
                x,
                w,
                bias,
                out,
                transpose_w,
            } => {
                s.kind = K_FC;
                s.sub = transpose_w as u32;
                s.ids[..4].copy_from_slice(&[x, w, bias, out]);
            }
            Op::BatchMatMul {
                a,
                b,
                out,
                transpose_b,
            } => {
                s.kind = K_BMM;
                s.sub = transpose_b as u32;
                s.ids[..3].copy_from_slice(&[a, b, out]);
            }
            Op::Transpose { x, out, perm, rank } => {
                s.kind = K_TRANSPOSE;
                s.sub = rank as u32;
                s.p = six(perm.map(u32::from));
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::Reshape { x, out } => {
                s.kind = K_RESHAPE;
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::Slice { x, out, offsets } => {
                s.kind = K_SLICE;
                s.p = six(offsets);
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::Concat {
                inputs,
                n,
                axis,
                out,
            } => {
                s.kind = K_CONCAT;
                s.sub = n as u32;
                s.p[0] = axis;
                s.ids[..5].copy_from_slice(&inputs);
                s.ids[5] = out;
            }
            Op::Pad { x, out, pre, value } => {
                s.kind = K_PAD;
                s.p = six(pre);
                s.p[MAX_DIMS] = value.to_bits();
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::Conv {
                x,
                w,
                bias,
                out,
                win,
                groups,
                depthwise,
            } => {
                s.kind = K_CONV;
                s.sub = depthwise as u32;
                s.p[..10].copy_from_slice(&win_words(&win));
                s.p[10] = groups as u32;
                s.ids[..4].copy_from_slice(&[x, w, bias, out]);
            }
            Op::ConvTranspose {
                x,
                w,
                bias,
                out,
                win,
                groups,
                adj_h,
                adj_w,
            } => {
                s.kind = K_CONV_T;
                s.p[..10].copy_from_slice(&win_words(&win));
                s.p[10..13].copy_from_slice(&[groups as u32, adj_h as u32, adj_w as u32]);
                s.ids[..4].copy_from_slice(&[x, w, bias, out]);
            }
            Op::Pool { x, out, win, max } => {
                s.kind = K_POOL;
                s.sub = max as u32;
                s.p[..10].copy_from_slice(&win_words(&win));
                s.ids[..2].copy_from_slice(&[x, out]);
            }
            Op::GlobalAvgPool { x, out } => {
                s.kind = K_GAP;
                s.ids[..2].copy_from_slice(&[x, out]);
            }
        }
        s
    }

    /// A fully-connected record's split across the team installed at load
    /// ([`gemm::SplitHint`](crate::linalg::gemm::SplitHint), in the parameters the operator
    /// does not use); other records ignore it.
    pub fn set_split_hint(&mut self, hint: crate::linalg::gemm::SplitHint) {
        if self.kind == K_FC {
            self.p[0] = hint.bits();
        }
    }

    /// The split hint of a fully-connected record ([`Step::set_split_hint`]; `NONE` else).
    #[inline]
    pub fn split_hint(&self) -> crate::linalg::gemm::SplitHint {
        let bits = if self.kind == K_FC { self.p[0] } else { 0 };
        crate::linalg::gemm::SplitHint::from_bits(bits)
    }

    /// Marks this elementwise record as the first of a run of `len` nodes run as one
    /// parallel step (`fuse`; kept in a parameter the operator does not use).
    pub fn set_fused(&mut self, len: usize) {
        if matches!(self.kind, K_BINARY | K_UNARY) {
            self.p[PARAMS - 1] = len.min(u32::MAX as usize) as u32;
        }
    }

    /// The length of the fused run this record starts (`fuse`), 0 when it starts none.
    #[inline]
    pub fn fused(&self) -> usize {
        if matches!(self.kind, K_BINARY | K_UNARY) {
            self.p[PARAMS - 1] as usize
        } else {
            0
        }
    }

    /// The node's union tag (its name: [`super::graph::node_name`]).
    pub fn node(&self) -> xf::XNodeUnion {
        xf::XNodeUnion(self.node as u8)
    }

    /// `(x, out)` of a reshape record, read without decoding the whole operator (the run
    /// loop skips reshapes planned as views of their input first).
    #[inline]
    pub fn reshape_ids(&self) -> Option<(u32, u32)> {
        (self.kind == K_RESHAPE).then_some((self.ids[0], self.ids[1]))
    }

    /// The operator and output clamp this record was made from; an error for a record that
    /// [`Step::new`] cannot have written.
    #[inline]
    pub fn op(&self) -> Result<(Op, Option<(f32, f32)>), KernelError> {
        let invalid = || bad("XNNPACK state: invalid node record");
        let [i0, i1, i2, i3, i4, i5] = self.ids;
        let p = &self.p;
        let op = match self.kind {
            K_BINARY => Op::Binary {
                op: *Binary::ALL.get(self.sub as usize).ok_or_else(invalid)?,
                a: i0,
                b: i1,
                out: i2,
            },
            K_UNARY => Op::Unary {
                op: match self.sub {
                    U_LEAKY => Unary::LeakyRelu(f32::from_bits(p[0])),
                    U_ELU => Unary::Elu(f32::from_bits(p[0])),
                    u => *UNARIES.get(u as usize).ok_or_else(invalid)?,
                },
                x: i0,
                out: i1,
            },
            K_SOFTMAX => Op::Softmax {
                x: i0,
                out: i1,
                scale: p[0],
            },
            K_FC => Op::FullyConnected {
                x: i0,
                w: i1,
                bias: i2,
                out: i3,
                transpose_w: self.sub != 0,
            },
            K_BMM => Op::BatchMatMul {
                a: i0,
                b: i1,
                out: i2,
                transpose_b: self.sub != 0,
            },
            K_TRANSPOSE => {
                if self.sub as usize > MAX_DIMS {
                    return Err(invalid());
                }
                Op::Transpose {
                    x: i0,
                    out: i1,
                    perm: first6(p).map(|v| v as u8),
                    rank: self.sub as u8,
                }
            }
            K_RESHAPE => Op::Reshape { x: i0, out: i1 },
            K_SLICE => Op::Slice {
                x: i0,
                out: i1,
                offsets: first6(p),
            },
            K_CONCAT => {
                if !(2..=5).contains(&self.sub) {
                    return Err(invalid());
                }
                Op::Concat {
                    inputs: [i0, i1, i2, i3, i4],
                    n: self.sub as u8,
                    axis: p[0],
                    out: i5,
                }
            }
            K_PAD => Op::Pad {
                x: i0,
                out: i1,
                pre: first6(p),
                value: f32::from_bits(p[MAX_DIMS]),
            },
            K_CONV => Op::Conv {
                x: i0,
                w: i1,
                bias: i2,
                out: i3,
                win: win_of(p),
                groups: p[10] as usize,
                depthwise: self.sub != 0,
            },
            K_CONV_T => Op::ConvTranspose {
                x: i0,
                w: i1,
                bias: i2,
                out: i3,
                win: win_of(p),
                groups: p[10] as usize,
                adj_h: p[11] as usize,
                adj_w: p[12] as usize,
            },
            K_POOL => Op::Pool {
                x: i0,
                out: i1,
                win: win_of(p),
                max: self.sub != 0,
            },
            K_GAP => Op::GlobalAvgPool { x: i0, out: i1 },
            _ => return Err(invalid()),
        };
        let clamp = (self.has_clamp != 0).then_some((self.clamp[0], self.clamp[1]));
        Ok((op, clamp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegate::xnnpack::graph::INVALID_ID;

    fn win(seed: usize) -> Window {
        Window {
            pad_top: seed,
            pad_left: seed + 1,
            pad_bottom: seed + 2,
            pad_right: seed + 3,
            kh: seed + 4,
            kw: seed + 5,
            stride_h: seed + 6,
            stride_w: seed + 7,
            dil_h: seed + 8,
            dil_w: seed + 9,
        }
    }

    /// Every operator (every elementwise kind, every flag) comes back from its record as it
    /// went in, with and without a clamp; the union tag is kept for the node's name.
    #[test]
    fn records_give_back_their_operators() {
        let mut ops = std::vec::Vec::new();
        for op in Binary::ALL {
            ops.push(Op::Binary {
                op,
                a: 3,
                b: 7,
                out: 9,
            });
        }
        for op in UNARIES
            .into_iter()
            .chain([Unary::LeakyRelu(0.125), Unary::Elu(-1.5)])
        {
            ops.push(Op::Unary { op, x: 4, out: 5 });
        }
        for t in [false, true] {
            ops.push(Op::FullyConnected {
                x: 1,
                w: 2,
                bias: u32::MAX,
                out: 4,
                transpose_w: t,
            });
            ops.push(Op::BatchMatMul {
                a: 1,
                b: 2,
                out: 3,
                transpose_b: t,
            });
            ops.push(Op::Conv {
                x: 1,
                w: 2,
                bias: 3,
                out: 4,
                win: win(t as usize),
                groups: 17,
                depthwise: t,
            });
            ops.push(Op::Pool {
                x: 1,
                out: 2,
                win: win(2 + t as usize),
                max: t,
            });
        }
        ops.extend([
            Op::Softmax {
                x: 11,
                out: 12,
                scale: 13,
            },
            Op::Transpose {
                x: 1,
                out: 2,
                perm: [2, 0, 1, 0, 0, 0],
                rank: 3,
            },
            Op::Reshape { x: 6, out: 8 },
            Op::Slice {
                x: 1,
                out: 2,
                offsets: [0, 1, 2, 3, 4, 5],
            },
            Op::Concat {
                inputs: [1, 2, 3, u32::MAX, u32::MAX],
                n: 3,
                axis: 2,
                out: 10,
            },
            Op::Pad {
                x: 1,
                out: 2,
                pre: [1, 0, 2, 0, 0, 0],
                value: -0.5,
            },
            Op::ConvTranspose {
                x: 1,
                w: 2,
                bias: 3,
                out: 4,
                win: win(5),
                groups: 2,
                adj_h: 1,
                adj_w: 0,
            },
            Op::GlobalAvgPool { x: 1, out: 2 },
        ]);
        for (i, op) in ops.iter().enumerate() {
            for clamp in [None, Some((-1.0, 6.0))] {
                let tag = xf::XNodeUnion(i as u8 + 1);
                let s = Step::new(op, clamp, tag);
                assert_eq!(s.op().unwrap(), (*op, clamp), "{op:?}");
                assert_eq!(s.node(), tag);
            }
        }
    }

    /// A record no operator makes is an error, not a wrong operator.
    #[test]
    fn records_of_no_operator_are_refused() {
        let good = Step::new(
            &Op::Softmax {
                x: 1,
                out: 2,
                scale: INVALID_ID,
            },
            None,
            xf::XNodeUnion(1),
        );
        for bad in [
            Step { kind: 0, ..good },
            Step { kind: 99, ..good },
            Step {
                kind: K_BINARY,
                sub: 6,
                ..good
            },
            Step {
                kind: K_UNARY,
                sub: U_ELU + 1,
                ..good
            },
            Step {
                kind: K_TRANSPOSE,
                sub: 7,
                ..good
            },
            Step {
                kind: K_CONCAT,
                sub: 1,
                ..good
            },
        ] {
            assert!(bad.op().is_err(), "{bad:?}");
        }
    }
}
