// Mamba-2 SSD: golden data (mamba_ssm selective_state_update_ref stepped, float64), recurrent
// == chunked == reference on random shapes around the chunk boundary, groups, time-step clamps,
// split continuation, argument checks.

#include <hylens/core/simd.hpp>
#include <hylens/kernels/reference/ssd.hpp>
#include <hylens/kernels/ssd.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "test_util.hpp"

using namespace hylens;
using kernels::SsdShape;

namespace {

using SsdFn = std::function<void(const SsdShape&, const float*, std::size_t, const float*, const float*, std::size_t,
                                 const float*, std::size_t, const float*, const float*, const float*, float, float,
                                 float*, float*, std::size_t, float*)>;
struct SsdForm {
    std::string name;
    SsdFn fn;
};

std::vector<SsdForm> ssd_forms(std::size_t chunk) {
    auto chunked = [](auto f, std::size_t c) {
        return [f, c](const SsdShape& s, const float* x, std::size_t lx, const float* B, const float* C,
                      std::size_t lbc, const float* dt, std::size_t ldt, const float* dtb, const float* A,
                      const float* D, float lo, float hi, float* st, float* y, std::size_t ly, float* dto) {
            f(s, x, lx, B, C, lbc, dt, ldt, dtb, A, D, lo, hi, st, y, ly, dto, c);
        };
    };
    return {
        {"reference::recurrent", &reference::ssd_recurrent},
        {"reference::chunked", chunked(&reference::ssd_chunked, chunk)},
        {"recurrent", &kernels::ssd_recurrent},
        {"chunked", chunked(&kernels::ssd_chunked, chunk)},
        {"chunked(5)", chunked(&kernels::ssd_chunked, 5)},
        {"dispatch", &kernels::ssd},
    };
}

constexpr float kInf = std::numeric_limits<float>::infinity();

// Random inputs laid out as the Mamba-2 in_proj output after the conv: [x | B | C | dt] per token.
struct SsdCase {
    SsdShape s;
    std::size_t ld, ld_y;
    std::vector<float> xbcdt, dt_bias, A, D, state0;
    float lo, hi;
    bool with_d;

    SsdCase(SsdShape shape, bool d, float dt_lo, float dt_hi, std::mt19937& rng)
        : s(shape), lo(dt_lo), hi(dt_hi), with_d(d) {
        ld = s.H * s.P + 2 * s.G * s.N + s.H + 1;
        ld_y = s.H * s.P + 3;
        xbcdt = rtest::randn(s.T * ld, rng);
        for (std::size_t t = 0; t < s.T; ++t)
            for (std::size_t h = 0; h < s.H; ++h) xbcdt[t * ld + s.H * s.P + 2 * s.G * s.N + h] -= 1.0f;
        dt_bias = rtest::randn(s.H, rng, 0.5f);
        A = rtest::uniform(s.H, rng, -1.0f, 1.0f);
        for (auto& a : A) a = -std::exp(a);
        D = rtest::randn(s.H, rng);
        state0 = rtest::randn(s.H * s.P * s.N, rng, 0.5f);
    }
    const float* x(std::size_t t0) const { return xbcdt.data() + t0 * ld; }
    const float* B(std::size_t t0) const { return x(t0) + s.H * s.P; }
    const float* C(std::size_t t0) const { return B(t0) + s.G * s.N; }
    const float* dt(std::size_t t0) const { return C(t0) + s.G * s.N; }

    void run(const SsdFn& fn, std::size_t t0, std::size_t T, std::vector<float>& state, std::vector<float>& y,
             std::vector<float>& dt_out) const {
        SsdShape sub = s;
        sub.T = T;
        fn(sub, x(t0), ld, B(t0), C(t0), ld, dt(t0), ld, dt_bias.data(), A.data(), with_d ? D.data() : nullptr, lo,
           hi, state.data(), y.data() + t0 * ld_y, ld_y, dt_out.data() + t0 * s.H);
    }
};

}  // namespace

