//! Loading and inference never touch the heap: a counting global allocator sees zero
//! allocations between `Program::load` and the last output read, once the caller's buffers
//! exist. Only the test's own thread is counted (it does all the loading and inference; a
//! thread ptera started would be an allocation there): the test harness's other threads
//! allocate at any time.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use ptera::host::AlignedBuf;
use ptera::Registry;
use ptera::{Method, MethodMeta, Program, Shape};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    // Const-initialised and without a destructor: reading it never allocates.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is the counted one.
fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn load_and_inference_do_not_allocate() {
    for case in [
        "gpt2_portable",
        "opt_portable",
        "cnn_portable",
        "mlp_portable",
    ] {
        let file = pte(case);
        let ins = inputs(case);
        let shapes: Vec<Shape> = ins.iter().map(|i| Shape::new(&i.shape).unwrap()).collect();
        let reg = Registry::standard();
        // Sizes are known before loading; buffers are the caller's (allocated here, outside
        // the counted region, as a bare-metal user would use statics).
        let (arena_sizes, md_size) = {
            let program = Program::load(file.as_slice()).unwrap();
            let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
            (
                (0..meta.arena_count())
                    .map(|k| meta.arena_size(k) as usize)
                    .collect::<Vec<_>>(),
                meta.metadata_bytes(),
            )
        };
        let mut arenas: Vec<AlignedBuf> =
            arena_sizes.iter().map(|&n| AlignedBuf::zeroed(n)).collect();
        let mut md = AlignedBuf::zeroed(md_size);
        let mut checksum = 0f64;

        ALLOCS.store(0, Ordering::SeqCst);
        COUNTING.with(|c| c.set(true));
        let program = Program::load(file.as_slice()).unwrap();
        let meta = MethodMeta::new(&program, "forward", &reg).unwrap();
        let mut method = Method::load(
            meta,
            &reg,
            arenas.iter_mut().map(|a| a.as_mut_slice()),
            md.as_mut_slice(),
        )
        .unwrap();
        for _ in 0..2 {
            for (i, inp) in ins.iter().enumerate() {
                method
                    .set_input(i, inp.dtype, &shapes[i], &inp.bytes)
                    .unwrap();
            }
            method.execute().unwrap();
        }
        let out = method.output(0).unwrap();
        for k in 0..out.numel() {
            checksum += out.get_f64(k);
        }
        COUNTING.with(|c| c.set(false));
        assert_eq!(
            ALLOCS.load(Ordering::SeqCst),
            0,
            "{case}: heap allocations during load/inference"
        );
        assert!(checksum.is_finite());
    }
}
