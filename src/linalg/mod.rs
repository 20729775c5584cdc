//! Linear algebra under the kernels and delegates: the blocked GEMM with its micro-kernels
//! ([`gemm`]), checked fp32 slice math ([`vecmath`]) and CPU feature detection ([`cpu`]).
//! Nothing here knows about programs, tensors or kernels' calling convention: operands are
//! slices and strided views, errors are [`KernelError`](crate::KernelError)s.

pub mod attention;
pub mod conv;
pub mod cpu;
pub mod gemm;
pub mod quant;
pub mod vecmath;
