#!/usr/bin/env bash
# Prepares fuzzing (docs/fuzzing.md): the nightly toolchain and cargo-fuzz when missing, a
# build of every target with AddressSanitizer and debug assertions (overflow checks), and the
# seed corpora from the fixtures in fuzz/corpus/ (or in $1). Builds run under
# `flock $PTERA_BUILD_LOCK` when that variable names a lock file.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-fuzz/corpus}
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
lock=()
if [ -n "${PTERA_BUILD_LOCK:-}" ]; then lock=(flock "$PTERA_BUILD_LOCK"); fi
# Quiet: nightly-only lints about future std method names are not findings.
(cd fuzz && RUSTFLAGS="${RUSTFLAGS:-} -A unstable_name_collisions" CARGO_TERM_QUIET=true \
  "${lock[@]}" cargo +nightly fuzz build --debug-assertions)
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
fuzz/target/"$host"/release/seed . "$corpus" >/dev/null
