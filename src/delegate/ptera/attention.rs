//! The `Attention` operation of ptera's regions: validated from the payload once at load,
//! kept as a fixed record in the delegate's state, run by [`crate::linalg::attention`].

use crate::error::KernelError;
use crate::format::region_fb as rf;
use crate::kernel_api::KernelCtx;
use crate::linalg::attention::{
    Attention, HeadView, OPERAND_K, OPERAND_MASK, OPERAND_Q, OPERAND_V,
};

use super::record::{bad, u32_at};

/// Bytes of one attention record (see [`encode`]).
pub(super) const RECORD: usize = 96;

/// A validated attention operation: its arguments and the kernel's parameters.
#[derive(Clone, Copy)]
pub(super) struct Op {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub mask: Option<usize>,
    pub output: usize,
    pub attn: Attention,
}

/// The operation of `op`, checked: nonzero heads and head size, views present, sizes that fit
/// a u32 record.
pub(super) fn of(op: rf::Operation<'_>) -> Result<Op, KernelError> {
    let a = op
        .op_as_attention()
        .ok_or(bad("ptera region: unknown operation kind"))?;
    let view = |v: Option<&rf::HeadView>| {
        v.map(|v| HeadView {
            offset: v.offset() as usize,
            head_stride: v.head_stride() as usize,
            row_stride: v.row_stride() as usize,
        })
        .ok_or(bad("ptera region: attention operand without its view"))
    };
    if a.heads() == 0 || a.head_dim() == 0 {
        return Err(bad("ptera region: attention with no heads or empty heads"));
    }
    let mask = match a.mask() {
        -1 => None,
        m => Some(usize::try_from(m).map_err(|_| bad("ptera region: negative mask argument"))?),
    };
    let attn = Attention {
        heads: a.heads() as usize,
        head_dim: a.head_dim() as usize,
        q_rows: a.q_rows() as usize,
        kv_rows: a.kv_rows() as usize,
        q: view(a.q_view())?,
        k: view(a.k_view())?,
        v: view(a.v_view())?,
        mask_strides: (a.mask_head_stride() as usize, a.mask_row_stride() as usize),
        scale: a.scale(),
        q_scale: a.q_scale(),
        kv_group: a.kv_group() as usize,
    };
    if attn.kv_group == 0 || !attn.heads.is_multiple_of(attn.kv_group) {
        return Err(bad(
            "ptera region: attention heads not a multiple of the K/V group",
        ));
    }
    if scratch_bytes(&attn).is_none() {
        return Err(KernelError::Unsupported {
            detail: "ptera region: attention scores too large for a scratch area",
        });
    }
    Ok(Op {
        q: a.q() as usize,
        k: a.k() as usize,
        v: a.v() as usize,
        mask,
        output: a.output() as usize,
        attn,
    })
}

