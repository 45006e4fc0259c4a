if(HYLENS_COMPILE_CHECKS)
# Compile-fail tests: each file must NOT compile, and the compiler must say why in the
# static_assert sentence we wrote (PASS_REGULAR_EXPRESSION on its output). A control file
# with the valid counterparts must compile with the same command line.
set(HYLENS_COMPILE_FAIL_DIR ${CMAKE_CURRENT_LIST_DIR}/../compile_fail)
set(HYLENS_COMPILE_FAIL_CMD ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -DXTENSOR_USE_XSIMD
    -I${PROJECT_SOURCE_DIR}/include)

function(hylens_compile_fail name regex)
  add_test(NAME compile_fail.${name}
           COMMAND ${HYLENS_COMPILE_FAIL_CMD} ${HYLENS_COMPILE_FAIL_DIR}/${name}.cpp)
  set_tests_properties(compile_fail.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}" TIMEOUT 120)
endfunction()

hylens_compile_fail(swap_different_stacks "cache surgery between caches of different stack types")
hylens_compile_fail(patch_different_stacks "cache surgery between caches of different stack types")
hylens_compile_fail(missing_channel "this stack has no layer kind with the requested channel")
hylens_compile_fail(missing_channel_split "this stack has no layer kind with the requested channel")
hylens_compile_fail(not_a_layer "this type is not a layer kind")
hylens_compile_fail(kind_outside_stack "this layer kind is not one of the stack's kinds")
hylens_compile_fail(mask_whole_recurrent "channel::recurrent is both, name one of them")

add_test(NAME compile_fail.control_compiles
         COMMAND ${HYLENS_COMPILE_FAIL_CMD} ${HYLENS_COMPILE_FAIL_DIR}/control_compiles.cpp)
set_tests_properties(compile_fail.control_compiles PROPERTIES TIMEOUT 120)
endif()
