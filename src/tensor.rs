//! Typed tensor views over program or arena memory, and element conversions.
//!
//! A [`TensorRef`] / [`TensorMut`] is a short-lived view handed to a kernel: dtype, current
//! shape, and a pointer into either the program bytes (constants) or a planned arena.
//! Typed access checks dtype and alignment, so no misaligned `&[f32]` is ever created.

use core::marker::PhantomData;

use crate::dtype::DType;
use crate::error::KernelError;

pub use crate::shape::NdIndex;
pub use crate::shape::{Shape, MAX_RANK};

/// Rust element types that may be viewed in place. Implemented only for plain-old-data types
/// whose every bit pattern is valid (so viewing arbitrary file or arena bytes is sound).
///
/// # Safety
/// Implementors must be `Copy`, have no padding, and accept every bit pattern; `DTYPE` must
/// have `size_of::<Self>()` bytes per element.
pub unsafe trait Element: Copy + 'static {
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:expr),*) => {$(
        // SAFETY: primitive numeric type: no padding, every bit pattern valid, size matches.
        unsafe impl Element for $t { const DTYPE: DType = $d; }
    )*};
}
element!(f32 => DType::F32, f64 => DType::F64, i64 => DType::I64, i32 => DType::I32,
         i16 => DType::I16, i8 => DType::I8, u8 => DType::U8, u16 => DType::U16,
         u32 => DType::U32, u64 => DType::U64);

/// Read-only view of a tensor argument.
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) dim_order: [u8; MAX_RANK],
    pub(crate) data: *const u8,
    pub(crate) arg: usize,
    pub(crate) _life: PhantomData<&'a [u8]>,
}

/// Writable view of an output tensor, already resized to the shape the kernel asked for.
pub struct TensorMut<'a> {
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) data: *mut u8,
    pub(crate) arg: usize,
    pub(crate) _life: PhantomData<&'a mut [u8]>,
}

fn check_view<T: Element>(dtype: DType, data: *const u8, arg: usize) -> Result<(), KernelError> {
    let ok = T::DTYPE == dtype || (dtype == DType::Bool && T::DTYPE == DType::U8);
    if !ok {
        return Err(KernelError::DTypeMismatch {
            arg,
            expected: T::DTYPE,
            got: dtype,
        });
    }
    if !(data as usize).is_multiple_of(core::mem::align_of::<T>()) {
        return Err(KernelError::Misaligned { arg });
    }
    Ok(())
}

impl<'a> TensorRef<'a> {
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }
    /// The memory order of dims, outermost first (`[0, 1, ..]` = contiguous).
    pub fn dim_order(&self) -> &[u8] {
        &self.dim_order[..self.shape.rank()]
    }
    /// Argument position of this tensor in the call (for error context).
    pub fn arg(&self) -> usize {
        self.arg
    }

    /// Typed elements. `Bool` tensors are viewed as `u8` (0 or 1; any nonzero is true).
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T], KernelError> {
        let n = self.numel();
        if n == 0 {
            return Ok(&[]);
        }
        check_view::<T>(self.dtype, self.data, self.arg)?;
        // SAFETY: the executor built this view from a tensor whose data range
        // `data..data + numel * dtype.size()` lies inside the program bytes or a planned arena
        // borrowed for 'a (checked at load and on every resize); `T` has `dtype.size()` bytes,
        // the pointer is non-null and aligned (checked above), and every bit pattern is a valid
        // `T` (`Element` contract). Outputs of the same call never overlap this range
        // (checked by `KernelCtx::output`), so no `&mut` aliases it while the kernel runs.
        Ok(unsafe { core::slice::from_raw_parts(self.data as *const T, n) })
    }

    /// Raw bytes of the tensor (`numel * dtype.size()`).
    pub fn bytes(&self) -> &'a [u8] {
        let n = self.numel() * self.dtype.size();
        if n == 0 {
            return &[];
        }
        // SAFETY: same range argument as `as_slice`; u8 has alignment 1.
        unsafe { core::slice::from_raw_parts(self.data, n) }
    }

    /// Element `i` converted to f64 (any dtype).
    pub fn get_f64(&self, i: usize) -> f64 {
        read_f64(self.dtype, self.bytes(), i)
    }

    /// Element `i` converted to i64 (floats truncate).
    pub fn get_i64(&self, i: usize) -> i64 {
        read_i64(self.dtype, self.bytes(), i)
    }
}

