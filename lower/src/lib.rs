//! Host-side lowering of ExecuTorch `.pte` programs for ptera (`cargo xtask lower`).
//!
//! [`lower`] reads a program with ptera's own reader, finds the matmul-like instructions whose
//! weights are constants ([`partition`]), packs those weights once into the panel layout of the
//! target's GEMM micro-kernel ([`target`]), and writes a new, valid ExecuTorch container
//! ([`emit`]) where each absorbed product is a `DelegateCall` to `PteraBackend` (payload:
//! [`payload`], schema `schema/ptera.fbs`; runtime: `ptera::delegate::ptera`). Packed weights
//! replace the originals in the file and are read in place at run time.
//!
//! The output is checked before it is returned: it must load and validate with ptera's
//! standard registry, every method.

pub mod attention;
pub mod constants;
pub mod emit;
pub mod partition;
pub mod payload;
pub mod quantize;
pub mod replan;
pub mod rewrite;
pub mod target;
pub mod xnn;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Instant;

use ptera::format::fb;
use ptera::host::AlignedBuf;
use ptera::linalg::gemm::{pack_b_ahead, MatRef, PackedB};
use ptera::linalg::quant::packed::Int8Layout;
use ptera::{MethodMeta, Program, Registry};

pub use partition::{Act, Candidate, Decision, Orient};
pub use rewrite::{RewriteReport, Rewrites};
pub use target::Target;

/// A lowering failure (bad input, or an output that would not load), with context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerError(pub String);

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LowerError {}

fn err<T>(msg: impl Into<String>) -> Result<T, LowerError> {
    Err(LowerError(msg.into()))
}

/// One region made.
#[derive(Clone, Debug)]
pub struct RegionReport {
    /// Instruction (in the input's chain 0) the DelegateCall replaces.
    pub instruction: usize,
    pub absorbed: Vec<String>,
    pub k: usize,
    pub n: usize,
    pub max_m: usize,
    /// `Some(nr)` when the weight is packed for tile width `nr`; `None` when the region reads
    /// the constant as an argument (it has other readers).
    pub packed_nr: Option<usize>,
    /// Set when the weight was quantized (`--quantize`) instead of packed.
    pub quant: Option<QuantReport>,
}

/// One weight quantized by `--quantize`.
#[derive(Clone, Debug)]
pub struct QuantReport {
    /// `int8` or `int4:G`.
    pub scheme: String,
    /// Bytes of its rows and scales (the column sums add `4·N`), and of the fp32 weight.
    pub bytes: usize,
    pub fp32_bytes: usize,
    /// `max |w - ŵ| / max |w|` over the weight.
    pub max_rel_err: f32,
}

/// What happened to one method.
#[derive(Clone, Debug, Default)]
pub struct MethodReport {
    pub name: String,
    pub regions: Vec<RegionReport>,
    /// Matmul-like instructions left portable: (instruction, operator, reason).
    pub portable: Vec<(usize, String, String)>,
    /// XNNPACK regions converted to PteraBackend regions.
    pub converted: Vec<XnnRegionReport>,
    /// Delegate regions of other backends kept as they are: (delegate id, count).
    pub other_delegates: Vec<(String, usize)>,
    /// Attention chains made `Attention` regions ([`attention`]).
    pub attentions: Vec<AttentionReport>,
}

/// One attention chain made a region.
#[derive(Clone, Debug)]
pub struct AttentionReport {
    /// The instruction the region took the place of (the chain's last).
    pub instruction: usize,
    /// Operators absorbed (in program order).
    pub absorbed: Vec<String>,
    pub heads: usize,
    pub head_dim: usize,
    /// Query heads per K/V head (1 unless grouped-query).
    pub kv_group: usize,
    pub q_rows: usize,
    pub kv_rows: usize,
    pub masked: bool,
}

/// One XNNPACK region converted (its graph is kept; fully-connected filters are packed).
#[derive(Clone, Debug)]
pub struct XnnRegionReport {
    pub delegate: usize,
    /// Node kinds of the region and their counts.
    pub nodes: Vec<(String, usize)>,
    pub fully_connected: usize,
    /// One-group convolutions (their filters are packed like fully-connected ones).
    pub convolutions: usize,
    pub packed_filters: usize,
    /// Fully-connected filters quantized (`--quantize`) instead of packed.
    pub quantized_filters: Vec<QuantReport>,
    /// Stock int8 filters repacked for lane-indexed SDOT.
    pub repacked_int8_filters: usize,
    /// Stock group-wise 4-bit filters repacked for lane-indexed SDOT.
    pub repacked_int4_filters: usize,
    /// Filters read from a program constant with the same bytes (stored once).
    pub aliased_filters: usize,
}

/// What [`lower`] did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub target: String,
    pub isa: String,
    pub vector_bits: u32,
    pub note: Option<String>,
    pub input_bytes: usize,
    pub output_bytes: usize,
    pub methods: Vec<MethodReport>,
    /// Weights packed (distinct constant buffers) and their packed bytes.
    pub packed_weights: usize,
    pub packed_bytes: usize,
    /// Bytes of original weights removed from the constant segment.
    pub removed_weight_bytes: usize,
    /// The memory re-plan of each method (empty when not asked for).
    pub plans: Vec<replan::PlanReport>,
    /// The graph rewrites.
    pub rewrites: RewriteReport,
    /// Whether ptera's regions were formed (`false`: `--backend none`).
    pub regions: bool,
    pub seconds: f64,
}

