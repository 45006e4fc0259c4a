// kernels::linear (f32 sgemm, bf16 fused widen-and-dot, bf16 blocked widening) against its
// plain twin on random shapes.

#include "../support/nan_max.hpp"

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
                                  {4, 257, 33}, {5, 70, 96}, {37, 129, 200}, {64, 300, 64},
                                  {6, 1100, 24}}) {  // bf16 sgemm path: several blocks
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
                    worst = hylens::test::nan_max(worst, std::fabs(double(y[m * (out + 1) + o]) - r[m * (out + 1) + o]) /
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
    for (const auto& [shape, shown] : {std::pair<std::vector<std::size_t>, std::string>{{12}, "[12]"},
                                       {{2, 2, 3}, "[2, 2, 3]"}}) {
        const Weight V = Weight::from_floats(std::vector<float>(12), shape, "layers.0.v_proj");
        INFO("rank " << shape.size());
        try {
            kernels::linear(x.data(), 8, 1, V, nullptr, y.data(), 8);
            FAIL("no throw");
        } catch (const ShapeError& e) {
            const std::string what = e.what();
            CHECK(what.find("layers.0.v_proj") != std::string::npos);
            CHECK(what.find("must be 2-D, got " + shown) != std::string::npos);
        }
    }
}

TEST_CASE("linear: bf16 sgemm row blocks cover the rows in equal shares of at most 512") {
    const std::size_t shares = kernels::kBf16BlockShares;
    for (std::size_t out : {1u, 15u, 16u, 17u, 40u, 128u, 256u, 301u, 512u, 768u, 1100u, 3376u, 3584u, 6144u, 17888u,
                            248320u}) {
            const auto b = kernels::bf16_row_blocks(out);
            INFO("out " << out << " count " << b.count);
            REQUIRE(b.count >= 1);
            CHECK(b.begin(0) == 0);
            CHECK(b.begin(b.count) == out);
            std::size_t smallest = out, largest = 0;
            for (std::size_t k = 0; k < b.count; ++k) {
                CHECK(b.begin(k) % 16 == 0);
                const std::size_t rows = b.begin(k + 1) - b.begin(k);
                smallest = std::min(smallest, rows);
                largest = std::max(largest, rows);
            }
            CHECK(smallest >= 1);                            // no empty block
            CHECK(largest <= kernels::kBf16BlockRows);       // fits the scratch
            CHECK(largest - smallest < 32);                  // equal up to the alignment
            if (out >= 16 * shares) CHECK(b.count % shares == 0);  // equal shares for 1, 2 or 4 threads
    }
    // The Qwen3.5-0.8B MLP's [3584 x 1024]: 16 blocks (fixed 512-row blocks: 7, 4 + 3 on two
    // threads); a [512 x 1024] projection: 8 (fixed: 1, the second thread idle); a
    // [248320 x 1024] head: 504, within 512 rows each.
    CHECK(kernels::bf16_row_blocks(3584).count == 16);
    CHECK(kernels::bf16_row_blocks(512).count == 8);
    CHECK(kernels::bf16_row_blocks(248320).count == 504);
}
