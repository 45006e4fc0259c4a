// The one translation unit that holds doctest's main (compiled once, linked into every suite).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
