//! f32 `add`, `sub` (alpha 1) and `mul` calls prepared at load (`exec::prepared`): the
//! operation and how the operands meet (the [`Form`]: same shape, one operand a single
//! element, a trailing row repeated, a per-row scalar) are decided once; each run checks
//! that the tensors still meet that way and calls the slice kernel the general path
//! ([`super::binary`]'s f32 fast path) would call for them, so the bits are the same. A call
//! whose tensors changed since returns to the general path.
//!
//! A transformer's residual adds are the same shape; its GELU's scalings are a tensor by a
//! one-element constant, its attention mask a `[1, 1, T, T]` row added to every head.
//!
//! int64 calls (position arithmetic) are prepared in the forms the general path's int64 fast
//! path takes, same shape and a one-element right operand, with any Int alpha: wrapping
//! arithmetic, as there.

use super::broadcast::{bcast_err, is_column, is_trailing};
use super::common::Ctx;
use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::{Prepared, TensorSlot};
use crate::linalg::vecmath as vec;
use crate::shape::dims_eq;

/// How the operands `x` and `y` of a call meet in its output `o` (`o` has the broadcast
/// shape of the two): in the order the general path tries them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
enum Form {
    /// `x`, `y` and `o` of one shape.
    Same = 0,
    /// `x` of `o`'s shape, `y` one element (`vec::binary_scalar`).
    Scalar = 1,
    /// `y` of `o`'s shape, `x` one element (`vec::scalar_binary`).
    ScalarFirst = 2,
    /// `x` of `o`'s shape, `y` its trailing dims (`vec::binary_row`).
    Row = 3,
    /// `y` of `o`'s shape, `x` its trailing dims (`vec::row_binary`).
    RowFirst = 4,
    /// `x` of `o`'s shape, `y` one value per row (`vec::binary_col`).
    Column = 5,
}

const FORMS: [Form; 6] = [
    Form::Same,
    Form::Scalar,
    Form::ScalarFirst,
    Form::Row,
    Form::RowFirst,
    Form::Column,
];

fn numel(d: &[usize]) -> Option<usize> {
    d.iter().try_fold(1usize, |a, &v| a.checked_mul(v))
}

/// The form of operands of dims `xd` and `yd` written to an output of dims `od`, when the
/// general path's f32 fast path takes them with that slice kernel and `od` is their
/// broadcast shape (the full operand has `od`'s dims, the other no more dims than `od`).
fn form(xd: &[usize], yd: &[usize], od: &[usize]) -> Option<Form> {
    let n = numel(od)?;
    let (xn, yn) = (numel(xd)?, numel(yd)?);
    let (x_full, y_full) = (dims_eq(xd, od), dims_eq(yd, od));
    let fits = |d: &[usize]| d.len() <= od.len();
    // The general path's order (`arith_f32_fast`), by element counts; the dims then decide
    // whether the shapes are the ones that branch gives.
    let f = if xn == n && yn == n {
        Form::Same
    } else if xn == n && yn == 1 {
        Form::Scalar
    } else if yn == n && xn == 1 {
        Form::ScalarFirst
    } else if xn == n && is_trailing(yd, od) {
        Form::Row
    } else if yn == n && is_trailing(xd, od) {
        Form::RowFirst
    } else if xn == n && dims_eq(xd, od) && is_column(yd, od) {
        Form::Column
    } else {
        return None;
    };
    let shapes = match f {
        Form::Same => x_full && y_full,
        Form::Scalar | Form::Row | Form::Column => x_full && fits(yd),
        Form::ScalarFirst | Form::RowFirst => y_full && fits(xd),
    };
    shapes.then_some(f)
}

/// The operations prepared, by index (`Prepared::param`'s low byte): the slice kernels'
/// operation and whether the call has an alpha (its output is then argument 3, else 2).
const OPS: [(vec::BinOp, bool); 3] = [
    (vec::BinOp::Add, true),
    (vec::BinOp::Sub, true),
    (vec::BinOp::Mul, false),
];

/// `Prepared::param` bit of an int64 call.
const INT64: u32 = 1 << 16;

/// `Prepared::param` bit of an f32 call of static tensors whose element counts are in
/// `sizes[0..3]` (x, y, out).
const STATIC: u32 = 1 << 17;

