hylens_add_test_suite(test_experiments
  ${CMAKE_CURRENT_LIST_DIR}/test_conditions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_channel_study.cpp)
