//! Cache-blocked single-precision GEMM: `C = alpha·A·B + beta·C (+ bias)`.
//!
//! A BLIS-style driver ([`sgemm`]) around an interchangeable register-tile
//! [`MicroKernel`]. The driver blocks the problem for the cache hierarchy and packs A
//! panels into caller-provided scratch memory; the micro-kernel sees a packed, zero-padded
//! A micro-panel, `k` rows of B (`ldb` apart) and one `MR × NR` tile of C.
//!
//! Two loop nests. When B has unit column stride (row-major weights: the common case) B is
//! **read in place** — weights are never copied — and A is packed once per depth block:
//!
//! ```text
//! for pc in 0..k step kc            // depth block (kernels that keep C in ZA ask for long kc)
//!   pack the column tail of B (n mod NR columns, zero-padded), if any
//!   for ic in 0..m step mc          // pack A[ic.., pc..] (mc × kc, MR-interleaved), once
//!     for jc in 0..n step NC        // B block read in place (stays in L2)
//!       for ir in 0..mc step MR     // one packed A micro-panel (stays in L1)
//!         for jr in jc.. step NR    // micro-kernel on one C tile, B rows b.rs apart
//! ```
//!
//! Any other B (transposed or general strides) is packed, BLIS order:
//!
//! ```text
//! for jc in 0..n step NC            // B panel columns
//!   for pc in 0..k step KC          // depth block: pack B[pc.., jc..] (KC × NC, NR-interleaved)
//!     for ic in 0..m step MC        // pack A[ic.., pc..] (MC × KC, MR-interleaved)
//!       for jr in 0..nc step NR     // one packed B micro-panel (stays in L1)
//!         for ir in 0..mc step MR   // one packed A micro-panel → micro-kernel on one C tile
//! ```
//!
//! The first depth block applies the caller's `beta`, later blocks accumulate (`beta = 1`),
//! and the last depth block adds the bias. Edge tiles (M or N tails) are computed into a
//! local tile from zero-padded panels and only their valid part is merged into C.
//!
//! Operands are strided views ([`MatRef`]), so transposed operands need no copy:
//! `linear` multiplies by `weight` viewed transposed, `bmm` walks batches by slicing.
//!
//! No allocation, no `std`: all temporary memory is the `scratch` slice the caller passes
//! (at most [`GEMM_SCRATCH_F32`] floats).

use core::sync::atomic::{AtomicU8, Ordering};

use crate::error::KernelError;

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
/// aligning the byte scratch to f32). Smaller shapes need less, see [`sgemm_scratch_len`].
pub const GEMM_SCRATCH_F32: usize = MC * KC + KC * NC + ALIGN_F32;
const _: () = assert!(GEMM_SCRATCH_F32 * 4 <= 256 * 1024);

/// Largest register tile a [`MicroKernel`] may declare (`mr ≤ MAX_MR`, `nr ≤ MAX_NR`).
/// (The SME kernel's four ZA tiles at SVL 512 form a 32 × 32 tile, the SVE kernel at
/// VL 512 an 8 × 48 one.)
pub const MAX_MR: usize = 32;
/// See [`MAX_MR`].
pub const MAX_NR: usize = 64;

/// A read-only strided matrix view: element `(i, j)` is `data[i * row_stride + j * col_stride]`.
///
/// A row-major `[rows, cols]` tensor is `row_stride = cols, col_stride = 1`; its transpose is
/// the same data with the strides (and dims) swapped ([`MatRef::t`]).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

fn shape_err(detail: &'static str) -> KernelError {
    KernelError::Shape { arg: 0, detail }
}

impl<'a> MatRef<'a> {
    /// A strided view. Fails if some element `(i, j)` with `i < rows, j < cols` would lie
    /// outside `data` (checked arithmetic; an empty matrix is always valid).
    pub fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<MatRef<'a>, KernelError> {
        if rows > 0 && cols > 0 {
            let last = (rows - 1)
                .checked_mul(row_stride)
                .and_then(|r| {
                    (cols - 1)
                        .checked_mul(col_stride)
                        .and_then(|c| r.checked_add(c))
                })
                .ok_or(shape_err("gemm: matrix view offset overflows"))?;
            if last >= data.len() {
                return Err(shape_err("gemm: matrix view exceeds its data"));
            }
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            rs: row_stride,
            cs: col_stride,
        })
    }

    /// A row-major `[rows, cols]` matrix (the first `rows * cols` elements of `data`).
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Result<MatRef<'a>, KernelError> {
        MatRef::new(data, rows, cols, cols, 1)
    }

    /// The transposed view (no copy).
    pub fn t(self) -> MatRef<'a> {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn row_stride(&self) -> usize {
        self.rs
    }
    pub fn col_stride(&self) -> usize {
        self.cs
    }

    /// Element `(i, j)`, or `None` outside the matrix.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        if i < self.rows && j < self.cols {
            self.data.get(i * self.rs + j * self.cs).copied()
        } else {
            None
        }
    }
}

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
);

/// A register-tile micro-kernel: computes one `MR × NR` tile of C from an A micro-panel and
/// `k` rows of B.
///
/// # Contract of `kernel(k, a, b, ldb, c, rsc, alpha, beta, bias)`
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
///   and the bias term when `bias` is null (otherwise `bias` is valid for `NR` reads).
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
    name: &'static str,
    mr: usize,
    nr: usize,
    kernel: MicroKernelFn,
    pack: Option<PackFn>,
    kc_max: usize,
}

/// Packs depth-contiguous source runs into one micro-panel of width `w`: a row-major A panel
/// (`w = MR`, runs = rows of A) or a transposed-B panel (`w = NR`, runs = columns of B, i.e.
/// rows of the stored `Bᵀ`).
///
/// # Contract of `pack(src, ld, runs, w, kc, dst) -> handled`
/// `w` is the kernel's `MR` or `NR`, `1 ≤ runs ≤ w` (fewer at the matrix edge), `kc ≥ 1`.
/// `src + i*ld .. + kc` is readable for `i < runs`, `dst` holds `kc * w` writable floats
/// (only f32-aligned). Either it stores `dst[p * w + i] = src[i * ld + p]` for `i < runs`,
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
            kc_max: KC,
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

