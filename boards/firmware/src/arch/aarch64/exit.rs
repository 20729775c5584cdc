//! Ending a run: under QEMU (feature `semihosting`) SYS_EXIT makes `status` QEMU's exit code; on
//! hardware the core parks (the host has already received the DONE packet or the panic text).

#[cfg(feature = "semihosting")]
pub fn exit(status: u32) -> ! {
    const SYS_EXIT: u64 = 0x18;
    const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x20026;
    let block = [ADP_STOPPED_APPLICATION_EXIT, u64::from(status)];
    // SAFETY: AArch64 semihosting call (HLT #0xF000) with x0 = SYS_EXIT and x1 pointing to the
    // {reason, subcode} block, valid for the duration of the call. QEMU does not return.
    unsafe {
        core::arch::asm!("hlt #0xf000", in("x0") SYS_EXIT, in("x1") block.as_ptr(), options(nostack));
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
