//! The GEMM driver: blocking plan, the in-place and packed loop nests, the edge-tile writer,
//! and the entry points [`sgemm`], [`sgemm_with`] and the pre-packed-B variants.

use super::contract::*;
use super::gemv;
use super::matref::{shape_err, MatRef};
use super::pack_lhs_mr::pack_a;
use super::pack_lhs_mr_whole_k::PackedA;
use super::pack_rhs_nr::pack_b;
use super::pack_rhs_nr_whole_k::PackedB;
use super::portable::PORTABLE;
use super::select::{kernel_with_nr, micro_kernel_for};
use crate::error::KernelError;

fn round_up(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

/// Splits `k` into equal depth blocks of at most `cap` (at least 1): the block size.
fn split_depth(k: usize, cap: usize) -> usize {
    let cap = cap.max(1);
    k.div_ceil(k.div_ceil(cap).max(1)).max(1)
}

/// How one call is blocked and where its panels live in the scratch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) kc: usize,
    pub(super) mc: usize,
    pub(super) nc: usize,
    /// Floats of the packed A block.
    pub(super) a_len: usize,
    /// Floats of the packed B panel (packed mode) or of the packed column tail (direct).
    pub(super) b_len: usize,
}

/// Usable scratch floats (the rest aligns the panels to 64 bytes).
const BUDGET_F32: usize = GEMM_SCRATCH_F32 - ALIGN_F32;
/// Upper bound on the rows of A packed at once when B is read in place.
const MC_DIRECT: usize = 256;

pub(super) fn plan(uk: &MicroKernel, m: usize, n: usize, k: usize, direct_b: bool) -> Plan {
    let (mr, nr) = (uk.mr, uk.nr);
    let nc = (NC - NC % nr).max(nr);
    if direct_b {
        // A block (mc × kc) + one packed column-tail panel (kc × nr).
        let kc = split_depth(k, uk.kc_max.min(BUDGET_F32 / (mr + nr)));
        let tail = if !n.is_multiple_of(nr) { kc * nr } else { 0 };
        let strips = ((BUDGET_F32 - tail) / (kc * mr)).max(1);
        // Whole MR panels only: the A block holds `mc / mr` of them.
        let mc_cap = (MC_DIRECT - MC_DIRECT % mr).max(mr);
        let mc = (strips * mr).min(round_up(m, mr)).min(mc_cap);
        Plan {
            kc,
            mc,
            nc,
            a_len: mc * kc,
            b_len: tail,
        }
    } else {
        let kc = split_depth(k, KC);
        let mc = (MC - MC % mr).max(mr).min(round_up(m, mr));
        let ncb = nc.min(round_up(n, nr));
        Plan {
            kc,
            mc,
            nc,
            a_len: mc * kc,
            b_len: kc * ncb,
        }
    }
}

/// Scratch floats [`sgemm`] needs for an `m × n × k` product with the selected micro-kernel
/// and any operand layout (never more than [`GEMM_SCRATCH_F32`]).
pub fn sgemm_scratch_len(m: usize, n: usize, k: usize) -> usize {
    scratch_len_for(micro_kernel_for(m, n, k), m, n, k)
}

pub(super) fn scratch_len_for(uk: &MicroKernel, m: usize, n: usize, k: usize) -> usize {
    if m == 0 || n == 0 || k == 0 {
        return 0;
    }
    let need = |p: Plan| ALIGN_F32 + p.a_len + p.b_len;
    need(plan(uk, m, n, k, true)).max(need(plan(uk, m, n, k, false)))
}

/// `C = alpha·A·B + beta·C + bias` with the best micro-kernel for this CPU.
///
/// * `a` is `m × k`, `b` is `k × n` (any strides, see [`MatRef`]).
/// * `c` is row-major `m × n` with leading dimension `ldc ≥ n`: element `(i, j)` is
///   `c[i * ldc + j]`; only those elements are touched.
/// * `beta == 0.0` means C is write-only (never read; NaN or garbage is overwritten).
/// * `bias`, when given, has at least `n` elements and `bias[j]` is added **unscaled** to
///   every element of column `j` after the alpha/beta combination:
///   `c(i,j) = alpha·Σ_p a(i,p)·b(p,j) + beta·c(i,j) + bias[j]`.
/// * `alpha` always multiplies the computed product (`alpha = 0` still propagates NaN/Inf
///   from A or B, unlike a BLAS that skips the product).
/// * `scratch` must hold [`sgemm_scratch_len`]`(m, n, k)` floats (≤ [`GEMM_SCRATCH_F32`]).
///
/// A B with unit column stride (a row-major `[K, N]` matrix, e.g. an `addmm`/`mm` weight)
/// is read in place by the micro-kernel, whole `NR`-column panels at a time; any other B
/// (e.g. `linear`'s `[N, K]` weight viewed transposed) is packed panel by panel.
///
/// Errors: inner dimensions differ, `ldc < n`, C or bias too short (`KernelError::Shape`
/// with `arg: 0`: the GEMM does not know argument positions, callers validate first), or
/// scratch too small (`KernelError::Scratch`, in bytes).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    sgemm_clamped(a, b, c, ldc, alpha, beta, bias, None, scratch)
}

