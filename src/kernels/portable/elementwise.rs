//! Elementwise operators: arithmetic with NumPy broadcasting and ATen type promotion,
//! comparisons, logic and bitwise ops, `where` / `masked_fill`, unary math, fills, `arange`,
//! and dtype-converting copies.
//!
//! Layout contract (all kernels): every tensor argument is contiguous (checked by
//! [`KernelCtx::input`]); the output is resized to the broadcast (or input) shape and every
//! element is written.
//!
//! Dtype contract (ATen): the computation dtype is ATen's `result_type` of the operands
//! (dimensioned tensors over zero-dim tensors over Python scalars, by category), which must be
//! castable to the out dtype (no float → integer, no non-bool → bool); the result is then
//! converted to the out dtype. float32 is computed in f32, float64 in f64, float16/bfloat16 in
//! f32 rounded to the half type, integers in i64 wrapped to their common type, bool as bool.
//!
//! Performance: one allocation-free broadcast iterator ([`Bcast`]) coalesces contiguous dims,
//! so same-shape, row-vector and scalar operands become flat loops; when every operand already
//! has the compute dtype the loops run over typed slices (no per-element dtype dispatch), and
//! otherwise a generic path converts element by element.

// `KernelError` (shared) is large because `Resize` carries a `Shape`; every kernel returns it.
#![allow(clippy::result_large_err)]

use core::iter::repeat;
use core::ops::{Add, Div, Mul, Neg, Sub};

use crate::dtype::{DType, Scalar};
use crate::error::KernelError;
use crate::kernel_api::{KernelCtx, KernelDef};
use crate::linalg::vecmath as vec;
use crate::shape::broadcast_shapes;
use crate::tensor::{
    read_f64, read_i64, write_f64, write_i64, Element, Shape, TensorMut, TensorRef, MAX_RANK,
};

type Ctx<'c, 'a, 'p> = KernelCtx<'c, 'a, 'p>;
type Res = Result<(), KernelError>;

// ---------------------------------------------------------------------------------------------
// Compute types
// ---------------------------------------------------------------------------------------------

/// A type kernels compute in (f32, f64, i64, bool), with its storage type and the C++-style
/// conversions between compute types and from/to any tensor dtype.
trait Ct: Copy + 'static {
    /// In-memory element type of a tensor whose dtype is [`Ct::DT`].
    type S: Element;
    const DT: DType;
    fn ld(s: Self::S) -> Self;
    fn st(self) -> Self::S;
    fn from_f32(v: f32) -> Self;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
    fn from_bool(v: bool) -> Self;
    /// C++ `static_cast` into another compute type.
    fn cast<U: Ct>(self) -> U;
    /// Writes `self` as element `i` of a `dt` buffer.
    fn store(self, dt: DType, b: &mut [u8], i: usize);

    /// ATen `Scalar::to<T>()`.
    #[inline]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::Int(v) => Self::from_i64(v),
            Scalar::Double(v) => Self::from_f64(v),
            Scalar::Bool(v) => Self::from_bool(v),
        }
    }

    /// Reads element `i` of a `dt` buffer (any dtype).
    #[inline]
    fn load(dt: DType, b: &[u8], i: usize) -> Self {
        match dt {
            DType::Bool => Self::from_bool(b[i] != 0),
            d if d.is_float() => Self::from_f64(read_f64(d, b, i)),
            d => Self::from_i64(read_i64(d, b, i)),
        }
    }
}

impl Ct for f32 {
    type S = f32;
    const DT: DType = DType::F32;
    #[inline(always)]
    fn ld(s: f32) -> f32 {
        s
    }
    #[inline(always)]
    fn st(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn from_i64(v: i64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn from_bool(v: bool) -> f32 {
        v as u8 as f32
    }
    #[inline(always)]
    fn cast<U: Ct>(self) -> U {
        U::from_f32(self)
    }
    #[inline]
    fn store(self, dt: DType, b: &mut [u8], i: usize) {
        // f32 → f64 is exact, so half types round once from the f32 value.
        write_f64(dt, b, i, self as f64)
    }
}

impl Ct for f64 {
    type S = f64;
    const DT: DType = DType::F64;
    #[inline(always)]
    fn ld(s: f64) -> f64 {
        s
    }
    #[inline(always)]
    fn st(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn from_i64(v: i64) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn from_bool(v: bool) -> f64 {
        v as u8 as f64
    }
    #[inline(always)]
    fn cast<U: Ct>(self) -> U {
        U::from_f64(self)
    }
    #[inline]
    fn store(self, dt: DType, b: &mut [u8], i: usize) {
        write_f64(dt, b, i, self)
    }
}

impl Ct for i64 {
    type S = i64;
    const DT: DType = DType::I64;
    #[inline(always)]
    fn ld(s: i64) -> i64 {
        s
    }
    #[inline(always)]
    fn st(self) -> i64 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> i64 {
        v
    }
    #[inline(always)]
    fn from_bool(v: bool) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn cast<U: Ct>(self) -> U {
        U::from_i64(self)
    }
    #[inline]
    fn store(self, dt: DType, b: &mut [u8], i: usize) {
        if dt == DType::F32 {
            // Direct i64 → f32 rounding (as C++), not through f64.
            b[i * 4..i * 4 + 4].copy_from_slice(&(self as f32).to_le_bytes());
        } else {
            write_i64(dt, b, i, self)
        }
    }
}

impl Ct for bool {
    type S = u8;
    const DT: DType = DType::Bool;
    #[inline(always)]
    fn ld(s: u8) -> bool {
        s != 0
    }
    #[inline(always)]
    fn st(self) -> u8 {
        self as u8
    }
    #[inline(always)]
    fn from_f32(v: f32) -> bool {
        v != 0.0
    }
    #[inline(always)]
    fn from_f64(v: f64) -> bool {
        v != 0.0
    }
    #[inline(always)]
    fn from_i64(v: i64) -> bool {
        v != 0
    }
    #[inline(always)]
    fn from_bool(v: bool) -> bool {
        v
    }
    #[inline(always)]
    fn cast<U: Ct>(self) -> U {
        U::from_bool(self)
    }
    #[inline]
    fn store(self, dt: DType, b: &mut [u8], i: usize) {
        write_i64(dt, b, i, self as i64)
    }
}

/// Arithmetic on the numeric compute types (f32, f64, i64). Integer ops wrap; integer
/// division by zero never reaches these functions (kernels reject it first) and yields 0.
trait Num: Ct + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    /// True division for floats (integers never use it: their true division is computed
    /// in float).
    fn quot(self, o: Self) -> Self;
    fn div_trunc(self, o: Self) -> Self;
    /// ATen `div_floor_floating` / `div_floor_integer`.
    fn div_floor(self, o: Self) -> Self;
    /// Python-style remainder (sign of the divisor).
    fn rem_floor(self, o: Self) -> Self;
    /// C `fmod` (sign of the dividend).
    fn fmod(self, o: Self) -> Self;
    fn power(self, e: Self) -> Self;
    fn negate(self) -> Self;
    fn absolute(self) -> Self;
    fn nan(self) -> bool;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// Round half to even.
    fn round(self) -> Self;
    fn trunc(self) -> Self;
    fn sign(self) -> Self;

    /// `maximum` with NaN propagation.
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        if self.nan() {
            self
        } else if o.nan() || self < o {
            o
        } else {
            self
        }
    }

    /// `minimum` with NaN propagation.
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        if self.nan() {
            self
        } else if o.nan() || o < self {
            o
        } else {
            self
        }
    }
}

/// Floating compute types: transcendental functions through `libm`.
trait Float:
    Num
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn exp(self) -> Self;
    fn expm1(self) -> Self;
    fn ln(self) -> Self;
    fn ln1p(self) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn inf(self) -> bool;
}

macro_rules! float_impl {
    ($t:ty, $floor:ident, $ceil:ident, $rint:ident, $trunc:ident, $fmod:ident, $pow:ident,
     $fabs:ident, $copysign:ident, [$($name:ident = $f:ident),*]) => {
        impl Num for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            #[inline(always)]
            fn wadd(self, o: $t) -> $t {
                self + o
            }
            #[inline(always)]
            fn wsub(self, o: $t) -> $t {
                self - o
            }
            #[inline(always)]
            fn wmul(self, o: $t) -> $t {
                self * o
            }
            #[inline(always)]
            fn quot(self, o: $t) -> $t {
                self / o
            }
            #[inline]
            fn div_trunc(self, o: $t) -> $t {
                libm::$trunc(self / o)
            }
            #[inline]
            fn div_floor(self, o: $t) -> $t {
                if o == 0.0 {
                    return self / o;
                }
                let m = libm::$fmod(self, o);
                let mut d = (self - m) / o;
                if m != 0.0 && (o < 0.0) != (m < 0.0) {
                    d -= 1.0;
                }
                if d != 0.0 {
                    let f = libm::$floor(d);
                    if d - f > 0.5 {
                        f + 1.0
                    } else {
                        f
                    }
                } else {
                    libm::$copysign(0.0, self / o)
                }
            }
            #[inline]
            fn rem_floor(self, o: $t) -> $t {
                let m = libm::$fmod(self, o);
                if m != 0.0 && (o < 0.0) != (m < 0.0) {
                    m + o
                } else {
                    m
                }
            }
            #[inline]
            fn fmod(self, o: $t) -> $t {
                libm::$fmod(self, o)
            }
            #[inline]
            fn power(self, e: $t) -> $t {
                libm::$pow(self, e)
            }
            #[inline(always)]
            fn negate(self) -> $t {
                -self
            }
            #[inline(always)]
            fn absolute(self) -> $t {
                libm::$fabs(self)
            }
            #[inline(always)]
            #[allow(clippy::eq_op)]
            fn nan(self) -> bool {
                self != self
            }
            #[inline]
            fn floor(self) -> $t {
                libm::$floor(self)
            }
            #[inline]
            fn ceil(self) -> $t {
                libm::$ceil(self)
            }
            #[inline]
            fn round(self) -> $t {
                libm::$rint(self)
            }
            #[inline]
            fn trunc(self) -> $t {
                libm::$trunc(self)
            }
            #[inline(always)]
            fn sign(self) -> $t {
                // (0 < x) - (x < 0): NaN and ±0 give +0.
                ((0.0 < self) as i8 - (self < 0.0) as i8) as $t
            }
        }

        impl Float for $t {
            $(
                #[inline]
                fn $name(self) -> $t {
                    libm::$f(self)
                }
            )*
            #[inline(always)]
            fn inf(self) -> bool {
                self == <$t>::INFINITY || self == <$t>::NEG_INFINITY
            }
        }
    };
}

float_impl!(
    f32,
    floorf,
    ceilf,
    rintf,
    truncf,
    fmodf,
    powf,
    fabsf,
    copysignf,
    [
        exp = expf,
        expm1 = expm1f,
        ln = logf,
        ln1p = log1pf,
        log2 = log2f,
        log10 = log10f,
        sqrt = sqrtf,
        tanh = tanhf,
        erf = erff,
        sin = sinf,
        cos = cosf,
        tan = tanf,
        sinh = sinhf,
        cosh = coshf,
        asin = asinf,
        acos = acosf,
        atan = atanf,
        asinh = asinhf,
        acosh = acoshf,
        atanh = atanhf
    ]
);
float_impl!(
    f64,
    floor,
    ceil,
    rint,
    trunc,
    fmod,
    pow,
    fabs,
    copysign,
    [
        exp = exp,
        expm1 = expm1,
        ln = log,
        ln1p = log1p,
        log2 = log2,
        log10 = log10,
        sqrt = sqrt,
        tanh = tanh,
        erf = erf,
        sin = sin,
        cos = cos,
        tan = tan,
        sinh = sinh,
        cosh = cosh,
        asin = asin,
        acos = acos,
        atan = atan,
        asinh = asinh,
        acosh = acosh,
        atanh = atanh
    ]
);

/// ATen `powi_impl`: exponentiation by squaring, wrapping; negative exponents give 0 except
/// for bases ±1.
fn powi(mut a: i64, mut b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b & 1 != 0 {
                    -1
                } else {
                    1
                }
            }
            _ => 0,
        };
    }
    let mut r: i64 = 1;
    while b != 0 {
        if b & 1 != 0 {
            r = r.wrapping_mul(a);
        }
        b >>= 1;
        a = a.wrapping_mul(a);
    }
    r
}

impl Num for i64 {
    const ZERO: i64 = 0;
    const ONE: i64 = 1;
    #[inline(always)]
    fn wadd(self, o: i64) -> i64 {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn wsub(self, o: i64) -> i64 {
        self.wrapping_sub(o)
    }
    #[inline(always)]
    fn wmul(self, o: i64) -> i64 {
        self.wrapping_mul(o)
    }
    #[inline]
    fn quot(self, o: i64) -> i64 {
        self.div_trunc(o)
    }
    #[inline]
    fn div_trunc(self, o: i64) -> i64 {
        if o == 0 {
            0
        } else {
            self.wrapping_div(o)
        }
    }
    #[inline]
    fn div_floor(self, o: i64) -> i64 {
        if o == 0 {
            return 0;
        }
        let q = self.wrapping_div(o);
        let r = self.wrapping_rem(o);
        if r != 0 && ((r < 0) != (o < 0)) {
            q.wrapping_sub(1)
        } else {
            q
        }
    }
    #[inline]
    fn rem_floor(self, o: i64) -> i64 {
        if o == 0 {
            return 0;
        }
        let r = self.wrapping_rem(o);
        if r != 0 && ((r < 0) != (o < 0)) {
            r.wrapping_add(o)
        } else {
            r
        }
    }
    #[inline]
    fn fmod(self, o: i64) -> i64 {
        if o == 0 {
            0
        } else {
            self.wrapping_rem(o)
        }
    }
    #[inline]
    fn power(self, e: i64) -> i64 {
        powi(self, e)
    }
    #[inline(always)]
    fn negate(self) -> i64 {
        self.wrapping_neg()
    }
    #[inline(always)]
    fn absolute(self) -> i64 {
        self.wrapping_abs()
    }
    #[inline(always)]
    fn nan(self) -> bool {
        false
    }
    #[inline(always)]
    fn floor(self) -> i64 {
        self
    }
    #[inline(always)]
    fn ceil(self) -> i64 {
        self
    }
    #[inline(always)]
    fn round(self) -> i64 {
        self
    }
    #[inline(always)]
    fn trunc(self) -> i64 {
        self
    }
    #[inline(always)]
    fn sign(self) -> i64 {
        self.signum()
    }
}

/// Bitwise ops on the integral compute types (i64, and bool as logic).
trait Bits: Ct {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
}

impl Bits for i64 {
    #[inline(always)]
    fn and(self, o: i64) -> i64 {
        self & o
    }
    #[inline(always)]
    fn or(self, o: i64) -> i64 {
        self | o
    }
    #[inline(always)]
    fn xor(self, o: i64) -> i64 {
        self ^ o
    }
}

impl Bits for bool {
    #[inline(always)]
    fn and(self, o: bool) -> bool {
        self & o
    }
    #[inline(always)]
    fn or(self, o: bool) -> bool {
        self | o
    }
    #[inline(always)]
    fn xor(self, o: bool) -> bool {
        self ^ o
    }
}

/// Which compute type a dtype uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    F32,
    F64,
    I64,
    Bool,
}

/// Compute kind of `d`: f64 stays f64, other floats compute in f32, integers in i64.
fn kind(d: DType) -> Kind {
    match d {
        DType::F64 => Kind::F64,
        DType::Bool => Kind::Bool,
        d if d.is_float() => Kind::F32,
        _ => Kind::I64,
    }
}

/// Like [`kind`], with bool computed as an integer (arithmetic on bools).
fn num_kind(d: DType) -> Kind {
    match kind(d) {
        Kind::Bool => Kind::I64,
        k => k,
    }
}

