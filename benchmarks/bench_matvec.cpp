// The decode projection y = W x (kernels::matvec, what linear() runs for M <= 4) at every
// instruction-set level this CPU supports, forced in turn (core/simd.hpp), against the previous
// f32 path (sgemm with M = 1 on the pool) and against the pool's triad bandwidth measured in
// the same process (floors.hpp). Weights stream from memory as in a real decode step: each
// iteration walks the next of 8 matrices of [3584, 1024] (8 x 14.7 MB f32, far past the
// last-level cache), so no matrix is still cached when it comes round again.
//
// BM_rowgroup: one thread, the detected level, the four-row kernel striding over groups of k
// consecutive rows (kernels/matvec.hpp, matvec_row_group): k = 1 is the order before row groups,
// k = 0 means the automatic choice. Same arithmetic per row, different memory streams.
//
// BM_group: two projections of one input as two parallel regions or one (kernels::linear_group).

#include <hylens/core/blas.hpp>
#include <hylens/core/simd.hpp>
#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/matvec.hpp>

#include <benchmark/benchmark.h>

#include <string>
#include <type_traits>
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

template <class T>
void rows_at_level(std::size_t k, const float* x, const T* W, float* y) {
    using namespace kernels::detail;
    switch (simd::f32_level(simd::detected())) {
#if HYLENS_SIMD_X86
        case simd::Level::avx512: return matvec_rows_at<Avx512Ops>(x, kIn, 1, W, kIn, 0, kOut, y, kOut, 1.0f, k);
        case simd::Level::avx2: return matvec_rows_at<Avx2Ops>(x, kIn, 1, W, kIn, 0, kOut, y, kOut, 1.0f, k);
#endif
        default: return matvec_rows_at<BaselineOps>(x, kIn, 1, W, kIn, 0, kOut, y, kOut, 1.0f, k);
    }
}

template <class T>
void BM_rowgroup(benchmark::State& state) {
    const auto k = state.range(0) == 0 ? kernels::detail::matvec_row_group(kIn * sizeof(T))
                                       : static_cast<std::size_t>(state.range(0));
    const auto& w = weights<T>();
    std::vector<float> x(kIn, 0.01f), y(kOut);
    std::size_t i = 0;
    for (auto _ : state) {
        rows_at_level<T>(k, x.data(), w.data() + (i++ % kMats) * kOut * kIn, y.data());
        benchmark::DoNotOptimize(y.data());
    }
    state.SetLabel(std::string(simd::level_name(simd::detected())) + " k=" + std::to_string(k));
    bench::report_bytes(state, static_cast<double>(kOut * kIn * sizeof(T)), /*single_thread=*/true);
}

// BM_call_rows: one thread, the dispatched level and row group, calls of R rows (arg) each, walking
// the 8 matrices of weights<T>() call after call, so every call starts four new memory streams
// on weights that come from memory: how much of the streaming rate a decode step's short
// projections keep (a step reads ~100 matrices of 0.03-7 MB; the read floor of `hylens bench`
// is one 256 MiB matrix).
template <class T>
void BM_call_rows(benchmark::State& state) {
    const auto rows = static_cast<std::size_t>(state.range(0));
    const std::size_t k = kernels::detail::matvec_stream_rows(kIn * sizeof(T), rows), total = kMats * kOut;
    const T* w = weights<T>().data();
    std::vector<float> x(kIn, 0.01f), y(rows);
    std::size_t o = 0;
    for (auto _ : state) {
        if (o + rows > total) o = 0;
        kernels::detail::matvec_rows(simd::detected(), x.data(), kIn, 1, w + o * kIn, kIn, 0, rows, y.data(), rows, 1.0f);
        o += rows;
        benchmark::DoNotOptimize(y.data());
    }
    state.SetLabel(std::to_string(rows * kIn * sizeof(T) >> 10) + " KiB a call, k=" + std::to_string(k));
    bench::report_bytes(state, static_cast<double>(rows * kIn * sizeof(T)), /*single_thread=*/true);
}

// BM_group: an MLP's gate and up projections ([3584, 1024] each, two of the 8 matrices in turn)
// at M = 1 on the pool, as two linear() calls (two parallel regions) or one linear_group()
// (one region over the rows of both); arg 1 = grouped.
template <class T>
void BM_group(benchmark::State& state) {
    const bool grouped = state.range(0) == 1;
    const auto& w = weights<T>();
    constexpr DType dt = std::is_same_v<T, bf16> ? DType::BF16 : DType::F32;
    std::vector<Weight> mats;
    for (std::size_t m = 0; m < kMats; ++m)
        mats.emplace_back(dt, w.data() + m * kOut * kIn, std::vector<std::size_t>{kOut, kIn}, nullptr);
    std::vector<float> x(kIn, 0.01f), y(2 * kOut);
    std::size_t k = 0;
    for (auto _ : state) {
        const Weight &gate = mats[k % kMats], &up = mats[(k + 1) % kMats];
        k += 2;
        if (grouped) {
            kernels::linear_group(x.data(), kIn, 1,
                                  {{gate, nullptr, y.data(), 2 * kOut}, {up, nullptr, y.data() + kOut, 2 * kOut}});
        } else {
            kernels::linear(x.data(), kIn, 1, gate, nullptr, y.data(), 2 * kOut);
            kernels::linear(x.data(), kIn, 1, up, nullptr, y.data() + kOut, 2 * kOut);
        }
        benchmark::DoNotOptimize(y.data());
    }
    state.SetLabel(grouped ? "linear_group" : "2 x linear");
    bench::report_bytes(state, 2.0 * kOut * kIn * sizeof(T));
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
BENCHMARK(BM_rowgroup<float>)->Arg(1)->Arg(2)->Arg(8)->Arg(16)->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_rowgroup<bf16>)->Arg(1)->Arg(2)->Arg(16)->Arg(32)->Arg(0)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_call_rows<float>)->Arg(64)->Arg(256)->Arg(1024)->Arg(3584)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_call_rows<bf16>)->Arg(64)->Arg(256)->Arg(1024)->Arg(3584)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_group<float>)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_group<bf16>)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_sgemm_m1)->Unit(benchmark::kMicrosecond)->UseRealTime();