/// A SIMD-vector-like accumulator lane group used by the generic micro-kernel body.
/// Implementations: [`Portable8`] (plain arrays that LLVM auto-vectorises for the target's
/// baseline SIMD) and, on x86_64, an AVX2/FMA `__m256` wrapper.
trait Lanes: Copy {
    const W: usize;
    /// # Safety
    /// Caller must run on a CPU with the implementation's target features.
    unsafe fn zero() -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn splat(x: f32) -> Self;
    /// # Safety
    /// `p` f32-aligned and valid for `W` reads; target features as [`Lanes::zero`].
    unsafe fn load(p: *const f32) -> Self;
    /// `acc + a * b` (fused where the target has FMA).
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// # Safety
    /// `p` 16-byte aligned and valid for `W` writes; target features as [`Lanes::zero`].
    unsafe fn store(self, p: *mut f32);
}

/// Four f32 lanes, 16-byte aligned so that loads and stores are single vector accesses even
/// on strict-alignment targets.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Quad([f32; 4]);

/// Eight f32 lanes as plain arrays (portable; auto-vectorised to the target's baseline SIMD).
#[derive(Clone, Copy)]
#[repr(C)]
struct Portable8([Quad; 2]);

impl Lanes for Portable8 {
    const W: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Portable8([Quad([0.0; 4]); 2])
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Portable8([Quad([x; 4]); 2])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 8 readable floats at `p` (`Lanes::load` contract);
        // the read is unaligned (B may be read in place, only f32-aligned).
        unsafe { core::ptr::read_unaligned(p as *const Portable8) }
    }
    #[inline(always)]
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self {
        let mut r = acc;
        for h in 0..2 {
            for l in 0..4 {
                r.0[h].0[l] += a.0[h].0[l] * b.0[h].0[l];
            }
        }
        r
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        let mut r = a;
        for h in 0..2 {
            for l in 0..4 {
                r.0[h].0[l] *= b.0[h].0[l];
            }
        }
        r
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees 8 writable floats at `p`, 16-byte aligned.
        unsafe { core::ptr::write(p as *mut Portable8, self) }
    }
}

/// One tile row of results, aligned for [`Lanes::store`].
#[repr(C, align(64))]
struct AlignedRow([f32; MAX_NR]);

/// The generic micro-kernel body: an `MR × (NV·W)` accumulator tile of `V` lanes.
/// `#[inline(always)]` so that each instantiation is compiled with the target features of
/// the function it is inlined into.
///
/// # Safety
/// The [`MicroKernel`] contract with `MR` and `NR = NV * V::W`, and the CPU supports `V`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_body<V: Lanes, const MR: usize, const NV: usize>(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: (whole body) per the contract, `a` holds k*MR floats and `b` k rows of NR
    // floats `ldb` apart, so every `a.add(p*MR + i)` / `b.add(p*ldb + v*W)..+W` read is in
    // bounds; C tile elements
    // (i, j) for i < MR, j < NR and bias[..NR] are valid per the contract; the CPU supports
    // V's target features (caller).
    unsafe {
        let mut acc = [[V::zero(); NV]; MR];
        let mut ap = a;
        let mut bp = b;
        for _ in 0..k {
            let mut bv = [V::zero(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = V::load(bp.add(v * V::W));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = V::splat(*ap.add(i));
                for v in 0..NV {
                    row[v] = V::madd(row[v], ai, bv[v]);
                }
            }
            ap = ap.add(MR);
            bp = bp.add(ldb);
        }
        let valpha = V::splat(alpha);
        const { assert!(NV * V::W <= MAX_NR) };
        let nr = NV * V::W;
        let mut buf = AlignedRow([0.0f32; MAX_NR]);
        let vals = &mut buf.0;
        for (i, row) in acc.iter().enumerate() {
            for (v, &x) in row.iter().enumerate() {
                V::mul(x, valpha).store(vals.as_mut_ptr().add(v * V::W));
            }
            let crow = c.offset(i as isize * rsc);
            // Contiguous row: loops the compiler vectorises.
            if beta != 0.0 {
                for (j, x) in vals[..nr].iter_mut().enumerate() {
                    *x += beta * *crow.add(j);
                }
            }
            if !bias.is_null() {
                for (j, x) in vals[..nr].iter_mut().enumerate() {
                    *x += *bias.add(j);
                }
            }
            core::ptr::copy_nonoverlapping(vals.as_ptr(), crow, nr);
        }
    }
}

/// Portable micro-kernel (`PORTABLE_MR × 16`).
const PORTABLE_MR: usize = 4;

/// # Safety
/// The [`MicroKernel`] contract with `MR = 4`, `NR = 16`.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_portable(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) {
    // SAFETY: same contract, forwarded; Portable8 needs no target feature.
    unsafe { kernel_body::<Portable8, PORTABLE_MR, 2>(k, a, b, ldb, c, rsc, alpha, beta, bias) }
}

