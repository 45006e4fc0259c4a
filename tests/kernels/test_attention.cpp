// kernels::attention against its plain twin: GQA, cached prefix, probabilities, prompts of one,
// two and three query blocks (kAttentionQueryBlock), at every instruction-set level (the same
// bits at the levels that share a product kernel).

#include <hylens/core/simd.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/kernels/attention.hpp>
#include <hylens/kernels/reference/attention.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hylens;

TEST_CASE("attention: matches the reference with a cached prefix, GQA and probabilities") {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    for (auto [Tq, cached, Hq, Hkv, hd] : {std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, std::size_t>{1, 0, 1, 1, 4},
                                           {1, 9, 8, 2, 16}, {7, 0, 4, 4, 8}, {5, 11, 6, 3, 12}, {65, 3, 8, 2, 32},
                                           {130, 7, 4, 2, 16}}) {
        const std::size_t Tk = Tq + cached, cap = Tk + 5, ldq = Hq * hd + 2;
        std::vector<float> q(Tq * ldq), K(Hkv * cap * hd), V(Hkv * cap * hd);
        for (auto& v : q) v = nd(rng);
        for (auto& v : K) v = nd(rng);
        for (auto& v : V) v = nd(rng);
        const kernels::AttentionShape s{Tq, Tk, Hq, Hkv, hd};
        std::vector<float> o(Tq * Hq * hd), r(o.size()), p(Hq * Tq * Tk), rp(p.size());
        reference::attention(s, q.data(), ldq, K.data(), V.data(), cap * hd, 0.3f, r.data(), Hq * hd, rp.data());
        // The same bits at every level that runs the same product kernel: our AVX-512 GEMM at
        // avx512 / avx512bf16, sgemm below (kernels::detail::own_gemm); the softmax's vector exp
        // gives the same bits at every level.
        std::vector<float> first_o[2], first_p[2];
        for (auto level : simd::supported_levels()) {
            simd::ForceLevel force(level);
            kernels::attention(s, q.data(), ldq, K.data(), V.data(), cap * hd, 0.3f, o.data(), Hq * hd, p.data());
            const int own = kernels::detail::own_gemm(level) ? 1 : 0;
            if (first_o[own].empty()) {
                first_o[own] = o;
                first_p[own] = p;
            }
            INFO("level " << simd::level_name(level) << " Tq " << Tq << " cached " << cached << " Hq " << Hq
                          << " Hkv " << Hkv);
            CHECK(o == first_o[own]);
            CHECK(p == first_p[own]);
            double wo = 0, wp = 0;
            for (std::size_t i = 0; i < o.size(); ++i) wo = std::max(wo, double(std::fabs(o[i] - r[i])));
            for (std::size_t i = 0; i < p.size(); ++i) wp = std::max(wp, double(std::fabs(p[i] - rp[i])));
            CHECK(wo <= 1e-5);
            CHECK(wp <= 1e-6);
            // causal: query t sees keys up to cached + t, every probability row sums to 1
            for (std::size_t h = 0; h < Hq; ++h)
                for (std::size_t t = 0; t < Tq; ++t) {
                    double sum = 0;
                    for (std::size_t k = 0; k < Tk; ++k) {
                        const float v = p[(h * Tq + t) * Tk + k];
                        if (k > cached + t) CHECK(v == 0.0f);
                        sum += v;
                    }
                    CHECK(std::fabs(sum - 1.0) <= 1e-5);
                }
        }
    }
}

TEST_CASE("attention: impossible shapes throw") {
    std::vector<float> buf(64);
    CHECK_THROWS_AS(kernels::attention({1, 1, 3, 2, 4}, buf.data(), 12, buf.data(), buf.data(), 4, 1.0f, buf.data(), 12),
                    ShapeError);
    CHECK_THROWS_AS(kernels::attention({3, 2, 2, 2, 4}, buf.data(), 8, buf.data(), buf.data(), 8, 1.0f, buf.data(), 8),
                    ShapeError);
}

TEST_CASE("attention: the prefill gives the same bits with 1, 2 and 3 threads at every level") {
    // Each query head is computed whole by one thread, in query blocks fixed by the prompt.
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    const kernels::AttentionShape s{70, 75, 6, 2, 24};
    std::vector<float> q(s.Tq * s.Hq * s.hd), K(s.Hkv * s.Tk * s.hd), V(K.size());
    for (auto* v : {&q, &K, &V})
        for (auto& e : *v) e = nd(rng);
    const std::size_t before = ThreadPool::instance().size();
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        std::vector<std::vector<float>> outs;
        for (std::size_t threads : {1u, 2u, 3u}) {
            ThreadPool::instance().resize(threads);
            outs.emplace_back(s.Tq * s.Hq * s.hd);
            kernels::attention(s, q.data(), s.Hq * s.hd, K.data(), V.data(), s.Tk * s.hd, 0.2f, outs.back().data(),
                               s.Hq * s.hd);
        }
        INFO("level " << simd::level_name(level));
        CHECK(outs[1] == outs[0]);
        CHECK(outs[2] == outs[0]);
    }
    ThreadPool::instance().resize(before);
}
