//! The translated plan of one region as it lives in the method's metadata buffer: a fixed
//! [`Head`], then one [`Loc`] per graph value (its kind, element type, dims and where its bytes
//! are), then one [`Step`] per node (the node decoded at init).

use core::mem::size_of;

use super::graph::{bad, MAX_DIMS};
use super::step::Step;
use crate::delegate::ArgAccess;
use crate::error::KernelError;
use crate::linalg::quant::packed::Int8Layout;
use crate::linalg::quant::qs8::Qs8;
use crate::linalg::quant::QParams;
use crate::shape::Shape;

/// Most values one region may have (bounds the load-time planner's stack tables).
pub const MAX_VALUES: usize = 1024;
/// Most nodes of one region.
pub const MAX_NODES: usize = 4096;
/// Most external values (DelegateCall arguments) of one region.
pub const MAX_EXTERNS: usize = 64;

pub(super) const KIND_INTERNAL: u32 = 0;
pub(super) const KIND_EXTERNAL_IN: u32 = 1;
pub(super) const KIND_EXTERNAL_OUT: u32 = 2;
pub(super) const KIND_CONSTANT: u32 = 3;
/// A fully-connected or one-group convolution filter in [`gemm::PackedB`] panels, `Loc::ext`
/// its tile width: packed ahead of time ([`FilterOverride`]; `Loc::offset` is its program byte
/// offset) or, with [`PACKED_IN_STATE`], packed at load into the state area
/// ([`XnnpackBackend::PACKING`]; `Loc::offset` is its offset in the state area and `Loc::aux`
/// the program byte offset of the fp32 filter it was packed from).
///
/// [`gemm::PackedB`]: crate::linalg::gemm::PackedB
/// [`XnnpackBackend::PACKING`]: super::XnnpackBackend::PACKING
pub(super) const KIND_PACKED: u32 = 4;

/// Where one graph value lives (the translated plan).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Loc {
    pub(super) kind: u32,
    /// DelegateCall argument index for externals.
    pub(super) ext: u32,
    /// Scratch offset (internal) or program byte offset (constant).
    pub(super) offset: u64,
    pub(super) rank: u32,
    pub(super) dims: [u32; MAX_DIMS],
    /// [`ROWS_LOCAL`] for an external output written by a fully-connected node and read by
    /// no node of the graph: that node may compute only the rows the program reads.
    pub(super) flags: u32,
    /// Element type: [`DT_F32`] or one of the quantized `DT_*`.
    pub(super) dt: u32,
    /// Inputs per scale group of [`DT_QB4W`] weights; for a filter [`PACKED_IN_STATE`], 1 when
    /// its constant is stored as the GEMM's B (`k × n`) rather than as its transpose.
    pub(super) group: u32,
    /// Program byte offset of quantized weights' scales.
    pub(super) aux: u64,
    /// Quantized weights: index of their column sums in the state's sums table.
    pub(super) sums: u64,
    /// Elements (the product of `dims[..rank]`), worked out at init.
    pub(super) numel: u64,
}

/// fp32 values (everything but the quantized ones below).
pub(super) const DT_F32: u32 = 0;
/// Dynamically quantized int8 rows (`qdint8`, one [`QParams`] per row): internal values only,
/// stored as the `numel` int8 values, then (16-aligned) the rows' parameters.
pub(super) const DT_QD8: u32 = 1;
/// int8 weights, per-output-channel fp32 scales (`qcint8`).
pub(super) const DT_QC8W: u32 = 2;
/// 4-bit weights, per-output-channel fp32 scales (`qcint4`).
pub(super) const DT_QC4W: u32 = 3;
/// 4-bit weights, bf16 scales per group of inputs (`qbint4`).
pub(super) const DT_QB4W: u32 = 4;
/// Statically quantized int8 (`qint8`, one scale and zero point per value, [`qs8_aux`] in
/// `Loc::aux`): internal values only, one byte per element.
pub(super) const DT_QS8: u32 = 5;
/// int32 biases of statically quantized products (`qint32` / `qcint32`): constants.
pub(super) const DT_QI32: u32 = 6;

