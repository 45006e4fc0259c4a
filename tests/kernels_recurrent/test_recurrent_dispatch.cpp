// The recurrent kernels' dispatched loops (kernels/isa/recurrent_body.inl) at EVERY
// instruction-set level this machine supports, forced in turn: causal conv1d (decode step and
// prefill), the gated-delta-rule recurrent form and the SSD recurrent form against their plain
// twins (1e-5 relative, as the other twin tests), with sizes around every vector width (4, 8, 16)
// and its 4-vector blocks, strided rows and non-zero incoming states. And the exact invariants
// of the dispatch: conv1d and the gated delta rule compute the same bits at every level (the
// same operations per element, multiply then add, whatever the width); SSD's states too (only
// its outputs' dot product with C is reduced in the width's order).

#include <hylens/core/simd.hpp>
#include <hylens/core/thread_pool.hpp>
#include <hylens/kernels/conv1d.hpp>
#include <hylens/kernels/gated_delta.hpp>
#include <hylens/kernels/isa/recurrent.hpp>
#include <hylens/kernels/reference/conv1d.hpp>
#include <hylens/kernels/reference/gated_delta.hpp>
#include <hylens/kernels/reference/ssd.hpp>
#include <hylens/kernels/ssd.hpp>

#include "test_util.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace hylens;

namespace {

struct ConvRun {
    std::vector<float> y, state;
};

/// causal_conv1d of T tokens of C channels (rows at stride C + 3) from a random window.
template <class F>
ConvRun run_conv(F conv, std::size_t T, std::size_t C, std::size_t K, bool with_bias, bool silu, unsigned seed) {
    std::mt19937 rng(seed);
    const std::size_t ld = C + 3;
    const std::vector<float> x = rtest::randn(T * ld, rng), w = rtest::randn(C * K, rng, 0.5f),
                             b = rtest::randn(C, rng);
    ConvRun r{std::vector<float>(T * ld, 0.0f), rtest::randn(C * K, rng)};
    conv(x.data(), ld, T, C, w.data(), K, with_bias ? b.data() : nullptr, r.state.data(), r.y.data(), ld, silu);
    return r;
}

struct GdrRun {
    std::vector<float> out, state;
};

/// gated_delta_rule_recurrent of T tokens from a random state; q, k, v at strides wider than a row.
template <class F>
GdrRun run_gdr(F gdr, const kernels::GatedDeltaShape& s, bool l2, unsigned seed) {
    std::mt19937 rng(seed);
    const std::size_t ldq = s.Hk * s.dk + 5, ldv = s.Hv * s.dv + 2, ldo = s.Hv * s.dv + 1;
    const std::vector<float> q = rtest::randn(s.T * ldq, rng), k = rtest::randn(s.T * ldq, rng),
                             v = rtest::randn(s.T * ldv, rng), g = rtest::uniform(s.T * s.Hv, rng, -2.0f, 0.0f),
                             beta = rtest::uniform(s.T * s.Hv, rng, 0.0f, 1.0f);
    GdrRun r{std::vector<float>(s.T * ldo, 0.0f), rtest::randn(s.Hv * s.dk * s.dv, rng, 0.3f)};
    gdr(s, q.data(), ldq, k.data(), ldq, v.data(), ldv, g.data(), beta.data(), r.state.data(), r.out.data(), ldo, l2);
    return r;
}

struct SsdRun {
    std::vector<float> y, state, dt;
};

template <class F>
SsdRun run_ssd(F ssd, const kernels::SsdShape& s, bool with_d, unsigned seed) {
    std::mt19937 rng(seed);
    const std::size_t ldx = s.H * s.P + 3, ldbc = s.G * s.N + 1, lddt = s.H + 2, ldy = s.H * s.P + 4;
    const std::vector<float> x = rtest::randn(s.T * ldx, rng), B = rtest::randn(s.T * ldbc, rng),
                             C = rtest::randn(s.T * ldbc, rng), dt = rtest::randn(s.T * lddt, rng),
                             dt_bias = rtest::randn(s.H, rng, 0.5f), A = rtest::uniform(s.H, rng, -4.0f, -0.1f),
                             D = rtest::randn(s.H, rng);
    SsdRun r{std::vector<float>(s.T * ldy, 0.0f), rtest::randn(s.H * s.P * s.N, rng), std::vector<float>(s.T * s.H)};
    ssd(s, x.data(), ldx, B.data(), C.data(), ldbc, dt.data(), lddt, dt_bias.data(), A.data(), with_d ? D.data() : nullptr,
        0.001f, 100.0f, r.state.data(), r.y.data(), ldy, r.dt.data());
    return r;
}

/// run() at every supported level, forced in turn; check(this level's run, the first level's run).
template <class Run, class Check>
void at_every_level(Run run, Check check) {
    std::vector<decltype(run())> runs;
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        INFO("level " << simd::level_name(level));
        runs.push_back(run());
        check(runs.back(), runs.front());
    }
}

}  // namespace

