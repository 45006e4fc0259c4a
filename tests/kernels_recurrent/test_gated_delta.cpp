// Gated delta rule: golden data (transformers torch_recurrent_gated_delta_rule, float64),
// recurrent == chunked == reference on random shapes around the chunk boundary, split
// continuation, argument checks.

#include <hylens/core/simd.hpp>
#include <hylens/kernels/gated_delta.hpp>
#include <hylens/kernels/reference/gated_delta.hpp>

#include <doctest/doctest.h>

#include <functional>
#include <limits>

#include "test_util.hpp"

using namespace hylens;
using kernels::GatedDeltaShape;

namespace {

// One form under test, with the chunk fixed for the chunked ones.
using GdrFn = std::function<void(const GatedDeltaShape&, const float*, std::size_t, const float*, std::size_t,
                                 const float*, std::size_t, const float*, const float*, float*, float*, std::size_t,
                                 bool)>;
struct GdrForm {
    std::string name;
    GdrFn fn;
};

std::vector<GdrForm> gdr_forms(std::size_t chunk) {
    using namespace std::placeholders;
    auto chunked = [](auto f, std::size_t c) {
        return [f, c](const GatedDeltaShape& s, const float* q, std::size_t lq, const float* k, std::size_t lk,
                      const float* v, std::size_t lv, const float* g, const float* b, float* st, float* o,
                      std::size_t lo, bool l2) { f(s, q, lq, k, lk, v, lv, g, b, st, o, lo, l2, c); };
    };
    return {
        {"reference::recurrent", &reference::gated_delta_rule_recurrent},
        {"reference::chunked", chunked(&reference::gated_delta_rule_chunked, chunk)},
        {"recurrent", &kernels::gated_delta_rule_recurrent},
        {"chunked", chunked(&kernels::gated_delta_rule_chunked, chunk)},
        {"chunked(7)", chunked(&kernels::gated_delta_rule_chunked, 7)},
        {"dispatch", &kernels::gated_delta_rule},
    };
}

// Random inputs laid out as in a real layer: q, k, v packed in one fused row per token.
struct GdrCase {
    GatedDeltaShape s;
    bool l2;
    std::size_t ld;  // fused row: [q (Hk dk) | k (Hk dk) | v (Hv dv) | pad]
    std::vector<float> qkv, g, beta, state0;
    std::size_t ld_o;

    GdrCase(GatedDeltaShape shape, bool l2norm, std::mt19937& rng) : s(shape), l2(l2norm) {
        ld = 2 * s.Hk * s.dk + s.Hv * s.dv + 3;
        ld_o = s.Hv * s.dv + 2;
        qkv = rtest::randn(s.T * ld, rng);
        if (!l2) {  // keep |k|^2 near 1 so the delta rule stays contractive without the norm
            for (std::size_t t = 0; t < s.T; ++t)
                for (std::size_t i = 0; i < 2 * s.Hk * s.dk; ++i) qkv[t * ld + i] /= std::sqrt(float(s.dk));
        }
        g = rtest::uniform(s.T * s.Hv, rng, -0.6f, 0.0f);
        beta = rtest::uniform(s.T * s.Hv, rng, 0.05f, 0.95f);
        state0 = rtest::randn(s.Hv * s.dk * s.dv, rng, 0.5f);
    }
    const float* q(std::size_t t0 = 0) const { return qkv.data() + t0 * ld; }
    const float* k(std::size_t t0 = 0) const { return q(t0) + s.Hk * s.dk; }
    const float* v(std::size_t t0 = 0) const { return k(t0) + s.Hk * s.dk; }

    // Runs tokens [t0, t0 + T) of this case through fn, on `state`, into out rows t0...
    void run(const GdrFn& fn, std::size_t t0, std::size_t T, std::vector<float>& state, std::vector<float>& out) const {
        GatedDeltaShape sub = s;
        sub.T = T;
        fn(sub, q(t0), ld, k(t0), ld, v(t0), ld, g.data() + t0 * s.Hv, beta.data() + t0 * s.Hv, state.data(),
           out.data() + t0 * ld_o, ld_o, l2);
    }
};

}  // namespace

