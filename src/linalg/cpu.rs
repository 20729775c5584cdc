//! CPU feature detection: on x86_64 CPUID (AVX2 + FMA); the AArch64 ID registers (SVE, SVE2, SME, SME2, fp32 FMOPA,
//! the int8 dot product and matrix multiply) and,
//! on bare metal, whether the firmware enabled the units in `CPACR_EL1`. Read by kernel
//! selection (`gemm::select`) and by kernels that size themselves by the vector length.
//!
//! Detection reads the ID registers with `mrs` (`ID_AA64PFR0_EL1.SVE`, `ID_AA64PFR1_EL1.SME`,
//! `ID_AA64ZFR0_EL1.SVEver`, `ID_AA64SMFR0_EL1.{F32F32,SMEver}`, `ID_AA64ISAR0_EL1.DP`,
//! `ID_AA64ISAR1_EL1.I8MM`). At EL0 under Linux the
//! kernel emulates these reads (and reports only what it enabled); on bare metal
//! (`target_os = "none"`, EL1) the firmware must also have opened the units in `CPACR_EL1`
//! (ZEN, SMEN), which is checked too.

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
    /// 4-way `SMOPA` int8 into int32 tiles (`ID_AA64SMFR0_EL1.I8I32 == 0b1111`).
    pub sme_i8i32: bool,
    /// FEAT_DotProd: `SDOT`/`UDOT` (`ID_AA64ISAR0_EL1.DP`).
    pub dotprod: bool,
    /// FEAT_I8MM: `SMMLA` (`ID_AA64ISAR1_EL1.I8MM`).
    pub i8mm: bool,
}

/// Raw ID register values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdRegs {
    pub pfr0: u64,
    pub pfr1: u64,
    pub zfr0: u64,
    pub smfr0: u64,
    pub isar0: u64,
    pub isar1: u64,
}

fn field(reg: u64, lsb: u32) -> u64 {
    (reg >> lsb) & 0xf
}

impl IdRegs {
    /// Reads the six ID registers.
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
                isar0: mrs!("S3_0_C0_C6_0"),
                isar1: mrs!("S3_0_C0_C6_1"),
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
            sme_i8i32: sme && field(self.smfr0, 36) == 0xF,
            dotprod: field(self.isar0, 44) >= 1,
            i8mm: field(self.isar1, 52) >= 1,
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
            f.sme_i8i32 &= smen;
        }
        f
    }
    #[cfg(not(target_arch = "aarch64"))]
    Features::default()
}

/// A CPU feature read from the ID registers once into `cell` (0 unknown, 1 absent, 2
/// present), for checks on every call of a kernel: under Linux each ID-register read traps
/// to the kernel, and on bare metal [`features`] is a dozen `mrs` and the decoding.
#[inline]
pub fn cached(cell: &core::sync::atomic::AtomicU8, read: fn() -> bool) -> bool {
    use core::sync::atomic::Ordering;
    match cell.load(Ordering::Relaxed) {
        0 => {
            let d = read();
            cell.store(1 + d as u8, Ordering::Relaxed);
            d
        }
        v => v == 2,
    }
}

/// FEAT_SME2 usable ([`features`]`().sme2`, [`cached`]).
#[inline]
pub fn has_sme2() -> bool {
    static SME2: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);
    cached(&SME2, || features().sme2)
}

/// # Safety
/// The CPU must support XSAVE/XGETBV (CPUID.1:ECX.OSXSAVE).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: XGETBV with ECX = 0 is valid when the OS enabled XSAVE (caller).
    unsafe { core::arch::x86_64::_xgetbv(0) }
}

/// CPUID/XGETBV detection of AVX2 + FMA with OS support for the YMM state.
#[cfg(target_arch = "x86_64")]
pub fn x86_avx2_fma() -> bool {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
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

/// CPUID/XGETBV detection of AVX-512F (with AVX2 + FMA) and OS support for the opmask and
/// ZMM state.
#[cfg(target_arch = "x86_64")]
pub fn x86_avx512f() -> bool {
    if !x86_avx2_fma() {
        return false;
    }
    // SAFETY: x86_avx2_fma checked CPUID.1:ECX.OSXSAVE, so XGETBV is available.
    let xcr0 = unsafe { xcr0() };
    // Bits 5..7: opmask, ZMM0-15 upper halves, ZMM16-31.
    if xcr0 & 0b1110_0000 != 0b1110_0000 {
        return false;
    }
    let l7 = core::arch::x86_64::__cpuid_count(7, 0);
    l7.ebx & (1 << 16) != 0
}

/// Neon with VFPv4 (fused multiply-add on q registers) on 32-bit Arm: from the Linux auxiliary
/// vector (`AT_HWCAP`: `HWCAP_NEON`, `HWCAP_VFPv4`) on a `std` build; on bare metal
/// (`target_os = "none"`, where the code runs at PL1 with the FPU enabled, as the hard-float
/// ABI needs) from the media and VFP feature registers: MVFR0 says 32 double registers, MVFR1
/// single-precision Neon arithmetic and fused multiply-add (a Cortex-A7 or A15 has them, a
/// Cortex-A9 has Neon without fused multiply-add); elsewhere from the features the image was
/// built for.
#[cfg(target_arch = "arm")]
pub fn arm32_neon_vfpv4() -> bool {
    #[cfg(all(any(test, feature = "std"), target_os = "linux"))]
    {
        const AT_HWCAP: u32 = 16;
        const HWCAP_NEON: u32 = 1 << 12;
        const HWCAP_VFPV4: u32 = 1 << 16;
        // Entries of two native words (type, value), 32 bits each here. Read into a stack
        // buffer: the first GEMM asks, and inference must not allocate.
        use std::io::Read;
        let Ok(mut f) = std::fs::File::open("/proc/self/auxv") else {
            return false;
        };
        let mut buf = [0u8; 512];
        let mut have = 0;
        loop {
            match f.read(&mut buf[have..]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => have += n,
            }
            let whole = have - have % 8;
            for e in buf[..whole].chunks_exact(8) {
                let w = |i: usize| u32::from_ne_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                if w(0) == AT_HWCAP {
                    let h = w(4);
                    return h & HWCAP_NEON != 0 && h & HWCAP_VFPV4 != 0;
                }
                if w(0) == 0 {
                    return false; // AT_NULL: the end
                }
            }
            buf.copy_within(whole..have, 0);
            have -= whole;
        }
    }
    #[cfg(target_os = "none")]
    {
        let (mvfr0, mvfr1): (u32, u32);
        // SAFETY: VMRS of MVFR0/MVFR1 only reads the FP feature registers; bare-metal code runs
        // at PL1 with the FPU enabled (see above), where both are readable.
        unsafe {
            core::arch::asm!(
                ".fpu vfpv3",
                "vmrs {0}, mvfr0",
                "vmrs {1}, mvfr1",
                out(reg) mvfr0,
                out(reg) mvfr1,
                options(nomem, nostack, preserves_flags)
            )
        };
        let d32 = mvfr0 & 0xf == 2;
        let simd_sp = (mvfr1 >> 16) & 0xf != 0;
        let fmac = mvfr1 >> 28 != 0;
        d32 && simd_sp && fmac
    }
    #[cfg(not(any(
        all(any(test, feature = "std"), target_os = "linux"),
        target_os = "none"
    )))]
    {
        cfg!(all(target_feature = "neon", target_feature = "vfp4"))
    }
}
