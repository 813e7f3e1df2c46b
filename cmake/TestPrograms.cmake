# amdcr_test_driver(<target>): a program that only drives tests (a Criterion
# test, the emulator's test programs) is compiled without optimization. Its
# own code (fixtures, fakes, assertions) runs for milliseconds; what it
# tests comes optimized from the libraries it links (the layers of src/,
# the emulator's model). Its compile is what costs: at -O2 -g1, test_image's
# "proto" group took 24.9 CPU-s, at -O0 -g1 12.6 (GCC 12, this VM); the
# build's test programs were about half of its compile time. Line tables
# and warnings stay (amdcr_warnings). -O0 comes after the build type's
# flags, so it is the one the compiler uses.
function(amdcr_test_driver target)
  target_compile_options(${target} PRIVATE -O0)
endfunction()
