# The model organisms of models/: hylens' logits against the torch forward they were trained
# with, the tokenizer against the training tokenization, the shipped files, and reduced reruns
# of the model cards' channel and circuit studies against their records.
hylens_add_test_suite(test_organisms ${CMAKE_CURRENT_LIST_DIR}/test_organisms.cpp)
target_compile_definitions(test_organisms PRIVATE
  HYLENS_MODELS_DIR="${PROJECT_SOURCE_DIR}/models"
  HYLENS_ORGANISMS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")
