//! Graph rewrites, applied before the partition: each works on a method's [`graph::Graph`]
//! (dataflow over bytes), records its changes, and the rewritten program is emitted once.
//!
//! - [`fold`]: constant folding with ptera's kernels;
//! - [`gelu`]: GELU spelled out in eight elementwise calls becomes `aten::gelu` (tanh);
//! - [`copies`]: copies that change nothing are removed (their output placed over their input);
//! - [`lm_head`]: a product followed by `select_copy` of one row computes only that row;
//! - [`rows`]: operators whose rows only a slice reads compute those rows (a decoder's last
//!   layer for its last position).
//!
//! Constants no instruction names any more (a position-embedding table whose lookups were
//! folded) are dropped from the file. Methods with several chains or control flow are left as
//! they are, and the report says why.

pub mod copies;
pub mod fold;
pub mod gelu;
pub mod graph;
pub mod lm_head;
pub mod rows;

use std::collections::{BTreeMap, BTreeSet};

use ptera::format::fb;
use ptera::host::AlignedBuf;
use ptera::Program;

use crate::constants;
use crate::emit::{self, NewCall, NewTensor, NewValue, PlanEdit, ProgramEdit};
use graph::Graph;

/// Which rewrites run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrites {
    pub fold: bool,
    pub gelu: bool,
    pub copies: bool,
    pub lm_head: bool,
    pub rows: bool,
}

impl Rewrites {
    pub const ALL: Rewrites = Rewrites {
        fold: true,
        gelu: true,
        copies: true,
        lm_head: true,
        rows: true,
    };
    pub const NONE: Rewrites = Rewrites {
        fold: false,
        gelu: false,
        copies: false,
        lm_head: false,
        rows: false,
    };

    pub fn any(&self) -> bool {
        self.fold || self.gelu || self.copies || self.lm_head || self.rows
    }
}

/// One LM head rewritten.
#[derive(Clone, Debug)]
pub struct LmHeadReport {
    pub product: usize,
    pub select: usize,
    pub operator: String,
    /// Rows the product computed before (now one).
    pub rows: usize,
    pub row: usize,
}

/// What the rewrites did to one method (instruction numbers are the input's).
#[derive(Clone, Debug, Default)]
pub struct MethodRewrites {
    pub method: String,
    /// Why the method was left alone, or why folding was not done.
    pub skipped: Option<String>,
    /// Calls evaluated at lower time: (instruction, operator).
    pub folded: Vec<(usize, String)>,
    /// Tensors made constants: (value, shape, bytes).
    pub constants: Vec<(usize, Vec<usize>, usize)>,
    /// Decomposed GELUs made one `aten::gelu` call: the instruction of the call.
    pub gelus: Vec<usize>,
    /// Copies removed: (instruction, operator).
    pub copies: Vec<(usize, String)>,
    /// Copies removed by a second pass after the LM-head and row rewrites, which make some
    /// (a permute of a one-row value moves only size-1 dims): (instruction of the program
    /// those rewrites wrote, operator).
    pub copies_after_rows: Vec<(usize, String)>,
    pub lm_heads: Vec<LmHeadReport>,
    /// Operators computing only the rows a slice reads.
    pub rows: rows::RowsReport,
    /// Constant values nothing names any more.
    pub dropped_values: usize,
}

/// What [`rewrite`] did.
#[derive(Clone, Debug, Default)]
pub struct RewriteReport {
    pub methods: Vec<MethodRewrites>,
    /// `non_const_buffer_sizes` of each method of the input (ExecuTorch's plan).
    pub input_arenas: Vec<Vec<i64>>,
    pub added_constant_bytes: usize,
    pub dropped_constant_bytes: usize,
}

impl RewriteReport {
    pub fn changed(&self) -> bool {
        self.methods.iter().any(|m| {
            !m.folded.is_empty()
                || !m.copies.is_empty()
                || !m.copies_after_rows.is_empty()
                || !m.lm_heads.is_empty()
                || !m.rows.shrunk.is_empty()
        }) || self.dropped_constant_bytes > 0
    }
}

