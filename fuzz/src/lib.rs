//! Fuzzing support for ptera: the paths each target drives ([`harness`]), the structure-aware
//! program generator ([`structured`]) and the embedded host programs the delegate targets
//! place their payloads in.

pub mod harness;
pub mod structured;

mod hosts;
pub use hosts::{split_host, LOWERED_HOSTS, XNNPACK_HOSTS};
