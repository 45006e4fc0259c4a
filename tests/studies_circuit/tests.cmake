# Encode-Address studies (docs/study_circuit.md): the study result folder (resume, shards,
# merge), the circuit and encode-swap studies on the trained organisms of models/ through the library and the
# tool, and its figure script.
hylens_add_test_sources(studies
  ${CMAKE_CURRENT_LIST_DIR}/test_study_folder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_circuit_study.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_encode_swap_study.cpp)
