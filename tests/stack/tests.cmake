hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_continuation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_stack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_sampling_finite.cpp)
