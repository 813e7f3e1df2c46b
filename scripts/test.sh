#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds everything and runs every test.
#   scripts/test.sh            normal build (build/) and its tests, then each
#                              libFuzzer target for 5 s (build-fuzz/,
#                              scripts/fuzz.sh) and the threaded paths under
#                              ThreadSanitizer (build-san-thread/, only their
#                              targets; THREADS=0 skips this step); those two
#                              builds compile while the tests run
#   SANITIZE=ON scripts/test.sh       everything under ASan+UBSan (build-san-ON/)
#   SANITIZE=thread scripts/test.sh   everything under ThreadSanitizer (build-san-thread/)
#   CTEST_PARALLEL_LEVEL=N     tests run at once (default: one more than the
#                              CPUs, see below)
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, seconds since this script began: where CI's time goes.
step() { echo "test.sh: +${SECONDS}s $*"; }
step "installing the dependencies"
bash scripts/install-deps.sh
san=${SANITIZE:-OFF}
dir=build
[ "$san" = OFF ] || dir=build-san-$san
# Every build here with line tables only (CMakeLists.txt: AMDCR_DEBUG_LINES_ONLY)
# and as a unity build (CMake's CMAKE_UNITY_BUILD: each target's sources
# compiled a batch to one compiler run, which parses the common headers
# once; 40-45% less compiler CPU time on the libraries); scripts/fuzz.sh
# takes both from the environment.
export AMDCR_DEBUG_LINES_ONLY=ON CMAKE_UNITY_BUILD=ON
step "building in $dir"
# The tests' Python: Debian's (installed above, with the modules the tests
# import), named directly: a python3 found first on PATH may be a version
# manager's shim or carry start-up files, which every one of the several
# hundred interpreters the tests start would pay for (tests/common).
py=()
[ ! -x /usr/bin/python3 ] || py=(-DPython3_EXECUTABLE=/usr/bin/python3)
cmake -S . -B "$dir" -DAMDCR_SANITIZE="$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${py[@]}" \
  -DAMDCR_DEBUG_LINES_ONLY="$AMDCR_DEBUG_LINES_ONLY" -DCMAKE_UNITY_BUILD="$CMAKE_UNITY_BUILD" >/dev/null
cmake --build "$dir" -j"$(nproc)"
# The sanitizer builds (below: the libFuzzer targets, the ThreadSanitizer
# targets) are compiled while the tests run, at the lowest CPU and I/O
# priority (nice 19, ionice idle): most tests wait (see below), so the
# compilers take the CPU time the tests leave; a test that wants a CPU
# gets it first. Their output goes to $dir/sanitizer-builds.log; a failed
# build fails this script after the tests.
tsan_targets=(tsan_criterion_selftest test_transfer test_transfer_integrity test_staging_gate test_concurrency test_user_queue test_sdma test_aql_queue test_aql_cwsr
              test_plugin_parallel_restore criu-host test_plugin host_target host_verifier amdgpu_plugin)
# What the end-to-end tests under TSan run beside the plugin and criu-host
# is taken from the main build, uninstrumented, at the paths the tests look
# for it (--bin-dir build-san-thread): the emulator (kfd-emu: its daemon
# holds the device model, which is under TSan in the kfdemu_model tests
# above), the workloads, the verifiers the restored tasks load, the image
# checkers.
tsan_from_main=(tests/emulator/kfd-emu tests/emulator/kfdemu_criu_workload tests/e2e/gpu-workload
                tests/e2e/libgpu_verify.so tests/e2e/librender_verify.so tests/e2e/dmabuf-tree
                tests/e2e/libdmabuf_verify.so tests/e2e/img-check amdgpu-img)
