//! Tests of the portable kernel tables as a whole: every elementwise operator key is found
//! through the portable registry, and no key is defined twice.

use super::KERNELS;
use std::vec::Vec;

#[test]
fn registry_has_every_key() {
    let reg = crate::exec::Registry::portable();
    let keys = [
        "aten::add.out",
        "aten::sub.out",
        "aten::mul.out",
        "aten::div.out",
        "aten::div.out_mode",
        "aten::add.Scalar_out",
        "aten::sub.Scalar_out",
        "aten::mul.Scalar_out",
        "aten::div.Scalar_out",
        "aten::rsub.Scalar_out",
        "aten::pow.Tensor_Scalar_out",
        "aten::pow.Tensor_Tensor_out",
        "aten::maximum.out",
        "aten::minimum.out",
        "aten::remainder.Scalar_out",
        "aten::fmod.Scalar_out",
        "aten::floor_divide.out",
        "aten::eq.Tensor_out",
        "aten::ne.Tensor_out",
        "aten::lt.Tensor_out",
        "aten::le.Tensor_out",
        "aten::gt.Tensor_out",
        "aten::ge.Tensor_out",
        "aten::eq.Scalar_out",
        "aten::ne.Scalar_out",
        "aten::lt.Scalar_out",
        "aten::le.Scalar_out",
        "aten::gt.Scalar_out",
        "aten::ge.Scalar_out",
        "aten::bitwise_and.Tensor_out",
        "aten::bitwise_or.Tensor_out",
        "aten::bitwise_xor.Tensor_out",
        "aten::bitwise_not.out",
        "aten::logical_and.out",
        "aten::logical_or.out",
        "aten::logical_xor.out",
        "aten::logical_not.out",
        "aten::bitwise_and.Scalar_out",
        "aten::where.self_out",
        "aten::masked_fill.Scalar_out",
        "aten::tanh.out",
        "aten::relu.out",
        "aten::sigmoid.out",
        "aten::neg.out",
        "aten::exp.out",
        "aten::log.out",
        "aten::sqrt.out",
        "aten::rsqrt.out",
        "aten::abs.out",
        "aten::sin.out",
        "aten::cos.out",
        "aten::erf.out",
        "aten::reciprocal.out",
        "aten::floor.out",
        "aten::ceil.out",
        "aten::round.out",
        "aten::sign.out",
        "aten::gelu.out",
        "aten::silu.out",
        "aten::hardtanh.out",
        "aten::leaky_relu.out",
        "aten::elu.out",
        "aten::clamp.out",
        "aten::clamp.Tensor_out",
        "aten::isnan.out",
        "aten::isinf.out",
        "aten::full.out",
        "aten::full_like.out",
        "aten::zeros.out",
        "aten::ones.out",
        "aten::scalar_tensor.out",
        "aten::fill.Scalar_out",
        "aten::arange.out",
        "aten::arange.start_out",
        "aten::_to_copy.out",
        "aten::clone.out",
        "aten::alias_copy.out",
        "aten::detach_copy.out",
        "aten::lift_fresh_copy.out",
    ];
    for k in keys {
        let (name, ov) = crate::testing::split_key(k);
        assert!(reg.kernel(name, ov).is_some(), "{k} not registered");
    }
    // No key twice in the portable tables (every family table, in lookup order).
    let mut names: Vec<&str> = KERNELS
        .iter()
        .flat_map(|t| t.iter())
        .map(|k| k.name)
        .collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate keys");
}
