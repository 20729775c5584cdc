//! The boards xtask knows, from the board table `boards/boards.rs` (the same entries the
//! firmware and its linker script are built from): QEMU command lines and the boot files
//! `deploy` writes.

use anyhow::{bail, Result};

#[path = "../../../boards/boards.rs"]
mod table;

pub use table::{Arch, Board, Boot, QemuCpu, Smp, Uart, BOARDS};

impl Board {
    pub fn by_name(name: &str) -> Result<&'static Board> {
        match table::by_name(name) {
            Some(b) => Ok(b),
            None => {
                let names: Vec<&str> = BOARDS.iter().map(|b| b.name).collect();
                bail!("unknown board `{name}` (boards: {})", names.join(", "))
            }
        }
    }

    /// The QEMU system emulator of the board's architecture: `qemu-system-aarch64` /
    /// `qemu-system-arm` from `PATH`, or the program `PTERA_QEMU_SYSTEM_AARCH64` /
    /// `PTERA_QEMU_SYSTEM_ARM` names (e.g. QEMU 11 for SME2, `scripts/fetch-qemu-system11.sh`).
    pub fn qemu_binary(&self) -> String {
        let (var, name) = match self.arch {
            Arch::Aarch64 => ("PTERA_QEMU_SYSTEM_AARCH64", "qemu-system-aarch64"),
            Arch::Armv7 => ("PTERA_QEMU_SYSTEM_ARM", "qemu-system-arm"),
        };
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| name.to_string())
    }

    /// The Rust target the firmware is built for.
    pub fn target(&self) -> &'static str {
        match self.arch {
            Arch::Aarch64 => "aarch64-unknown-none",
            Arch::Armv7 => "armv7a-none-eabihf",
        }
    }

    /// The `-cpu` to pass, if any.
    pub fn cpu(&self, requested: Option<&str>) -> Result<Option<String>> {
        match (self.qemu_cpu, requested) {
            (QemuCpu::Any { .. }, Some(c)) => Ok(Some(c.to_string())),
            (QemuCpu::Any { default }, None) => Ok(Some(default.to_string())),
            (QemuCpu::Fixed { .. }, None) => Ok(None),
            (QemuCpu::Fixed { core }, Some(c)) if c == core => Ok(None),
            (QemuCpu::Fixed { core }, Some(c)) => bail!(
                "{} has {core} cores; --cpu {c} is not available there",
                self.name
            ),
        }
    }

    pub fn qemu_args(&self, cpu: Option<&str>, machine_opts: Option<&str>) -> Vec<String> {
        let machine = match machine_opts {
            Some(o) => format!("{},{o}", self.qemu_machine),
            None => self.qemu_machine.to_string(),
        };
        let mut v = vec!["-M".to_string(), machine];
        if let Some(c) = cpu {
            v.extend(["-cpu".to_string(), c.to_string()]);
        }
        if let Some(m) = self.qemu_ram {
            v.extend(["-m".to_string(), m.to_string()]);
        }
        v.extend(self.qemu_extra.iter().map(|a| a.to_string()));
        v
    }
}

/// Boot files for `deploy`: the flat image under the name the board's loader expects, the model
/// blob (when not linked in), and the loader configuration.
pub fn boot_files(
    board: &Board,
    image: &[u8],
    blob: Option<&[u8]>,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    match board.boot {
        Boot::RpiFirmware => {
            // The 64-bit firmware boots kernel8.img with `arm_64bit=1`; a Pi 2 boots the 32-bit
            // kernel7.img (in Hyp mode, which the firmware's `_start` leaves).
            let (kernel, mode) = match board.arch {
                Arch::Aarch64 => ("kernel8.img", "arm_64bit=1\n"),
                Arch::Armv7 => ("kernel7.img", "arm_64bit=0\n"),
            };
            files.push((kernel.to_string(), image.to_vec()));
            let mut cfg = format!(
                "# ptera firmware for {} (written by cargo xtask deploy). Copy these files to the\n\
                 # FAT boot partition next to the Raspberry Pi firmware (start*.elf, fixup*.dat).\n\
                 {mode}\
                 kernel={kernel}\n\
                 kernel_address={:#x}\n\
                 # Console: PL011 UART0 on GPIO 14 (TX) / 15 (RX), 115200 8N1, 48 MHz UART clock.\n\
                 enable_uart=1\n\
                 dtoverlay=disable-bt\n\
                 init_uart_clock=48000000\n",
                board.name, board.image_origin
            );
            if blob.is_some() {
                cfg.push_str(&format!(
                    "# The model, read in place by the firmware.\ninitramfs model.pte {:#x}\n",
                    board.model_addr
                ));
            }
            files.push(("config.txt".to_string(), cfg.into_bytes()));
        }
        Boot::UBootFatload { mmc } => {
            files.push(("ptera.bin".to_string(), image.to_vec()));
            let console = format!("{} baud 8N1", board.baud);
            let mut cmds = format!(
                "# U-Boot commands for the {} (written by cargo xtask deploy).\n\
                 # Copy ptera.bin{} to the FAT partition of the SD card (mmc {mmc}), then at the\n\
                 # U-Boot prompt (the board's console UART, {console}):\n\
                 fatload mmc {mmc} {:#x} ptera.bin\n",
                board.summary,
                if blob.is_some() { " and model.pte" } else { "" },
                board.image_origin
            );
            if blob.is_some() {
                cmds.push_str(&format!(
                    "fatload mmc {mmc} {:#x} model.pte\n",
                    board.model_addr
                ));
            }
            cmds.push_str(&format!(
                "dcache flush\nicache flush\ngo {:#x}\n",
                board.image_origin
            ));
            files.push(("boot.cmd".to_string(), cmds.into_bytes()));
        }
        Boot::QemuLoader => {
            files.push(("ptera.bin".to_string(), image.to_vec()));
            let args = board.qemu_args(board.cpu(None)?.as_deref(), None).join(" ");
            let mut cmd = format!(
                "{} {args} -display none -serial stdio \\\n  -device loader,file=ptera.bin,addr={:#x},force-raw=on \\\n  -device loader,addr={:#x},cpu-num=0",
                board.qemu_binary(),
                board.image_origin,
                board.image_origin
            );
            if blob.is_some() {
                cmd.push_str(&format!(
                    " \\\n  -device loader,file=model.pte,addr={:#x},force-raw=on",
                    board.model_addr
                ));
            }
            files.push((
                "run-qemu.sh".to_string(),
                format!("#!/bin/sh\n{cmd}\n").into_bytes(),
            ));
        }
    }
    if let Some(b) = blob {
        files.push(("model.pte".to_string(), b.to_vec()));
    }
    Ok(files)
}
