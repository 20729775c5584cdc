#!/usr/bin/env bash
# ptera's test command (README): unit and integration tests, lints, and the bare-metal build.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup show active-toolchain >/dev/null   # installs the pinned toolchain, targets, components
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
cargo build --lib --target aarch64-unknown-none
cargo build --lib --release --target aarch64-unknown-none
echo "all checks passed"
