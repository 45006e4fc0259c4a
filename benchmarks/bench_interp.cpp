// Cost of the interpretability layer on a forward (the promise: with no intervention
// registered a forward costs the same as a plain one). A 64-token prefill of the shipped
// qwen3_5_dense and granite_h_dense models (tests/golden/models; small, so any per-site
// overhead shows more than it would on a real checkpoint):
//   plain        CausalLM::forward, no hook
//   run_empty    hylens::run(model, ids, {}) (no interventions, no captures)
//   run_capture  run() capturing one row (final position of the last layer's resid_post):
//                the hook is consulted at every site of every layer
//   run_patch    run() patching one mixer output row (a real intervention)
// BM_ratio times plain and run_empty interleaved in one loop and reports their ratio
// (target: within 2 %), and the same for run_capture. Run with --benchmark_repetitions=5
// --benchmark_report_aggregates_only=true: the machine is shared, take medians.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include <hylens/interp/run.hpp>
#include <hylens/models/load.hpp>

namespace {

std::filesystem::path model_dir(int which) {
    const auto root = std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" / "golden" / "models";
    return root / (which == 0 ? "qwen3_5_dense" : "granite_h_dense");
}

hylens::TokenBatch prompt(std::size_t vocab) {
    std::mt19937 rng(5);
    std::vector<std::int64_t> ids(64);
    for (auto& i : ids) i = static_cast<std::int64_t>(rng() % vocab);
    return hylens::TokenBatch(ids);
}

template <class F>
void for_model(int which, F&& f) {
    const hylens::AnyModel m = hylens::load(model_dir(which));
    m.visit([&](const auto& model) { f(model, prompt(model.config().vocab)); });
}

void BM_plain(benchmark::State& st) {
    for_model(static_cast<int>(st.range(0)), [&](const auto& m, const hylens::TokenBatch& ids) {
        for (auto _ : st) {
            auto c = m.new_cache(1);
            benchmark::DoNotOptimize(m.forward(ids, c));
        }
    });
}
void BM_run_empty(benchmark::State& st) {
    for_model(static_cast<int>(st.range(0)), [&](const auto& m, const hylens::TokenBatch& ids) {
        for (auto _ : st) benchmark::DoNotOptimize(hylens::run(m, ids, {}));
    });
}
void BM_run_capture(benchmark::State& st) {
    for_model(static_cast<int>(st.range(0)), [&](const auto& m, const hylens::TokenBatch& ids) {
        hylens::RunOptions o;
        o.capture = {hylens::site::resid_post(static_cast<int>(m.num_layers()) - 1, hylens::Positions::last())};
        for (auto _ : st) benchmark::DoNotOptimize(hylens::run(m, ids, {}, o));
    });
}
void BM_run_patch(benchmark::State& st) {
    for_model(static_cast<int>(st.range(0)), [&](const auto& m, const hylens::TokenBatch& ids) {
        const std::vector<hylens::Intervention> iv{
            hylens::patch(hylens::site::mixer_out(1, hylens::Positions::last()),
                          std::vector<float>(m.config().hidden, 0.5f))};
        for (auto _ : st) benchmark::DoNotOptimize(hylens::run(m, ids, iv));
    });
}

/// plain and run() interleaved, so that the machine's load drifts cancel in the ratio.
void BM_ratio(benchmark::State& st) {
    for_model(static_cast<int>(st.range(0)), [&](const auto& m, const hylens::TokenBatch& ids) {
        using clock = std::chrono::steady_clock;
        double t_plain = 0, t_empty = 0, t_cap = 0;
        hylens::RunOptions o;
        o.capture = {hylens::site::resid_post(static_cast<int>(m.num_layers()) - 1, hylens::Positions::last())};
        for (auto _ : st) {
            auto t0 = clock::now();
            auto c = m.new_cache(1);
            benchmark::DoNotOptimize(m.forward(ids, c));
            auto t1 = clock::now();
            benchmark::DoNotOptimize(hylens::run(m, ids, {}));
            auto t2 = clock::now();
            benchmark::DoNotOptimize(hylens::run(m, ids, {}, o));
            auto t3 = clock::now();
            t_plain += std::chrono::duration<double>(t1 - t0).count();
            t_empty += std::chrono::duration<double>(t2 - t1).count();
            t_cap += std::chrono::duration<double>(t3 - t2).count();
        }
        st.counters["run_empty/plain"] = t_empty / t_plain;
        st.counters["run_capture/plain"] = t_cap / t_plain;
    });
}

}  // namespace

// Arg 0: qwen3_5_dense, 1: granite_h_dense.
BENCHMARK(BM_plain)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_run_empty)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_run_capture)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_run_patch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ratio)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
