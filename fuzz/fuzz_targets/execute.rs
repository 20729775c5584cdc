//! The whole path on any bytes: load, validate, allocate within a budget, load the method,
//! set inputs, execute under a step limit, read outputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ptera_fuzz::harness::execute(data);
});
