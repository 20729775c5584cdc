//! The `.pte` container: file identifier, the `eh00` extended header, the program flatbuffer
//! and its data segments. Everything is read in place from the caller's byte slice and every
//! offset is checked before use; a bad file yields an [`Error`], never a panic.

pub mod bundled;
pub mod generated;
#[cfg(any(test, feature = "std"))]
pub mod write;

use crate::error::{self, Error};
/// ExecuTorch's ETDump profile format (`schema/etdump.fbs`), for reading ETDumps back.
pub use generated::etdump::etdump as etdump_fb;
pub use generated::program::executorch_flatbuffer as fb;
/// ptera's own delegate payload (`schema/ptera.fbs`), written by `xtask lower`.
pub use generated::ptera::ptera_region as region_fb;

/// Alignment the program buffer must have (ExecuTorch's `alignof(max_align_t)`).
pub const PROGRAM_ALIGN: usize = 16;

/// Limits for the flatbuffer verifier. Programs hold a few thousand tables at most.
const VERIFIER: flatbuffers::VerifierOptions = flatbuffers::VerifierOptions {
    max_depth: 64,
    max_tables: 4_000_000,
    max_apparent_size: 1 << 31,
    ignore_missing_null_terminator: false,
};

/// The optional `eh00` header at file offset 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedHeader {
    /// Bytes of the flatbuffer region, from file offset 0.
    pub program_size: u64,
    /// Absolute file offset of segment data (0 = none).
    pub segment_base_offset: u64,
    /// Total bytes of segment data (0 in files from before 1.0).
    pub segment_data_size: u64,
}

impl ExtendedHeader {
    const MAGIC: &'static [u8; 4] = b"eh00";
    const MIN_LEN: u32 = 24;

    /// Parses the header if `data[8..12]` is `eh00`.
    pub fn parse(data: &[u8]) -> Result<Option<ExtendedHeader>, Error> {
        if data.len() < 12 || &data[8..12] != Self::MAGIC {
            return Ok(None);
        }
        let need = |n: usize| {
            if data.len() < n {
                Err(Error::Truncated {
                    what: "extended header",
                    needed: n as u64,
                    len: data.len() as u64,
                })
            } else {
                Ok(())
            }
        };
        need(16)?;
        let len = u32_at(data, 12);
        if len < Self::MIN_LEN {
            return Err(Error::BadHeader {
                detail: "header length below 24",
            });
        }
        need(8 + len.min(32) as usize)?;
        let program_size = u64_at(data, 16);
        let segment_base_offset = u64_at(data, 24);
        let segment_data_size = if len >= 32 { u64_at(data, 32) } else { 0 };
        Ok(Some(ExtendedHeader {
            program_size,
            segment_base_offset,
            segment_data_size,
        }))
    }
}

fn u32_at(d: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[at..at + 8]);
    u64::from_le_bytes(b)
}

/// A loaded, validated program borrowing the file bytes. Weights are never copied.
#[derive(Clone, Copy)]
pub struct Program<'a> {
    data: &'a [u8],
    root: fb::Program<'a>,
    header: Option<ExtendedHeader>,
    /// Absolute offset of segment data.
    segment_base: u64,
}

