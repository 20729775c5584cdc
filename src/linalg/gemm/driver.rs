//! The GEMM driver: blocking plan, the in-place and packed loop nests (tiles written by
//! [`super::tiles`]), and the entry points [`sgemm`], [`sgemm_with`] and the pre-packed-B variants.

use super::checks::{check_call, clamp_rows};
use super::contract::*;
use super::gemv;
use super::gemv_panels::{gemv_panels, GEMV_ROWS};
use super::matref::{shape_err, MatRef};
use super::pack_lhs_mr::pack_a;
use super::pack_lhs_mr_whole_k::PackedA;
use super::pack_rhs_nr::pack_b;
use super::pack_rhs_nr_whole_k::PackedB;
use super::portable::PORTABLE;
use super::select::{kernel_with_nr, micro_kernel_for};
use super::split::{self, col_unit, SplitHint};
use super::tiles::{SharedC, Tiles};
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
    if uk.wide.is_none() {
        return plan_with(uk, m, n, k, direct_b, false);
    }
    let nc = (NC - NC % uk.nr).max(uk.nr);
    // The packed nest packs A per column block: wide when its blocks are (`wide_for`).
    let cols = if direct_b { n } else { n.min(nc) };
    plan_with(uk, m, n, k, direct_b, wide_for(uk, cols).is_some())
}

