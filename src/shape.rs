//! Tensor shapes: [`Shape`] (rank ≤ [`MAX_RANK`], stored inline), dim wrapping and NumPy
//! broadcasting of two shapes.

use core::fmt;

/// Highest rank the format allows.
pub const MAX_RANK: usize = 16;

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

    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    pub fn dims_mut(&mut self) -> &mut [usize] {
        &mut self.dims[..self.rank as usize]
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
    let r = a.rank().max(b.rank());
    let mut out = Shape::new(&[1; MAX_RANK][..r])?;
    for i in 0..r {
        let da = if i + a.rank() >= r {
            a.dims()[i + a.rank() - r]
        } else {
            1
        };
        let db = if i + b.rank() >= r {
            b.dims()[i + b.rank() - r]
        } else {
            1
        };
        out.dims_mut()[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
