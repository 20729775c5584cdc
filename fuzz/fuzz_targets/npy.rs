//! The `.npy` reader of the host tools.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = ptera::host::npy::parse(data) {
        // The data view is exactly what the header declares.
        let bytes = n.shape.iter().product::<usize>() * n.item_size;
        assert_eq!(bytes, n.data.len());
        let _ = n.descr();
    }
});
