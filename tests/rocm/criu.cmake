# SPDX-License-Identifier: GPL-2.0-only
# The mission test of the emulated ROCm stack (rocm_criu_test.py): hsa_copy,
# on Debian's ROCr, checkpointed in the middle of a stream of async copies
# and restored, then completing every copy with correct data.
#   rocm_realcriu_<version>_hsa_stream_{same,other}: real CRIU (4.2.1,
#     criu-dev; tests/emulator/criu's wrapper and adapter), restored on the
#     same machine and on another one (other gpu_ids, minors, GPU order);
#   rocm_host_hsa_stream_{dump,restore}_fault: criu-host with injected
#     faults (the process survives failed dumps; failed restores leave
#     nothing running).
# Included from CMakeLists.txt once hsa_copy exists.
set(_rocm_criu_test ${CMAKE_CURRENT_SOURCE_DIR}/rocm_criu_test.py)
set(_rocm_criu_common --hsa-copy $<TARGET_FILE:hsa_copy> --kfd-emu $<TARGET_FILE:kfd-emu>
  --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu "--sanitized=${AMDCR_SANITIZE}")
# Same machine: MI100 (one GPU, the shortest stream); another machine:
# 2xMI210 (other gpu_ids and minors, the two GPUs swapped).
set(_rocm_criu_machine_same MI100)
set(_rocm_criu_machine_other 2xMI210)

if(TARGET amdgpu_plugin AND TARGET kfdemu_criu_adapter)
  foreach(_ver IN LISTS AMDCR_CRIU_VERSIONS)
    string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
    foreach(_where same other)
      set(_t rocm_realcriu_${_short}_hsa_stream_${_where})
      add_test(NAME ${_t}
        COMMAND ${Python3_EXECUTABLE} ${_rocm_criu_test} ${_rocm_criu_common} --scenario ${_where}
          --machine ${_rocm_criu_machine_${_where}}
          --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
          --wrapper ${PROJECT_BINARY_DIR}/tests/emulator/kfdemu-criu)
      set_tests_properties(${_t} PROPERTIES LABELS "rocm;realcriu;emulator" SKIP_RETURN_CODE 77
        TIMEOUT 400 FIXTURES_REQUIRED realcriu_criu) # its own /dev/shm: no lock (see emulator/criu)
    endforeach()
  endforeach()
endif()

if(TARGET criu-host AND TARGET amdgpu_plugin)
  foreach(_f dump restore)
    add_test(NAME rocm_host_hsa_stream_${_f}_fault
      COMMAND ${Python3_EXECUTABLE} ${_rocm_criu_test} ${_rocm_criu_common} --scenario host-${_f}-fault
        --machine MI100
        --host $<TARGET_FILE:criu-host> --plugin $<TARGET_FILE:amdgpu_plugin>)
    set_tests_properties(rocm_host_hsa_stream_${_f}_fault PROPERTIES LABELS "rocm;emulator"
      SKIP_RETURN_CODE 77 TIMEOUT 400)
  endforeach()
endif()
