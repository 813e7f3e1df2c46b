# SPDX-License-Identifier: GPL-2.0-only
# The emulator's own tests. Every test binary runs under kfd-emu:
#   kfdemu_add_test(<name> <target> [LAUNCHER args..] [ARGS args..])
# runs `kfd-emu <LAUNCHER..> -- <target> <ARGS..>`.

set(KFDEMU_TESTS ${KFDEMU_DIR}/tests)

function(kfdemu_add_test name target)
  cmake_parse_arguments(T "" "" "LAUNCHER;ARGS" ${ARGN})
  add_test(NAME ${name}
    COMMAND $<TARGET_FILE:kfd-emu> ${T_LAUNCHER} -- $<TARGET_FILE:${target}> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS emulator)
endfunction()

function(kfdemu_test_executable target)
  add_executable(${target} ${ARGN})
  target_link_libraries(${target} PRIVATE kfdemu_profiles Threads::Threads amdcr_testcommon)
  target_compile_definitions(${target} PRIVATE KFDEMU_PROFILE_DIR="${KFDEMU_DIR}/profiles")
  amdcr_warnings(${target})
  amdcr_test_driver(${target})
  add_dependencies(${target} kfd-emu)
endfunction()

# --- profiles, machine files, overrides, fault specs (no emulator) -----------
kfdemu_test_executable(kfdemu_test_profiles ${KFDEMU_TESTS}/test_profiles.cpp)
target_compile_definitions(kfdemu_test_profiles PRIVATE KFDEMU_TESTS_DIR="${KFDEMU_TESTS}")
add_test(NAME emu_profiles COMMAND kfdemu_test_profiles)
set_tests_properties(emu_profiles PROPERTIES LABELS emulator)

# --- transport: sysfs, device nodes, fd identity, release ---------------------
kfdemu_test_executable(kfdemu_test_transport ${KFDEMU_TESTS}/test_transport.cpp)
foreach(m MI100 2xMI210 8xMI300X none)
  kfdemu_add_test(emu_transport_${m} kfdemu_test_transport
    LAUNCHER --machine ${m} ARGS --machine ${m})
endforeach()
kfdemu_add_test(emu_transport_remapped kfdemu_test_transport
  LAUNCHER --machine 2xMI210 --gpu-ids 0x1a2b,0x3c4d --minors 130,131
  ARGS --machine 2xMI210 --gpu-ids 0x1a2b,0x3c4d --minors 130,131)
kfdemu_add_test(emu_transport_custom kfdemu_test_transport
  LAUNCHER --machine ${KFDEMU_TESTS}/custom.machine ARGS --machine ${KFDEMU_TESTS}/custom.machine)
kfdemu_add_test(emu_transport_unreadable kfdemu_test_transport
  LAUNCHER --machine 2xMI210 --unreadable /sys/class/kfd/kfd/topology/nodes/2
  ARGS --machine 2xMI210
       --expect-unreadable /sys/devices/virtual/kfd/kfd/topology/nodes/2/properties)

# An fd that names another file between the shim's fstat (fd_key) and its
# request (a thread frozen there by a CRIU dump, restored): the call goes to
# the fd's file now. fstat_hook.cpp, preloaded after the shim, makes it so.
add_library(kfdemu_test_fstat_hook SHARED ${KFDEMU_TESTS}/fstat_hook.cpp)
target_link_libraries(kfdemu_test_fstat_hook PRIVATE ${CMAKE_DL_LIBS})
amdcr_warnings(kfdemu_test_fstat_hook)
add_dependencies(kfdemu_test_transport kfdemu_test_fstat_hook)
kfdemu_add_test(emu_transport_rekey_MI100 kfdemu_test_transport
  LAUNCHER --machine MI100
  ARGS --machine MI100 --fstat-hook $<TARGET_FILE:kfdemu_test_fstat_hook>)

