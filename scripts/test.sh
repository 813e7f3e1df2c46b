#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds everything and runs every test.
#   scripts/test.sh            normal build (build/), then each libFuzzer
#                              target for 15 s (build-fuzz/, scripts/fuzz.sh)
#   SANITIZE=ON scripts/test.sh       ASan+UBSan build (build-san-ON/)
#   SANITIZE=thread scripts/test.sh   ThreadSanitizer build (build-san-thread/)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
san=${SANITIZE:-OFF}
dir=build
[ "$san" = OFF ] || dir=build-san-$san
cmake -S . -B "$dir" -DAMDCR_SANITIZE="$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j"$(nproc)"
(cd "$dir" && ctest --output-on-failure --timeout 600 -j1)
# The libFuzzer targets (tests/fuzz): their seeds, then 15 s each, in a
# clang ASan+UBSan build of only those targets.
[ "$san" != OFF ] || bash scripts/fuzz.sh 15
