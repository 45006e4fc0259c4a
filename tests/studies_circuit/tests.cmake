# Encode-Address studies (docs/study_circuit.md): the study result folder (resume, shards,
# merge), the circuit and encode-swap studies on the trained organisms of models/ through the library and the
# tool, and its figure script.
hylens_add_test_suite(test_studies_circuit
  ${CMAKE_CURRENT_LIST_DIR}/test_study_folder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_circuit_study.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_encode_swap_study.cpp)
target_compile_definitions(test_studies_circuit PRIVATE
  HYLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/models" HYLENS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TARGET hylens_cli)
  add_dependencies(test_studies_circuit hylens_cli)
  target_compile_definitions(test_studies_circuit PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
  if(HYLENS_WITH_MPI)
    target_compile_definitions(test_studies_circuit PRIVATE HYLENS_MPIRUN="${MPIEXEC_EXECUTABLE}")
  endif()
endif()
