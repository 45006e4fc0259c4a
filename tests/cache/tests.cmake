hylens_add_test_suite(test_cache
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_surgery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_surgery_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_acceptance.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cache_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_surgery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_channel_checks.cpp)
# `hylens surgery` is exercised from the suite when the tool is built.
if(TARGET hylens_cli)
  add_dependencies(test_cache hylens_cli)
  target_compile_definitions(test_cache PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
endif()
