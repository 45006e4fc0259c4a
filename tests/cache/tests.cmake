hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_surgery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_surgery_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_acceptance.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cache_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_surgery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_channel_checks.cpp)