/// Runs `$body` with `$T` bound to the compute type of kind `$k` (all four kinds).
macro_rules! with_ct {
    ($k:expr, $T:ident, $body:expr) => {
        match $k {
            Kind::F32 => {
                type $T = f32;
                $body
            }
            Kind::F64 => {
                type $T = f64;
                $body
            }
            Kind::I64 => {
                type $T = i64;
                $body
            }
            Kind::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}

/// Runs `$body` with `$T` bound to the numeric compute type of kind `$k` (bool → i64).
macro_rules! with_num {
    ($k:expr, $T:ident, $body:expr) => {
        match $k {
            Kind::F32 => {
                type $T = f32;
                $body
            }
            Kind::F64 => {
                type $T = f64;
                $body
            }
            Kind::I64 | Kind::Bool => {
                type $T = i64;
                $body
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Type promotion
// ---------------------------------------------------------------------------------------------

/// ATen `result_type` state: dimensioned tensors, zero-dim tensors and wrapped scalars are
/// promoted separately, then combined by category.
#[derive(Default, Clone, Copy)]
struct Promo {
    dim: Option<DType>,
    zero: Option<DType>,
    wrapped: Option<DType>,
}

fn join(a: Option<DType>, b: DType) -> Option<DType> {
    Some(a.map_or(b, |a| DType::promote(a, b)))
}

/// ATen `combine_categories(higher, lower)`.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_float() {
                Some(h)
            } else if h == DType::Bool || l.is_float() {
                Some(DType::promote(h, l))
            } else {
                Some(h)
            }
        }
    }
}

impl Promo {
    fn tensor(mut self, t: &TensorRef<'_>) -> Promo {
        if t.rank() == 0 {
            self.zero = join(self.zero, t.dtype());
        } else {
            self.dim = join(self.dim, t.dtype());
        }
        self
    }
    /// A Python scalar (`Double` counts as the default dtype float32).
    fn scalar(mut self, s: Scalar) -> Promo {
        self.wrapped = join(self.wrapped, s.dtype());
        self
    }
    fn rhs(self, r: Rhs<'_>) -> Promo {
        match r {
            Rhs::T(t) => self.tensor(&t),
            Rhs::S(s) => self.scalar(s),
        }
    }
    fn result(self) -> DType {
        combine(self.dim, combine(self.zero, self.wrapped)).unwrap_or(DType::F32)
    }
}

/// ATen `canCast`: no float → integral, no non-bool → bool.
fn can_cast(from: DType, to: DType) -> bool {
    let float_to_int = from.is_float() && to.is_int();
    let to_bool = from != DType::Bool && to == DType::Bool;
    !(float_to_int || to_bool)
}

fn check_cast(from: DType, to: DType, arg: usize) -> Res {
    if can_cast(from, to) {
        Ok(())
    } else {
        Err(KernelError::DTypeMismatch {
            arg,
            expected: from,
            got: to,
        })
    }
}

/// Rounds every output element through the `common` dtype when the computation ran in a
/// wider type than ATen's (bool, narrow integers, half floats) and the out dtype differs:
/// ATen computes in the common dtype and only then casts to out.
fn renormalize(out: &mut TensorMut<'_>, common: DType) {
    let od = out.dtype();
    if od == common || matches!(common, DType::F32 | DType::F64 | DType::I64 | DType::U64) {
        return;
    }
    let n = out.numel();
    let b = out.bytes_mut();
    let mut t = [0u8; 8];
    for i in 0..n {
        if common.is_float() {
            write_f64(common, &mut t, 0, read_f64(od, b, i));
            write_f64(od, b, i, read_f64(common, &t, 0));
        } else {
            write_i64(common, &mut t, 0, read_i64(od, b, i));
            write_i64(od, b, i, read_i64(common, &t, 0));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Broadcasting
// ---------------------------------------------------------------------------------------------

/// Broadcast iteration of `N` contiguous inputs against a contiguous output of rank ≤ 16.
///
/// Size-1 output dims are dropped and adjacent dims whose strides chain for every input are
/// merged, so the walk is a sequence of runs along the innermost (coalesced) dim, in which
/// every input has stride 0 (broadcast) or 1. Same-shape operands become one run.
struct Bcast<const N: usize> {
    /// Number of outer (odometer) dims.
    outer: usize,
    dims: [usize; MAX_RANK],
    strides: [[usize; MAX_RANK]; N],
    /// Length of each run.
    inner: usize,
    /// Per input, 0 or 1: its stride along the run.
    step: [usize; N],
    empty: bool,
}

impl<const N: usize> Bcast<N> {
    /// `None` when an input does not broadcast to `out`.
    fn new(out: &Shape, ins: [&Shape; N]) -> Option<Bcast<N>> {
        let r = out.rank();
        let od = out.dims();
        let mut st = [[0usize; MAX_RANK]; N];
        for (k, s) in ins.iter().enumerate() {
            let rk = s.rank();
            if rk > r {
                return None;
            }
            let cs = s.strides();
            for (j, &d) in s.dims().iter().enumerate() {
                let i = j + r - rk;
                st[k][i] = if d == od[i] && d != 1 {
                    cs[j]
                } else if d == 1 {
                    0
                } else {
                    return None;
                };
            }
        }
        let mut dims = [0usize; MAX_RANK];
        let mut strides = [[0usize; MAX_RANK]; N];
        let mut m = 0usize;
        for (i, &d) in od.iter().enumerate() {
            if d == 1 {
                continue;
            }
            if m > 0 && (0..N).all(|k| strides[k][m - 1] == st[k][i].wrapping_mul(d)) {
                dims[m - 1] = dims[m - 1].saturating_mul(d);
                for k in 0..N {
                    strides[k][m - 1] = st[k][i];
                }
            } else {
                dims[m] = d;
                for k in 0..N {
                    strides[k][m] = st[k][i];
                }
                m += 1;
            }
        }
        let (inner, step) = if m == 0 {
            (1, [0; N])
        } else {
            m -= 1;
            (dims[m], core::array::from_fn(|k| strides[k][m]))
        };
        // The innermost non-1 dim of a contiguous input has stride 1 (or 0 when broadcast).
        debug_assert!(step.iter().all(|&s| s <= 1));
        Some(Bcast {
            outer: m,
            dims,
            strides,
            inner,
            step,
            empty: od.contains(&0),
        })
    }

    /// Calls `f(input offsets, output offset, run length)` for every run, in output order.
    #[inline(always)]
    fn for_each(&self, mut f: impl FnMut([usize; N], usize, usize)) {
        if self.empty {
            return;
        }
        let mut idx = [0usize; MAX_RANK];
        let mut off = [0usize; N];
        let mut o = 0usize;
        loop {
            f(off, o, self.inner);
            o += self.inner;
            let mut d = self.outer;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                for (k, x) in off.iter_mut().enumerate() {
                    *x += self.strides[k][d];
                }
                if idx[d] < self.dims[d] {
                    break;
                }
                for (k, x) in off.iter_mut().enumerate() {
                    *x -= self.strides[k][d] * self.dims[d];
                }
                idx[d] = 0;
            }
        }
    }
}

fn shape_err(arg: usize) -> KernelError {
    KernelError::Shape {
        arg,
        detail: "shapes are not broadcastable",
    }
}

fn bshape(a: &TensorRef<'_>, b: &TensorRef<'_>) -> Result<Shape, KernelError> {
    broadcast_shapes(a.shape(), b.shape()).ok_or(shape_err(b.arg()))
}

/// `out[i] = f(x[i])`, out has x's shape.
#[inline(always)]
fn map1<A: Ct, U: Ct>(x: &TensorRef<'_>, out: &mut TensorMut<'_>, f: impl Fn(A) -> U) -> Res {
    let n = x.numel();
    if out.numel() != n {
        return Err(KernelError::Shape {
            arg: out.arg(),
            detail: "output shape differs from input",
        });
    }
    if x.dtype() == A::DT && out.dtype() == U::DT {
        let xs = x.as_slice::<A::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        for (o, &v) in os.iter_mut().zip(xs) {
            *o = f(A::ld(v)).st();
        }
    } else {
        let (xd, od) = (x.dtype(), out.dtype());
        let xb = x.bytes();
        let ob = out.bytes_mut();
        for i in 0..n {
            f(A::load(xd, xb, i)).store(od, ob, i);
        }
    }
    Ok(())
}

/// `out = f(x, y)` with broadcasting; out already has the broadcast shape.
#[inline(always)]
fn zip2<A: Ct, B: Ct, U: Ct>(
    x: &TensorRef<'_>,
    y: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(A, B) -> U,
) -> Res {
    let bc = Bcast::new(out.shape(), [x.shape(), y.shape()]).ok_or(shape_err(y.arg()))?;
    let [sx, sy] = bc.step;
    if x.dtype() == A::DT && y.dtype() == B::DT && out.dtype() == U::DT {
        let xs = x.as_slice::<A::S>()?;
        let ys = y.as_slice::<B::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        let g = |p: A::S, q: B::S| f(A::ld(p), B::ld(q)).st();
        bc.for_each(|[ox, oy], o, n| {
            let d = &mut os[o..o + n];
            match (sx, sy) {
                (1, 1) => {
                    for ((d, &p), &q) in d.iter_mut().zip(&xs[ox..ox + n]).zip(&ys[oy..oy + n]) {
                        *d = g(p, q);
                    }
                }
                (1, _) => {
                    let q = ys[oy];
                    for (d, &p) in d.iter_mut().zip(&xs[ox..ox + n]) {
                        *d = g(p, q);
                    }
                }
                (_, 1) => {
                    let p = xs[ox];
                    for (d, &q) in d.iter_mut().zip(&ys[oy..oy + n]) {
                        *d = g(p, q);
                    }
                }
                _ => d.fill(g(xs[ox], ys[oy])),
            }
        });
    } else {
        let (xd, yd, od) = (x.dtype(), y.dtype(), out.dtype());
        let (xb, yb) = (x.bytes(), y.bytes());
        let ob = out.bytes_mut();
        bc.for_each(|[ox, oy], o, n| {
            for i in 0..n {
                f(A::load(xd, xb, ox + i * sx), B::load(yd, yb, oy + i * sy)).store(od, ob, o + i);
            }
        });
    }
    Ok(())
}

/// `out = f(x, y, z)` with broadcasting; out already has the broadcast shape.
#[inline(always)]
fn zip3<A: Ct, B: Ct, C: Ct, U: Ct>(
    x: &TensorRef<'_>,
    y: &TensorRef<'_>,
    z: &TensorRef<'_>,
    out: &mut TensorMut<'_>,
    f: impl Fn(A, B, C) -> U,
) -> Res {
    let bc =
        Bcast::new(out.shape(), [x.shape(), y.shape(), z.shape()]).ok_or(shape_err(z.arg()))?;
    let [sx, sy, sz] = bc.step;
    if x.dtype() == A::DT && y.dtype() == B::DT && z.dtype() == C::DT && out.dtype() == U::DT {
        let xs = x.as_slice::<A::S>()?;
        let ys = y.as_slice::<B::S>()?;
        let zs = z.as_slice::<C::S>()?;
        let os = out.as_mut_slice::<U::S>()?;
        let g = |p: A::S, q: B::S, r: C::S| f(A::ld(p), B::ld(q), C::ld(r)).st();
        bc.for_each(|[ox, oy, oz], o, n| {
            let d = &mut os[o..o + n];
            let xr = &xs[ox..ox + if sx == 1 { n } else { 1 }];
            let yr = &ys[oy..oy + if sy == 1 { n } else { 1 }];
            let zr = &zs[oz..oz + if sz == 1 { n } else { 1 }];
            macro_rules! run {
                ($p:expr, $q:expr, $r:expr) => {
                    for (((d, p), q), r) in d.iter_mut().zip($p).zip($q).zip($r) {
                        *d = g(p, q, r);
                    }
                };
            }
            match (sx, sy, sz) {
                (1, 1, 1) => run!(xr.iter().copied(), yr.iter().copied(), zr.iter().copied()),
                (1, 1, _) => run!(xr.iter().copied(), yr.iter().copied(), repeat(zr[0])),
                (1, _, 1) => run!(xr.iter().copied(), repeat(yr[0]), zr.iter().copied()),
                (_, 1, 1) => run!(repeat(xr[0]), yr.iter().copied(), zr.iter().copied()),
                (1, _, _) => run!(xr.iter().copied(), repeat(yr[0]), repeat(zr[0])),
                (_, 1, _) => run!(repeat(xr[0]), yr.iter().copied(), repeat(zr[0])),
                (_, _, 1) => run!(repeat(xr[0]), repeat(yr[0]), zr.iter().copied()),
                _ => d.fill(g(xr[0], yr[0], zr[0])),
            }
        });
    } else {
        let (xd, yd, zd, od) = (x.dtype(), y.dtype(), z.dtype(), out.dtype());
        let (xb, yb, zb) = (x.bytes(), y.bytes(), z.bytes());
        let ob = out.bytes_mut();
        bc.for_each(|[ox, oy, oz], o, n| {
            for i in 0..n {
                f(
                    A::load(xd, xb, ox + i * sx),
                    B::load(yd, yb, oy + i * sy),
                    C::load(zd, zb, oz + i * sz),
                )
                .store(od, ob, o + i);
            }
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic
// ---------------------------------------------------------------------------------------------

/// The right operand of a binary op: a tensor, or a Scalar (the `.Scalar_out` overloads).
#[derive(Clone, Copy)]
enum Rhs<'a> {
    T(TensorRef<'a>),
    S(Scalar),
}

impl Rhs<'_> {
    fn dtype(&self) -> DType {
        match self {
            Rhs::T(t) => t.dtype(),
            Rhs::S(s) => s.dtype(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ar {
    Add,
    Sub,
    /// `other - alpha·self` (rsub).
    RSub,
    Mul,
    Div,
    DivTrunc,
    DivFloor,
    Pow,
    Max,
    Min,
    Rem,
    Fmod,
}

/// Shared body of every arithmetic kernel. `rhs_arg` / `alpha_arg` are argument positions
/// for error reports.
#[allow(clippy::too_many_arguments)]
fn arith<'a>(
    ctx: &mut Ctx<'_, 'a, '_>,
    op: Ar,
    x: TensorRef<'a>,
    rhs: Rhs<'a>,
    rhs_arg: usize,
    alpha: Scalar,
    alpha_arg: usize,
    out_arg: usize,
) -> Res {
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    match op {
        Ar::Sub | Ar::RSub if x.dtype() == DType::Bool || rhs.dtype() == DType::Bool => {
            return Err(KernelError::UnsupportedDType {
                arg: if x.dtype() == DType::Bool { 0 } else { rhs_arg },
                dtype: DType::Bool,
            });
        }
        Ar::DivTrunc | Ar::DivFloor | Ar::Rem | Ar::Fmod | Ar::Pow if common == DType::Bool => {
            return Err(KernelError::UnsupportedDType {
                arg: 0,
                dtype: DType::Bool,
            });
        }
        _ => {}
    }
    if matches!(op, Ar::Add | Ar::Sub | Ar::RSub) {
        if !common.is_float() && matches!(alpha, Scalar::Double(_)) {
            return Err(KernelError::Value {
                arg: alpha_arg,
                detail: "alpha must not be a floating point number for integral inputs",
            });
        }
        if matches!(alpha, Scalar::Bool(_)) && common != DType::Bool {
            return Err(KernelError::Value {
                arg: alpha_arg,
                detail: "boolean alpha only supported for boolean results",
            });
        }
    }
    let result = if op == Ar::Div && !common.is_float() {
        DType::F32
    } else {
        common
    };
    check_cast(result, ctx.out_dtype(out_arg)?, out_arg)?;
    if !result.is_float() {
        if matches!(op, Ar::DivTrunc | Ar::DivFloor | Ar::Rem | Ar::Fmod) {
            let zero = match rhs {
                Rhs::T(y) => (0..y.numel()).any(|i| y.get_i64(i) == 0),
                Rhs::S(s) => s.as_i64() == 0,
            };
            if zero {
                return Err(KernelError::Value {
                    arg: rhs_arg,
                    detail: "integer division by zero",
                });
            }
        }
        if let (Ar::Pow, Rhs::S(Scalar::Int(e))) = (op, rhs) {
            if e < 0 {
                return Err(KernelError::Value {
                    arg: rhs_arg,
                    detail: "integers to negative integer powers are not allowed",
                });
            }
        }
    }
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(out_arg, &shape)?;
    if result == DType::F32 && arith_f32_fast(op, &x, rhs, alpha, &mut out)? {
        return Ok(());
    }
    match (op, rhs, num_kind(result)) {
        (Ar::Pow, Rhs::S(e), Kind::F32) => pow_scalar::<f32>(&x, e, &mut out)?,
        (Ar::Pow, Rhs::S(e), Kind::F64) => pow_scalar::<f64>(&x, e, &mut out)?,
        (_, _, k) => with_num!(k, T, arith_t::<T>(op, &x, rhs, alpha, &mut out)?),
    }
    renormalize(&mut out, result);
    Ok(())
}

/// Is `small` (leading 1s ignored) equal to the trailing dims of `big`?
fn is_trailing(small: &[usize], big: &[usize]) -> bool {
    let lead = small.iter().take_while(|&&d| d == 1).count();
    let s = &small[lead..];
    s.len() <= big.len() && s == &big[big.len() - s.len()..]
}

/// Is `small` equal to `big` except for a last dim of 1 (a per-row scalar)?
fn is_column(small: &[usize], big: &[usize]) -> bool {
    let n = big.len();
    n >= 2 && small.len() == n && small[..n - 1] == big[..n - 1] && small[n - 1] == 1
}

/// f32 fast path of [`arith`] on the shared slice kernels: all-f32 operands, `add`/`sub` with
/// alpha 1, `mul`, `div`, `maximum`, `minimum`, `pow` by a scalar; same-shape, scalar (or
/// one-element tensor), trailing row-vector and per-row-scalar operands. Returns `false`
/// (nothing written) for every other case, which the generic path then handles.
fn arith_f32_fast(
    op: Ar,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    alpha: Scalar,
    out: &mut TensorMut<'_>,
) -> Result<bool, KernelError> {
    if x.dtype() != DType::F32 || rhs.dtype() != DType::F32 && matches!(rhs, Rhs::T(_)) {
        return Ok(false);
    }
    if out.dtype() != DType::F32 {
        return Ok(false);
    }
    let one = match alpha {
        Scalar::Int(v) => v == 1,
        Scalar::Double(v) => v == 1.0,
        Scalar::Bool(v) => v,
    };
    let bop = match op {
        Ar::Add if one => vec::BinOp::Add,
        Ar::Sub if one => vec::BinOp::Sub,
        Ar::Mul => vec::BinOp::Mul,
        Ar::Div => vec::BinOp::Div,
        Ar::Max => vec::BinOp::Max,
        Ar::Min => vec::BinOp::Min,
        Ar::Pow => {
            let Rhs::S(e) = rhs else { return Ok(false) };
            if matches!(e, Scalar::Bool(_)) {
                return Ok(false);
            }
            let (xs, os) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
            vec::pow_scalar(xs, f32::from_scalar(e), os).map_err(|_| shape_err(out.arg()))?;
            return Ok(true);
        }
        _ => return Ok(false),
    };
    let bad = shape_err(out.arg());
    let xs = x.as_slice::<f32>()?;
    let od = *out.shape();
    let os = out.as_mut_slice::<f32>()?;
    let n = os.len();
    let r = match rhs {
        Rhs::S(s) if xs.len() == n => vec::binary_scalar(bop, xs, f32::from_scalar(s), os),
        Rhs::S(_) => return Ok(false),
        Rhs::T(y) => {
            let ys = y.as_slice::<f32>()?;
            let (xd, yd, od) = (x.dims(), y.dims(), od.dims());
            if xs.len() == n && ys.len() == n {
                vec::binary(bop, xs, ys, os)
            } else if xs.len() == n && ys.len() == 1 {
                vec::binary_scalar(bop, xs, ys[0], os)
            } else if ys.len() == n && xs.len() == 1 {
                vec::scalar_binary(bop, xs[0], ys, os)
            } else if xs.len() == n && is_trailing(yd, od) {
                vec::binary_row(bop, xs, ys, os)
            } else if ys.len() == n && is_trailing(xd, od) {
                vec::row_binary(bop, xs, ys, os)
            } else if xs.len() == n && xd == od && is_column(yd, od) {
                vec::binary_col(bop, xs, ys, os)
            } else {
                return Ok(false);
            }
        }
    };
    r.map_err(|_| bad)?;
    Ok(true)
}

fn arith_t<T: Num>(
    op: Ar,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    alpha: Scalar,
    out: &mut TensorMut<'_>,
) -> Res {
    let al = T::from_scalar(alpha);
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            match rhs {
                Rhs::T(y) => zip2::<T, T, T>(x, &y, out, f),
                Rhs::S(s) => {
                    let s = T::from_scalar(s);
                    map1::<T, T>(x, out, move |a| f(a, s))
                }
            }
        }};
    }
    let one = al == T::ONE;
    match op {
        Ar::Add if one => go!(|a: T, b: T| a.wadd(b)),
        Ar::Add => go!(move |a: T, b: T| a.wadd(al.wmul(b))),
        Ar::Sub if one => go!(|a: T, b: T| a.wsub(b)),
        Ar::Sub => go!(move |a: T, b: T| a.wsub(al.wmul(b))),
        Ar::RSub => go!(move |a: T, b: T| b.wsub(al.wmul(a))),
        Ar::Mul => go!(|a: T, b: T| a.wmul(b)),
        Ar::Div => go!(|a: T, b: T| a.quot(b)),
        Ar::DivTrunc => go!(|a: T, b: T| a.div_trunc(b)),
        Ar::DivFloor => go!(|a: T, b: T| a.div_floor(b)),
        Ar::Pow => go!(|a: T, b: T| a.power(b)),
        Ar::Max => go!(|a: T, b: T| a.max_nan(b)),
        Ar::Min => go!(|a: T, b: T| a.min_nan(b)),
        Ar::Rem => go!(|a: T, b: T| a.rem_floor(b)),
        Ar::Fmod => go!(|a: T, b: T| a.fmod(b)),
    }
}

/// Float `pow(tensor, scalar)` with ATen's exact shortcuts for common exponents.
fn pow_scalar<T: Float>(x: &TensorRef<'_>, e: Scalar, out: &mut TensorMut<'_>) -> Res {
    let special = match e {
        Scalar::Bool(_) => f64::NAN,
        _ => e.as_f64(),
    };
    let one = T::ONE;
    if special == 2.0 {
        map1::<T, T>(x, out, |a| a * a)
    } else if special == 3.0 {
        map1::<T, T>(x, out, |a| a * a * a)
    } else if special == 0.5 {
        map1::<T, T>(x, out, |a| a.sqrt())
    } else if special == -0.5 {
        map1::<T, T>(x, out, move |a| one / a.sqrt())
    } else if special == -1.0 {
        map1::<T, T>(x, out, move |a| one / a)
    } else if special == -2.0 {
        map1::<T, T>(x, out, move |a| one / (a * a))
    } else {
        let e = T::from_scalar(e);
        map1::<T, T>(x, out, move |a| a.power(e))
    }
}

/// `[self, other, (alpha,) out, out]` with a tensor `other`.
fn tensor_tensor(ctx: &mut Ctx<'_, '_, '_>, op: Ar, has_alpha: bool) -> Res {
    ctx.expect_args(if has_alpha { 5 } else { 4 })?;
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    let alpha = if has_alpha {
        ctx.scalar(2)?
    } else {
        Scalar::Int(1)
    };
    let out_arg = if has_alpha { 3 } else { 2 };
    arith(ctx, op, x, Rhs::T(y), 1, alpha, 2, out_arg)
}

/// `[self, Scalar other, (alpha,) out, out]`.
fn tensor_scalar(ctx: &mut Ctx<'_, '_, '_>, op: Ar, has_alpha: bool) -> Res {
    ctx.expect_args(if has_alpha { 5 } else { 4 })?;
    let x = ctx.input(0)?;
    let s = ctx.scalar(1)?;
    let alpha = if has_alpha {
        ctx.scalar(2)?
    } else {
        Scalar::Int(1)
    };
    let out_arg = if has_alpha { 3 } else { 2 };
    arith(ctx, op, x, Rhs::S(s), 1, alpha, 2, out_arg)
}

fn rounding_mode(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Ar, KernelError> {
    if ctx.is_none(arg)? {
        return Ok(Ar::Div);
    }
    match ctx.string(arg)? {
        "trunc" => Ok(Ar::DivTrunc),
        "floor" => Ok(Ar::DivFloor),
        _ => Err(KernelError::Value {
            arg,
            detail: "rounding_mode must be None, 'trunc' or 'floor'",
        }),
    }
}

/// `aten::add.out(self, other, *, alpha=1, out)`: `self + alpha·other`, broadcast. Any real
/// dtypes (bool adds as logical or); ATen promotion, cast to out's dtype; contiguous.
fn add_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Add, true)
}

/// `aten::sub.out(self, other, *, alpha=1, out)`: `self - alpha·other`, broadcast. Real
/// dtypes except bool; ATen promotion; contiguous.
fn sub_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Sub, true)
}

/// `aten::mul.out(self, other, *, out)`: broadcast product. Any real dtypes (bool = and);
/// ATen promotion; contiguous.
fn mul_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Mul, false)
}

/// `aten::div.out(self, other, *, out)`: true division, broadcast. Integer and bool inputs
/// divide in float32 (out must be floating); contiguous.
fn div_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Div, false)
}

/// `aten::div.out_mode(self, other, *, rounding_mode, out)`: `None` = true division,
/// `"trunc"` / `"floor"` round the quotient (integers stay integral; integer division by
/// zero is an error). Real dtypes; contiguous.
fn div_out_mode(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = rounding_mode(ctx, 2)?;
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    arith(ctx, op, x, Rhs::T(y), 1, Scalar::Int(1), 2, 3)
}

/// `aten::floor_divide.out(self, other, *, out)`: `floor(self / other)` (Python `//`),
/// broadcast. Integer and float dtypes (not bool); integer division by zero is an error.
fn floor_divide_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::DivFloor, false)
}

/// `aten::pow.Tensor_Tensor_out(self, exponent, *, out)`: broadcast power. Integer (exact,
/// wrapping) and float dtypes, not bool; contiguous.
fn pow_tt_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Pow, false)
}

/// `aten::maximum.out(self, other, *, out)`: elementwise max, NaN propagates. Real dtypes.
fn maximum_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Max, false)
}

/// `aten::minimum.out(self, other, *, out)`: elementwise min, NaN propagates. Real dtypes.
fn minimum_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Min, false)
}

/// `aten::remainder.Tensor_out(self, other, *, out)`: Python-style `%` (sign of `other`),
/// broadcast. Integer and float dtypes; integer division by zero is an error.
fn remainder_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Rem, false)
}

/// `aten::fmod.Tensor_out(self, other, *, out)`: C `fmod` (sign of `self`), broadcast.
/// Integer and float dtypes; integer division by zero is an error.
fn fmod_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_tensor(ctx, Ar::Fmod, false)
}

/// `aten::add.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `self + alpha·other`.
/// Real dtypes, scalar promotion (a float scalar makes integer input float32).
fn add_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Add, true)
}

/// `aten::sub.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `self - alpha·other`.
/// Real dtypes except bool.
fn sub_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Sub, true)
}

/// `aten::rsub.Scalar_out(self, Scalar other, Scalar alpha=1, *, out)`: `other - alpha·self`.
/// Real dtypes except bool.
fn rsub_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::RSub, true)
}

/// `aten::mul.Scalar_out(self, Scalar other, *, out)`. Real dtypes.
fn mul_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Mul, false)
}

/// `aten::div.Scalar_out(self, Scalar other, *, out)`: true division (integers → float32).
fn div_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Div, false)
}

/// `aten::div.Scalar_mode_out(self, Scalar other, *, rounding_mode, out)`: as `div.out_mode`.
fn div_scalar_mode_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = rounding_mode(ctx, 2)?;
    let x = ctx.input(0)?;
    let s = ctx.scalar(1)?;
    arith(ctx, op, x, Rhs::S(s), 1, Scalar::Int(1), 2, 3)
}

/// `aten::pow.Tensor_Scalar_out(self, Scalar exponent, *, out)`: float exponents 2, 3, 0.5,
/// -0.5, -1, -2 use exact multiplications / sqrt; integer tensors with integer exponents stay
/// integral (negative exponents are an error). Real dtypes.
fn pow_ts_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Pow, false)
}

