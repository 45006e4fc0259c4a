// Attention and projection kernels at real model shapes, each beside its floor measured in
// the same binary (benchmarks/floors.hpp):
//  * attention, Qwen3.5-0.8B full-attention layer: 8 query / 2 KV heads of 256;
//    prefill of 512 tokens (FLOPs: 2 * 2 * Hq * hd * visible keys, causal) against the
//    sgemm rate, and one decode step after 512 cached tokens (bytes: K and V read once)
//    against the triad bandwidth; the plain reference twin beside it.
//  * linear (the projections): Qwen3.5-0.8B MLP up projection [3584, 1024] in float32 and
//    bfloat16, for one decode token (bytes of the weight against bandwidth: bf16 moves half)
//    and for a 512-token prefill (FLOPs against sgemm: at levels avx2 and up linear runs our own
//    GEMM, kernels/gemm_nt.hpp, so its fraction of that floor is its speed-up over sgemm).
//  * the two GEMMs of each x86 level (avx2, avx512) for a prefill's projection, W [3584, 1024]
//    float32 evicted from the caches before each product (as a layer's weight arrives from
//    memory): W packed (isa/avx2_gemm.hpp, isa/avx512_gemm.hpp) and A packed
//    (isa/avx2_gemm_packed_a.hpp, isa/avx512_gemm_packed_a.hpp: linear()'s for few rows), at
//    M = 16 to 512 rows; the same bits, so the ratio of the two is what the rule in
//    kernels/gemm_nt.hpp (detail::packed_a_gemm) picks by.

#include <hylens/core/simd.hpp>
#include <hylens/kernels/attention.hpp>
#include <hylens/kernels/isa/avx2_gemm_packed_a.hpp>
#include <hylens/kernels/isa/avx512_gemm_packed_a.hpp>
#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/reference/attention.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "floors.hpp"

using namespace hylens;

