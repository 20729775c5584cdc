//! Host conveniences (`std` feature): 16-byte aligned buffers, file reading and the `.npy`
//! reader of the host tools.

use std::vec::Vec;

pub mod npy;

/// Sixteen bytes aligned to sixteen on every target (`u128` is only 8-aligned on 32-bit Arm).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Block([u8; 16]);

/// A zero-initialised byte buffer whose start is 16-byte aligned.
pub struct AlignedBuf {
    words: Vec<Block>,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            words: std::vec![Block([0; 16]); len.div_ceil(16)],
            len,
        }
    }

    /// Like [`zeroed`](Self::zeroed), but `None` instead of aborting when the memory cannot
    /// be reserved (sizes come from untrusted files). The memory is requested zeroed from the
    /// allocator, so pages of a large buffer are only committed when first written.
    pub fn try_zeroed(len: usize) -> Option<AlignedBuf> {
        let n = len.div_ceil(16);
        if n == 0 {
            return Some(AlignedBuf {
                words: Vec::new(),
                len,
            });
        }
        let layout = std::alloc::Layout::array::<Block>(n).ok()?;
        // SAFETY: `layout` has a non-zero size (n > 0).
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Block;
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` comes from the global allocator with the layout of `[Block; n]` (what a
        // Vec of capacity n uses), and its n elements are initialised (all-zero is a Block).
        let words = unsafe { Vec::from_raw_parts(p, n, n) };
        Some(AlignedBuf { words, len })
    }

    pub fn from_bytes(bytes: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    /// Reads a whole file into an aligned buffer.
    pub fn read(path: impl AsRef<std::path::Path>) -> std::io::Result<AlignedBuf> {
        use std::io::Read;
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len() as usize;
        let mut b = AlignedBuf::zeroed(len);
        f.read_exact(b.as_mut_slice())?;
        Ok(b)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `words` owns at least `len` initialised bytes (16 per Block), u8 has align 1.
        unsafe { core::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, with exclusive access through &mut self.
        unsafe { core::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
