#!/usr/bin/env bash
# Makes real CRIU binaries available to the realcriu tests (tests/realcriu),
# and upstream's amdgpu plugin built from the same sources.
#
#   scripts/build-criu.sh [BUILD_DIR]        BUILD_DIR defaults to build/
#   scripts/build-criu.sh --plan             what a run would use (no build)
#
# Where CRIU comes from: the first of these that is there (the one place
# that decides; cmake/RealCriu.cmake asks --plan at configure time):
#   1. CRIU_BIN       one ready criu binary: nothing is built, it is the only
#                     one offered (version "bin").
#   2. CRIU_TARBALLS  a directory with criu-<version>.tar.xz tarballs and a
#                     SHA256SUMS file naming them; default ../shared/criu
#                     beside the repository. Every tarball listed in
#                     SHA256SUMS is checked (a mismatch stops the script) and
#                     built with `make criu` under BUILD_DIR/realcriu/
#                     criu-<version>/; a build is reused while its tarball's
#                     SHA-256 is unchanged.
#   3. an installed `criu` on PATH whose `criu --version` is 4.0 or newer
#      (version "installed-<its version>"; older ones are refused: their
#      plugin ABI is not the one the plugin is built for).
#   4. the download of the pinned CRIU release (cmake/RealCriu.cmake:
#      AMDCR_CRIU_RELEASE, _URL and _TAR_SHA256), unless CRIU_DOWNLOAD=0.
#      curl gives up after CRIU_DOWNLOAD_CONNECT_TIMEOUT seconds (default
#      10) without a connection and after 10 minutes in all. The archive is
#      decompressed (gzip or xz) and the SHA-256 of the tar stream must be
#      the pinned one, else nothing is built and the script fails. Built
#      like a tarball, reused while that SHA-256 is unchanged.
# CRIU_UNPACK_ONLY=1: each source is checked and unpacked into
# BUILD_DIR/realcriu/criu-<version>/ as above, not built and not listed
# (sources fetched and checked for a later offline build; the download
# test checks what the download unpacks without a third CRIU build).
# CRIU_CFLAGS: what CRIU is compiled with, after its Makefile's own -O2 -g
# (its USERCFLAGS); default "-O0 -g0". The tests run CRIU, they do not
# debug it, and what CRIU does for them is system calls: at -O0 -g0 one
# CRIU build took 55 CPU-s against 93 at its default (this VM, GCC 12).
# A build is reused only if it was made with the same flags. Upstream's
# plugin is built with its own defaults.
# JOBS is make's parallelism (default: nproc). AMDCR_TEST_CRIU_URL replaces
# the pinned URL (not the pinned SHA-256): tests/realcriu/download_test.sh
# points it at a server on 127.0.0.1; nothing else sets it.
#
# Output, in BUILD_DIR/realcriu/:
#   criu-bins.txt         "<version><TAB><absolute path of criu>" per binary
#                         made available (also printed)
#   upstream-plugins.txt  "<version><TAB><absolute path of amdgpu_plugin.so>"
#                         per CRIU built from sources whose plugins/amdgpu
#                         built (`make -C plugins/amdgpu amdgpu_plugin.so`)
#                         and exports CR_PLUGIN_DESC; a failure is logged
#                         (criu-<version>.plugin.log) and leaves it out
#   criu-bins.why         why criu-bins.txt is empty: the three ways to get
#                         a CRIU (tests/realcriu/realcriu.py prints it)
# No source of CRIU at all is not an error: the lists are empty and the tests
# report themselves NOT RUN. A failed check or build is (exit 1, empty lists).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

plan=0
if [ "${1:-}" = --plan ]; then
	plan=1
	shift
fi

