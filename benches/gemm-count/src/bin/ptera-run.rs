//! `ptera-run [--isa ISA] MODEL.pte N OUTDIR|- [IN0.npy IN1.npy ...]`: ptera's counterpart of
//! armpeer's `etrun` (`../shared/tools/armpeer/src/etrun.cpp`), with the same command line and
//! the same phase marks, so `armpeer/measure.sh` and `tbcount` count it unchanged.
//!
//! Phases, split by calls to the never-inlined `etrun_mark(phase)`:
//! - start-up (before `etrun_mark(-1)`): argument parsing, `.npy` inputs read, ISA chosen;
//! - load (before `etrun_mark(0)`): file read, `Program::load`, `MethodMeta::new`, arenas,
//!   `Method::load` (the XNNPACK delegate translates its graph here);
//! - forward k (before `etrun_mark(k)`): `set_input` for every input, then `execute`.
//!
//! `measure.sh` reports phase 3, the second forward. After the last forward every output K is
//! written as `OUTDIR/output-K.npy` (skipped when N is 0 or OUTDIR is `-`). Nothing is printed
//! on stdout (under `measure.sh` the guest's stdout is the QEMU trace); errors go to stderr.
//!
//! ISA: detected at run time unless one is forced (`generic|neon|sve2|sme|sme2`), in this order
//! of precedence: a leading `--isa ISA` argument; the program's file name `ptera-run@ISA` (a
//! symlink or copy); the environment variable `PTERA_ISA`. `measure.sh` starts the guest with
//! `env -i` and a fixed argument list, so under it use the name: `ln -s ptera-run
//! ptera-run@neon` and pass that path as RUNNER (what `scripts/armpeer.sh --isa` does). A forced
//! ISA the CPU cannot run is an error, not a fallback. With `ETRUN_VERBOSE` or `ETRUN_MAPS` set,
//! the ISA in use and the SVE / SME vector lengths are printed on stderr (`ptera-run: isa NAME
//! [sve-vl BITS] [sme-svl BITS]`), before the memory map that `ETRUN_MAPS` asks for.
//!
//! Weights: the XNNPACK regions' fp32 filters are packed at load (`Registry::packing`, as
//! ExecuTorch's XNNPACK packs them in its load phase); `PTERA_WEIGHTS=in-place` reads them in
//! place and packs per product instead (`Registry::standard`, what the firmware does).
//!
//! Threads: `PTERA_THREADS=N` (N > 1) creates the engine's thread team during start-up and
//! runs every forward with it installed. The second forward (phase 3) is then also bracketed
//! by `ptera_mark_forward_begin`/`_end`, which `cargo xtask trace-cores` finds in a qemu-user
//! execution trace to count each thread (`scripts/armpeer.sh --threads N`).

// ptera::Error carries its context inline (no allocation); it only travels on failure paths.
#![allow(clippy::result_large_err)]

use std::fs;
use std::path::Path;
use std::process::exit;

use ptera::host::AlignedBuf;
use ptera::linalg::gemm::select::{self, Isa};
use ptera::Registry;
use ptera::{DType, MethodMeta, OwnedArenas, Program, Shape};

/// Phase marker: an empty function with its own symbol, called after start-up (-1), after
/// loading (0) and after forward k (k). Same name and role as in `etrun.cpp`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn etrun_mark(phase: i64) {
    std::hint::black_box(phase);
}

/// Marks around the second forward (phase 3) for per-thread counts; distinct bodies, so never
/// folded into one address.
#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_begin() {
    std::hint::black_box(0x4245_4749_u32);
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_end() {
    std::hint::black_box(0x454e_4421_u32);
}

const USAGE: &str = "usage: ptera-run [--isa ISA] MODEL.pte N OUTDIR|- [IN0.npy ...]";

fn die(msg: impl std::fmt::Display) -> ! {
    eprintln!("ptera-run: {msg}");
    exit(1)
}

// ---------------------------------------------------------------- .npy I/O --

/// `.npy` dtype strings this runner reads and writes (little-endian or byte-sized).
const NPY_DTYPES: [(&str, DType); 8] = [
    ("<f4", DType::F32),
    ("<f8", DType::F64),
    ("<i8", DType::I64),
    ("<i4", DType::I32),
    ("<i2", DType::I16),
    ("|i1", DType::I8),
    ("|u1", DType::U8),
    ("|b1", DType::Bool),
];

struct Npy {
    dtype: DType,
    shape: Shape,
    data: Vec<u8>,
}

