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
