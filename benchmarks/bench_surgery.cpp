// Cost of cache surgery against the prefill that produces the cache, on a Qwen3.5-0.8B-shaped
// model (families.md §3.10: hidden 1024, 24 layers = 18 Gated DeltaNet + 6 gated
// attention, GDN 16/16 heads x 128, attention 8/2 heads x 256 with 64 rotary dims, SwiGLU
// 3584) with random bf16 weights, after a 1,000-token context.
//
// The vocabulary is cut to 4096 rows: prefill() runs the stack without the LM head, and the
// embedding is a row lookup, so the vocabulary does not change the prefill time but would add
// 0.5 GB of random weights to draw.
//
// Every surgery figure carries the counter pct_of_prefill = 100 x (time of one op) / (time of
// the 1,000-token prefill measured in this process). The value-returning ops (keep_only,
// state_swap) include the copy of the whole cache (about 43 MB here: 6 x K/V of 1,000
// positions x 2 heads x 256, 18 x (1 MiB state + 96 KiB conv window)); the _in_place forms
// edit a cache the caller owns. Run with --benchmark_repetitions=3: the machine is shared.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <vector>

#include <hylens/cache/surgery.hpp>
#include <hylens/stack/causal_lm.hpp>

#include "qwen35_shape.hpp"

namespace {

using Model = hylens::bench::Qwen35Model;
using Cache = Model::cache_type;

constexpr std::size_t kLayers = 24, kVocab = hylens::bench::kQwen35Vocab, kContext = 1000;

Model make_model() { return hylens::bench::qwen35_08b_shaped(kLayers); }

struct Fixture {
    Model model = make_model();
    hylens::TokenBatch context;
    Cache a, b;
    double prefill_s = 0.0;  // best 1,000-token prefill seen in this process

    Fixture() {
        std::vector<std::int64_t> ids(kContext);
        for (std::size_t t = 0; t < kContext; ++t) ids[t] = static_cast<std::int64_t>((t * 7919) % kVocab);
        context = hylens::TokenBatch(ids);
        const auto t0 = std::chrono::steady_clock::now();
        a = model.prefill(context);
        prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        // The swap's second source: same shapes (the cost is the bytes moved, not their values).
        b = hylens::mask_state<hylens::channel::ssm>(a, hylens::LayerSet::all(), {0}, 0.5f);
        std::fprintf(stderr, "bench_surgery: 0.8B-shaped model built, first 1,000-token prefill %.2f s\n", prefill_s);
    }
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

/// Times `op` per iteration with our own clock and reports it as a percentage of the prefill.
template <class Op>
void run_op(benchmark::State& state, Op&& op) {
    Fixture& f = fixture();
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state) op(f);
    const double per_op = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                          static_cast<double>(state.iterations());
    state.counters["ms_per_op"] = per_op * 1e3;
    state.counters["prefill_s"] = f.prefill_s;
    state.counters["pct_of_prefill"] = 100.0 * per_op / f.prefill_s;
}

void BM_prefill_1000_tokens(benchmark::State& state) {
    Fixture& f = fixture();
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        Cache c = f.model.prefill(f.context);
        benchmark::DoNotOptimize(c);
        f.prefill_s = std::min(f.prefill_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    state.counters["prefill_s"] = f.prefill_s;
    state.counters["tokens_per_s"] = static_cast<double>(kContext) / f.prefill_s;
}
BENCHMARK(BM_prefill_1000_tokens)->Iterations(1)->Unit(benchmark::kSecond);

void BM_clone(benchmark::State& state) {
    run_op(state, [](Fixture& f) { benchmark::DoNotOptimize(hylens::clone(f.a)); });
}
BENCHMARK(BM_clone)->Unit(benchmark::kMillisecond);

void BM_keep_only_kv(benchmark::State& state) {
    run_op(state, [](Fixture& f) { benchmark::DoNotOptimize(hylens::keep_only<hylens::channel::kv>(f.a)); });
}
BENCHMARK(BM_keep_only_kv)->Unit(benchmark::kMillisecond);

void BM_keep_only_recurrent(benchmark::State& state) {
    run_op(state, [](Fixture& f) { benchmark::DoNotOptimize(hylens::keep_only<hylens::channel::recurrent>(f.a)); });
}
BENCHMARK(BM_keep_only_recurrent)->Unit(benchmark::kMillisecond);

void BM_state_swap(benchmark::State& state) {
    run_op(state, [](Fixture& f) { benchmark::DoNotOptimize(hylens::state_swap(f.a, f.b)); });
}
BENCHMARK(BM_state_swap)->Unit(benchmark::kMillisecond);

void BM_keep_only_kv_in_place(benchmark::State& state) {
    Cache c = fixture().a;
    run_op(state, [&](Fixture&) {
        hylens::keep_only_in_place<hylens::channel::kv>(c);
        benchmark::ClobberMemory();
    });
}
BENCHMARK(BM_keep_only_kv_in_place)->Unit(benchmark::kMillisecond);

void BM_state_swap_in_place(benchmark::State& state) {
    Cache c = fixture().a;
    run_op(state, [&](Fixture& f) {
        hylens::state_swap_in_place(c, f.b);
        benchmark::ClobberMemory();
    });
}
BENCHMARK(BM_state_swap_in_place)->Unit(benchmark::kMillisecond);

}  // namespace
