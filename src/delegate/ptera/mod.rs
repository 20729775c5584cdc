//! ptera's own delegate (`BackendDelegate.id == "PteraBackend"`): the regions `xtask lower`
//! writes, run on the GEMM micro-kernels with weights packed ahead of time.
//!
//! The payload is a `ptera_region::Region` flatbuffer (`schema/ptera.fbs`, identifier
//! `PTR1`, ABI [`ABI`]). Each operation reads and writes DelegateCall arguments (inputs first,
//! then outputs). A `Packed` weight lives in the program's named data as
//! [`PackedB`](crate::linalg::gemm::PackedB) panels of the target's tile width and is read
//! in place, never copied; when this CPU has no kernel of that width, the GEMM computes
//! panel by panel over the same bytes (slower, same result).
//!
//! A region is either a list of `Linear` operations, one `Attention` (a layer's scaled
//! dot-product attention over heads, run by [`crate::linalg::attention`] with Q, K and V read
//! where their projections wrote them), or one `XnnGraph`: an ExecuTorch XNNPACK payload kept
//! unchanged in its own segment, run by [`crate::delegate::xnnpack`] with the filters of its
//! fully-connected nodes read as pre-packed panels.
//!
//! The payload is verified and decoded once, at load: the state (per delegate, in the
//! metadata buffer) holds a 32-byte header (operation count, kind, and for an `XnnGraph` the
//! byte range of the wrapped payload) and then either one fixed record per `Linear` operation
//! (arguments, sizes, activation, the byte range of its packed weight inside the program), the
//! attention's record, or the XNNPACK interpreter's own plan, so a run reads no flatbuffer.

mod attention;
mod linear;
mod record;

use linear::{
    linear, linear_prepared, linear_quant, quant_scratch_f32, Linear, QuantW, WeightRef, DECIDED,
};

use record::{bad, u32_at, u64_at};

use crate::delegate::xnnpack::{self, FilterOverride};
use crate::delegate::{ArgAccess, Backend, DelegateInit, Requirements};
use crate::error::KernelError;
use crate::format::region_fb as rf;
use crate::kernel_api::{KernelCtx, Prepared};
use crate::linalg::gemm::{self, PackedB, SplitHint, GEMM_SCRATCH_F32, MAX_NR};
use crate::linalg::quant::{packed::Int8Layout, QWeights};

/// The backend id programs use.
pub const ID: &str = "PteraBackend";
/// The payload ABI this runtime reads.
pub const ABI: u32 = 1;
/// Payload file identifier.
pub const IDENTIFIER: &str = "PTR1";

/// The backend instance registered in [`crate::exec::registry::BACKENDS`].
pub static BACKEND: PteraBackend = PteraBackend;

/// ptera's own region backend (stateless; per-method state lives in the metadata buffer).
pub struct PteraBackend;

/// Bytes of state per `Linear` operation (see [`encode`]), after the header.
const STATE_PER_OP: usize = 96;
/// State header: `0 operation count (u32), 4 kind (u32: 0 linear list, 1 XNNPACK graph,
/// 2 attention),
/// 8 wrapped payload offset in the program (u64), 16 its length (u64)`; 32 keeps the
/// XNNPACK plan behind it 16-byte aligned.
const STATE_HEAD: usize = 32;
const KIND_LINEAR: u32 = 0;
const KIND_XNN: u32 = 1;
const KIND_ATTENTION: u32 = 2;
/// Most pre-packed filters one wrapped XNNPACK graph may have.
pub const MAX_PACKED_FILTERS: usize = 256;

type Filters = heapless::Vec<FilterOverride, MAX_PACKED_FILTERS>;