/// `aten::remainder.Scalar_out(self, Scalar other, *, out)`: Python-style `%`.
/// Integer and float dtypes; integer division by zero is an error.
fn remainder_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Rem, false)
}

/// `aten::fmod.Scalar_out(self, Scalar other, *, out)`: C `fmod`.
/// Integer and float dtypes; integer division by zero is an error.
fn fmod_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    tensor_scalar(ctx, Ar::Fmod, false)
}

/// `aten::pow.Scalar_out(Scalar self, Tensor exponent, *, out)`: `self ** exponent`.
/// Integer (exact) and float dtypes, not bool.
fn pow_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let base = ctx.scalar(0)?;
    let e = ctx.input(1)?;
    let common = Promo::default().scalar(base).tensor(&e).result();
    if common == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(2)?, 2)?;
    let mut out = ctx.output(2, e.shape())?;
    with_num!(num_kind(common), T, {
        let b = T::from_scalar(base);
        map1::<T, T>(&e, &mut out, move |v| b.power(v))?
    });
    renormalize(&mut out, common);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cm {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

fn compare_t<T: Num>(op: Cm, x: &TensorRef<'_>, rhs: Rhs<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            match rhs {
                Rhs::T(y) => zip2::<T, T, bool>(x, &y, out, f),
                Rhs::S(s) => {
                    let s = T::from_scalar(s);
                    map1::<T, bool>(x, out, move |a| f(a, s))
                }
            }
        }};
    }
    match op {
        Cm::Eq => go!(|a: T, b: T| a == b),
        Cm::Ne => go!(|a: T, b: T| a != b),
        Cm::Lt => go!(|a: T, b: T| a < b),
        Cm::Le => go!(|a: T, b: T| a <= b),
        Cm::Gt => go!(|a: T, b: T| a > b),
        Cm::Ge => go!(|a: T, b: T| a >= b),
    }
}

/// Comparison kernels: `[self, other (Tensor or Scalar), out, out]`, compared in the
/// promoted dtype, result written as 0/1 in out's dtype (normally bool).
fn compare(ctx: &mut Ctx<'_, '_, '_>, op: Cm, scalar: bool) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let rhs = if scalar {
        Rhs::S(ctx.scalar(1)?)
    } else {
        Rhs::T(ctx.input(1)?)
    };
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(2, &shape)?;
    if out.dtype() == DType::Bool && compare_fast(op, &x, rhs, common, &mut out)? {
        return Ok(());
    }
    with_num!(num_kind(common), T, compare_t::<T>(op, &x, rhs, &mut out))
}

/// Same-shape / scalar comparisons of f32 or i64 tensors into a bool mask on the shared slice
/// kernels; `false` when the case is not covered.
fn compare_fast(
    op: Cm,
    x: &TensorRef<'_>,
    rhs: Rhs<'_>,
    common: DType,
    out: &mut TensorMut<'_>,
) -> Result<bool, KernelError> {
    let c = match op {
        Cm::Eq => vec::CmpOp::Eq,
        Cm::Ne => vec::CmpOp::Ne,
        Cm::Lt => vec::CmpOp::Lt,
        Cm::Le => vec::CmpOp::Le,
        Cm::Gt => vec::CmpOp::Gt,
        Cm::Ge => vec::CmpOp::Ge,
    };
    if x.dtype() != common || !matches!(common, DType::F32 | DType::I64) {
        return Ok(false);
    }
    let bad = shape_err(out.arg());
    let n = out.numel();
    macro_rules! go {
        ($t:ty) => {{
            let xs = x.as_slice::<$t>()?;
            if xs.len() != n {
                return Ok(false);
            }
            let r = match rhs {
                Rhs::T(y) if y.dtype() == common && y.numel() == n => {
                    let ys = y.as_slice::<$t>()?;
                    vec::compare(c, xs, ys, out.as_mut_slice::<u8>()?)
                }
                Rhs::S(s) => {
                    vec::compare_scalar(c, xs, <$t>::from_scalar(s), out.as_mut_slice::<u8>()?)
                }
                _ => return Ok(false),
            };
            r.map_err(|_| bad)?;
        }};
    }
    if common == DType::F32 {
        go!(f32)
    } else {
        go!(i64)
    }
    Ok(true)
}

macro_rules! cmp_kernels {
    ($($t:ident, $s:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".Tensor_out(self, other, *, out)`: broadcast ",
            "comparison in the promoted dtype (any real dtypes); out is normally bool (any ",
            "dtype receives 0/1). Contiguous.")]
        fn $t(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            compare(ctx, Cm::$op, false)
        }
        #[doc = concat!("`aten::", $doc, ".Scalar_out(self, Scalar other, *, out)`: ",
            "comparison with a scalar in the promoted dtype; out normally bool. Contiguous.")]
        fn $s(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            compare(ctx, Cm::$op, true)
        }
    )*};
}

cmp_kernels! {
    eq_tensor_out, eq_scalar_out, Eq, "eq";
    ne_tensor_out, ne_scalar_out, Ne, "ne";
    lt_tensor_out, lt_scalar_out, Lt, "lt";
    le_tensor_out, le_scalar_out, Le, "le";
    gt_tensor_out, gt_scalar_out, Gt, "gt";
    ge_tensor_out, ge_scalar_out, Ge, "ge";
}

// ---------------------------------------------------------------------------------------------
// Bitwise and logical
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bw {
    And,
    Or,
    Xor,
}

fn bitwise_t<T: Bits>(op: Bw, x: &TensorRef<'_>, rhs: Rhs<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            match rhs {
                Rhs::T(y) => zip2::<T, T, T>(x, &y, out, f),
                Rhs::S(s) => {
                    let s = T::from_scalar(s);
                    map1::<T, T>(x, out, move |a| f(a, s))
                }
            }
        }};
    }
    match op {
        Bw::And => go!(|a: T, b: T| a.and(b)),
        Bw::Or => go!(|a: T, b: T| a.or(b)),
        Bw::Xor => go!(|a: T, b: T| a.xor(b)),
    }
}

/// Bitwise kernels: `[self, other (Tensor or Scalar), out, out]`, integer and bool dtypes.
fn bitwise(ctx: &mut Ctx<'_, '_, '_>, op: Bw, scalar: bool) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let rhs = if scalar {
        Rhs::S(ctx.scalar(1)?)
    } else {
        Rhs::T(ctx.input(1)?)
    };
    let common = Promo::default().tensor(&x).rhs(rhs).result();
    if common.is_float() {
        let arg = if x.dtype().is_float() { 0 } else { 1 };
        return Err(KernelError::UnsupportedDType { arg, dtype: common });
    }
    check_cast(common, ctx.out_dtype(2)?, 2)?;
    let shape = match rhs {
        Rhs::T(y) => bshape(&x, &y)?,
        Rhs::S(_) => *x.shape(),
    };
    let mut out = ctx.output(2, &shape)?;
    if common == DType::Bool {
        bitwise_t::<bool>(op, &x, rhs, &mut out)?;
    } else {
        bitwise_t::<i64>(op, &x, rhs, &mut out)?;
        renormalize(&mut out, common);
    }
    Ok(())
}

/// `aten::bitwise_and.Tensor_out(self, other, *, out)`: broadcast `&` (bool: logical and).
/// Integer and bool dtypes; contiguous.
fn bitwise_and_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::And, false)
}
/// `aten::bitwise_or.Tensor_out(self, other, *, out)`: broadcast `|`. Integer and bool.
fn bitwise_or_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Or, false)
}
/// `aten::bitwise_xor.Tensor_out(self, other, *, out)`: broadcast `^`. Integer and bool.
fn bitwise_xor_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Xor, false)
}
/// `aten::bitwise_and.Scalar_out(self, Scalar other, *, out)`. Integer and bool (the scalar
/// must be Int or Bool).
fn bitwise_and_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::And, true)
}
/// `aten::bitwise_or.Scalar_out(self, Scalar other, *, out)`. Integer and bool.
fn bitwise_or_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Or, true)
}
/// `aten::bitwise_xor.Scalar_out(self, Scalar other, *, out)`. Integer and bool.
fn bitwise_xor_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    bitwise(ctx, Bw::Xor, true)
}

/// `aten::bitwise_not.out(self, *, out)`: `~x` (bool: logical not). Integer and bool dtypes.
fn bitwise_not_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let dt = x.dtype();
    if dt.is_float() {
        return Err(KernelError::UnsupportedDType { arg: 0, dtype: dt });
    }
    check_cast(dt, ctx.out_dtype(1)?, 1)?;
    let mut out = ctx.output(1, x.shape())?;
    if dt == DType::Bool {
        map1::<bool, bool>(&x, &mut out, |v| !v)
    } else {
        map1::<i64, i64>(&x, &mut out, |v| !v)?;
        renormalize(&mut out, dt);
        Ok(())
    }
}

/// Logical kernels: `[self, other, out, out]`, any dtypes (nonzero and NaN are true); out
/// receives 0/1 in its dtype.
fn logical(ctx: &mut Ctx<'_, '_, '_>, op: Bw) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input(0)?;
    let y = ctx.input(1)?;
    let shape = bshape(&x, &y)?;
    let mut out = ctx.output(2, &shape)?;
    match op {
        Bw::And => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a & b),
        Bw::Or => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a | b),
        Bw::Xor => zip2::<bool, bool, bool>(&x, &y, &mut out, |a, b| a ^ b),
    }
}

/// `aten::logical_and.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_and_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::And)
}
/// `aten::logical_or.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_or_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::Or)
}
/// `aten::logical_xor.out(self, other, *, out)`: broadcast; any dtypes, out any dtype (0/1).
fn logical_xor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    logical(ctx, Bw::Xor)
}

/// `aten::logical_not.out(self, *, out)`: `x == 0`; any dtypes, out any dtype (0/1).
fn logical_not_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(1, x.shape())?;
    if x.dtype() == DType::Bool && out.dtype() == DType::Bool {
        let (xs, os) = (x.as_slice::<u8>()?, out.as_mut_slice::<u8>()?);
        return vec::logical_not(xs, os).map_err(|_| shape_err(1));
    }
    map1::<bool, bool>(&x, &mut out, |v| !v)
}

// ---------------------------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------------------------

/// `aten::where.self_out(condition, self, other, *, out)`: `condition ? self : other`, all
/// three broadcast together. Condition bool (or uint8); self/other any dtypes, promoted;
/// contiguous.
fn where_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let c = ctx.input(0)?;
    let a = ctx.input(1)?;
    let b = ctx.input(2)?;
    if !matches!(c.dtype(), DType::Bool | DType::U8) {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: c.dtype(),
        });
    }
    let common = Promo::default().tensor(&a).tensor(&b).result();
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let shape = broadcast_shapes(c.shape(), &bshape(&a, &b)?).ok_or(shape_err(0))?;
    let mut out = ctx.output(3, &shape)?;
    let f32s = [a.dtype(), b.dtype(), out.dtype()] == [DType::F32; 3];
    if f32s && c.numel() == out.numel() {
        // Same-shape condition over f32 values: one select per element, or per element
        // between two broadcast scalars.
        let (cs, xs, ys) = (
            c.as_slice::<u8>()?,
            a.as_slice::<f32>()?,
            b.as_slice::<f32>()?,
        );
        let os = out.as_mut_slice::<f32>()?;
        let n = os.len();
        let r = if xs.len() == n && ys.len() == n {
            Some(vec::where_select(cs, xs, ys, os))
        } else if xs.len() == 1 && ys.len() == 1 {
            Some(vec::where_scalars(cs, xs[0], ys[0], os))
        } else {
            None
        };
        if let Some(r) = r {
            return r.map_err(|_| shape_err(3));
        }
    }
    with_ct!(
        kind(common),
        T,
        zip3::<bool, T, T, T>(&c, &a, &b, &mut out, |c, x, y| if c { x } else { y })?
    );
    renormalize(&mut out, common);
    Ok(())
}

/// `aten::masked_fill.Scalar_out(self, mask, Scalar value, *, out)`: `mask ? value : self`,
/// mask (bool) broadcast with self. Any self dtype (value cast to it); contiguous.
fn masked_fill_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let m = ctx.input(1)?;
    let value = ctx.scalar(2)?;
    if m.dtype() != DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 1,
            dtype: m.dtype(),
        });
    }
    let common = x.dtype();
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let shape = bshape(&x, &m)?;
    let mut out = ctx.output(3, &shape)?;
    with_ct!(kind(common), T, {
        let v = T::from_scalar(value);
        zip2::<T, bool, T>(&x, &m, &mut out, move |a, m| if m { v } else { a })?
    });
    renormalize(&mut out, common);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Unary math
// ---------------------------------------------------------------------------------------------

/// Unary float functions (integer and bool inputs compute in float32 unless noted).
#[derive(Clone, Copy, Debug)]
enum Uf {
    Tanh,
    Sigmoid,
    Exp,
    Expm1,
    Log,
    Log1p,
    Log2,
    Log10,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Reciprocal,
    Silu,
    GeluErf,
    GeluTanh,
    Elu {
        alpha: Scalar,
        scale: Scalar,
        input_scale: Scalar,
    },
    LeakyRelu(Scalar),
}

fn float_unary_t<T: Float>(op: Uf, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! m {
        ($f:expr) => {
            map1::<T, T>(x, out, $f)
        };
    }
    let one = T::ONE;
    match op {
        Uf::Tanh => m!(|v: T| v.tanh()),
        Uf::Sigmoid => m!(move |v: T| one / (one + (-v).exp())),
        Uf::Exp => m!(|v: T| v.exp()),
        Uf::Expm1 => m!(|v: T| v.expm1()),
        Uf::Log => m!(|v: T| v.ln()),
        Uf::Log1p => m!(|v: T| v.ln1p()),
        Uf::Log2 => m!(|v: T| v.log2()),
        Uf::Log10 => m!(|v: T| v.log10()),
        Uf::Sqrt => m!(|v: T| v.sqrt()),
        Uf::Rsqrt => m!(move |v: T| one / v.sqrt()),
        Uf::Sin => m!(|v: T| v.sin()),
        Uf::Cos => m!(|v: T| v.cos()),
        Uf::Tan => m!(|v: T| v.tan()),
        Uf::Sinh => m!(|v: T| v.sinh()),
        Uf::Cosh => m!(|v: T| v.cosh()),
        Uf::Asin => m!(|v: T| v.asin()),
        Uf::Acos => m!(|v: T| v.acos()),
        Uf::Atan => m!(|v: T| v.atan()),
        Uf::Asinh => m!(|v: T| v.asinh()),
        Uf::Acosh => m!(|v: T| v.acosh()),
        Uf::Atanh => m!(|v: T| v.atanh()),
        Uf::Erf => m!(|v: T| v.erf()),
        Uf::Reciprocal => m!(move |v: T| one / v),
        Uf::Silu => m!(move |v: T| v / (one + (-v).exp())),
        Uf::GeluErf => {
            let k = T::from_f64(core::f64::consts::FRAC_1_SQRT_2);
            let h = T::from_f64(0.5);
            m!(move |v: T| v * h * (one + (v * k).erf()))
        }
        Uf::GeluTanh => {
            let beta =
                T::from_f64(core::f64::consts::SQRT_2 * core::f64::consts::FRAC_2_SQRT_PI * 0.5);
            let kappa = T::from_f64(0.044715);
            let h = T::from_f64(0.5);
            m!(move |v: T| {
                let cube = v * v * v;
                let inner = beta * (v + kappa * cube);
                h * v * (one + inner.tanh())
            })
        }
        Uf::Elu {
            alpha,
            scale,
            input_scale,
        } => {
            let neg = T::from_scalar(alpha) * T::from_scalar(scale);
            let pos = T::from_scalar(scale);
            let ins = T::from_scalar(input_scale);
            let zero = T::ZERO;
            m!(move |v: T| if v <= zero {
                (v * ins).expm1() * neg
            } else {
                v * pos
            })
        }
        Uf::LeakyRelu(s) => {
            let s = T::from_scalar(s);
            let zero = T::ZERO;
            m!(move |v: T| if v > zero { v } else { v * s })
        }
    }
}

/// f32 → f32 fast path on the shared polynomial slice kernels (`kernels::vec`, accuracy table
/// there). Returns `false` when `op` has no such kernel.
fn vec_unary(op: Uf, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Result<bool, KernelError> {
    let f: fn(&[f32], &mut [f32]) -> Res = match op {
        Uf::Tanh => vec::tanh,
        Uf::Sigmoid => vec::sigmoid,
        Uf::Exp => vec::exp,
        Uf::GeluTanh => vec::gelu_tanh,
        Uf::GeluErf => vec::gelu_erf,
        _ => return Ok(false),
    };
    let (xs, os) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
    f(xs, os).map_err(|_| KernelError::Shape {
        arg: out.arg(),
        detail: "output shape differs from input",
    })?;
    Ok(true)
}

/// Shared body of the float unary kernels: `[self, (params...,) out, out]` with the out at
/// `out_arg`. Float inputs keep their type (f16/bf16 computed in f32); integer/bool inputs
/// compute in float32 when `ints` is set and are rejected otherwise.
fn float_unary(ctx: &mut Ctx<'_, '_, '_>, op: Uf, ints: bool, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    let common = if x.dtype().is_float() {
        x.dtype()
    } else if ints {
        DType::F32
    } else {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: x.dtype(),
        });
    };
    check_cast(common, ctx.out_dtype(out_arg)?, out_arg)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    if x.dtype() == DType::F32 && out.dtype() == DType::F32 && vec_unary(op, &x, &mut out)? {
        return Ok(());
    }
    if common == DType::F64 {
        float_unary_t::<f64>(op, &x, &mut out)?;
    } else {
        float_unary_t::<f32>(op, &x, &mut out)?;
    }
    renormalize(&mut out, common);
    Ok(())
}

macro_rules! float_unary_kernels {
    ($($f:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".out(self, *, out)`: elementwise; float dtypes ",
            "(f16/bf16 computed in f32), integer and bool inputs compute in float32. ",
            "Contiguous.")]
        fn $f(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            float_unary(ctx, Uf::$op, true, 1)
        }
    )*};
}

float_unary_kernels! {
    tanh_out, Tanh, "tanh";
    sigmoid_out, Sigmoid, "sigmoid";
    exp_out, Exp, "exp";
    expm1_out, Expm1, "expm1";
    log_out, Log, "log";
    log1p_out, Log1p, "log1p";
    log2_out, Log2, "log2";
    log10_out, Log10, "log10";
    sqrt_out, Sqrt, "sqrt";
    rsqrt_out, Rsqrt, "rsqrt";
    sin_out, Sin, "sin";
    cos_out, Cos, "cos";
    tan_out, Tan, "tan";
    sinh_out, Sinh, "sinh";
    cosh_out, Cosh, "cosh";
    asin_out, Asin, "asin";
    acos_out, Acos, "acos";
    atan_out, Atan, "atan";
    asinh_out, Asinh, "asinh";
    acosh_out, Acosh, "acosh";
    atanh_out, Atanh, "atanh";
    erf_out, Erf, "erf";
    reciprocal_out, Reciprocal, "reciprocal";
}

/// `aten::silu.out(self, *, out)`: `x / (1 + exp(-x))`. Float dtypes only.
fn silu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_unary(ctx, Uf::Silu, false, 1)
}

/// `aten::gelu.out(self, *, approximate="none", out)`: `"none"` = `x·½(1+erf(x/√2))`,
/// `"tanh"` = tanh approximation. Float dtypes only; contiguous.
fn gelu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let op = match ctx.string(1)? {
        "none" => Uf::GeluErf,
        "tanh" => Uf::GeluTanh,
        _ => {
            return Err(KernelError::Value {
                arg: 1,
                detail: "approximate must be 'none' or 'tanh'",
            })
        }
    };
    float_unary(ctx, op, false, 2)
}

/// `aten::elu.out(self, alpha=1, scale=1, input_scale=1, *, out)`:
/// `x > 0 ? scale·x : alpha·scale·(exp(input_scale·x) − 1)`. Float dtypes only.
fn elu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(6)?;
    let op = Uf::Elu {
        alpha: ctx.scalar(1)?,
        scale: ctx.scalar(2)?,
        input_scale: ctx.scalar(3)?,
    };
    float_unary(ctx, op, false, 4)
}

/// `aten::leaky_relu.out(self, negative_slope=0.01, *, out)`: `x > 0 ? x : slope·x`.
/// Float dtypes only.
fn leaky_relu_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let op = Uf::LeakyRelu(ctx.scalar(1)?);
    float_unary(ctx, op, false, 2)
}

/// Unary ops that keep the input's dtype (integers allowed).
#[derive(Clone, Copy, Debug)]
enum Uk {
    Neg,
    Abs,
    Relu,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
    Clamp(Option<Scalar>, Option<Scalar>),
}

fn keep_unary_t<T: Num>(op: Uk, x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    macro_rules! m {
        ($f:expr) => {
            map1::<T, T>(x, out, $f)
        };
    }
    let zero = T::ZERO;
    match op {
        Uk::Neg => m!(|v: T| v.negate()),
        Uk::Abs => m!(|v: T| v.absolute()),
        Uk::Relu => m!(move |v: T| if v < zero { zero } else { v }),
        Uk::Floor => m!(|v: T| v.floor()),
        Uk::Ceil => m!(|v: T| v.ceil()),
        Uk::Round => m!(|v: T| v.round()),
        Uk::Trunc => m!(|v: T| v.trunc()),
        Uk::Sign => m!(|v: T| v.sign()),
        Uk::Clamp(Some(lo), Some(hi)) => {
            let (lo, hi) = (T::from_scalar(lo), T::from_scalar(hi));
            m!(move |v: T| v.max_nan(lo).min_nan(hi))
        }
        Uk::Clamp(Some(lo), None) => {
            let lo = T::from_scalar(lo);
            m!(move |v: T| v.max_nan(lo))
        }
        Uk::Clamp(None, Some(hi)) => {
            let hi = T::from_scalar(hi);
            m!(move |v: T| v.min_nan(hi))
        }
        Uk::Clamp(None, None) => Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        }),
    }
}

