// Tokenizer API, invalid UTF-8, hostile tokenizer.json files and thread safety.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>  // mkfifo
#include <unistd.h>    // getpid

#include <nlohmann/json.hpp>

#include "hylens/io/config_json.hpp"
#include "hylens/text/tokenizer.hpp"
#include "fixtures.hpp"

using hylens::Tokenizer;

namespace {
const Tokenizer& qwen() {
    return hylens::test::fixture_tokenizer("qwen3");
}

// A small valid byte-level tokenizer that the hostile cases below break one field at a time.
nlohmann::json small() {
    nlohmann::json vocab = nlohmann::json::object();
    vocab["a"] = 0;
    vocab["b"] = 1;
    vocab["ab"] = 2;
    vocab["\xC4\xA0"] = 3;  // "Ġ", the byte-level space
    return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens", nlohmann::json::array({{{"id", 4}, {"content", "<x>"}, {"special", true}}})}};
}

template <class E>
void rejects(const nlohmann::json& j, const std::string& needle) {
    try {
        (void)Tokenizer::from_json(j);
        FAIL("accepted a broken tokenizer.json; expected an error mentioning " << needle);
    } catch (const E& e) {
        CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
}
}  // namespace

TEST_SUITE("text/tokenizer") {
    TEST_CASE("a small tokenizer encodes and decodes") {
        const auto tok = Tokenizer::from_json(small());
        const auto e = tok.encode("ab a<x>b");
        CHECK(e.ids == std::vector<std::int32_t>{2, 3, 0, 4, 1});
        CHECK(e.offsets[3] == hylens::CharSpan{4, 7});
        CHECK(tok.decode(e.ids) == "ab a<x>b");
        CHECK(tok.decode(e.ids, /*skip_special=*/true) == "ab ab");
        CHECK(Tokenizer::from_json([] { auto j = small(); j.erase("decoder"); return j; }()).decode({2, 3}) == "ab \xC4\xA0");
        CHECK(tok.decode({99, 0}) == "a");  // unknown ids are skipped
        CHECK(tok.vocab_size() == 5);
    }

    TEST_CASE("hostile tokenizer.json files give hylens errors, never crashes") {
        CHECK_THROWS_AS(Tokenizer::from_string("{not json"), hylens::FormatError);
        // Read from text (the streaming reader takes the vocabulary out of the DOM): a missing or
        // malformed merges said "missing field 'vocab'".
        {
            auto t = small();
            t["model"].erase("merges");
            CHECK_THROWS_WITH_AS(Tokenizer::from_string(t.dump()), doctest::Contains("merges"), hylens::FormatError);
            t["model"]["merges"] = "a b";
            CHECK_THROWS_WITH_AS(Tokenizer::from_string(t.dump()),
                                 "[tokenizer.json model.merges] expected an array, got string", hylens::FormatError);
            t = small();
            t["model"]["vocab"]["a"] = nullptr;
            CHECK_THROWS_WITH_AS(Tokenizer::from_string(t.dump()), doctest::Contains("token 'a' has a non-integer id (null)"),
                                 hylens::FormatError);
            t["model"]["vocab"]["a"] = 18446744073709551615ULL;
            CHECK_THROWS_WITH_AS(Tokenizer::from_string(t.dump()), doctest::Contains("has id 18446744073709551615"),
                                 hylens::FormatError);
        }
        CHECK_THROWS_AS(Tokenizer::from_string("[1, 2]"), hylens::FormatError);
        // Valid JSON of another type is not "not valid JSON".
        for (const char* other : {"[]", "null", "3"})
            CHECK_THROWS_WITH_AS(Tokenizer::from_string(other),
                                 doctest::Contains("expected an object at the top level, got "), hylens::FormatError);
        CHECK_THROWS_AS(Tokenizer::from_file("/nonexistent/tokenizer.json"), hylens::FormatError);
        // A folder: a message, not a std::bad_alloc from reading it as a file.
        CHECK_THROWS_WITH_AS(Tokenizer::from_file(std::filesystem::temp_directory_path().string()),
                             doctest::Contains("is a directory, not a tokenizer.json file"), hylens::FormatError);
        // A FIFO (nothing writing to it) blocked the read forever; a device is refused alike.
        const std::string fifo = (std::filesystem::temp_directory_path() / ("hylens_fifo_" + std::to_string(::getpid()))).string();
        std::filesystem::remove(fifo);
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        CHECK_THROWS_WITH_AS(Tokenizer::from_file(fifo), doctest::Contains("is not a regular file (a pipe or a device?)"),
                             hylens::FormatError);
        CHECK_THROWS_WITH_AS(hylens::io::Config::from_file(fifo), doctest::Contains("not a regular file"), hylens::FormatError);
        std::filesystem::remove(fifo);
        CHECK_THROWS_WITH_AS(Tokenizer::from_file("/dev/zero"), doctest::Contains("is not a regular file"), hylens::FormatError);
        auto j = small();
        j.erase("model");
        rejects<hylens::FormatError>(j, "model");
        j = small(), j["model"].erase("merges");
        rejects<hylens::FormatError>(j, "merges");
        j = small(), j["model"]["merges"] = {"a z"};
        rejects<hylens::FormatError>(j, "not in the vocabulary");
        j = small(), j["model"]["merges"] = {42};
        rejects<hylens::FormatError>(j, "merges");
        j = small(), j["model"]["vocab"]["a"] = "zero";
        rejects<hylens::FormatError>(j, "non-integer id");
        j = small(), j["model"]["vocab"]["a"] = 1000000000000LL;
        rejects<hylens::FormatError>(j, "2^28");
        j = small(), j["model"]["vocab"]["a"] = -1;
        rejects<hylens::FormatError>(j, "id -1");
        // null and bools dropped the token without a word; an id past int64 said "id -1"
        j = small(), j["model"]["vocab"]["a"] = nullptr;
        rejects<hylens::FormatError>(j, "token 'a' has a non-integer id (null)");
        j = small(), j["model"]["vocab"]["a"] = true;
        rejects<hylens::FormatError>(j, "token 'a' has a non-integer id (boolean)");
        j = small(), j["model"]["vocab"]["a"] = 18446744073709551615ULL;
        rejects<hylens::FormatError>(j, "has id 18446744073709551615, expected");
        // One id far past the others made the dense id tables gigabytes (41 KB file, 8 GB).
        j = small(), j["model"]["vocab"]["zzzq"] = (1 << 28) - 1;
        rejects<hylens::FormatError>(j, "token 'zzzq' has id 268435455 among 5 tokens: ids must run from 0 with few gaps");
        j = small(), j["added_tokens"][0]["id"] = (1 << 28) - 1;
        j["added_tokens"][0]["content"] = "<far>";
        rejects<hylens::FormatError>(j, "token '<far>' has id 268435455 beside");
        j = small(), j["model"]["type"] = "Unigram";
        rejects<hylens::UnsupportedError>(j, "Unigram");
        j = small(), j["normalizer"] = {{"type", "Lowercase"}};
        rejects<hylens::UnsupportedError>(j, "Lowercase");
        j = small(), j["post_processor"] = {{"type", "RobertaProcessing"}};
        rejects<hylens::UnsupportedError>(j, "RobertaProcessing");
        j = small(), j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
        rejects<hylens::FormatError>(j, "(unclosed");
        j = small(), j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}};
        rejects<hylens::FormatError>(j, "Sideways");
        j = small(), j["added_tokens"] = "many";
        rejects<hylens::FormatError>(j, "added_tokens");
        j = small(), j["added_tokens"][0]["lstrip"] = "yes";
        rejects<hylens::FormatError>(j, "lstrip");
        j = small(), j["decoder"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
        rejects<hylens::FormatError>(j, "one character");
        // 100 nested Sequences: refused before any deep recursion.
        nlohmann::json deep = {{"type", "NFC"}};
        for (int i = 0; i < 100; ++i) deep = {{"type", "Sequence"}, {"normalizers", {deep}}};
        j = small(), j["normalizer"] = deep;
        rejects<hylens::FormatError>(j, "nested deeper");
    }

