//! `cargo xtask inspect`: what a program contains and what it needs to run.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use ptera::format::fb;
use ptera::{MethodMeta, Program};
use serde_json::{json, Value};

use crate::host::load_file;

fn tensor_json(info: Option<ptera::method::TensorInfo>) -> Value {
    match info {
        Some(t) => json!({"dtype": t.dtype.name(), "shape": t.shape.dims()}),
        None => json!({"dtype": null, "shape": null}),
    }
}

/// A PteraBackend region (written by `cargo xtask lower`): target, operations, memory.
fn ptera_region(program: &Program<'_>, d: usize, payload: &[u8], region: &mut Value) {
    use ptera::delegate::Backend;
    use ptera::format::region_fb as rf;
    let init = ptera::delegate::DelegateInit {
        program: *program,
        payload,
        index: d,
    };
    region["payload_bytes"] = json!(payload.len());
    let r = match ptera::delegate::ptera::region_of(payload) {
        Ok(r) => r,
        Err(e) => {
            region["error"] = json!(e.to_string());
            return;
        }
    };
    region["target"] = json!({"isa": r.isa().unwrap_or(""), "vector_bits": r.vector_bits()});
    let mut ops = Vec::new();
    for op in r.ops().into_iter().flatten() {
        if let Some(l) = op.op_as_linear() {
            let w = l.weight();
            let weight = match w.map(|w| w.layout()) {
                Some(rf::WeightLayout::Packed) => {
                    json!({"packed": true, "nr": w.map_or(0, |w| w.nr())})
                }
                _ => json!({"packed": false, "arg": w.map_or(-1, |w| w.arg())}),
            };
            ops.push(
                json!({"op": "Linear", "k": l.k(), "n": l.n(), "max_m": l.max_m(),
                "weight": weight, "activation": format!("{:?}", l.activation()),
                "absorbed": op.absorbed().map(|a| a.iter().collect::<Vec<_>>())}),
            );
        } else if let Some(a) = op.op_as_attention() {
            ops.push(
                json!({"op": "Attention", "heads": a.heads(), "head_dim": a.head_dim(),
                "kv_heads": a.heads() / a.kv_group().max(1),
                "q_rows": a.q_rows(), "kv_rows": a.kv_rows(), "masked": a.mask() >= 0,
                "scale": a.scale(), "q_scale": a.q_scale(),
                "absorbed": op.absorbed().map(|a| a.iter().collect::<Vec<_>>())}),
            );
        } else if let Some(x) = op.op_as_xnn_graph() {
            let mut nodes: BTreeMap<&str, u64> = BTreeMap::new();
            let graph = program
                .segment(x.segment() as usize)
                .ok()
                .and_then(|seg| ptera::delegate::xnnpack::graph_of(seg).ok());
            for node in graph.and_then(|g| g.0.xnodes()).into_iter().flatten() {
                let t = ptera::delegate::xnnpack::graph::node_name(node.xnode_union_type());
                *nodes.entry(t).or_default() += 1;
            }
            ops.push(json!({"op": "XnnGraph", "segment": x.segment(),
                "packed_filters": x.packed().map_or(0, |p| p.len()), "nodes": nodes}));
        }
    }
    region["ops"] = json!(ops);
    match ptera::delegate::ptera::BACKEND.prepare(&init) {
        Ok(req) => {
            region["scratch_bytes"] = json!(req.scratch);
            region["plan_bytes"] = json!(req.state);
        }
        Err(e) => region["error"] = json!(e.to_string()),
    }
}

