#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds everything and runs every test.
#   scripts/test.sh            normal build (build/), then each libFuzzer
#                              target for 15 s (build-fuzz/, scripts/fuzz.sh)
#   SANITIZE=ON scripts/test.sh       ASan+UBSan build (build-san-ON/)
#                              and the threaded paths under ThreadSanitizer
#                              (build-san-thread/, only their targets; THREADS=0
#                              skips this step)
#   SANITIZE=thread scripts/test.sh   everything under ThreadSanitizer (build-san-thread/)
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
# The threaded paths under ThreadSanitizer (Criterion tests run through
# tests/harness there): the copy pipeline (and its checksums) and the
# gate its processes take
# turns through, the emulated GPU's engines, queues
# and concurrent clients, the CRIU stand-in's thread freezing, the parallel
# restore's thread; and end to end on the emulated GPU (plugin, criu-host,
# workloads and emulator all under TSan): dump and restore of a tree,
# bounded staging, the parallel restore with its turns and faults, render
# nodes, a shared dma-buf. Not e2e_roundtrip: its 2 GiB of BOs under TSan's
# shadow memory exhaust 24 GiB. A TSan report fails its test (exit 66).
if [ "$san" = OFF ] && [ "${THREADS:-1}" != 0 ]; then
  tsan_targets=(harness_selftest test_transfer test_transfer_integrity test_staging_gate test_concurrency test_user_queue test_sdma
                test_plugin_parallel_restore criu-host test_plugin host_target host_verifier amdgpu_plugin
                gpu-workload gpu_verify img-check kfd-emu kfdemu_criu_workload render_verify
                dmabuf-tree dmabuf_verify amdgpu-img)
  tsan_tests='^(harness_selftest|test_transfer|test_transfer_integrity|test_staging_gate|test_plugin_parallel_restore|kfdemu_model[.]test_(concurrency|user_queue|sdma)|host_threads_zombie|host_dump_order'
  tsan_tests+='|e2e_(tree|bounded|parallel|render_roundtrip|render_bounded|dmabuf_holder_root_concurrent|dmabuf_importer_root_fault))$'
  cmake -S . -B build-san-thread -DAMDCR_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-san-thread -j"$(nproc)" --target "${tsan_targets[@]}"
  (cd build-san-thread && ctest --output-on-failure --timeout 600 -j1 --no-tests=error -R "$tsan_tests")
fi
