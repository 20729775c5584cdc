//! A forward split across cores gives bit-identical outputs to one core, on every committed
//! fixture (portable, XNNPACK, quantized), with teams of 2 and 4 threads that split every
//! product they can (`min_work` = 1), and the team really splits work.

#![allow(clippy::result_large_err)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use ptera::parallel::{scoped, threads::ThreadTeam, Job, Team};
use ptera::Registry;

struct Counting {
    team: ThreadTeam,
    splits: AtomicUsize,
}

impl Team for Counting {
    fn cores(&self) -> usize {
        self.team.cores()
    }
    fn min_work(&self) -> usize {
        self.team.min_work()
    }
    fn scratch_f32(&self) -> usize {
        self.team.scratch_f32()
    }
    fn busy(&self) -> bool {
        self.team.busy()
    }
    fn run(&self, parts: usize, job: &Job<'_>) {
        if parts > 1 {
            self.splits.fetch_add(1, Ordering::Relaxed);
        }
        self.team.run(parts, job)
    }
}

fn bits(o: &Outputs) -> Vec<Vec<u64>> {
    o.iter()
        .map(|(_, _, v)| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn every_fixture_is_bit_identical_on_1_2_and_4_cores() {
    let registry = Registry::standard();
    let teams: Vec<Counting> = [2, 4]
        .iter()
        .map(|&n| Counting {
            team: ThreadTeam::with_min_work(n, ptera::linalg::gemm::GEMM_SCRATCH_F32, 1),
            splits: AtomicUsize::new(0),
        })
        .collect();
    let cases = cases();
    assert!(cases.len() >= 20, "expected the whole fixture set");
    for case in &cases {
        let bytes = pte(case);
        let one = run_program(bytes.as_slice(), case, &registry)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        for team in &teams {
            let many = scoped(team, || run_program(bytes.as_slice(), case, &registry))
                .unwrap_or_else(|e| panic!("{case} on {} cores: {e}", team.cores()));
            assert!(
                bits(&one) == bits(&many),
                "{case}: outputs on {} cores differ from one core",
                team.cores()
            );
        }
    }
    for team in &teams {
        assert!(
            team.splits.load(Ordering::Relaxed) > 100,
            "the {}-core team split only {} jobs",
            team.cores(),
            team.splits.load(Ordering::Relaxed)
        );
    }
}