/// [`sgemm`] followed by an output clamp: every element of C is then clamped into
/// `range = (lo, hi)` (`max(lo)` then `min(hi)`, NaN becomes `lo`): the layer's activation
/// (ReLU, ReLU6, an XNNPACK node's `output_min/max`), applied by the micro-kernels as they
/// store each tile. `None` is [`sgemm`].
#[allow(clippy::too_many_arguments)]
pub fn sgemm_clamped(
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    // M = 1: the GEMV where this CPU has one (`gemv`), no packing; the clamp after it.
    if a.rows == 1 && gemv::sgemv(a, b, c, alpha, beta, bias) {
        clamp_rows(c, 1, b.cols, ldc, range);
        return Ok(());
    }
    let uk = micro_kernel_for(a.rows, b.cols, a.cols);
    with_kernel(uk, a, b, c, ldc, alpha, beta, bias, range, scratch)
}

/// Clamps rows `0..m` (columns `0..n`, row stride `ldc`) of C into `range` (the paths whose
/// kernels do not clamp: the GEMVs, the empty product). The rows are inside `c` (validated
/// by the caller's path).
fn clamp_rows(c: &mut [f32], m: usize, n: usize, ldc: usize, range: Option<(f32, f32)>) {
    let Some((lo, hi)) = range.filter(|&(lo, hi)| clamps(lo, hi)) else {
        return;
    };
    for i in 0..m {
        if let Some(row) = c.get_mut(i * ldc..i * ldc + n) {
            row.iter_mut().for_each(|v| *v = clamp(*v, lo, hi));
        }
    }
}

/// [`sgemm`] with an explicit micro-kernel (always that kernel: no GEMV for `M = 1`).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_with(
    uk: &MicroKernel,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    with_kernel(uk, a, b, c, ldc, alpha, beta, bias, None, scratch)
}

/// [`sgemm_with`] with an output clamp ([`sgemm_clamped`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn with_kernel(
    uk: &MicroKernel,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    let Some(call) = Call::checked(uk, (m, n, k), c, ldc, alpha, beta, bias, range)? else {
        return Ok(());
    };
    let b = if b.cs == 1 {
        BSource::InPlace(b)
    } else {
        BSource::Strided(b)
    };
    run_nest(&call, ASource::Mat(a), b, c, scratch)
}

/// Validates C and bias for an `m × n × k` call and applies the empty product (`k = 0`:
/// `C = clamp(beta·C + bias)`). `Ok(false)` when nothing is left to compute.
#[allow(clippy::too_many_arguments)]
fn check_call(
    uk: &MicroKernel,
    m: usize,
    n: usize,
    k: usize,
    c: &mut [f32],
    ldc: usize,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
) -> Result<bool, KernelError> {
    if uk.mr == 0 || uk.nr == 0 || uk.mr > MAX_MR || uk.nr > MAX_NR {
        return Err(KernelError::Unsupported {
            detail: "gemm: micro-kernel tile exceeds MAX_MR x MAX_NR",
        });
    }
    if m == 0 || n == 0 {
        return Ok(false);
    }
    if ldc < n {
        return Err(shape_err("gemm: ldc < n"));
    }
    let c_need = (m - 1)
        .checked_mul(ldc)
        .and_then(|x| x.checked_add(n))
        .ok_or(shape_err("gemm: C extent overflows"))?;
    if c.len() < c_need {
        return Err(shape_err("gemm: C slice too short"));
    }
    if let Some(bv) = bias {
        if bv.len() < n {
            return Err(shape_err("gemm: bias shorter than n"));
        }
    }
    if k == 0 {
        // Empty product: C = beta·C + bias.
        for i in 0..m {
            let row = &mut c[i * ldc..i * ldc + n];
            for (j, x) in row.iter_mut().enumerate() {
                let mut v = if beta == 0.0 { 0.0 } else { beta * *x };
                if let Some(bv) = bias {
                    v += bv[j];
                }
                *x = v;
            }
        }
        clamp_rows(c, m, n, ldc, range);
        return Ok(false);
    }
    Ok(true)
}

