#!/usr/bin/env bash
# Fuzzes one target for SECONDS with one job (docs/fuzzing.md): installs the nightly toolchain
# and cargo-fuzz when missing, builds, seeds fuzz/corpus/TARGET from the fixtures, then runs
# libFuzzer at low priority. Crashes land in fuzz/artifacts/TARGET/. Extra arguments go to
# libFuzzer. Targets: load execute xnnpack lowered npy structured bundled etdump.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_ARGS...]"
target=${1:?$usage}
seconds=${2:?$usage}
shift 2
case $target in
  load | execute) dict=(-dict=fuzz/dict/pte.dict) ;;
  xnnpack | lowered | npy | bundled | etdump) dict=(-dict=fuzz/dict/$target.dict) ;;
  structured) dict=() ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
fuzz/setup.sh
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
mkdir -p fuzz/artifacts/"$target"
exec nice -n 19 fuzz/target/"$host"/release/"$target" fuzz/corpus/"$target" "${dict[@]}" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix=fuzz/artifacts/"$target"/ "$@"
