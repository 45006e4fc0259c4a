// Config: typed getters over config.json, with messages that name file, key path, expected type
// and what was found.

#include <doctest/doctest.h>

#include <hylens/experiments/records.hpp>
#include <hylens/interp/circuit.hpp>
#include <hylens/io/config_json.hpp>
#include <hylens/text/tokenizer.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

#include "io_test_util.hpp"

using namespace hylens;
using namespace hylens::io;
using hylens::io_test::has;
using hylens::io_test::message_of_throw;

namespace {

const char* kConfig = R"({
  "model_type": "qwen3_5",
  "tie_word_embeddings": false,
  "text_config": {
    "hidden_size": 64,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000000.0,
    "max_position_embeddings": 4096.0,
    "layer_types": ["linear_attention", "full_attention"],
    "mrope_section": [11, 11, 10],
    "time_step_limit": [0.0, 0.08],
    "mamba_d_ssm": null,
    "vocab_size": "320",
    "partial": 0.25,
    "huge": 18446744073709551615,
    "rope_parameters": {"rope_type": "default"}
  }
})";

}  // namespace

TEST_SUITE("io/config") {

TEST_CASE("nested text_config and typed getters") {
    const auto cfg = Config::parse(kConfig, "m/config.json");
    CHECK(cfg.path() == "m/config.json");
    CHECK(cfg.get_string("model_type") == "qwen3_5");
    CHECK_FALSE(cfg.get_bool("tie_word_embeddings"));
    const auto text = cfg.sub("text_config");
    CHECK(text.key_prefix() == "text_config");
    CHECK(text.path() == "m/config.json");
    CHECK(text.get_int("hidden_size") == 64);
    CHECK(text.get_double("hidden_size") == 64.0);
    CHECK(text.get_double("rms_norm_eps") == 1e-6);
    CHECK(text.get_int("max_position_embeddings") == 4096);  // integral float accepted
    CHECK(text.get_string_list("layer_types") == std::vector<std::string>{"linear_attention", "full_attention"});
    CHECK(text.get_int_list("mrope_section") == std::vector<std::int64_t>{11, 11, 10});
    CHECK(text.get_double_list("time_step_limit") == std::vector<double>{0.0, 0.08});
    CHECK(text.sub("rope_parameters").get_string("rope_type") == "default");
    CHECK(text.sub("rope_parameters").key_prefix() == "text_config.rope_parameters");
    CHECK(text.keys().size() == 12);
    CHECK(Config::parse(text.dump()).get_int("hidden_size") == 64);
}

TEST_CASE("null and absent are the same to has() and to the fallbacks") {
    const auto text = Config::parse(kConfig).sub("text_config");
    CHECK_FALSE(text.has("mamba_d_ssm"));
    CHECK(text.is_null("mamba_d_ssm"));
    CHECK_FALSE(text.has("not_there"));
    CHECK(text.is_null("not_there"));
    CHECK(text.has("hidden_size"));
    CHECK_FALSE(text.is_null("hidden_size"));
    CHECK(text.get_int("mamba_d_ssm", 96) == 96);
    CHECK(text.get_int("not_there", 7) == 7);
    CHECK(text.get_int("hidden_size", 7) == 64);
    CHECK(text.get_double("not_there", 0.5) == 0.5);
    CHECK(text.get_bool("not_there", true));
    CHECK(text.get_string("not_there", "x") == "x");
    // Null without a fallback is an error that says "null".
    const auto m = message_of_throw<ConfigError>([&] { (void)text.get_int("mamba_d_ssm"); });
    CHECK(has(m, "text_config.mamba_d_ssm"));
    CHECK(has(m, "got null"));
}

TEST_CASE("wrong types name the file, the key path, the expected type and what was there") {
    const auto cfg = Config::parse(kConfig, "m/config.json");
    const auto text = cfg.sub("text_config");
    auto m = message_of_throw<ConfigError>([&] { (void)text.get_int("vocab_size"); });
    CHECK(has(m, "m/config.json"));
    CHECK(has(m, "text_config.vocab_size"));
    CHECK(has(m, "expected an integer"));
    CHECK(has(m, "string \"320\""));
    // A present value of the wrong type is an error even with a fallback.
    CHECK_THROWS_AS((void)text.get_int("vocab_size", 5), ConfigError);
    m = message_of_throw<ConfigError>([&] { (void)text.get_int("partial"); });
    CHECK(has(m, "number 0.25"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_int("huge"); });
    CHECK(has(m, "int64"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_bool("hidden_size"); });
    CHECK(has(m, "expected a boolean"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_string_list("mrope_section"); });
    CHECK(has(m, "text_config.mrope_section[0]"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_int_list("time_step_limit"); });
    CHECK(has(m, "text_config.time_step_limit[1]"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_double_list("hidden_size"); });
    CHECK(has(m, "expected a list of numbers"));
    m = message_of_throw<ConfigError>([&] { (void)text.get_int("hidden_sizes"); });
    CHECK(has(m, "missing key 'text_config.hidden_sizes'"));
    m = message_of_throw<ConfigError>([&] { (void)cfg.sub("model_type"); });
    CHECK(has(m, "expected an object"));
    CHECK_THROWS_AS((void)cfg.sub("vision_config"), ConfigError);
    CHECK_THROWS_AS((void)text.get_string("hidden_size"), ConfigError);
    CHECK_THROWS_AS((void)text.get_double("layer_types"), ConfigError);
}

TEST_CASE("malformed JSON names the file, line and column") {
    auto m = message_of_throw<FormatError>([] { (void)Config::parse("{\n  \"a\": 1,\n  \"b\": tru\n}", "bad.json"); });
    CHECK(has(m, "bad.json"));
    CHECK(has(m, "line 3"));
    m = message_of_throw<FormatError>([] { (void)Config::parse("{\"a\": 1", "cut.json"); });
    CHECK(has(m, "cut.json"));
    CHECK(has(m, "malformed JSON"));
    m = message_of_throw<FormatError>([] { (void)Config::parse("[1, 2]", "list.json"); });
    CHECK(has(m, "expected a JSON object"));
    CHECK_THROWS_AS((void)Config::parse("{\"a\": 1e999}"), FormatError);
    CHECK_THROWS_AS((void)Config::parse(""), FormatError);
    CHECK_THROWS_AS((void)Config::parse("{\"a\": \"\xff\"}"), FormatError);
}

TEST_CASE("from_file") {
    io_test::TempDir tmp;
    io_test::write_bytes(tmp / "config.json", kConfig);
    const auto cfg = Config::from_file(tmp / "config.json");
    CHECK(cfg.path() == (tmp / "config.json").string());
    CHECK(cfg.sub("text_config").get_int("hidden_size") == 64);
    const auto m = message_of_throw<FormatError>([&] { (void)Config::from_file(tmp / "missing.json"); });
    CHECK(has(m, "missing.json"));
}

}  // TEST_SUITE

TEST_CASE("config: Python's non-finite literals (Infinity, -Infinity, NaN) outside strings") {
    const hylens::io::Config c = hylens::io::Config::parse(
        R"({"time_step_limit": [0.0, Infinity], "lo": -Infinity, "x": NaN, "s": "Infinity and NaN stay text", "e": "a\"Infinity"})",
        "inf.json");
    const std::vector<double> lim = c.get_double_list("time_step_limit");
    REQUIRE(lim.size() == 2);
    CHECK(lim[0] == 0.0);
    CHECK(std::isinf(lim[1]));
    CHECK(lim[1] > 0);
    CHECK(std::isinf(c.get_double("lo")));
    CHECK(c.get_double("lo") < 0);
    CHECK(std::isnan(c.get_double("x")));
    CHECK(c.get_string("s") == "Infinity and NaN stay text");
    CHECK(c.get_string("e") == "a\"Infinity");
    CHECK_THROWS_AS(hylens::io::Config::parse(R"({"a": Infinit})", "bad.json"), hylens::FormatError);
}

TEST_CASE("JSON nested deeper than kMaxJsonDepth is a FormatError in every file the library reads, not a crash") {
    // ~40,000 levels overflowed the stack in nlohmann's recursive copy (exit 139).
    const auto nested = [](std::size_t depth) {
        return std::string(depth, '[') + "1" + std::string(depth, ']');
    };
    const std::string deep = "{\"model_type\": \"qwen3_5\", \"eos_token_id\": " + nested(40000) + "}";
    CHECK_THROWS_WITH_AS(hylens::io::Config::parse(deep, "deep.json"),
                         doctest::Contains("[config] deep.json: JSON nested deeper than 512 levels (at byte"),
                         hylens::FormatError);
    // 512 levels pass; brackets inside strings (escaped quotes too) do not count
    CHECK_NOTHROW((void)hylens::io::Config::parse("{\"a\": " + nested(511) + "}", "ok.json"));
    CHECK_NOTHROW(hylens::io::check_json_depth("{\"s\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}", "x"));
    CHECK_THROWS_AS(hylens::io::check_json_depth(nested(513), "x"), hylens::FormatError);
    CHECK_THROWS_WITH_AS(hylens::Tokenizer::from_string("{\"normalizer\": " + nested(40000) + "}"),
                         doctest::Contains("JSON nested deeper than 512 levels"), hylens::FormatError);
    // a circuit file and a line of items.jsonl
    const auto dir = std::filesystem::temp_directory_path() / ("hylens_deep_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    { std::ofstream(dir / "circuit.json") << "{\"encode\": " << nested(40000) << "}"; }
    CHECK_THROWS_WITH_AS(hylens::read_circuit_file(dir / "circuit.json"),
                         doctest::Contains("[circuit file]"), hylens::FormatError);
    { std::ofstream(dir / "items.jsonl") << "{\"a\": 1}\n{\"b\": " << nested(40000) << "}\n"; }
    CHECK_THROWS_WITH_AS(hylens::experiments::read_jsonl(dir / "items.jsonl", false),
                         doctest::Contains("items.jsonl line 2: JSON nested deeper than 512"), hylens::FormatError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("config: a scale factor must be positive and finite (logits_scaling -2 flipped the logits, 0 zeroed them)") {
    const auto c = hylens::io::Config::parse(R"({"zero": 0, "neg": -2, "nan": NaN, "huge": 1e40, "ok": 0.25})", "m.json");
    CHECK(c.get_multiplier("ok") == 0.25f);
    CHECK(c.get_multiplier("absent") == 1.0f);
    for (const char* k : {"zero", "neg", "nan", "huge"})
        CHECK_THROWS_WITH_AS(c.get_multiplier(k), doctest::Contains((std::string("[config] m.json: ") + k + " must be a positive finite number").c_str()),
                             hylens::ConfigError);
}
