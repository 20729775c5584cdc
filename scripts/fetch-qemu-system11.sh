#!/usr/bin/env bash
# Fetch QEMU 11's qemu-system-aarch64 (needed for SME2 in system mode; bookworm-backports' QEMU 10
# lacks it) from Debian trixie-backports, together with the trixie libraries it links against
# (glibc >= 2.38 ...), and make it runnable on bookworm without installing anything system-wide.
# Everything goes into target/qemu11-system/ (QEMU11_SYSTEM_DIR overrides):
#   root/                       the .debs, extracted with dpkg -x
#   bin/qemu-system-aarch64     wrapper running root/usr/bin/qemu-system-aarch64 through the
#                               extracted trixie dynamic loader and libraries
#   download/                   the verified indexes and .debs (kept so re-runs are quick)
# Verified chain, as in scripts/fetch-qemu11.sh, for each of trixie-backports and trixie:
#   mirror URI from /etc/apt/sources.list.d/debian.sources
#   -> dists/SUITE/InRelease, signature checked with gpgv against the Debian archive keyring;
#      only the verified text is used
#   -> main/binary-amd64/Packages.xz, checked against its SHA256 in that text
#   -> each .deb, checked against the SHA256 in Packages
#   -> dpkg -x.
# The package set is the Depends/Pre-Depends closure of qemu-system-arm and qemu-system-data,
# taking the first alternative of `a | b`, ignoring version constraints, and preferring
# trixie-backports' version of a package over trixie's. Not followed (SKIP below; on
# 1:11.1.3+ds-2~bpo13+1 only the first three and adduser actually occur):
#   seabios, qemu-efi-*                x86 BIOS / UEFI images, not used by `-M virt` without -bios
#   qemu-system-common                 helpers (bridge/pr helper, systemd units) and their libs
#                                      (alsa, brlapi, ncurses, usb...); qemu-system-aarch64 itself
#                                      needs nothing from it
#   debconf, debconf-2.0, adduser, init-system-helpers, dpkg, perl*, passwd, login, base-files,
#   sensible-utils, usrmerge, systemd*, udev, libpam*, libsemanage*, libaudit*
#                                      maintainer-script / system-integration tooling, not
#                                      needed at run time, and pulling in large trees
# ipxe-qemu (1.2 MB, no dependencies) IS followed: `-M virt` creates a default virtio-net-pci NIC
# whose option ROM (usr/share/qemu/efi-virtio.rom) must exist, or QEMU exits with
# `failed to find romfile "efi-virtio.rom"` unless given -nic none / -nodefaults.
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCES=/etc/apt/sources.list.d/debian.sources
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
SUITES=(trixie-backports trixie)   # in order of preference
ROOTPKGS=(qemu-system-arm qemu-system-data)
SKIP='seabios qemu-efi-* qemu-system-common debconf debconf-2.0 adduser
      init-system-helpers dpkg perl* passwd login base-files sensible-utils usrmerge systemd*
      udev libpam* libsemanage* libaudit*'
OUT="${QEMU11_SYSTEM_DIR:-target/qemu11-system}"
WORK="$OUT/download"
ROOT="$OUT/root"
mkdir -p "$WORK"

say() { echo "fetch-qemu-system11: $*"; }
die() { echo "fetch-qemu-system11: $*" >&2; exit 1; }

# The main archive's URI (not the -security one).
MIRROR=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$SOURCES" \
    | grep -v -- '-security' | head -n 1)
[[ -n "$MIRROR" ]] || die "no URIs in $SOURCES"
MIRROR=${MIRROR%/}

get() { curl -fsSL --retry 3 -o "$2" "$1"; }
# get_checked URL FILE SHA256: download unless FILE already has that checksum; verify.
get_checked() {
    if [[ -f "$2" ]] && echo "$3  $2" | sha256sum -c --quiet - >/dev/null 2>&1; then
        return 0
    fi
    get "$1" "$2.part"
    echo "$3  $2.part" | sha256sum -c --quiet - \
        || { rm -f "$2.part"; die "$(basename "$2") checksum mismatch"; }
    mv "$2.part" "$2"
    say "$(basename "$2") downloaded, checksum good"
}

