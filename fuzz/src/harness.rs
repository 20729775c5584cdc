//! What each fuzz target does with its bytes, shared with `tests/fuzz_regressions.rs` (which
//! includes this file) so that a regression input replays exactly the fuzzed path.
//!
//! Everything here behaves like a careful host: sizes that come from the file are checked
//! against fixed budgets before anything is allocated, and every error is a value.
// Errors carry their context by value, as in the library.
#![allow(clippy::result_large_err)]

use ptera::delegate::{Backend, DelegateInit};
use ptera::host::AlignedBuf;
use ptera::{DType, Error, KernelError, MethodMeta, OwnedArenas, Program, Registry};

/// Most bytes of arenas plus metadata a fuzzed method may ask for; above it the method is
/// refused with [`Error::HostAllocation`] before anything is allocated.
pub const MAX_METHOD_BYTES: u64 = 256 << 20;
/// Most bytes of delegate state a fuzzed payload may ask for.
pub const MAX_STATE_BYTES: usize = 64 << 20;
/// Instructions one fuzzed `execute` may run (programs may loop with `JumpFalseCall`).
pub const STEP_LIMIT: u64 = 20_000;

/// How far an input got through the runtime (the last stage it entered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Load,
    Meta,
    Allocate,
    MethodLoad,
    Inputs,
    Execute,
    Outputs,
}

