//! Batched products (a batched matmul's heads): on this core with one kernel choice and set
//! of checks ([`sgemm_batch`]), or across the cores in whole products or parts of products
//! ([`sgemm_batch_split`]), every product computed as [`sgemm`] computes it on one core.

use super::driver::{part, plan, scratch_need, sgemm, ASource, BSource, Call};
use super::matref::{shape_err, MatRef};
use super::select::micro_kernel_for;
use super::tiles::SharedC;
use crate::error::KernelError;

/// What setting up one product of a split batch costs, in multiply-adds (the unit of
/// [`Team::min_work`](crate::parallel::Team::min_work)): choosing and checking the kernel,
/// the plan, packing set-up and the edge paths take several hundred instructions whatever
/// the size (a one-row product of 16 × 16, 256 multiply-adds, takes about 900 on Neon). A
/// split counts it per part, so that the small products of attention heads at short
/// sequences go to every core instead of two.
pub const PRODUCT_SETUP: usize = 1024;

/// `count` products of one shape on this core, `C_i = A_i·B_i` into the row-major `m × n`
/// block `c[i·m·n ..][.. m·n]`, with `(A_i, B_i) = operands(i)` (`m × k` and `k × n`, any
/// strides as in [`sgemm`]): a batched matmul's heads. The micro-kernel, the checks of C and
/// the scratch are settled once for all of them; each product is then computed exactly as
/// [`sgemm`] computes it on one core (same kernel calls in the same order: the same bits).
/// `M = 1` takes [`sgemm`] per product (its GEMV).
///
/// Errors: an operand whose shape differs from `m × k` / `k × n` or a C shorter than
/// `count·m·n` (`KernelError::Shape`), a scratch smaller than [`sgemm_scratch_len`](super::sgemm_scratch_len)`(m, n,
/// k)`, or what `operands` returns.
pub fn sgemm_batch<'x>(
    (m, n, k): (usize, usize, usize),
    count: usize,
    operands: impl Fn(usize) -> Result<(MatRef<'x>, MatRef<'x>), KernelError>,
    c: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let mn = m * n;
    let c = batch_c(c, count, mn)?;
    let fits = |a: &MatRef<'_>, b: &MatRef<'_>| fits((m, n, k), a, b);
    if m == 1 {
        for (i, ci) in c.chunks_exact_mut(mn.max(1)).enumerate() {
            let (a, b) = operands(i)?;
            fits(&a, &b)?;
            sgemm(a, b, ci, n, 1.0, 0.0, None, scratch)?;
        }
        return Ok(());
    }
    if mn == 0 {
        return Ok(());
    }
    if k == 0 {
        for i in 0..count {
            let (a, b) = operands(i)?;
            fits(&a, &b)?;
        }
        c.fill(0.0);
        return Ok(());
    }
    let uk = micro_kernel_for(m, n, k);
    let Some(mut call) = Call::checked(uk, (m, n, k), c, n, 1.0, 0.0, None, None)? else {
        return Ok(());
    };
    // Every product is computed whole (one part): plan it once.
    call.plans = Some((plan(uk, m, n, k, true), plan(uk, m, n, k, false)));
    scratch_need(uk, (m, n, k), scratch.len())?;
    for (i, ci) in c.chunks_exact_mut(mn).enumerate() {
        let (a, b) = operands(i)?;
        fits(&a, &b)?;
        let b = if b.cs == 1 {
            BSource::InPlace(b)
        } else {
            BSource::Strided(b)
        };
        let shared = SharedC {
            ptr: ci.as_mut_ptr(),
            len: ci.len(),
        };
        // SAFETY: product i alone, on this core, through the exclusive borrow of its block of
        // C (validated for every block by `Call::checked` of the whole `count·m·n`: each
        // block has the first block's extent); scratch checked above.
        unsafe { part(&call, ASource::Mat(a), b, shared, None, (0, n), scratch) };
    }
    Ok(())
}