/// Where the direct loop nest reads A from.
#[derive(Clone, Copy)]
enum ASource<'a> {
    /// A strided matrix, packed block by block into the scratch.
    Mat(MatRef<'a>),
    /// Whole-depth panels packed ahead of time ([`PackedA`], `mr` = the kernel's).
    Packed(PackedA<'a>),
}

/// Where the direct loop nest reads B from.
#[derive(Clone, Copy)]
enum BSource<'b> {
    /// A row-major B (unit column stride) read in place; the column tail is packed.
    InPlace(MatRef<'b>),
    /// Whole-depth panels packed ahead of time ([`PackedB`]).
    Prepacked(PackedB<'b>),
    /// Any other strides: packed panel by panel (the packed loop nest; A is then a matrix).
    Strided(MatRef<'b>),
}

/// One product's fixed parameters (shared by every core of a split call).
struct Call<'k> {
    uk: &'k MicroKernel,
    m: usize,
    n: usize,
    k: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&'k [f32]>,
    /// The output clamp, `(-∞, +∞)` for none.
    lo: f32,
    hi: f32,
}

impl<'k> Call<'k> {
    /// The call, after validating C and bias and applying an empty product
    /// ([`check_call`]); `None` when nothing is left to compute.
    #[allow(clippy::too_many_arguments)]
    fn checked(
        uk: &'k MicroKernel,
        (m, n, k): (usize, usize, usize),
        c: &mut [f32],
        ldc: usize,
        alpha: f32,
        beta: f32,
        bias: Option<&'k [f32]>,
        range: Option<(f32, f32)>,
    ) -> Result<Option<Call<'k>>, KernelError> {
        if !check_call(uk, m, n, k, c, ldc, beta, bias, range)? {
            return Ok(None);
        }
        let (lo, hi) = range.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        Ok(Some(Call {
            uk,
            m,
            n,
            k,
            ldc,
            alpha,
            beta,
            bias,
            lo,
            hi,
        }))
    }
}

/// C as a raw pointer that the cores of a split call share (each writes its own tiles).
#[derive(Clone, Copy)]
struct SharedC {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the cores of a split product write disjoint sets of C elements (whole column panels
// or whole row tiles, `run_nest`), and `Team::run` joins them before C's borrow ends.
unsafe impl Sync for SharedC {}
// SAFETY: as for `Sync`: a pointer to C handed to the cores of one split call.
unsafe impl Send for SharedC {}

/// Runs the loop nest for `call` on the installed team's cores when it is large enough and
/// worth it (see [`parallel`](crate::parallel)), else on this core.
///
/// The split never changes a result bit: every part uses the same micro-kernel and the same
/// depth blocks (`plan` depends on `k` and the kernel only), and parts are whole `NR`-column
/// panels or whole `MR`-row tiles, so each C tile is computed by the same kernel calls, in the
/// same order, through the same path (whole tile or edge tile) as on one core.
fn run_nest(
    call: &Call<'_>,
    a: ASource<'_>,
    b: BSource<'_>,
    c: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (uk, m, n, k) = (call.uk, call.m, call.n, call.k);
    let need = scratch_len_for(uk, m, n, k);
    if scratch.len() < need {
        return Err(KernelError::Scratch {
            needed: need * 4,
            got: scratch.len() * 4,
        });
    }
    let shared = SharedC {
        ptr: c.as_mut_ptr(),
        len: c.len(),
    };
    let split = crate::parallel::with_team(|team| {
        let Some(team) = team.filter(|t| t.scratch_f32() >= need) else {
            return false;
        };
        let (row_tiles, col_panels) = (m.div_ceil(uk.mr), n.div_ceil(uk.nr));
        // Column panels keep each core's B apart and need no A rows split; rows when the
        // product is too narrow to give every core a panel.
        let by_cols = col_panels >= team.cores() || col_panels >= row_tiles;
        let units = if by_cols { col_panels } else { row_tiles };
        let parts = crate::parallel::parts_for(team, units, m.saturating_mul(n).saturating_mul(k));
        if parts < 2 {
            return false;
        }
        team.run(parts, &|core| {
            let (lo, hi) = crate::parallel::part_range(units, core.parts, core.index);
            if lo < hi {
                // SAFETY: parts of one split get disjoint unit ranges; `shared` is C of this
                // call, borrowed until `run` has joined every part.
                unsafe { part(call, a, b, shared, by_cols, lo, hi, core.scratch) };
            }
        });
        true
    });
    if !split {
        // SAFETY: the whole product, on this core, through the exclusive borrow of `c`.
        unsafe { part(call, a, b, shared, true, 0, n.div_ceil(uk.nr), scratch) };
    }
    Ok(())
}

/// Computes column panels (`by_cols`) or row tiles `lo..hi` of `call` into C.
///
/// # Safety
/// `c` is the call's validated C (`check_call`), not accessed by anyone else but other parts
/// of the same call with disjoint ranges; `scratch` holds `scratch_len_for` of the whole call.
#[allow(clippy::too_many_arguments)]
unsafe fn part(
    call: &Call<'_>,
    a: ASource<'_>,
    b: BSource<'_>,
    c: SharedC,
    by_cols: bool,
    lo: usize,
    hi: usize,
    scratch: &mut [f32],
) {
    let (uk, m, n, k, ldc) = (call.uk, call.m, call.n, call.k, call.ldc);
    let (a, b, rows, cols, c_off, bias) = if by_cols {
        let (j0, j1) = (lo * uk.nr, (hi * uk.nr).min(n));
        let b = match b {
            BSource::InPlace(bm) => BSource::InPlace(bm.col_range(j0, j1 - j0)),
            BSource::Strided(bm) => BSource::Strided(bm.col_range(j0, j1 - j0)),
            BSource::Prepacked(pb) => BSource::Prepacked(pb.panel_range(j0, j1 - j0)),
        };
        (a, b, m, j1 - j0, j0, call.bias.map(|bv| &bv[j0..]))
    } else {
        let (i0, i1) = (lo * uk.mr, (hi * uk.mr).min(m));
        let a = match a {
            ASource::Mat(am) => ASource::Mat(am.row_range(i0, i1 - i0)),
            ASource::Packed(pa) => ASource::Packed(pa.panel_range(i0, i1 - i0)),
        };
        (a, b, i1 - i0, n, i0 * ldc, call.bias)
    };
    // SAFETY: per this function's contract; `c_off` starts row i0 / column j0 of C.
    let mut t = unsafe { Tiles::window(uk, c, c_off, ldc, call.alpha, bias, (call.lo, call.hi)) };
    match (a, b) {
        (ASource::Mat(am), BSource::Strided(bm)) => {
            packed(&mut t, &am, &bm, rows, cols, k, call.beta, scratch)
        }
        (a, b) => direct(&mut t, a, b, rows, cols, k, call.beta, scratch),
    }
}

/// The direct loop nest: pc → ic (pack A once) → jc → ir → jr, B never packed except a
/// column tail of an in-place B (n mod NR, once per depth block).
#[allow(clippy::too_many_arguments)]
fn direct(
    t: &mut Tiles<'_>,
    a: ASource<'_>,
    b: BSource<'_>,
    m: usize,
    n: usize,
    k: usize,
    beta: f32,
    scratch: &mut [f32],
) {
    let uk = t.uk;
    let plan = plan(uk, m, n, k, true);
    let off = scratch.as_ptr().align_offset(ALIGN_F32 * 4).min(ALIGN_F32);
    // Scratch layout: [pad to 64 bytes][packed column tail][packed A block].
    let (bpack, rest) = scratch[off..].split_at_mut(plan.b_len);
    let apack = &mut rest[..plan.a_len];
    let (mr, nr, kc) = (uk.mr, uk.nr, plan.kc);
    let n_full = match b {
        BSource::InPlace(_) => n - n % nr,
        _ => n,
    };
    let mut pc = 0;
    while pc < k {
        let kcb = kc.min(k - pc);
        let beta_eff = if pc == 0 { beta } else { 1.0 };
        let last = pc + kcb == k;
        if let BSource::InPlace(bm) = b {
            if n_full < n {
                pack_b(uk, &bm, pc, kcb, n_full, n - n_full, bpack);
            }
        }
        let mut ic = 0;
        while ic < m {
            let mcb = plan.mc.min(m - ic);
            if let ASource::Mat(am) = &a {
                pack_a(uk, am, ic, mcb, pc, kcb, apack);
            }
            let mut jc = 0;
            while jc < n {
                let ncb = plan.nc.min(n - jc);
                for ir in (0..mcb).step_by(mr) {
                    let ap = match &a {
                        ASource::Mat(_) => &apack[(ir / mr) * kcb * mr..][..kcb * mr],
                        // Panel (ic + ir)/mr (ic is a multiple of mr), depths pc.. of a
                        // validated PackedA with this kernel's mr.
                        ASource::Packed(pa) => {
                            &pa.data[(ic + ir) / mr * k * mr + pc * mr..][..kcb * mr]
                        }
                    };
                    // Whole tiles whose B panels are evenly spaced: one tight run.
                    let end = jc + ncb;
                    let (limit, stride) = match b {
                        BSource::InPlace(_) => (n_full.min(end), nr),
                        BSource::Prepacked(_) => (end, k * nr),
                        BSource::Strided(_) => (jc, 0),
                    };
                    let whole = if mcb - ir >= mr {
                        limit.saturating_sub(jc) / nr
                    } else {
                        0
                    };
                    if whole > 0 {
                        let bptr = match b {
                            // Rows pc.. and columns jc.. of a validated in-place B (whole
                            // panels end at or before n_full ≤ n).
                            BSource::InPlace(bm) => bm.data[pc * bm.rs + jc..].as_ptr(),
                            // Panel jc/nr, rows pc.. of a validated PackedB.
                            BSource::Prepacked(pb) => {
                                pb.data[(jc / nr) * k * nr + pc * nr..].as_ptr()
                            }
                            BSource::Strided(_) => bpack.as_ptr(),
                        };
                        let ldb = match b {
                            BSource::InPlace(bm) => bm.rs,
                            _ => nr,
                        };
                        // SAFETY: panel q < whole reads kcb rows of nr floats at
                        // bptr + q·stride + p·ldb, inside B (columns jc + q·nr + nr ≤ limit);
                        // `ap` has kcb·mr floats; the tiles are whole and this part's.
                        unsafe {
                            t.panels(
                                ap,
                                bptr,
                                ldb,
                                stride,
                                whole,
                                kcb,
                                ic + ir,
                                jc,
                                beta_eff,
                                last,
                            )
                        };
                    }
                    for jr in (jc + whole * nr..end).step_by(nr) {
                        let (bptr, ldb) = match b {
                            // In bounds: rows pc..pc+kcb < k and columns jr..jr+nr ≤ n of a
                            // validated MatRef with unit column stride.
                            BSource::InPlace(bm) if jr < n_full => {
                                (bm.data[pc * bm.rs + jr..].as_ptr(), bm.rs)
                            }
                            BSource::InPlace(_) | BSource::Strided(_) => (bpack.as_ptr(), nr),
                            // Panel jr/nr, rows pc.. of a validated PackedB (k·nr floats
                            // per panel, nr == uk.nr checked by the caller).
                            BSource::Prepacked(pb) => {
                                (pb.data[(jr / nr) * k * nr + pc * nr..].as_ptr(), nr)
                            }
                        };
                        // SAFETY: `bptr` rows p < kcb hold nr readable floats at p·ldb
                        // (in place: B(pc+p, jr..jr+nr) inside `b.data`; tail: the packed
                        // kcb × nr panel; prepacked: rows pc+p of a k × nr panel); `ap` has
                        // kcb·mr floats.
                        unsafe {
                            t.tile(
                                ap,
                                bptr,
                                ldb,
                                kcb,
                                ic + ir,
                                mcb - ir,
                                jr,
                                n - jr,
                                beta_eff,
                                last,
                            )
                        };
                    }
                }
                jc += ncb;
            }
            ic += mcb;
        }
        pc += kcb;
    }
}

/// The packed loop nest: jc → pc (pack B) → ic (pack A) → ir → jr (the A micro-panel stays
/// in L1 across the row of tiles, which whole tiles cover in one [`Tiles::panels`] run).
#[allow(clippy::too_many_arguments)]
fn packed(
    t: &mut Tiles<'_>,
    a: &MatRef<'_>,
    b: &MatRef<'_>,
    m: usize,
    n: usize,
    k: usize,
    beta: f32,
    scratch: &mut [f32],
) {
    let uk = t.uk;
    let plan = plan(uk, m, n, k, false);
    let off = scratch.as_ptr().align_offset(ALIGN_F32 * 4).min(ALIGN_F32);
    // Scratch layout: [pad to 64 bytes][packed B panel][packed A block].
    let (bpack, rest) = scratch[off..].split_at_mut(plan.b_len);
    let apack = &mut rest[..plan.a_len];
    let (mr, nr, kc) = (uk.mr, uk.nr, plan.kc);
    let mut jc = 0;
    while jc < n {
        let ncb = plan.nc.min(n - jc);
        let mut pc = 0;
        while pc < k {
            let kcb = kc.min(k - pc);
            let beta_eff = if pc == 0 { beta } else { 1.0 };
            let last = pc + kcb == k;
            pack_b(uk, b, pc, kcb, jc, ncb, bpack);
            let mut ic = 0;
            while ic < m {
                let mcb = plan.mc.min(m - ic);
                pack_a(uk, a, ic, mcb, pc, kcb, apack);
                for ir in (0..mcb).step_by(mr) {
                    let ap = &apack[(ir / mr) * kcb * mr..][..kcb * mr];
                    // Whole tiles in one run over the packed panels (kcb·nr floats apart).
                    let whole = if mcb - ir >= mr { ncb / nr } else { 0 };
                    if whole > 0 {
                        // SAFETY: panels q < whole of the packed B block (kcb × nr each, ldb =
                        // nr); `ap` has kcb·mr floats; whole tiles of this part.
                        unsafe {
                            t.panels(
                                ap,
                                bpack.as_ptr(),
                                nr,
                                kcb * nr,
                                whole,
                                kcb,
                                ic + ir,
                                jc,
                                beta_eff,
                                last,
                            )
                        };
                    }
                    for jr in (whole * nr..ncb).step_by(nr) {
                        let bp = &bpack[(jr / nr) * kcb * nr..][..kcb * nr];
                        // SAFETY: `bp` is a packed kcb × nr panel (ldb = nr), `ap` has
                        // kcb·mr floats.
                        unsafe {
                            t.tile(
                                ap,
                                bp.as_ptr(),
                                nr,
                                kcb,
                                ic + ir,
                                mcb - ir,
                                jc + jr,
                                n - jc - jr,
                                beta_eff,
                                last,
                            )
                        };
                    }
                }
                ic += mcb;
            }
            pc += kcb;
        }
        jc += ncb;
    }
}

/// The C side of the driver: runs the micro-kernel on one tile, straight into C when the
/// tile is whole, through `tmp` at the M/N edges (left uninitialised: zeroing 8 KiB per call
/// costs more than a small product; the kernel writes the whole tile before it is read).
///
/// C is a raw window (`c` at element 0 of this part, `len` elements reachable from it): the
/// cores of a split product write disjoint tiles of one C whose rows interleave, so no core
/// may hold a slice over another's elements.
struct Tiles<'k> {
    uk: &'k MicroKernel,
    c: *mut f32,
    len: usize,
    ldc: usize,
    alpha: f32,
    bias: Option<&'k [f32]>,
    /// The output clamp (applied with the last depth block, like the bias).
    lo: f32,
    hi: f32,
    tmp: core::mem::MaybeUninit<[f32; MAX_MR * MAX_NR]>,
}

impl<'k> Tiles<'k> {
    /// The tile writer of a part whose tile (0, 0) starts at element `off` of `c`.
    ///
    /// # Safety
    /// Every tile the part writes lies inside `c` (validated by `check_call` for the whole
    /// call; parts are whole tiles of it) and no other code accesses those elements until the
    /// part is done.
    unsafe fn window(
        uk: &'k MicroKernel,
        c: SharedC,
        off: usize,
        ldc: usize,
        alpha: f32,
        bias: Option<&'k [f32]>,
        (lo, hi): (f32, f32),
    ) -> Tiles<'k> {
        Tiles {
            uk,
            // In bounds: `off` is the first element of a tile of C (`off < c.len`).
            c: c.ptr.wrapping_add(off),
            len: c.len.saturating_sub(off),
            ldc,
            alpha,
            bias,
            lo,
            hi,
            tmp: core::mem::MaybeUninit::uninit(),
        }
    }

    /// `np` whole tiles side by side: rows `row0 .. row0 + mr`, columns `col0 + q·nr .. + nr`
    /// for `q < np`, tile `q` reading B at `bptr + q·stride` (rows `ldb` apart). The kernel is
    /// called straight in a loop: the same calls, in the same order, as [`Tiles::tile`] makes
    /// for whole tiles.
    ///
    /// # Safety
    /// `ap` holds `kc·mr` floats; each tile's B has `kc` rows of `nr` readable floats; every
    /// tile is whole (`row0 + mr ≤` the part's rows, `col0 + np·nr ≤` its columns) and one of
    /// this part's (see [`Tiles::window`]).
    #[allow(clippy::too_many_arguments)]
    unsafe fn panels(
        &mut self,
        ap: &[f32],
        bptr: *const f32,
        ldb: usize,
        stride: usize,
        np: usize,
        kc: usize,
        row0: usize,
        col0: usize,
        beta: f32,
        last: bool,
    ) {
        let (nr, ldc) = (self.uk.nr, self.ldc);
        let (bias, lo, hi) = match self.bias {
            Some(bv) if last => (bv[col0..col0 + np * nr].as_ptr(), self.lo, self.hi),
            None if last => (core::ptr::null(), self.lo, self.hi),
            _ => (core::ptr::null(), f32::NEG_INFINITY, f32::INFINITY),
        };
        let c_off = row0 * ldc + col0;
        debug_assert!(c_off + (self.uk.mr - 1) * ldc + np * nr <= self.len);
        let kernel = self.uk.kernel;
        for q in 0..np {
            // SAFETY: tile q's B (caller), A (`ap`, kc·mr floats), C tile (whole, inside the
            // window, this part's alone) and bias (nr floats from column col0 + q·nr < the
            // bias length, sliced above) per the kernel contract; the kernel's CPU features are
            // present (kernels are only handed out after detection).
            unsafe {
                kernel(
                    kc,
                    ap.as_ptr(),
                    bptr.add(q * stride),
                    ldb,
                    self.c.add(c_off + q * nr),
                    ldc as isize,
                    self.alpha,
                    beta,
                    if bias.is_null() {
                        bias
                    } else {
                        bias.add(q * nr)
                    },
                    lo,
                    hi,
                )
            };
        }
    }

    /// Tile rows `row0 .. row0 + min(mr, rows_left)`, columns `col0 .. + min(nr, cols_left)`.
    ///
    /// # Safety
    /// `ap` holds `kc·mr` floats; `bptr` has `kc` rows of `nr` readable floats `ldb` apart;
    /// the tile is one of this part's (see [`Tiles::window`]).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    unsafe fn tile(
        &mut self,
        ap: &[f32],
        bptr: *const f32,
        ldb: usize,
        kc: usize,
        row0: usize,
        rows_left: usize,
        col0: usize,
        cols_left: usize,
        beta: f32,
        last: bool,
    ) {
        let (mr, nr, ldc) = (self.uk.mr, self.uk.nr, self.ldc);
        let (mrb, nrb) = (mr.min(rows_left), nr.min(cols_left));
        let bias = match self.bias {
            Some(bv) if last => Some(&bv[col0..col0 + nrb]),
            _ => None,
        };
        let (lo, hi) = if last {
            (self.lo, self.hi)
        } else {
            (f32::NEG_INFINITY, f32::INFINITY)
        };
        let c_off = row0 * ldc + col0;
        // Bounds: rows row0 .. row0+mrb ≤ m and columns col0 .. col0+nrb ≤ n of the part, so
        // the last element c_off+(mrb-1)*ldc+nrb-1 is inside the window.
        debug_assert!(c_off + (mrb - 1) * ldc + nrb <= self.len);
        if mrb == mr && nrb == nr {
            // SAFETY: a whole tile of this part, A and B per this function's contract.
            unsafe { self.panels(ap, bptr, ldb, 0, 1, kc, row0, col0, beta, last) };
            return;
        }
        let tmp = self.tmp.as_mut_ptr() as *mut f32;
        if let Some(f) = self.uk.rows.and_then(|rk| rk.for_rows(mrb)) {
            // The M edge by a row kernel: no padded rows computed. Whole columns go straight
            // into C with the epilogue in the kernel; a column edge goes through `tmp`.
            let direct = nrb == nr;
            let (dst, rs, beta_k, bias_k, lo_k, hi_k) = if direct {
                let bias = match bias {
                    Some(bv) => bv.as_ptr(),
                    None => core::ptr::null(),
                };
                // Element (row0, col0) of this part's C: inside the window (bounds above).
                (self.c.wrapping_add(c_off), ldc, beta, bias, lo, hi)
            } else {
                (
                    tmp,
                    nr,
                    0.0,
                    core::ptr::null(),
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                )
            };
            // SAFETY: the row kernel reads the kc·mr panel `ap` as the tile does and B as
            // the tile; it writes C rows 0 .. mrb of the tile: `direct`, nr whole columns
            // of this part's rows row0.. (< its rows, bounds above) with an nr-float bias
            // slice when non-null; else rows of `tmp` (mr·nr ≤ MAX_MR·MAX_NR floats, row
            // stride nr), beta = 0, no bias.
            unsafe {
                f(
                    kc,
                    ap.as_ptr(),
                    bptr,
                    ldb,
                    dst,
                    rs as isize,
                    self.alpha,
                    beta_k,
                    bias_k,
                    lo_k,
                    hi_k,
                )
            };
            if direct {
                return;
            }
        } else {
            // SAFETY: as above for A/B; `tmp` holds mr·nr ≤ MAX_MR·MAX_NR floats with row
            // stride nr, beta = 0 (not read), no bias.
            unsafe {
                (self.uk.kernel)(
                    kc,
                    ap.as_ptr(),
                    bptr,
                    ldb,
                    tmp,
                    nr as isize,
                    self.alpha,
                    0.0,
                    core::ptr::null(),
                    f32::NEG_INFINITY,
                    f32::INFINITY,
                )
            };
        }
        for i in 0..mrb {
            // SAFETY: the kernel calls above stored every element (i, j), i < mrb (the row
            // kernels) or i < mr (the tile's kernel), j < nr, of the tile at tmp + i·nr + j
            // (contract, beta = 0), so these nrb ≤ nr floats of row i < mrb ≤ mr are
            // initialised and inside the MAX_MR·MAX_NR array.
            let trow = unsafe {
                core::slice::from_raw_parts((self.tmp.as_ptr() as *const f32).add(i * nr), nrb)
            };
            // SAFETY: elements (row0 + i, col0 + j), j < nrb, of this part's tile: inside the
            // window (bounds above), and no one else's (a slice over this tile row only).
            let crow = unsafe { core::slice::from_raw_parts_mut(self.c.add(c_off + i * ldc), nrb) };
            // One whole-row pass the compiler vectorises per case, in the kernel's order of
            // operations ((t + beta·c) + bias): a fully-connected layer's bias is added as
            // the row is stored, with no separate copy (a library call per row).
            match (beta != 0.0, bias) {
                (false, None) => crow.copy_from_slice(trow),
                (false, Some(bv)) => {
                    for ((x, &t), &b) in crow.iter_mut().zip(trow).zip(bv) {
                        *x = t + b;
                    }
                }
                (true, None) => {
                    for (x, &t) in crow.iter_mut().zip(trow) {
                        *x = t + beta * *x;
                    }
                }
                (true, Some(bv)) => {
                    for ((x, &t), &b) in crow.iter_mut().zip(trow).zip(bv) {
                        *x = (t + beta * *x) + b;
                    }
                }
            }
            if clamps(lo, hi) {
                for x in crow.iter_mut() {
                    *x = clamp(*x, lo, hi);
                }
            }
        }
    }
}

