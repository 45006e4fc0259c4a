// kernels::linear (f32 sgemm, bf16 fused widen-and-dot, bf16 blocked widening) against its
// plain twin on random shapes.

#include <hylens/kernels/linear.hpp>
#include <hylens/kernels/reference/linear.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hylens;

TEST_CASE("linear: fast paths match the reference for f32 and bf16 weights, any M") {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (bool bf : {false, true}) {
        for (auto [M, out, in] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 1, 1}, {1, 130, 67}, {3, 64, 128},
                                  {4, 257, 33}, {5, 70, 96}, {37, 129, 200}, {64, 300, 64}}) {
            std::vector<float> wv(out * in), x(M * (in + 3)), bias(out);
            for (auto& v : wv) v = nd(rng);
            for (auto& v : x) v = nd(rng);
            for (auto& v : bias) v = nd(rng);
            const Weight W = bf ? Weight::from_floats_bf16(wv, {out, in}, "w") : Weight::from_floats(wv, {out, in}, "w");
            std::vector<float> y(M * (out + 1)), r(M * (out + 1));
            kernels::linear(x.data(), in + 3, M, W, bias.data(), y.data(), out + 1, 0.5f);
            reference::linear(x.data(), in + 3, M, W, bias.data(), r.data(), out + 1, 0.5f);
            double worst = 0;
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t o = 0; o < out; ++o)
                    worst = std::max(worst, std::fabs(double(y[m * (out + 1) + o]) - r[m * (out + 1) + o]) /
                                                (1.0 + std::fabs(r[m * (out + 1) + o])));
            INFO("bf16 " << bf << " M " << M << " out " << out << " in " << in);
            CHECK(worst <= 1e-5);
        }
    }
}

TEST_CASE("linear: shape errors name the weight") {
    const Weight W = Weight::from_floats(std::vector<float>(12), {3, 4}, "layers.0.q_proj");
    std::vector<float> x(8), y(8);
    try {
        kernels::linear(x.data(), 2, 1, W, nullptr, y.data(), 3);
        FAIL("no throw");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()).find("layers.0.q_proj") != std::string::npos);
    }
}