/// The raw text of `'key': value` in a header dict: a quoted string (without quotes), a
/// parenthesised tuple (with parentheses), or a bare word up to the next `,` or `}`.
fn npy_field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(s) = rest.strip_prefix('\'') {
        return Some(&s[..s.find('\'')?]);
    }
    if rest.starts_with('(') {
        return Some(&rest[..rest.find(')')? + 1]);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Reads a C-order `.npy` file (format versions 1, 2 and 3).
fn read_npy(path: &str) -> Result<Npy, String> {
    let bytes = fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(format!("{path}: not an .npy file"));
    }
    let (hlen, off) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("{path}: unsupported .npy version {v}")),
    };
    let header = bytes
        .get(off..off + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| format!("{path}: truncated or non-text header"))?;
    let descr = npy_field(header, "descr").ok_or_else(|| format!("{path}: no descr"))?;
    let dtype = NPY_DTYPES
        .iter()
        .find(|(d, _)| *d == descr)
        .map(|&(_, t)| t)
        .ok_or_else(|| format!("{path}: unsupported dtype '{descr}'"))?;
    if npy_field(header, "fortran_order") != Some("False") {
        return Err(format!("{path}: only C-order arrays are supported"));
    }
    let shape_text = npy_field(header, "shape")
        .and_then(|s| s.strip_prefix('(')?.strip_suffix(')'))
        .ok_or_else(|| format!("{path}: bad shape"))?;
    let mut dims = Vec::new();
    for d in shape_text
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        dims.push(
            d.parse::<usize>()
                .map_err(|_| format!("{path}: bad dimension '{d}'"))?,
        );
    }
    let shape = Shape::new(&dims).ok_or_else(|| format!("{path}: rank {} > 16", dims.len()))?;
    let nbytes = dims
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("{path}: size overflow"))?;
    let data = bytes
        .get(off + hlen..off + hlen + nbytes)
        .ok_or_else(|| format!("{path}: truncated data ({nbytes} bytes expected)"))?
        .to_vec();
    Ok(Npy { dtype, shape, data })
}

