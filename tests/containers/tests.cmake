# The public containers (docs/containers.md): xtensor views of caches and captures (no copy,
# write-through), logits types, and the index-type rule checked at compile time.
hylens_add_test_sources(models
  ${CMAKE_CURRENT_LIST_DIR}/test_containers.cpp)
