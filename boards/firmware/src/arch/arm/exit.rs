//! Ending a run: under QEMU (feature `semihosting`) SYS_EXIT_EXTENDED makes `status` QEMU's exit
//! code; on hardware the core parks (the host has already received the DONE packet or the panic
//! text).

#[cfg(feature = "semihosting")]
pub fn exit(status: u32) -> ! {
    const SYS_EXIT_EXTENDED: u32 = 0x20;
    const ADP_STOPPED_APPLICATION_EXIT: u32 = 0x20026;
    let block = [ADP_STOPPED_APPLICATION_EXIT, status];
    // SAFETY: AArch32 semihosting call (SVC 0x123456 in A32 state, at PL1) with r0 =
    // SYS_EXIT_EXTENDED and r1 pointing to the {reason, subcode} block, valid for the duration
    // of the call. QEMU does not return.
    unsafe {
        core::arch::asm!("svc #0x123456", in("r0") SYS_EXIT_EXTENDED, in("r1") block.as_ptr(),
            options(nostack));
    }
    park()
}

#[cfg(not(feature = "semihosting"))]
pub fn exit(_status: u32) -> ! {
    park()
}

fn park() -> ! {
    loop {
        // SAFETY: waits for an event; no memory or register effects.
        unsafe { core::arch::asm!("wfe", options(nomem, nostack)) };
    }
}
