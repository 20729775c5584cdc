//! [`ThreadTeam`] (`std`): a pool of OS threads, created once (per method run, per benchmark)
//! and reused for every job, each thread with its own kernel scratch.
//!
//! A job is published under a mutex with a new generation number and the part count; workers
//! sleep on a condition variable until the generation changes, run their part outside the
//! lock, and count themselves done. The caller runs part 0 and waits for the others. A panic
//! in any part is caught, the job is still joined (no part outlives `run`), and the panic is
//! then resumed on the caller.

use std::boxed::Box;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::vec::Vec;

use super::{Core, Job, Team, MAX_CORES};

/// Default [`Team::min_work`] of a thread team: waking a sleeping thread and joining it cost
/// tens of microseconds, the time of a few hundred thousand multiply-adds.
pub const THREAD_MIN_WORK: usize = 256 * 1024;

struct State {
    generation: u64,
    parts: usize,
    /// Address of a `&Job` on the caller's stack while a job runs.
    job: usize,
    done: usize,
    panic: Option<Box<dyn core::any::Any + Send>>,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    finished: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a job is caught before it could poison a lock; recover anyway.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A team of `cores` threads: the caller plus `cores - 1` workers.
pub struct ThreadTeam {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// The caller's scratch (part 0); holding it also serialises jobs.
    scratch0: Mutex<Vec<f32>>,
    scratch_f32: usize,
    min_work: usize,
    /// A job is running (set by `run` while the caller holds `scratch0`).
    busy: AtomicBool,
}

impl ThreadTeam {
    /// Starts `cores - 1` worker threads (`cores` clamped to `1..=MAX_CORES`), each core with
    /// `scratch_f32` floats of scratch.
    pub fn new(cores: usize, scratch_f32: usize) -> ThreadTeam {
        ThreadTeam::with_min_work(cores, scratch_f32, THREAD_MIN_WORK)
    }

    /// [`ThreadTeam::new`] with an explicit [`Team::min_work`] (tests use 1 to split every
    /// job).
    pub fn with_min_work(cores: usize, scratch_f32: usize, min_work: usize) -> ThreadTeam {
        let cores = cores.clamp(1, MAX_CORES);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                generation: 0,
                parts: 0,
                job: 0,
                done: 0,
                panic: None,
                shutdown: false,
            }),
            work: Condvar::new(),
            finished: Condvar::new(),
        });
        let workers = (1..cores)
            .map(|index| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(std::format!("ptera-core-{index}"))
                    .spawn(move || worker(&shared, index, std::vec![0.0; scratch_f32]))
                    .unwrap_or_else(|e| panic!("cannot start worker thread {index}: {e}"))
            })
            .collect();
        ThreadTeam {
            shared,
            workers,
            scratch0: Mutex::new(std::vec![0.0; scratch_f32]),
            scratch_f32,
            min_work,
            busy: AtomicBool::new(false),
        }
    }
}

fn worker(shared: &Shared, index: usize, mut scratch: Vec<f32>) {
    let mut seen = 0u64;
    loop {
        let (job, parts) = {
            let mut st = lock(&shared.state);
            while st.generation == seen && !st.shutdown {
                st = shared.work.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            if st.shutdown {
                return;
            }
            seen = st.generation;
            if index >= st.parts {
                continue;
            }
            (st.job, st.parts)
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `job` is the address of a `&Job` on the stack of `ThreadTeam::run`,
            // which does not return before this part has counted itself done below.
            let job: &Job<'_> = unsafe { *(job as *const &Job<'_>) };
            job(Core {
                index,
                parts,
                scratch: &mut scratch,
            })
        }));
        let mut st = lock(&shared.state);
        if let Err(p) = result {
            st.panic.get_or_insert(p);
        }
        st.done += 1;
        shared.finished.notify_all();
    }
}

impl Team for ThreadTeam {
    fn cores(&self) -> usize {
        self.workers.len() + 1
    }

    fn min_work(&self) -> usize {
        self.min_work
    }

    fn scratch_f32(&self) -> usize {
        self.scratch_f32
    }

    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    fn run(&self, parts: usize, job: &Job<'_>) {
        let mut scratch0 = lock(&self.scratch0);
        self.busy.store(true, Ordering::Release);
        let parts = parts.clamp(1, self.cores());
        let job_ref: &Job<'_> = job;
        if parts > 1 {
            // The same step marks as the bare-metal team (for per-thread counts from a trace).
            super::spin::ptera_team_fork();
            let mut st = lock(&self.shared.state);
            st.generation += 1;
            st.parts = parts;
            st.job = (&raw const job_ref) as usize;
            st.done = 0;
            st.panic = None;
            self.shared.work.notify_all();
        }
        let mine = catch_unwind(AssertUnwindSafe(|| {
            job_ref(Core {
                index: 0,
                parts,
                scratch: &mut scratch0,
            })
        }));
        let theirs = if parts > 1 {
            let mut st = lock(&self.shared.state);
            while st.done < parts - 1 {
                st = self
                    .shared
                    .finished
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            st.job = 0;
            let panic = st.panic.take();
            drop(st);
            super::spin::ptera_team_join();
            panic
        } else {
            None
        };
        self.busy.store(false, Ordering::Release);
        drop(scratch0);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = theirs {
            resume_unwind(p);
        }
    }
}

impl Drop for ThreadTeam {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.work.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
