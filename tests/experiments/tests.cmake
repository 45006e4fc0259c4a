hylens_add_test_suite(test_experiments
  ${CMAKE_CURRENT_LIST_DIR}/test_conditions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_channel_study.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_experiment.cpp)
# `hylens experiment` is exercised from the suite when the tool is built; `mpirun -np 2` only
# when the tool is built with MPI (HYLENS_WITH_MPI).
if(TARGET hylens_cli)
  add_dependencies(test_experiments hylens_cli)
  target_compile_definitions(test_experiments PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
  if(HYLENS_WITH_MPI)
    target_compile_definitions(test_experiments PRIVATE HYLENS_MPIRUN="${MPIEXEC_EXECUTABLE}")
  endif()
endif()
