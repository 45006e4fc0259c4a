# The hylens command-line tool: every command parsed with CLI11 (usage errors exit 2), text in
# and predictions out (generate, top-k, dump / surgery / patch on text), verify, tokenize.
if(TARGET hylens_cli)
  hylens_add_test_sources(basics
    ${CMAKE_CURRENT_LIST_DIR}/test_tokenize_cli.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_commands.cpp)
  target_include_directories(test_hylens PRIVATE ${PROJECT_SOURCE_DIR}/examples)
  target_compile_definitions(test_hylens PRIVATE HYLENS_CLI_DATA="${CMAKE_CURRENT_LIST_DIR}/data")
  # Piping lines through `hylens tokenize` gives the Hugging Face reference output.
  add_test(NAME cli.tokenize_pipe
    COMMAND ${CMAKE_COMMAND}
      "-DEMULATOR=${HYLENS_EMULATOR_COMMAND}"
      -DDRIVER=$<TARGET_FILE:hylens_cli>
      -DTOKENIZER=${HYLENS_TOKENIZER_FIXTURES}/llama2/tokenizer.json
      -DINPUT=${CMAKE_CURRENT_LIST_DIR}/cli_input.txt
      -DEXPECTED=${CMAKE_CURRENT_LIST_DIR}/cli_expected.txt
      -P ${CMAKE_CURRENT_LIST_DIR}/cli_pipe_test.cmake)
endif()
