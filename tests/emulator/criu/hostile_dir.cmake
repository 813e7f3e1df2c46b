# SPDX-License-Identifier: GPL-2.0-only
# emu_realcriu_<version>_hostile_* (labels realcriu, emulator): a hostile
# image directory under real CRIU (hostile_dir_test.py, which reuses
# realcriu_test.py's machinery): a CRIU stopped (SIGSTOP) during the
# dump's copy keeps the process paused and the guardian idle until it is
# killed; an amdgpu-guardian.log planted as a symbolic link is not
# followed at a killed dump; a guardian killed mid-dump is a warning of the
# plugin; the files a killed dump kept of an older checkpoint are warned
# of by amdgpu-img verify and removed by the next dump (one of no dump
# identity left, with a warning); a FIFO as a KFD image fails the restore
# instead of hanging it.
# For every CRIU that criu.cmake registers tests for.
if(NOT TARGET kfdemu_criu_workload OR NOT _kfdemu_criu_versions)
  return()
endif()
foreach(_ver IN LISTS _kfdemu_criu_versions)
  string(REGEX REPLACE "^dev-.*" "dev" _short "${_ver}")
  foreach(_s dump-stopped dump-killed-planted-log dump-guardian-killed dump-killed-kept restore-fifo-kfd)
    string(REPLACE "-" "_" _n ${_s})
    set(_test emu_realcriu_${_short}_hostile_${_n}_MI100)
    add_test(NAME ${_test}
      COMMAND ${Python3_EXECUTABLE} ${KFDEMU_DIR}/criu/hostile_dir_test.py
        --criu-list ${CMAKE_BINARY_DIR}/realcriu/criu-bins.txt --criu-version ${_ver}
        --realcriu-lib ${PROJECT_SOURCE_DIR}/tests/realcriu
        --kfd-emu $<TARGET_FILE:kfd-emu> --wrapper ${KFDEMU_CRIU_WRAPPER}
        --workload $<TARGET_FILE:kfdemu_criu_workload> --machine MI100 --amdgpu-img $<TARGET_FILE:amdgpu-img>
        --scenario ${_s} "--sanitized=${AMDCR_SANITIZE}")
    set_tests_properties(${_test} PROPERTIES LABELS "realcriu;emulator" SKIP_RETURN_CODE 77 TIMEOUT 300
      FIXTURES_REQUIRED realcriu_criu)
  endforeach()
endforeach()
