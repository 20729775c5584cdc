#!/usr/bin/env bash
# Sets up everything and runs the bundled example: a GPT-2 program exported by stock ExecuTorch
# 1.5.1 (random weights, 2 layers, 16 tokens with left padding). It is inspected, run on the
# host, then run bare-metal on QEMU's `virt` board (Cortex-A, no OS, no heap); then it is
# lowered (`cargo xtask lower`: matmul regions with weights packed ahead, memory re-planned)
# for this host and for the board's CPU and run again; every output is compared with
# ExecuTorch's own.
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
echo "== lower for this host and for the board's CPU (QEMU max), run both"
mkdir -p out
cargo xtask lower "$model.pte" --target native -o out/demo-native.pte
cargo xtask run out/demo-native.pte "${inputs[@]}" --output-dir out/demo-host-lowered
cargo xtask lower "$model.pte" --target max -o out/demo-max.pte
cargo xtask qemu out/demo-max.pte "${inputs[@]}" --board qemu-virt --icount --output-dir out/demo-qemu-lowered
echo "== compare with ExecuTorch 1.5.1"
for ref in "$model".out*.npy; do
  k=${ref##*.out}; k=${k%.npy}
  for run in host qemu host-lowered qemu-lowered; do
    cargo xtask compare out/demo-$run/output-$k.npy "$ref"
  done
done