/// The wrapped XNNPACK payload of a one-operation `XnnGraph` region (as the XNNPACK
/// interpreter's load-time input) and its pre-packed filters; `None` for a `Linear` region.
fn xnn_parts<'p>(
    init: &DelegateInit<'p>,
    r: &rf::Region<'_>,
) -> Result<Option<(DelegateInit<'p>, Filters)>, KernelError> {
    let ops = r.ops().ok_or(bad("ptera region: no operations"))?;
    let Some(xg) = ops.iter().find_map(|op| op.op_as_xnn_graph()) else {
        return Ok(None);
    };
    if ops.len() != 1 {
        return Err(bad("ptera region: an XnnGraph region holds nothing else"));
    }
    let payload = init
        .program
        .segment(xg.segment() as usize)
        .map_err(|_| bad("ptera region: wrapped XNNPACK payload segment out of range"))?;
    let base = init.program.bytes().as_ptr() as usize;
    let too_many = || KernelError::Unsupported {
        detail: "ptera region: more than 256 overridden filters in one XNNPACK graph",
    };
    let mut filters = Filters::new();
    for pf in xg.packed().into_iter().flatten() {
        let key = pf
            .key()
            .ok_or(bad("ptera region: packed filter without key"))?;
        let data = init.program.named_data(key).ok_or(bad(
            "ptera region: packed filter key not in the program's named data",
        ))?;
        if matches!(
            pf.layout(),
            rf::WeightLayout::Int8
                | rf::WeightLayout::Int4
                | rf::WeightLayout::Int8Packed
                | rf::WeightLayout::Int4Packed
                | rf::WeightLayout::Int8Packed8
                | rf::WeightLayout::Int4Packed8
                | rf::WeightLayout::Int8PackedN
                | rf::WeightLayout::Int4PackedN
        ) {
            let blob = |k: Option<&str>| {
                k.and_then(|k| init.program.named_data(k))
                    .map(|d| ((d.as_ptr() as usize - base) as u64, d.len() as u64))
                    .ok_or(bad(
                        "ptera region: quantized filter's scales or sums not in the named data",
                    ))
            };
            let (scales, sums) = (blob(pf.scales_key())?, blob(pf.sums_key())?);
            let four = matches!(
                pf.layout(),
                rf::WeightLayout::Int4
                    | rf::WeightLayout::Int4Packed
                    | rf::WeightLayout::Int4Packed8
                    | rf::WeightLayout::Int4PackedN
            );
            let group = if four { pf.group() } else { 0 };
            if !(base as u64 + sums.0).is_multiple_of(4) || (four && group == 0) {
                return Err(bad(
                    "ptera region: quantized filter sums misaligned or 4-bit group missing",
                ));
            }
            filters
                .push(FilterOverride {
                    value: pf.value(),
                    offset: (data.as_ptr() as usize - base) as u64,
                    len: data.len() as u64,
                    nr: None,
                    quant: Some(xnnpack::QuantFilter {
                        group,
                        scales,
                        sums,
                        layout: match pf.layout() {
                            rf::WeightLayout::Int8Packed | rf::WeightLayout::Int4Packed => {
                                Int8Layout::P4x4
                            }
                            rf::WeightLayout::Int8Packed8 | rf::WeightLayout::Int4Packed8 => {
                                Int8Layout::P8x8
                            }
                            rf::WeightLayout::Int8PackedN | rf::WeightLayout::Int4PackedN => {
                                Int8Layout::PNx4(pf.nr() as usize)
                            }
                            _ => Int8Layout::RowMajor,
                        },
                    }),
                })
                .map_err(|_| too_many())?;
            continue;
        }
        if pf.layout() != rf::WeightLayout::Packed {
            return Err(bad("ptera region: unknown packed filter layout"));
        }
        if !(data.as_ptr() as usize).is_multiple_of(4) || pf.nr() == 0 || pf.nr() as usize > MAX_NR
        {
            return Err(bad(
                "ptera region: packed filter misaligned or tile width out of range",
            ));
        }
        filters
            .push(FilterOverride {
                value: pf.value(),
                offset: (data.as_ptr() as usize - base) as u64,
                len: data.len() as u64,
                nr: Some(pf.nr()),
                quant: None,
            })
            .map_err(|_| too_many())?;
    }
    for af in xg.aliased().into_iter().flatten() {
        let data = init
            .program
            .constant_tail(af.buffer(), init.index)
            .map_err(|_| bad("ptera region: aliased filter's constant out of range"))?;
        filters
            .push(FilterOverride {
                value: af.value(),
                offset: (data.as_ptr() as usize - base) as u64,
                len: data.len() as u64,
                nr: None,
                quant: None,
            })
            .map_err(|_| too_many())?;
    }
    let xinit = DelegateInit {
        program: init.program,
        payload,
        index: init.index,
    };
    Ok(Some((xinit, filters)))
}

