hylens_add_test_sources(basics
  ${CMAKE_CURRENT_LIST_DIR}/test_linear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_norms_rope.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_moe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_simd_dispatch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_gemm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bf16_activations.cpp)
