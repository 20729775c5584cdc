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
    }
}

pub fn boards(names: bool, json_out: bool) -> Result<()> {
    if names {
        for b in BOARDS {
            println!("{}", b.name);
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
                        "va": k.va, "pa": k.pa, "mem": format!("{:?}", k.mem), "what": k.what,
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
            "  qemu: -M {} (cpu {}), console on serial {}",
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
                Boot::RpiFirmware => "Raspberry Pi firmware (kernel8.img, config.txt)",
                Boot::UBootFatload => "U-Boot (fatload, go)",
            }
        );
        println!("  console {}, {} baud", uart(b.console), b.baud);
        for k in b.blocks {
            println!(
                "  map {:#011x} -> {:#011x} 1 GiB {:?}: {}",
                k.va, k.pa, k.mem, k.what
            );
        }
    }
    Ok(())
}