# For each suite: verified Release text -> verified Packages.xz -> a parsed index
# (one line per package: name, version, Filename, SHA256, first-alternative (Pre-)Depends,
# Provides), cached under the Packages.xz checksum.
for suite in "${SUITES[@]}"; do
    dist="$MIRROR/dists/$suite"
    say "InRelease of $suite"
    get "$dist/InRelease" "$WORK/$suite.InRelease"
    gpgv --keyring "$KEYRING" --output "$WORK/$suite.Release.verified" \
        "$WORK/$suite.InRelease" 2>"$WORK/$suite.gpgv.log" \
        || { cat "$WORK/$suite.gpgv.log" >&2; die "$suite InRelease signature NOT valid"; }
    say "$suite InRelease signature good"

    want=$(awk '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 }
                s && $3 == "main/binary-amd64/Packages.xz" { print $1 }' \
        "$WORK/$suite.Release.verified")
    [[ ${#want} -eq 64 ]] || die "no SHA256 for $suite Packages.xz"
    get_checked "$dist/main/binary-amd64/Packages.xz" "$WORK/$suite.Packages.xz" "$want"
    say "$suite Packages.xz checksum good"

    if [[ "$(cat "$WORK/$suite.index.sha256" 2>/dev/null)" != "$want" ]]; then
        xz -dc "$WORK/$suite.Packages.xz" | awk '
            function firstalts(s,   n, a, i, d, out) {
                n = split(s, a, ",")
                for (i = 1; i <= n; i++) {
                    d = a[i]; sub(/\|.*/, "", d); sub(/\(.*/, "", d); sub(/:.*/, "", d)
                    gsub(/[ \t]/, "", d)
                    if (d != "") out = out (out == "" ? "" : ",") d
                }
                return out
            }
            function allnames(s,   n, a, i, d, out) {
                n = split(s, a, ",")
                for (i = 1; i <= n; i++) {
                    d = a[i]; sub(/\(.*/, "", d); gsub(/[ \t]/, "", d)
                    if (d != "") out = out (out == "" ? "" : ",") d
                }
                return out
            }
            function flush() {
                if (p != "" && f != "")
                    print p "\t" v "\t" f "\t" h "\t" (dep == "" ? "-" : dep) "\t" (prov == "" ? "-" : prov)
                p = v = f = h = dep = prov = ""
            }
            /^Package: / { flush(); p = $2 }
            /^Version: / { v = $2 }
            /^Filename: / { f = $2 }
            /^SHA256: / { h = $2 }
            /^(Pre-)?Depends: / {
                s = $0; sub(/^[^:]*: /, "", s); s = firstalts(s)
                if (s != "") dep = dep (dep == "" ? "" : ",") s
            }
            /^Provides: / { s = $0; sub(/^[^:]*: /, "", s); prov = allnames(s) }
            /^$/ { flush() }
            END { flush() }' >"$WORK/$suite.index"
        echo "$want" >"$WORK/$suite.index.sha256"
    fi
done

# Resolve the closure. Output: one line per package: suite, name, version, Filename, SHA256.
# Later lines for the same package in one index win (highest version listed last).
awk -v roots="${ROOTPKGS[*]}" -v skip="$SKIP" -v nsuites="${#SUITES[@]}" \
    -v suites="${SUITES[*]}" '
    function skipped(n,   i) {
        for (i = 1; i <= nskip; i++) if (n ~ skipre[i]) return 1
        return 0
    }
    BEGIN {
        split(suites, sname, " ")
        nskip = split(skip, sk, /[ \t\n]+/)
        j = 0
        for (i = 1; i <= nskip; i++) {
            if (sk[i] == "") continue
            re = sk[i]; gsub(/[.+]/, "\\\\&", re); gsub(/\*/, ".*", re)
            skipre[++j] = "^" re "$"
        }
        nskip = j
    }
    FNR == 1 { si++ }
    {
        key = si SUBSEP $1
        have[key] = 1; ver[key] = $2; file[key] = $3; sha[key] = $4; deps[key] = $5
        if ($6 != "-") {
            n = split($6, pv, ",")
            for (i = 1; i <= n; i++) if (!((si SUBSEP pv[i]) in prov)) prov[si SUBSEP pv[i]] = $1
        }
    }
    END {
        nq = split(roots, queue, " ")
        for (qi = 1; qi <= nq; qi++) {
            n = queue[qi]
            if (n in seen) continue
            seen[n] = 1
            if (skipped(n)) { print "skip\t" n; continue }
            found = 0
            for (s = 1; s <= nsuites && !found; s++)
                if ((s SUBSEP n) in have) { found = s; real = n }
            for (s = 1; s <= nsuites && !found; s++)
                if ((s SUBSEP n) in prov) {
                    real = prov[s SUBSEP n]
                    found = 1
                    # The provider itself, from the preferred suite that has it.
                    queue[++nq] = real
                }
            if (!found) { print "missing\t" n; continue }
            if (real != n) continue
            key = found SUBSEP n
            print "pkg\t" sname[found] "\t" n "\t" ver[key] "\t" file[key] "\t" sha[key]
            if (deps[key] != "-") {
                m = split(deps[key], d, ",")
                for (i = 1; i <= m; i++) queue[++nq] = d[i]
            }
        }
    }' $(for s in "${SUITES[@]}"; do echo "$WORK/$s.index"; done) >"$WORK/closure"

if grep -q '^missing' "$WORK/closure"; then
    grep '^missing' "$WORK/closure" >&2
    die "unresolved dependencies"
fi
say "skipped: $(awk -F'\t' '$1 == "skip" { printf "%s ", $2 }' "$WORK/closure")"
npkg=$(grep -c '^pkg' "$WORK/closure")
say "$npkg packages: $(awk -F'\t' '$1 == "pkg" { printf "%s ", $3 }' "$WORK/closure")"
say "qemu-system-arm $(awk -F'\t' '$1 == "pkg" && $3 == "qemu-system-arm" { print $4 }' "$WORK/closure")"

debs=()
while IFS=$'\t' read -r kind suite name ver file sha; do
    [[ "$kind" == pkg ]] || continue
    [[ -n "$file" && ${#sha} -eq 64 ]] || die "$name: no Filename/SHA256 in $suite Packages"
    deb="$WORK/$(basename "$file")"
    get_checked "$MIRROR/$file" "$deb" "$sha"
    debs+=("$deb")
done <"$WORK/closure"
say "all $npkg .deb checksums good"

# Extract into a fresh root unless the same set was already extracted.
stamp=$(awk -F'\t' '$1 == "pkg" { print $6, $5 }' "$WORK/closure" | sort)
if [[ -d "$ROOT" && "$(cat "$OUT/root.debs" 2>/dev/null)" == "$stamp" ]]; then
    say "$ROOT already holds these packages"
else
    rm -rf "$ROOT" "$OUT/root.debs"
    mkdir -p "$ROOT"
    for deb in "${debs[@]}"; do dpkg -x "$deb" "$ROOT"; done
    echo "$stamp" >"$OUT/root.debs"
    say "extracted into $ROOT"
fi

# The trixie dynamic loader.
loader=
for l in usr/lib64/ld-linux-x86-64.so.2 lib64/ld-linux-x86-64.so.2 \
         usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/ld-linux-x86-64.so.2; do
    if [[ -e "$ROOT/$l" ]]; then loader=$l; break; fi
done
[[ -n "$loader" ]] || die "no ld-linux-x86-64.so.2 in $ROOT"
[[ -x "$ROOT/usr/bin/qemu-system-aarch64" ]] || die "no usr/bin/qemu-system-aarch64 in $ROOT"
ROOTABS=$(cd "$ROOT" && pwd)

# Run through the loader, QEMU sees the loader as /proc/self/exe, so its "executable directory"
# is the loader's real directory. A `qemu-bundle` there (QEMU's mechanism for running from a
# build tree) makes QEMU prefix every built-in path with it: modules (/usr/lib/.../qemu),
# firmware and data (/usr/share/qemu, /usr/share/seabios) then come from the extracted tree
# only. Without it QEMU 11 would dlopen the host's QEMU 10 modules (e.g. ui-opengl.so when no
# -display is given) and fall back to the host's /usr/share/qemu.
loaderdir=$(dirname "$(realpath "$ROOTABS/$loader")")
loaderdir=${loaderdir#"$ROOTABS"/}
[[ "$loaderdir" != /* ]] || die "$loader resolves outside $ROOT"
ln -sfn "$(echo "$loaderdir" | sed 's|[^/][^/]*|..|g')" "$ROOT/$loaderdir/qemu-bundle"

# --library-path: the multiarch directories, plus the directory of any library the loader
# (trixie's own --list, not the host's ldd) would otherwise take from the host or not find.
ldlist() {
    sh -c 'ROOT=$1; shift; exec "$ROOT/'"$loader"'" --library-path "'"$libpath"'" --list "$@"' \
        sh "$ROOTABS" "$ROOTABS/usr/bin/qemu-system-aarch64"
}
libpath=
addlibdir() {
    [[ -d "$ROOT/$1" ]] || return 0
    case ":$libpath:" in *":\$ROOT/$1:"*) return 0 ;; esac
    libpath="${libpath:+$libpath:}\$ROOT/$1"
}
for d in usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib64 lib64; do
    if compgen -G "$ROOT/$d/lib*.so*" >/dev/null; then addlibdir "$d"; fi
done
for pass in 1 2 3 4; do
    listing=$(ldlist 2>&1) || true
    outside=$(echo "$listing" | awk -v r="$ROOTABS/" '$2 == "=>" && index($3, r) != 1 { print $1 }')
    [[ -n "$outside" ]] || break
    for so in $outside; do
        f=$(cd "$ROOT" && find . -name "$so" -print -quit)
        [[ -n "$f" ]] || { echo "$listing" >&2; die "$so (needed) is not in $ROOT"; }
        addlibdir "$(dirname "${f#./}")"
    done
done
listing=$(ldlist 2>&1) || { echo "$listing" >&2; die "loader --list failed"; }
if echo "$listing" | grep -v -e "$ROOTABS/" -e 'linux-vdso' | grep -q .; then
    echo "$listing" | grep -v -e "$ROOTABS/" -e 'linux-vdso' >&2
    die "libraries resolved outside $ROOT (see above)"
fi
say "all $(echo "$listing" | grep -c '=>') shared libraries resolve inside $ROOT"

mkdir -p "$OUT/bin"
wrapper="$OUT/bin/qemu-system-aarch64"
cat >"$wrapper.tmp" <<EOF
#!/bin/sh
# Generated by scripts/fetch-qemu-system11.sh: runs trixie-backports' qemu-system-aarch64 through
# the extracted trixie dynamic loader and libraries in ../root (the tree can be moved as a whole).
ROOT=\$(cd "\$(dirname "\$(readlink -f "\$0")")/../root" && pwd)
exec "\$ROOT/$loader" --library-path "$libpath" \\
    "\$ROOT/usr/bin/qemu-system-aarch64" -L "\$ROOT/usr/share/qemu" "\$@"
EOF
chmod +x "$wrapper.tmp"
mv "$wrapper.tmp" "$wrapper"
say "wrote $wrapper"

# Checks: it reports its version, and it starts a virt machine (a loader error exits at once).
"$wrapper" --version | head -n 1
rc=0
timeout 2 "$wrapper" -M virt -cpu max -nographic -S -display none -monitor none -serial none \
    </dev/null >"$WORK/start.log" 2>&1 || rc=$?
[[ $rc -eq 124 ]] || { cat "$WORK/start.log" >&2; die "qemu-system-aarch64 -M virt -cpu max did not start (exit $rc)"; }
say "-M virt -cpu max starts (killed after 2 s as intended)"

# SME: the -cpu max properties (qom-list of the CPU over QMP; `-cpu max,help` is not supported
# and query-cpu-model-expansion does not advertise the SME ones), and the ID registers read by
# three instructions at 0x40200000: mrs x0, ID_AA64PFR1_EL1; mrs x1, ID_AA64SMFR0_EL1; b .
printf '\x20\x04\x38\xd5\xa1\x04\x38\xd5\x00\x00\x00\x14' >"$WORK/idregs.bin"
qmp=$( { printf '%s\n' '{"execute":"qmp_capabilities"}' \
        '{"execute":"qom-list","arguments":{"path":"/machine/unattached/device[0]"}}' \
        '{"execute":"cont"}'
      sleep 1
      printf '%s\n' '{"execute":"human-monitor-command","arguments":{"command-line":"info registers"}}' \
        '{"execute":"quit"}'; } \
    | timeout 20 "$wrapper" -M virt -cpu max -nographic -S -display none -monitor none \
        -serial none -qmp stdio \
        -device "loader,file=$WORK/idregs.bin,addr=0x40200000,cpu-num=0" 2>&1) || true
props=$(echo "$qmp" | grep -oE '"name": "sme[^"]*"' | cut -d'"' -f4 | sort -V | tr '\n' ' ')
say "-cpu max SME properties: ${props:-none listed}"
pc=$(echo "$qmp" | grep -oE 'PC=[0-9a-f]+' | head -n 1 | cut -d= -f2)
pfr1=$(echo "$qmp" | grep -oE 'X00=[0-9a-f]+' | head -n 1 | cut -d= -f2)
smfr0=$(echo "$qmp" | grep -oE 'X01=[0-9a-f]+' | head -n 1 | cut -d= -f2)
if [[ "$pc" == 0000000040200008 && -n "$pfr1" && -n "$smfr0" ]]; then
    sme=$(( (0x$pfr1 >> 24) & 0xf )); smever=$(( (0x$smfr0 >> 56) & 0xf ))
    fa64=$(( (0x$smfr0 >> 63) & 1 ))
    case "$sme" in 0) what="no SME" ;; 1) what="SME" ;; 2) what="SME2" ;; *) what="SME ($sme)" ;; esac
    case "$smever" in 0) v="SME" ;; 1) v="SME2" ;; 2) v="SME2p1" ;; *) v="$smever" ;; esac
    say "-cpu max: ID_AA64PFR1_EL1=0x$pfr1 (SME=$sme: $what), ID_AA64SMFR0_EL1=0x$smfr0 (SMEver=$smever: $v, FA64=$fa64)"
else
    say "-cpu max: could not read the ID registers (PC=${pc:-?}); see $WORK/idregs.bin"
fi
say "$wrapper ready"