const VERIFIER: flatbuffers::VerifierOptions = flatbuffers::VerifierOptions {
    max_depth: 16,
    max_tables: 1 << 20,
    max_apparent_size: 1 << 30,
    ignore_missing_null_terminator: false,
};

/// The verified region of a payload, with its ABI checked.
pub fn region_of(payload: &[u8]) -> Result<rf::Region<'_>, KernelError> {
    if payload.len() < 8 || !flatbuffers::buffer_has_identifier(payload, IDENTIFIER, false) {
        return Err(bad("ptera region: not a PTR1 payload"));
    }
    let r = flatbuffers::root_with_opts::<rf::Region>(&VERIFIER, payload)
        .map_err(|_| bad("ptera region: flatbuffer failed verification"))?;
    if r.abi() != ABI {
        return Err(bad(
            "ptera region: payload ABI version not supported by this runtime",
        ));
    }
    Ok(r)
}

/// What a region was packed for, as the lowering wrote it: the target's ISA label and vector
/// bits, and the widest tile width among its packed weights for which this CPU has no
/// micro-kernel (`None`: every packed weight is read by a kernel of its own width; otherwise
/// those products compute panel by panel, slower, same results). `None` for a payload that is
/// not a valid region.
pub fn packed_for(payload: &[u8]) -> Option<(&str, u32, Option<usize>)> {
    let r = region_of(payload).ok()?;
    let mut missing = None;
    for op in r.ops()?.iter() {
        let widths = op
            .op_as_linear()
            .and_then(|l| l.weight())
            .filter(|w| w.layout() == rf::WeightLayout::Packed)
            .map(|w| w.nr() as usize)
            .into_iter()
            .chain(
                op.op_as_xnn_graph()
                    .and_then(|x| x.packed())
                    .into_iter()
                    .flatten()
                    .filter(|p| p.layout() == rf::WeightLayout::Packed)
                    .map(|p| p.nr() as usize),
            );
        for nr in widths {
            if gemm::select::kernel_with_nr(nr).is_none() {
                missing = missing.max(Some(nr));
            }
        }
    }
    Some((r.isa().unwrap_or(""), r.vector_bits(), missing))
}

/// The attention operation of a region holding one (and nothing else).
fn attention_op<'r>(
    ops: &flatbuffers::Vector<'r, flatbuffers::ForwardsUOffset<rf::Operation<'r>>>,
) -> Result<Option<rf::Operation<'r>>, KernelError> {
    let Some(op) = ops.iter().find(|op| op.op_type() == rf::Op::Attention) else {
        return Ok(None);
    };
    if ops.len() != 1 {
        return Err(bad("ptera region: an Attention region holds nothing else"));
    }
    Ok(Some(op))
}

/// Named-data keys of an operation's weight: the packed panels or quantized rows, and for
/// quantized rows their scales and column sums.
#[derive(Clone, Copy, Default)]
struct Keys<'a> {
    data: Option<&'a str>,
    scales: Option<&'a str>,
    sums: Option<&'a str>,
}

