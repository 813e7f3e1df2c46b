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

# kfdemu_realcriu_register(<script>): emu_realcriu_<short>_<name>, the
# tests of a real-CRIU test script (realcriu_test.py, hostile_dir_test.py),
# one JSON object each from its --list (the rows of its scenario table), under
# the CRIU of every version in criu-bins.txt (the fixture builds it). Their
# arguments' placeholders: {target:T} the file of target T, {source} and
# {build} the trees.
function(kfdemu_realcriu_register script)
  execute_process(COMMAND ${Python3_EXECUTABLE} ${script} --list
    OUTPUT_VARIABLE _kfdemu_realcriu_list ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${script} --list failed (${rc}): ${err}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${script})
  string(JSON n LENGTH "${_kfdemu_realcriu_list}")
  math(EXPR last "${n} - 1")
  foreach(_ver IN LISTS _kfdemu_criu_versions)
    string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
    foreach(_i RANGE ${last})
      foreach(_key name scenario machine timeout)
        string(JSON _${_key} GET "${_kfdemu_realcriu_list}" ${_i} ${_key})
      endforeach()
      kfdemu_realcriu_json_list(_args ${_i} args)
      kfdemu_realcriu_json_list(_env ${_i} env)
      kfdemu_realcriu_json_list(_labels ${_i} labels)
      set(_test emu_realcriu_${_short}_${_name})
      add_test(NAME ${_test}
        COMMAND ${Python3_EXECUTABLE} ${script}
          --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
          --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
          --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
          --workload $<TARGET_FILE:kfdemu_criu_workload> --machine ${_machine}
          --scenario ${_scenario} "--sanitized=${AMDCR_SANITIZE}" ${_args})
      # No resource lock: each test has a /dev/shm of its own
      # (harness.private_dev_shm: libhsakmt's shared memory and semaphore,
      # CRIU's link_remap files), its own kfd-emu root and socket, work
      # directory and image directory, so tests run side by side (ctest -j).
      set_tests_properties(${_test} PROPERTIES LABELS "${_labels}" SKIP_RETURN_CODE 77 TIMEOUT ${_timeout}
        FIXTURES_REQUIRED realcriu_criu)
      if(_env)
        set_tests_properties(${_test} PROPERTIES ENVIRONMENT "${_env}")
      endif()
    endforeach()
  endforeach()
endfunction()

# The list's value at index `i` of key `key` (a JSON array) as a CMake
# list; the list is kfdemu_realcriu_register's, the caller's.
function(kfdemu_realcriu_json_list out i key)
  set(items)
  string(JSON n LENGTH "${_kfdemu_realcriu_list}" ${i} ${key})
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(k RANGE ${last})
      string(JSON item GET "${_kfdemu_realcriu_list}" ${i} ${key} ${k})
      string(REGEX REPLACE "{target:([^}]+)}" "$<TARGET_FILE:\\1>" item "${item}")
      string(REPLACE "{source}" "${PROJECT_SOURCE_DIR}" item "${item}")
      string(REPLACE "{build}" "${CMAKE_BINARY_DIR}" item "${item}")
      list(APPEND items "${item}")
    endforeach()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

kfdemu_realcriu_register(${KFDEMU_DIR}/criu/realcriu_test.py)
# emu_realcriu_<short>_parity_earlier_MI100 and
# emu_realcriu_<short>_interop_upstream_dump_kfd_gem_MI100:
# verify_parity_test.py's scenarios earlier and upstream-gem (a
# checkpoint's GPU files bound to CRIU's images of their dump, and given
# back whole; amdgpu-img verify and the restore agree on each case).
kfdemu_realcriu_register(${KFDEMU_DIR}/criu/verify_parity_test.py)
add_dependencies(kfdemu_criu_workload kfd-emu kfdemu_criu_adapter amdgpu_plugin dmabuf-tree amdgpu-img)