/// [`sgemm`] with B pre-packed ([`PackedB`]): `C = alpha·A·B + beta·C + bias`, same
/// contract for A, C, bias, alpha, beta and `scratch` ([`sgemm_scratch_len`]).
///
/// Uses the shape's micro-kernel if its tile width is `b.nr()` (panels read in place, only
/// A is packed), else a kernel of the same ISA with that width, else computes each panel as
/// a row-major `k × nr` product with [`sgemm`] (same result, B still read in place).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    sgemm_prepacked_clamped(a, b, c, ldc, alpha, beta, bias, None, scratch)
}

/// [`sgemm_prepacked`] with an output clamp, as [`sgemm_clamped`].
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked_clamped(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.n);
    if b.k != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    if m <= GEMV_ROWS && a.cs == 1 && gemv_panels(a, b, c, ldc, alpha, beta, bias)? {
        clamp_rows(c, m, n, ldc, range);
        return Ok(());
    }
    let uk = Some(micro_kernel_for(m, n, k))
        .filter(|uk| uk.nr == b.nr)
        .or_else(|| kernel_with_nr(b.nr));
    let Some(uk) = uk else {
        // No kernel of this width here: one in-place product per panel.
        if !check_call(&PORTABLE, m, n, k, c, ldc, beta, bias, range)? {
            return Ok(());
        }
        for (q, panel) in b.data.chunks_exact(k * b.nr).enumerate() {
            let j0 = q * b.nr;
            let w = b.nr.min(n - j0);
            let bq = MatRef::new(panel, k, w, b.nr, 1)?;
            let bias_q = bias.map(|bv| &bv[j0..j0 + w]);
            sgemm_clamped(
                a,
                bq,
                &mut c[j0..],
                ldc,
                alpha,
                beta,
                bias_q,
                range,
                scratch,
            )?;
        }
        return Ok(());
    };
    with_packed_b(
        uk,
        ASource::Mat(a),
        (m, k),
        b,
        c,
        ldc,
        (alpha, beta, bias, range),
        scratch,
    )
}