/// Shared body of the dtype-keeping unary kernels (out at `out_arg`). Bool is rejected
/// except by `sign`.
fn keep_unary(ctx: &mut Ctx<'_, '_, '_>, op: Uk, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    if let Uk::Clamp(None, None) = op {
        return Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        });
    }
    let common = match op {
        Uk::Clamp(lo, hi) => {
            let mut p = Promo::default().tensor(&x);
            if let Some(s) = lo {
                p = p.scalar(s);
            }
            if let Some(s) = hi {
                p = p.scalar(s);
            }
            p.result()
        }
        _ => x.dtype(),
    };
    if common == DType::Bool && !matches!(op, Uk::Sign) {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(out_arg)?, out_arg)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    with_num!(num_kind(common), T, keep_unary_t::<T>(op, &x, &mut out)?);
    renormalize(&mut out, common);
    Ok(())
}

macro_rules! keep_unary_kernels {
    ($($f:ident, $op:ident, $doc:literal;)*) => {$(
        #[doc = concat!("`aten::", $doc, ".out(self, *, out)`: elementwise, result keeps ",
            "the input dtype (integers and floats; bool rejected except by sign). Contiguous.")]
        fn $f(ctx: &mut Ctx<'_, '_, '_>) -> Res {
            keep_unary(ctx, Uk::$op, 1)
        }
    )*};
}

keep_unary_kernels! {
    neg_out, Neg, "neg";
    abs_out, Abs, "abs";
    relu_out, Relu, "relu";
    floor_out, Floor, "floor";
    ceil_out, Ceil, "ceil";
    round_out, Round, "round";
    trunc_out, Trunc, "trunc";
    sign_out, Sign, "sign";
}

/// `aten::clamp.out(self, Scalar? min=None, Scalar? max=None, *, out)`:
/// `min(max(x, min), max)`, NaN propagates, at least one bound. Real dtypes except bool;
/// promoted with the scalars (a float bound makes an integer input float32).
fn clamp_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = Uk::Clamp(ctx.opt_scalar(1)?, ctx.opt_scalar(2)?);
    keep_unary(ctx, op, 3)
}

/// `aten::hardtanh.out(self, min_val=-1, max_val=1, *, out)`: clamp to `[min_val, max_val]`.
/// Real dtypes except bool.
fn hardtanh_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let op = Uk::Clamp(Some(ctx.scalar(1)?), Some(ctx.scalar(2)?));
    keep_unary(ctx, op, 3)
}

fn clamp_tensor_t<T: Num>(
    x: &TensorRef<'_>,
    lo: Option<TensorRef<'_>>,
    hi: Option<TensorRef<'_>>,
    out: &mut TensorMut<'_>,
) -> Res {
    match (lo, hi) {
        (Some(l), Some(h)) => zip3::<T, T, T, T>(x, &l, &h, out, |v, l, h| v.max_nan(l).min_nan(h)),
        (Some(l), None) => zip2::<T, T, T>(x, &l, out, |v, l| v.max_nan(l)),
        (None, Some(h)) => zip2::<T, T, T>(x, &h, out, |v, h| v.min_nan(h)),
        (None, None) => Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        }),
    }
}

/// `aten::clamp.Tensor_out(self, Tensor? min=None, Tensor? max=None, *, out)`: clamp with
/// tensor bounds, all broadcast together, NaN propagates from any operand. Real dtypes
/// except bool, promoted; contiguous.
fn clamp_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input(0)?;
    let lo = ctx.opt_input(1)?;
    let hi = ctx.opt_input(2)?;
    let mut p = Promo::default().tensor(&x);
    let mut shape = *x.shape();
    for t in [lo, hi].iter().flatten() {
        p = p.tensor(t);
        shape = broadcast_shapes(&shape, t.shape()).ok_or(shape_err(t.arg()))?;
    }
    if lo.is_none() && hi.is_none() {
        return Err(KernelError::Value {
            arg: 1,
            detail: "at least one of min or max must not be None",
        });
    }
    let common = p.result();
    if common == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: 0,
            dtype: DType::Bool,
        });
    }
    check_cast(common, ctx.out_dtype(3)?, 3)?;
    let mut out = ctx.output(3, &shape)?;
    with_num!(
        num_kind(common),
        T,
        clamp_tensor_t::<T>(&x, lo, hi, &mut out)?
    );
    renormalize(&mut out, common);
    Ok(())
}

/// `isnan` / `isinf` body: any input dtype (integers give false), out any dtype (0/1).
fn float_test(ctx: &mut Ctx<'_, '_, '_>, inf: bool) -> Res {
    ctx.expect_args(3)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(1, x.shape())?;
    match (kind(x.dtype()), inf) {
        (Kind::F32, false) => map1::<f32, bool>(&x, &mut out, |v| v.nan()),
        (Kind::F32, true) => map1::<f32, bool>(&x, &mut out, |v| v.inf()),
        (Kind::F64, false) => map1::<f64, bool>(&x, &mut out, |v| v.nan()),
        (Kind::F64, true) => map1::<f64, bool>(&x, &mut out, |v| v.inf()),
        _ => map1::<bool, bool>(&x, &mut out, |_| false),
    }
}

/// `aten::isnan.out(self, *, out)`: any dtype in, 0/1 out (normally bool). Contiguous.
fn isnan_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_test(ctx, false)
}

/// `aten::isinf.out(self, *, out)`: any dtype in, 0/1 out (normally bool). Contiguous.
fn isinf_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    float_test(ctx, true)
}

// ---------------------------------------------------------------------------------------------
// Fills and ranges
// ---------------------------------------------------------------------------------------------

/// The bytes of `s` converted to `dt` (C++ `static_cast`; floats through f32 for halves).
fn scalar_bytes(s: Scalar, dt: DType) -> [u8; 8] {
    let mut b = [0u8; 8];
    with_ct!(kind(dt), T, T::from_scalar(s).store(dt, &mut b, 0));
    b
}

/// Writes `s` (converted to out's dtype) into every element of `out`.
fn fill(out: &mut TensorMut<'_>, s: Scalar) {
    let dt = out.dtype();
    let pat = scalar_bytes(s, dt);
    let pat = &pat[..dt.size()];
    for c in out.bytes_mut().chunks_exact_mut(pat.len()) {
        c.copy_from_slice(pat);
    }
}

/// Shape from an `int[] size` argument (negative sizes rejected).
fn size_arg(ctx: &Ctx<'_, '_, '_>, arg: usize) -> Result<Shape, KernelError> {
    let list = ctx.int_list(arg)?;
    let mut s = Shape::scalar();
    for &d in list.iter() {
        if d < 0 {
            return Err(KernelError::Value {
                arg,
                detail: "negative dimension",
            });
        }
        s.push(d as usize).ok_or(KernelError::Shape {
            arg,
            detail: "rank exceeds 16",
        })?;
    }
    Ok(s)
}

/// `aten::full.out(int[] size, Scalar fill_value, *, out)`: out of shape `size`, every
/// element `fill_value` cast to out's dtype (any dtype).
fn full_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let shape = size_arg(ctx, 0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(2, &shape)?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::zeros.out(int[] size, *, out)`: any dtype.
fn zeros_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let shape = size_arg(ctx, 0)?;
    let mut out = ctx.output(1, &shape)?;
    fill(&mut out, Scalar::Int(0));
    Ok(())
}

/// `aten::ones.out(int[] size, *, out)`: any dtype.
fn ones_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let shape = size_arg(ctx, 0)?;
    let mut out = ctx.output(1, &shape)?;
    fill(&mut out, Scalar::Int(1));
    Ok(())
}

/// `aten::full_like.out(self, Scalar fill_value, *, MemoryFormat? memory_format=None, out)`:
/// out of self's shape filled with `fill_value` (any dtypes; self's data is not read).
fn full_like_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(3, x.shape())?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::fill.Scalar_out(self, Scalar value, *, out)`: out of self's shape filled with
/// `value` (any dtypes; self's data is not read).
fn fill_scalar_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.scalar(1)?;
    let mut out = ctx.output(2, x.shape())?;
    fill(&mut out, v);
    Ok(())
}

/// `aten::fill.Tensor_out(self, Tensor value, *, out)`: like `fill.Scalar_out` with a
/// zero-dim `value` tensor (any dtype).
fn fill_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(4)?;
    let x = ctx.input_any_order(0)?;
    let v = ctx.input(1)?;
    if v.rank() != 0 {
        return Err(KernelError::Shape {
            arg: 1,
            detail: "fill value must be a zero-dim tensor",
        });
    }
    let s = match v.dtype() {
        DType::Bool => Scalar::Bool(v.get_i64(0) != 0),
        d if d.is_float() => Scalar::Double(v.get_f64(0)),
        _ => Scalar::Int(v.get_i64(0)),
    };
    let mut out = ctx.output(2, x.shape())?;
    fill(&mut out, s);
    Ok(())
}

/// `aten::scalar_tensor.out(Scalar s, *, out)`: rank-0 out holding `s` in out's dtype.
fn scalar_tensor_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let v = ctx.scalar(0)?;
    let mut out = ctx.output(1, &Shape::scalar())?;
    fill(&mut out, v);
    Ok(())
}

/// ATen `arange` on `[start, end)` by `step` into the out at `out_arg`. Length: for an int64
/// out with integral scalars, exact integer arithmetic; otherwise `ceil((end−start)/step)` in
/// f64. Values `start + i·step` in i64 (integer outs; scalars truncated) or f64 (f32 in f16/bf16).
fn arange_impl(
    ctx: &mut Ctx<'_, '_, '_>,
    start: Scalar,
    end: Scalar,
    step: Scalar,
    step_arg: usize,
    out_arg: usize,
) -> Res {
    let od = ctx.out_dtype(out_arg)?;
    if od == DType::Bool {
        return Err(KernelError::UnsupportedDType {
            arg: out_arg,
            dtype: od,
        });
    }
    let (ds, de, dp) = (start.as_f64(), end.as_f64(), step.as_f64());
    if dp == 0.0 || dp.is_nan() {
        return Err(KernelError::Value {
            arg: step_arg,
            detail: "step must be nonzero",
        });
    }
    if !ds.is_finite() || !de.is_finite() {
        return Err(KernelError::Value {
            arg: 0,
            detail: "unsupported range (non-finite bound)",
        });
    }
    if !((dp > 0.0 && de >= ds) || (dp < 0.0 && de <= ds)) {
        return Err(KernelError::Value {
            arg: step_arg,
            detail: "upper bound and lower bound inconsistent with step sign",
        });
    }
    let integral = |s: Scalar| matches!(s, Scalar::Int(_));
    let len: u64 = if od == DType::I64 && integral(start) && integral(end) && integral(step) {
        let (s, e, p) = (
            start.as_i64() as i128,
            end.as_i64() as i128,
            step.as_i64() as i128,
        );
        let n = (e - s + p - p.signum()) / p;
        u64::try_from(n).map_err(|_| KernelError::Value {
            arg: 0,
            detail: "invalid arange size",
        })?
    } else {
        let d = libm::ceil((de - ds) / dp);
        if !(d >= 0.0 && d <= i64::MAX as f64) {
            return Err(KernelError::Value {
                arg: 0,
                detail: "invalid arange size",
            });
        }
        d as u64
    };
    let len = usize::try_from(len).map_err(|_| KernelError::Value {
        arg: 0,
        detail: "invalid arange size",
    })?;
    let shape = Shape::new(&[len]).ok_or(KernelError::Value {
        arg: 0,
        detail: "invalid arange size",
    })?;
    let mut out = ctx.output(out_arg, &shape)?;
    match od {
        DType::F32 => {
            for (i, o) in out.as_mut_slice::<f32>()?.iter_mut().enumerate() {
                *o = (ds + dp * i as f64) as f32;
            }
        }
        DType::F16 | DType::BF16 => {
            let (s, p) = (ds as f32, dp as f32);
            let b = out.bytes_mut();
            for i in 0..len {
                write_f64(od, b, i, (s + p * i as f32) as f64);
            }
        }
        DType::F64 => {
            for (i, o) in out.as_mut_slice::<f64>()?.iter_mut().enumerate() {
                *o = ds + dp * i as f64;
            }
        }
        _ => {
            let (s, p) = (start.as_i64(), step.as_i64());
            let b = out.bytes_mut();
            for i in 0..len {
                write_i64(od, b, i, s.wrapping_add(p.wrapping_mul(i as i64)));
            }
        }
    }
    Ok(())
}

/// `aten::arange.out(Scalar end, *, out)`: `0, 1, .., end-1` in out's dtype (not bool).
fn arange_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(3)?;
    let end = ctx.scalar(0)?;
    arange_impl(ctx, Scalar::Int(0), end, Scalar::Int(1), 0, 1)
}

/// `aten::arange.start_out(Scalar start, Scalar end, Scalar step=1, *, out)`: ATen length
/// rule and values in out's dtype (integers exact; not bool).
fn arange_start_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    ctx.expect_args(5)?;
    let start = ctx.scalar(0)?;
    let end = ctx.scalar(1)?;
    let step = ctx.scalar(2)?;
    arange_impl(ctx, start, end, step, 2, 3)
}

// ---------------------------------------------------------------------------------------------
// Casts and copies
// ---------------------------------------------------------------------------------------------

/// Elementwise copy of `x` into `out` (same numel) converting to out's dtype like C++
/// `static_cast` (float → int truncates, nonzero/NaN → true).
fn cast_copy(x: &TensorRef<'_>, out: &mut TensorMut<'_>) -> Res {
    if x.dtype() == out.dtype() {
        let src = x.bytes();
        let dst = out.bytes_mut();
        if src.len() != dst.len() {
            return Err(KernelError::Shape {
                arg: out.arg(),
                detail: "output shape differs from input",
            });
        }
        dst.copy_from_slice(src);
        return Ok(());
    }
    with_ct!(
        kind(x.dtype()),
        A,
        with_ct!(
            kind(out.dtype()),
            U,
            map1::<A, U>(x, out, |v| v.cast::<U>())
        )
    )
}

/// Copy kernels: `[self, (ignored args...), out, out]` with the out at `out_arg`.
fn copy_kernel(ctx: &mut Ctx<'_, '_, '_>, out_arg: usize) -> Res {
    ctx.expect_args(out_arg + 2)?;
    let x = ctx.input(0)?;
    let mut out = ctx.output(out_arg, x.shape())?;
    cast_copy(&x, &mut out)
}

/// `aten::_to_copy.out(self, *, bool non_blocking=False, MemoryFormat? memory_format=None,
/// out)`: copy converted to out's dtype (any dtypes). Contiguous.
fn to_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 3)
}

/// `aten::clone.out(self, *, MemoryFormat? memory_format=None, out)`: copy (converted to
/// out's dtype). Contiguous.
fn clone_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 2)
}

/// `aten::alias_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn alias_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

/// `aten::detach_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn detach_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

/// `aten::lift_fresh_copy.out(self, *, out)`: copy (converted to out's dtype). Contiguous.
fn lift_fresh_copy_out(ctx: &mut Ctx<'_, '_, '_>) -> Res {
    copy_kernel(ctx, 1)
}

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

