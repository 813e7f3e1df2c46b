# SPDX-License-Identifier: GPL-2.0-only
# The emulator's transport: profiles + sysfs writer + daemon (static library
# kfdemu_transport), the LD_PRELOAD shim (libkfdemu_shim.so), the launcher
# (kfd-emu) and the emulator's own tests. See README.md.

set(KFDEMU_DIR ${CMAKE_CURRENT_LIST_DIR})

# --- the shim ------------------------------------------------------------------
# Built without sanitizers even in sanitizer builds: an ASan/TSan runtime in
# a preloaded library would have to come first in every program. ASan-built
# programs run fine under the plain shim (the launcher sets
# ASAN_OPTIONS=verify_asan_link_order=0).
set(KFDEMU_SHIM_SOURCES
  ${KFDEMU_DIR}/shim/config.cpp
  ${KFDEMU_DIR}/shim/daemon.cpp
  ${KFDEMU_DIR}/shim/paths.cpp
  ${KFDEMU_DIR}/shim/sysfs_write.cpp
  ${KFDEMU_DIR}/shim/path_change.cpp
  ${KFDEMU_DIR}/shim/stat.cpp
  ${KFDEMU_DIR}/shim/proc_maps.cpp
  ${KFDEMU_DIR}/shim/mmap.cpp)
function(kfdemu_shim_library target)
  add_library(${target} SHARED ${KFDEMU_SHIM_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target})
  # Callers do pass NULL to functions glibc declares nonnull; we check.
  target_compile_options(${target} PRIVATE -U_FORTIFY_SOURCE -fno-exceptions -Wno-nonnull-compare)
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
  target_link_options(${target} PRIVATE -Wl,-z,defs)
  amdcr_warnings(${target})
endfunction()
kfdemu_shim_library(kfdemu_shim)
foreach(prop COMPILE_OPTIONS LINK_OPTIONS)
  get_target_property(opts kfdemu_shim ${prop})
  if(opts)
    list(FILTER opts EXCLUDE REGEX "sanitize")
    set_target_properties(kfdemu_shim PROPERTIES ${prop} "${opts}")
  endif()
endforeach()

# --- profiles, sysfs, faults (no model needed) --------------------------------
add_library(kfdemu_profiles STATIC
  ${KFDEMU_DIR}/transport/profile.cpp
  ${KFDEMU_DIR}/transport/sysfs.cpp
  ${KFDEMU_DIR}/transport/faults.cpp)
amdcr_warnings(kfdemu_profiles)

if(NOT TARGET kfdemu_model)
  message(STATUS "kfdemu: no device model (tests/emulator/model) yet; building shim and profiles only")
  return()
endif()

# --- daemon + launcher ----------------------------------------------------------
add_library(kfdemu_transport STATIC ${KFDEMU_DIR}/transport/daemon.cpp)
target_link_libraries(kfdemu_transport PUBLIC kfdemu_profiles kfdemu_model Threads::Threads)
amdcr_warnings(kfdemu_transport)

add_executable(kfd-emu ${KFDEMU_DIR}/launcher/main.cpp)
target_link_libraries(kfd-emu PRIVATE kfdemu_transport)
target_compile_definitions(kfd-emu PRIVATE
  KFDEMU_SHIM_PATH="$<TARGET_FILE:kfdemu_shim>"
  KFDEMU_PROFILE_DIR="${KFDEMU_DIR}/profiles")
add_dependencies(kfd-emu kfdemu_shim)
amdcr_warnings(kfd-emu)

# The shim under AddressSanitizer and UBSan (normal builds; a sanitizer
# build's runtime cannot be preloaded into every program): kfd-emu-asan is
# kfd-emu preloading the ASan runtime, then this shim, so any program, even
# an uninstrumented one (sh, python's rocm-smi), runs the shim's code under
# ASan and UBSan. Its tests: emu_*_asan, rocm_smi_writes_asan_* (label asan).
if(NOT AMDCR_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE KFDEMU_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  kfdemu_shim_library(kfdemu_shim_asan)
  target_compile_options(kfdemu_shim_asan PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=undefined
                         -fno-omit-frame-pointer)
  target_link_options(kfdemu_shim_asan PRIVATE -fsanitize=address,undefined)
  add_executable(kfd-emu-asan ${KFDEMU_DIR}/launcher/main.cpp)
  target_link_libraries(kfd-emu-asan PRIVATE kfdemu_transport)
  target_compile_definitions(kfd-emu-asan PRIVATE
    KFDEMU_SHIM_PATH="${KFDEMU_ASAN_RUNTIME} $<TARGET_FILE:kfdemu_shim_asan>"
    KFDEMU_PROFILE_DIR="${KFDEMU_DIR}/profiles")
  add_dependencies(kfd-emu-asan kfdemu_shim_asan)
  amdcr_warnings(kfd-emu-asan)
endif()

if(EXISTS ${KFDEMU_DIR}/tests/tests.cmake)
  include(${KFDEMU_DIR}/tests/tests.cmake)
endif()
