//! Element conversion between dtypes on little-endian byte buffers (C++ `static_cast`
//! semantics: integers wrap, floats truncate toward zero, bool is `!= 0`), with typed loops for
//! the common pairs. Used by the copy engine's converting copies and by `cat` of mixed dtypes.

use crate::dtype::DType;
use crate::tensor::{read_f64, read_i64, write_f64, write_i64};

fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    a
}

/// Typed conversion loop over little-endian byte runs.
macro_rules! conv_loop {
    ($src:expr, $dst:expr, $S:ty, $D:ty, |$x:ident| $e:expr) => {{
        const SS: usize = core::mem::size_of::<$S>();
        const DS: usize = core::mem::size_of::<$D>();
        for (d, s) in $dst.chunks_exact_mut(DS).zip($src.chunks_exact(SS)) {
            let $x = <$S>::from_le_bytes(arr::<SS>(s));
            let y: $D = $e;
            d.copy_from_slice(&y.to_le_bytes());
        }
    }};
}

/// Element `si` of `src` (dtype `sdt`) converted to `ddt` and stored as element `di` of `dst`
/// (C++ `static_cast` semantics: integers wrap, floats truncate, bool is `!= 0`).
pub(super) fn convert_elem(
    sdt: DType,
    src: &[u8],
    si: usize,
    ddt: DType,
    dst: &mut [u8],
    di: usize,
) {
    if sdt.is_float() || ddt.is_float() {
        if !sdt.is_float() && ddt == DType::F32 {
            // One rounding step (i64 → f32), not two through f64.
            let v = read_i64(sdt, src, si) as f32;
            dst[di * 4..di * 4 + 4].copy_from_slice(&v.to_le_bytes());
        } else {
            write_f64(ddt, dst, di, read_f64(sdt, src, si));
        }
    } else {
        write_i64(ddt, dst, di, read_i64(sdt, src, si));
    }
}

/// Converts a contiguous run of elements (`src` and `dst` hold the same count).
pub(super) fn convert_run(sdt: DType, src: &[u8], ddt: DType, dst: &mut [u8]) {
    use DType::*;
    match (sdt, ddt) {
        _ if sdt == ddt => {
            let n = dst.len().min(src.len());
            dst[..n].copy_from_slice(&src[..n]);
        }
        (I64, F32) => conv_loop!(src, dst, i64, f32, |x| x as f32),
        (I32, F32) => conv_loop!(src, dst, i32, f32, |x| x as f32),
        (Bool, F32) => conv_loop!(src, dst, u8, f32, |x| (x != 0) as u8 as f32),
        (U8, F32) => conv_loop!(src, dst, u8, f32, |x| x as f32),
        (F32, I64) => conv_loop!(src, dst, f32, i64, |x| x as i64),
        (I32, I64) => conv_loop!(src, dst, i32, i64, |x| x as i64),
        (Bool, I64) => conv_loop!(src, dst, u8, i64, |x| (x != 0) as i64),
        (I64, I32) => conv_loop!(src, dst, i64, i32, |x| x as i32),
        (F32, F64) => conv_loop!(src, dst, f32, f64, |x| x as f64),
        (F64, F32) => conv_loop!(src, dst, f64, f32, |x| x as f32),
        (F32, Bool) => conv_loop!(src, dst, f32, u8, |x| (x != 0.0) as u8),
        (I64, Bool) => conv_loop!(src, dst, i64, u8, |x| (x != 0) as u8),
        _ => {
            let n = (dst.len() / ddt.size()).min(src.len() / sdt.size());
            for i in 0..n {
                convert_elem(sdt, src, i, ddt, dst, i);
            }
        }
    }
}
