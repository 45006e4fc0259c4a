# The transplant and query-map studies (docs/study_transplant.md): conditions, a transplant of a
# prompt onto itself through the study, the summaries on hand-computed records, resume / shards /
# merge against the unsharded run on the shipped organism models/qwen35-tiny, and the CLI end to
# end when the tool is built.
hylens_add_test_suite(test_studies_transplant ${CMAKE_CURRENT_LIST_DIR}/test_studies_transplant.cpp)
target_compile_definitions(test_studies_transplant PRIVATE
  HYLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/models"
  HYLENS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(TARGET hylens_cli)
  add_dependencies(test_studies_transplant hylens_cli)
  target_compile_definitions(test_studies_transplant PRIVATE HYLENS_CLI="${HYLENS_CLI_COMMAND}")
endif()
