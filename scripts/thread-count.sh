#!/usr/bin/env bash
# Each thread's instructions and the critical path of one forward (the second, as armpeer's
# phase 3) of ptera on several threads, under qemu-user: benches/gemm-count's `ptera-run` with
# PTERA_THREADS=N runs under `qemu-aarch64 -d in_asm,exec,nochain`, and
# `cargo xtask trace-cores` counts the trace as it is written (a FIFO, never stored). Threads
# are qemu-user's CPUs; a thread waiting for work sleeps in the kernel and counts nothing.
#
# usage: scripts/thread-count.sh [--threads N] [--cpu SPEC] [--qemu PATH] [--ptera-run PATH]
#                                [--json] MODEL.pte [IN.npy ...]
#   --threads N      threads of the engine's team (default 2)
#   --cpu SPEC       qemu -cpu (default cortex-a76)
#   --qemu PATH      qemu-aarch64 (env QEMU_AARCH64, default qemu-aarch64)
#   --ptera-run PATH use this aarch64 ptera-run instead of building it (env PTERA_RUN)
#   PTERA_RUN_PROFILE  cargo profile ptera-run is built with when not given (default release,
#                    the one armpeer.sh counts; `quick` builds in a fraction of the time for
#                    checks of the split itself, with other counts)
#   --json           one JSON object: instructions_per_thread, critical_path, parallel_steps, sum
#   IN.npy           inputs (default MODEL.inK.npy next to the model)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
THREADS=2
CPU=cortex-a76
QEMU=${QEMU_AARCH64:-qemu-aarch64}
PTRUN=${PTERA_RUN:-}
PROFILE=${PTERA_RUN_PROFILE:-release}
JSON=()
die() { echo "thread-count.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --threads) THREADS=${2:?}; shift 2 ;;
        --cpu) CPU=${2:?}; shift 2 ;;
        --qemu) QEMU=${2:?}; shift 2 ;;
        --ptera-run) PTRUN=${2:?}; shift 2 ;;
        --json) JSON=(--json); shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) break ;;
    esac
done
[[ $# -ge 1 ]] || die "no model (see --help)"
[[ $THREADS =~ ^[0-9]+$ && $THREADS -ge 1 ]] || die "--threads must be a number >= 1"
MODEL=$1; shift
INPUTS=("$@")
if [[ ${#INPUTS[@]} -eq 0 ]]; then
    for ((k = 0; ; k++)); do
        f=${MODEL%.pte}.in$k.npy
        [[ -f $f ]] || break
        INPUTS+=("$f")
    done
fi
command -v "$QEMU" >/dev/null || die "$QEMU is missing (scripts/setup-qemu.sh)"
if [[ -z "$PTRUN" ]]; then
    # Absolute: the build runs in benches/gemm-count, the program is read from here.
    dir=${CARGO_TARGET_DIR:-$ROOT/target/gemm-count}
    [[ $dir == /* ]] || dir=$PWD/$dir
    export CARGO_TARGET_DIR=$dir
    (cd "$ROOT/benches/gemm-count" &&
        nice cargo build --quiet --profile "$PROFILE" --target aarch64-unknown-linux-gnu \
            --bin ptera-run) || die "building ptera-run failed"
    PTRUN=$CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/$PROFILE/ptera-run
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/trace"
PTERA_THREADS=$THREADS "$QEMU" -L "${SYSROOT:-/usr/aarch64-linux-gnu}" -cpu "$CPU" \
    -d in_asm,exec,nochain -D "$tmp/trace" "$PTRUN" "$MODEL" 3 - "${INPUTS[@]}" &
qemu_pid=$!
# xtask in the workspace's own target directory (where `cargo xtask` built it before), not in
# a CARGO_TARGET_DIR meant for the aarch64 builds (a second release build of xtask there).
(cd "$ROOT" && env -u CARGO_TARGET_DIR cargo xtask trace-cores "$PTRUN" "$tmp/trace" \
    --threads "$THREADS" "${JSON[@]}")
wait "$qemu_pid" || die "ptera-run failed under $QEMU"
