//! `cargo xtask inspect MODEL --graph OUT.json [--etdump FILE]`: every method as a graph in
//! Model Explorer's JSON graph format (a graph collection: `{"label", "graphs": [{"id",
//! "nodes": [{"id", "label", "namespace", "attrs", "incomingEdges", "outputsMetadata"}]}]}`,
//! which Model Explorer's JSON loader opens directly).
//!
//! - One node per instruction (`"{pc}"`), labelled by its operator; method inputs and outputs
//!   as nodes of their own (`input{k}`, `output{k}`).
//! - A delegate region is a namespace (`XnnpackBackend@{pc}`, `PteraBackend@{pc}`) holding one
//!   node per operation of its payload (`"{pc}/{k}"`; an XNNPACK graph wrapped by ptera's
//!   backend: `"{pc}/{k}/{node}"`), wired by the payload's value ids.
//! - Edges follow bytes, not names (`ptera_lower::rewrite::graph`): a read's producers are the
//!   latest instructions whose outputs cover the tensor's planned bytes, so the views ExecuTorch
//!   elides show as edges.
//! - Attributes: operator, instruction, the values read and written; output metadata: dtype,
//!   shape, and the memory plan (memory id, offset, bytes).
//! - With an ETDump (`run`/`qemu --etdump`), a node-data file beside the graph gives each node
//!   the duration of its event (nanoseconds; instructions under `-icount`), which Model Explorer
//!   colours.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ptera::format::fb;
use ptera::Program;
use ptera_lower::rewrite::graph::{Graph, Kind, Source};
use serde_json::{json, Value};

use crate::host::load_file;

/// One node being built.
struct Node {
    id: String,
    label: String,
    namespace: String,
    attrs: Vec<(String, String)>,
    /// Output metadata, one attribute list per output.
    outputs: Vec<Vec<(String, String)>>,
    /// (source node, source output, target input)
    incoming: Vec<(String, String, String)>,
}

impl Node {
    fn new(id: String, label: impl Into<String>, namespace: impl Into<String>) -> Node {
        Node {
            id,
            label: label.into(),
            namespace: namespace.into(),
            attrs: Vec::new(),
            outputs: Vec::new(),
            incoming: Vec::new(),
        }
    }

    fn attr(&mut self, k: &str, v: impl ToString) {
        self.attrs.push((k.to_string(), v.to_string()));
    }

    fn json(&self) -> Value {
        let kv = |l: &[(String, String)]| -> Vec<Value> {
            l.iter()
                .map(|(k, v)| json!({"key": k, "value": v}))
                .collect()
        };
        json!({
            "id": self.id,
            "label": self.label,
            "namespace": self.namespace,
            "attrs": kv(&self.attrs),
            "incomingEdges": self.incoming.iter().map(|(s, o, t)| json!({
                "sourceNodeId": s, "sourceNodeOutputId": o, "targetNodeInputId": t,
            })).collect::<Vec<_>>(),
            "outputsMetadata": self.outputs.iter().enumerate().map(|(i, a)| json!({
                "id": i.to_string(), "attrs": kv(a),
            })).collect::<Vec<_>>(),
        })
    }
}

/// One operation inside a delegate region, with the payload's value ids it reads and writes.
struct Inner {
    /// Node id suffix (`k` or `k/node`).
    key: String,
    label: String,
    reads: Vec<u32>,
    write: Option<u32>,
    attrs: Vec<(String, String)>,
}

