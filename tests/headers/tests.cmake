if(HYLENS_COMPILE_CHECKS)
# Every public header compiles on its own (include what you use): one ctest per header,
# each a syntax-only compile of a TU that includes just that header, with the project's
# warnings as errors.
file(GLOB_RECURSE HYLENS_PUBLIC_HEADERS RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/include/hylens/*.hpp)
get_target_property(_hylens_pcre2_inc PkgConfig::PCRE2 INTERFACE_INCLUDE_DIRECTORIES)
# With the build's architecture flag: none by default, as a program including the headers
# compiles them (HYLENS_NATIVE adds -march=native).
set(_hylens_arch "")
if(HYLENS_NATIVE)
  set(_hylens_arch "-march=native")
endif()
foreach(header ${HYLENS_PUBLIC_HEADERS})
  string(REPLACE "/" "." test_name "${header}")
  add_test(NAME headers.${test_name}
    COMMAND sh -c "echo '#include <${header}>' | ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -x c++ -Wall -Wextra -Werror -Wno-maybe-uninitialized -Wno-array-bounds -Wno-restrict -DXTENSOR_USE_XSIMD ${_hylens_arch} -I${PROJECT_SOURCE_DIR}/include -")
  set_tests_properties(headers.${test_name} PROPERTIES TIMEOUT 120)
endforeach()
# The library as a non-x86 build compiles it (HYLENS_NO_X86_LEVELS: the x86 levels compiled out,
# core/simd.hpp), warnings as errors: code used only on the x86 paths (a parameter, a variable)
# otherwise shows up only in the aarch64 cross-build (scripts/test-aarch64.sh), which the CI does
# not run.
add_test(NAME headers.portable
  COMMAND sh -c "echo '#include <hylens/hylens.hpp>' | ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -x c++ -Wall -Wextra -Werror -Wno-maybe-uninitialized -Wno-array-bounds -Wno-restrict -DXTENSOR_USE_XSIMD -DHYLENS_NO_X86_LEVELS -I${PROJECT_SOURCE_DIR}/include -")
set_tests_properties(headers.portable PROPERTIES TIMEOUT 120)
endif()
