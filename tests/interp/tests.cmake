hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_run.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_patch_golden.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_ridge.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_stitch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_reader.cpp)
if(HYLENS_COMPILE_CHECKS)
# Compile-fail: stitching a block of another model type without an adapter between hidden
# sizes must stop at our static_assert (and the same file with LinearAdapter must compile).
set(_hylens_stitch_cf ${CMAKE_CURRENT_LIST_DIR}/compile_fail/stitch_without_adapter.cpp)
set(_hylens_cf_cmd ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -Wall -Wextra -Werror -Wno-maybe-uninitialized
    -Wno-array-bounds -Wno-restrict -DXTENSOR_USE_XSIMD -I${PROJECT_SOURCE_DIR}/include)
add_test(NAME interp.compile_fail.stitch_without_adapter COMMAND ${_hylens_cf_cmd} ${_hylens_stitch_cf})
set_tests_properties(interp.compile_fail.stitch_without_adapter PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "stitching a block of a model of another stack type needs an adapter between the hidden sizes")
add_test(NAME interp.compile_fail.stitch_with_adapter_control
  COMMAND ${_hylens_cf_cmd} -DHYLENS_COMPILE_FAIL_CONTROL ${_hylens_stitch_cf})
set_tests_properties(interp.compile_fail.stitch_with_adapter_control PROPERTIES TIMEOUT 300)
endif()
