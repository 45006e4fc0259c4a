// Benchmarks of the recurrent kernels at real shapes, each beside its floor (floors.hpp):
//  * gated delta rule at Qwen3.5-0.8B (Hk = Hv = 16, dk = dv = 128);
//  * Mamba-2 SSD at Granite-4.0-H-1B (H = 48, P = 64, N = 128, G = 1);
//  * causal conv1d at their conv channel counts (6144 and 3328, K = 4).
// Prefill (T = 512) reports GFLOP/s against the pool sgemm rate; the FLOPs counted are those of
// the algorithm that runs (chunked: its products and the triangular solve; recurrent: its
// per-token passes), so forms with different FLOP counts are compared by time, not GFLOP/s.
// A decode step (T = 1) reports GB/s of state bytes read + written against the triad rate.
// Run with --benchmark_repetitions=5 --benchmark_report_aggregates_only=true: the machine is
// shared, take medians.

#include <benchmark/benchmark.h>

#include <cstddef>
#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <hylens/kernels/conv1d.hpp>
#include <hylens/kernels/gated_delta.hpp>
#include <hylens/kernels/reference/conv1d.hpp>
#include <hylens/kernels/reference/gated_delta.hpp>
#include <hylens/kernels/reference/ssd.hpp>
#include <hylens/kernels/ssd.hpp>

#include "floors.hpp"