/// `Loc::aux` of a [`DT_QS8`] value: the scale's bits, the zero point in the high half.
pub(super) fn qs8_aux(q: Qs8) -> u64 {
    q.scale.to_bits() as u64 | (q.zero_point as u32 as u64) << 32
}

/// The quantization [`qs8_aux`] stored.
pub(super) fn aux_qs8(aux: u64) -> Qs8 {
    Qs8 {
        scale: f32::from_bits(aux as u32),
        zero_point: (aux >> 32) as u32 as i32,
    }
}

/// Bytes of a [`DT_QD8`] value: the int8 elements (rounded up to 16), then `rows` parameters.
pub(super) fn qd8_bytes(numel: usize, rows: usize) -> Option<usize> {
    numel
        .checked_next_multiple_of(16)?
        .checked_add(rows.checked_mul(size_of::<QParams>())?)
}

/// [`Loc::flags`]: the output's rows are computed row by row by one fully-connected node.
pub(super) const ROWS_LOCAL: u32 = 1;
/// [`Loc::flags`]: a filter quantized ahead by the lowering (rows `[N, K]` whatever the
/// node's transpose flag; column sums from the program).
pub(super) const QUANT_AHEAD: u32 = 2;
/// [`Loc::flags`]: its quantized rows (ahead or stock) are packed: int8 `qc8w_p4x4` (or
/// with [`QUANT_MMLA`] `qc8w_p8x8`), group-wise 4-bit `qb4w_p4x4`.
pub(super) const QUANT_PACKED: u32 = 4;
/// [`Loc::flags`]: a [`KIND_PACKED`] filter whose panels were packed at load into the state
/// area (behind the column sums, [`packed_area_start`]).
pub(super) const PACKED_IN_STATE: u32 = 8;
/// With [`QUANT_PACKED`]: rows packed for `SMMLA` (`qc8w_p8x8`, `qb4w_p8x8`) instead of
/// `qc8w_p4x4` / `qb4w_p4x4`.
pub(super) const QUANT_MMLA: u32 = 16;
/// With [`QUANT_PACKED`]: rows packed for SME2 `SMOPA` (int8 `qc8w_pNx4`, 4-bit `qb4w_pNx4`),
/// the block width in bits 8..16 of the flags.
pub(super) const QUANT_ZA: u32 = 32;

/// [`Loc::flags`]: an external value whose dims are one chunk's rows ([`Head::chunks`]);
/// `numel` is the whole tensor's, each chunk reads or writes its own part.
pub(super) const ROW_CHUNKED: u32 = 1 << 16;

/// [`Loc::flags`]: an intermediate stored in the region output a reshape would copy it to
/// (`fold::output_forwards`): kind and argument of that output, but not the value the
/// externals table binds the argument through.
pub(super) const FORWARDED: u32 = 1 << 17;

/// [`Loc::flags`] bits of a quantized filter's layout.
pub(super) fn layout_flags(layout: Int8Layout) -> u32 {
    match layout {
        Int8Layout::RowMajor => 0,
        Int8Layout::P4x4 => QUANT_PACKED,
        Int8Layout::P8x8 => QUANT_PACKED | QUANT_MMLA,
        Int8Layout::PNx4(nb) => QUANT_PACKED | QUANT_ZA | ((nb as u32 & 0xff) << 8),
    }
}

/// The layout [`layout_flags`] wrote.
pub(super) fn flags_layout(flags: u32) -> Int8Layout {
    if flags & QUANT_PACKED == 0 {
        Int8Layout::RowMajor
    } else if flags & QUANT_ZA != 0 {
        Int8Layout::PNx4((flags >> 8 & 0xff) as usize)
    } else if flags & QUANT_MMLA != 0 {
        Int8Layout::P8x8
    } else {
        Int8Layout::P4x4
    }
}

impl Loc {
    pub(super) fn dims(&self) -> Shape {
        // rank ≤ MAX_DIMS < MAX_RANK: always a shape.
        Shape::from_u32(&self.dims[..(self.rank as usize).min(MAX_DIMS)]).unwrap_or(Shape::scalar())
    }
}