/// The portable micro-kernel: plain Rust, auto-vectorised for the build target's baseline SIMD.
// SAFETY: `kernel_portable` implements the contract for a 4 × 16 tile (it instantiates the
// generic body with MR = 4, NR = 2·8) and needs no CPU feature beyond the build target's.
pub static PORTABLE: MicroKernel =
    unsafe { MicroKernel::new("portable", PORTABLE_MR, 16, kernel_portable) };

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{kernel_body, Lanes, MicroKernel};
    use core::arch::x86_64::*;

    /// Eight f32 lanes in one AVX register.
    #[derive(Clone, Copy)]
    pub(super) struct Avx8(__m256);

    impl Lanes for Avx8 {
        const W: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> Self {
            // SAFETY: callers run with AVX enabled (Lanes contract).
            Avx8(unsafe { _mm256_setzero_ps() })
        }
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            // SAFETY: AVX enabled (Lanes contract).
            Avx8(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: 8 readable floats at p (caller); loadu accepts any alignment.
            Avx8(unsafe { _mm256_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn madd(acc: Self, a: Self, b: Self) -> Self {
            // SAFETY: FMA enabled (Lanes contract).
            Avx8(unsafe { _mm256_fmadd_ps(a.0, b.0, acc.0) })
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            // SAFETY: AVX enabled (Lanes contract).
            Avx8(unsafe { _mm256_mul_ps(a.0, b.0) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            // SAFETY: 8 writable floats at p (caller); storeu accepts any alignment.
            unsafe { _mm256_storeu_ps(p, self.0) }
        }
    }

    pub(super) const AVX2_MR: usize = 6;

    /// # Safety
    /// The [`MicroKernel`] contract with `MR = 6`, `NR = 16`, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn kernel_avx2(
        k: usize,
        a: *const f32,
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        rsc: isize,
        alpha: f32,
        beta: f32,
        bias: *const f32,
    ) {
        // SAFETY: contract forwarded; this function is only selected after run-time
        // detection of AVX2 + FMA (see `detect`), so Avx8's features are present.
        unsafe { kernel_body::<Avx8, AVX2_MR, 2>(k, a, b, ldb, c, rsc, alpha, beta, bias) }
    }

    /// Shim with the plain `MicroKernelFn` type (target-feature functions cannot coerce to a
    /// safe-feature fn pointer type directly on every toolchain).
    #[allow(clippy::too_many_arguments)]
    unsafe fn kernel_avx2_ptr(
        k: usize,
        a: *const f32,
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        rsc: isize,
        alpha: f32,
        beta: f32,
        bias: *const f32,
    ) {
        // SAFETY: the caller upholds the contract, which for this kernel includes running on
        // a CPU with AVX2 and FMA (it is only handed out by `detect` / `avx2_fma`).
        unsafe { kernel_avx2(k, a, b, ldb, c, rsc, alpha, beta, bias) }
    }

    // SAFETY: `kernel_avx2_ptr` implements the contract for a 6 × 16 tile (generic body with
    // MR = 6, NR = 2·8); this static is private and handed out only after run-time detection
    // of AVX2 + FMA (`avx2_fma`, `micro_kernel`).
    pub(super) static AVX2_FMA: MicroKernel =
        unsafe { MicroKernel::new("avx2-fma", AVX2_MR, 16, kernel_avx2_ptr) };

    /// # Safety
    /// The CPU must support XSAVE/XGETBV (CPUID.1:ECX.OSXSAVE).
    #[target_feature(enable = "xsave")]
    unsafe fn xcr0() -> u64 {
        // SAFETY: XGETBV with ECX = 0 is valid when the OS enabled XSAVE (caller).
        unsafe { _xgetbv(0) }
    }

    /// CPUID/XGETBV detection of AVX2 + FMA with OS support for the YMM state.
    pub(super) fn has_avx2_fma() -> bool {
        let l0 = __cpuid(0);
        if l0.eax < 7 {
            return false;
        }
        let l1 = __cpuid(1);
        let fma = l1.ecx & (1 << 12) != 0;
        let osxsave = l1.ecx & (1 << 27) != 0;
        let avx = l1.ecx & (1 << 28) != 0;
        if !(fma && osxsave && avx) {
            return false;
        }
        // SAFETY: CPUID.1:ECX.OSXSAVE is set, so XGETBV is available and enabled by the OS.
        let xcr0 = unsafe { xcr0() };
        if xcr0 & 0b110 != 0b110 {
            return false; // OS does not save XMM+YMM state
        }
        let l7 = __cpuid_count(7, 0);
        l7.ebx & (1 << 5) != 0
    }
}

/// The AVX2+FMA micro-kernel (`6 × 16`), if this CPU supports it.
#[cfg(target_arch = "x86_64")]
pub fn avx2_fma() -> Option<&'static MicroKernel> {
    if detect() == 2 {
        Some(&x86::AVX2_FMA)
    } else {
        None
    }
}

/// 0 = not yet detected, 1 = portable, 2 = AVX2+FMA. (AArch64 selects in `kernels::arm`.)
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
static SELECTED: AtomicU8 = AtomicU8::new(0);

#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
fn detect() -> u8 {
    let s = SELECTED.load(Ordering::Relaxed);
    if s != 0 {
        return s;
    }
    #[cfg(target_arch = "x86_64")]
    let s = if x86::has_avx2_fma() { 2 } else { 1 };
    #[cfg(not(target_arch = "x86_64"))]
    let s = 1;
    SELECTED.store(s, Ordering::Relaxed);
    s
}

/// The best micro-kernel for this CPU (detected once, then cached).
///
/// On AArch64 the choice is [`crate::kernels::arm::micro_kernel`] (ID-register detection,
/// overridable with [`crate::kernels::arm::force`]).
pub fn micro_kernel() -> &'static MicroKernel {
    #[cfg(target_arch = "aarch64")]
    return crate::kernels::arm::micro_kernel();
    #[cfg(not(target_arch = "aarch64"))]
    match detect() {
        #[cfg(target_arch = "x86_64")]
        2 => &x86::AVX2_FMA,
        _ => &PORTABLE,
    }
}

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
struct Plan {
    kc: usize,
    mc: usize,
    nc: usize,
    /// Floats of the packed A block.
    a_len: usize,
    /// Floats of the packed B panel (packed mode) or of the packed column tail (direct).
    b_len: usize,
}

/// Usable scratch floats (the rest aligns the panels to 64 bytes).
const BUDGET_F32: usize = GEMM_SCRATCH_F32 - ALIGN_F32;
/// Upper bound on the rows of A packed at once when B is read in place.
const MC_DIRECT: usize = 256;

fn plan(uk: &MicroKernel, m: usize, n: usize, k: usize, direct_b: bool) -> Plan {
    let (mr, nr) = (uk.mr, uk.nr);
    let nc = (NC - NC % nr).max(nr);
    if direct_b {
        // A block (mc × kc) + one packed column-tail panel (kc × nr).
        let kc = split_depth(k, uk.kc_max.min(BUDGET_F32 / (mr + nr)));
        let tail = if n % nr != 0 { kc * nr } else { 0 };
        let strips = ((BUDGET_F32 - tail) / (kc * mr)).max(1);
        let mc = (strips * mr).min(round_up(m, mr)).min(MC_DIRECT.max(mr));
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

/// The micro-kernel [`sgemm`] uses for an `m × n × k` product: the CPU's best one
/// ([`micro_kernel`]), or a variant of the same ISA whose tile fits this shape better
/// (AArch64 Neon: 4 × 16 for a 1–4-row remainder mod 8, 8 × 8 instead of 8 × 12 when `n` is
/// a multiple of 8 but not of 12).
pub fn micro_kernel_for(m: usize, n: usize, k: usize) -> &'static MicroKernel {
    let _ = (m, k);
    #[cfg(target_arch = "aarch64")]
    return crate::kernels::arm::micro_kernel_for(m, n);
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = n;
        micro_kernel()
    }
}

fn scratch_len_for(uk: &MicroKernel, m: usize, n: usize, k: usize) -> usize {
    if m == 0 || n == 0 || k == 0 {
        return 0;
    }
    let need = |p: Plan| ALIGN_F32 + p.a_len + p.b_len;
    need(plan(uk, m, n, k, true)).max(need(plan(uk, m, n, k, false)))
}

/// Packed-panel areas are aligned to this many floats (64 bytes) inside the scratch.
const ALIGN_F32: usize = 16;

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
    let uk = micro_kernel_for(a.rows, b.cols, a.cols);
    sgemm_with(uk, a, b, c, ldc, alpha, beta, bias, scratch)
}