/// The operations of an XNNPACK graph, its external values (value id -> DelegateCall argument)
/// and constants.
fn xnn_inner(payload: &[u8], prefix: &str) -> Option<(Vec<Inner>, BTreeMap<u32, u32>)> {
    use ptera::delegate::xnnpack::{graph, graph_of};
    let parts = graph_of(payload).ok()?;
    let g = parts.0;
    let mut ext = BTreeMap::new();
    for v in g.xvalues().into_iter().flatten() {
        if let Some(t) = v.xvalue_union_as_xnntensor_value() {
            if t.flags() & 3 != 0 && t.constant_buffer_idx() == 0 {
                ext.insert(t.id_out(), t.external_id());
            }
        }
    }
    let mut out = Vec::new();
    for (k, node) in g.xnodes().into_iter().flatten().enumerate() {
        let kind = graph::node_name(node.xnode_union_type());
        let (reads, write) = match graph::decode(node) {
            Ok((op, _)) => {
                let (ins, n) = op.inputs();
                (ins[..n.min(ins.len())].to_vec(), Some(op.output()))
            }
            Err(_) => (Vec::new(), None),
        };
        out.push(Inner {
            key: format!("{prefix}{k}"),
            label: kind.trim_start_matches("XNN").to_string(),
            reads,
            write,
            attrs: vec![("xnnpack node".into(), format!("{kind} #{k}"))],
        });
    }
    Some((out, ext))
}

/// Ids that stand for DelegateCall arguments in a ptera region (arguments are ids `1 << 30 |
/// arg`, apart from XNNPACK value ids).
const ARG: u32 = 1 << 30;

/// The operations of a PteraBackend region: `Linear`s on DelegateCall arguments, and wrapped
/// XNNPACK graphs (their values kept apart per graph).
fn ptera_inner(program: &Program<'_>, payload: &[u8]) -> Option<(Vec<Inner>, BTreeMap<u32, u32>)> {
    let r = ptera::delegate::ptera::region_of(payload).ok()?;
    let mut out = Vec::new();
    let mut ext = BTreeMap::new();
    for (k, op) in r.ops().into_iter().flatten().enumerate() {
        let absorbed: Vec<&str> = op.absorbed().into_iter().flatten().collect();
        if let Some(l) = op.op_as_linear() {
            let mut reads = vec![ARG | l.input()];
            if let Ok(b) = u32::try_from(l.bias()) {
                reads.push(ARG | b);
            }
            for a in reads.iter().chain([&(ARG | l.output())]) {
                ext.insert(*a, a & !ARG);
            }
            out.push(Inner {
                key: k.to_string(),
                label: "Linear".into(),
                reads,
                write: Some(ARG | l.output()),
                attrs: vec![
                    ("k".into(), l.k().to_string()),
                    ("n".into(), l.n().to_string()),
                    ("activation".into(), format!("{:?}", l.activation())),
                    ("absorbed".into(), absorbed.join(", ")),
                ],
            });
        } else if let Some(a) = op.op_as_attention() {
            let mut reads = vec![ARG | a.q(), ARG | a.k(), ARG | a.v()];
            if let Ok(m) = u32::try_from(a.mask()) {
                reads.push(ARG | m);
            }
            reads.dedup();
            for r in reads.iter().chain([&(ARG | a.output())]) {
                ext.insert(*r, r & !ARG);
            }
            out.push(Inner {
                key: k.to_string(),
                label: "Attention".into(),
                reads,
                write: Some(ARG | a.output()),
                attrs: vec![
                    ("heads".into(), a.heads().to_string()),
                    ("head_dim".into(), a.head_dim().to_string()),
                    ("q_rows".into(), a.q_rows().to_string()),
                    ("kv_rows".into(), a.kv_rows().to_string()),
                    ("absorbed".into(), absorbed.join(", ")),
                ],
            });
        } else if let Some(x) = op.op_as_xnn_graph() {
            let seg = program.segment(x.segment() as usize).ok()?;
            // Each wrapped graph's value ids live in their own range.
            let base = (k as u32 + 1) << 20;
            let (inner, e) = xnn_inner(seg, &format!("{k}/"))?;
            for (id, arg) in e {
                ext.insert(base | id, arg);
            }
            out.extend(inner.into_iter().map(|mut n| {
                n.reads.iter_mut().for_each(|r| *r |= base);
                n.write = n.write.map(|w| w | base);
                n
            }));
        }
    }
    Some((out, ext))
}

