#!/usr/bin/env bash
# Arm end-to-end comparison: exact AArch64 instructions of one forward (the second one, armpeer
# phase 3) of stock ExecuTorch 1.5.1 + XNNPACK (armpeer's `etrun`) and of ptera
# (benches/gemm-count `ptera-run`, same CLI and marks), on the same .pte files, under qemu-user,
# counted by armpeer's measure.sh + tbcount. ptera also runs the portable twin of each program.
#
# usage: scripts/armpeer.sh [options] [CASE ...]
#   CASE                 fixture base names (default: gpt2 opt gpt2b optb); CASE_xnnpack.pte goes
#                        through etrun and ptera-run, CASE_portable.pte through ptera-run; a
#                        full case name with its own CASE.pte (the quantized opt_qd8, ...) is
#                        the XNNPACK file, with no portable twin
#   --etrun PATH         aarch64 etrun built by armpeer/build.sh       (env ETRUN_ARM; required)
#   --armpeer DIR        armpeer directory with measure.sh  (env ARMPEER_DIR; ../shared/tools/armpeer)
#   --tbcount PATH       host tbcount binary              (env TBCOUNT; default ARMPEER/tbcount)
#   --cpus "SPEC ..."    default "cortex-a76 max". SPEC = CPU[,qemu -cpu properties][@10|@11]:
#                        @10 runs qemu 10 (QEMU_AARCH64, default qemu-aarch64), @11 qemu 11
#                        (QEMU11_AARCH64, default target/qemu11/usr/bin/qemu-aarch64, see
#                        scripts/fetch-qemu11.sh); without @, `max` uses qemu 11 (SME2) and
#                        every other CPU qemu 10. Example: "max,sme-default-vector-length=64@11"
#   --n N                forwards per run (default 3; phase 3 = forward 2 needs N >= 2)
#   --isa ISA            force ptera's GEMM ISA (generic|neon|sve2|sme|sme2; default: detected)
#   --out DIR            results (default target/armpeer): raw/*.{count,hist,maps,top}, table.txt
#   --fixtures DIR       default tests/fixtures
#   --ptera-run PATH     use this aarch64 ptera-run instead of building it (env PTERA_RUN)
#   --top K              also print the K hottest functions of every forward (files keep 25)
#   --no-check           skip the output check against CASE.out*.npy
#   --lower TARGET       also lower CASE_portable.pte with `cargo xtask lower --target TARGET`
#                        (into OUT/lowered/TARGET) and count ptera on the lowered twin; `auto`
#                        lowers for each CPU of --cpus by its name (cortex-a76, max, ...)
#   --threads N          also run ptera on N threads (PTERA_THREADS) and count each thread and
#                        the critical path of the second forward from qemu's execution trace
#                        (scripts/thread-count.sh): OUT/threads.txt
# Builds ptera-run with `cargo build --release --target aarch64-unknown-linux-gnu` in
# benches/gemm-count (CARGO_TARGET_DIR, default target/gemm-count). Needs python3 and readelf
# (binutils) for the output check and the per-function histograms. SYSROOT (default
# /usr/aarch64-linux-gnu) is passed through to measure.sh. Not part of CI: it needs the
# executorch aarch64 wheel (see armpeer's README for building etrun and tbcount).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

ETRUN=${ETRUN_ARM:-}
ARMPEER=${ARMPEER_DIR:-$ROOT/../shared/tools/armpeer}
TBC=${TBCOUNT:-}
CPUS="cortex-a76 max"
N=3
ISA=""
OUT=$ROOT/target/armpeer
FIX=$ROOT/tests/fixtures
PTRUN=${PTERA_RUN:-}
TOP=0
CHECK=1
QEMU10=${QEMU_AARCH64:-qemu-aarch64}
QEMU11=${QEMU11_AARCH64:-$ROOT/target/qemu11/usr/bin/qemu-aarch64}
export SYSROOT=${SYSROOT:-/usr/aarch64-linux-gnu}
CASES=()
LOWER=""
THREADS=1