pub static KERNELS: &[KernelDef] = &[
    // binary arithmetic
    KernelDef::new("aten::add.out", add_out),
    KernelDef::new("aten::sub.out", sub_out),
    KernelDef::new("aten::mul.out", mul_out),
    KernelDef::new("aten::div.out", div_out),
    KernelDef::new("aten::div.out_mode", div_out_mode),
    KernelDef::new("aten::floor_divide.out", floor_divide_out),
    KernelDef::new("aten::pow.Tensor_Tensor_out", pow_tt_out),
    KernelDef::new("aten::maximum.out", maximum_out),
    KernelDef::new("aten::minimum.out", minimum_out),
    KernelDef::new("aten::remainder.Tensor_out", remainder_tensor_out),
    KernelDef::new("aten::fmod.Tensor_out", fmod_tensor_out),
    KernelDef::new("aten::add.Scalar_out", add_scalar_out),
    KernelDef::new("aten::sub.Scalar_out", sub_scalar_out),
    KernelDef::new("aten::rsub.Scalar_out", rsub_scalar_out),
    KernelDef::new("aten::mul.Scalar_out", mul_scalar_out),
    KernelDef::new("aten::div.Scalar_out", div_scalar_out),
    KernelDef::new("aten::div.Scalar_mode_out", div_scalar_mode_out),
    KernelDef::new("aten::pow.Tensor_Scalar_out", pow_ts_out),
    KernelDef::new("aten::pow.Scalar_out", pow_scalar_out),
    KernelDef::new("aten::remainder.Scalar_out", remainder_scalar_out),
    KernelDef::new("aten::fmod.Scalar_out", fmod_scalar_out),
    // comparisons
    KernelDef::new("aten::eq.Tensor_out", eq_tensor_out),
    KernelDef::new("aten::ne.Tensor_out", ne_tensor_out),
    KernelDef::new("aten::lt.Tensor_out", lt_tensor_out),
    KernelDef::new("aten::le.Tensor_out", le_tensor_out),
    KernelDef::new("aten::gt.Tensor_out", gt_tensor_out),
    KernelDef::new("aten::ge.Tensor_out", ge_tensor_out),
    KernelDef::new("aten::eq.Scalar_out", eq_scalar_out),
    KernelDef::new("aten::ne.Scalar_out", ne_scalar_out),
    KernelDef::new("aten::lt.Scalar_out", lt_scalar_out),
    KernelDef::new("aten::le.Scalar_out", le_scalar_out),
    KernelDef::new("aten::gt.Scalar_out", gt_scalar_out),
    KernelDef::new("aten::ge.Scalar_out", ge_scalar_out),
    // logic / bitwise
    KernelDef::new("aten::bitwise_and.Tensor_out", bitwise_and_tensor_out),
    KernelDef::new("aten::bitwise_or.Tensor_out", bitwise_or_tensor_out),
    KernelDef::new("aten::bitwise_xor.Tensor_out", bitwise_xor_tensor_out),
    KernelDef::new("aten::bitwise_and.Scalar_out", bitwise_and_scalar_out),
    KernelDef::new("aten::bitwise_or.Scalar_out", bitwise_or_scalar_out),
    KernelDef::new("aten::bitwise_xor.Scalar_out", bitwise_xor_scalar_out),
    KernelDef::new("aten::bitwise_not.out", bitwise_not_out),
    KernelDef::new("aten::logical_and.out", logical_and_out),
    KernelDef::new("aten::logical_or.out", logical_or_out),
    KernelDef::new("aten::logical_xor.out", logical_xor_out),
    KernelDef::new("aten::logical_not.out", logical_not_out),
    // selection
    KernelDef::new("aten::where.self_out", where_out),
    KernelDef::new("aten::masked_fill.Scalar_out", masked_fill_scalar_out),
    // unary
    KernelDef::new("aten::tanh.out", tanh_out),
    KernelDef::new("aten::sigmoid.out", sigmoid_out),
    KernelDef::new("aten::exp.out", exp_out),
    KernelDef::new("aten::expm1.out", expm1_out),
    KernelDef::new("aten::log.out", log_out),
    KernelDef::new("aten::log1p.out", log1p_out),
    KernelDef::new("aten::log2.out", log2_out),
    KernelDef::new("aten::log10.out", log10_out),
    KernelDef::new("aten::sqrt.out", sqrt_out),
    KernelDef::new("aten::rsqrt.out", rsqrt_out),
    KernelDef::new("aten::sin.out", sin_out),
    KernelDef::new("aten::cos.out", cos_out),
    KernelDef::new("aten::tan.out", tan_out),
    KernelDef::new("aten::sinh.out", sinh_out),
    KernelDef::new("aten::cosh.out", cosh_out),
    KernelDef::new("aten::asin.out", asin_out),
    KernelDef::new("aten::acos.out", acos_out),
    KernelDef::new("aten::atan.out", atan_out),
    KernelDef::new("aten::asinh.out", asinh_out),
    KernelDef::new("aten::acosh.out", acosh_out),
    KernelDef::new("aten::atanh.out", atanh_out),
    KernelDef::new("aten::erf.out", erf_out),
    KernelDef::new("aten::reciprocal.out", reciprocal_out),
    KernelDef::new("aten::silu.out", silu_out),
    KernelDef::new("aten::gelu.out", gelu_out),
    KernelDef::new("aten::elu.out", elu_out),
    KernelDef::new("aten::leaky_relu.out", leaky_relu_out),
    KernelDef::new("aten::neg.out", neg_out),
    KernelDef::new("aten::abs.out", abs_out),
    KernelDef::new("aten::relu.out", relu_out),
    KernelDef::new("aten::floor.out", floor_out),
    KernelDef::new("aten::ceil.out", ceil_out),
    KernelDef::new("aten::round.out", round_out),
    KernelDef::new("aten::trunc.out", trunc_out),
    KernelDef::new("aten::sign.out", sign_out),
    KernelDef::new("aten::clamp.out", clamp_out),
    KernelDef::new("aten::clamp.Tensor_out", clamp_tensor_out),
    KernelDef::new("aten::hardtanh.out", hardtanh_out),
    KernelDef::new("aten::isnan.out", isnan_out),
    KernelDef::new("aten::isinf.out", isinf_out),
    // fills and ranges
    KernelDef::new("aten::full.out", full_out),
    KernelDef::new("aten::full_like.out", full_like_out),
    KernelDef::new("aten::zeros.out", zeros_out),
    KernelDef::new("aten::ones.out", ones_out),
    KernelDef::new("aten::scalar_tensor.out", scalar_tensor_out),
    KernelDef::new("aten::fill.Scalar_out", fill_scalar_out),
    KernelDef::new("aten::fill.Tensor_out", fill_tensor_out),
    KernelDef::new("aten::arange.out", arange_out),
    KernelDef::new("aten::arange.start_out", arange_start_out),
    // casts and copies
    KernelDef::new("aten::_to_copy.out", to_copy_out),
    KernelDef::new("aten::clone.out", clone_out),
    KernelDef::new("aten::alias_copy.out", alias_copy_out),
    KernelDef::new("aten::detach_copy.out", detach_copy_out),
    KernelDef::new("aten::lift_fresh_copy.out", lift_fresh_copy_out),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::tensor::{f16_to_f32, f32_to_f16};
    use crate::testing::{broadcast_dims, broadcast_index, OpTest, TestTensor};
    use std::string::String;
    use std::vec::Vec;

    // ----- harness helpers -----------------------------------------------------------------

    /// One call argument.
    #[derive(Clone)]
    enum A {
        F(Vec<usize>, Vec<f32>),
        D(Vec<usize>, Vec<f64>),
        I(Vec<usize>, Vec<i64>),
        B(Vec<usize>, Vec<bool>),
        Raw(DType, Vec<usize>, Vec<u8>),
        Int(i64),
        Dbl(f64),
        Bo(bool),
        Non,
        Str(&'static str),
        List(Vec<i64>),
        Out(DType, Vec<usize>),
        OutDyn(DType, Vec<usize>),
    }

    fn f(shape: &[usize], v: &[f32]) -> A {
        A::F(shape.to_vec(), v.to_vec())
    }
    fn i(shape: &[usize], v: &[i64]) -> A {
        A::I(shape.to_vec(), v.to_vec())
    }
    fn b(shape: &[usize], v: &[bool]) -> A {
        A::B(shape.to_vec(), v.to_vec())
    }
    fn out(dt: DType, shape: &[usize]) -> A {
        A::Out(dt, shape.to_vec())
    }

    /// Runs `key` with `args`; the last output argument is appended again (the return).
    fn run(key: &str, args: &[A]) -> Result<Vec<TestTensor>, Error> {
        let mut t = OpTest::new(key);
        let mut ids = Vec::new();
        let mut last_out = None;
        for a in args {
            let id = match a.clone() {
                A::F(s, v) => t.input_f32(&s, &v),
                A::D(s, v) => t.input_f64(&s, &v),
                A::I(s, v) => t.input_i64(&s, &v),
                A::B(s, v) => t.input_bool(&s, &v),
                A::Raw(d, s, v) => t.input(d, &s, &v),
                A::Int(v) => t.int(v),
                A::Dbl(v) => t.double(v),
                A::Bo(v) => t.boolean(v),
                A::Non => t.none(),
                A::Str(s) => t.string(s),
                A::List(v) => t.int_list(&v),
                A::Out(d, s) => {
                    let o = t.output(d, &s);
                    last_out = Some(o);
                    o
                }
                A::OutDyn(d, s) => {
                    let o = t.output_dynamic(d, &s);
                    last_out = Some(o);
                    o
                }
            };
            ids.push(id);
        }
        ids.push(last_out.expect("an output"));
        t.call(&ids);
        t.run()
    }

    fn run1(key: &str, args: &[A]) -> TestTensor {
        match run(key, args) {
            Ok(mut v) => v.remove(0),
            Err(e) => panic!("{key}: {e}"),
        }
    }

    fn kerr(key: &str, args: &[A]) -> KernelError {
        match run(key, args) {
            Err(Error::Kernel { source, .. }) => source,
            Err(e) => panic!("{key}: expected a kernel error, got {e}"),
            Ok(_) => panic!("{key}: expected a kernel error, got success"),
        }
    }

    /// Deterministic pseudo-random data (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
            (0..n)
                .map(|_| lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32))
                .collect()
        }
        fn i64s(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
            (0..n)
                .map(|_| lo + (self.next() % (hi - lo + 1) as u64) as i64)
                .collect()
        }
        fn bools(&mut self, n: usize) -> Vec<bool> {
            (0..n).map(|_| self.next() & 1 == 1).collect()
        }
    }

    fn numel(s: &[usize]) -> usize {
        s.iter().product()
    }

    /// Reference NumPy broadcast of shapes.
    fn bshape_ref(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
        let r = a.len().max(b.len());
        let mut o = std::vec![0; r];
        for k in 0..r {
            let da = if k + a.len() >= r {
                a[k + a.len() - r]
            } else {
                1
            };
            let db = if k + b.len() >= r {
                b[k + b.len() - r]
            } else {
                1
            };
            o[k] = if da == db || db == 1 {
                da
            } else if da == 1 {
                db
            } else {
                return None;
            };
        }
        Some(o)
    }

    /// Index into a contiguous input of shape `inp` for flat output index `flat`.
    fn src(out: &[usize], inp: &[usize], flat: usize) -> usize {
        let mut rem = flat;
        let mut coords = std::vec![0; out.len()];
        for k in (0..out.len()).rev() {
            coords[k] = rem % out[k];
            rem /= out[k];
        }
        let off = out.len() - inp.len();
        let mut idx = 0;
        for (j, &d) in inp.iter().enumerate() {
            let c = if d == 1 { 0 } else { coords[j + off] };
            idx = idx * d + c;
        }
        idx
    }

    /// Bitwise equality for floats (NaN == NaN).
    fn same(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    }

    /// Within `ulps` units in the last place (or 1e-30 absolute), NaN == NaN.
    fn close(a: f32, b: f32, ulps: i64) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a == b {
            return true;
        }
        if (a - b).abs() < 1e-30 {
            return true;
        }
        let (ia, ib) = (a.to_bits() as i32 as i64, b.to_bits() as i32 as i64);
        (ia - ib).abs() <= ulps && a.signum() == b.signum()
    }

    /// `|got - want| <= tol · max(1, |want|)` (for results that cancel, like gelu's `1 + erf`).
    fn assert_near(got: &[f32], want: &[f32], tol: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * w.abs().max(1.0),
                "{what}[{k}]: got {g}, want {w}"
            );
        }
    }

    fn assert_close(got: &[f32], want: &[f32], ulps: i64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(close(g, w, ulps), "{what}[{k}]: got {g}, want {w}");
        }
    }

    const SHAPE_PAIRS: &[(&[usize], &[usize])] = &[
        (&[], &[]),
        (&[1], &[17]),
        (&[3], &[3]),
        (&[129], &[129]),
        (&[129], &[]),
        (&[], &[17]),
        (&[2, 3], &[3]),
        (&[2, 3], &[2, 1]),
        (&[4, 1, 3], &[1, 5, 1]),
        (&[2, 3, 4, 5], &[3, 1, 5]),
        (&[1, 1, 7], &[2, 3, 1]),
        (&[5, 1], &[]),
        (&[2, 1, 4, 1], &[1, 3, 1, 5]),
        (&[3, 17], &[3, 17]),
        (&[1, 3, 1], &[3, 3, 1]),
        (&[0, 3], &[3]),
    ];

    // ----- broadcast iterator ---------------------------------------------------------------

    #[test]
    fn bcast_coalesces() {
        let s = |d: &[usize]| Shape::new(d).unwrap();
        let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 4]), &s(&[2, 3, 4])]).unwrap();
        assert_eq!((bc.outer, bc.inner, bc.step), (0, 24, [1, 1]));
        let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 4]), &s(&[4])]).unwrap();
        assert_eq!((bc.outer, bc.inner, bc.step), (1, 4, [1, 1]));
        assert_eq!(bc.dims[0], 6);
        let bc = Bcast::new(&s(&[2, 3, 4]), [&s(&[2, 3, 1]), &s(&[])]).unwrap();
        assert_eq!((bc.outer, bc.inner, bc.step), (1, 4, [0, 0]));
        assert!(Bcast::new(&s(&[2, 3]), [&s(&[4])]).is_none());
        assert!(Bcast::new(&s(&[3]), [&s(&[2, 3])]).is_none());
        // Every run matches the reference index map.
        let (o, a, c) = ([2usize, 3, 4, 5], [3usize, 1, 5], [2usize, 1, 4, 1]);
        let bc = Bcast::new(&s(&o), [&s(&a), &s(&c)]).unwrap();
        let mut seen = 0;
        bc.for_each(|[oa, oc], off, n| {
            for k in 0..n {
                assert_eq!(oa + k * bc.step[0], src(&o, &a, off + k));
                assert_eq!(oc + k * bc.step[1], src(&o, &c, off + k));
            }
            assert_eq!(off, seen);
            seen += n;
        });
        assert_eq!(seen, 120);
    }

    // ----- arithmetic -----------------------------------------------------------------------

    #[test]
    fn add_sub_mul_div_f32_broadcast() {
        let mut rng = Rng(7);
        for &(sa, sb) in SHAPE_PAIRS {
            let so = bshape_ref(sa, sb).unwrap();
            let a = rng.f32s(numel(sa), -4.0, 4.0);
            let bv = rng.f32s(numel(sb), 0.5, 3.0);
            let n = numel(&so);
            let pa = |k: usize| a[src(&so, sa, k)];
            let pb = |k: usize| bv[src(&so, sb, k)];
            for alpha in [1.0f64, 2.5, -1.0] {
                let al = alpha as f32;
                let want: Vec<f32> = (0..n).map(|k| pa(k) + al * pb(k)).collect();
                let want = if alpha == 1.0 {
                    (0..n).map(|k| pa(k) + pb(k)).collect()
                } else {
                    want
                };
                let got = run1(
                    "aten::add.out",
                    &[f(sa, &a), f(sb, &bv), A::Dbl(alpha), out(DType::F32, &so)],
                );
                assert_eq!(got.shape, so);
                assert!(same(&got.f32(), &want), "add {sa:?} {sb:?} alpha {alpha}");
                let want: Vec<f32> = (0..n).map(|k| pa(k) - al * pb(k)).collect();
                let got = run1(
                    "aten::sub.out",
                    &[f(sa, &a), f(sb, &bv), A::Dbl(alpha), out(DType::F32, &so)],
                );
                if alpha != 1.0 {
                    assert!(same(&got.f32(), &want), "sub {sa:?} {sb:?}");
                } else {
                    let w: Vec<f32> = (0..n).map(|k| pa(k) - pb(k)).collect();
                    assert!(same(&got.f32(), &w), "sub {sa:?} {sb:?}");
                }
            }
            let cases: [(&str, fn(f32, f32) -> f32); 5] = [
                ("aten::mul.out", |x, y| x * y),
                ("aten::div.out", |x, y| x / y),
                ("aten::maximum.out", |x, y| if x < y { y } else { x }),
                ("aten::minimum.out", |x, y| if y < x { y } else { x }),
                ("aten::floor_divide.out", |x, y| {
                    let q = (x - x % y) / y;
                    let q = if x % y != 0.0 && ((y < 0.0) != (x % y < 0.0)) {
                        q - 1.0
                    } else {
                        q
                    };
                    let fl = q.floor();
                    if q - fl > 0.5 {
                        fl + 1.0
                    } else {
                        fl
                    }
                }),
            ];
            for (key, op) in cases {
                let want: Vec<f32> = (0..n).map(|k| op(pa(k), pb(k))).collect();
                let got = run1(key, &[f(sa, &a), f(sb, &bv), out(DType::F32, &so)]);
                assert_eq!(got.shape, so, "{key}");
                assert!(same(&got.f32(), &want), "{key} {sa:?} {sb:?}");
            }
        }
    }

    #[test]
    fn int64_arithmetic() {
        let mut rng = Rng(11);
        for &(sa, sb) in SHAPE_PAIRS {
            let so = bshape_ref(sa, sb).unwrap();
            let a = rng.i64s(numel(sa), -50, 50);
            let mut bv = rng.i64s(numel(sb), -9, 9);
            for v in bv.iter_mut() {
                if *v == 0 {
                    *v = 3;
                }
            }
            let n = numel(&so);
            let pa = |k: usize| a[src(&so, sa, k)];
            let pb = |k: usize| bv[src(&so, sb, k)];
            let got = run1(
                "aten::add.out",
                &[i(sa, &a), i(sb, &bv), A::Int(3), out(DType::I64, &so)],
            );
            assert_eq!(
                got.i64(),
                (0..n).map(|k| pa(k) + 3 * pb(k)).collect::<Vec<_>>()
            );
            let got = run1(
                "aten::sub.out",
                &[i(sa, &a), i(sb, &bv), A::Int(1), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| pa(k) - pb(k)).collect::<Vec<_>>());
            let got = run1(
                "aten::mul.out",
                &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| pa(k) * pb(k)).collect::<Vec<_>>());
            let got = run1(
                "aten::floor_divide.out",
                &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
            );
            assert_eq!(
                got.i64(),
                (0..n)
                    .map(|k| pa(k).div_euclid(pb(k))
                        - if pb(k) < 0 && pa(k).rem_euclid(pb(k)) != 0 {
                            1
                        } else {
                            0
                        })
                    .collect::<Vec<_>>(),
                "floor_divide {sa:?} {sb:?}"
            );
            let got = run1(
                "aten::remainder.Tensor_out",
                &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
            );
            let py_mod = |x: i64, y: i64| ((x % y) + y) % y;
            assert_eq!(
                got.i64(),
                (0..n).map(|k| py_mod(pa(k), pb(k))).collect::<Vec<_>>()
            );
            let got = run1(
                "aten::fmod.Tensor_out",
                &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| pa(k) % pb(k)).collect::<Vec<_>>());
            let got = run1(
                "aten::div.out_mode",
                &[i(sa, &a), i(sb, &bv), A::Str("trunc"), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| pa(k) / pb(k)).collect::<Vec<_>>());
            // int / int is true division in float32.
            let got = run1(
                "aten::div.out",
                &[i(sa, &a), i(sb, &bv), out(DType::F32, &so)],
            );
            let want: Vec<f32> = (0..n).map(|k| pa(k) as f32 / pb(k) as f32).collect();
            assert!(same(&got.f32(), &want));
            let got = run1(
                "aten::div.out_mode",
                &[i(sa, &a), i(sb, &bv), A::Non, out(DType::F32, &so)],
            );
            assert!(same(&got.f32(), &want));
            let got = run1(
                "aten::maximum.out",
                &[i(sa, &a), i(sb, &bv), out(DType::I64, &so)],
            );
            assert_eq!(
                got.i64(),
                (0..n).map(|k| pa(k).max(pb(k))).collect::<Vec<_>>()
            );
        }
        // Wrapping, exactness beyond 2^53.
        let big = (1i64 << 62) + 1;
        let got = run1(
            "aten::add.out",
            &[
                i(&[2], &[big, i64::MAX]),
                i(&[2], &[big, 1]),
                A::Int(1),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [big.wrapping_add(big), i64::MIN]);
        let got = run1(
            "aten::div.out_mode",
            &[
                i(&[4], &[7, -7, 7, -7]),
                i(&[4], &[2, 2, -2, -2]),
                A::Str("floor"),
                out(DType::I64, &[4]),
            ],
        );
        assert_eq!(got.i64(), [3, -4, -4, 3]);
    }

    #[test]
    fn float_rounding_modes_and_remainders() {
        let x = [5.0f32, -3.0, 0.0, 7.5, -7.5, 1.0];
        let y = [0.0f32, 0.0, 0.0, 2.0, 2.0, -0.0];
        let got = run1(
            "aten::div.out_mode",
            &[
                f(&[6], &x),
                f(&[6], &y),
                A::Str("floor"),
                out(DType::F32, &[6]),
            ],
        );
        let g = got.f32();
        assert_eq!(g[0], f32::INFINITY);
        assert_eq!(g[1], f32::NEG_INFINITY);
        assert!(g[2].is_nan());
        assert_eq!(&g[3..5], &[3.0, -4.0]);
        assert_eq!(g[5], f32::NEG_INFINITY);
        let got = run1(
            "aten::div.out_mode",
            &[
                f(&[6], &x),
                f(&[6], &y),
                A::Str("trunc"),
                out(DType::F32, &[6]),
            ],
        );
        assert_eq!(&got.f32()[3..5], &[3.0, -3.0]);
        let got = run1(
            "aten::remainder.Scalar_out",
            &[
                f(&[3], &[5.0, -3.0, 3.0]),
                A::Int(-2),
                out(DType::F32, &[3]),
            ],
        );
        assert_eq!(got.f32(), [-1.0, -1.0, -1.0]);
        let got = run1(
            "aten::remainder.Scalar_out",
            &[f(&[2], &[5.0, -3.0]), A::Dbl(0.0), out(DType::F32, &[2])],
        );
        assert!(got.f32().iter().all(|v| v.is_nan()));
        let got = run1(
            "aten::fmod.Scalar_out",
            &[
                f(&[3], &[5.5, -5.5, 2.0]),
                A::Dbl(2.0),
                out(DType::F32, &[3]),
            ],
        );
        assert_eq!(got.f32(), [1.5, -1.5, 0.0]);
        // int tensor with a float scalar computes in float32.
        let got = run1(
            "aten::fmod.Scalar_out",
            &[i(&[1], &[5]), A::Dbl(1.5), out(DType::F32, &[1])],
        );
        assert_eq!(got.f32(), [0.5]);
        let got = run1(
            "aten::remainder.Scalar_out",
            &[i(&[4], &[-7, 7, -1, 0]), A::Int(3), out(DType::I64, &[4])],
        );
        assert_eq!(got.i64(), [2, 1, 2, 0]);
        let got = run1(
            "aten::div.Scalar_mode_out",
            &[
                i(&[2], &[-7, 7]),
                A::Int(2),
                A::Str("floor"),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [-4, 3]);
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        for key in [
            "aten::floor_divide.out",
            "aten::remainder.Tensor_out",
            "aten::fmod.Tensor_out",
        ] {
            let e = kerr(
                key,
                &[i(&[2], &[5, 3]), i(&[2], &[0, 1]), out(DType::I64, &[2])],
            );
            assert!(
                matches!(e, KernelError::Value { arg: 1, .. }),
                "{key}: {e:?}"
            );
        }
        for key in ["aten::remainder.Scalar_out", "aten::fmod.Scalar_out"] {
            let e = kerr(key, &[i(&[2], &[5, 3]), A::Int(0), out(DType::I64, &[2])]);
            assert!(
                matches!(e, KernelError::Value { arg: 1, .. }),
                "{key}: {e:?}"
            );
        }
        let e = kerr(
            "aten::div.out_mode",
            &[
                i(&[1], &[5]),
                i(&[1], &[0]),
                A::Str("trunc"),
                out(DType::I64, &[1]),
            ],
        );
        assert!(matches!(e, KernelError::Value { arg: 1, .. }));
        // True division by zero is fine (float result).
        let got = run1(
            "aten::div.out",
            &[i(&[2], &[5, 3]), i(&[2], &[0, 1]), out(DType::F32, &[2])],
        );
        assert_eq!(got.f32(), [f32::INFINITY, 3.0]);
        let e = kerr(
            "aten::div.out_mode",
            &[
                i(&[1], &[5]),
                i(&[1], &[1]),
                A::Str("round"),
                out(DType::I64, &[1]),
            ],
        );
        assert!(matches!(e, KernelError::Value { arg: 2, .. }));
    }

    #[test]
    fn promotion_rules() {
        // int64 + float32 → float32 (ints converted to f32 first).
        let got = run1(
            "aten::add.out",
            &[
                i(&[2], &[16777217, 3]),
                f(&[2], &[0.0, 0.5]),
                A::Int(1),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [16777216.0, 3.5]);
        // A zero-dim f64 does not widen a dimensioned f32.
        let got = run1(
            "aten::mul.out",
            &[
                f(&[2], &[1.0, 3.0]),
                A::D(std::vec![], std::vec![0.1]),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [0.1f32, 3.0 * 0.1f32]);
        // int8 arithmetic wraps in int8 even into an int64 out.
        let got = run1(
            "aten::add.out",
            &[
                A::Raw(DType::I8, std::vec![1], std::vec![100]),
                A::Raw(DType::I8, std::vec![1], std::vec![100]),
                A::Int(1),
                out(DType::I64, &[1]),
            ],
        );
        assert_eq!(got.i64(), [-56]);
        // uint8 tensor + negative int scalar stays uint8.
        let got = run1(
            "aten::add.Scalar_out",
            &[
                A::Raw(DType::U8, std::vec![2], std::vec![1, 200]),
                A::Int(-3),
                A::Int(1),
                out(DType::U8, &[2]),
            ],
        );
        assert_eq!(got.i64(), [254, 197]);
        // bool + bool is logical or; into an int64 out it is 0/1.
        let got = run1(
            "aten::add.out",
            &[
                b(&[2], &[true, true]),
                b(&[2], &[true, false]),
                A::Int(1),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [1, 1]);
        let got = run1(
            "aten::mul.out",
            &[
                b(&[3], &[true, true, false]),
                b(&[3], &[true, false, false]),
                out(DType::Bool, &[3]),
            ],
        );
        assert_eq!(got.bools(), [true, false, false]);
        // Int tensor with a double scalar → float32.
        let got = run1(
            "aten::mul.Scalar_out",
            &[i(&[2], &[3, -2]), A::Dbl(0.5), out(DType::F32, &[2])],
        );
        assert_eq!(got.f32(), [1.5, -1.0]);
        // f32 compute result into an f64 out.
        let got = run1(
            "aten::add.out",
            &[
                f(&[1], &[0.1]),
                f(&[1], &[0.2]),
                A::Int(1),
                out(DType::F64, &[1]),
            ],
        );
        assert_eq!(got.f64(), [(0.1f32 + 0.2f32) as f64]);
        // f16 inputs compute in f32 and round to f16.
        let h = |v: &[f32]| -> A {
            A::Raw(
                DType::F16,
                std::vec![v.len()],
                v.iter()
                    .flat_map(|x| f32_to_f16(*x).to_le_bytes())
                    .collect(),
            )
        };
        let got = run1(
            "aten::mul.out",
            &[h(&[1.1, 2.0]), h(&[3.3, 0.25]), out(DType::F32, &[2])],
        );
        let r = |x: f32| f16_to_f32(f32_to_f16(x));
        assert_eq!(got.f32(), [r(r(1.1) * r(3.3)), 0.5]);
    }

    #[test]
    fn arithmetic_errors() {
        // float result into an int out
        let e = kerr(
            "aten::add.out",
            &[
                f(&[1], &[1.5]),
                f(&[1], &[1.5]),
                A::Int(1),
                out(DType::I64, &[1]),
            ],
        );
        assert!(
            matches!(e, KernelError::DTypeMismatch { arg: 3, .. }),
            "{e:?}"
        );
        // int result into a bool out
        let e = kerr(
            "aten::mul.out",
            &[i(&[1], &[1]), i(&[1], &[1]), out(DType::Bool, &[1])],
        );
        assert!(matches!(e, KernelError::DTypeMismatch { arg: 2, .. }));
        // int / int into an int out
        let e = kerr(
            "aten::div.out",
            &[i(&[1], &[1]), i(&[1], &[1]), out(DType::I64, &[1])],
        );
        assert!(matches!(e, KernelError::DTypeMismatch { .. }));
        // bool subtraction
        let e = kerr(
            "aten::sub.out",
            &[
                b(&[1], &[true]),
                b(&[1], &[true]),
                A::Int(1),
                out(DType::Bool, &[1]),
            ],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
        let e = kerr(
            "aten::rsub.Scalar_out",
            &[
                b(&[1], &[true]),
                A::Int(1),
                A::Int(1),
                out(DType::I64, &[1]),
            ],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
        // floating alpha with integers
        let e = kerr(
            "aten::add.out",
            &[
                i(&[1], &[1]),
                i(&[1], &[1]),
                A::Dbl(0.5),
                out(DType::I64, &[1]),
            ],
        );
        assert!(matches!(e, KernelError::Value { arg: 2, .. }));
        // not broadcastable
        let e = kerr(
            "aten::add.out",
            &[
                f(&[2, 3], &[0.0; 6]),
                f(&[2], &[0.0; 2]),
                A::Int(1),
                out(DType::F32, &[2, 3]),
            ],
        );
        assert!(matches!(e, KernelError::Shape { arg: 1, .. }), "{e:?}");
        // static out of the wrong shape
        let e = kerr(
            "aten::mul.out",
            &[
                f(&[2, 3], &[0.0; 6]),
                f(&[3], &[0.0; 3]),
                out(DType::F32, &[3, 3]),
            ],
        );
        assert!(matches!(e, KernelError::Resize { arg: 2, .. }), "{e:?}");
        // wrong argument count
        let e = kerr(
            "aten::mul.out",
            &[
                f(&[1], &[0.0]),
                f(&[1], &[0.0]),
                A::Int(1),
                out(DType::F32, &[1]),
            ],
        );
        assert!(matches!(
            e,
            KernelError::ArgCount {
                expected: 4,
                got: 5
            }
        ));
        // a scalar where a tensor is expected
        let e = kerr(
            "aten::mul.out",
            &[f(&[1], &[0.0]), A::Int(2), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::ArgType { arg: 1, .. }));
        // pow of bools
        let e = kerr(
            "aten::pow.Tensor_Tensor_out",
            &[b(&[1], &[true]), b(&[1], &[true]), out(DType::Bool, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
        // int ** negative int scalar
        let e = kerr(
            "aten::pow.Tensor_Scalar_out",
            &[i(&[2], &[2, 3]), A::Int(-1), out(DType::I64, &[2])],
        );
        assert!(matches!(e, KernelError::Value { arg: 1, .. }));
    }

    #[test]
    fn dynamic_output_resizes() {
        let mut t = OpTest::new("aten::add.out");
        let a = t.input_f32(&[2, 1], &[1.0, 2.0]);
        let c = t.input_f32(&[3], &[10.0, 20.0, 30.0]);
        let al = t.int(1);
        let o = t.output_dynamic(DType::F32, &[16]);
        t.call(&[a, c, al, o, o]);
        let r = t.run().unwrap();
        assert_eq!(r[0].shape, [2, 3]);
        assert_eq!(r[0].f32(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    }

    #[test]
    fn scalar_overloads() {
        let x = [1.5f32, -2.0, 0.25];
        let got = run1(
            "aten::add.Scalar_out",
            &[f(&[3], &x), A::Dbl(0.1), A::Int(2), out(DType::F32, &[3])],
        );
        let want: Vec<f32> = x.iter().map(|v| v + 2.0 * 0.1f32).collect();
        assert!(same(&got.f32(), &want));
        let got = run1(
            "aten::sub.Scalar_out",
            &[f(&[3], &x), A::Int(1), A::Int(1), out(DType::F32, &[3])],
        );
        assert_eq!(got.f32(), [0.5, -3.0, -0.75]);
        let got = run1(
            "aten::rsub.Scalar_out",
            &[f(&[3], &x), A::Int(1), A::Dbl(2.0), out(DType::F32, &[3])],
        );
        assert_eq!(got.f32(), [-2.0, 5.0, 0.5]);
        let got = run1(
            "aten::rsub.Scalar_out",
            &[
                i(&[2], &[3, -4]),
                A::Int(10),
                A::Int(1),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [7, 14]);
        let got = run1(
            "aten::mul.Scalar_out",
            &[f(&[3], &x), A::Dbl(-2.0), out(DType::F32, &[3])],
        );
        assert_eq!(got.f32(), [-3.0, 4.0, -0.5]);
        let got = run1(
            "aten::div.Scalar_out",
            &[i(&[3], &[1, 2, -3]), A::Int(2), out(DType::F32, &[3])],
        );
        assert_eq!(got.f32(), [0.5, 1.0, -1.5]);
        let got = run1(
            "aten::div.Scalar_out",
            &[f(&[0], &[]), A::Int(2), out(DType::F32, &[0])],
        );
        assert_eq!(got.shape, [0]);
        let got = run1(
            "aten::add.Scalar_out",
            &[f(&[], &[4.0]), A::Bo(true), A::Int(1), out(DType::F32, &[])],
        );
        assert_eq!(got.f32(), [5.0]);
    }

    #[test]
    fn pow_variants() {
        let mut rng = Rng(3);
        let x = rng.f32s(129, 0.1, 3.0);
        let run_pow = |e: A| {
            run1(
                "aten::pow.Tensor_Scalar_out",
                &[f(&[129], &x), e, out(DType::F32, &[129])],
            )
            .f32()
        };
        assert!(same(
            &run_pow(A::Int(2)),
            &x.iter().map(|v| v * v).collect::<Vec<_>>()
        ));
        assert!(same(
            &run_pow(A::Dbl(3.0)),
            &x.iter().map(|v| v * v * v).collect::<Vec<_>>()
        ));
        assert!(same(
            &run_pow(A::Dbl(0.5)),
            &x.iter().map(|v| v.sqrt()).collect::<Vec<_>>()
        ));
        assert!(same(
            &run_pow(A::Dbl(-0.5)),
            &x.iter().map(|v| 1.0 / v.sqrt()).collect::<Vec<_>>()
        ));
        assert!(same(
            &run_pow(A::Int(-1)),
            &x.iter().map(|v| 1.0 / v).collect::<Vec<_>>()
        ));
        assert!(same(
            &run_pow(A::Int(-2)),
            &x.iter().map(|v| 1.0 / (v * v)).collect::<Vec<_>>()
        ));
        assert_close(
            &run_pow(A::Dbl(1.7)),
            &x.iter().map(|v| v.powf(1.7)).collect::<Vec<_>>(),
            2,
            "pow 1.7",
        );
        assert_close(&run_pow(A::Int(0)), &[1.0; 129], 0, "pow 0");
        // Integer base with an integer exponent stays integral and exact.
        let got = run1(
            "aten::pow.Tensor_Scalar_out",
            &[i(&[4], &[2, -3, 0, 3]), A::Int(3), out(DType::I64, &[4])],
        );
        assert_eq!(got.i64(), [8, -27, 0, 27]);
        let got = run1(
            "aten::pow.Tensor_Scalar_out",
            &[b(&[2], &[true, false]), A::Int(2), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [1, 0]);
        let got = run1(
            "aten::pow.Tensor_Scalar_out",
            &[i(&[2], &[2, 3]), A::Dbl(0.5), out(DType::F32, &[2])],
        );
        assert_eq!(got.f32(), [2f32.sqrt(), 3f32.sqrt()]);
        // Tensor ** Tensor with broadcasting.
        let e = rng.f32s(3, -2.0, 2.0);
        let base = rng.f32s(6, 0.5, 2.0);
        let got = run1(
            "aten::pow.Tensor_Tensor_out",
            &[f(&[2, 3], &base), f(&[3], &e), out(DType::F32, &[2, 3])],
        );
        let want: Vec<f32> = (0..6).map(|k| base[k].powf(e[k % 3])).collect();
        assert_close(&got.f32(), &want, 2, "pow tt");
        let got = run1(
            "aten::pow.Tensor_Tensor_out",
            &[
                i(&[5], &[2, 3, 1, -1, 0]),
                i(&[5], &[10, -1, -5, -3, -1]),
                out(DType::I64, &[5]),
            ],
        );
        assert_eq!(got.i64(), [1024, 0, 1, -1, 0]);
        let got = run1(
            "aten::pow.Scalar_out",
            &[A::Int(2), i(&[3], &[3, 4, 0]), out(DType::I64, &[3])],
        );
        assert_eq!(got.i64(), [8, 16, 1]);
        let got = run1(
            "aten::pow.Scalar_out",
            &[A::Dbl(2.5), i(&[2], &[3, 4]), out(DType::F32, &[2])],
        );
        assert_close(&got.f32(), &[15.625, 39.0625], 1, "pow scalar base");
    }

    #[test]
    fn maximum_minimum_nan() {
        let nan = f32::NAN;
        let a = [nan, 1.0, 2.0, -1.0];
        let c = [1.0, nan, 3.0, -2.0];
        let got = run1(
            "aten::maximum.out",
            &[f(&[4], &a), f(&[4], &c), out(DType::F32, &[4])],
        )
        .f32();
        assert!(got[0].is_nan() && got[1].is_nan());
        assert_eq!(&got[2..], &[3.0, -1.0]);
        let got = run1(
            "aten::minimum.out",
            &[f(&[4], &a), f(&[4], &c), out(DType::F32, &[4])],
        )
        .f32();
        assert!(got[0].is_nan() && got[1].is_nan());
        assert_eq!(&got[2..], &[2.0, -2.0]);
        let got = run1(
            "aten::maximum.out",
            &[
                b(&[2], &[true, false]),
                b(&[2], &[false, false]),
                out(DType::Bool, &[2]),
            ],
        );
        assert_eq!(got.bools(), [true, false]);
    }

    // ----- comparisons ---------------------------------------------------------------------

    #[test]
    fn comparisons() {
        let mut rng = Rng(5);
        let ops: [(&str, fn(f32, f32) -> bool); 6] = [
            ("eq", |x, y| x == y),
            ("ne", |x, y| x != y),
            ("lt", |x, y| x < y),
            ("le", |x, y| x <= y),
            ("gt", |x, y| x > y),
            ("ge", |x, y| x >= y),
        ];
        for &(sa, sb) in SHAPE_PAIRS {
            let so = bshape_ref(sa, sb).unwrap();
            let mut a: Vec<f32> = rng
                .i64s(numel(sa), -2, 2)
                .iter()
                .map(|&v| v as f32)
                .collect();
            if let Some(v) = a.first_mut() {
                *v = f32::NAN;
            }
            let c: Vec<f32> = rng
                .i64s(numel(sb), -2, 2)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let n = numel(&so);
            for (name, op) in ops {
                let want: Vec<bool> = (0..n)
                    .map(|k| op(a[src(&so, sa, k)], c[src(&so, sb, k)]))
                    .collect();
                let got = run1(
                    &std::format!("aten::{name}.Tensor_out"),
                    &[f(sa, &a), f(sb, &c), out(DType::Bool, &so)],
                );
                assert_eq!(got.bools(), want, "{name} {sa:?} {sb:?}");
                let want: Vec<bool> = (0..numel(sa)).map(|k| op(a[k], 0.5)).collect();
                let got = run1(
                    &std::format!("aten::{name}.Scalar_out"),
                    &[f(sa, &a), A::Dbl(0.5), out(DType::Bool, sa)],
                );
                assert_eq!(got.bools(), want, "{name} scalar {sa:?}");
                // int64 inputs with an integer scalar
                let ai: Vec<i64> = (0..numel(sb)).map(|k| c[k] as i64).collect();
                let want: Vec<bool> = ai.iter().map(|&v| op(v as f32, 1.0)).collect();
                let got = run1(
                    &std::format!("aten::{name}.Scalar_out"),
                    &[i(sb, &ai), A::Int(1), out(DType::Bool, sb)],
                );
                assert_eq!(got.bools(), want, "{name} int scalar");
            }
        }
        // int tensor vs float scalar compares in float; int64 vs f32 tensor in f32.
        let got = run1(
            "aten::eq.Scalar_out",
            &[i(&[2], &[1, 2]), A::Dbl(1.5), out(DType::Bool, &[2])],
        );
        assert_eq!(got.bools(), [false, false]);
        let got = run1(
            "aten::lt.Scalar_out",
            &[
                i(&[1], &[16777217]),
                A::Dbl(16777217.0),
                out(DType::Bool, &[1]),
            ],
        );
        assert_eq!(got.bools(), [false]);
        let got = run1(
            "aten::le.Tensor_out",
            &[
                i(&[3], &[1, 2, 3]),
                f(&[3], &[1.5, 1.5, 3.0]),
                out(DType::Bool, &[3]),
            ],
        );
        assert_eq!(got.bools(), [true, false, true]);
        // bool vs int, and a float out receiving 0/1.
        let got = run1(
            "aten::eq.Tensor_out",
            &[
                b(&[2], &[true, false]),
                i(&[2], &[1, 0]),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [1.0, 1.0]);
        // GPT-2 mask pattern: le of an arange column against a row.
        let got = run1(
            "aten::le.Tensor_out",
            &[
                i(&[1, 3], &[0, 1, 2]),
                i(&[3, 1], &[0, 1, 2]),
                out(DType::Bool, &[3, 3]),
            ],
        );
        assert_eq!(
            got.bools(),
            [true, false, false, true, true, false, true, true, true]
        );
        let got = run1(
            "aten::ne.Scalar_out",
            &[i(&[4], &[0, 5, 0, 1]), A::Int(0), out(DType::Bool, &[4])],
        );
        assert_eq!(got.bools(), [false, true, false, true]);
    }

    // ----- bitwise / logical ---------------------------------------------------------------

    #[test]
    fn bitwise_ops() {
        let mut rng = Rng(9);
        for &(sa, sb) in SHAPE_PAIRS {
            let so = bshape_ref(sa, sb).unwrap();
            let a = rng.bools(numel(sa));
            let c = rng.bools(numel(sb));
            let n = numel(&so);
            let pa = |k: usize| a[src(&so, sa, k)];
            let pc = |k: usize| c[src(&so, sb, k)];
            let got = run1(
                "aten::bitwise_and.Tensor_out",
                &[b(sa, &a), b(sb, &c), out(DType::Bool, &so)],
            );
            assert_eq!(
                got.bools(),
                (0..n).map(|k| pa(k) & pc(k)).collect::<Vec<_>>()
            );
            let got = run1(
                "aten::logical_or.out",
                &[b(sa, &a), b(sb, &c), out(DType::Bool, &so)],
            );
            assert_eq!(
                got.bools(),
                (0..n).map(|k| pa(k) | pc(k)).collect::<Vec<_>>()
            );
            let ia = rng.i64s(numel(sa), -1000, 1000);
            let ic = rng.i64s(numel(sb), -1000, 1000);
            let qa = |k: usize| ia[src(&so, sa, k)];
            let qc = |k: usize| ic[src(&so, sb, k)];
            let got = run1(
                "aten::bitwise_and.Tensor_out",
                &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| qa(k) & qc(k)).collect::<Vec<_>>());
            let got = run1(
                "aten::bitwise_or.Tensor_out",
                &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| qa(k) | qc(k)).collect::<Vec<_>>());
            let got = run1(
                "aten::bitwise_xor.Tensor_out",
                &[i(sa, &ia), i(sb, &ic), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), (0..n).map(|k| qa(k) ^ qc(k)).collect::<Vec<_>>());
        }
        let got = run1(
            "aten::bitwise_and.Scalar_out",
            &[b(&[2], &[true, false]), A::Int(3), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [1, 0]);
        let got = run1(
            "aten::bitwise_and.Scalar_out",
            &[i(&[2], &[5, 6]), A::Bo(true), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [1, 0]);
        let got = run1(
            "aten::bitwise_or.Scalar_out",
            &[i(&[2], &[5, 6]), A::Int(8), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [13, 14]);
        let got = run1(
            "aten::bitwise_xor.Scalar_out",
            &[b(&[2], &[true, false]), A::Bo(true), out(DType::Bool, &[2])],
        );
        assert_eq!(got.bools(), [false, true]);
        let got = run1(
            "aten::bitwise_not.out",
            &[
                A::Raw(DType::U8, std::vec![1], std::vec![5]),
                out(DType::U8, &[1]),
            ],
        );
        assert_eq!(got.i64(), [250]);
        let got = run1(
            "aten::bitwise_not.out",
            &[b(&[2], &[true, false]), out(DType::Bool, &[2])],
        );
        assert_eq!(got.bools(), [false, true]);
        let got = run1(
            "aten::bitwise_not.out",
            &[i(&[2], &[0, -6]), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [-1, 5]);
        let e = kerr(
            "aten::bitwise_and.Tensor_out",
            &[f(&[1], &[1.0]), f(&[1], &[1.0]), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
        let e = kerr(
            "aten::bitwise_and.Scalar_out",
            &[i(&[1], &[1]), A::Dbl(2.0), out(DType::I64, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 1, .. }));
        let e = kerr(
            "aten::bitwise_not.out",
            &[f(&[1], &[1.0]), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
        let e = kerr(
            "aten::bitwise_and.Tensor_out",
            &[i(&[1], &[1]), i(&[1], &[1]), out(DType::Bool, &[1])],
        );
        assert!(matches!(e, KernelError::DTypeMismatch { .. }));
    }

    #[test]
    fn logical_ops() {
        let nan = f32::NAN;
        let x = [nan, 0.0, 2.0, 0.0];
        let y = [1i64, 0, 0, 7];
        let got = run1(
            "aten::logical_and.out",
            &[f(&[4], &x), i(&[4], &y), out(DType::Bool, &[4])],
        );
        assert_eq!(got.bools(), [true, false, false, false]);
        let got = run1(
            "aten::logical_or.out",
            &[f(&[4], &x), i(&[4], &y), out(DType::Bool, &[4])],
        );
        assert_eq!(got.bools(), [true, false, true, true]);
        let got = run1(
            "aten::logical_xor.out",
            &[f(&[4], &x), i(&[4], &y), out(DType::F32, &[4])],
        );
        assert_eq!(got.f32(), [0.0, 0.0, 1.0, 1.0]);
        let got = run1(
            "aten::logical_not.out",
            &[f(&[4], &x), out(DType::Bool, &[4])],
        );
        assert_eq!(got.bools(), [false, true, false, true]);
        let got = run1(
            "aten::logical_and.out",
            &[
                b(&[2, 1], &[true, false]),
                b(&[2], &[true, false]),
                out(DType::Bool, &[2, 2]),
            ],
        );
        assert_eq!(got.bools(), [true, false, false, false]);
    }

    // ----- selection -----------------------------------------------------------------------

    #[test]
    fn where_broadcasts_every_way() {
        let mut rng = Rng(13);
        let triples: &[(&[usize], &[usize], &[usize])] = &[
            (&[1, 1, 4, 4], &[2, 3, 4, 4], &[]),
            (&[5], &[5], &[5]),
            (&[129], &[129], &[1]),
            (&[2, 1], &[1, 3], &[2, 3]),
            (&[2, 3], &[2, 1], &[1, 3]),
            (&[1, 3], &[2, 3], &[2, 1]),
            (&[2, 1], &[2, 1], &[1, 3]),
            (&[1, 3], &[2, 1], &[2, 1]),
            (&[2, 1], &[1, 3], &[2, 1]),
            (&[], &[], &[]),
            (&[3, 1, 1], &[1, 4, 1], &[1, 1, 5]),
            (&[0, 2], &[2], &[]),
        ];
        for &(sc, sa, sb) in triples {
            let so = bshape_ref(&bshape_ref(sc, sa).unwrap(), sb).unwrap();
            let c = rng.bools(numel(sc));
            let a = rng.f32s(numel(sa), -1.0, 1.0);
            let bv = rng.f32s(numel(sb), -1.0, 1.0);
            let n = numel(&so);
            let want: Vec<f32> = (0..n)
                .map(|k| {
                    if c[src(&so, sc, k)] {
                        a[src(&so, sa, k)]
                    } else {
                        bv[src(&so, sb, k)]
                    }
                })
                .collect();
            let got = run1(
                "aten::where.self_out",
                &[b(sc, &c), f(sa, &a), f(sb, &bv), out(DType::F32, &so)],
            );
            assert_eq!(got.shape, so);
            assert!(same(&got.f32(), &want), "where {sc:?} {sa:?} {sb:?}");
            // int64 / bool payloads (fast paths for other compute types)
            let ia: Vec<i64> = (0..numel(sa)).map(|k| k as i64 * 3 - 7).collect();
            let ib: Vec<i64> = (0..numel(sb)).map(|k| -(k as i64)).collect();
            let want: Vec<i64> = (0..n)
                .map(|k| {
                    if c[src(&so, sc, k)] {
                        ia[src(&so, sa, k)]
                    } else {
                        ib[src(&so, sb, k)]
                    }
                })
                .collect();
            let got = run1(
                "aten::where.self_out",
                &[b(sc, &c), i(sa, &ia), i(sb, &ib), out(DType::I64, &so)],
            );
            assert_eq!(got.i64(), want);
        }
        // int64 self with a zero-dim float other promotes to float32.
        let got = run1(
            "aten::where.self_out",
            &[
                b(&[2], &[true, false]),
                i(&[2], &[1, 2]),
                f(&[], &[3.5]),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [1.0, 3.5]);
        let got = run1(
            "aten::where.self_out",
            &[
                A::Raw(DType::U8, std::vec![2], std::vec![1, 0]),
                f(&[2], &[1.0, 2.0]),
                f(&[2], &[3.0, 4.0]),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [1.0, 4.0]);
        let got = run1(
            "aten::where.self_out",
            &[
                b(&[2], &[true, false]),
                b(&[2], &[true, true]),
                b(&[], &[false]),
                out(DType::Bool, &[2]),
            ],
        );
        assert_eq!(got.bools(), [true, false]);
        let e = kerr(
            "aten::where.self_out",
            &[
                f(&[2], &[1.0, 0.0]),
                f(&[2], &[1.0, 2.0]),
                f(&[2], &[3.0, 4.0]),
                out(DType::F32, &[2]),
            ],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
        let e = kerr(
            "aten::where.self_out",
            &[
                b(&[3], &[true; 3]),
                f(&[2], &[1.0, 2.0]),
                f(&[2], &[3.0, 4.0]),
                out(DType::F32, &[2]),
            ],
        );
        assert!(matches!(e, KernelError::Shape { .. }));
        let e = kerr(
            "aten::where.self_out",
            &[
                b(&[2], &[true; 2]),
                f(&[2], &[1.0, 2.0]),
                f(&[2], &[3.0, 4.0]),
                out(DType::I64, &[2]),
            ],
        );
        assert!(matches!(e, KernelError::DTypeMismatch { arg: 3, .. }));
    }

    #[test]
    fn masked_fill() {
        let got = run1(
            "aten::masked_fill.Scalar_out",
            &[
                f(&[2], &[1.0, 2.0]),
                b(&[2, 2], &[true, false, false, true]),
                A::Dbl(2.7),
                out(DType::F32, &[2, 2]),
            ],
        );
        assert_eq!(got.f32(), [2.7, 2.0, 1.0, 2.7]);
        let got = run1(
            "aten::masked_fill.Scalar_out",
            &[
                f(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                b(&[3], &[false, true, false]),
                A::Dbl(f64::NEG_INFINITY),
                out(DType::F32, &[2, 3]),
            ],
        );
        assert_eq!(
            got.f32(),
            [1.0, f32::NEG_INFINITY, 3.0, 4.0, f32::NEG_INFINITY, 6.0]
        );
        let got = run1(
            "aten::masked_fill.Scalar_out",
            &[
                i(&[2], &[1, 2]),
                b(&[2], &[true, false]),
                A::Dbl(2.7),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [2, 2]);
        let e = kerr(
            "aten::masked_fill.Scalar_out",
            &[
                f(&[2], &[1.0, 2.0]),
                A::Raw(DType::U8, std::vec![2], std::vec![1, 0]),
                A::Dbl(0.0),
                out(DType::F32, &[2]),
            ],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 1, .. }));
    }

    // ----- unary ---------------------------------------------------------------------------

    #[test]
    fn float_unary_ops() {
        let mut rng = Rng(21);
        let x = rng.f32s(129, -3.0, 3.0);
        let pos = rng.f32s(129, 0.05, 4.0);
        let unit = rng.f32s(129, -0.95, 0.95);
        let big = rng.f32s(129, 1.05, 4.0);
        type Case = (&'static str, fn(f32) -> f32, u8, i64);
        // (op, reference, domain: 0 = any, 1 = positive, 2 = (-1, 1), 3 = > 1, ulps)
        let cases: &[Case] = &[
            ("tanh", |v| v.tanh(), 0, 2),
            ("sigmoid", |v| 1.0 / (1.0 + (-v).exp()), 0, 2),
            ("exp", |v| v.exp(), 0, 1),
            ("expm1", |v| v.exp_m1(), 0, 2),
            ("log", |v| v.ln(), 1, 1),
            ("log1p", |v| v.ln_1p(), 1, 2),
            ("log2", |v| v.log2(), 1, 1),
            ("log10", |v| v.log10(), 1, 2),
            ("sqrt", |v| v.sqrt(), 1, 0),
            ("rsqrt", |v| 1.0 / v.sqrt(), 1, 0),
            ("sin", |v| v.sin(), 0, 2),
            ("cos", |v| v.cos(), 0, 2),
            ("tan", |v| v.tan(), 2, 2),
            ("sinh", |v| v.sinh(), 0, 2),
            ("cosh", |v| v.cosh(), 0, 2),
            ("asin", |v| v.asin(), 2, 2),
            ("acos", |v| v.acos(), 2, 2),
            ("atan", |v| v.atan(), 0, 2),
            ("asinh", |v| v.asinh(), 0, 4),
            ("acosh", |v| v.acosh(), 3, 4),
            ("atanh", |v| v.atanh(), 2, 4),
            ("erf", |v| libm_free_erf(v), 0, 4),
            ("reciprocal", |v| 1.0 / v, 1, 0),
        ];
        for &(name, r, dom, ulps) in cases {
            let input = match dom {
                0 => &x,
                1 => &pos,
                2 => &unit,
                _ => &big,
            };
            let key = std::format!("aten::{name}.out");
            let got = run1(&key, &[f(&[129], input), out(DType::F32, &[129])]);
            let want: Vec<f32> = input.iter().map(|&v| r(v)).collect();
            assert_close(&got.f32(), &want, ulps, name);
            // rank 0 and a 2-d shape
            let got = run1(&key, &[f(&[], &input[..1]), out(DType::F32, &[])]);
            assert_eq!(got.shape, Vec::<usize>::new());
            assert_close(&got.f32(), &want[..1], ulps, name);
            // f64 input computes in f64
            let xd: Vec<f64> = input[..3].iter().map(|&v| v as f64).collect();
            let got = run1(&key, &[A::D(std::vec![3], xd), out(DType::F64, &[3])]);
            let g: Vec<f32> = got.f64().iter().map(|&v| v as f32).collect();
            assert_close(&g, &want[..3], ulps + 1, name);
        }
        // Integer inputs promote to float32.
        let got = run1(
            "aten::sigmoid.out",
            &[i(&[2], &[1, -2]), out(DType::F32, &[2])],
        );
        assert_close(
            &got.f32(),
            &[1.0 / (1.0 + (-1f32).exp()), 1.0 / (1.0 + 2f32.exp())],
            1,
            "sigmoid int",
        );
        let got = run1(
            "aten::reciprocal.out",
            &[i(&[2], &[0, 2]), out(DType::F32, &[2])],
        );
        assert_eq!(got.f32(), [f32::INFINITY, 0.5]);
        let got = run1("aten::sqrt.out", &[b(&[1], &[true]), out(DType::F32, &[1])]);
        assert_eq!(got.f32(), [1.0]);
        let got = run1("aten::exp.out", &[i(&[1], &[1]), out(DType::F64, &[1])]);
        assert_eq!(got.f64(), [1f32.exp() as f64]);
        let got = run1(
            "aten::log.out",
            &[f(&[3], &[0.0, -1.0, f32::INFINITY]), out(DType::F32, &[3])],
        );
        let g = got.f32();
        assert_eq!(g[0], f32::NEG_INFINITY);
        assert!(g[1].is_nan());
        assert_eq!(g[2], f32::INFINITY);
        let e = kerr("aten::exp.out", &[f(&[1], &[1.0]), out(DType::I64, &[1])]);
        assert!(matches!(e, KernelError::DTypeMismatch { arg: 1, .. }));
        let e = kerr(
            "aten::tanh.out",
            &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[3])],
        );
        assert!(matches!(e, KernelError::Resize { .. }));
        let e = kerr(
            "aten::tanh.out",
            &[f(&[1], &[1.0]), A::Int(0), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::ArgCount { .. }));
    }

    /// erf by its Taylor series / continued fraction in f64 (independent of libm).
    fn libm_free_erf(x: f32) -> f32 {
        let x = x as f64;
        if x.abs() < 3.0 {
            // Taylor series: 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
            let mut term = x;
            let mut sum = x;
            let mut n = 0.0;
            loop {
                n += 1.0;
                term *= -x * x / n;
                let t = term / (2.0 * n + 1.0);
                sum += t;
                if t.abs() < 1e-17 {
                    break;
                }
            }
            (sum * 2.0 / core::f64::consts::PI.sqrt()) as f32
        } else {
            x.signum() as f32
        }
    }

    #[test]
    fn activations() {
        let mut rng = Rng(31);
        let mut x = rng.f32s(129, -4.0, 4.0);
        x[0] = 0.0;
        x[1] = -0.0;
        let n = x.len();
        // gelu none
        let got = run1(
            "aten::gelu.out",
            &[f(&[n], &x), A::Str("none"), out(DType::F32, &[n])],
        );
        let want: Vec<f32> = x
            .iter()
            .map(|&v| v * 0.5 * (1.0 + libm_free_erf(v * core::f32::consts::FRAC_1_SQRT_2)))
            .collect();
        assert_near(&got.f32(), &want, 1e-6, "gelu");
        // gelu tanh
        let got = run1(
            "aten::gelu.out",
            &[f(&[n], &x), A::Str("tanh"), out(DType::F32, &[n])],
        );
        let want: Vec<f32> = x
            .iter()
            .map(|&v| {
                let k = ((2.0 / core::f64::consts::PI).sqrt()) as f32;
                0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh())
            })
            .collect();
        assert_near(&got.f32(), &want, 1e-6, "gelu tanh");
        let e = kerr(
            "aten::gelu.out",
            &[f(&[1], &[1.0]), A::Str("fast"), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::Value { arg: 1, .. }));
        let e = kerr(
            "aten::gelu.out",
            &[i(&[1], &[1]), A::Str("none"), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { arg: 0, .. }));
        // silu
        let got = run1("aten::silu.out", &[f(&[n], &x), out(DType::F32, &[n])]);
        let want: Vec<f32> = x.iter().map(|&v| v / (1.0 + (-v).exp())).collect();
        assert_close(&got.f32(), &want, 2, "silu");
        // relu keeps NaN and -0
        let got = run1(
            "aten::relu.out",
            &[f(&[4], &[-1.0, -0.0, f32::NAN, 2.5]), out(DType::F32, &[4])],
        )
        .f32();
        assert_eq!(got[0].to_bits(), 0);
        assert_eq!(got[1].to_bits(), (-0.0f32).to_bits());
        assert!(got[2].is_nan());
        assert_eq!(got[3], 2.5);
        let got = run1("aten::relu.out", &[f(&[n], &x), out(DType::F32, &[n])]);
        assert!(same(
            &got.f32(),
            &x.iter()
                .map(|&v| if v < 0.0 { 0.0 } else { v })
                .collect::<Vec<_>>()
        ));
        let got = run1(
            "aten::relu.out",
            &[i(&[3], &[-3, 0, 4]), out(DType::I64, &[3])],
        );
        assert_eq!(got.i64(), [0, 0, 4]);
        let e = kerr(
            "aten::relu.out",
            &[b(&[1], &[true]), out(DType::Bool, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
        // elu
        let got = run1(
            "aten::elu.out",
            &[
                f(&[n], &x),
                A::Dbl(1.5),
                A::Int(2),
                A::Dbl(0.5),
                out(DType::F32, &[n]),
            ],
        );
        let want: Vec<f32> = x
            .iter()
            .map(|&v| {
                if v <= 0.0 {
                    (v * 0.5).exp_m1() * (1.5 * 2.0)
                } else {
                    v * 2.0
                }
            })
            .collect();
        assert_close(&got.f32(), &want, 2, "elu");
        // leaky_relu
        let got = run1(
            "aten::leaky_relu.out",
            &[f(&[n], &x), A::Dbl(0.01), out(DType::F32, &[n])],
        );
        assert!(same(
            &got.f32(),
            &x.iter()
                .map(|&v| if v > 0.0 { v } else { v * 0.01 })
                .collect::<Vec<_>>()
        ));
        let e = kerr(
            "aten::leaky_relu.out",
            &[i(&[1], &[1]), A::Dbl(0.01), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
        // hardtanh
        let got = run1(
            "aten::hardtanh.out",
            &[
                f(&[4], &[f32::NAN, 5.0, -3.0, 0.5]),
                A::Int(-1),
                A::Int(1),
                out(DType::F32, &[4]),
            ],
        )
        .f32();
        assert!(got[0].is_nan());
        assert_eq!(&got[1..], &[1.0, -1.0, 0.5]);
        let got = run1(
            "aten::hardtanh.out",
            &[
                i(&[3], &[1, 5, -3]),
                A::Int(-1),
                A::Int(1),
                out(DType::I64, &[3]),
            ],
        );
        assert_eq!(got.i64(), [1, 1, -1]);
    }

    #[test]
    fn dtype_keeping_unary() {
        let x = [-2.5f32, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 3.7, f32::NAN];
        let n = x.len();
        let cases: [(&str, fn(f32) -> f32); 7] = [
            ("neg", |v| -v),
            ("abs", |v| v.abs()),
            ("floor", |v| v.floor()),
            ("ceil", |v| v.ceil()),
            ("round", |v| {
                let r = v.round();
                if (v - v.trunc()).abs() == 0.5 {
                    2.0 * (v / 2.0).round()
                } else {
                    r
                }
            }),
            ("trunc", |v| v.trunc()),
            ("sign", |v| {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }),
        ];
        for (name, r) in cases {
            let got = run1(
                &std::format!("aten::{name}.out"),
                &[f(&[n], &x), out(DType::F32, &[n])],
            );
            let want: Vec<f32> = x.iter().map(|&v| r(v)).collect();
            let g = got.f32();
            for k in 0..n {
                assert!(
                    g[k] == want[k] || (g[k].is_nan() && want[k].is_nan()),
                    "{name}[{k}]: {} vs {}",
                    g[k],
                    want[k]
                );
            }
        }
        let xi = [-3i64, 0, 5, i64::MIN];
        let got = run1("aten::neg.out", &[i(&[4], &xi), out(DType::I64, &[4])]);
        assert_eq!(got.i64(), [3, 0, -5, i64::MIN]);
        let got = run1("aten::abs.out", &[i(&[4], &xi), out(DType::I64, &[4])]);
        assert_eq!(got.i64(), [3, 0, 5, i64::MIN]);
        let got = run1(
            "aten::abs.out",
            &[
                A::Raw(DType::I8, std::vec![2], std::vec![0x80, 0xfd]),
                out(DType::I8, &[2]),
            ],
        );
        assert_eq!(got.i64(), [-128, 3]);
        let got = run1(
            "aten::sign.out",
            &[i(&[3], &[-3, 0, 5]), out(DType::I64, &[3])],
        );
        assert_eq!(got.i64(), [-1, 0, 1]);
        let got = run1(
            "aten::sign.out",
            &[b(&[2], &[true, false]), out(DType::Bool, &[2])],
        );
        assert_eq!(got.bools(), [true, false]);
        let got = run1(
            "aten::floor.out",
            &[i(&[2], &[3, -2]), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [3, -2]);
        for name in ["neg", "abs", "floor"] {
            let e = kerr(
                &std::format!("aten::{name}.out"),
                &[b(&[1], &[true]), out(DType::Bool, &[1])],
            );
            assert!(matches!(e, KernelError::UnsupportedDType { .. }), "{name}");
        }
    }

    #[test]
    fn clamp_variants() {
        let nan = f32::NAN;
        let x = [nan, 1.0, 5.0, 2.5];
        let got = run1(
            "aten::clamp.out",
            &[f(&[4], &x), A::Dbl(2.0), A::Dbl(3.0), out(DType::F32, &[4])],
        )
        .f32();
        assert!(got[0].is_nan());
        assert_eq!(&got[1..], &[2.0, 3.0, 2.5]);
        let got = run1(
            "aten::clamp.out",
            &[
                f(&[2], &[1.0, 5.0]),
                A::Dbl(3.0),
                A::Dbl(2.0),
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [2.0, 2.0]);
        let got = run1(
            "aten::clamp.out",
            &[
                f(&[2], &[1.0, 5.0]),
                A::Dbl(f64::NAN),
                A::Non,
                out(DType::F32, &[2]),
            ],
        );
        assert!(got.f32().iter().all(|v| v.is_nan()));
        let got = run1(
            "aten::clamp.out",
            &[
                f(&[3], &[1.0, 5.0, -9.0]),
                A::Non,
                A::Int(2),
                out(DType::F32, &[3]),
            ],
        );
        assert_eq!(got.f32(), [1.0, 2.0, -9.0]);
        let got = run1(
            "aten::clamp.out",
            &[
                i(&[2], &[1, 5]),
                A::Int(2),
                A::Int(3),
                out(DType::I64, &[2]),
            ],
        );
        assert_eq!(got.i64(), [2, 3]);
        // A float bound makes an int tensor float32.
        let got = run1(
            "aten::clamp.out",
            &[i(&[2], &[1, 5]), A::Dbl(2.5), A::Non, out(DType::F32, &[2])],
        );
        assert_eq!(got.f32(), [2.5, 5.0]);
        let e = kerr(
            "aten::clamp.out",
            &[i(&[2], &[1, 5]), A::Dbl(2.5), A::Non, out(DType::I64, &[2])],
        );
        assert!(matches!(e, KernelError::DTypeMismatch { .. }));
        let e = kerr(
            "aten::clamp.out",
            &[f(&[1], &[1.0]), A::Non, A::Non, out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::Value { .. }));
        // Tensor bounds with broadcasting and NaN from the bounds.
        let got = run1(
            "aten::clamp.Tensor_out",
            &[
                f(&[2], &[1.0, 5.0]),
                f(&[2], &[nan, 0.0]),
                f(&[2], &[3.0, nan]),
                out(DType::F32, &[2]),
            ],
        );
        assert!(got.f32().iter().all(|v| v.is_nan()));
        let mut rng = Rng(41);
        let xv = rng.f32s(12, -3.0, 3.0);
        let lo = rng.f32s(3, -2.0, 0.0);
        let hi = rng.f32s(4, 0.0, 2.0);
        let got = run1(
            "aten::clamp.Tensor_out",
            &[
                f(&[4, 3], &xv),
                f(&[3], &lo),
                f(&[4, 1], &hi),
                out(DType::F32, &[4, 3]),
            ],
        );
        let want: Vec<f32> = (0..12)
            .map(|k| xv[k].max(lo[k % 3]).min(hi[k / 3]))
            .collect();
        assert_eq!(got.f32(), want);
        let got = run1(
            "aten::clamp.Tensor_out",
            &[
                f(&[4, 3], &xv),
                A::Non,
                f(&[4, 1], &hi),
                out(DType::F32, &[4, 3]),
            ],
        );
        let want: Vec<f32> = (0..12).map(|k| xv[k].min(hi[k / 3])).collect();
        assert_eq!(got.f32(), want);
        let got = run1(
            "aten::clamp.Tensor_out",
            &[
                f(&[2], &[1.0, 5.0]),
                i(&[], &[2]),
                A::Non,
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [2.0, 5.0]);
        let e = kerr(
            "aten::clamp.Tensor_out",
            &[f(&[1], &[1.0]), A::Non, A::Non, out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::Value { .. }));
        let e = kerr(
            "aten::clamp.Tensor_out",
            &[
                f(&[2], &[1.0, 2.0]),
                f(&[3], &[0.0; 3]),
                A::Non,
                out(DType::F32, &[2]),
            ],
        );
        assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
    }

    #[test]
    fn nan_inf_tests() {
        let x = [1.0f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0];
        let got = run1("aten::isnan.out", &[f(&[5], &x), out(DType::Bool, &[5])]);
        assert_eq!(got.bools(), [false, true, false, false, false]);
        let got = run1("aten::isinf.out", &[f(&[5], &x), out(DType::Bool, &[5])]);
        assert_eq!(got.bools(), [false, false, true, true, false]);
        let got = run1(
            "aten::isinf.out",
            &[i(&[2], &[1, 2]), out(DType::Bool, &[2])],
        );
        assert_eq!(got.bools(), [false, false]);
        let got = run1(
            "aten::isnan.out",
            &[
                A::D(std::vec![2], std::vec![f64::NAN, 1.0]),
                out(DType::Bool, &[2]),
            ],
        );
        assert_eq!(got.bools(), [true, false]);
    }

    // ----- fills and ranges ----------------------------------------------------------------

    #[test]
    fn fills() {
        let got = run1(
            "aten::full.out",
            &[
                A::List(std::vec![2, 3]),
                A::Dbl(2.5),
                out(DType::F32, &[2, 3]),
            ],
        );
        assert_eq!(got.shape, [2, 3]);
        assert_eq!(got.f32(), [2.5; 6]);
        let got = run1(
            "aten::full.out",
            &[A::List(std::vec![2]), A::Dbl(2.7), out(DType::I64, &[2])],
        );
        assert_eq!(got.i64(), [2, 2]);
        let got = run1(
            "aten::full.out",
            &[A::List(std::vec![3]), A::Bo(true), out(DType::Bool, &[3])],
        );
        assert_eq!(got.bools(), [true; 3]);
        let got = run1(
            "aten::full.out",
            &[
                A::List(std::vec![]),
                A::Dbl(f64::NEG_INFINITY),
                out(DType::F32, &[]),
            ],
        );
        assert_eq!(got.f32(), [f32::NEG_INFINITY]);
        let got = run1(
            "aten::full.out",
            &[
                A::List(std::vec![1, 0]),
                A::Int(1),
                out(DType::F32, &[1, 0]),
            ],
        );
        assert_eq!(got.numel(), 0);
        let e = kerr(
            "aten::full.out",
            &[A::List(std::vec![-1]), A::Int(1), out(DType::F32, &[1])],
        );
        assert!(matches!(e, KernelError::Value { arg: 0, .. }));
        let e = kerr(
            "aten::full.out",
            &[A::List(std::vec![4]), A::Int(1), out(DType::F32, &[3])],
        );
        assert!(matches!(e, KernelError::Resize { .. }));
        let got = run1(
            "aten::zeros.out",
            &[A::List(std::vec![17]), out(DType::I64, &[17])],
        );
        assert_eq!(got.i64(), [0; 17]);
        let got = run1(
            "aten::ones.out",
            &[A::List(std::vec![2, 2]), out(DType::F32, &[2, 2])],
        );
        assert_eq!(got.f32(), [1.0; 4]);
        let got = run1(
            "aten::full_like.out",
            &[
                i(&[3], &[1, 2, 3]),
                A::Dbl(-0.5),
                A::Non,
                out(DType::F32, &[3]),
            ],
        );
        assert_eq!(got.f32(), [-0.5; 3]);
        let got = run1(
            "aten::scalar_tensor.out",
            &[A::Dbl(0.25), out(DType::F32, &[])],
        );
        assert_eq!((got.shape.len(), got.f32()), (0, std::vec![0.25]));
        let got = run1(
            "aten::scalar_tensor.out",
            &[A::Int(-7), out(DType::I64, &[])],
        );
        assert_eq!(got.i64(), [-7]);
        let got = run1(
            "aten::fill.Scalar_out",
            &[f(&[2, 2], &[0.0; 4]), A::Int(3), out(DType::F32, &[2, 2])],
        );
        assert_eq!(got.f32(), [3.0; 4]);
        let got = run1(
            "aten::fill.Tensor_out",
            &[f(&[3], &[0.0; 3]), f(&[], &[1.5]), out(DType::F32, &[3])],
        );
        assert_eq!(got.f32(), [1.5; 3]);
        let e = kerr(
            "aten::fill.Tensor_out",
            &[f(&[3], &[0.0; 3]), f(&[1], &[1.5]), out(DType::F32, &[3])],
        );
        assert!(matches!(e, KernelError::Shape { arg: 1, .. }));
        // f16 out
        let got = run1(
            "aten::full.out",
            &[A::List(std::vec![1]), A::Dbl(0.1), out(DType::F16, &[1])],
        );
        assert_eq!(got.f64(), [f16_to_f32(f32_to_f16(0.1)) as f64]);
    }

    #[test]
    fn arange() {
        let ar = |s: A, e: A, st: A, dt: DType, cap: usize| -> TestTensor {
            run1(
                "aten::arange.start_out",
                &[s, e, st, A::OutDyn(dt, std::vec![cap])],
            )
        };
        let got = ar(A::Int(0), A::Dbl(5.5), A::Int(1), DType::I64, 16);
        assert_eq!(got.i64(), [0, 1, 2, 3, 4, 5]);
        let got = ar(A::Dbl(0.5), A::Int(5), A::Int(1), DType::I64, 16);
        assert_eq!(got.i64(), [0, 1, 2, 3, 4]);
        let got = ar(A::Int(0), A::Int(5), A::Dbl(0.3), DType::I64, 32);
        assert_eq!(got.i64(), [0; 17]);
        let got = ar(A::Int(-3), A::Int(5), A::Dbl(2.5), DType::F32, 16);
        assert_eq!(got.f32(), [-3.0, -0.5, 2.0, 4.5]);
        let got = ar(A::Int(0), A::Int(1), A::Dbl(0.1), DType::F32, 16);
        let want: Vec<f32> = (0..10).map(|k| (0.1 * k as f64) as f32).collect();
        assert_eq!(got.f32(), want);
        let got = ar(A::Int(10), A::Int(0), A::Int(-3), DType::I64, 16);
        assert_eq!(got.i64(), [10, 7, 4, 1]);
        let got = ar(A::Int(0), A::Int(10), A::Int(3), DType::I32, 16);
        assert_eq!(got.i64(), [0, 3, 6, 9]);
        let got = ar(A::Int(5), A::Int(5), A::Int(1), DType::I64, 4);
        assert_eq!(got.shape, [0]);
        let got = ar(A::Int(1), A::Int(4), A::Int(1), DType::F64, 4);
        assert_eq!(got.f64(), [1.0, 2.0, 3.0]);
        // int64 lengths and values are exact beyond 2^53.
        let s = 1i64 << 62;
        let got = ar(A::Int(s), A::Int(s + 5), A::Int(1), DType::I64, 8);
        assert_eq!(got.i64(), [s, s + 1, s + 2, s + 3, s + 4]);
        let got = ar(A::Int(0), A::Int(1 << 62), A::Int(1 << 60), DType::I64, 8);
        assert_eq!(got.i64(), [0, 1 << 60, 2 << 60, 3 << 60]);
        // arange.out(end) into a static out
        let got = run1("aten::arange.out", &[A::Int(7), out(DType::I64, &[7])]);
        assert_eq!(got.i64(), [0, 1, 2, 3, 4, 5, 6]);
        let got = run1("aten::arange.out", &[A::Dbl(2.5), out(DType::F32, &[3])]);
        assert_eq!(got.f32(), [0.0, 1.0, 2.0]);
        // errors
        let e = kerr(
            "aten::arange.start_out",
            &[
                A::Int(0),
                A::Int(5),
                A::Int(0),
                A::OutDyn(DType::I64, std::vec![8]),
            ],
        );
        assert!(matches!(e, KernelError::Value { arg: 2, .. }));
        let e = kerr(
            "aten::arange.start_out",
            &[
                A::Int(0),
                A::Int(10),
                A::Int(-3),
                A::OutDyn(DType::I64, std::vec![8]),
            ],
        );
        assert!(matches!(e, KernelError::Value { arg: 2, .. }));
        let e = kerr(
            "aten::arange.start_out",
            &[
                A::Int(0),
                A::Dbl(f64::INFINITY),
                A::Int(1),
                A::OutDyn(DType::F32, std::vec![8]),
            ],
        );
        assert!(matches!(e, KernelError::Value { .. }));
        let e = kerr("aten::arange.out", &[A::Int(9), out(DType::I64, &[7])]);
        assert!(matches!(e, KernelError::Resize { .. }));
        let e = kerr("aten::arange.out", &[A::Int(2), out(DType::Bool, &[2])]);
        assert!(matches!(e, KernelError::UnsupportedDType { .. }));
    }

    // ----- casts ---------------------------------------------------------------------------

    #[test]
    fn casts_and_copies() {
        let x = [2.7f32, -2.7, 0.0, -1.5, 300.7, f32::NAN];
        let got = run1(
            "aten::_to_copy.out",
            &[f(&[6], &x), A::Bo(false), A::Non, out(DType::I64, &[6])],
        );
        assert_eq!(&got.i64()[..5], &[2, -2, 0, -1, 300]);
        let got = run1(
            "aten::_to_copy.out",
            &[f(&[5], &x[..5]), A::Bo(false), A::Non, out(DType::U8, &[5])],
        );
        assert_eq!(got.i64(), [2, 254, 0, 255, 44]);
        let got = run1(
            "aten::_to_copy.out",
            &[f(&[6], &x), A::Bo(false), A::Non, out(DType::Bool, &[6])],
        );
        assert_eq!(got.bools(), [true, true, false, true, true, true]);
        let got = run1(
            "aten::_to_copy.out",
            &[
                i(&[3], &[16777217, -5, 0]),
                A::Bo(false),
                A::Non,
                out(DType::F32, &[3]),
            ],
        );
        assert_eq!(got.f32(), [16777216.0, -5.0, 0.0]);
        let got = run1(
            "aten::_to_copy.out",
            &[
                b(&[2], &[true, false]),
                A::Bo(false),
                A::Non,
                out(DType::F32, &[2]),
            ],
        );
        assert_eq!(got.f32(), [1.0, 0.0]);
        let got = run1(
            "aten::_to_copy.out",
            &[
                f(&[3], &[0.1, 65504.0, 1e6]),
                A::Bo(false),
                A::Non,
                out(DType::F16, &[3]),
            ],
        );
        assert_eq!(
            got.f64(),
            [f16_to_f32(f32_to_f16(0.1)) as f64, 65504.0, f64::INFINITY]
        );
        let got = run1(
            "aten::_to_copy.out",
            &[f(&[1], &[0.1]), A::Bo(false), A::Non, out(DType::F64, &[1])],
        );
        assert_eq!(got.f64(), [0.1f32 as f64]);
        let got = run1(
            "aten::_to_copy.out",
            &[
                A::D(std::vec![1], std::vec![0.1]),
                A::Bo(false),
                A::Non,
                out(DType::F32, &[1]),
            ],
        );
        assert_eq!(got.f32(), [0.1f32]);
        let got = run1(
            "aten::_to_copy.out",
            &[
                i(&[2], &[300, -1]),
                A::Bo(false),
                A::Non,
                out(DType::I32, &[2]),
            ],
        );
        assert_eq!(got.i64(), [300, -1]);
        let mut rng = Rng(17);
        let v = rng.f32s(129, -9.0, 9.0);
        for (key, nargs) in [
            ("aten::clone.out", 1),
            ("aten::alias_copy.out", 0),
            ("aten::detach_copy.out", 0),
            ("aten::lift_fresh_copy.out", 0),
        ] {
            let mut args = std::vec![f(&[3, 43], &v)];
            if nargs == 1 {
                args.push(A::Non);
            }
            args.push(out(DType::F32, &[3, 43]));
            let got = run1(key, &args);
            assert_eq!(got.shape, [3, 43]);
            assert!(same(&got.f32(), &v), "{key}");
            args.pop();
            args.push(out(DType::F64, &[3, 43]));
            let got = run1(key, &args);
            assert_eq!(got.f64(), v.iter().map(|&x| x as f64).collect::<Vec<_>>());
        }
        let e = kerr(
            "aten::clone.out",
            &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[2])],
        );
        assert!(matches!(e, KernelError::ArgCount { expected: 4, .. }));
        let e = kerr(
            "aten::alias_copy.out",
            &[f(&[2], &[1.0, 2.0]), out(DType::F32, &[3])],
        );
        assert!(matches!(e, KernelError::Resize { .. }));
    }

    #[test]
    fn registry_has_every_key() {
        let reg = crate::exec::Registry::portable();
        let keys = [
            "aten::add.out",
            "aten::sub.out",
            "aten::mul.out",
            "aten::div.out",
            "aten::div.out_mode",
            "aten::add.Scalar_out",
            "aten::sub.Scalar_out",
            "aten::mul.Scalar_out",
            "aten::div.Scalar_out",
            "aten::rsub.Scalar_out",
            "aten::pow.Tensor_Scalar_out",
            "aten::pow.Tensor_Tensor_out",
            "aten::maximum.out",
            "aten::minimum.out",
            "aten::remainder.Scalar_out",
            "aten::fmod.Scalar_out",
            "aten::floor_divide.out",
            "aten::eq.Tensor_out",
            "aten::ne.Tensor_out",
            "aten::lt.Tensor_out",
            "aten::le.Tensor_out",
            "aten::gt.Tensor_out",
            "aten::ge.Tensor_out",
            "aten::eq.Scalar_out",
            "aten::ne.Scalar_out",
            "aten::lt.Scalar_out",
            "aten::le.Scalar_out",
            "aten::gt.Scalar_out",
            "aten::ge.Scalar_out",
            "aten::bitwise_and.Tensor_out",
            "aten::bitwise_or.Tensor_out",
            "aten::bitwise_xor.Tensor_out",
            "aten::bitwise_not.out",
            "aten::logical_and.out",
            "aten::logical_or.out",
            "aten::logical_xor.out",
            "aten::logical_not.out",
            "aten::bitwise_and.Scalar_out",
            "aten::where.self_out",
            "aten::masked_fill.Scalar_out",
            "aten::tanh.out",
            "aten::relu.out",
            "aten::sigmoid.out",
            "aten::neg.out",
            "aten::exp.out",
            "aten::log.out",
            "aten::sqrt.out",
            "aten::rsqrt.out",
            "aten::abs.out",
            "aten::sin.out",
            "aten::cos.out",
            "aten::erf.out",
            "aten::reciprocal.out",
            "aten::floor.out",
            "aten::ceil.out",
            "aten::round.out",
            "aten::sign.out",
            "aten::gelu.out",
            "aten::silu.out",
            "aten::hardtanh.out",
            "aten::leaky_relu.out",
            "aten::elu.out",
            "aten::clamp.out",
            "aten::clamp.Tensor_out",
            "aten::isnan.out",
            "aten::isinf.out",
            "aten::full.out",
            "aten::full_like.out",
            "aten::zeros.out",
            "aten::ones.out",
            "aten::scalar_tensor.out",
            "aten::fill.Scalar_out",
            "aten::arange.out",
            "aten::arange.start_out",
            "aten::_to_copy.out",
            "aten::clone.out",
            "aten::alias_copy.out",
            "aten::detach_copy.out",
            "aten::lift_fresh_copy.out",
        ];
        for k in keys {
            let (name, ov) = crate::testing::split_key(k);
            assert!(reg.kernel(name, ov).is_some(), "{k} not registered");
        }
        let mut names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate keys");
        let _ = String::new();
    }

    // ----- f32 fast paths (kernels::vec) ----------------------------------------------------

    fn ramp(n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|k| (((k * 7919) % 1000) as f32 / 500.0 - 1.0) * scale + 0.125)
            .collect()
    }

    #[test]
    fn arith_f32_fast_broadcast_forms() {
        // (x shape, y shape): same shape, scalar, one-element tensor, trailing row, left row,
        // per-row column, leading broadcast of a block, general (no fast path).
        let cases: [(&[usize], &[usize]); 10] = [
            (&[17], &[17]),
            (&[3, 129], &[3, 129]),
            (&[2, 3, 17], &[17]),
            (&[17], &[2, 3, 17]),
            (&[4, 3], &[4, 1]),
            (&[1, 4, 16, 16], &[1, 1, 16, 16]),
            (&[5, 1], &[1, 3]),
            (&[2, 3, 4], &[1]),
            (&[1], &[3, 1, 5]),
            (&[0, 3], &[3]),
        ];
        for (xs, ys) in cases {
            let os = broadcast_dims(xs, ys);
            let xv = ramp(numel(xs), 3.0);
            let yv: Vec<f32> = ramp(numel(ys), -2.0).iter().map(|v| v + 0.5).collect();
            for (key, op) in [
                ("aten::add.out", 0),
                ("aten::sub.out", 1),
                ("aten::mul.out", 2),
                ("aten::div.out", 3),
                ("aten::maximum.out", 4),
                ("aten::minimum.out", 5),
            ] {
                let mut args = std::vec![f(xs, &xv), f(ys, &yv)];
                if op < 2 {
                    args.push(A::Int(1));
                }
                args.push(out(DType::F32, &os));
                let got = run1(key, &args);
                assert_eq!(got.shape, os);
                let g = got.f32();
                for (o, &gv) in g.iter().enumerate() {
                    let a = xv[broadcast_index(o, &os, xs)];
                    let b = yv[broadcast_index(o, &os, ys)];
                    let w = match op {
                        0 => a + b,
                        1 => a - b,
                        2 => a * b,
                        3 => a / b,
                        4 => a.max(b),
                        _ => a.min(b),
                    };
                    assert_eq!(gv, w, "{key} {xs:?} {ys:?} at {o}");
                }
            }
            // alpha != 1 takes the generic path and still matches.
            let got = run1(
                "aten::add.out",
                &[f(xs, &xv), f(ys, &yv), A::Dbl(2.5), out(DType::F32, &os)],
            )
            .f32();
            for (o, &gv) in got.iter().enumerate() {
                let w = xv[broadcast_index(o, &os, xs)] + 2.5 * yv[broadcast_index(o, &os, ys)];
                assert!((gv - w).abs() <= 1e-6 * w.abs().max(1.0));
            }
        }
        // Scalar overloads and NaN propagation of maximum.
        let xv = ramp(129, 2.0);
        let g = run1(
            "aten::mul.Scalar_out",
            &[f(&[129], &xv), A::Dbl(-1.5), out(DType::F32, &[129])],
        )
        .f32();
        assert!(g.iter().zip(&xv).all(|(g, x)| *g == x * -1.5));
        let g = run1(
            "aten::maximum.out",
            &[
                f(&[3], &[1.0, f32::NAN, 3.0]),
                f(&[3], &[2.0, 0.0, f32::NAN]),
                out(DType::F32, &[3]),
            ],
        )
        .f32();
        assert_eq!(g[0], 2.0);
        assert!(g[1].is_nan() && g[2].is_nan());
        // Wrong output shape is an error, not a panic.
        assert!(run(
            "aten::add.out",
            &[
                f(&[3], &[1.0; 3]),
                f(&[2], &[1.0; 2]),
                A::Int(1),
                out(DType::F32, &[3])
            ]
        )
        .is_err());
    }

    #[test]
    fn pow_and_unary_f32_fast_paths() {
        for n in [0usize, 1, 3, 17, 129] {
            let xv: Vec<f32> = ramp(n, 4.0);
            for e in [2.0f64, 3.0, 0.5, -1.0, 1.7] {
                let g = run1(
                    "aten::pow.Tensor_Scalar_out",
                    &[f(&[n], &xv), A::Dbl(e), out(DType::F32, &[n])],
                )
                .f32();
                for (g, &x) in g.iter().zip(&xv) {
                    let w = (x as f64).powf(e);
                    assert!(
                        (*g as f64 - w).abs() <= 1e-6 * w.abs() + 1e-7
                            || (w.is_nan() && g.is_nan()),
                        "{x}^{e}: {g} vs {w}"
                    );
                }
            }
            let g = run1(
                "aten::pow.Tensor_Scalar_out",
                &[f(&[n], &xv), A::Int(3), out(DType::F32, &[n])],
            )
            .f32();
            assert!(g.iter().zip(&xv).all(|(g, x)| *g == x * x * x));
            type R = fn(f64) -> f64;
            let refs: [(&str, R); 3] = [
                ("aten::tanh.out", f64::tanh),
                ("aten::sigmoid.out", |x| 1.0 / (1.0 + (-x).exp())),
                ("aten::exp.out", f64::exp),
            ];
            for (key, r) in refs {
                let g = run1(key, &[f(&[n], &xv), out(DType::F32, &[n])]).f32();
                for (g, &x) in g.iter().zip(&xv) {
                    let w = r(x as f64);
                    assert!((*g as f64 - w).abs() <= 5e-7 * w.abs() + 1e-7, "{key}({x})");
                }
            }
            for (mode, r) in [
                (
                    "tanh",
                    (|x: f64| {
                        let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                        x / (1.0 + (-2.0 * u).exp())
                    }) as R,
                ),
                ("none", |x| {
                    0.5 * x * libm::erfc(-x / core::f64::consts::SQRT_2)
                }),
            ] {
                let g = run1(
                    "aten::gelu.out",
                    &[f(&[n], &xv), A::Str(mode), out(DType::F32, &[n])],
                )
                .f32();
                for (g, &x) in g.iter().zip(&xv) {
                    let w = r(x as f64);
                    assert!(
                        (*g as f64 - w).abs() <= 3e-6 * w.abs() + 1e-7,
                        "gelu {mode}({x})"
                    );
                }
            }
        }
        // f64 stays on libm.
        let g = run1(
            "aten::tanh.out",
            &[
                A::D(std::vec![2], std::vec![0.5, -3.0]),
                out(DType::F64, &[2]),
            ],
        )
        .f64();
        assert_eq!(g, std::vec![0.5f64.tanh(), (-3.0f64).tanh()]);
    }

    #[test]
    fn mask_fast_paths() {
        for n in [0usize, 1, 3, 17, 129] {
            let xv = ramp(n, 2.0);
            let yv: Vec<f32> = (0..n)
                .map(|k| if k % 3 == 0 { xv[k] } else { 0.1 })
                .collect();
            let xi: Vec<i64> = (0..n as i64).map(|k| k % 5 - 2).collect();
            let yi: Vec<i64> = (0..n as i64).map(|k| k % 3 - 1).collect();
            type C = fn(f64, f64) -> bool;
            let ops: [(&str, C); 6] = [
                ("eq", |a, b| a == b),
                ("ne", |a, b| a != b),
                ("lt", |a, b| a < b),
                ("le", |a, b| a <= b),
                ("gt", |a, b| a > b),
                ("ge", |a, b| a >= b),
            ];
            for (name, r) in ops {
                let key = std::format!("aten::{name}.Tensor_out");
                let g = run1(&key, &[f(&[n], &xv), f(&[n], &yv), out(DType::Bool, &[n])]);
                let w: Vec<bool> = (0..n).map(|k| r(xv[k] as f64, yv[k] as f64)).collect();
                assert_eq!(g.bools(), w, "{key} f32");
                let g = run1(&key, &[i(&[n], &xi), i(&[n], &yi), out(DType::Bool, &[n])]);
                let w: Vec<bool> = (0..n).map(|k| r(xi[k] as f64, yi[k] as f64)).collect();
                assert_eq!(g.bools(), w, "{key} i64");
                let key = std::format!("aten::{name}.Scalar_out");
                let g = run1(&key, &[i(&[n], &xi), A::Int(0), out(DType::Bool, &[n])]);
                let w: Vec<bool> = (0..n).map(|k| r(xi[k] as f64, 0.0)).collect();
                assert_eq!(g.bools(), w, "{key} i64 scalar");
                let g = run1(&key, &[f(&[n], &xv), A::Dbl(0.25), out(DType::Bool, &[n])]);
                let w: Vec<bool> = (0..n).map(|k| r(xv[k] as f64, 0.25)).collect();
                assert_eq!(g.bools(), w, "{key} f32 scalar");
            }
            let cond: Vec<bool> = (0..n).map(|k| k % 4 != 1).collect();
            let g = run1(
                "aten::where.self_out",
                &[
                    b(&[n], &cond),
                    f(&[n], &xv),
                    f(&[n], &yv),
                    out(DType::F32, &[n]),
                ],
            )
            .f32();
            let w: Vec<f32> = (0..n)
                .map(|k| if cond[k] { xv[k] } else { yv[k] })
                .collect();
            assert_eq!(g, w);
            let g = run1(
                "aten::where.self_out",
                &[
                    b(&[n], &cond),
                    f(&[], &[1.5]),
                    f(&[1], &[-2.0]),
                    out(DType::F32, &[n]),
                ],
            )
            .f32();
            let w: Vec<f32> = cond.iter().map(|&c| if c { 1.5 } else { -2.0 }).collect();
            assert_eq!(g, w);
            let g = run1(
                "aten::logical_not.out",
                &[b(&[n], &cond), out(DType::Bool, &[n])],
            );
            assert_eq!(g.bools(), cond.iter().map(|c| !c).collect::<Vec<_>>());
        }
        // where with a [1, 1, T, T] condition against [1, H, T, T] values (generic path).
        let (h, t) = (3usize, 5usize);
        let cond: Vec<bool> = (0..t * t).map(|k| k % t <= k / t).collect();
        let xv = ramp(h * t * t, 1.0);
        let g = run1(
            "aten::where.self_out",
            &[
                b(&[1, 1, t, t], &cond),
                f(&[1, h, t, t], &xv),
                f(&[], &[f32::NEG_INFINITY]),
                out(DType::F32, &[1, h, t, t]),
            ],
        )
        .f32();
        for (k, &gv) in g.iter().enumerate() {
            let w = if cond[k % (t * t)] {
                xv[k]
            } else {
                f32::NEG_INFINITY
            };
            assert_eq!(gv, w);
        }
    }
}
