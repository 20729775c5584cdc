//! [`Prepared`]: a call's work decided at load (see `exec::prepared`).

use super::value::{Dynamism, TensorSlot};
use crate::error::KernelError;
use crate::shape::dims_eq;
use crate::tensor::Element;

/// Runs a [`Prepared`] call over the method's tensor table with the method's kernel scratch
/// (at least what the kernel declared): `Ok(true)` when it ran, `Ok(false)` (nothing read or
/// written) when a tensor no longer is what preparing saw, and the call must take the
/// kernel's general path.
pub type PreparedFn = fn(&Prepared, &[TensorSlot], &mut [u8]) -> Result<bool, KernelError>;

/// A call decided at load: the kernel's runner and what it binds. The instruction loop calls
/// `run` instead of the kernel, with no context, argument decoding or per-argument checks;
/// the runner checks only what may change after load (data bound, shapes). A delegate call's
/// record has no runner: it holds the tensors the call binds, which the backend reads through
/// [`KernelCtx::prepared`](super::KernelCtx::prepared) (see [`Backend::prepare_call`](crate::delegate::Backend::prepare_call)).
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    /// The kernel's runner (`None`: a delegate call's bindings).
    pub run: Option<PreparedFn>,
    /// Tensor slots of the call in the kernel's (or backend's) own order (`u32::MAX`: absent).
    pub slots: [u32; 6],
    /// Sizes decided at load (elements, rows, row length: the kernel's own meaning).
    pub sizes: [u32; 4],
    /// One more parameter (an operation code, an epsilon's bits: the kernel's own meaning).
    pub param: u32,
    /// A decision made at load for the team installed then, if any (a product's split:
    /// `linalg::gemm::SplitHint` bits); 0: none, decided as it runs.
    pub hint: u32,
}

impl Prepared {
    /// No slot at this position.
    pub const NO_SLOT: u32 = u32::MAX;