/// [`sgemm`] with an explicit micro-kernel.
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
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    if !check_call(uk, m, n, k, c, ldc, beta, bias)? {
        return Ok(());
    }
    // M = 1 on AArch64 with an Arm kernel: a GEMV without packing (`kernels::arm::gemv`).
    #[cfg(target_arch = "aarch64")]
    if m == 1
        && !core::ptr::eq(uk, &PORTABLE)
        && a.cs == 1
        && crate::kernels::arm::gemv::sgemv(
            k,
            n,
            &a.data[..k.min(a.data.len())],
            b.data,
            b.rs,
            b.cs,
            &mut c[..n],
            alpha,
            beta,
            bias,
        )
    {
        return Ok(());
    }
    let mut t = Tiles::start(uk, (m, n, k), c, ldc, alpha, bias, scratch.len())?;
    if b.cs == 1 {
        direct(&mut t, &a, BSource::InPlace(b), m, n, k, beta, scratch);
    } else {
        packed(&mut t, &a, &b, m, n, k, beta, scratch);
    }
    Ok(())
}

/// Validates C and bias for an `m × n × k` call and applies the empty product (`k = 0`:
/// `C = beta·C + bias`). `Ok(false)` when nothing is left to compute.
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
        return Ok(false);
    }
    Ok(true)
}

