//! One file per `cargo xtask` verb.

pub mod bench_gemm;
pub mod bench_ops;
pub mod bench_run;
pub mod boards;
pub mod compare;
pub mod deploy;
pub mod graph;
pub mod inspect;
pub mod lower;
pub mod profile;
pub mod qemu;
pub mod run;
pub mod trace_cores;
