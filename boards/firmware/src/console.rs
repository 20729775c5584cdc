//! The console protocol: everything the firmware tells the host travels over the board's UART as
//! packets `0xA5, channel, len_lo, len_hi, payload[len]`, so that boot-loader text before the
//! first packet (U-Boot, Pi firmware) is skipped and logs, tensors and the final report can be
//! told apart. `cargo xtask qemu` decodes them (xtask/src/baremetal/console.rs).
//!
//! | channel | payload |
//! |---|---|
//! | 0 `LOG` | a chunk of the defmt stream (rzcobs frames) |
//! | 1 `TENSOR_BEGIN` | output index u32, ScalarType u8, rank u8, dims u64 × rank |
//! | 2 `TENSOR_DATA` | element bytes (little-endian, C order), in order |
//! | 3 `TENSOR_END` | output index u32, byte count u64, FNV-1a 32 of the bytes |
//! | 4 `DONE` | [`Report`] (see [`done`]) — the last packet of a run |
//! | 5 `TEXT` | UTF-8 text (panics, exceptions) |
//! | 6 `HELLO` | `ptera-fw/1`, the first packet |
//! | 7 `BENCH` | GEMM bench result (feature `gemm-bench`, layout in `gemm_bench::send`), before DONE |
//! | 8 `ETDUMP` | the forward's ETDump file (feature `etdump`, `profile.rs`), before DONE |
//! | 9 `CASE` | one BundledProgram test case checked on the board (layout in [`case`]) |
//!
//! All integers little-endian.

use core::cell::UnsafeCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::board;

const SYNC: u8 = 0xA5;
const LOG: u8 = 0;
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // outputs: model runs only
const TENSOR_BEGIN: u8 = 1;
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // outputs: model runs only
const TENSOR_DATA: u8 = 2;
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // outputs: model runs only
const TENSOR_END: u8 = 3;
const DONE: u8 = 4;
const TEXT: u8 = 5;
const HELLO: u8 = 6;
#[cfg(feature = "gemm-bench")]
const BENCH: u8 = 7;
#[cfg(feature = "etdump")]
const ETDUMP: u8 = 8;
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // bundled programs: model runs only
const CASE: u8 = 9;

/// How a run ended; also the QEMU exit code.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Status {
    Ok = 0,
    /// The engine returned a typed error (logged with its stage).
    EngineError = 1,
    /// A BundledProgram test case gave outputs outside its tolerance.
    #[cfg_attr(feature = "gemm-bench", allow(dead_code))] // bundled programs: model runs only
    TestFailed = 2,
    /// An unexpected CPU exception.
    Exception = 3,
    Panic = 101,
}

/// What the core offers, as reported to the host (the architecture's `cpu::enable_simd`).
#[derive(Clone, Copy)]
pub struct Features {
    /// Exception level (AArch64) or privilege level (ARMv7-A) the firmware runs at.
    pub el: u32,
    pub midr: u64,
    /// SVE vector length after enabling (0: no SVE).
    pub sve_vl_bits: u32,
    /// SME streaming vector length after enabling (0: no SME).
    pub sme_svl_bits: u32,
}

pub struct Report {
    pub status: Status,
    pub cntfrq: u64,
    pub load_ticks: u64,
    pub execute_ticks: u64,
    pub features: Features,
    pub heap_used: u32,
    pub stack_used: u32,
    /// Name of the GEMM micro-kernel ISA the engine selected.
    pub isa: &'static str,
    /// Cores that ran the forward.
    pub cores: u32,
}

fn packet(channel: u8, payload: &[u8]) {
    let uart = board::console();
    let mut rest = payload;
    loop {
        let n = rest.len().min(u16::MAX as usize);
        let (chunk, tail) = rest.split_at(n);
        let len = (n as u16).to_le_bytes();
        for b in [SYNC, channel, len[0], len[1]] {
            uart.write_byte(b);
        }
        for &b in chunk {
            uart.write_byte(b);
        }
        rest = tail;
        if rest.is_empty() {
            break;
        }
    }
}

