//! The micro-kernel contract: what a register-tile kernel computes, what the driver
//! guarantees it, and the blocking constants that bound every panel.

/// Depth (K) block: rows of a packed B panel / columns of a packed A block.
pub const KC: usize = 256;
/// Row (M) block upper bound; the driver uses the largest multiple of the micro-kernel's `MR`
/// not above it.
pub const MC: usize = 48;
/// Column (N) block upper bound; the driver uses the largest multiple of `NR` not above it.
pub const NC: usize = 192;

/// Floats of scratch the driver needs for any shape with any micro-kernel (`MC·KC` for the
/// packed A block, `KC·NC` for the packed B panel, 16 for 64-byte alignment): 61,456 floats,
/// 240 KiB (≤ 256 KiB). Kernels declare
/// `KernelDef::with_scratch(name, f, GEMM_SCRATCH_F32 * 4 + 16)` (the extra bytes cover
/// aligning the byte scratch to f32). Smaller shapes need less, see [`sgemm_scratch_len`](super::sgemm_scratch_len).
pub const GEMM_SCRATCH_F32: usize = MC * KC + KC * NC + ALIGN_F32;
const _: () = assert!(GEMM_SCRATCH_F32 * 4 <= 256 * 1024);

/// Largest register tile a [`MicroKernel`] may declare (`mr ≤ MAX_MR`, `nr ≤ MAX_NR`).
/// (The SME kernel's four ZA tiles at SVL 512 form a 32 × 32 tile, the SVE kernel at
/// VL 512 an 8 × 48 one.)
pub const MAX_MR: usize = 32;
/// See [`MAX_MR`].
pub const MAX_NR: usize = 64;

/// `v` clamped into `[lo, hi]` as the micro-kernels do: `max(lo)` then `min(hi)`, so NaN
/// becomes `lo` (maxNum semantics, Arm's `FMAXNM`).
#[inline(always)]
pub fn clamp(v: f32, lo: f32, hi: f32) -> f32 {
    v.max(lo).min(hi)
}

/// Whether `[lo, hi]` clamps anything (not `-∞ .. +∞`).
#[inline(always)]
pub fn clamps(lo: f32, hi: f32) -> bool {
    lo != f32::NEG_INFINITY || hi != f32::INFINITY
}

/// Clamps an `mr × nr` tile of C in place (row `i` at `c + i·rsc`): the epilogue of kernels
/// whose stores do not clamp themselves (the tile is still in L1). No-op for an unbounded range.
///
/// # Safety
/// The tile's `mr` rows of `nr` floats are valid for reads and writes.
#[inline]
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(in crate::linalg::gemm) unsafe fn clamp_tile(
    c: *mut f32,
    rsc: isize,
    mr: usize,
    nr: usize,
    lo: f32,
    hi: f32,
) {
    if !clamps(lo, hi) {
        return;
    }
    for i in 0..mr {
        // SAFETY: row i < mr of the tile, nr floats (caller).
        let row = unsafe { core::slice::from_raw_parts_mut(c.offset(i as isize * rsc), nr) };
        for v in row {
            *v = clamp(*v, lo, hi);
        }
    }
}

/// Packed-panel areas are aligned to this many floats (64 bytes) inside the scratch.
pub(super) const ALIGN_F32: usize = 16;

/// Signature of a micro-kernel; see [`MicroKernel`] for the contract.
pub type MicroKernelFn = unsafe fn(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
);

