// Block replacement and stitching (C.7): T10 (a self-stitch with identity maps reproduces the
// intact model), the stitched model's ordinary forward (decode continues the block's cache),
// run_block, fit_stitch on a self-stitch (maps ~ identity, R^2 ~ 1), multi-slot stitching,
// a cross-kind stitch of a Qwen-like block into a Granite-like model of another hidden size,
// and fit_query_map + set_final.

#include <hylens/cache/cache_diff.hpp>
#include <hylens/cache/cache_io.hpp>
#include <hylens/cache/mask_state.hpp>
#include <hylens/interp/lens.hpp>
#include <hylens/interp/ridge.hpp>
#include <hylens/interp/state_patch.hpp>
#include <hylens/interp/stitch.hpp>

#include "../io/io_test_util.hpp"
#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <type_traits>
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

TEST_CASE("a stitched block's cache: saved and loaded whole, compared, copied, its heads refused, its sites fire") {
    // GDN | block (GDN, ATTN) | GDN: the block's slot holds a recurrent part and a KV cache,
    // both nested in its donor layers' cache (interp/stitch.hpp, StitchBlockCache).
    const auto m = test::random_qwen({});
    const auto s = stitch<NoAdapter>(m, StitchPlan{{{1, 2, {1, 2}, false}}}, m, {NoAdapter{}});
    const TokenBatch ids(prompt(3, 12));
    const auto a = s.prefill(ids), b = s.prefill(TokenBatch(prompt(4, 12)));
    // diff compares the block's parts (they read 0, "identical").
    const CacheDiff d = diff(a, b, LayerSet({1}));
    CHECK(d.kv > 0);
    CHECK(d.conv > 0);
    CHECK(d.state > 0);
    // save / load keep them (the file held none, and a loaded cache restarted the block).
    io_test::TempDir tmp;
    save_cache(a, tmp / "c.safetensors");
    const io::SafetensorsFile f = io::SafetensorsFile::open(tmp / "c.safetensors");
    for (const char* name : {"cache.0.state", "cache.1.0.conv", "cache.1.0.state", "cache.1.1.k", "cache.1.1.v", "cache.2.state"})
        CHECK_MESSAGE(f.contains(name), name);
    const auto loaded = load_cache(tmp / "c.safetensors", s.new_cache(1));
    CHECK(loaded == a);
    CHECK(diff(loaded, a).max() == 0.0);
    // copy_recurrent reaches the block's recurrent part and leaves its K/V.
    auto host = b;
    copy_recurrent(host, a, {1});
    CHECK(diff(host, a, LayerSet({1})).state == 0.0);
    CHECK(diff(host, b, LayerSet({1})).kv == 0.0);
    CHECK(diff(host, b, LayerSet({0, 2})).max() == 0.0);
    // ... and refuses a torn cache (a forward that failed part-way), as state_swap does.
    auto torn = a;
    torn.mark_torn("a test");
    CHECK_THROWS_WITH(copy_recurrent(host, torn, {0}), doctest::Contains("part-updated"));
    // The heads of one layer's part: a block has several layers' parts (it edited nothing).
    CHECK_THROWS_WITH_AS(mask_state<channel::ssm>(a, LayerSet({1}), {0}), doctest::Contains("layer 1 is a stitched block"),
                         ChannelError);
    CHECK_THROWS_AS(patch_heads<channel::kv>(a, b, LayerSet({1}), {0}), ChannelError);
    CHECK(mask_state<channel::ssm>(a, LayerSet({0}), {0}) != a);
    const auto all_masked = mask_state<channel::ssm>(a, LayerSet::all(), {0});  // all layers pass the block by
    CHECK(diff(all_masked, a, LayerSet({1})).max() == 0.0);
    CHECK(diff(all_masked, a, LayerSet({0})).state > 0.0);
    // Another plan of the same C++ type (one donor layer in the block, not two): not comparable,
    // and no copy between them (the extra donor layer was skipped, diff read 0).
    const auto s1 = stitch<NoAdapter>(m, StitchPlan{{{1, 2, {1}, false}}}, m, {NoAdapter{}});
    const auto one = s1.prefill(ids);
    static_assert(std::is_same_v<decltype(one), decltype(a)>);
    CHECK_FALSE(diff(a, one).same_layout);
    CHECK(diff(one, a).max() == std::numeric_limits<double>::infinity());
    auto into_one = one;
    CHECK_THROWS_WITH_AS(copy_recurrent(into_one, a, {1}), doctest::Contains("stitched blocks of different plans"), ShapeError);
    // The block's slot fires resid_pre, mixer_out (its write) and resid_post, and lists those.
    CHECK(layer_sites(s.stack(), 1) == std::vector<Site>{Site::resid_pre, Site::mixer_out, Site::resid_post});
    for (Site site : layer_sites(s.stack(), 1)) CHECK(capture(s, ids, {SiteRef{site, 1}}).size() == 1);
    CHECK_THROWS_AS(run(s, ids, {zero(Site::mlp_out, {1})}), ShapeError);  // accepted, and it did nothing
    CHECK(layer_sites(s.stack(), 0).size() > 3);
}

TEST_CASE("fit_stitch refuses a reversed block, Ridge and effective_rank name a non-finite value") {
    const auto m = test::random_granite({});
    std::vector<StitchItem> items;
    for (unsigned s = 0; s < 6; ++s) items.push_back({prompt(100 + s, 16)});
    CHECK_THROWS_WITH_AS(fit_stitch(m, 3, 1, m, {1, 2}, items), doctest::Contains("block [3, 1] is reversed"), ShapeError);
    CHECK_THROWS_WITH_AS(fit_stitch(m, 1, 9, m, {1, 2}, items), doctest::Contains("not inside the receiver's 4 layers"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(fit_stitch(m, 1, 2, m, {1, 7}, items), doctest::Contains("donor layer 7 out of 4"), ShapeError);
    CHECK_THROWS_WITH_AS((stitch<NoAdapter>(m, StitchPlan{{{2, 1, {1}, false}}}, m, {NoAdapter{}})),
                         doctest::Contains("block [2, 1] is reversed"), ShapeError);
    std::vector<float> X(20 * 3, 1.0f), T(20 * 2, 0.5f);
    for (std::size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(i % 7);
    X[4 * 3 + 1] = std::nanf("");
    CHECK_THROWS_WITH_AS(Ridge::fit(X, T, 20, Ridge::Options{}), doctest::Contains("X row 4 column 1 is nan"), ShapeError);
    CHECK_THROWS_WITH_AS(effective_rank(X.data(), 20, 3), doctest::Contains("row 4 column 1 is nan"), ShapeError);
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
