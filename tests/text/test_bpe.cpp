// The BPE merge loop against its plain twin, and hand-checked merge orders.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "hylens/text/bpe.hpp"
#include "hylens/text/tokenizer.hpp"
#include "fixtures.hpp"

using namespace hylens::text;

namespace {
Bpe tiny(BpeOptions o = {}) {
    const std::vector<std::pair<std::string, std::int64_t>> vocab{{"a", 0},   {"b", 1},     {"c", 2},      {"ab", 3},    {"bc", 4},
                                                                  {"abc", 5}, {"<unk>", 6}, {"<0xC3>", 7}, {"<0xA9>", 8}};
    return Bpe(vocab, {{"b", "c"}, {"a", "b"}, {"a", "bc"}}, o);
}
std::vector<TokenId> ids(const std::vector<WordToken>& t) {
    std::vector<TokenId> out;
    for (const auto& x : t) out.push_back(x.id);
    return out;
}
}  // namespace

TEST_SUITE("text/bpe") {
    TEST_CASE("the lowest-rank pair merges first") {
        const Bpe bpe = tiny();
        std::vector<WordToken> out;
        bpe.tokenize("abc", out);  // b+c (rank 0) before a+b (rank 1), then a+bc
        CHECK(ids(out) == std::vector<TokenId>{5});
        out.clear();
        bpe.tokenize("abab", out);  // ties on rank: leftmost first
        CHECK(ids(out) == std::vector<TokenId>{3, 3});
        CHECK(out[1].begin == 2);
        CHECK(out[1].end == 4);
    }

    TEST_CASE("unknown characters: dropped, fused into <unk>, or byte fallback") {
        std::vector<WordToken> out;
        tiny().tokenize("a\xC3\xA9" "a", out);  // no unk token: é is dropped, offsets close up
        CHECK(ids(out) == std::vector<TokenId>{0, 0});
        CHECK(out[1].begin == 1);
        out.clear();
        tiny({.unk_token = "<unk>", .fuse_unk = true}).tokenize("a\xC3\xA9\xC3\xA9", out);
        CHECK(ids(out) == std::vector<TokenId>{0, 6});
        CHECK(out[1].end == 5);
        out.clear();
        tiny({.unk_token = "<unk>", .byte_fallback = true}).tokenize("\xC3\xA9", out);
        CHECK(ids(out) == std::vector<TokenId>{7, 8});
    }

    TEST_CASE("merges that name unknown tokens are an error") {
        using Vocab = std::vector<std::pair<std::string, std::int64_t>>;
        CHECK_THROWS_AS(Bpe(Vocab{{"a", 0}}, {{"a", "z"}}, {}), hylens::FormatError);
        CHECK_THROWS_AS(Bpe(Vocab{{"a", 0}, {"b", 1}}, {{"a", "b"}}, {}), hylens::FormatError);  // "ab" missing
        CHECK_THROWS_AS(Bpe(Vocab{{"a", -3}}, {}, {}), hylens::FormatError);
    }

    TEST_CASE("heap merge equals the plain O(n^2) twin on real vocabularies") {
        for (const char* name : {"qwen3", "llama2"}) {
            const auto& tok = hylens::test::fixture_tokenizer(name);
            const Bpe& bpe = tok.model();
            std::mt19937 rng(7);
            const std::string alphabet = "aeiou tnsrlhd.,0123456789\xC3\xA9\xE4\xBD\xA0";
            for (int trial = 0; trial < 400; ++trial) {
                std::string word;
                const int n = 1 + static_cast<int>(rng() % 40);
                for (int k = 0; k < n; ++k) word.push_back(alphabet[rng() % alphabet.size()]);
                word = repair_utf8(word);
                std::vector<WordToken> fast, plain;
                bpe.tokenize(word, fast);
                bpe.tokenize_reference(word, plain);
                REQUIRE(fast.size() == plain.size());
                for (std::size_t i = 0; i < fast.size(); ++i) {
                    CHECK(fast[i].id == plain[i].id);
                    CHECK(fast[i].end == plain[i].end);
                }
            }
        }
    }
}
