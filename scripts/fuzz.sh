#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer in build-fuzz/ and runs each: its seed
# corpus first, then SECONDS of fuzzing (default 600: the long run; CI runs
# 5). New inputs accumulate in build-fuzz/tests/fuzz/fuzz-corpus/<target>/,
# crashes land in build-fuzz/tests/fuzz/fuzz-artifacts/. Fix what a crash
# shows, then add its input to tests/fuzz/corpus/<target>/ (named crash-<what>).
#   scripts/fuzz.sh [SECONDS] [TARGET-REGEX]
# AMDCR_DEBUG_LINES_ONLY=ON builds with line tables only (CMakeLists.txt),
# CMAKE_UNITY_BUILD=ON as a unity build (scripts/test.sh). FUZZ_OPT is the
# build's optimization (AMDCR_OPTIMIZE; default -O2): scripts/test.sh
# builds at -O0, which halves the compile (clang with ASan, UBSan and
# libFuzzer's coverage: 17 against 37 CPU-s for one unity file of
# src/image) and runs each input slower, so its few seconds of fuzzing
# try fewer inputs; the long runs keep -O2.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
only=${2:-.}
dir=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$dir" -DAMDCR_FUZZ=ON -DAMDCR_SANITIZE=ON \
	-DAMDCR_FUZZ_SECONDS="$seconds" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMDCR_OPTIMIZE="${FUZZ_OPT:-}" \
	-DAMDCR_DEBUG_LINES_ONLY="${AMDCR_DEBUG_LINES_ONLY:-OFF}" -DCMAKE_UNITY_BUILD="${CMAKE_UNITY_BUILD:-OFF}" >/dev/null
cmake --build "$dir" --target fuzz -j"$(nproc)"
# FUZZ_BUILD_ONLY=1: the build alone (scripts/test.sh builds them while
# other tests run).
[ "${FUZZ_BUILD_ONLY:-0}" = 0 ] || exit 0
# One target per CPU at a time: each libFuzzer run is one thread.
ctest --test-dir "$dir" -L fuzz -R "fuzz_.*($only)" --output-on-failure -j"$(nproc)"
