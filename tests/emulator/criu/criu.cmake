# SPDX-License-Identifier: GPL-2.0-only
# Real CRIU on the emulated GPU (see README.md, "Real CRIU"): the CRIU-side
# adapter plugin, the kfdemu-criu wrapper, the workload and the tests
# emu_realcriu_<version>_* (labels realcriu, emulator), registered for every
# CRIU the realcriu suite (tests/realcriu) offers: the binaries its fixture
# realcriu_criu (test realcriu_build_criu, scripts/build-criu.sh) lists in
# <build>/realcriu/criu-bins.txt.

# Loaded into CRIU, which is not built with sanitizers: never sanitized.
add_library(kfdemu_criu_adapter MODULE ${KFDEMU_DIR}/criu/adapter.cpp)
set_target_properties(kfdemu_criu_adapter PROPERTIES PREFIX "" OUTPUT_NAME kfdemu_criu_adapter)
target_include_directories(kfdemu_criu_adapter PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(kfdemu_criu_adapter PRIVATE ${CMAKE_DL_LIBS})
target_link_options(kfdemu_criu_adapter PRIVATE -Wl,-z,defs)
amdcr_warnings(kfdemu_criu_adapter)
foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
  get_target_property(opts kfdemu_criu_adapter ${prop})
  if(opts)
    list(FILTER opts EXCLUDE REGEX "sanitize")
    set_target_properties(kfdemu_criu_adapter PROPERTIES ${prop} "${opts}")
  endif()
endforeach()

# kfdemu-criu: runs CRIU with the adapter loaded before the plugin under test.
set(KFDEMU_CRIU_WRAPPER ${CMAKE_CURRENT_BINARY_DIR}/kfdemu-criu)
file(GENERATE OUTPUT ${KFDEMU_CRIU_WRAPPER}
  INPUT ${KFDEMU_DIR}/criu/kfdemu-criu.in
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

find_library(KFDEMU_CRIU_HSAKMT_LIB NAMES hsakmt)
find_package(Python3 COMPONENTS Interpreter)
if(NOT KFDEMU_CRIU_HSAKMT_LIB OR NOT Python3_Interpreter_FOUND OR NOT TARGET amdgpu_plugin)
  message(STATUS "kfdemu: no libhsakmt, python3 or plugin target: no emu_realcriu tests")
  return()
endif()

add_executable(kfdemu_criu_workload ${KFDEMU_DIR}/criu/workload.cpp)
target_link_libraries(kfdemu_criu_workload PRIVATE ${KFDEMU_CRIU_HSAKMT_LIB} PkgConfig::LIBDRM_AMDGPU PkgConfig::LIBDRM amdcr_testcommon)
amdcr_warnings(kfdemu_criu_workload)

# The CRIU versions: cmake/RealCriu.cmake (AMDCR_CRIU_VERSIONS).
set(_kfdemu_criu_versions ${AMDCR_CRIU_VERSIONS})
set(_kfdemu_criu_none "${AMDCR_CRIU_NONE_REASON}")
if(NOT _kfdemu_criu_versions)
  add_test(NAME emu_realcriu_none COMMAND sh -c "echo 'NOT RUN: ${_kfdemu_criu_none}'; exit 77")
  set_tests_properties(emu_realcriu_none PROPERTIES LABELS "realcriu;emulator" SKIP_RETURN_CODE 77)
  add_dependencies(kfdemu_criu_workload kfd-emu kfdemu_criu_adapter amdgpu_plugin dmabuf-tree)
  return()
endif()

# emu_realcriu_<short>_<name>: realcriu_test.py SCENARIO on MACHINE under
# the CRIU of <version>, found in criu-bins.txt (the fixture builds it).
function(kfdemu_realcriu_test ver name scenario machine)
  string(REGEX REPLACE "^dev-.*" "dev" short "${ver}")
  set(test emu_realcriu_${short}_${name})
  add_test(NAME ${test}
    COMMAND ${Python3_EXECUTABLE} ${KFDEMU_DIR}/criu/realcriu_test.py
      --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${ver}
      --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
      --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
      --workload $<TARGET_FILE:kfdemu_criu_workload> --machine ${machine}
      --scenario ${scenario} "--sanitized=${AMDCR_SANITIZE}" ${ARGN})
  # RESOURCE_LOCK: libhsakmt's /dev/shm/hsakmt_shared_mem is the host's,
  # one file for every ROCm process; the checks of the restored fd table
  # see another test's process replace it (ctest -j).
  set_tests_properties(${test} PROPERTIES LABELS "realcriu;emulator" SKIP_RETURN_CODE 77 TIMEOUT 300
    FIXTURES_REQUIRED realcriu_criu RESOURCE_LOCK host_hsakmt_shm)
endfunction()
foreach(_ver IN LISTS _kfdemu_criu_versions)
  # Round trips: fds, queues, contents, mappings, the restored process's
  # own GPU work (SDMA, new BOs, events).
  kfdemu_realcriu_test(${_ver} MI100 roundtrip MI100)
  kfdemu_realcriu_test(${_ver} 2xMI210 roundtrip 2xMI210)
  # A process tree: parent and child, each with its own KFD context.
  kfdemu_realcriu_test(${_ver} tree_MI100 tree MI100)
  kfdemu_realcriu_test(${_ver} tree_2xMI210 tree 2xMI210)
  # Restore on another machine at the same root: other gpu_ids, minors and
  # GPU order (kfd-emu --root).
  kfdemu_realcriu_test(${_ver} other_machine_2xMI210 other-machine 2xMI210)
  # A 2-GPU checkpoint onto two GPUs of the 8-GPU XGMI node (a bigger node).
  kfdemu_realcriu_test(${_ver} bigger_machine_2xMI300X other-machine 2xMI300X)
  # Failures: a dump failing on an SDMA fault leaves the process running
  # and unpaused; restores failing on a truncated pages file and on a
  # CRIU_OP RESTORE fault end cleanly.
  kfdemu_realcriu_test(${_ver} dump_fault_MI100 dump-fault MI100)
  kfdemu_realcriu_test(${_ver} restore_truncated_MI100 restore-truncated MI100)
  kfdemu_realcriu_test(${_ver} restore_fault_MI100 restore-fault MI100)
  # An SDMA fault in the parallel restore's copy (CRIU's main process)
  # kills the task before CRIU can resume it; the restore fails.
  kfdemu_realcriu_test(${_ver} restore_copy_fault_2xMI210 restore-copy-fault 2xMI210)
  # Negative: the plugin's UPDATE_VMA_MAP answer is falsified (one page
  # off) before the adapter translates it; the round trip must fail.
  kfdemu_realcriu_test(${_ver} broken_vma_map_MI100 broken-vma-map MI100)
  # Render-node GEM BOs: a process without /dev/kfd, and GEM BOs on
  # libhsakmt's render-node file of a ROCm process.
  kfdemu_realcriu_test(${_ver} render_MI100 render MI100)
  kfdemu_realcriu_test(${_ver} kfd_gem_2xMI210 kfd-gem 2xMI210)
  # ... at GPU VAs above the hole (as Mesa maps), which the kernel reports
  # masked to 48 bits: mapped again at their canonical VAs.
  kfdemu_realcriu_test(${_ver} kfd_gem_high_va_MI100 kfd-gem-high-va MI100)
  # The same on a kernel that disables DRM_IOCTL_GEM_CHANGE_HANDLE again
  # (Linux 6.18.36, 7.0 stable, mainline since June 2026: EINVAL for every
  # call), with gaps in the GEM handles (KFDEMU_WORKLOAD_GEM_GAPS: BOs made
  # and freed between the workload's, so a restore making the BOs one after
  # the other would not get their handles): the restore places BOs at
  # their handles without the ioctl (own BOs, and shared ones, created or
  # imported through PRIME, in the dma-buf tree).
  set(_no_change_handle --emu-fault DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL)
  kfdemu_realcriu_test(${_ver} render_no_change_handle_MI100 render MI100 ${_no_change_handle})
  kfdemu_realcriu_test(${_ver} kfd_gem_no_change_handle_2xMI210 kfd-gem 2xMI210 ${_no_change_handle})
  kfdemu_realcriu_test(${_ver} dmabuf_tree_no_change_handle_MI100 dmabuf-holder-root MI100
    --workload $<TARGET_FILE:dmabuf-tree> ${_no_change_handle})
  string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
  set_tests_properties(emu_realcriu_${_short}_render_no_change_handle_MI100
    emu_realcriu_${_short}_kfd_gem_no_change_handle_2xMI210
    emu_realcriu_${_short}_dmabuf_tree_no_change_handle_MI100 PROPERTIES ENVIRONMENT KFDEMU_WORKLOAD_GEM_GAPS=1)
  # A child forked after the GPU state holds the /dev/kfd and render files
  # without using them (a DataLoader worker): restored as shared files, the
  # KFD process still the parent's.
  kfdemu_realcriu_test(${_ver} fork_holder_2xMI210 fork-holder 2xMI210)
  # The reverse: a child's /dev/kfd file sent to its parent (SCM_RIGHTS),
  # which holds it. CRIU would restore it in the parent, where KFD cannot
  # recreate the child's state: the dump is refused, both run on.
  kfdemu_realcriu_test(${_ver} scm_holder_MI100 scm-holder MI100)
  # One GEM BO shared by three processes through a dma-buf (exporter,
  # importer, holder of the bare dma-buf: tests/e2e/dmabuf_tree.cpp), the
  # holder dumped first.
  kfdemu_realcriu_test(${_ver} dmabuf_tree_MI100 dmabuf-holder-root MI100 --workload $<TARGET_FILE:dmabuf-tree>)
  # criu --stream through the stand-in image streamer (tests/streamer),
  # with KFD_MAX_BUFFER_SIZE below the largest BO; two GPUs, so two pages
  # files stream in parallel, and render-node GEM BOs (the kfd-gem
  # workload); a truncated streamed pages file must fail the restore.
  kfdemu_realcriu_test(${_ver} stream_2xMI210 stream 2xMI210
    --streamer ${PROJECT_SOURCE_DIR}/tests/streamer/streamer.py)
  kfdemu_realcriu_test(${_ver} stream_truncated_MI100 stream-truncated MI100
    --streamer ${PROJECT_SOURCE_DIR}/tests/streamer/streamer.py)
  # What a CRIU user sees at CRIU's default log level: the configuration
  # and one summary line per dump and restore, agreeing with the images;
  # and a hung SDMA engine failing the dump after KFD_SDMA_TIMEOUT.
  kfdemu_realcriu_test(${_ver} log_default_2xMI210 log-default 2xMI210
    --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  kfdemu_realcriu_test(${_ver} sdma_timeout_MI100 sdma-timeout MI100)
  # A refused restore on the 8-GPU node: one line per reason, listing the 8 GPUs.
  kfdemu_realcriu_test(${_ver} refused_MI100_on_8xMI300X refused-8xMI300X MI100)
  # Files of two dumps of one program mixed, swapped, deleted or added:
  # refused before any GPU state changes (or restored exactly), and
  # amdgpu-img verify agrees.
  kfdemu_realcriu_test(${_ver} mixed_MI100 mixed MI100 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  kfdemu_realcriu_test(${_ver} mixed_2xMI210 mixed 2xMI210 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  # CRIU killed half-way (slow SDMA, a 256 MiB VRAM BO per GPU): the
  # plugin's guardian resumes the paused queues and removes the temporary
  # files of a killed dump (SIGKILL, SIGTERM, coreutils timeout), and kills
  # the partly restored task of a killed restore; the process's next SDMA
  # user-queue copy and event wait complete; no guardian is left.
  foreach(_m MI100 2xMI210)
    kfdemu_realcriu_test(${_ver} dump_killed_${_m} dump-killed ${_m})
    kfdemu_realcriu_test(${_ver} restore_killed_${_m} restore-killed ${_m})
  endforeach()
  foreach(_m MI100 2xMI210)
    kfdemu_realcriu_test(${_ver} dump_termed_${_m} dump-termed ${_m})
    kfdemu_realcriu_test(${_ver} dump_timeout_${_m} dump-timeout ${_m})
  endforeach()
  # A parent and a child: killed during the child's copy, after the
  # parent's (criu-dev: the parent still paused, after its copy).
  kfdemu_realcriu_test(${_ver} dump_killed_tree_2xMI210 dump-killed-tree 2xMI210)
  # The other points CRIU can be killed at, each held there by a `stall`
  # fault on CRIU's next KFD call (it never happens): a dump after the
  # pause, before any copy (CHECKPOINT), and after the copy and the KFD
  # image, before the unpause (UNPAUSE); a restore after its copy, before
  # RESUME. And a `stall-after` on the dump's PROCESS_INFO (it pauses, its
  # answer never reaches the plugin): the guardian knows the file before
  # its pause; and a plain `stall` there (nothing paused): the guardian's
  # UNPAUSE finds nothing to resume and says so. And a dump with no KFD (a render node's GEM BOs) killed during
  # its copy: the guardian removes its temporary file.
  foreach(_m MI100 2xMI210)
    kfdemu_realcriu_test(${_ver} dump_killed_info_${_m} dump-killed-info ${_m})
    kfdemu_realcriu_test(${_ver} dump_killed_before_info_${_m} dump-killed-before-info ${_m})
    kfdemu_realcriu_test(${_ver} dump_killed_paused_${_m} dump-killed-paused ${_m})
    kfdemu_realcriu_test(${_ver} dump_killed_copied_${_m} dump-killed-copied ${_m})
    kfdemu_realcriu_test(${_ver} restore_killed_copied_${_m} restore-killed-copied ${_m})
  endforeach()
  # ... and killed there with a forked child holding the /dev/kfd file
  # unused (fork-holder): of the two processes announced, the guardian
  # resumes the owner; the child's own checks pass too.
  kfdemu_realcriu_test(${_ver} dump_killed_info_holder_MI100 dump-killed-info-holder MI100)
  # ... and with the owner's parent holding its file (scm-holder), first in
  # /proc order: KFD refuses the guardian's UNPAUSE through it (EBADF), the
  # guardian tries the owner next and resumes it.
  kfdemu_realcriu_test(${_ver} dump_killed_info_scm_holder_MI100 dump-killed-info-scm-holder MI100)
  kfdemu_realcriu_test(${_ver} render_killed_MI100 render-killed MI100)
  # Interop with upstream's plugin built from the same CRIU sources
  # (scripts/build-criu.sh's upstream-plugins.txt): upstream's dumps and
  # ours restores, and the reverse; every BO on the GPU it was dumped from.
  foreach(_way upstream-dump upstream-restore)
    string(REPLACE "-" "_" _w ${_way})
    set(_up --interop ${_way} --upstream-list ${CMAKE_BINARY_DIR}/realcriu/upstream-plugins.txt)
    kfdemu_realcriu_test(${_ver} interop_${_w}_MI100 roundtrip MI100 ${_up})
    kfdemu_realcriu_test(${_ver} interop_${_w}_2xMI210 roundtrip 2xMI210 ${_up})
    kfdemu_realcriu_test(${_ver} interop_${_w}_tree_2xMI210 tree 2xMI210 ${_up})
  endforeach()
  # Queue state set after creation (libhsakmt): a CU-masked AQL queue with
  # the GWS, an inactive SDMA queue with a packet pending.
  kfdemu_realcriu_test(${_ver} queue_state_MI100 queue-state MI100)
  kfdemu_realcriu_test(${_ver} queue_state_2xMI210 queue-state 2xMI210)
  # A CP (PM4) compute queue paused with packets pending, which it runs
  # after the restore.
  kfdemu_realcriu_test(${_ver} cp_queue_MI100 cp-queue MI100)
  kfdemu_realcriu_test(${_ver} cp_queue_2xMI210 cp-queue 2xMI210)
  # A GEM BO with amdgpu metadata (flags, tiling, 37 bytes of data) and its
  # dma-buf held open: the metadata is in the images and, restored, the
  # same through libdrm and KFD's GET_DMABUF_INFO.
  kfdemu_realcriu_test(${_ver} dmabuf_metadata_MI100 gem-metadata MI100 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  kfdemu_realcriu_test(${_ver} dmabuf_metadata_2xMI210 gem-metadata 2xMI210 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  # SVM ranges made through libhsakmt, in system memory and in VRAM.
  kfdemu_realcriu_test(${_ver} svm_MI100 svm MI100)
  kfdemu_realcriu_test(${_ver} svm_2xMI210 svm 2xMI210)
  # Incremental checkpoints: three periodic dumps --leave-running, each
  # after the first against the previous one (--prev-images-dir), while the
  # process rewrites a MiB of each GPU's VRAM through the GPU between them
  # and checks its GPUs after each; then a restore from the chain of three.
  # amdgpu-img verify follows the chain, flatten makes it one checkpoint.
  kfdemu_realcriu_test(${_ver} periodic_MI100 periodic MI100 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  kfdemu_realcriu_test(${_ver} periodic_2xMI210 periodic 2xMI210 --amdgpu-img $<TARGET_FILE:amdgpu-img>)
  # The chain flattened and restored by upstream's plugin (one GPU: criu-dev's
  # upstream parallel restore of one process on 2+ GPUs leaves BOs unfilled,
  # the known upstream defect the interop tests name).
  kfdemu_realcriu_test(${_ver} interop_upstream_restore_periodic_MI100 periodic MI100
    --amdgpu-img $<TARGET_FILE:amdgpu-img>
    --interop upstream-restore --upstream-list ${CMAKE_BINARY_DIR}/realcriu/upstream-plugins.txt)
  # Pre-copy: criu pre-dump with our plugin (no KFD call, nothing paused,
  # no file of ours), then the GPU memory pre-copied by a dump
  # --leave-running and the final dump writing only the changed MiB; the
  # restore from it. pre_copy needs soft-dirty (--track-mem): NOT RUN
  # without. pre_copy_untracked runs where the kernel has none: the
  # pre-dump must stop at CRIU's own soft-dirty check and nowhere else, the
  # rest without --track-mem; NOT RUN where pre_copy runs. One of the two
  # runs on any kernel.
  kfdemu_realcriu_test(${_ver} pre_copy_MI100 pre-copy MI100)
  kfdemu_realcriu_test(${_ver} pre_copy_untracked_MI100 pre-copy-untracked MI100)
  # A restore onto GPUs whose VRAM another process's GEM BOs fill: the
  # restore's KFD allocations evict them to GTT.
  kfdemu_realcriu_test(${_ver} evicting_restore_MI100 evicting-restore MI100)
  kfdemu_realcriu_test(${_ver} evicting_restore_2xMI210 evicting-restore 2xMI210)
  # A dump while another process keeps evicting the process's BOs.
  kfdemu_realcriu_test(${_ver} evicted_dump_MI100 evicted-dump MI100)
  kfdemu_realcriu_test(${_ver} evicted_dump_2xMI210 evicted-dump 2xMI210)
endforeach()
# emu_realcriu_<short>_parity_<name>: verify_parity_test.py SCENARIO (a
# checkpoint's GPU files bound to CRIU's images of their dump; amdgpu-img
# verify and the restore agree on each case), labelled as the others.
foreach(_ver IN LISTS _kfdemu_criu_versions)
  string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
  set(_test emu_realcriu_${_short}_parity_earlier_MI100)
  add_test(NAME ${_test}
    COMMAND ${Python3_EXECUTABLE} ${KFDEMU_DIR}/criu/verify_parity_test.py
      --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
      --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
      --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
      --workload $<TARGET_FILE:kfdemu_criu_workload> --amdgpu-img $<TARGET_FILE:amdgpu-img>
      --machine MI100 --scenario earlier "--sanitized=${AMDCR_SANITIZE}")
  set_tests_properties(${_test} PROPERTIES LABELS "realcriu;emulator" SKIP_RETURN_CODE 77 TIMEOUT 300
    FIXTURES_REQUIRED realcriu_criu RESOURCE_LOCK host_hsakmt_shm)
endforeach()
add_dependencies(kfdemu_criu_workload kfd-emu kfdemu_criu_adapter amdgpu_plugin dmabuf-tree amdgpu-img)
