#!/usr/bin/env bash
# Refreshes tests/ctest-costs.txt, the test durations a fresh build tree
# starts from (CMakeLists.txt copies it to Testing/Temporary/CTestCostData.txt
# so that ctest -j starts the longest tests first), from a build tree whose
# ctest has run the whole suite:
#   scripts/ctest-costs.sh [BUILD_DIR]     (default build)
# Best from a fresh clone's run (scripts/test.sh), where the CRIU builds
# (realcriu_build_criu) take their real time; a test a tree ran from its
# cache is kept at the snapshot's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-build}/Testing/Temporary/CTestCostData.txt
[ -s "$data" ] || { echo "ctest-costs: no $data: run the suite there first" >&2; exit 1; }
out=tests/ctest-costs.txt
old=$(mktemp)
trap 'rm -f "$old"' EXIT
[ -f "$out" ] && cp "$out" "$old"
# Lines "name runs seconds" up to the "---" that starts the failed list;
# one run each, durations rounded to 0.1 s; the larger of old and new for
# a test whose new duration is under a second but was long before (a
# setup test that found its products built).
awk -v old="$old" 'FILENAME == old {if (/^---/) nextfile; if (NF == 3) was[$1] = $3; next}
     /^---/ {exit}
     NF == 3 {s = $3; if (s < 1 && ($1 in was) && was[$1] > s) s = was[$1];
              printf "%s 1 %.1f\n", $1, s}' "$old" "$data" | sort > "$out"
echo "---" >> "$out"
echo "ctest-costs: $(($(wc -l < "$out") - 1)) tests in $out"
