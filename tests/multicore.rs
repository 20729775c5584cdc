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

/// XNNPACK regions run each chain of elementwise nodes (GPT-2's tanh GELU: seven nodes per
/// layer) as one parallel step: the same bits as the nodes one by one (what a run with an
/// observer does, each node reported), on one core and on a team, with fewer split jobs.
#[test]
fn fused_elementwise_runs_give_the_bits_of_their_nodes_one_by_one() {
    use ptera::host::AlignedBuf;
    use ptera::kernel_api::Observer;
    use ptera::{MethodMeta, OwnedArenas, Program, Shape};
    struct Nodes(usize);
    impl Observer for Nodes {
        fn region_op(&mut self, _: usize, _: &'static str, _: usize, _: u64) {
            self.0 += 1;
        }
    }
    let registry = Registry::standard();
    for case in ["gpt2_xnnpack", "gpt2t64_xnnpack"] {
        let buf = AlignedBuf::from_bytes(pte(case).as_slice());
        let program = Program::load(buf.as_slice()).unwrap();
        // (output bits, nodes reported) of one forward, observed or not, on `team`.
        let run = |observe: bool, team: Option<&CountingTeam>| {
            let meta = MethodMeta::new(&program, "forward", &registry).unwrap();
            let mut bufs = OwnedArenas::for_meta(&meta).unwrap();
            let mut method = bufs.load(meta, &registry).unwrap();
            for (i, inp) in inputs(case).iter().enumerate() {
                let shape = Shape::new(&inp.shape).unwrap();
                method.set_input(i, inp.dtype, &shape, &inp.bytes).unwrap();
            }
            let mut nodes = Nodes(0);
            let mut go = || match observe {
                true => method.execute_observed(&mut nodes),
                false => method.execute(),
            };
            match team {
                Some(t) => scoped(t, go),
                None => go(),
            }
            .unwrap();
            let o = method.output(0).unwrap();
            let bits: Vec<u64> = (0..o.numel()).map(|k| o.get_f64(k).to_bits()).collect();
            (bits, nodes.0)
        };
        let (fused, _) = run(false, None);
        let (one_by_one, reported) = run(true, None);
        assert!(reported > 0, "{case}: no node reported");
        assert!(fused == one_by_one, "{case}: fused runs change the outputs");
        let (t_fused, t_nodes) = (CountingTeam::new(4), CountingTeam::new(4));
        assert!(
            run(false, Some(&t_fused)).0 == one_by_one,
            "{case} on 4 cores"
        );
        assert!(
            run(true, Some(&t_nodes)).0 == one_by_one,
            "{case} on 4 cores, observed"
        );
        // Two layers, seven nodes each: at least six fewer split jobs per layer.
        assert!(
            t_fused.splits() + 12 <= t_nodes.splits(),
            "{case}: {} split jobs fused, {} node by node",
            t_fused.splits(),
            t_nodes.splits()
        );
    }
}
