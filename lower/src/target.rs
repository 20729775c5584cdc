//! Lowering targets: a CPU name or an ISA spec, mapped to the micro-kernel tile the runtime's
//! kernel selection would pick there (and so the panel width weights are packed for).

use ptera::linalg::gemm::{tile_nr, Isa};

/// What a lowered program is packed for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The spec the user gave (`cortex-a76`, `sve2:256`, ...).
    pub spec: String,
    /// The GEMM kernel family whose tile is targeted.
    pub isa: Isa,
    /// Vector length in bits for SVE2/SME (0 where the tile does not depend on it).
    pub vector_bits: u32,
    /// Name written into the payload (`generic`, `neon`, `sve2`, `sme`, `sme2`, `avx2`).
    pub label: &'static str,
    /// A note for the report (e.g. a kernel the target would want that ptera lacks).
    pub note: Option<&'static str>,
}

/// CPU names and what kernel selection picks on them: (names, ISA, vector bits).
const CPUS: &[(&[&str], Isa, u32)] = &[
    (
        &[
            "cortex-a53",
            "cortex-a55",
            "cortex-a57",
            "cortex-a72",
            "cortex-a73",
            "cortex-a75",
            "cortex-a76",
            "cortex-a77",
            "cortex-a78",
            "cortex-x1",
            "neoverse-n1",
            // SVE without SVE2: ptera's SVE kernels need SVE2.
            "neoverse-v1",
            "a64fx",
        ],
        Isa::Neon,
        128,
    ),
    (
        &[
            "cortex-a510",
            "cortex-a520",
            "cortex-a710",
            "cortex-a715",
            "cortex-a720",
            "cortex-x2",
            "cortex-x3",
            "cortex-x4",
            "neoverse-n2",
            "neoverse-n3",
            "neoverse-v2",
            "neoverse-v3",
        ],
        Isa::Sve2,
        128,
    ),
    // Armv9.2 cores with SME2 (streaming vector length 512 bits).
    (
        &[
            "cortex-x925",
            "c1-ultra",
            "c1-premium",
            "c1-pro",
            "apple-m4",
        ],
        Isa::Sme2,
        512,
    ),
    // QEMU's `max` CPU: SME2 with its default streaming vector length, 256 bits.
    (&["max"], Isa::Sme2, 256),
];

impl Target {
    /// Parses a target: a CPU name from the table above, an ISA spec (`generic`, `neon`,
    /// `sve2[:BITS]`, `sme[:BITS]`, `sme2[:BITS]`; default 128 bits for SVE2 and 512 for SME),
    /// or a host (`x86-64-v3`, `x86-64-v4`, `native`).
    pub fn parse(spec: &str) -> Result<Target, String> {
        let s = spec.trim().to_ascii_lowercase();
        let t = |isa: Isa, bits: u32, label: &'static str, note: Option<&'static str>| Target {
            spec: spec.trim().to_string(),
            isa,
            vector_bits: bits,
            label,
            note,
        };
        if let Some((_, isa, bits)) = CPUS.iter().find(|(n, _, _)| n.contains(&s.as_str())) {
            return Ok(t(*isa, *bits, isa.name(), None));
        }
        match s.as_str() {
            "x86-64-v3" => return Ok(t(Isa::Generic, 0, "avx2", None)),
            "x86-64-v4" => return Ok(t(Isa::Generic, 0, "avx512", None)),
            "native" => return Ok(native(spec.trim())),
            _ => {}
        }
        let (name, bits) = match s.split_once(':') {
            Some((n, b)) => (
                n,
                Some(b.parse::<u32>().map_err(|_| {
                    format!("target `{spec}`: vector length `{b}` is not a number")
                })?),
            ),
            None => (s.as_str(), None),
        };
        let isa = Isa::parse(name).ok_or_else(|| {
            format!(
                "unknown target `{spec}`: give a CPU name (cortex-a53 .. cortex-a76, neoverse-n2, \
                 neoverse-v2, ...), an ISA (generic, neon, sve2:256, sme:512, sme2:512) or \
                 x86-64-v3, x86-64-v4, native"
            )
        })?;
        let bits = match isa {
            Isa::Generic | Isa::Neon => {
                if bits.is_some_and(|b| b != 128) && isa == Isa::Neon {
                    return Err(format!("target `{spec}`: Neon vectors are 128 bits"));
                }
                if isa == Isa::Neon {
                    128
                } else {
                    0
                }
            }
            Isa::Sve2 => bits.unwrap_or(128),
            Isa::Sme | Isa::Sme2 => bits.unwrap_or(512),
        };
        if tile_nr(isa, bits, 0, 1).is_none() {
            return Err(format!(
                "target `{spec}`: ptera has no {} kernel for {bits}-bit vectors",
                isa.name()
            ));
        }
        Ok(t(isa, bits, isa.name(), None))
    }

    /// Whether the target multiplies int8 matrices (FEAT_I8MM `SMMLA`): every Armv9 core
    /// (the SVE2 and SME targets) has it; the Neon targets are taken as Armv8.2 (dot product
    /// only). Its int8 weights are packed `qc8w_p8x8` instead of `qc8w_p4x4`.
    pub fn i8mm(&self) -> bool {
        matches!(self.isa, Isa::Sve2 | Isa::Sme | Isa::Sme2)
    }

    /// The tile width `2S` (`SVL / 16` channels) of the SME2 `SMOPA` int8 tile, for SME2
    /// targets; their int8 weights are packed `qc8w_pNx4` with blocks of that width.
    pub fn smopa_width(&self) -> Option<usize> {
        (self.isa == Isa::Sme2 && self.vector_bits >= 128).then_some(self.vector_bits as usize / 16)
    }

    /// The panel width weights with `n` columns are packed for, read by products of at most
    /// `m` rows (0: unknown).
    pub fn nr(&self, m: usize, n: usize) -> usize {
        match self.label {
            // x86_64 hosts: the AVX-512F kernel is 12 x 32, the AVX2 one 6 x 16.
            "avx512" => 32,
            "avx2" => 16,
            // `parse` only builds targets whose vector length has a kernel.
            _ => tile_nr(self.isa, self.vector_bits, m, n).unwrap_or(16),
        }
    }
}

/// The machine running the lowering: the kernel `ptera` selects here (its tile width gives
/// the vector length).
fn native(spec: &str) -> Target {
    use ptera::linalg::gemm::select;
    let uk = select::micro_kernel();
    let nr = uk.nr() as u32;
    let (isa, label, bits) = if cfg!(target_arch = "x86_64") {
        let label = match nr {
            32 => "avx512",
            _ if !core::ptr::eq(uk, &ptera::linalg::gemm::PORTABLE) => "avx2",
            _ => "generic",
        };
        (Isa::Generic, label, 0)
    } else {
        let isa = select::selected();
        let bits = match isa {
            Isa::Sve2 => nr * 32 / 3,
            Isa::Sme | Isa::Sme2 => nr * 16,
            Isa::Neon => 128,
            Isa::Generic => 0,
        };
        (isa, isa.name(), bits)
    };
    Target {
        spec: spec.to_string(),
        isa,
        vector_bits: bits,
        label,
        note: None,
    }
}