# At -O1 (AMDCR_OPTIMIZE), the least ThreadSanitizer's documentation
# advises for usable speed: 30% less compile than at -O2 (src/image's first
# unity file 14.1 against 20.0 CPU-s); the build was about 300 CPU-s.
tsan_build() {
  cmake -S . -B build-san-thread -DAMDCR_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAMDCR_OPTIMIZE=-O1 "${py[@]}" \
    -DAMDCR_DEBUG_LINES_ONLY="$AMDCR_DEBUG_LINES_ONLY" -DCMAKE_UNITY_BUILD="$CMAKE_UNITY_BUILD" \
    -DAMDCR_BUILD_GROUP="$(IFS=';' && echo "${tsan_targets[*]}")" >/dev/null
  cmake --build build-san-thread -j"$(nproc)" --target build_group # one parallel build (CMakeLists.txt)
  local f
  for f in "${tsan_from_main[@]}"; do
    mkdir -p "build-san-thread/$(dirname "$f")"
    cp -f "$dir/$f" "build-san-thread/$f"
  done
}
threads=0
[ "$san" != OFF ] || [ "${THREADS:-1}" = 0 ] || threads=1
# Seconds each libFuzzer target fuzzes after its seeds (every seed still
# runs first, tests/fuzz/run.sh): 9 targets, one per CPU, so each second
# here is about 5 s of CI on 2 CPUs (at 15 s each the step took 95 s).
# The long runs are scripts/fuzz.sh's default 600 s.
fuzz_seconds=5
# The fuzz build without optimization (scripts/fuzz.sh's FUZZ_OPT): half
# its compile time (187 against 398 CPU-s from scratch; the main build is
# about 750); a few seconds of fuzzing need no fast inputs, the seeds run
# all the same.
export FUZZ_OPT=-O0
bg=
if [ "$san" = OFF ]; then
  set -m # its own process group, which the trap ends if the tests fail
  (
    renice -n 19 -p "$BASHPID" >/dev/null || true
    ionice -c 3 -p "$BASHPID" || true
    FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh "$fuzz_seconds"
    [ "$threads" = 0 ] || tsan_build
  ) >"$dir/sanitizer-builds.log" 2>&1 </dev/null &
  bg=$!
  set +m
  trap '[ -z "$bg" ] || kill -- -"$bg" 2>/dev/null || true' EXIT
fi
# In parallel: one more test than CPUs. Most tests spend their time
# waiting (on the emulated GPU's rate-limited SDMA engines, on polls of a
# workload's files, on CRIU's freezing), so one more keeps the CPUs busy;
# tests that hold a shared resource say so (RESOURCE_LOCK), CPU-heavy ones
# take more slots (PROCESSORS: the CRIU builds take every CPU). Each test
# has its own work, image and kfd-emu root directories (mkdtemp), the
# real-CRIU ones their own /dev/shm.
jobs=${CTEST_PARALLEL_LEVEL:-$(($(nproc) + 1))}
step "running the tests in $dir (ctest -j$jobs)"
(cd "$dir" && ctest --output-on-failure --timeout 600 -j"$jobs")
[ "$san" = OFF ] || exit 0
step "waiting for the sanitizer builds"
if ! wait "$bg"; then
  bg=
  tail -n 60 "$dir/sanitizer-builds.log"
  echo "test.sh: the sanitizer builds failed (log: $dir/sanitizer-builds.log)" >&2
  exit 1
fi
bg=
# The libFuzzer targets (tests/fuzz): their seeds, then $fuzz_seconds s each, in a
# clang ASan+UBSan build of only those targets.
step "fuzzing"
bash scripts/fuzz.sh "$fuzz_seconds"
# The threaded paths under ThreadSanitizer (Criterion tests run through
# tests/tsan_criterion there): the copy pipeline (and its checksums) and the
# gate its processes take
# turns through, the emulated GPU's engines, queues (AQL ones too)
# and concurrent clients, the CRIU stand-in's thread freezing, the parallel
# restore's thread; and end to end on the emulated GPU (plugin and
# criu-host under TSan; emulator and workloads from the main build, see
# tsan_from_main): dump and restore of a tree,
# bounded staging, the parallel restore with its turns and faults, render
# nodes, a shared dma-buf. Not e2e_roundtrip: when its largest BOs were
# 1 GiB, TSan's shadow memory of them exhausted 24 GiB. A TSan report
# fails its test (exit 66).
if [ "$threads" = 1 ]; then
  tsan_tests='^(tsan_criterion_selftest|test_transfer|test_transfer_integrity|test_staging_gate|test_plugin_parallel_restore|kfdemu_model[.]test_(concurrency|user_queue|sdma|aql_queue|aql_cwsr)|host_threads_zombie|host_dump_order'
  tsan_tests+='|e2e_(tree|bounded|parallel|render_roundtrip|render_bounded|dmabuf_holder_root_concurrent|dmabuf_importer_root_fault))$'
  tsan_build >/dev/null # built above; this checks it is up to date
  # One per CPU: TSan's shadow memory makes each instrumented process
  # several times its size (above: e2e_roundtrip with 1 GiB BOs exhausted 24 GiB);
  # the two largest of these, e2e_bounded and e2e_parallel, side by side
  # took 3.1 GB of MemAvailable at their peak when their emulator and
  # workloads were instrumented too (now they come from the main build).
  step "the threaded tests under ThreadSanitizer"
  (cd build-san-thread && ctest --output-on-failure --timeout 600 -j"$(nproc)" --no-tests=error -R "$tsan_tests")
fi
step "done"
