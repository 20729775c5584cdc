//! Kernel selection for every architecture: which micro-kernel [`super::sgemm`] uses on this
//! CPU and for this shape, and the ISA override for tests and benchmarks.
//!
//! On AArch64:
//!
//! | [`Isa`]   | kernel (file)      | tile (`MR × NR`)                                  |
//! |-----------|--------------------|---------------------------------------------------|
//! | `Generic` | `portable`         | 4 × 16, plain Rust                                |
//! | `Neon`    | `arm::neon`        | 8 × 12 or 8 × 8 by [`neon_nr`]; 4 × 16 for a 1–4-row remainder; row kernels (1, 2, 4 rows) at the M edge |
//! | `Sve2`    | `arm::sve`         | 8 × 3·VL/32 (VL ≤ 512 bits), `asm!`               |
//! | `Sme`     | `arm::sme`         | 2·SVL/32 × 2·SVL/32 (SVL ≤ 512), 4 ZA tiles, FMOPA |
//! | `Sme2`    | `arm::sme` (same tile, multi-vector loads) | as `Sme`                 |
//!
//! On x86_64 the AVX-512F kernel (`x86::avx512`, 12 × 32) when CPUID reports it, else the
//! AVX2+FMA kernel (`x86::avx2`, 6 × 16), else the portable kernel. On 32-bit Arm the Neon +
//! VFPv4 kernel (`arm32`, 4 × 12) when the CPU has both, else the portable kernel.
//!
//! [`force`] pins an ISA for tests and benchmarks. With the `std` feature (and in unit tests)
//! the environment variable `PTERA_ISA` (`generic|neon|sve2|sme|sme2`) is honoured on first
//! use, so whole-program tests can be run once per ISA.

use core::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_arch = "aarch64")]
use super::arm::{neon, sme, sve};
use super::contract::MicroKernel;
use super::portable::PORTABLE;
#[cfg(target_arch = "aarch64")]
use crate::linalg::cpu::features;

/// An instruction-set level for the GEMM micro-kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Isa {
    /// The portable Rust kernel (auto-vectorised for the target baseline).
    Generic = 1,
    /// Advanced SIMD (always present on AArch64).
    Neon = 2,
    /// Scalable Vector Extension 2 (non-streaming).
    Sve2 = 3,
    /// Scalable Matrix Extension (FMOPA into ZA tiles, streaming mode).
    Sme = 4,
    /// SME2 (multi-vector loads).
    Sme2 = 5,
}

impl Isa {
    /// All levels, lowest first.
    pub const ALL: [Isa; 5] = [Isa::Generic, Isa::Neon, Isa::Sve2, Isa::Sme, Isa::Sme2];

    /// Lower-case name, as accepted by [`Isa::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Isa::Generic => "generic",
            Isa::Neon => "neon",
            Isa::Sve2 => "sve2",
            Isa::Sme => "sme",
            Isa::Sme2 => "sme2",
        }
    }

    /// Parses a name (`generic`, `portable`, `neon`, `sve2`, `sme`, `sme2`; ASCII case-insensitive).
    pub fn parse(s: &str) -> Option<Isa> {
        let s = s.trim();
        Isa::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(s))
            .or_else(|| s.eq_ignore_ascii_case("portable").then_some(Isa::Generic))
    }

    fn from_u8(v: u8) -> Option<Isa> {
        // A match, not a search of `ALL`: read on every product.
        match v {
            1 => Some(Isa::Generic),
            2 => Some(Isa::Neon),
            3 => Some(Isa::Sve2),
            4 => Some(Isa::Sme),
            5 => Some(Isa::Sme2),
            _ => None,
        }
    }
}

/// Can this CPU run the kernel of `isa` (including vector-length limits)?
pub fn supported(isa: Isa) -> bool {
    kernel_for(isa).is_some()
}

