# SPDX-License-Identifier: GPL-2.0-only
# HIP programs checkpointed at a gate under real CRIU (hip_criu_test.py)
# and in a podman container (at the end):
# hip_realcriu_<version>_<name> (labels hip, realcriu, emulator),
# one JSON object each from its --list (the rows of its SCENARIOS table),
# under every CRIU the realcriu suite lists (cmake/RealCriu.cmake). Included
# from CMakeLists.txt after the programs; what is missing makes each test
# NOT RUN, naming it (no CRIU at all: emu_realcriu_none stands for them).
if(NOT AMDCR_CRIU_VERSIONS OR NOT TARGET kfdemu_criu_workload)
  return()
endif()
set(_hip_criu_test ${_hip_dir}/hip_criu_test.py)
execute_process(COMMAND ${Python3_EXECUTABLE} ${_hip_criu_test} --list
  OUTPUT_VARIABLE _hip_criu_list ERROR_VARIABLE _hip_criu_err RESULT_VARIABLE _hip_criu_rc)
if(NOT _hip_criu_rc EQUAL 0)
  message(FATAL_ERROR "hip_criu_test.py --list failed (${_hip_criu_rc}): ${_hip_criu_err}")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_hip_criu_test})

set(_hip_criu_labels "hip;realcriu;emulator")
string(JSON _n LENGTH "${_hip_criu_list}")
math(EXPR _last "${_n} - 1")
foreach(_ver IN LISTS AMDCR_CRIU_VERSIONS)
  string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
  foreach(_i RANGE ${_last})
    foreach(_key name scenario program machine pending)
      string(JSON _${_key} GET "${_hip_criu_list}" ${_i} ${_key})
    endforeach()
    set(_t hip_realcriu_${_short}_${_name})
    if(_hip_missing)
      _hip_not_run(${_t} "${_hip_criu_labels}" "${_hip_missing}")
    elseif(NOT AMDCR_HIP_ON_EMULATOR)
      _hip_not_run(${_t} "${_hip_criu_labels}" "configured with -DAMDCR_HIP_ON_EMULATOR=OFF")
    elseif(_pending)
      _hip_not_run(${_t} "${_hip_criu_labels}" "${_hip_runtime_pending_${_pending}}")
    else()
      add_test(NAME ${_t}
        COMMAND ${Python3_EXECUTABLE} ${_hip_criu_test}
          --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
          --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
          --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${PROJECT_BINARY_DIR}/tests/emulator/kfdemu-criu
          --workload ${CMAKE_CURRENT_BINARY_DIR}/${_program} --machine ${_machine}
          --scenario ${_scenario} --amdgpu-img $<TARGET_FILE:amdgpu-img> "--sanitized=${AMDCR_SANITIZE}")
      # Its own /dev/shm, kfd-emu root and work directory (as emu_realcriu_*): no lock.
      set_tests_properties(${_t} PROPERTIES LABELS "${_hip_criu_labels}" SKIP_RETURN_CODE 77 TIMEOUT 300
        FIXTURES_REQUIRED realcriu_criu)
    endif()
  endforeach()
endforeach()

# The training loop in a podman container, checkpointed, exported and
# restored on another emulated machine (hip_container_test.py, with
# tests/container's machinery): hip_container_podman_<criu>_2xMI210 (labels
# hip, container), 45-72 s each, under CRIU 4.2.1 and criu-dev.
foreach(_ver IN LISTS AMDCR_CRIU_VERSIONS)
  set(_t hip_container_podman_${_ver}_2xMI210)
  if(_hip_missing)
    _hip_not_run(${_t} "hip;container" "${_hip_missing}")
  elseif(NOT AMDCR_HIP_ON_EMULATOR)
    _hip_not_run(${_t} "hip;container" "configured with -DAMDCR_HIP_ON_EMULATOR=OFF")
  else()
    add_test(NAME ${_t}
      COMMAND ${Python3_EXECUTABLE} ${_hip_dir}/hip_container_test.py
        --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
        --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
        --emu-criu-lib ${PROJECT_SOURCE_DIR}/tests/emulator/criu
        --kfd-emu $<TARGET_FILE:kfd-emu> --adapter $<TARGET_FILE:kfdemu_criu_adapter>
        --plugin $<TARGET_FILE:amdgpu_plugin> --shim $<TARGET_FILE:kfdemu_shim>
        --workload ${CMAKE_CURRENT_BINARY_DIR}/hip_train "--sanitized=${AMDCR_SANITIZE}")
    set_tests_properties(${_t} PROPERTIES LABELS "hip;container" SKIP_RETURN_CODE 77 TIMEOUT 300
      FIXTURES_REQUIRED realcriu_criu)
  endif()
endforeach()
