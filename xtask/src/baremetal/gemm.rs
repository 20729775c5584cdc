//! `cargo xtask bench gemm --method icount`: one `sgemm` call on the bare-metal firmware's GEMM
//! bench mode (feature `gemm-bench`, boards/firmware/src/gemm_bench.rs) under
//! `qemu-system-aarch64 -M virt -cpu max -icount shift=0,sleep=off`, where CNTVCT counts
//! executed instructions. One firmware build serves every shape: the ISA, shape and vector length
//! travel in a parameter block that QEMU's loader places at the start of the bench region.
//!
//! Code generation: `aarch64-unknown-none` enables `+strict-align` (code that may run with the MMU
//! off must not access memory unaligned), and LLVM then splits every load or store it cannot prove
//! 16-byte aligned (e.g. `vld1q_f32` on an `&[f32]`) into byte accesses: the Neon micro-kernel has
//! 768 `ldrb` under strict-align and none in the Linux build. The firmware runs all Rust code with
//! the MMU on, Normal memory and SCTLR_EL1.A = 0 (aarch64-rt's default), where unaligned accesses
//! are architecturally fine, so the firmware — the model firmware and this bench — is built with
//! `-C target-feature=-strict-align` ([`super::FIRMWARE_RUSTFLAGS`]); the bench, in its own target
//! directory (`target/firmware-bench`), then runs the same instructions as the Linux build the
//! trace method measures. `--strict-align` measures the target's default code generation
//! (`target/firmware-bench-strict`).

use std::fs::{self, File};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use super::{cargo_build_firmware_in, console, root, run_dir, Board};

/// What to measure.
pub struct GemmRequest {
    /// The board whose firmware runs the bench (one with a bench region: `qemu-virt`, or
    /// `qemu-virt-a15` for the 32-bit kernels).
    pub board: &'static str,
    /// `ptera::linalg::gemm::select::Isa` code (1 generic, 2 neon, 3 sve2, 4 sme, 5 sme2).
    pub isa_code: u32,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// SVE / SME vector length in bits; `None`: the firmware's 512.
    pub vl: Option<usize>,
    /// `-cpu` of the virt machine.
    pub cpu: String,
    pub timeout: Duration,
    /// Build with the target's default `+strict-align` (target/firmware-bench-strict) instead
    /// of the firmware's `-strict-align` (target/firmware-bench).
    pub strict_align: bool,
    /// Testing: the firmware damages one entry of C after the call (the run must then fail).
    pub corrupt_c: bool,
    /// B pre-packed for the kernel before the counted call (`sgemm_prepacked`).
    pub prepacked_b: bool,
}

/// What the firmware measured.
pub struct GemmIcount {
    pub vector_bits: u32,
    /// Counter ticks between the two reads around the measured call.
    pub ticks: u64,
    /// Ticks of an empty bracket (two back-to-back counter reads): the reads' own cost.
    pub bracket_ticks: u64,
    /// Ticks around the warm-up call (the first call, same shape).
    pub warmup_ticks: u64,
    pub cntfrq: u64,
    /// Single entries of C compared with f64 dot products, and row (Freivalds) checks.
    pub entries_checked: u32,
    pub rows_checked: u32,
    /// Largest |error| / tolerance over all checks.
    pub worst_error_ratio: f32,
    /// QEMU's wall time for the whole run.
    pub wall: Duration,
}

impl GemmIcount {
    /// Instructions of the `sgemm` call: the ticks between the two counter reads less the empty
    /// bracket's (one tick per instruction at CNTFRQ 1 GHz with `shift=0`).
    pub fn instructions(&self) -> u64 {
        let ticks = self.ticks.saturating_sub(self.bracket_ticks);
        (u128::from(ticks) * 1_000_000_000 / u128::from(self.cntfrq.max(1))) as u64
    }
}

const MAGIC: &[u8; 4] = b"PTGB";

fn params(req: &GemmRequest) -> Result<Vec<u8>> {
    let dim = |d: usize| u32::try_from(d).context("dimension above 2^32");
    let mut b = MAGIC.to_vec();
    for v in [
        1,
        req.isa_code,
        dim(req.m)?,
        dim(req.k)?,
        dim(req.n)?,
        req.vl.map_or(0, |v| v as u32),
        u32::from(req.corrupt_c) | u32::from(req.prepacked_b) << 1,
    ] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    Ok(b)
}

