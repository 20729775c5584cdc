//! Writes the seed corpora of every target from the fixtures: `seed REPO_ROOT CORPUS_DIR`.
//! `load` and `execute` get the fixture programs and the lowered hosts; `xnnpack` and
//! `lowered` the delegate payloads extracted from their hosts (first byte: the host index);
//! `npy` the fixtures' `.npy` files; `bundled` the BundledProgram fixtures; `etdump` the
//! ETDumps of a forward of three fixtures; `structured` a few deterministic byte strings;
//! every target its regression inputs from `tests/fuzz-regressions/`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use ptera::host::AlignedBuf;
use ptera::{Program, Registry};
use ptera_fuzz::{LOWERED_HOSTS, XNNPACK_HOSTS};

/// Writes `bytes` as `dir/name` unless the same bytes were already written there.
fn put(dir: &Path, seen: &mut BTreeSet<Vec<u8>>, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    if seen.insert(bytes.to_vec()) {
        fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

/// The payloads of every delegate of every method of `program` with backend id `id`.
fn payloads(program: &[u8], id: &str) -> Vec<Vec<u8>> {
    let buf = AlignedBuf::from_bytes(program);
    let Ok(p) = Program::load(buf.as_slice()) else {
        return Vec::new();
    };
    let reg = Registry::standard();
    let mut out = Vec::new();
    for plan in p.methods() {
        for (d, del) in plan.delegates().into_iter().flatten().enumerate() {
            if let Ok((backend, payload)) = reg.delegate(&p, d, del) {
                if backend.id() == id {
                    out.push(payload.to_vec());
                }
            }
        }
    }
    out
}

/// The ETDump of one forward of fixture `case` (its own inputs; a clock counting its calls),
/// with the method's load, or `None` when something refuses.
fn etdump_of(fixtures: &Path, case: &str) -> Option<Vec<u8>> {
    use ptera::devtools::etdump::{encode_with_load, Event, Load, Recorder};
    let buf = AlignedBuf::read(fixtures.join(format!("{case}.pte"))).ok()?;
    let program = Program::load(buf.as_slice()).ok()?;
    let reg = Registry::standard();
    let meta = ptera::MethodMeta::new(&program, "forward", &reg).ok()?;
    let plan = meta.plan();
    let mut bufs = ptera::OwnedArenas::for_meta(&meta).ok()?;
    let mut method = bufs.load(meta, &reg).ok()?;
    for i in 0.. {
        let Ok(bytes) = fs::read(fixtures.join(format!("{case}.in{i}.npy"))) else {
            break;
        };
        let t = ptera::host::npy::parse(&bytes).ok()?;
        let dtype = match (t.kind, t.item_size) {
            (b'f', 4) => ptera::DType::F32,
            (b'i', 8) => ptera::DType::I64,
            (b'i', 4) => ptera::DType::I32,
            (b'b', 1) => ptera::DType::Bool,
            _ => return None,
        };
        let shape = ptera::Shape::new(&t.shape)?;
        method.set_input(i, dtype, &shape, t.data).ok()?;
    }
    let mut events = vec![Event::EMPTY; 4096];
    let mut tick = 1000u64;
    let mut rec = Recorder::new(plan, &mut events, || {
        tick += 7;
        tick
    });
    method.execute_observed(&mut rec).ok()?;
    let recorded = rec.events().to_vec();
    let mut positions = vec![[0u32; 2]; recorded.len()];
    let mut out = vec![0u8; 1 << 20];
    let load = Load {
        load_method: (10, 900),
        init: (100, 900),
    };
    let n = encode_with_load(plan, Some(load), &[&recorded], &mut positions, &mut out).ok()?;
    out.truncate(n);
    Some(out)
}

fn with_host(h: usize, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![h as u8];
    v.extend_from_slice(payload);
    v
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: seed REPO_ROOT CORPUS_DIR");
        std::process::exit(2);
    }
    let fixtures = PathBuf::from(&args[1]).join("tests/fixtures");
    let corpus = PathBuf::from(&args[2]);
    let dir = |t: &str| -> std::io::Result<PathBuf> {
        let d = corpus.join(t);
        fs::create_dir_all(&d)?;
        Ok(d)
    };
    let mut files: Vec<PathBuf> = fs::read_dir(&fixtures)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();

    let (load, execute, npy) = (dir("load")?, dir("execute")?, dir("npy")?);
    let (mut seen_load, mut seen_exec, mut seen_npy) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for f in &files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        if name.ends_with(".pte") {
            let bytes = fs::read(f)?;
            put(&load, &mut seen_load, &name, &bytes)?;
            put(&execute, &mut seen_exec, &name, &bytes)?;
        } else if name.ends_with(".npy") {
            put(&npy, &mut seen_npy, &name, &fs::read(f)?)?;
        }
    }
    for (name, bytes) in LOWERED_HOSTS {
        put(&load, &mut seen_load, &format!("{name}.pte"), bytes)?;
        put(&execute, &mut seen_exec, &format!("{name}.pte"), bytes)?;
    }

    let xnn = dir("xnnpack")?;
    let mut seen = BTreeSet::new();
    for (h, (name, host)) in XNNPACK_HOSTS.iter().enumerate() {
        for (k, p) in payloads(host, ptera::delegate::xnnpack::ID)
            .iter()
            .enumerate()
        {
            put(&xnn, &mut seen, &format!("{name}.{k}"), &with_host(h, p))?;
        }
    }
    let low = dir("lowered")?;
    let mut seen_low = BTreeSet::new();
    for (h, (name, host)) in LOWERED_HOSTS.iter().enumerate() {
        for (k, p) in payloads(host, ptera::delegate::ptera::ID)
            .iter()
            .enumerate()
        {
            put(
                &low,
                &mut seen_low,
                &format!("{name}.{k}"),
                &with_host(h, p),
            )?;
        }
    }

    let bp = dir("bundled")?;
    let mut seen_bp = BTreeSet::new();
    let bundled = fixtures.join("bundled");
    let mut bpte: Vec<PathBuf> = fs::read_dir(&bundled)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bpte"))
        .collect();
    bpte.sort();
    for f in &bpte {
        if let Some(name) = f.file_name().map(|n| n.to_string_lossy().into_owned()) {
            put(&bp, &mut seen_bp, &name, &fs::read(f)?)?;
        }
    }

    // ETDumps of a forward of a few fixtures, as `cargo xtask run --etdump` writes them.
    let ed = dir("etdump")?;
    let mut seen_ed = BTreeSet::new();
    for case in ["gpt2_xnnpack", "opt_portable", "mlp_portable"] {
        if let Some(file) = etdump_of(&fixtures, case) {
            put(&ed, &mut seen_ed, &format!("{case}.etdp"), &file)?;
        }
    }

    let st = dir("structured")?;
    let mut seen_st = BTreeSet::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for k in 0..32 {
        let bytes: Vec<u8> = (0..64 + 8 * k)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        put(&st, &mut seen_st, &format!("random.{k}"), &bytes)?;
    }
    // Regression inputs (`tests/fuzz-regressions/TARGET-NAME.bin`) seed their target too.
    let regressions = PathBuf::from(&args[1]).join("tests/fuzz-regressions");
    for e in fs::read_dir(&regressions).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((target, _)) = name.split_once('-') else {
            continue;
        };
        let d = corpus.join(target);
        if d.is_dir() {
            fs::write(d.join(&name), fs::read(e.path())?)?;
        }
    }
    let count = |d: &Path| fs::read_dir(d).map_or(0, |r| r.count());
    for t in [
        "load",
        "execute",
        "xnnpack",
        "lowered",
        "npy",
        "structured",
        "bundled",
        "etdump",
    ] {
        println!("{t}: {} seeds", count(&corpus.join(t)));
    }
    Ok(())
}
