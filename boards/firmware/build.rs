//! Links the firmware for the board named by `PTERA_BOARD` (its memory region from the board
//! table `boards/boards.rs`, the section layout from `linker/sections.ld`) and points it at
//! the model xtask generated.
//!
//! `PTERA_FW_GEN` names a directory written by `cargo xtask qemu|deploy` holding `config.rs`
//! (sizes from `MethodMeta`), `model.bin` (the .pte, or empty when a loader places it) and
//! `inputs.bin` (input tensors, concatenated).

use std::path::PathBuf;

#[path = "../boards.rs"]
mod table;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let linker_dir = manifest.join("../../linker");
    println!("cargo:rerun-if-env-changed=PTERA_BOARD");
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("../boards.rs").display()
    );
    let names: Vec<&str> = table::BOARDS.iter().map(|b| b.name).collect();
    let name = std::env::var("PTERA_BOARD").unwrap_or_else(|_| {
        panic!("PTERA_BOARD is not set: name one of {names:?} (cargo xtask qemu|deploy sets it)")
    });
    let index = table::BOARDS
        .iter()
        .position(|b| b.name == name)
        .unwrap_or_else(|| panic!("PTERA_BOARD={name}: not in boards/boards.rs {names:?}"));
    let board = &table::BOARDS[index];
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let (want, sections) = match board.arch {
        table::Arch::Aarch64 => ("aarch64", "sections.ld"),
        table::Arch::Armv7 => ("arm", "sections-armv7.ld"),
    };
    assert!(
        arch == want,
        "board {name} is {:?}: build it for that target (cargo xtask does), not {arch}",
        board.arch
    );
    std::fs::write(out.join("board_index.rs"), format!("{index}\n")).expect("write board_index.rs");
    // The image's memory region, then the section layout shared by every board.
    let ld = format!(
        "/* {} ({}): generated from boards/boards.rs by build.rs. */\n\
         MEMORY\n{{\n\timage : ORIGIN = {:#x}, LENGTH = {:#x}\n}}\nINCLUDE {sections}\n",
        board.name, board.summary, board.image_origin, board.image_len
    );
    std::fs::write(out.join("board.ld"), ld).expect("write board.ld");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-search={}", linker_dir.display());
    println!("cargo:rustc-link-arg-bins=-Tboard.ld");
    println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    println!(
        "cargo:rerun-if-changed={}",
        linker_dir.join(sections).display()
    );

    if std::env::var_os("CARGO_FEATURE_GEMM_BENCH").is_some() {
        // The bench firmware runs no model: no generated files. Its matrices live in the
        // board's bench region.
        assert!(
            board.bench_ram.is_some(),
            "feature gemm-bench needs a board with a bench region (got {})",
            board.name
        );
        return;
    }
    println!("cargo:rerun-if-env-changed=PTERA_FW_GEN");
    let gen = std::env::var("PTERA_FW_GEN").unwrap_or_else(|_| {
        panic!("PTERA_FW_GEN is not set: build the firmware through `cargo xtask qemu` or `cargo xtask deploy`")
    });
    for f in ["config.rs", "model.bin", "inputs.bin"] {
        let p = PathBuf::from(&gen).join(f);
        assert!(
            p.is_file(),
            "{} is missing (written by cargo xtask)",
            p.display()
        );
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
