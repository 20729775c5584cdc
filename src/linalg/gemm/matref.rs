//! [`MatRef`]: a read-only strided matrix view, the operand type of every GEMM entry point.

use crate::error::KernelError;

/// A read-only strided matrix view: element `(i, j)` is `data[i * row_stride + j * col_stride]`.
///
/// A row-major `[rows, cols]` tensor is `row_stride = cols, col_stride = 1`; its transpose is
/// the same data with the strides (and dims) swapped ([`MatRef::t`]).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(in crate::linalg::gemm) data: &'a [f32],
    pub(in crate::linalg::gemm) rows: usize,
    pub(in crate::linalg::gemm) cols: usize,
    pub(in crate::linalg::gemm) rs: usize,
    pub(in crate::linalg::gemm) cs: usize,
}

pub(in crate::linalg::gemm) fn shape_err(detail: &'static str) -> KernelError {
    KernelError::Shape { arg: 0, detail }
}

impl<'a> MatRef<'a> {
    /// A strided view. Fails if some element `(i, j)` with `i < rows, j < cols` would lie
    /// outside `data` (checked arithmetic; an empty matrix is always valid).
    pub fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<MatRef<'a>, KernelError> {
        if rows > 0 && cols > 0 {
            let last = (rows - 1)
                .checked_mul(row_stride)
                .and_then(|r| {
                    (cols - 1)
                        .checked_mul(col_stride)
                        .and_then(|c| r.checked_add(c))
                })
                .ok_or(shape_err("gemm: matrix view offset overflows"))?;
            if last >= data.len() {
                return Err(shape_err("gemm: matrix view exceeds its data"));
            }
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            rs: row_stride,
            cs: col_stride,
        })
    }

    /// A row-major `[rows, cols]` matrix (the first `rows * cols` elements of `data`).
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Result<MatRef<'a>, KernelError> {
        MatRef::new(data, rows, cols, cols, 1)
    }

    /// The transposed view (no copy).
    pub fn t(self) -> MatRef<'a> {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn row_stride(&self) -> usize {
        self.rs
    }
    pub fn col_stride(&self) -> usize {
        self.cs
    }

    /// Columns `j0 .. j0 + w` (`j0 + w ≤ cols`, `w > 0`) as a view of the same data.
    pub(in crate::linalg::gemm) fn col_range(&self, j0: usize, w: usize) -> MatRef<'a> {
        debug_assert!(j0 + w <= self.cols && w > 0);
        MatRef {
            // In bounds: element (0, j0) of a validated view with j0 < cols.
            data: &self.data[j0 * self.cs..],
            rows: self.rows,
            cols: w,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// Rows `i0 .. i0 + h` (`i0 + h ≤ rows`, `h > 0`) as a view of the same data.
    pub(in crate::linalg::gemm) fn row_range(&self, i0: usize, h: usize) -> MatRef<'a> {
        debug_assert!(i0 + h <= self.rows && h > 0);
        MatRef {
            // In bounds: element (i0, 0) of a validated view with i0 < rows.
            data: &self.data[i0 * self.rs..],
            rows: h,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// Element `(i, j)`, or `None` outside the matrix.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        if i < self.rows && j < self.cols {
            self.data.get(i * self.rs + j * self.cs).copied()
        } else {
            None
        }
    }
}
