//! Arm (AArch64) GEMM micro-kernels and run-time ISA selection.
//!
//! The driver is [`crate::kernels::gemm`]; this module only supplies micro-kernels that honour
//! its [`MicroKernel`] contract, and decides which one [`gemm::micro_kernel`] returns:
//!
//! | [`Isa`]   | kernel (file)      | tile (`MR × NR`)                                  |
//! |-----------|--------------------|---------------------------------------------------|
//! | `Generic` | `gemm::PORTABLE`   | 4 × 16, plain Rust                                |
//! | `Neon`    | [`neon`]           | 8 × 12, or 8 × 8 when 8 divides n and 12 does not |
//! | `Sve2`    | [`sve`]            | 8 × 3·VL/32 (VL ≤ 512 bits), `asm!`               |
//! | `Sme`     | [`sme`]            | 2·SVL/32 × 2·SVL/32 (SVL ≤ 512), 4 ZA tiles, FMOPA |
//! | `Sme2`    | [`sme`] (same tile, multi-vector loads) | as `Sme`                     |
//!
//! Detection reads the ID registers with `mrs` (`ID_AA64PFR0_EL1.SVE`, `ID_AA64PFR1_EL1.SME`,
//! `ID_AA64ZFR0_EL1.SVEver`, `ID_AA64SMFR0_EL1.{F32F32,SMEver}`). At EL0 under Linux the
//! kernel emulates these reads (and reports only what it enabled); on bare metal
//! (`target_os = "none"`, EL1) the firmware must also have opened the units in `CPACR_EL1`
//! (ZEN, SMEN), which is checked too.
//!
//! [`force`] pins an ISA for tests and benchmarks. With the `std` feature (and in unit tests)
//! the environment variable `PTERA_ISA` (`generic|neon|sve2|sme|sme2`) is honoured on first
//! use, so whole-program tests can be run once per ISA.

use core::sync::atomic::{AtomicU8, Ordering};

use super::gemm::{self, MicroKernel};

#[cfg(target_arch = "aarch64")]
pub mod gemv;
#[cfg(target_arch = "aarch64")]
pub mod neon;
#[cfg(target_arch = "aarch64")]
pub mod sme;
#[cfg(target_arch = "aarch64")]
pub mod sve;
#[cfg(target_arch = "aarch64")]
pub mod vec;

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
        Isa::ALL.into_iter().find(|i| *i as u8 == v)
    }
}

/// CPU features relevant to the kernels, from the ID registers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// FEAT_SVE usable.
    pub sve: bool,
    /// FEAT_SVE2 usable.
    pub sve2: bool,
    /// FEAT_SME usable.
    pub sme: bool,
    /// FEAT_SME2 usable (both `ID_AA64PFR1_EL1.SME ≥ 2` and `ID_AA64SMFR0_EL1.SMEver ≥ 1`).
    pub sme2: bool,
    /// FMOPA fp32 (`ID_AA64SMFR0_EL1.F32F32`).
    pub sme_f32f32: bool,
}

/// Raw ID register values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdRegs {
    pub pfr0: u64,
    pub pfr1: u64,
    pub zfr0: u64,
    pub smfr0: u64,
}

fn field(reg: u64, lsb: u32) -> u64 {
    (reg >> lsb) & 0xf
}

impl IdRegs {
    /// Reads the four ID registers.
    pub fn read() -> IdRegs {
        #[cfg(target_arch = "aarch64")]
        {
            macro_rules! mrs {
                ($r:literal) => {{
                    let v: u64;
                    // SAFETY: reading an ID register has no side effect. The generic
                    // `S3_0_C0_C4_n` names need no assembler extension. At EL1+ the
                    // ID registers are always readable; at EL0 Linux (and qemu-user)
                    // emulate MRS of the ID_AA64* space (HWCAP_CPUID, Linux ≥ 4.11).
                    unsafe {
                        core::arch::asm!(concat!("mrs {}, ", $r), out(reg) v,
                            options(nomem, nostack, preserves_flags))
                    };
                    v
                }};
            }
            IdRegs {
                pfr0: mrs!("S3_0_C0_C4_0"),
                pfr1: mrs!("S3_0_C0_C4_1"),
                zfr0: mrs!("S3_0_C0_C4_4"),
                smfr0: mrs!("S3_0_C0_C4_5"),
            }
        }
        #[cfg(not(target_arch = "aarch64"))]
        IdRegs::default()
    }

