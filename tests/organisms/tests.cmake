# The model organisms of models/: hylens' logits against the torch forward they were trained
# with, the tokenizer against the training tokenization, the shipped files, and reduced reruns
# of the model cards' channel and circuit studies against their records.
hylens_add_test_sources(studies ${CMAKE_CURRENT_LIST_DIR}/test_organisms.cpp)
target_compile_definitions(test_hylens PRIVATE
  HYLENS_ORGANISMS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
