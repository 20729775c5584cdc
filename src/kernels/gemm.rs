//! Cache-blocked single-precision GEMM (placeholder until written).