/// The micro-kernel implementing `isa` on this CPU, or `None` if the CPU lacks the feature
/// (or its vector length is outside the kernel's range). Worked out once per ISA: the answer
/// depends on the CPU alone (its ID registers and vector lengths, and on bare metal the units
/// the firmware enabled at boot), and the GEMM asks on every product.
pub fn kernel_for(isa: Isa) -> Option<&'static MicroKernel> {
    use core::sync::atomic::AtomicUsize;
    /// Per ISA (`Isa as u8`): 0 = not worked out yet, 1 = no kernel (no kernel's address:
    /// they are 8-aligned), else the kernel's address.
    static KNOWN: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];
    let slot = &KNOWN[isa as usize];
    match slot.load(Ordering::Relaxed) {
        0 => {}
        1 => return None,
        // SAFETY: every other value stored in `KNOWN` is the address of a
        // `&'static MicroKernel` that `detect_kernel` returned.
        p => return Some(unsafe { &*(p as *const MicroKernel) }),
    }
    let k = detect_kernel(isa);
    slot.store(
        k.map_or(1, |k| k as *const MicroKernel as usize),
        Ordering::Relaxed,
    );
    k
}

/// [`kernel_for`] without the memo.
fn detect_kernel(isa: Isa) -> Option<&'static MicroKernel> {
    match isa {
        Isa::Generic => Some(&PORTABLE),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => Some(&neon::NEON_8X12),
        #[cfg(target_arch = "aarch64")]
        Isa::Sve2 => {
            let f = features();
            if f.sve2 {
                sve::kernel()
            } else {
                None
            }
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Sme => {
            let f = features();
            if f.sme && f.sme_f32f32 {
                sme::kernel_sme1_for_cpu()
            } else {
                None
            }
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Sme2 => {
            let f = features();
            if f.sme2 && f.sme_f32f32 {
                sme::kernel_sme2_for_cpu()
            } else {
                None
            }
        }
        #[cfg(not(target_arch = "aarch64"))]
        _ => None,
    }
}

/// The best supported ISA (by the measured instruction density of the kernels).
pub fn best() -> Isa {
    for isa in [Isa::Sme2, Isa::Sme, Isa::Sve2, Isa::Neon] {
        if supported(isa) {
            return isa;
        }
    }
    Isa::Generic
}

/// 0 = not chosen yet, otherwise `Isa as u8`.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// Error of [`force`]: the CPU cannot run that ISA's kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported(pub Isa);

impl core::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ISA `{}` is not supported on this CPU", self.0.name())
    }
}

/// Pins the GEMM micro-kernel to `isa` (for tests and benchmarks). Process-wide.
pub fn force(isa: Isa) -> Result<(), Unsupported> {
    if !supported(isa) {
        return Err(Unsupported(isa));
    }
    CHOSEN.store(isa as u8, Ordering::Relaxed);
    Ok(())
}

/// Forgets a forced choice; the next use detects again.
pub fn reset() {
    CHOSEN.store(0, Ordering::Relaxed);
}

/// `PTERA_ISA` from the environment, if set and supported (std builds only).
#[cfg(any(test, feature = "std"))]
fn env_isa() -> Option<Isa> {
    let v = std::env::var("PTERA_ISA").ok()?;
    let isa = Isa::parse(&v)?;
    supported(isa).then_some(isa)
}

#[cfg(not(any(test, feature = "std")))]
fn env_isa() -> Option<Isa> {
    None
}

/// The ISA in use: forced, else `PTERA_ISA` (std builds), else [`best`]. Cached.
pub fn selected() -> Isa {
    if let Some(i) = Isa::from_u8(CHOSEN.load(Ordering::Relaxed)) {
        return i;
    }
    let isa = env_isa().unwrap_or_else(best);
    CHOSEN.store(isa as u8, Ordering::Relaxed);
    isa
}

/// The best micro-kernel for this CPU: on AArch64 the kernel of [`selected`] (ID-register
/// detection, overridable with [`force`]); on x86_64 the AVX-512F kernel, else the AVX2+FMA
/// kernel, when CPUID reports them (detected once); otherwise the portable kernel.
pub fn micro_kernel() -> &'static MicroKernel {
    #[cfg(target_arch = "aarch64")]
    return kernel_for(selected()).unwrap_or(&PORTABLE);
    #[cfg(target_arch = "x86_64")]
    return avx512().or_else(avx2_fma).unwrap_or(&PORTABLE);
    #[cfg(target_arch = "arm")]
    return arm32_neon_vfpv4().unwrap_or(&PORTABLE);
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64", target_arch = "arm")))]
    &PORTABLE
}