pin() { # pin NAME: set(NAME "value") from cmake/RealCriu.cmake
	sed -n "s/^set($1 \"\\(.*\\)\")\$/\\1/p" "$repo/cmake/RealCriu.cmake"
}
release=$(pin AMDCR_CRIU_RELEASE)
release_url=$(pin AMDCR_CRIU_RELEASE_URL)
release_sha=$(pin AMDCR_CRIU_RELEASE_TAR_SHA256)
[ -n "$release" ] && [ -n "$release_url" ] && [ -n "$release_sha" ] ||
	{ echo "build-criu: no pinned release in $repo/cmake/RealCriu.cmake" >&2; exit 1; }
url=${AMDCR_TEST_CRIU_URL:-$release_url}
tarballs=${CRIU_TARBALLS:-$repo/../shared/criu}

three_ways="put criu-<version>.tar.xz tarballs and their SHA256SUMS in CRIU_TARBALLS (default ../shared/criu beside the repository), install criu >= 4.0 on PATH or set CRIU_BIN=/path/to/criu, or allow the download of $release_url (CRIU_DOWNLOAD=1, the default, and network access)"

# The installed criu on PATH if it is 4.0 or newer: sets installed (path)
# and installed_version; else says why not in installed_why.
find_installed() {
	installed='' installed_version='' installed_why=''
	local path ver
	path=$(command -v criu) || { installed_why="no criu on PATH"; return 0; }
	ver=$("$path" --version 2>/dev/null | sed -n 's/^Version: *\([0-9][0-9.]*\).*/\1/p') || true
	ver=${ver%%$'\n'*}
	if [ -z "$ver" ]; then
		installed_why="$path --version names no version"
	elif [ "${ver%%.*}" -lt 4 ]; then
		installed_why="$path is CRIU $ver, older than 4.0 (the plugin needs CRIU's 4.x plugin ABI): not used"
	else
		installed=$(realpath -e "$path") installed_version=$ver
	fi
}

# The tarball versions SHA256SUMS names, one per line.
tarball_versions() {
	sed -n 's/^[0-9a-f]\{64\}[[:space:]]\+\*\?criu-\(.*\)\.tar\.xz$/\1/p' "$tarballs/SHA256SUMS"
}

if [ $plan = 1 ]; then
	# "source S", "version V" lines (V: the versions a run would list),
	# "tarball V" for every tarball (tests/interop reads its sources), or
	# "none REASON".
	if [ -f "$tarballs/SHA256SUMS" ]; then
		tarball_versions | sed 's/^/tarball /'
	fi
	if [ -n "${CRIU_BIN:-}" ]; then
		printf 'source bin\nversion bin\n'
	elif [ -d "$tarballs" ]; then
		echo "source tarballs"
		if [ -f "$tarballs/SHA256SUMS" ]; then tarball_versions | sed 's/^/version /'; fi
	else
		find_installed
		if [ -n "$installed" ]; then
			printf 'source installed\nversion installed-%s\n' "$installed_version"
		elif [ "${CRIU_DOWNLOAD:-1}" != 0 ]; then
			printf 'source download\nversion %s\n' "$release"
		else
			echo "none no CRIU ($installed_why; CRIU_DOWNLOAD=0): $three_ways"
		fi
	fi
	exit 0
fi

build=$(realpath -m "${1:-$repo/build}")
out=$build/realcriu
list=$out/criu-bins.txt
plugins=$out/upstream-plugins.txt
why=$out/criu-bins.why
mkdir -p "$out"

# One builder at a time per build directory (CTest and a manual run).
exec 9>"$out/.lock"
flock 9

tmp_list=$(mktemp "$out/.criu-bins.XXXXXX")
tmp_plugins=$(mktemp "$out/.upstream-plugins.XXXXXX")
tmp_download=$out/.download
trap 'rm -rf "$tmp_list" "$tmp_plugins" "$tmp_download"' EXIT

