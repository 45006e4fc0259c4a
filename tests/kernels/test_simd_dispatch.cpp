// The run-time dispatched kernels (core/simd.hpp, kernels/matvec.hpp) at EVERY instruction-set
// level this machine supports, forced in turn, against plain double-precision twins; and the
// exact invariants: a row's result does not depend on how the rows are split over threads,
// bf16 widening is exact, forcing an unknown level is an error.

#include <hylens/core/simd.hpp>
#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/matvec.hpp>
#include <hylens/kernels/reference/linear.hpp>
#include <hylens/kernels/rms_norm.hpp>

#include "../support/random_values.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace hylens;

namespace {

double rel_err(float a, double b) { return std::fabs(double(a) - b) / (1.0 + std::fabs(b)); }

}  // namespace

TEST_CASE("simd: every supported level is listed, the detected one last, and can be forced") {
    const auto levels = simd::supported_levels();
    REQUIRE(!levels.empty());
    CHECK(levels.front() == simd::Level::baseline);
    CHECK(levels.back() == simd::detected());
    for (auto l : levels) {
        simd::ForceLevel f(l);
        CHECK(simd::active() == l);
    }
    MESSAGE("detected level: " << std::string(simd::level_name(simd::detected())));
    CHECK(simd::parse_level("avx2") == simd::Level::avx2);
    CHECK(simd::parse_level("native") == simd::detected());
    CHECK_THROWS_AS(simd::parse_level("sse9"), UnsupportedError);
    CHECK(simd::parse_level("avx512bf16") == simd::Level::avx512bf16);
    for (auto l : {simd::Level::avx2, simd::Level::avx512, simd::Level::avx512bf16})
        if (static_cast<int>(simd::detected()) < static_cast<int>(l)) CHECK_THROWS_AS(simd::force(l), UnsupportedError);
}

TEST_CASE("simd: dot, sum_squares, widen and linear (M <= 4) at every level against the reference") {
    std::mt19937 rng(7);
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        // Lengths around every vector width and unroll (4, 8, 16, 32) and their tails.
        for (std::size_t n : {1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 63u, 100u, 1027u}) {
            const auto x = test::normal_floats(n, rng), w = test::normal_floats(n, rng);
            std::vector<bf16> wb(n);
            for (std::size_t i = 0; i < n; ++i) wb[i] = to_bf16(w[i]);
            double ref = 0, refb = 0, ss = 0;
            for (std::size_t i = 0; i < n; ++i) {
                ref += double(x[i]) * w[i];
                refb += double(x[i]) * to_f32(wb[i]);
                ss += double(x[i]) * x[i];
            }
            INFO("level " << std::string(simd::level_name(level)) << " n " << n);
            CHECK(rel_err(kernels::dot(x.data(), w.data(), n), ref) <= 1e-5 * std::sqrt(double(n)));
            CHECK(rel_err(kernels::dot(x.data(), wb.data(), n), refb) <= 1e-5 * std::sqrt(double(n)));
            CHECK(rel_err(kernels::sum_squares(x.data(), n), ss) <= 1e-6 * double(n));
            std::vector<float> wide(n + 1, -1.0f);
            kernels::widen_bf16(wb.data(), wide.data(), n);
            bool exact = wide[n] == -1.0f;  // nothing written past the end
            for (std::size_t i = 0; i < n; ++i) exact = exact && wide[i] == to_f32(wb[i]);
            CHECK(exact);
        }
        for (bool bf : {false, true})
            for (const auto& shape : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {1, 5, 17},
                                      {1, 130, 67}, {2, 64, 128}, {3, 9, 1027}, {4, 257, 33}, {4, 3, 16},
                                      {1, 70, 1024},    // (row groups: kernels/matvec.hpp)
                                      {9, 1100, 40}}) {  // bf16 sgemm path: several blocks
                const std::size_t M = std::get<0>(shape), out = std::get<1>(shape), in = std::get<2>(shape);
                const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * (in + 3), rng), bias = test::normal_floats(out, rng);
                const Weight W = bf ? Weight::from_floats_bf16(wv, {out, in}, "w") : Weight::from_floats(wv, {out, in}, "w");
                std::vector<float> y(M * (out + 1)), r(M * (out + 1));
                kernels::linear(x.data(), in + 3, M, W, bias.data(), y.data(), out + 1, 0.5f);
                reference::linear(x.data(), in + 3, M, W, bias.data(), r.data(), out + 1, 0.5f);
                double worst = 0;
                for (std::size_t m = 0; m < M; ++m)
                    for (std::size_t o = 0; o < out; ++o)
                        worst = hylens::test::nan_max(worst, rel_err(y[m * (out + 1) + o], r[m * (out + 1) + o]));
                INFO("level " << std::string(simd::level_name(level)) << " bf16 " << bf << " M " << M << " out " << out
                              << " in " << in);
                CHECK(worst <= 1e-5);
                CHECK(kernels::linear_row(x.data(), W, out - 1) == doctest::Approx(r[out - 1] * 2.0f - 2.0f * bias[out - 1]).epsilon(1e-4));
            }
    }
}

