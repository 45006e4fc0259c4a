hylens_add_test_sources(basics
  ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_hostile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_golden_models.cpp)
