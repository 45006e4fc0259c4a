// hylens tokenize / detokenize (examples/cli/tokenize.hpp) on string streams.
#include <doctest/doctest.h>

#include <filesystem>

#include <sstream>
#include <string>
#include <vector>

#include "cli/tokenize.hpp"

namespace {
int call(bool detok, std::vector<std::string> args, const std::string& input, std::string& out, std::string& err) {
    args.insert(args.begin(), detok ? "detokenize" : "tokenize");
    args.insert(args.begin(), "hylens");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    std::istringstream in(input);
    std::ostringstream o, e;
    const int rc = detok ? hylens::cli::run_detokenize(static_cast<int>(argv.size()), argv.data(), in, o, e)
                         : hylens::cli::run_tokenize(static_cast<int>(argv.size()), argv.data(), in, o, e);
    out = o.str(), err = e.str();
    return rc;
}
const std::string kLlama2 = std::string(HYLENS_TOKENIZER_FIXTURES) + "/llama2/tokenizer.json";
}  // namespace

TEST_SUITE("cli/tokenize") {
    TEST_CASE("tokenize prints ids or id:start:end per line, detokenize reverses it") {
        std::string out, err;
        REQUIRE(call(false, {"--tokenizer", kLlama2}, "Hello world\n\nHi\n", out, err) == 0);
        CHECK(out == "22557 1526\n\n15359\n");
        REQUIRE(call(false, {"--tokenizer=" + kLlama2, "--offsets"}, "Hello world\n", out, err) == 0);
        CHECK(out == "22557:0:5 1526:5:11\n");
        REQUIRE(call(true, {"--tokenizer", kLlama2}, "22557:0:5 1526:5:11\n1 22557 1526\n", out, err) == 0);
        CHECK(out == "Hello world\n<s> Hello world\n");
        REQUIRE(call(true, {"--tokenizer", kLlama2, "--skip-special"}, "1 22557 1526\n", out, err) == 0);
        CHECK(out == "Hello world\n");
    }

    TEST_CASE("help, usage errors and bad input") {
        std::string out, err;
        CHECK(call(false, {"--help"}, "", out, err) == 0);
        CHECK(out.find("Usage: hylens tokenize") != std::string::npos);
        CHECK(call(true, {"--help"}, "", out, err) == 0);
        CHECK(call(false, {}, "", out, err) == 2);
        CHECK(err.find("--tokenizer is required") != std::string::npos);
        CHECK(err.find("Usage: hylens tokenize") != std::string::npos);
        CHECK(call(false, {"--tokenizer", kLlama2, "--frobnicate"}, "", out, err) == 2);
        CHECK(err.find("--frobnicate") != std::string::npos);
        CHECK(call(true, {"--tokenizer", kLlama2, "--offsets"}, "", out, err) == 2);  // a tokenize-only flag
        CHECK(call(false, {"--tokenizer", "/nonexistent.json"}, "x\n", out, err) == 2);  // a usage error, as in generate
        CHECK(err.find("/nonexistent.json") != std::string::npos);
        CHECK(call(true, {"--tokenizer", kLlama2}, "12 x7\n", out, err) == 1);
        CHECK(err.find("x7") != std::string::npos);
        // An id the tokenizer has no token for is an error naming it (decode() would drop it).
        CHECK(call(true, {"--tokenizer", kLlama2}, "12 7\n29871 99999\n", out, err) == 1);
        CHECK(err.find("line 2: 99999 is not an id of this tokenizer") != std::string::npos);
        // A directory as the tokenizer: a usage error naming it, not a std::bad_alloc.
        const std::string dir = std::filesystem::temp_directory_path().string();
        CHECK(call(false, {"--tokenizer", dir}, "x\n", out, err) == 2);
        CHECK(err.find("directory") != std::string::npos);
        CHECK(err.find(dir) != std::string::npos);
    }
}