/// `Program::load`, then `MethodMeta::new` for every method; the first error.
pub fn load(bytes: &[u8]) -> Result<(), Error> {
    let buf = AlignedBuf::from_bytes(bytes);
    let program = Program::load(buf.as_slice())?;
    let reg = Registry::standard();
    let mut first = Ok(());
    for plan in program.methods() {
        let name = plan.name().unwrap_or("");
        if let Err(e) = MethodMeta::new(&program, name, &reg) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Input element `i`, small and deterministic, from the file's own bytes.
fn fill_byte(bytes: &[u8], i: usize) -> u8 {
    if bytes.is_empty() {
        0
    } else {
        bytes[(i.wrapping_mul(31) + 7) % bytes.len()]
    }
}

/// Input bytes of `numel` elements of `dtype`: small values (token ids 0..4, floats in
/// [-4, 4)) so that index-like inputs mostly stay in range.
fn fill(dtype: DType, numel: usize, src: &[u8]) -> Vec<u8> {
    let size = dtype.size();
    let mut out = vec![0u8; numel * size];
    for (i, e) in out.chunks_exact_mut(size).enumerate() {
        let b = fill_byte(src, i);
        let small = (b % 5) as i64;
        match dtype {
            DType::F32 => e.copy_from_slice(&((b as i8) as f32 / 32.0).to_le_bytes()),
            DType::F64 => e.copy_from_slice(&((b as i8) as f64 / 32.0).to_le_bytes()),
            // 0x3c00 is 1.0 in both half formats' neighbourhood; vary the low bits a little.
            DType::F16 => e.copy_from_slice(&(0x3c00u16 | (b as u16 & 0xff)).to_le_bytes()),
            DType::BF16 => e.copy_from_slice(&(0x3f80u16 | (b as u16 & 0x3f)).to_le_bytes()),
            DType::Bool => e[0] = b & 1,
            _ => {
                let v = small.to_le_bytes();
                e.copy_from_slice(&v[..size]);
            }
        }
    }
    out
}

/// The whole path: load, validate, allocate (within [`MAX_METHOD_BYTES`]), load the method,
/// set every tensor input from the declared dtype and shape, execute with [`STEP_LIMIT`] and
/// read every output. Runs the first method (or `forward`). Returns the last stage entered
/// and the first error.
pub fn execute(bytes: &[u8]) -> (Stage, Result<(), Error>) {
    let mut stage = Stage::Load;
    let r = execute_inner(bytes, &mut stage);
    (stage, r)
}

fn execute_inner(bytes: &[u8], stage: &mut Stage) -> Result<(), Error> {
    let buf = AlignedBuf::from_bytes(bytes);
    let program = Program::load(buf.as_slice())?;
    let reg = Registry::standard();
    let name = if program.method("forward").is_ok() {
        "forward"
    } else {
        program
            .methods()
            .next()
            .and_then(|p| p.name())
            .unwrap_or("")
    };
    *stage = Stage::Meta;
    let meta = MethodMeta::new(&program, name, &reg)?;
    *stage = Stage::Allocate;
    let total = (0..meta.arena_count())
        .map(|k| meta.arena_size(k))
        .chain([meta.metadata_bytes() as u64])
        .fold(0u64, u64::saturating_add);
    if total > MAX_METHOD_BYTES {
        return Err(Error::HostAllocation { bytes: total });
    }
    let infos: Vec<_> = (0..meta.num_inputs()).map(|i| meta.input(i)).collect();
    let mut bufs = OwnedArenas::for_meta(&meta)?;
    *stage = Stage::MethodLoad;
    let mut method = bufs.load(meta, &reg)?;
    method.set_step_limit(STEP_LIMIT);
    *stage = Stage::Inputs;
    for (i, info) in infos.iter().enumerate() {
        // A non-tensor input cannot be set; `execute` then reports it as not set.
        let Some(info) = info else { continue };
        let numel = info.shape.numel();
        let nbytes = numel.saturating_mul(info.dtype.size());
        if nbytes as u64 > MAX_METHOD_BYTES {
            return Err(Error::HostAllocation {
                bytes: nbytes as u64,
            });
        }
        let data = fill(info.dtype, numel, bytes);
        method.set_input(i, info.dtype, &info.shape, &data)?;
    }
    *stage = Stage::Execute;
    method.execute()?;
    *stage = Stage::Outputs;
    let mut sum = 0u8;
    for i in 0..method.num_outputs() {
        if let Ok(t) = method.output(i) {
            sum = t.bytes().iter().fold(sum, |a, &b| a.wrapping_add(b));
        }
    }
    std::hint::black_box(sum);
    Ok(())
}

/// A host program with room behind it for a fuzzed delegate payload: delegate backends find
/// constants and packed weights in the program and refer to the payload by its offset in
/// the program, so the payload must live inside the program's bytes, as in a real file.
pub struct Host {
    buf: AlignedBuf,
    len: usize,
}

impl Host {
    pub fn new(program: &[u8]) -> Host {
        // Payloads start 16-aligned behind the program, as segments do.
        let len = program.len().div_ceil(16) * 16;
        let mut buf = AlignedBuf::zeroed(len);
        buf.as_mut_slice()[..program.len()].copy_from_slice(program);
        Host { buf, len }
    }

    /// Places `payload` behind the program and runs `f` on the loaded program and the payload.
    pub fn with_payload<R>(
        &mut self,
        payload: &[u8],
        f: impl FnOnce(Program<'_>, &[u8]) -> R,
    ) -> Result<R, Error> {
        let need = self.len + payload.len();
        if self.buf.len() < need {
            let mut grown = AlignedBuf::zeroed(need.max(self.buf.len() * 2));
            grown.as_mut_slice()[..self.len].copy_from_slice(&self.buf.as_slice()[..self.len]);
            self.buf = grown;
        }
        self.buf.as_mut_slice()[self.len..need].copy_from_slice(payload);
        let bytes = &self.buf.as_slice()[..need];
        let program = Program::load(bytes)?;
        Ok(f(program, &bytes[self.len..]))
    }
}

/// A backend's load-time path over a payload: `prepare`, then (state within
/// [`MAX_STATE_BYTES`]) `init` into a zeroed, 16-aligned state area.
pub fn prepare_and_init(
    backend: &dyn Backend,
    program: Program<'_>,
    payload: &[u8],
) -> Result<(), KernelError> {
    let init = DelegateInit {
        program,
        payload,
        index: 0,
    };
    let req = backend.prepare(&init)?;
    if req.state > MAX_STATE_BYTES {
        return Err(KernelError::Unsupported {
            detail: "fuzz host: delegate state above the budget",
        });
    }
    let mut state = AlignedBuf::zeroed(req.state);
    backend.init(&init, state.as_mut_slice())
}

/// The XNNPACK payload reader on its own (header, flatbuffer), then the region summary the
/// inspection tool prints and the backend's translation (values, nodes, constants) with
/// `host` as the program around it.
pub fn xnnpack(host: &mut Host, payload: &[u8]) -> Result<(), KernelError> {
    ptera::delegate::xnnpack::header::parse(payload)?;
    ptera::delegate::xnnpack::graph_of(payload)?;
    host.with_payload(payload, |program, payload| {
        // What `cargo xtask inspect` reads of a region.
        let init = DelegateInit {
            program,
            payload,
            index: 0,
        };
        if let Ok(s) = ptera::delegate::xnnpack::RegionSummary::new(&init) {
            let n = s.node_types().count() + s.externals().count() + s.constant_count();
            std::hint::black_box(n);
        }
        prepare_and_init(&ptera::delegate::xnnpack::BACKEND, program, payload)
    })
    .unwrap_or(Ok(()))
}

/// ptera's own region reader on its own, then the backend's `prepare`/`init` (which decodes
/// every operation, and for a wrapped XNNPACK graph translates it) with `host` around it.
pub fn lowered(host: &mut Host, payload: &[u8]) -> Result<(), KernelError> {
    ptera::delegate::ptera::region_of(payload)?;
    let _ = ptera::delegate::ptera::packed_for(payload);
    host.with_payload(payload, |program, payload| {
        prepare_and_init(&ptera::delegate::ptera::BACKEND, program, payload)
    })
    .unwrap_or(Ok(()))
}

/// A BundledProgram file (`.bpte`): `format::bundled` verifies it and borrows its program, then
/// every suite's method is loaded (sizes checked against the budget) and every test case runs
/// and is compared (`devtools::bundled::run_case`); returns how many cases ran.
pub fn bundled(bytes: &[u8]) -> Result<usize, Error> {
    use ptera::devtools::bundled::run_case;
    use ptera::format::bundled::Bundled;
    let buf = AlignedBuf::from_bytes(bytes);
    let bundled = Bundled::load(buf.as_slice())?;
    let program = Program::load(bundled.program())?;
    let reg = Registry::standard();
    let mut ran = 0;
    for suite in bundled.suites() {
        let meta = MethodMeta::new(&program, suite.method(), &reg)?;
        let total = (0..meta.arena_count())
            .map(|k| meta.arena_size(k))
            .chain([meta.metadata_bytes() as u64])
            .fold(0u64, u64::saturating_add);
        if total > MAX_METHOD_BYTES {
            return Err(Error::HostAllocation { bytes: total });
        }
        let mut bufs = OwnedArenas::for_meta(&meta)?;
        let mut method = bufs.load(meta, &reg)?;
        method.set_step_limit(STEP_LIMIT);
        for case in suite.cases() {
            // A failing comparison is an outcome, not an error; errors end the file.
            let outcome = run_case(&mut method, &case, 1e-4, 1e-4)?;
            std::hint::black_box(outcome);
            ran += 1;
        }
    }
    Ok(ran)
}

/// An ETDump file as the host tools read one (`cargo xtask profile --board`, `inspect --graph
/// --etdump`): the verified root, then every run's events and their fields. Returns the
/// events seen, or `None` when the verifier refuses the file.
pub fn etdump(bytes: &[u8]) -> Option<usize> {
    use ptera::format::etdump_fb;
    let dump = etdump_fb::size_prefixed_root_as_etdump(bytes).ok()?;
    let mut seen = 0usize;
    let mut sum = 0u64;
    for run in dump.run_data().into_iter().flatten() {
        sum = sum.wrapping_add(run.name().map_or(0, str::len) as u64);
        for e in run.events().into_iter().flatten() {
            if let Some(p) = e.profile_event() {
                let d = p.end_time().wrapping_sub(p.start_time());
                let k =
                    p.name().map_or(0, str::len) + p.delegate_debug_id_str().map_or(0, str::len);
                sum = sum
                    .wrapping_add(d)
                    .wrapping_add(k as u64)
                    .wrapping_add(p.instruction_id() as u64)
                    .wrapping_add(p.chain_index() as u64);
            }
            seen += 1;
        }
    }
    std::hint::black_box(sum);
    Some(seen)
}
