//! Tests of the broadcast iterator `Bcast`: dim coalescing and every run against the reference
//! index map.

use super::*;
use crate::testing::broadcast_index;

#[test]
fn bcast_coalesces() {
    let s = |d: &[usize]| Shape::new(d).unwrap();
    let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 4]), &s(&[2, 3, 4])]).unwrap();
    assert_eq!((bc.outer, bc.inner, bc.step), (0, 24, [1, 1]));
    let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 4]), &s(&[4])]).unwrap();
    assert_eq!((bc.outer, bc.inner, bc.step), (1, 4, [1, 1]));
    assert_eq!(bc.dims[0], 6);
    let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 1]), &s(&[])]).unwrap();
    assert_eq!((bc.outer, bc.inner, bc.step), (1, 4, [0, 0]));
    assert!(Bcast::new(&s(&[2, 3]), [&s(&[4])]).is_none());
    assert!(Bcast::new(&s(&[3]), [&s(&[2, 3])]).is_none());
    // Every run matches the reference index map.
    let (o, a, c) = ([2usize, 3, 4, 5], [3usize, 1, 5], [2usize, 1, 4, 1]);
    let bc = Bcast::new(&s(&o), [&s(&a), &s(&c)]).unwrap();
    let mut seen = 0;
    bc.for_each(|[oa, oc], off, n| {
        for k in 0..n {
            assert_eq!(oa + k * bc.step[0], broadcast_index(off + k, &o, &a));
            assert_eq!(oc + k * bc.step[1], broadcast_index(off + k, &o, &c));
        }
        assert_eq!(off, seen);
        seen += n;
    });
    assert_eq!(seen, 120);
}

#[test]
fn split_runs_cover_every_element_once_with_the_reference_offsets() {
    // `for_each_split` on 2- and 4-core teams: ranges cut inside runs and across outer dims;
    // each output element is reached once, with the offsets of the reference index map.
    use crate::parallel::scoped;
    use crate::testing::CountingTeam;
    use std::sync::Mutex;
    let s = |d: &[usize]| Shape::new(d).unwrap();
    let cases: [(&[usize], &[usize], &[usize]); 4] = [
        (&[3, 17, 129], &[3, 17, 129], &[129]),
        (&[2, 3, 1, 700], &[3, 1, 700], &[2, 1, 1, 1]),
        (&[1, 4, 129, 17], &[1, 1, 129, 17], &[4, 129, 1]),
        (&[5, 1, 300], &[], &[1, 1, 300]),
    ];
    for (o, a, c) in cases {
        let bc = Bcast::new(&s(o), [&s(a), &s(c)]).unwrap();
        let total: usize = o.iter().product();
        for cores in [2, 4] {
            let team = CountingTeam::new(cores);
            let hits = Mutex::new(std::vec![0u8; total]);
            let split = scoped(&team, || {
                bc.for_each_split(1, |[oa, oc], off, n| {
                    let mut h = hits.lock().unwrap();
                    for k in 0..n {
                        assert_eq!(oa + k * bc.step[0], broadcast_index(off + k, o, a));
                        assert_eq!(oc + k * bc.step[1], broadcast_index(off + k, o, c));
                        h[off + k] += 1;
                    }
                })
            });
            assert!(
                split && team.splits() == 1,
                "{o:?} on {cores} cores: not split"
            );
            assert!(
                hits.into_inner().unwrap().iter().all(|&h| h == 1),
                "{o:?} on {cores} cores: an element reached other than once"
            );
        }
    }
}
