# Shared compile settings for every SparseLens target: warnings, sanitizers.
add_library(sparselens_options INTERFACE)
target_compile_options(sparselens_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow=local -Wno-unused-parameter)
if(SPARSELENS_NATIVE)
  target_compile_options(sparselens_options INTERFACE -march=native)
endif()
if(SPARSELENS_SANITIZE)
  target_compile_options(sparselens_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(sparselens_options INTERFACE -fsanitize=address,undefined)
endif()
