#!/usr/bin/env bash
# ptera's test command (README). Host: formatting, clippy, unit and integration tests, the
# bare-metal library build, a short smoke of every fuzz target (docs/fuzzing.md). Then, under
# QEMU: the bare-metal firmware checks (scripts/test-baremetal.sh), 32-bit Arm
# (scripts/test-arm32.sh) and the Arm kernel matrix (scripts/test-arm.sh).
# PTERA_HOST_ONLY=1 skips the QEMU parts.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-rust.sh   # the pinned toolchain with its targets and components, explicitly
start=$(date +%s)
stamp() { echo "== $* [$(( $(date +%s) - start )) s]"; }
stamp "formatting and clippy"
cargo fmt --all --check
cargo fmt --manifest-path fuzz/Cargo.toml --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings   # the fuzz targets too
# The counting benches (xtask bench, scripts/armpeer.sh) are outside the workspace: check them.
cargo fmt --manifest-path benches/gemm-count/Cargo.toml --check
CARGO_TARGET_DIR=target/gemm-count-host cargo clippy --manifest-path benches/gemm-count/Cargo.toml \
    --all-targets -- -D warnings
stamp "unit and integration tests"
cargo test --workspace
stamp "aarch64-unknown-none build and clippy"
# The release build for this target is the firmware's (scripts/test-baremetal.sh).
cargo build --lib --target aarch64-unknown-none
cargo clippy --lib --target aarch64-unknown-none -- -D warnings   # the AArch64-only kernels
stamp "fuzz smoke"
scripts/fuzz-smoke.sh   # every fuzz target 10 s on the fixture seeds (nightly + cargo-fuzz); fails on any crash
echo "host checks passed in $(( $(date +%s) - start )) s"
if [ "${PTERA_HOST_ONLY:-0}" != 1 ]; then
  scripts/setup-qemu.sh
  scripts/test-baremetal.sh
  scripts/test-arm32.sh
  scripts/test-arm.sh --fetch-qemu11
fi
echo "all checks passed in $(( $(date +%s) - start )) s"
