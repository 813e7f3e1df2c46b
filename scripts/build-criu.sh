#!/usr/bin/env bash
# Makes real CRIU binaries available to the realcriu tests (tests/realcriu).
#
#   scripts/build-criu.sh [BUILD_DIR]       BUILD_DIR defaults to build/
#
# Inputs (environment):
#   CRIU_BIN       one ready criu binary: nothing is built, it is the only one
#                  offered.
#   CRIU_TARBALLS  a directory with criu-<version>.tar.xz tarballs and a
#                  SHA256SUMS file naming them; default ../shared/criu beside
#                  the repository. Every tarball listed in SHA256SUMS is
#                  checked (a mismatch stops the script) and built with
#                  `make criu` under BUILD_DIR/realcriu/criu-<version>/; a
#                  build is reused while its tarball's SHA-256 is unchanged.
#   JOBS           make's parallelism (default: nproc).
#
# Output: BUILD_DIR/realcriu/criu-bins.txt, one "<version><TAB><path>" line per
# binary made available (version "bin" for CRIU_BIN), also printed. No
# tarball directory and no CRIU_BIN is not an error: the list is empty and the
# tests report themselves NOT RUN.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$repo/build}")
out=$build/realcriu
list=$out/criu-bins.txt
mkdir -p "$out"

# One builder at a time per build directory (CTest and a manual run).
exec 9>"$out/.lock"
flock 9

tmp_list=$(mktemp "$out/.criu-bins.XXXXXX")
trap 'rm -f "$tmp_list"' EXIT

finish() {
	mv "$tmp_list" "$list"
	trap - EXIT
	if [ -s "$list" ]; then
		echo "build-criu: CRIU binaries available (listed in $list):"
		sed 's/^/  /' "$list"
	else
		echo "build-criu: no CRIU binary available ($1); the realcriu tests will report NOT RUN"
	fi
}

if [ -n "${CRIU_BIN:-}" ]; then
	bin=$(realpath -e "$CRIU_BIN") || { echo "build-criu: CRIU_BIN=$CRIU_BIN does not exist" >&2; exit 1; }
	[ -x "$bin" ] || { echo "build-criu: CRIU_BIN=$bin is not executable" >&2; exit 1; }
	printf 'bin\t%s\n' "$bin" >>"$tmp_list"
	finish "CRIU_BIN"
	exit 0
fi

tarballs=${CRIU_TARBALLS:-$repo/../shared/criu}
if [ ! -d "$tarballs" ]; then
	finish "no tarball directory $tarballs"
	exit 0
fi
tarballs=$(cd "$tarballs" && pwd)
if [ ! -f "$tarballs/SHA256SUMS" ]; then
	echo "build-criu: $tarballs has no SHA256SUMS; refusing to build unchecked sources" >&2
	exit 1
fi
if ! (cd "$tarballs" && sha256sum --check --quiet SHA256SUMS); then
	echo "build-criu: SHA-256 MISMATCH in $tarballs (see above): refusing to build these tarballs" >&2
	exit 1
fi

jobs=${JOBS:-$(nproc)}
while read -r sum name; do
	name=${name#\*}
	case $name in
	criu-*.tar.xz) ;;
	*) continue ;;
	esac
	version=${name#criu-}
	version=${version%.tar.xz}
	dir=$out/criu-$version
	bin=$dir/criu/criu
	if [ -x "$bin" ] && [ "$(cat "$dir/.tarball-sha256" 2>/dev/null)" = "$sum" ]; then
		echo "build-criu: criu $version: up to date"
	else
		echo "build-criu: criu $version: building from $name (make -j$jobs criu, a few minutes)"
		# The stamp is written last: an interrupted build is redone from scratch.
		rm -rf "$dir"
		mkdir -p "$dir"
		tar -xJf "$tarballs/$name" -C "$dir" --strip-components=1
		if ! make -C "$dir" -j"$jobs" criu >"$out/criu-$version.build.log" 2>&1; then
			tail -n 30 "$out/criu-$version.build.log" >&2
			echo "build-criu: criu $version: build FAILED (log: $out/criu-$version.build.log)" >&2
			exit 1
		fi
		if [ ! -x "$bin" ]; then
			echo "build-criu: criu $version: make succeeded but made no $bin" >&2
			exit 1
		fi
		echo "$sum" >"$dir/.tarball-sha256"
	fi
	printf '%s\t%s\n' "$version" "$bin" >>"$tmp_list"
done <"$tarballs/SHA256SUMS"
finish "no criu-*.tar.xz listed in $tarballs/SHA256SUMS"
