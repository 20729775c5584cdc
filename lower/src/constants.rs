//! The constant segment rebuilt: some buffers dropped, new ones appended, each 16-byte
//! aligned (ExecuTorch's constant alignment). The result is a list of pieces borrowed from
//! the input segment and from the new buffers, so nothing is copied until it is written.

use std::collections::{BTreeMap, BTreeSet};

/// Zero padding between buffers (at most 15 bytes are ever needed).
static ZEROS: [u8; 16] = [0; 16];

/// Alignment of every buffer in the constant segment.
pub const ALIGN: usize = 16;

/// Offsets of the constant segment's buffers and the extent of each (up to the next buffer
/// or the segment's end).
pub fn buffer_extents(offsets: &[u64], seg_len: usize) -> Vec<(usize, usize)> {
    let mut starts: Vec<u64> = offsets.to_vec();
    starts.sort_unstable();
    starts.dedup();
    offsets
        .iter()
        .map(|&o| {
            let end = starts
                .iter()
                .copied()
                .find(|&s| s > o)
                .map_or(seg_len as u64, |s| s);
            (o as usize, (end.min(seg_len as u64)) as usize)
        })
        .collect()
}

/// A rebuilt constant segment.
pub struct Rebuilt<'a> {
    /// The segment's bytes, in order.
    pub parts: Vec<&'a [u8]>,
    /// New `offsets` table (`[0]` placeholder first).
    pub offsets: Vec<u64>,
    /// Old buffer index → new index, for the buffers kept.
    pub map: BTreeMap<u32, u32>,
    /// Index of each appended buffer.
    pub added: Vec<u32>,
    /// Bytes of the buffers dropped.
    pub removed_bytes: usize,
}

impl Rebuilt<'_> {
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Rebuilds segment `old` (buffer offsets `offsets`, `[0]` placeholder first): buffers in
/// `dropped` go, buffers sharing one offset stay shared, `added` are appended.
pub fn rebuild<'a>(
    old: &'a [u8],
    offsets: &[u64],
    dropped: &BTreeSet<u32>,
    added: &'a [Vec<u8>],
) -> Rebuilt<'a> {
    let extents = buffer_extents(offsets, old.len());
    let mut parts: Vec<&'a [u8]> = Vec::new();
    let mut len = 0usize;
    let mut push = |parts: &mut Vec<&'a [u8]>, bytes: &'a [u8]| -> u64 {
        let pad = len.div_ceil(ALIGN) * ALIGN - len;
        if pad > 0 {
            parts.push(&ZEROS[..pad]);
            len += pad;
        }
        let at = len as u64;
        parts.push(bytes);
        len += bytes.len();
        at
    };
    let mut new_offs = vec![0u64];
    let mut map = BTreeMap::new();
    let mut placed: BTreeMap<usize, u64> = BTreeMap::new();
    let mut removed_bytes = 0usize;
    for (idx, &(s, e)) in extents.iter().enumerate().skip(1) {
        if dropped.contains(&(idx as u32)) {
            removed_bytes += e.saturating_sub(s);
            continue;
        }
        let at = match placed.get(&s) {
            Some(&at) => at,
            None => {
                let at = push(&mut parts, old.get(s..e).unwrap_or_default());
                placed.insert(s, at);
                at
            }
        };
        map.insert(idx as u32, new_offs.len() as u32);
        new_offs.push(at);
    }
    let mut added_idx = Vec::with_capacity(added.len());
    for a in added {
        let at = push(&mut parts, a);
        added_idx.push(new_offs.len() as u32);
        new_offs.push(at);
    }
    Rebuilt {
        parts,
        offsets: new_offs,
        map,
        added: added_idx,
        removed_bytes,
    }
}
