#!/usr/bin/env bash
# Installs the pinned Rust toolchain of rust-toolchain.toml with its targets and components,
# explicitly. rustup installs a toolchain's targets only when it installs the toolchain itself
# (and not at all with RUSTUP_AUTO_INSTALL=0), so a machine that already has the toolchain may
# lack `aarch64-unknown-none`. Every step is idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rustup >/dev/null; then
  echo "rustup is required: https://rustup.rs" >&2
  exit 1
fi
toml=rust-toolchain.toml
channel=$(sed -n 's/^channel *= *"\([^"]*\)".*/\1/p' "$toml")
list() { sed -n "s/^$1 *= *\[\(.*\)\].*/\1/p" "$toml" | tr -d '" ' | tr ',' ' '; }
targets=$(list targets)
components=$(list components)
if [ -z "$channel" ] || [ -z "$targets" ] || [ -z "$components" ]; then
  echo "setup-rust: could not read channel/targets/components from $toml" >&2
  exit 1
fi
rustup toolchain install "$channel" --profile minimal --no-self-update
# shellcheck disable=SC2086
rustup target add --toolchain "$channel" $targets
# shellcheck disable=SC2086
rustup component add --toolchain "$channel" $components
installed=$(rustup target list --installed --toolchain "$channel")
for t in $targets; do
  if ! grep -qx "$t" <<<"$installed"; then
    echo "setup-rust: target $t is still missing after rustup target add" >&2
    exit 1
  fi
done
echo "rust $channel with targets: $targets"
