# Shared compile settings for every SparseLens target: warnings, sanitizers.
add_library(sparselens_options INTERFACE)
target_compile_options(sparselens_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow=local -Wno-unused-parameter)
# GCC 12 reports impossible memcpy overlaps inside libstdc++ for `"literal" + std::string&&`
# (GCC bug 105329); the warning carries no information about our code there.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(sparselens_options INTERFACE -Wno-restrict)
endif()
if(SPARSELENS_NATIVE)
  target_compile_options(sparselens_options INTERFACE -march=native)
endif()
if(SPARSELENS_SANITIZE)
  target_compile_options(sparselens_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(sparselens_options INTERFACE -fsanitize=address,undefined)
endif()
# libFuzzer (tests/fuzz): the libraries carry the fuzzer's coverage instrumentation and the sanitizers;
# only the fuzz executables link the libFuzzer runtime (-fsanitize=fuzzer, see tests/fuzz).
if(SPARSELENS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SPARSELENS_FUZZ needs clang (the fuzz preset uses clang-14)")
  endif()
  target_compile_options(sparselens_options INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
    -Wno-unknown-warning-option)  # -Wshadow=local above is GCC's spelling
  target_link_options(sparselens_options INTERFACE -fsanitize=address,undefined)
endif()