TEST_CASE("recurrent dispatch: conv1d at every level against the reference, and the same bits at every level") {
    for (std::size_t C : {1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 255u, 256u, 257u, 600u})
        for (std::size_t T : {1u, 2u, 5u})
            for (std::size_t K : {2u, 4u})
                for (int v = 0; v < 2; ++v) {
                    const bool bias = v == 0, silu = v == 0;
                    INFO("C=" << C << " T=" << T << " K=" << K << " bias/silu=" << bias);
                    const ConvRun ref = run_conv(&reference::causal_conv1d, T, C, K, bias, silu, 11);
                    at_every_level([&] { return run_conv(&kernels::causal_conv1d, T, C, K, bias, silu, 11); },
                                   [&](const ConvRun& r, const ConvRun& first) {
                                       CHECK(rtest::rel_err(r.y, ref.y) < 1e-5);
                                       CHECK(r.state == ref.state);  // the window is copied, exactly
                                       CHECK(r.y == first.y);
                                   });
                }
}

TEST_CASE("recurrent dispatch: gated delta rule (recurrent form) at every level against the reference") {
    // dv around 4-vector blocks of every width (4, 8, 16 lanes: 16, 32, 64 columns) and tails.
    const std::vector<kernels::GatedDeltaShape> shapes = {
        {1, 1, 1, 4, 4},    {1, 2, 4, 16, 17},  {3, 1, 2, 8, 31},   {1, 1, 3, 32, 64},
        {2, 2, 2, 12, 65},  {5, 1, 1, 128, 136}, {1, 2, 2, 20, 7},  {4, 1, 2, 9, 48}};
    for (const auto& s : shapes)
        for (bool l2 : {true, false}) {
            INFO("T=" << s.T << " Hk=" << s.Hk << " Hv=" << s.Hv << " dk=" << s.dk << " dv=" << s.dv << " l2=" << l2);
            const GdrRun ref = run_gdr(&reference::gated_delta_rule_recurrent, s, l2, 5);
            at_every_level([&] { return run_gdr(&kernels::gated_delta_rule_recurrent, s, l2, 5); },
                           [&](const GdrRun& r, const GdrRun& first) {
                               CHECK(rtest::rel_err(r.out, ref.out) < 1e-5);
                               CHECK(rtest::rel_err(r.state, ref.state) < 1e-5);
                               CHECK(r.out == first.out);
                               CHECK(r.state == first.state);
                           });
        }
}

TEST_CASE("recurrent dispatch: SSD (recurrent form) at every level against the reference") {
    // N around 2-vector passes of every width (8, 16, 32 values) and tails.
    const std::vector<kernels::SsdShape> shapes = {{1, 1, 1, 1, 1},   {1, 2, 3, 8, 1},   {3, 4, 5, 16, 2},
                                                   {1, 2, 4, 17, 2},  {2, 4, 2, 32, 4},  {1, 3, 7, 33, 1},
                                                   {5, 2, 16, 64, 1}, {1, 4, 8, 128, 2}, {2, 2, 3, 72, 2}};
    for (const auto& s : shapes)
        for (bool with_d : {true, false}) {
            INFO("T=" << s.T << " H=" << s.H << " P=" << s.P << " N=" << s.N << " G=" << s.G << " D=" << with_d);
            const SsdRun ref = run_ssd(&reference::ssd_recurrent, s, with_d, 9);
            at_every_level([&] { return run_ssd(&kernels::ssd_recurrent, s, with_d, 9); },
                           [&](const SsdRun& r, const SsdRun& first) {
                               CHECK(rtest::rel_err(r.y, ref.y) < 1e-5);
                               CHECK(rtest::rel_err(r.state, ref.state) < 1e-5);
                               CHECK(rtest::rel_err(r.dt, ref.dt) < 1e-6);
                               CHECK(r.state == first.state);
                           });
        }
}

