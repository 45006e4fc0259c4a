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

# The relative links of README.md and the Markdown files under docs/, models/, tools/ and tests/
# resolve: each names a file of the repository and, with #anchor, a heading of it
# (check_links.py). A fixture with three broken links checks that the checker finds them.
find_program(HYLENS_PYTHON3_FOR_DOCS NAMES python3)
if(HYLENS_PYTHON3_FOR_DOCS)
  file(GLOB_RECURSE HYLENS_MARKDOWN CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/models/*.md
       ${PROJECT_SOURCE_DIR}/tools/*.md ${PROJECT_SOURCE_DIR}/tests/*.md)
  list(FILTER HYLENS_MARKDOWN EXCLUDE REGEX "/links_fixture/")
  add_test(NAME docs.links
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_links.py
            ${PROJECT_SOURCE_DIR}/README.md ${HYLENS_MARKDOWN})
  add_test(NAME docs.links_checker_finds_broken_links
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_links.py
            ${CMAKE_CURRENT_LIST_DIR}/links_fixture/good.md ${CMAKE_CURRENT_LIST_DIR}/links_fixture/bad.md)
  set_tests_properties(docs.links_checker_finds_broken_links PROPERTIES
    PASS_REGULAR_EXPRESSION "#nowhere in [^\n]*bad.md: #nowhere\n[^\n]*missing file: missing.md\n[^\n]*#repeated-2 in [^\n]*good.md: good.md#repeated-2\n3 broken link\\(s\\) in 2 file\\(s\\)")
endif()

# The references to documents in prose and comments resolve (check_doc_refs.py): a name such as
# docs/kernels.md or families.md names a file of the repository, and a section named after
# it (docs/performance.md, "Decode"; families.md §3.6) is a heading of that file. A fixture
# with four broken references checks that the checker finds them.
if(HYLENS_PYTHON3_FOR_DOCS)
  add_test(NAME docs.section_refs
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_doc_refs.py ${PROJECT_SOURCE_DIR})
  add_test(NAME docs.section_refs_checker_finds_broken_refs
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_doc_refs.py ${CMAKE_CURRENT_LIST_DIR}/refs_fixture)
  set_tests_properties(docs.section_refs_checker_finds_broken_refs PROPERTIES
    PASS_REGULAR_EXPRESSION "bad.hpp:2: no file docs/nowhere.md[^\n]*\n[^\n]*bad.hpp:3: no heading of docs/target.md starts with \"No such heading\"\n[^\n]*bad.hpp:4: no heading of docs/target.md is numbered 9.9\n[^\n]*bad.hpp:5: section \"Unquoted\" of target.md not quoted[^\n]*\n4 broken reference\\(s\\) in 3 file\\(s\\)")
endif()

# The hylens command lines of the Markdown files name options the tool has
# (check_cli_options.py reads each command's --help). A fixture with four unknown options, in a
# code block, across a continued line, in a synopsis and in inline code, checks that the checker
# finds them.
if(HYLENS_PYTHON3_FOR_DOCS AND TARGET hylens_cli)
  file(GLOB_RECURSE HYLENS_MARKDOWN_ALL CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/docs/*.md ${PROJECT_SOURCE_DIR}/models/*.md ${PROJECT_SOURCE_DIR}/tools/*.md
       ${PROJECT_SOURCE_DIR}/tests/*.md ${PROJECT_SOURCE_DIR}/examples/*.md)
  list(FILTER HYLENS_MARKDOWN_ALL EXCLUDE REGEX "/(links|refs|cli)_fixture/")
  add_test(NAME docs.cli_options
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_cli_options.py $<TARGET_FILE:hylens_cli>
            ${PROJECT_SOURCE_DIR}/README.md ${HYLENS_MARKDOWN_ALL})
  add_test(NAME docs.cli_options_checker_finds_unknown_options
    COMMAND ${HYLENS_PYTHON3_FOR_DOCS} ${CMAKE_CURRENT_LIST_DIR}/check_cli_options.py $<TARGET_FILE:hylens_cli>
            ${CMAKE_CURRENT_LIST_DIR}/cli_fixture/bad.md)
  set_tests_properties(docs.cli_options_checker_finds_unknown_options PROPERTIES
    PASS_REGULAR_EXPRESSION "bad.md:5: hylens generate has no option --bogus-flag\n[^\n]*bad.md:6: hylens experiment channels has no option --no-such-option\n[^\n]*bad.md:8: hylens experiment query-map has no option --made-up\n[^\n]*bad.md:12: hylens bench has no option --threads-count\n4 unknown option\\(s\\) in 5 command line\\(s\\) of 1 file\\(s\\)")
endif()
