#!/usr/bin/env bash
# Installs the Arm toolchain pieces the bare-metal and Arm-kernel checks need:
# qemu-system-arm and qemu-user 10.x from bookworm-backports (enabled by deriving a sources
# file from the machine's own debian.sources, so no host name is written here) and the
# aarch64 and armhf cross linkers. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
src=/etc/apt/sources.list.d/debian.sources
dst=/etc/apt/sources.list.d/ptera-bookworm-backports.sources
if [ ! -f "$dst" ]; then
  # Keep the first stanza (the main archive), switch its suites to bookworm-backports.
  awk 'BEGIN{RS=""; ORS="\n\n"} NR==1' "$src" \
    | sed -E 's/^Suites:.*/Suites: bookworm-backports/' | $SUDO tee "$dst" >/dev/null
fi
need=()
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
# 32-bit Arm (scripts/test-arm32.sh): the armhf cross linker and C library for qemu-arm.
command -v arm-linux-gnueabihf-gcc >/dev/null || need+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross)
if [ ${#need[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports "${need[@]}"
fi
qemu-system-aarch64 --version | head -1
qemu-aarch64 --version | head -1
