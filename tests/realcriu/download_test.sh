#!/usr/bin/env bash
# download_test.sh TARBALLS: scripts/build-criu.sh's download
# of the pinned CRIU release (CTest realcriu_download), against a server on
# 127.0.0.1 (python3 -m http.server) that serves the pinned release's tar
# stream, taken from TARBALLS/criu-<release>.tar.xz (checked against its
# SHA256SUMS) and gzipped, as GitHub serves it. The script runs with no
# CRIU_BIN, no tarball directory and a criu 3.17.1 first on PATH (a stub),
# which it must refuse; AMDCR_TEST_CRIU_URL points it at the server.
#   unreachable  a URL nothing listens on: exit 0 within seconds, nothing
#                listed, and tests/realcriu/realcriu.py's NOT RUN names the
#                three ways (CRIU_TARBALLS, CRIU_BIN / criu on PATH, the URL)
#   corrupted    the tar stream with one byte flipped: exit 1, "SHA-256
#                MISMATCH", both lists empty, nothing unpacked
#   good         the tar stream as pinned, with CRIU_UNPACK_ONLY=1: exit 0,
#                the sources unpacked are the release tarball's file for
#                file, nothing built or listed. (Building them is the
#                tarball path's build_tree, which realcriu_build_criu runs on
#                the same sources: a third CRIU build here took 46 s of both
#                CPUs of CI.)
# Exit 0 pass, 1 fail, 77 NOT RUN (no tarball of the release, no python3,
# curl or gzip).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tarballs=${1:?usage: download_test.sh TARBALLS}

notrun() { echo "NOT RUN: $*"; exit 77; }
failed() { echo "FAIL: $*"; exit 1; }
pin() { sed -n "s/^set($1 \"\\(.*\\)\")\$/\\1/p" "$repo/cmake/RealCriu.cmake"; }
release=$(pin AMDCR_CRIU_RELEASE)
url=$(pin AMDCR_CRIU_RELEASE_URL)

for tool in python3 curl gzip xz; do
	command -v $tool >/dev/null || notrun "no $tool"
done
[ -f "$tarballs/SHA256SUMS" ] && [ -f "$tarballs/criu-$release.tar.xz" ] ||
	notrun "the test serves CRIU $release from $tarballs/criu-$release.tar.xz with its SHA256SUMS, which are not there"
(cd "$tarballs" && grep -E "[[:space:]]\*?criu-$release\.tar\.xz\$" SHA256SUMS | sha256sum -c --quiet -) ||
	failed "$tarballs/criu-$release.tar.xz does not match its SHA256SUMS"

work=$(mktemp -d /tmp/realcriu-download.XXXXXX)
server=
cleanup() {
	[ -z "$server" ] || kill "$server" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/www" "$work/stub"
xz -dc "$tarballs/criu-$release.tar.xz" | gzip -n >"$work/www/good.tar.gz"
# One byte flipped in the middle of the tar stream, then gzipped: a valid
# gzip whose tar differs from the pin in one byte.
xz -dc "$tarballs/criu-$release.tar.xz" >"$work/flipped.tar"
size=$(stat -c %s "$work/flipped.tar")
python3 - "$work/flipped.tar" "$((size / 2))" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ 0x01]))
EOF
gzip -n <"$work/flipped.tar" >"$work/www/corrupted.tar.gz"
rm "$work/flipped.tar"

printf '#!/bin/sh\necho "Version: 3.17.1"\n' >"$work/stub/criu"
chmod +x "$work/stub/criu"

