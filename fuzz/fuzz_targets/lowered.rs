//! ptera's own region payload reader and its backend's prepare/init: first byte picks a
//! lowered host program, the rest is the payload.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use ptera_fuzz::harness::{self, Host};
use ptera_fuzz::LOWERED_HOSTS;

thread_local! {
    static HOSTS: RefCell<Vec<Host>> =
        RefCell::new(LOWERED_HOSTS.iter().map(|(_, p)| Host::new(p)).collect());
}

fuzz_target!(|data: &[u8]| {
    let Some((h, payload)) = ptera_fuzz::split_host(data, LOWERED_HOSTS.len()) else {
        return;
    };
    HOSTS.with(|hosts| {
        let _ = harness::lowered(&mut hosts.borrow_mut()[h], payload);
    });
});