impl<'a> Program<'a> {
    /// Parses and validates a `.pte` held in `data` (which must be 16-byte aligned).
    ///
    /// Checks the identifier, header, the whole flatbuffer (verifier), every data segment,
    /// the constant segment table, delegate data references and named data.
    pub fn load(data: &'a [u8]) -> Result<Program<'a>, Error> {
        if data.len() < 8 {
            return Err(Error::Truncated {
                what: "file header",
                needed: 8,
                len: data.len() as u64,
            });
        }
        let mut id = [0u8; 4];
        id.copy_from_slice(&data[4..8]);
        if id != *fb::PROGRAM_IDENTIFIER.as_bytes() {
            return Err(Error::BadIdentifier { found: id });
        }
        if !(data.as_ptr() as usize).is_multiple_of(PROGRAM_ALIGN) {
            return Err(Error::MisalignedBuffer {
                address: data.as_ptr() as usize,
            });
        }
        let header = ExtendedHeader::parse(data)?;
        let len = data.len() as u64;
        let (program_size, segment_base) = match header {
            None => (len, len),
            Some(h) => {
                if h.program_size < 16 {
                    return Err(Error::BadHeader {
                        detail: "program_size smaller than the headers",
                    });
                }
                if h.program_size > len {
                    return Err(Error::Truncated {
                        what: "program flatbuffer",
                        needed: h.program_size,
                        len,
                    });
                }
                if h.segment_base_offset != 0 && h.segment_base_offset < h.program_size {
                    return Err(Error::BadHeader {
                        detail: "segment_base_offset inside the flatbuffer",
                    });
                }
                let end = h
                    .segment_base_offset
                    .checked_add(h.segment_data_size)
                    .ok_or(Error::BadHeader {
                        detail: "segment_base_offset + segment_data_size overflows",
                    })?;
                if end > len {
                    return Err(Error::Truncated {
                        what: "segment data",
                        needed: end,
                        len,
                    });
                }
                if h.segment_base_offset == 0 && h.segment_data_size != 0 {
                    return Err(Error::BadHeader {
                        detail: "segment_data_size given without a segment_base_offset",
                    });
                }
                let base = if h.segment_base_offset == 0 {
                    len
                } else {
                    h.segment_base_offset
                };
                (h.program_size, base)
            }
        };
        let fb_bytes = &data[..program_size as usize];
        let root_off = u32_at(fb_bytes, 0) as u64;
        if root_off < 8 || root_off + 4 > program_size {
            return Err(Error::BadHeader {
                detail: "root table offset outside the flatbuffer",
            });
        }
        let root = fb::root_as_program_with_opts(&VERIFIER, fb_bytes).map_err(|e| {
            let mut detail = heapless::String::<160>::new();
            let mut w = TruncWriter(&mut detail);
            let _ = core::fmt::write(&mut w, format_args!("{e}"));
            Error::InvalidFlatbuffer { detail }
        })?;
        let program = Program {
            data,
            root,
            header,
            segment_base,
        };
        program.validate()?;
        Ok(program)
    }

    /// Cross-table checks of the container (segments and everything that points at them).
    fn validate(&self) -> Result<(), Error> {
        let seg_count = self.segment_count();
        for i in 0..seg_count {
            self.segment(i)?;
        }
        let seg_index = |what: &'static str, at: usize, idx: u32| -> Result<(), Error> {
            if (idx as usize) < seg_count {
                Ok(())
            } else {
                Err(Error::IndexOutOfRange {
                    what,
                    at,
                    index: idx as i64,
                    len: seg_count,
                })
            }
        };
        if let Some(cs) = self.root.constant_segment() {
            let has_data = cs.offsets().is_some_and(|o| o.len() > 1);
            if has_data {
                seg_index("constant_segment.segment_index", 0, cs.segment_index())?;
                let seg = self.segment(cs.segment_index() as usize)?;
                for (k, off) in cs.offsets().into_iter().flatten().enumerate() {
                    if off > seg.len() as u64 {
                        return Err(Error::OutOfBounds {
                            what: "constant_segment.offsets",
                            index: k,
                            offset: off,
                            size: 0,
                            limit: seg.len() as u64,
                        });
                    }
                }
                if self.root.constant_buffer().is_some_and(|b| b.len() > 1) {
                    return Err(Error::Invalid {
                        what: "program",
                        index: 0,
                        detail: "both constant_buffer and constant_segment hold constants",
                    });
                }
            }
        }
        for (j, m) in self
            .root
            .mutable_data_segments()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if m.offsets().is_some_and(|o| o.len() > 1) {
                seg_index("mutable_data_segments.segment_index", j, m.segment_index())?;
            }
        }
        for (i, nd) in self.root.named_data().into_iter().flatten().enumerate() {
            if nd.key().is_none() {
                return Err(Error::MissingField {
                    table: "NamedData",
                    field: "key",
                    index: i,
                });
            }
            seg_index("named_data.segment_index", i, nd.segment_index())?;
        }
        let inline_count = self.root.backend_delegate_data().map_or(0, |v| v.len());
        for (p, plan) in self.root.execution_plan().into_iter().flatten().enumerate() {
            for (d, del) in plan.delegates().into_iter().flatten().enumerate() {
                let r = del.processed().ok_or(Error::MissingField {
                    table: "BackendDelegate",
                    field: "processed",
                    index: d,
                })?;
                match r.location() {
                    fb::DataLocation::INLINE => {
                        if r.index() as usize >= inline_count {
                            return Err(Error::IndexOutOfRange {
                                what: "delegate inline data",
                                at: d,
                                index: r.index() as i64,
                                len: inline_count,
                            });
                        }
                    }
                    fb::DataLocation::SEGMENT => seg_index("delegate segment", d, r.index())?,
                    _ => {
                        return Err(Error::Invalid {
                            what: "delegate",
                            index: d,
                            detail: "unknown data location",
                        })
                    }
                }
                let _ = p;
            }
        }
        Ok(())
    }

    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The flatbuffer root (already verified).
    pub fn root(&self) -> fb::Program<'a> {
        self.root
    }

    pub fn header(&self) -> Option<ExtendedHeader> {
        self.header
    }

    pub fn segment_count(&self) -> usize {
        self.root.segments().map_or(0, |s| s.len())
    }

    /// Bytes of segment `index`, bounds-checked against the file and the header's data size.
    pub fn segment(&self, index: usize) -> Result<&'a [u8], Error> {
        let segs = self.root.segments().ok_or(Error::IndexOutOfRange {
            what: "segment",
            at: 0,
            index: index as i64,
            len: 0,
        })?;
        if index >= segs.len() {
            return Err(Error::IndexOutOfRange {
                what: "segment",
                at: 0,
                index: index as i64,
                len: segs.len(),
            });
        }
        let s = segs.get(index);
        // Never past the end of the buffer, whatever the header says.
        let available = (self.data.len() as u64).saturating_sub(self.segment_base);
        let limit = match self.header {
            Some(h) if h.segment_data_size > 0 => h.segment_data_size.min(available),
            _ => available,
        };
        let end = s.offset().checked_add(s.size());
        match end {
            Some(end) if end <= limit => {
                let start = (self.segment_base + s.offset()) as usize;
                Ok(&self.data[start..start + s.size() as usize])
            }
            _ => Err(Error::OutOfBounds {
                what: "segment",
                index,
                offset: s.offset(),
                size: s.size(),
                limit,
            }),
        }
    }

    /// Execution plans (methods).
    pub fn methods(&self) -> impl Iterator<Item = fb::ExecutionPlan<'a>> + 'a {
        self.root.execution_plan().into_iter().flatten()
    }

    /// The execution plan called `name`.
    pub fn method(&self, name: &str) -> Result<fb::ExecutionPlan<'a>, Error> {
        self.methods()
            .find(|p| p.name() == Some(name))
            .ok_or_else(|| Error::MethodNotFound {
                name: error::name(name),
            })
    }

    /// Constant tensor data for `data_buffer_idx` (≥ 1), `nbytes` long, borrowed from the file.
    /// `value` is the EValue index, for error context.
    pub fn constant(&self, buffer_idx: u32, nbytes: u64, value: usize) -> Result<&'a [u8], Error> {
        let (container, off) = self.constant_place(buffer_idx, value)?;
        slice_checked(container, off, nbytes, "constant tensor", value)
    }

    /// The bytes from constant `data_buffer_idx`'s start to the end of the data holding it
    /// (the constant segment, or its legacy buffer): for readers that learn the size later.
    pub fn constant_tail(&self, buffer_idx: u32, value: usize) -> Result<&'a [u8], Error> {
        let (container, off) = self.constant_place(buffer_idx, value)?;
        slice_checked(container, off, 0, "constant tensor", value)?;
        Ok(&container[off as usize..])
    }

    /// The data holding constant `buffer_idx` and the constant's offset in it.
    fn constant_place(&self, buffer_idx: u32, value: usize) -> Result<(&'a [u8], u64), Error> {
        let idx = buffer_idx as usize;
        if let Some(cs) = self
            .root
            .constant_segment()
            .filter(|c| c.offsets().is_some_and(|o| o.len() > 1))
        {
            let offsets = cs.offsets().unwrap_or_default();
            if idx >= offsets.len() {
                return Err(Error::IndexOutOfRange {
                    what: "tensor data_buffer_idx",
                    at: value,
                    index: idx as i64,
                    len: offsets.len(),
                });
            }
            let seg = self.segment(cs.segment_index() as usize)?;
            return Ok((seg, offsets.get(idx)));
        }
        let bufs = self.root.constant_buffer();
        let len = bufs.map_or(0, |b| b.len());
        if idx >= len {
            return Err(Error::IndexOutOfRange {
                what: "tensor data_buffer_idx",
                at: value,
                index: idx as i64,
                len,
            });
        }
        let storage = bufs
            .map(|b| b.get(idx))
            .and_then(|b| b.storage())
            .map_or(&[][..], |s| s.bytes());
        Ok((storage, 0))
    }

    /// Initial bytes of a mutable planned tensor (`mutable_data_segments[0]`, sub-offset `idx`).
    pub fn mutable_initial(
        &self,
        buffer_idx: u32,
        nbytes: u64,
        value: usize,
    ) -> Result<&'a [u8], Error> {
        let m = self
            .root
            .mutable_data_segments()
            .filter(|v| !v.is_empty())
            .map(|v| v.get(0))
            .ok_or(Error::Invalid {
                what: "value",
                index: value,
                detail: "mutable tensor without mutable data segment",
            })?;
        let offsets = m.offsets().unwrap_or_default();
        let idx = buffer_idx as usize;
        if idx >= offsets.len() {
            return Err(Error::IndexOutOfRange {
                what: "mutable tensor data_buffer_idx",
                at: value,
                index: idx as i64,
                len: offsets.len(),
            });
        }
        let seg = self.segment(m.segment_index() as usize)?;
        slice_checked(seg, offsets.get(idx), nbytes, "mutable tensor", value)
    }

    /// Payload of a delegate (inline or in a segment).
    pub fn delegate_data(
        &self,
        r: fb::BackendDelegateDataReference<'a>,
    ) -> Result<&'a [u8], Error> {
        match r.location() {
            fb::DataLocation::SEGMENT => self.segment(r.index() as usize),
            _ => {
                let v = self.root.backend_delegate_data();
                let len = v.map_or(0, |v| v.len());
                let i = r.index() as usize;
                if i >= len {
                    return Err(Error::IndexOutOfRange {
                        what: "delegate inline data",
                        at: 0,
                        index: i as i64,
                        len,
                    });
                }
                Ok(v.map(|v| v.get(i))
                    .and_then(|d| d.data())
                    .map_or(&[][..], |d| d.bytes()))
            }
        }
    }

    /// Named data blob by key (PTE-embedded `named_data`).
    pub fn named_data(&self, key: &str) -> Option<&'a [u8]> {
        let nd = self
            .root
            .named_data()?
            .iter()
            .find(|n| n.key() == Some(key))?;
        self.segment(nd.segment_index() as usize).ok()
    }

    /// Bytes of constant weights held by the file (constant segment or legacy buffers).
    pub fn constant_bytes(&self) -> u64 {
        if let Some(cs) = self
            .root
            .constant_segment()
            .filter(|c| c.offsets().is_some_and(|o| o.len() > 1))
        {
            return self
                .segment(cs.segment_index() as usize)
                .map_or(0, |s| s.len() as u64);
        }
        self.root
            .constant_buffer()
            .into_iter()
            .flatten()
            .map(|b| b.storage().map_or(0, |s| s.len() as u64))
            .sum()
    }
}

fn slice_checked<'a>(
    base: &'a [u8],
    off: u64,
    n: u64,
    what: &'static str,
    value: usize,
) -> Result<&'a [u8], Error> {
    match off.checked_add(n) {
        Some(end) if end <= base.len() as u64 => Ok(&base[off as usize..end as usize]),
        _ => Err(Error::OutOfBounds {
            what,
            index: value,
            offset: off,
            size: n,
            limit: base.len() as u64,
        }),
    }
}

/// `fmt::Write` into a fixed string, dropping what does not fit. Line breaks and tabs (the
/// flatbuffer verifier's error trace has several) become single spaces: a detail is one line.
pub(crate) struct TruncWriter<'s, const N: usize>(pub(crate) &'s mut heapless::String<N>);

impl<const N: usize> core::fmt::Write for TruncWriter<'_, N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for (i, part) in s.split(['\n', '\r', '\t']).enumerate() {
            if i > 0 && !self.0.ends_with(' ') {
                error::push_truncated(self.0, " ");
            }
            error::push_truncated(self.0, part);
        }
        Ok(())
    }
}