finish() { # finish REASON: publish the lists; REASON says why they are empty
	chmod 644 "$tmp_list" "$tmp_plugins"
	mv "$tmp_list" "$list"
	mv "$tmp_plugins" "$plugins"
	rm -f "$why"
	if [ -s "$list" ]; then
		echo "build-criu: CRIU binaries available (listed in $list):"
		sed 's/^/  /' "$list"
		echo "build-criu: upstream's amdgpu plugin (listed in $plugins):"
		if [ -s "$plugins" ]; then sed 's/^/  /' "$plugins"; else echo "  none"; fi
	else
		echo "no CRIU ($1): $three_ways" >"$why"
		echo "build-criu: $(cat "$why"); the realcriu tests will report NOT RUN"
	fi
	exit 0
}

fail() { # fail MESSAGE: empty lists (nothing half-checked stays listed), exit 1
	: >"$tmp_list"
	: >"$tmp_plugins"
	chmod 644 "$tmp_list" "$tmp_plugins"
	mv "$tmp_list" "$list"
	mv "$tmp_plugins" "$plugins"
	echo "failed: $1" >"$why"
	echo "build-criu: $1" >&2
	exit 1
}

# upstream_plugin VERSION DIR: builds DIR's plugins/amdgpu/amdgpu_plugin.so
# (it needs the criu build for compel and the generated headers) and lists it.
upstream_plugin() {
	local version=$1 dir=$2 arch log=$out/criu-$1.plugin.log
	local so=$dir/plugins/amdgpu/amdgpu_plugin.so
	case $(uname -m) in
	x86_64 | i?86) arch=x86 ;;
	*) arch=$(uname -m) ;;
	esac
	if [ ! -f "$so" ]; then
		# Called directly, the plugin's Makefile needs ARCH (the top-level
		# Makefile would set it) for criu/arch/$ARCH/include.
		if ! make -C "$dir/plugins/amdgpu" ARCH="$arch" amdgpu_plugin.so >"$log" 2>&1; then
			echo "build-criu: criu $version: upstream's amdgpu_plugin.so did not build (log: $log); not listed" >&2
			return 0
		fi
	fi
	# grep reads all of nm's output: with pipefail, grep -q could fail the
	# pipeline through nm's SIGPIPE.
	if ! nm -D --defined-only "$so" | grep -w CR_PLUGIN_DESC >/dev/null; then
		echo "build-criu: criu $version: $so exports no CR_PLUGIN_DESC; not listed" >&2
		return 0
	fi
	printf '%s\t%s\n' "$version" "$so" >>"$tmp_plugins"
}

criu_cflags=${CRIU_CFLAGS-"-O0 -g0"}

# built DIR STAMP: DIR holds a CRIU built from sources that hash to STAMP
# with criu_cflags.
built() {
	[ -x "$1/criu/criu" ] && [ "$(cat "$1/.tarball-sha256" 2>/dev/null)" = "$2 cflags=$criu_cflags" ]
}

# build_tree VERSION STAMP UNPACK...: CRIU built in BUILD_DIR/realcriu/
# criu-VERSION from the sources `UNPACK... DIR` puts into DIR, unless a build
# of the same STAMP (what its sources hash to) and flags is there; then listed.
build_tree() {
	local version=$1 stamp=$2 jobs=${JOBS:-$(nproc)}
	shift 2
	local dir=$out/criu-$version
	local bin=$dir/criu/criu log=$out/criu-$version.build.log
	if built "$dir" "$stamp"; then
		echo "build-criu: criu $version: up to date"
	else
		[ "${CRIU_UNPACK_ONLY:-0}" = 1 ] ||
			echo "build-criu: criu $version: building (make -j$jobs criu, a few minutes)"
		# The stamp is written last: an interrupted build is redone from scratch.
		rm -rf "$dir"
		mkdir -p "$dir"
		"$@" "$dir" || fail "criu $version: unpacking its sources failed"
		if [ "${CRIU_UNPACK_ONLY:-0}" = 1 ]; then
			echo "build-criu: criu $version: unpacked in $dir, not built (CRIU_UNPACK_ONLY=1)"
			return 0
		fi
		if ! make -C "$dir" -j"$jobs" USERCFLAGS="$criu_cflags" criu >"$log" 2>&1; then
			tail -n 30 "$log" >&2
			fail "criu $version: build FAILED (log: $log)"
		fi
		[ -x "$bin" ] || fail "criu $version: make succeeded but made no $bin"
		echo "$stamp cflags=$criu_cflags" >"$dir/.tarball-sha256"
	fi
	printf '%s\t%s\n' "$version" "$bin" >>"$tmp_list"
	upstream_plugin "$version" "$dir"
}