fn method_json(program: &Program<'_>, plan: fb::ExecutionPlan<'_>) -> Result<Value> {
    let name = plan.name().unwrap_or("");
    let reg = crate::firmware_registry();
    let (meta, unresolved) = MethodMeta::new_lenient(program, name, &reg)?;
    let mut operators: BTreeMap<String, u64> = BTreeMap::new();
    let mut delegates: BTreeMap<String, u64> = BTreeMap::new();
    let (mut kernel_calls, mut delegate_calls, mut instructions) = (0u64, 0u64, 0u64);
    let ops = plan.operators().unwrap_or_default();
    let dels = plan.delegates().unwrap_or_default();
    for chain in plan.chains().unwrap_or_default() {
        for ins in chain.instructions().unwrap_or_default() {
            instructions += 1;
            if let Some(k) = ins.instr_args_as_kernel_call() {
                kernel_calls += 1;
                let op = ops.get(k.op_index() as usize);
                let mut key = op.name().unwrap_or("?").to_string();
                let ov = op.overload().unwrap_or("");
                if !ov.is_empty() {
                    key.push('.');
                    key.push_str(ov);
                }
                *operators.entry(key).or_default() += 1;
            } else if let Some(d) = ins.instr_args_as_delegate_call() {
                delegate_calls += 1;
                let id = dels
                    .get(d.delegate_index() as usize)
                    .id()
                    .unwrap_or("?")
                    .to_string();
                *delegates.entry(id).or_default() += 1;
            }
        }
    }
    let mut regions = Vec::new();
    for (d, del) in dels.iter().enumerate() {
        let id = del.id().unwrap_or("?");
        let mut region = json!({"index": d, "backend": id});
        if id == ptera::delegate::xnnpack::ID {
            let payload = del
                .processed()
                .map(|r| program.delegate_data(r))
                .transpose()?
                .unwrap_or(&[]);
            let init = ptera::delegate::DelegateInit {
                program: *program,
                payload,
                index: d,
            };
            match ptera::delegate::xnnpack::RegionSummary::new(&init) {
                Ok(sum) => {
                    let mut nodes: BTreeMap<&str, u64> = BTreeMap::new();
                    for t in sum.node_types() {
                        *nodes.entry(t).or_default() += 1;
                    }
                    let ext = |input: bool| -> Vec<Value> {
                        sum.externals()
                            .filter(|e| e.1 == input)
                            .map(|(arg, _, dims)| json!({"arg": arg, "dtype": "float32", "shape": dims.dims()}))
                            .collect()
                    };
                    region["payload_bytes"] = json!(payload.len());
                    region["nodes"] = json!(nodes);
                    region["inputs"] = json!(ext(true));
                    region["outputs"] = json!(ext(false));
                    region["constants"] = json!(sum.constant_count());
                    region["scratch_bytes"] = json!(sum.requirements.scratch);
                    region["plan_bytes"] = json!(sum.requirements.state);
                }
                Err(e) => region["error"] = json!(e.to_string()),
            }
        } else if id == ptera::delegate::ptera::ID {
            let payload = del
                .processed()
                .map(|r| program.delegate_data(r))
                .transpose()?
                .unwrap_or(&[]);
            ptera_region(program, d, payload, &mut region);
        }
        regions.push(region);
    }
    let inputs: Vec<Value> = (0..meta.num_inputs())
        .map(|i| tensor_json(meta.input(i)))
        .collect();
    let outputs: Vec<Value> = (0..meta.num_outputs())
        .map(|i| tensor_json(meta.output(i)))
        .collect();
    let arenas: Vec<u64> = (0..meta.arena_count())
        .map(|k| meta.arena_size(k))
        .collect();
    Ok(json!({
        "name": name,
        "inputs": inputs,
        "outputs": outputs,
        "instructions": instructions,
        "kernel_calls": kernel_calls,
        "delegate_calls": delegate_calls,
        "operators": operators,
        "delegates": delegates,
        "planned_arena_bytes": arenas,
        "delegate_regions": regions,
        "metadata_bytes": meta.metadata_bytes(),
        "folded_calls": meta.folded_calls(),
        "folded_bytes": meta.folded_bytes(),
        "kernel_scratch_bytes": meta.kernel_scratch_bytes(),
        "values": meta.num_values(),
        "runnable": unresolved.is_none(),
        "unresolved": unresolved.map(|e| e.to_string()),
    }))
}

