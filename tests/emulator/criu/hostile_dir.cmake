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
# Registered from the rows of its scenario table (its --list), as
# criu.cmake registers realcriu_test.py's, for every CRIU it registers
# tests for.
if(NOT TARGET kfdemu_criu_workload OR NOT _kfdemu_criu_versions)
  return()
endif()
kfdemu_realcriu_register(${KFDEMU_DIR}/criu/hostile_dir_test.py)