TEST_CASE("matvec: guided parts cover the units once, shrink towards the end, one part for one thread") {
    using kernels::detail::guided_parts;
    using kernels::detail::kMaxGuidedParts;
    for (std::size_t threads : {1, 2, 3, 16, 64})
        for (std::size_t n : {1, 2, 7, 16, 48, 1000, 100000})
            for (std::size_t grain : {1, 3}) {
                INFO("threads " << threads << " n " << n << " grain " << grain);
                const auto g = guided_parts(n, grain, threads);
                REQUIRE(g.count >= 1);
                REQUIRE(g.count <= kMaxGuidedParts);
                CHECK(g.bound[0] == 0);
                CHECK(g.bound[g.count] == n);
                if (threads == 1 || n <= grain) CHECK(g.count == 1);
                for (std::size_t p = 0; p < g.count; ++p) {
                    const std::size_t size = g.bound[p + 1] - g.bound[p];
                    CHECK(size >= 1);
                    if (p + 1 < g.count) CHECK(size >= grain);  // only the last part may be short
                    if (p + 2 < g.count) CHECK(size >= g.bound[p + 2] - g.bound[p + 1]);  // non-increasing
                }
                if (threads == 2 && n == 1000 && grain == 1) {
                    // ceil(rest / 4) and at least ceil(1000 / 256) = 4: 250, 188, 141, 106, 79, 59,
                    // 45, 33, 25, 19, 14, 11, 8, 6, then 4, 4, 4, 4 (the 16 left): 18 parts.
                    CHECK(g.bound[1] == 250);
                    CHECK(g.bound[2] == 438);
                    CHECK(g.count == 18);
                    CHECK(g.bound[g.count] - g.bound[g.count - 1] == 4);
                }
            }
}

TEST_CASE("simd: matvec rows give bitwise the same result for any split into thread blocks") {
    // What a pool of n threads does: cut [0, out) into n contiguous blocks, at any offset (not
    // only multiples of the four-row block or of the streams). Each block's four streams walk
    // up to 1 MiB of rows, at most a quarter of the block (matvec_stream_rows), so the blocks
    // differ in how they group rows: with in = 4099 the whole range runs float32 rows in
    // streams of 63 (four passes of 252 rows, then the 108 left as one pass of streams of 27)
    // and bf16 rows in streams of 127 (two passes of 508, then 100 as streams of 25); a block
    // of 117 rows runs one pass of streams of 29, then one row alone. Every split must give the
    // same bits.
    std::mt19937 rng(3);
    const std::size_t out = 1116, in = 4099, M = 3;
    for (std::size_t bytes : {in * sizeof(float), in * sizeof(bf16)}) {  // whole passes and a rest, both
        const std::size_t pass = 4 * kernels::detail::matvec_stream_rows(bytes, out);
        REQUIRE(out >= 2 * pass);
        REQUIRE(out % pass >= 8);
    }
    const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
    std::vector<bf16> wb(out * in);
    for (std::size_t i = 0; i < wv.size(); ++i) wb[i] = to_bf16(wv[i]);
    for (auto level : simd::supported_levels())
        for (bool bf : {false, true}) {
            auto run = [&](std::vector<std::size_t> cuts) {
                std::vector<float> y(M * out);
                cuts.insert(cuts.begin(), 0);
                cuts.push_back(out);
                for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
                    if (bf)
                        kernels::detail::matvec_rows(level, x.data(), in, M, wb.data(), in, cuts[c], cuts[c + 1], y.data(), out, 1.0f);
                    else
                        kernels::detail::matvec_rows(level, x.data(), in, M, wv.data(), in, cuts[c], cuts[c + 1], y.data(), out, 1.0f);
                }
                return y;
            };
            const auto one = run({});
            INFO("level " << std::string(simd::level_name(level)) << " bf16 " << bf);
            for (const auto& cuts : {std::vector<std::size_t>{558}, {1, 2, 3}, {5, 122, 239, 561, 1000}, {511, 512}, {1113}}) {
                const auto split = run(cuts);
                CHECK(std::memcmp(one.data(), split.data(), one.size() * sizeof(float)) == 0);
            }
            // And the pool's own split (whatever its size) equals the single block.
            std::vector<float> pooled(M * out);
            simd::ForceLevel force(level);
            if (bf)
                kernels::matvec(x.data(), in, M, wb.data(), out, in, pooled.data(), out);
            else
                kernels::matvec(x.data(), in, M, wv.data(), out, in, pooled.data(), out);
            CHECK(std::memcmp(one.data(), pooled.data(), one.size() * sizeof(float)) == 0);
        }
}

