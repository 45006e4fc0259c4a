hylens_add_test_sources(basics
  ${CMAKE_CURRENT_LIST_DIR}/test_bf16.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_thread_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_blas.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_error.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_version.cpp)
