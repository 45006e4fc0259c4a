hylens_add_test_suite(test_models
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_models.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_load_errors.cpp)
# The command-line tool is exercised from the suite when it is built.
if(TARGET hylens_cli)
  add_dependencies(test_models hylens_cli)
  target_compile_definitions(test_models PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
endif()
