//! The C side of the GEMM driver: `Tiles` runs the micro-kernel on one tile, straight
//! into C when the tile is whole, through a stack tile at the M/N edges; `SharedC` is the
//! C pointer the cores of a split call share.

use super::contract::*;

/// C as a raw pointer that the cores of a split call share (each writes its own tiles).
#[derive(Clone, Copy)]
pub(super) struct SharedC {
    pub(super) ptr: *mut f32,
    pub(super) len: usize,
}

// SAFETY: the cores of a split product write disjoint sets of C elements (whole column panels,
// half panels of short tiles, or whole row tiles, `run_nest`), and `Team::run` joins them
// before C's borrow ends.
unsafe impl Sync for SharedC {}
// SAFETY: as for `Sync`: a pointer to C handed to the cores of one split call.
unsafe impl Send for SharedC {}

/// The C side of the driver: runs the micro-kernel on one tile, straight into C when the
/// tile is whole, through `tmp` at the M/N edges (left uninitialised: zeroing 8 KiB per call
/// costs more than a small product; the kernel writes the whole tile before it is read).
///
/// C is a raw window (`c` at element 0 of this part, `len` elements reachable from it): the
/// cores of a split product write disjoint tiles of one C whose rows interleave, so no core
/// may hold a slice over another's elements.
pub(super) struct Tiles<'k> {
    pub(super) uk: &'k MicroKernel,
    c: *mut f32,
    len: usize,
    ldc: usize,
    alpha: f32,
    bias: Option<&'k [f32]>,
    /// The output clamp (applied with the last depth block, like the bias).
    lo: f32,
    hi: f32,
    /// The wide entry when the running loop nest's A panels are wide (no row kernels
    /// then: only the tile's wide entry reads them); `None`: the plain entry.
    wide: Option<MicroKernelFn>,
    /// The columns this part computes, `lo .. hi` from its column 0: all of its panels, or
    /// from / up to the middle of one when the part is made of half panels (short tiles
    /// only, see [`Tiles::set_columns`]).
    win: (usize, usize),
    tmp: core::mem::MaybeUninit<[f32; MAX_MR * MAX_NR]>,
}