/// Writes a version 1.0 `.npy` file (C order, header padded to a multiple of 64 bytes).
fn write_npy(path: &Path, dtype: DType, dims: &[usize], data: &[u8]) -> Result<(), String> {
    let descr = NPY_DTYPES
        .iter()
        .find(|(_, t)| *t == dtype)
        .map(|(d, _)| *d)
        .ok_or_else(|| format!("output dtype {} not supported for .npy", dtype.name()))?;
    let shape = match dims {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let unpadded = 10 + header.len() + 1;
    header.extend(std::iter::repeat_n(' ', (64 - unpadded % 64) % 64));
    header.push('\n');
    let hlen = u16::try_from(header.len()).map_err(|_| "npy header too long".to_string())?;
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&hlen.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

// ------------------------------------------------------------------- main --

/// ` sve-vl BITS` and ` sme-svl BITS` for the units the CPU has (empty elsewhere).
fn vector_lengths() -> String {
    #[allow(unused_mut)]
    let mut s = String::new();
    #[cfg(target_arch = "aarch64")]
    {
        let f = ptera::linalg::cpu::features();
        if f.sve {
            // SAFETY: `cntw` needs SVE, which the ID registers report as present and enabled.
            s += &format!(
                " sve-vl {}",
                unsafe { ptera::linalg::gemm::arm::sve::cntw() } * 32
            );
        }
        if f.sme {
            s += &format!(
                " sme-svl {}",
                ptera::linalg::gemm::arm::sme::svl_bytes() * 8
            );
        }
    }
    s
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let name_isa = args
        .first()
        .and_then(|a| Path::new(a).file_name()?.to_str()?.split_once('@'))
        .map(|(_, isa)| ("program name", isa.to_string()));
    if !args.is_empty() {
        args.remove(0);
    }
    let mut isa_arg = None;
    if args.first().map(String::as_str) == Some("--isa") {
        if args.len() < 2 {
            die(USAGE);
        }
        isa_arg = Some(args[1].clone());
        args.drain(..2);
    }
    if args.len() < 3 {
        eprintln!("{USAGE}");
        exit(2);
    }
    let model = &args[0];
    let iters: u64 = args[1]
        .parse()
        .unwrap_or_else(|_| die(format!("N must be an integer >= 0, got '{}'", args[1])));
    let outdir = &args[2];

    // Start-up, like etrun: inputs are read before the first mark (harness work).
    let inputs: Vec<Npy> = args[3..]
        .iter()
        .map(|p| read_npy(p).unwrap_or_else(|e| die(e)))
        .collect();

    let forced = isa_arg
        .map(|v| ("--isa", v))
        .or(name_isa)
        .or_else(|| std::env::var("PTERA_ISA").ok().map(|v| ("PTERA_ISA", v)));
    if let Some((from, name)) = forced {
        let isa = Isa::parse(&name).unwrap_or_else(|| {
            die(format!(
                "{from}: unknown ISA '{name}' (generic|neon|sve2|sme|sme2)"
            ))
        });
        select::force(isa).unwrap_or_else(|e| die(format!("{from}: {e}")));
    }
    // Detection (ID register reads) happens here, not inside the first forward.
    let isa = select::selected();
    let maps = std::env::var_os("ETRUN_MAPS").is_some();
    if maps || std::env::var_os("ETRUN_VERBOSE").is_some() {
        eprintln!("ptera-run: isa {}{}", isa.name(), vector_lengths());
    }
    // Weights: packed at load like ExecuTorch's XNNPACK (default), or read in place.
    let registry = match std::env::var("PTERA_WEIGHTS").as_deref() {
        Ok("in-place") => Registry::standard(),
        Ok("packed") | Err(_) => Registry::packing(),
        Ok(v) => die(format!(
            "PTERA_WEIGHTS must be 'packed' or 'in-place', got '{v}'"
        )),
    };
    let threads: usize = match std::env::var("PTERA_THREADS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n: &usize| n >= 1)
            .unwrap_or_else(|| die(format!("PTERA_THREADS must be a number >= 1, got '{v}'"))),
        Err(_) => 1,
    };
    let team = (threads > 1).then(|| {
        ptera::parallel::threads::ThreadTeam::new(threads, ptera::linalg::gemm::GEMM_SCRATCH_F32)
    });
    etrun_mark(-1); // end of start-up

    let file = AlignedBuf::read(model).unwrap_or_else(|e| die(format!("cannot read {model}: {e}")));
    let program = Program::load(file.as_slice()).unwrap_or_else(|e| die(format!("load: {e}")));
    let meta = MethodMeta::new(&program, "forward", &registry)
        .unwrap_or_else(|e| die(format!("method 'forward': {e}")));
    if inputs.len() != meta.num_inputs() {
        die(format!(
            "method takes {} inputs, {} given",
            meta.num_inputs(),
            inputs.len()
        ));
    }
    let mut bufs = OwnedArenas::for_meta(&meta).unwrap_or_else(|e| die(e));
    // Loaded with the team installed: the products' splits are decided for it at load.
    let loaded = match &team {
        Some(t) => ptera::parallel::scoped(t, || bufs.load(meta, &registry)),
        None => bufs.load(meta, &registry),
    };
    let mut method = loaded.unwrap_or_else(|e| die(format!("load_method: {e}")));
    etrun_mark(0); // end of load

    for it in 0..iters {
        if it == 1 {
            ptera_mark_forward_begin();
        }
        for (i, inp) in inputs.iter().enumerate() {
            method
                .set_input(i, inp.dtype, &inp.shape, &inp.data)
                .unwrap_or_else(|e| die(format!("set_input({i}): {e}")));
        }
        let done = match &team {
            Some(t) => ptera::parallel::scoped(t, || method.execute()),
            None => method.execute(),
        };
        done.unwrap_or_else(|e| die(format!("execute: {e}")));
        if it == 1 {
            ptera_mark_forward_end();
        }
        etrun_mark(it as i64 + 1); // end of forward it+1
    }

    if iters > 0 && outdir != "-" {
        for k in 0..method.num_outputs() {
            let t = method.output(k).unwrap_or_else(|e| die(e));
            if t.dim_order()
                .iter()
                .enumerate()
                .any(|(i, &d)| d as usize != i)
            {
                die(format!(
                    "output {k} is not contiguous (dim order {:?})",
                    t.dim_order()
                ));
            }
            let path = Path::new(outdir).join(format!("output-{k}.npy"));
            write_npy(&path, t.dtype(), t.dims(), t.bytes()).unwrap_or_else(|e| die(e));
        }
    }
    if maps {
        // Guest memory map, for attributing hot code (as etrun does).
        match fs::read_to_string("/proc/self/maps") {
            Ok(m) => eprint!("{m}"),
            Err(e) => die(format!("/proc/self/maps: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let dir = std::env::temp_dir().join(format!("ptera-run-npy-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        for dims in [&[][..], &[3][..], &[2, 3][..], &[1, 2, 1, 2][..]] {
            let n: usize = dims.iter().product();
            let data: Vec<u8> = (0..n * 8).map(|i| i as u8).collect();
            let p = dir.join("x.npy");
            write_npy(&p, DType::I64, dims, &data).unwrap();
            let r = read_npy(p.to_str().unwrap()).unwrap();
            assert_eq!(r.dtype, DType::I64);
            assert_eq!(r.shape.dims(), dims);
            assert_eq!(r.data, data);
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn header_fields() {
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 16), }";
        assert_eq!(npy_field(h, "descr"), Some("<f4"));
        assert_eq!(npy_field(h, "fortran_order"), Some("False"));
        assert_eq!(npy_field(h, "shape"), Some("(1, 16)"));
        assert_eq!(npy_field(h, "missing"), None);
    }
}
