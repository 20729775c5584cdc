//! A flatbuffer writer into a caller's buffer, with no heap: objects are written back to front
//! from the end of the buffer, as flatbuffers builders do, and the finished buffer is moved to
//! the front. Only what an ETDump needs: strings, vectors of offsets, tables of scalars and
//! offsets, a size prefix and a file identifier.
//!
//! Positions are counted from the end of the buffer (`rev`): an object written when `rev` was
//! `r` starts at `len - r`. A `uoffset` stored at position `f` to an object at `o` is `f - o`
//! in these terms (objects are always written before what refers to them).

/// The buffer is too small for what is being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// One field of a table.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    I32(i32),
    U32(u32),
    U64(u64),
    /// A reference to an object written before (its `rev`).
    Offset(u32),
}

impl Field {
    fn size(&self) -> usize {
        match self {
            Field::U64(_) => 8,
            _ => 4,
        }
    }
}

/// Most fields one table may have.
const MAX_FIELDS: usize = 16;

pub struct Writer<'b> {
    buf: &'b mut [u8],
    rev: usize,
}

impl<'b> Writer<'b> {
    pub fn new(buf: &'b mut [u8]) -> Writer<'b> {
        Writer { buf, rev: 0 }
    }

    /// Bytes written so far.
    pub fn used(&self) -> usize {
        self.rev
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), Full> {
        let n = bytes.len();
        if self.rev + n > self.buf.len() {
            return Err(Full);
        }
        let at = self.buf.len() - self.rev - n;
        self.buf[at..at + n].copy_from_slice(bytes);
        self.rev += n;
        Ok(())
    }

    fn zeros(&mut self, n: usize) -> Result<(), Full> {
        if self.rev + n > self.buf.len() {
            return Err(Full);
        }
        let at = self.buf.len() - self.rev - n;
        self.buf[at..at + n].fill(0);
        self.rev += n;
        Ok(())
    }

    /// Pads so that after `size` more bytes the position is a multiple of `align`.
    fn align(&mut self, size: usize, align: usize) -> Result<(), Full> {
        let pad = (align - (self.rev + size) % align) % align;
        self.zeros(pad)
    }

    /// A string (length, bytes, NUL); returns its position.
    pub fn string(&mut self, s: &str) -> Result<u32, Full> {
        self.string_of(&[s])
    }

    /// The string made of `parts` one after the other.
    pub fn string_of(&mut self, parts: &[&str]) -> Result<u32, Full> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        self.align(n + 1 + 4, 4)?;
        self.push(&[0])?;
        for p in parts.iter().rev() {
            self.push(p.as_bytes())?;
        }
        self.push(&(n as u32).to_le_bytes())?;
        Ok(self.rev as u32)
    }

    /// A vector of bytes; returns its position.
    pub fn bytes(&mut self, b: &[u8]) -> Result<u32, Full> {
        self.align(b.len() + 4, 4)?;
        self.push(b)?;
        self.push(&(b.len() as u32).to_le_bytes())?;
        Ok(self.rev as u32)
    }

    /// A vector of offsets to objects written before, given by an iterator over their positions
    /// from the LAST element to the first (the writer goes back to front); `n` elements.
    pub fn offsets_rev(
        &mut self,
        n: usize,
        items_last_first: impl Iterator<Item = u32>,
    ) -> Result<u32, Full> {
        self.align(4 * n + 4, 4)?;
        let mut count = 0;
        for target in items_last_first {
            let here = self.rev as u32 + 4;
            self.push(&(here - target).to_le_bytes())?;
            count += 1;
        }
        debug_assert_eq!(count, n);
        self.push(&(count as u32).to_le_bytes())?;
        Ok(self.rev as u32)
    }

    /// Starts a vector of `n` offsets written element by element, last first
    /// ([`Writer::offset_element`]), closed by [`Writer::end_offsets`].
    pub fn begin_offsets(&mut self, n: usize) -> Result<(), Full> {
        self.align(4 * n + 4, 4)
    }

    /// The next element (going back to front) of the vector begun: an offset to `target`.
    pub fn offset_element(&mut self, target: u32) -> Result<(), Full> {
        let here = self.rev as u32 + 4;
        self.push(&(here - target).to_le_bytes())
    }

    /// Closes the vector begun with `n` elements; returns its position.
    pub fn end_offsets(&mut self, n: usize) -> Result<u32, Full> {
        self.push(&(n as u32).to_le_bytes())?;
        Ok(self.rev as u32)
    }

    /// A table with `fields` (vtable slot, value); returns its position.
    pub fn table(&mut self, fields: &[(u16, Field)]) -> Result<u32, Full> {
        if fields.len() > MAX_FIELDS {
            return Err(Full);
        }
        // Largest fields first (no padding between them once aligned).
        let mut order: [usize; MAX_FIELDS] = [0; MAX_FIELDS];
        for (i, o) in order.iter_mut().enumerate().take(fields.len()) {
            *o = i;
        }
        let order = &mut order[..fields.len()];
        order.sort_by_key(|&i| core::cmp::Reverse(fields[i].1.size()));
        // Back to front: the smallest fields are written first (they end up last).
        self.align(0, 8)?;
        let start = self.rev;
        let mut at: [u32; MAX_FIELDS] = [0; MAX_FIELDS];
        for &i in order.iter().rev() {
            let f = fields[i].1;
            self.align(f.size(), f.size())?;
            match f {
                Field::I32(v) => self.push(&v.to_le_bytes())?,
                Field::U32(v) => self.push(&v.to_le_bytes())?,
                Field::U64(v) => self.push(&v.to_le_bytes())?,
                Field::Offset(target) => {
                    let here = self.rev as u32 + 4;
                    self.push(&(here - target).to_le_bytes())?;
                }
            }
            at[i] = self.rev as u32;
        }
        // The table's soffset to its vtable.
        self.align(4, 4)?;
        self.zeros(4)?;
        let table = self.rev;
        let obj_size = (table - start) as u16;
        let slots = fields.iter().map(|f| f.0 + 1).max().unwrap_or(0) as usize;
        // vtable: [vtable bytes, object bytes, field offsets by slot], written last slot first.
        for slot in (0..slots).rev() {
            let off = fields
                .iter()
                .position(|f| f.0 as usize == slot)
                .map_or(0, |i| (table as u32 - at[i]) as u16);
            self.push(&off.to_le_bytes())?;
        }
        self.push(&obj_size.to_le_bytes())?;
        self.push(&((4 + 2 * slots) as u16).to_le_bytes())?;
        let vtable = self.rev;
        let soff = (vtable - table) as i32;
        let pos = self.buf.len() - table;
        self.buf[pos..pos + 4].copy_from_slice(&soff.to_le_bytes());
        Ok(table as u32)
    }

    /// Finishes with root `root`, identifier `ident` and a size prefix, moves the buffer to
    /// the front and returns its length.
    pub fn finish(mut self, root: u32, ident: &[u8; 4]) -> Result<usize, Full> {
        // Size prefix, root offset and identifier: 12 bytes, the whole 8-aligned.
        self.align(12, 8)?;
        self.push(ident)?;
        let here = self.rev as u32 + 4;
        self.push(&(here - root).to_le_bytes())?;
        let size = self.rev as u32;
        self.push(&size.to_le_bytes())?;
        let len = self.rev;
        let from = self.buf.len() - len;
        self.buf.copy_within(from.., 0);
        Ok(len)
    }
}
