# The public containers (docs/containers.md): xtensor views of caches and captures (no copy,
# write-through), logits types, and the index-type rule checked at compile time.
hylens_add_test_suite(test_containers
  ${CMAKE_CURRENT_LIST_DIR}/test_containers.cpp)