TEST_CASE("recurrent dispatch: vector exp and silu gate within 2 ulp, the same bits at every level") {
    // exp_inplace over [-87, 88] (the range where e^x is a normal float) and silu_mul over
    // [-30, 30], in-place and out of place, at lengths around every vector width and its tail.
    std::mt19937 rng(17);
    for (std::size_t n : {1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 33u, 100u}) {
        INFO("n=" << n);
        const std::vector<float> x = rtest::uniform(n, rng, -87.0f, 88.0f), z = rtest::uniform(n, rng, -30.0f, 30.0f),
                                 u = rtest::randn(n, rng);
        struct Run {
            std::vector<float> e, g, gin;
        };
        at_every_level(
            [&] {
                Run r{x, std::vector<float>(n), u};
                kernels::isa::with_isa(simd::active(), [&](auto tag) {
                    exp_inplace(tag, r.e.data(), n);
                    silu_mul(tag, z.data(), 0.75f, u.data(), r.g.data(), n);
                    silu_mul(tag, z.data(), 0.75f, r.gin.data(), r.gin.data(), n);  // out aliases x
                });
                return r;
            },
            [&](const Run& r, const Run& first) {
                for (std::size_t i = 0; i < n; ++i) {
                    const double e = std::exp(double(x[i]));
                    CHECK(std::fabs(r.e[i] - e) <= 2.5e-7 * e);  // 2 ulp: 2 x 2^-23 relative
                    const double y = 0.75 * double(z[i]), g = y / (1.0 + std::exp(-y)) * double(u[i]);
                    CHECK(std::fabs(r.g[i] - g) <= 1e-6 * std::fabs(g) + 1e-30);
                }
                CHECK(r.g == r.gin);
                CHECK(r.e == first.e);
                CHECK(r.g == first.g);
            });
    }
}

TEST_CASE("recurrent dispatch: SSD (chunked form) at every level against the reference, the same bits at the levels of one product kernel") {
    // Chunks of 4 and 64 over 1-2 chunk lengths and a tail: the in-chunk decays run on the vector
    // exp (the same bits at every level), the products on our own GEMMs at avx2 and up (each
    // element the same FMA chain: tests/kernels/test_gemm.cpp) and on sgemm at baseline
    // (kernels::detail::own_gemm): the same bits within each group.
    const std::vector<kernels::SsdShape> shapes = {{9, 2, 3, 8, 1}, {70, 4, 5, 16, 2}, {130, 2, 8, 33, 1},
                                                   {70, 6, 16, 32, 3}};
    for (const auto& s : shapes)
        for (std::size_t chunk : {4u, 64u}) {
            INFO("T=" << s.T << " H=" << s.H << " P=" << s.P << " N=" << s.N << " G=" << s.G << " chunk=" << chunk);
            const SsdRun ref = run_ssd(&reference::ssd_recurrent, s, true, 13);
            auto chunked = [chunk](auto&&... a) { kernels::ssd_chunked(a..., chunk); };
            std::vector<SsdRun> first(2);
            for (auto level : simd::supported_levels()) {
                simd::ForceLevel force(level);
                INFO("level " << simd::level_name(level));
                const SsdRun r = run_ssd(chunked, s, true, 13);
                CHECK(rtest::rel_err(r.y, ref.y) < 1e-5);
                CHECK(rtest::rel_err(r.state, ref.state) < 1e-5);
                SsdRun& f = first[kernels::detail::own_gemm(level) ? 1 : 0];
                if (f.y.empty()) f = r;
                CHECK(r.y == f.y);
                CHECK(r.state == f.state);
            }
        }
}

TEST_CASE("recurrent dispatch: SSD (chunked form) with 1, 2 and 3 threads, bitwise at the levels of our GEMM") {
    // Each thread stacks its range of heads into one product, so the thread count changes the
    // products' widths: our GEMM sums each element alone (the same bits); sgemm may not, within
    // float32 rounding there.
    const std::size_t before = ThreadPool::instance().size();
    const kernels::SsdShape s{70, 6, 16, 32, 3};
    for (auto level : simd::supported_levels()) {
        simd::ForceLevel force(level);
        INFO("level " << simd::level_name(level));
        std::vector<SsdRun> runs;
        for (std::size_t threads : {1u, 2u, 3u}) {
            ThreadPool::instance().resize(threads);
            runs.push_back(run_ssd([](auto&&... a) { kernels::ssd_chunked(a..., 16); }, s, true, 17));
        }
        for (std::size_t k = 1; k < runs.size(); ++k) {
            if (kernels::detail::own_gemm(level)) {
                CHECK(runs[k].y == runs[0].y);
                CHECK(runs[k].state == runs[0].state);
            } else {
                CHECK(rtest::rel_err(runs[k].y, runs[0].y) < 1e-6);
                CHECK(rtest::rel_err(runs[k].state, runs[0].state) < 1e-6);
            }
        }
    }
    ThreadPool::instance().resize(before);
}
