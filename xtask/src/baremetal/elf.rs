//! Just enough ELF64 (little-endian) reading for the memory budget and flat boot images.

use anyhow::{bail, ensure, Result};

pub struct Section {
    pub name: String,
    pub addr: u64,
    pub size: u64,
    /// SHF_ALLOC: occupies memory at run time.
    pub alloc: bool,
}

fn u16_at(b: &[u8], off: usize) -> Result<u16> {
    match b.get(off..off + 2) {
        Some(s) => Ok(u16::from_le_bytes([s[0], s[1]])),
        None => bail!("ELF truncated at {off}"),
    }
}

fn u32_at(b: &[u8], off: usize) -> Result<u32> {
    match b.get(off..off + 4) {
        Some(s) => Ok(u32::from_le_bytes(s.try_into().expect("4 bytes"))),
        None => bail!("ELF truncated at {off}"),
    }
}

fn u64_at(b: &[u8], off: usize) -> Result<u64> {
    match b.get(off..off + 8) {
        Some(s) => Ok(u64::from_le_bytes(s.try_into().expect("8 bytes"))),
        None => bail!("ELF truncated at {off}"),
    }
}

fn check_header(b: &[u8]) -> Result<()> {
    ensure!(
        b.len() >= 64 && &b[..4] == b"\x7fELF" && b[4] == 2 && b[5] == 1,
        "not a little-endian ELF64 file"
    );
    Ok(())
}

pub fn sections(b: &[u8]) -> Result<Vec<Section>> {
    check_header(b)?;
    let shoff = u64_at(b, 0x28)? as usize;
    let shentsize = u16_at(b, 0x3a)? as usize;
    let shnum = u16_at(b, 0x3c)? as usize;
    let shstrndx = u16_at(b, 0x3e)? as usize;
    let strtab_off = u64_at(b, shoff + shstrndx * shentsize + 0x18)? as usize;
    let mut out = Vec::new();
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        let name_off = strtab_off + u32_at(b, h)? as usize;
        let name_end = b[name_off..]
            .iter()
            .position(|&c| c == 0)
            .map_or(b.len(), |p| name_off + p);
        out.push(Section {
            name: String::from_utf8_lossy(&b[name_off..name_end]).into_owned(),
            alloc: u64_at(b, h + 0x08)? & 2 != 0,
            addr: u64_at(b, h + 0x10)?,
            size: u64_at(b, h + 0x20)?,
        });
    }
    Ok(out)
}

/// Address of the symbol `name` (from `.symtab`), if the file has it.
pub fn symbol(b: &[u8], name: &str) -> Result<Option<u64>> {
    Ok(functions(b)?.into_iter().find(|f| f.2 == name).map(|f| f.0))
}

/// Every symbol of `.symtab` with its address, size and name (sorted by address).
pub fn functions(b: &[u8]) -> Result<Vec<(u64, u64, String)>> {
    check_header(b)?;
    let mut out = Vec::new();
    let shoff = u64_at(b, 0x28)? as usize;
    let shentsize = u16_at(b, 0x3a)? as usize;
    let shnum = u16_at(b, 0x3c)? as usize;
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        if u32_at(b, h + 0x04)? != 2 {
            continue; // not SHT_SYMTAB
        }
        let (off, size) = (u64_at(b, h + 0x18)? as usize, u64_at(b, h + 0x20)? as usize);
        let link = u32_at(b, h + 0x28)? as usize;
        let str_off = u64_at(b, shoff + link * shentsize + 0x18)? as usize;
        for e in (off..off + size).step_by(24) {
            let n = str_off + u32_at(b, e)? as usize;
            let end = b
                .get(n..)
                .and_then(|t| t.iter().position(|&c| c == 0))
                .map_or(b.len(), |p| n + p);
            let name = String::from_utf8_lossy(b.get(n..end).unwrap_or_default()).into_owned();
            out.push((u64_at(b, e + 8)?, u64_at(b, e + 16)?, name));
        }
    }
    out.sort();
    Ok(out)
}

/// The loadable segments laid out from the lowest physical address (what `objcopy -O binary`
/// gives): returns the bytes and that base address.
pub fn flat_image(b: &[u8]) -> Result<(Vec<u8>, u64)> {
    check_header(b)?;
    let phoff = u64_at(b, 0x20)? as usize;
    let phentsize = u16_at(b, 0x36)? as usize;
    let phnum = u16_at(b, 0x38)? as usize;
    let mut segs = Vec::new();
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        const PT_LOAD: u32 = 1;
        let filesz = u64_at(b, h + 0x20)?;
        if u32_at(b, h)? != PT_LOAD || filesz == 0 {
            continue;
        }
        segs.push((
            u64_at(b, h + 0x18)?,
            u64_at(b, h + 0x08)? as usize,
            filesz as usize,
        ));
    }
    let Some(base) = segs.iter().map(|s| s.0).min() else {
        bail!("ELF has no loadable bytes")
    };
    let end = segs.iter().map(|s| s.0 + s.2 as u64).max().unwrap_or(base);
    let mut img = vec![0u8; (end - base) as usize];
    for (paddr, off, len) in segs {
        let Some(src) = b.get(off..off + len) else {
            bail!("ELF segment outside the file")
        };
        let at = (paddr - base) as usize;
        img[at..at + len].copy_from_slice(src);
    }
    Ok((img, base))
}
