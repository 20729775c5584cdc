//! The boards xtask knows: QEMU machine, memory windows (they match `linker/<board>.ld` and
//! `boards/<board>/board.rs`), console port, and the boot files `deploy` writes.

use anyhow::{bail, Result};

pub struct Board {
    pub name: &'static str,
    pub machine: &'static str,
    /// `None`: the machine has a fixed core and takes no `-cpu`.
    pub default_cpu: Option<&'static str>,
    pub fixed_core: &'static str,
    pub ram: Option<&'static str>,
    /// Where the image is linked and how many bytes it may use (linker MEMORY region `image`).
    pub image_origin: u64,
    pub image_len: u64,
    /// Where a boot loader places a model that is not linked in, and how much room it has.
    pub model_addr: u64,
    pub model_window: u64,
    /// Index of the console UART among QEMU's `-serial` ports.
    pub serial_index: usize,
}

pub const BOARDS: [Board; 4] = [
    Board {
        name: "qemu-virt",
        machine: "virt",
        default_cpu: Some("max"),
        fixed_core: "",
        ram: Some("1G"),
        image_origin: 0x4020_0000,
        image_len: 0x2FE0_0000,
        model_addr: 0x7000_0000,
        model_window: 0x1000_0000,
        serial_index: 0,
    },
    Board {
        name: "raspi4b",
        machine: "raspi4b",
        default_cpu: None,
        fixed_core: "cortex-a72",
        ram: None,
        image_origin: 0x8_0000,
        image_len: 0x2FF8_0000,
        model_addr: 0x3000_0000,
        model_window: 0x0B40_0000,
        serial_index: 0,
    },
    Board {
        name: "raspi3b",
        machine: "raspi3b",
        default_cpu: None,
        fixed_core: "cortex-a53",
        ram: None,
        image_origin: 0x8_0000,
        image_len: 0x2FF8_0000,
        model_addr: 0x3000_0000,
        model_window: 0x0B40_0000,
        serial_index: 0,
    },
    Board {
        name: "imx8mp-evk",
        machine: "imx8mp-evk",
        default_cpu: None,
        fixed_core: "cortex-a53",
        ram: Some("2G"),
        image_origin: 0x4048_0000,
        image_len: 0x3FB8_0000,
        model_addr: 0x8000_0000,
        model_window: 0x4000_0000,
        serial_index: 1,
    },
];

impl Board {
    pub fn by_name(name: &str) -> Result<&'static Board> {
        match BOARDS.iter().find(|b| b.name == name) {
            Some(b) => Ok(b),
            None => {
                let names: Vec<&str> = BOARDS.iter().map(|b| b.name).collect();
                bail!("unknown board `{name}` (boards: {})", names.join(", "))
            }
        }
    }

    /// The `-cpu` to pass, if any.
    pub fn cpu(&self, requested: Option<&str>) -> Result<Option<String>> {
        match (self.default_cpu, requested) {
            (Some(_), Some(c)) => Ok(Some(c.to_string())),
            (Some(d), None) => Ok(Some(d.to_string())),
            (None, None) => Ok(None),
            (None, Some(c)) if c == self.fixed_core => Ok(None),
            (None, Some(c)) => bail!(
                "{} has {} cores; --cpu {c} is not available there",
                self.name,
                self.fixed_core
            ),
        }
    }

    pub fn qemu_args(&self, cpu: Option<&str>, machine_opts: Option<&str>) -> Vec<String> {
        let machine = match machine_opts {
            Some(o) => format!("{},{o}", self.machine),
            None => self.machine.to_string(),
        };
        let mut v = vec!["-M".to_string(), machine];
        if let Some(c) = cpu {
            v.extend(["-cpu".to_string(), c.to_string()]);
        }
        if let Some(m) = self.ram {
            v.extend(["-m".to_string(), m.to_string()]);
        }
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
    match board.name {
        "raspi4b" | "raspi3b" => {
            files.push(("kernel8.img".to_string(), image.to_vec()));
            let mut cfg = format!(
                "# ptera firmware for {} (written by cargo xtask deploy). Copy these files to the\n\
                 # FAT boot partition next to the Raspberry Pi firmware (start*.elf, fixup*.dat).\n\
                 arm_64bit=1\n\
                 kernel=kernel8.img\n\
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
        "imx8mp-evk" => {
            files.push(("ptera.bin".to_string(), image.to_vec()));
            let mut cmds = format!(
                "# U-Boot commands for the i.MX 8M Plus EVK (written by cargo xtask deploy).\n\
                 # Copy ptera.bin{} to the FAT partition of the SD card (mmc 1:1), then at the\n\
                 # U-Boot prompt (console UART2, 115200 8N1):\n\
                 fatload mmc 1:1 {:#x} ptera.bin\n",
                if blob.is_some() { " and model.pte" } else { "" },
                board.image_origin
            );
            if blob.is_some() {
                cmds.push_str(&format!(
                    "fatload mmc 1:1 {:#x} model.pte\n",
                    board.model_addr
                ));
            }
            cmds.push_str(&format!(
                "dcache flush\nicache flush\ngo {:#x}\n",
                board.image_origin
            ));
            files.push(("boot.cmd".to_string(), cmds.into_bytes()));
        }
        _ => {
            files.push(("ptera.bin".to_string(), image.to_vec()));
            let mut cmd = format!(
                "qemu-system-aarch64 -M virt -cpu max -m 1G -display none -serial stdio \\\n  -device loader,file=ptera.bin,addr={:#x},force-raw=on \\\n  -device loader,addr={:#x},cpu-num=0",
                board.image_origin, board.image_origin
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