    /// Decodes the features (no check that the OS/firmware enabled them).
    pub fn features(&self) -> Features {
        let sve = field(self.pfr0, 32) >= 1;
        let sme_lvl = field(self.pfr1, 24);
        let sme = sme_lvl >= 1;
        let sme_f32f32 = sme && (self.smfr0 >> 32) & 1 == 1;
        Features {
            sve,
            sve2: sve && field(self.zfr0, 0) >= 1,
            sme,
            sme2: sme_lvl >= 2 && field(self.smfr0, 56) >= 1,
            sme_f32f32,
        }
    }
}

/// Bare metal: are SVE and SME instructions enabled at EL1/EL0 in `CPACR_EL1`?
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
fn cpacr_enables() -> (bool, bool) {
    let v: u64;
    // SAFETY: `target_os = "none"` images run at EL1 or above, where CPACR_EL1 is readable;
    // reading it has no side effect.
    unsafe {
        core::arch::asm!("mrs {}, cpacr_el1", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    ((v >> 16) & 3 == 3, (v >> 24) & 3 == 3)
}

/// Features this CPU has and the OS/firmware allows us to use (none off AArch64).
pub fn features() -> Features {
    #[cfg(target_arch = "aarch64")]
    {
        #[allow(unused_mut)]
        let mut f = IdRegs::read().features();
        #[cfg(target_os = "none")]
        {
            let (zen, smen) = cpacr_enables();
            f.sve &= zen;
            f.sve2 &= zen;
            f.sme &= smen;
            f.sme2 &= smen;
            f.sme_f32f32 &= smen;
        }
        f
    }
    #[cfg(not(target_arch = "aarch64"))]
    Features::default()
}

/// Can this CPU run the kernel of `isa` (including vector-length limits)?
pub fn supported(isa: Isa) -> bool {
    kernel_for(isa).is_some()
}

/// The micro-kernel implementing `isa` on this CPU, or `None` if the CPU lacks the feature
/// (or its vector length is outside the kernel's range).
pub fn kernel_for(isa: Isa) -> Option<&'static MicroKernel> {
    match isa {
        Isa::Generic => Some(&gemm::PORTABLE),
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

/// The micro-kernel of [`selected`] (what [`gemm::micro_kernel`] returns on AArch64).
pub fn micro_kernel() -> &'static MicroKernel {
    kernel_for(selected()).unwrap_or(&gemm::PORTABLE)
}

/// The micro-kernel of [`selected`] for an `m × n` product (per-shape choice within the
/// ISA: Neon picks 4 × 16, 8 × 8 or 8 × 12 by row and column padding, [`neon::kernel_for`]).
pub fn micro_kernel_for(m: usize, n: usize) -> &'static MicroKernel {
    #[cfg(target_arch = "aarch64")]
    if selected() == Isa::Neon {
        return neon::kernel_for(m, n);
    }
    let _ = (m, n);
    micro_kernel()
}

/// A micro-kernel of [`selected`] with tile width `nr` (Neon has 8 × 12, 8 × 8 and 4 × 16; the
/// vector-length-agnostic kernels have one width, set by the running vector length).
pub fn kernel_with_nr(nr: usize) -> Option<&'static MicroKernel> {
    #[cfg(target_arch = "aarch64")]
    if selected() == Isa::Neon {
        return [&neon::NEON_8X12, &neon::NEON_8X8, &neon::NEON_4X16]
            .into_iter()
            .find(|uk| uk.nr() == nr);
    }
    Some(micro_kernel()).filter(|uk| uk.nr() == nr)
}

#[cfg(test)]
mod tests;