impl<'k> Tiles<'k> {
    /// The tile writer of a part whose tile (0, 0) starts at element `off` of `c`.
    ///
    /// # Safety
    /// Every tile the part writes lies inside `c` (validated by `check_call` for the whole
    /// call; parts are whole tiles of it) and no other code accesses those elements until the
    /// part is done.
    pub(super) unsafe fn window(
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
            wide: None,
            win: (0, usize::MAX),
            tmp: core::mem::MaybeUninit::uninit(),
        }
    }

    /// Reads A from wide panels (`Some`: the kernel's wide entry) or MR-interleaved ones.
    #[inline]
    pub(super) fn set_wide(&mut self, wide: Option<WideA>) {
        self.wide = wide.map(|w| w.kernel);
    }

    /// Computes only columns `lo .. hi` of the part's panels: `lo` is 0 or `nr/2` (the part
    /// starts mid-panel), `hi` ends inside the last panel. Only for a part whose tiles are
    /// all short (at most `mr/2` rows, the kernel's [`ShortFn`]): they alone honour it.
    #[inline]
    pub(super) fn set_columns(&mut self, lo: usize, hi: usize) {
        self.win = (lo, hi);
    }

    /// The epilogue arguments of `np` whole tiles from column `col0`: on the last depth block
    /// the bias (sliced to their `np·nr` columns, or null) and the clamp; before it neither.
    #[inline(always)]
    fn run_ends(&self, col0: usize, np: usize, last: bool) -> (*const f32, f32, f32) {
        let nr = self.uk.nr;
        match self.bias {
            Some(bv) if last => (bv[col0..col0 + np * nr].as_ptr(), self.lo, self.hi),
            None if last => (core::ptr::null(), self.lo, self.hi),
            _ => (core::ptr::null(), f32::NEG_INFINITY, f32::INFINITY),
        }
    }

    /// `np` whole tiles side by side: rows `row0 .. row0 + mr`, columns `col0 + q·nr .. + nr`
    /// for `q < np`, tile `q` reading B at `bptr + q·stride` (rows `ldb` apart). The kernel is
    /// called straight in a loop: the same calls, in the same order, as [`Tiles::tile`] makes
    /// for whole tiles.
    ///
    /// # Safety
    /// `ap` holds the A panel of `kc` steps that the selected entry reads (`kc·mr` floats, or a wide panel); each tile's B has `kc` rows of `nr` readable floats; every
    /// tile is whole (`row0 + mr ≤` the part's rows, `col0 + np·nr ≤` its columns) and one of
    /// this part's (see [`Tiles::window`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn panels(
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
        let (bias, lo, hi) = self.run_ends(col0, np, last);
        let c_off = row0 * ldc + col0;
        debug_assert!(c_off + (self.uk.mr - 1) * ldc + np * nr <= self.len);
        if let (None, Some(run)) = (self.wide, self.uk.run) {
            // SAFETY: the run contract for these np whole tiles: tile q's B at
            // bptr + q·stride, C at c_off + q·nr, bias (sliced above, np·nr floats) q·nr on,
            // A the plain MR-interleaved panel (no wide entry selected), per the caller.
            unsafe {
                run(
                    np,
                    stride,
                    kc,
                    ap.as_ptr(),
                    bptr,
                    ldb,
                    self.c.add(c_off),
                    ldc as isize,
                    self.alpha,
                    beta,
                    bias,
                    lo,
                    hi,
                )
            };
            return;
        }
        let kernel = self.wide.unwrap_or(self.uk.kernel);
        for q in 0..np {
            // SAFETY: tile q's B (caller), A (`ap`, the panel the selected entry reads), C tile (whole, inside the
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

    /// [`Tiles::panels`] for `rows` row panels one under the other: panel `r` (rows
    /// `row0 + r·mr ..`) reads its A panel at `ap[r·a_stride ..]` and the same `np` B panels.
    /// With a run entry and no wide one, one tight loop of run calls (what goes per panel is
    /// only the A and C pointers); otherwise [`Tiles::panels`] per row panel.
    ///
    /// # Safety
    /// [`Tiles::panels`]' contract for each row panel `r < rows` (`ap[r·a_stride ..]` holds
    /// that panel's A, the tiles of rows `row0 + r·mr .. + mr` are whole and this part's).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn panel_rows(
        &mut self,
        ap: &[f32],
        a_stride: usize,
        rows: usize,
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
        let (mr, nr, ldc) = (self.uk.mr, self.uk.nr, self.ldc);
        if let (None, Some(run)) = (self.wide, self.uk.run) {
            let (bias, lo, hi) = self.run_ends(col0, np, last);
            debug_assert!(
                rows == 0
                    || (row0 + (rows - 1) * mr) * ldc + col0 + (mr - 1) * ldc + np * nr <= self.len
            );
            debug_assert!(rows == 0 || (rows - 1) * a_stride < ap.len());
            let mut c = self.c.wrapping_add(row0 * ldc + col0);
            let mut a = ap.as_ptr();
            for _ in 0..rows {
                // SAFETY: the run contract for row panel r's np whole tiles (caller): A at
                // ap + r·a_stride, B as for `panels`, C at row row0 + r·mr, column col0
                // (inside the window), bias np·nr floats from col0 (sliced above).
                unsafe {
                    run(
                        np,
                        stride,
                        kc,
                        a,
                        bptr,
                        ldb,
                        c,
                        ldc as isize,
                        self.alpha,
                        beta,
                        bias,
                        lo,
                        hi,
                    )
                };
                a = a.wrapping_add(a_stride);
                c = c.wrapping_add(mr * ldc);
            }
            return;
        }
        for r in 0..rows {
            // SAFETY: row panel r of the caller's contract.
            unsafe {
                self.panels(
                    &ap[r * a_stride..],
                    bptr,
                    ldb,
                    stride,
                    np,
                    kc,
                    row0 + r * mr,
                    col0,
                    beta,
                    last,
                )
            };
        }
    }

    /// Tile rows `row0 .. row0 + min(mr, rows_left)`, columns `col0 .. + min(nr, cols_left)`.
    ///
    /// # Safety
    /// `ap` holds the A panel of `kc` steps that the selected entry reads; `bptr` has `kc` rows of `nr` readable floats `ldb` apart;
    /// the tile is one of this part's (see [`Tiles::window`]).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) unsafe fn tile(
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
        if let (Some(short), None, true) = (self.uk.short, self.wide, 2 * mrb <= mr) {
            // At most half the tile's rows: the short tile, over the columns of the tile that
            // are this part's (a half panel when the part starts or ends inside it).
            let first = self.win.0.saturating_sub(col0);
            let end = nrb.min(self.win.1.saturating_sub(col0));
            if first < end {
                let bias_p = bias.map_or(core::ptr::null(), |bv| bv.as_ptr());
                // SAFETY: the ShortFn contract: `ap` the MR-interleaved panel of kc steps (no
                // wide entry selected), `bptr` kc rows of nr readable floats (caller), rows
                // 0 .. mrb ≤ mr/2 of the tile hold columns first .. end ≤ nrb inside the
                // window (bounds above; `first` is 0 or nr/2: `set_columns`), the bias null
                // or nrb ≥ end floats from the tile's column 0.
                unsafe {
                    short(
                        kc,
                        ap.as_ptr(),
                        bptr,
                        ldb,
                        self.c.add(c_off),
                        ldc as isize,
                        self.alpha,
                        beta,
                        bias_p,
                        lo,
                        hi,
                        mrb,
                        end - first,
                        first,
                    )
                };
            }
            return;
        }
        if let (Some(part), None) = (self.uk.part, self.wide) {
            // Any edge straight into C by the kernel's partial-tile entry.
            let bias_p = bias.map_or(core::ptr::null(), |bv| bv.as_ptr());
            // SAFETY: the PartFn contract: `ap` the MR-interleaved panel of kc steps (no wide
            // entry selected), `bptr` kc rows of nr readable floats (caller), rows 0 .. mrb
            // of this part's tile hold nrb columns inside the window (bounds above), bias
            // null or nrb floats.
            unsafe {
                part(
                    kc,
                    ap.as_ptr(),
                    bptr,
                    ldb,
                    self.c.add(c_off),
                    ldc as isize,
                    self.alpha,
                    beta,
                    bias_p,
                    lo,
                    hi,
                    mrb,
                    nrb,
                )
            };
            return;
        }
        let tmp = self.tmp.as_mut_ptr() as *mut f32;
        if let (Some(edge), None, true) = (self.uk.edge, self.wide, mrb == mr) {
            if beta == 0.0 && self.alpha == 1.0 {
                // The N edge straight into C by the kernel's edge entry; its bias, nrb floats
                // here, goes to the kernel padded to nr in `tmp`.
                let bias_k = match bias {
                    Some(bv) => {
                        // SAFETY: `tmp` holds MAX_MR·MAX_NR ≥ nr floats; bv has nrb ≤ nr.
                        unsafe {
                            core::ptr::copy_nonoverlapping(bv.as_ptr(), tmp, nrb);
                            core::ptr::write_bytes(tmp.add(nrb), 0, nr - nrb);
                        }
                        tmp as *const f32
                    }
                    None => core::ptr::null(),
                };
                // SAFETY: the EdgeFn contract: `ap` the MR-interleaved panel of kc steps (no
                // wide entry selected), `bptr` kc rows of nr readable floats (caller), rows
                // 0 .. mr of this part's tile hold nrb columns inside the window (bounds
                // above), bias null or nr floats in `tmp`.
                unsafe {
                    edge(
                        kc,
                        ap.as_ptr(),
                        bptr,
                        ldb,
                        self.c.add(c_off),
                        ldc as isize,
                        nrb,
                        bias_k,
                        lo,
                        hi,
                    )
                };
                return;
            }
        }
        let rows = match self.wide {
            Some(_) => None,
            None => self.uk.rows.as_ref(),
        };
        if let Some(f) = rows.and_then(|rk| rk.for_rows(mrb)) {
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
            // SAFETY: row kernels exist only with MR-interleaved panels (`set_wide`); the row kernel reads the kc·mr panel `ap` as the tile does and B as
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
                (self.wide.unwrap_or(self.uk.kernel))(
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
