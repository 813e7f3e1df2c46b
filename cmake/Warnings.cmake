# Warnings are errors for everything we write (generated code is exempt).
function(amdcr_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror
      -Wnon-virtual-dtor -Wimplicit-fallthrough -Wcast-align -Wformat=2>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror -Wimplicit-fallthrough>)
endfunction()