/// Products with at most this many rows go through the GEMV, panel by panel, when B is
/// pre-packed: a micro-kernel tile of 8 (Neon) or 2·SVL/32 (SME) rows would mostly compute
/// padding (e.g. a language-model head reduced to its last row).
const GEMV_ROWS: usize = 4;

/// Each row of A times each whole-depth panel of B (a `k × nr` row-major matrix) with the
/// CPU's GEMV. `Ok(false)`, touching nothing, when this CPU has no GEMV for that layout.
fn gemv_panels(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
) -> Result<bool, KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.n);
    if !super::select::gemv_for_single_rows() || k == 0 {
        return Ok(false);
    }
    if !check_call(&PORTABLE, m, n, k, c, ldc, beta, bias, None)? {
        return Ok(true);
    }
    // Whether this CPU has a GEMV for a row-major panel: asked once, on the first panel.
    let probe = MatRef::new(&b.data[..k * b.nr], k, b.nr.min(n), b.nr, 1)?;
    if !gemv::accepts(a.cols, probe) {
        return Ok(false);
    }
    let panels = n.div_ceil(b.nr);
    let errors = crate::parallel::FirstError::default();
    let shared = crate::parallel::SharedSlice::new(c);
    let one = |q: usize| -> Result<(), KernelError> {
        let j0 = q * b.nr;
        let w = b.nr.min(n - j0);
        let bq = MatRef::new(&b.data[q * k * b.nr..(q + 1) * k * b.nr], k, w, b.nr, 1)?;
        let bias_q = bias.map(|bv| &bv[j0..j0 + w]);
        for i in 0..m {
            // Row i of a validated view: 1 × k at offset i·rs, unit column stride.
            let xi = MatRef::new(&a.data[i * a.rs..], 1, k, a.rs.max(k), 1)?;
            // SAFETY: (row i, panel q) elements of C belong to the part that owns panel q.
            let row = unsafe { shared.range(i * ldc + j0, i * ldc + j0 + w) };
            if !gemv::sgemv(xi, bq, row, alpha, beta, bias_q) {
                return Err(shape_err("gemm: GEMV refused a panel it accepted"));
            }
        }
        Ok(())
    };
    // Panels across cores (each computed as one core computes it).
    let split = crate::parallel::try_split(panels, m * k * b.nr, |lo, hi, _| {
        for q in lo..hi {
            if let Err(e) = one(q) {
                return errors.put(e);
            }
        }
    });
    if !split {
        for q in 0..panels {
            one(q)?;
        }
    }
    errors.result()?;
    Ok(true)
}

