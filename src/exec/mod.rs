//! Execution machinery under the public [`Method`](crate::Method) API: the operator and
//! backend [`Registry`], validation of a plan, the metadata-buffer layout, the value table,
//! the instruction loop, and the load-time analyses (output-row demand, copy elision, output
//! aliasing) and decoding of the instructions for the loop.

pub mod alias;
pub mod decoded;
pub mod demand;
pub mod elide;
pub mod fold;
pub mod layout;
pub mod prepared;
pub mod registry;
pub mod run;
pub mod validate;
pub mod values;

pub use registry::{Registry, BACKENDS};
