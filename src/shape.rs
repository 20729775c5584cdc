//! Tensor shapes: [`Shape`] (rank ≤ [`MAX_RANK`], stored inline), dim wrapping, NumPy
//! broadcasting of two shapes, and [`NdIndex`], the row-major walk over every multi-index of a
//! shape.

use core::fmt;

/// Highest rank the format allows.
pub const MAX_RANK: usize = 16;

/// Whether two dim lists are equal, compared a dim at a time: slice equality of `usize`s
/// calls `memcmp`, which compares byte by byte in `no_std` builds (a call's shape checks
/// took 150 instructions each that way).
#[inline]
pub fn dims_eq(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A tensor shape (rank ≤ [`MAX_RANK`]), stored inline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: u8,
}

impl Shape {
    /// The rank-0 shape (one element).
    pub const fn scalar() -> Shape {
        Shape {
            dims: [0; MAX_RANK],
            rank: 0,
        }
    }

    /// A shape from explicit dims; `None` when the rank exceeds [`MAX_RANK`].
    pub fn new(dims: &[usize]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut s = Shape::scalar();
        s.dims[..dims.len()].copy_from_slice(dims);
        s.rank = dims.len() as u8;
        Some(s)
    }

    /// A shape from `u32` dims (as delegate payloads store them); `None` above [`MAX_RANK`].
    #[inline]
    pub fn from_u32(dims: &[u32]) -> Option<Shape> {
        if dims.len() > MAX_RANK {
            return None;
        }
        let mut s = Shape::scalar();
        for (d, &v) in s.dims.iter_mut().zip(dims) {
            *d = v as usize;
        }
        s.rank = dims.len() as u8;
        Some(s)
    }

    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    pub fn dims_mut(&mut self) -> &mut [usize] {
        &mut self.dims[..self.rank as usize]
    }

    /// Whether both have the same rank and dims (an inline loop: a slice comparison calls
    /// `memcmp`, which costs more than the few dims compared).
    #[inline]
    pub fn same_dims(&self, o: &Shape) -> bool {
        dims_eq(self.dims(), o.dims())
    }

    /// Number of elements (1 for rank 0). Saturates instead of overflowing.
    pub fn numel(&self) -> usize {
        self.dims().iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    /// Appends a dim; `None` when full.
    pub fn push(&mut self, d: usize) -> Option<()> {
        if self.rank() == MAX_RANK {
            return None;
        }
        self.dims[self.rank()] = d;
        self.rank += 1;
        Some(())
    }

    /// Inserts a dim at `at` (≤ rank); `None` when full.
    pub fn insert(&mut self, at: usize, d: usize) -> Option<()> {
        if self.rank() == MAX_RANK || at > self.rank() {
            return None;
        }
        let r = self.rank();
        self.dims.copy_within(at..r, at + 1);
        self.dims[at] = d;
        self.rank += 1;
        Some(())
    }

    /// Removes the dim at `at`.
    pub fn remove(&mut self, at: usize) {
        let r = self.rank();
        if at < r {
            self.dims.copy_within(at + 1..r, at);
            self.rank -= 1;
        }
    }

    /// Row-major (contiguous) strides in elements.
    pub fn strides(&self) -> [usize; MAX_RANK] {
        let mut st = [0usize; MAX_RANK];
        let mut acc = 1usize;
        for i in (0..self.rank()).rev() {
            st[i] = acc;
            acc = acc.saturating_mul(self.dims[i]);
        }
        st
    }

    /// Normalises a possibly negative dim index against this rank (ATen `maybe_wrap_dim`;
    /// rank 0 accepts -1 and 0).
    pub fn wrap_dim(&self, dim: i64) -> Option<usize> {
        wrap_dim(dim, self.rank())
    }
}

/// ATen `maybe_wrap_dim`: `dim` in `-rank..rank` (rank 0 behaves as rank 1).
pub fn wrap_dim(dim: i64, rank: usize) -> Option<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if (0..r).contains(&d) {
        Some(d as usize)
    } else {
        None
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Broadcast-compatible output shape of two shapes (NumPy rules).
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Option<Shape> {
    // The longer shape with the shorter one's dims broadcast into its trailing ones (one
    // copy, no zeroed scratch shape): this runs on every elementwise call.
    let (long, short) = if a.rank() >= b.rank() { (a, b) } else { (b, a) };
    let mut out = *long;
    if a.same_dims(b) {
        return Some(out);
    }
    let lead = long.rank() - short.rank();
    for (o, &s) in out.dims_mut()[lead..].iter_mut().zip(short.dims()) {
        if *o == s || s == 1 {
            continue;
        }
        if *o != 1 {
            return None;
        }
        *o = s;
    }
    Some(out)
}

/// Row-major walk over every multi-index of `dims` (last dim fastest), without allocation:
/// the state is two inline `[usize; MAX_RANK]` arrays.
///
/// The walk starts at the all-zero index ([`NdIndex::index`]); [`NdIndex::advance`] steps to
/// the next one and returns the lowest (outermost) dim that changed, every later dim having
/// wrapped to 0, or `None` once the last index has been visited. Rank 0 has exactly one index
/// (the empty one); dims containing 0 have none ([`NdIndex::is_done`] from the start).
///
/// Kernels keep running element offsets in step with the index through [`NdIndex::jumps`]:
/// when `advance` returns `Some(d)`, adding `jumps[d]` moves an offset from the old index to
/// the new one, so no per-dim carry loop is needed in the caller:
///
/// ```
/// # use ptera::shape::NdIndex;
/// let dims = [2, 3];
/// let strides = [1, 2]; // a transposed [3, 2] buffer
/// let mut it = NdIndex::new(&dims);
/// let jumps = it.jumps(&strides);
/// let mut off = 0usize;
/// let mut seen = Vec::new();
/// loop {
///     seen.push(off);
///     match it.advance() {
///         Some(d) => off = off.wrapping_add(jumps[d]),
///         None => break,
///     }
/// }
/// assert_eq!(seen, [0, 2, 4, 1, 3, 5]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct NdIndex {
    idx: [usize; MAX_RANK],
    dims: [usize; MAX_RANK],
    rank: usize,
    done: bool,
}

impl NdIndex {
    /// The walk over `dims`, positioned at the all-zero index. More than [`MAX_RANK`] dims
    /// (no [`Shape`] has that many) give an empty walk.
    pub fn new(dims: &[usize]) -> NdIndex {
        let mut it = NdIndex {
            idx: [0; MAX_RANK],
            dims: [0; MAX_RANK],
            rank: 0,
            done: true,
        };
        if let Some(d) = it.dims.get_mut(..dims.len()) {
            d.copy_from_slice(dims);
            it.rank = dims.len();
            it.done = dims.contains(&0);
        }
        it
    }

