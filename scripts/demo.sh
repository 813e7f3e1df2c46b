#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, install the
# plugin into /usr/lib/criu (and the man page), then run the checkpoint/restore
# demo on the emulated GPU when it is available.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cmake --install build --prefix /usr
echo "installed: /usr/lib/criu/amdgpu_plugin.so"
if [ -x build/tests/e2e/demo.sh ] || [ -f tests/e2e/demo.sh ]; then
  bash tests/e2e/demo.sh build
fi
