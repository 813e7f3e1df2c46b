# -DAMDCR_FUZZ=ON builds the libFuzzer targets of tests/fuzz (target
# `fuzz`, CTest label fuzz). It needs clang (CC=clang CXX=clang++) and
# libFuzzer (Debian: libfuzzer-14-dev); every library is then compiled
# with libFuzzer's coverage instrumentation. scripts/fuzz.sh does it all.
option(AMDCR_FUZZ "Build the libFuzzer targets (tests/fuzz; needs clang)" OFF)
if(AMDCR_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "AMDCR_FUZZ=ON needs clang: CC=clang CXX=clang++ cmake -DAMDCR_FUZZ=ON ...")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
