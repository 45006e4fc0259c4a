# The stitch study (docs/study_stitch.md): the fit-corpus reader on the Debian Policy Manual
# (package debian-policy), the identity self-stitch through the study's forwards, and the
# study on the trained organisms of models/ (granite-h-tiny host, qwen35-tiny donor):
# determinism, shards merged == one run, resume after a torn line == one run.
hylens_add_test_suite(test_studies_stitch ${CMAKE_CURRENT_LIST_DIR}/test_stitch_study.cpp)
target_compile_definitions(test_studies_stitch PRIVATE
  HYLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/models" HYLENS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TARGET hylens_cli)
  add_dependencies(test_studies_stitch hylens_cli)
  target_compile_definitions(test_studies_stitch PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
endif()