/// Fixed header of the state area.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Head {
    pub(super) n_values: u32,
    pub(super) num_externs: u32,
    /// Nodes, each a [`Step`] behind the value table.
    pub(super) n_steps: u32,
    /// The nodes run this many times, on consecutive chunks of rows ([`super::chunk`]; 1:
    /// once, on all rows).
    pub(super) chunks: u32,
    /// Scratch offset of the GEMM packing area (f32-aligned).
    pub(super) gemm_off: u64,
    /// Entries of the column-sums table behind the value table (one f32 per output channel of
    /// every quantized filter, `linalg::quant::column_sums`, computed at init).
    pub(super) n_sums: u64,
}

/// Offset in the state area of the node table (behind header and value table).
pub(super) fn steps_at(n_values: usize) -> usize {
    size_of::<Head>() + n_values * size_of::<Loc>()
}

/// Offset in the state area of the externals table (behind the node table): the value id of
/// each DelegateCall argument, [`NO_VALUE`] for an argument no value names.
pub(super) fn externs_at(n_values: usize, n_steps: usize) -> usize {
    steps_at(n_values) + n_steps * size_of::<Step>()
}

/// Entry of the externals table for an argument that no value of the graph names.
pub(super) const NO_VALUE: u32 = u32::MAX;

/// Offset in the state area of the column sums (behind the externals table, whose length is
/// rounded up to an even count so that the sums start 8-byte aligned).
pub(super) fn sums_at(n_values: usize, n_steps: usize, n_externs: usize) -> usize {
    externs_at(n_values, n_steps) + n_externs.next_multiple_of(2) * size_of::<u32>()
}

/// Bytes of the state area: header, value table, node table, externals table, column sums.
pub(super) fn state_bytes(
    n_values: usize,
    n_steps: usize,
    n_externs: usize,
    n_sums: usize,
) -> usize {
    sums_at(n_values, n_steps, n_externs) + n_sums * size_of::<f32>()
}

/// Offset in the state area of the filters packed at load: behind the tables and the column
/// sums, rounded up to 64 bytes (a cache line from the 16-aligned area's start).
pub(super) fn packed_area_start(
    n_values: usize,
    n_steps: usize,
    n_externs: usize,
    n_sums: usize,
) -> usize {
    state_bytes(n_values, n_steps, n_externs, n_sums).next_multiple_of(64)
}

/// The state area as its parts.
pub(super) struct StateView<'s> {
    pub(super) head: Head,
    pub(super) locs: &'s [Loc],
    pub(super) steps: &'s [Step],
    pub(super) externs: &'s [u32],
    pub(super) sums: &'s [f32],
}

/// Splits the state area into the header, the value, node and externals tables and the
/// column sums.
pub(super) fn state_view(state: &[u8]) -> Result<StateView<'_>, KernelError> {
    if state.len() < size_of::<Head>() || !(state.as_ptr() as usize).is_multiple_of(16) {
        return Err(bad("XNNPACK state area too small or misaligned"));
    }
    // SAFETY: the area is at least size_of::<Head>() bytes and 16-byte aligned (≥ align of
    // Head); Head is repr(C) plain data (any bit pattern valid), written by `init`.
    let head = unsafe { *(state.as_ptr() as *const Head) };
    let n = head.n_values as usize;
    let ns = head.n_steps as usize;
    let ne = head.num_externs as usize;
    let n_sums = usize::try_from(head.n_sums).unwrap_or(usize::MAX);
    if n > MAX_VALUES
        || ns > MAX_NODES
        || ne > MAX_EXTERNS
        || n_sums > u32::MAX as usize
        || state.len() < state_bytes(n, ns, ne, n_sums)
    {
        return Err(bad("XNNPACK state area too small"));
    }
    // SAFETY: `n` Locs, `ns` Steps, `ne` u32 and then `n_sums` f32 fit after the header
    // (checked); the offset size_of::<Head>() = 32 keeps 8-byte alignment for Loc (size 80,
    // a multiple of 8), and Step (size 104, align 4), u32 and f32 need 4; all are plain data
    // (any bit pattern is a value).
    let view = unsafe {
        let base = state.as_ptr();
        StateView {
            head,
            locs: core::slice::from_raw_parts(base.add(steps_at(0)) as *const Loc, n),
            steps: core::slice::from_raw_parts(base.add(steps_at(n)) as *const Step, ns),
            externs: core::slice::from_raw_parts(base.add(externs_at(n, ns)) as *const u32, ne),
            sums: core::slice::from_raw_parts(base.add(sums_at(n, ns, ne)) as *const f32, n_sums),
        }
    };
    Ok(view)
}