/// Small fixed buffer for building one packet's payload.
struct Buf<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Buf<N> {
    fn new() -> Self {
        Buf {
            bytes: [0; N],
            len: 0,
        }
    }
    fn put(&mut self, b: &[u8]) -> &mut Self {
        let end = (self.len + b.len()).min(N);
        self.bytes[self.len..end].copy_from_slice(&b[..end - self.len]);
        self.len = end;
        self
    }
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

pub fn hello() {
    packet(HELLO, b"ptera-fw/1");
}

/// The GEMM bench result (feature `gemm-bench`).
#[cfg(feature = "gemm-bench")]
pub fn bench(payload: &[u8]) {
    packet(BENCH, payload);
}

/// The forward's ETDump file (feature `etdump`); a long file travels as several packets.
#[cfg(feature = "etdump")]
pub fn etdump(file: &[u8]) {
    packet(ETDUMP, file);
}

/// One checked BundledProgram test case: case index u32, outputs u32, elements outside the
/// tolerance u64, largest |diff| f64 (bits), at output u32 element u64, method name (length u8,
/// bytes).
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // bundled programs: model runs only
pub fn case(method: &str, index: u32, o: &ptera::devtools::bundled::Outcome) {
    let name = &method.as_bytes()[..method.len().min(64)];
    let mut b = Buf::<{ 4 + 4 + 8 + 8 + 4 + 8 + 1 + 64 }>::new();
    b.put(&index.to_le_bytes())
        .put(&(o.outputs as u32).to_le_bytes())
        .put(&(o.mismatches as u64).to_le_bytes())
        .put(&o.worst.to_bits().to_le_bytes())
        .put(&(o.worst_at.0 as u32).to_le_bytes())
        .put(&(o.worst_at.1 as u64).to_le_bytes())
        .put(&[name.len() as u8])
        .put(name);
    packet(CASE, b.as_slice());
}

/// Sends output `index` as begin / data / end packets.
#[cfg_attr(feature = "gemm-bench", allow(dead_code))] // outputs: model runs only
pub fn tensor(index: u32, scalar_type: u8, dims: &[usize], bytes: &[u8]) {
    let mut head = Buf::<{ 6 + 8 * 16 }>::new();
    head.put(&index.to_le_bytes())
        .put(&[scalar_type, dims.len() as u8]);
    for &d in dims {
        head.put(&(d as u64).to_le_bytes());
    }
    packet(TENSOR_BEGIN, head.as_slice());
    packet(TENSOR_DATA, bytes);
    let mut hash: u32 = 0x811c_9dc5;
    for &b in bytes {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let mut end = Buf::<16>::new();
    end.put(&index.to_le_bytes())
        .put(&(bytes.len() as u64).to_le_bytes())
        .put(&hash.to_le_bytes());
    packet(TENSOR_END, end.as_slice());
}

/// The final packet: status u32, CNTFRQ u64, load ticks u64, execute ticks u64, EL u32, MIDR u64,
/// SVE VL bits u32, SME SVL bits u32, heap bytes in use u32, deepest stack use u32, length u8 and
/// bytes of the selected GEMM ISA name.
pub fn done(r: &Report) {
    let mut b = Buf::<96>::new();
    b.put(&(r.status as u32).to_le_bytes())
        .put(&r.cntfrq.to_le_bytes())
        .put(&r.load_ticks.to_le_bytes())
        .put(&r.execute_ticks.to_le_bytes())
        .put(&r.features.el.to_le_bytes())
        .put(&r.features.midr.to_le_bytes())
        .put(&r.features.sve_vl_bits.to_le_bytes())
        .put(&r.features.sme_svl_bits.to_le_bytes())
        .put(&r.heap_used.to_le_bytes())
        .put(&r.stack_used.to_le_bytes())
        .put(&[r.isa.len().min(32) as u8])
        .put(&r.isa.as_bytes()[..r.isa.len().min(32)])
        .put(&r.cores.to_le_bytes());
    packet(DONE, b.as_slice());
    board::console().flush();
}

/// Formats straight into TEXT packets (no buffer): used by the panic and exception paths.
struct TextWriter;

impl Write for TextWriter {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        packet(TEXT, s.as_bytes());
        Ok(())
    }
}

pub fn text(args: core::fmt::Arguments<'_>) {
    let _ = TextWriter.write_fmt(args);
    let _ = TextWriter.write_str("\n");
    board::console().flush();
}

static PANICKING: AtomicBool = AtomicBool::new(false);

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    if !PANICKING.swap(true, Ordering::Relaxed) {
        match info.location() {
            Some(l) => text(format_args!(
                "panicked at {}:{}:{}: {}",
                l.file(),
                l.line(),
                l.column(),
                info.message()
            )),
            None => text(format_args!("panicked: {}", info.message())),
        }
    }
    crate::exit::exit(Status::Panic as u32)
}

