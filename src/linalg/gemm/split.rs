//! How a product is cut across the cores of a team ([`crate::parallel`]): the decision the
//! loop nest makes for each call ([`decide`]), and [`SplitHint`], that decision made ahead
//! (when a method loads with the team installed) so that a call prepared at load does not
//! decide again on every run.
//!
//! Whatever the split, every part is whole `MR`-row tiles by whole column units (panels, or
//! half panels for short tiles: `driver::col_unit`), and the parts of `pr × pc` groups cover
//! every tile once: a split, decided now or ahead, never changes a result bit, only which
//! core computes which tiles.

use super::contract::MicroKernel;
use super::select::{kernel_for_prepacked, micro_kernel_for};
use crate::parallel::{parts_for, with_team, Team, MAX_CORES};

/// The parts (`pr` row groups by `pc` column groups) `team` cuts an `m × n × k` product with
/// `uk` into: `(1, 1)` keeps it on one core. `a_mat`: A is read through a matrix (each part
/// packs the rows it reads), not packed ahead; `b_strided`: B is packed panel by panel (each
/// part packs the panels it reads).
pub(super) fn decide(
    team: &dyn Team,
    uk: &MicroKernel,
    (m, n, k): (usize, usize, usize),
    (a_mat, b_strided): (bool, bool),
) -> (usize, usize) {
    // Column units: panels, or half panels for short tiles.
    let cw = col_unit(uk, m);
    let (row_tiles, col_panels) = (m.div_ceil(uk.mr), n.div_ceil(cw));
    let work = m.saturating_mul(n).saturating_mul(k);
    let cores = team.cores();
    // Column panels keep each core's B apart and need no A rows split; rows when the
    // product is too narrow to give every core a panel. Fewer tiles than cores in either
    // direction (a 64 × 64 product in 32 × 32 tiles): a grid of `pr` row groups by `pc`
    // column groups, when it gives more parts.
    let (pc, pr) = {
        let pc = col_panels.min(cores);
        (pc, row_tiles.min(cores / pc.max(1)))
    };
    let grid = row_tiles.max(col_panels) < cores
        && pr > 1
        && pc > 1
        && parts_for(team, pr * pc, work) == pr * pc;
    // A part packs the A rows it reads: split by columns, every core packs all of A.
    // When B needs no packing (packed ahead, or read in place) and there is a row tile
    // per core, rows avoid that, unless B is much wider than A is tall (then each core
    // streaming all of B costs more than packing A again: 2m < n).
    let rows_pay = a_mat && !b_strided && row_tiles >= cores && 2 * m >= n;
    let by_cols = !rows_pay && (col_panels >= cores || col_panels >= row_tiles);
    let units = if by_cols { col_panels } else { row_tiles };
    let base = if grid {
        (pr, pc)
    } else {
        let parts = parts_for(team, units, work);
        if by_cols {
            (1, parts)
        } else {
            (parts, 1)
        }
    };
    // A split by columns packs all of A in every part: a grid may pack less.
    if base.0 == 1 && row_tiles >= 2 && a_mat {
        fewer_packs(
            (row_tiles, col_panels),
            cores,
            base,
            (true, b_strided),
            parts_for(team, usize::MAX, work),
        )
    } else {
        base
    }
}

/// The grid of parts (`pr` row groups by `pc` column groups, both 2 or more) to cut
/// `row_tiles × col_panels` tiles into instead of `base`, when one gives no part more tiles
/// and fewer packings: a part packs the A row tiles it reads (`packs.0`: A is read through a
/// strided matrix) and the B panels it reads (`packs.1`: B is strided). Of those, the fewest
/// tiles, then packings, then parts, of at most `max_parts` parts (cores, and work for
/// them). Example: 2 × 3 tiles on 4 cores by columns is 3 parts of 2 tiles that each pack
/// both row tiles of A; a 2 × 2 grid gives parts of at most 2 tiles that pack one.
pub(super) fn fewer_packs(
    (row_tiles, col_panels): (usize, usize),
    cores: usize,
    base: (usize, usize),
    packs: (bool, bool),
    max_parts: usize,
) -> (usize, usize) {
    let cost = |(pr, pc): (usize, usize)| {
        let (r, c) = (row_tiles.div_ceil(pr), col_panels.div_ceil(pc));
        (r * c, usize::from(packs.0) * r + usize::from(packs.1) * c)
    };
    let (bt, bp) = cost(base);
    if bp < 2 {
        // Nothing packed, or one packing per part already.
        return base;
    }
    let mut best = (base, (bt, bp, base.0 * base.1));
    // Splits by rows only or columns only are `base`'s own choice: grids of 2 × 2 and up.
    let most = cores.min(max_parts);
    for pr in 2..=row_tiles.min(most / 2) {
        for pc in 2..=col_panels.min(most / pr) {
            let (t, p) = cost((pr, pc));
            let key = (t, p, pr * pc);
            if t <= bt && p < bp && key < best.1 {
                best = ((pr, pc), key);
            }
        }
    }
    best.0
}