/// `dtype[shape]` and the plan of value `v`.
fn value_meta(g: &Graph<'_>, v: usize) -> Vec<(String, String)> {
    let mut a = vec![("value".to_string(), v.to_string())];
    if let Some(t) = g.tensor(v) {
        let dtype = t.dtype.map_or("?".to_string(), |d| d.to_string());
        a.push((
            "tensor_shape".into(),
            format!("{dtype}{:?}", t.sizes).replace(' ', ""),
        ));
        if t.is_constant() {
            a.push(("constant".into(), format!("buffer {}", t.buffer)));
        }
    }
    if let Some(Some((mem, off, len))) = g.alloc.get(v) {
        a.push((
            "memory plan".into(),
            format!("memory {mem} offset {off} bytes {len}"),
        ));
    }
    a
}

/// The graphs of every method of `program` (one graph collection) and, per method, which node
/// stands for which ETDump event: (instruction, region operation) -> node id.
type EventNodes = BTreeMap<(u32, Option<(String, u32)>), String>;

pub fn collection(program: &Program<'_>, label: &str) -> Result<(Value, Vec<EventNodes>)> {
    let seg_count = program.segment_count();
    let segments: Vec<&[u8]> = (0..seg_count)
        .map(|i| program.segment(i))
        .collect::<Result<_, _>>()?;
    let mut graphs = Vec::new();
    let mut event_nodes = Vec::new();
    for plan in program.methods() {
        let (graph, ev) = method_graph(program, plan, &segments)?;
        graphs.push(graph);
        event_nodes.push(ev);
    }
    Ok((json!({"label": label, "graphs": graphs}), event_nodes))
}

