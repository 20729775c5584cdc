#!/usr/bin/env bash
# 32-bit Arm checks:
#   * the core library type-checks for `armv7a-none-eabihf` (bare-metal ARMv7-A with hardware
#     floating point and no Neon; rustup ships no prebuilt `core` for it, so nightly builds
#     it from source: `-Zbuild-std=core,alloc`); the 32-bit firmware builds of
#     scripts/test-baremetal.sh compile it with Neon, and the pinned clippy lints the 32-bit
#     code below (a nightly clippy has lints the pinned one lacks);
#   * the library's whole test suite (unit tests, every fixture, hostile inputs, ETDump,
#     BundledProgram, threads) on `armv7-unknown-linux-gnueabihf` under qemu-arm, where
#     `usize` has 32 bits: no size or offset from a file may be truncated there; the GEMM
#     tests run the ARMv7 Neon + VFPv4 micro-kernel (`src/linalg/gemm/arm32/`) against the
#     scalar reference on odd shapes, and the fixtures run on it.
# Needs qemu-user and the armhf cross linker (scripts/setup-qemu.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
rustup toolchain install nightly --profile minimal --no-self-update >/dev/null
rustup component add rust-src --toolchain nightly >/dev/null
channel=$(sed -n 's/^channel *= *"\([^"]*\)".*/\1/p' rust-toolchain.toml)
rustup target add --toolchain "$channel" armv7-unknown-linux-gnueabihf >/dev/null

echo "== core library for armv7a-none-eabihf (nightly, build-std): cargo check"
nice cargo +nightly check --quiet -Zbuild-std=core,alloc --lib --release \
    --target armv7a-none-eabihf --target-dir target/armv7-none

echo "== test suite on armv7-unknown-linux-gnueabihf (qemu-arm, 32-bit usize)"
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc
nice cargo clippy --quiet --target armv7-unknown-linux-gnueabihf --target-dir target/armv7 \
    --lib --tests -- -D warnings
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUNNER="qemu-arm -L /usr/arm-linux-gnueabihf"
nice cargo test --quiet -p ptera --tests --target armv7-unknown-linux-gnueabihf \
    --target-dir target/armv7 2>&1 | grep -E "test result|panicked|FAILED|error"
echo "== test-arm32: all passed in $(( $(date +%s) - start )) s"
