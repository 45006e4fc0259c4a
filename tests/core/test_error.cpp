#include <hylens/core/error.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace hylens;

TEST_CASE("errors: fail and check build the message and keep the type") {
    try {
        fail<ShapeError>("[linear] x has ", 3, " columns, expected ", 4);
        FAIL("no throw");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()) == "[linear] x has 3 columns, expected 4");
    }
    CHECK_THROWS_AS(check<ConfigError>(false, "x"), Error);
    CHECK_NOTHROW(check<ConfigError>(true, "x"));
}
