//! The `XH00` header in front of an XnnpackBackend payload.
//!
//! Layout: `[0u8;4] "XH00" u16 header_len(≥30) u32 flatbuffer_offset u32 flatbuffer_size
//! u32 constant_data_offset u64 constant_data_size`. Without the magic the whole payload is a
//! bare `XNNGraph` flatbuffer (legacy).

use crate::error::KernelError;

/// Where the graph flatbuffer and the constant region lie inside the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub flatbuffer: (usize, usize),
    /// Constant region (offset, size); `None` for a bare flatbuffer.
    pub constants: Option<(usize, usize)>,
}

const MAGIC: &[u8; 4] = b"XH00";
const MIN_LEN: usize = 30;

fn bad(detail: &'static str) -> KernelError {
    KernelError::Value { arg: 0, detail }
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

/// Parses and bounds-checks the header.
pub fn parse(payload: &[u8]) -> Result<Layout, KernelError> {
    // Anything shorter cannot hold a flatbuffer's root offset and identifier.
    if payload.len() < 8 {
        return Err(bad("XNNPACK payload shorter than 8 bytes"));
    }
    if &payload[4..8] != MAGIC {
        return Ok(Layout {
            flatbuffer: (0, payload.len()),
            constants: None,
        });
    }
    if payload.len() < MIN_LEN {
        return Err(bad("XNNPACK header truncated"));
    }
    let header_len = u16::from_le_bytes([payload[8], payload[9]]) as usize;
    if header_len < MIN_LEN {
        return Err(bad("XNNPACK header length below 30"));
    }
    let fb_off = u32_at(payload, 10);
    let fb_size = u32_at(payload, 14);
    let c_off = u32_at(payload, 18);
    let mut c = [0u8; 8];
    c.copy_from_slice(&payload[22..30]);
    let c_size = u64::from_le_bytes(c);
    let len = payload.len() as u64;
    if fb_size < 8 || (fb_off as u64) + (fb_size as u64) > len {
        return Err(bad("XNNPACK flatbuffer region out of bounds"));
    }
    if c_off < fb_off + fb_size || (c_off as u64).checked_add(c_size).is_none_or(|e| e > len) {
        return Err(bad("XNNPACK constant region out of bounds"));
    }
    Ok(Layout {
        flatbuffer: (fb_off, fb_size),
        constants: Some((c_off, c_size as usize)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(
        fb_off: u32,
        fb_size: u32,
        c_off: u32,
        c_size: u64,
        total: usize,
    ) -> std::vec::Vec<u8> {
        let mut v = std::vec![0u8; total];
        v[4..8].copy_from_slice(b"XH00");
        v[8..10].copy_from_slice(&30u16.to_le_bytes());
        v[10..14].copy_from_slice(&fb_off.to_le_bytes());
        v[14..18].copy_from_slice(&fb_size.to_le_bytes());
        v[18..22].copy_from_slice(&c_off.to_le_bytes());
        v[22..30].copy_from_slice(&c_size.to_le_bytes());
        v
    }

    #[test]
    fn parses_and_checks_bounds() {
        let v = header(32, 64, 96, 16, 112);
        assert_eq!(
            parse(&v).unwrap(),
            Layout {
                flatbuffer: (32, 64),
                constants: Some((96, 16))
            }
        );
        assert!(parse(&header(32, 64, 96, 17, 112)).is_err());
        assert!(parse(&header(32, 200, 232, 0, 112)).is_err());
        assert!(
            parse(&header(32, 64, 40, 0, 112)).is_err(),
            "constants overlap the flatbuffer"
        );
        assert!(parse(&header(32, 4, 40, 0, 112)).is_err());
        assert!(parse(&v[..20]).is_err());
        let mut bare = std::vec![0u8; 64];
        bare[4..8].copy_from_slice(b"XN01");
        assert_eq!(parse(&bare).unwrap().constants, None);
    }
}