/// The int64 form of operands of dims `xd` and `yd` into `od`: what the general path's int64
/// fast path takes (`x` of `od`'s dims; `y` too, or one element of no more dims when the
/// output is not itself one element).
fn form_i64(xd: &[usize], yd: &[usize], od: &[usize]) -> Option<Form> {
    if !dims_eq(xd, od) {
        return None;
    }
    if dims_eq(yd, od) {
        return Some(Form::Same);
    }
    (numel(yd)? == 1 && numel(od)? != 1 && yd.len() <= od.len()).then_some(Form::Scalar)
}

/// The load-time preparation of an f32 or int64 `op` call: slots `[x, y, out]`, `param` the
/// index of the operation in [`OPS`], the form's code times 256 and [`INT64`];
/// an int64 call's alpha in `sizes[0..2]` (low and high halves).
fn prepare_binary(ctx: &Ctx<'_, '_, '_>, op: vec::BinOp) -> Option<Prepared> {
    if ctx.named_elsewhere(0) || ctx.named_elsewhere(1) {
        return None;
    }
    let i = OPS.iter().position(|&(o, _)| o == op)?;
    let out_arg = if OPS[i].1 { 3 } else { 2 };
    if ctx.nargs() != out_arg + 2 {
        return None;
    }
    let dtype = ctx.out_dtype(0).ok()?;
    for a in [0, 1, out_arg] {
        if ctx.out_dtype(a).ok()? != dtype {
            return None;
        }
    }
    let (xd, yd, od) = (
        ctx.dims(0).ok()?,
        ctx.dims(1).ok()?,
        ctx.dims(out_arg).ok()?,
    );
    let (f, param, sizes) = match dtype {
        DType::F32 => {
            // alpha exactly 1, as an Int or a Double (a Bool alpha is the general path's
            // error).
            if out_arg == 3
                && !matches!(ctx.scalar(2), Ok(Scalar::Int(1)) | Ok(Scalar::Double(1.0)))
            {
                return None;
            }
            let f = form(xd, yd, od)?;
            // Static tensors in a form whose result depends on the element counts alone:
            // the counts recorded, the shapes never read again.
            let fixed = [0, 1, out_arg].iter().all(|&a| {
                ctx.entry(a)
                    .is_ok_and(|t| t.dynamism == crate::kernel_api::Dynamism::Static)
            });
            let counts = (numel(xd)?, numel(yd)?, numel(od)?);
            let u = |v: usize| u32::try_from(v).ok();
            match (f, fixed, u(counts.0), u(counts.1), u(counts.2)) {
                (
                    Form::Same | Form::Scalar | Form::ScalarFirst,
                    true,
                    Some(a),
                    Some(b),
                    Some(c),
                ) => (f, STATIC, [a, b, c, 0]),
                _ => (f, 0, [0; 4]),
            }
        }
        DType::I64 => {
            // An Int alpha (a Double or Bool one is the general path's error).
            let alpha = match out_arg {
                3 => match ctx.scalar(2).ok()? {
                    Scalar::Int(a) => a,
                    _ => return None,
                },
                _ => 1,
            };
            let bits = alpha as u64;
            let sizes = [bits as u32, (bits >> 32) as u32, 0, 0];
            (form_i64(xd, yd, od)?, INT64, sizes)
        }
        _ => return None,
    };
    let slot = |a| ctx.tensor_slot(a).ok().and_then(|s| u32::try_from(s).ok());
    Some(Prepared {
        run: Some(run_binary),
        slots: [
            slot(0)?,
            slot(1)?,
            slot(out_arg)?,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
            Prepared::NO_SLOT,
        ],
        sizes,
        param: i as u32 | (f as u32) << 8 | param,
        hint: 0,
    })
}

pub(super) fn prepare_add(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    prepare_binary(ctx, vec::BinOp::Add)
}
pub(super) fn prepare_sub(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    prepare_binary(ctx, vec::BinOp::Sub)
}
pub(super) fn prepare_mul(ctx: &Ctx<'_, '_, '_>) -> Option<Prepared> {
    prepare_binary(ctx, vec::BinOp::Mul)
}