fn parse(payload: &[u8]) -> Result<(u8, [u32; 4], [u64; 3], [u32; 4], f32)> {
    ensure!(
        payload.len() == 1 + 16 + 24 + 16 + 4,
        "GEMM bench packet of {} bytes",
        payload.len()
    );
    let u32_at = |o: usize| u32::from_le_bytes(payload[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(payload[o..o + 8].try_into().unwrap());
    Ok((
        payload[0],
        [u32_at(1), u32_at(5), u32_at(9), u32_at(13)],
        [u64_at(17), u64_at(25), u64_at(33)],
        [u32_at(41), u32_at(45), u32_at(49), u32_at(53)],
        f32::from_le_bytes(payload[57..61].try_into().unwrap()),
    ))
}

/// Builds the bench firmware (once; later calls only check it is up to date) and runs it.
pub fn gemm_icount(req: &GemmRequest) -> Result<GemmIcount> {
    let board = Board::by_name(req.board)?;
    let (bench_addr, _) = board
        .bench_ram
        .context("the bench board has no bench region in boards/boards.rs")?;
    let dir = run_dir()?;
    let elf_path = dir.join("gemm-bench.elf");
    {
        let (fw, rustflags) = if req.strict_align {
            (root().join("target/firmware-bench-strict"), None)
        } else {
            (
                root().join("target/firmware-bench"),
                Some(super::FIRMWARE_RUSTFLAGS),
            )
        };
        fs::create_dir_all(&fw)?;
        let lock = File::create(fw.join("build.lock"))?;
        #[allow(clippy::incompatible_msrv)] // the toolchain is pinned (rust-toolchain.toml)
        lock.lock()
            .with_context(|| format!("cannot lock {}/build.lock", fw.display()))?;
        cargo_build_firmware_in(&fw, board, "semihosting,gemm-bench", None, rustflags)?;
        let elf = super::firmware_elf(&fw, board);
        fs::copy(&elf, &elf_path).with_context(|| format!("cannot copy {}", elf.display()))?;
    }
    let param_path = dir.join("params.bin");
    fs::write(&param_path, params(req)?)?;
    let uart = dir.join("uart.bin");
    let mut cmd = Command::new(board.qemu_binary());
    cmd.args(board.qemu_args(Some(&req.cpu), None))
        .args(["-display", "none", "-monitor", "none"])
        .args(["-semihosting-config", "enable=on,target=native"])
        .args(["-icount", "shift=0,sleep=off"])
        .arg("-serial")
        .arg(format!("file:{}", uart.display()))
        .arg("-device")
        .arg(format!(
            "loader,file={},addr={:#x},force-raw=on",
            param_path.display(),
            bench_addr
        ))
        .arg("-kernel")
        .arg(&elf_path)
        .stdin(Stdio::null());
    let t0 = Instant::now();
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "cannot start {} (run scripts/setup-qemu.sh)",
            board.qemu_binary()
        )
    })?;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if t0.elapsed() > req.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall = t0.elapsed();
    let elf_bytes = fs::read(&elf_path)?;
    let stream = fs::read(&uart).unwrap_or_default();
    let run = console::decode(&stream, &elf_bytes)?;
    for line in run.log.iter().chain(&run.text) {
        eprintln!("[fw] {line}");
    }
    let Some(status) = status else {
        bail!(
            "QEMU timed out after {} s [run files in {}]",
            req.timeout.as_secs(),
            dir.display()
        );
    };
    let Some(report) = &run.report else {
        bail!(
            "the bench firmware stopped without a report (QEMU {status}): {} [run files in {}]",
            run.summary(),
            dir.display()
        );
    };
    if report.status != 0 || !status.success() {
        bail!(
            "the GEMM bench failed (status {}): {} [run files in {}]",
            report.status,
            run.summary(),
            dir.display()
        );
    }
    let payload = run
        .bench
        .as_deref()
        .context("the bench firmware sent no BENCH packet")?;
    let (isa_code, [m, k, n, vector_bits], [ticks, bracket, warm], checks, worst) = parse(payload)?;
    ensure!(
        (m as usize, k as usize, n as usize) == (req.m, req.k, req.n),
        "the firmware measured {m}x{k}x{n}, not the requested shape"
    );
    ensure!(
        isa_code as u32 == req.isa_code,
        "the firmware ran ISA code {isa_code}, not {}",
        req.isa_code
    );
    let [entries, bad_entries, rows, bad_rows] = checks;
    ensure!(
        bad_entries == 0 && bad_rows == 0 && entries > 0 && rows as usize == req.m,
        "C is wrong: {bad_entries} of {entries} entries, {bad_rows} of {rows} rows"
    );
    let _ = fs::remove_dir_all(&dir);
    Ok(GemmIcount {
        vector_bits,
        ticks,
        bracket_ticks: bracket,
        warmup_ticks: warm,
        cntfrq: report.cntfrq,
        entries_checked: entries,
        rows_checked: rows,
        worst_error_ratio: worst,
        wall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_block_layout() {
        let req = GemmRequest {
            board: "qemu-virt",
            isa_code: 4,
            m: 128,
            k: 768,
            n: 50257,
            vl: Some(512),
            cpu: "max".into(),
            timeout: Duration::from_secs(1),
            strict_align: false,
            corrupt_c: true,
            prepacked_b: true,
        };
        let b = params(&req).unwrap();
        assert_eq!(&b[..4], b"PTGB");
        let words: Vec<u32> = b[4..]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [1, 4, 128, 768, 50257, 512, 3]);
    }

    #[test]
    fn bench_packet_fields() {
        let mut p = vec![3u8];
        for v in [32u32, 64, 48, 256] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        for t in [1000u64, 5, 1003] {
            p.extend_from_slice(&t.to_le_bytes());
        }
        for v in [52u32, 0, 32, 0] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(&0.5f32.to_le_bytes());
        let (isa, dims, ticks, checks, worst) = parse(&p).unwrap();
        assert_eq!(
            (isa, dims, ticks, checks, worst),
            (3, [32, 64, 48, 256], [1000, 5, 1003], [52, 0, 32, 0], 0.5)
        );
        assert!(parse(&p[..p.len() - 1]).is_err());
        let r = GemmIcount {
            vector_bits: 256,
            ticks: 1000,
            bracket_ticks: 5,
            warmup_ticks: 1003,
            cntfrq: 1_000_000_000,
            entries_checked: 52,
            rows_checked: 32,
            worst_error_ratio: 0.5,
            wall: Duration::ZERO,
        };
        assert_eq!(r.instructions(), 995);
    }
}