impl<'a> TensorMut<'a> {
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }
    pub fn arg(&self) -> usize {
        self.arg
    }

    /// Typed mutable elements (`Bool` as `u8`; kernels write 0 or 1).
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&'a mut [T], KernelError> {
        let n = self.numel();
        if n == 0 {
            return Ok(&mut []);
        }
        check_view::<T>(self.dtype, self.data, self.arg)?;
        // SAFETY: the executor checked that `data..data + numel * size` lies inside a writable
        // planned arena borrowed mutably for 'a, that it overlaps no input of this call, and
        // `self` is the only view of it (TensorMut is not Clone; this takes &mut self and the
        // view is consumed by one kernel call). Alignment and dtype checked above.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.data as *mut T, n) })
    }

    /// Raw mutable bytes.
    pub fn bytes_mut(&mut self) -> &'a mut [u8] {
        let n = self.numel() * self.dtype.size();
        if n == 0 {
            return &mut [];
        }
        // SAFETY: see `as_mut_slice`; u8 has alignment 1.
        unsafe { core::slice::from_raw_parts_mut(self.data, n) }
    }

    /// Writes element `i` from an f64 (rounding/truncating per dtype; bool = nonzero).
    pub fn set_f64(&mut self, i: usize, v: f64) {
        let dt = self.dtype;
        write_f64(dt, self.bytes_mut(), i, v)
    }

    /// Writes element `i` from an i64.
    pub fn set_i64(&mut self, i: usize, v: i64) {
        let dt = self.dtype;
        write_i64(dt, self.bytes_mut(), i, v)
    }
}

fn le<const N: usize>(b: &[u8], i: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[i * N..i * N + N]);
    a
}

/// Half-precision bits to f32.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // subnormal: normalise
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// f32 to half-precision bits (round to nearest even).
pub fn f32_to_f16(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = (m + half - 1 + ((m >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let mut out = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && out & 1 == 1) {
        out += 1;
    }
    sign | out as u16
}

/// Reads element `i` of a `dtype` byte buffer as f64.
pub fn read_f64(dtype: DType, b: &[u8], i: usize) -> f64 {
    match dtype {
        DType::F32 => f32::from_le_bytes(le(b, i)) as f64,
        DType::F64 => f64::from_le_bytes(le(b, i)),
        DType::F16 => f16_to_f32(u16::from_le_bytes(le(b, i))) as f64,
        DType::BF16 => f32::from_bits((u16::from_le_bytes(le(b, i)) as u32) << 16) as f64,
        DType::Bool => (b[i] != 0) as u8 as f64,
        _ => read_i64(dtype, b, i) as f64,
    }
}

/// Reads element `i` of a `dtype` byte buffer as i64 (floats truncate toward zero).
pub fn read_i64(dtype: DType, b: &[u8], i: usize) -> i64 {
    match dtype {
        DType::U8 => b[i] as i64,
        DType::I8 => b[i] as i8 as i64,
        DType::Bool => (b[i] != 0) as i64,
        DType::I16 => i16::from_le_bytes(le(b, i)) as i64,
        DType::U16 => u16::from_le_bytes(le(b, i)) as i64,
        DType::I32 => i32::from_le_bytes(le(b, i)) as i64,
        DType::U32 => u32::from_le_bytes(le(b, i)) as i64,
        DType::I64 => i64::from_le_bytes(le(b, i)),
        DType::U64 => u64::from_le_bytes(le(b, i)) as i64,
        _ => read_f64(dtype, b, i) as i64,
    }
}

/// Writes an f64 as element `i` of a `dtype` byte buffer.
pub fn write_f64(dtype: DType, b: &mut [u8], i: usize, v: f64) {
    match dtype {
        DType::F32 => b[i * 4..i * 4 + 4].copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes()),
        DType::F16 => b[i * 2..i * 2 + 2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
        DType::BF16 => {
            let bits = (v as f32).to_bits();
            let r = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
            b[i * 2..i * 2 + 2].copy_from_slice(&(r as u16).to_le_bytes())
        }
        DType::Bool => b[i] = (v != 0.0) as u8,
        _ => write_i64(dtype, b, i, v as i64),
    }
}

/// Writes an i64 as element `i` of a `dtype` byte buffer (wrapping like a C cast).
pub fn write_i64(dtype: DType, b: &mut [u8], i: usize, v: i64) {
    match dtype {
        DType::U8 | DType::I8 => b[i] = v as u8,
        DType::Bool => b[i] = (v != 0) as u8,
        DType::I16 | DType::U16 => b[i * 2..i * 2 + 2].copy_from_slice(&(v as u16).to_le_bytes()),
        DType::I32 | DType::U32 => b[i * 4..i * 4 + 4].copy_from_slice(&(v as u32).to_le_bytes()),
        DType::I64 | DType::U64 => b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes()),
        _ => write_f64(dtype, b, i, v as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_round_trip() {
        for v in [
            0.0f32,
            1.0,
            -2.5,
            65504.0,
            6.1035156e-5,
            5.9604645e-8,
            0.33325195,
        ] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert!(f16_to_f32(f32_to_f16(f32::INFINITY)).is_infinite());
    }

    #[test]
    fn conversions() {
        let mut b = [0u8; 16];
        write_f64(DType::I64, &mut b, 1, -3.7);
        assert_eq!(read_i64(DType::I64, &b, 1), -3);
        write_i64(DType::F32, &mut b, 0, 7);
        assert_eq!(read_f64(DType::F32, &b, 0), 7.0);
        write_f64(DType::Bool, &mut b, 3, 0.5);
        assert_eq!(read_i64(DType::Bool, &b, 3), 1);
    }
}
