// kernels::attention against its plain twin: GQA, cached prefix, probabilities, prompts of one,
// two and three query blocks (kAttentionQueryBlock), decode steps over more than one block of
// keys, at every instruction-set level (the same bits at the levels that share a product
// kernel), and with 1, 2 and 3 threads.

#include <hylens/core/simd.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/kernels/attention.hpp>
#include <hylens/kernels/reference/attention.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

using namespace hylens;

TEST_CASE("attention: matches the reference with a cached prefix, GQA and probabilities") {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    for (auto [Tq, cached, Hq, Hkv, hd] : {std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, std::size_t>{1, 0, 1, 1, 4},
                                           {1, 9, 8, 2, 16}, {7, 0, 4, 4, 8}, {5, 11, 6, 3, 12}, {65, 3, 8, 2, 32},
                                           {130, 7, 4, 2, 16}, {1, 150, 6, 2, 24}, {1, 199, 3, 1, 40}}) {
        const std::size_t Tk = Tq + cached, cap = Tk + 5, ldq = Hq * hd + 2;
        std::vector<float> q(Tq * ldq), K(Hkv * cap * hd), V(Hkv * cap * hd);
        for (auto& v : q) v = nd(rng);
        for (auto& v : K) v = nd(rng);
        for (auto& v : V) v = nd(rng);
        const kernels::AttentionShape s{Tq, Tk, Hq, Hkv, hd};
        std::vector<float> o(Tq * Hq * hd), r(o.size()), p(Hq * Tq * Tk), rp(p.size());
        reference::attention(s, q.data(), ldq, K.data(), V.data(), cap * hd, 0.3f, r.data(), Hq * hd, rp.data());
        // The same bits at every level that runs the same product kernel. Prefill: our own GEMMs
        // at avx2 and up (each element the same FMA chain), sgemm at baseline
        // (kernels::detail::own_gemm). Decode: the
        // scores are matvec's dot products, whose sums follow the float32 level's vector width;
        // P V (add_weighted_rows) and the softmax's vector exp give the same bits at every level.
        std::map<int, std::pair<std::vector<float>, std::vector<float>>> first;
        for (auto level : simd::supported_levels()) {
            simd::ForceLevel force(level);
            kernels::attention(s, q.data(), ldq, K.data(), V.data(), cap * hd, 0.3f, o.data(), Hq * hd, p.data());
            const int kernel = Tq == 1 ? static_cast<int>(simd::f32_level(level)) : kernels::detail::own_gemm(level) ? -1 : -2;
            if (!first.count(kernel)) first[kernel] = {o, p};
            INFO("level " << simd::level_name(level) << " Tq " << Tq << " cached " << cached << " Hq " << Hq
                          << " Hkv " << Hkv << " hd " << hd);
            CHECK(o == first[kernel].first);
            CHECK(p == first[kernel].second);
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

namespace {

// kernels::attention on random inputs of shape s with 1, 2 and 3 pool threads at every level:
// the same bits.
void check_same_bits_over_threads(const kernels::AttentionShape& s, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
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
        INFO("level " << simd::level_name(level) << " Tq " << s.Tq);
        CHECK(outs[1] == outs[0]);
        CHECK(outs[2] == outs[0]);
    }
    ThreadPool::instance().resize(before);
}

}  // namespace

TEST_CASE("attention: the prefill gives the same bits with 1, 2 and 3 threads at every level") {
    // Each query head is computed whole by one thread, in query blocks fixed by the prompt.
    check_same_bits_over_threads({70, 75, 6, 2, 24}, 3);
}

TEST_CASE("attention: a decode step gives the same bits with 1, 2 and 3 threads at every level") {
    // Each KV group (its query heads) is computed whole by one thread; 2 x 300 x 40 keys' and
    // values' floats a group, so the groups are split over the threads.
    check_same_bits_over_threads({1, 300, 6, 3, 40}, 4);
}

TEST_CASE("attention: add_weighted_rows gives the same bits at every level, and the sums in key order") {
    // Widths that take each path: whole blocks of 8 vectors, single vectors, scalar tails.
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    for (std::size_t hd : {1u, 3u, 4u, 15u, 16u, 17u, 64u, 129u, 150u, 256u}) {
        const std::size_t n = 37, ldv = hd + 3;
        std::vector<float> p(n), V(n * ldv), start(hd);
        for (auto* v : {&p, &V, &start})
            for (auto& e : *v) e = nd(rng);
        // The definition: out[d] = (...((out[d] + p0 v0d) + p1 v1d) ...) in float32, each product
        // rounded before its sum (the project builds with -ffp-contract=off).
        std::vector<float> want = start;
        for (std::size_t d = 0; d < hd; ++d)
            for (std::size_t t = 0; t < n; ++t) {
                const float prod = p[t] * V[t * ldv + d];
                want[d] = want[d] + prod;
            }
        for (auto level : simd::supported_levels()) {
            std::vector<float> out = start;
            kernels::isa::with_isa(level, [&](auto tag) {
                add_weighted_rows(tag, p.data(), n, V.data(), ldv, hd, out.data());
            });
            INFO("level " << simd::level_name(level) << " hd " << hd);
            CHECK(out == want);
        }
    }
}
