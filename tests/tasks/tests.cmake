# Task generators and scorers (include/hylens/tasks/), and the `hylens tasks` command.
hylens_add_test_suite(test_tasks
  ${CMAKE_CURRENT_LIST_DIR}/test_generators.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_invariants.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_scorers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_judge.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_cli_tasks.cpp)
target_compile_definitions(test_tasks PRIVATE HYLENS_TASKS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
if(TARGET hylens_cli)
  add_dependencies(test_tasks hylens_cli)
  target_compile_definitions(test_tasks PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
endif()
