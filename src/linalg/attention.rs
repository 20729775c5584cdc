//! Multi-head scaled dot-product attention over strided head views: the work of a
//! transformer layer's `bmm → mul → add(mask) → softmax → bmm` chain in one call, reading the
//! queries, keys and values where their projections wrote them (no head permutes, no key
//! transpose) and writing the heads side by side (no permute back).
//!
//! Layout contract (f32 throughout):
//! - operand `x` of `q`, `k`, `v` is viewed as `[heads, rows, head_dim]`: element `(h, t, d)`
//!   is `x[offset + h·head_stride + t·row_stride + d]` ([`HeadView`]); `q` has `q_rows` rows,
//!   `k` and `v` have `kv_rows` and `heads / kv_group` heads (query head `h` reads K/V head
//!   `h / kv_group`: grouped-query attention);
//! - the additive mask, when given, is read at `h·mask_head_stride + i·mask_row_stride + j`
//!   for query row `i` and key row `j` (a head stride of 0 shares one mask between heads);
//! - the output is row-major `[q_rows, heads·head_dim]`: head `h` of row `i` at
//!   `i·heads·head_dim + h·head_dim`.
//!
//! For every head and query row: `s = (q_scale·q)·Kᵀ · scale + mask`, `p = softmax(s)`,
//! `out = p·V`. Each step splits across the installed team on its own boundaries (the
//! products as batched GEMMs by heads and row groups, the softmax by rows), none of which
//! changes how an element is computed: the output is bit-identical on any number of cores.

use crate::error::KernelError;
use crate::linalg::gemm::{self, MatRef, GEMM_SCRATCH_F32};
use crate::linalg::vecmath::{self as vec, BinOp};
use crate::parallel::{self, SharedSlice};

/// What a row's calls cost beyond its elements, in multiply-adds (the unit of
/// [`parallel::Team::min_work`]): a row of scores takes its scale, mask and softmax as three
/// calls, about 150 instructions whatever its length.
const ROW_SETUP: usize = 512;

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
    /// Multiplies every query element before the product (1: none); applied to the scores
    /// with `scale`, which gives the same product up to rounding.
    pub q_scale: f32,
    /// Query heads per K/V head (grouped-query attention; 1: one K/V head per query head):
    /// query head `h` reads K/V head `h / kv_group`.
    pub kv_group: usize,
}

/// The operands, as a [`KernelError::Shape`] from [`Attention::run`] names them in `arg`.
pub const OPERAND_Q: usize = 0;
pub const OPERAND_K: usize = 1;
pub const OPERAND_V: usize = 2;
pub const OPERAND_MASK: usize = 3;
pub const OPERAND_OUT: usize = 4;