namespace {

float as_float(float v) { return v; }
float as_float(bf16 v) { return to_f32(v); }

// kernels::matvec of x [M, in] with the weights wv [out, in] copied to every start from a
// 64-byte boundary (in elements of T) at the forced level: the same bits as from the aligned
// start, and right against the double twin.
template <class TX, class T>
void check_every_start(const std::vector<TX>& x, const std::vector<T>& wv, std::size_t M, std::size_t out,
                       std::size_t in, simd::Level level) {
    constexpr std::size_t starts = 64 / sizeof(T);
    std::vector<T> buffer(out * in + 2 * starts);  // room for any shift of the start
    // The element of the buffer at a 64-byte boundary: the copy starts at base + shift.
    const std::size_t base = (64 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 64) % 64 / sizeof(T);
    simd::ForceLevel force(level);
    std::vector<float> first;
    for (std::size_t shift = 0; shift < starts; ++shift) {
        T* w = buffer.data() + base + shift;
        std::copy(wv.begin(), wv.end(), w);
        std::vector<float> y(M * out);
        kernels::matvec(x.data(), in, M, w, out, in, y.data(), out);
        if (shift == 0) first = y;
        INFO("level " << std::string(simd::level_name(level)) << " in " << in << " shift " << shift);
        CHECK(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
        double worst = 0;
        for (std::size_t m = 0; m < M; ++m)
            for (std::size_t o = 0; o < out; ++o) {
                double ref = 0;
                for (std::size_t i = 0; i < in; ++i) ref += double(as_float(x[m * in + i])) * as_float(wv[o * in + i]);
                worst = hylens::test::nan_max(worst, rel_err(y[m * out + o], ref));
            }
        CHECK(worst <= 1e-5);
    }
}

}  // namespace

TEST_CASE("simd: matvec gives the same bits wherever the weights start (64-byte aligned or not)") {
    // A checkpoint's tensors start 8-byte aligned at best; isa::avx512's dot4 (float32 and bf16
    // rows) and isa::avx512bf16's then build each vector from two aligned loads, which must
    // reproduce the unaligned loads exactly. Rows of 1024 (the common width: the row stride a
    // whole number of cache lines), 96 and 160 (the aligned loop and the rest after it), 64 + 7
    // (a tail), 100 (rows of different misalignments: the template's path) and 48.
    std::mt19937 rng(17);
    for (std::size_t in : {1024u, 71u, 100u, 48u, 96u, 160u}) {
        const std::size_t out = 37, M = 2;
        const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
        std::vector<bf16> wb(wv.size()), xb(x.size());
        std::transform(wv.begin(), wv.end(), wb.begin(), [](float v) { return to_bf16(v); });
        std::transform(x.begin(), x.end(), xb.begin(), [](float v) { return to_bf16(v); });
        for (auto level : simd::supported_levels()) {
            check_every_start(x, wv, M, out, in, level);
            check_every_start(x, wb, M, out, in, level);
        }
#if HYLENS_SIMD_X86
        if (simd::detected() == simd::Level::avx512bf16)  // bf16 activations: VDPBF16PS
            check_every_start(xb, wb, M, out, in, simd::Level::avx512bf16);
#endif
    }
}

TEST_CASE("simd: rms_norm at every level against a double-precision twin") {
    std::mt19937 rng(11);
    const std::size_t d = 1027, rows = 3;
    const auto x = test::normal_floats(rows * d, rng), w = test::normal_floats(d, rng);
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        std::vector<float> y(rows * d);
        kernels::rms_norm(x.data(), d, rows, d, w.data(), 1e-6f, y.data(), d, false);
        double worst = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            double ss = 0;
            for (std::size_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
            const double inv = 1.0 / std::sqrt(ss / double(d) + 1e-6);
            for (std::size_t i = 0; i < d; ++i) worst = hylens::test::nan_max(worst, rel_err(y[r * d + i], w[i] * x[r * d + i] * inv));
        }
        INFO("level " << std::string(simd::level_name(level)));
        CHECK(worst <= 1e-5);
    }
}

