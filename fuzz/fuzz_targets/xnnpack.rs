//! The XNNPACK payload reader and translation: first byte picks a host program, the rest is
//! the payload.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use ptera_fuzz::harness::{self, Host};
use ptera_fuzz::XNNPACK_HOSTS;

thread_local! {
    static HOSTS: RefCell<Vec<Host>> =
        RefCell::new(XNNPACK_HOSTS.iter().map(|(_, p)| Host::new(p)).collect());
}

fuzz_target!(|data: &[u8]| {
    let Some((h, payload)) = ptera_fuzz::split_host(data, XNNPACK_HOSTS.len()) else {
        return;
    };
    HOSTS.with(|hosts| {
        let _ = harness::xnnpack(&mut hosts.borrow_mut()[h], payload);
    });
});