fn method_graph(
    program: &Program<'_>,
    plan: fb::ExecutionPlan<'_>,
    segments: &[&[u8]],
) -> Result<(Value, EventNodes)> {
    let dels = plan.delegates().unwrap_or_default();
    let dw = |d: usize| -> Option<Vec<usize>> {
        let del = (d < dels.len()).then(|| dels.get(d))?;
        let w = ptera_lower::replan::delegate_outputs(del, segments);
        (!w.is_empty()).then_some(w)
    };
    let g = Graph::new(plan, &dw);
    let name = plan.name().unwrap_or("method").to_string();
    let mut nodes: Vec<Node> = Vec::new();
    let mut events = EventNodes::new();
    let inputs: Vec<usize> = plan
        .inputs()
        .into_iter()
        .flatten()
        .filter_map(|v| usize::try_from(v).ok())
        .collect();
    for (k, &v) in inputs.iter().enumerate() {
        let mut n = Node::new(format!("input{k}"), format!("input {k}"), "");
        n.outputs.push(value_meta(&g, v));
        nodes.push(n);
    }
    // Per instruction: the region's operations (when its payload was read) and which
    // operation writes each DelegateCall argument.
    let mut regions: BTreeMap<usize, (Vec<Inner>, BTreeMap<u32, u32>)> = BTreeMap::new();
    for (pc, ins) in g.ins.iter().enumerate() {
        if ins.kind != Kind::Delegate {
            continue;
        }
        let Some(del) = delegate_of(plan, pc)
            .filter(|&d| d < dels.len())
            .map(|d| dels.get(d))
        else {
            continue;
        };
        let Some(payload) = del.processed().and_then(|r| program.delegate_data(r).ok()) else {
            continue;
        };
        let id = del.id().unwrap_or("");
        let inner = if id == ptera::delegate::xnnpack::ID {
            xnn_inner(payload, "")
        } else if id == ptera::delegate::ptera::ID {
            ptera_inner(program, payload)
        } else {
            None
        };
        if let Some(r) = inner {
            regions.insert(pc, r);
        }
    }
    // The node and output that produced value `w` written by instruction `j`.
    let producer = |j: usize, w: usize| -> (String, String) {
        let ins = &g.ins[j];
        if let Some((inner, ext)) = regions.get(&j) {
            let args: Vec<usize> = ins
                .args
                .iter()
                .map(|&a| usize::try_from(a).unwrap_or(usize::MAX))
                .collect();
            for n in inner.iter().rev() {
                let Some(wid) = n.write else { continue };
                if ext
                    .get(&wid)
                    .and_then(|&a| args.get(a as usize))
                    .is_some_and(|&v| v == w)
                {
                    return (format!("{j}/{}", n.key), "0".into());
                }
            }
        }
        let out = ins.writes.iter().position(|&x| x == w).unwrap_or(0);
        (j.to_string(), out.to_string())
    };
    // Edges into a read of value `v` at instruction `pc`: its producers by bytes.
    let edges_for = |v: usize, pc: usize| -> Vec<(String, String)> {
        let mut out = Vec::new();
        let sources = g.sources(v, pc).unwrap_or_else(|| {
            let mut s = BTreeSet::new();
            s.insert(Source::Start);
            s
        });
        for s in sources {
            match s {
                Source::Start => {
                    if let Some(k) = inputs.iter().position(|&i| i == v) {
                        out.push((format!("input{k}"), "0".into()));
                    } else if let Some(k) = inputs.iter().position(|&i| g.overlap(i, v)) {
                        out.push((format!("input{k}"), "0".into()));
                    }
                }
                Source::Ins(j) => {
                    let ins = &g.ins[j];
                    let w = ins
                        .writes
                        .iter()
                        .copied()
                        .find(|&w| w == v)
                        .or_else(|| ins.writes.iter().copied().find(|&w| g.overlap(w, v)));
                    if let Some(w) = w {
                        out.push(producer(j, w));
                    }
                }
            }
        }
        out
    };
    for (pc, ins) in g.ins.iter().enumerate() {
        let args: Vec<usize> = ins
            .args
            .iter()
            .map(|&a| usize::try_from(a).unwrap_or(usize::MAX))
            .collect();
        if let Some((inner, ext)) = regions.get(&pc) {
            let backend = delegate_of(plan, pc)
                .filter(|&d| d < dels.len())
                .and_then(|d| dels.get(d).id())
                .unwrap_or("delegate");
            let ns = format!("{backend}@{pc}");
            // Which inner operation last wrote each payload value id, in order.
            let mut written: BTreeMap<u32, String> = BTreeMap::new();
            for n in inner {
                let mut node = Node::new(format!("{pc}/{}", n.key), n.label.clone(), ns.clone());
                node.attr("instruction", pc);
                for (k, v) in &n.attrs {
                    node.attr(k, v);
                }
                for (slot, &r) in n.reads.iter().enumerate() {
                    if let Some(src) = written.get(&r) {
                        node.incoming
                            .push((src.clone(), "0".into(), slot.to_string()));
                    } else if let Some(&v) = ext.get(&r).and_then(|&a| args.get(a as usize)) {
                        for (s, o) in edges_for(v, pc) {
                            node.incoming.push((s, o, slot.to_string()));
                        }
                    }
                }
                if let Some(w) = n.write {
                    written.insert(w, node.id.clone());
                    match ext.get(&w).and_then(|&a| args.get(a as usize)) {
                        Some(&v) => node.outputs.push(value_meta(&g, v)),
                        None => node
                            .outputs
                            .push(vec![("value".into(), format!("region value {w}"))]),
                    }
                }
                // ETDump names the operation by its kind and index in its graph.
                let index = n
                    .key
                    .rsplit('/')
                    .next()
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                let kind = n
                    .attrs
                    .first()
                    .filter(|(k, _)| k == "xnnpack node")
                    .map(|(_, v)| v.split(" #").next().unwrap_or("").to_string())
                    .unwrap_or_else(|| n.label.clone());
                if kind == "Linear" {
                    // A quantized Linear reports itself under its own kind.
                    events.insert(
                        (pc as u32, Some(("QuantizedLinear".into(), index))),
                        node.id.clone(),
                    );
                }
                events.insert((pc as u32, Some((kind, index))), node.id.clone());
                nodes.push(node);
            }
            continue;
        }
        let label = match ins.kind {
            Kind::Kernel => {
                let short = ins.key.rsplit("::").next().unwrap_or(&ins.key);
                short.split('.').next().unwrap_or(short).to_string()
            }
            Kind::Delegate => delegate_of(plan, pc)
                .filter(|&d| d < dels.len())
                .and_then(|d| dels.get(d).id())
                .unwrap_or("delegate")
                .to_string(),
            Kind::Other => other_label(plan, pc).to_string(),
        };
        let mut node = Node::new(pc.to_string(), label, "");
        node.attr("instruction", pc);
        if ins.kind == Kind::Kernel {
            node.attr("operator", &ins.key);
        }
        node.attr(
            "reads",
            ins.reads
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" "),
        );
        node.attr(
            "writes",
            ins.writes
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let consts: Vec<String> = ins
            .reads
            .iter()
            .filter(|&&v| g.is_constant(v))
            .map(|v| v.to_string())
            .collect();
        if !consts.is_empty() {
            node.attr("constant inputs", consts.join(" "));
        }
        for (slot, &v) in ins.reads.iter().enumerate() {
            for (s, o) in edges_for(v, pc) {
                node.incoming.push((s, o, slot.to_string()));
            }
        }
        for &w in &ins.writes {
            node.outputs.push(value_meta(&g, w));
        }
        events.insert((pc as u32, None), node.id.clone());
        nodes.push(node);
    }
    let end = g.ins.len();
    for (k, v) in plan
        .outputs()
        .into_iter()
        .flatten()
        .filter_map(|v| usize::try_from(v).ok())
        .enumerate()
    {
        let mut n = Node::new(format!("output{k}"), format!("output {k}"), "");
        n.attr("value", v);
        for (s, o) in edges_for(v, end) {
            n.incoming.push((s, o, "0".into()));
        }
        nodes.push(n);
    }
    // Incoming edges once each.
    for n in &mut nodes {
        let mut seen = BTreeSet::new();
        n.incoming.retain(|e| seen.insert(e.clone()));
    }
    let graph = json!({
        "id": name,
        "nodes": nodes.iter().map(Node::json).collect::<Vec<_>>(),
    });
    Ok((graph, events))
}