TEST_CASE("linear: bitwise the same result with 1, 2 and 3 threads at every level") {
    std::mt19937 rng(5);
    const std::size_t out = 301, in = 257;
    const std::size_t before = ThreadPool::instance().size();
    for (auto level : simd::supported_levels()) {
        const simd::ForceLevel force(level);
        for (bool bf : {false, true})
            // 37 rows: A packed at avx2 (float32 W); 200: W packed
            for (std::size_t M : {1u, 4u, 37u, 200u}) {
                const auto wv = test::normal_floats(out * in, rng), x = test::normal_floats(M * in, rng);
                const Weight W = bf ? Weight::from_floats_bf16(wv, {out, in}, "w") : Weight::from_floats(wv, {out, in}, "w");
                std::vector<std::vector<float>> ys;
                for (std::size_t threads : {1u, 2u, 3u}) {
                    ThreadPool::instance().resize(threads);
                    ys.emplace_back(M * out);
                    kernels::linear(x.data(), in, M, W, nullptr, ys.back().data(), out);
                }
                INFO("level " << std::string(simd::level_name(level)) << " bf16 " << bf << " M " << M);
                // sgemm (level baseline) too: its column blocks do not depend on the thread count
                for (std::size_t k = 1; k < ys.size(); ++k)
                    CHECK(std::memcmp(ys[0].data(), ys[k].data(), ys[0].size() * sizeof(float)) == 0);
            }
    }
    ThreadPool::instance().resize(before);
    CHECK(ThreadPool::instance().size() == before);
}

TEST_CASE("linear_group: bitwise one linear() per projection, at every level and 1 to 3 threads") {
    // q, k, v of different widths (one of them bf16, one with a bias) read the same x in one
    // parallel region; each row must come out exactly as from its own linear() call.
    std::mt19937 rng(9);
    const std::size_t in = 301, ldx = in + 5;
    const std::size_t before = ThreadPool::instance().size();
    const auto wq = test::normal_floats(70 * in, rng), wk = test::normal_floats(33 * in, rng), wv = test::normal_floats(129 * in, rng), bk = test::normal_floats(33, rng);
    const Weight Q = Weight::from_floats(wq, {70, in}, "q"), K = Weight::from_floats_bf16(wk, {33, in}, "k"),
                 V = Weight::from_floats(wv, {129, in}, "v");
    for (auto level : simd::supported_levels())
        for (std::size_t M : {1u, 3u, 4u, 6u}) {
            const simd::ForceLevel force(level);
            const auto x = test::normal_floats(M * ldx, rng);
            std::vector<float> q0(M * 71), k0(M * 33), v0(M * 129);
            kernels::linear(x.data(), ldx, M, Q, nullptr, q0.data(), 71, 0.5f);
            kernels::linear(x.data(), ldx, M, K, bk.data(), k0.data(), 33, 0.5f);
            kernels::linear(x.data(), ldx, M, V, nullptr, v0.data(), 129, 0.5f);
            for (std::size_t threads : {1u, 2u, 3u}) {
                ThreadPool::instance().resize(threads);
                std::vector<float> q(M * 71, 7.0f), k(M * 33), v(M * 129);
                kernels::linear_group(
                    x.data(), ldx, M,
                    {{Q, nullptr, q.data(), 71}, {K, bk.data(), k.data(), 33}, {V, nullptr, v.data(), 129}}, 0.5f);
                INFO("level " << std::string(simd::level_name(level)) << " M " << M << " threads " << threads);
                bool pad_kept = true;  // column 70 of q (ldy 71) is not written
                for (std::size_t m = 0; m < M; ++m) pad_kept = pad_kept && q[m * 71 + 70] == 7.0f;
                CHECK(pad_kept);
                for (std::size_t m = 0; m < M; ++m) q[m * 71 + 70] = q0[m * 71 + 70];
                CHECK(std::memcmp(q.data(), q0.data(), q.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(k.data(), k0.data(), k.size() * sizeof(float)) == 0);
                CHECK(std::memcmp(v.data(), v0.data(), v.size() * sizeof(float)) == 0);
            }
            ThreadPool::instance().resize(before);
        }
    const Weight bad = Weight::from_floats(std::vector<float>(12), {3, 4}, "layers.0.k_proj");
    std::vector<float> x(in), y(200);
    try {  // ldy 2 < 3 rows
        kernels::linear_group(x.data(), in, 1, {{Q, nullptr, y.data(), 70}, {bad, nullptr, y.data(), 2}});
        FAIL("no throw");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()).find("layers.0.k_proj") != std::string::npos);
    }
}