fn linear_of(op: rf::Operation<'_>) -> Result<(Linear, Keys<'_>), KernelError> {
    let l = op
        .op_as_linear()
        .ok_or(bad("ptera region: unknown operation kind"))?;
    let w = l
        .weight()
        .ok_or(bad("ptera region: linear without weight"))?;
    let (k, n) = (l.k() as usize, l.n() as usize);
    if k == 0 || n == 0 {
        return Err(bad("ptera region: linear with zero depth or width"));
    }
    let arg = |a: i32| usize::try_from(a).map_err(|_| bad("ptera region: negative argument"));
    let (weight, key) = match w.layout() {
        rf::WeightLayout::Packed => {
            let nr = w.nr() as usize;
            if nr == 0 || nr > MAX_NR {
                return Err(bad("ptera region: packed tile width out of range"));
            }
            let key = w
                .key()
                .ok_or(bad("ptera region: packed weight without key"))?;
            (
                WeightRef::Packed { nr },
                Keys {
                    data: Some(key),
                    ..Keys::default()
                },
            )
        }
        rf::WeightLayout::KxN => (
            WeightRef::Arg {
                arg: arg(w.arg())?,
                transposed: false,
            },
            Keys::default(),
        ),
        rf::WeightLayout::NxK => (
            WeightRef::Arg {
                arg: arg(w.arg())?,
                transposed: true,
            },
            Keys::default(),
        ),
        layout @ (rf::WeightLayout::Int8
        | rf::WeightLayout::Int4
        | rf::WeightLayout::Int8Packed
        | rf::WeightLayout::Int8Packed8
        | rf::WeightLayout::Int8PackedN) => {
            let four_bit = layout == rf::WeightLayout::Int4;
            let packed = match layout {
                rf::WeightLayout::Int8Packed => Int8Layout::P4x4,
                rf::WeightLayout::Int8Packed8 => Int8Layout::P8x8,
                rf::WeightLayout::Int8PackedN => Int8Layout::PNx4(w.nr() as usize),
                _ => Int8Layout::RowMajor,
            };
            if packed != Int8Layout::RowMajor && !k.is_multiple_of(16) {
                return Err(bad(
                    "ptera region: packed int8 weight with a depth not a multiple of 16",
                ));
            }
            if matches!(packed, Int8Layout::PNx4(nb) if nb == 0 || nb % 4 != 0) {
                return Err(bad(
                    "ptera region: int8 weight packed in blocks that are not a multiple of 4",
                ));
            }
            let group = if four_bit { w.group() as usize } else { 0 };
            if four_bit && (group == 0 || group % 2 != 0 || k % group != 0) {
                return Err(bad(
                    "ptera region: 4-bit weight group not an even divisor of the depth",
                ));
            }
            if l.alpha() != 1.0 {
                return Err(bad(
                    "ptera region: quantized linear with alpha other than 1",
                ));
            }
            let missing = || bad("ptera region: quantized weight without its keys");
            (
                WeightRef::Quant {
                    four_bit,
                    group,
                    packed,
                },
                Keys {
                    data: Some(w.key().ok_or_else(missing)?),
                    scales: Some(w.scales_key().ok_or_else(missing)?),
                    sums: Some(w.sums_key().ok_or_else(missing)?),
                },
            )
        }
        _ => return Err(bad("ptera region: unknown weight layout")),
    };
    let act = l.activation();
    if !matches!(
        act,
        rf::Activation::None
            | rf::Activation::Relu
            | rf::Activation::GeluErf
            | rf::Activation::GeluTanh
    ) {
        return Err(bad("ptera region: unknown activation"));
    }
    Ok((
        Linear {
            input: l.input() as usize,
            output: l.output() as usize,
            bias: (l.bias() >= 0).then_some(l.bias() as usize),
            k,
            n,
            alpha: l.alpha(),
            beta: l.beta(),
            act,
            weight,
        },
        key,
    ))
}

/// Bytes of the packed weight of an operation: named data `key`, exactly
/// `PackedB::len_for(k, n, nr)` floats, 4-byte aligned.
fn packed_bytes<'p>(
    init: &DelegateInit<'p>,
    key: &str,
    l: &Linear,
    nr: usize,
) -> Result<&'p [u8], KernelError> {
    let data = init.program.named_data(key).ok_or(bad(
        "ptera region: packed weight key not in the program's named data",
    ))?;
    let floats =
        PackedB::len_for(l.k, l.n, nr).ok_or(bad("ptera region: packed size overflows"))?;
    if floats.checked_mul(4) != Some(data.len()) {
        return Err(bad(
            "ptera region: packed weight size does not match k, n, nr",
        ));
    }
    if !(data.as_ptr() as usize).is_multiple_of(4) {
        return Err(bad("ptera region: packed weight not 4-byte aligned"));
    }
    Ok(data)
}

