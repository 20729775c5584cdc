//! (being written)
use crate::kernels::KernelDef;

pub static KERNELS: &[KernelDef] = &[];