impl Report {
    /// The report as JSON (for `--json`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        json!({
            "target": self.target,
            "isa": self.isa,
            "vector_bits": self.vector_bits,
            "note": self.note,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "packed_weights": self.packed_weights,
            "packed_bytes": self.packed_bytes,
            "removed_weight_bytes": self.removed_weight_bytes,
            "seconds": self.seconds,
            "memory_plans": self.plans.iter().map(plan_json).collect::<Vec<_>>(),
            "backend": if self.regions { "ptera" } else { "none" },
            "rewrites": rewrites_json(&self.rewrites),
            "methods": self.methods.iter().map(|m| json!({
                "name": m.name,
                "regions": m.regions.iter().map(|r| json!({
                    "instruction": r.instruction,
                    "absorbed": r.absorbed,
                    "k": r.k, "n": r.n, "max_m": r.max_m,
                    "weight": match (&r.quant, r.packed_nr) {
                        (Some(q), _) => json!({
                            "packed": false, "quantized": q.scheme, "bytes": q.bytes,
                            "fp32_bytes": q.fp32_bytes, "max_rel_err": q.max_rel_err,
                        }),
                        (None, Some(nr)) => json!({"packed": true, "nr": nr}),
                        (None, None) => json!({"packed": false}),
                    },
                })).collect::<Vec<_>>(),
                "portable": m.portable.iter().map(|(pc, op, why)| json!({
                    "instruction": pc, "operator": op, "reason": why,
                })).collect::<Vec<_>>(),
                "converted": m.converted.iter().map(|c| json!({
                    "delegate": c.delegate,
                    "nodes": c.nodes.iter().map(|(k, n)| json!({"node": k, "count": n})).collect::<Vec<_>>(),
                    "fully_connected": c.fully_connected,
                    "convolutions": c.convolutions,
                    "packed_filters": c.packed_filters,
                    "repacked_int8_filters": c.repacked_int8_filters,
                    "repacked_int4_filters": c.repacked_int4_filters,
                    "quantized_filters": c.quantized_filters.iter().map(|q| json!({
                        "scheme": q.scheme, "bytes": q.bytes, "fp32_bytes": q.fp32_bytes,
                        "max_rel_err": q.max_rel_err,
                    })).collect::<Vec<_>>(),
                    "aliased_filters": c.aliased_filters,
                })).collect::<Vec<_>>(),
                "other_delegates": m.other_delegates.iter().map(|(id, n)| json!({"id": id, "count": n})).collect::<Vec<_>>(),
                "attentions": m.attentions.iter().map(|a| json!({
                    "instruction": a.instruction, "absorbed": a.absorbed, "heads": a.heads,
                    "head_dim": a.head_dim, "kv_group": a.kv_group, "q_rows": a.q_rows, "kv_rows": a.kv_rows,
                    "masked": a.masked,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// What `lower` does besides forming regions.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Re-plan the activation memory from the lowered program's lifetimes ([`replan`]).
    pub replan: bool,
    /// Graph rewrites applied first ([`rewrite`]).
    pub rewrites: Rewrites,
    /// Form ptera's regions and convert XNNPACK ones (`false`: every operator stays a
    /// standard kernel call, so the file runs in stock ExecuTorch too).
    pub regions: bool,
    /// Quantize the constant weights of the `Linear` regions and the fully-connected filters
    /// of converted XNNPACK regions (dynamic int8 activations at run time); `None` keeps them
    /// fp32.
    pub quantize: Option<quantize::Scheme>,
    /// With `regions`: make attention chains `Attention` regions ([`attention`]).
    pub attention: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            replan: true,
            rewrites: Rewrites::ALL,
            regions: true,
            quantize: None,
            attention: true,
        }
    }
}

/// How `--quantize` lays out this weight's int8 rows: packed for the target's integer tile
/// (`stock_int8_layout`) where the depth allows.
fn int8_layout(target: &Target, scheme: quantize::Scheme, k: usize) -> Int8Layout {
    if scheme != quantize::Scheme::Int8 || !k.is_multiple_of(16) {
        Int8Layout::RowMajor
    } else {
        stock_int8_layout(target)
    }
}

/// Row-major int8 `[n, k]` rows packed in `layout` (not `RowMajor`); errors name the cause.
fn pack_int8(rows: &[u8], n: usize, k: usize, layout: Int8Layout) -> Result<Vec<u8>, String> {
    use ptera::linalg::quant::packed as qp;
    let len = layout
        .len(n, k)
        .ok_or("packed int8 weights: size overflows")?;
    let mut out = vec![0u8; len];
    match layout {
        Int8Layout::P8x8 => qp::pack_qc8w_p8x8(rows, n, k, &mut out),
        Int8Layout::PNx4(nb) => qp::pack_qc8w_pnx4(rows, n, k, nb, &mut out),
        _ => qp::pack_qc8w_p4x4(rows, n, k, &mut out),
    }
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The layout stock int8 filters (depth a multiple of 16) are repacked into.
fn stock_int8_layout(target: &Target) -> Int8Layout {
    match target.smopa_width() {
        Some(nb) => Int8Layout::PNx4(nb),
        None => int8_tile_layout(target),
    }
}

/// The packing of group-wise 4-bit rows for `target`'s integer tile (`P4x4` / `P8x8` /
/// `PNx4` stand for `qb4w_p4x4` / `qb4w_p8x8` / `qb4w_pNx4`): SME2 `SMOPA`, else `SMMLA` where
/// the target has it, else lane-indexed `SDOT`.
fn stock_int4_layout(target: &Target) -> Int8Layout {
    match target.smopa_width() {
        Some(nb) => Int8Layout::PNx4(nb),
        None => int8_tile_layout(target),
    }
}

/// The Neon integer tiles' packing for `target`: `SMMLA` where it has it, else lane-indexed
/// `SDOT`.
fn int8_tile_layout(target: &Target) -> Int8Layout {
    if target.i8mm() {
        Int8Layout::P8x8
    } else {
        Int8Layout::P4x4
    }
}

/// The rewrites as JSON.
fn rewrites_json(r: &RewriteReport) -> serde_json::Value {
    use serde_json::json;
    json!({
        "added_constant_bytes": r.added_constant_bytes,
        "dropped_constant_bytes": r.dropped_constant_bytes,
        "methods": r.methods.iter().map(|m| json!({
            "method": m.method,
            "skipped": m.skipped,
            "folded": m.folded.iter().map(|(pc, op)| json!({"instruction": pc, "operator": op})).collect::<Vec<_>>(),
            "constants": m.constants.iter().map(|(v, sizes, bytes)| json!({"value": v, "sizes": sizes, "bytes": bytes})).collect::<Vec<_>>(),
            "gelus": m.gelus,
            "copies_removed": m.copies.iter().map(|(pc, op)| json!({"instruction": pc, "operator": op})).collect::<Vec<_>>(),
            "copies_removed_after_rows": m.copies_after_rows.iter().map(|(pc, op)| json!({"instruction": pc, "operator": op})).collect::<Vec<_>>(),
            "lm_heads": m.lm_heads.iter().map(|h| json!({
                "product": h.product, "select": h.select, "operator": h.operator,
                "rows_before": h.rows, "row": h.row,
            })).collect::<Vec<_>>(),
            "rows": {
                "shrunk": m.rows.shrunk.iter().map(|(pc, op, before, now)| json!({
                    "instruction": pc, "operator": op, "rows_before": before, "rows": now,
                })).collect::<Vec<_>>(),
                "slices_before": m.rows.slices,
            },
            "dropped_constant_values": m.dropped_values,
        })).collect::<Vec<_>>(),
    })
}

/// Named-data key of the lowering record in a lowered program: JSON with the target and,
/// per method, ExecuTorch's and ptera's arena sizes and the high-water mark (`xtask inspect`
/// prints it; the runtime never reads it).
pub const LOWERING_RECORD: &str = "ptera/lower/record.json";

/// One method's re-plan as JSON.
fn plan_json(p: &replan::PlanReport) -> serde_json::Value {
    serde_json::json!({
        "method": p.method,
        "executorch_arena_bytes": p.before.iter().skip(1).collect::<Vec<_>>(),
        "ptera_arena_bytes": p.after.iter().skip(1).collect::<Vec<_>>(),
        "kept_because": p.kept_because,
        "dropped_values": p.dropped_values,
        "peak_live_bytes": p.peak_live_bytes,
        "peak_instruction": p.peak_instruction,
        "peak_groups": p.peak_groups,
        "peak_values": p.peak_values.iter().map(|(v, b)| serde_json::json!({"value": v, "bytes": b})).collect::<Vec<_>>(),
    })
}

/// A lowered program and its report.
pub struct Lowered {
    pub bytes: Vec<u8>,
    pub report: Report,
}

/// Lowers `input` for `target`. `progress(done, total)` is called as weights are packed.
pub fn lower(
    input: &[u8],
    target: &Target,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Lowered, LowerError> {
    lower_with(input, target, Options::default(), progress)
}

/// [`lower`] with [`Options`].
pub fn lower_with(
    input: &[u8],
    target: &Target,
    opts: Options,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Lowered, LowerError> {
    let mut bytes = Vec::new();
    let report = lower_to(input, target, opts, progress, &mut bytes)?;
    check(&bytes)?;
    Ok(Lowered { bytes, report })
}

/// One segment of the output: borrowed from the input, or made by the lowering.
enum Seg<'a> {
    Borrowed(&'a [u8]),
    Bytes(Vec<u8>),
    Floats(Vec<f32>),
}

impl Seg<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Seg::Borrowed(b) => b,
            Seg::Bytes(b) => b,
            Seg::Floats(f) => floats_as_bytes(f),
        }
    }
}

/// The little-endian bytes of `f` without a copy (the hosts `lower` runs on are
/// little-endian; checked at compile time).
fn floats_as_bytes(f: &[f32]) -> &[u8] {
    const _: () = assert!(cfg!(target_endian = "little"));
    // SAFETY: any initialised f32 slice is a valid byte slice of 4·len bytes (u8 has no
    // alignment or validity requirement); the borrow keeps `f` alive and unmodified.
    unsafe { core::slice::from_raw_parts(f.as_ptr() as *const u8, core::mem::size_of_val(f)) }
}

/// The graph rewrites of `opts` on `input` (16-byte aligned): the rewritten container, or
/// `None` when nothing changed.
fn rewrite_stage(
    input: &[u8],
    opts: &Options,
) -> Result<(Option<AlignedBuf>, RewriteReport), LowerError> {
    let program = Program::load(input)
        .map_err(|e| LowerError(format!("input is not a valid program: {e}")))?;
    validate(&program).map_err(|e| LowerError(format!("input: {e}")))?;
    refuse_inline(&program)?;
    // ExecuTorch's plan as the input has it (the rewrites may add tensors before the re-plan).
    let input_arenas: Vec<Vec<i64>> = program
        .methods()
        .map(|p| {
            p.non_const_buffer_sizes()
                .map(|v| v.iter().collect())
                .unwrap_or_default()
        })
        .collect();
    if !opts.rewrites.any() {
        let rep = RewriteReport {
            input_arenas,
            ..Default::default()
        };
        return Ok((None, rep));
    }
    // With a re-plan to follow, copies are removed over a plan whose tensors share bytes only
    // with their views (`replan::spread`).
    let (buf, mut rep) = rewrite::rewrite(&program, opts.rewrites, opts.replan)
        .map_err(|e| LowerError(format!("graph rewrites: {e}")))?;
    rep.input_arenas = input_arenas;
    if let Some(b) = &buf {
        check(b.as_slice()).map_err(|e| LowerError(format!("graph rewrites: {e}")))?;
    }
    // The LM-head and row rewrites leave copies that change nothing (a permute of the one
    // row kept that moves only size-1 dims): a second copy pass over their output.
    let after_rows = opts.rewrites.copies && (opts.rewrites.rows || opts.rewrites.lm_head);
    let buf = match buf {
        Some(b) if after_rows && rep.methods.iter().any(|m| !m.rows.shrunk.is_empty()) => {
            let first = Program::load(b.as_slice())
                .map_err(|e| LowerError(format!("graph rewrites: {e}")))?;
            let copies = Rewrites {
                copies: true,
                ..Rewrites::NONE
            };
            let (again, rep2) = rewrite::rewrite(&first, copies, opts.replan)
                .map_err(|e| LowerError(format!("graph rewrites, second copy pass: {e}")))?;
            for (m, m2) in rep.methods.iter_mut().zip(rep2.methods) {
                m.copies_after_rows = m2.copies;
            }
            match again {
                Some(a) => {
                    check(a.as_slice()).map_err(|e| LowerError(format!("graph rewrites: {e}")))?;
                    Some(a)
                }
                None => Some(b),
            }
        }
        other => other,
    };
    Ok((buf, rep))
}

fn refuse_inline(program: &Program<'_>) -> Result<(), LowerError> {
    let root = program.root();
    if root
        .constant_buffer()
        .is_some_and(|b| b.iter().any(|x| x.storage().is_some_and(|s| !s.is_empty())))
    {
        return err("input keeps constants in the legacy inline `constant_buffer`; re-export it with ExecuTorch ≥ 0.7");
    }
    if root.backend_delegate_data().is_some_and(|d| !d.is_empty()) {
        return err("input has inline delegate payloads (`backend_delegate_data`); export with extract_delegate_segments=True");
    }
    Ok(())
}

/// [`lower`] writing the program to `out` as it is produced (the weights are held once:
/// borrowed from `input` or packed; the output is never assembled in memory). The caller
/// should check the written file with [`check`].
pub fn lower_to(
    input: &[u8],
    target: &Target,
    opts: Options,
    progress: &mut dyn FnMut(usize, usize),
    out: &mut dyn std::io::Write,
) -> Result<Report, LowerError> {
    let start = Instant::now();
    // The loader needs a 16-byte aligned buffer: copy only when the caller's is not.
    let copy;
    let data = if (input.as_ptr() as usize).is_multiple_of(16) {
        input
    } else {
        copy = AlignedBuf::from_bytes(input);
        copy.as_slice()
    };
    let (rewritten, rewrites) = rewrite_stage(data, &opts)?;
    let data = rewritten.as_ref().map_or(data, |b| b.as_slice());
    lower_stage(
        data,
        input.len(),
        rewrites,
        start,
        target,
        opts,
        progress,
        out,
    )
}

/// [`lower_to`] taking the input by value: when the rewrites change the program, the input is
/// freed before the weights are packed (the peak holds one copy of the weights, not two).
pub fn lower_owned_to(
    input: AlignedBuf,
    target: &Target,
    opts: Options,
    progress: &mut dyn FnMut(usize, usize),
    out: &mut dyn std::io::Write,
) -> Result<Report, LowerError> {
    let start = Instant::now();
    let input_len = input.len();
    let (rewritten, rewrites) = rewrite_stage(input.as_slice(), &opts)?;
    let data = match rewritten {
        Some(b) => {
            drop(input);
            b
        }
        None => input,
    };
    lower_stage(
        data.as_slice(),
        input_len,
        rewrites,
        start,
        target,
        opts,
        progress,
        out,
    )
}

/// A new region of ptera's backend: its payload becomes a segment, a new delegate of the
/// method takes instruction `pc` (called with `args`), and the instructions it absorbed go.
fn place_region(
    segments: &mut Vec<Seg<'_>>,
    edit: &mut emit::PlanEdit,
    payload: Vec<u8>,
    pc: usize,
    args: Vec<i32>,
    removed: &[usize],
) {
    segments.push(Seg::Bytes(payload));
    edit.new_delegates.push((segments.len() - 1) as u32);
    edit.replaced
        .insert(pc, (edit.new_delegates.len() - 1, args));
    edit.removed.extend(removed.iter().copied());
}

/// Partition, packing, emission and re-plan of a (rewritten, aligned) program.
#[allow(clippy::too_many_arguments)]
fn lower_stage(
    data: &[u8],
    input_len: usize,
    rewrites: RewriteReport,
    start: Instant,
    target: &Target,
    opts: Options,
    progress: &mut dyn FnMut(usize, usize),
    out: &mut dyn std::io::Write,
) -> Result<Report, LowerError> {
    let program = Program::load(data)
        .map_err(|e| LowerError(format!("input is not a valid program: {e}")))?;
    let root = program.root();
    // Partition every method.
    let plans: Vec<_> = program.methods().collect();
    let mut views = Vec::new();
    let mut parts = Vec::new();
    for p in &plans {
        let view = partition::PlanView::new(*p);
        let part = if opts.regions {
            partition::partition(&view)
        } else {
            (Vec::new(), Vec::new())
        };
        views.push(view);
        parts.push(part);
    }
    // A buffer packed in one method must not be read (unpacked) by another.
    for (i, part) in parts.iter_mut().enumerate() {
        let foreign: BTreeSet<u32> = views
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, v)| {
                v.tensors
                    .iter()
                    .flatten()
                    .filter(|t| t.is_constant())
                    .map(|t| t.buffer)
            })
            .collect();
        for c in part.0.iter_mut() {
            if foreign.contains(&c.buffer) {
                c.packed = false;
            }
        }
    }
    // XNNPACK regions: every one is converted; named blobs of packable filters are counted.
    let mut key_refs: BTreeMap<String, usize> = BTreeMap::new();
    let mut xregions = Vec::new();
    for p in &plans {
        xregions.push(if opts.regions {
            xnn::regions(&program, *p, &mut key_refs).map_err(LowerError)?
        } else {
            Vec::new()
        });
    }
    // Constant segment without the packed weights.
    let dropped: BTreeSet<u32> = parts
        .iter()
        .flat_map(|(c, _)| c.iter().filter(|c| c.packed).map(|c| c.buffer))
        .collect();
    // XNNPACK filters whose bytes are those of a constant the program keeps (a tied token
    // embedding is also the LM head's filter): read there, stored once.
    let mut alias_of: BTreeMap<String, u32> = BTreeMap::new();
    {
        let mut by_size: BTreeMap<usize, Vec<(u32, usize)>> = BTreeMap::new();
        for v in &views {
            for (i, t) in v.tensors.iter().enumerate() {
                if let Some(t) = t.as_ref().filter(|t| {
                    t.is_constant()
                        && t.dtype == Some(ptera::DType::F32)
                        && !dropped.contains(&t.buffer)
                }) {
                    by_size
                        .entry(t.numel() * 4)
                        .or_default()
                        .push((t.buffer, i));
                }
            }
        }
        for f in xregions.iter().flatten().flat_map(|r| &r.filters) {
            let nbytes = f.k * f.n * 4;
            if alias_of.contains_key(&f.key) {
                continue;
            }
            let Some(blob) = program.named_data(&f.key).filter(|d| d.len() >= nbytes) else {
                continue;
            };
            for &(b, v) in by_size.get(&nbytes).into_iter().flatten() {
                if program.constant(b, nbytes as u64, v).ok() == Some(&blob[..nbytes]) {
                    alias_of.insert(f.key.clone(), b);
                    break;
                }
            }
        }
    }
    // A key is dropped when every value naming it is a filter we read elsewhere: aliased, or
    // packed one way.
    let mut filter_refs: BTreeMap<&str, (usize, BTreeSet<(Orient, usize, usize)>)> =
        BTreeMap::new();
    for r in xregions.iter().flatten() {
        for f in &r.filters {
            let e = filter_refs.entry(f.key.as_str()).or_default();
            e.0 += 1;
            e.1.insert((f.orient, f.k, f.n));
        }
        for f in &r.stock {
            let e = filter_refs.entry(f.key.as_str()).or_default();
            e.0 += 1;
            e.1.insert((Orient::NxK, f.k, f.n));
        }
    }
    let dropped_keys: BTreeSet<String> = filter_refs
        .iter()
        .filter(|(k, (n, ways))| {
            key_refs.get(**k) == Some(n) && (alias_of.contains_key(**k) || ways.len() == 1)
        })
        .map(|(k, _)| k.to_string())
        .collect();
    let cs = root
        .constant_segment()
        .filter(|c| c.offsets().is_some_and(|o| o.len() > 1));
    let seg_count = program.segment_count();
    let mut originals: Vec<Seg<'_>> = Vec::with_capacity(seg_count);
    for i in 0..seg_count {
        originals.push(Seg::Borrowed(
            program
                .segment(i)
                .map_err(|e| LowerError(format!("segment {i}: {e}")))?,
        ));
    }
    let mut buffer_map = BTreeMap::new();
    let mut constant_offsets = None;
    let mut removed_weight_bytes = 0usize;
    if let (Some(cs), false) = (cs, dropped.is_empty()) {
        let offs: Vec<u64> = cs.offsets().map(|o| o.iter().collect()).unwrap_or_default();
        let si = cs.segment_index() as usize;
        let old = originals
            .get(si)
            .map(|s| s.bytes())
            .ok_or_else(|| LowerError("constant segment index out of range".into()))?;
        let rebuilt = constants::rebuild(old, &offs, &dropped, &[]);
        removed_weight_bytes += rebuilt.removed_bytes;
        buffer_map = rebuilt.map.clone();
        let new = rebuilt.parts.concat();
        constant_offsets = Some(rebuilt.offsets);
        originals[si] = Seg::Bytes(new);
    }
    // Segments only dropped keys name disappear (nothing else refers to them).
    let mut seg_users: BTreeMap<u32, (usize, usize)> = BTreeMap::new(); // (all refs, dropped refs)
    for n in root.named_data().unwrap_or_default().iter() {
        let e = seg_users.entry(n.segment_index()).or_default();
        e.0 += 1;
        if n.key().is_some_and(|k| dropped_keys.contains(k)) {
            e.1 += 1;
        }
    }
    let mut pinned: BTreeSet<u32> = BTreeSet::new();
    if let Some(cs) = root.constant_segment() {
        pinned.insert(cs.segment_index());
    }
    for m in root.mutable_data_segments().unwrap_or_default().iter() {
        pinned.insert(m.segment_index());
    }
    for p in &plans {
        for d in p.delegates().unwrap_or_default().iter() {
            if let Some(r) = d
                .processed()
                .filter(|r| r.location() == fb::DataLocation::SEGMENT)
            {
                pinned.insert(r.index());
            }
        }
    }
    let mut segment_map = Vec::with_capacity(seg_count);
    let mut segments: Vec<Seg<'_>> = Vec::new();
    for (i, bytes) in originals.into_iter().enumerate() {
        let i32_ = i as u32;
        let gone = !pinned.contains(&i32_)
            && seg_users
                .get(&i32_)
                .is_some_and(|&(all, dropped)| all == dropped);
        if gone {
            removed_weight_bytes += bytes.bytes().len();
            segment_map.push(None);
        } else {
            segment_map.push(Some(segments.len() as u32));
            segments.push(bytes);
        }
    }
    let seg = |i: u32| segment_map.get(i as usize).copied().flatten().unwrap_or(i);

    // Pack each weight once per (source, orientation, tile).
    #[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
    enum Source {
        Buffer(u32, i32),
        Key(String),
    }
    let mut todo: BTreeMap<(Source, Orient, usize), (usize, usize)> = BTreeMap::new();
    // Weights quantized instead (`--quantize`): products with alpha 1 whose depth the scheme fits.
    let quantized_here = |c: &partition::Candidate| {
        opts.quantize
            .filter(|s| c.packed && c.alpha == 1.0 && s.fits(c.k))
    };
    let mut qtodo: BTreeMap<(Source, Orient), (usize, usize, quantize::Scheme)> = BTreeMap::new();
    // Most rows of the products reading each weight: one tile width per weight, so that a
    // weight several products read is packed once.
    let mut rows: BTreeMap<(Source, Orient), usize> = BTreeMap::new();
    for (c, _) in &parts {
        for c in c.iter().filter(|c| c.packed) {
            let e = rows
                .entry((Source::Buffer(c.buffer, c.w), c.orient))
                .or_default();
            *e = (*e).max(c.max_m);
        }
    }
    for r in xregions.iter().flatten() {
        for f in &r.filters {
            let e = rows
                .entry((Source::Key(f.key.clone()), f.orient))
                .or_default();
            *e = (*e).max(f.m);
        }
    }
    let m_of = |s: Source, o: Orient| rows.get(&(s, o)).copied().unwrap_or(0);
    for (c, _) in &parts {
        for c in c.iter().filter(|c| c.packed) {
            if let Some(s) = quantized_here(c) {
                qtodo.insert((Source::Buffer(c.buffer, c.w), c.orient), (c.k, c.n, s));
                continue;
            }
            todo.insert(
                (
                    Source::Buffer(c.buffer, c.w),
                    c.orient,
                    target.nr(m_of(Source::Buffer(c.buffer, c.w), c.orient), c.n),
                ),
                (c.k, c.n),
            );
        }
    }
    // XNNPACK fully-connected filters quantized instead (`--quantize`).
    let xquant = |f: &xnn::Filter| opts.quantize.filter(|s| !f.conv && s.fits(f.k));
    for r in xregions.iter().flatten() {
        for f in r.filters.iter().filter(|f| !alias_of.contains_key(&f.key)) {
            if let Some(s) = xquant(f) {
                qtodo.insert((Source::Key(f.key.clone()), f.orient), (f.k, f.n, s));
                continue;
            }
            todo.insert(
                (
                    Source::Key(f.key.clone()),
                    f.orient,
                    target.nr(m_of(Source::Key(f.key.clone()), f.orient), f.n),
                ),
                (f.k, f.n),
            );
        }
    }
    let mut packs: BTreeMap<(Source, Orient, usize), String> = BTreeMap::new();
    let mut new_named: Vec<(String, u32)> = Vec::new();
    let mut packed_bytes = 0usize;
    let total = todo.len();
    for (done, ((src, orient, nr), (k, n))) in todo.into_iter().enumerate() {
        progress(done, total);
        let what = match &src {
            Source::Buffer(_, w) => format!("weight value {w}"),
            Source::Key(key) => format!("XNNPACK filter {key}"),
        };
        let nbytes = k * n * 4;
        let raw = match &src {
            Source::Buffer(b, w) => program
                .constant(*b, nbytes as u64, *w as usize)
                .map_err(|e| LowerError(format!("{what}: {e}")))?,
            Source::Key(key) => program
                .named_data(key)
                .filter(|d| d.len() >= nbytes)
                .map(|d| &d[..nbytes])
                .ok_or_else(|| LowerError(format!("{what}: named data missing or too small")))?,
        };
        // In place when aligned (segments and constants are), else one copy.
        let owned: Vec<f32>;
        let floats = match ptera::delegate::xnnpack::run::as_f32(raw) {
            Some(f) => f,
            None => {
                owned = raw
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                &owned
            }
        };
        let b = match orient {
            Orient::KxN => MatRef::row_major(floats, k, n),
            Orient::NxK => MatRef::row_major(floats, n, k).map(|m| m.t()),
        }
        .map_err(|e| LowerError(format!("{what}: {e}")))?;
        let len = PackedB::len_for(k, n, nr)
            .ok_or_else(|| LowerError(format!("{what}: packed size overflows")))?;
        let mut dst = vec![0f32; len];
        pack_b_ahead(b, nr, &mut dst).map_err(|e| LowerError(format!("{what}: {e}")))?;
        packed_bytes += dst.len() * 4;
        let o = if orient == Orient::KxN { "kxn" } else { "nxk" };
        let key = match &src {
            Source::Buffer(b, _) => format!("ptera/packed/b{b}/{o}/nr{nr}"),
            Source::Key(key) => format!("ptera/packed/{key}/{o}/nr{nr}"),
        };
        segments.push(Seg::Floats(dst));
        new_named.push((key.clone(), (segments.len() - 1) as u32));
        packs.insert((src, orient, nr), key);
    }
    progress(total, total);
    // Quantized weights: rows, scales and column sums, each its own named blob.
    let mut quants: BTreeMap<(Source, Orient), ([String; 3], QuantReport)> = BTreeMap::new();
    for ((src, orient), (k, n, scheme)) in qtodo {
        let nbytes = k * n * 4;
        let (what, raw) = match &src {
            Source::Buffer(b, w) => (
                format!("weight value {w}"),
                program
                    .constant(*b, nbytes as u64, *w as usize)
                    .map_err(|e| LowerError(format!("weight value {w}: {e}")))?,
            ),
            Source::Key(key) => (
                format!("XNNPACK filter {key}"),
                program
                    .named_data(key)
                    .filter(|d| d.len() >= nbytes)
                    .map(|d| &d[..nbytes])
                    .ok_or_else(|| {
                        LowerError(format!(
                            "XNNPACK filter {key}: named data missing or too small"
                        ))
                    })?,
            ),
        };
        let f = |i: usize| {
            let b = &raw[4 * i..4 * i + 4];
            f32::from_le_bytes([b[0], b[1], b[2], b[3]])
        };
        let at = |j: usize, t: usize| match orient {
            Orient::KxN => f(t * n + j),
            Orient::NxK => f(j * k + t),
        };
        let q = quantize::quantize(&at, n, k, scheme)
            .map_err(|e| LowerError(format!("{what}: {e}")))?;
        let tag = match scheme {
            quantize::Scheme::Int8 => "q8".to_string(),
            quantize::Scheme::Int4 { group } => format!("q4g{group}"),
        };
        let o = if orient == Orient::KxN { "kxn" } else { "nxk" };
        // int8 rows are packed for the target's integer tile where the depth allows.
        let mut q = q;
        let layout = int8_layout(target, scheme, k);
        if layout != Int8Layout::RowMajor {
            let packed =
                pack_int8(&q.rows, n, k, layout).map_err(|e| LowerError(format!("{what}: {e}")))?;
            q.rows = packed;
        }
        let tag = match layout {
            Int8Layout::P4x4 => format!("{tag}p4x4"),
            Int8Layout::P8x8 => format!("{tag}p8x8"),
            Int8Layout::PNx4(nb) => format!("{tag}p{nb}x4"),
            Int8Layout::RowMajor => tag,
        };
        let base = match &src {
            Source::Buffer(b, _) => format!("ptera/{tag}/b{b}/{o}"),
            Source::Key(key) => format!("ptera/{tag}/{key}/{o}"),
        };
        let keys = [
            base.clone(),
            format!("{base}/scales"),
            format!("{base}/sums"),
        ];
        let report = QuantReport {
            scheme: scheme.label(),
            bytes: q.rows.len() + q.scales.len(),
            fp32_bytes: k * n * 4,
            max_rel_err: q.max_rel_err,
        };
        packed_bytes += q.rows.len() + q.scales.len() + q.sums.len() * 4;
        for (key, seg) in keys.iter().zip([
            Seg::Bytes(q.rows),
            Seg::Bytes(q.scales),
            Seg::Floats(q.sums),
        ]) {
            segments.push(seg);
            new_named.push((key.clone(), (segments.len() - 1) as u32));
        }
        quants.insert((src, orient), (keys, report));
    }

    // Stock quantized filters of XNNPACK regions: rows repacked for lane-indexed SDOT, column
    // sums computed; int8 scales stay where they are, 4-bit group scales are repacked too.
    let mut stock_keys: BTreeMap<String, [String; 3]> = BTreeMap::new();
    for f in xregions.iter().flatten().flat_map(|r| &r.stock) {
        if stock_keys.contains_key(&f.key) {
            continue;
        }
        let what = if f.group == 0 {
            format!("XNNPACK int8 filter {}", f.key)
        } else {
            format!("XNNPACK 4-bit filter {}", f.key)
        };
        let get = |key: &str, len: usize| {
            program
                .named_data(key)
                .filter(|d| d.len() >= len)
                .map(|d| &d[..len])
                .ok_or_else(|| LowerError(format!("{what}: named data {key} missing or too small")))
        };
        let e = |e: ptera::error::KernelError| LowerError(format!("{what}: {e}"));
        let overflow = || LowerError(format!("{what}: packed size overflows"));
        use ptera::linalg::quant::{self as q, packed as qp};
        let mut sums = vec![0f32; f.n];
        let keys = if let Some(groups) = f.k.checked_div(f.group) {
            let rows = get(&f.key, f.n * f.k.div_ceil(2))?;
            let scales = get(&f.scales_key, 2 * f.n * groups)?;
            let qw = q::QWeights::Qb4w {
                data: rows,
                scales,
                group: f.group,
            };
            q::column_sums(&qw, f.n, f.k, &mut sums).map_err(e)?;
            // SME2 targets take blocks of 2S channels, SMMLA targets 8, the others 4
            // (lane-indexed SDOT) (`stock_int4_layout`, which the region's layout is written
            // from).
            let layout = stock_int4_layout(target);
            let (len, slen) = match layout {
                Int8Layout::PNx4(nb) => (
                    qp::packed4n_len(f.n, f.k, nb),
                    qp::packed4n_scales_len(f.n, f.k, f.group, nb),
                ),
                Int8Layout::P8x8 => (
                    qp::packed4x8_len(f.n, f.k),
                    qp::packed4x8_scales_len(f.n, f.k, f.group),
                ),
                _ => (
                    qp::packed4_len(f.n, f.k),
                    qp::packed4_scales_len(f.n, f.k, f.group),
                ),
            };
            let mut packed = vec![0u8; len.ok_or_else(overflow)?];
            let mut pscales = vec![0f32; slen.ok_or_else(overflow)?];
            let (p, s, n, k, g) = (&mut packed, &mut pscales, f.n, f.k, f.group);
            match layout {
                Int8Layout::PNx4(nb) => qp::pack_qb4w_pnx4(rows, scales, n, k, g, nb, p, s),
                Int8Layout::P8x8 => qp::pack_qb4w_p8x8(rows, scales, n, k, g, p, s),
                _ => qp::pack_qb4w_p4x4(rows, scales, n, k, g, p, s),
            }
            .map_err(e)?;
            packed_bytes += packed.len() + 4 * (pscales.len() + sums.len());
            let tag = match layout {
                Int8Layout::PNx4(nb) => format!("q4p{nb}x4"),
                Int8Layout::P8x8 => "q4p8x8".to_string(),
                _ => "q4p4x4".to_string(),
            };
            let base = format!("ptera/{tag}/{}", f.key);
            segments.push(Seg::Bytes(packed));
            new_named.push((base.clone(), (segments.len() - 1) as u32));
            segments.push(Seg::Floats(pscales));
            new_named.push((format!("{base}/scales"), (segments.len() - 1) as u32));
            [
                base.clone(),
                format!("{base}/scales"),
                format!("{base}/sums"),
            ]
        } else {
            let (rows, scales) = (get(&f.key, f.n * f.k)?, get(&f.scales_key, 4 * f.n)?);
            let qw = q::QWeights::Qc8w { data: rows, scales };
            q::column_sums(&qw, f.n, f.k, &mut sums).map_err(e)?;
            let layout = stock_int8_layout(target);
            let packed = pack_int8(rows, f.n, f.k, layout)
                .map_err(|e| LowerError(format!("{what}: {e}")))?;
            packed_bytes += packed.len() + sums.len() * 4;
            let tag = match layout {
                Int8Layout::P8x8 => "q8p8x8".to_string(),
                Int8Layout::PNx4(nb) => format!("q8p{nb}x4"),
                _ => "q8p4x4".to_string(),
            };
            let base = format!("ptera/{tag}/{}", f.key);
            segments.push(Seg::Bytes(packed));
            new_named.push((base.clone(), (segments.len() - 1) as u32));
            [base.clone(), f.scales_key.clone(), format!("{base}/sums")]
        };
        segments.push(Seg::Floats(sums));
        new_named.push((keys[2].clone(), (segments.len() - 1) as u32));
        stock_keys.insert(f.key.clone(), keys);
    }

    // Payloads, delegates and instruction edits.
    let mut edits = Vec::new();
    let mut reports = Vec::new();
    for (pi, (cands, decisions)) in parts.iter().enumerate() {
        let view = &views[pi];
        let mut edit = emit::PlanEdit::default();
        let mut rep = MethodReport {
            name: plans[pi].name().unwrap_or("").to_string(),
            ..Default::default()
        };
        for c in cands {
            let mut args = vec![c.x];
            let bias_arg = c.bias.map(|b| {
                args.push(b);
                args.len() - 1
            });
            let nr = target.nr(m_of(Source::Buffer(c.buffer, c.w), c.orient), c.n);
            let quant = quants.get(&(Source::Buffer(c.buffer, c.w), c.orient));
            let weight = if let Some((keys, _)) = quant {
                payload::WeightSource::Quant {
                    rows: &keys[0],
                    scales: &keys[1],
                    sums: &keys[2],
                    group: match quantized_here(c) {
                        Some(quantize::Scheme::Int4 { group }) => Some(group),
                        _ => None,
                    },
                    packed: quantized_here(c)
                        .map_or(Int8Layout::RowMajor, |s| int8_layout(target, s, c.k)),
                }
            } else if c.packed {
                let key = &packs[&(Source::Buffer(c.buffer, c.w), c.orient, nr)];
                payload::WeightSource::Packed { key, nr }
            } else {
                args.push(c.w);
                payload::WeightSource::Arg(args.len() - 1)
            };
            args.push(c.out);
            let bytes = payload::linear_region(target, c, weight, bias_arg, args.len() - 1);
            place_region(&mut segments, &mut edit, bytes, c.pc, args, &c.removed);
            rep.regions.push(RegionReport {
                instruction: c.pc,
                absorbed: c.absorbed.clone(),
                k: c.k,
                n: c.n,
                max_m: c.max_m,
                packed_nr: (c.packed && quant.is_none()).then_some(nr),
                quant: quant.map(|q| q.1.clone()),
            });
        }
        for r in &xregions[pi] {
            let aliased: Vec<(u32, u32)> = r
                .filters
                .iter()
                .filter_map(|f| {
                    let b = *alias_of.get(&f.key)?;
                    Some((f.value, buffer_map.get(&b).copied().unwrap_or(b)))
                })
                .collect();
            let mut qfilters: Vec<(u32, &[String; 3], Option<usize>, Int8Layout)> = Vec::new();
            let mut qreports: Vec<QuantReport> = Vec::new();
            let mut filters: Vec<(u32, &str, usize)> = Vec::new();
            for f in r.filters.iter().filter(|f| !alias_of.contains_key(&f.key)) {
                if let Some(s) = xquant(f) {
                    let (keys, qr) = &quants[&(Source::Key(f.key.clone()), f.orient)];
                    let group = match s {
                        quantize::Scheme::Int4 { group } => Some(group),
                        quantize::Scheme::Int8 => None,
                    };
                    qfilters.push((f.value, keys, group, int8_layout(target, s, f.k)));
                    qreports.push(qr.clone());
                    continue;
                }
                let nr = target.nr(m_of(Source::Key(f.key.clone()), f.orient), f.n);
                let key = &packs[&(Source::Key(f.key.clone()), f.orient, nr)];
                filters.push((f.value, key.as_str(), nr));
            }
            for f in &r.stock {
                // 4-bit rows: `P4x4` / `P8x8` stand for `qb4w_p4x4` / `qb4w_p8x8`.
                let group = (f.group > 0).then_some(f.group);
                let layout = if group.is_some() {
                    stock_int4_layout(target)
                } else {
                    stock_int8_layout(target)
                };
                qfilters.push((f.value, &stock_keys[&f.key], group, layout));
            }
            segments.push(Seg::Bytes(payload::xnn_region(
                target,
                seg(r.segment),
                &filters,
                &qfilters,
                &aliased,
            )));
            edit.converted
                .insert(r.delegate, (segments.len() - 1) as u32);
            rep.converted.push(XnnRegionReport {
                delegate: r.delegate,
                nodes: r.nodes.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                fully_connected: r.fc_nodes,
                convolutions: r.conv_nodes,
                packed_filters: filters.len(),
                quantized_filters: qreports,
                repacked_int8_filters: r.stock.iter().filter(|f| f.group == 0).count(),
                repacked_int4_filters: r.stock.iter().filter(|f| f.group > 0).count(),
                aliased_filters: aliased.len(),
            });
        }
        if opts.regions && opts.attention {
            let seg_bytes: Vec<&[u8]> = (0..program.segment_count())
                .filter_map(|i| program.segment(i).ok())
                .collect();
            let mut g = rewrite::graph::Graph::with_delegates(plans[pi], &seg_bytes);
            // Instructions the Linear regions absorb are not the attention's to take.
            for c in cands {
                for &r in &c.removed {
                    if let Some(i) = g.ins.get_mut(r) {
                        i.removed = true;
                    }
                }
            }
            for m in attention::find(&mut g, &program) {
                if cands
                    .iter()
                    .any(|c| c.pc == m.pc || m.removed.contains(&c.pc))
                {
                    continue;
                }
                let mut args: Vec<i32> = Vec::new();
                let mut arg = |v: usize| -> usize {
                    let v = v as i32;
                    match args.iter().position(|&a| a == v) {
                        Some(i) => i,
                        None => {
                            args.push(v);
                            args.len() - 1
                        }
                    }
                };
                let (q, k, v) = (arg(m.q), arg(m.k), arg(m.v));
                let mask = m.mask.map(&mut arg);
                let out = arg(m.out);
                let bytes = payload::attention_region(target, &m, [q, k, v], mask, out);
                place_region(&mut segments, &mut edit, bytes, m.pc, args, &m.removed);
                rep.attentions.push(AttentionReport {
                    instruction: m.pc,
                    absorbed: m.absorbed.clone(),
                    heads: m.attn.heads,
                    head_dim: m.attn.head_dim,
                    kv_group: m.attn.kv_group,
                    q_rows: m.attn.q_rows,
                    kv_rows: m.attn.kv_rows,
                    masked: m.mask.is_some(),
                });
            }
        }
        for (v, t) in view.tensors.iter().enumerate() {
            if t.as_ref()
                .is_some_and(|t| t.is_constant() && dropped.contains(&t.buffer))
            {
                edit.nulled.insert(v);
            }
        }
        for d in decisions {
            if let Some(why) = &d.kept_because {
                rep.portable.push((d.pc, d.operator.clone(), why.clone()));
            }
        }
        let mut others: BTreeMap<String, usize> = BTreeMap::new();
        for (di, d) in plans[pi].delegates().unwrap_or_default().iter().enumerate() {
            if !edit.converted.contains_key(&di) {
                *others.entry(d.id().unwrap_or("").to_string()).or_default() += 1;
            }
        }
        rep.other_delegates = others.into_iter().collect();
        edits.push(edit);
        reports.push(rep);
    }
    let edit = emit::ProgramEdit {
        plans: edits,
        buffer_map,
        constant_offsets,
        segment_sizes: segments.iter().map(|s| s.bytes().len()).collect(),
        segment_map,
        new_named,
        dropped_keys,
        new_constant_segment: None,
    };
    let fbytes = emit::program(root, &edit);
    let refs: Vec<&[u8]> = segments.iter().map(|s| s.bytes()).collect();
    let (fbytes, mut plans) = if opts.replan {
        replan::replan(&fbytes, &refs).map_err(LowerError)?
    } else {
        (fbytes, Vec::new())
    };
    for (p, before) in plans.iter_mut().zip(&rewrites.input_arenas) {
        p.before = before.clone();
    }
    // What the lowering did to memory, for `xtask inspect` (a named blob the runtime ignores).
    let record = serde_json::to_vec(&serde_json::json!({
        "target": target.spec,
        "memory_plans": plans.iter().map(plan_json).collect::<Vec<_>>(),
    }))
    .map_err(|e| LowerError(format!("lowering record: {e}")))?;
    let mut sizes: Vec<usize> = refs.iter().map(|s| s.len()).collect();
    sizes.push(record.len());
    let fbytes = emit::add_named(&fbytes, &sizes, LOWERING_RECORD).map_err(LowerError)?;
    let mut refs = refs;
    refs.push(&record);
    let output_bytes = ptera::format::write::container_to(out, &fbytes, &refs)
        .map_err(|e| LowerError(format!("writing the output: {e}")))?;
    let report = Report {
        target: target.spec.clone(),
        isa: target.label.to_string(),
        vector_bits: target.vector_bits,
        note: target.note.map(str::to_string),
        input_bytes: input_len,
        output_bytes,
        methods: reports,
        packed_weights: packs.len(),
        packed_bytes,
        removed_weight_bytes,
        plans,
        rewrites,
        regions: opts.regions,
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok(report)
}

/// Every method must validate (operators ptera has no kernel for are allowed: they stay as
/// they are).
fn validate(p: &Program<'_>) -> Result<(), String> {
    let reg = Registry::standard();
    for plan in p.methods() {
        let name = plan.name().unwrap_or("");
        MethodMeta::new_lenient(p, name, &reg)
            .map_err(|e| format!("method `{name}` does not validate: {e}"))?;
    }
    Ok(())
}

/// A lowered program must load and validate like its input did.
pub fn check(bytes: &[u8]) -> Result<(), LowerError> {
    // The loader needs 16-byte alignment: copy only when `bytes` lacks it.
    let copy;
    let bytes = if (bytes.as_ptr() as usize).is_multiple_of(16) {
        bytes
    } else {
        copy = AlignedBuf::from_bytes(bytes);
        copy.as_slice()
    };
    let p = Program::load(bytes).map_err(|e| {
        LowerError(format!(
            "internal error: lowered program does not load: {e}"
        ))
    })?;
    validate(&p).map_err(|e| LowerError(format!("internal error: lowered {e}")))
}
