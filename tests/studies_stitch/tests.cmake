# The stitch study (docs/study_stitch.md): the fit-corpus reader on the Debian Policy Manual
# (package debian-policy), the identity self-stitch through the study's forwards, and the
# study on the trained organisms of models/ (granite-h-tiny host, qwen35-tiny donor):
# determinism, shards merged == one run, resume after a torn line == one run.
hylens_add_test_sources(studies ${CMAKE_CURRENT_LIST_DIR}/test_stitch_study.cpp)
