//! Static memory planner: places buffers with known sizes and lifetimes into one arena.
//!
//! Each buffer lives over an inclusive step interval `[first, last]` (node or instruction
//! indices). Buffers whose intervals overlap get disjoint byte ranges; others may share.
//! Greedy by size: the largest buffers are placed first, each at the lowest aligned offset that
//! does not collide with an already placed, time-overlapping buffer. No allocation: the caller
//! provides the item slice and a scratch order slice of the same length.

/// One buffer to place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    pub size: usize,
    /// First step that writes or reads the buffer.
    pub first: u32,
    /// Last step that reads it (inclusive).
    pub last: u32,
    /// Result: byte offset in the arena (written by [`plan`]).
    pub offset: usize,
}

impl Interval {
    pub fn new(size: usize, first: u32, last: u32) -> Interval {
        Interval {
            size,
            first,
            last,
            offset: 0,
        }
    }

    fn overlaps_in_time(&self, o: &Interval) -> bool {
        self.first <= o.last && o.first <= self.last
    }
}

/// Assigns `offset` to every item (offsets are multiples of `align`, a power of two) and
/// returns the arena size. `order` is scratch of `items.len()` entries. Zero-size items get
/// offset 0 and take no space. Deterministic for equal inputs. `None` when an offset or the
/// arena size would not fit a `usize` (sizes from a hostile file can be near `usize::MAX`).
pub fn plan(items: &mut [Interval], order: &mut [u32], align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two());
    debug_assert_eq!(items.len(), order.len());
    for (i, o) in order.iter_mut().enumerate() {
        *o = i as u32;
    }
    // Largest first; ties by earlier start, then index, for determinism.
    order.sort_unstable_by(|&a, &b| {
        let (x, y) = (&items[a as usize], &items[b as usize]);
        y.size
            .cmp(&x.size)
            .then(x.first.cmp(&y.first))
            .then(a.cmp(&b))
    });
    let round = |n: usize| n.div_ceil(align).checked_mul(align);
    let mut total = 0usize;
    for (placed, &idx) in order.iter().enumerate() {
        let cur = items[idx as usize];
        if cur.size == 0 {
            items[idx as usize].offset = 0;
            continue;
        }
        // Candidate offsets: 0 and the end of every placed, time-overlapping buffer. The
        // lowest candidate that collides with none of them is optimal for this greedy step.
        let mut best = usize::MAX;
        for p in core::iter::once(None).chain(order[..placed].iter().map(Some)) {
            let cand = match p {
                None => 0,
                Some(&p) => {
                    let o = &items[p as usize];
                    if o.size == 0 || !o.overlaps_in_time(&cur) {
                        continue;
                    }
                    // Placed items already fit (checked when they were placed).
                    round(o.offset + o.size)?
                }
            };
            if cand >= best {
                continue;
            }
            let end = cand.checked_add(cur.size)?;
            let collides = order[..placed].iter().any(|&p| {
                let o = &items[p as usize];
                o.size > 0 && o.overlaps_in_time(&cur) && cand < o.offset + o.size && o.offset < end
            });
            if !collides {
                best = cand;
            }
        }
        items[idx as usize].offset = best;
        total = total.max(round(best.checked_add(cur.size)?)?);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn check(items: &[Interval], total: usize, align: usize) {
        for (i, a) in items.iter().enumerate() {
            assert_eq!(a.offset % align, 0);
            assert!(a.size == 0 || a.offset + a.size <= total);
            for b in &items[i + 1..] {
                if a.size > 0 && b.size > 0 && a.overlaps_in_time(b) {
                    assert!(
                        a.offset + a.size <= b.offset || b.offset + b.size <= a.offset,
                        "{a:?} {b:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn chain_reuses_memory() {
        // x0 -> x1 -> x2 -> x3: only neighbours are alive together.
        let mut items: Vec<Interval> = (0..4).map(|i| Interval::new(100, i, i + 1)).collect();
        let mut order = vec![0; 4];
        let total = plan(&mut items, &mut order, 16).unwrap();
        check(&items, total, 16);
        assert_eq!(total, 224);
    }

    #[test]
    fn all_alive_stack_up() {
        let mut items: Vec<Interval> = (0..5).map(|i| Interval::new(10 + i, 0, 9)).collect();
        let mut order = vec![0; 5];
        let total = plan(&mut items, &mut order, 16).unwrap();
        check(&items, total, 16);
        assert_eq!(total, 5 * 16);
    }

    #[test]
    fn random_intervals_never_collide() {
        let mut rng = crate::testing::Rng(0x1234_5678);
        let mut rnd = |m: u64| rng.below(m);
        for _ in 0..200 {
            let n = 1 + rnd(40) as usize;
            let mut items: Vec<Interval> = (0..n)
                .map(|_| {
                    let a = rnd(30) as u32;
                    Interval::new(rnd(500) as usize, a, a + rnd(10) as u32)
                })
                .collect();
            let mut order = vec![0; n];
            let total = plan(&mut items, &mut order, 16).unwrap();
            check(&items, total, 16);
            let sum: usize = items.iter().map(|i| i.size.div_ceil(16) * 16).sum();
            assert!(total <= sum);
        }
    }

    /// Sizes near `usize::MAX` (from a hostile file) give `None`, never a wrapped offset.
    #[test]
    fn huge_sizes_do_not_overflow() {
        let mut items = vec![Interval::new(usize::MAX - 8, 0, 1), Interval::new(64, 0, 1)];
        let mut order = vec![0; 2];
        assert_eq!(plan(&mut items, &mut order, 16), None);
        let mut items = vec![
            Interval::new(usize::MAX / 2 + 1, 0, 1),
            Interval::new(usize::MAX / 2 + 1, 1, 2),
        ];
        assert_eq!(plan(&mut items, &mut order, 16), None);
    }
}