/// The record (little-endian u32 words): `0 q, 1 k, 2 v, 3 mask (u32::MAX none), 4 output,
/// 5 heads, 6 head_dim, 7 q_rows, 8 kv_rows, 9-11 q view (offset, head stride, row stride),
/// 12-14 k view, 15-17 v view, 18 mask head stride, 19 mask row stride, 20 scale,
/// 21 q_scale (f32 bits), 22 kv_group`.
pub(super) fn encode(o: &Op, r: &mut [u8]) {
    let a = &o.attn;
    let v = |x: &HeadView| [x.offset, x.head_stride, x.row_stride].map(|w| w as u32);
    let mut words = [0u32; 23];
    words[..9].copy_from_slice(&[
        o.q as u32,
        o.k as u32,
        o.v as u32,
        o.mask.map_or(u32::MAX, |m| m as u32),
        o.output as u32,
        a.heads as u32,
        a.head_dim as u32,
        a.q_rows as u32,
        a.kv_rows as u32,
    ]);
    words[9..12].copy_from_slice(&v(&a.q));
    words[12..15].copy_from_slice(&v(&a.k));
    words[15..18].copy_from_slice(&v(&a.v));
    words[18] = a.mask_strides.0 as u32;
    words[19] = a.mask_strides.1 as u32;
    words[20] = a.scale.to_bits();
    words[21] = a.q_scale.to_bits();
    words[22] = a.kv_group as u32;
    for (i, w) in words.iter().enumerate() {
        r[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
}

/// Reads back a record written by [`encode`].
pub(super) fn decode(r: &[u8]) -> Op {
    let w = |i: usize| u32_at(r, 4 * i) as usize;
    let view = |i: usize| HeadView {
        offset: w(i),
        head_stride: w(i + 1),
        row_stride: w(i + 2),
    };
    Op {
        q: w(0),
        k: w(1),
        v: w(2),
        mask: (u32_at(r, 12) != u32::MAX).then(|| w(3)),
        output: w(4),
        attn: Attention {
            heads: w(5),
            head_dim: w(6),
            q_rows: w(7),
            kv_rows: w(8),
            q: view(9),
            k: view(12),
            v: view(15),
            mask_strides: (w(18), w(19)),
            scale: f32::from_bits(u32_at(r, 80)),
            q_scale: f32::from_bits(u32_at(r, 84)),
            kv_group: w(22),
        },
    }
}

/// Largest scratch an attention asks for (1 GiB): a larger one is refused at load.
const MAX_SCRATCH: usize = 1 << 30;

/// Scratch bytes the operation asks for at load: [`Attention::scratch_len`] floats, aligned.
pub(super) fn scratch_bytes(a: &Attention) -> Option<usize> {
    a.scratch_len()?
        .checked_mul(4)?
        .checked_add(16)
        .filter(|&b| b <= MAX_SCRATCH)
}

/// Whether the operation reads or writes argument `arg`: `(read, written)`.
pub(super) fn access(o: &Op, arg: usize) -> (bool, bool) {
    let read = o.q == arg || o.k == arg || o.v == arg || o.mask == Some(arg);
    (read, o.output == arg)
}

/// Input `arg` whole, as f32s.
fn whole<'a>(ctx: &KernelCtx<'_, 'a, '_>, arg: usize) -> Result<&'a [f32], KernelError> {
    let n = ctx
        .dims(arg)?
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or(KernelError::Shape {
            arg,
            detail: "ptera attention: tensor size overflows",
        })?;
    ctx.input_f32s(arg, n)
}

/// Runs operation `index` of the region: binds its tensors (whole, f32) and computes.
pub(super) fn run(
    ctx: &mut KernelCtx<'_, '_, '_>,
    index: usize,
    o: &Op,
) -> Result<(), KernelError> {
    // A fused projection passes Q, K and V as one argument: bound once.
    let q = whole(ctx, o.q)?;
    let k = if o.k == o.q { q } else { whole(ctx, o.k)? };
    let v = match o.v {
        a if a == o.q => q,
        a if a == o.k => k,
        a => whole(ctx, a)?,
    };
    let mask = match o.mask {
        Some(m) => Some(whole(ctx, m)?),
        None => None,
    };
    let a = &o.attn;
    let n = a.q_rows * a.heads * a.head_dim;
    if ctx.observed() {
        let macs = 2 * (a.q_rows * a.kv_rows * a.head_dim * a.heads) as u64;
        ctx.region_op(index, "Attention", n, macs);
    }
    let out = ctx.output_f32s(o.output, n)?;
    let len = a
        .scratch_len()
        .ok_or(bad("ptera region: attention scratch overflows"))?;
    let scratch = ctx.scratch_f32(len)?;
    a.run(q, k, v, mask, out, scratch).map_err(|e| match e {
        // The kernel names the operand; the caller knows its argument.
        KernelError::Shape { arg, detail } => KernelError::Shape {
            arg: match arg {
                OPERAND_Q => o.q,
                OPERAND_K => o.k,
                OPERAND_V => o.v,
                OPERAND_MASK => o.mask.unwrap_or(o.output),
                _ => o.output,
            },
            detail,
        },
        e => e,
    })
}
