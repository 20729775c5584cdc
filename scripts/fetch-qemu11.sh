#!/usr/bin/env bash
# Fetch a static qemu-aarch64 >= 10.1 (needed for SME2) from Debian trixie-backports through a
# verified chain, into target/qemu11/ (usr/bin/qemu-aarch64):
#   mirror URI from /etc/apt/sources.list.d/debian.sources
#   -> dists/trixie-backports/InRelease, signature checked with gpgv against the Debian
#      archive keyring; only the verified text is used
#   -> main/binary-amd64/Packages.xz, checked against its SHA256 in that text
#   -> the qemu-user .deb, checked against the SHA256 in Packages
#   -> dpkg -x.
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCES=/etc/apt/sources.list.d/debian.sources
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
SUITE=trixie-backports
PKG=qemu-user
OUT="${QEMU11_DIR:-target/qemu11}"
WORK="$OUT/download"
mkdir -p "$WORK"

# The main archive's URI (not the -security one).
MIRROR=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$SOURCES" \
    | grep -v -- '-security' | head -n 1)
[[ -n "$MIRROR" ]] || { echo "fetch-qemu11: no URIs in $SOURCES" >&2; exit 1; }
MIRROR=${MIRROR%/}
DIST="$MIRROR/dists/$SUITE"

get() { curl -fsSL --retry 3 -o "$2" "$1"; }

echo "fetch-qemu11: InRelease of $SUITE"
get "$DIST/InRelease" "$WORK/InRelease"
gpgv --keyring "$KEYRING" --output "$WORK/Release.verified" "$WORK/InRelease" 2>"$WORK/gpgv.log" \
    || { cat "$WORK/gpgv.log" >&2; echo "fetch-qemu11: InRelease signature NOT valid" >&2; exit 1; }
echo "fetch-qemu11: InRelease signature good"

# SHA256 of main/binary-amd64/Packages.xz from the verified Release text.
want=$(awk '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 }
            s && $3 == "main/binary-amd64/Packages.xz" { print $1 }' "$WORK/Release.verified")
[[ ${#want} -eq 64 ]] || { echo "fetch-qemu11: no SHA256 for Packages.xz" >&2; exit 1; }
get "$DIST/main/binary-amd64/Packages.xz" "$WORK/Packages.xz"
echo "$want  $WORK/Packages.xz" | sha256sum -c --quiet - \
    || { echo "fetch-qemu11: Packages.xz checksum mismatch" >&2; exit 1; }
echo "fetch-qemu11: Packages.xz checksum good"

# The package stanza (highest version listed last wins) from the verified Packages.
read -r file sha ver < <(xz -dc "$WORK/Packages.xz" | awk -v p="$PKG" '
    /^Package: / { inpkg = ($2 == p) }
    inpkg && /^Version: / { v = $2 }
    inpkg && /^Filename: / { f = $2 }
    inpkg && /^SHA256: / { h = $2 }
    /^$/ { if (inpkg && f != "") { F = f; H = h; V = v } inpkg = 0 }
    END { if (inpkg && f != "") { F = f; H = h; V = v } print F, H, V }')
[[ -n "$file" && ${#sha} -eq 64 ]] || { echo "fetch-qemu11: $PKG not in Packages" >&2; exit 1; }
deb="$WORK/$(basename "$file")"
echo "fetch-qemu11: $PKG $ver"
get "$MIRROR/$file" "$deb"
echo "$sha  $deb" | sha256sum -c --quiet - \
    || { echo "fetch-qemu11: $PKG .deb checksum mismatch" >&2; exit 1; }
echo "fetch-qemu11: .deb checksum good"

dpkg -x "$deb" "$OUT"
"$OUT/usr/bin/qemu-aarch64" --version | head -n 1
echo "fetch-qemu11: $OUT/usr/bin/qemu-aarch64 ready"
