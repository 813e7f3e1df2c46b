# The end-to-end scenarios of e2e.py, one CTest test each. They need the
# emulator (kfd-emu) and the CRIU host (criu-host). No resource lock: each
# runs its own kfd-emu (root, socket) in its own scratch directory. Their
# workloads share the host's /dev/shm (libhsakmt's hsakmt_shared_mem and
# semaphore, which every ROCm process opens and none removes); nothing here
# checks or removes those files (the tests that compare a restored fd table
# or link_remap files, tests/emulator/criu and tests/rocm, have a /dev/shm of
# their own), so they run side by side (ctest -j).
if(TARGET kfd-emu AND TARGET criu-host)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  foreach(s roundtrip bounded hive bigger tree incompatible dump_faults restore_faults coexist parallel
            pre_copy dedup dedup_8x)
    add_test(NAME e2e_${s}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e.py --bin-dir ${PROJECT_BINARY_DIR} ${s})
    set_tests_properties(e2e_${s} PROPERTIES TIMEOUT 1500 LABELS e2e)
  endforeach()
  # The README's demo (scripts/demo.sh, tests/e2e/demo.sh: 2 x 512 MiB
  # per GPU) with its large BOs 64 MiB each: every step and the summary
  # as the demo, an eighth of the bytes (each BO still over the default
  # staging bound, e2e_roundtrip's case); 2 GiB took 37 CPU-s.
  add_test(NAME e2e_demo
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e.py --bin-dir ${PROJECT_BINARY_DIR} --demo-bo 64M demo)
  set_tests_properties(e2e_demo PROPERTIES TIMEOUT 1500 LABELS e2e)
  # The same under CRIU 4.2's 13-hook ABI (no RESTORE_INIT, no
  # DUMP_DEVICES_LATE): queues resumed at the kfd file's dump, restore
  # prepared in init, failures still leave the process running. The hooks'
  # order is what differs, so the roundtrip's BOs stay small here (--small:
  # up to 5 MiB; e2e_roundtrip moves ones over the default staging bound).
  foreach(s roundtrip tree dump_faults restore_faults)
    add_test(NAME e2e_${s}_hooks13
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/e2e.py --bin-dir ${PROJECT_BINARY_DIR} --small ${s})
    set_tests_properties(e2e_${s}_hooks13 PROPERTIES TIMEOUT 1500 LABELS e2e
      ENVIRONMENT "CRIU_HOST_HOOKS=13")
  endforeach()
endif()
# Image integrity (tests/e2e/integrity.py): byte flips of a small
# checkpoint restore cleanly refused or identical; a failed dump leaves no
# file of ours, and removes no file of an older checkpoint it did not write.
if(TARGET kfd-emu AND TARGET criu-host)
  foreach(s flips dump_cleanup dump_cleanup_keeps_old render_flips render_dump_cleanup)
    add_test(NAME e2e_integrity_${s}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/integrity.py --bin-dir ${PROJECT_BINARY_DIR} ${s})
    set_tests_properties(e2e_integrity_${s} PROPERTIES TIMEOUT 1500 LABELS e2e)
  endforeach()
endif()
