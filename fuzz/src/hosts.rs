//! Host programs of the delegate targets, embedded (shared with `tests/fuzz_regressions.rs`,
//! which includes this file).

/// XNNPACK fixtures: hosts for the `xnnpack` target (a payload's first byte picks one).
pub const XNNPACK_HOSTS: &[(&str, &[u8])] = &[
    (
        "mlp_xnnpack",
        include_bytes!("../../tests/fixtures/mlp_xnnpack.pte"),
    ),
    (
        "cnn_xnnpack",
        include_bytes!("../../tests/fixtures/cnn_xnnpack.pte"),
    ),
    (
        "mbv2_xnnpack",
        include_bytes!("../../tests/fixtures/mbv2_xnnpack.pte"),
    ),
    (
        "gpt2_xnnpack",
        include_bytes!("../../tests/fixtures/gpt2_xnnpack.pte"),
    ),
    (
        "bert_xnnpack",
        include_bytes!("../../tests/fixtures/bert_xnnpack.pte"),
    ),
    (
        "vit_xnnpack",
        include_bytes!("../../tests/fixtures/vit_xnnpack.pte"),
    ),
    (
        "llama_xnnpack",
        include_bytes!("../../tests/fixtures/llama_xnnpack.pte"),
    ),
    (
        "opt_xnnpack",
        include_bytes!("../../tests/fixtures/opt_xnnpack.pte"),
    ),
];

/// Lowered programs (`cargo xtask lower`, see `fuzz/hosts/README.md`): hosts for the
/// `lowered` target, with the packed weights their regions name.
pub const LOWERED_HOSTS: &[(&str, &[u8])] = &[
    (
        "mlp_portable_neon",
        include_bytes!("../hosts/mlp_portable_neon.pte"),
    ),
    (
        "mlp_xnnpack_neon",
        include_bytes!("../hosts/mlp_xnnpack_neon.pte"),
    ),
    (
        "cnn_portable_generic",
        include_bytes!("../hosts/cnn_portable_generic.pte"),
    ),
    (
        "cnn_xnnpack_generic",
        include_bytes!("../hosts/cnn_xnnpack_generic.pte"),
    ),
];

/// Splits a delegate target's input into (host index, payload): the first byte picks the
/// host among `count`.
pub fn split_host(data: &[u8], count: usize) -> Option<(usize, &[u8])> {
    let (&first, payload) = data.split_first()?;
    Some((first as usize % count, payload))
}
