//! Multi-head scaled dot-product attention over strided head views: the work of a
//! transformer layer's `bmm → mul → add(mask) → softmax → bmm` chain in one call, reading the
//! queries, keys and values where their projections wrote them (no head permutes, no key
//! transpose) and writing the heads side by side (no permute back).
//!
//! Layout contract (f32 throughout):
//! - operand `x` of `q`, `k`, `v` is viewed as `[heads, rows, head_dim]`: element `(h, t, d)`
//!   is `x[offset + h·head_stride + t·row_stride + d]` ([`HeadView`]); `q` has `q_rows` rows,
//!   `k` and `v` have `kv_rows`;
//! - the additive mask, when given, is read at `h·mask_head_stride + i·mask_row_stride + j`
//!   for query row `i` and key row `j` (a head stride of 0 shares one mask between heads);
//! - the output is row-major `[q_rows, heads·head_dim]`: head `h` of row `i` at
//!   `i·heads·head_dim + h·head_dim`.
//!
//! For every head and query row: `s = (q_scale·q)·Kᵀ · scale + mask`, `p = softmax(s)`,
//! `out = p·V`. The work is cut into units of one head and a block of query rows whose size
//! depends on the shape alone ([`Attention::block_rows`]); every unit is computed the same way
//! whichever core takes it, so the output is bit-identical on any number of cores.

use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};
use crate::linalg::vecmath::{self as vec, BinOp};
use crate::parallel::{self, FirstError, SharedSlice};

/// Where one operand's heads live in its tensor (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadView {
    pub offset: usize,
    pub head_stride: usize,
    pub row_stride: usize,
}

/// One attention's shape and constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    pub heads: usize,
    pub head_dim: usize,
    pub q_rows: usize,
    pub kv_rows: usize,
    pub q: HeadView,
    pub k: HeadView,
    pub v: HeadView,
    /// `(head stride, row stride)` of the mask.
    pub mask_strides: (usize, usize),
    /// Multiplies the scores (`QKᵀ`) before the mask is added.
    pub scale: f32,
    /// Multiplies every query element before the product (1: none).
    pub q_scale: f32,
}

fn shape(detail: &'static str) -> KernelError {
    KernelError::Shape { arg: 0, detail }
}

/// Elements a view of `heads × rows × dim` needs: one past its last element.
fn extent(v: &HeadView, heads: usize, rows: usize, dim: usize) -> Option<usize> {
    if heads == 0 || rows == 0 || dim == 0 {
        return Some(0);
    }
    (heads - 1)
        .checked_mul(v.head_stride)?
        .checked_add((rows - 1).checked_mul(v.row_stride)?)?
        .checked_add(v.offset)?
        .checked_add(dim)
}

impl Attention {
    /// Elements of scratch one unit of `rows` query rows uses besides the GEMM's: the scores
    /// and probabilities (`rows × kv_rows` each), the scaled queries and the unit's output
    /// (`rows × head_dim` each).
    fn unit_floats(&self, rows: usize) -> Option<usize> {
        rows.checked_mul(self.kv_rows)?
            .checked_mul(2)?
            .checked_add(rows.checked_mul(self.head_dim)?.checked_mul(2)?)
    }

    /// The GEMM scratch of a unit of `rows` rows: the larger of its two products.
    fn gemm_floats(&self, rows: usize) -> usize {
        let (d, t) = (self.head_dim, self.kv_rows);
        gemm::sgemm_scratch_len(rows, t, d).max(gemm::sgemm_scratch_len(rows, d, t))
    }

    /// Query rows per unit: the largest of 16, 8, 4, 2, 1 that still gives at least 12 units
    /// (so 2 to 4 cores get equal shares where the shape allows), shrunk until a unit fits in
    /// [`GEMM_SCRATCH_F32`] floats. A function of the shape and this CPU's kernels only, never
    /// of the number of cores. `None` when not even one row fits (keys too long).
    pub fn block_rows(&self) -> Option<usize> {
        let tq = self.q_rows.max(1);
        let mut rb = 16usize.min(tq);
        while rb > 1 && self.heads.saturating_mul(tq.div_ceil(rb)) < 12 {
            rb /= 2;
        }
        loop {
            let need = self.unit_floats(rb)?.checked_add(self.gemm_floats(rb))?;
            if need <= GEMM_SCRATCH_F32 {
                return Some(rb);
            }
            if rb == 1 {
                return None;
            }
            rb /= 2;
        }
    }

    /// Checks every operand's extent; `Ok(block rows)`.
    fn check(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        out: &[f32],
    ) -> Result<usize, KernelError> {
        let (h, d) = (self.heads, self.head_dim);
        let fits = |view: &HeadView, rows: usize, len: usize| {
            extent(view, h, rows, d).is_some_and(|e| e <= len)
        };
        if !fits(&self.q, self.q_rows, q.len()) {
            return Err(shape("attention: queries exceed their tensor"));
        }
        if !fits(&self.k, self.kv_rows, k.len()) {
            return Err(shape("attention: keys exceed their tensor"));
        }
        if !fits(&self.v, self.kv_rows, v.len()) {
            return Err(shape("attention: values exceed their tensor"));
        }
        if let Some(m) = mask {
            let (hs, rs) = self.mask_strides;
            let view = HeadView {
                offset: 0,
                head_stride: hs,
                row_stride: rs,
            };
            if extent(&view, h, self.q_rows, self.kv_rows).is_none_or(|e| e > m.len()) {
                return Err(shape("attention: mask smaller than its strides say"));
            }
        }
        let need = self
            .q_rows
            .checked_mul(h)
            .and_then(|x| x.checked_mul(d))
            .ok_or(shape("attention: output size overflows"))?;
        if out.len() < need {
            return Err(shape(
                "attention: output smaller than rows × heads × head_dim",
            ));
        }
        self.block_rows().ok_or(KernelError::Scratch {
            needed: self.unit_floats(1).unwrap_or(usize::MAX).saturating_mul(4),
            got: GEMM_SCRATCH_F32 * 4,
        })
    }

