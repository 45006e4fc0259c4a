# Pipes cli_input.txt through `hylens tokenize --offsets` and compares with the reference
# output (generated once with the Hugging Face tokenizers library, see tools/tokenizer), then
# pipes the ids back through `hylens detokenize` and expects the input again. EMULATOR (empty
# but when cross-compiling) is the command line that runs the tool.
separate_arguments(EMULATOR UNIX_COMMAND "${EMULATOR}")
execute_process(COMMAND ${EMULATOR} ${DRIVER} tokenize --tokenizer ${TOKENIZER} --offsets
  INPUT_FILE ${INPUT} OUTPUT_VARIABLE got RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tokenize failed (${rc}): ${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT got STREQUAL expected)
  message(FATAL_ERROR "tokenize output differs.\n--- got\n${got}--- expected\n${expected}")
endif()
execute_process(COMMAND ${EMULATOR} ${DRIVER} detokenize --tokenizer ${TOKENIZER}
  INPUT_FILE ${EXPECTED} OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
file(READ ${INPUT} input)
if(NOT rc EQUAL 0 OR NOT text STREQUAL input)
  message(FATAL_ERROR "detokenize did not give the input back (${rc}): ${err}\n--- got\n${text}")
endif()
execute_process(COMMAND ${EMULATOR} ${DRIVER} tokenize --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT help MATCHES "Usage: hylens tokenize")
  message(FATAL_ERROR "tokenize --help failed (${rc})")
endif()
execute_process(COMMAND ${EMULATOR} ${DRIVER} tokenize --tokenizer ${TOKENIZER} --bogus RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "Usage: hylens tokenize")
  message(FATAL_ERROR "tokenize --bogus: expected exit 2 and a usage line, got ${rc}: ${err}")
endif()
