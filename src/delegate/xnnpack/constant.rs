//! Where an XNNPACK constant value's bytes live inside the program: named data by key, the
//! payload's constant region, or the legacy inline buffers.

use super::graph::bad;
use crate::delegate::DelegateInit;
use crate::error::KernelError;
use crate::format::generated::xnnpack::fb_xnnpack as xf;

/// Resolves constant value bytes (named data by key, the payload's constant region, or the
/// legacy inline buffer) and returns their byte offset inside the program file.
pub(super) fn constant_offset(
    init: &DelegateInit<'_>,
    g: &xf::XNNGraph<'_>,
    constants: Option<(usize, usize)>,
    idx: u32,
    nbytes: usize,
    align: usize,
) -> Result<u64, KernelError> {
    let base = init.program.bytes().as_ptr() as usize;
    let bytes: &[u8] = if let Some((c_off, c_len)) = constants {
        let table = g
            .constant_data()
            .ok_or(bad("constant value without constant_data table"))?;
        if idx as usize >= table.len() {
            return Err(KernelError::IndexOutOfBounds {
                arg: 0,
                index: idx as i64,
                size: table.len(),
            });
        }
        let entry = table.get(idx as usize);
        match entry.named_key() {
            Some(key) => {
                let blob = init
                    .program
                    .named_data(key)
                    .ok_or(bad("constant named_key not in the program's named data"))?;
                if (entry.size() as usize) > blob.len() {
                    return Err(bad("constant size exceeds its named data"));
                }
                blob
            }
            None => {
                let (o, s) = (entry.offset(), entry.size());
                if o.checked_add(s).is_none_or(|e| e > c_len as u64) {
                    return Err(bad("constant offset past the end of the constant data"));
                }
                &init.payload[c_off + o as usize..c_off + (o + s) as usize]
            }
        }
    } else {
        let bufs = g
            .constant_buffer()
            .ok_or(bad("constant value without constant buffers"))?;
        if idx as usize >= bufs.len() {
            return Err(KernelError::IndexOutOfBounds {
                arg: 0,
                index: idx as i64,
                size: bufs.len(),
            });
        }
        bufs.get(idx as usize)
            .storage()
            .map_or(&[][..], |s| s.bytes())
    };
    if bytes.len() < nbytes {
        return Err(bad("constant data smaller than its tensor"));
    }
    if !(bytes.as_ptr() as usize).is_multiple_of(align) {
        return Err(bad("constant data not aligned for its element type"));
    }
    Ok((bytes.as_ptr() as usize - base) as u64)
}
