//! The prepared product runner against the GEMM it hands the call to, and its refusals.

use super::*;
use crate::kernel_api::TensorSlot;
use crate::kernels::portable::test_util::{record, table_entry};
use crate::shape::Shape;
use crate::testing::Rng;
use std::vec;
use std::vec::Vec;

fn slot(data: &mut [f32], dims: &[usize]) -> TensorSlot {
    table_entry(DType::F32, data.as_mut_ptr().cast(), dims, data.len() * 4)
}

fn product(sizes: [usize; 4], bias: bool, param: u32) -> Prepared {
    let slots: &[u32] = if bias { &[0, 1, 2, 3] } else { &[0, 1, 2] };
    record(run_product, slots, sizes.map(|s| s as u32), param)
}

/// The scratch a method gives a matmul kernel (as declared, byte-aligned anyhow).
fn scratch() -> Vec<u8> {
    vec![0u8; super::super::matmul::GEMM_SCRATCH]
}

/// Matrix products with and without a bias, on odd shapes: the bits `gemm::sgemm` gives
/// with the general path's arguments.
#[test]
fn prepared_products_give_the_general_paths_bits() {
    let mut rng = Rng(7);
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 17, 129),
        (17, 3, 5),
        (16, 64, 192),
        (5, 129, 17),
    ] {
        for bias in [false, true] {
            let (mut a, mut b, mut c) = (rng.vec(m * k), rng.vec(k * n), rng.vec(n));
            let mut out = vec![f32::NAN; m * n];
            let (ad, bd) = (a.clone(), b.clone());
            let mut want = vec![0.0f32; m * n];
            let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
            let (am, bm) = (
                MatRef::row_major(&ad, m, k).unwrap(),
                MatRef::row_major(&bd, k, n).unwrap(),
            );
            let cb = c.clone();
            gemm::sgemm(
                am,
                bm,
                &mut want,
                n,
                1.0,
                0.0,
                bias.then_some(&cb[..]),
                &mut s,
            )
            .unwrap();
            let tensors = [
                slot(&mut a, &[m, k]),
                slot(&mut b, &[k, n]),
                slot(&mut out, &[m, n]),
                slot(&mut c, &[1, n]),
            ];
            let p = product([1, m, k, n], bias, 0);
            assert!(run_product(&p, &tensors, &mut scratch()).unwrap());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&want), "{m}x{k}x{n} bias {bias}");
        }
    }
}

/// Batched products: each batch the bits of its own product.
#[test]
fn prepared_batched_products_give_each_products_bits() {
    let mut rng = Rng(9);
    for &(nb, m, k, n) in &[(1, 3, 5, 7), (3, 16, 16, 16), (4, 17, 3, 129)] {
        let (mut a, mut b) = (rng.vec(nb * m * k), rng.vec(nb * k * n));
        let mut out = vec![f32::NAN; nb * m * n];
        let mut want = vec![0.0f32; nb * m * n];
        let mut s = vec![0.0f32; GEMM_SCRATCH_F32];
        for i in 0..nb {
            let am = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k).unwrap();
            let bm = MatRef::row_major(&b[i * k * n..(i + 1) * k * n], k, n).unwrap();
            let c = &mut want[i * m * n..(i + 1) * m * n];
            gemm::sgemm(am, bm, c, n, 1.0, 0.0, None, &mut s).unwrap();
        }
        let tensors = [
            slot(&mut a, &[nb, m, k]),
            slot(&mut b, &[nb, k, n]),
            slot(&mut out, &[nb, m, n]),
        ];
        let p = product([nb, m, k, n], false, BATCHED);
        assert!(run_product(&p, &tensors, &mut scratch()).unwrap());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&want), "{nb}x{m}x{k}x{n}");
    }
}

/// A tensor that is no longer what preparing saw sends the call back to the general path,
/// with nothing written: a shape, the bias's shape, a dtype, the output's writability or
/// binding; a scratch smaller than declared is the scratch error.
#[test]
fn a_prepared_product_runs_only_on_what_it_was_prepared_for() {
    let (m, k, n) = (3, 4, 5);
    let mut rng = Rng(3);
    let (mut a, mut b, mut c) = (rng.vec(m * k), rng.vec(k * n), rng.vec(n));
    let mut out = vec![f32::NAN; m * n];
    let base = [
        slot(&mut a, &[m, k]),
        slot(&mut b, &[k, n]),
        slot(&mut out, &[m, n]),
        slot(&mut c, &[n]),
    ];
    let p = product([1, m, k, n], true, 0);
    let mut changes: Vec<[TensorSlot; 4]> = Vec::new();
    let mut t = base;
    t[0].shape = Shape::new(&[m, k, 1]).unwrap();
    changes.push(t);
    let mut t = base;
    t[1].shape = Shape::new(&[k, n + 1]).unwrap();
    changes.push(t);
    let mut t = base;
    t[3].shape = Shape::new(&[2, n]).unwrap();
    changes.push(t);
    let mut t = base;
    t[3].dtype = DType::F64;
    changes.push(t);
    let mut t = base;
    t[2].writable = false;
    changes.push(t);
    let mut t = base;
    t[2].data = core::ptr::null_mut();
    changes.push(t);
    for (i, t) in changes.iter().enumerate() {
        assert!(!run_product(&p, t, &mut scratch()).unwrap(), "change {i}");
    }
    assert!(out.iter().all(|x| x.is_nan()));
    let short = run_product(&p, &base, &mut [0u8; 64]);
    assert!(
        matches!(short, Err(KernelError::Scratch { .. })),
        "{short:?}"
    );
    assert!(run_product(&p, &base, &mut scratch()).unwrap());
    assert!(out.iter().all(|x| x.is_finite()));
}
