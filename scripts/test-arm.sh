#!/usr/bin/env bash
# Arm kernel test matrix under qemu-user (aarch64-unknown-linux-gnu):
#   * the kernel unit tests (every ISA the emulated CPU has, random and edge shapes vs a
#     scalar reference), the whole fixture suite and every fixture lowered (`cargo xtask
#     lower`), with each ISA forced (PTERA_ISA): under the generic kernel for every target,
#     under an ISA's own kernel for its target (at the first length also one tile it lacks);
#   * once per QEMU: programs quantized by lower and lowering's other properties (they depend
#     on neither PTERA_ISA nor vector lengths), and every fixture split across 2 and 4 threads
#     against one (bit-identical) on the SME and the SME2 CPU, with each thread's
#     instructions of a 4-thread forward counted from a qemu-user trace;
#   * at SVE vector lengths 128/256/512 and SME streaming lengths 128/512/256 (the generic and
#     Neon kernels, which read no vector length, and the fixture suite's registry variants at
#     the first only; the third the unit tests only; SME2's whole suite at SVL 128, its
#     length-dependent parts at 512, the GEMM unit tests there for the SME2 kernels alone);
#   * SME2 with qemu-user >= 10.1 (target/qemu11, see scripts/fetch-qemu11.sh), else skipped.
# Each section header shows the seconds since the start.
# Usage: scripts/test-arm.sh [--fetch-qemu11]
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/arm}"
T=aarch64-unknown-linux-gnu
SYSROOT=/usr/aarch64-linux-gnu
QEMU="${QEMU_AARCH64:-qemu-aarch64}"
QEMU11="${QEMU11_AARCH64:-target/qemu11/usr/bin/qemu-aarch64}"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s]"; }

if [[ "${1:-}" == "--fetch-qemu11" && ! -x "$QEMU11" ]]; then
    scripts/fetch-qemu11.sh || echo "test-arm: fetching qemu 11 failed; SME2 cases will be skipped"
fi

echo "== build (tests for $T) $(stamp)"
nice cargo test --quiet --target "$T" --lib --test fixtures --test multicore --no-run
nice cargo test --quiet --target "$T" -p ptera-lower --test lowered_fixtures --test quantize --no-run

# matrix QEMU CPU_OPTS ISA_LIST multicore|units|- [VL SVL]
# With VL and SVL (bits) the lowered fixtures are lowered for the forced ISA's own target at
# that length only. `units`: the length-dependent unit tests only (no fixture suites).
# UNIT_ISAS, when set, names the ISAs whose kernels the GEMM unit tests run (the SME2 QEMU:
# the others ran at the same lengths under the first QEMU).
matrix() {
    local qemu=$1 cpu=$2 isas=$3 multicore=${4:-} vl=${5:-} svl=${6:-}
    local units_only=
    [[ "$multicore" != units ]] || { units_only=1; multicore=; }
    [[ "$multicore" != - ]] || multicore=
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$qemu -L $SYSROOT -cpu $cpu"
    # Every kernel's unit tests where the whole matrix runs (the multicore configurations, one
    # per QEMU); elsewhere the ones that read the vector lengths: GEMM, convolution, detection,
    # the integer kernels (SME2's tile is SVL/16 channels wide; vecmath and the operators read
    # none).
    # There, too, the GEMM tests run the scalable kernels only (PTERA_TEST_ISAS): the generic
    # and Neon ones would repeat the first configuration's run.
    local units="linalg:: kernels::" test_isas=${UNIT_ISAS:-}
    [[ -n "$multicore" ]] || { units="linalg::gemm linalg::conv linalg::cpu linalg::quant"; test_isas=${UNIT_ISAS:-sve2,sme,sme2}; }
    echo "== -cpu $cpu: kernel unit tests (${test_isas:-all supported ISAs}): $units $(stamp)"
    # shellcheck disable=SC2086
    PTERA_TEST_ISAS=$test_isas nice cargo test --quiet --target "$T" --lib -- $units --nocapture 2>&1 \
        | grep -E "^(arm features|SVE VL|SME SVL|ISA |test result)|: edge shapes ok|FAILED|panicked" \
        | sort -u
    [[ -z "$units_only" ]] || return 0
    for isa in $isas; do
        echo "== -cpu $cpu: PTERA_ISA=$isa: selection check + fixture suite $(stamp)"
        PTERA_ISA=$isa nice cargo test --quiet --target "$T" --lib \
            linalg::gemm::arm::tests::report_and_env_selection 2>&1 | grep -E "test result|panicked|FAILED"
        # The registry variants (filters packed at load, the standard registry's in-place
        # weights) take the packers the unit tests cover at every length: at the first one only.
        local variants=()
        [[ -n "$multicore" || -z "$vl" ]] || variants=(--skip with_filters_packed_at_load \
            --skip also_run_with_the_standard_registry)
        PTERA_ISA=$isa nice cargo test --quiet --target "$T" --test fixtures -- "${variants[@]}" 2>&1 \
            | grep -E "test result|panicked|FAILED"
        # Under the generic kernel every target's panels (per-panel fallback); under an ISA's
        # own kernel its target at this length, plus at the first length one whose tile it
        # lacks (a 32-wide one). Every target under every ISA adds nothing: a tile the forced
        # kernel lacks takes the same fallback whichever target made it, and that fallback
        # reads no vector length (so the other lengths skip it).
        local targets=
        local other=,sme:512
        [[ -z "$vl" ]] || other=
        case $isa in
            generic) targets= ;;
            neon) targets="neon,sme:512" ;;
            sve2) targets="sve2:${vl:-128}$other" ;;
            *) targets="$isa:${svl:-128}$other" ;;
        esac
        echo "== -cpu $cpu: PTERA_ISA=$isa: every fixture lowered for ${targets:-every target} $(stamp)"
        PTERA_LOWER_TARGETS=$targets PTERA_ISA=$isa nice cargo test --quiet --target "$T" -p ptera-lower \
            --test lowered_fixtures fixture_lowered_for_every_target 2>&1 | grep -E "test result|panicked|FAILED"
    done
    if [[ -n "$multicore" ]]; then
        echo "== -cpu $cpu: every fixture bit-identical on 1, 2 and 4 threads (default ISA) $(stamp)"
        nice cargo test --quiet --target "$T" --test multicore 2>&1 | grep -E "test result|panicked|FAILED"
        echo "== -cpu $cpu: each thread's count of a 4-thread forward (scripts/thread-count.sh) $(stamp)"
        local counts
        counts=$(QEMU_AARCH64=$qemu PTERA_RUN_PROFILE=quick scripts/thread-count.sh --threads 4 --cpu "$cpu" --json \
            tests/fixtures/gpt2t128_xnnpack.pte)
        echo "$counts"
        # Four threads, every one with work, and a critical path below the sum.
        echo "$counts" | awk -F'[][]' '{
            n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] + 0 == 0) exit 1
            match($0, /"critical_path":[0-9]+/); cp = substr($0, RSTART + 16, RLENGTH - 16) + 0
            match($0, /"sum":[0-9]+/); sum = substr($0, RSTART + 6, RLENGTH - 6) + 0
            exit !(n == 4 && cp > 0 && cp < sum) }' ||
            { echo "test-arm: the per-thread counts are wrong"; exit 1; }
    fi
    # The integer kernels are chosen from DotProd/I8MM alone, which every `max` configuration
    # has alike, not from PTERA_ISA or the vector lengths: once per QEMU (the multicore runs).
    if [[ -n "$multicore" ]]; then
        echo "== -cpu $cpu: programs quantized by lower; lowering's other properties $(stamp)"
        nice cargo test --quiet --target "$T" -p ptera-lower --test quantize 2>&1 \
            | grep -E "test result|panicked|FAILED"
        nice cargo test --quiet --target "$T" -p ptera-lower --test lowered_fixtures -- \
            --skip every_portable_fixture --skip every_delegated_fixture 2>&1 \
            | grep -E "test result|panicked|FAILED"
    fi
}