/// [`plan`] with A panels wide (`wide`, the kernel has a wide entry) or MR-interleaved. The
/// depth block depends on the kernel alone (a split call's parts, which may decide `wide`
/// differently, block the depth alike and so compute the same bits); the rows per A block
/// follow the panel size.
#[inline]
fn plan_with(uk: &MicroKernel, m: usize, n: usize, k: usize, direct_b: bool, wide: bool) -> Plan {
    let (mr, nr) = (uk.mr, uk.nr);
    // Floats of one A panel of `kc` steps as the kernel reads it (a wide panel holds `rep`
    // copies of each 128-bit group, plus one padded step for an odd `kc`).
    let rep = uk.wide.map_or(1, |w| w.rep);
    let panel = |kc: usize| match uk.wide {
        Some(w) if wide => w.panel_len(kc),
        _ => kc * mr,
    };
    let mc_rep = if wide { rep } else { 1 };
    let nc = (NC - NC % nr).max(nr);
    if direct_b {
        // A block (mc × kc) + one packed column-tail panel (kc × nr). With an even cap a
        // wide panel of any kc ≤ cap takes at most cap·mr·rep floats.
        let mut cap = BUDGET_F32 / (mr * rep + nr);
        if uk.wide.is_some() {
            cap -= cap % 2;
        }
        let kc = split_depth(k, uk.kc_max.min(cap));
        let tail = if !n.is_multiple_of(nr) { kc * nr } else { 0 };
        let strips = ((BUDGET_F32 - tail) / panel(kc)).max(1);
        // Whole MR panels only: the A block holds `mc / mr` of them.
        let mc_cap = (MC_DIRECT - MC_DIRECT % mr).max(mr);
        let mc = (strips * mr).min(round_up(m, mr)).min(mc_cap);
        Plan {
            kc,
            mc,
            nc,
            a_len: mc / mr * panel(kc),
            b_len: tail,
        }
    } else {
        let kc = split_depth(k, KC);
        // Wide panels are `rep` times larger: fewer rows per block, the same floats.
        let mc_top = MC / mc_rep;
        let mc = (mc_top - mc_top % mr).max(mr).min(round_up(m, mr));
        let ncb = nc.min(round_up(n, nr));
        Plan {
            kc,
            mc,
            nc,
            a_len: mc / mr * panel(kc),
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
    let plain = need(plan_with(uk, m, n, k, true, false));
    let plain = plain.max(need(plan_with(uk, m, n, k, false, false)));
    if wide_for(uk, n).is_none() {
        return plain; // no part (at most n columns) reads wide panels
    }
    // Every part of a split call plans for its own columns, wide or not: the most any needs.
    plain
        .max(need(plan_with(uk, m, n, k, true, true)))
        .max(need(plan_with(uk, m, n, k, false, true)))
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
    let epilogue = (alpha, beta, bias, range);
    sgemm_hinted(a, b, c, ldc, epilogue, scratch, SplitHint::NONE)
}

/// [`sgemm_clamped`] (`epilogue` = alpha, beta, bias, clamp) with its split across the
/// installed team decided ahead: `hint` from [`split_hint`](super::split_hint) for this shape
/// and B form, made with a team of the same size installed (any other hint is ignored and the
/// call decides, as [`sgemm_clamped`]). Same result bits as [`sgemm_clamped`] whatever the
/// hint.
pub fn sgemm_hinted(
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    (alpha, beta, bias, range): Epilogue<'_>,
    scratch: &mut [f32],
    hint: SplitHint,
) -> Result<(), KernelError> {
    // M = 1: the GEMV where this CPU has one (`gemv`), no packing; the clamp after it.
    if a.rows == 1 && gemv::sgemv(a, b, c, alpha, beta, bias) {
        clamp_rows(c, 1, b.cols, ldc, range);
        return Ok(());
    }
    let uk = micro_kernel_for(a.rows, b.cols, a.cols);
    with_kernel(uk, a, b, c, ldc, alpha, beta, bias, range, scratch, hint)
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
    with_kernel(
        uk,
        a,
        b,
        c,
        ldc,
        alpha,
        beta,
        bias,
        None,
        scratch,
        SplitHint::NONE,
    )
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
    hint: SplitHint,
) -> Result<(), KernelError> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    let Some(mut call) = Call::checked(uk, (m, n, k), c, ldc, alpha, beta, bias, range)? else {
        return Ok(());
    };
    call.hint = hint;
    let b = if b.cs == 1 {
        BSource::InPlace(b)
    } else {
        BSource::Strided(b)
    };
    run_nest(&call, ASource::Mat(a), b, c, scratch)
}

/// Where the direct loop nest reads A from.
#[derive(Clone, Copy)]
pub(super) enum ASource<'a> {
    /// A strided matrix, packed block by block into the scratch.
    Mat(MatRef<'a>),
    /// Whole-depth panels packed ahead of time ([`PackedA`], `mr` = the kernel's).
    Packed(PackedA<'a>),
}

/// Where the direct loop nest reads B from.
#[derive(Clone, Copy)]
pub(super) enum BSource<'b> {
    /// A row-major B (unit column stride) read in place; the column tail is packed.
    InPlace(MatRef<'b>),
    /// Whole-depth panels packed ahead of time ([`PackedB`]).
    Prepacked(PackedB<'b>),
    /// Any other strides: packed panel by panel (the packed loop nest; A is then a matrix).
    Strided(MatRef<'b>),
}

/// One product's fixed parameters (shared by every core of a split call).
pub(super) struct Call<'k> {
    pub(super) uk: &'k MicroKernel,
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) ldc: usize,
    pub(super) alpha: f32,
    pub(super) beta: f32,
    pub(super) bias: Option<&'k [f32]>,
    /// The output clamp, `(-∞, +∞)` for none.
    pub(super) lo: f32,
    pub(super) hi: f32,
    /// The whole product's plans (in-place B, packed B), made once for many products of one
    /// shape ([`sgemm_batch`]); `None`: each part plans for itself.
    pub(super) plans: Option<(Plan, Plan)>,
    /// The split decided ahead for the team ([`SplitHint`]; `NONE`: decided per call).
    pub(super) hint: SplitHint,
}

impl<'k> Call<'k> {
    /// The call, after validating C and bias and applying an empty product
    /// ([`check_call`]); `None` when nothing is left to compute.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn checked(
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
            plans: None,
            hint: SplitHint::NONE,
        }))
    }
}

