// causal_conv1d: golden data (transformers torch_causal_conv1d_update), fast == reference on
// random shapes, split continuation, argument checks.

#include <hylens/kernels/conv1d.hpp>
#include <hylens/kernels/reference/conv1d.hpp>

#include <doctest/doctest.h>

#include "test_util.hpp"

using namespace hylens;

namespace {
using ConvFn = void (*)(const float*, std::size_t, std::size_t, std::size_t, const float*, std::size_t, const float*,
                        float*, float*, std::size_t, bool);
struct ConvForm {
    const char* name;
    ConvFn fn;
};
const ConvForm kConvForms[] = {{"fast", &kernels::causal_conv1d}, {"reference", &reference::causal_conv1d}};
}  // namespace

TEST_SUITE("kernels/causal_conv1d") {
    TEST_CASE("causal_conv1d matches every golden case (prefill, then single steps)") {
        const auto manifest = rtest::kernel_manifest();
        int cases = 0;
        for (const auto& [file, info] : manifest.items()) {
            if (info.at("kind") != "causal_conv1d") continue;
            ++cases;
            const auto t = golden::read_safetensors(rtest::golden_path(file));
            const std::size_t Bn = info.at("B"), C = info.at("channels"), K = info.at("d_conv"),
                              T = info.at("T_prefill"), steps = info.at("steps");
            const double atol = info.at("atol").at("y");
            const bool has_bias = info.at("bias");
            const float* bias = has_bias ? t.at("bias").data.data() : nullptr;
            const auto& w = t.at("weight").data;
            for (const auto& form : kConvForms) {
                CAPTURE(file);
                CAPTURE(std::string(form.name));
                for (std::size_t b = 0; b < Bn; ++b) {
                    std::vector<float> state(C * K, 0.0f), xs(T * C), y(T * C);
                    const float* xp = t.at("x_prefill").data.data() + b * C * T;  // (C, T)
                    for (std::size_t c = 0; c < C; ++c)
                        for (std::size_t i = 0; i < T; ++i) xs[i * C + c] = xp[c * T + i];
                    form.fn(xs.data(), C, T, C, w.data(), K, bias, state.data(), y.data(), C, true);
                    const float* yp = t.at("y_prefill").data.data() + b * C * T;
                    for (std::size_t c = 0; c < C; ++c)
                        for (std::size_t i = 0; i < T; ++i) CHECK(std::fabs(y[i * C + c] - yp[c * T + i]) <= atol);
                    CHECK(rtest::max_abs_diff(state.data(), t.at("state_after_prefill").data.data() + b * C * K,
                                              C * K) <= atol);
                    const float* xst = t.at("x_steps").data.data() + b * C * steps;
                    const float* yst = t.at("y_steps").data.data() + b * C * steps;
                    for (std::size_t i = 0; i < steps; ++i) {
                        std::vector<float> x1(C), y1(C);
                        for (std::size_t c = 0; c < C; ++c) x1[c] = xst[c * steps + i];
                        form.fn(x1.data(), C, 1, C, w.data(), K, bias, state.data(), y1.data(), C, true);
                        for (std::size_t c = 0; c < C; ++c) CHECK(std::fabs(y1[c] - yst[c * steps + i]) <= atol);
                    }
                    CHECK(rtest::max_abs_diff(state.data(), t.at("state_after_steps").data.data() + b * C * K,
                                              C * K) <= atol);
                }
            }
        }
        CHECK(cases == 3);
    }

    TEST_CASE("causal_conv1d fast equals reference on random shapes, strides and states") {
        std::mt19937 rng(11);
        for (std::size_t C : {1, 12, 300}) {
            for (std::size_t K : {1, 2, 4}) {
                for (std::size_t T : {1, 2, 3, 5, 37}) {
                    for (int variant = 0; variant < 2; ++variant) {
                        const bool with_bias = variant == 0, silu = variant == 1;
                        CAPTURE(C);
                        CAPTURE(K);
                        CAPTURE(T);
                        CAPTURE(variant);
                        const std::size_t ldx = C + 3, ldy = C + 5;
                        const auto x = rtest::randn(T * ldx, rng);
                        const auto w = rtest::randn(C * K, rng, 0.5f);
                        const auto bias = rtest::randn(C, rng);
                        const auto s0 = rtest::randn(C * K, rng);
                        std::vector<float> s_ref = s0, s_fast = s0, y_ref(T * ldy, 7.0f), y_fast(T * ldy, 7.0f);
                        const float* bp = with_bias ? bias.data() : nullptr;
                        reference::causal_conv1d(x.data(), ldx, T, C, w.data(), K, bp, s_ref.data(), y_ref.data(), ldy,
                                                 silu);
                        kernels::causal_conv1d(x.data(), ldx, T, C, w.data(), K, bp, s_fast.data(), y_fast.data(), ldy,
                                               silu);
                        CHECK(rtest::rel_err(y_fast, y_ref) <= 1e-5);  // padding columns untouched by both
                        CHECK(rtest::rel_err(s_fast, s_ref) == 0.0);   // the window is copied, never computed
                        // Split continuation: T1 tokens, then the rest, from the returned state.
                        // Every output is the same operations in the same order whatever the
                        // split (the one-token path, conv_step, included): the same bits.
                        for (std::size_t T1 = 1; T1 < T; T1 += 2) {
                            std::vector<float> s = s0, y(T * ldy, 7.0f);
                            kernels::causal_conv1d(x.data(), ldx, T1, C, w.data(), K, bp, s.data(), y.data(), ldy,
                                                   silu);
                            kernels::causal_conv1d(x.data() + T1 * ldx, ldx, T - T1, C, w.data(), K, bp, s.data(),
                                                   y.data() + T1 * ldy, ldy, silu);
                            CHECK(y == y_fast);
                            CHECK(s == s_fast);
                        }
                        // Token by token (a decode): the same bits as the one call.
                        std::vector<float> s_step = s0, y_step(T * ldy, 7.0f);
                        for (std::size_t t = 0; t < T; ++t)
                            kernels::causal_conv1d(x.data() + t * ldx, ldx, 1, C, w.data(), K, bp, s_step.data(),
                                                   y_step.data() + t * ldy, ldy, silu);
                        CHECK(y_step == y_fast);
                        CHECK(s_step == s_fast);
                    }
                }
            }
        }
    }

    TEST_CASE("causal_conv1d rejects shapes that cannot work") {
        std::vector<float> x(64, 1.0f), w(16, 1.0f), s(16, 0.0f), y(64);
        for (const auto& form : kConvForms) {
            CAPTURE(std::string(form.name));
            auto call = [&](std::size_t ldx, std::size_t T, std::size_t C, std::size_t K, std::size_t ldy,
                            float* yp) { form.fn(x.data(), ldx, T, C, w.data(), K, nullptr, s.data(), yp, ldy, true); };
            CHECK_THROWS_WITH_AS(call(4, 0, 4, 4, 4, y.data()), doctest::Contains("causal_conv1d"), ShapeError);
            CHECK_THROWS_AS(call(4, 2, 0, 4, 4, y.data()), ShapeError);
            CHECK_THROWS_AS(call(4, 2, 4, 0, 4, y.data()), ShapeError);
            CHECK_THROWS_WITH_AS(call(3, 2, 4, 4, 4, y.data()), doctest::Contains("stride"), ShapeError);
            CHECK_THROWS_AS(call(4, 2, 4, 4, 3, y.data()), ShapeError);
            CHECK_THROWS_WITH_AS(call(4, 2, 4, 4, 4, x.data() + 2), doctest::Contains("alias"), ShapeError);
            CHECK_THROWS_AS(call(4, 2, 4, 4, 4, nullptr), ShapeError);
        }
    }
}