/// [`sgemm_prepacked`] with an explicit micro-kernel, whose tile width must be `b.nr()`
/// (`KernelError::Unsupported` otherwise).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_prepacked_with(
    uk: &MicroKernel,
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if uk.nr != b.nr {
        return Err(KernelError::Unsupported {
            detail: "gemm: packed B tile width differs from the micro-kernel's",
        });
    }
    with_packed_b(
        uk,
        ASource::Mat(a),
        (a.rows, a.cols),
        b,
        c,
        ldc,
        (alpha, beta, bias, None),
        scratch,
    )
}

/// `C = clamp(alpha·A·B + beta·C + bias)` with both operands packed ahead ([`PackedA`] for
/// this kernel's `mr`, [`PackedB`] for its `nr`): nothing is packed during the call, the
/// panels are read in place. Same contract for C, bias, alpha, beta, `range` (as
/// [`sgemm_clamped`]) and `scratch` as [`sgemm`].
#[allow(clippy::too_many_arguments)]
pub fn sgemm_packed_with(
    uk: &MicroKernel,
    a: PackedA<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    bias: Option<&[f32]>,
    range: Option<(f32, f32)>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    if uk.nr != b.nr || uk.mr != a.mr {
        return Err(KernelError::Unsupported {
            detail: "gemm: packed tile sizes differ from the micro-kernel's",
        });
    }
    with_packed_b(
        uk,
        ASource::Packed(a),
        (a.m, a.k),
        b,
        c,
        ldc,
        (alpha, beta, bias, range),
        scratch,
    )
}

