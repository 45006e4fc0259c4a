hylens_add_test_sources(basics
  ${CMAKE_CURRENT_LIST_DIR}/test_conv1d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gated_delta.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_ssd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_recurrent_dispatch.cpp)
