hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_models.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_load_errors.cpp)
