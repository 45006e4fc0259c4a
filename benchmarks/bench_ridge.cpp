// The ridge fit (interp/ridge.hpp, LAPACK: dsyrk + dsyevd + dgemm) against the hand-written
// solver it replaced (interp/ridge_reference.hpp), block_map variant, at 4k and 16k features:
//   features_4k:  X [2560, 4096] -> T [2560, 256]: dual (2048 training rows), Gram 2048 x 2048;
//   features_16k: X [2000, 16384] -> T [2000, 256]: dual (1600 training rows), as in the
//                 query-map fits of §A.10 where the donor feature is a block's concatenated
//                 mixer outputs (9 x 1536 = 13,824 for a Granite block).
// Both cases are dual: a primal 4096-feature case would eigen-decompose a 4096 x 4096 Gram
// matrix, which takes the hand-written solver over an hour on a shared 2-core machine; the
// primal route uses the same eigensolver and adds only the dsyrk of the floor.
// Each case reports seconds per fit and the floor: the time of the dsyrk that forms the Gram
// matrix alone (no fit can be faster), measured in the same process; `of_floor` = floor /
// fit time. The hand-written solver is timed once per case (it takes minutes); the LAPACK
// solver three times. Both run single-threaded (Ridge::Options::threads = 1, the default; the
// floor's dsyrk too); ridge.hpp says why more OpenBLAS threads are not the default.
// Run: bench_ridge --benchmark_filter=4k (or 16k); the machine is shared, so compare the two
// solvers within one run.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <hylens/interp/ridge.hpp>
#include <hylens/interp/ridge_reference.hpp>

namespace {

struct Data {
    std::vector<float> X, T;
    std::size_t n;
};

// splitmix64 noise; T = X W + noise with a low-rank W so the fit has signal.
Data make_data(std::size_t n, std::size_t dx, std::size_t dt) {
    std::uint64_t s = 42;
    auto next = [&] {
        std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
    };
    Data d{std::vector<float>(n * dx), std::vector<float>(n * dt, 0.0f), n};
    for (auto& x : d.X) x = next();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t o = 0; o < dt; ++o) d.T[i * dt + o] = d.X[i * dx + o % dx] - 0.5f * d.X[i * dx + (3 * o + 1) % dx] + 0.1f * next();
    return d;
}

// Seconds of the Gram product alone (dsyrk on the centred training rows), median of 3.
double gram_floor_seconds(const Data& d) {
    const hylens::RidgeProblem pb = hylens::ridge_problem(d.X, d.T, d.n, hylens::RidgeVariant::block_map, 0);
    const bool primal = pb.dx <= pb.nt;
    const std::size_t r = primal ? pb.dx : pb.nt;
    std::vector<double> G(r * r);
    hylens::detail::OpenblasThreads threads(1);
    std::vector<double> t;
    for (int k = 0; k < 3; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        cblas_dsyrk(CblasRowMajor, CblasUpper, primal ? CblasTrans : CblasNoTrans, static_cast<int>(r),
                    static_cast<int>(primal ? pb.nt : pb.dx), 1.0, pb.Xt.data(), static_cast<int>(pb.dx), 0.0, G.data(),
                    static_cast<int>(r));
        benchmark::DoNotOptimize(G.data());
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[1];
}

template <bool Lapack>
void run(benchmark::State& state, std::size_t n, std::size_t dx, std::size_t dt) {
    const Data d = make_data(n, dx, dt);
    const double floor = gram_floor_seconds(d);
    double r2 = 0.0;
    for (auto _ : state) {
        const hylens::Ridge r = Lapack ? hylens::Ridge::fit(d.X, d.T, d.n, {hylens::RidgeVariant::block_map, 0, 1})
                                       : hylens::Ridge::fit(d.X, d.T, d.n, {hylens::RidgeVariant::block_map, 0, 1},
                                                            hylens::reference::ridge_solve_loops);
        r2 = r.r2();
        benchmark::DoNotOptimize(r.W().data());
    }
    state.counters["r2"] = r2;
    state.counters["floor_s"] = floor;
    state.counters["of_floor"] = benchmark::Counter(floor * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate);
}

void features_4k_lapack(benchmark::State& s) { run<true>(s, 2560, 4096, 256); }
void features_4k_loops(benchmark::State& s) { run<false>(s, 2560, 4096, 256); }
void features_16k_lapack(benchmark::State& s) { run<true>(s, 2000, 16384, 256); }
void features_16k_loops(benchmark::State& s) { run<false>(s, 2000, 16384, 256); }

}  // namespace

BENCHMARK(features_4k_lapack)->Unit(benchmark::kSecond)->Iterations(3)->UseRealTime();
BENCHMARK(features_4k_loops)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK(features_16k_lapack)->Unit(benchmark::kSecond)->Iterations(3)->UseRealTime();
BENCHMARK(features_16k_loops)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