/// The scratch floats an `m × n × k` product with `uk` needs, or the error when `have` is
/// less. No plan needs more than `GEMM_SCRATCH_F32` (the plans are built inside that budget),
/// so a scratch of that size skips the planning arithmetic.
pub(super) fn scratch_need(
    uk: &MicroKernel,
    (m, n, k): (usize, usize, usize),
    have: usize,
) -> Result<usize, KernelError> {
    let need = if have >= GEMM_SCRATCH_F32 {
        GEMM_SCRATCH_F32
    } else {
        scratch_len_for(uk, m, n, k)
    };
    if have < need {
        return Err(KernelError::Scratch {
            needed: need * 4,
            got: have * 4,
        });
    }
    Ok(need)
}

/// Runs the loop nest for `call` on the installed team's cores when it is large enough and
/// worth it (see [`parallel`](crate::parallel)), else on this core.
///
/// The split never changes a result bit: every part uses the same micro-kernel and the same
/// depth blocks (`plan` depends on `k` and the kernel only), and parts are whole `NR`-column
/// panels or whole `MR`-row tiles, so each C tile is computed by the same kernel calls, in the
/// same order, through the same path (whole tile or edge tile) as on one core. Short tiles
/// (at most `MR/2` rows, [`col_unit`]) split by half panels: the short entry computes
/// either half with the bits it gives the whole panel.
fn run_nest(
    call: &Call<'_>,
    a: ASource<'_>,
    b: BSource<'_>,
    c: &mut [f32],
    scratch: &mut [f32],
) -> Result<(), KernelError> {
    let (uk, m, n, k) = (call.uk, call.m, call.n, call.k);
    let need = scratch_need(uk, (m, n, k), scratch.len())?;
    let shared = SharedC {
        ptr: c.as_mut_ptr(),
        len: c.len(),
    };
    let split = crate::parallel::with_team(|team| {
        let Some(team) = team.filter(|t| {
            let have = t.scratch_f32();
            have >= need || have >= scratch_len_for(uk, m, n, k)
        }) else {
            return false;
        };
        let (a_mat, b_strided) = (
            matches!(a, ASource::Mat(_)),
            matches!(b, BSource::Strided(_)),
        );
        let (pr, pc) = match call.hint.for_cores(team.cores()) {
            Some(s) => s,
            None => split::decide(team, uk, (m, n, k), (a_mat, b_strided)),
        };
        if pr * pc < 2 {
            return false;
        }
        let cw = col_unit(uk, m);
        let (row_tiles, col_panels) = (m.div_ceil(uk.mr), n.div_ceil(cw));
        team.run(pr * pc, &|core| {
            let range = |n, parts, i| crate::parallel::part_range(n, parts, i);
            let (gi, gj) = (core.index / pc, core.index % pc);
            let rows = (pr > 1).then(|| range(row_tiles, pr, gi));
            let cols = range(col_panels, pc, gj);
            let cols = (cols.0 * cw, (cols.1 * cw).min(n));
            if rows.is_none_or(|(lo, hi)| lo < hi) && cols.0 < cols.1 {
                // SAFETY: parts of one split get disjoint row-tile × column-panel rectangles
                // of C; `shared` is C of this call, borrowed until `run` has joined every
                // part.
                unsafe { part(call, a, b, shared, rows, cols, core.scratch) };
            }
        });
        true
    });
    if !split {
        // SAFETY: the whole product, on this core, through the exclusive borrow of `c`.
        unsafe { part(call, a, b, shared, None, (0, n), scratch) };
    }
    Ok(())
}