    /// The walk over `dims`, positioned at row-major index `flat` (over once `flat` is past
    /// the last index).
    pub fn at(dims: &[usize], flat: usize) -> NdIndex {
        let mut it = NdIndex::new(dims);
        let mut rest = flat;
        for (i, &n) in it.idx[..it.rank].iter_mut().zip(&it.dims[..it.rank]).rev() {
            *i = rest % n.max(1);
            rest /= n.max(1);
        }
        it.done |= rest > 0;
        it
    }

    /// The current multi-index (one coordinate per dim).
    #[inline]
    pub fn index(&self) -> &[usize] {
        &self.idx[..self.rank]
    }

    /// `true` once the walk is over (or when it had no index at all).
    #[inline]
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Steps to the next index in row-major order; returns the lowest dim that changed (the
    /// one incremented; every later dim wrapped to 0), or `None` when the walk is over.
    #[inline]
    pub fn advance(&mut self) -> Option<usize> {
        if !self.done {
            let r = self.rank;
            let walk = self.idx[..r].iter_mut().zip(&self.dims[..r]).enumerate();
            for (d, (i, &n)) in walk.rev() {
                *i += 1;
                if *i < n {
                    return Some(d);
                }
                *i = 0;
            }
            self.done = true;
        }
        None
    }

    /// Offset steps for a layout with element `strides` (one per dim, missing ones read as 0):
    /// when [`NdIndex::advance`] returns `Some(d)`, `offset.wrapping_add(jumps[d])` is the
    /// offset of the new index, i.e. `strides[d]` minus what the wrapped later dims had added.
    /// Wrapping arithmetic, so negative strides may be passed as `isize as usize`.
    pub fn jumps(&self, strides: &[usize]) -> [usize; MAX_RANK] {
        let mut jumps = [0usize; MAX_RANK];
        let mut back = 0usize;
        for d in (0..self.rank).rev() {
            let s = strides.get(d).copied().unwrap_or(0);
            jumps[d] = s.wrapping_sub(back);
            back = back.wrapping_add(self.dims[d].wrapping_sub(1).wrapping_mul(s));
        }
        jumps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_started_at_a_flat_index_visits_the_rest_in_order() {
        let dims = [2, 3, 4];
        for start in 0..=24 {
            let mut it = NdIndex::at(&dims, start);
            let mut seen = 0;
            while !it.is_done() {
                let i = it.index();
                assert_eq!(i[0] * 12 + i[1] * 4 + i[2], start + seen);
                seen += 1;
                it.advance();
            }
            assert_eq!(start + seen, 24, "from {start}");
        }
    }

    #[test]
    fn shape_ops() {
        let mut s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.numel(), 24);
        assert_eq!(&s.strides()[..3], &[12, 4, 1]);
        s.insert(1, 1).unwrap();
        assert_eq!(s.dims(), &[2, 1, 3, 4]);
        s.remove(0);
        assert_eq!(s.dims(), &[1, 3, 4]);
        assert_eq!(s.wrap_dim(-1), Some(2));
        assert_eq!(s.wrap_dim(3), None);
        assert_eq!(Shape::scalar().numel(), 1);
        assert_eq!(std::format!("{}", s), "[1, 3, 4]");
        assert!(Shape::new(&[1; 17]).is_none());
    }

    #[test]
    fn broadcasting() {
        let s = |d: &[usize]| Shape::new(d).unwrap();
        assert_eq!(
            broadcast_shapes(&s(&[2, 1, 4]), &s(&[3, 1])),
            Some(s(&[2, 3, 4]))
        );
        assert_eq!(broadcast_shapes(&s(&[]), &s(&[5])), Some(s(&[5])));
        assert_eq!(broadcast_shapes(&s(&[2, 3]), &s(&[4, 3])), None);
        assert_eq!(
            broadcast_shapes(&s(&[1, 4, 1]), &s(&[3, 1, 5])),
            Some(s(&[3, 4, 5]))
        );
        assert_eq!(
            broadcast_shapes(&s(&[3, 1]), &s(&[2, 1, 4])),
            Some(s(&[2, 3, 4]))
        );
        assert_eq!(broadcast_shapes(&s(&[2, 3]), &s(&[2, 3])), Some(s(&[2, 3])));
        assert_eq!(broadcast_shapes(&s(&[1]), &s(&[2, 3])), Some(s(&[2, 3])));
        assert_eq!(broadcast_shapes(&s(&[2, 1]), &s(&[3])), Some(s(&[2, 3])));
        assert_eq!(broadcast_shapes(&s(&[2, 2]), &s(&[1, 3])), None);
    }

    /// Every index `NdIndex` visits, with the dim `advance` reported before it.
    fn walk(dims: &[usize]) -> (std::vec::Vec<std::vec::Vec<usize>>, std::vec::Vec<usize>) {
        let mut it = NdIndex::new(dims);
        let (mut seen, mut changed) = (std::vec::Vec::new(), std::vec::Vec::new());
        while !it.is_done() {
            seen.push(it.index().to_vec());
            if let Some(d) = it.advance() {
                changed.push(d);
            }
        }
        assert_eq!(it.advance(), None, "stays done");
        (seen, changed)
    }

    #[test]
    fn nd_index_walks_row_major() {
        // rank 0: one (empty) index
        let (seen, changed) = walk(&[]);
        assert_eq!(seen, [std::vec::Vec::<usize>::new()]);
        assert!(changed.is_empty());
        // rank 1
        let (seen, changed) = walk(&[3]);
        assert_eq!(seen, [[0], [1], [2]]);
        assert_eq!(changed, [0, 0]);
        // rank 3, last dim fastest; the reported dim is the outermost one that changed
        let (seen, changed) = walk(&[2, 3, 2]);
        assert_eq!(seen.len(), 12);
        let mut want = std::vec::Vec::new();
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..2 {
                    want.push(std::vec![a, b, c]);
                }
            }
        }
        assert_eq!(seen, want);
        assert_eq!(changed, [2, 1, 2, 1, 2, 0, 2, 1, 2, 1, 2]);
        // size-1 dims never change
        let (seen, changed) = walk(&[1, 2, 1]);
        assert_eq!(seen, [[0, 0, 0], [0, 1, 0]]);
        assert_eq!(changed, [1]);
        let (seen, _) = walk(&[1]);
        assert_eq!(seen, [[0]]);
        // a 0 anywhere: no index at all
        for dims in [&[0][..], &[2, 0], &[0, 3, 1], &[4, 1, 0]] {
            let (seen, changed) = walk(dims);
            assert!(seen.is_empty() && changed.is_empty(), "{dims:?}");
        }
        // more dims than any shape has: an empty walk, no panic
        assert!(NdIndex::new(&[1; MAX_RANK + 1]).is_done());
        assert_eq!(NdIndex::new(&[1; MAX_RANK]).index().len(), MAX_RANK);
    }

    #[test]
    fn nd_index_jumps_track_offsets() {
        let dims = [3, 1, 4, 2];
        for strides in [[8, 8, 2, 1], [1, 0, 3, 12], [0, 5, 0, 1]] {
            let mut it = NdIndex::new(&dims);
            let jumps = it.jumps(&strides);
            let mut off = 0usize;
            let mut n = 0;
            loop {
                let want: usize = it.index().iter().zip(&strides).map(|(i, s)| i * s).sum();
                assert_eq!(off, want, "strides {strides:?} at {:?}", it.index());
                n += 1;
                match it.advance() {
                    Some(d) => off = off.wrapping_add(jumps[d]),
                    None => break,
                }
            }
            assert_eq!(n, 24);
        }
        // negative strides through `isize as usize` (a flipped last dim starting at 3)
        let mut it = NdIndex::new(&[2, 4]);
        let jumps = it.jumps(&[4, -1isize as usize]);
        let mut off = 3usize;
        let mut seen = std::vec::Vec::new();
        loop {
            seen.push(off);
            match it.advance() {
                Some(d) => off = off.wrapping_add(jumps[d]),
                None => break,
            }
        }
        assert_eq!(seen, [3, 2, 1, 0, 7, 6, 5, 4]);
    }
}
