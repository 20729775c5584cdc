//! ETDump files as the host tools read them (`harness::etdump`): the verified flatbuffer
//! root, every run and event field.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptera_fuzz::harness;

fuzz_target!(|data: &[u8]| {
    let _ = harness::etdump(data);
});
