//! The other cores of the 32-bit boards: not started yet (their boards' tables say `Smp::None`),
//! so the forward runs on core 0 and nothing here reserves memory.

use ptera::parallel::spin::SpinTeam;

/// No other core to start: the forward runs on core 0.
pub fn start() -> Option<(&'static SpinTeam, usize)> {
    None
}

/// No other core, no other stack.
pub fn stack_regions() -> impl Iterator<Item = crate::mmu::Region> {
    core::iter::empty()
}