/// A register-tile micro-kernel: computes one `MR × NR` tile of C from an A micro-panel and
/// `k` rows of B.
///
/// # Contract of `kernel(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi)`
///
/// * `a` points to a packed A micro-panel of `k * MR` floats (f32-aligned),
///   **MR-row-interleaved**: for
///   depth `p` in `0..k` and tile row `i` in `0..MR`, `a[p * MR + i] = A(row0 + i, p0 + p)`
///   (rows past the matrix edge are zero).
/// * `b` points to `k` rows of B, each `NR` contiguous floats, row `p` at `b + p * ldb`:
///   `b[p * ldb + j] = B(p0 + p, col0 + j)`. Two cases reach a kernel:
///   a **packed** NR-column-interleaved panel (`ldb == NR`, columns past the edge zero,
///   64-byte aligned), and a **direct** view of a row-major B read in place (`ldb` = B's
///   row stride, only f32-aligned). Kernels must not assume more than f32 alignment.
/// * `c` points to tile element `(0, 0)`; rows are contiguous: element `(i, j)` is at
///   `c.offset(i * rsc + j)` for `i < MR`, `j < NR`, all valid for reads and writes.
/// * The kernel stores, for every `i < MR, j < NR`:
///   `c(i,j) = alpha * Σ_p a(i,p)·b(p,j) + beta * c(i,j) + bias[j]`, where the `beta` term is
///   omitted entirely when `beta == 0.0` (C is then not read, so NaN garbage is overwritten)
///   and the bias term when `bias` is null (otherwise `bias` is valid for `NR` reads);
///   then clamped into `[lo, hi]` as [`clamp`] does (`max(lo)` then `min(hi)`, NaN becomes
///   `lo`), which is the identity for `lo = -∞, hi = +∞` (the output activation of a layer,
///   ReLU or ReLU6, applied while the tile is in registers).
///   The sum is accumulated in f32 in increasing `p` order per lane (FMA or mul+add).
/// * `k` may be 0 (the product is then 0). `c` and `bias` are only f32-aligned.
///
/// The driver guarantees these preconditions; an implementation must read and write nothing
/// else. `mr ≤ MAX_MR` and `nr ≤ MAX_NR` (checked by the driver).
///
/// A kernel may come with its own panel packer ([`PackFn`], used for whole panels of a
/// row-major A and of a B stored transposed, e.g. `linear`'s `[N, K]` weight) and a larger
/// preferred depth block (kernels that keep the tile in ZA gain from long `k`).
///
/// Fields are private: a `MicroKernel` can only be built with the `unsafe`
/// [`MicroKernel::new`], whose caller vouches that the function honours the contract for the
/// declared `mr`/`nr` on every CPU the value can reach (safe code could otherwise pair a
/// kernel with a wrong tile size and make the driver pass too-small panels).
#[derive(Clone, Copy)]
pub struct MicroKernel {
    pub(in crate::linalg::gemm) name: &'static str,
    pub(in crate::linalg::gemm) mr: usize,
    pub(in crate::linalg::gemm) nr: usize,
    pub(in crate::linalg::gemm) kernel: MicroKernelFn,
    pub(in crate::linalg::gemm) pack: Option<PackFn>,
    pub(in crate::linalg::gemm) pack_edge: Option<PackFn>,
    pub(in crate::linalg::gemm) kc_max: usize,
    pub(in crate::linalg::gemm) rows: Option<RowKernels>,
    pub(in crate::linalg::gemm) wide: Option<WideA>,
    pub(in crate::linalg::gemm) run: Option<TileRunFn>,
    pub(in crate::linalg::gemm) edge: Option<EdgeFn>,
    pub(in crate::linalg::gemm) part: Option<PartFn>,
    pub(in crate::linalg::gemm) short: Option<ShortFn>,
}

/// A kernel's entry for the N edge of a product (`n mod NR` columns left): the tile computed
/// as the tile kernel computes it with `alpha = 1`, `beta = 0`, stored straight into C in its
/// first `nc` columns only, so that an edge tile needs no stack tile and no copy.
///
/// # Contract of `edge(k, a, b, ldb, c, rsc, nc, bias, lo, hi)`
/// `1 ≤ nc ≤ NR`; `k`, `a`, `b`, `ldb`, `rsc`, `lo`, `hi` as in the [`MicroKernel`]
/// contract (B rows still `NR` readable floats: the driver packs the column tail padded);
/// rows `i < MR` of C hold `nc` writable floats at `c + i·rsc`, and nothing else of C is read
/// or written; `bias` is null or holds `NR` readable floats. It stores, for `i < MR`,
/// `j < nc`, `c(i,j) = clamp(bias[j] + Σ_p a(i,p)·b(p,j))` with the same operations in the
/// same order as the tile kernel with `alpha = 1`, `beta = 0` (same bits).
pub type EdgeFn = unsafe fn(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    nc: usize,
    bias: *const f32,
    lo: f32,
    hi: f32,
);