/// Computes columns `cols` (`j0 .. j1`, whole [`col_unit`]s of the product, the last one
/// possibly cut at `n`) of row tiles `rows` (`None`: every row) of `call` into C.
///
/// # Safety
/// `c` is the call's validated C (`check_call`), not accessed by anyone else but other parts
/// of the same call with disjoint ranges; `scratch` holds `scratch_len_for` of the whole call.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn part(
    call: &Call<'_>,
    a: ASource<'_>,
    b: BSource<'_>,
    c: SharedC,
    rows: Option<(usize, usize)>,
    cols: (usize, usize),
    scratch: &mut [f32],
) {
    let (uk, m, n, k, ldc) = (call.uk, call.m, call.n, call.k, call.ldc);
    // The part's panels, j0 .. j1 (its columns, lo .. hi of them, may start or end mid-panel
    // where the units are half panels; whole panels, or the whole product, are its own).
    let (lo, hi) = cols;
    let (j0, j1) = if (lo, hi) == (0, n) || col_unit(uk, m) == uk.nr {
        (lo, hi)
    } else {
        (lo - lo % uk.nr, (hi.div_ceil(uk.nr) * uk.nr).min(n))
    };
    let b = if (j0, j1) == (0, n) {
        b
    } else {
        match b {
            BSource::InPlace(bm) => BSource::InPlace(bm.col_range(j0, j1 - j0)),
            BSource::Strided(bm) => BSource::Strided(bm.col_range(j0, j1 - j0)),
            BSource::Prepacked(pb) => BSource::Prepacked(pb.panel_range(j0, j1 - j0)),
        }
    };
    let (i0, i1) = rows.map_or((0, m), |(lo, hi)| (lo * uk.mr, (hi * uk.mr).min(m)));
    let a = if (i0, i1) == (0, m) {
        a
    } else {
        match a {
            ASource::Mat(am) => ASource::Mat(am.row_range(i0, i1 - i0)),
            ASource::Packed(pa) => ASource::Packed(pa.panel_range(i0, i1 - i0)),
        }
    };
    let (rows, cols, c_off) = (i1 - i0, j1 - j0, i0 * ldc + j0);
    let bias = call.bias.map(|bv| &bv[j0..]);
    // SAFETY: per this function's contract; `c_off` starts row i0 / column j0 of C.
    let mut t = unsafe { Tiles::window(uk, c, c_off, ldc, call.alpha, bias, (call.lo, call.hi)) };
    if (lo, hi) != (j0, j1) {
        t.set_columns(lo - j0, hi - j0);
    }
    // A plan made for the whole product serves a part that is the whole product.
    let whole = call.plans.filter(|_| rows == m && cols == n);
    match (a, b) {
        (ASource::Mat(am), BSource::Strided(bm)) => {
            let plan = whole.map(|p| p.1);
            packed(&mut t, &am, &bm, rows, cols, k, call.beta, scratch, plan)
        }
        (a, b) => direct(
            &mut t,
            a,
            b,
            rows,
            cols,
            k,
            call.beta,
            scratch,
            whole.map(|p| p.0),
        ),
    }
}

/// The kernel's wide entry, for `n` columns read with one packed A block, when it pays:
/// expanding a panel costs 3.25 instructions per depth step plus a call, a tile gains 1.5
/// per step less its longer prologue, so on the small products of the fixtures (depth 64)
/// 3 column tiles came out level: from 4 on.
#[inline]
fn wide_for(uk: &MicroKernel, n: usize) -> Option<WideA> {
    uk.wide.filter(|_| n.div_ceil(uk.nr) >= 4)
}