/// The columns of one unit of a split by columns: half a panel when the product's tiles are
/// all short (at most `mr/2` rows) and the kernel has a [`ShortFn`](super::ShortFn) for them
/// (such a kernel has no wide entry: `MicroKernel::with_short`), else a panel. Whichever it
/// is, every tile is computed by the same entry as on one core.
#[inline]
pub(super) fn col_unit(uk: &MicroKernel, m: usize) -> usize {
    if uk.short.is_some() && 2 * m <= uk.mr {
        uk.nr / 2
    } else {
        uk.nr
    }
}

/// A product's split decided ahead for a team of a given core count ([`decide`]'s `pr × pc`),
/// as one `u32` a call's record made at load can hold
/// ([`Prepared::hint`](crate::kernel_api::Prepared::hint)). [`SplitHint::NONE`] (0) decides
/// nothing: the call decides as it runs. A hint made for a team of another size is ignored,
/// and so is one that does not describe a split of at most that many parts, so no bit
/// pattern can drop a part of the product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitHint(u32);

impl SplitHint {
    /// No split decided.
    pub const NONE: SplitHint = SplitHint(0);
    /// Marks a decided hint (the top byte).
    const TAG: u32 = 0xA5;

    /// The hint of `(pr, pc)` for a team of `cores`.
    fn new(cores: usize, (pr, pc): (usize, usize)) -> SplitHint {
        let fits = |v: usize| (1..=MAX_CORES).contains(&v);
        if !fits(cores) || !fits(pr) || !fits(pc) || pr * pc > cores {
            return SplitHint::NONE;
        }
        SplitHint(Self::TAG << 24 | (cores as u32) << 16 | (pr as u32) << 8 | pc as u32)
    }

    /// The hint's bits (what a record stores).
    pub fn bits(self) -> u32 {
        self.0
    }

    /// A hint from its bits (any bits: see the type's documentation).
    pub fn from_bits(bits: u32) -> SplitHint {
        SplitHint(bits)
    }

    /// `(pr, pc)` when this hint was made for a team of `cores` cores.
    #[inline]
    pub(super) fn for_cores(self, cores: usize) -> Option<(usize, usize)> {
        let b = self.0;
        let (pr, pc) = ((b >> 8 & 0xff) as usize, (b & 0xff) as usize);
        (b >> 24 == Self::TAG
            && (b >> 16 & 0xff) as usize == cores
            && pr >= 1
            && pc >= 1
            && pr * pc <= cores)
            .then_some((pr, pc))
    }
}

/// The split [`sgemm_hinted`](super::sgemm_hinted) will make of an `m × n × k` product with
/// a B read in place (`b_in_place`: unit column stride, a row-major `[K, N]` matrix) or
/// packed panel by panel, on the team installed now: [`SplitHint::NONE`] without a team (or
/// inside a job).
pub fn split_hint(m: usize, n: usize, k: usize, b_in_place: bool) -> SplitHint {
    let uk = micro_kernel_for(m, n, k);
    hint_with(uk, (m, n, k), (true, !b_in_place))
}

/// [`split_hint`] for [`sgemm_prepacked_hinted`](super::sgemm_prepacked_hinted) with B packed
/// for tile width `nr`.
pub fn split_hint_prepacked(m: usize, n: usize, k: usize, nr: usize) -> SplitHint {
    match kernel_for_prepacked(m, n, k, nr) {
        Some(uk) => hint_with(uk, (m, n, k), (true, false)),
        None => SplitHint::NONE,
    }
}

fn hint_with(uk: &MicroKernel, mnk: (usize, usize, usize), forms: (bool, bool)) -> SplitHint {
    with_team(|team| match team {
        Some(t) => SplitHint::new(t.cores(), decide(t, uk, mnk, forms)),
        None => SplitHint::NONE,
    })
}