/// A kernel's entry for a partial tile (an M or N edge, or both): the tile computed as the
/// tile kernel computes it, stored straight into C in its first `rows` rows and `cols`
/// columns only, so that an edge tile needs no stack tile and no copy.
///
/// # Contract of `part(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi, rows, cols)`
/// `1 ≤ rows ≤ MR`, `1 ≤ cols ≤ NR`; `k`, `a`, `b`, `ldb`, `rsc`, `alpha`, `beta`, `lo`, `hi`
/// as in the [`MicroKernel`] contract (the whole A panel may be read; B rows still `NR`
/// readable floats: the driver packs the column tail padded); rows `i < rows` of C hold `cols`
/// readable and writable floats at `c + i·rsc`, and nothing else of C is read or written;
/// `bias` is null or holds `cols` readable floats (no more are read). It stores, for `i <
/// rows`, `j < cols`, what the tile kernel's contract says for `(i, j)`, with the operations
/// of the tile kernel's general epilogue (scale by alpha, then `beta·c` when `beta ≠ 0`, then
/// the bias, then the clamp).
pub type PartFn = unsafe fn(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
    rows: usize,
    cols: usize,
);

/// A kernel's entry for a *short* tile: at most `MR/2` rows, and of a B panel either both
/// column halves or one (`NR/2` columns). It does half the work of the partial tile for
/// such rows (a 16-token prompt in 32-row tiles), and a half panel is a unit the driver can
/// give a core of its own: a 64-column product at 16 rows goes to four cores, not two.
///
/// # Contract of `short(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi, rows, cols, first)`
/// The [`PartFn`] contract for `1 ≤ rows ≤ MR/2` rows and the `cols` columns
/// `first .. first + cols` of the tile, where `first` is `0` or `NR/2` and
/// `1 ≤ cols ≤ NR − first`: `a`, `b`, `c` and `bias` point at the tile's column 0 as for
/// [`PartFn`] (B rows `NR` readable floats); rows `i < rows` of C hold columns
/// `first .. first + cols` readable and writable at `c + i·rsc + first`, and nothing else of
/// C is read or written; `bias` is null or readable at `first .. first + cols`. It stores,
/// for `i < rows`, `first ≤ j < first + cols`, exactly the bits the kernel's [`PartFn`]
/// stores for `(i, j)` (same accumulation order, same epilogue operations).
pub type ShortFn = unsafe fn(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
    rows: usize,
    cols: usize,
    first: usize,
);

/// A kernel's entry for a run of whole tiles along one row of tiles: the tile kernel's body
/// in a loop, so that its arguments stay in registers from one tile to the next (no call, no
/// callee-saved spills, no argument reloads per tile).
///
/// # Contract of `run(np, stride, k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi)`
/// `np ≥ 1` tiles; tile `q < np` is the [`MicroKernel`] contract's call with the same `k`,
/// `a`, `ldb`, `rsc`, `alpha`, `beta`, `lo`, `hi`, and `b + q·stride`, `c + q·NR`, and
/// `bias + q·NR` (bias null: null for every tile). The tiles are computed in order, each
/// exactly as the tile kernel computes it (same bits).
pub type TileRunFn = unsafe fn(
    np: usize,
    stride: usize,
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
);

/// A second entry of an 8-row kernel that reads A from *wide* panels: the driver packs A
/// as usual, then `WideA::expand` rewrites each MR-interleaved panel so that one
/// structure load (`ld4w`) yields the 8 rows of two depth steps, each group of four
/// repeated in every 128-bit segment of the vector (what an indexed `fmla` needs).
///
/// # Wide panel layout (`MR = 8`, `rep` = vector bits / 128)
/// A panel of `kc` depth steps takes `WideA::panel_len(kc)` = `⌈kc/2⌉·16·rep` floats:
/// block `g` (steps `2g`, `2g + 1`) starts at `g·16·rep`, and for copy `s < rep`, lane
/// `j < 4` and group `i < 4`, `w[g·16·rep + 16·s + 4·j + i] = Q_i[j]` with
/// `Q_0[j] = A(j, 2g)`, `Q_1[j] = A(4 + j, 2g)`, `Q_2[j] = A(j, 2g + 1)`,
/// `Q_3[j] = A(4 + j, 2g + 1)` (zero past `kc`).
#[derive(Clone, Copy)]
pub struct WideA {
    pub(in crate::linalg::gemm) rep: usize,
    pub(in crate::linalg::gemm) kernel: MicroKernelFn,
    pub(in crate::linalg::gemm) expand: ExpandFn,
}

