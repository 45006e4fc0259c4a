// UTF-8 repair, character classes, normalization alignment and the PCRE2 wrapper.
#include <doctest/doctest.h>

#include <string>

#include "hylens/text/normalized_string.hpp"
#include "hylens/text/unicode.hpp"

using namespace hylens::text;

TEST_SUITE("text/unicode") {
    TEST_CASE("invalid UTF-8 becomes one U+FFFD per maximal subpart") {
        const std::string r = "\xEF\xBF\xBD";
        CHECK(repair_utf8("abc") == "abc");
        CHECK(repair_utf8("\x80") == r);                          // lone continuation
        CHECK(repair_utf8("\xE4\xBD") == r);                      // truncated 3-byte sequence
        CHECK(repair_utf8("\xF0\x9F\x98" "a") == r + "a");        // truncated emoji, then ASCII
        CHECK(repair_utf8("\xC0\xAF") == r + r);                  // overlong: two subparts
        CHECK(repair_utf8("\xED\xA0\x80") == r + r + r);          // surrogate
        CHECK(repair_utf8("\xF4\x90\x80\x80") == r + r + r + r);  // above U+10FFFF
        CHECK(repair_utf8("\xE2\x82\xAC") == "\xE2\x82\xAC");     // valid euro sign kept
        CHECK(is_valid_utf8(r));
        CHECK_FALSE(is_valid_utf8("\xFF"));
    }

    TEST_CASE("character classes follow Unicode") {
        CHECK(is_whitespace(U' '));
        CHECK(is_whitespace(0x85));
        CHECK(is_whitespace(0x3000));
        CHECK_FALSE(is_whitespace(0x180E));  // no longer White_Space since Unicode 6.3
        CHECK_FALSE(is_whitespace(0x200B));
        CHECK(is_word_char(U'é'));
        CHECK(is_word_char(0x0301));  // combining mark
        CHECK_FALSE(is_word_char(U'-'));
        CHECK(is_punctuation(U'«'));
        CHECK(is_numeric(0x0663));  // Arabic-Indic three
    }

    TEST_CASE("Oniguruma shorthands keep their meaning under PCRE2") {
        CHECK(translate_oniguruma(R"(\s+)") == R"([\p{Zs}\p{Zl}\p{Zp}\t-\r\x{85}]+)");
        CHECK(translate_oniguruma(R"([^\s\p{L}])") == R"([^\p{Zs}\p{Zl}\p{Zp}\t-\r\x{85}\p{L}])");
        const Regex space(R"(\s+(?!\S))");
        // U+180E is not a space for Oniguruma, so the run of two spaces stops before it.
        const auto m = space.find_all("  \xE1\xA0\x8E");
        REQUIRE(m.size() == 1);
        CHECK(m[0] == std::pair<std::size_t, std::size_t>{0, 1});
    }

    TEST_CASE("empty regex matches advance by one character") {
        const Regex re("x*");
        const auto m = re.find_all("a\xC3\xA9x");
        REQUIRE(m.size() == 4);  // empty at 0 and 1, "x", empty at the end (as Oniguruma)
        CHECK(m[2] == std::pair<std::size_t, std::size_t>{3, 4});
        CHECK_THROWS_AS(Regex("("), hylens::FormatError);
    }

    TEST_CASE("NFC alignment: composed characters absorb what they compose") {
        // "xe\u0301y": é takes e's byte range, the acute accent disappears, y keeps its own.
        const std::string s = "xe\xCC\x81y";
        NormalizedString n(s, 0, s.size());
        n.normalize(NormalForm::nfc);
        CHECK(n.get() == "x\xC3\xA9y");
        CHECK(n.original_range(1, 3) == std::pair<std::size_t, std::size_t>{1, 2});
        CHECK(n.original_range(3, 4) == std::pair<std::size_t, std::size_t>{4, 5});
        // A decomposition: U+0344 -> U+0308 U+0301, both mapped to the original character.
        const std::string d = "\xCD\x84";
        NormalizedString m(d, 0, d.size());
        m.normalize(NormalForm::nfd);
        CHECK(m.get() == "\xCC\x88\xCC\x81");
        CHECK(m.original_range(2, 4) == std::pair<std::size_t, std::size_t>{0, 2});
    }
}