/// Byte ranges (program offset, length) of a quantized weight's rows, scales and column sums,
/// each exactly its size (sums 4-byte aligned).
fn quant_ranges(
    init: &DelegateInit<'_>,
    keys: Keys<'_>,
    l: &Linear,
    four_bit: bool,
    group: usize,
    packed: Int8Layout,
) -> Result<[(u64, u64); 3], KernelError> {
    let base = init.program.bytes().as_ptr() as usize;
    let get = |key: Option<&str>, want: Option<usize>| -> Result<(u64, u64), KernelError> {
        let data = key.and_then(|k| init.program.named_data(k)).ok_or(bad(
            "ptera region: quantized weight key not in the program's named data",
        ))?;
        if want != Some(data.len()) {
            return Err(bad(
                "ptera region: quantized weight data size does not match k and n",
            ));
        }
        Ok(((data.as_ptr() as usize - base) as u64, data.len() as u64))
    };
    let (n, k) = (l.n, l.k);
    let rows = if four_bit {
        n.checked_mul(k.div_ceil(2))
    } else {
        packed.len(n, k)
    };
    let scales = if four_bit {
        n.checked_mul(k / group).and_then(|v| v.checked_mul(2))
    } else {
        n.checked_mul(4)
    };
    let r = [
        get(keys.data, rows)?,
        get(keys.scales, scales)?,
        get(keys.sums, n.checked_mul(4))?,
    ];
    if !((base as u64 + r[2].0).is_multiple_of(4)) {
        return Err(bad("ptera region: column sums not 4-byte aligned"));
    }
    Ok(r)
}

