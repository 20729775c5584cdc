//! Links the firmware for the selected board and points it at the model xtask generated.
//!
//! `PTERA_FW_GEN` names a directory written by `cargo xtask qemu|deploy` holding `config.rs`
//! (sizes from `MethodMeta`), `model.bin` (the .pte, or empty when a loader places it) and
//! `inputs.bin` (input tensors, concatenated).

use std::path::PathBuf;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let linker_dir = manifest.join("../../linker");
    let boards = [
        ("CARGO_FEATURE_QEMU_VIRT", "qemu-virt"),
        ("CARGO_FEATURE_RASPI4B", "raspi4b"),
        ("CARGO_FEATURE_RASPI3B", "raspi3b"),
        ("CARGO_FEATURE_IMX8MP_EVK", "imx8mp-evk"),
    ];
    let chosen: Vec<&str> = boards
        .iter()
        .filter(|(var, _)| std::env::var_os(var).is_some())
        .map(|(_, name)| *name)
        .collect();
    let [board] = chosen.as_slice() else {
        panic!("enable exactly one board feature (qemu-virt, raspi4b, raspi3b, imx8mp-evk); got {chosen:?}");
    };
    println!("cargo:rustc-link-search={}", linker_dir.display());
    println!("cargo:rustc-link-arg-bins=-T{board}.ld");
    println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    for f in [
        "sections.ld",
        "qemu-virt.ld",
        "raspi4b.ld",
        "raspi3b.ld",
        "imx8mp-evk.ld",
    ] {
        println!("cargo:rerun-if-changed={}", linker_dir.join(f).display());
    }

    if std::env::var_os("CARGO_FEATURE_GEMM_BENCH").is_some() {
        // The bench firmware runs no model: no generated files. Its matrices live in the
        // board's bench region, which only qemu-virt describes.
        assert!(
            *board == "qemu-virt",
            "feature gemm-bench is for qemu-virt only (got {board})"
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
