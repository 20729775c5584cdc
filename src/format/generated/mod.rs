//! flatc 25.12.19 output for ptera's own `schema/*.fbs` (regenerate with `schema/regen.sh`).
#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn,
    mismatched_lifetime_syntaxes,
    dead_code,
    unused_imports,
    non_camel_case_types,
    deprecated
)]
#[rustfmt::skip]
pub mod program;
#[rustfmt::skip]
pub mod xnnpack;
#[rustfmt::skip]
pub mod ptera;
#[rustfmt::skip]
pub mod etdump;
#[rustfmt::skip]
pub mod bundled_program;
