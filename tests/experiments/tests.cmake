hylens_add_test_sources(studies
  ${CMAKE_CURRENT_LIST_DIR}/test_conditions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_records.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_channel_study.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_experiment.cpp)