// The alignment arguments of `state_view` and `init_with` rest on these sizes.
const _: () = assert!(
    size_of::<Head>() == 32
        && size_of::<Loc>() == 80
        && size_of::<Step>() == 104
        && core::mem::align_of::<Step>() == 4
);

/// Scales and column sums of a filter quantized ahead (`FilterOverride::quant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantFilter {
    /// 0: int8 rows, fp32 scales `[N]`; otherwise 4-bit rows, bf16 scales per `group` inputs.
    pub group: u32,
    /// (program byte offset, length) of the scales and of the fp32 column sums `[N]`.
    pub scales: (u64, u64),
    pub sums: (u64, u64),
    /// How the rows are laid out (`linalg::quant::packed`): row-major, or packed for
    /// lane-indexed `SDOT` (int8 `qc8w_p4x4` with fp32 scales `[N]`; with a group 4-bit
    /// `qb4w_p4x4` with packed fp32 group scales), for `SMMLA` (`qc8w_p8x8`, `qb4w_p8x8`), or
    /// for SME2 `SMOPA` (int8 `qc8w_pNx4`).
    pub layout: Int8Layout,
}

impl QuantFilter {
    /// Whether rows of `len` bytes, and this filter's scales and sums, have the sizes of an
    /// `n × k` filter in its layout.
    pub(super) fn sizes_fit(&self, len: u64, n: usize, k: usize) -> bool {
        use crate::linalg::quant::packed as qp;
        let g = self.group as usize;
        let packed = self.layout != Int8Layout::RowMajor;
        let (rows, scales) = match (k.checked_div(g), packed) {
            (None, true) => (
                self.layout.len(n, k).filter(|_| {
                    k.is_multiple_of(16)
                        && !matches!(self.layout, Int8Layout::PNx4(nb) if nb % 4 != 0 || nb > 255)
                }),
                n.checked_mul(4),
            ),
            (None, false) => (n.checked_mul(k), n.checked_mul(4)),
            (Some(_), true) => {
                let (rows, scales) = match self.layout {
                    Int8Layout::P8x8 => {
                        (qp::packed4x8_len(n, k), qp::packed4x8_scales_len(n, k, g))
                    }
                    Int8Layout::P4x4 => (qp::packed4_len(n, k), qp::packed4_scales_len(n, k, g)),
                    Int8Layout::PNx4(nb) if nb % 8 == 0 && nb <= 255 => (
                        qp::packed4n_len(n, k, nb),
                        qp::packed4n_scales_len(n, k, g, nb),
                    ),
                    _ => (None, None),
                };
                (
                    rows.filter(|_| qp::packs4(k, g)),
                    scales.and_then(|s| s.checked_mul(4)),
                )
            }
            (Some(groups), false) => (
                n.checked_mul(k.div_ceil(2)),
                n.checked_mul(groups).and_then(|v| v.checked_mul(2)),
            ),
        };
        (g == 0 || k.is_multiple_of(g))
            && rows.is_some_and(|r| len == r as u64)
            && scales.is_some_and(|sc| self.scales.1 == sc as u64)
            && self.sums.1 == 4 * n as u64
    }
}

/// [`Backend::arg_access`](crate::delegate::Backend::arg_access) of an initialised plan
/// `state` (also for plans another backend wraps): external inputs are read, external outputs
/// written whole; an argument no external names is unused. A state area that does not parse
/// gives the safe default.
pub fn arg_access_of(state: &[u8], arg: usize) -> ArgAccess {
    let Ok(view) = state_view(state) else {
        return ArgAccess::ReadWrite;
    };
    let (mut read, mut written) = (false, false);
    for l in view.locs.iter().filter(|l| l.ext as usize == arg) {
        read |= l.kind == KIND_EXTERNAL_IN;
        written |= l.kind == KIND_EXTERNAL_OUT;
    }
    ArgAccess::of(read, written)
}
