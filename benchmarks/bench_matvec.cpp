// The decode projection y = W x (kernels::matvec, what linear() runs for M <= 4) at every
// instruction-set level this CPU supports, forced in turn (core/simd.hpp), against the previous
// f32 path (sgemm with M = 1 on the pool) and against the pool's triad bandwidth measured in
// the same process (floors.hpp). Weights stream from memory as in a real decode step: each
// iteration walks the next of 8 matrices of [3584, 1024] (8 x 14.7 MB f32, far past the
// last-level cache), so no matrix is still cached when it comes round again.

#include <hylens/core/blas.hpp>
#include <hylens/core/simd.hpp>
#include <hylens/kernels/matvec.hpp>

#include <benchmark/benchmark.h>

#include <vector>

#include "floors.hpp"

using namespace hylens;

namespace {

constexpr std::size_t kOut = 3584, kIn = 1024, kMats = 8;

template <class T>
const std::vector<T>& weights() {
    static const std::vector<T> w = [] {
        std::vector<T> v(kMats * kOut * kIn);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const float f = static_cast<float>(i % 1013) * 1e-3f - 0.5f;
            if constexpr (std::is_same_v<T, bf16>) v[i] = to_bf16(f); else v[i] = f;
        }
        return v;
    }();
    return w;
}

template <class T>
void BM_matvec(benchmark::State& state) {
    const auto level = static_cast<simd::Level>(state.range(0));
    if (static_cast<int>(level) > static_cast<int>(simd::detected())) {
        state.SkipWithError("level not supported by this CPU");
        return;
    }
    simd::ForceLevel force(level);
    const auto& w = weights<T>();
    std::vector<float> x(kIn, 0.01f), y(kOut);
    std::size_t k = 0;
    for (auto _ : state) {
        kernels::matvec(x.data(), kIn, 1, w.data() + (k++ % kMats) * kOut * kIn, kOut, kIn, y.data(), kOut);
        benchmark::DoNotOptimize(y.data());
    }
    state.SetLabel(simd::level_name(level));
    bench::report_bytes(state, static_cast<double>(kOut * kIn * sizeof(T)));
}

void BM_sgemm_m1(benchmark::State& state) {  // the f32 decode path before kernels/matvec.hpp
    const auto& w = weights<float>();
    std::vector<float> x(kIn, 0.01f), y(kOut);
    std::size_t k = 0;
    for (auto _ : state) {
        blas::gemm(false, true, 1, kOut, kIn, 1.0f, x.data(), kIn, w.data() + (k++ % kMats) * kOut * kIn, kIn, 0.0f,
                   y.data(), kOut);
        benchmark::DoNotOptimize(y.data());
    }
    bench::report_bytes(state, static_cast<double>(kOut * kIn * sizeof(float)));
}

}  // namespace

BENCHMARK(BM_matvec<float>)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_matvec<bf16>)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_sgemm_m1)->Unit(benchmark::kMicrosecond)->UseRealTime();
