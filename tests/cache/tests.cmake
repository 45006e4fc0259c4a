hylens_add_test_suite(test_cache
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_surgery.cpp)