/// Where the direct loop nest reads B from.
#[derive(Clone, Copy)]
enum BSource<'b> {
    /// A row-major B (unit column stride) read in place; the column tail is packed.
    InPlace(MatRef<'b>),
    /// Whole-depth panels packed ahead of time ([`PackedB`]).
    Prepacked(PackedB<'b>),
}

/// The direct loop nest: pc → ic (pack A once) → jc → ir → jr, B never packed except a
/// column tail of an in-place B (n mod NR, once per depth block).
#[allow(clippy::too_many_arguments)]
fn direct(
    t: &mut Tiles<'_, '_>,
    a: &MatRef<'_>,
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
        BSource::Prepacked(_) => n,
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
            pack_a(uk, a, ic, mcb, pc, kcb, apack);
            let mut jc = 0;
            while jc < n {
                let ncb = plan.nc.min(n - jc);
                for ir in (0..mcb).step_by(mr) {
                    let ap = &apack[(ir / mr) * kcb * mr..][..kcb * mr];
                    for jr in (jc..jc + ncb).step_by(nr) {
                        let (bptr, ldb) = match b {
                            // In bounds: rows pc..pc+kcb < k and columns jr..jr+nr ≤ n of a
                            // validated MatRef with unit column stride.
                            BSource::InPlace(bm) if jr < n_full => {
                                (bm.data[pc * bm.rs + jr..].as_ptr(), bm.rs)
                            }
                            BSource::InPlace(_) => (bpack.as_ptr(), nr),
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

/// The packed loop nest (BLIS order): jc → pc (pack B) → ic (pack A) → jr → ir.
#[allow(clippy::too_many_arguments)]
fn packed(
    t: &mut Tiles<'_, '_>,
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
                for jr in (0..ncb).step_by(nr) {
                    let bp = &bpack[(jr / nr) * kcb * nr..][..kcb * nr];
                    for ir in (0..mcb).step_by(mr) {
                        let ap = &apack[(ir / mr) * kcb * mr..][..kcb * mr];
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

/// A `[K, N]` B packed ahead of time for micro-kernels of tile width `nr` ("pre-packed
/// weights", e.g. stored so by `xtask lower` and read in place from the program).
///
/// Layout: `ceil(n / nr)` panels, panel `q` = columns `q·nr ..`, each `k` rows of `nr`
/// floats: `data[q·k·nr + p·nr + j] = B(p, q·nr + j)`, zero for columns `≥ n`. Whole-depth
/// panels make the layout independent of the driver's depth blocking.
#[derive(Clone, Copy, Debug)]
pub struct PackedB<'a> {
    data: &'a [f32],
    k: usize,
    n: usize,
    nr: usize,
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
    let (m, k, n) = (a.rows, a.cols, b.n);
    if b.k != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    let uk = Some(micro_kernel_for(m, n, k))
        .filter(|uk| uk.nr == b.nr)
        .or_else(|| kernel_with_nr(b.nr));
    let Some(uk) = uk else {
        // No kernel of this width here: one in-place product per panel.
        if !check_call(&PORTABLE, m, n, k, c, ldc, beta, bias)? {
            return Ok(());
        }
        for (q, panel) in b.data.chunks_exact(k * b.nr).enumerate() {
            let j0 = q * b.nr;
            let w = b.nr.min(n - j0);
            let bq = MatRef::new(panel, k, w, b.nr, 1)?;
            let bias_q = bias.map(|bv| &bv[j0..j0 + w]);
            sgemm(a, bq, &mut c[j0..], ldc, alpha, beta, bias_q, scratch)?;
        }
        return Ok(());
    };
    sgemm_prepacked_with(uk, a, b, c, ldc, alpha, beta, bias, scratch)
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
    let (m, k, n) = (a.rows, a.cols, b.n);
    if b.k != k {
        return Err(shape_err("gemm: inner dimensions differ"));
    }
    if uk.nr != b.nr {
        return Err(KernelError::Unsupported {
            detail: "gemm: packed B tile width differs from the micro-kernel's",
        });
    }
    if !check_call(uk, m, n, k, c, ldc, beta, bias)? {
        return Ok(());
    }
    let mut t = Tiles::start(uk, (m, n, k), c, ldc, alpha, bias, scratch.len())?;
    direct(&mut t, &a, BSource::Prepacked(b), m, n, k, beta, scratch);
    Ok(())
}

/// The tile width [`sgemm_prepacked`] runs fastest with for an `m × n × k` product on this
/// CPU (what `xtask lower` packs for when it targets the running machine).
pub fn prepack_nr(m: usize, n: usize, k: usize) -> usize {
    micro_kernel_for(m, n, k).nr
}

/// A micro-kernel of the selected ISA with tile width `nr`, if there is one.
fn kernel_with_nr(nr: usize) -> Option<&'static MicroKernel> {
    #[cfg(target_arch = "aarch64")]
    return crate::kernels::arm::kernel_with_nr(nr);
    #[cfg(not(target_arch = "aarch64"))]
    Some(micro_kernel()).filter(|uk| uk.nr == nr)
}

/// The C side of the driver: runs the micro-kernel on one tile, straight into C when the
/// tile is whole, through `tmp` at the M/N edges (left uninitialised: zeroing 8 KiB per call
/// costs more than a small product; the kernel writes the whole tile before it is read).
struct Tiles<'c, 'k> {
    uk: &'k MicroKernel,
    c: &'c mut [f32],
    ldc: usize,
    alpha: f32,
    bias: Option<&'k [f32]>,
    tmp: core::mem::MaybeUninit<[f32; MAX_MR * MAX_NR]>,
}

impl<'c, 'k> Tiles<'c, 'k> {
    /// The tile writer of one call, after checking that `scratch_len` floats of scratch
    /// suffice for `uk` on an `m × n × k` product.
    #[allow(clippy::too_many_arguments)]
    fn start(
        uk: &'k MicroKernel,
        (m, n, k): (usize, usize, usize),
        c: &'c mut [f32],
        ldc: usize,
        alpha: f32,
        bias: Option<&'k [f32]>,
        scratch_len: usize,
    ) -> Result<Tiles<'c, 'k>, KernelError> {
        let need = scratch_len_for(uk, m, n, k);
        if scratch_len < need {
            return Err(KernelError::Scratch {
                needed: need * 4,
                got: scratch_len * 4,
            });
        }
        Ok(Tiles {
            uk,
            c,
            ldc,
            alpha,
            bias,
            tmp: core::mem::MaybeUninit::uninit(),
        })
    }

    /// Tile rows `row0 .. row0 + min(mr, rows_left)`, columns `col0 .. + min(nr, cols_left)`.
    ///
    /// # Safety
    /// `ap` holds `kc·mr` floats; `bptr` has `kc` rows of `nr` readable floats `ldb` apart.
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
        let c_off = row0 * ldc + col0;
        if mrb == mr && nrb == nr {
            let bias_ptr = bias.map_or(core::ptr::null(), |s| s.as_ptr());
            // Bounds: rows row0 .. row0+mr ≤ m and columns col0 .. col0+nr ≤ n, so the last
            // element c_off+(mr-1)*ldc+nr-1 is < (m-1)*ldc + n ≤ c.len().
            let tile = &mut self.c[c_off..c_off + (mr - 1) * ldc + nr];
            // SAFETY: A/B per this function's contract; the C tile (i*ldc + j, i < mr,
            // j < nr) lies inside `tile`, exclusively borrowed; bias (if non-null) has nr
            // floats. The kernel's CPU features are present: kernels are only handed out
            // after detection.
            unsafe {
                (self.uk.kernel)(
                    kc,
                    ap.as_ptr(),
                    bptr,
                    ldb,
                    tile.as_mut_ptr(),
                    ldc as isize,
                    self.alpha,
                    beta,
                    bias_ptr,
                )
            };
            return;
        }
        // SAFETY: as above for A/B; `tmp` holds mr·nr ≤ MAX_MR·MAX_NR floats with row stride
        // nr, beta = 0 (not read), no bias.
        unsafe {
            (self.uk.kernel)(
                kc,
                ap.as_ptr(),
                bptr,
                ldb,
                self.tmp.as_mut_ptr() as *mut f32,
                nr as isize,
                self.alpha,
                0.0,
                core::ptr::null(),
            )
        };
        for i in 0..mrb {
            let crow = &mut self.c[c_off + i * ldc..c_off + i * ldc + nrb];
            // SAFETY: the kernel call above stored every element (i, j), i < mr, j < nr, of
            // the tile at tmp + i·nr + j (contract, beta = 0), so these nrb ≤ nr floats of row
            // i < mrb ≤ mr are initialised and inside the MAX_MR·MAX_NR array.
            let trow = unsafe {
                core::slice::from_raw_parts((self.tmp.as_ptr() as *const f32).add(i * nr), nrb)
            };
            for (j, (x, &t)) in crow.iter_mut().zip(trow).enumerate() {
                let mut v = t;
                if beta != 0.0 {
                    v += beta * *x;
                }
                if let Some(bv) = bias {
                    v += bv[j];
                }
                *x = v;
            }
        }
    }
}

/// Packs `A[ic..ic+mcb, pc..pc+kc]` into MR-row-interleaved micro-panels: panel `q` (rows
/// `ic + q·mr ..`) occupies `dst[q·kc·mr ..][.. kc·mr]` with `dst[p·mr + i] = A(row i, pc+p)`,
/// rows past `mcb` zero. Whole panels of a row-major A use the kernel's own packer if it
/// has one.
fn pack_a(
    uk: &MicroKernel,
    a: &MatRef<'_>,
    ic: usize,
    mcb: usize,
    pc: usize,
    kc: usize,
    dst: &mut [f32],
) {
    let mr = uk.mr;
    for (q, ir) in (0..mcb).step_by(mr).enumerate() {
        let rows = mr.min(mcb - ir);
        let d = &mut dst[q * kc * mr..(q + 1) * kc * mr];
        let base = (ic + ir) * a.rs + pc * a.cs;
        // Runs (rows ic+ir .. +rows ≤ m, columns pc .. pc+kc ≤ k of a validated view) are
        // contiguous when cs = 1.
        if !(a.cs == 1 && kernel_pack(uk, a.data, base, a.rs, rows, mr, kc, d)) {
            pack_panel(a.data, base, a.rs, a.cs, rows, mr, kc, d);
        }
    }
}

/// Packs `B[pc..pc+kc, jc..jc+nc]` into NR-column-interleaved micro-panels: panel `q`
/// (columns `jc + q·nr ..`) occupies `dst[q·kc·nr ..][.. kc·nr]` with
/// `dst[p·nr + j] = B(pc+p, col j)`, columns past `nc` zero. Whole panels of a transposed
/// B (unit row stride) use the kernel's own packer if it has one.
#[allow(clippy::too_many_arguments)]
fn pack_b(
    uk: &MicroKernel,
    b: &MatRef<'_>,
    pc: usize,
    kc: usize,
    jc: usize,
    nc: usize,
    dst: &mut [f32],
) {
    let nr = uk.nr;
    for (q, jr) in (0..nc).step_by(nr).enumerate() {
        let cols = nr.min(nc - jr);
        let d = &mut dst[q * kc * nr..(q + 1) * kc * nr];
        let base = pc * b.rs + (jc + jr) * b.cs;
        // Runs (columns jc+jr .. +cols ≤ n, rows pc .. pc+kc ≤ k of a validated view) are
        // contiguous when rs = 1: column j's run is data[base + j·cs ..][..kc].
        if !(b.rs == 1 && kernel_pack(uk, b.data, base, b.cs, cols, nr, kc, d)) {
            pack_panel(b.data, base, b.cs, b.rs, cols, nr, kc, d);
        }
    }
}

/// The kernel's own packer on `runs` depth-contiguous runs `data[base + i·ld ..][..kc]`
/// (`i < runs`, all inside `data`: the caller's validated view) into the width-`w` panel `d`,
/// lanes `runs..w` zeroed; `false` if the kernel has no packer or it declines.
#[allow(clippy::too_many_arguments)]
fn kernel_pack(
    uk: &MicroKernel,
    data: &[f32],
    base: usize,
    ld: usize,
    runs: usize,
    w: usize,
    kc: usize,
    d: &mut [f32],
) -> bool {
    let Some(pack) = uk.pack else {
        return false;
    };
    let d = &mut d[..kc * w];
    if runs < w {
        d.fill(0.0);
    }
    let src = &data[base..];
    // SAFETY: the PackFn contract: w is this kernel's mr or nr (callers), runs i < runs ≤ w at
    // src + i·ld hold kc readable floats (inside `data`, caller), `d` holds kc·w floats,
    // kc ≥ 1 (the driver never packs an empty depth block).
    unsafe { pack(src.as_ptr(), ld, runs, w, kc, d.as_mut_ptr()) }
}

/// One packed micro-panel of width `w`: `d[p·w + l] = src[base + l·ls + p·ps]` for `l < n`
/// (`n ≤ w` valid lanes, the rest zero) and `p < kc`. `ls` is the stride between lanes
/// (rows of A, columns of B), `ps` the stride along the depth.
#[allow(clippy::too_many_arguments)]
fn pack_panel(
    src: &[f32],
    base: usize,
    ls: usize,
    ps: usize,
    n: usize,
    w: usize,
    kc: usize,
    d: &mut [f32],
) {
    if n == w {
        macro_rules! fixed {
            ($($w:literal),*) => {
                match w {
                    $($w if ps == 1 => return interleave::<$w>(src, base, ls, kc, d),
                      $w if ls == 1 => return copy_rows::<$w>(src, base, ps, kc, d),)*
                    _ => {}
                }
            };
        }
        fixed!(4, 6, 8, 12, 16, 24, 32, 36, 48);
    }
    for (p, dp) in d[..kc * w].chunks_exact_mut(w).enumerate() {
        for (l, x) in dp[..n].iter_mut().enumerate() {
            *x = src[base + l * ls + p * ps];
        }
        dp[n..].fill(0.0);
    }
}

/// `d[p·W + l] = src[base + l·ls + p]`: `W` contiguous runs interleaved, transposed in
/// 8-deep blocks so that every store is a whole `W`-wide row.
fn interleave<const W: usize>(src: &[f32], base: usize, ls: usize, kc: usize, d: &mut [f32]) {
    let runs: [&[f32]; W] = core::array::from_fn(|l| &src[base + l * ls..][..kc]);
    let mut blocks = d[..kc * W].chunks_exact_mut(8 * W);
    let mut p = 0;
    for blk in &mut blocks {
        let mut t = [[0.0f32; W]; 8];
        for (l, run) in runs.iter().enumerate() {
            let seg = &run[p..p + 8];
            for u in 0..8 {
                t[u][l] = seg[u];
            }
        }
        for (row, tr) in blk.chunks_exact_mut(W).zip(&t) {
            row.copy_from_slice(tr);
        }
        p += 8;
    }
    for (i, row) in blocks.into_remainder().chunks_exact_mut(W).enumerate() {
        for (l, x) in row.iter_mut().enumerate() {
            *x = runs[l][p + i];
        }
    }
}

/// `d[p·W + l] = src[base + p·ps + l]`: `W`-wide rows copied with a fixed-size copy.
fn copy_rows<const W: usize>(src: &[f32], base: usize, ps: usize, kc: usize, d: &mut [f32]) {
    for (p, row) in d[..kc * W].chunks_exact_mut(W).enumerate() {
        row.copy_from_slice(&src[base + p * ps..][..W]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    fn kernels() -> Vec<&'static MicroKernel> {
        let mut v = vec![&PORTABLE];
        #[cfg(target_arch = "x86_64")]
        if let Some(k) = avx2_fma() {
            v.push(k);
        }
        #[cfg(target_arch = "aarch64")]
        for isa in crate::kernels::arm::Isa::ALL {
            if let Some(k) = crate::kernels::arm::kernel_for(isa) {
                v.push(k);
            }
        }
        #[cfg(target_arch = "aarch64")]
        v.push(&crate::kernels::arm::neon::NEON_8X8);
        #[cfg(target_arch = "aarch64")]
        v.push(&crate::kernels::arm::neon::NEON_4X16);
        v
    }

    /// Builds an m×k (or k×n) operand, optionally stored transposed, optionally with padded
    /// strides (neither stride 1) to exercise the general packing path.
    fn operand(rng: &mut Rng, rows: usize, cols: usize, layout: u8) -> (Vec<f32>, usize, usize) {
        match layout {
            0 => (rng.vec(rows * cols), cols, 1),             // row-major
            1 => (rng.vec(rows * cols), 1, rows),             // column-major (transposed storage)
            _ => (rng.vec(rows * cols * 6 + 3), 3 * cols, 2), // general strides
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check(
        uk: &MicroKernel,
        rng: &mut Rng,
        m: usize,
        n: usize,
        k: usize,
        la: u8,
        lb: u8,
        alpha: f32,
        beta: f32,
        with_bias: bool,
        ldc_pad: usize,
    ) {
        check_with(
            uk,
            rng,
            (m, n, k),
            la,
            lb,
            alpha,
            beta,
            with_bias,
            ldc_pad,
            0,
        )
    }

    /// [`check`] with `prepack`: 0 B as given, 1 B pre-packed for `uk`'s width
    /// ([`sgemm_prepacked_with`]), 2 pre-packed for a width no kernel has
    /// ([`sgemm_prepacked`]'s per-panel fallback).
    #[allow(clippy::too_many_arguments)]
    fn check_with(
        uk: &MicroKernel,
        rng: &mut Rng,
        (m, n, k): (usize, usize, usize),
        la: u8,
        lb: u8,
        alpha: f32,
        beta: f32,
        with_bias: bool,
        ldc_pad: usize,
        prepack: u8,
    ) {
        let (ad, ars, acs) = operand(rng, m, k, la);
        let (bd, brs, bcs) = operand(rng, k, n, lb);
        let a = MatRef::new(&ad, m, k, ars, acs).unwrap();
        let b = MatRef::new(&bd, k, n, brs, bcs).unwrap();
        let ldc = n + ldc_pad;
        let c_len = if m == 0 {
            0
        } else {
            (m - 1) * ldc + n + ldc_pad
        };
        let mut c = if beta == 0.0 {
            vec![f32::NAN; c_len]
        } else {
            rng.vec(c_len)
        };
        let c0 = c.clone();
        let bias = rng.vec(n);
        let mut scratch = vec![0.0f32; GEMM_SCRATCH_F32];
        let bias_opt = with_bias.then_some(&bias[..]);
        if prepack == 0 {
            sgemm_with(uk, a, b, &mut c, ldc, alpha, beta, bias_opt, &mut scratch).unwrap();
        } else {
            // 1: packed for this kernel's width; 2: for a width no kernel has (5).
            let nr = if prepack == 1 { uk.nr } else { 5 };
            let mut pd = vec![f32::NAN; PackedB::len_for(k, n, nr).unwrap()];
            pack_b_ahead(b, nr, &mut pd).unwrap();
            let pb = PackedB::new(&pd, k, n, nr).unwrap();
            if prepack == 1 {
                sgemm_prepacked_with(uk, a, pb, &mut c, ldc, alpha, beta, bias_opt, &mut scratch)
            } else {
                sgemm_prepacked(a, pb, &mut c, ldc, alpha, beta, bias_opt, &mut scratch)
            }
            .unwrap();
        }
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut sa) = (0.0f64, 0.0f64);
                for p in 0..k {
                    let t = a.get(i, p).unwrap() as f64 * b.get(p, j).unwrap() as f64;
                    s += t;
                    sa += t.abs();
                }
                let mut want = alpha as f64 * s;
                let mut mag = (alpha as f64).abs() * sa;
                if beta != 0.0 {
                    want += beta as f64 * c0[i * ldc + j] as f64;
                    mag += (beta as f64 * c0[i * ldc + j] as f64).abs();
                }
                if with_bias {
                    want += bias[j] as f64;
                    mag += (bias[j] as f64).abs();
                }
                let got = c[i * ldc + j] as f64;
                let tol = (k as f64 + 3.0) * 1.2e-7 * mag + 1e-30;
                assert!(
                    (got - want).abs() <= tol,
                    "{} m={m} n={n} k={k} la={la} lb={lb} prepack={prepack} alpha={alpha} \
                     beta={beta} bias={with_bias} at ({i},{j}): got {got}, want {want}",
                    uk.name
                );
            }
            // Padding between rows is untouched.
            for j in n..ldc {
                if i * ldc + j < c.len() {
                    assert!(c[i * ldc + j].to_bits() == c0[i * ldc + j].to_bits());
                }
            }
        }
    }

    #[test]
    fn odd_shapes_all_layouts() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let dims = [1usize, 3, 17, 129];
        for uk in kernels() {
            for &m in &dims {
                for &n in &dims {
                    for &k in &dims {
                        let la = ((m + 2 * n + k) % 3) as u8;
                        let lb = ((m + n + 2 * k) % 3) as u8;
                        check(uk, &mut rng, m, n, k, la, lb, 1.0, 0.0, false, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn transposes_alpha_beta_bias() {
        let mut rng = Rng(12345);
        for uk in kernels() {
            for la in 0..3 {
                for lb in 0..3 {
                    for &(alpha, beta, bias) in &[
                        (1.0, 0.0, false),
                        (0.5, 0.0, true),
                        (2.0, 1.0, false),
                        (-1.0, 0.25, true),
                        (1.0, 1.0, true),
                    ] {
                        check(uk, &mut rng, 19, 37, 23, la, lb, alpha, beta, bias, 0);
                        check(uk, &mut rng, 7, 16, 1, la, lb, alpha, beta, bias, 3);
                    }
                }
            }
        }
    }

    #[test]
    fn crosses_cache_blocks() {
        // m > MC, n > NC, k > KC (two depth blocks: beta applied once, bias added once).
        let mut rng = Rng(777);
        for uk in kernels() {
            check(
                uk,
                &mut rng,
                MC + 13,
                NC + 21,
                KC + 45,
                0,
                1,
                0.75,
                0.5,
                true,
                5,
            );
            check(
                uk,
                &mut rng,
                2 * MC + 1,
                2 * NC + 3,
                2 * KC + 1,
                1,
                0,
                1.0,
                0.0,
                true,
                0,
            );
            check(uk, &mut rng, 1, 3 * NC + 1, KC + 1, 0, 1, 1.0, 0.0, true, 0);
        }
    }

    #[test]
    fn long_depth_blocks_and_in_place_b() {
        // k beyond every kernel's depth block (SME asks for up to 1024): several blocks
        // with in-place B (layout 0) and packed B (layout 1), C reloaded between blocks.
        let mut rng = Rng(99);
        for uk in kernels() {
            check(uk, &mut rng, 33, 40, 1500, 0, 0, 1.0, 0.0, false, 0);
            check(uk, &mut rng, 33, 40, 1500, 0, 1, 1.0, 1.0, true, 2);
            check(uk, &mut rng, 65, 97, 1029, 0, 0, 0.5, 0.25, true, 1);
        }
    }

    #[test]
    fn edge_panels_through_kernel_packers() {
        // Row and column tails that are multiples of 4 (the Neon packer takes them, lanes
        // beyond zeroed) and ones that are not (the driver packs them), B stored transposed.
        let mut rng = Rng(2024);
        for uk in kernels() {
            for &(m, n, k) in &[
                (20, 28, 70),
                (12, 44, 9),
                (4, 4, 5),
                (21, 30, 7),
                (36, 20, 3),
            ] {
                check(uk, &mut rng, m, n, k, 0, 1, 1.0, 0.0, true, 0);
                check(uk, &mut rng, m, n, k, 0, 0, 0.5, 1.0, false, 3);
            }
        }
    }

    #[test]
    fn prepacked_b() {
        // Pre-packed B on every kernel: odd edges, one and several depth blocks, tails in M
        // and N, alpha/beta/bias, padded C; then the per-panel fallback for a width no kernel
        // has, and a mismatched width refused.
        let mut rng = Rng(0x5eed);
        for uk in kernels() {
            for &(m, n, k) in &[
                (1, 1, 1),
                (3, 17, 129),
                (17, 129, 3),
                (129, 3, 17),
                (33, 40, 1500),
                (64, 96, 64),
            ] {
                check_with(uk, &mut rng, (m, n, k), 0, 0, 1.0, 0.0, true, 0, 1);
                check_with(uk, &mut rng, (m, n, k), 1, 1, 0.5, 0.25, false, 3, 1);
            }
        }
        for &(m, n, k) in &[(1, 1, 1), (17, 23, 9), (40, 12, 300)] {
            check_with(&PORTABLE, &mut rng, (m, n, k), 0, 0, 1.0, 1.0, true, 1, 2);
        }
        let d = vec![0.0f32; PackedB::len_for(4, 4, 5).unwrap()];
        let pb = PackedB::new(&d, 4, 4, 5).unwrap();
        let a = [0.0f32; 8];
        let mut c = [0.0f32; 8];
        let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
        let am = MatRef::row_major(&a, 2, 4).unwrap();
        assert!(matches!(
            sgemm_prepacked_with(&PORTABLE, am, pb, &mut c, 4, 1.0, 0.0, None, &mut s),
            Err(KernelError::Unsupported { .. })
        ));
        assert!(PackedB::new(&d[1..], 4, 4, 5).is_err());
        assert!(PackedB::new(&d, 4, 4, 0).is_err());
    }

    #[test]
    fn plans_fit_the_scratch() {
        for uk in kernels() {
            for &(m, n, k) in &[
                (1, 1, 1),
                (128, 768, 768),
                (128, 50257, 768),
                (7, 3, 100_000),
            ] {
                for direct in [true, false] {
                    let p = plan(uk, m, n, k, direct);
                    assert!(p.kc >= 1 && p.kc <= k && p.mc >= uk.mr && p.mc % uk.mr == 0);
                    assert!(ALIGN_F32 + p.a_len + p.b_len <= GEMM_SCRATCH_F32, "{p:?}");
                }
                assert!(scratch_len_for(uk, m, n, k) <= GEMM_SCRATCH_F32);
            }
        }
    }

    #[test]
    fn auto_selected_kernel() {
        let mut rng = Rng(4242);
        check(
            micro_kernel(),
            &mut rng,
            129,
            17,
            129,
            0,
            1,
            1.0,
            0.0,
            true,
            0,
        );
        #[cfg(target_arch = "x86_64")]
        if x86::has_avx2_fma() {
            assert_eq!(micro_kernel().name(), "avx2-fma");
        }
    }

    #[test]
    fn k_zero_and_empty() {
        let e: [f32; 0] = [];
        let a = MatRef::row_major(&e, 2, 0).unwrap();
        let b = MatRef::row_major(&e, 0, 3).unwrap();
        let mut c = [f32::NAN; 6];
        sgemm(a, b, &mut c, 3, 1.0, 0.0, Some(&[1.0, 2.0, 3.0]), &mut []).unwrap();
        assert_eq!(c, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let mut c = [1.0f32; 6];
        sgemm(a, b, &mut c, 3, 1.0, 2.0, None, &mut []).unwrap();
        assert_eq!(c, [2.0; 6]);
        // m = 0 / n = 0: nothing to do, C untouched.
        let a0 = MatRef::row_major(&e, 0, 4).unwrap();
        let b4 = [0.0f32; 8];
        let b = MatRef::row_major(&b4, 4, 2).unwrap();
        sgemm(a0, b, &mut [], 2, 1.0, 0.0, None, &mut []).unwrap();
    }

    #[test]
    fn errors() {
        let d = [0.0f32; 12];
        assert!(MatRef::new(&d, 3, 4, 4, 1).is_ok());
        assert!(MatRef::new(&d, 3, 5, 4, 1).is_err());
        assert!(MatRef::new(&d, 2, 2, usize::MAX, 1).is_err());
        let a = MatRef::row_major(&d, 3, 4).unwrap();
        let b = MatRef::row_major(&d, 4, 3).unwrap();
        let mut c = [0.0f32; 9];
        let mut small = [0.0f32; 8];
        assert!(matches!(
            sgemm(a, b, &mut c, 3, 1.0, 0.0, None, &mut small),
            Err(KernelError::Scratch { .. })
        ));
        let mut s = vec![0.0f32; sgemm_scratch_len(3, 3, 4)];
        assert!(s.len() <= GEMM_SCRATCH_F32);
        sgemm(a, b, &mut c, 3, 1.0, 0.0, None, &mut s).unwrap();
        // inner dimension mismatch, short C, ldc < n, short bias
        assert!(sgemm(a, a, &mut c, 3, 1.0, 0.0, None, &mut s).is_err());
        assert!(sgemm(a, b, &mut c[..8], 3, 1.0, 0.0, None, &mut s).is_err());
        assert!(sgemm(a, b, &mut c, 2, 1.0, 0.0, None, &mut s).is_err());
        assert!(sgemm(a, b, &mut c, 3, 1.0, 0.0, Some(&[1.0, 2.0]), &mut s).is_err());
    }

    #[test]
    fn beta_zero_overwrites_nan_and_transpose_view() {
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2x3
        let am = MatRef::row_major(&a, 2, 3).unwrap();
        // A · Aᵀ through a transposed view of the same data.
        let mut c = [f32::NAN; 4];
        let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
        sgemm(am, am.t(), &mut c, 2, 1.0, 0.0, None, &mut s).unwrap();
        assert_eq!(c, [14.0, 32.0, 32.0, 77.0]);
    }
}
