//! `cargo xtask deploy`: the files a board boots from (flat image, model blob, loader
//! configuration).

use std::fs;
use std::path::PathBuf;

use anyhow::{ensure, Context, Result};

use crate::baremetal::*;

/// `cargo xtask deploy`.
#[derive(clap::Args)]
pub struct DeployArgs {
    pub model: PathBuf,
    /// raspi4b, raspi3b, imx8mp-evk (or qemu-virt).
    #[arg(long)]
    pub board: String,
    /// Directory for the boot files.
    #[arg(long)]
    pub out: PathBuf,
    /// Input .npy files bundled in the image; default: MODEL.inK.npy next to the model.
    #[arg(long = "input")]
    pub inputs: Vec<PathBuf>,
    /// Link the model into the image instead of shipping it as a separate blob.
    #[arg(long)]
    pub link_model: bool,
}

pub fn deploy(args: DeployArgs) -> Result<()> {
    let board = Board::by_name(&args.board)?;
    let job = prepare_any(&args.model, &args.inputs)?;
    let link_model = args.link_model;
    precheck(&job, board, link_model)?;
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let elf_path = args.out.join("ptera-firmware.elf");
    let opts = BuildOptions {
        board,
        link_model,
        semihosting: false,
        shrink_arenas: 0,
        selftest: None,
        cores: 1,
        etdump: None,
        tolerance: (1e-4, 1e-4),
    };
    build_firmware(&job, &opts, &elf_path)?;
    let elf_bytes = fs::read(&elf_path)?;
    let b = budget(&elf_bytes, board)?;
    if let Err(e) = check_fits(&job, &b, board, link_model) {
        let _ = fs::remove_file(&elf_path);
        return Err(e);
    }
    let (flat, base) = elf::flat_image(&elf_bytes, board.image_origin)?;
    ensure!(
        base == board.image_origin,
        "image base {base:#x} is not the board's load address {:#x}",
        board.image_origin
    );
    let files = boards::boot_files(
        board,
        &flat,
        if link_model { None } else { Some(&job.bytes) },
    )?;
    for (name, bytes) in &files {
        fs::write(args.out.join(name), bytes).with_context(|| format!("cannot write {name}"))?;
    }
    print_budget(&job, &b, board, link_model, None);
    println!("wrote to {}:", args.out.display());
    for (name, bytes) in &files {
        println!("  {name} ({} bytes)", bytes.len());
    }
    println!("  ptera-firmware.elf (for debuggers and `cargo xtask` log decoding)");
    Ok(())
}