// ---- defmt global logger: rzcobs frames as LOG packets ---------------------------------------

#[defmt::global_logger]
struct Logger;

/// The logger's state, used only between `acquire` and `release`.
struct LogState {
    encoder: defmt::Encoder,
    /// Encoded bytes of the current frame, sent as one LOG packet when full and at frame end.
    buf: Buf<256>,
    restore: critical_section::RestoreState,
}

struct LogCell(UnsafeCell<LogState>);

// SAFETY: the state is only reached between `acquire` and `release`, inside a critical section
// (one core, interrupts masked) and guarded against re-entry by TAKEN.
unsafe impl Sync for LogCell {}

static TAKEN: AtomicBool = AtomicBool::new(false);
static LOG_STATE: LogCell = LogCell(UnsafeCell::new(LogState {
    encoder: defmt::Encoder::new(),
    buf: Buf {
        bytes: [0; 256],
        len: 0,
    },
    restore: critical_section::RestoreState::invalid(),
}));

impl Buf<256> {
    fn log(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(256) {
            if self.len + chunk.len() > 256 {
                self.send_log();
            }
            self.put(chunk);
        }
    }

    fn send_log(&mut self) {
        if self.len > 0 {
            packet(LOG, self.as_slice());
            self.len = 0;
        }
    }
}

/// # Safety
/// Only between `acquire` and `release`, which give exclusive access.
unsafe fn log_state() -> &'static mut LogState {
    // SAFETY: exclusive per the function's contract.
    unsafe { &mut *LOG_STATE.0.get() }
}

// SAFETY: `acquire`/`release` bracket every frame inside a critical section and `TAKEN` rejects
// re-entry, so the logger state is never used concurrently.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        // SAFETY: paired with the `release` below, called by defmt once per frame.
        let restore = unsafe { critical_section::acquire() };
        if TAKEN.swap(true, Ordering::Relaxed) {
            panic!("defmt logger re-entered");
        }
        // SAFETY: inside the critical section with TAKEN set we own the state.
        let s = unsafe { log_state() };
        s.restore = restore;
        s.encoder.start_frame(|b| s.buf.log(b));
    }

    unsafe fn flush() {
        board::console().flush();
    }

    unsafe fn release() {
        // SAFETY: defmt calls `release` only after `acquire`, so we own the state.
        let s = unsafe { log_state() };
        s.encoder.end_frame(|b| s.buf.log(b));
        s.buf.send_log();
        let restore = s.restore;
        TAKEN.store(false, Ordering::Relaxed);
        // SAFETY: restores the state saved by the matching `acquire`.
        unsafe { critical_section::release(restore) };
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: called between `acquire` and `release`, which own the state.
        let s = unsafe { log_state() };
        s.encoder.write(bytes, |b| s.buf.log(b));
    }
}
