//! A forward split across cores gives bit-identical outputs to one core, on every committed
//! fixture (portable, XNNPACK, quantized), with teams of 2 and 4 threads that split every
//! product they can (`min_work` = 1), and the team really splits work.

#![allow(clippy::result_large_err)]

mod common;

use common::*;
use ptera::parallel::{scoped, Team};
use ptera::testing::CountingTeam;
use ptera::Registry;

fn bits(o: &Outputs) -> Vec<Vec<u64>> {
    o.iter()
        .map(|(_, _, v)| v.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn every_fixture_is_bit_identical_on_1_2_and_4_cores() {
    let registry = Registry::standard();
    let teams: Vec<CountingTeam> = [2, 4].iter().map(|&n| CountingTeam::new(n)).collect();
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
            team.splits() > 100,
            "the {}-core team split only {} jobs",
            team.cores(),
            team.splits()
        );
    }
}