    TEST_CASE("invalid UTF-8 is encoded as U+FFFD, one per maximal subpart") {
        const auto bad = qwen().encode("a\xFF\xC0\xAF" "b");
        const auto good = qwen().encode("a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b");
        CHECK(bad.ids == good.ids);
        CHECK(bad.offsets == good.offsets);
        CHECK(bad.offsets.back() == hylens::CharSpan{4, 5});  // "b" is the 5th character
    }

    TEST_CASE("token lookups, single tokens and spans") {
        const auto& tok = qwen();
        CHECK(tok.token_to_id("<|im_start|>") == 151644);
        CHECK(tok.id_to_token(151644) == std::string("<|im_start|>"));
        CHECK(tok.token_to_id("\xC4\xA0red") == tok.single_token_id("red", true));
        CHECK(tok.is_single_token("red", false));
        CHECK(tok.is_single_token("red", true));
        CHECK_FALSE(tok.is_single_token("supercalifragilistic", true));
        CHECK_FALSE(tok.id_to_token(-1).has_value());
        CHECK_FALSE(tok.id_to_token(1 << 27).has_value());

        const std::string text = "Dictionary: apple=red, pear=blue.";
        const auto enc = tok.encode(text);
        const auto pos = hylens::span_to_positions(enc, {12, 21});  // "apple=red"
        REQUIRE_FALSE(pos.empty());
        std::vector<std::int32_t> ids;
        for (const auto p : pos) ids.push_back(enc.ids[p]);
        CHECK(tok.decode(ids) == " apple=red");  // the token " apple" overlaps the span
        CHECK(hylens::span_to_positions(enc, {5, 5}).empty());
    }

    TEST_CASE("add_special adds the post-processor's BOS") {
        const auto& tok = hylens::test::fixture_tokenizer("llama2");
        const auto plain = tok.encode("Hello"), with = tok.encode("Hello", {.add_special = true});
        REQUIRE(with.size() == plain.size() + 1);
        CHECK(with.ids[0] == 1);
        CHECK(with.offsets[0] == hylens::CharSpan{0, 0});
    }

    TEST_CASE("encode is thread-safe") {
        const auto& tok = qwen();
        const std::string text = "The quick brown fox 🦊 jumps over 13 lazy dogs. Привет, мир! 你好";
        const auto expected = tok.encode(text);
        std::vector<std::thread> threads;
        std::vector<int> ok(4, 0);
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&, t] {
                bool same = true;
                for (int i = 0; i < 200; ++i) same &= tok.encode(text + std::to_string(i % 7)).ids.size() >= expected.size();
                ok[static_cast<std::size_t>(t)] = same && tok.encode(text).ids == expected.ids;
            });
        for (auto& th : threads) th.join();
        CHECK(ok == std::vector<int>(4, 1));
    }
}