namespace {

std::vector<float> random_vec(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

constexpr std::size_t kHq = 8, kHkv = 2, kHd = 256;

void BM_attention_prefill(benchmark::State& state, bool reference) {
    const std::size_t T = static_cast<std::size_t>(state.range(0));
    const auto q = random_vec(T * kHq * kHd, 1), K = random_vec(kHkv * T * kHd, 2), V = random_vec(kHkv * T * kHd, 3);
    std::vector<float> o(T * kHq * kHd);
    const kernels::AttentionShape s{T, T, kHq, kHkv, kHd};
    for (auto _ : state) {
        if (reference)
            reference::attention(s, q.data(), kHq * kHd, K.data(), V.data(), T * kHd, 0.0625f, o.data(), kHq * kHd);
        else
            kernels::attention(s, q.data(), kHq * kHd, K.data(), V.data(), T * kHd, 0.0625f, o.data(), kHq * kHd);
        benchmark::DoNotOptimize(o.data());
    }
    const double visible = static_cast<double>(T) * (T + 1) / 2.0;  // causal pairs
    bench::report_flops(state, 4.0 * kHq * kHd * visible);
}

void BM_attention_decode(benchmark::State& state) {
    const std::size_t L = static_cast<std::size_t>(state.range(0));
    const auto q = random_vec(kHq * kHd, 1), K = random_vec(kHkv * (L + 1) * kHd, 2),
               V = random_vec(kHkv * (L + 1) * kHd, 3);
    std::vector<float> o(kHq * kHd);
    const kernels::AttentionShape s{1, L + 1, kHq, kHkv, kHd};
    for (auto _ : state) {
        kernels::attention(s, q.data(), kHq * kHd, K.data(), V.data(), (L + 1) * kHd, 0.0625f, o.data(), kHq * kHd);
        benchmark::DoNotOptimize(o.data());
    }
    bench::report_bytes(state, 2.0 * 4.0 * kHkv * (L + 1) * kHd);
}

void BM_linear(benchmark::State& state, bool bf16) {
    const std::size_t M = static_cast<std::size_t>(state.range(0)), out = 3584, in = 1024;
    const auto wv = random_vec(out * in, 4);
    const Weight W = bf16 ? Weight::from_floats_bf16(wv, {out, in}) : Weight::from_floats(wv, {out, in});
    const auto x = random_vec(M * in, 5);
    std::vector<float> y(M * out);
    for (auto _ : state) {
        kernels::linear(x.data(), in, M, W, nullptr, y.data(), out);
        benchmark::DoNotOptimize(y.data());
    }
    if (M == 1)
        bench::report_bytes(state, static_cast<double>(out * in) * (bf16 ? 2.0 : 4.0));
    else
        bench::report_flops(state, 2.0 * M * out * in);
}

#if HYLENS_SIMD_X86
// One level's two GEMMs (PackedA: isa::avx2::PackedA or isa::avx512::PackedA; wpacked: that
// level's gemm_rows) for M rows of A times W [3584, 1024] evicted from the caches.
template <class PackedA, class WPacked>
void gemm_w_or_a_packed(benchmark::State& state, simd::Level level, bool pack_a, WPacked wpacked) {
    if (!simd::at_least(simd::detected(), level)) {
        state.SkipWithError("this level is not on this machine");
        return;
    }
    const std::size_t M = static_cast<std::size_t>(state.range(0)), N = 3584, K = 1024;
    const auto W = random_vec(N * K, 4), A = random_vec(M * K, 5);
    std::vector<float> C(M * N), pack(kernels::gemm_nt_pack_floats(K)), packed(PackedA::floats(M, K));
    std::vector<char> evict(64 << 20);
    char fill = 0;
    for (auto _ : state) {
        state.PauseTiming();
        std::memset(evict.data(), ++fill, evict.size());  // W out of the caches
        benchmark::DoNotOptimize(evict.data());
        state.ResumeTiming();
        if (pack_a) {
            PackedA::pack(A.data(), K, M, K, 0, PackedA::panels(M), packed.data());
            PackedA::rows(packed.data(), M, K, W.data(), K, 0, N, C.data(), N, 1.0f);
        } else {
            wpacked(A.data(), K, M, W.data(), K, K, 0, N, C.data(), N, 1.0f, pack.data());
        }
        benchmark::DoNotOptimize(C.data());
    }
    bench::report_flops(state, 2.0 * M * N * K, true);  // one thread
}

void BM_avx2_gemm(benchmark::State& state, bool pack_a) {
    namespace a2 = kernels::isa::avx2;
    gemm_w_or_a_packed<a2::PackedA>(state, simd::Level::avx2, pack_a, [](auto... args) { a2::gemm_rows(args...); });
}

void BM_avx512_gemm(benchmark::State& state, bool pack_a) {
    namespace a5 = kernels::isa::avx512;
    gemm_w_or_a_packed<a5::PackedA>(state, simd::Level::avx512, pack_a, [](auto... args) { a5::gemm_rows(args...); });
}
#endif

}  // namespace

BENCHMARK_CAPTURE(BM_attention_prefill, fast, false)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_attention_prefill, reference, true)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_decode)->Arg(16)->Arg(64)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_linear, f32, false)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_linear, bf16, true)->Arg(1)->Arg(512)->Unit(benchmark::kMicrosecond)->UseRealTime();
#if HYLENS_SIMD_X86
BENCHMARK_CAPTURE(BM_avx2_gemm, w_packed, false)->Arg(16)->Arg(64)->Arg(128)->Arg(192)->Arg(512)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_avx2_gemm, a_packed, true)->Arg(16)->Arg(64)->Arg(128)->Arg(192)->Arg(512)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_avx512_gemm, w_packed, false)->Arg(32)->Arg(64)->Arg(128)->Arg(192)->Arg(512)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_avx512_gemm, a_packed, true)->Arg(32)->Arg(64)->Arg(128)->Arg(192)->Arg(512)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif
