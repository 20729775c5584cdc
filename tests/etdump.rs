//! ETDump profiles: a run recorded by `devtools::etdump::Recorder` and written by `encode`
//! (no heap, caller buffers) reads back with the ETDump schema (size prefix, `ED00`, version 0)
//! and holds the events ExecuTorch's runtime would: every executed instruction in order, every
//! delegate-region operation before its `DELEGATE_CALL`, `Method::execute` last.

mod common;

use common::*;
use ptera::devtools::etdump::{encode, Event, Full, Kind, Recorder};
use ptera::format::etdump_fb;
use ptera::format::fb;
use ptera::{MethodMeta, OwnedArenas, Program, Registry, Shape};

/// Runs `case` once with a recorder whose clock counts its own calls; returns the plan's
/// kernel/delegate call counts, the region operations seen and the written file.
fn profile(case: &str) -> (usize, usize, usize, Vec<u8>) {
    let bytes = pte(case);
    let reg = Registry::standard();
    let program = Program::load(bytes.as_slice()).unwrap();
    let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
    let plan = meta.plan();
    let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
    let mut method = bufs.load(meta, &reg).unwrap();
    for (i, inp) in inputs(case).iter().enumerate() {
        method
            .set_input(i, inp.dtype, &Shape::new(&inp.shape).unwrap(), &inp.bytes)
            .unwrap();
    }
    let mut events = vec![Event::EMPTY; 4096];
    let mut tick = 0u64;
    let mut rec = Recorder::new(plan, &mut events, || {
        tick += 10;
        tick
    });
    method.execute_observed(&mut rec).unwrap();
    assert_eq!(rec.dropped(), 0);
    let recorded = rec.events().to_vec();
    let (mut kernels, mut delegates, mut ops) = (0, 0, 0);
    for e in &recorded {
        match e.kind {
            Kind::Operator => kernels += 1,
            Kind::Delegate => delegates += 1,
            Kind::RegionOp => ops += 1,
            Kind::Execute => {}
        }
        assert!(e.start <= e.end, "{case}: {e:?}");
    }
    let mut positions = vec![[0u32; 2]; recorded.len()];
    // Too small a buffer is a typed error, not a panic.
    let mut tiny = [0u8; 64];
    assert_eq!(
        encode(plan, &[&recorded], &mut positions, &mut tiny),
        Err(Full)
    );
    let mut out = vec![0u8; 1 << 20];
    let n = encode(plan, &[&recorded], &mut positions, &mut out).unwrap();
    out.truncate(n);
    (kernels, delegates, ops, out)
}

fn check(case: &str) {
    let (kernels, delegates, ops, file) = profile(case);
    // Size prefix, then identifier ED00 at bytes 8..12.
    assert_eq!(
        u32::from_le_bytes(file[..4].try_into().unwrap()) as usize,
        file.len() - 4
    );
    assert_eq!(&file[8..12], b"ED00");
    let dump = etdump_fb::size_prefixed_root_as_etdump(&file).unwrap();
    assert_eq!(dump.version(), 0);
    let runs = dump.run_data().unwrap();
    assert_eq!(runs.len(), 1);
    let run = runs.get(0);
    assert_eq!(run.name(), Some("Execute"));
    assert_eq!(run.bundled_input_index(), -1);
    let events: Vec<_> = run
        .events()
        .unwrap()
        .iter()
        .map(|e| e.profile_event().unwrap())
        .collect();
    assert_eq!(events.len(), 2 * kernels + delegates + ops + 1, "{case}");
    // Program order: instruction ids never go back; a region's operations carry their
    // index and kind and come right before the region's DELEGATE_CALL.
    let bytes = pte(case);
    let program = Program::load(bytes.as_slice()).unwrap();
    let plan = program.methods().next().unwrap();
    let instrs = plan.chains().unwrap().get(0).instructions().unwrap();
    let names: Vec<String> = plan
        .operators()
        .unwrap()
        .iter()
        // ExecuTorch's event names drop the operator's namespace (aten::, dim_order_ops::).
        .map(|o| {
            let name = o.name().unwrap();
            let short = name.rsplit("::").next().unwrap();
            format!("{short}.{}", o.overload().unwrap())
        })
        .collect();
    let mut last_pc = 0;
    let mut pending_ops = 0;
    let mut seen_pcs = std::collections::BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        assert!(e.start_time() <= e.end_time());
        if i == events.len() - 1 {
            assert_eq!(e.name(), Some("Method::execute"));
            assert_eq!((e.chain_index(), e.instruction_id()), (-1, 0));
            continue;
        }
        let pc = e.instruction_id();
        assert!(pc >= last_pc, "{case}: event {i} goes back to {pc}");
        last_pc = pc;
        seen_pcs.insert(pc);
        let ins = instrs.get(pc as usize);
        match e.name() {
            None => {
                let id = e.delegate_debug_id_str().unwrap();
                let (kind, index) = id.split_once(" #").unwrap();
                assert!(!kind.is_empty() && index.parse::<u32>().is_ok(), "{id}");
                assert_eq!(
                    ins.instr_args_type(),
                    fb::InstructionArguments::DelegateCall
                );
                pending_ops += 1;
            }
            Some("DELEGATE_CALL") => {
                assert_eq!(
                    ins.instr_args_type(),
                    fb::InstructionArguments::DelegateCall
                );
                pending_ops = 0;
            }
            Some("OPERATOR_CALL") => {
                // Its native_call event came just before, for the same instruction.
                let prev = events[i - 1];
                let op = ins.instr_args_as_kernel_call().unwrap().op_index() as usize;
                assert_eq!(prev.name().unwrap(), format!("native_call_{}", names[op]));
                assert_eq!(prev.instruction_id(), pc);
            }
            Some(n) => assert!(n.starts_with("native_call_"), "{case}: {n}"),
        }
    }
    assert_eq!(
        pending_ops, 0,
        "{case}: region operations after the last region"
    );
    assert_eq!(
        seen_pcs.len(),
        instrs.len(),
        "{case}: every instruction profiled"
    );
}

#[test]
fn etdump_of_portable_and_delegated_programs_reads_back() {
    for case in [
        "gpt2_portable",
        "gpt2_xnnpack",
        "mlp_xnnpack",
        "cnn_portable",
    ] {
        check(case);
    }
}
