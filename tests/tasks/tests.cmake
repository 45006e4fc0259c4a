# Task generators and scorers (include/hylens/tasks/), and the `hylens tasks` command.
hylens_add_test_sources(studies
  ${CMAKE_CURRENT_LIST_DIR}/test_generators.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_invariants.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_scorers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_judge.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_tasks.cpp)
target_compile_definitions(test_hylens PRIVATE HYLENS_TASKS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
