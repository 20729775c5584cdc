//! `Program::load` and `MethodMeta::new` of every method, on any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ptera_fuzz::harness::load(data);
});
