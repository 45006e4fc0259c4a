# The C++ snippets of README.md and docs/ (```cpp snippet blocks) compile and run: one program
# built from them by extract_snippets, run in a folder where "Qwen3.5-0.8B/" is the small
# Qwen3.5 model shipped in tests/golden.
set(HYLENS_SNIPPET_DOCS ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/cache_surgery.md
                        ${PROJECT_SOURCE_DIR}/docs/interp.md ${PROJECT_SOURCE_DIR}/docs/containers.md)
add_executable(hylens_extract_snippets ${CMAKE_CURRENT_LIST_DIR}/extract_snippets.cpp)
set(_snippets_cpp ${CMAKE_BINARY_DIR}/doc_snippets/doc_snippets.cpp)
add_custom_command(OUTPUT ${_snippets_cpp}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/doc_snippets
  COMMAND hylens_extract_snippets ${_snippets_cpp} ${HYLENS_SNIPPET_DOCS}
  DEPENDS hylens_extract_snippets ${HYLENS_SNIPPET_DOCS}
  COMMENT "Extracting the C++ snippets of README.md and docs/")
add_executable(test_doc_snippets ${_snippets_cpp})
target_link_libraries(test_doc_snippets PRIVATE hylens::hylens hylens_project_flags)
target_compile_options(test_doc_snippets PRIVATE ${HYLENS_TEST_OPT} -Wno-unused-variable -Wno-unused-but-set-variable)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/doc_snippets/run)
file(CREATE_LINK ${HYLENS_GOLDEN_DIR}/models/qwen3_5_dense ${CMAKE_BINARY_DIR}/doc_snippets/run/Qwen3.5-0.8B SYMBOLIC)
add_test(NAME docs.snippets COMMAND test_doc_snippets WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/doc_snippets/run)
set_tests_properties(docs.snippets PROPERTIES TIMEOUT 300)
