// Block replacement and stitching (C.7): T10 (a self-stitch with identity maps reproduces the
// intact model), the stitched model's ordinary forward (decode continues the block's cache),
// run_block, fit_stitch on a self-stitch (maps ~ identity, R^2 ~ 1), multi-slot stitching,
// a cross-kind stitch of a Qwen-like block into a Granite-like model of another hidden size,
// and fit_query_map + set_final.

#include <hylens/interp/stitch.hpp>

#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace hylens;

namespace {

std::vector<std::int64_t> prompt(unsigned seed, std::size_t T, std::int64_t vocab = 50) {
    std::mt19937 rng(seed);
    std::vector<std::int64_t> ids(T);
    for (auto& i : ids) i = static_cast<std::int64_t>(rng() % static_cast<unsigned>(vocab));
    return ids;
}

float rel(const Tensor3& a, const Tensor3& b) {
    REQUIRE(a.size() == b.size());
    float scale = 1.0f;
    for (float v : b) scale = std::max(scale, std::fabs(v));
    return max_abs_diff(a, b) / scale;
}

}  // namespace

TEST_SUITE("interp/stitch") {

TEST_CASE("T10: a self-stitch with identity maps reproduces the intact model") {
    const auto m = test::random_qwen({});
    const TokenBatch ids(prompt(1, 20));
    auto c = m.new_cache(1);
    const Tensor3 intact = m.forward(ids, c);
    const StitchPlan plan{{{0, 1, {0, 1}, false}}};
    SUBCASE("NoAdapter") {
        const auto s = stitch<NoAdapter>(m, plan, m, {NoAdapter{}});
        CHECK(s.num_layers() == m.num_layers() - 1);
        auto cs = s.new_cache(1);
        CHECK(rel(s.forward(ids, cs), intact) <= 1e-3f);
    }
    SUBCASE("LinearAdapter with identity maps, a block spanning the attention layer") {
        const StitchPlan p2{{{1, 3, {1, 2, 3}, false}}};
        const std::size_t H = m.config().hidden;
        const auto s = stitch<LinearAdapter>(m, p2, m, {LinearAdapter{AffineMap::identity(H), AffineMap::identity(H)}});
        CHECK(s.num_layers() == 2);
        auto cs = s.new_cache(1);
        CHECK(rel(s.forward(ids, cs), intact) <= 1e-3f);
    }
    SUBCASE("the stitched model is an ordinary model: prefill + decode equals one forward") {
        const auto s = stitch<NoAdapter>(m, plan, m, {NoAdapter{}});
        auto cs = s.new_cache(1);
        const Tensor3 all = s.forward(ids, cs);
        auto ci = s.prefill(TokenBatch(std::vector<std::int64_t>(ids.ids.begin(), ids.ids.end() - 1)));
        const Tensor3 step = s.forward(TokenBatch({ids.ids.back()}), ci);
        const std::size_t V = s.config().vocab;
        float d = 0;
        for (std::size_t v = 0; v < V; ++v) d = std::max(d, std::fabs(step.data()[v] - all.data()[(20 - 1) * V + v]));
        CHECK(d <= 1e-4f);
        // and interventions run on it like on any model (the block's slot fires mixer_out)
        const NamedTensors cap = capture(s, ids, {site::mixer_out(0), site::resid_post(2)});
        CHECK(cap.at("mixer_out.0").shape()[2] == m.config().hidden);
        const RunResult z = run(s, ids, {zero(Site::mixer_out, {0})});
        CHECK(rel(z.logits, all) > 1e-3f);
    }
}

TEST_CASE("run_block: the donor layers on a sequence with a fresh cache, zero_mixers keeps only the MLPs") {
    const auto m = test::random_granite({});
    const TokenBatch ids(prompt(2, 12));
    const NamedTensors c = capture(m, ids, {site::resid_pre(0), site::resid_post(1)});
    const std::vector<float> y = run_block(m, {0, 1}, flat(c.at("resid_pre.0")), 1, 12);
    const auto& want = flat(c.at("resid_post.1"));
    float d = 0;
    for (std::size_t i = 0; i < y.size(); ++i) d = std::max(d, std::fabs(y[i] - want[i]));
    CHECK(d <= 1e-4f);
    const std::vector<float> ym = run_block(m, {0}, flat(c.at("resid_pre.0")), 1, 12, true);
    const NamedTensors z = capture(m, ids, {site::resid_post(0)}, {zero(Site::mixer_out, {0})});
    d = 0;
    for (std::size_t i = 0; i < ym.size(); ++i) d = std::max(d, std::fabs(ym[i] - flat(z.at("resid_post.0"))[i]));
    CHECK(d <= 1e-4f);
    CHECK_THROWS_AS(run_block(m, {0}, std::vector<float>(5), 1, 12), ShapeError);
}

TEST_CASE("fit_stitch: a self-stitch fits maps with R^2 ~ 1 and reproduces the model, multi-slot in order") {
    const auto m = test::random_granite({});
    std::vector<StitchItem> items;
    for (unsigned s = 0; s < 12; ++s) items.push_back({prompt(100 + s, 16)});
    const StitchFit f = fit_stitch(m, 2, 3, m, {2, 3}, items);
    CHECK(f.r2_in > 0.9999);
    CHECK(f.r2_out > 0.999);
    const TokenBatch test_ids(prompt(7, 16));
    auto c = m.new_cache(1);
    const Tensor3 intact = m.forward(test_ids, c);
    const auto s = stitch<LinearAdapter>(m, StitchPlan{{{2, 3, {2, 3}, false}}}, m, {f.adapter});
    auto cs = s.new_cache(1);
    CHECK(rel(s.forward(test_ids, cs), intact) <= 1e-2f);

    const StitchPlan two{{{0, 0, {0}, false}, {2, 3, {2, 3}, false}}};
    auto [sm, fits] = fit_stitch_slots(m, two, m, items);
    REQUIRE(fits.size() == 2);
    CHECK(sm.num_layers() == 3);
    CHECK(two.map_layer(3) == -1);
    CHECK(two.map_layer(1) == 1);
    for (const auto& fi : fits) CHECK(fi.r2_out > 0.99);
    auto c2 = sm.new_cache(1);
    CHECK(rel(sm.forward(test_ids, c2), intact) <= 1e-2f);
}

TEST_CASE("stitch: a Qwen-like DeltaNet block in a Granite-like model of another hidden size is a new stack type") {
    const auto recv = test::random_granite({32, 50, false, 3});
    const auto donor = test::random_qwen({24, 50, false, 4});
    using S = decltype(stitch<LinearAdapter>(recv, StitchPlan{}, donor, {}))::stack_type;
    static_assert(S::has_kind<Mamba2Layer<>> && S::has_kind<AttentionLayer<>>);
    static_assert(std::is_same_v<S::kinds, std::tuple<Mamba2Layer<>, AttentionLayer<>,
                                                      StitchBlock<LinearAdapter, test::QwenLikeStack>>>);
    std::vector<StitchItem> items;
    for (unsigned s = 0; s < 10; ++s) items.push_back({prompt(200 + s, 16)});
    const StitchFit f = fit_stitch(recv, 2, 3, donor, {0, 1}, items);
    CHECK(f.adapter.in.in == 32);
    CHECK(f.adapter.in.out == 24);
    CHECK(f.r2_in <= 1.0);
    const auto s = stitch<LinearAdapter>(recv, StitchPlan{{{2, 3, {0, 1}, false}}}, donor, {f.adapter});
    auto cs = s.new_cache(1);
    const Tensor3 lg = s.forward(TokenBatch(prompt(5, 10)), cs);
    for (float v : lg) REQUIRE(std::isfinite(v));
    // a wrong-sized adapter is a runtime error that names both sizes
    CHECK_THROWS_AS(stitch<LinearAdapter>(recv, StitchPlan{{{2, 3, {0}, false}}}, donor,
                                          {LinearAdapter{AffineMap::identity(32), AffineMap::identity(32)}}),
                    ShapeError);
}

TEST_CASE("fit_query_map + set_final: writes the mapped rows at the final position") {
    const auto m = test::random_qwen({});
    const std::size_t H = m.config().hidden;
    std::vector<float> X, Y;
    std::size_t n = 0;
    for (unsigned s = 0; s < 40; ++s) {
        const TokenBatch ids(prompt(300 + s, 8));
        const NamedTensors c = capture(m, ids, {site::mixer_out(0, Positions::last()), site::mixer_out(1, Positions::last())});
        const auto& a = flat(c.at("mixer_out.0"));
        const auto& b = flat(c.at("mixer_out.1"));
        X.insert(X.end(), a.begin(), a.end());
        Y.insert(Y.end(), b.begin(), b.end());
        Y.insert(Y.end(), b.begin(), b.end());
        ++n;
    }
    const Ridge f = fit_query_map(X, Y, n);
    CHECK(f.variant() == RidgeVariant::query_map);
    const std::vector<float> mapped = f.apply(std::vector<float>(X.begin(), X.begin() + static_cast<long>(H)));
    const TokenBatch ids(prompt(999, 8));
    const RunResult r = run(m, ids, set_final({1, 3}, mapped, H), {{site::mixer_out(1), site::mixer_out(3)}});
    const auto& got = flat(r.captures.at("mixer_out.3"));
    for (std::size_t d = 0; d < H; ++d) CHECK(got[7 * H + d] == mapped[H + d]);
}

}  // TEST_SUITE
