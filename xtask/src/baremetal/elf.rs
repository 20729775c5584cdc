//! Just enough ELF reading (little-endian; ELF64 for the AArch64 firmware, ELF32 for the ARMv7
//! one) for the memory budget, symbols and flat boot images.

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
        Some(s) => Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]])),
        None => bail!("ELF truncated at {off}"),
    }
}

fn u64_at(b: &[u8], off: usize) -> Result<u64> {
    match b.get(off..off + 8) {
        Some(s) => {
            let mut w = [0u8; 8];
            w.copy_from_slice(s);
            Ok(u64::from_le_bytes(w))
        }
        None => bail!("ELF truncated at {off}"),
    }
}

/// Field offsets of one ELF class: (header, section header, symbol, program header).
struct Class {
    wide: bool,
    e_phoff: usize,
    e_shoff: usize,
    e_phentsize: usize,
    sh_flags: usize,
    sh_addr: usize,
    sh_offset: usize,
    sh_size: usize,
    sh_link: usize,
    sym_value: usize,
    sym_size: usize,
    sym_len: usize,
    p_offset: usize,
    p_paddr: usize,
    p_filesz: usize,
}

const ELF64: Class = Class {
    wide: true,
    e_phoff: 0x20,
    e_shoff: 0x28,
    e_phentsize: 0x36,
    sh_flags: 0x08,
    sh_addr: 0x10,
    sh_offset: 0x18,
    sh_size: 0x20,
    sh_link: 0x28,
    sym_value: 8,
    sym_size: 16,
    sym_len: 24,
    p_offset: 0x08,
    p_paddr: 0x18,
    p_filesz: 0x20,
};

const ELF32: Class = Class {
    wide: false,
    e_phoff: 0x1c,
    e_shoff: 0x20,
    e_phentsize: 0x2a,
    sh_flags: 0x08,
    sh_addr: 0x0c,
    sh_offset: 0x10,
    sh_size: 0x14,
    sh_link: 0x18,
    sym_value: 4,
    sym_size: 8,
    sym_len: 16,
    p_offset: 0x04,
    p_paddr: 0x0c,
    p_filesz: 0x10,
};

impl Class {
    /// An address, offset or size: 8 bytes in ELF64, 4 in ELF32.
    fn word(&self, b: &[u8], off: usize) -> Result<u64> {
        if self.wide {
            u64_at(b, off)
        } else {
            u32_at(b, off).map(u64::from)
        }
    }

    /// (e_shoff, e_shentsize, e_shnum, e_shstrndx): the 16-bit fields follow e_phentsize.
    fn section_table(&self, b: &[u8]) -> Result<(usize, usize, usize, usize)> {
        Ok((
            self.word(b, self.e_shoff)? as usize,
            u16_at(b, self.e_phentsize + 4)? as usize,
            u16_at(b, self.e_phentsize + 6)? as usize,
            u16_at(b, self.e_phentsize + 8)? as usize,
        ))
    }
}

fn class(b: &[u8]) -> Result<&'static Class> {
    ensure!(
        b.len() >= 52 && &b[..4] == b"\x7fELF" && b[5] == 1,
        "not a little-endian ELF file"
    );
    match b[4] {
        1 => Ok(&ELF32),
        2 if b.len() >= 64 => Ok(&ELF64),
        c => bail!("ELF class {c}: neither ELF32 nor ELF64"),
    }
}

/// The NUL-terminated string at `off`.
fn string_at(b: &[u8], off: usize) -> String {
    let tail = b.get(off..).unwrap_or_default();
    let end = tail.iter().position(|&c| c == 0).unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

pub fn sections(b: &[u8]) -> Result<Vec<Section>> {
    let c = class(b)?;
    let (shoff, shentsize, shnum, shstrndx) = c.section_table(b)?;
    let strtab_off = c.word(b, shoff + shstrndx * shentsize + c.sh_offset)? as usize;
    let mut out = Vec::new();
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        out.push(Section {
            name: string_at(b, strtab_off + u32_at(b, h)? as usize),
            alloc: c.word(b, h + c.sh_flags)? & 2 != 0,
            addr: c.word(b, h + c.sh_addr)?,
            size: c.word(b, h + c.sh_size)?,
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
    let c = class(b)?;
    let (shoff, shentsize, shnum, _) = c.section_table(b)?;
    let mut out = Vec::new();
    for i in 0..shnum {
        let h = shoff + i * shentsize;
        if u32_at(b, h + 0x04)? != 2 {
            continue; // not SHT_SYMTAB
        }
        let off = c.word(b, h + c.sh_offset)? as usize;
        let size = c.word(b, h + c.sh_size)? as usize;
        let link = u32_at(b, h + c.sh_link)? as usize;
        let str_off = c.word(b, shoff + link * shentsize + c.sh_offset)? as usize;
        for e in (off..off + size).step_by(c.sym_len) {
            let name = string_at(b, str_off + u32_at(b, e)? as usize);
            out.push((
                c.word(b, e + c.sym_value)?,
                c.word(b, e + c.sym_size)?,
                name,
            ));
        }
    }
    out.sort();
    Ok(out)
}

/// The loadable segments at or above `origin` laid out from the lowest physical address (what
/// `objcopy -O binary` gives): returns the bytes and that base address. The firmware's linker
/// scripts place nothing below the board's image origin; a segment there holds only the ELF's
/// own headers (the linker maps them when the origin leaves room below it, as 0x8000 does), which
/// no boot loader wants in a flat image.
pub fn flat_image(b: &[u8], origin: u64) -> Result<(Vec<u8>, u64)> {
    let c = class(b)?;
    let phoff = c.word(b, c.e_phoff)? as usize;
    let phentsize = u16_at(b, c.e_phentsize)? as usize;
    let phnum = u16_at(b, c.e_phentsize + 2)? as usize;
    let mut segs = Vec::new();
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        const PT_LOAD: u32 = 1;
        let filesz = c.word(b, h + c.p_filesz)?;
        let paddr = c.word(b, h + c.p_paddr)?;
        if u32_at(b, h)? != PT_LOAD || filesz == 0 || paddr + filesz <= origin {
            continue;
        }
        segs.push((paddr, c.word(b, h + c.p_offset)? as usize, filesz as usize));
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