/// Packs `A[ic..ic+mcb, pc..pc+kc]` into `dst` as the kernel will read it: MR-interleaved
/// panels ([`pack_a`]), or, for a wide entry, those panels packed at the end of the wide
/// block's area and expanded forward into it (panel `q` at `q·panel_len(kc)`).
#[allow(clippy::too_many_arguments)]
#[inline]
fn pack_a_for(
    uk: &MicroKernel,
    wide: Option<WideA>,
    a: &MatRef<'_>,
    ic: usize,
    mcb: usize,
    pc: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let Some(w) = wide else {
        pack_a(uk, a, ic, mcb, pc, kc, dst);
        return;
    };
    let panels = mcb.div_ceil(uk.mr);
    let (plain, total) = (panels * kc * uk.mr, panels * w.panel_len(kc));
    let at = total - plain;
    pack_a(uk, a, ic, mcb, pc, kc, &mut dst[at..total]);
    let p = dst.as_mut_ptr();
    // SAFETY: `dst` holds `total` floats (the plan sizes the A block for `mc / mr` wide
    // panels of the block's depth, and panel_len grows with kc); the MR-interleaved panels
    // are its last `plain` floats, exactly the placement the ExpandFn contract allows; the
    // kernel's CPU features are present (kernels are handed out after detection).
    unsafe { (w.expand)(p.add(at), panels, kc, p) };
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
    plan_hint: Option<Plan>,
) {
    let uk = t.uk;
    let plan = plan_hint.unwrap_or_else(|| plan(uk, m, n, k, true));
    let off = scratch.as_ptr().align_offset(ALIGN_F32 * 4).min(ALIGN_F32);
    // Scratch layout: [pad to 64 bytes][packed column tail][packed A block].
    let (bpack, rest) = scratch[off..].split_at_mut(plan.b_len);
    let apack = &mut rest[..plan.a_len];
    let (mr, nr, kc) = (uk.mr, uk.nr, plan.kc);
    // A packed here goes to the kernel's wide entry when it has one and the row of tiles is
    // long enough; panels packed ahead (`PackedA`) are MR-interleaved and take the plain one.
    let wide = match a {
        ASource::Mat(_) => wide_for(uk, n),
        ASource::Packed(_) => None,
    };
    t.set_wide(wide);
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
                pack_a_for(uk, wide, am, ic, mcb, pc, kcb, apack);
            }
            let pl = wide.map_or(kcb * mr, |w| w.panel_len(kcb));
            let mut jc = 0;
            while jc < n {
                let ncb = plan.nc.min(n - jc);
                // What every row tile of this column block shares, worked out once: the
                // whole tiles whose B panels are evenly spaced (one tight run), where their B
                // starts and its row stride.
                let end = jc + ncb;
                let (limit, stride) = match b {
                    BSource::InPlace(_) => (n_full.min(end), nr),
                    BSource::Prepacked(_) => (end, k * nr),
                    BSource::Strided(_) => (jc, 0),
                };
                let whole_full = limit.saturating_sub(jc) / nr;
                let (bptr_whole, ldb_whole) = match b {
                    // Rows pc.. and columns jc.. of a validated in-place B (whole panels end
                    // at or before n_full ≤ n; an empty slice when there are none).
                    BSource::InPlace(bm) => (
                        bm.data
                            .get(pc * bm.rs + jc..)
                            .map_or(core::ptr::null(), |d| d.as_ptr()),
                        bm.rs,
                    ),
                    // Panel jc/nr, rows pc.. of a validated PackedB.
                    BSource::Prepacked(pb) => (
                        pb.data
                            .get((jc / nr) * k * nr + pc * nr..)
                            .map_or(core::ptr::null(), |d| d.as_ptr()),
                        nr,
                    ),
                    BSource::Strided(_) => (bpack.as_ptr(), nr),
                };
                // The whole tiles of every full row panel first, in one loop over the
                // panels (per panel only its A and C pointers change).
                let full = if whole_full > 0 { mcb / mr } else { 0 };
                if full > 0 {
                    let (a_all, a_stride) = match &a {
                        ASource::Mat(_) => (&apack[..full * pl], pl),
                        // Panels ic/mr .. ic/mr + full, depths pc.. of a validated PackedA
                        // with this kernel's mr (k·mr floats per panel).
                        ASource::Packed(pa) => {
                            let s0 = ic / mr * k * mr + pc * mr;
                            (&pa.data[s0..s0 + (full - 1) * k * mr + kcb * mr], k * mr)
                        }
                    };
                    // SAFETY: row panel r < full reads its A panel of kcb steps at
                    // a_all[r·a_stride ..] (the slices above hold them) and, for q < whole_full,
                    // kcb rows of nr floats at bptr_whole + q·stride + p·ldb, inside B (columns
                    // jc + q·nr + nr ≤ limit; whole_full > 0 makes the pointer non-null); its
                    // tiles (rows ic + r·mr .. + mr ≤ ic + mcb) are whole and this part's.
                    unsafe {
                        t.panel_rows(
                            a_all, a_stride, full, bptr_whole, ldb_whole, stride, whole_full, kcb,
                            ic, jc, beta_eff, last,
                        )
                    };
                }
                // Then the column edge of each row panel and the last, partial one.
                let edge_from = jc + whole_full * nr;
                for ir in (0..mcb).step_by(mr) {
                    let mut jr = if mcb - ir >= mr { edge_from } else { jc };
                    if jr >= end {
                        continue;
                    }
                    let ap = match &a {
                        ASource::Mat(_) => &apack[(ir / mr) * pl..][..pl],
                        // Panel (ic + ir)/mr (ic is a multiple of mr), depths pc.. of a
                        // validated PackedA with this kernel's mr.
                        ASource::Packed(pa) => {
                            &pa.data[(ic + ir) / mr * k * mr + pc * mr..][..kcb * mr]
                        }
                    };
                    while jr < end {
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
                        // the A panel of kcb steps the selected entry reads.
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
                        jr += nr;
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
    plan_hint: Option<Plan>,
) {
    let uk = t.uk;
    let plan = plan_hint.unwrap_or_else(|| plan(uk, m, n, k, false));
    let off = scratch.as_ptr().align_offset(ALIGN_F32 * 4).min(ALIGN_F32);
    // Scratch layout: [pad to 64 bytes][packed B panel][packed A block].
    let (bpack, rest) = scratch[off..].split_at_mut(plan.b_len);
    let apack = &mut rest[..plan.a_len];
    let (mr, nr, kc) = (uk.mr, uk.nr, plan.kc);
    let mut jc = 0;
    while jc < n {
        let ncb = plan.nc.min(n - jc);
        // A is packed again for every column block: decided per block.
        let wide = wide_for(uk, ncb);
        t.set_wide(wide);
        let mut pc = 0;
        while pc < k {
            let kcb = kc.min(k - pc);
            let beta_eff = if pc == 0 { beta } else { 1.0 };
            let last = pc + kcb == k;
            pack_b(uk, b, pc, kcb, jc, ncb, bpack);
            let mut ic = 0;
            while ic < m {
                let mcb = plan.mc.min(m - ic);
                pack_a_for(uk, wide, a, ic, mcb, pc, kcb, apack);
                let pl = wide.map_or(kcb * mr, |w| w.panel_len(kcb));
                for ir in (0..mcb).step_by(mr) {
                    let ap = &apack[(ir / mr) * pl..][..pl];
                    // Whole tiles in one run over the packed panels (kcb·nr floats apart).
                    let whole = if mcb - ir >= mr { ncb / nr } else { 0 };
                    if whole > 0 {
                        // SAFETY: panels q < whole of the packed B block (kcb × nr each, ldb =
                        // nr); `ap` is the A panel the selected entry reads; whole tiles of this part.
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
                        // the A panel the selected entry reads.
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
    prepacked(
        a,
        b,
        c,
        ldc,
        (alpha, beta, bias, range),
        scratch,
        SplitHint::NONE,
    )
}

/// [`sgemm_prepacked_clamped`] with its split across the installed team decided ahead, as
/// [`sgemm_hinted`]: `hint` from [`split_hint_prepacked`](super::split_hint_prepacked).
pub fn sgemm_prepacked_hinted(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    epilogue: Epilogue<'_>,
    scratch: &mut [f32],
    hint: SplitHint,
) -> Result<(), KernelError> {
    prepacked(a, b, c, ldc, epilogue, scratch, hint)
}

/// [`sgemm_prepacked_clamped`] with a split hint.
fn prepacked(
    a: MatRef<'_>,
    b: PackedB<'_>,
    c: &mut [f32],
    ldc: usize,
    (alpha, beta, bias, range): Epilogue<'_>,
    scratch: &mut [f32],
    hint: SplitHint,
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
        hint,
    )
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
        SplitHint::NONE,
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
        SplitHint::NONE,
    )
}

/// `alpha`, `beta`, bias and output clamp of one call.
pub type Epilogue<'a> = (f32, f32, Option<&'a [f32]>, Option<(f32, f32)>);

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
    hint: SplitHint,
) -> Result<(), KernelError> {
    let n = b.n;
    if b.k != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    let Some(mut call) = Call::checked(uk, (m, n, k), c, ldc, alpha, beta, bias, range)? else {
        return Ok(());
    };
    call.hint = hint;
    run_nest(&call, a, BSource::Prepacked(b), c, scratch)
}
