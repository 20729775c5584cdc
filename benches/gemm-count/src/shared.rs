//! What the counting programs share: the never-inlined marks the trace counter looks for, and
//! deterministic inputs for a method (int tensors = 1, float tensors = small ramps).

use std::sync::atomic::{AtomicU32, Ordering};

use ptera::{DType, MethodMeta, Shape};

static MARKS: AtomicU32 = AtomicU32::new(0);

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_bench_mark_begin() {
    MARKS.fetch_add(1, Ordering::SeqCst);
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_bench_mark_end() {
    MARKS.fetch_add(2, Ordering::SeqCst);
}

/// Inputs for every tensor input of `meta`: dtype, shape and little-endian bytes.
#[allow(dead_code)] // not every counting program runs a whole method
pub fn synth_inputs(meta: &MethodMeta<'_>) -> Vec<(DType, Shape, Vec<u8>)> {
    (0..meta.num_inputs())
        .map(|i| {
            let info = meta.input(i).expect("tensor input");
            let n = info.shape.numel();
            let mut bytes = vec![0u8; n * info.dtype.size()];
            for k in 0..n {
                if info.dtype.is_float() {
                    let v = ((k % 17) as f64 - 8.0) / 8.0;
                    ptera::tensor::write_f64(info.dtype, &mut bytes, k, v);
                } else {
                    ptera::tensor::write_i64(info.dtype, &mut bytes, k, 1);
                }
            }
            (info.dtype, info.shape, bytes)
        })
        .collect()
}
