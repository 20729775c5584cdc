//! Prim ops: symbolic sizes, scalar arithmetic (`executorch_prim::*`), `et_view`, `copy_`.
use crate::kernels::KernelDef;

pub static KERNELS: &[KernelDef] = &[];