/// The micro-kernel [`sgemm`](super::sgemm) uses for an `m × n × k` product: the CPU's best
/// one ([`micro_kernel`]), or a variant of the same ISA whose tile fits this shape better
/// (AArch64 Neon: 4 × 16 for a 1–4-row remainder mod 8, 8 × 8 instead of 8 × 12 where
/// [`neon_nr`] says so).
pub fn micro_kernel_for(m: usize, n: usize, k: usize) -> &'static MicroKernel {
    let _ = (m, n, k);
    #[cfg(target_arch = "aarch64")]
    if selected() == Isa::Neon {
        return neon_kernel_for(m, n);
    }
    micro_kernel()
}

/// The Neon kernel for an `m × n` product: the tile of width [`neon_tile_nr`].
#[cfg(target_arch = "aarch64")]
fn neon_kernel_for(m: usize, n: usize) -> &'static MicroKernel {
    match neon_tile_nr(m, n) {
        16 => &neon::NEON_4X16,
        8 => &neon::NEON_8X8,
        _ => &neon::NEON_8X12,
    }
}

/// Neon's tile width for an `m × n` product, on any CPU: 16 (the 4 × 16 tile) when 16
/// divides `n` and `m` leaves a remainder of 1–4 rows mod 8 (e.g. m = 20: an 8-row tile
/// would leave a 4-row edge on every column tile), else the 8-row tile of width
/// [`neon_nr`]. `m = 0` (rows unknown) gives `neon_nr(n)`.
pub fn neon_tile_nr(m: usize, n: usize) -> usize {
    if n.is_multiple_of(16) && (1..=4).contains(&(m % 8)) {
        16
    } else {
        neon_nr(n)
    }
}

/// A micro-kernel of the selected ISA with tile width `nr`, if there is one (Neon has 8 × 12,
/// 8 × 8 and 4 × 16; the vector-length-agnostic kernels have one width, set by the running
/// vector length).
pub fn kernel_with_nr(nr: usize) -> Option<&'static MicroKernel> {
    #[cfg(target_arch = "aarch64")]
    if selected() == Isa::Neon {
        return [&neon::NEON_8X12, &neon::NEON_8X8, &neon::NEON_4X16]
            .into_iter()
            .find(|uk| uk.nr() == nr);
    }
    Some(micro_kernel()).filter(|uk| uk.nr() == nr)
}

/// The tile width [`sgemm_prepacked`](super::sgemm_prepacked) runs fastest with for an
/// `m × n × k` product on this CPU (what `xtask lower` packs for when it targets the running
/// machine).
pub fn prepack_nr(m: usize, n: usize, k: usize) -> usize {
    micro_kernel_for(m, n, k).nr()
}

/// Neon's panel width (8 or 12) for a product with `n` columns, the 8-row tiles: 8 when 8
/// divides `n` and 12 does not (e.g. 64, 256, 512: no column tail, whose packing and merging
/// cost more than the smaller tile's lower FMA share); 12 when 12 divides it; when neither
/// does, the width whose padded columns cost fewer depth-loop instructions (8 × 12: 206 per
/// 192 FMA, 8 × 8: 142 per 128): 8 for n = 7, 29, 37 (attention scores over 37 positions
/// pad to 40 columns instead of 48), 12 for n = 17 or 50257.
pub fn neon_nr(n: usize) -> usize {
    if n.is_multiple_of(12) {
        return 12;
    }
    if n.is_multiple_of(8) {
        return 8;
    }
    // Padded columns × instructions per FMA, compared without division.
    let c12 = (n.div_ceil(12) * 12) as u128 * 206 * 128;
    let c8 = (n.div_ceil(8) * 8) as u128 * 142 * 192;
    if c8 < c12 {
        8
    } else {
        12
    }
}

/// The panel width (`NR`) of `isa`'s micro-kernel at vector length `vector_bits` for a
/// product with `m` rows (0: unknown) and `n` columns, on any CPU: what ahead-of-time
/// packing (`xtask lower`) targets. The same table as the kernels' own tiles (module docs):
/// Generic 16; Neon [`neon_tile_nr`]; SVE2 3·VL/32 (VL 128..512 in steps of 128); SME/SME2
/// 2·SVL/32 (SVL 128, 256, 512). `None` for a vector length the kernels do not have.
pub fn tile_nr(isa: Isa, vector_bits: u32, m: usize, n: usize) -> Option<usize> {
    let vl = vector_bits as usize;
    match isa {
        Isa::Generic => Some(16),
        Isa::Neon => Some(neon_tile_nr(m, n)),
        Isa::Sve2 => matches!(vl, 128 | 256 | 384 | 512).then_some(3 * vl / 32),
        Isa::Sme | Isa::Sme2 => matches!(vl, 128 | 256 | 512).then_some(2 * vl / 32),
    }
}