/// `alpha`, `beta`, bias and output clamp of one call.
type Epilogue<'a> = (f32, f32, Option<&'a [f32]>, Option<(f32, f32)>);

/// The direct loop nest over a pre-packed B whose tile width is `uk`'s (checked by the
/// callers), A `m × k` from `a`.
#[allow(clippy::too_many_arguments)]
fn with_packed_b(
    uk: &MicroKernel,
    a: ASource<'_>,
    (m, k): (usize, usize),
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    (alpha, beta, bias, range): Epilogue<'_>,
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let n = b.n;
    if b.k != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    let Some(call) = Call::checked(uk, (m, n, k), c, ldc, alpha, beta, bias, range)? else {
        return Ok(());
    };
    run_nest(&call, a, BSource::Prepacked(b), c, scratch)
}

/// The micro-kernel [`sgemm_prepacked`] uses for an `m × n × k` product with B packed for
/// tile width `nr` (`None`: no kernel of this ISA has that width), e.g. to pack A for it.
pub fn kernel_for_prepacked(
    m: usize,
    n: usize,
    k: usize,
    nr: usize,
) -> Option<&'static MicroKernel> {
    Some(micro_kernel_for(m, n, k))
        .filter(|uk| uk.nr == nr)
        .or_else(|| kernel_with_nr(nr))
}
