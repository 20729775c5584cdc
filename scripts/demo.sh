#!/usr/bin/env bash
# Sets up the toolchain and runs the bundled example: a GPT-2 program exported by stock
# ExecuTorch 1.5.1 (random weights, 2 layers, 16 tokens with left padding), inspected, run on
# the host, and compared with ExecuTorch's own output.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup show active-toolchain >/dev/null   # installs the pinned toolchain from rust-toolchain.toml
model=${1:-tests/fixtures/gpt2_portable}
cargo xtask inspect "$model.pte"
inputs=()
for f in "$model".in*.npy; do inputs+=(--input "$f"); done
cargo xtask run "$model.pte" "${inputs[@]}" --output-dir out/demo
for ref in "$model".out*.npy; do
  k=${ref##*.out}; k=${k%.npy}
  cargo xtask compare out/demo/output-$k.npy "$ref"
done
