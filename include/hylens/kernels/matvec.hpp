#pragma once
// Dot products and matrix-vector products at the instruction-set level chosen at run time
// (core/simd.hpp): the decode step's projections. Weights are float32 or bf16 (widened in
// registers, never copied). Each level's code is in kernels/isa/{baseline,avx2,avx512}.hpp.
//
// matvec splits the weight rows over the thread pool. Every output element is computed by the
// same instruction sequence whichever block of rows it falls in, so results are bitwise
// identical for any number of threads (at a given level).

#include <algorithm>  // std::max, std::clamp
#include <cstddef>    // std::size_t

#include "../core/bf16.hpp"
#include "../core/simd.hpp"
#include "../core/thread_pool.hpp"
#include "isa/avx2.hpp"
#include "isa/avx512.hpp"
#include "isa/avx512bf16.hpp"
#include "isa/baseline.hpp"

namespace hylens::kernels {

namespace detail {

// One instruction-set level's dot products, as a type (the template argument of matvec_rows).
#define HYLENS_ISA_OPS(NAME, NS)                                                                 \
    struct NAME {                                                                                \
        template <class T>                                                                       \
        static float dot(const float* x, const T* w, std::size_t n) noexcept {                   \
            return isa::NS::dot(x, w, n);                                                        \
        }                                                                                        \
        template <class T>                                                                       \
        static void dot4(const float* x, const T* w, std::size_t n, std::size_t rs, float* out) noexcept { \
            isa::NS::dot4(x, w, n, rs, out);                                                     \
        }                                                                                        \
    };
HYLENS_ISA_OPS(BaselineOps, baseline)
#if HYLENS_SIMD_X86
HYLENS_ISA_OPS(Avx2Ops, avx2)
HYLENS_ISA_OPS(Avx512Ops, avx512)
#endif
#undef HYLENS_ISA_OPS
#if HYLENS_SIMD_X86
// The avx512bf16 level's products of bf16 activations with bf16 weights (core/precision.hpp).
struct Avx512Bf16Ops {
    static float dot(const bf16* x, const bf16* w, std::size_t n) noexcept { return isa::avx512bf16::dot(x, w, n); }
    static void dot4(const bf16* x, const bf16* w, std::size_t n, std::size_t rs, float* out) noexcept {
        isa::avx512bf16::dot4(x, w, n, rs, out);
    }
};
#endif

// The row group of 128 KiB streams, the unit the pool splits rows in (MatvecUnits; within a
// range the streams are longer: matvec_stream_rows below). One pass of dot4 strides over k
// consecutive weight rows (rows o, o+k, o+2k, o+3k; then o+1, ...): k rows of a group lie end
// to end, so each of the four memory streams walks k rows in sequence, about 128 KiB. The
// hardware prefetchers need a few cache lines to lock onto a stream: with one short row per
// stream (a bf16 row of 1024 values is 2 KiB, 32 lines) the streams end before they run at
// full rate. Measured on AMD Zen 4, one thread, weights from
// memory (docs/performance.md), best of 30: bf16 [3584 x 1024] 10 GB/s with k = 1, 17-18 with
// k = 2, 18-20 with k = 4 and 8, 22 with k = 16; f32 17-19 with k = 1, 19-21 with k = 2 and 4,
// 23-25 with k = 8; medians of 10 later: bf16 1.07x with k = 32 and 1.13x with k = 64 against
// k = 16, f32 1.06x with k = 32 against k = 8. The arithmetic per row does not depend on k.
inline std::size_t matvec_row_group(std::size_t row_bytes) noexcept {
    return std::clamp<std::size_t>((std::size_t{128} << 10) / std::max<std::size_t>(row_bytes, 1), 1, 64);
}

// Within one range of rows, longer streams read faster still: the step's own matrices (every
// projection of a Qwen3.5-0.8B decode step and its tied head, in one huge-page buffer, 1
// thread, 15 rounds interleaved, two runs) read 36.4 / 36.4 GB/s with 128 KiB streams (k <= 64
// above), 37.1 / 37.4 with 256 KiB, 37.6 / 37.9 with 512 KiB and 37.9 / 38.2 with 1 MiB (bf16);
// float32 40.7 / 41.0 against 41.8 / 42.3 with 1 MiB (docs/performance.md). So each range
// runs streams of up to 1 MiB, at most a quarter of the range (the pool still splits the rows in
// units of the 128 KiB groups: MatvecUnits). Which rows a stream walks does not change any
// row's arithmetic.
inline constexpr std::size_t kMatvecStreamBytes = std::size_t{1} << 20;
inline std::size_t matvec_stream_rows(std::size_t row_bytes, std::size_t range_rows) noexcept {
    return std::clamp<std::size_t>(kMatvecStreamBytes / std::max<std::size_t>(row_bytes, 1), 1,
                                   std::max<std::size_t>(range_rows / 4, 1));
}

// Rows [o0, o1) of W [*, in] times the M rows of x: y[m*ldy + o] = alpha * dot(x_m, W_o).
// Four weight rows at a time (k rows apart: matvec_stream_rows), so each x vector load feeds four
// rows; with M > 1 the four rows stay in L1 while the M inputs pass over them. Rows left over
// after the whole groups (fewer than 4k) are one pass of groups of (rows left) / 4, the last
// 0-3 rows one at a time.
// (k is a parameter for benchmarks/bench_matvec.cpp, which compares row groups.) x is float32,
// or bf16 with Avx512Bf16Ops.
template <class Ops, class TX, class T>
inline void matvec_rows_at(const TX* x, std::size_t ldx, std::size_t M, const T* W, std::size_t in,
                           std::size_t o0, std::size_t o1, float* y, std::size_t ldy, float alpha,
                           std::size_t k) noexcept {
    std::size_t o = o0;
    float r[4];
    for (; o + 4 * k <= o1; o += 4 * k)
        for (std::size_t p = 0; p < k; ++p)
            for (std::size_t m = 0; m < M; ++m) {
                Ops::dot4(x + m * ldx, W + (o + p) * in, in, k * in, r);
                for (std::size_t j = 0; j < 4; ++j) y[m * ldy + o + p + j * k] = alpha * r[j];
            }
    if (const std::size_t k2 = (o1 - o) / 4; k2 > 0) {  // the rest in one pass of groups of k2 < k rows
        for (std::size_t p = 0; p < k2; ++p)
            for (std::size_t m = 0; m < M; ++m) {
                Ops::dot4(x + m * ldx, W + (o + p) * in, in, k2 * in, r);
                for (std::size_t j = 0; j < 4; ++j) y[m * ldy + o + p + j * k2] = alpha * r[j];
            }
        o += 4 * k2;
    }
    for (; o < o1; ++o)
        for (std::size_t m = 0; m < M; ++m) y[m * ldy + o] = alpha * Ops::dot(x + m * ldx, W + o * in, in);
}

template <class T>
inline void matvec_rows(simd::Level level, const float* x, std::size_t ldx, std::size_t M, const T* W,
                        std::size_t in, std::size_t o0, std::size_t o1, float* y, std::size_t ldy, float alpha) {
    const std::size_t k = matvec_stream_rows(in * sizeof(T), o1 - o0);
    switch (simd::f32_level(level)) {
#if HYLENS_SIMD_X86
        case simd::Level::avx512: return matvec_rows_at<Avx512Ops>(x, ldx, M, W, in, o0, o1, y, ldy, alpha, k);
        case simd::Level::avx2: return matvec_rows_at<Avx2Ops>(x, ldx, M, W, in, o0, o1, y, ldy, alpha, k);
#endif
        default: return matvec_rows_at<BaselineOps>(x, ldx, M, W, in, o0, o1, y, ldy, alpha, k);
    }
}

#if HYLENS_SIMD_X86
// Rows [o0, o1) of bf16 W times the M rows of bf16 x on VDPBF16PS: only at level avx512bf16
// (the level argument is for matvec's one signature).
inline void matvec_rows(simd::Level, const bf16* x, std::size_t ldx, std::size_t M, const bf16* W, std::size_t in,
                        std::size_t o0, std::size_t o1, float* y, std::size_t ldy, float alpha) {
    matvec_rows_at<Avx512Bf16Ops>(x, ldx, M, W, in, o0, o1, y, ldy, alpha, matvec_stream_rows(in * sizeof(bf16), o1 - o0));
}
#endif

// The pool splits matvec's rows in units of one full pass of the four-row kernel (4 row groups),
// so every range but the last runs strided passes only, and at least ~128 KiB of weights a range
// (a smaller range costs more in waking a thread than it saves).
struct MatvecUnits {
    std::size_t rows, grain;  // rows per unit; units per range at the least
    MatvecUnits(std::size_t M, std::size_t row_bytes)
        : rows(4 * matvec_row_group(row_bytes)),
          grain(std::max<std::size_t>(1, (std::size_t{128} << 10) / std::max<std::size_t>(row_bytes * M * rows, 1))) {}
    std::size_t count(std::size_t out) const noexcept { return (out + rows - 1) / rows; }
    std::size_t row(std::size_t unit, std::size_t out) const noexcept { return std::min(out, unit * rows); }
};

template <class T>
inline float dot_any(const float* x, const T* w, std::size_t n) {
    switch (simd::f32_level(simd::active())) {
#if HYLENS_SIMD_X86
        case simd::Level::avx512: return isa::avx512::dot(x, w, n);
        case simd::Level::avx2: return isa::avx2::dot(x, w, n);
#endif
        default: return isa::baseline::dot(x, w, n);
    }
}

}  // namespace detail

/// sum_i x[i] * w[i].
inline float dot(const float* x, const float* w, std::size_t n) { return detail::dot_any(x, w, n); }
/// sum_i x[i] * float(w[i]), the bf16 values widened in registers.
inline float dot(const float* x, const bf16* w, std::size_t n) { return detail::dot_any(x, w, n); }
/// sum_i x[i]^2 (the statistic of the RMS norms).
inline float sum_squares(const float* x, std::size_t n) { return detail::dot_any(x, x, n); }

/// dst[i] = float(src[i]) for n bf16 values.
inline void widen_bf16(const bf16* src, float* dst, std::size_t n) {
    switch (simd::f32_level(simd::active())) {
#if HYLENS_SIMD_X86
        case simd::Level::avx512: return isa::avx512::widen(src, dst, n);
        case simd::Level::avx2: return isa::avx2::widen(src, dst, n);
#endif
        default: return isa::baseline::widen(src, dst, n);
    }
}

namespace detail {

// Guided split of n units over the pool for the matrix-vector products. The threads claim the
// parts as they come free, so when one thread starts late (a futex wake, or its core taken by
// another process) the others take over its share (docs/performance.md, "2-thread decode").
// Each part takes ceil(rest / (2 x threads)) of the units not yet given out, and at least grain
// and ceil(n / kMaxGuidedParts) (so there are never more than kMaxGuidedParts parts): the parts
// shrink towards the end of a region, and a thread that finishes early waits for at most a small
// last part of the other's, where equal parts of a large projection (an F32 [6144 x 1024] in 8
// parts of 3 MB) kept it waiting up to one whole part. The first parts are still a quarter of the
// rows each at 2 threads, so a thread that starts late leaves its share to the others. One
// thread: one part (its streams as long as the whole matrix allows).
inline constexpr std::size_t kMaxGuidedParts = 256;
struct GuidedParts {
    std::size_t count = 0;
    std::size_t bound[kMaxGuidedParts + 1] = {};
};
inline GuidedParts guided_parts(std::size_t n, std::size_t grain, std::size_t threads) noexcept {
    GuidedParts g;
    if (threads <= 1 || n <= grain) {
        g.count = 1;
        g.bound[1] = n;
        return g;
    }
    std::size_t done = 0;
    while (done < n) {
        const std::size_t rest = n - done;
        const std::size_t size = std::max({grain, (rest + 2 * threads - 1) / (2 * threads),
                                           (n + kMaxGuidedParts - 1) / kMaxGuidedParts});
        done += std::min(size, rest);
        g.bound[++g.count] = done;
    }
    return g;
}

// fn(u0, u1) over [0, n) units in guided parts (above), the parts claimed by the pool's threads.
template <class F>
inline void parallel_for_guided(std::size_t n, std::size_t grain, F&& fn) {
    const GuidedParts g = guided_parts(n, grain, ThreadPool::instance().size());
    if (g.count == 1) return parallel_for(n, fn, n);  // one range (inline)
    parallel_for(
        g.count,
        [&](std::size_t p0, std::size_t p1) {
            for (std::size_t p = p0; p < p1; ++p) fn(g.bound[p], g.bound[p + 1]);
        },
        1, g.count);
}

}  // namespace detail

/// y[m*ldy + o] = alpha * sum_i x[m*ldx + i] * W[o*in + i] for m < M, o < out; W is float32 or
/// bf16. Rows of W are split over the thread pool in ranges of at least ~128 KiB of weights
/// that shrink towards the end (detail::guided_parts), in whole passes of the four-row kernel
/// (detail::MatvecUnits). x is float32, or bf16 (with bf16 W, at level avx512bf16 only).
template <class TX, class T>
inline void matvec(const TX* x, std::size_t ldx, std::size_t M, const T* W, std::size_t out, std::size_t in,
                   float* y, std::size_t ldy, float alpha = 1.0f) {
    if (M == 0 || out == 0) return;
    const simd::Level level = simd::active();
    const detail::MatvecUnits u(M, in * sizeof(T));
    detail::parallel_for_guided(u.count(out), u.grain, [&](std::size_t u0, std::size_t u1) {
        detail::matvec_rows(level, x, ldx, M, W, in, u.row(u0, out), u.row(u1, out), y, ldy, alpha);
    });
}

}  // namespace hylens::kernels