/// The state record of one operation (little endian):
/// `0 input, 4 output, 8 bias (i32, -1 none), 12 weight kind (0 packed, 1 [K,N] arg,
/// 2 [N,K] arg, 3 int8, 4 4-bit, 5 int8 `qc8w_p4x4`, 6 int8 `qc8w_p8x8`, 7 int8 `qc8w_pNx4`
/// with `N` = nr), 16 weight arg, 20 nr, 24 k, 28 n, 32 alpha, 36 beta (f32
/// bits), 40 activation, 44 group, then (program offset, length) pairs (u64): 48 packed
/// panels or quantized rows, 64 scales, 80 column sums`.
fn encode(l: &Linear, ranges: [(u64, u64); 3], r: &mut [u8]) {
    let (kind, arg, nr, group) = match l.weight {
        WeightRef::Packed { nr } => (0u32, 0u32, nr as u32, 0),
        WeightRef::Arg { arg, transposed } => (1 + transposed as u32, arg as u32, 0, 0),
        WeightRef::Quant {
            four_bit,
            group,
            packed,
        } => (
            match packed {
                Int8Layout::P4x4 => 5,
                Int8Layout::P8x8 => 6,
                Int8Layout::PNx4(_) => 7,
                Int8Layout::RowMajor => 3 + four_bit as u32,
            },
            0,
            match packed {
                Int8Layout::PNx4(nb) => nb as u32,
                _ => 0,
            },
            group as u32,
        ),
    };
    let words = [
        l.input as u32,
        l.output as u32,
        l.bias.map_or(u32::MAX, |b| b as u32),
        kind,
        arg,
        nr,
        l.k as u32,
        l.n as u32,
        l.alpha.to_bits(),
        l.beta.to_bits(),
        l.act.0 as u8 as u32,
        group,
    ];
    for (i, w) in words.iter().enumerate() {
        r[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    for (i, (off, len)) in ranges.iter().enumerate() {
        r[48 + 16 * i..56 + 16 * i].copy_from_slice(&off.to_le_bytes());
        r[56 + 16 * i..64 + 16 * i].copy_from_slice(&len.to_le_bytes());
    }
}

/// Reads back a record written by [`encode`] (from validated values).
fn decode(r: &[u8]) -> (Linear, [(u64, u64); 3]) {
    let kind = u32_at(r, 12);
    let weight = match kind {
        0 => WeightRef::Packed {
            nr: u32_at(r, 20) as usize,
        },
        3..=7 => WeightRef::Quant {
            four_bit: kind == 4,
            group: u32_at(r, 44) as usize,
            packed: match kind {
                5 => Int8Layout::P4x4,
                6 => Int8Layout::P8x8,
                7 => Int8Layout::PNx4(u32_at(r, 20) as usize),
                _ => Int8Layout::RowMajor,
            },
        },
        k => WeightRef::Arg {
            arg: u32_at(r, 16) as usize,
            transposed: k == 2,
        },
    };
    let bias = u32_at(r, 8);
    (
        Linear {
            input: u32_at(r, 0) as usize,
            output: u32_at(r, 4) as usize,
            bias: (bias != u32::MAX).then_some(bias as usize),
            k: u32_at(r, 24) as usize,
            n: u32_at(r, 28) as usize,
            alpha: f32::from_bits(u32_at(r, 32)),
            beta: f32::from_bits(u32_at(r, 36)),
            act: rf::Activation(u32_at(r, 40) as i8),
            weight,
        },
        core::array::from_fn(|i| (u64_at(r, 48 + 16 * i), u64_at(r, 56 + 16 * i))),
    )
}

impl Backend for PteraBackend {
    fn id(&self) -> &'static str {
        ID
    }

    fn prepare(&self, init: &DelegateInit<'_>) -> Result<Requirements, KernelError> {
        let r = region_of(init.payload)?;
        if let Some((xinit, filters)) = xnn_parts(init, &r)? {
            let req = xnnpack::prepare_packed(&xinit, &filters)?;
            return Ok(Requirements {
                state: STATE_HEAD + req.state,
                scratch: req.scratch,
            });
        }
        let ops = r.ops().ok_or(bad("ptera region: no operations"))?;
        if let Some(op) = attention_op(&ops)? {
            let o = attention::of(op)?;
            return Ok(Requirements {
                state: STATE_HEAD + attention::RECORD,
                scratch: attention::scratch_bytes(&o.attn)
                    .ok_or(bad("ptera region: attention scratch overflows"))?,
            });
        }
        let mut scratch_f32 = GEMM_SCRATCH_F32;
        for op in ops.iter() {
            let (l, keys) = linear_of(op)?;
            match (l.weight, keys.data) {
                (WeightRef::Packed { nr }, Some(key)) => {
                    packed_bytes(init, key, &l, nr)?;
                }
                (
                    WeightRef::Quant {
                        four_bit,
                        group,
                        packed,
                    },
                    _,
                ) => {
                    quant_ranges(init, keys, &l, four_bit, group, packed)?;
                    let max_m = op.op_as_linear().map_or(0, |x| x.max_m() as usize);
                    let need = quant_scratch_f32(max_m, l.k, packed)
                        .ok_or(bad("ptera region: quantized scratch overflows"))?;
                    scratch_f32 = scratch_f32.max(need);
                }
                _ => {}
            }
        }
        let state = ops
            .len()
            .checked_mul(STATE_PER_OP)
            .and_then(|b| b.checked_add(STATE_HEAD))
            .ok_or(bad("ptera region: too many operations"))?;
        Ok(Requirements {
            state,
            scratch: if ops.is_empty() {
                0
            } else {
                scratch_f32
                    .checked_mul(4)
                    .and_then(|b| b.checked_add(16))
                    .ok_or(bad("ptera region: scratch overflows"))?
            },
        })
    }

    fn init(&self, init: &DelegateInit<'_>, state: &mut [u8]) -> Result<(), KernelError> {
        let r = region_of(init.payload)?;
        if state.len() < STATE_HEAD {
            return Err(bad("ptera region: state area too small"));
        }
        if let Some((xinit, filters)) = xnn_parts(init, &r)? {
            let off =
                (xinit.payload.as_ptr() as usize - init.program.bytes().as_ptr() as usize) as u64;
            state[..4].copy_from_slice(&1u32.to_le_bytes());
            state[4..8].copy_from_slice(&KIND_XNN.to_le_bytes());
            state[8..16].copy_from_slice(&off.to_le_bytes());
            state[16..24].copy_from_slice(&(xinit.payload.len() as u64).to_le_bytes());
            return xnnpack::init_packed(&xinit, &mut state[STATE_HEAD..], &filters);
        }
        let ops = r.ops().ok_or(bad("ptera region: no operations"))?;
        if let Some(op) = attention_op(&ops)? {
            let o = attention::of(op)?;
            if state.len() < STATE_HEAD + attention::RECORD {
                return Err(bad("ptera region: state area too small"));
            }
            state[..4].copy_from_slice(&1u32.to_le_bytes());
            state[4..8].copy_from_slice(&KIND_ATTENTION.to_le_bytes());
            attention::encode(&o, &mut state[STATE_HEAD..STATE_HEAD + attention::RECORD]);
            return Ok(());
        }
        if state.len() < STATE_HEAD + ops.len() * STATE_PER_OP {
            return Err(bad("ptera region: state area too small"));
        }
        state[..4].copy_from_slice(&(ops.len() as u32).to_le_bytes());
        state[4..8].copy_from_slice(&KIND_LINEAR.to_le_bytes());
        let base = init.program.bytes().as_ptr() as usize;
        for (i, op) in ops.iter().enumerate() {
            let (l, keys) = linear_of(op)?;
            let ranges = match (l.weight, keys.data) {
                (WeightRef::Packed { nr }, Some(key)) => {
                    let b = packed_bytes(init, key, &l, nr)?;
                    [
                        ((b.as_ptr() as usize - base) as u64, b.len() as u64),
                        (0, 0),
                        (0, 0),
                    ]
                }
                (
                    WeightRef::Quant {
                        four_bit,
                        group,
                        packed,
                    },
                    _,
                ) => quant_ranges(init, keys, &l, four_bit, group, packed)?,
                _ => [(0, 0); 3],
            };
            let at = STATE_HEAD + i * STATE_PER_OP;
            encode(&l, ranges, &mut state[at..at + STATE_PER_OP]);
        }
        Ok(())
    }

    /// A region of one product over packed panels binds its input, output and bias from a
    /// record made here (slots in that order), when none of them is named at another position
    /// of the call (an attention region binds its few tensors through the arguments as
    /// cheaply: a fused projection's Q, K and V are one tensor, bound once).
    fn prepare_call(
        &self,
        _: &DelegateInit<'_>,
        state: &[u8],
        ctx: &KernelCtx<'_, '_, '_>,
    ) -> Option<Prepared> {
        let rec = state.get(STATE_HEAD..STATE_HEAD + STATE_PER_OP)?;
        if u32_at(state, 4) != KIND_LINEAR || u32_at(state, 0) != 1 {
            return None;
        }
        let (l, ranges) = decode(rec);
        let args = [Some(l.input), Some(l.output), l.bias];
        let WeightRef::Packed { nr } = l.weight else {
            return None;
        };
        if args.iter().flatten().any(|&a| ctx.named_elsewhere(a)) {
            return None;
        }
        // The product's split across the team installed at load, for its rows as loaded.
        let m = ctx
            .dims(l.input)
            .ok()
            .and_then(|d| d.split_last())
            .and_then(|(_, lead)| lead.iter().try_fold(1usize, |a, &d| a.checked_mul(d)));
        let hint = m.map_or(SplitHint::NONE, |m| {
            gemm::split_hint_prepacked(m, l.n, l.k, nr)
        });
        let mut slots = [Prepared::NO_SLOT; 6];
        for (s, a) in slots.iter_mut().zip(args) {
            if let Some(a) = a {
                *s = u32::try_from(ctx.tensor_slot(a).ok()?).ok()?;
            }
        }
        // The whole call decided here ([`linear_prepared`]) when nothing but the tensors
        // needs reading as it runs: unit alpha and beta, every row, the panels' offset.
        let offset = u32::try_from(ranges[0].0).ok();
        let fixed = (l.alpha == 1.0 && l.beta == 1.0 && ctx.demanded_rows(l.output).is_none())
            .then_some(())
            .and(offset)
            .zip(u32::try_from(l.k).ok().zip(u32::try_from(l.n).ok()));
        let (sizes, param) = match fixed {
            Some((off, (k, n))) => (
                [k, n, off, nr as u32],
                DECIDED | u32::from(l.act.0 as u8) << 8,
            ),
            None => ([0; 4], 0),
        };
        Some(Prepared {
            run: None,
            slots,
            sizes,
            param,
            hint: hint.bits(),
        })
    }

    /// A linear's input, bias and weight argument are read, its output written whole (rows a
    /// row demand leaves out are never read: `exec::demand`); a wrapped XNNPACK payload's plan
    /// says for itself. A state area that does not parse gives the safe default.
    fn arg_access(&self, _: &DelegateInit<'_>, state: &[u8], arg: usize) -> ArgAccess {
        if state.len() < STATE_HEAD {
            return ArgAccess::ReadWrite;
        }
        if u32_at(state, 4) == KIND_XNN {
            return xnnpack::arg_access_of(&state[STATE_HEAD..], arg);
        }
        if u32_at(state, 4) == KIND_ATTENTION {
            let (read, written) = attention::access(&attention::decode(&state[STATE_HEAD..]), arg);
            return ArgAccess::of(read, written);
        }
        let records = (u32_at(state, 0) as usize)
            .checked_mul(STATE_PER_OP)
            .and_then(|n| state.get(STATE_HEAD..STATE_HEAD.checked_add(n)?));
        let Some(records) = records else {
            return ArgAccess::ReadWrite;
        };
        let (mut read, mut written) = (false, false);
        for rec in records.chunks_exact(STATE_PER_OP) {
            let (l, _) = decode(rec);
            let weight = matches!(l.weight, WeightRef::Arg { arg: a, .. } if a == arg);
            read |= l.input == arg || l.bias == Some(arg) || weight;
            written |= l.output == arg;
        }
        ArgAccess::of(read, written)
    }

    fn execute(
        &self,
        init: &DelegateInit<'_>,
        state: &[u8],
        ctx: &mut KernelCtx<'_, '_, '_>,
    ) -> Result<(), KernelError> {
        if state.len() < STATE_HEAD {
            return Err(bad("ptera region: state area too small"));
        }
        let program = init.program.bytes();
        if u32_at(state, 4) == KIND_XNN {
            let payload = usize::try_from(u64_at(state, 8))
                .ok()
                .zip(usize::try_from(u64_at(state, 16)).ok())
                .and_then(|(o, n)| program.get(o..o.checked_add(n)?))
                .ok_or(bad("ptera region: wrapped payload outside the program"))?;
            let xinit = DelegateInit {
                program: init.program,
                payload,
                index: init.index,
            };
            return xnnpack::execute_plan(&xinit, &state[STATE_HEAD..], ctx);
        }
        if u32_at(state, 4) == KIND_ATTENTION {
            let rec = state
                .get(STATE_HEAD..STATE_HEAD + attention::RECORD)
                .ok_or(bad("ptera region: state area too small"))?;
            return attention::run(ctx, 0, &attention::decode(rec));
        }
        if let Some(done) = linear_prepared(ctx, program) {
            return done;
        }
        let count = u32_at(state, 0) as usize;
        let records = state
            .get(STATE_HEAD..STATE_HEAD + count * STATE_PER_OP)
            .ok_or(bad("ptera region: state area too small"))?;
        for (i, rec) in records.chunks_exact(STATE_PER_OP).enumerate() {
            let (l, ranges) = decode(rec);
            let bytes = |(off, len): (u64, u64)| {
                usize::try_from(off)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(o, n)| program.get(o..o.checked_add(n)?))
                    .ok_or(bad("ptera region: weight outside the program"))
            };
            let packed = match l.weight {
                WeightRef::Packed { nr } => {
                    let data = xnnpack::run::as_f32(bytes(ranges[0])?)
                        .ok_or(bad("ptera region: packed weight misaligned"))?;
                    Some(PackedB::new(data, l.k, l.n, nr)?)
                }
                WeightRef::Quant {
                    four_bit,
                    group,
                    packed,
                } => {
                    let (data, scales) = (bytes(ranges[0])?, bytes(ranges[1])?);
                    let w = match (four_bit, packed) {
                        (true, _) => QuantW::Rows(QWeights::Qb4w {
                            data,
                            scales,
                            group,
                        }),
                        (false, Int8Layout::RowMajor) => {
                            QuantW::Rows(QWeights::Qc8w { data, scales })
                        }
                        (false, layout) => QuantW::Packed {
                            data,
                            scales,
                            layout,
                        },
                    };
                    let sums = xnnpack::run::as_f32(bytes(ranges[2])?)
                        .ok_or(bad("ptera region: column sums misaligned"))?;
                    linear_quant(ctx, i, &l, &w, sums)?;
                    continue;
                }
                WeightRef::Arg { .. } => None,
            };
            linear(ctx, i, &l, packed)?;
        }
        Ok(())
    }
}
