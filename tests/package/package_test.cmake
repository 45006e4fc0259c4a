# The installed CMake package as another project uses it (cmake -P, from ctest):
#   cmake -DBUILD=<build> -DSOURCE=<source> -DWORK=<scratch> -P package_test.cmake
# 1. find_package(hylens) from `cmake --install` gives a target whose compile line carries
#    -ffp-contract=off (without it a user's build fused multiply-adds: other float32 bits than the
#    tool's), and leaves the caller's BLA_VENDOR and its variables as they were;
# 2. find_package(hylens QUIET) on a machine without PCRE2 / utf8proc leaves hylens not found and
#    the configure going (pkg_check_modules REQUIRED stopped it), naming the Debian package;
# 3. add_subdirectory(hylens) keeps the parent's build type and builds no hylens test or example
#    (it forced Release on the parent's own code, turning its asserts off).
# 4. every public header compiles with clang++ where it is installed.
foreach(v BUILD SOURCE WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "package_test.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(run_checked what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(run_out "${out}${err}" PARENT_SCOPE)
endfunction()

run_checked("cmake --install" ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix")

# 1. find_package and the target's flags.
file(WRITE "${WORK}/user/CMakeLists.txt" [=[
cmake_minimum_required(VERSION 3.25)
project(user CXX)
set(BLA_VENDOR Generic)
find_package(hylens 0.1 REQUIRED)
if(NOT BLA_VENDOR STREQUAL "Generic")
  message(FATAL_ERROR "find_package(hylens) changed BLA_VENDOR to '${BLA_VENDOR}'")
endif()
foreach(v hylens_item hylens_what hylens_package hylens_path hylens_var hylens_unset hylens_caller_bla_vendor)
  if(DEFINED ${v})
    message(FATAL_ERROR "find_package(hylens) left the variable ${v} in the caller's scope")
  endif()
endforeach()
add_executable(user main.cpp)
target_link_libraries(user PRIVATE hylens::hylens)
]=])
file(WRITE "${WORK}/user/main.cpp" "#include <hylens/version.hpp>\nint main() { return 0; }\n")
run_checked("configuring a project that uses the package" ${CMAKE_COMMAND} -S "${WORK}/user" -B "${WORK}/user/b"
            -G "Unix Makefiles" "-DCMAKE_PREFIX_PATH=${WORK}/prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
file(READ "${WORK}/user/b/compile_commands.json" commands)
if(NOT commands MATCHES "-ffp-contract=off")
  message(FATAL_ERROR "the compile line of a project using hylens::hylens lacks -ffp-contract=off:\n${commands}")
endif()

# 2. QUIET on a machine where pkg-config finds neither PCRE2 nor utf8proc.
file(WRITE "${WORK}/quiet/CMakeLists.txt" [=[
cmake_minimum_required(VERSION 3.25)
project(quiet CXX)
find_package(hylens 0.1 QUIET)
message(STATUS "hylens_FOUND=${hylens_FOUND}; ${hylens_NOT_FOUND_MESSAGE}")
]=])
run_checked("configuring a project that asks for hylens QUIET without pkg-config's files" ${CMAKE_COMMAND} -E env
            PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= ${CMAKE_COMMAND} -S "${WORK}/quiet" -B "${WORK}/quiet/b"
            "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
if(NOT run_out MATCHES "hylens_FOUND=(0|FALSE)" OR NOT run_out MATCHES "apt-get install libpcre2-dev")
  message(FATAL_ERROR "find_package(hylens QUIET) without PCRE2 did not leave hylens not found, naming libpcre2-dev:\n${run_out}")
endif()

# 2b. QUIET where BLAS is not found (a FindBLAS that finds nothing): the caller's BLA_VENDOR
#     survives the failure too (find_dependency returned from the config before restoring it).
file(WRITE "${WORK}/noblas/cmake/FindBLAS.cmake" "set(BLAS_FOUND FALSE)\n")
file(WRITE "${WORK}/noblas/CMakeLists.txt" [=[
cmake_minimum_required(VERSION 3.25)
project(noblas CXX)
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_SOURCE_DIR}/cmake")
set(BLA_VENDOR Generic)
find_package(hylens 0.1 QUIET)
message(STATUS "hylens_FOUND=${hylens_FOUND}; BLA_VENDOR=${BLA_VENDOR}; ${hylens_NOT_FOUND_MESSAGE}")
foreach(v hylens_item hylens_what hylens_package hylens_path hylens_var hylens_unset hylens_caller_bla_vendor)
  if(DEFINED ${v})
    message(FATAL_ERROR "find_package(hylens) left the variable ${v} in the caller's scope")
  endif()
endforeach()
]=])
run_checked("configuring a project that asks for hylens QUIET without BLAS" ${CMAKE_COMMAND} -S "${WORK}/noblas"
            -B "${WORK}/noblas/b" "-DCMAKE_PREFIX_PATH=${WORK}/prefix")
if(NOT run_out MATCHES "hylens_FOUND=(0|FALSE); BLA_VENDOR=Generic;" OR NOT run_out MATCHES "apt-get install libopenblas-dev")
  message(FATAL_ERROR "find_package(hylens QUIET) without BLAS changed BLA_VENDOR or named no package:\n${run_out}")
endif()

# 3. add_subdirectory.
file(WRITE "${WORK}/parent/CMakeLists.txt" "cmake_minimum_required(VERSION 3.25)
project(parent CXX)
add_subdirectory(\"${SOURCE}\" hylens)
message(STATUS \"parent build type: '\${CMAKE_BUILD_TYPE}'\")
if(TARGET test_hylens OR TARGET hylens_cli)
  message(FATAL_ERROR \"add_subdirectory(hylens) added hylens's own tests or tool\")
endif()
")
run_checked("configuring a project that adds hylens with add_subdirectory" ${CMAKE_COMMAND} -S "${WORK}/parent"
            -B "${WORK}/parent/b")
if(NOT run_out MATCHES "parent build type: ''")
  message(FATAL_ERROR "add_subdirectory(hylens) changed the parent's build type:\n${run_out}")
endif()
# 4. Where clang++ is installed (Debian's clang 14; not on CI's machine): every public header
#    compiles with it (clang before 16 refused a lambda capturing a structured binding, in four
#    headers of the studies).
find_program(CLANGXX clang++)
if(CLANGXX)
  file(GLOB_RECURSE headers RELATIVE "${SOURCE}/include" "${SOURCE}/include/hylens/*.hpp")
  set(all "")
  foreach(h IN LISTS headers)
    string(APPEND all "#include <${h}>\n")
  endforeach()
  file(WRITE "${WORK}/clang/all.cpp" "${all}int main() { return 0; }\n")
  run_checked("clang++ on every public header" ${CLANGXX} -std=c++20 -DXTENSOR_USE_XSIMD -isystem "${WORK}/prefix/include"
              -fsyntax-only "${WORK}/clang/all.cpp")
else()
  message(STATUS "package test: no clang++ here, every header compiled with g++ only")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "package test: passed")
