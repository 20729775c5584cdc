//! The metadata buffer: the one place that decides what the runtime tables of a method are and
//! in which order they sit in the caller's buffer.
//!
//! [`Tables::carve`] is run twice with the same [`Counts`]: by `MethodMeta` with a counting
//! [`Bump`] (which only adds up sizes) to report `metadata_bytes`, and by `Method::load` with
//! the caller's buffer. Both therefore agree by construction.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};

use crate::delegate::DelegateSlot;
use crate::dtype::DType;
use crate::error::Error;
use crate::error::KernelError;
use crate::format::{fb, Program};
use crate::kernel_api::{Dynamism, KernelCtx, KernelFn, PrepareFn, TensorSlot, Value};
use crate::shape::{Shape, MAX_RANK};

/// Alignment of arenas, metadata and scratch.
pub const ARENA_ALIGN: usize = 16;

/// Number of planned arenas of `plan` (memory ids `1..=n`; id 0 is the constant segment).
pub fn arena_count(plan: fb::ExecutionPlan<'_>) -> usize {
    plan.non_const_buffer_sizes()
        .map_or(0, |v| v.len().saturating_sub(1))
}

/// Bytes of the arena for memory id `k + 1`.
pub fn arena_size(plan: fb::ExecutionPlan<'_>, k: usize) -> u64 {
    plan.non_const_buffer_sizes()
        .map_or(0, |v| v.get(k + 1).max(0) as u64)
}

/// How many entries each runtime table of a method has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub values: usize,
    pub tensors: usize,
    pub operators: usize,
    pub delegates: usize,
    /// Bytes of all delegates' translated plans (each rounded up to 16).
    pub delegate_state: usize,
    pub inputs: usize,
    /// Largest scratch any kernel or delegate declared.
    pub scratch: usize,
    /// Instructions of all chains.
    pub instructions: usize,
    /// Bytes of the values folded at load (`exec::fold`).
    pub fold: usize,
}

/// The runtime tables of a loaded method, in metadata-buffer order.
pub struct Tables<'a, 'p> {
    pub values: &'a mut [Value<'p>],
    pub tensors: &'a mut [TensorSlot],
    pub kernels: &'a mut [KernelFn],
    /// Per operator: its kernel's load-time preparation, if it has one (`exec::prepared`).
    pub prepares: &'a mut [Option<PrepareFn>],
    pub delegates: &'a mut [DelegateSlot<'a, 'p>],
    /// The delegates' translated plans, one 16-aligned area after another in delegate order.
    pub delegate_state: &'a mut [u8],
    pub input_set: &'a mut [bool],
    pub scratch: &'a mut [u8],
    /// Per instruction (across chains, in order): its outputs are proved not to alias its
    /// other arguments (`exec::alias`), so the run-time check is skipped.
    pub proved: &'a mut [crate::exec::alias::Proof],
    /// Per instruction (across chains, in order): decoded once at load (`exec::decoded`).
    pub decoded: &'a mut [crate::exec::decoded::Decoded<'p>],
    /// The values folded at load that the forward reads (`exec::fold`), one 16-aligned
    /// tensor after another in value order.
    pub fold: &'a mut [u8],
}

fn placeholder_kernel(_: &mut KernelCtx<'_, '_, '_>) -> Result<(), KernelError> {
    Err(KernelError::Unsupported {
        detail: "unresolved operator",
    })
}

/// A tensor descriptor with no storage yet.
pub const EMPTY_SLOT: TensorSlot = TensorSlot {
    dtype: DType::U8,
    dynamism: Dynamism::Static,
    planned: false,
    writable: false,
    contiguous: true,
    dim_order: [0; MAX_RANK],
    shape: Shape::scalar(),
    data: core::ptr::null_mut(),
    capacity: 0,
};

