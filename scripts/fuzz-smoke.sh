#!/usr/bin/env bash
# Runs every fuzz target briefly (PTERA_FUZZ_SMOKE_SECONDS, default 10 s each) on a fresh
# seed corpus from the fixtures and fails on any crash, leak, timeout or out-of-memory
# (docs/fuzzing.md). Installs the nightly toolchain and cargo-fuzz when missing. The targets
# run in two lanes side by side (one fuzzer process per core of a two-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${PTERA_FUZZ_SMOKE_SECONDS:-10}
start=$(date +%s)
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
fuzz/setup.sh "$corpus"
host=$(rustc +nightly -vV | sed -n 's/^host: //p')

# smoke TARGET...: each target in turn; stops at the first failure (status 1).
smoke() {
  local target dict
  for target in "$@"; do
    case $target in
      load | execute) dict=(-dict=fuzz/dict/pte.dict) ;;
      xnnpack | lowered | npy | bundled | etdump) dict=(-dict=fuzz/dict/$target.dict) ;;
      *) dict=() ;;
    esac
    mkdir -p fuzz/artifacts/"$target"
    if ! nice -n 19 fuzz/target/"$host"/release/"$target" "$corpus/$target" "${dict[@]}" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix=fuzz/artifacts/"$target"/ >"$corpus/$target.log" 2>&1; then
      tail -n 40 "$corpus/$target.log" >&2
      echo "fuzz smoke: $target failed (input in fuzz/artifacts/$target/)" >&2
      return 1
    fi
    echo "fuzz smoke: $target: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$corpus/$target.log" | tail -n 1)"
  done
}
smoke load xnnpack npy bundled &
lane1=$!
smoke execute lowered structured etdump &
lane2=$!
status=0
wait "$lane1" || status=1
wait "$lane2" || status=1
[ "$status" = 0 ] || exit 1
echo "fuzz smoke passed in $(( $(date +%s) - start )) s"
