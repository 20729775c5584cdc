//! Teams run every part exactly once, join before returning, and propagate panics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::vec::Vec;

use super::spin::SpinTeam;
use super::threads::ThreadTeam;
use super::*;

/// Runs jobs of every part count on `team` and checks each part ran once with its index,
/// the shared part count and a scratch of the team's size that no other part touched.
fn check_team(team: &dyn Team) {
    for parts in 1..=team.cores() + 1 {
        let hits: Vec<AtomicUsize> = (0..MAX_CORES).map(|_| AtomicUsize::new(0)).collect();
        let want = parts.clamp(1, team.cores());
        team.run(parts, &|core| {
            assert_eq!(core.parts, want);
            assert_eq!(core.scratch.len(), team.scratch_f32());
            core.scratch.fill(core.index as f32);
            std::thread::yield_now();
            assert!(core.scratch.iter().all(|&x| x == core.index as f32));
            hits[core.index].fetch_add(1, Ordering::Relaxed);
        });
        for (i, h) in hits.iter().enumerate() {
            assert_eq!(h.load(Ordering::Relaxed), usize::from(i < want), "part {i}");
        }
    }
}

#[test]
fn thread_team_runs_each_part_once() {
    for cores in [1, 2, 3, 4] {
        let team = ThreadTeam::with_min_work(cores, 64, 1);
        assert_eq!(team.cores(), cores);
        for _ in 0..20 {
            check_team(&team);
        }
    }
}

#[test]
fn thread_team_propagates_a_part_panic_after_joining() {
    let team = ThreadTeam::with_min_work(3, 8, 1);
    let finished = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        team.run(3, &|core| {
            if core.index == 2 {
                panic!("part 2 fails");
            }
            finished.fetch_add(1, Ordering::Relaxed);
        })
    }));
    assert!(r.is_err());
    assert_eq!(finished.load(Ordering::Relaxed), 2);
    // The team still works afterwards.
    check_team(&team);
}

#[test]
fn spin_team_serves_jobs_from_threads() {
    static TEAM: SpinTeam = SpinTeam::new(1);
    TEAM.primary(std::vec![0.0f32; 32].leak());
    assert_eq!(TEAM.cores(), 1);
    check_team(&TEAM);
    for index in 1..4 {
        std::thread::spawn(move || TEAM.serve(index, std::vec![0.0f32; 32].leak()));
    }
    while TEAM.online() < 4 {
        std::thread::yield_now();
    }
    assert_eq!(TEAM.cores(), 4);
    for _ in 0..200 {
        check_team(&TEAM);
    }
}

/// A spin team reports the smallest scratch of the cores that joined, and every part gets at
/// least that much.
#[test]
fn spin_team_reports_the_smallest_scratch_of_its_cores() {
    static TEAM: SpinTeam = SpinTeam::new(1);
    assert_eq!(TEAM.scratch_f32(), 0, "no core yet");
    TEAM.primary(std::vec![0.0f32; 64].leak());
    assert_eq!(TEAM.scratch_f32(), 64);
    for (index, len) in [(1, 48), (2, 17), (3, 129)] {
        std::thread::spawn(move || TEAM.serve(index, std::vec![0.0f32; len].leak()));
        while TEAM.online() <= index {
            std::thread::yield_now();
        }
    }
    assert_eq!(TEAM.scratch_f32(), 17);
    let seen = AtomicUsize::new(0);
    TEAM.run(4, &|core| {
        assert!(core.scratch.len() >= 17);
        seen.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(seen.load(Ordering::Relaxed), 4);
}

#[test]
fn scoped_installs_and_restores() {
    with_team(|t| assert!(t.is_none()));
    let a = ThreadTeam::with_min_work(2, 4, 1);
    let b = ThreadTeam::with_min_work(3, 4, 1);
    scoped(&a, || {
        with_team(|t| assert_eq!(t.map(|t| t.cores()), Some(2)));
        scoped(&b, || {
            with_team(|t| assert_eq!(t.map(|t| t.cores()), Some(3)))
        });
        with_team(|t| assert_eq!(t.map(|t| t.cores()), Some(2)));
    });
    with_team(|t| assert!(t.is_none()));
}

#[test]
fn parts_follow_units_and_work() {
    let team = ThreadTeam::with_min_work(4, 4, 100);
    assert_eq!(parts_for(&team, 10, 1000), 4);
    assert_eq!(parts_for(&team, 3, 1000), 3);
    assert_eq!(parts_for(&team, 10, 250), 2);
    assert_eq!(parts_for(&team, 10, 50), 1);
    let mut covered = 0;
    for i in 0..3 {
        let (lo, hi) = part_range(10, 3, i);
        assert_eq!(lo, covered);
        covered = hi;
    }
    assert_eq!(covered, 10);
}

#[test]
fn chunks_cover_the_output_once_split_or_not() {
    let team = ThreadTeam::with_min_work(3, 4, 1);
    for len in [0, 1, 5, 16, 17, 100] {
        for unit in [1, 4, 16] {
            let run = |installed: bool| {
                let mut out = std::vec![0u32; len];
                let mut body = || {
                    for_chunks(&mut out, unit, 1, |u0, chunk, _| {
                        for (i, x) in chunk.iter_mut().enumerate() {
                            *x += (u0 * unit + i) as u32 + 1;
                        }
                    })
                };
                if installed {
                    scoped(&team, body)
                } else {
                    body()
                }
                out
            };
            let want: Vec<u32> = (1..=len as u32).collect();
            assert_eq!(run(false), want);
            assert_eq!(run(true), want);
        }
    }
}

#[test]
fn jobs_see_no_team_and_errors_keep_the_first() {
    let team = ThreadTeam::with_min_work(2, 4, 1);
    let nested = AtomicUsize::new(0);
    let errors = FirstError::default();
    scoped(&team, || {
        assert!(try_split(4, 1, |lo, _, _| {
            with_team(|t| {
                if t.is_some() {
                    nested.fetch_add(1, Ordering::Relaxed);
                }
            });
            errors.put(lo);
        }))
    });
    assert_eq!(nested.load(Ordering::Relaxed), 0);
    assert!(matches!(errors.take(), Some(0 | 2)));
}