TEST_SUITE("kernels/ssd") {
    TEST_CASE("ssd: every form matches every golden case") {
        const auto manifest = rtest::kernel_manifest();
        int cases = 0;
        for (const auto& [file, info] : manifest.items()) {
            if (info.at("kind") != "mamba2_ssd") continue;
            ++cases;
            const auto t = golden::read_safetensors(rtest::golden_path(file));
            const SsdShape s{info.at("T"), info.at("nheads"), info.at("headdim"), info.at("d_state"),
                             info.at("ngroups")};
            const std::size_t Bn = info.at("B");
            const bool init = info.at("has_initial_state");
            const double atol_y = info.at("atol").at("y"), atol_s = info.at("atol").at("final_state");
            const std::size_t ns = s.H * s.P * s.N, nx = s.T * s.H * s.P, nbc = s.T * s.G * s.N;
            for (const auto& form : ssd_forms(info.at("chunk_size_used_for_chunked_form"))) {
                CAPTURE(file);
                CAPTURE(form.name);
                for (std::size_t b = 0; b < Bn; ++b) {
                    std::vector<float> state(ns, 0.0f), y(nx), dt_out(s.T * s.H);
                    if (init) std::copy_n(t.at("initial_state").data.data() + b * ns, ns, state.data());
                    form.fn(s, t.at("x").data.data() + b * nx, s.H * s.P, t.at("B").data.data() + b * nbc,
                            t.at("C").data.data() + b * nbc, s.G * s.N, t.at("dt").data.data() + b * s.T * s.H, s.H,
                            t.at("dt_bias").data.data(), t.at("A").data.data(), t.at("D").data.data(), 0.0f, kInf,
                            state.data(), y.data(), s.H * s.P, dt_out.data());
                    CHECK(rtest::max_abs_diff(y.data(), t.at("y").data.data() + b * nx, nx) <= atol_y);
                    CHECK(rtest::max_abs_diff(state.data(), t.at("final_state").data.data() + b * ns, ns) <= atol_s);
                }
            }
        }
        CHECK(cases == 7);
    }

    TEST_CASE("ssd: recurrent == chunked == reference around the chunk boundary") {
        std::mt19937 rng(9);
        // (H, P, N, G): G = 1, 2, 4; sizes on and off the SIMD width.
        const SsdShape shapes[] = {{0, 4, 8, 16, 1}, {0, 4, 8, 16, 2}, {0, 8, 4, 8, 4}, {0, 2, 5, 37, 1}};
        for (const auto& shape : shapes) {
            for (std::size_t T : {1, 2, 3, 63, 64, 65, 127, 128, 129, 200}) {
                for (int variant = 0; variant < 2; ++variant) {
                    SsdShape s = shape;
                    s.T = T;
                    CAPTURE(s.H);
                    CAPTURE(s.P);
                    CAPTURE(s.N);
                    CAPTURE(s.G);
                    CAPTURE(T);
                    CAPTURE(variant);
                    // variant 1: no D, and a time-step clamp that bites at both ends
                    const SsdCase c(s, variant == 0, variant == 0 ? 0.0f : 0.2f, variant == 0 ? kInf : 0.6f, rng);
                    std::vector<float> want_state = c.state0, want_y(T * c.ld_y, 0.f), want_dt(T * s.H);
                    c.run(&reference::ssd_recurrent, 0, T, want_state, want_y, want_dt);
                    // The reference steps with the kernels' own ssd_time_step, so the time step
                    // is checked here against its definition, in double: clamp(softplus(dt_raw +
                    // dt_bias), lo, hi), softplus(x) = log(1 + e^x) (x > 20: x).
                    double dt_err = 0.0;
                    std::size_t at_lo = 0, at_hi = 0;
                    for (std::size_t t = 0; t < T; ++t)
                        for (std::size_t h = 0; h < s.H; ++h) {
                            const double x = static_cast<double>(c.dt(t)[h]) + static_cast<double>(c.dt_bias[h]);
                            const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
                            const double lo = c.lo, hi = c.hi, d = std::min(std::max(sp, lo), hi);
                            at_lo += d == lo;
                            at_hi += d == hi;
                            dt_err = std::max(dt_err, std::fabs(static_cast<double>(want_dt[t * s.H + h]) - d) / d);
                        }
                    CHECK(dt_err <= 1e-5);  // float32 rounding of dt_raw + dt_bias and of the softplus
                    if (variant == 1 && T >= 63) {  // the clamp bites at both ends
                        CHECK(at_lo > 0);
                        CHECK(at_hi > 0);
                    }
                    for (const auto& form : ssd_forms(64)) {
                        CAPTURE(form.name);
                        std::vector<float> state = c.state0, y(T * c.ld_y, 0.f), dt(T * s.H);
                        c.run(form.fn, 0, T, state, y, dt);
                        CHECK(rtest::rel_err(y, want_y) <= 1e-5);
                        CHECK(rtest::rel_err(state, want_state) <= 1e-5);
                        CHECK(rtest::rel_err(dt, want_dt) == 0.0);
                    }
                    for (std::size_t T1 : {std::size_t{1}, T / 2, T - 1}) {
                        if (T1 == 0 || T1 >= T) continue;
                        for (const auto& form : ssd_forms(64)) {
                            if (form.name.rfind("reference", 0) == 0) continue;
                            CAPTURE(form.name);
                            CAPTURE(T1);
                            std::vector<float> state = c.state0, y(T * c.ld_y, 0.f), dt(T * s.H);
                            c.run(form.fn, 0, T1, state, y, dt);
                            c.run(form.fn, T1, T - T1, state, y, dt);
                            CHECK(rtest::rel_err(y, want_y) <= 1e-5);
                            CHECK(rtest::rel_err(state, want_state) <= 1e-5);
                        }
                    }
                }
            }
        }
    }

    TEST_CASE("ssd: a huge or infinite log decay in one step decays to 0 in every form, at every level") {
        // The chunked form summed a chunk's log decays Delta A in double: after a step of -1e15
        // the later small steps were lost to rounding, and A = -inf (A_log = 89, finite in a
        // checkpoint) gave -inf - (-inf) = NaN. The recurrent form multiplies by exp(Delta A) = 0.
        // Each step now counts at most -1000 (exp(-1000) is 0 in double).
        std::mt19937 rng(22);
        const SsdShape s{150, 4, 8, 16, 2};
        SsdCase c(s, true, 0.0f, kInf, rng);
        c.A[0] = -kInf;  // every step of head 0 forgets the state whole
        c.A[2] = -1.0f;  // head 2: a step of Delta = 1e15 every 20 tokens (its input zero there), small steps between
        for (std::size_t t = 7; t < s.T; t += 20) {
            c.xbcdt[t * c.ld + s.H * s.P + 2 * s.G * s.N + 2] = 1e15f;
            for (std::size_t p = 0; p < s.P; ++p) c.xbcdt[t * c.ld + 2 * s.P + p] = 0.0f;
        }
        std::vector<float> want_state = c.state0, want_y(s.T * c.ld_y, 0.f), want_dt(s.T * s.H);
        c.run(&reference::ssd_recurrent, 0, s.T, want_state, want_y, want_dt);
        REQUIRE(want_dt[7 * s.H + 2] == 1e15f);
        for (const auto& form : ssd_forms(64)) {
            CAPTURE(form.name);
            std::vector<float> state = c.state0, y(s.T * c.ld_y, 0.f), dt(s.T * s.H);
            c.run(form.fn, 0, s.T, state, y, dt);
            CHECK(rtest::rel_err(y, want_y) <= 1e-5);
            CHECK(rtest::rel_err(state, want_state) <= 1e-5);
        }
        for (auto level : simd::supported_levels()) {
            const std::string name = simd::level_name(level);
            CAPTURE(name);
            const simd::ForceLevel force(level);
            std::vector<float> state = c.state0, y(s.T * c.ld_y, 0.f), dt(s.T * s.H);
            c.run(&kernels::ssd, 0, s.T, state, y, dt);
            CHECK(rtest::rel_err(y, want_y) <= 1e-5);
            CHECK(rtest::rel_err(state, want_state) <= 1e-5);
        }
    }

    TEST_CASE("ssd: a batch of sequences keeps separate states") {
        std::mt19937 rng(4);
        const SsdShape s{90, 4, 8, 16, 2};
        const SsdCase c0(s, true, 0.0f, kInf, rng), c1(s, true, 0.0f, kInf, rng);
        for (const auto& form : ssd_forms(64)) {
            CAPTURE(form.name);
            std::vector<float> st0 = c0.state0, st1 = c1.state0, y0(s.T * c0.ld_y, 0.f), y1(s.T * c1.ld_y, 0.f),
                               d0(s.T * s.H), d1(s.T * s.H);
            c0.run(form.fn, 0, 70, st0, y0, d0);
            c1.run(form.fn, 0, 70, st1, y1, d1);
            c0.run(form.fn, 70, 20, st0, y0, d0);
            c1.run(form.fn, 70, 20, st1, y1, d1);
            for (const SsdCase* c : {&c0, &c1}) {
                std::vector<float> ws = c->state0, wy(s.T * c->ld_y, 0.f), wd(s.T * s.H);
                c->run(&reference::ssd_recurrent, 0, s.T, ws, wy, wd);
                CHECK(rtest::rel_err(c == &c0 ? y0 : y1, wy) <= 1e-5);
                CHECK(rtest::rel_err(c == &c0 ? st0 : st1, ws) <= 1e-5);
            }
        }
    }

    TEST_CASE("ssd: dt_out is optional") {
        std::mt19937 rng(2);
        const SsdShape s{70, 4, 8, 16, 2};
        const SsdCase c(s, true, 0.0f, kInf, rng);
        for (const auto& form : ssd_forms(64)) {
            CAPTURE(form.name);
            std::vector<float> st = c.state0, y(s.T * c.ld_y, 0.f), st2 = c.state0, y2(s.T * c.ld_y, 0.f),
                               dt(s.T * s.H);
            form.fn(s, c.x(0), c.ld, c.B(0), c.C(0), c.ld, c.dt(0), c.ld, c.dt_bias.data(), c.A.data(), c.D.data(),
                    c.lo, c.hi, st.data(), y.data(), c.ld_y, nullptr);
            c.run(form.fn, 0, s.T, st2, y2, dt);
            CHECK(rtest::rel_err(y, y2) == 0.0);
            CHECK(rtest::rel_err(st, st2) == 0.0);
        }
    }

    TEST_CASE("ssd: dispatch takes the recurrent form below ssd_chunked_min_t(level) tokens, the chunked form (64) from there") {
        // Bit for bit the form the rule names, at every level the machine has, one token each side
        // of the threshold (8 at the levels of our GEMM, 16 on sgemm).
        std::mt19937 rng(4);
        for (auto level : simd::supported_levels()) {
            const simd::ForceLevel force(level);
            const std::size_t min_t = kernels::ssd_chunked_min_t(level);
            CHECK(min_t == (simd::at_least(level, simd::Level::avx512) ? 8u : 16u));
            for (std::size_t T : {min_t - 1, min_t}) {
                CAPTURE(simd::level_name(level));
                CAPTURE(T);
                const SsdCase c(SsdShape{T, 4, 8, 16, 2}, true, 0.0f, kInf, rng);
                std::vector<float> st = c.state0, y(T * c.ld_y, 0.f), st_form = c.state0, y_form(T * c.ld_y, 0.f),
                                   dt(T * 4), dt_form(T * 4);
                c.run(&kernels::ssd, 0, T, st, y, dt);
                if (T < min_t)
                    c.run(&kernels::ssd_recurrent, 0, T, st_form, y_form, dt_form);
                else
                    c.run([](auto&&... a) { kernels::ssd_chunked(a..., 64); }, 0, T, st_form, y_form, dt_form);
                CHECK(y == y_form);
                CHECK(st == st_form);
            }
        }
    }

    TEST_CASE("ssd: shapes that cannot work throw ShapeError naming the kernel") {
        std::vector<float> buf(4096, 0.1f), state(4096), y(4096);
        for (const auto& form : ssd_forms(64)) {
            CAPTURE(form.name);
            const std::string kernel = form.name.rfind("reference", 0) == 0 ? "reference::ssd" : "ssd";
            auto call = [&](SsdShape s, std::size_t ld_x, std::size_t ld_bc, std::size_t ld_dt, std::size_t ld_y,
                            float lo = 0.0f, float hi = kInf) {
                form.fn(s, buf.data(), ld_x, buf.data(), buf.data(), ld_bc, buf.data(), ld_dt, buf.data(), buf.data(),
                        nullptr, lo, hi, state.data(), y.data(), ld_y, nullptr);
            };
            CHECK_THROWS_WITH_AS(call({2, 3, 2, 4, 2}, 6, 8, 3, 6), doctest::Contains(kernel.c_str()), ShapeError);  // H % G
            CHECK_THROWS_WITH_AS(call({2, 3, 2, 4, 2}, 6, 8, 3, 6), doctest::Contains("G"), ShapeError);
            CHECK_THROWS_AS(call({0, 2, 2, 4, 1}, 4, 4, 2, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 0, 2, 4, 1}, 4, 4, 2, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 2, 0, 4, 1}, 4, 4, 2, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 2, 2, 0, 1}, 4, 4, 2, 4), ShapeError);
            CHECK_THROWS_AS(call({2, 2, 2, 4, 0}, 4, 4, 2, 4), ShapeError);
            CHECK_THROWS_WITH_AS(call({2, 2, 2, 4, 1}, 3, 4, 2, 4), doctest::Contains("stride"), ShapeError);  // ld_x
            CHECK_THROWS_AS(call({2, 2, 2, 4, 1}, 4, 3, 2, 4), ShapeError);                                 // ld_bc
            CHECK_THROWS_AS(call({2, 2, 2, 4, 1}, 4, 4, 1, 4), ShapeError);                                 // ld_dt
            CHECK_THROWS_AS(call({2, 2, 2, 4, 1}, 4, 4, 2, 3), ShapeError);                                 // ld_y
            CHECK_THROWS_AS(call({2, 2, 2, 4, 1}, 4, 4, 2, 4, 0.5f, 0.1f), ShapeError);                      // dt range
        }
    }
}