impl<'a, 'p> Tables<'a, 'p> {
    /// Carves the tables out of `bump` in their fixed order, each filled with a placeholder
    /// (no value, no storage, an unresolved kernel or delegate). With a counting bump the
    /// slices are empty and only `bump.used()` matters.
    pub fn carve(
        counts: &Counts,
        program: Program<'p>,
        bump: &mut Bump<'a>,
    ) -> Result<Tables<'a, 'p>, Error> {
        Ok(Tables {
            values: bump.alloc(counts.values, Value::None)?,
            tensors: bump.alloc(counts.tensors, EMPTY_SLOT)?,
            kernels: bump.alloc(counts.operators, placeholder_kernel as KernelFn)?,
            prepares: bump.alloc(counts.operators, None)?,
            delegates: bump.alloc(counts.delegates, DelegateSlot::unresolved(program))?,
            delegate_state: bump.alloc(counts.delegate_state, 0u8)?,
            input_set: bump.alloc(counts.inputs, false)?,
            scratch: bump.alloc(counts.scratch, 0u8)?,
            proved: bump.alloc(counts.instructions, crate::exec::alias::Proof::NONE)?,
            decoded: bump.alloc(counts.instructions, crate::exec::decoded::Decoded::NONE)?,
            fold: bump.alloc(counts.fold, 0u8)?,
        })
    }

    /// Bytes the tables take in a metadata buffer.
    pub fn bytes(counts: &Counts, program: Program<'p>) -> Result<usize, Error> {
        let mut bump = Bump::counting();
        Tables::carve(counts, program, &mut bump)?;
        Ok(bump.used())
    }
}

/// Bump allocator over the caller's metadata buffer (or a dry run that only counts).
/// Every allocation starts at a multiple of [`ARENA_ALIGN`] relative to a 16-aligned base.
pub struct Bump<'a> {
    base: *mut u8,
    len: usize,
    used: usize,
    counting: bool,
    _buf: PhantomData<&'a mut [u8]>,
}

impl<'a> Bump<'a> {
    /// A dry run: allocations return empty slices and only add to [`Bump::used`].
    pub fn counting() -> Bump<'a> {
        Bump {
            base: core::ptr::null_mut(),
            len: usize::MAX,
            used: 0,
            counting: true,
            _buf: PhantomData,
        }
    }

    pub fn new(buf: &'a mut [u8]) -> Result<Bump<'a>, Error> {
        if !(buf.as_ptr() as usize).is_multiple_of(ARENA_ALIGN) {
            return Err(Error::Invalid {
                what: "metadata buffer",
                index: 0,
                detail: "not 16-byte aligned",
            });
        }
        Ok(Bump {
            base: buf.as_mut_ptr(),
            len: buf.len(),
            used: 0,
            counting: false,
            _buf: PhantomData,
        })
    }

    pub fn used(&self) -> usize {
        self.used
    }

    fn reserve<T>(&mut self, n: usize) -> Result<usize, Error> {
        debug_assert!(align_of::<T>() <= ARENA_ALIGN);
        let overflow = Error::MetadataTooSmall {
            needed: usize::MAX,
            got: self.len,
        };
        let start = self
            .used
            .checked_next_multiple_of(ARENA_ALIGN)
            .ok_or(overflow.clone())?;
        let bytes = n.checked_mul(size_of::<T>()).ok_or(overflow.clone())?;
        let end = start.checked_add(bytes).ok_or(overflow)?;
        self.used = end;
        Ok(start)
    }

    /// Allocates `n` copies of `fill` (an empty slice when counting).
    pub fn alloc<T: Copy>(&mut self, n: usize, fill: T) -> Result<&'a mut [T], Error> {
        let start = self.reserve::<T>(n)?;
        if self.counting {
            return Ok(Default::default());
        }
        if self.used > self.len {
            return Err(Error::MetadataTooSmall {
                needed: self.used,
                got: self.len,
            });
        }
        // SAFETY: `start..start + n*size_of::<T>()` lies inside the buffer borrowed mutably for
        // 'a (checked just above: used ≤ len), ranges handed out never overlap (bump only moves
        // forward), and `start` is a multiple of 16 from a 16-aligned base, so the pointer is
        // aligned for T (align ≤ 16). Each element is written before the slice is formed.
        unsafe {
            let p = self.base.add(start) as *mut T;
            for k in 0..n {
                p.add(k).write(fill);
            }
            Ok(core::slice::from_raw_parts_mut(p, n))
        }
    }
}
