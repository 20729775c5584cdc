//! Streaming-mode building blocks shared by the SME / SME2 kernels, packers and GEMV: the
//! `asm!` wrapper that declares what `smstart` / `smstop` clobber, and the streaming vector
//! length.

use core::arch::asm;

/// `asm!` for a block that enters and leaves streaming mode: appends every vector and
/// predicate register (and FFR) as clobbered — `smstart`/`smstop` zero them, and declaring
/// v0–v31 makes the compiler save the callee-saved d8–d15 itself — and `options(nostack)`.
macro_rules! streaming_asm {
    ($($body:tt)*) => {
        core::arch::asm!(
            $($body)*
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _,
            out("v5") _, out("v6") _, out("v7") _, out("v8") _, out("v9") _,
            out("v10") _, out("v11") _, out("v12") _, out("v13") _, out("v14") _,
            out("v15") _, out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _,
            out("v30") _, out("v31") _,
            out("p0") _, out("p1") _, out("p2") _, out("p3") _, out("p4") _,
            out("p5") _, out("p6") _, out("p7") _, out("p8") _, out("p9") _,
            out("p10") _, out("p11") _, out("p12") _, out("p13") _, out("p14") _,
            out("p15") _, out("ffr") _,
            options(nostack),
        )
    };
}
pub(crate) use streaming_asm;

/// Streaming vector length in bytes (`rdsvl`, legal outside streaming mode).
pub fn svl_bytes() -> usize {
    if !crate::linalg::cpu::features().sme {
        return 0;
    }
    let n: usize;
    // SAFETY: SME is present (checked above); RDSVL only reads the streaming vector length
    // and is legal in non-streaming mode. Not `pure`: SVL is run-time state.
    unsafe {
        asm!(".arch_extension sme", "rdsvl {}, #1", out(reg) n,
            options(nomem, nostack, preserves_flags))
    };
    n
}