python3 -u -m http.server --bind 127.0.0.1 --directory "$work/www" 0 >"$work/server.log" 2>&1 &
server=$!
port=
for _ in $(seq 50); do
	port=$(sed -n 's/.* port \([0-9]\+\).*/\1/p' "$work/server.log" | head -n1)
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || failed "the HTTP server did not start: $(cat "$work/server.log")"
# A port nothing listens on: bound, then closed.
closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# run NAME URL: build-criu.sh into $work/NAME with only the download to use.
run() {
	env -u CRIU_BIN CRIU_TARBALLS="$work/no-tarballs" CRIU_DOWNLOAD=1 CRIU_DOWNLOAD_CONNECT_TIMEOUT=5 \
		AMDCR_TEST_CRIU_URL="$2" PATH="$work/stub:$PATH" \
		bash "$repo/scripts/build-criu.sh" "$work/$1" >"$work/$1.log" 2>&1
}
lists_empty() { # lists_empty NAME: both lists exist and are empty
	local d=$work/$1/realcriu
	[ -f "$d/criu-bins.txt" ] && [ ! -s "$d/criu-bins.txt" ] &&
		[ -f "$d/upstream-plugins.txt" ] && [ ! -s "$d/upstream-plugins.txt" ]
}

# unreachable
start=$(date +%s)
run unreachable "http://127.0.0.1:$closed/criu-$release.tar.gz"
rc=$? took=$(($(date +%s) - start))
cat "$work/unreachable.log"
[ $rc = 0 ] || failed "unreachable: build-criu.sh exit $rc, expected 0 (no CRIU is not an error)"
[ $took -le 15 ] || failed "unreachable: took ${took}s; the connect timeout is 5s"
grep -q "older than 4.0" "$work/unreachable.log" || failed "unreachable: the stub criu 3.17.1 was not refused as older than 4.0"
lists_empty unreachable || failed "unreachable: a list is missing or not empty"
msg=$(python3 - "$here" "$work/unreachable/realcriu/criu-bins.txt" "$release" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import realcriu
try:
    realcriu.find_criu(sys.argv[2], sys.argv[3])
    print("found")
except realcriu.NotRun as e:
    print(f"NOT RUN: {e}")
EOF
)
echo "find_criu: $msg"
for want in "NOT RUN: " CRIU_TARBALLS "criu >= 4.0 on PATH" CRIU_BIN "$url"; do
	case $msg in
	*"$want"*) ;;
	*) failed "unreachable: the NOT RUN message does not name '$want'" ;;
	esac
done
echo "ok: unreachable URL: no CRIU in ${took}s, NOT RUN names the three ways"

# corrupted
run corrupted "http://127.0.0.1:$port/corrupted.tar.gz"
rc=$?
cat "$work/corrupted.log"
[ $rc = 1 ] || failed "corrupted: build-criu.sh exit $rc, expected 1"
grep -q "SHA-256 MISMATCH" "$work/corrupted.log" || failed "corrupted: no SHA-256 MISMATCH error"
lists_empty corrupted || failed "corrupted: a list is missing or not empty"
[ ! -e "$work/corrupted/realcriu/criu-$release" ] || failed "corrupted: its sources were unpacked"
echo "ok: one flipped byte: refused with a SHA-256 mismatch, nothing listed or unpacked"

# good
CRIU_UNPACK_ONLY=1 run good "http://127.0.0.1:$port/good.tar.gz"
rc=$?
tail -n 20 "$work/good.log"
[ $rc = 0 ] || failed "good: build-criu.sh exit $rc"
grep -q "GET /good.tar.gz" "$work/server.log" || failed "good: the server saw no request"
lists_empty good || failed "good: something was listed although nothing was built"
got=$work/good/realcriu/criu-$release
[ -f "$got/Makefile" ] || failed "good: no sources unpacked in $got"
mkdir -p "$work/ref"
tar -xJf "$tarballs/criu-$release.tar.xz" -C "$work/ref" --strip-components=1
diff -r -q --no-dereference "$work/ref" "$got" >"$work/good.diff" 2>&1 ||
	failed "good: the unpacked sources differ from the release tarball's: $(head -n 5 "$work/good.diff")"
echo "ok: good download: checked against the pin and unpacked, file for file the release tarball"
