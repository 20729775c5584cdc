//! Short copies without a library call (a leaf: the slice kernels of this module and its
//! Neon back end both use it).

/// Runs at least this long are moved by the library `memcpy`; shorter ones inline (the call
/// and its size dispatch cost more than a short run itself: 60-80 instructions per run of 16
/// floats in the permutes of attention heads, against about 12 inline).
const LONG_RUN: usize = 32;

/// `out = src` over their common length, by [`copy_raw`]: below 32 elements two overlapping
/// fixed-size moves (no loop, no library call), from 32 on the library `memcpy`. For short
/// rows copied one at a time: a GEMM panel's partial rows, a softmax row's tail.
#[inline]
pub fn copy_run<T: Copy>(src: &[T], out: &mut [T]) {
    let n = src.len().min(out.len());
    // SAFETY: n elements of each slice; distinct borrows do not overlap.
    unsafe { copy_raw(src.as_ptr(), out.as_mut_ptr(), n) }
}

/// Copies `n` elements from `s` to `o`: below [`LONG_RUN`] by two fixed-size moves that
/// overlap in the middle (the first and the last 16, 8, 4, 2 elements for `n` in 16..32,
/// 8..16, 4..8, 2..4; one element for 1): no loop and no library call, which LLVM would turn
/// a copy loop back into. At or above `LONG_RUN` the library `memcpy`.
///
/// # Safety
/// `s` valid for `n` reads, `o` for `n` writes, the two ranges disjoint.
#[inline(always)]
pub(super) unsafe fn copy_raw<T: Copy>(s: *const T, o: *mut T, n: usize) {
    /// Moves `K` elements at offset `at`.
    ///
    /// # Safety
    /// `at + K ≤ n` for the caller's `n`.
    #[inline(always)]
    unsafe fn mv<T: Copy, const K: usize>(s: *const T, o: *mut T, at: usize) {
        // SAFETY: at + K ≤ n (caller); `[T; K]` has T's alignment.
        unsafe { (o.add(at) as *mut [T; K]).write((s.add(at) as *const [T; K]).read()) }
    }
    // SAFETY: (whole body) every move covers [at, at + K) with at + K ≤ n, as each branch's
    // bound on n guarantees; the ranges are valid and disjoint (caller). The two moves of a
    // branch may overlap each other: both write the same values there.
    unsafe {
        if n >= LONG_RUN {
            core::ptr::copy_nonoverlapping(s, o, n);
        } else if n >= 16 {
            mv::<T, 16>(s, o, 0);
            mv::<T, 16>(s, o, n - 16);
        } else if n >= 8 {
            mv::<T, 8>(s, o, 0);
            mv::<T, 8>(s, o, n - 8);
        } else if n >= 4 {
            mv::<T, 4>(s, o, 0);
            mv::<T, 4>(s, o, n - 4);
        } else if n >= 2 {
            mv::<T, 2>(s, o, 0);
            mv::<T, 2>(s, o, n - 2);
        } else if n == 1 {
            o.write(s.read());
        }
    }
}
