// Throughput of the channel-study runner (experiments/channel_study.hpp): records per second
// (one record = one item under one condition: an edited copy of the prefilled context cache,
// the query and the greedy answer) with items batched (StudyOptions::batch = 8 here; the default is 16)
// against one item at a time (batch = 1), measured in the same process on the same study.
//
// Model: Qwen3.5-0.8B-shaped (architectures: hidden 1024, 24 layers = 18 Gated DeltaNet + 6
// gated attention, GDN 16/16 heads x 128, attention 8/2 heads x 256 with 64 rotary dims,
// SwiGLU 3584), random bf16 weights, vocabulary cut to 4096 rows (the LM head is the only
// place the vocabulary enters; the real 248,320 rows would add 0.5 GB of random weights).
// Study: 8 items of one task whose contexts are 120 characters and queries 24 (byte-level
// test tokenizer: 126 and 56 tokens with the chat wrapper), 4 greedy tokens, the four
// split-prefill conditions: 32 records, all of one length (one batch of 8 when batched). The ratio batched / one-at-a-time is the figure that
// matters; the floor is one item at a time. Set HYLENS_BENCH_LAYERS to shorten the model.

#include <benchmark/benchmark.h>

#include <hylens/experiments/channel_study.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "../tests/experiments/fixtures.hpp"
#include "qwen35_shape.hpp"

namespace {

using Model = hylens::bench::Qwen35Model;

constexpr std::size_t kItems = 8;

std::size_t layers() {
    const char* s = std::getenv("HYLENS_BENCH_LAYERS");
    return s ? static_cast<std::size_t>(std::atoi(s)) : 24;
}

const Model& model() {
    static const Model m = hylens::bench::qwen35_08b_shaped(layers(), 7);
    return m;
}

/// Fixed-length items: 120 characters of context, a 24-character query.
const hylens::tasks::TaskSpec& task() {
    static const hylens::tasks::TaskSpec t = [] {
        hylens::tasks::TaskSpec s = hylens::test::lookup_task(false);
        s.name = "fixed";
        s.max_new = 4;
        s.make = [](std::uint64_t seed, std::size_t index) {
            hylens::tasks::Item it;
            it.task = "fixed";
            it.seed = seed;
            it.index = index;
            for (std::size_t i = 0; i < 120; ++i) it.context += static_cast<char>('a' + (i * 7 + index * 13) % 26);
            it.query = "\nWhat came at position " + std::to_string(10 + index % 90) + "?";
            it.query.resize(24, ' ');
            it.expected = {"x"};
            return it;
        };
        return s;
    }();
    return t;
}

double run_study(std::size_t batch) {
    hylens::experiments::StudyOptions o;
    o.tasks = {&task()};
    o.conditions = hylens::experiments::parse_conditions("FULL,KV_ONLY,REC_ONLY,NONE");
    o.items = kItems;
    o.seeds = {1};
    o.batch = batch;
    o.progress = false;
    o.bootstrap.resamples = 2;  // the statistics are not what is timed here
    o.out = std::filesystem::temp_directory_path() / ("hylens_bench_experiments_" + std::to_string(batch));
    std::filesystem::remove_all(o.out);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = hylens::experiments::run_channel_study(model(), hylens::test::tiny_tokenizer(),
                                                          hylens::ChatFamily::qwen35, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::filesystem::remove_all(o.out);
    return static_cast<double>(r.records) / s;
}

double one_at_a_time_rate = 0.0;  // records/s of batch = 1, measured first in this process

void BM_study_one_at_a_time(benchmark::State& state) {
    (void)model();
    for (auto _ : state) one_at_a_time_rate = run_study(1);
    state.counters["records_per_s"] = one_at_a_time_rate;
}
BENCHMARK(BM_study_one_at_a_time)->Iterations(1)->Unit(benchmark::kSecond);

void BM_study_batched(benchmark::State& state) {
    double rate = 0.0;
    for (auto _ : state) rate = run_study(static_cast<std::size_t>(state.range(0)));
    state.counters["records_per_s"] = rate;
    if (one_at_a_time_rate > 0) state.counters["x_one_at_a_time"] = rate / one_at_a_time_rate;
}
BENCHMARK(BM_study_batched)->Arg(8)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
