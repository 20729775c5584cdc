#!/usr/bin/env bash
# Sets up everything and runs the bundled example: a GPT-2 program exported by stock ExecuTorch
# 1.5.1 (random weights, 2 layers, 16 tokens with left padding). It is inspected, run on the
# host, then run bare-metal on QEMU's `virt` board (Cortex-A, no OS, no heap), and both outputs
# are compared with ExecuTorch's own.
# Setup: the pinned Rust toolchain (rust-toolchain.toml) and, via scripts/setup-qemu.sh,
# qemu-system-arm/qemu-user from bookworm-backports and the aarch64 cross linker.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-rust.sh   # the pinned toolchain with its targets and components, explicitly
scripts/setup-qemu.sh
model=${1:-tests/fixtures/gpt2_portable}
inputs=()
for f in "$model".in*.npy; do inputs+=(--input "$f"); done

echo "== inspect"
cargo xtask inspect "$model.pte"
echo "== host run"
cargo xtask run "$model.pte" "${inputs[@]}" --output-dir out/demo-host
echo "== bare-metal run on qemu-virt"
cargo xtask qemu "$model.pte" "${inputs[@]}" --board qemu-virt --icount --output-dir out/demo-qemu
echo "== compare with ExecuTorch 1.5.1"
for ref in "$model".out*.npy; do
  k=${ref##*.out}; k=${k%.npy}
  cargo xtask compare out/demo-host/output-$k.npy "$ref"
  cargo xtask compare out/demo-qemu/output-$k.npy "$ref"
done