/// Applies `which` to every method of `program`. Returns the rewritten container (`None`
/// when nothing changed) and the report.
pub fn rewrite(
    program: &Program<'_>,
    which: Rewrites,
    replanned: bool,
) -> Result<(Option<AlignedBuf>, RewriteReport), String> {
    let root = program.root();
    let seg_count = program.segment_count();
    let mut segments: Vec<&[u8]> = Vec::with_capacity(seg_count);
    for i in 0..seg_count {
        segments.push(
            program
                .segment(i)
                .map_err(|e| format!("segment {i}: {e}"))?,
        );
    }
    let plans: Vec<_> = program.methods().collect();
    // Delegates naming each segment: a payload is narrowed only where it has one reader.
    let mut seg_users: BTreeMap<u32, usize> = BTreeMap::new();
    for plan in &plans {
        for del in plan.delegates().unwrap_or_default().iter() {
            if let Some(r) = del
                .processed()
                .filter(|r| r.location() == fb::DataLocation::SEGMENT)
            {
                *seg_users.entry(r.index()).or_default() += 1;
            }
        }
    }
    // XNNPACK payloads narrowed by the LM-head rewrite: segment → new bytes.
    let mut patches: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    let mut report = RewriteReport::default();
    let mut edits: Vec<PlanEdit> = Vec::new();
    // New constant buffers (bytes) and the values that take them: (plan, value, buffer k).
    let mut added: Vec<Vec<u8>> = Vec::new();
    let mut takers: Vec<(usize, usize, usize)> = Vec::new();
    // Constant buffers some surviving value still names, and candidates to drop.
    let mut kept_buffers: BTreeSet<u32> = BTreeSet::new();
    let mut unnamed_buffers: BTreeSet<u32> = BTreeSet::new();
    for (pi, plan) in plans.iter().enumerate() {
        let name = plan.name().unwrap_or("").to_string();
        let dels = plan.delegates().unwrap_or_default();
        let mut g = Graph::with_delegates(*plan, &segments);
        let mut rep = MethodRewrites {
            method: name.clone(),
            ..Default::default()
        };
        let mut edit = PlanEdit::default();
        if let Some(why) = g.unsupported.clone() {
            rep.skipped = Some(why);
            for t in g.view.tensors.iter().flatten() {
                if t.is_constant() {
                    kept_buffers.insert(t.buffer);
                }
            }
            report.methods.push(rep);
            edits.push(edit);
            continue;
        }
        let original_alloc = g.alloc.clone();
        if which.fold {
            let fp = fold::plan(&g);
            if !fp.folded.is_empty() {
                match fold::evaluate(program, &name, &fp, &g) {
                    Ok(values) => {
                        for &pc in &fp.folded {
                            g.ins[pc].removed = true;
                            edit.removed.insert(pc);
                            rep.folded.push((pc, g.ins[pc].key.clone()));
                        }
                        for (r, bytes) in values {
                            let t = g.tensor(r).cloned();
                            let sizes = t.map(|t| t.sizes).unwrap_or_default();
                            rep.constants.push((r, sizes.clone(), bytes.len()));
                            g.alloc[r] = None;
                            g.made_constant.insert(r);
                            edit.replace_values.insert(
                                r,
                                NewValue::Tensor(NewTensor {
                                    scalar_type: g.scalar_type(r).unwrap_or(6),
                                    sizes: sizes.iter().map(|&d| d as i32).collect(),
                                    dim_order: (0..sizes.len() as u8).collect(),
                                    buffer: 0,
                                    alloc: None,
                                }),
                            );
                            takers.push((pi, r, added.len()));
                            added.push(bytes);
                        }
                    }
                    Err(e) => rep.skipped = Some(format!("constant folding not done: {e}")),
                }
            }
        }
        let nvalues = plan.values().map_or(0, |v| v.len());
        if which.gelu {
            let matches = gelu::find(&g, program);
            if !matches.is_empty() {
                edit.new_values.push(NewValue::Str("tanh".into()));
                let tanh = (nvalues + edit.new_values.len() - 1) as i32;
                for m in matches {
                    for &r in &m.removed {
                        g.ins[r].removed = true;
                        edit.removed.insert(r);
                    }
                    let args = vec![m.x as i32, tanh, m.y as i32, m.y as i32];
                    let i = &mut g.ins[m.last];
                    i.key = "aten::gelu.out".into();
                    i.args = args.clone();
                    i.reads = vec![m.x, tanh as usize];
                    i.writes = vec![m.y];
                    edit.calls.insert(
                        m.last,
                        NewCall {
                            name: "aten::gelu".into(),
                            overload: "out".into(),
                            args,
                        },
                    );
                    rep.gelus.push(m.last);
                }
            }
        }
        let arena_before: Vec<i64> = plan
            .non_const_buffer_sizes()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let mut arena = arena_before.clone();
        // A copy's input lives on until its output was last read: where the re-plan follows,
        // first give every tensor bytes no other tensor but its views ever uses, so that only
        // what the program reads and writes can keep a copy (not where ExecuTorch happened to
        // place a later tensor over the input's bytes).
        if which.copies && replanned {
            if let Ok(sp) = crate::replan::spread(&g.view, &segments) {
                arena = sp.arena_sizes;
                for (v, (m, off)) in sp.alloc {
                    if let Some(Some((_, _, len))) = g.alloc.get(v).copied() {
                        g.alloc[v] = Some((m, off, len));
                    }
                }
                // Bytes nothing touches: at the start of the arena, inside it.
                for v in sp.unnamed {
                    if let Some(Some((m, _, len))) = g.alloc.get(v).copied() {
                        g.alloc[v] = Some((m, 0, len));
                        if let Some(a) = arena.get_mut(m as usize) {
                            *a = (*a).max(len as i64);
                        }
                    }
                }
            }
        }
        if which.copies {
            for pc in copies::run(&mut g) {
                edit.removed.insert(pc);
                rep.copies.push((pc, g.ins[pc].key.clone()));
            }
        }
        let mut seeds = Vec::new();
        if which.lm_head {
            // Delegate calls of chain 0 that are row regions: pc → (region, payload segment).
            let mut regions: BTreeMap<usize, (crate::xnn::RowRegion, usize)> = BTreeMap::new();
            let chain = plan
                .chains()
                .and_then(|c| (!c.is_empty()).then(|| c.get(0)))
                .and_then(|c| c.instructions())
                .unwrap_or_default();
            for (pc, ins) in chain.iter().enumerate() {
                let Some(call) = ins.instr_args_as_delegate_call() else {
                    continue;
                };
                let Some(del) = usize::try_from(call.delegate_index())
                    .ok()
                    .filter(|&d| d < dels.len())
                    .map(|d| dels.get(d))
                    .filter(|del| del.id() == Some(ptera::delegate::xnnpack::ID))
                else {
                    continue;
                };
                let Some(r) = del
                    .processed()
                    .filter(|r| r.location() == fb::DataLocation::SEGMENT)
                    .filter(|r| seg_users.get(&r.index()) == Some(&1))
                else {
                    continue;
                };
                let si = r.index() as usize;
                if let Some(rr) = segments.get(si).and_then(|p| crate::xnn::row_region(p)) {
                    regions.insert(pc, (rr, si));
                }
            }
            for m in lm_head::find(&g, &|pc| regions.get(&pc).map(|r| r.0)) {
                if let Some(&(r, si)) = m.region.and(regions.get(&m.product)) {
                    let narrowed = crate::xnn::narrow_rows(segments[si], r.rows, 1)
                        .map_err(|e| format!("method `{name}`, instruction {}: {e}", m.product))?;
                    patches.insert(si, narrowed);
                }
                seeds.push(apply_lm_head(&mut g, &m, &mut edit, &mut arena, nvalues));
                rep.lm_heads.push(LmHeadReport {
                    product: m.product,
                    select: m.select,
                    operator: m.operator.clone(),
                    rows: m.rows,
                    row: m.row,
                });
            }
        }
        if which.rows {
            seeds.extend(rows::seeds(&g));
            rep.rows = rows::run(&mut g, &seeds, &mut edit, &mut arena, nvalues);
        }
        if arena != arena_before {
            edit.arena_sizes = Some(arena);
        }
        // Tensors the rewrites moved.
        for (v, (now, before)) in g.alloc.iter().zip(&original_alloc).enumerate() {
            if let (Some((m, o, _)), true) = (now, now != before) {
                if !g.made_constant.contains(&v) {
                    edit.alloc.insert(v, (*m, *o));
                }
            }
        }
        // Constants nothing names any more become Null; their buffers may go.
        let mut named: BTreeSet<usize> = g.inputs.iter().chain(&g.outputs).copied().collect();
        for (pc, i) in g.ins.iter().enumerate() {
            if i.removed {
                continue;
            }
            let args = edit.args.get(&pc).unwrap_or(&i.args);
            named.extend(args.iter().filter_map(|&a| usize::try_from(a).ok()));
            named.extend(i.reads.iter().chain(&i.writes).copied());
        }
        for calls in edit.inserted.values() {
            for c in calls {
                named.extend(c.args.iter().filter_map(|&a| usize::try_from(a).ok()));
            }
        }
        let lists = listed_values(*plan);
        for (v, t) in g.view.tensors.iter().enumerate() {
            let Some(t) = t.as_ref().filter(|t| t.is_constant()) else {
                continue;
            };
            if named.contains(&v) || lists.contains(&v) {
                kept_buffers.insert(t.buffer);
            } else {
                edit.nulled.insert(v);
                unnamed_buffers.insert(t.buffer);
                rep.dropped_values += 1;
            }
        }
        report.methods.push(rep);
        edits.push(edit);
    }
    let dropped: BTreeSet<u32> = unnamed_buffers.difference(&kept_buffers).copied().collect();
    if !report.changed() && dropped.is_empty() {
        return Ok((None, report));
    }
    // The constant segment: dropped buffers out, folded values in.
    let cs = root.constant_segment();
    let mut pe = ProgramEdit {
        plans: Vec::new(),
        buffer_map: BTreeMap::new(),
        constant_offsets: None,
        segment_sizes: Vec::new(),
        segment_map: (0..seg_count as u32).map(Some).collect(),
        new_named: Vec::new(),
        dropped_keys: BTreeSet::new(),
        new_constant_segment: None,
    };
    let (old, offsets, index) = match cs {
        Some(cs) => {
            let si = cs.segment_index() as usize;
            let old = *segments
                .get(si)
                .ok_or_else(|| "constant segment index out of range".to_string())?;
            let offs: Vec<u64> = cs.offsets().map(|o| o.iter().collect()).unwrap_or_default();
            (old, if offs.is_empty() { vec![0] } else { offs }, si)
        }
        None => (&[][..], vec![0], seg_count),
    };
    let rebuilt = constants::rebuild(old, &offsets, &dropped, &added);
    report.added_constant_bytes = added.iter().map(|a| a.len()).sum();
    report.dropped_constant_bytes = rebuilt.removed_bytes;
    for &(pi, r, k) in &takers {
        if let Some(NewValue::Tensor(t)) = edits[pi].replace_values.get_mut(&r) {
            t.buffer = rebuilt.added[k];
        }
    }
    pe.buffer_map = rebuilt.map.clone();
    pe.constant_offsets = Some(rebuilt.offsets.clone());
    let mut parts: Vec<Vec<&[u8]>> = segments.iter().map(|s| vec![*s]).collect();
    for (&si, bytes) in &patches {
        parts[si] = vec![bytes.as_slice()];
    }
    if index < seg_count {
        parts[index] = rebuilt.parts.clone();
    } else {
        parts.push(rebuilt.parts.clone());
        pe.new_constant_segment = Some(index as u32);
    }
    pe.segment_sizes = parts
        .iter()
        .map(|p| p.iter().map(|x| x.len()).sum())
        .collect();
    pe.plans = edits;
    let fbytes = emit::program(root, &pe);
    let refs: Vec<&[&[u8]]> = parts.iter().map(|p| p.as_slice()).collect();
    let total = ptera::format::write::container_parts_to(&mut std::io::sink(), &fbytes, &refs)
        .map_err(|e| e.to_string())?;
    let mut buf = AlignedBuf::try_zeroed(total)
        .ok_or_else(|| format!("cannot allocate {total} bytes for the rewritten program"))?;
    ptera::format::write::container_parts_to(
        &mut std::io::Cursor::new(buf.as_mut_slice()),
        &fbytes,
        &refs,
    )
    .map_err(|e| e.to_string())?;
    Ok((Some(buf), report))
}