    /// The tensor of slot position `i` and its element count, if it still is a contiguous
    /// tensor of `T`'s dtype and `dims` whose data is bound (or empty) at an address aligned
    /// to `T`, within its capacity: what a runner checks before binding a tensor it was
    /// prepared for.
    #[inline]
    fn typed_slot<'t, T: Element>(
        &self,
        tensors: &'t [TensorSlot],
        i: usize,
        dims: &[usize],
    ) -> Option<(&'t TensorSlot, usize)> {
        let t = tensors.get(*self.slots.get(i)? as usize)?;
        if t.dtype != T::DTYPE || !t.contiguous || !dims_eq(t.shape.dims(), dims) {
            return None;
        }
        let size = core::mem::size_of::<T>();
        let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
        let inside = n.checked_mul(size).is_some_and(|b| b <= t.capacity);
        (n == 0 || (inside && !t.data.is_null() && (t.data as usize).is_multiple_of(size)))
            .then_some((t, n))
    }

    /// The tensor of slot position `i`, if it is a contiguous tensor of `T`'s dtype whose data
    /// holds `n` elements within its capacity at an address aligned to `T` (or `n` is 0).
    #[inline]
    fn counted_slot<'t, T: Element>(
        &self,
        tensors: &'t [TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'t TensorSlot> {
        let t = tensors.get(*self.slots.get(i)? as usize)?;
        let size = core::mem::size_of::<T>();
        let inside = n.checked_mul(size).is_some_and(|b| b <= t.capacity);
        let bound = n == 0 || (!t.data.is_null() && (t.data as usize).is_multiple_of(size));
        (t.dtype == T::DTYPE && t.contiguous && inside && bound).then_some(t)
    }

    /// Slot position `i` as an input of `n` elements of `T`, for a runner that checked the
    /// tensor's shape itself (its element count is `n`): no dims compared here.
    ///
    /// # Safety
    /// As [`Prepared::input`].
    #[inline]
    pub unsafe fn input_counted<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'a [T]> {
        // SAFETY: this function's contract.
        Some(unsafe { read_n(self.counted_slot::<T>(tensors, i, n)?, n) })
    }

    /// [`Prepared::input_counted`] for the call's writable output.
    ///
    /// # Safety
    /// As [`Prepared::output`].
    #[inline]
    pub unsafe fn output_counted<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'a mut [T]> {
        // SAFETY: this function's contract.
        unsafe { write_n(self.counted_slot::<T>(tensors, i, n)?, n) }
    }

    /// The tensor of slot position `i`, if it is a static contiguous tensor of `T` whose data
    /// holds `n` elements within its capacity at an address aligned to `T` (or `n` is 0).
    #[inline]
    fn static_slot<'t, T: Element>(
        &self,
        tensors: &'t [TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'t TensorSlot> {
        let t = tensors.get(*self.slots.get(i)? as usize)?;
        let size = core::mem::size_of::<T>();
        let inside = n.checked_mul(size).is_some_and(|b| b <= t.capacity);
        let bound = n == 0 || (!t.data.is_null() && (t.data as usize).is_multiple_of(size));
        (t.dynamism == Dynamism::Static && t.dtype == T::DTYPE && t.contiguous && inside && bound)
            .then_some(t)
    }

    /// Slot position `i` as an input of `n` elements of `T`, recorded at load, when it is a
    /// static tensor: its byte count cannot change after load (a static tensor is resized
    /// only to shapes of its own size), so neither its shape nor its element count is read.
    /// For a runner whose work depends on the element counts alone (an elementwise map).
    ///
    /// # Safety
    /// As [`Prepared::input`].
    #[inline]
    pub unsafe fn input_static<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'a [T]> {
        // SAFETY: this function's contract.
        Some(unsafe { read_n(self.static_slot::<T>(tensors, i, n)?, n) })
    }

    /// [`Prepared::input_static`] for the call's writable output.
    ///
    /// # Safety
    /// As [`Prepared::output`].
    #[inline]
    pub unsafe fn output_static<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        n: usize,
    ) -> Option<&'a mut [T]> {
        // SAFETY: this function's contract.
        unsafe { write_n(self.static_slot::<T>(tensors, i, n)?, n) }
    }

    /// The tensor of slot position `i` and its byte count, if it is a contiguous tensor whose
    /// data is bound (or empty) within its capacity: the byte view of an identity copy.
    #[inline]
    fn byte_slot<'t>(
        &self,
        tensors: &'t [TensorSlot],
        i: usize,
    ) -> Option<(&'t TensorSlot, usize)> {
        let t = tensors.get(*self.slots.get(i)? as usize)?;
        let n = t
            .shape
            .dims()
            .iter()
            .try_fold(t.dtype.size(), |a, &d| a.checked_mul(d))?;
        (t.contiguous && (n == 0 || (n <= t.capacity && !t.data.is_null()))).then_some((t, n))
    }

    /// Slot position `i`'s bytes as an input (`None`: not a bound contiguous tensor).
    ///
    /// # Safety
    /// As [`Prepared::input`].
    #[inline]
    pub unsafe fn input_bytes<'a>(&self, tensors: &[TensorSlot], i: usize) -> Option<&'a [u8]> {
        let (t, n) = self.byte_slot(tensors, i)?;
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: n bytes of bound storage within the tensor's capacity (checked), readable and
        // not written by the call (this function's contract).
        Some(unsafe { core::slice::from_raw_parts(t.data, n) })
    }

    /// Slot position `i`'s bytes as the call's writable output (`None`: not a bound, writable
    /// contiguous tensor).
    ///
    /// # Safety
    /// As [`Prepared::output`].
    #[inline]
    pub unsafe fn output_bytes<'a>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
    ) -> Option<&'a mut [u8]> {
        let (t, n) = self.byte_slot(tensors, i)?;
        if !t.writable {
            return None;
        }
        if n == 0 {
            return Some(&mut []);
        }
        // SAFETY: as `input_bytes`; the output overlaps no other argument of the call and is
        // bound once (the contract).
        Some(unsafe { core::slice::from_raw_parts_mut(t.data, n) })
    }

    /// Slot position `i` as an input of `T` elements and `dims` (`None`: it no longer is
    /// one).
    ///
    /// # Safety
    /// Called by this record's runner while its call runs: the tensor's data is readable for
    /// the call, and no output of the call overlaps it (proved at load before preparing).
    #[inline]
    pub unsafe fn input<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        dims: &[usize],
    ) -> Option<&'a [T]> {
        let (t, n) = self.typed_slot::<T>(tensors, i, dims)?;
        if n == 0 {
            return Some(&[]);
        }
        // SAFETY: a bound tensor of n elements of T (checked) at an address aligned to T,
        // readable and not written by the call (this function's contract); every bit pattern
        // is a T (`Element`).
        Some(unsafe { core::slice::from_raw_parts(t.data as *const T, n) })
    }

    /// Slot position `i` as a writable output of `T` elements and `dims` (`None`: it no
    /// longer is one).
    ///
    /// # Safety
    /// As [`Prepared::input`]; the call writes this tensor alone among its arguments, and the
    /// runner binds it once.
    #[inline]
    pub unsafe fn output<'a, T: Element>(
        &self,
        tensors: &[TensorSlot],
        i: usize,
        dims: &[usize],
    ) -> Option<&'a mut [T]> {
        let (t, n) = self.typed_slot::<T>(tensors, i, dims)?;
        if !t.writable {
            return None;
        }
        if n == 0 {
            return Some(&mut []);
        }
        // SAFETY: as `input`; the tensor is writable and overlaps no other argument of the
        // call, and this is its only binding while the call runs (the contract).
        Some(unsafe { core::slice::from_raw_parts_mut(t.data as *mut T, n) })
    }
}

/// `n` elements of `T` of a slot checked to hold them (bound, aligned to `T`, within its
/// capacity; or `n` is 0) as an input.
///
/// # Safety
/// As [`Prepared::input`]: the tensor is readable and not written while the call runs.
#[inline]
unsafe fn read_n<'a, T: Element>(t: &TensorSlot, n: usize) -> &'a [T] {
    if n == 0 {
        return &[];
    }
    // SAFETY: n elements of T of bound storage within the tensor's capacity at an address
    // aligned to T (the caller's check), readable and not written by the call (the contract);
    // every bit pattern is a T (`Element`).
    unsafe { core::slice::from_raw_parts(t.data as *const T, n) }
}

/// [`read_n`] for the call's writable output (`None`: the tensor is not writable).
///
/// # Safety
/// As [`Prepared::output`]: the tensor overlaps no other argument of the call, and this is
/// its only binding while the call runs.
#[inline]
unsafe fn write_n<'a, T: Element>(t: &TensorSlot, n: usize) -> Option<&'a mut [T]> {
    if !t.writable {
        return None;
    }
    if n == 0 {
        return Some(&mut []);
    }
    // SAFETY: as `read_n`; writable, and bound once (the contract).
    Some(unsafe { core::slice::from_raw_parts_mut(t.data as *mut T, n) })
}
