#include <hylens/version.hpp>

#include <doctest/doctest.h>

#include <string>

TEST_CASE("version: hylens::version is the project's version (root CMakeLists.txt)") {
    CHECK(std::string(hylens::version) == HYLENS_PROJECT_VERSION);
}
