# One warning policy for every target of the project.
function(conflux_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wno-unused-parameter)
  if(CONFLUX_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
