//! Writing the `.pte` container (host side, `std`): a finished `Program` flatbuffer plus its
//! segments become one file with the `eh00` extended header, in the layout ExecuTorch's own
//! serializer produces (segments 128-aligned after the flatbuffer, zero padding between).

use std::vec::Vec;

/// Segment alignment in the file (ExecuTorch's default `segment_alignment`).
pub const SEGMENT_ALIGN: usize = 128;

/// Bytes inserted after the flatbuffer's identifier for the extended header: 32, a multiple
/// of the largest `force_align` (16) the schema uses, so internal alignment is preserved.
const HEADER_PAD: usize = 32;

/// Where segment `i` starts, relative to the segment base, when `sizes` are laid out in
/// order at [`SEGMENT_ALIGN`] (what `DataSegment.offset` must say).
pub fn segment_offsets(sizes: &[usize]) -> Vec<u64> {
    let mut at = 0usize;
    sizes
        .iter()
        .map(|&s| {
            let here = at;
            at = (at + s).div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN;
            here as u64
        })
        .collect()
}

/// The file: `flatbuffer` (a finished buffer with root offset and `ET12`) with the extended
/// header spliced in at byte 8, then the segments at the offsets [`segment_offsets`] gives.
/// `flatbuffer` must be at least 8 bytes (any finished flatbuffer is).
pub fn container(flatbuffer: &[u8], segments: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = container_to(&mut out, flatbuffer, segments);
    out
}

/// [`container`] written to `w` piece by piece (nothing is assembled in memory); returns the
/// number of bytes written.
pub fn container_to(
    w: &mut dyn std::io::Write,
    flatbuffer: &[u8],
    segments: &[&[u8]],
) -> std::io::Result<usize> {
    let parts: Vec<[&[u8]; 1]> = segments.iter().map(|s| [*s]).collect();
    let refs: Vec<&[&[u8]]> = parts.iter().map(|p| p.as_slice()).collect();
    container_parts_to(w, flatbuffer, &refs)
}

/// [`container_to`] where each segment is the concatenation of its parts (a segment rebuilt
/// from pieces of the input and new bytes need not be assembled first).
pub fn container_parts_to(
    w: &mut dyn std::io::Write,
    flatbuffer: &[u8],
    segments: &[&[&[u8]]],
) -> std::io::Result<usize> {
    let sizes: Vec<usize> = segments
        .iter()
        .map(|s| s.iter().map(|p| p.len()).sum())
        .collect();
    let offsets = segment_offsets(&sizes);
    let data_size = match (offsets.last(), sizes.last()) {
        (Some(&o), Some(&s)) => o as usize + s,
        _ => 0,
    };
    let program_size = flatbuffer.len() + HEADER_PAD;
    let base = program_size.div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN;
    let mut head = Vec::with_capacity(8 + HEADER_PAD);
    let root = u32::from_le_bytes([flatbuffer[0], flatbuffer[1], flatbuffer[2], flatbuffer[3]])
        + HEADER_PAD as u32;
    head.extend_from_slice(&root.to_le_bytes());
    head.extend_from_slice(&flatbuffer[4..8]);
    head.extend_from_slice(b"eh00");
    head.extend_from_slice(&32u32.to_le_bytes());
    head.extend_from_slice(&(program_size as u64).to_le_bytes());
    head.extend_from_slice(&(base as u64).to_le_bytes());
    head.extend_from_slice(&(data_size as u64).to_le_bytes());
    head.resize(8 + HEADER_PAD, 0);
    w.write_all(&head)?;
    w.write_all(&flatbuffer[8..])?;
    let zeros = [0u8; SEGMENT_ALIGN];
    w.write_all(&zeros[..base - program_size])?;
    let mut at = 0usize;
    for ((parts, &o), &size) in segments.iter().zip(&offsets).zip(&sizes) {
        w.write_all(&zeros[..o as usize - at])?;
        for p in parts.iter() {
            w.write_all(p)?;
        }
        at = o as usize + size;
    }
    Ok(base + data_size)
}
