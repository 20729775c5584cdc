//! Writes ptera's region payload (`schema/ptera.fbs`) with the flatbuffers builder.

use flatbuffers::FlatBufferBuilder;
use ptera::delegate::ptera::{ABI, IDENTIFIER};
use ptera::format::region_fb as rf;
use ptera::linalg::quant::packed::Int8Layout;

use crate::partition::{Act, Candidate, Orient};
use crate::target::Target;

/// Where the region's weight comes from.
pub enum WeightSource<'k> {
    /// Packed panels under this named-data key, for tile width `nr`.
    Packed { key: &'k str, nr: usize },
    /// The constant as a DelegateCall argument at this position.
    Arg(usize),
    /// Quantized rows, scales and column sums under these keys; `group` for 4-bit rows;
    /// `packed`: the rows' layout ([`quant_layout`]).
    Quant {
        rows: &'k str,
        scales: &'k str,
        sums: &'k str,
        group: Option<usize>,
        packed: Int8Layout,
    },
}

/// The schema's layout of quantized rows and its `nr` field: int8 (`group` none) row-major,
/// `qc8w_p4x4`, `qc8w_p8x8` or `qc8w_pNx4` (`nr` = N); 4-bit row-major, `qb4w_p4x4`,
/// `qb4w_p8x8` or `qb4w_pNx4` (the same names: 4, 8 or N channels per block), whose scales are
/// then the packed fp32 group scales.
fn quant_layout(group: Option<usize>, packed: Int8Layout) -> (rf::WeightLayout, u32) {
    let layout = match (group, packed) {
        (Some(_), Int8Layout::RowMajor) => rf::WeightLayout::Int4,
        (Some(_), Int8Layout::P4x4) => rf::WeightLayout::Int4Packed,
        (Some(_), Int8Layout::P8x8) => rf::WeightLayout::Int4Packed8,
        (Some(_), Int8Layout::PNx4(_)) => rf::WeightLayout::Int4PackedN,
        (None, Int8Layout::RowMajor) => rf::WeightLayout::Int8,
        (None, Int8Layout::P4x4) => rf::WeightLayout::Int8Packed,
        (None, Int8Layout::P8x8) => rf::WeightLayout::Int8Packed8,
        (None, Int8Layout::PNx4(_)) => rf::WeightLayout::Int8PackedN,
    };
    let nr = match packed {
        Int8Layout::PNx4(nb) => nb as u32,
        _ => 0,
    };
    (layout, nr)
}

/// A one-operation region for `c`. Argument positions: input 0, then the bias (if any), then
/// the weight (if read as an argument), then the output.
pub fn linear_region(
    target: &Target,
    c: &Candidate,
    weight: WeightSource<'_>,
    bias_arg: Option<usize>,
    out_arg: usize,
) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let (mut scales_key, mut sums_key, mut group) = (None, None, 0);
    let (layout, key, nr, arg) = match weight {
        WeightSource::Packed { key, nr } => (
            rf::WeightLayout::Packed,
            Some(b.create_string(key)),
            nr as u32,
            -1,
        ),
        WeightSource::Quant {
            rows,
            scales,
            sums,
            group: g,
            packed,
        } => {
            scales_key = Some(b.create_string(scales));
            sums_key = Some(b.create_string(sums));
            group = g.unwrap_or(0) as u32;
            let (layout, nr) = quant_layout(g, packed);
            (layout, Some(b.create_string(rows)), nr, -1)
        }
        WeightSource::Arg(a) => (
            match c.orient {
                Orient::KxN => rf::WeightLayout::KxN,
                Orient::NxK => rf::WeightLayout::NxK,
            },
            None,
            0,
            a as i32,
        ),
    };
    let w = rf::Weight::create(
        &mut b,
        &rf::WeightArgs {
            layout,
            key,
            nr,
            arg,
            scales_key,
            sums_key,
            group,
        },
    );
    let activation = match c.act {
        Act::None => rf::Activation::None,
        Act::Relu => rf::Activation::Relu,
        Act::GeluErf => rf::Activation::GeluErf,
        Act::GeluTanh => rf::Activation::GeluTanh,
    };
    let lin = rf::Linear::create(
        &mut b,
        &rf::LinearArgs {
            input: 0,
            output: out_arg as u32,
            bias: bias_arg.map_or(-1, |a| a as i32),
            weight: Some(w),
            k: c.k as u32,
            n: c.n as u32,
            max_m: c.max_m as u32,
            alpha: c.alpha,
            beta: c.beta,
            activation,
        },
    );
    let names: Vec<_> = c.absorbed.iter().map(|s| b.create_string(s)).collect();
    let absorbed = b.create_vector(&names);
    let op = rf::Operation::create(
        &mut b,
        &rf::OperationArgs {
            op_type: rf::Op::Linear,
            op: Some(lin.as_union_value()),
            absorbed: Some(absorbed),
        },
    );
    finish(b, target, op)
}