fn shape(operand: usize, detail: &'static str) -> KernelError {
    KernelError::Shape {
        arg: operand,
        detail,
    }
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
    /// Floats of scratch [`Attention::run`] needs: the scores and the probabilities of every
    /// head (`heads·q_rows·kv_rows` each), the heads' outputs before they are interleaved
    /// (`heads·q_rows·head_dim`, none for one row or one head), and [`GEMM_SCRATCH_F32`] for
    /// the products on this core. `None` on overflow.
    pub fn scratch_len(&self) -> Option<usize> {
        let (h, d, tq, tk) = (self.heads, self.head_dim, self.q_rows, self.kv_rows);
        let hq = h.checked_mul(tq)?;
        let heads_out = if tq == 1 || h == 1 {
            0
        } else {
            hq.checked_mul(d)?
        };
        hq.checked_mul(tk)?
            .checked_mul(2)?
            .checked_add(heads_out)?
            .checked_add(GEMM_SCRATCH_F32)
    }

    /// Checks every operand's extent and the scratch.
    fn check(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        out: &[f32],
        scratch: usize,
    ) -> Result<(), KernelError> {
        let (h, d) = (self.heads, self.head_dim);
        if self.kv_group == 0 || !h.is_multiple_of(self.kv_group) {
            return Err(shape(
                OPERAND_K,
                "attention: heads not a multiple of the K/V head group",
            ));
        }
        let hkv = h / self.kv_group;
        let fits = |view: &HeadView, heads: usize, rows: usize, len: usize| {
            extent(view, heads, rows, d).is_some_and(|e| e <= len)
        };
        if !fits(&self.q, h, self.q_rows, q.len()) {
            return Err(shape(OPERAND_Q, "attention: queries exceed their tensor"));
        }
        if !fits(&self.k, hkv, self.kv_rows, k.len()) {
            return Err(shape(OPERAND_K, "attention: keys exceed their tensor"));
        }
        if !fits(&self.v, hkv, self.kv_rows, v.len()) {
            return Err(shape(OPERAND_V, "attention: values exceed their tensor"));
        }
        if let Some(m) = mask {
            let (hs, rs) = self.mask_strides;
            let view = HeadView {
                offset: 0,
                head_stride: hs,
                row_stride: rs,
            };
            if extent(&view, h, self.q_rows, self.kv_rows).is_none_or(|e| e > m.len()) {
                return Err(shape(
                    OPERAND_MASK,
                    "attention: mask smaller than its strides say",
                ));
            }
        }
        let need = self
            .q_rows
            .checked_mul(h)
            .and_then(|x| x.checked_mul(d))
            .ok_or(shape(OPERAND_OUT, "attention: output size overflows"))?;
        if out.len() < need {
            return Err(shape(
                OPERAND_OUT,
                "attention: output smaller than rows × heads × head_dim",
            ));
        }
        let want = self
            .scratch_len()
            .ok_or(shape(OPERAND_OUT, "attention: scratch size overflows"))?;
        if scratch < want {
            return Err(KernelError::Scratch {
                needed: want.saturating_mul(4),
                got: scratch.saturating_mul(4),
            });
        }
        Ok(())
    }

    /// Computes the attention into `out` (see the module documentation), each step across the
    /// installed team when its work pays for it: the scores `Q·Kᵀ` of
    /// every head (batched products split by heads and row groups), each score row's scale,
    /// mask and softmax (split by rows), the products with `V`, and the heads interleaved into
    /// `out`. `scratch` holds at least [`Attention::scratch_len`] floats.
    ///
    /// Errors: an operand shorter than its view says, an output shorter than
    /// `q_rows·heads·head_dim` (`KernelError::Shape` whose `arg` is the operand, `OPERAND_*`),
    /// or a short scratch (`KernelError::Scratch`).
    pub fn run(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: Option<&[f32]>,
        out: &mut [f32],
        scratch: &mut [f32],
    ) -> Result<(), KernelError> {
        self.check(q, k, v, mask, out, scratch.len())?;
        let (h, d, tq, tk) = (self.heads, self.head_dim, self.q_rows, self.kv_rows);
        if h == 0 || d == 0 || tq == 0 {
            return Ok(());
        }
        let out = &mut out[..tq * h * d];
        if tk == 0 {
            // No keys: every probability row is empty, the output zero.
            out.fill(0.0);
            return Ok(());
        }
        let direct = tq == 1 || h == 1;
        let hq = h * tq;
        let (scores, rest) = scratch.split_at_mut(hq * tk);
        let (probs, rest) = rest.split_at_mut(hq * tk);
        let (heads_out, local) = rest.split_at_mut(if direct { 0 } else { hq * d });
        // Scores: S_h = Q_h · K_hᵀ.
        let (qview, kview, vview, group) = (self.q, self.k, self.v, self.kv_group);
        let qk = |hh: usize| -> Result<(MatRef<'_>, MatRef<'_>), KernelError> {
            let a = MatRef::new(
                &q[qview.offset + hh * qview.head_stride..],
                tq,
                d,
                qview.row_stride,
                1,
            )?;
            let b = MatRef::new(
                &k[kview.offset + hh / group * kview.head_stride..],
                d,
                tk,
                1,
                kview.row_stride,
            )?;
            Ok((a, b))
        };
        if !gemm::sgemm_batch_split((tq, tk, d), h, qk, scores)? {
            gemm::sgemm_batch((tq, tk, d), h, qk, scores, local)?;
        }
        // Probabilities of rows lo..hi: softmax(scale · q_scale · s + mask). The query scale
        // is applied to the scores (the same product up to rounding).
        let scale = self.scale * self.q_scale;
        let (hs, rs) = self.mask_strides;
        let rows = |lo: usize, s: &mut [f32], p: &mut [f32]| {
            // The slices are whole rows of `tk` (`try_split` cuts by rows), so the row
            // functions' length checks cannot fail.
            let Some(m) = mask else {
                let _ = vec::softmax_rows_scaled(s, p, tk, scale);
                return;
            };
            vec::binary_scalar_here(BinOp::Mul, s, scale, p);
            let mut r = lo;
            let hi = lo + s.len() / tk;
            while r < hi {
                // A run of rows of one head whose mask rows follow each other (or one row).
                let (hh, t) = (r / tq, r % tq);
                let run = if rs == tk { (tq - t).min(hi - r) } else { 1 };
                let (a, b) = ((r - lo) * tk, (r - lo + run) * tk);
                let at = hh * hs + t * rs;
                vec::binary_here(BinOp::Add, &p[a..b], &m[at..at + run * tk], &mut s[a..b]);
                r += run;
            }
            let _ = vec::softmax_rows(s, p, tk);
        };
        let split = {
            let (ss, ps) = (
                SharedSlice::new(&mut *scores),
                SharedSlice::new(&mut *probs),
            );
            // A row's scale, mask and softmax calls cost about 150 instructions beyond its
            // elements (`ROW_SETUP` multiply-adds' worth), so a few short rows split too.
            parallel::try_split(hq, tk.saturating_mul(8) + ROW_SETUP, |lo, hi, _| {
                // SAFETY: `try_split` hands out disjoint row ranges: these rows of scores and
                // probabilities belong to this part alone.
                let (s, p) = unsafe { (ss.range(lo * tk, hi * tk), ps.range(lo * tk, hi * tk)) };
                rows(lo, s, p);
            })
        };
        if !split {
            rows(0, scores, probs);
        }
        // Outputs: O_h = P_h · V_h, straight into `out` when its layout is `[heads, rows, d]`.
        let pv = |hh: usize| -> Result<(MatRef<'_>, MatRef<'_>), KernelError> {
            let a = MatRef::row_major(&probs[hh * tq * tk..], tq, tk)?;
            let b = MatRef::new(
                &v[vview.offset + hh / group * vview.head_stride..],
                tk,
                d,
                vview.row_stride,
                1,
            )?;
            Ok((a, b))
        };
        let dst: &mut [f32] = if direct { out } else { heads_out };
        if !gemm::sgemm_batch_split((tq, d, tk), h, pv, dst)? {
            gemm::sgemm_batch((tq, d, tk), h, pv, dst, local)?;
        }
        if !direct {
            // `[heads, rows, d]` → `[rows, heads, d]`, split by output rows.
            let src = &*heads_out;
            // A row is `h` copies of `d` elements, each a call.
            parallel::for_chunks(out, h * d, h * (d + ROW_SETUP / 4), |t0, chunk, _| {
                for (i, row) in chunk.chunks_exact_mut(h * d).enumerate() {
                    let t = t0 + i;
                    for (hh, o) in row.chunks_exact_mut(d).enumerate() {
                        let at = (hh * tq + t) * d;
                        o.copy_from_slice(&src[at..at + d]);
                    }
                }
            });
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
