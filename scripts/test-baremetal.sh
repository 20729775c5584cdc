#!/usr/bin/env bash
# Bare-metal CI check: lints the firmware workspace (boards/) once per architecture, runs the bundled
# GPT-2 example on qemu-virt, then the acceptance tests in xtask/tests/baremetal.rs: every fixture
# on qemu-virt (portable and XNNPACK) and on the 32-bit qemu-virt-a15 and qemu-virt-a7 against
# ExecuTorch's outputs, the MLP on raspi4b, raspi3b and imx8mp-evk, the MLP and GPT-2 on
# raspi2b, mcimx6ul-evk, orangepi-pc and sabrelite, several virt CPUs, typed errors for
# too-small arenas and corrupted model blobs, loader-placed models, icount determinism, the page
# tables' fault reports (AArch64 and ARMv7), `deploy`, and 2- and 4-core runs (secondary cores
# started by PSCI) whose outputs equal one core's, with per-core counts.
# Needs qemu-system-aarch64 and qemu-system-arm (scripts/setup-qemu.sh) and a nightly with
# rust-src for the 32-bit firmware (installed here). Firmware builds go to target/firmware.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-rust.sh >/dev/null
for q in qemu-system-aarch64 qemu-system-arm; do
  if ! command -v $q >/dev/null; then
    echo "$q is missing: run scripts/setup-qemu.sh" >&2
    exit 1
  fi
done
# The 32-bit boards' firmware (armv7a-none-eabihf) is built by a nightly from source.
rustup toolchain install nightly --profile minimal --no-self-update >/dev/null
rustup component add rust-src clippy --toolchain nightly >/dev/null
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s]"; }

echo "== bundled example (GPT-2) on qemu-virt, deterministic instruction count $(stamp)"
cargo xtask qemu --icount --output-dir target/firmware/test-out/example

echo "== firmware: rustfmt and clippy for each architecture $(stamp)"
cargo fmt --manifest-path boards/Cargo.toml --check
# The board is a constant index into boards/boards.rs (build.rs), not a cfg: every board of an
# architecture compiles the same code, so one board per target is linted.
cargo xtask boards --targets | awk '!seen[$2]++' | while read -r board target; do
  if [ "$target" = aarch64-unknown-none ]; then
    PTERA_BOARD=$board PTERA_FW_GEN="$PWD/target/firmware/gen" CARGO_TARGET_DIR=target/firmware \
      cargo clippy --quiet --release --manifest-path boards/Cargo.toml --target "$target" \
      --features semihosting -- -D warnings
  else
    PTERA_BOARD=$board PTERA_FW_GEN="$PWD/target/firmware/gen" CARGO_TARGET_DIR=target/firmware \
      CARGO_TARGET_ARMV7A_NONE_EABIHF_RUSTFLAGS="-C target-feature=+neon,+d32" \
      cargo +nightly clippy --quiet --release -Zbuild-std=core,alloc \
      --manifest-path boards/Cargo.toml --target "$target" --features semihosting -- -D warnings
  fi
done
PTERA_BOARD=qemu-virt CARGO_TARGET_DIR=target/firmware cargo clippy --quiet --release \
  --manifest-path boards/Cargo.toml --target aarch64-unknown-none \
  --features semihosting,gemm-bench -- -D warnings
PTERA_BOARD=qemu-virt PTERA_FW_GEN="$PWD/target/firmware/gen" CARGO_TARGET_DIR=target/firmware \
  cargo clippy --quiet --release --manifest-path boards/Cargo.toml --target aarch64-unknown-none \
  --features semihosting,etdump -- -D warnings

echo "== acceptance tests under QEMU $(stamp)"
cargo test --release -p xtask --test baremetal -- --ignored --test-threads 2

echo "== code size of the last firmwares (size -A) $(stamp)"
size=size
command -v aarch64-linux-gnu-size >/dev/null && size=aarch64-linux-gnu-size
$size -A target/firmware/aarch64-unknown-none/release/ptera-firmware
$size -A target/firmware/armv7a-none-eabihf/release/ptera-firmware
echo "bare-metal checks passed in $(( $(date +%s) - start )) s"