untar_xz() { tar -xJf "$1" -C "$2" --strip-components=1; }

# decompress FILE: the tar stream of a gzip or xz archive, on stdout.
decompress() {
	case $(head -c 6 "$1" | od -An -tx1 | tr -d ' \n') in
	1f8b*) gzip -dc "$1" ;;
	fd377a585a00) xz -dc "$1" ;;
	*) echo "build-criu: $1 is neither gzip nor xz" >&2; return 1 ;;
	esac
}
untar_download() { decompress "$1" | tar -x -C "$2" --strip-components=1; }

# 1. CRIU_BIN
if [ -n "${CRIU_BIN:-}" ]; then
	bin=$(realpath -e "$CRIU_BIN") || fail "CRIU_BIN=$CRIU_BIN does not exist"
	[ -x "$bin" ] || fail "CRIU_BIN=$bin is not executable"
	printf 'bin\t%s\n' "$bin" >>"$tmp_list"
	finish "CRIU_BIN"
fi

# 2. the tarball directory
if [ -d "$tarballs" ]; then
	tarballs=$(cd "$tarballs" && pwd)
	[ -f "$tarballs/SHA256SUMS" ] ||
		fail "$tarballs has no SHA256SUMS; refusing to build unchecked sources"
	(cd "$tarballs" && sha256sum --check --quiet SHA256SUMS) ||
		fail "SHA-256 MISMATCH in $tarballs (see above): refusing to build these tarballs"
	while read -r sum name; do
		name=${name#\*}
		case $name in
		criu-*.tar.xz) ;;
		*) continue ;;
		esac
		version=${name#criu-}
		version=${version%.tar.xz}
		build_tree "$version" "$sum" untar_xz "$tarballs/$name"
	done <"$tarballs/SHA256SUMS"
	finish "no criu-*.tar.xz listed in $tarballs/SHA256SUMS"
fi
no_tarballs="no tarball directory $tarballs"

# 3. criu on PATH
find_installed
if [ -n "$installed" ]; then
	printf 'installed-%s\t%s\n' "$installed_version" "$installed" >>"$tmp_list"
	finish "installed criu"
fi
echo "build-criu: $installed_why"

# 4. the pinned release, downloaded
[ "${CRIU_DOWNLOAD:-1}" != 0 ] || finish "$no_tarballs; $installed_why; CRIU_DOWNLOAD=0"
stamp="tar $release_sha"
dir=$out/criu-$release
if built "$dir" "$stamp"; then
	build_tree "$release" "$stamp" false # up to date: nothing is unpacked
	finish "criu $release"
fi
mkdir -p "$tmp_download"
archive=$tmp_download/criu-$release.archive
echo "build-criu: downloading CRIU $release from $url"
if ! curl -fsSL --connect-timeout "${CRIU_DOWNLOAD_CONNECT_TIMEOUT:-10}" --max-time 600 \
	-o "$archive" "$url" 2>"$tmp_download/curl.err"; then
	finish "$no_tarballs; $installed_why; the download of $url failed: $(tr '\n' ' ' <"$tmp_download/curl.err" | sed 's/ *$//')"
fi
sum=$(decompress "$archive" | sha256sum) || fail "$url: not a gzip or xz archive"
sum=${sum%% *}
[ "$sum" = "$release_sha" ] ||
	fail "SHA-256 MISMATCH: the tar stream of $url is $sum, the pin (cmake/RealCriu.cmake) $release_sha: refusing to build it"
build_tree "$release" "$stamp" untar_download "$archive"
finish "criu $release"
