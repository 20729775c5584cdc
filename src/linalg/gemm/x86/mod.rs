//! x86_64 micro-kernels (host builds).

pub mod avx2;