/// Rewrites `panels` MR-interleaved A panels of `kc` steps (panel `q` at `src + q·kc·8`) into
/// wide panels (panel `q` at `dst + q·panel_len(kc)`, see [`WideA`]).
///
/// # Contract of `expand(src, panels, kc, dst)`
/// `kc ≥ 1`; `src` holds `panels·kc·8` readable floats, `dst` `panels·panel_len(kc)` writable
/// ones. The two may overlap only as the driver places them: `src` is the *end* of the same
/// area (`src = dst + panels·(panel_len(kc) − 8·kc)`); the function reads each block of
/// `src` before it writes the output that could cover it (output never runs ahead of input).
pub type ExpandFn = unsafe fn(src: *const f32, panels: usize, kc: usize, dst: *mut f32);

impl WideA {
    /// Floats of one wide panel of `kc` depth steps.
    pub(in crate::linalg::gemm) fn panel_len(&self, kc: usize) -> usize {
        kc.div_ceil(2) * 16 * self.rep
    }
}

/// Kernels for the M edge of a tile, so that a product whose rows the tile does not divide
/// computes no padded rows (M = 29 on an 8-row tile: three tiles and one 5-row call).
///
/// # Contract
/// The kernel for `r` rows (`1 ≤ r < MR`) is a [`MicroKernelFn`] with the [`MicroKernel`]
/// contract of its tile (same `a` panel of `k` groups of `MR` floats, same `b`, `c`, `alpha`,
/// `beta`, `bias`, clamp), except that it computes and stores only the first `r` rows of C.
/// It may read the whole A panel, as the tile kernel does.
#[derive(Clone, Copy)]
pub struct RowKernels {
    /// `by_rows[r - 1]`: the kernel for `r` rows, if there is one.
    by_rows: [Option<MicroKernelFn>; MAX_EDGE_ROWS],
}

/// Most rows a row kernel computes (one less than the tallest tile that has them).
pub const MAX_EDGE_ROWS: usize = 7;

impl RowKernels {
    /// Row kernels from a table: `by_rows[r - 1]` computes `r` rows.
    ///
    /// # Safety
    /// Each function honours the contract above for its row count, on every CPU that can
    /// obtain the value (checked where the tile's [`MicroKernel`] is built, see
    /// [`MicroKernel::with_rows`]).
    pub const unsafe fn new(by_rows: [Option<MicroKernelFn>; MAX_EDGE_ROWS]) -> RowKernels {
        RowKernels { by_rows }
    }

    /// The row kernel for exactly `rows` rows, if there is one.
    pub(in crate::linalg::gemm) fn for_rows(&self, rows: usize) -> Option<MicroKernelFn> {
        self.by_rows.get(rows.checked_sub(1)?).copied().flatten()
    }
}

/// Packs depth-contiguous source runs into one micro-panel of width `w`: a row-major A panel
/// (`w = MR`, runs = rows of A) or a transposed-B panel (`w = NR`, runs = columns of B, i.e.
/// rows of the stored `Bᵀ`).
///
/// # Contract of `pack(src, ld, runs, w, kc, dst) -> handled`
/// `w` is the kernel's `MR` or `NR`, `1 ≤ runs ≤ w` (fewer at the matrix edge), `kc ≥ 1`.
/// `src + i*ld .. + kc` is readable for `i < runs`, `dst` holds `(kc − 1)·w + runs` writable
/// floats (only f32-aligned; a panel's lanes may be filled from a lane other than 0, `dst`
/// then pointing at that lane). Either it stores `dst[p * w + i] = src[i * ld + p]` for `i < runs`,
/// `p < kc`, leaves lanes `runs..w` untouched and returns `true`, or it writes nothing and
/// returns `false` (a `runs` it does not handle; the driver then packs the panel itself).
pub type PackFn =
    unsafe fn(src: *const f32, ld: usize, runs: usize, w: usize, kc: usize, dst: *mut f32) -> bool;

impl MicroKernel {
    /// A micro-kernel computing `mr × nr` tiles.
    ///
    /// # Safety
    /// `kernel` must implement the contract above for exactly this `mr` and `nr`, and every
    /// CPU that can obtain this value must support the instructions it uses.
    pub const unsafe fn new(
        name: &'static str,
        mr: usize,
        nr: usize,
        kernel: MicroKernelFn,
    ) -> MicroKernel {
        MicroKernel {
            name,
            mr,
            nr,
            kernel,
            pack: None,
            pack_edge: None,
            kc_max: KC,
            rows: None,
            wide: None,
            run: None,
            edge: None,
            part: None,
            short: None,
        }
    }

