# -DAMDCR_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer. -DAMDCR_SANITIZE=thread builds with
# ThreadSanitizer (for the copy engine and the emulator's engines).
set(AMDCR_SANITIZE OFF CACHE STRING "OFF, ON (address+undefined) or thread")
if(AMDCR_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(AMDCR_SANITIZE)
  # GCC 12's -Wmaybe-uninitialized misfires under these sanitizers (on
  # std::regex's std::function state in test_sdma_emulator, with -Werror
  # the ASan build stopped there); the normal build keeps the warning.
  # Clang (the fuzz build, scripts/fuzz.sh) has no such option.
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-maybe-uninitialized>)
  add_link_options(-fsanitize=address,undefined)
endif()
