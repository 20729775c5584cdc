//! BundledProgram files: the `.bpte` reader, the embedded program, every suite's method and
//! every test case run and compared (`harness::bundled`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptera_fuzz::harness;

fuzz_target!(|data: &[u8]| {
    let _ = harness::bundled(data);
});
