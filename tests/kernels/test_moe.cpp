// MoE routing: softmax-then-top-k (with and without renormalisation) and top-k-then-softmax.

#include <hylens/kernels/moe.hpp>

#include <doctest/doctest.h>

#include <cmath>

using namespace hylens;

TEST_CASE("moe routing: the three rules on a hand-computed case") {
    const float logits[5] = {0.5f, 2.0f, -1.0f, 1.0f, 2.0f};  // a tie between experts 1 and 4
    const auto a = kernels::route(logits, 5, 2, kernels::Routing::topk_softmax);
    CHECK(a.experts == std::vector<int>{1, 4});  // ties go to the lower index first
    CHECK(a.weights[0] == doctest::Approx(0.5));
    double Z = 0;
    for (float l : logits) Z += std::exp(double(l));
    const auto b = kernels::route(logits, 5, 3, kernels::Routing::softmax_topk);
    CHECK(b.experts == std::vector<int>{1, 4, 3});
    CHECK(b.weights[2] == doctest::Approx(std::exp(1.0) / Z).epsilon(1e-6));
    const auto c = kernels::route(logits, 5, 3, kernels::Routing::softmax_topk_renorm);
    const double s = 2 * std::exp(2.0) + std::exp(1.0);
    CHECK(c.weights[2] == doctest::Approx(std::exp(1.0) / s).epsilon(1e-6));
    CHECK(c.weights[0] + c.weights[1] + c.weights[2] == doctest::Approx(1.0));
    CHECK_THROWS_AS(kernels::route(logits, 5, 6, kernels::Routing::softmax_topk), ShapeError);
}
