# Heap allocations of a warm decode step, counted by replacing the global operator new in this
# one executable (so it is a suite of its own: the replacement would count every other test).
hylens_add_test_suite(test_alloc ${CMAKE_CURRENT_LIST_DIR}/test_decode_alloc.cpp)
