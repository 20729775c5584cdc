//! ETDump on the board (feature `etdump`, `cargo xtask qemu --etdump FILE`): the forward runs
//! under the engine's `devtools::etdump::Recorder` into static event storage sized by xtask
//! (`ETDUMP_EVENTS`, from a host run of the same program), is encoded into a static buffer
//! (`ETDUMP_BYTES`) in ExecuTorch's ETDump format and sent to the host as one `ETDUMP` packet
//! (`console::etdump`). Timestamps are nanoseconds from the generic timer; under QEMU
//! `-icount shift=0` its 1 GHz counter advances one tick per instruction, so every event's
//! duration is its exact instruction count. Without the feature none of this is built and the
//! forward is a plain `Method::execute`.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ptera::devtools::etdump::{encode_with_load, Event, Load, Recorder};
use ptera::{Error, Method};

use crate::model::{ETDUMP_BYTES, ETDUMP_EVENTS};

#[repr(C, align(16))]
struct Store {
    events: [Event; ETDUMP_EVENTS],
    positions: [[u32; 2]; ETDUMP_EVENTS],
    out: [u8; ETDUMP_BYTES],
}

struct Static(UnsafeCell<Store>);

// SAFETY: reached only through `take`, which hands the store out once (TAKEN), on core 0.
unsafe impl Sync for Static {}

static STORE: Static = Static(UnsafeCell::new(Store {
    events: [Event::EMPTY; ETDUMP_EVENTS],
    positions: [[0; 2]; ETDUMP_EVENTS],
    out: [0; ETDUMP_BYTES],
}));
static TAKEN: AtomicBool = AtomicBool::new(false);
static RECORDED: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);

fn take() -> Option<&'static mut Store> {
    if TAKEN.swap(true, Ordering::Relaxed) {
        return None;
    }
    // SAFETY: TAKEN makes this the only reference ever made to the store.
    Some(unsafe { &mut *STORE.0.get() })
}

/// Nanoseconds of the generic timer (exact ticks at QEMU's 1 GHz `-icount` counter).
pub fn now_ns(frq: u64) -> u64 {
    ticks_ns(crate::cpu::cntvct(), frq)
}

/// `ticks` of the generic timer at `frq` Hz in nanoseconds.
pub fn ticks_ns(ticks: u64, frq: u64) -> u64 {
    if frq == 1_000_000_000 || frq == 0 {
        ticks
    } else {
        (u128::from(ticks) * 1_000_000_000 / u128::from(frq)) as u64
    }
}

/// Runs the forward once, recording its events (the first call only; later calls just execute).
pub fn execute(method: &mut Method<'_, '_>) -> Result<(), Error> {
    let Some(store) = take() else {
        return method.execute();
    };
    let plan = method.meta().plan();
    let frq = crate::cpu::cntfrq();
    let mut rec = Recorder::new(plan, &mut store.events, || now_ns(frq));
    let r = method.execute_observed(&mut rec);
    RECORDED.store(rec.events().len(), Ordering::Relaxed);
    DROPPED.store(rec.dropped(), Ordering::Relaxed);
    r
}

/// Encodes the recorded events, after the method's load (`load`, in nanoseconds like the
/// events), and sends the file to the host.
pub fn send(method: &Method<'_, '_>, load: Load) {
    // SAFETY: `execute` has finished with the store (its recorder is gone) and nothing else
    // refers to it; this runs once, on core 0, after the forward.
    let store = unsafe { &mut *STORE.0.get() };
    let n = RECORDED.load(Ordering::Relaxed);
    let dropped = DROPPED.load(Ordering::Relaxed);
    if dropped > 0 {
        defmt::warn!(
            "etdump: {=usize} events did not fit and are not in the file",
            dropped
        );
    }
    match encode_with_load(
        method.meta().plan(),
        Some(load),
        &[store.events.get(..n).unwrap_or(&store.events)],
        &mut store.positions,
        &mut store.out,
    ) {
        Ok(len) => crate::console::etdump(&store.out[..len]),
        Err(_) => defmt::error!(
            "etdump: the file does not fit its {=usize}-byte buffer",
            ETDUMP_BYTES
        ),
    }
}
