# SPDX-License-Identifier: GPL-2.0-only
# Real CRIU on the emulated GPU (see README.md, "Real CRIU"): the CRIU-side
# adapter plugin, the kfdemu-criu wrapper, the workload and the tests
# emu_realcriu_* (labels realcriu, emulator; NOT RUN without $CRIU_BIN).

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
target_link_libraries(kfdemu_criu_workload PRIVATE ${KFDEMU_CRIU_HSAKMT_LIB})
amdcr_warnings(kfdemu_criu_workload)

function(kfdemu_realcriu_test name machine)
  add_test(NAME ${name}
    COMMAND ${Python3_EXECUTABLE} ${KFDEMU_DIR}/criu/realcriu_test.py
      --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
      --workload $<TARGET_FILE:kfdemu_criu_workload> --machine ${machine}
      "--sanitized=${AMDCR_SANITIZE}" ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "realcriu;emulator" SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
kfdemu_realcriu_test(emu_realcriu_MI100 MI100)
kfdemu_realcriu_test(emu_realcriu_2xMI210 2xMI210)
# Negative: the plugin's UPDATE_VMA_MAP answer is falsified (one page off)
# before the adapter translates it; the round trip must fail.
kfdemu_realcriu_test(emu_realcriu_broken_vma_map_MI100 MI100 --break-vma-map)
add_dependencies(kfdemu_criu_workload kfd-emu kfdemu_criu_adapter amdgpu_plugin)
