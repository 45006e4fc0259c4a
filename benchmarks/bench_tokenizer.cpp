// SPDX-License-Identifier: Apache-2.0
// Encoding throughput of hylens::Tokenizer on the tokenizer test corpus (10,200 lines, 1.03 MB,
// mixed scripts, emoji, code, whitespace runs, invalid UTF-8), one core, one line per encode
// call, as tools/tokenizer/bench_reference.js measures the reference implementations.
// Fixtures: the directory tests/text/tests.cmake unpacks (build/tokenizer_fixtures), found
// through $HYLENS_TOKENIZER_FIXTURES or next to the build tree.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "hylens/text/tokenizer.hpp"

namespace {

std::string fixtures_dir() {
    if (const char* env = std::getenv("HYLENS_TOKENIZER_FIXTURES")) return env;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
    for (const auto& dir : {exe / "../tokenizer_fixtures", exe / "tokenizer_fixtures", std::filesystem::path("tokenizer_fixtures")})
        if (std::filesystem::exists(dir / "corpus.txt")) return dir.string();
    return {};
}

struct Corpus {
    std::vector<std::string> lines;
    std::size_t bytes = 0;
};

const Corpus& corpus() {
    static const Corpus c = [] {
        Corpus out;
        std::ifstream in(fixtures_dir() + "/corpus.txt", std::ios::binary);
        std::string line;
        while (std::getline(in, line)) out.bytes += line.size() + 1, out.lines.push_back(line);
        return out;
    }();
    return c;
}

const hylens::Tokenizer* tokenizer(const std::string& name) {
    static std::map<std::string, std::unique_ptr<hylens::Tokenizer>> cache;
    auto& slot = cache[name];
    if (!slot) slot = std::make_unique<hylens::Tokenizer>(hylens::Tokenizer::from_file(fixtures_dir() + "/" + name + "/tokenizer.json"));
    return slot.get();
}

void encode_corpus(benchmark::State& state, const std::string& name, bool cold) {
    if (fixtures_dir().empty()) {
        state.SkipWithError("tokenizer fixtures not found: configure with tests on, or set HYLENS_TOKENIZER_FIXTURES");
        return;
    }
    const auto* tok = tokenizer(name);
    const auto& c = corpus();
    std::size_t tokens = 0;
    for (auto& line : c.lines) tokens += tok->encode(line).size();  // warm-up: fills the word cache
    for (auto _ : state) {
        if (cold) tok->model().clear_cache();
        for (const auto& line : c.lines) benchmark::DoNotOptimize(tok->encode(line));
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * c.bytes));
    state.counters["MB/s"] = benchmark::Counter(static_cast<double>(c.bytes) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["lines"] = static_cast<double>(c.lines.size());
}

void BM_encode_qwen3(benchmark::State& s) { encode_corpus(s, "qwen3", false); }
void BM_encode_llama3(benchmark::State& s) { encode_corpus(s, "llama3", false); }
void BM_encode_llama2(benchmark::State& s) { encode_corpus(s, "llama2", false); }
void BM_encode_gemma3(benchmark::State& s) { encode_corpus(s, "gemma3", false); }
void BM_encode_qwen3_cold_cache(benchmark::State& s) { encode_corpus(s, "qwen3", true); }

void BM_load_qwen3(benchmark::State& state) {
    if (fixtures_dir().empty()) return state.SkipWithError("tokenizer fixtures not found");
    for (auto _ : state) benchmark::DoNotOptimize(hylens::Tokenizer::from_file(fixtures_dir() + "/qwen3/tokenizer.json"));
}

}  // namespace

BENCHMARK(BM_encode_qwen3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_encode_llama3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_encode_llama2)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_encode_gemma3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_encode_qwen3_cold_cache)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_load_qwen3)->Unit(benchmark::kMillisecond)->Iterations(3);
