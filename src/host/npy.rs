//! `.npy` reading (`std` feature): the header of NumPy's array format (versions 1 to 3) and
//! a borrowed view of the element bytes, for host tools. Only little-endian (or byte-sized) plain
//! element types in C order are accepted; which of them a tool runs is the tool's choice. Sizes are checked against the
//! bytes present before anything is used, so a hostile header cannot ask for memory.

use core::fmt;
use std::string::String;
use std::vec::Vec;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A parsed `.npy`: element type, shape and the element bytes (little-endian, C order),
/// borrowed.
#[derive(Debug)]
pub struct Npy<'a> {
    /// The type's kind letter (`f` float, `i` signed, `u` unsigned, `b` bool, ...).
    pub kind: u8,
    /// Bytes per element.
    pub item_size: usize,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

impl Npy<'_> {
    /// The type string in little-endian form (`<f4`; `|u1` for byte-sized types).
    pub fn descr(&self) -> String {
        let order = if self.item_size == 1 { '|' } else { '<' };
        std::format!("{order}{}{}", self.kind as char, self.item_size)
    }
}

/// Why bytes are not a `.npy` ptera can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NpyError {
    /// No `\x93NUMPY` magic.
    NotNpy,
    /// A format version other than 1.0, 2.0, 3.0.
    Version { major: u8, minor: u8 },
    /// Fewer bytes than the header or the data needs.
    Truncated {
        what: &'static str,
        needed: u64,
        len: u64,
    },
    /// The header dictionary is malformed; `at` is the byte offset in the file.
    Header { at: usize, detail: &'static str },
    /// A dtype ptera does not run (structured, big-endian, object, ...).
    UnsupportedDType { descr: String },
    /// Fortran-order arrays are not supported.
    FortranOrder,
    /// The shape's element count times the item size does not fit in 64 bits.
    TooLarge { shape: Vec<u64> },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::NotNpy => write!(f, "not a .npy file (no \\x93NUMPY magic)"),
            NpyError::Version { major, minor } => {
                write!(f, "unsupported .npy format version {major}.{minor}")
            }
            NpyError::Truncated { what, needed, len } => {
                write!(
                    f,
                    "truncated .npy {what}: needs {needed} bytes, file has {len}"
                )
            }
            NpyError::Header { at, detail } => {
                write!(f, "malformed .npy header at byte {at}: {detail}")
            }
            NpyError::UnsupportedDType { descr } => write!(f, "unsupported .npy dtype {descr}"),
            NpyError::FortranOrder => write!(f, "Fortran-order arrays are not supported"),
            NpyError::TooLarge { shape } => {
                write!(
                    f,
                    ".npy shape {shape:?} holds more bytes than fit in 64 bits"
                )
            }
        }
    }
}

impl std::error::Error for NpyError {}

/// The element type of a `.npy` type string: kind letter (`f`, `i`, `u`, `b`, `c`, `V`, ...)
/// and item size in bytes, if little-endian, native (every host ptera runs on is
/// little-endian) or byte-sized; `None` otherwise.
pub fn element_of(descr: &str) -> Option<(u8, usize)> {
    let b = descr.as_bytes();
    if b.len() < 3 || b.len() > 4 || !b[1].is_ascii_alphabetic() {
        return None;
    }
    let size: usize = descr[2..].parse().ok().filter(|&n| (1..=16).contains(&n))?;
    let ok = matches!(b[0], b'<' | b'=') || matches!(b[0], b'|' | b'>') && size == 1;
    ok.then_some((b[1], size))
}

/// One value of the header dictionary.
enum Lit<'h> {
    Str(&'h str),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A cursor over the header text; `base` is the header's offset in the file.
struct Cursor<'h> {
    s: &'h [u8],
    at: usize,
    base: usize,
}

impl<'h> Cursor<'h> {
    fn err(&self, detail: &'static str) -> NpyError {
        NpyError::Header {
            at: self.base + self.at,
            detail,
        }
    }

    fn skip_ws(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8, detail: &'static str) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(detail))
        }
    }

    fn string(&mut self) -> Result<&'h str, NpyError> {
        let q = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.err("expected a quoted string")),
        };
        self.at += 1;
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at] != q {
            if self.s[self.at] == b'\\' {
                return Err(self.err("escapes in strings are not supported"));
            }
            self.at += 1;
        }
        if self.at >= self.s.len() {
            return Err(self.err("unterminated string"));
        }
        let text = core::str::from_utf8(&self.s[start..self.at])
            .map_err(|_| self.err("string is not UTF-8"))?;
        self.at += 1;
        Ok(text)
    }

    fn int(&mut self) -> Result<u64, NpyError> {
        self.skip_ws();
        let start = self.at;
        let mut v: u64 = 0;
        while let Some(&c) = self.s.get(self.at).filter(|c| c.is_ascii_digit()) {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .ok_or(self.err("dimension does not fit in 64 bits"))?;
            self.at += 1;
        }
        if self.at == start {
            return Err(self.err("expected a dimension"));
        }
        // Python 2 long suffix.
        if matches!(self.s.get(self.at), Some(b'L' | b'l')) {
            self.at += 1;
        }
        Ok(v)
    }

    fn literal(&mut self) -> Result<Lit<'h>, NpyError> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Lit::Str(self.string()?)),
            Some(b'(') => {
                self.at += 1;
                let mut dims = Vec::new();
                while !self.eat(b')') {
                    if dims.len() >= 64 {
                        return Err(self.err("more than 64 dimensions"));
                    }
                    dims.push(self.int()?);
                    if !self.eat(b',') && self.peek() != Some(b')') {
                        return Err(self.err("expected ',' or ')' in the shape"));
                    }
                }
                Ok(Lit::Tuple(dims))
            }
            _ => {
                let rest = &self.s[self.at..];
                if rest.starts_with(b"True") {
                    self.at += 4;
                    Ok(Lit::Bool(true))
                } else if rest.starts_with(b"False") {
                    self.at += 5;
                    Ok(Lit::Bool(false))
                } else {
                    Err(self.err("expected a string, a tuple, True or False"))
                }
            }
        }
    }
}