    /// Computes the attention into `out` (see the module documentation), across the installed
    /// team when the work pays for it; `scratch` (at least [`GEMM_SCRATCH_F32`] floats) serves
    /// when it runs on this core.
    ///
    /// Errors: an operand shorter than its view says, an output shorter than
    /// `q_rows·heads·head_dim` (`KernelError::Shape`), keys too long for one row's scores to
    /// fit the scratch, or a scratch smaller than [`GEMM_SCRATCH_F32`] (`KernelError::Scratch`).
    pub fn run(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        out: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let rb = self.check(q, k, v, mask, out)?;
        let (h, d, tq, tk) = (self.heads, self.head_dim, self.q_rows, self.kv_rows);
        if h == 0 || d == 0 || tq == 0 {
            return Ok(());
        }
        let blocks = tq.div_ceil(rb);
        let units = h * blocks;
        let out = &mut out[..tq * h * d];
        let shared = SharedSlice::new(out);
        let errors = FirstError::default();
        let work = rb.saturating_mul(tk).saturating_mul(d).saturating_mul(2);
        let unit = |u: usize, scratch: &mut [f32]| {
            let (head, r0) = (u / blocks, (u % blocks) * rb);
            let rows = rb.min(tq - r0);
            if let Err(e) = self.unit(q, k, v, mask, head, r0, rows, &shared, scratch) {
                errors.put(e);
            }
        };
        let split = parallel::try_split(units, work, |lo, hi, scratch| {
            for u in lo..hi {
                unit(u, scratch);
            }
        });
        if !split {
            if scratch.len() < GEMM_SCRATCH_F32 {
                return Err(KernelError::Scratch {
                    needed: GEMM_SCRATCH_F32 * 4,
                    got: scratch.len() * 4,
                });
            }
            for u in 0..units {
                unit(u, scratch);
            }
        }
        errors.result()
    }

    /// One unit: head `head`, query rows `r0..r0 + rows`.
    #[allow(clippy::too_many_arguments)]
    fn unit(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        head: usize,
        r0: usize,
        rows: usize,
        out: &SharedSlice<'_, f32>,
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        let (h, d, tk) = (self.heads, self.head_dim, self.kv_rows);
        let st = rows * tk;
        let (s, rest) = scratch.split_at_mut(st);
        let (p, rest) = rest.split_at_mut(st);
        let (qs, rest) = rest.split_at_mut(rows * d);
        let (o, gemm_scratch) = rest.split_at_mut(rows * d);
        // Extents were checked for every head and row by `check`.
        let q0 = self.q.offset + head * self.q.head_stride + r0 * self.q.row_stride;
        let a = if self.q_scale == 1.0 {
            MatRef::new(&q[q0..], rows, d, self.q.row_stride, 1)?
        } else {
            for (i, row) in qs.chunks_exact_mut(d).enumerate() {
                let at = q0 + i * self.q.row_stride;
                vec::binary_scalar_here(BinOp::Mul, &q[at..at + d], self.q_scale, row);
            }
            MatRef::row_major(qs, rows, d)?
        };
        let k0 = self.k.offset + head * self.k.head_stride;
        let kt = MatRef::new(&k[k0..], d, tk, 1, self.k.row_stride)?;
        if tk > 0 {
            gemm::sgemm(a, kt, s, tk, self.scale, 0.0, None, gemm_scratch)?;
            let probs: &mut [f32] = match mask {
                Some(m) => {
                    let (hs, rs) = self.mask_strides;
                    for (i, (si, pi)) in s.chunks_exact(tk).zip(p.chunks_exact_mut(tk)).enumerate()
                    {
                        let at = head * hs + (r0 + i) * rs;
                        vec::binary_here(BinOp::Add, si, &m[at..at + tk], pi);
                    }
                    vec::softmax_rows(p, s, tk)?;
                    s
                }
                None => {
                    vec::softmax_rows(s, p, tk)?;
                    p
                }
            };
            let pm = MatRef::row_major(probs, rows, tk)?;
            let v0 = self.v.offset + head * self.v.head_stride;
            let vm = MatRef::new(&v[v0..], tk, d, self.v.row_stride, 1)?;
            gemm::sgemm(pm, vm, o, d, 1.0, 0.0, None, gemm_scratch)?;
        } else {
            // No keys: every probability row is empty, the output zero.
            o.fill(0.0);
        }
        for (i, row) in o.chunks_exact(d).enumerate() {
            let at = (r0 + i) * h * d + head * d;
            // SAFETY: row `r0 + i` of head `head` is written by this unit alone (units are
            // disjoint (head, row block) pairs); `at + d <= q_rows·heads·head_dim`, the
            // length of `out` (checked by `check`).
            let dst = unsafe { out.range(at, at + d) };
            dst.copy_from_slice(row);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
