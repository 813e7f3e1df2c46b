# SPDX-License-Identifier: GPL-2.0-only
# Streamed checkpoints through the real criu-image-streamer
# (streamer_test.py: capture | zstd -1 | TCP between two network namespaces
# | zstd -d | serve), tests emu_stream_<version>_* (labels realcriu,
# emulator, streamer), for every CRIU version criu.cmake registers. The
# streamer is found at run time ($AMDCR_STREAMER_BIN, or
# criu-image-streamer on PATH); without it each test is NOT RUN, naming it.
if(NOT TARGET kfdemu_criu_workload OR NOT AMDCR_CRIU_VERSIONS)
  return()
endif()

function(kfdemu_stream_test ver name scenario machine)
  string(REGEX REPLACE "^dev-.*" "dev" short "${ver}")
  set(test emu_stream_${short}_${name})
  add_test(NAME ${test}
    COMMAND ${Python3_EXECUTABLE} ${KFDEMU_DIR}/criu/streamer_test.py
      --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${ver}
      --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
      --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
      --workload $<TARGET_FILE:kfdemu_criu_workload> --machine ${machine}
      --scenario ${scenario} "--sanitized=${AMDCR_SANITIZE}" ${ARGN})
  # The locks of criu.cmake's tests (libhsakmt's shared memory file); the
  # two network namespaces of a test are named after its pid.
  set_tests_properties(${test} PROPERTIES LABELS "realcriu;emulator;streamer" SKIP_RETURN_CODE 77 TIMEOUT 300
    FIXTURES_REQUIRED realcriu_criu)
endfunction()

foreach(_ver IN LISTS AMDCR_CRIU_VERSIONS)
  # A live migration without disk: dumped on one machine, restored on
  # another from what came over the socket.
  kfdemu_stream_test(${_ver} migrate_MI100 migrate MI100)
  # The same with a receiver that stalls for 3 s (2 GPUs, a bounded dump).
  kfdemu_stream_test(${_ver} migrate_stall_2xMI210 migrate-stall 2xMI210)
  # One byte of a pages file changed on the way: the restore fails its
  # checksums, naming the file; no task left.
  kfdemu_stream_test(${_ver} checksum_mismatch_MI100 checksum-mismatch MI100)
  # The receiver dies during the dump: a clear error, the process runs on.
  kfdemu_stream_test(${_ver} reader_dies_MI100 reader-dies MI100)
  # An incremental streamed dump (a parent link): CRIU aborts it; the
  # process runs on.
  kfdemu_stream_test(${_ver} parent_aborts_MI100 parent-aborts MI100)
  # Shared dma-buf BOs are refused with --stream; the tree runs on.
  kfdemu_stream_test(${_ver} dmabuf_refused_MI100 dmabuf-refused MI100 --workload $<TARGET_FILE:dmabuf-tree>)
endforeach()
