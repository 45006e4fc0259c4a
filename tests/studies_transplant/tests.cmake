# The transplant and query-map studies (docs/study_transplant.md): conditions, a transplant of a
# prompt onto itself through the study, the summaries on hand-computed records, resume / shards /
# merge against the unsharded run on the shipped organism models/qwen35-tiny, and the CLI end to
# end when the tool is built.
hylens_add_test_sources(studies ${CMAKE_CURRENT_LIST_DIR}/test_studies_transplant.cpp)
