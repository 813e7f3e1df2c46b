#!/usr/bin/env bash
# The checkpoint/restore demo on the emulated GPU (see README): run by
# scripts/demo.sh after the build. Usage: demo.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
exec python3 "$(dirname "$0")/e2e.py" --bin-dir "$build" demo