/// Parses a whole `.npy` file held in `bytes`. Bytes after the data are ignored.
pub fn parse(bytes: &[u8]) -> Result<Npy<'_>, NpyError> {
    let len = bytes.len() as u64;
    if bytes.len() < 8 {
        return Err(if bytes.len() >= 6 || !MAGIC.starts_with(bytes) {
            NpyError::NotNpy
        } else {
            NpyError::Truncated {
                what: "preamble",
                needed: 8,
                len,
            }
        });
    }
    if &bytes[..6] != MAGIC {
        return Err(NpyError::NotNpy);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, header_start) = match (major, minor) {
        (1, 0) => {
            let b = bytes.get(8..10).ok_or(NpyError::Truncated {
                what: "header length",
                needed: 10,
                len,
            })?;
            (u16::from_le_bytes([b[0], b[1]]) as usize, 10usize)
        }
        (2 | 3, 0) => {
            let b = bytes.get(8..12).ok_or(NpyError::Truncated {
                what: "header length",
                needed: 12,
                len,
            })?;
            (
                u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize,
                12usize,
            )
        }
        _ => return Err(NpyError::Version { major, minor }),
    };
    let data_start = header_start + header_len;
    let header = bytes
        .get(header_start..data_start)
        .ok_or(NpyError::Truncated {
            what: "header",
            needed: data_start as u64,
            len,
        })?;
    let mut c = Cursor {
        s: header,
        at: 0,
        base: header_start,
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    c.expect(b'{', "expected '{'")?;
    while !c.eat(b'}') {
        let key_at = c.at;
        let key = c.string()?;
        c.expect(b':', "expected ':' after a key")?;
        let value = c.literal()?;
        let slot_err = NpyError::Header {
            at: header_start + key_at,
            detail: "unknown, repeated or wrongly typed key",
        };
        match (key, value) {
            ("descr", Lit::Str(s)) if descr.is_none() => descr = Some(s),
            ("fortran_order", Lit::Bool(b)) if fortran.is_none() => fortran = Some(b),
            ("shape", Lit::Tuple(t)) if shape.is_none() => shape = Some(t),
            _ => return Err(slot_err),
        }
        if !c.eat(b',') && c.peek() != Some(b'}') {
            return Err(c.err("expected ',' or '}'"));
        }
    }
    let missing = |detail| NpyError::Header {
        at: header_start,
        detail,
    };
    let descr = descr.ok_or(missing("no 'descr' key"))?;
    let fortran = fortran.ok_or(missing("no 'fortran_order' key"))?;
    let shape = shape.ok_or(missing("no 'shape' key"))?;
    let (kind, item_size) = element_of(descr).ok_or_else(|| NpyError::UnsupportedDType {
        descr: String::from(descr),
    })?;
    if fortran {
        return Err(NpyError::FortranOrder);
    }
    let nbytes = shape
        .iter()
        .try_fold(item_size as u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| NpyError::TooLarge {
            shape: shape.clone(),
        })?;
    let available = (bytes.len() - data_start) as u64;
    if nbytes > available {
        return Err(NpyError::Truncated {
            what: "data",
            needed: (data_start as u64).saturating_add(nbytes),
            len,
        });
    }
    // nbytes ≤ available, so every dimension and the byte count fit in usize.
    let data = &bytes[data_start..data_start + nbytes as usize];
    Ok(Npy {
        kind,
        item_size,
        shape: shape.iter().map(|&d| d as usize).collect(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(header.len() as u16).to_le_bytes());
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn reads_numpy_headers() {
        let f = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }    \n",
            &[0, 0, 128, 63, 0, 0, 0, 64],
        );
        let n = parse(&f).unwrap();
        assert_eq!(
            (n.descr().as_str(), n.shape.as_slice(), n.data.len()),
            ("<f4", &[2, 1][..], 8)
        );
        let f = file(
            "{'shape': (), 'descr': '|b1', 'fortran_order': False}",
            &[1],
        );
        let n = parse(&f).unwrap();
        assert_eq!((n.descr().as_str(), n.shape.len()), ("|b1", 0));
        let f = file(
            "{\"descr\":\"<i8\",\"fortran_order\":False,\"shape\":(3L,)}",
            &[0; 24],
        );
        assert_eq!(parse(&f).unwrap().shape, [3]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let h = |s: &str| parse(&file(s, &[0; 8])).unwrap_err();
        assert!(matches!(
            h("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}"),
            NpyError::UnsupportedDType { .. }
        ));
        assert_eq!(
            h("{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}"),
            NpyError::FortranOrder
        );
        assert!(matches!(
            h("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"),
            NpyError::Truncated { what: "data", .. }
        ));
        assert!(matches!(
            h("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"),
            NpyError::TooLarge { .. }
        ));
        assert!(matches!(
            h("{'descr': '<f4', 'fortran_order': False}"),
            NpyError::Header { .. }
        ));
        assert!(matches!(
            h("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}"),
            NpyError::Header { .. }
        ));
        assert_eq!(
            parse(b"\x93NUM").unwrap_err(),
            NpyError::Truncated {
                what: "preamble",
                needed: 8,
                len: 4
            }
        );
        assert_eq!(parse(b"PK\x03\x04....").unwrap_err(), NpyError::NotNpy);
    }
}
