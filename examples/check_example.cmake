# Runs an example (EXE) as the test suite does: it must exit 0 and its standard output must
# match the regular expression EXPECT. A PASS_REGULAR_EXPRESSION alone would not do: CTest then ignores the exit code, so an example that printed its first row and
# failed on the next would pass. With CHECK_POSITIONS (quickstart) the positions it prints must
# agree with each other: the prefilled cache's KV length and next position equal the context's
# token count, the generated positions start there, and the KV length after generation is the
# last position + 1.
execute_process(COMMAND ${EXE} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exited with ${rc}: ${EXE}\n--- stdout\n${out}--- stderr\n${err}")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "no match: ${EXE} printed nothing that matches '${EXPECT}'\n--- stdout\n${out}")
endif()
if(CHECK_POSITIONS)
  if(NOT out MATCHES "context: ([0-9]+) tokens; cache KV length ([0-9]+), next position ([0-9]+)")
    message(FATAL_ERROR "no match: ${EXE} printed no context line\n${out}")
  endif()
  set(ctx ${CMAKE_MATCH_1})
  if(NOT CMAKE_MATCH_2 EQUAL ctx OR NOT CMAKE_MATCH_3 EQUAL ctx)
    message(FATAL_ERROR "positions disagree: ${EXE}: the prefilled cache does not match the context's ${ctx} tokens\n${out}")
  endif()
  if(NOT out MATCHES "positions used: ([0-9]+) \\.\\. ([0-9]+); cache KV length now ([0-9]+)")
    message(FATAL_ERROR "no match: ${EXE} printed no positions line\n${out}")
  endif()
  math(EXPR after "${CMAKE_MATCH_2} + 1")
  if(NOT CMAKE_MATCH_1 EQUAL ctx OR NOT CMAKE_MATCH_3 EQUAL after)
    message(FATAL_ERROR "positions disagree: ${EXE}: generation did not continue at position ${ctx} or left a KV length other than ${after}\n${out}")
  endif()
endif()
