# Encode-Address circuit studies (docs/circuit.md): the LAPACK ridge solver against the
# hand-written one, the lookup-task generators and their invariants, the circuit metrics.
hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_ridge_lapack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_lookup_tasks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_circuit_models.cpp)