die() { echo "armpeer.sh: $*" >&2; exit 1; }
need_arg() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --etrun) need_arg "$@"; ETRUN=$2; shift 2 ;;
        --armpeer) need_arg "$@"; ARMPEER=$2; shift 2 ;;
        --tbcount) need_arg "$@"; TBC=$2; shift 2 ;;
        --cpus) need_arg "$@"; CPUS=$2; shift 2 ;;
        --n) need_arg "$@"; N=$2; shift 2 ;;
        --isa) need_arg "$@"; ISA=$2; shift 2 ;;
        --out) need_arg "$@"; OUT=$2; shift 2 ;;
        --fixtures) need_arg "$@"; FIX=$2; shift 2 ;;
        --ptera-run) need_arg "$@"; PTRUN=$2; shift 2 ;;
        --top) need_arg "$@"; TOP=$2; shift 2 ;;
        --no-check) CHECK=0; shift ;;
        --lower) need_arg "$@"; LOWER=$2; shift 2 ;;
        --threads) need_arg "$@"; THREADS=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) CASES+=("${1%_xnnpack}"); CASES[-1]=${CASES[-1]%_portable}; shift ;;
    esac
done
[[ ${#CASES[@]} -gt 0 ]] || CASES=(gpt2 opt gpt2b optb)
[[ $N =~ ^[0-9]+$ && $N -ge 2 ]] || die "--n must be >= 2 (phase 3 is the second forward)"
[[ $TOP =~ ^[0-9]+$ ]] || die "--top must be a number"
[[ $THREADS =~ ^[0-9]+$ && $THREADS -ge 1 ]] || die "--threads must be a number >= 1"

# ---- prerequisites, with a clear message for each
[[ -n "$ETRUN" ]] || die "no etrun: pass --etrun PATH or set ETRUN_ARM (build it with
  ARMPEER/build.sh ET_PKG_DIR aarch64-linux-gnu-g++ OUT, see ARMPEER/README.md)"
[[ -x "$ETRUN" ]] || die "etrun '$ETRUN' is missing or not executable"
[[ -x "$ARMPEER/measure.sh" ]] || die "no measure.sh in armpeer dir '$ARMPEER' (--armpeer / ARMPEER_DIR)"
TBC=${TBC:-$ARMPEER/tbcount}
[[ -x "$TBC" ]] || die "tbcount '$TBC' is missing: build it with
  g++ -O2 -std=c++17 -o SOMEWHERE/tbcount $ARMPEER/src/tbcount.cpp  and pass --tbcount or TBCOUNT"
export TBCOUNT=$TBC
[[ -d "$SYSROOT" ]] || die "no aarch64 sysroot at $SYSROOT (set SYSROOT)"
command -v python3 >/dev/null || die "python3 is needed (output check, histograms)"
command -v readelf >/dev/null || die "readelf (binutils) is needed for the histograms"
[[ -z "$ISA" || $ISA =~ ^(generic|portable|neon|sve2|sme|sme2)$ ]] || die "unknown --isa '$ISA'"
for c in "${CASES[@]}"; do
    [[ -f "$FIX/$c.pte" || ( -f "$FIX/${c}_xnnpack.pte" && -f "$FIX/${c}_portable.pte" ) ]] ||
        die "no fixture $FIX/$c.pte or $FIX/${c}_{xnnpack,portable}.pte"
done

# ---- CPU specs -> qemu binary, -cpu name, extra properties, label
declare -a C_Q C_CPU C_PROPS C_LABEL C_DESC
for spec in $CPUS; do
    q=""
    if [[ $spec == *@* ]]; then q=${spec##*@}; spec=${spec%@*}; fi
    cpu=${spec%%,*}
    props=${spec#"$cpu"}
    if [[ -z "$q" ]]; then
        if [[ $cpu == max && -x "$QEMU11" ]]; then q=11; else q=10; fi
        [[ $cpu == max && $q == 10 ]] &&
            echo "armpeer.sh: no qemu 11 at $QEMU11 (scripts/fetch-qemu11.sh): -cpu max runs on qemu 10, no SME2" >&2
    fi
    case $q in
        10) qb=$QEMU10 ;;
        11) qb=$QEMU11 ;;
        *) die "bad qemu selector @$q in cpu spec (use @10 or @11)" ;;
    esac
    command -v "$qb" >/dev/null || die "qemu '$qb' not found (QEMU_AARCH64 / QEMU11_AARCH64)"
    qv=$("$qb" --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')
    C_Q+=("$qb"); C_CPU+=("$cpu"); C_PROPS+=("$props")
    C_LABEL+=("$(printf '%s' "$cpu$props" | tr -c 'A-Za-z0-9._=-' '_').q$q")
    C_DESC+=("$cpu$props qemu $qv")
done

# ---- ptera-run
DESCRIBE=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')
if [[ -z "$PTRUN" ]]; then
    # Absolute: the build runs in benches/gemm-count, the binary is read from here.
    dir=${CARGO_TARGET_DIR:-$ROOT/target/gemm-count}
    [[ $dir == /* ]] || dir=$PWD/$dir
    export CARGO_TARGET_DIR=$dir
    echo "== building ptera-run (aarch64-unknown-linux-gnu, release, $CARGO_TARGET_DIR)" >&2
    (cd "$ROOT/benches/gemm-count" &&
        nice cargo build --quiet --release --target aarch64-unknown-linux-gnu --bin ptera-run) ||
        die "building ptera-run failed"
    PTRUN=$CARGO_TARGET_DIR/aarch64-unknown-linux-gnu/release/ptera-run
fi
[[ -x "$PTRUN" ]] || die "ptera-run '$PTRUN' is missing"
RAW=$OUT/raw
mkdir -p "$RAW" "$OUT/outputs"
PTRUN=$(cd "$(dirname "$PTRUN")" && pwd)/$(basename "$PTRUN")
if [[ -n "$ISA" ]]; then
    # measure.sh runs the guest with `env -i` and a fixed argument list: ptera-run takes a
    # forced ISA from its own name (ptera-run@ISA).
    ln -sf "$PTRUN" "$OUT/ptera-run@$ISA"
    PTRUN=$OUT/ptera-run@$ISA
fi
PTAG=ptera${ISA:+-$ISA}

# ---- runs
# per_forward COUNTFILE: instructions between mark 2 and mark 3 (forward 2)
per_forward() {
    awk '$1 == "mark" && $2 == 2 { a = $3 } $1 == "mark" && $2 == 3 { b = $3 }
         END { if (a != "" && b != "") print b - a; else print "FAIL" }' "$1"
}
# measure RUNNER CASE CPU_INDEX TAG [FIXTURE_DIR] -> prints the per-forward count (or FAIL)
measure() {
    local runner=$1 case=$2 i=$3 tag=$4 fix=${5:-$FIX} label
    label=$tag.${C_LABEL[$i]}
    if LABEL=$label nice "$ARMPEER/measure.sh" "${C_Q[$i]}" "${C_CPU[$i]}" "$runner" "$fix" \
        "$case" "$N" "$RAW" "${C_PROPS[$i]}" >/dev/null 2>"$RAW/$case.$label.err"; then
        per_forward "$RAW/$case.$label.count"
    else
        echo "armpeer.sh: measure failed: $tag $case ${C_DESC[$i]} (see $RAW/$case.$label.*)" >&2
        echo FAIL
    fi
}
# check RUNNER CASE CPU_INDEX TAG -> "ok", "DIFF" or "FAIL": outputs of an untraced run of N
# forwards against the fixture's CASE.outK.npy (ExecuTorch's own outputs at export)
check() {
    local runner=$1 case=$2 i=$3 tag=$4 fix=${5:-$FIX} dir ins=()
    [[ $CHECK == 1 ]] || { echo "-"; return; }
    dir=$OUT/outputs/$case.$tag.${C_LABEL[$i]}
    rm -rf "$dir"; mkdir -p "$dir"
    for f in "$fix/$case".in*.npy; do ins+=("$f"); done
    if ! env -i "${C_Q[$i]}" -cpu "${C_CPU[$i]}${C_PROPS[$i]}" -L "$SYSROOT" "$runner" \
        "$fix/$case.pte" "$N" "$dir" "${ins[@]}" >/dev/null 2>"$dir/stderr"; then
        echo FAIL; return
    fi
    python3 - "$dir" "$fix" "$case" <<'EOF'
import ast, os, struct, sys
def load(p):
    b = open(p, 'rb').read()
    assert b[:6] == b'\x93NUMPY', p
    hl, off = (struct.unpack('<H', b[8:10])[0], 10) if b[6] == 1 else (struct.unpack('<I', b[8:12])[0], 12)
    h = ast.literal_eval(b[off:off + hl].decode('latin1'))
    fmt = {'<f4': 'f', '<f8': 'd', '<i8': 'q', '<i4': 'i', '|b1': '?', '|u1': 'B', '|i1': 'b'}[h['descr']]
    n = 1
    for d in h['shape']:
        n *= d
    return tuple(h['shape']), struct.unpack_from('<%d%s' % (n, fmt), b, off + hl)
d, fix, case = sys.argv[1:]
k, worst, ok = 0, 0.0, True
while os.path.exists(f'{fix}/{case}.out{k}.npy'):
    ws, w = load(f'{fix}/{case}.out{k}.npy')
    p = f'{d}/output-{k}.npy'
    if not os.path.exists(p):
        ok = False
        break
    gs, g = load(p)
    if gs != ws:
        ok = False
        break
    for a, b in zip(g, w):
        e = abs(float(a) - float(b))
        worst = max(worst, e)
        if not e <= 1e-4 + 1e-4 * abs(float(b)):
            ok = False
    k += 1
print(('ok' if ok and k > 0 else 'DIFF') + (f'({worst:.1e})' if k else ''))
EOF
}

# The XNNPACK-lowered file of a case and its portable twin ("" when there is none).
xname() { if [[ -f $FIX/$1.pte ]]; then echo "$1"; else echo "${1}_xnnpack"; fi; }
pname() { if [[ -f $FIX/${1}_portable.pte ]]; then echo "${1}_portable"; fi; }

# ---- lowered twins (host-side lowering of the portable fixture, same inputs and outputs)
# lower_for CPU_INDEX -> directory with CASE_lowered.pte for every case
lower_for() {
    local i=$1 t=$LOWER dir c f b v
    [[ $t == auto ]] && t=${C_CPU[$i]}
    dir=$OUT/lowered/$t
    mkdir -p "$dir"
    for c in "${CASES[@]}"; do
        # CASE_lowered from the portable file, CASE_lowx from the XNNPACK file
        for v in "$(pname "$c"):lowered" "$(xname "$c"):lowx"; do
            local from=${v%%:*} to=${v##*:}
            [[ -n $from ]] || continue
            echo "== lowering $from.pte for $t" >&2
            (cd "$ROOT" && cargo xtask lower "$FIX/$from.pte" --target "$t" \
                -o "$dir/${c}_$to.pte" >/dev/null) || die "lowering $from for $t failed"
            for f in "$FIX/$from".in*.npy "$FIX/$from".out*.npy; do
                b=$(basename "$f"); ln -sf "$f" "$dir/${c}_$to${b#"$from"}"
            done
        done
    done
    echo "$dir"
}

declare -A R
for i in "${!C_CPU[@]}"; do
    LFIX=""
    [[ -z "$LOWER" ]] || LFIX=$(lower_for "$i")
    for c in "${CASES[@]}"; do
        echo "== ${C_DESC[$i]}: $c" >&2
        xf=$(xname "$c"); pf=$(pname "$c")
        R[$i,$c,et]=$(measure "$ETRUN" "$xf" "$i" et)
        R[$i,$c,ptx]=$(measure "$PTRUN" "$xf" "$i" "$PTAG")
        R[$i,$c,ptp]=-; R[$i,$c,ptl]=-; R[$i,$c,ptlx]=-
        [[ -z $pf ]] || R[$i,$c,ptp]=$(measure "$PTRUN" "$pf" "$i" "$PTAG")
        if [[ -n "$LOWER" ]]; then
            [[ -z $pf ]] || R[$i,$c,ptl]=$(measure "$PTRUN" "${c}_lowered" "$i" "$PTAG" "$LFIX")
            R[$i,$c,ptlx]=$(measure "$PTRUN" "${c}_lowx" "$i" "$PTAG" "$LFIX")
        fi
        R[$i,$c,chk]="et $(check "$ETRUN" "$xf" "$i" et)"
        R[$i,$c,chk]+=", ptera $(check "$PTRUN" "$xf" "$i" "$PTAG")"
        [[ -z $pf ]] || R[$i,$c,chk]+="/$(check "$PTRUN" "$pf" "$i" "$PTAG")"
        [[ -z "$LOWER" || -z $pf ]] || R[$i,$c,chk]+="/$(check "$PTRUN" "${c}_lowered" "$i" "$PTAG" "$LFIX")"
        [[ -z "$LOWER" ]] || R[$i,$c,chk]+="/$(check "$PTRUN" "${c}_lowx" "$i" "$PTAG" "$LFIX")"
        # "ptera-run: isa sme2 sve-vl 512 sme-svl 256" -> "sme2 vl512 svl256"
        isa=$(sed -n 's/^ptera-run: isa //; T; s/ sve-vl / vl/; s/ sme-svl / svl/; p' \
            "$RAW/$xf.$PTAG.${C_LABEL[$i]}.maps" 2>/dev/null || true)
        R[$i,$c,isa]=${isa:-?}
    done
done

# ---- per-function histograms of forward 2 (.hist = TB start pc, executions, TB length)
python3 - "$RAW" <<'EOF' || echo "armpeer.sh: symbolizing the histograms failed" >&2
import bisect, glob, os, re, subprocess, sys
raw = sys.argv[1]
MAPRE = re.compile(r'^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) \S+ \d+\s+(/\S.*)$')
FDERE = re.compile(r'FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)')
def readelf(*args):
    return subprocess.run(['readelf', *args], capture_output=True, text=True).stdout
class Elf:
    def __init__(self, path):
        self.base = os.path.basename(path)
        self.loads = []
        for l in readelf('-lW', path).splitlines():
            f = l.split()
            if f and f[0] == 'LOAD':
                self.loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
        syms = {}
        for l in readelf('-sW', '-C', path).splitlines():
            f = l.split(None, 7)
            if len(f) == 8 and f[3] in ('FUNC', 'IFUNC') and f[6] != 'UND':
                v, sz = int(f[1], 16), int(f[2], 0)
                if sz and (v not in syms or syms[v][0] < v + sz):
                    syms[v] = (v + sz, f[7].split('@')[0])
        fdes = {}
        for m in FDERE.finditer(readelf('--debug-dump=frames', path)):
            a, b = int(m.group(1), 16), int(m.group(2), 16)
            if a not in syms:
                fdes[a] = (b, f'{self.base}+{a:#x}')
        self.ranges = sorted([(a, b, n) for a, (b, n) in syms.items()] +
                             [(a, b, n) for a, (b, n) in fdes.items()])
        self.starts = [r[0] for r in self.ranges]
        self.plt = []
        for l in readelf('-SW', path).splitlines():
            f = l.replace('[ ', '[').split()
            if len(f) > 5 and f[1].startswith('.plt'):
                self.plt.append((int(f[3], 16), int(f[3], 16) + int(f[5], 16)))
        self.path, self.data, self.gaps = path, None, {}
    def vaddr(self, off):
        for o, v, sz in self.loads:
            if o <= off < o + sz:
                return off - o + v
        return off
    def name(self, off):
        va = self.vaddr(off)
        # The innermost range that holds va (symbols may nest or alias; look back a little).
        i = bisect.bisect_right(self.starts, va) - 1
        gap = 0
        for j in range(i, max(i - 64, -1), -1):
            a, b, n = self.ranges[j]
            if a <= va < b:
                return n
            if b <= va:
                gap = max(gap, b)
        gap = max(gap, next((v for o, v, sz in self.loads if v <= va < v + sz), 0))
        if any(a <= va < b for a, b in self.plt):
            return f'{self.base}:.plt'
        # No symbol and no unwind entry (hand-written asm, e.g. XNNPACK's micro-kernels): the
        # function is taken to start after the last `ret` before va (padding skipped), within
        # the gap after the last known function; named by that start (ELF vaddr).
        return f'{self.base}+{self.after_ret(gap, va):#x}(no symbol)'
    def after_ret(self, lo, va):
        if lo not in self.gaps:
            if self.data is None:
                self.data = open(self.path, 'rb').read()
            i = bisect.bisect_right(self.starts, va)
            hi = self.starts[i] if i < len(self.starts) else va + (1 << 20)
            lo_off = self.offset(lo)
            starts, fresh = [lo], False
            for k in range(0, hi - lo, 4):
                o = lo_off + k if lo_off is not None else None
                w = int.from_bytes(self.data[o:o + 4], 'little') if o is not None else 0
                if fresh and w not in (0xd503201f, 0):  # first non-padding word after a ret
                    starts.append(lo + k)
                    fresh = False
                if w == 0xd65f03c0:  # ret
                    fresh = True
            self.gaps[lo] = starts
        st = self.gaps[lo]
        return st[max(bisect.bisect_right(st, va) - 1, 0)]
    def offset(self, va):
        for o, v, sz in self.loads:
            if v <= va < v + sz:
                return va - v + o
        return None
elfs = {}
for hist in sorted(glob.glob(f'{raw}/*.hist')):
    pre = hist[:-5]
    maps = []
    for l in open(pre + '.maps', errors='replace'):
        m = MAPRE.match(l.rstrip('\n'))
        if m and 'x' in m.group(3):
            maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16), m.group(5).strip()))
    funcs, objs, total = {}, {}, 0
    for l in open(hist):
        pc, n, ln = l.split()
        pc, w = int(pc, 16), int(n) * int(ln)
        total += w
        name, obj = '?', '?'
        for s, e, off, path in maps:
            if s <= pc < e:
                if path not in elfs:
                    elfs[path] = Elf(path) if os.path.exists(path) else None
                obj = os.path.basename(path)
                name = elfs[path].name(pc - s + off) if elfs[path] else f'{obj}+?'
                break
        funcs[name] = funcs.get(name, 0) + w
        objs[obj] = objs.get(obj, 0) + w
    with open(pre + '.top', 'w') as f:
        f.write(f'# forward 2: {total} instructions (from the .hist)\n# by object\n')
        for o, w in sorted(objs.items(), key=lambda x: -x[1]):
            f.write(f'{100 * w / max(total, 1):6.2f}% {w:>12} {o}\n')
        f.write('# by function\n')
        for nm, w in sorted(funcs.items(), key=lambda x: -x[1])[:25]:
            nm = nm if len(nm) <= 140 else nm[:137] + '...'
            f.write(f'{100 * w / max(total, 1):6.2f}% {w:>12} {nm}\n')
EOF

# ---- table
ratio() { [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ && $1 -gt 0 ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }' || echo "-"; }
{
    echo "# instructions per forward (forward 2 of $N, armpeer phase 3); ratio = ptera / ExecuTorch"
    echo "# ExecuTorch: $ETRUN (XNNPACK .pte); ptera: $PTRUN${ISA:+ (ISA forced: $ISA)}"
    echo "# ptera $DESCRIBE (when ptera-run was built); fixtures $FIX; outputs checked against CASE.out*.npy (atol 1e-4 + rtol 1e-4, worst abs diff)"
    echo "# isa: ptera's GEMM ISA and the SVE VL / SME SVL in bits the guest CPU runs with (both runners see the same CPU)"
    [[ -z "$LOWER" ]] || echo "# lowered_p / lowered_x: CASE_portable.pte / CASE_xnnpack.pte lowered with cargo xtask lower --target $LOWER (auto: the CPU's name)"
    printf '%-8s %-26s %11s %13s %6s %14s %6s %10s %6s %10s %6s %-22s %s\n' case cpu ET_xnnpack ptera_xnnpack ratio \
        ptera_portable ratio lowered_p ratio lowered_x ratio isa check
    for i in "${!C_CPU[@]}"; do
        for c in "${CASES[@]}"; do
            et=${R[$i,$c,et]} px=${R[$i,$c,ptx]} pp=${R[$i,$c,ptp]} pl=${R[$i,$c,ptl]} plx=${R[$i,$c,ptlx]}
            printf '%-8s %-26s %11s %13s %6s %14s %6s %10s %6s %10s %6s %-22s %s\n' "$c" "${C_DESC[$i]}" "$et" "$px" \
                "$(ratio "$et" "$px")" "$pp" "$(ratio "$et" "$pp")" "$pl" "$(ratio "$et" "$pl")" \
                "$plx" "$(ratio "$et" "$plx")" \
                "${R[$i,$c,isa]}" "${R[$i,$c,chk]}"
        done
    done
} | tee "$OUT/table.txt"
echo "(table: $OUT/table.txt; raw counts, histograms, maps: $RAW; hottest functions: $RAW/*.top)"

# ---- ptera on several threads: each thread's count and the critical path
if [[ $THREADS -gt 1 ]]; then
    {
        echo "# ptera on $THREADS threads, forward 2 of 3: instructions per thread, critical path"
        echo "# (thread 0's instructions outside split jobs + the longest thread of each job)"
        for i in "${!C_CPU[@]}"; do
            for c in "${CASES[@]}"; do
                for f in $(xname "$c") $(pname "$c"); do
                    printf '%-18s %-26s ' "$f" "${C_DESC[$i]}"
                    QEMU_AARCH64=${C_Q[$i]} "$ROOT/scripts/thread-count.sh" --threads "$THREADS" \
                        --cpu "${C_CPU[$i]}${C_PROPS[$i]}" --ptera-run "$PTRUN" "$FIX/$f.pte" ||
                        echo "FAIL"
                done
            done
        done
    } | tee "$OUT/threads.txt"
fi

if [[ $TOP -gt 0 ]]; then
    for f in "$RAW"/*.top; do
        echo; echo "== $(basename "$f" .top)"
        awk -v k="$TOP" '/^# by function/ { on = 1; next } on && n < k { print; n++ }' "$f"
    done
fi
