//! Compute types of the elementwise kernels: [`Ct`] (f32, f64, i64, bool with C++-style
//! conversions from and to every tensor dtype), the arithmetic ([`Num`]), float ([`Float`])
//! and bitwise ([`Bits`]) operations on them, and the dtype → compute type dispatch ([`Kind`],
//! `with_ct!`, `with_num!`). float32/float16/bfloat16 compute in f32, float64 in f64, integers in
//! wrapping i64, bool as bool.

use crate::dtype::{DType, Scalar};
use crate::tensor::{read_f64, read_i64, write_f64, write_i64, Element};
use core::ops::{Add, Div, Mul, Neg, Sub};

/// A type kernels compute in (f32, f64, i64, bool), with its storage type and the C++-style
/// conversions between compute types and from/to any tensor dtype.
pub(super) trait Ct: Copy + Send + Sync + 'static {
    /// In-memory element type of a tensor whose dtype is [`Ct::DT`].
    type S: Element + Send + Sync;
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
pub(super) trait Num: Ct + PartialOrd {
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
pub(super) trait Float:
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
pub(super) trait Bits: Ct {
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
pub(super) enum Kind {
    F32,
    F64,
    I64,
    Bool,
}

/// Compute kind of `d`: f64 stays f64, other floats compute in f32, integers in i64.
pub(super) fn kind(d: DType) -> Kind {
    match d {
        DType::F64 => Kind::F64,
        DType::Bool => Kind::Bool,
        d if d.is_float() => Kind::F32,
        _ => Kind::I64,
    }
}

/// Like [`kind`], with bool computed as an integer (arithmetic on bools).
pub(super) fn num_kind(d: DType) -> Kind {
    match kind(d) {
        Kind::Bool => Kind::I64,
        k => k,
    }
}

/// Runs `$body` with `$T` bound to the compute type of kind `$k` (all four kinds).
macro_rules! with_ct {
    ($k:expr, $T:ident, $body:expr) => {
        match $k {
            $crate::kernels::portable::compute::Kind::F32 => {
                type $T = f32;
                $body
            }
            $crate::kernels::portable::compute::Kind::F64 => {
                type $T = f64;
                $body
            }
            $crate::kernels::portable::compute::Kind::I64 => {
                type $T = i64;
                $body
            }
            $crate::kernels::portable::compute::Kind::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}
pub(super) use with_ct;

/// Runs `$body` with `$T` bound to the numeric compute type of kind `$k` (bool → i64).
macro_rules! with_num {
    ($k:expr, $T:ident, $body:expr) => {
        match $k {
            $crate::kernels::portable::compute::Kind::F32 => {
                type $T = f32;
                $body
            }
            $crate::kernels::portable::compute::Kind::F64 => {
                type $T = f64;
                $body
            }
            $crate::kernels::portable::compute::Kind::I64
            | $crate::kernels::portable::compute::Kind::Bool => {
                type $T = i64;
                $body
            }
        }
    };
}
pub(super) use with_num;