namespace {

using hylens::kernels::GatedDeltaShape;
using hylens::kernels::SsdShape;

std::vector<float> randn(std::size_t n, float scale, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto& e : v) e = nd(rng);
    return v;
}
std::vector<float> uniform(std::size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> ud(lo, hi);
    std::vector<float> v(n);
    for (auto& e : v) e = ud(rng);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Gated delta rule

enum class Form { recurrent, chunked, dispatch, reference_recurrent, reference_chunked };

// FLOPs of the chunked algorithm (gated_delta.hpp detail::gdr_chunk), per value head and chunk
// of L tokens: [Q;K] K^T, the forward substitution, U and W, V_new, the two output products
// and the state hand-over. Elementwise scaling and the L2 norms are not counted.
double gdr_chunked_flops(const GatedDeltaShape& s, std::size_t chunk) {
    double f = 0;
    for (std::size_t t0 = 0; t0 < s.T; t0 += chunk) {
        const double L = static_cast<double>(std::min(chunk, s.T - t0)), dk = double(s.dk), dv = double(s.dv);
        f += 2 * (2 * L) * L * dk + L * L * L / 3 + 2 * L * L * (dv + dk) + 2 * L * dk * dv + 2 * L * dk * dv +
             2 * L * L * dv + 2 * dk * dv * L;
    }
    return f * double(s.Hv);
}
// FLOPs of the recurrent form: per token and head one pass doing S = aS + k u^T (3 per element)
// and the next token's S^T k, S^T q (4 per element).
double gdr_recurrent_flops(const GatedDeltaShape& s) { return 7.0 * s.dk * s.dv * s.T * s.Hv; }

// The rule the dispatch follows at the active level.
hylens::kernels::GatedDeltaDispatch gdr_rule() { return hylens::kernels::gated_delta_dispatch(hylens::simd::active()); }

struct GdrData {
    GatedDeltaShape s;
    std::vector<float> q, k, v, g, beta, state, out;
    explicit GdrData(GatedDeltaShape shape)
        : s(shape),
          q(randn(s.T * s.Hk * s.dk, 1.0f, 1)),
          k(randn(s.T * s.Hk * s.dk, 1.0f, 2)),
          v(randn(s.T * s.Hv * s.dv, 1.0f, 3)),
          g(uniform(s.T * s.Hv, -0.3f, 0.0f, 4)),
          beta(uniform(s.T * s.Hv, 0.1f, 0.9f, 5)),
          state(randn(s.Hv * s.dk * s.dv, 0.1f, 6)),
          out(s.T * s.Hv * s.dv) {}
    void run(Form form) {
        namespace K = hylens::kernels;
        namespace R = hylens::reference;
        const std::size_t lq = s.Hk * s.dk, lv = s.Hv * s.dv;
        switch (form) {
            case Form::recurrent:
                K::gated_delta_rule_recurrent(s, q.data(), lq, k.data(), lq, v.data(), lv, g.data(), beta.data(),
                                              state.data(), out.data(), lv, true);
                break;
            case Form::chunked:  // in the chunks the dispatch would take at this level
                K::gated_delta_rule_chunked(s, q.data(), lq, k.data(), lq, v.data(), lv, g.data(), beta.data(),
                                            state.data(), out.data(), lv, true, gdr_rule().chunk);
                break;
            case Form::dispatch:
                K::gated_delta_rule(s, q.data(), lq, k.data(), lq, v.data(), lv, g.data(), beta.data(), state.data(),
                                    out.data(), lv, true);
                break;
            case Form::reference_recurrent:
                R::gated_delta_rule_recurrent(s, q.data(), lq, k.data(), lq, v.data(), lv, g.data(), beta.data(),
                                              state.data(), out.data(), lv, true);
                break;
            case Form::reference_chunked:
                R::gated_delta_rule_chunked(s, q.data(), lq, k.data(), lq, v.data(), lv, g.data(), beta.data(),
                                            state.data(), out.data(), lv, true, 64);
                break;
        }
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
};

const GatedDeltaShape kQwenGdr{512, 16, 16, 128, 128};  // Qwen3.5-0.8B linear attention

void BM_gdr_prefill(benchmark::State& st, Form form) {
    GatedDeltaShape s = kQwenGdr;
    s.T = static_cast<std::size_t>(st.range(0));
    GdrData d(s);
    for (auto _ : st) d.run(form);
    const hylens::kernels::GatedDeltaDispatch rule = gdr_rule();
    const std::size_t chunk = form == Form::reference_chunked ? 64 : rule.chunk;
    const bool chunked = form == Form::chunked || form == Form::reference_chunked ||
                         (form == Form::dispatch && s.T >= rule.min_t);
    hylens::bench::report_flops(st, chunked ? gdr_chunked_flops(s, chunk) : gdr_recurrent_flops(s));
}

void BM_gdr_decode(benchmark::State& st) {
    GatedDeltaShape s = kQwenGdr;
    s.T = 1;
    GdrData d(s);
    for (auto _ : st) d.run(Form::dispatch);
    hylens::bench::report_bytes(st, 2.0 * 4.0 * s.Hv * s.dk * s.dv);  // state read + written
}

// ---------------------------------------------------------------------------------------------
// Mamba-2 SSD

// FLOPs of the chunked algorithm (ssd.hpp): C B^T per group and chunk, then per head and
// chunk C S^T, L (Delta x) and the state hand-over.
double ssd_chunked_flops(const SsdShape& s, std::size_t chunk) {
    double f = 0;
    for (std::size_t t0 = 0; t0 < s.T; t0 += chunk) {
        const double L = static_cast<double>(std::min(chunk, s.T - t0)), P = double(s.P), N = double(s.N);
        f += double(s.G) * 2 * L * L * N + double(s.H) * (2 * L * P * N + 2 * L * L * P + 2 * P * N * L);
    }
    return f;
}
// Recurrent: per token, head and state element a*S + dx*B (3) and the read S.C (2).
double ssd_recurrent_flops(const SsdShape& s) { return 5.0 * s.P * s.N * s.T * s.H; }

struct SsdData {
    SsdShape s;
    std::vector<float> x, B, C, dt, dt_bias, A, D, state, y;
    explicit SsdData(SsdShape shape)
        : s(shape),
          x(randn(s.T * s.H * s.P, 1.0f, 11)),
          B(randn(s.T * s.G * s.N, 1.0f, 12)),
          C(randn(s.T * s.G * s.N, 1.0f, 13)),
          dt(randn(s.T * s.H, 1.0f, 14)),
          dt_bias(uniform(s.H, -4.0f, -2.0f, 15)),
          A(uniform(s.H, -8.0f, -1.0f, 16)),
          D(randn(s.H, 1.0f, 17)),
          state(randn(s.H * s.P * s.N, 0.1f, 18)),
          y(s.T * s.H * s.P) {}
    void run(Form form) {
        namespace K = hylens::kernels;
        namespace R = hylens::reference;
        const float inf = std::numeric_limits<float>::infinity();
        const std::size_t lx = s.H * s.P, lbc = s.G * s.N;
        const auto args = [&](auto fn, auto... extra) {
            fn(s, x.data(), lx, B.data(), C.data(), lbc, dt.data(), s.H, dt_bias.data(), A.data(), D.data(), 0.0f,
               inf, state.data(), y.data(), lx, nullptr, extra...);
        };
        switch (form) {
            case Form::recurrent: args(K::ssd_recurrent); break;
            case Form::chunked: args(K::ssd_chunked, std::size_t{64}); break;
            case Form::dispatch: args(K::ssd); break;
            case Form::reference_recurrent: args(R::ssd_recurrent); break;
            case Form::reference_chunked: args(R::ssd_chunked, std::size_t{64}); break;
        }
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
};

const SsdShape kGraniteSsd{512, 48, 64, 128, 1};  // Granite-4.0-H-1B Mamba-2

void BM_ssd_prefill(benchmark::State& st, Form form) {
    SsdShape s = kGraniteSsd;
    s.T = static_cast<std::size_t>(st.range(0));
    SsdData d(s);
    for (auto _ : st) d.run(form);
    const bool chunked = form == Form::chunked || form == Form::reference_chunked ||
                         (form == Form::dispatch && s.T >= hylens::kernels::ssd_chunked_min_t(hylens::simd::active()));
    hylens::bench::report_flops(st, chunked ? ssd_chunked_flops(s, 64) : ssd_recurrent_flops(s));
}

void BM_ssd_decode(benchmark::State& st) {
    SsdShape s = kGraniteSsd;
    s.T = 1;
    SsdData d(s);
    for (auto _ : st) d.run(Form::dispatch);
    hylens::bench::report_bytes(st, 2.0 * 4.0 * s.H * s.P * s.N);  // state read + written
}

// ---------------------------------------------------------------------------------------------
// Causal conv1d: bytes = x read + y written + state read and written + weights.

void BM_conv1d(benchmark::State& st, bool reference) {
    const std::size_t C = static_cast<std::size_t>(st.range(0)), T = static_cast<std::size_t>(st.range(1)), K = 4;
    const auto x = randn(T * C, 1.0f, 21), w = randn(C * K, 0.5f, 22), bias = randn(C, 0.1f, 23);
    auto state = randn(C * K, 1.0f, 24);
    std::vector<float> y(T * C);
    for (auto _ : st) {
        if (reference)
            hylens::reference::causal_conv1d(x.data(), C, T, C, w.data(), K, bias.data(), state.data(), y.data(), C,
                                             true);
        else
            hylens::kernels::causal_conv1d(x.data(), C, T, C, w.data(), K, bias.data(), state.data(), y.data(), C,
                                           true);
        benchmark::DoNotOptimize(y.data());
    }
    hylens::bench::report_bytes(st, 4.0 * (2.0 * T * C + 3.0 * C * K + C));
}

}  // namespace

BENCHMARK_CAPTURE(BM_gdr_prefill, chunked, Form::chunked)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_gdr_prefill, recurrent, Form::recurrent)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_gdr_prefill, reference_recurrent, Form::reference_recurrent)
    ->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_gdr_prefill, reference_chunked, Form::reference_chunked)
    ->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
