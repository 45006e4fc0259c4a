// The hylens tool as a user meets it: every command rejects unknown options and bad values
// with exit 2 and a usage line; text in, predictions out (generate, top-k, and dump / surgery /
// patch on text or ids, equal to their reference-file runs); seeded sampling reproduces;
// damaged weights are an error, and verify names the tensor.
#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>
#include <hylens/text/tokenizer.hpp>

#include "support/damaged_model.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <sys/wait.h>  // WEXITSTATUS
#include <unistd.h>    // getpid

namespace fs = std::filesystem;
using namespace hylens;

namespace {

struct Run {
    int rc;
    std::string out, err;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

fs::path tmp(const std::string& name) {
    return fs::temp_directory_path() / ("hylens_cli_" + std::to_string(::getpid()) + "_" + name);
}

/// Runs `hylens <args>` and returns its exit status, stdout and stderr.
/// The tool with `args`, and `env` (e.g. "HYLENS_SIMD=baseline") set for it.
Run run_cli(const std::string& args, const std::string& env = "") {
    const fs::path o = tmp("stdout"), e = tmp("stderr");
    const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(HYLENS_CLI) + " " + args + " >" + o.string() +
                            " 2>" + e.string();
    const int st = std::system(cmd.c_str());
    Run r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
    fs::remove(o);
    fs::remove(e);
    return r;
}

nlohmann::json json_of(const fs::path& p) { return nlohmann::json::parse(slurp(p)); }

const std::string kGolden = HYLENS_GOLDEN_DIR;
const std::string kQwen = kGolden + "/models/qwen3_5_dense";
const std::string kBytes = std::string(HYLENS_CLI_DATA) + "/bytes_tokenizer.json";

std::string join(const std::vector<std::int64_t>& v) {
    std::string s;
    for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

/// Every tensor of two safetensors files is bit-identical.
void check_same_file(const fs::path& a, const fs::path& b) {
    const io::SafetensorsFile fa = io::SafetensorsFile::open(a), fb = io::SafetensorsFile::open(b);
    REQUIRE(fa.names() == fb.names());
    for (const auto& n : fa.names()) {
        INFO(n);
        const auto ba = fa.bytes(n), bb = fb.bytes(n);
        CHECK(std::vector<std::byte>(ba.begin(), ba.end()) == std::vector<std::byte>(bb.begin(), bb.end()));
    }
}

}  // namespace

TEST_SUITE("cli") {
    TEST_CASE("unknown options, typos and bad values are usage errors (exit 2, usage line)") {
        for (const std::string cmd : {"info", "generate", "top-k", "verify", "dump", "surgery", "patch", "tokenize",
                                      "detokenize"}) {
            INFO(cmd);
            const bool tok = cmd == "tokenize" || cmd == "detokenize";
            const Run r = run_cli(cmd + (tok ? " --tokenizer " + kBytes : " --model " + kQwen) + " --bogus 7");
            CHECK(r.rc == 2);
            CHECK(r.err.find("--bogus") != std::string::npos);
            CHECK(r.err.find("Usage: hylens " + cmd) != std::string::npos);
            CHECK(run_cli(cmd + " --help").rc == 0);
        }
        CHECK(run_cli("info --modle " + kQwen).rc == 2);  // a typo of a required option
        CHECK(run_cli("generate --model " + kQwen + " --ids 1,2 --max-new x").rc == 2);
        CHECK(run_cli("generate --model " + kQwen + " --ids 1,-2").rc == 2);
        CHECK(run_cli("generate --model " + kQwen + " --ids 1,2 --top-p 1.5").rc == 2);
        CHECK(run_cli("generate --model " + kQwen + " --ids 1,2 --prompt hi").rc == 2);  // one of the two
        CHECK(run_cli("generate --model " + kQwen).rc == 2);                            // neither
        CHECK(run_cli("surgery --model " + kQwen + " --context-ids 1,2 --query-ids 3").rc == 2);  // no --out / --json
        CHECK(run_cli("no-such-command").rc == 2);
        CHECK(run_cli("").rc == 2);  // no command: a usage error (it was 1)
        const Run version = run_cli("--version");
        CHECK(version.rc == 0);
        CHECK(version.out.rfind("hylens ", 0) == 0);
        // Numbers CLI11 would have read wrong: a negative, overflowing or empty value of an unsigned
        // option (read as 2^64 - 1, 2^64 - 1 and 0), and NaN past a range check.
        for (const std::string bad : {"--seed -1", "--seed 99999999999999999999999", "--top-k ''", "--temperature nan",
                                      "--top-p inf"}) {
            INFO(bad);
            const Run r = run_cli("generate --model " + kQwen + " --ids 1,2 " + bad);
            CHECK(r.rc == 2);
            CHECK(r.err.find("Usage: hylens generate") != std::string::npos);
        }
        CHECK(run_cli("generate --model " + kQwen + " --ids 1,x").err.find("'x' is not a whole number") != std::string::npos);
        CHECK(run_cli("tasks --task dictionary --items -1").rc == 2);
        // start + items wrapped to a small number: no item and exit 0
        const Run wrapped = run_cli("tasks --task dictionary --start 18446744073709551614 --items 5");
        CHECK(wrapped.rc == 2);
        CHECK(wrapped.err.find("is past the last item index") != std::string::npos);
        // An empty entry of a comma-separated list is a usage error (CLI11 dropped it: 5,,6 ran as 5,6).
        for (const std::string& bad : std::vector<std::string>{"generate --model " + kQwen + " --ids 5,,6", "generate --model " + kQwen + " --ids=5,",
                                      "tasks --task dictionary, --items 1", "tasks --task dictionary --seeds 1,,2 --items 1",
                                      "bench --model " + kQwen + " -t 1,,2 -p 1 -n 1", "bench --model " + kQwen + " -t1,,2 -p 1 -n 1",
                                      "generate --model " + kQwen + " --ids 1 2,,3", "tasks --task dictionary --seeds 1 2,,3 --items 1"}) {
            INFO(bad);
            const Run r = run_cli(bad);
            CHECK(r.rc == 2);
            CHECK(r.err.find("has an empty entry") != std::string::npos);
        }
        CHECK(run_cli("tasks --task dictionary --seeds 1,2 --items 1").rc == 0);
        // A list's values end at the next option: an empty value there is that option's, not the list's.
        const Run next = run_cli("generate --model " + kQwen + " --ids 1 2 --max-new ''");
        CHECK(next.rc == 2);
        CHECK(next.err.find("--ids") == std::string::npos);
        CHECK(next.err.find("--max-new") != std::string::npos);
        // another option's text value is not scanned as a list or an option
        for (const std::string& text : {std::string("--prompt=--ids=1,,2"), std::string("--prompt 'a,,b'"),
                                        std::string("--prompt '--ids=1,,2'")}) {
            INFO(text);
            CHECK(run_cli("generate --model " + kQwen + " --tokenizer " + kQwen + "/none.json " + text).err.find(
                      "has an empty entry") == std::string::npos);
        }
        const Run chat_ids = run_cli("generate --model " + kQwen + " --ids 1,2 --chat");  // --chat was ignored
        CHECK(chat_ids.rc == 1);
        CHECK(chat_ids.err.find("--chat wraps text input") != std::string::npos);
        // A count below its least value names it (CLI11's PositiveNumber printed a 309-digit range).
        const Run items0 = run_cli("experiment channels --model " + kQwen + " --task dictionary --items 0 --out " +
                                   tmp("items0").string());
        CHECK(items0.rc == 2);
        CHECK(items0.err.find("--items: must be at least 1 (got 0)") != std::string::npos);
        CHECK(items0.err.size() < 300);
        // A tokenizer file that does not exist is a usage error in every command that takes one.
        for (const std::string& cmd : {std::string("tokenize"), std::string("detokenize"), "generate --model " + kQwen + " --prompt hi"}) {
            INFO(cmd);
            const Run r = run_cli(cmd + " --tokenizer /nonexistent/tokenizer.json </dev/null");
            CHECK(r.rc == 2);
            CHECK(r.err.find("/nonexistent/tokenizer.json") != std::string::npos);
        }
        // An output file that cannot be written is refused before the model runs, and no other
        // output is written (dump wrote --out, then failed on --json).
        const fs::path written = tmp("written.safetensors");
        CHECK(run_cli("dump --model " + kQwen + " --ids 1,2 --out -").err.find("'-' (stdout) is for --json") != std::string::npos);
        for (const std::string& cmd : {"dump --model " + kQwen + " --ids 1,2 --out " + written.string(),
                                       "top-k --model " + kQwen + " --ids 1,2", "generate --model " + kQwen + " --ids 1,2"}) {
            for (const std::string& bad : {std::string("/nonexistent/x.json"), fs::temp_directory_path().string()}) {
                INFO(cmd, " --json ", bad);
                const Run r = run_cli(cmd + " --json " + bad);
                CHECK(r.rc == 2);
                CHECK(r.err.find(bad) != std::string::npos);
                CHECK_FALSE(fs::exists(written));
            }
        }
        // Runtime errors (not usage errors) are exit 1 with a message.
        const Run missing = run_cli("generate --model " + kQwen + " --prompt hello");  // no tokenizer.json there
        CHECK(missing.rc == 1);
        CHECK(missing.err.find("--tokenizer") != std::string::npos);
    }

    TEST_CASE("generate: greedy equals the library, text through the tokenizer, seeded sampling reproduces") {
        const fs::path j = tmp("gen.json");
        const std::vector<std::int64_t> prompt = {5, 17, 42, 7};
        REQUIRE(run_cli("generate --model " + kQwen + " --ids " + join(prompt) + " --max-new 6 --no-stop --json " +
                       j.string())
                    .rc == 0);
        const auto model = load_as<Qwen35Model>(kQwen);
        auto cache = model.new_cache(1);
        GenerateOptions g;
        g.max_new = 6;
        const auto lib = generate(model, cache, TokenBatch(prompt), g).ids[0];
        CHECK(json_of(j)["generated"]["ids"].get<std::vector<std::int64_t>>() == lib);
        // --json -: stdout is one JSON document; the answer is shown on stderr instead.
        const Run to_stdout = run_cli("generate --model " + kQwen + " --tokenizer " + kBytes + " --ids " + join(prompt) +
                                      " --max-new 6 --no-stop --json -");
        REQUIRE(to_stdout.rc == 0);
        const nlohmann::json shown = nlohmann::json::parse(to_stdout.out);
        CHECK(shown["generated"]["ids"].get<std::vector<std::int64_t>>() == lib);
        CHECK(to_stdout.err == shown["generated"]["text"].get<std::string>() + "\n");
        // Without a tokenizer the answer is its ids, shown on stderr once.
        const Run ids_only = run_cli("generate --model " + kQwen + " --ids " + join(prompt) + " --max-new 6 --no-stop --json -");
        REQUIRE(ids_only.rc == 0);
        CHECK(nlohmann::json::parse(ids_only.out)["generated"]["ids"].get<std::vector<std::int64_t>>() == lib);
        std::string spaced;
        for (const auto id : lib) spaced += (spaced.empty() ? "" : " ") + std::to_string(id);
        CHECK(ids_only.err == spaced + "\n");
        // --no-mmap reads the weights into memory: the same answer.
        REQUIRE(run_cli("generate --model " + kQwen + " --ids " + join(prompt) + " --max-new 6 --no-stop --no-mmap --json " +
                        j.string())
                    .rc == 0);
        CHECK(json_of(j)["generated"]["ids"].get<std::vector<std::int64_t>>() == lib);

        // Text in, text out: the prompt is the tokenizer's encoding, the output its decoding.
        const Tokenizer tok = Tokenizer::from_file(kBytes);
        const Run t = run_cli("generate --model " + kQwen + " --tokenizer " + kBytes +
                             " --prompt 'Hello world' --max-new 5 --no-stop --json " + j.string());
        REQUIRE(t.rc == 0);
        const nlohmann::json r = json_of(j);
        const auto enc = tok.encode("Hello world", {.add_special = true}).ids;
        CHECK(r["prompt"]["ids"].get<std::vector<std::int64_t>>() == std::vector<std::int64_t>(enc.begin(), enc.end()));
        const auto ids = r["generated"]["ids"].get<std::vector<std::int64_t>>();
        CHECK(ids.size() == 5);
        CHECK(t.out == tok.decode(std::vector<Tokenizer::TokenId>(ids.begin(), ids.end())) + "\n");

        // Sampling: one seed, one output; another seed, another output (fixed PRNG: this holds on
        // every machine); greedy stays the default.
        const std::string base = "generate --model " + kQwen + " --ids " + join(prompt) + " --max-new 12 --no-stop --temperature 1.5 ";
        const auto sampled = [&](const std::string& extra) {
            REQUIRE(run_cli(base + extra + " --json " + j.string()).rc == 0);
            return json_of(j)["generated"]["ids"].get<std::vector<std::int64_t>>();
        };
        const auto s1 = sampled("--seed 1"), s1b = sampled("--seed 1"), s2 = sampled("--seed 2");
        CHECK(s1 == s1b);
        CHECK(s1 != s2);
        CHECK(s1 != lib);
        CHECK(sampled("--seed 1 --top-k 1") == std::vector<std::int64_t>(sampled("--seed 9 --top-k 1")));
        fs::remove(j);
    }

    TEST_CASE("bench: one JSON object per (test, threads) with the documented fields, usage errors exit 2") {
        // (model, rounding, prefill floor): the bf16 product's floor only for bf16 matrices with
        // rounded activations.
        const std::string bf16_model = kQwen + "/model-bf16";
        for (const auto& [model, rounding, floor] : {std::tuple<std::string, bool, std::string>{kQwen, false, "f32_gemm_gflops"},
                                                     {kQwen, true, "f32_gemm_gflops"},
                                                     {bf16_model, false, "f32_gemm_gflops"},
                                                     {bf16_model, true, "bf16_gemm_gflops"}}) {
            INFO(model << " rounding " << rounding);
            const Run r = run_cli("bench --model " + model + " -p 8 -n 2 -r 2 -t 1 --json" +
                                  (rounding ? " --bf16-activations --simd baseline" : ""));
            REQUIRE(r.rc == 0);
            std::istringstream lines(r.out);
            std::vector<nlohmann::json> rows;
            for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
            REQUIRE(rows.size() == 2);
            CHECK(rows[0]["test"] == "pp8");
            CHECK(rows[1]["test"] == "tg2");
            for (const auto& j : rows) {
                INFO(j.dump());
                CHECK(j["threads"] == 1);
                CHECK(j["samples_ts"].size() == 2);
                CHECK(j["median_ts"].get<double>() > 0);
                CHECK(j["floor_value"].get<double>() > 0);
                CHECK(j["fraction_of_floor"].get<double>() ==
                      doctest::Approx(j["median_ts"].get<double>() / j["floor_value"].get<double>()));
                // The floor is the better of its measurements before and after the test.
                const double before = j["floor_rate_before"].get<double>(), after = j["floor_rate_after"].get<double>();
                CHECK(before > 0);
                CHECK(after > 0);
                CHECK(j["floor_rate"].get<double>() == std::max(before, after));
                CHECK(j["floor_spread"].get<double>() == doctest::Approx(std::min(before, after) / std::max(before, after)));
                // Measured between the repetitions too: each repetition's tokens/s over the better
                // of the floors just before and after it (tokens/s of a floor are proportional to
                // its rate: floor_value / floor_rate), and their median.
                const auto rates = j["floor_rates"].get<std::vector<double>>();
                const auto samples = j["samples_ts"].get<std::vector<double>>();
                const auto paired = j["paired_fractions"].get<std::vector<double>>();
                REQUIRE(rates.size() == 3);
                REQUIRE(paired.size() == 2);
                CHECK(rates.front() == before);
                CHECK(rates.back() == after);
                const double ts_per_rate = j["floor_value"].get<double>() / j["floor_rate"].get<double>();
                for (std::size_t i = 0; i < 2; ++i)
                    CHECK(paired[i] == doctest::Approx(samples[i] / (std::max(rates[i], rates[i + 1]) * ts_per_rate)));
                CHECK(j["paired_fraction_of_floor"].get<double>() == doctest::Approx(0.5 * (paired[0] + paired[1])));
                CHECK(j["bf16_activations"] == rounding);
                CHECK(j["weights"] == "mapped");
                // One thread: every range runs inline, no parallel region.
                CHECK(j["pool_regions_per_token"].get<double>() == 0);
                CHECK(j["pool_wait_fraction"].get<double>() == 0);
                CHECK(j["pool_between_fraction"].get<double>() == 0);
                if (rounding) CHECK(j["simd"] == "baseline");
            }
            CHECK(rows[0]["floor_name"] == floor);
            CHECK(rows[1]["floor_name"] == "read_gbps");
            // The decode floor divides the read rate by the weights' bytes and the caches' bytes
            // of a step. The caches by hand from config.json, for -n 2 (mean attended length 0.5):
            // 6 DeltaNet layers, each state (4 value heads x 16 x 24) and conv window (channels
            // 2 x 2 x 16 + 4 x 24 = 160, kernel 4) read and written in float32; 2 attention layers,
            // K and V of 2 heads x 32 read at 0.5 positions and written at one.
            const double cache = 6.0 * 2 * 4 * (4 * 16 * 24 + 160 * 4) + 2.0 * 2 * 2 * 32 * 4 * (0.5 + 1);
            CHECK(rows[1]["cache_bytes"].get<double>() == cache);
            CHECK(rows[1]["weight_bytes"].get<double>() > 0);
            CHECK(rows[1]["floor_value"].get<double>() ==
                  doctest::Approx(rows[1]["floor_rate"].get<double>() * 1e9 /
                                  (rows[1]["weight_bytes"].get<double>() + cache)));
            CHECK_FALSE(rows[0].contains("cache_bytes"));
            // The prefill floor counts the head (untied lm_head, 320 x 64) once for the last
            // token's logits and the other matrices per token: pp8.
            CHECK(rows[0]["head_elements"].get<double>() == 320.0 * 64);
            const double E = rows[0]["matrix_elements"].get<double>(), H = 320.0 * 64;
            CHECK(E > H);
            CHECK(rows[0]["floor_value"].get<double>() ==
                  doctest::Approx(rows[0]["floor_rate"].get<double>() * 1e9 * 8 / (2 * ((E - H) * 8 + H))));
            CHECK_FALSE(rows[1].contains("head_elements"));
        }
        {  // Two threads: the decode step's regions (ThreadPool::RegionStats), the fractions of the timed runs
            const Run r = run_cli("bench --model " + kQwen + " -p 4 -n 3 -r 2 -t 2 --json");
            REQUIRE(r.rc == 0);
            std::istringstream lines(r.out);
            int rows = 0;
            for (std::string line; std::getline(lines, line); ++rows) {
                const auto j = nlohmann::json::parse(line);
                INFO(j.dump());
                CHECK(j["threads"] == 2);
                CHECK(j["pool_regions_per_token"].get<double>() > 0);
                const double wait = j["pool_wait_fraction"].get<double>(), between = j["pool_between_fraction"].get<double>();
                CHECK(wait >= 0);
                CHECK(between >= 0);
                CHECK(wait + between < 1);
            }
            CHECK(rows == 2);
        }
        {  // --no-mmap: the weights read into memory, said in every row
            const Run r = run_cli("bench --model " + kQwen + " -p 4 -n 2 -r 1 -t 1 --json --no-mmap");
            REQUIRE(r.rc == 0);
            std::istringstream lines(r.out);
            int rows = 0;
            for (std::string line; std::getline(lines, line); ++rows) CHECK(nlohmann::json::parse(line)["weights"] == "in_memory");
            CHECK(rows == 2);
        }
        {  // Without --simd and --bf16-activations, HYLENS_SIMD and HYLENS_BF16_ACTIVATIONS apply, as
           // in every other command (bench forced native and float32 activations over them).
            const std::string test = "bench --model " + bf16_model + " -p 4 -n 0 -r 1 -t 1 --json";
            const Run env = run_cli(test, "HYLENS_SIMD=baseline HYLENS_BF16_ACTIVATIONS=1");
            REQUIRE(env.rc == 0);
            const auto j = nlohmann::json::parse(env.out);
            CHECK(j["simd"] == "baseline");
            CHECK(j["bf16_activations"] == true);
            CHECK(j["floor_name"] == "bf16_gemm_gflops");
            const Run bad = run_cli(test, "HYLENS_SIMD=foo");  // said nothing and ran native
            CHECK(bad.rc == 1);
            CHECK(bad.err.find("unknown instruction-set level 'foo'") != std::string::npos);
            // The option wins over the variable.
            const Run opt = run_cli(test + " --simd baseline", "HYLENS_SIMD=foo");
            CHECK(opt.rc == 0);
        }
        CHECK(run_cli("bench --model " + kQwen + " --bogus").rc == 2);
        CHECK(run_cli("bench --model " + kQwen + " --simd sse9").rc == 2);
        CHECK(run_cli("bench --model " + kQwen + " -t 0").rc == 2);
    }

    TEST_CASE("top-k: the k most likely next tokens with softmax probabilities") {
        const fs::path j = tmp("topk.json");
        const std::vector<std::int64_t> prompt = {3, 1, 4, 1, 5};
        REQUIRE(run_cli("top-k --model " + kQwen + " --ids " + join(prompt) + " -k 4 --json " + j.string()).rc == 0);
        const auto model = load_as<Qwen35Model>(kQwen);
        auto cache = model.new_cache(1);
        ForwardOptions fo;
        fo.last_only = true;  // as the command runs it
        const Tensor3 lg = model.forward(TokenBatch(prompt), cache, fo);
        const std::size_t V = model.config().vocab;
        const float* row = lg.data();
        double mx = row[0], sum = 0;
        for (std::size_t v = 0; v < V; ++v) mx = std::max<double>(mx, row[v]);
        for (std::size_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
        const nlohmann::json top = json_of(j)["top_k"];
        REQUIRE(top.size() == 4);
        double prev = 2.0;
        for (const auto& t : top) {
            const auto id = t["id"].get<std::size_t>();
            // The tool is built at -O3, the tests at -O1: float32 sums round differently (~1e-6).
            CHECK(t["prob"].get<double>() == doctest::Approx(std::exp(row[id] - mx) / sum).epsilon(1e-4));
            CHECK(t["prob"].get<double>() <= prev);
            prev = t["prob"].get<double>();
        }
        std::size_t best = 0;
        for (std::size_t v = 1; v < V; ++v) best = row[v] > row[best] ? v : best;
        CHECK(top[0]["id"].get<std::size_t>() == best);
        const Run table = run_cli("top-k --model " + kQwen + " --ids " + join(prompt) + " -k 2");
        CHECK(table.rc == 0);
        CHECK(table.out.find("rank") == 0);

        // The model has 320 rows, the byte tokenizer 256 tokens: ids past it have a null text and
        // a marked table row (they had "" as their text, like a token that decodes to nothing).
        REQUIRE(run_cli("top-k --model " + kQwen + " --tokenizer " + kBytes + " --ids " + join(prompt) + " -k " +
                        std::to_string(V) + " --json " + j.string())
                    .rc == 0);
        std::size_t nulls = 0;
        const nlohmann::json all_ids = json_of(j)["top_k"];
        REQUIRE(all_ids.size() == V);
        for (const auto& t : all_ids) {
            const bool padding = t["id"].get<std::size_t>() >= 256;
            CHECK(t["text"].is_null() == padding);
            CHECK(t["text"].is_string() == !padding);
            nulls += padding;
        }
        CHECK(nulls == V - 256);
        const Run all = run_cli("top-k --model " + kQwen + " --tokenizer " + kBytes + " --ids " + join(prompt) + " -k " +
                                std::to_string(V));
        REQUIRE(all.rc == 0);
        std::size_t marked = 0;
        for (std::size_t at = all.out.find("(not a token of the tokenizer)"); at != std::string::npos;
             at = all.out.find("(not a token of the tokenizer)", at + 1))
            ++marked;
        CHECK(marked == V - 256);
        fs::remove(j);
    }

    TEST_CASE("dump, surgery and patch on ids equal their reference-file runs, on text they write JSON") {
        const fs::path sdir = fs::path(kGolden) / "surgery" / "qwen3_5_dense";
        const io::SafetensorsFile ref = io::SafetensorsFile::open(sdir / "surgery.safetensors");
        const io::SafetensorsFile gold = io::SafetensorsFile::open(fs::path(kQwen) / "golden.safetensors");
        const fs::path a = tmp("a.safetensors"), b = tmp("b.safetensors"), j = tmp("out.json");
        const std::string m = " --model " + kQwen + " ";

        REQUIRE(run_cli("dump" + m + "--input " + (fs::path(kQwen) / "golden.safetensors").string() + " --out " + a.string()).rc == 0);
        REQUIRE(run_cli("dump" + m + "--ids " + join(gold.read_i64("input_ids")) + " --decode-ids " +
                       join(gold.read_i64("decode.input_ids")) + " --out " + b.string() + " --json " + j.string())
                    .rc == 0);
        check_same_file(a, b);
        const nlohmann::json d = json_of(j);
        CHECK(d["predictions"].size() == gold.read_i64("input_ids").size());
        CHECK(d["predictions"][0]["next"].size() == 5);
        CHECK(d["tensors"]["logits"][1] == 320);

        REQUIRE(run_cli("surgery" + m + "--input " + (sdir / "surgery.safetensors").string() + " --out " + a.string()).rc == 0);
        REQUIRE(run_cli("surgery" + m + "--context-ids " + join(ref.read_i64("ctx_a.ids")) + " --context-b-ids " +
                       join(ref.read_i64("ctx_b.ids")) + " --query-ids " + join(ref.read_i64("query.ids")) +
                       " --kv-only-layers " + join(ref.read_i64("kv_only_layers.layers")) + " --swap-layers " +
                       join(ref.read_i64("swap_ka_rb_layers.layers")) + " --out " + b.string())
                    .rc == 0);
        check_same_file(a, b);
        REQUIRE(run_cli("surgery" + m + "--tokenizer " + kBytes +
                       " --context 'The key is blue.' --context-b 'The key is red.' --query ' Key:' --json " + j.string())
                    .rc == 0);
        const nlohmann::json s = json_of(j);
        CHECK(s["conditions"].size() == 10);
        CHECK(s["conditions"]["full"]["query_start"] == s["context_a"]["ids"].size());
        CHECK(s["conditions"]["rec_only"]["query_start"] == 0);
        CHECK(s["conditions"]["none"]["generated"].contains("text"));

        REQUIRE(run_cli("patch" + m + "--input " + (sdir / "surgery.safetensors").string() + " --out " + a.string()).rc == 0);
        REQUIRE(run_cli("patch" + m + "--donor-ids " + join(ref.read_i64("patch.donor.ids")) + " --host-ids " +
                       join(ref.read_i64("patch.host.ids")) + " --layers " + join(ref.read_i64("patch.layers")) +
                       " --attn-layer " + join(ref.read_i64("patch.attn_layer")) + " --out " + b.string() + " --json " +
                       j.string())
                    .rc == 0);
        check_same_file(a, b);
        CHECK(json_of(j)["next_tokens"].size() == 6);
        const Run uneven = run_cli("patch" + m + "--donor-ids 1,2,3 --host-ids 1,2 --json " + j.string());
        CHECK(uneven.rc == 1);
        CHECK(uneven.err.find("equal token length") != std::string::npos);
        for (const auto& p : {a, b, j}) fs::remove(p);
    }

    TEST_CASE("malformed inputs: an eos_token_id of another type, a batch of input ids") {
        const fs::path d = tmp("eos_model");
        fs::remove_all(d);
        fs::create_directories(d);
        for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(kQwen) / f, d / f);
        nlohmann::json cfg = json_of(d / "config.json");
        cfg["eos_token_id"] = "x";  // ignored, generation ran past the end of the answer
        std::ofstream(d / "config.json") << cfg.dump();
        const Run eos = run_cli("generate --model " + d.string() + " --ids 1,2 --max-new 2");
        CHECK(eos.rc == 1);
        CHECK(eos.err.find("eos_token_id must be a token id or a list of them, got \"x\"") != std::string::npos);
        // A config.json with Infinity (Python's json writes it: time_step_limit [0.0, Infinity])
        // still stops at its eos_token_id: the stop list was read with a parse that failed on it.
        const std::string plain = run_cli("generate --model " + d.string() + " --ids 1,2 --max-new 3 --no-stop").out;
        const std::string first = plain.substr(0, plain.find(' '));  // "261 317 179": the first id
        REQUIRE(first.find_first_not_of("0123456789") == std::string::npos);
        cfg["eos_token_id"] = std::stoll(first);
        std::ofstream(d / "config.json") << cfg.dump().insert(1, "\"time_step_limit_note\": [0.0, Infinity], ");
        const Run stops = run_cli("generate --model " + d.string() + " --ids 1,2 --max-new 3");
        CHECK(stops.rc == 0);
        CHECK(stops.out == first + "\n");
        // input_ids of shape [2, 3]: not one sequence of six tokens
        io::SafetensorsWriter w;
        const std::vector<std::int64_t> ids = {1, 2, 3, 4, 5, 6};
        w.add_i64("input_ids", {2, 3}, ids);
        const fs::path in = tmp("batch.safetensors");
        w.write(in);
        const Run batch = run_cli("dump --model " + kQwen + " --input " + in.string() + " --out " + tmp("o.safetensors").string());
        CHECK(batch.rc == 1);
        CHECK(batch.err.find("tensor 'input_ids' has shape [2, 3]; one sequence of token ids is [n] or [1, n]") !=
              std::string::npos);
        io::SafetensorsWriter one;
        one.add_i64("input_ids", {1, 6}, ids);
        one.write(in);
        CHECK(run_cli("dump --model " + kQwen + " --input " + in.string() + " --out " + tmp("o.safetensors").string()).rc == 0);
        {  // BOOL input_ids (a mask) ran as the ids 0 and 1
            const std::string header = R"({"input_ids":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
            std::string file(8, '\0');
            file[0] = static_cast<char>(header.size());
            std::ofstream(in, std::ios::binary) << file << header << std::string("\x01\x00\x01", 3);
            const Run mask = run_cli("dump --model " + kQwen + " --input " + in.string() + " --out " + tmp("o.safetensors").string());
            CHECK(mask.rc == 1);
            CHECK(mask.err.find("tensor 'input_ids' is BOOL; one sequence of token ids is an integer tensor") != std::string::npos);
        }
        {  // patch.layers: a table [2, 2] ran as the list 1 2 1 2, a BOOL mask [1, 0, 1] as the layers {0, 1}
            const auto patch_file = [&](auto add_layers) {
                io::SafetensorsWriter p;
                const std::vector<std::int64_t> d = {1, 2, 3}, h = {4, 5, 6}, attn = {3};
                p.add_i64("patch.donor.ids", {3}, d);
                p.add_i64("patch.host.ids", {3}, h);
                p.add_i64("patch.attn_layer", {1}, attn);
                add_layers(p);
                p.write(in);
                return run_cli("patch --model " + kQwen + " --input " + in.string() + " --out " + tmp("o.safetensors").string());
            };
            const std::vector<std::int64_t> four = {1, 2, 1, 2};
            const Run table = patch_file([&](io::SafetensorsWriter& p) { p.add_i64("patch.layers", {2, 2}, four); });
            CHECK(table.rc == 1);
            CHECK(table.err.find("tensor 'patch.layers' has shape [2, 2]; a list of layer indices is [n] or [1, n]") !=
                  std::string::npos);
            const std::vector<std::byte> bits = {std::byte{1}, std::byte{0}, std::byte{1}};
            const Run mask = patch_file([&](io::SafetensorsWriter& p) { p.add("patch.layers", DType::BOOL, {3}, bits); });
            CHECK(mask.rc == 1);
            CHECK(mask.err.find("tensor 'patch.layers' is BOOL; a list of layer indices is an integer tensor") != std::string::npos);
            const std::vector<std::int64_t> two = {0, 2};
            CHECK(patch_file([&](io::SafetensorsWriter& p) { p.add_i64("patch.layers", {1, 2}, two); }).rc == 0);
        }
        {  // patch.attn_layer: a BOOL [true] ran as layer 1
            io::SafetensorsWriter p;
            const std::vector<std::int64_t> d = {1, 2, 3}, h = {4, 5, 6}, layers = {0};
            const std::vector<std::byte> yes = {std::byte{1}};
            p.add_i64("patch.donor.ids", {3}, d);
            p.add_i64("patch.host.ids", {3}, h);
            p.add_i64("patch.layers", {1}, layers);
            p.add("patch.attn_layer", DType::BOOL, {1}, yes);
            p.write(in);
            const Run attn = run_cli("patch --model " + kQwen + " --input " + in.string() + " --out " + tmp("o.safetensors").string());
            CHECK(attn.rc == 1);
            CHECK(attn.err.find("tensor 'patch.attn_layer' is BOOL; a list of layer indices is an integer tensor") !=
                  std::string::npos);
        }
        fs::remove(in);
        fs::remove(tmp("o.safetensors"));
        fs::remove_all(d);
    }

    TEST_CASE("damaged weights: generate stops with the layer and site, verify names the tensor") {
        const std::string bad = "model.language_model.layers.2.mlp.down_proj.weight";
        const fs::path dir = test::damaged_model(kQwen, tmp("damaged"), bad);
        const Run g = run_cli("generate --model " + dir.string() + " --ids 1,2,3 --max-new 2");
        CHECK(g.rc == 1);
        CHECK(g.err.find("non-finite") != std::string::npos);
        CHECK(g.err.find("layer 2, site mlp_out") != std::string::npos);
        CHECK(g.out.empty());
        CHECK(run_cli("top-k --model " + dir.string() + " --ids 1,2,3").rc == 1);
        CHECK(run_cli("dump --model " + dir.string() + " --ids 1,2,3 --json -").rc == 1);
        const Run v = run_cli("verify --model " + dir.string());
        CHECK(v.rc == 1);
        CHECK(v.out.find(bad) != std::string::npos);
        CHECK(v.out.find("3 of") != std::string::npos);
        CHECK(v.out.find("at index [0, 0]") != std::string::npos);
        const Run ok = run_cli("verify --model " + kQwen);
        CHECK(ok.rc == 0);
        CHECK(ok.out.find("all finite") != std::string::npos);

        // An index that leaves the damaged tensor out: the loader ignores it, verify still scans
        // and names it (it scanned only the index's names and said "all finite").
        nlohmann::json map = nlohmann::json::object();
        for (const std::string& n : io::SafetensorsFile::open(dir / "model.safetensors").names())
            if (n != bad) map[n] = "model.safetensors";
        std::ofstream(dir / "model.safetensors.index.json") << nlohmann::json{{"weight_map", map}}.dump();
        const Run unlisted = run_cli("verify --model " + dir.string());
        CHECK(unlisted.rc == 1);
        CHECK(unlisted.out.find("not in the index: " + bad + " (in model.safetensors; the loader ignores it)") !=
              std::string::npos);
        CHECK(unlisted.out.find("non-finite: " + bad) != std::string::npos);
        CHECK(unlisted.out.find(", 1 not in the index: 1 tensor(s) hold non-finite values") != std::string::npos);
        fs::remove_all(dir);
    }
}