/// Runs a call prepared by [`prepare_binary`] over the three tensors' current shapes, when
/// they still meet in the prepared form: the slice kernel of that form.
pub(super) fn run_binary(
    p: &Prepared,
    tensors: &[TensorSlot],
    _: &mut [u8],
) -> Result<bool, KernelError> {
    let (Some(x), Some(y), Some(o), Some(&(bop, has_alpha)), Some(&want)) = (
        tensors.get(p.slots[0] as usize),
        tensors.get(p.slots[1] as usize),
        tensors.get(p.slots[2] as usize),
        OPS.get((p.param & 0xff) as usize),
        FORMS.get((p.param >> 8 & 0xff) as usize),
    ) else {
        return Ok(false);
    };
    if p.param & STATIC != 0 {
        let [nx, ny, no, _] = p.sizes.map(|s| s as usize);
        // SAFETY: as below.
        let bound = unsafe {
            (
                p.input_static::<f32>(tensors, 0, nx),
                p.input_static::<f32>(tensors, 1, ny),
                p.output_static::<f32>(tensors, 2, no),
            )
        };
        let (Some(xs), Some(ys), Some(os)) = bound else {
            return Ok(false);
        };
        return slice_op(bop, has_alpha, want, xs, ys, os);
    }
    let (xd, yd, od) = (x.shape.dims(), y.shape.dims(), o.shape.dims());
    if p.param & INT64 != 0 {
        return Ok(run_i64(p, tensors, bop, want, (xd, yd, od)));
    }
    // Same shape (a residual add): two comparisons, what `form` would conclude from them.
    let meets = if want == Form::Same {
        dims_eq(xd, od) && dims_eq(yd, od)
    } else {
        form(xd, yd, od) == Some(want)
    };
    if !meets {
        return Ok(false);
    }
    // SAFETY: this record's runner during its call (the instruction loop calls it only for
    // the call prepared at load, whose output was proved to overlap no other argument).
    let bound = unsafe {
        (
            p.input::<f32>(tensors, 0, xd),
            p.input::<f32>(tensors, 1, yd),
            p.output::<f32>(tensors, 2, od),
        )
    };
    let (Some(xs), Some(ys), Some(os)) = bound else {
        return Ok(false);
    };
    slice_op(bop, has_alpha, want, xs, ys, os)
}

/// The slice kernel of form `want` on bound operands.
fn slice_op(
    bop: vec::BinOp,
    has_alpha: bool,
    want: Form,
    xs: &[f32],
    ys: &[f32],
    os: &mut [f32],
) -> Result<bool, KernelError> {
    let r = match (want, xs, ys) {
        (Form::Same, ..) => vec::binary(bop, xs, ys, os),
        (Form::Scalar, _, &[y]) => vec::binary_scalar(bop, xs, y, os),
        (Form::ScalarFirst, &[x], _) => vec::scalar_binary(bop, x, ys, os),
        (Form::Row, ..) => vec::binary_row(bop, xs, ys, os),
        (Form::RowFirst, ..) => vec::row_binary(bop, xs, ys, os),
        (Form::Column, ..) => vec::binary_col(bop, xs, ys, os),
        _ => return Ok(false),
    };
    r.map_err(|_| bcast_err(if has_alpha { 3 } else { 2 }))?;
    Ok(true)
}

/// The int64 runner of [`run_binary`]: `x + alpha·y`, `x − alpha·y` or `x·y`, wrapping.
fn run_i64(
    p: &Prepared,
    tensors: &[TensorSlot],
    op: vec::BinOp,
    want: Form,
    (xd, yd, od): (&[usize], &[usize], &[usize]),
) -> bool {
    if form_i64(xd, yd, od) != Some(want) {
        return false;
    }
    // SAFETY: as in `run_binary`.
    let bound = unsafe {
        (
            p.input::<i64>(tensors, 0, xd),
            p.input::<i64>(tensors, 1, yd),
            p.output::<i64>(tensors, 2, od),
        )
    };
    let (Some(xs), Some(ys), Some(os)) = bound else {
        return false;
    };
    let al = (u64::from(p.sizes[1]) << 32 | u64::from(p.sizes[0])) as i64;
    let f = |a: i64, b: i64| match op {
        vec::BinOp::Add => a.wrapping_add(al.wrapping_mul(b)),
        vec::BinOp::Sub => a.wrapping_sub(al.wrapping_mul(b)),
        _ => a.wrapping_mul(b),
    };
    match (want, ys) {
        (Form::Scalar, &[b]) => os.iter_mut().zip(xs).for_each(|(o, &a)| *o = f(a, b)),
        _ => os
            .iter_mut()
            .zip(xs.iter().zip(ys))
            .for_each(|(o, (&a, &b))| *o = f(a, b)),
    }
    true
}

#[cfg(test)]
#[path = "binary_prepared_tests.rs"]
mod tests;