// The dispatch crossover: both forms over T.
BENCHMARK_CAPTURE(BM_gdr_prefill, crossover_chunked, Form::chunked)
    ->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_gdr_prefill, crossover_recurrent, Form::recurrent)
    ->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_gdr_decode)->Unit(benchmark::kMicrosecond)->UseRealTime();

BENCHMARK_CAPTURE(BM_ssd_prefill, chunked, Form::chunked)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ssd_prefill, recurrent, Form::recurrent)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ssd_prefill, reference_recurrent, Form::reference_recurrent)
    ->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ssd_prefill, reference_chunked, Form::reference_chunked)
    ->Arg(512)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ssd_prefill, crossover_chunked, Form::chunked)
    ->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ssd_prefill, crossover_recurrent, Form::recurrent)
    ->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ssd_decode)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Conv channels: Qwen3.5-0.8B [q | k | v] = 2*16*128 + 16*128; Granite-4.0-H-1B [x | B | C] = 48*64 + 2*128.
BENCHMARK_CAPTURE(BM_conv1d, fast, false)
    ->Args({6144, 512})->Args({6144, 1})->Args({3328, 512})->Args({3328, 1})->UseRealTime();
BENCHMARK_CAPTURE(BM_conv1d, reference, true)
    ->Args({6144, 512})->Args({6144, 1})->Args({3328, 512})->Args({3328, 1})->UseRealTime();