TEST_SUITE("kernels/gated_delta_rule") {
    TEST_CASE("gated delta rule: every form matches every golden case") {
        const auto manifest = rtest::kernel_manifest();
        int cases = 0;
        for (const auto& [file, info] : manifest.items()) {
            if (info.at("kind") != "gated_delta_rule") continue;
            ++cases;
            const auto t = golden::read_safetensors(rtest::golden_path(file));
            const GatedDeltaShape s{info.at("T"), info.at("num_k_heads"), info.at("num_v_heads"), info.at("head_k_dim"),
                                    info.at("head_v_dim")};
            const std::size_t Bn = info.at("B");
            const bool l2 = info.at("use_qk_l2norm"), init = info.at("has_initial_state");
            const double atol_o = info.at("atol").at("o"), atol_s = info.at("atol").at("final_state");
            const std::size_t ns = s.Hv * s.dk * s.dv, nq = s.T * s.Hk * s.dk, nv = s.T * s.Hv * s.dv;
            for (const auto& form : gdr_forms(info.at("chunk_size_used_for_chunked_forms"))) {
                CAPTURE(file);
                CAPTURE(form.name);
                for (std::size_t b = 0; b < Bn; ++b) {
                    std::vector<float> state(ns, 0.0f), out(nv);
                    if (init) std::copy_n(t.at("initial_state").data.data() + b * ns, ns, state.data());
                    form.fn(s, t.at("q").data.data() + b * nq, s.Hk * s.dk, t.at("k").data.data() + b * nq,
                            s.Hk * s.dk, t.at("v").data.data() + b * nv, s.Hv * s.dv,
                            t.at("g").data.data() + b * s.T * s.Hv, t.at("beta").data.data() + b * s.T * s.Hv,
                            state.data(), out.data(), s.Hv * s.dv, l2);
                    CHECK(rtest::max_abs_diff(out.data(), t.at("o").data.data() + b * nv, nv) <= atol_o);
                    CHECK(rtest::max_abs_diff(state.data(), t.at("final_state").data.data() + b * ns, ns) <= atol_s);
                }
            }
        }
        CHECK(cases == 9);
    }

    TEST_CASE("gated delta rule: recurrent == chunked == reference around the chunk boundary") {
        std::mt19937 rng(5);
        // (Hk, Hv, dk, dv): Hv = Hk, 2 Hk, 3 Hk; dk != dv; one dimension above a SIMD width.
        const GatedDeltaShape shapes[] = {{0, 2, 2, 16, 24}, {0, 1, 2, 8, 16}, {0, 2, 6, 16, 8}, {0, 1, 1, 40, 33}};
        for (const auto& shape : shapes) {
            for (std::size_t T : {1, 2, 3, 63, 64, 65, 127, 128, 129, 200}) {
                for (bool l2 : {true, false}) {
                    if (!l2 && T % 2 == 0) continue;  // the un-normalised path needs fewer lengths
                    GatedDeltaShape s = shape;
                    s.T = T;
                    CAPTURE(s.Hk);
                    CAPTURE(s.Hv);
                    CAPTURE(s.dk);
                    CAPTURE(s.dv);
                    CAPTURE(T);
                    CAPTURE(l2);
                    const GdrCase c(s, l2, rng);
                    std::vector<float> want_state = c.state0, want_out(T * c.ld_o, 0.0f);
                    c.run(&reference::gated_delta_rule_recurrent, 0, T, want_state, want_out);
                    for (const auto& form : gdr_forms(64)) {
                        CAPTURE(form.name);
                        std::vector<float> state = c.state0, out(T * c.ld_o, 0.0f);
                        c.run(form.fn, 0, T, state, out);
                        CHECK(rtest::rel_err(out, want_out) <= 1e-5);
                        CHECK(rtest::rel_err(state, want_state) <= 1e-5);
                    }
                    // Split continuation: T1 tokens, then T - T1 from the returned state.
                    for (std::size_t T1 : {std::size_t{1}, T / 2, T - 1}) {
                        if (T1 == 0 || T1 >= T) continue;
                        for (const auto& form : gdr_forms(64)) {
                            if (form.name.rfind("reference", 0) == 0) continue;
                            CAPTURE(form.name);
                            CAPTURE(T1);
                            std::vector<float> state = c.state0, out(T * c.ld_o, 0.0f);
                            c.run(form.fn, 0, T1, state, out);
                            c.run(form.fn, T1, T - T1, state, out);
                            CHECK(rtest::rel_err(out, want_out) <= 1e-5);
                            CHECK(rtest::rel_err(state, want_state) <= 1e-5);
                        }
                    }
                }
            }
        }
    }

    TEST_CASE("gated delta rule: a huge or infinite log decay in one step decays to 0 in every form, at every level") {
        // The chunked form summed a chunk's log decays in double: after a step of -1e15 the later
        // steps of -0.005 were lost to rounding (exp(gam_i - gam_j) came out 1, not 0.995), and a
        // step of -inf (a gate of -exp(A_log) with A_log = 89, finite in a checkpoint) gave
        // -inf - (-inf) = NaN. The recurrent form multiplies by exp(g) = 0 and stays exact. Each
        // step now counts at most -1000 (exp(-1000) is 0 in double). The dispatch runs the chunked
        // form below avx512, so the levels disagreed.
        std::mt19937 rng(21);
        const GatedDeltaShape s{150, 2, 4, 16, 16};
        for (const float spike : {-1e15f, -std::numeric_limits<float>::infinity()}) {
            CAPTURE(spike);
            GdrCase c(s, true, rng);
            for (std::size_t t = 0; t < s.T; ++t)
                for (std::size_t h = 0; h < s.Hv; ++h) c.g[t * s.Hv + h] = t % 20 == 7 && h != 1 ? spike : -0.005f;
            std::vector<float> want_state = c.state0, want_out(s.T * c.ld_o, 0.0f);
            c.run(&reference::gated_delta_rule_recurrent, 0, s.T, want_state, want_out);
            for (const auto& form : gdr_forms(64)) {
                CAPTURE(form.name);
                std::vector<float> state = c.state0, out(s.T * c.ld_o, 0.0f);
                c.run(form.fn, 0, s.T, state, out);
                CHECK(rtest::rel_err(out, want_out) <= 1e-5);
                CHECK(rtest::rel_err(state, want_state) <= 1e-5);
            }
            for (auto level : simd::supported_levels()) {
                const std::string name = simd::level_name(level);
                CAPTURE(name);
                const simd::ForceLevel force(level);
                std::vector<float> state = c.state0, out(s.T * c.ld_o, 0.0f);
                c.run(&kernels::gated_delta_rule, 0, s.T, state, out);
                CHECK(rtest::rel_err(out, want_out) <= 1e-5);
                CHECK(rtest::rel_err(state, want_state) <= 1e-5);
            }
        }
    }

    TEST_CASE("gated delta rule: a batch of sequences keeps separate states") {
        std::mt19937 rng(8);
        const GatedDeltaShape s{70, 2, 4, 16, 16};
        const GdrCase c0(s, true, rng), c1(s, true, rng);
        for (const auto& form : gdr_forms(64)) {
            CAPTURE(form.name);
            // Interleave the two sequences' calls on their own states, in two pieces each.
            std::vector<float> st0 = c0.state0, st1 = c1.state0, o0(s.T * c0.ld_o, 0.f), o1(s.T * c1.ld_o, 0.f);
            c0.run(form.fn, 0, 30, st0, o0);
            c1.run(form.fn, 0, 30, st1, o1);
            c0.run(form.fn, 30, 40, st0, o0);
            c1.run(form.fn, 30, 40, st1, o1);
            for (const GdrCase* c : {&c0, &c1}) {
                std::vector<float> ws = c->state0, wo(s.T * c->ld_o, 0.f);
                c->run(&reference::gated_delta_rule_recurrent, 0, s.T, ws, wo);
                CHECK(rtest::rel_err(c == &c0 ? o0 : o1, wo) <= 1e-5);
                CHECK(rtest::rel_err(c == &c0 ? st0 : st1, ws) <= 1e-5);
            }
        }
    }

    TEST_CASE("gated delta rule: dispatch takes the form gated_delta_dispatch(level) names, bit for bit") {
        // The measured rule: never chunked at the avx512 levels; from 4 tokens on, in chunks of
        // 16, at avx2; from 8 tokens on, in chunks of 32, at baseline. At every level the machine
        // has: one token each side of both thresholds, and 70 tokens (chunks of 16 or 32, the
        // last short).
        std::mt19937 rng(9);
        for (auto level : simd::supported_levels()) {
            const simd::ForceLevel force(level);
            const kernels::GatedDeltaDispatch rule = kernels::gated_delta_dispatch(level);
            const bool avx512 = simd::at_least(level, simd::Level::avx512);
            const bool avx2 = !avx512 && simd::at_least(level, simd::Level::avx2);
            CHECK(rule.min_t == (avx512 ? static_cast<std::size_t>(-1) : avx2 ? 4u : 8u));
            CHECK(rule.chunk == (avx512 ? 64u : avx2 ? 16u : 32u));
            for (std::size_t T : {std::size_t{3}, std::size_t{4}, std::size_t{7}, std::size_t{8}, std::size_t{70}}) {
                CAPTURE(simd::level_name(level));
                CAPTURE(T);
                const GdrCase c(GatedDeltaShape{T, 2, 4, 16, 8}, true, rng);
                std::vector<float> st = c.state0, out(T * c.ld_o, 0.f), st_form = c.state0, out_form(T * c.ld_o, 0.f);
                c.run(&kernels::gated_delta_rule, 0, T, st, out);
                if (T < rule.min_t)
                    c.run(&kernels::gated_delta_rule_recurrent, 0, T, st_form, out_form);
                else
                    c.run([&](auto&&... a) { kernels::gated_delta_rule_chunked(a..., rule.chunk); }, 0, T, st_form,
                          out_form);
                CHECK(out == out_form);
                CHECK(st == st_form);
            }
        }
    }

    TEST_CASE("gated delta rule: shapes that cannot work throw ShapeError naming the kernel") {
        std::vector<float> buf(4096, 0.1f), state(4096), out(4096);
        for (const auto& form : gdr_forms(64)) {
            CAPTURE(form.name);
            const std::string kernel = form.name.rfind("reference", 0) == 0 ? "reference::gated_delta_rule"
                                                                           : "gated_delta_rule";
            auto call = [&](GatedDeltaShape s, std::size_t ld_q, std::size_t ld_v, std::size_t ld_o) {
                form.fn(s, buf.data(), ld_q, buf.data(), ld_q, buf.data(), ld_v, buf.data(), buf.data(),
                        state.data(), out.data(), ld_o, true);
            };
            CHECK_THROWS_WITH_AS(call({2, 2, 3, 4, 4}, 8, 12, 12), doctest::Contains(kernel.c_str()), ShapeError);  // Hv % Hk
            CHECK_THROWS_WITH_AS(call({2, 2, 3, 4, 4}, 8, 12, 12), doctest::Contains("Hv"), ShapeError);
            CHECK_THROWS_AS(call({0, 1, 1, 4, 4}, 4, 4, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 0, 1, 4, 4}, 4, 4, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 1, 1, 0, 4}, 4, 4, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 1, 1, 4, 0}, 4, 4, 4), ShapeError);
            CHECK_THROWS_WITH_AS(call({2, 2, 2, 4, 4}, 7, 8, 8), doctest::Contains("stride"), ShapeError);  // ld_q
            CHECK_THROWS_AS(call({2, 2, 2, 4, 4}, 8, 7, 8), ShapeError);                                 // ld_v
            CHECK_THROWS_AS(call({2, 2, 2, 4, 4}, 8, 8, 7), ShapeError);                                 // ld_o
        }
        const GatedDeltaShape s{2, 1, 1, 4, 4};
        CHECK_THROWS_AS(kernels::gated_delta_rule_chunked(s, buf.data(), 4, buf.data(), 4, buf.data(), 4, buf.data(),
                                                          buf.data(), state.data(), out.data(), 4, true, 0),
                        ShapeError);
        CHECK_THROWS_AS(kernels::gated_delta_rule_recurrent(s, nullptr, 4, buf.data(), 4, buf.data(), 4, buf.data(),
                                                            buf.data(), state.data(), out.data(), 4, true),
                        ShapeError);
    }
}
