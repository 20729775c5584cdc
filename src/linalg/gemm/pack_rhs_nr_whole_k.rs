//! B packed ahead of time ([`PackedB`]): whole-depth panels of `nr` columns.

use super::contract::MAX_NR;
use super::matref::{shape_err, MatRef};
use super::pack_panel::pack_panel;
use crate::error::KernelError;

/// A `[K, N]` B packed ahead of time for micro-kernels of tile width `nr` ("pre-packed
/// weights", e.g. stored so by `xtask lower` and read in place from the program).
///
/// Layout: `ceil(n / nr)` panels, panel `q` = columns `q·nr ..`, each `k` rows of `nr`
/// floats: `data[q·k·nr + p·nr + j] = B(p, q·nr + j)`, zero for columns `≥ n`. Whole-depth
/// panels make the layout independent of the driver's depth blocking.
#[derive(Clone, Copy, Debug)]
pub struct PackedB<'a> {
    pub(in crate::linalg::gemm) data: &'a [f32],
    pub(in crate::linalg::gemm) k: usize,
    pub(in crate::linalg::gemm) n: usize,
    pub(in crate::linalg::gemm) nr: usize,
}

impl<'a> PackedB<'a> {
    /// Floats of a packed `k × n` B for tile width `nr` (`None` on overflow or `nr = 0`).
    pub fn len_for(k: usize, n: usize, nr: usize) -> Option<usize> {
        if nr == 0 {
            return None;
        }
        n.div_ceil(nr).checked_mul(k)?.checked_mul(nr)
    }

    /// A packed view; `data` must hold exactly [`PackedB::len_for`]`(k, n, nr)` floats.
    pub fn new(data: &'a [f32], k: usize, n: usize, nr: usize) -> Result<PackedB<'a>, KernelError> {
        if nr == 0 || nr > MAX_NR {
            return Err(shape_err("gemm: packed B tile width out of range"));
        }
        if PackedB::len_for(k, n, nr) != Some(data.len()) {
            return Err(shape_err("gemm: packed B length does not match k, n, nr"));
        }
        Ok(PackedB { data, k, n, nr })
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns `j0 .. j0 + w` (`j0` a multiple of `nr`, `j0 + w ≤ n`): their whole panels.
    pub(in crate::linalg::gemm) fn panel_range(&self, j0: usize, w: usize) -> PackedB<'a> {
        debug_assert!(j0.is_multiple_of(self.nr) && j0 + w <= self.n);
        PackedB {
            data: &self.data[j0 / self.nr * self.k * self.nr..],
            k: self.k,
            n: w,
            nr: self.nr,
        }
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn nr(&self) -> usize {
        self.nr
    }
}

/// Packs `b` (`k × n`, any strides) into the [`PackedB`] layout for tile width `nr`;
/// `dst` must hold exactly [`PackedB::len_for`]`(k, n, nr)` floats.
pub fn pack_b_ahead(b: MatRef<'_>, nr: usize, dst: &mut [f32]) -> Result<(), KernelError> {
    let (k, n) = (b.rows, b.cols);
    if nr == 0 || nr > MAX_NR || PackedB::len_for(k, n, nr) != Some(dst.len()) {
        return Err(shape_err(
            "gemm: packed B destination does not match k, n, nr",
        ));
    }
    if k == 0 {
        return Ok(());
    }
    for (q, panel) in dst.chunks_exact_mut(k * nr).enumerate() {
        let j0 = q * nr;
        let cols = nr.min(n - j0);
        // Columns j0 .. j0+cols ≤ n, rows 0 .. k of a validated view.
        pack_panel(b.data, j0 * b.cs, b.cs, b.rs, cols, nr, k, panel);
    }
    Ok(())
}