/// [`sgemm_batch`] across the installed team, `count` products cut into `count·q` units of
/// `1/q` product each (unit `u`: row group `u mod q` of product `u / q`, groups of whole row
/// tiles), with `q` the least that lets every core take the same share (6 heads on 4 cores:
/// halves, 3 units per core) where the products have row tiles enough, else whole products.
/// Each product is computed with the kernel and depth blocks of the whole product, so every
/// C tile gets the same kernel calls as on one core: the same bits. `Ok(false)`, computing
/// nothing, when the work stays on this core (no team, too little work) or is one product
/// (`count = 1`: [`sgemm`] splits it). One-row products (`m = 1`, the GEMV) split by whole
/// products.
///
/// Errors: as [`sgemm_batch`] (the team's per-core scratch is checked like its `scratch`).
pub fn sgemm_batch_split<'x>(
    (m, n, k): (usize, usize, usize),
    count: usize,
    operands: impl Fn(usize) -> Result<(MatRef<'x>, MatRef<'x>), KernelError> + Sync,
    c: &mut [f32],
) -> Result<bool, KernelError> {
    let Some(cores) = crate::parallel::with_team(|t| t.map(|t| t.cores())) else {
        return Ok(false);
    };
    // One product splits inside the GEMM (by columns, rows or a grid, as its shape asks).
    if m == 0 || k == 0 || n == 0 || count < 2 || cores < 2 {
        return Ok(false);
    }
    let mn = m * n;
    let c = batch_c(c, count, mn)?;
    if m == 1 {
        // One-row products take the GEMV ([`sgemm`]): whole products per core.
        let errors = crate::parallel::FirstError::default();
        let shared = crate::parallel::SharedSlice::new(c);
        let work = n.saturating_mul(k).saturating_add(PRODUCT_SETUP);
        let split = crate::parallel::try_split(count, work, |lo, hi, scratch| {
            // SAFETY: products lo..hi of C belong to this part alone.
            let mine = unsafe { shared.range(lo * mn, hi * mn) };
            if let Err(e) = sgemm_batch((m, n, k), hi - lo, |j| operands(lo + j), mine, scratch) {
                errors.put(e);
            }
        });
        return errors.take().map_or(Ok(split), Err);
    }
    let uk = micro_kernel_for(m, n, k);
    let Some(mut call) = Call::checked(uk, (m, n, k), c, n, 1.0, 0.0, None, None)? else {
        return Ok(false);
    };
    call.plans = Some((plan(uk, m, n, k, true), plan(uk, m, n, k, false)));
    let row_tiles = m.div_ceil(uk.mr);
    let mut q = cores / gcd(count, cores);
    if q > row_tiles {
        q = 1;
    }
    let shared = SharedC {
        ptr: c.as_mut_ptr(),
        len: c.len(),
    };
    let (call, shared, errors) = (&call, &shared, crate::parallel::FirstError::default());
    let units = count * q;
    let work = m
        .saturating_mul(n)
        .saturating_mul(k)
        .div_ceil(q)
        .saturating_add(PRODUCT_SETUP);
    let split = crate::parallel::try_split(units, work, |u0, u1, scratch| {
        if let Err(e) = scratch_need(uk, (m, n, k), scratch.len()) {
            errors.put(e);
            return;
        }
        let mut u = u0;
        while u < u1 {
            let (i, g0) = (u / q, u % q);
            let g1 = (u1 - i * q).min(q);
            let ab = operands(i).and_then(|(a, b)| fits((m, n, k), &a, &b).map(|_| (a, b)));
            let (a, b) = match ab {
                Ok(ab) => ab,
                Err(e) => return errors.put(e),
            };
            let b = if b.cs == 1 {
                BSource::InPlace(b)
            } else {
                BSource::Strided(b)
            };
            let rows = (g1 - g0 < q).then(|| {
                let r = |g| crate::parallel::part_range(row_tiles, q, g);
                (r(g0).0, r(g1 - 1).1)
            });
            let ci = SharedC {
                // SAFETY: product i's block of C, inside the validated `count·m·n` (i < count).
                ptr: unsafe { shared.ptr.add(i * mn) },
                len: mn,
            };
            // SAFETY: the units of a split are disjoint, so each (product, row tiles) block of
            // C is written by one part; scratch checked above; C validated by `Call::checked`
            // for every block.
            unsafe { part(call, ASource::Mat(a), b, ci, rows, (0, n), scratch) };
            u = i * q + g1;
        }
    });
    match errors.take() {
        Some(e) => Err(e),
        None => Ok(split),
    }
}

/// Greatest common divisor (`gcd(0, b) = b`).
fn gcd(mut a: usize, mut b: usize) -> usize {
    while a != 0 {
        (a, b) = (b % a, a);
    }
    b
}

/// The `count` blocks of `mn` floats of a batch's C.
fn batch_c(c: &mut [f32], count: usize, mn: usize) -> Result<&mut [f32], KernelError> {
    let len = count
        .checked_mul(mn)
        .ok_or(shape_err("gemm: C extent overflows"))?;
    c.get_mut(..len).ok_or(shape_err("gemm: C slice too short"))
}

/// Whether `a` and `b` are the `m × k` and `k × n` operands of a batch of one shape.
fn fits(
    (m, n, k): (usize, usize, usize),
    a: &MatRef<'_>,
    b: &MatRef<'_>,
) -> Result<(), KernelError> {
    if a.rows == m && a.cols == k && b.rows == k && b.cols == n {
        Ok(())
    } else {
        Err(shape_err("gemm: batch operand of another shape"))
    }
}