/// Whether the M = 1 products of [`super::sgemm`] go to the GEMV ([`super::gemv`]): on
/// AArch64 and 32-bit Arm whenever a hand-written kernel is selected.
pub fn gemv_for_single_rows() -> bool {
    cfg!(any(target_arch = "aarch64", target_arch = "arm"))
        && !core::ptr::eq(micro_kernel(), &PORTABLE)
}

/// Whether the GEMV may use the SME2 ZA-array path (SME2 selected and usable).
pub fn gemv_sme2() -> bool {
    #[cfg(target_arch = "aarch64")]
    return selected() == Isa::Sme2 && features().sme2;
    #[cfg(not(target_arch = "aarch64"))]
    false
}

/// The 32-bit Arm Neon + VFPv4 micro-kernel (`4 × 12`), if this CPU supports it.
#[cfg(target_arch = "arm")]
pub fn arm32_neon_vfpv4() -> Option<&'static MicroKernel> {
    /// 0 = not yet detected, 1 = no, 2 = yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    let mut s = HAS.load(Ordering::Relaxed);
    if s == 0 {
        s = if crate::linalg::cpu::arm32_neon_vfpv4() {
            2
        } else {
            1
        };
        HAS.store(s, Ordering::Relaxed);
    }
    (s == 2).then_some(&super::arm32::NEON_VFPV4_4X12)
}

/// The AVX2+FMA micro-kernel (`6 × 16`), if this CPU supports it.
#[cfg(target_arch = "x86_64")]
pub fn avx2_fma() -> Option<&'static MicroKernel> {
    /// 0 = not yet detected, 1 = no, 2 = yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    let mut s = HAS.load(Ordering::Relaxed);
    if s == 0 {
        s = if crate::linalg::cpu::x86_avx2_fma() {
            2
        } else {
            1
        };
        HAS.store(s, Ordering::Relaxed);
    }
    (s == 2).then_some(&super::x86::avx2::AVX2_FMA)
}

/// The AVX-512F micro-kernel (`12 × 32`), if this CPU (and its OS) supports it. Setting
/// `PTERA_NO_AVX512` in the environment (std builds) hides it, to measure the AVX2 kernel.
#[cfg(target_arch = "x86_64")]
pub fn avx512() -> Option<&'static MicroKernel> {
    /// 0 = not yet detected, 1 = no, 2 = yes.
    static HAS: AtomicU8 = AtomicU8::new(0);
    let mut s = HAS.load(Ordering::Relaxed);
    if s == 0 {
        #[cfg(any(test, feature = "std"))]
        let off = std::env::var_os("PTERA_NO_AVX512").is_some();
        #[cfg(not(any(test, feature = "std")))]
        let off = false;
        s = if !off && crate::linalg::cpu::x86_avx512f() {
            2
        } else {
            1
        };
        HAS.store(s, Ordering::Relaxed);
    }
    (s == 2).then_some(&super::x86::avx512::AVX512)
}

/// The micro-kernel [`sgemm_prepacked`](super::sgemm_prepacked) uses for an `m × n × k`
/// product with B packed for tile width `nr` (`None`: no kernel of this ISA has that width),
/// e.g. to pack A for it.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers as detection does, on the first call and after.
    #[test]
    fn kernel_for_remembers_what_detection_found() {
        for isa in Isa::ALL {
            let want = detect_kernel(isa).map(|k| k as *const MicroKernel);
            for _ in 0..2 {
                assert_eq!(
                    kernel_for(isa).map(|k| k as *const MicroKernel),
                    want,
                    "{isa:?}"
                );
            }
            assert_eq!(Isa::from_u8(isa as u8), Some(isa));
        }
        assert_eq!(Isa::from_u8(0), None);
        assert_eq!(Isa::from_u8(6), None);
    }
}