pub fn inspect(model: &Path, as_json: bool) -> Result<()> {
    let file = load_file(model)?;
    let program = Program::load(file.as_slice()).with_context(|| format!("{}", model.display()))?;
    let methods = program
        .methods()
        .map(|p| method_json(&program, p))
        .collect::<Result<Vec<_>>>()?;
    let header = program.header();
    let doc = json!({
        "file": model.display().to_string(),
        "size_bytes": file.len(),
        "program_bytes": header.map_or(file.len() as u64, |h| h.program_size),
        "segments": program.segment_count(),
        "constant_bytes": program.constant_bytes(),
        "methods": methods,
    });
    // The record `cargo xtask lower` leaves: target and both memory plans.
    let mut doc = doc;
    if let Some(rec) = program
        .named_data(ptera_lower::LOWERING_RECORD)
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
    {
        doc["lowering"] = rec;
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    println!(
        "{}: {} bytes (flatbuffer {} bytes, {} segments, constants {} bytes)",
        model.display(),
        doc["size_bytes"],
        doc["program_bytes"],
        doc["segments"],
        doc["constant_bytes"]
    );
    if let Some(rec) = doc.get("lowering") {
        println!(
            "lowered by `cargo xtask lower` for {}",
            rec["target"].as_str().unwrap_or("?")
        );
        for p in rec["memory_plans"].as_array().into_iter().flatten() {
            let list = |k: &str| -> String {
                let v: Vec<String> = p[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| format!("{x} bytes"))
                    .collect();
                v.join(", ")
            };
            match p["kept_because"].as_str() {
                Some(why) => println!(
                    "  method `{}`: ExecuTorch's memory plan kept ({why})",
                    p["method"].as_str().unwrap_or("")
                ),
                None => println!(
                    "  method `{}`: arenas ExecuTorch {} -> ptera {}; high-water mark {} bytes at instruction {} ({} tensors with their views)",
                    p["method"].as_str().unwrap_or(""),
                    list("executorch_arena_bytes"),
                    list("ptera_arena_bytes"),
                    p["peak_live_bytes"],
                    p["peak_instruction"],
                    p["peak_groups"]
                ),
            }
            let live: Vec<String> = p["peak_values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| format!("value {} ({} bytes)", v["value"], v["bytes"]))
                .collect();
            if !live.is_empty() {
                println!("    alive at the high-water mark: {}", live.join(", "));
            }
        }
    }
    for m in doc["methods"].as_array().into_iter().flatten() {
        println!("method `{}`", m["name"].as_str().unwrap_or(""));
        let shape = |t: &Value| {
            let dims: Vec<String> = t["shape"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d.to_string())
                .collect();
            format!(
                "{} [{}]",
                t["dtype"].as_str().unwrap_or("?"),
                dims.join(", ")
            )
        };
        for (i, t) in m["inputs"].as_array().into_iter().flatten().enumerate() {
            println!("  input {i}: {}", shape(t));
        }
        for (i, t) in m["outputs"].as_array().into_iter().flatten().enumerate() {
            println!("  output {i}: {}", shape(t));
        }
        println!(
            "  instructions: {} ({} kernel calls, {} delegate calls)",
            m["instructions"], m["kernel_calls"], m["delegate_calls"]
        );
        for (k, b) in m["planned_arena_bytes"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            println!("  arena memory_id {}: {} bytes", k + 1, b);
        }
        println!(
            "  metadata: {} bytes ({} values; kernel scratch {} bytes)",
            m["metadata_bytes"], m["values"], m["kernel_scratch_bytes"]
        );
        if m["folded_calls"].as_u64().unwrap_or(0) > 0 {
            println!(
                "  folded at load: {} calls (operands all constants), their results {} bytes of the metadata",
                m["folded_calls"], m["folded_bytes"]
            );
        }
        if let Some(d) = m["delegates"].as_object().filter(|d| !d.is_empty()) {
            println!("  delegate calls per backend:");
            for (k, v) in d {
                println!("    {k}: {v}");
            }
        }
        for r in m["delegate_regions"].as_array().into_iter().flatten() {
            let list = |key: &str| -> String {
                r[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| {
                        let dims: Vec<String> = t["shape"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|d| d.to_string())
                            .collect();
                        format!("arg {} [{}]", t["arg"], dims.join(", "))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if r["backend"] == ptera::delegate::ptera::ID {
                let t = &r["target"];
                println!(
                    "  delegate #{} PteraBackend (packed for {}{}): {} payload bytes, scratch {} bytes, plan {} bytes",
                    r["index"],
                    t["isa"].as_str().unwrap_or("?"),
                    if t["vector_bits"].as_u64().unwrap_or(0) > 0 { format!(" {}-bit", t["vector_bits"]) } else { String::new() },
                    r["payload_bytes"],
                    r["scratch_bytes"],
                    r["plan_bytes"]
                );
                if let Some(e) = r["error"].as_str() {
                    println!("    error: {e}");
                }
                for op in r["ops"].as_array().into_iter().flatten() {
                    if op["op"] == "Linear" {
                        let w = &op["weight"];
                        let wd = if w["packed"] == true {
                            format!("packed NR {}", w["nr"])
                        } else {
                            format!("argument {}", w["arg"])
                        };
                        println!(
                            "    Linear K={} N={} M<={}, weight {wd}, activation {}",
                            op["k"],
                            op["n"],
                            op["max_m"],
                            op["activation"].as_str().unwrap_or("?")
                        );
                    } else if op["op"] == "Attention" {
                        println!(
                            "    Attention: {} heads of {} ({} K/V heads), query rows {}, key rows {}, {}",
                            op["heads"],
                            op["head_dim"],
                            op["kv_heads"],
                            op["q_rows"],
                            op["kv_rows"],
                            if op["masked"] == true {
                                "masked"
                            } else {
                                "no mask"
                            }
                        );
                    } else {
                        let nodes: Vec<String> = op["nodes"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(k, v)| format!("{k}: {v}"))
                            .collect();
                        println!(
                            "    XNNPACK graph (segment {}), {} packed filters; nodes: {}",
                            op["segment"],
                            op["packed_filters"],
                            nodes.join(", ")
                        );
                    }
                }
                continue;
            }
            println!("  delegate #{} {}: {} payload bytes, scratch {} bytes, plan {} bytes, {} constants in place",
                r["index"], r["backend"].as_str().unwrap_or("?"), r["payload_bytes"], r["scratch_bytes"], r["plan_bytes"], r["constants"]);
            if let Some(e) = r["error"].as_str() {
                println!("    error: {e}");
            }
            println!("    inputs: {}", list("inputs"));
            println!("    outputs: {}", list("outputs"));
            let nodes: Vec<String> = r["nodes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            println!("    nodes: {}", nodes.join(", "));
        }
        let mut ops: Vec<(&String, u64)> = m["operators"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k, v.as_u64().unwrap_or(0)))
            .collect();
        ops.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        if !ops.is_empty() {
            println!("  kernel calls per operator:");
            for (k, v) in ops {
                println!("    {k}: {v}");
            }
        }
        match m["unresolved"].as_str() {
            Some(e) => println!("  not runnable here: {e}"),
            None => println!("  runnable: yes"),
        }
    }
    Ok(())
}
