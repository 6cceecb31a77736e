# Warnings for statepact's own targets (tests, examples, benchmarks), never forced on users.
function(statepact_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
    # GCC 12 -O2 reports a false mismatched new/delete on Asio coroutine frames.
    $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>)
  if(STATEPACT_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