/// Values listed by tensor lists of a method.
fn listed_values(plan: fb::ExecutionPlan<'_>) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for e in plan.values().unwrap_or_default().iter() {
        let items = e
            .val_as_tensor_list()
            .and_then(|l| l.items())
            .or_else(|| e.val_as_optional_tensor_list().and_then(|l| l.items()));
        out.extend(
            items
                .into_iter()
                .flatten()
                .filter_map(|i| usize::try_from(i).ok()),
        );
    }
    out
}

/// Records the rewrite of one LM head: `A1 = slice_copy(A, dim, row, row + 1, 1)` inserted
/// before the product, the product reading `A1` and writing the select's output (or a tensor
/// of the product's shape over the same bytes), the select removed. Returns the slice as a
/// seed of [`rows`].
fn apply_lm_head(
    g: &mut Graph<'_>,
    m: &lm_head::Match,
    edit: &mut PlanEdit,
    arena: &mut Vec<i64>,
    nvalues: usize,
) -> rows::Seed {
    let new_value = |edit: &mut PlanEdit, v: NewValue| -> i32 {
        edit.new_values.push(v);
        (nvalues + edit.new_values.len() - 1) as i32
    };
    let dim = new_value(edit, NewValue::Int(m.a_dim as i64));
    let start = new_value(edit, NewValue::Int(m.row as i64));
    let end = new_value(edit, NewValue::Int(m.row as i64 + 1));
    let step = new_value(edit, NewValue::Int(1));
    let st = g.scalar_type(m.a).unwrap_or(6);
    let elem = g.tensor(m.a).and_then(|t| t.dtype).map_or(4, |d| d.size()) as u64;
    let bytes = m.a_row_sizes.iter().product::<usize>() as u64 * elem;
    // A fresh place at the end of the product's arena (the re-plan packs it later).
    let mem = g.alloc[m.x].map_or(1, |a| a.0);
    let slot = mem as usize;
    if arena.len() <= slot {
        arena.resize(slot + 1, 0);
    }
    let off = (arena[slot].max(0) as u64).div_ceil(16) * 16;
    arena[slot] = (off + bytes) as i64;
    let a1 = new_value(
        edit,
        NewValue::Tensor(NewTensor {
            scalar_type: st,
            sizes: m.a_row_sizes.iter().map(|&d| d as i32).collect(),
            dim_order: (0..m.a_row_sizes.len() as u8).collect(),
            buffer: 0,
            alloc: Some((mem, off)),
        }),
    );
    // The select's output moves to fresh bytes too (see `lm_head`).
    if let Some((om, _, ob)) = g.alloc[m.out] {
        let slot = om as usize;
        if arena.len() <= slot {
            arena.resize(slot + 1, 0);
        }
        let at = (arena[slot].max(0) as u64).div_ceil(16) * 16;
        arena[slot] = (at + ob) as i64;
        g.alloc[m.out] = Some((om, at, ob));
    }
    let out_sizes = g.tensor(m.out).map(|t| t.sizes.clone()).unwrap_or_default();
    let y = if out_sizes == m.y_sizes {
        m.out as i32
    } else {
        let (om, oo, _) = g.alloc[m.out].unwrap_or((mem, 0, 0));
        new_value(
            edit,
            NewValue::Tensor(NewTensor {
                scalar_type: g.scalar_type(m.out).unwrap_or(6),
                sizes: m.y_sizes.iter().map(|&d| d as i32).collect(),
                dim_order: (0..m.y_sizes.len() as u8).collect(),
                buffer: 0,
                alloc: Some((om, oo)),
            }),
        )
    };
    edit.inserted.entry(m.product).or_default().push(NewCall {
        name: "aten::slice_copy".into(),
        overload: "Tensor_out".into(),
        args: vec![m.a as i32, dim, start, end, step, a1, a1],
    });
    let args: Vec<i32> = g.ins[m.product]
        .args
        .iter()
        .map(|&v| {
            if v == m.a as i32 {
                a1
            } else if v == m.x as i32 {
                y
            } else {
                v
            }
        })
        .collect();
    edit.args.insert(m.product, args);
    edit.removed.insert(m.select);
    g.ins[m.select].removed = true;
    rows::Seed {
        at: m.product,
        inserted: true,
        src: m.a,
        dim: m.a_dim,
        lo: m.row,
        hi: m.row + 1,
        out: a1 as usize,
    }
}
