//! x86_64 micro-kernels (host builds).

pub mod avx2;
pub mod avx512;