# The generic and Neon paths read no vector length: their fixture suites run at the first
# configuration only; the scalable ones (SVE2, SME) at 128 and at a second length (VL 256,
# SVL 512), and at a third (VL 512, SVL 256) their unit tests (every kernel against the scalar
# reference on random and edge shapes; the whole programs at SVL 256 come with SME2 below).
matrix "$QEMU" "max,sve-default-vector-length=16,sme-default-vector-length=16" "generic neon sve2 sme" multicore  # VL 128, SVL 128
matrix "$QEMU" "max,sve-default-vector-length=32,sme-default-vector-length=64" "sve2 sme" - 256 512  # VL 256, SVL 512
matrix "$QEMU" "max,sve-default-vector-length=64,sme-default-vector-length=32" "sve2 sme" units 512 256  # VL 512, SVL 256

if [[ -x "$QEMU11" ]] && "$QEMU11" --version | grep -qE "version (1[1-9]|10\.[1-9])"; then
    echo "== SME2 with $("$QEMU11" --version | head -1) $(stamp)"
    # The whole suite at SVL 128: QEMU emulates a ZA operation element by element, so the
    # same programs take about seven times longer at SVL 512, where the length-dependent
    # parts (GEMM, convolution, integer kernels, the fixture suites) run.
    UNIT_ISAS=sme2 matrix "$QEMU11" "max,sve-default-vector-length=16,sme-default-vector-length=16" "sme2" multicore  # SVL 128
    UNIT_ISAS=sme2 matrix "$QEMU11" "max,sve-default-vector-length=32,sme-default-vector-length=64" "sme2" - 256 512  # SVL 512
    # `max` at qemu's default SVL (256), the `max` lowering target: the integer SMOPA tiles
    # and programs quantized and repacked for sme2:256 and sme2:512.
    echo "== -cpu max (SVL 256): integer kernels, programs lowered for SME2 $(stamp)"
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$QEMU11 -L $SYSROOT -cpu max,sme-default-vector-length=32"
    nice cargo test --quiet --target "$T" --lib linalg::quant 2>&1 | grep -E "test result|panicked|FAILED"
    nice cargo test --quiet --target "$T" -p ptera-lower --test quantize 2>&1 \
        | grep -E "test result|panicked|FAILED"
else
    echo "== SME2 SKIPPED: needs qemu-aarch64 >= 10.1 at $QEMU11 (run scripts/fetch-qemu11.sh," \
        "or scripts/test-arm.sh --fetch-qemu11); $($QEMU --version | head -1) has SME1 only"
fi
# A core without the dot product (Cortex-A72: Raspberry Pi 4): the base-Neon integer tiles.
echo "== -cpu cortex-a72: integer kernels, quantized programs $(stamp)"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$QEMU -L $SYSROOT -cpu cortex-a72"
nice cargo test --quiet --target "$T" --lib linalg::quant 2>&1 | grep -E "test result|panicked|FAILED"
nice cargo test --quiet --target "$T" -p ptera-lower --test quantize 2>&1 \
    | grep -E "test result|panicked|FAILED"
echo "== test-arm: all passed in $(( $(date +%s) - start )) s"