    /// The same kernel with an entry for the N edge.
    ///
    /// # Safety
    /// `edge` must implement the [`EdgeFn`] contract for this kernel's tile, on every CPU
    /// that can obtain the value.
    pub const unsafe fn with_edge(self, edge: EdgeFn) -> MicroKernel {
        MicroKernel {
            edge: Some(edge),
            ..self
        }
    }

    /// The same kernel with an entry for partial tiles (M and N edges).
    ///
    /// # Safety
    /// `part` must implement the [`PartFn`] contract for this kernel's tile, on every CPU
    /// that can obtain the value.
    pub const unsafe fn with_part(self, part: PartFn) -> MicroKernel {
        MicroKernel {
            part: Some(part),
            ..self
        }
    }

    /// The same kernel with an entry for short tiles (at most `MR/2` rows, half panels).
    ///
    /// # Safety
    /// `short` must implement the [`ShortFn`] contract for this kernel's tile, on every CPU
    /// that can obtain the value; the kernel has a [`PartFn`] (whose bits it reproduces) and
    /// no wide entry.
    pub const unsafe fn with_short(self, short: ShortFn) -> MicroKernel {
        MicroKernel {
            short: Some(short),
            ..self
        }
    }

    /// The same kernel with an entry for runs of whole tiles.
    ///
    /// # Safety
    /// `run` must implement the [`TileRunFn`] contract for this kernel's tile, on every CPU
    /// that can obtain the value.
    pub const unsafe fn with_run(self, run: TileRunFn) -> MicroKernel {
        MicroKernel {
            run: Some(run),
            ..self
        }
    }

    /// The same kernel with a wide-panel entry (8-row kernels only).
    ///
    /// # Safety
    /// `kernel` must implement the [`MicroKernel`] contract for this `mr`/`nr` with A read
    /// from a wide panel ([`WideA`], replication `rep`) instead of an MR-interleaved one, and
    /// `expand` the [`ExpandFn`] contract for that `rep`, on every CPU that can obtain the
    /// value.
    pub const unsafe fn with_wide(
        self,
        rep: usize,
        kernel: MicroKernelFn,
        expand: ExpandFn,
    ) -> MicroKernel {
        MicroKernel {
            wide: Some(WideA {
                rep,
                kernel,
                expand,
            }),
            ..self
        }
    }

    /// The same kernel with row kernels for its M edge.
    ///
    /// # Safety
    /// `rows` must honour the [`RowKernels`] contract for this kernel's `mr` and `nr` (row
    /// counts below `mr` only), on every CPU that can obtain the value.
    pub const unsafe fn with_rows(self, rows: RowKernels) -> MicroKernel {
        MicroKernel {
            rows: Some(rows),
            ..self
        }
    }

    /// The same kernel with its own panel packer.
    ///
    /// # Safety
    /// `pack` must implement the [`PackFn`] contract for `w` = this kernel's `mr` and `nr`,
    /// on every CPU that can obtain the value.
    pub const unsafe fn with_packer(self, pack: PackFn) -> MicroKernel {
        MicroKernel {
            pack: Some(pack),
            ..self
        }
    }

    /// The same kernel with a packer for edge panels (fewer runs than the panel's width, from
    /// its lane 0), whose contract is [`PackFn`]'s with lanes `runs .. w` of every depth step
    /// **zeroed** instead of untouched (the whole panel written: no zero-fill before it).
    ///
    /// # Safety
    /// `pack_edge` must implement that contract for `w` = this kernel's `mr` and `nr`, on
    /// every CPU that can obtain the value.
    pub const unsafe fn with_edge_packer(self, pack_edge: PackFn) -> MicroKernel {
        MicroKernel {
            pack_edge: Some(pack_edge),
            ..self
        }
    }

    /// The same kernel with a preferred depth block of up to `kc_max` (the driver still
    /// bounds it by the scratch size).
    pub const fn with_kc_max(self, kc_max: usize) -> MicroKernel {
        MicroKernel { kc_max, ..self }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }
    pub fn mr(&self) -> usize {
        self.mr
    }
    pub fn nr(&self) -> usize {
        self.nr
    }
}

impl core::fmt::Debug for MicroKernel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "MicroKernel({} {}x{})", self.name, self.mr, self.nr)
    }
}
