hylens_add_test_suite(test_models
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_models.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_load_errors.cpp)