# The same program built with ASan+UBSan (unless the whole build already is):
# sanitized programs must run under the shim.
if(NOT AMDCR_SANITIZE)
  kfdemu_test_executable(kfdemu_test_transport_asan ${KFDEMU_TESTS}/test_transport.cpp)
  target_compile_options(kfdemu_test_transport_asan PRIVATE
    -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(kfdemu_test_transport_asan PRIVATE -fsanitize=address,undefined)
  kfdemu_add_test(emu_transport_asan kfdemu_test_transport_asan
    LAUNCHER --machine 2xMI210 ARGS --machine 2xMI210)
endif()

# --- CPUs and NUMA nodes: generated from the profile, self-consistent ---------
kfdemu_test_executable(kfdemu_test_cpus ${KFDEMU_TESTS}/test_cpus.cpp)
foreach(m MI100 8xMI300X)
  kfdemu_add_test(emu_cpus_${m} kfdemu_test_cpus LAUNCHER --machine ${m} ARGS --machine ${m})
endforeach()
kfdemu_add_test(emu_cpus_custom kfdemu_test_cpus
  LAUNCHER --machine ${KFDEMU_TESTS}/custom.machine ARGS --machine ${KFDEMU_TESTS}/custom.machine)

# --- (a) libhsakmt 5.2.3, unmodified -------------------------------------------
# Linked by name: the pkg-config file adds an include directory that Debian
# does not ship.
find_library(KFDEMU_HSAKMT_LIB NAMES hsakmt)
if(KFDEMU_HSAKMT_LIB)
  kfdemu_test_executable(kfdemu_test_hsakmt ${KFDEMU_TESTS}/test_hsakmt.cpp)
  target_link_libraries(kfdemu_test_hsakmt PRIVATE ${KFDEMU_HSAKMT_LIB})
  foreach(m MI100 2xMI210 8xMI300X none)
    kfdemu_add_test(emu_hsakmt_${m} kfdemu_test_hsakmt LAUNCHER --machine ${m} ARGS --machine ${m})
  endforeach()
  kfdemu_add_test(emu_hsakmt_custom kfdemu_test_hsakmt
    LAUNCHER --machine ${KFDEMU_TESTS}/custom.machine ARGS --machine ${KFDEMU_TESTS}/custom.machine)
  kfdemu_add_test(emu_hsakmt_remapped kfdemu_test_hsakmt
    LAUNCHER --machine 2xMI210 --gpu-ids 0x1a2b,0x3c4d --minors 130,131
    ARGS --machine 2xMI210 --gpu-ids 0x1a2b,0x3c4d --minors 130,131)
  # The same client where the host's /sys/devices/system/cpu/cpu<N> hold
  # nothing but topology/ (minimal VM kernels): NOT RUN (77) only where a
  # private mount namespace is not permitted.
  foreach(m MI100 8xMI300X)
    add_test(NAME emu_hsakmt_bare_sys_${m}
      COMMAND ${KFDEMU_TESTS}/bare_sys.sh $<TARGET_FILE:kfd-emu> --machine ${m}
              -- $<TARGET_FILE:kfdemu_test_hsakmt> --machine ${m})
    set_tests_properties(emu_hsakmt_bare_sys_${m} PROPERTIES
      TIMEOUT 120 LABELS emulator SKIP_RETURN_CODE 77)
  endforeach()
  # SVM ranges reached by SDMA queues (XNACK off and on, migration, SMI
  # events, partial unmap, two GPUs, eviction), on 256 MiB of VRAM so that
  # the eviction case needs little memory.
  kfdemu_test_executable(kfdemu_test_svm ${KFDEMU_TESTS}/test_svm.cpp)
  target_link_libraries(kfdemu_test_svm PRIVATE ${KFDEMU_HSAKMT_LIB} amdcr_kernel_headers
    PkgConfig::LIBDRM_AMDGPU PkgConfig::LIBDRM)
  foreach(m MI100 2xMI210)
    kfdemu_add_test(emu_svm_${m} kfdemu_test_svm
      LAUNCHER --machine ${m} --vram 256M ARGS --machine ${m} --vram 256M)
  endforeach()
endif()

# --- (b) libdrm_amdgpu 2.4.114: init, BOs, dma-buf, SDMA through CS ------------
kfdemu_test_executable(kfdemu_test_libdrm ${KFDEMU_TESTS}/test_libdrm.cpp)
target_link_libraries(kfdemu_test_libdrm PRIVATE PkgConfig::LIBDRM_AMDGPU PkgConfig::LIBDRM)
kfdemu_add_test(emu_libdrm_custom kfdemu_test_libdrm
  LAUNCHER --machine ${KFDEMU_TESTS}/custom.machine ARGS --machine ${KFDEMU_TESTS}/custom.machine)
foreach(m MI100 2xMI210 8xMI300X)
  kfdemu_add_test(emu_libdrm_${m} kfdemu_test_libdrm LAUNCHER --machine ${m} ARGS --machine ${m})
endforeach()

# --- (b2) render-node GEM ioctls for checkpointing BOs, via libdrm + drmIoctl --
kfdemu_test_executable(kfdemu_test_gem ${KFDEMU_TESTS}/test_gem.cpp)
target_link_libraries(kfdemu_test_gem PRIVATE PkgConfig::LIBDRM_AMDGPU PkgConfig::LIBDRM)
foreach(m MI100 2xMI210)
  kfdemu_add_test(emu_gem_${m} kfdemu_test_gem LAUNCHER --machine ${m} ARGS --machine ${m})
endforeach()

# --- (c) CRIU_OP round trip at the ioctl level, restore on "another machine" --
kfdemu_test_executable(kfdemu_test_criu_op ${KFDEMU_TESTS}/test_criu_op.cpp)
target_compile_definitions(kfdemu_test_criu_op PRIVATE KFDEMU_LAUNCHER="$<TARGET_FILE:kfd-emu>")
target_link_libraries(kfdemu_test_criu_op PRIVATE amdcr_kernel_headers)
kfdemu_add_test(emu_criu_op_2xMI210 kfdemu_test_criu_op
  LAUNCHER --machine 2xMI210
  ARGS dump --machine 2xMI210 -- --machine 2xMI210 --gpu-ids 0x1a2b,0x3c4d --minors 130,131)
kfdemu_add_test(emu_criu_op_MI100 kfdemu_test_criu_op
  LAUNCHER --machine MI100
  ARGS dump --machine MI100 -- --machine MI100 --gpu-ids 0x7777 --minors 140)

# --- (d) argument checks through the real ioctl path --------------------------
kfdemu_test_executable(kfdemu_test_errors ${KFDEMU_TESTS}/test_errors.cpp)
target_link_libraries(kfdemu_test_errors PRIVATE amdcr_kernel_headers PkgConfig::LIBDRM)
foreach(m MI100 2xMI210)
  kfdemu_add_test(emu_errors_${m} kfdemu_test_errors LAUNCHER --machine ${m} ARGS --machine ${m})
endforeach()

# --- hermeticity: writes to the emulated /sys stay in the root ---------------
# Under a read-only bind of the host's /sys (ro_sys.sh): a write that reached
# the host would fail with EROFS. NOT RUN (77) only where a private mount
# namespace is not permitted.
kfdemu_test_executable(kfdemu_test_sysfs_write ${KFDEMU_TESTS}/test_sysfs_write.cpp)
foreach(m MI100 2xMI210)
  add_test(NAME emu_sysfs_write_${m}
    COMMAND ${KFDEMU_TESTS}/ro_sys.sh $<TARGET_FILE:kfd-emu> --machine ${m}
            -- $<TARGET_FILE:kfdemu_test_sysfs_write> --machine ${m})
  set_tests_properties(emu_sysfs_write_${m} PROPERTIES TIMEOUT 120 LABELS emulator SKIP_RETURN_CODE 77)
endforeach()
# The same with the shim under ASan and UBSan (kfd-emu-asan, transport.cmake)
# and the test program built with them too (its buffers get redzones): the
# shim's write interposer on every path the test takes, sh and bash
# included. Leaks are not looked for: the uninstrumented shells' would count.
if(TARGET kfd-emu-asan)
  kfdemu_test_executable(kfdemu_test_sysfs_write_asan ${KFDEMU_TESTS}/test_sysfs_write.cpp)
  target_compile_options(kfdemu_test_sysfs_write_asan PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(kfdemu_test_sysfs_write_asan PRIVATE -fsanitize=address,undefined)
  add_dependencies(kfdemu_test_sysfs_write_asan kfd-emu-asan)
  add_test(NAME emu_sysfs_write_asan_MI100
    COMMAND ${KFDEMU_TESTS}/ro_sys.sh $<TARGET_FILE:kfd-emu-asan> --machine MI100
            -- $<TARGET_FILE:kfdemu_test_sysfs_write_asan> --machine MI100)
  set_tests_properties(emu_sysfs_write_asan_MI100 PROPERTIES TIMEOUT 180 LABELS "emulator;asan"
    SKIP_RETURN_CODE 77 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()

# --- the command line: kfd-emu ctl, kfd-emu machine, exit status --------------
add_test(NAME emu_cli_ctl
  COMMAND $<TARGET_FILE:kfd-emu> --machine 2xMI210 -- sh -c
    "test -e /dev/kfd && $<TARGET_FILE:kfd-emu> ctl transport && $<TARGET_FILE:kfd-emu> ctl vmas $$$$ && $<TARGET_FILE:kfd-emu> ctl processes")
set_tests_properties(emu_cli_ctl PROPERTIES LABELS emulator
  PASS_REGULAR_EXPRESSION "\"connections\":[0-9]+.*\"vmas\":\\[\\].*\"processes\"")
add_test(NAME emu_cli_machine COMMAND $<TARGET_FILE:kfd-emu> machine --machine 8xMI300X --minors 140)
set_tests_properties(emu_cli_machine PROPERTIES LABELS emulator
  PASS_REGULAR_EXPRESSION "node 2: gpu aqua_vanjaram gpu_id [0-9]+ renderD140 card12")
add_test(NAME emu_cli_exit_status COMMAND $<TARGET_FILE:kfd-emu> --machine none -- sh -c "exit 7")
set_tests_properties(emu_cli_exit_status PROPERTIES LABELS emulator WILL_FAIL TRUE)
add_test(NAME emu_cli_bad_override
  COMMAND $<TARGET_FILE:kfd-emu> --machine MI100 --gpu-ids 1,2 -- true)
set_tests_properties(emu_cli_bad_override PROPERTIES LABELS emulator WILL_FAIL TRUE)

# --- program images: exec ends the KFD context, a CRIU restore does not -------
kfdemu_test_executable(kfdemu_test_image ${KFDEMU_TESTS}/test_image.cpp)
target_link_libraries(kfdemu_test_image PRIVATE amdcr_kernel_headers)
kfdemu_add_test(emu_image_MI100 kfdemu_test_image LAUNCHER --machine MI100)
set_tests_properties(emu_image_MI100 PROPERTIES SKIP_RETURN_CODE 77)

# --- real CRIU on the emulated GPU: adapter, wrapper, emu_realcriu_* ----------
if(EXISTS ${KFDEMU_DIR}/criu/criu.cmake)
  include(${KFDEMU_DIR}/criu/criu.cmake)
  include(${KFDEMU_DIR}/criu/hostile_dir.cmake)
endif()
if(EXISTS ${KFDEMU_DIR}/criu/streamer.cmake)
  include(${KFDEMU_DIR}/criu/streamer.cmake)
endif()

# --- /proc/<pid>/{maps,smaps,map_files} as a dumper sees them; per-call mode --
kfdemu_test_executable(kfdemu_test_procmaps ${KFDEMU_TESTS}/test_procmaps.cpp)
target_link_libraries(kfdemu_test_procmaps PRIVATE PkgConfig::LIBDRM)
foreach(m MI100 2xMI210)
  kfdemu_add_test(emu_procmaps_${m} kfdemu_test_procmaps LAUNCHER --machine ${m})
  set_tests_properties(emu_procmaps_${m} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()
