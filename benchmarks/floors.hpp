#pragma once
// Floors for the Google Benchmarks (docs/kernels.md, "Speed"): each benchmark reports its achieved rate
// beside what this machine can do, measured once per process in the same binary:
//   * sgemm GFLOP/s, 1024^3 row-major, single thread (blas::gemm_serial) and on the pool
//     (blas::gemm, our threads, OpenBLAS pinned to 1): the compute floor of FLOP-bound kernels;
//   * STREAM-like triad GB/s, a[i] = b[i] + s c[i] over 3 x 64 MiB (3 x 4 bytes per element,
//     write-allocate not counted, as STREAM), single thread and on the pool: the bandwidth
//     floor of kernels that move more bytes than they compute on.
// Each figure is the median of 7 timed runs after a warm-up. The machine is shared, so the
// figures move from run to run; compare a kernel with the floor of the same process.
//
// Use: hylens::bench::report_flops(state, flops_per_iteration) or report_bytes(...) at the end
// of a benchmark body; they add the rate, the floor and the fraction of the floor as counters.

#include <benchmark/benchmark.h>

#include <algorithm>  // std::sort
#include <chrono>     // std::chrono::steady_clock
#include <string>     // std::string
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include <hylens/core/blas.hpp>
#include <hylens/core/thread_pool.hpp>

namespace hylens::bench {

struct Floors {
    double sgemm_1t_gflops;    // single-thread sgemm
    double sgemm_pool_gflops;  // sgemm split over the pool
    double triad_1t_gbps;      // single-thread triad
    double triad_pool_gbps;    // triad split over the pool
    std::size_t threads;       // pool size
};

namespace detail {

template <class F>
double median_seconds(F&& f, int runs = 7) {
    f();  // warm-up: page faults, OpenBLAS buffers, pool start
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

inline Floors measure_floors() {
    Floors f{};
    f.threads = ThreadPool::instance().size();
    {
        constexpr std::size_t n = 1024;
        std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n, 0.0f);
        const double flops = 2.0 * n * n * n;
        f.sgemm_1t_gflops = flops / median_seconds([&] {
                                blas::gemm_serial(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f,
                                                  C.data(), n);
                                benchmark::DoNotOptimize(C.data());
                            }) * 1e-9;
        f.sgemm_pool_gflops = flops / median_seconds([&] {
                                  blas::gemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
                                  benchmark::DoNotOptimize(C.data());
                              }) * 1e-9;
    }
    {
        constexpr std::size_t n = std::size_t{16} << 20;  // 16 Mi floats = 64 MiB per array
        std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
        const double bytes = 3.0 * 4.0 * n;
        auto triad = [&](std::size_t i0, std::size_t i1) {
            float* __restrict pa = a.data();
            const float* __restrict pb = b.data();
            const float* __restrict pc = c.data();
            for (std::size_t i = i0; i < i1; ++i) pa[i] = pb[i] + 3.0f * pc[i];
        };
        f.triad_1t_gbps = bytes / median_seconds([&] {
                              triad(0, n);
                              benchmark::ClobberMemory();
                          }) * 1e-9;
        f.triad_pool_gbps = bytes / median_seconds([&] {
                                parallel_for(n, triad, 1 << 16);
                                benchmark::ClobberMemory();
                            }) * 1e-9;
    }
    return f;
}

}  // namespace detail

/// The floors of this process, measured on first call (about 1 s).
inline const Floors& floors() {
    static const Floors f = detail::measure_floors();
    return f;
}

/// Adds GFLOP/s (achieved), floor_GFLOP/s (sgemm on the pool, or single-thread when
/// single_thread) and of_floor (the fraction) for a body doing flops_per_iteration FLOPs.
inline void report_flops(benchmark::State& state, double flops_per_iteration, bool single_thread = false) {
    const double floor = single_thread ? floors().sgemm_1t_gflops : floors().sgemm_pool_gflops;
    const double n = static_cast<double>(state.iterations());
    state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * n * 1e-9, benchmark::Counter::kIsRate);
    state.counters["floor_GFLOP/s"] = floor;
    state.counters["of_floor"] = benchmark::Counter(flops_per_iteration * n * 1e-9 / floor, benchmark::Counter::kIsRate);
}

/// Adds GB/s (achieved), floor_GB/s (triad on the pool, or single-thread) and of_floor for a
/// body moving bytes_per_iteration bytes.
inline void report_bytes(benchmark::State& state, double bytes_per_iteration, bool single_thread = false) {
    const double floor = single_thread ? floors().triad_1t_gbps : floors().triad_pool_gbps;
    const double n = static_cast<double>(state.iterations());
    state.counters["GB/s"] = benchmark::Counter(bytes_per_iteration * n * 1e-9, benchmark::Counter::kIsRate);
    state.counters["floor_GB/s"] = floor;
    state.counters["of_floor"] = benchmark::Counter(bytes_per_iteration * n * 1e-9 / floor, benchmark::Counter::kIsRate);
}

}  // namespace hylens::bench