/// A one-operation region for the attention chain `m`, reading queries, keys and values at
/// argument positions `qkv` (one position may serve several), the mask at `mask`, writing
/// `out`.
pub fn attention_region(
    target: &Target,
    m: &crate::attention::Match,
    qkv: [usize; 3],
    mask: Option<usize>,
    out: usize,
) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let a = &m.attn;
    let view = |v: &ptera::linalg::attention::HeadView| {
        rf::HeadView::new(v.offset as u32, v.head_stride as u32, v.row_stride as u32)
    };
    let (qv, kv, vv) = (view(&a.q), view(&a.k), view(&a.v));
    let att = rf::Attention::create(
        &mut b,
        &rf::AttentionArgs {
            q: qkv[0] as u32,
            k: qkv[1] as u32,
            v: qkv[2] as u32,
            mask: mask.map_or(-1, |m| m as i32),
            output: out as u32,
            heads: a.heads as u32,
            head_dim: a.head_dim as u32,
            q_rows: a.q_rows as u32,
            kv_rows: a.kv_rows as u32,
            q_view: Some(&qv),
            k_view: Some(&kv),
            v_view: Some(&vv),
            mask_head_stride: a.mask_strides.0 as u32,
            mask_row_stride: a.mask_strides.1 as u32,
            scale: a.scale,
            q_scale: a.q_scale,
            kv_group: a.kv_group as u32,
        },
    );
    let names: Vec<_> = m.absorbed.iter().map(|s| b.create_string(s)).collect();
    let absorbed = b.create_vector(&names);
    let op = rf::Operation::create(
        &mut b,
        &rf::OperationArgs {
            op_type: rf::Op::Attention,
            op: Some(att.as_union_value()),
            absorbed: Some(absorbed),
        },
    );
    finish(b, target, op)
}

/// A region wrapping the XNNPACK payload in program segment `segment`, with `packed`
/// filters `(graph value id, named-data key, tile width)` and `quantized` ones `(graph value
/// id, keys of rows, scales and column sums, group of 4-bit rows, layout of the rows
/// ([`quant_layout`]))`.
/// `aliased` filters `(graph value id, program constant buffer)` are read from that constant.
pub fn xnn_region(
    target: &Target,
    segment: u32,
    packed: &[(u32, &str, usize)],
    quantized: &[(u32, &[String; 3], Option<usize>, Int8Layout)],
    aliased: &[(u32, u32)],
) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();
    let mut filters: Vec<_> = packed
        .iter()
        .map(|&(value, key, nr)| {
            let key = b.create_string(key);
            rf::PackedFilter::create(
                &mut b,
                &rf::PackedFilterArgs {
                    value,
                    key: Some(key),
                    nr: nr as u32,
                    ..Default::default()
                },
            )
        })
        .collect();
    for &(value, keys, group, packed) in quantized {
        let key = b.create_string(&keys[0]);
        let scales_key = b.create_string(&keys[1]);
        let sums_key = b.create_string(&keys[2]);
        let (layout, nr) = quant_layout(group, packed);
        filters.push(rf::PackedFilter::create(
            &mut b,
            &rf::PackedFilterArgs {
                value,
                key: Some(key),
                nr,
                layout,
                scales_key: Some(scales_key),
                sums_key: Some(sums_key),
                group: group.unwrap_or(0) as u32,
            },
        ));
    }
    let filters = b.create_vector(&filters);
    let aliases: Vec<_> = aliased
        .iter()
        .map(|&(value, buffer)| {
            rf::AliasedFilter::create(&mut b, &rf::AliasedFilterArgs { value, buffer })
        })
        .collect();
    let aliases = b.create_vector(&aliases);
    let xg = rf::XnnGraph::create(
        &mut b,
        &rf::XnnGraphArgs {
            segment,
            packed: Some(filters),
            aliased: Some(aliases),
        },
    );
    let op = rf::Operation::create(
        &mut b,
        &rf::OperationArgs {
            op_type: rf::Op::XnnGraph,
            op: Some(xg.as_union_value()),
            absorbed: None,
        },
    );
    finish(b, target, op)
}

/// The region holding the one operation `op`, finished with ABI version and target.
fn finish<'b>(
    mut b: FlatBufferBuilder<'b>,
    target: &Target,
    op: flatbuffers::WIPOffset<rf::Operation<'b>>,
) -> Vec<u8> {
    let ops = b.create_vector(&[op]);
    let isa = b.create_string(target.label);
    let root = rf::Region::create(
        &mut b,
        &rf::RegionArgs {
            abi: ABI,
            isa: Some(isa),
            vector_bits: target.vector_bits,
            ops: Some(ops),
        },
    );
    b.finish(root, Some(IDENTIFIER));
    b.finished_data().to_vec()
}
