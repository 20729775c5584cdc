//! `cargo xtask boards`: the boards the firmware runs on, from the board table
//! (`boards/boards.rs`): QEMU machine and CPU, image and model windows, console, memory map.

use anyhow::Result;
use serde_json::json;

use crate::baremetal::boards::{Boot, QemuCpu, Uart, BOARDS};

fn cpu(c: QemuCpu) -> String {
    match c {
        QemuCpu::Any { default } => format!("any (default {default})"),
        QemuCpu::Fixed { core } => core.to_string(),
    }
}

fn uart(u: Uart) -> String {
    match u {
        Uart::Pl011 { base, clock_hz: 0 } => format!("PL011 at {base:#x}"),
        Uart::Pl011 { base, clock_hz } => format!("PL011 at {base:#x}, {clock_hz} Hz clock"),
        Uart::Imx { base } => format!("i.MX UART at {base:#x}"),
        Uart::Ns16550 { base, reg_shift } => {
            format!(
                "16550 UART at {base:#x}, registers {} bytes apart",
                1u32 << reg_shift
            )
        }
    }
}

pub fn boards(names: bool, targets: bool, json_out: bool) -> Result<()> {
    if names || targets {
        for b in BOARDS {
            if targets {
                println!("{} {}", b.name, b.target());
            } else {
                println!("{}", b.name);
            }
        }
        return Ok(());
    }
    if json_out {
        let v: Vec<_> = BOARDS
            .iter()
            .map(|b| {
                json!({
                    "name": b.name,
                    "summary": b.summary,
                    "arch": format!("{:?}", b.arch),
                    "target": b.target(),
                    "qemu": b.qemu_binary(),
                    "qemu_machine": b.qemu_machine,
                    "qemu_cpu": cpu(b.qemu_cpu),
                    "image_origin": b.image_origin,
                    "image_len": b.image_len,
                    "model_addr": b.model_addr,
                    "model_window": b.model_window,
                    "console": uart(b.console),
                    "baud": b.baud,
                    "boot": format!("{:?}", b.boot),
                    "blocks": b.blocks.iter().map(|k| json!({
                        "va": k.va, "pa": k.pa, "len": k.len, "mem": format!("{:?}", k.mem), "what": k.what,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for b in BOARDS {
        println!("{}: {}", b.name, b.summary);
        println!(
            "  {:?}, firmware target {}; qemu: {} -M {} (cpu {}), console on serial {}",
            b.arch,
            b.target(),
            b.qemu_binary(),
            b.qemu_machine,
            cpu(b.qemu_cpu),
            b.qemu_serial
        );
        println!(
            "  image {:#x} + {} MiB, model window {:#x} + {} MiB, boot {}",
            b.image_origin,
            b.image_len >> 20,
            b.model_addr,
            b.model_window >> 20,
            match b.boot {
                Boot::QemuLoader => "QEMU -device loader",
                Boot::RpiFirmware => "Raspberry Pi firmware (kernel image, config.txt)",
                Boot::UBootFatload { .. } => "U-Boot (fatload, go)",
            }
        );
        println!("  console {}, {} baud", uart(b.console), b.baud);
        for k in b.blocks {
            let size = if k.len % (1 << 30) == 0 {
                format!("{} GiB", k.len >> 30)
            } else {
                format!("{} MiB", k.len >> 20)
            };
            println!(
                "  map {:#011x} -> {:#011x} {size} {:?}: {}",
                k.va, k.pa, k.mem, k.what
            );
        }
    }
    Ok(())
}