/// The delegate index of DelegateCall `pc` in chain 0.
fn delegate_of(plan: fb::ExecutionPlan<'_>, pc: usize) -> Option<usize> {
    let l = plan
        .chains()
        .filter(|c| !c.is_empty())?
        .get(0)
        .instructions()?;
    (pc < l.len())
        .then(|| l.get(pc).instr_args_as_delegate_call())??
        .delegate_index()
        .try_into()
        .ok()
}

/// Label of a move, jump or free.
fn other_label(plan: fb::ExecutionPlan<'_>, pc: usize) -> &'static str {
    let Some(l) = plan
        .chains()
        .filter(|c| !c.is_empty())
        .and_then(|c| c.get(0).instructions())
        .filter(|l| pc < l.len())
    else {
        return "instruction";
    };
    match l.get(pc).instr_args_type() {
        fb::InstructionArguments::MoveCall => "move",
        fb::InstructionArguments::JumpFalseCall => "jump_false",
        fb::InstructionArguments::FreeCall => "free",
        _ => "instruction",
    }
}

/// Model Explorer node data from an ETDump's first "Execute" run: each node's event duration.
fn node_data(etdump: &[u8], graph_id: &str, events: &EventNodes, source: &str) -> Result<Value> {
    use ptera::devtools::etdump::Kind;
    let mut results: BTreeMap<String, u64> = BTreeMap::new();
    for e in super::profile::events_of_etdump(etdump)? {
        let key = match e.kind {
            Kind::Operator | Kind::Delegate => (e.instruction, None),
            Kind::RegionOp => (e.instruction, Some((e.op_kind.to_string(), e.region_op))),
            Kind::Execute => continue,
        };
        if let Some(node) = events.get(&key) {
            *results.entry(node.clone()).or_default() += e.end.saturating_sub(e.start);
        }
    }
    let results: serde_json::Map<String, Value> = results
        .into_iter()
        .map(|(k, v)| (k, json!({"value": v})))
        .collect();
    Ok(json!({
        graph_id: {
            "name": format!("ETDump {source} (ns; instructions under -icount)"),
            "results": results,
            "gradient": [
                {"stop": 0, "bgColor": "#ffffff"},
                {"stop": 0.5, "bgColor": "#ffbb55"},
                {"stop": 1, "bgColor": "#dd2200"},
            ],
        }
    }))
}

/// Writes the graph (and, with an ETDump, the node data beside it); returns the paths written.
pub fn export(model: &Path, out: &Path, etdump: Option<&Path>) -> Result<Vec<PathBuf>> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let label = model
        .file_name()
        .map_or("model".to_string(), |n| n.to_string_lossy().into_owned());
    let (collection, events) = collection(&program, &label)?;
    std::fs::write(out, serde_json::to_string(&collection)?)
        .with_context(|| format!("cannot write {}", out.display()))?;
    let mut written = vec![out.to_path_buf()];
    if let Some(e) = etdump {
        let bytes = std::fs::read(e).with_context(|| format!("cannot read {}", e.display()))?;
        // The ETDump records method `forward` (the first method when there is none).
        let graphs = collection["graphs"].as_array().cloned().unwrap_or_default();
        let k = graphs
            .iter()
            .position(|g| g["id"] == "forward")
            .unwrap_or(0);
        let id = graphs
            .get(k)
            .and_then(|g| g["id"].as_str())
            .unwrap_or("forward");
        let empty = EventNodes::new();
        let source = e
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let data = node_data(&bytes, id, events.get(k).unwrap_or(&empty), &source)?;
        let path = out.with_extension("nodedata.json");
        std::fs::write(&path, serde_json::to_string(&data)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    fn attr<'v>(n: &'v Value, k: &str) -> Option<&'v str> {
        n["attrs"]
            .as_array()?
            .iter()
            .find(|a| a["key"] == k)
            .and_then(|a| a["value"].as_str())
    }

    /// Exports `file` and checks the graph against its plan: unique ids; every edge from an
    /// existing node output; every instruction present (a delegate's as its region's
    /// operations); every tensor output fed; every node on a path to an output; and every edge
    /// between instructions goes forward in program order from bytes the target reads.
    fn check(file: &str) -> Value {
        let buf = ptera::host::AlignedBuf::read(root().join(file)).unwrap();
        let program = Program::load(buf.as_slice()).unwrap();
        let (c, events) = collection(&program, file).unwrap();
        let plan = program.methods().next().unwrap();
        let g = &c["graphs"][0];
        assert_eq!(g["id"], plan.name().unwrap());
        let nodes = g["nodes"].as_array().unwrap();
        let by_id: BTreeMap<&str, &Value> = nodes
            .iter()
            .map(|n| (n["id"].as_str().unwrap(), n))
            .collect();
        assert_eq!(by_id.len(), nodes.len(), "{file}: node ids repeat");
        // The plan's dataflow, to check edges against.
        let segments: Vec<&[u8]> = (0..program.segment_count())
            .map(|i| program.segment(i).unwrap())
            .collect();
        let dels = plan.delegates().unwrap_or_default();
        let dw = |d: usize| -> Option<Vec<usize>> {
            let w = ptera_lower::replan::delegate_outputs(dels.get(d), &segments);
            (!w.is_empty()).then_some(w)
        };
        let dg = Graph::new(plan, &dw);
        let pc_of = |id: &str| -> Option<usize> { id.split('/').next()?.parse().ok() };
        for n in nodes {
            for e in n["incomingEdges"].as_array().unwrap() {
                let src = by_id
                    .get(e["sourceNodeId"].as_str().unwrap())
                    .unwrap_or_else(|| panic!("{file}: edge from a missing node: {e}"));
                let out: usize = e["sourceNodeOutputId"].as_str().unwrap().parse().unwrap();
                assert!(
                    out < src["outputsMetadata"].as_array().unwrap().len(),
                    "{e}"
                );
                let (Some(s), Some(t)) = (
                    pc_of(src["id"].as_str().unwrap()),
                    pc_of(n["id"].as_str().unwrap()),
                ) else {
                    continue;
                };
                if s == t {
                    continue; // inside one region: by its payload's value ids
                }
                assert!(s < t, "{file}: edge {s} -> {t} goes back");
                // The source's output value shares bytes with a value the target reads.
                let v: usize = src["outputsMetadata"][out]["attrs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["key"] == "value")
                    .and_then(|a| a["value"].as_str()?.parse().ok())
                    .unwrap();
                assert!(
                    dg.ins[t].reads.iter().any(|&r| r == v || dg.overlap(r, v)),
                    "{file}: edge {s} -> {t}: instruction {t} reads nothing of value {v}"
                );
            }
        }
        for (pc, _) in dg.ins.iter().enumerate() {
            let here = by_id.contains_key(pc.to_string().as_str())
                || by_id.keys().any(|k| k.starts_with(&format!("{pc}/")));
            assert!(here, "{file}: instruction {pc} has no node");
        }
        // Backwards from the outputs, every node is reached.
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = nodes
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .filter(|id| id.starts_with("output"))
            .collect();
        for id in &stack {
            assert!(
                !by_id[id]["incomingEdges"].as_array().unwrap().is_empty(),
                "{file}: {id} is fed by nothing"
            );
        }
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            for e in by_id[id]["incomingEdges"].as_array().unwrap() {
                stack.push(e["sourceNodeId"].as_str().unwrap());
            }
        }
        let unreached: Vec<&str> = by_id
            .keys()
            .copied()
            .filter(|k| !seen.contains(k))
            .collect();
        assert!(
            unreached.is_empty(),
            "{file}: not on a path to an output: {unreached:?}"
        );
        // Every ETDump key names a node of the graph.
        for id in events[0].values() {
            assert!(by_id.contains_key(id.as_str()));
        }
        c
    }

    #[test]
    fn portable_program_graph() {
        let c = check("tests/fixtures/gpt2_portable.pte");
        let nodes = c["graphs"][0]["nodes"].as_array().unwrap();
        let addmm = nodes.iter().filter(|n| n["label"] == "addmm").count();
        assert_eq!(addmm, 8);
        let n = nodes.iter().find(|n| n["label"] == "addmm").unwrap();
        assert_eq!(attr(n, "operator"), Some("aten::addmm.out"));
        let meta = &n["outputsMetadata"][0]["attrs"];
        assert!(meta.to_string().contains("memory plan"), "{meta}");
    }

    #[test]
    fn xnnpack_regions_are_namespaces_of_their_nodes() {
        for f in [
            "tests/fixtures/gpt2_xnnpack.pte",
            "tests/fixtures/mbv2_xnnpack.pte",
        ] {
            let c = check(f);
            let nodes = c["graphs"][0]["nodes"].as_array().unwrap();
            let inner: Vec<&Value> = nodes
                .iter()
                .filter(|n| {
                    n["namespace"]
                        .as_str()
                        .unwrap()
                        .starts_with("XnnpackBackend@")
                })
                .collect();
            assert!(!inner.is_empty(), "{f}");
            assert!(inner
                .iter()
                .all(|n| attr(n, "xnnpack node").is_some_and(|k| k.starts_with("XNN"))));
        }
    }

    #[test]
    fn ptera_regions_show_their_linears_and_wrapped_graphs() {
        let c = check("fuzz/hosts/mlp_portable_neon.pte");
        let nodes = c["graphs"][0]["nodes"].as_array().unwrap();
        assert!(nodes.iter().any(|n| n["label"] == "Linear"
            && n["namespace"]
                .as_str()
                .unwrap()
                .starts_with("PteraBackend@")));
        let c = check("fuzz/hosts/mlp_xnnpack_neon.pte");
        let nodes = c["graphs"][0]["nodes"].as_array().unwrap();
        assert!(nodes.iter().any(|n| n["label"] == "FullyConnected"
            && n["namespace"]
                .as_str()
                .unwrap()
                .starts_with("PteraBackend@")));
    }
}
