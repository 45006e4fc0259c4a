// Run-time channel checks for loaded models: an op on a channel that no layer of the model (or
// of the given layer set) holds is a ChannelError naming the model, its layers and the
// channel, where the compile-time check cannot see it (a loaded all-Mamba Granite's stack type
// allows attention). Stitched blocks declare their donor layers' channels and surgery edits them.

#include <hylens/cache/surgery.hpp>
#include <hylens/interp/stitch.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>

#include "../support/random_ids.hpp"
#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace hylens;

namespace {

/// Every value of every recurrent part inside layer `i` (a stitched block's donor layers included).
template <class Cache>
std::vector<float> recurrent_values(const Cache& c, std::size_t i) {
    std::vector<float> out;
    c.visit(i, [&](const auto& lc) {
        for_each_recurrent_part(lc, [&](const RecurrentCache& r) {
            for (std::size_t b = 0; b < r.batch(); ++b) {
                out.insert(out.end(), r.state(b), r.state(b) + r.state_size());
                out.insert(out.end(), r.conv(b), r.conv(b) + r.conv_channels() * r.conv_width());
            }
        });
    });
    return out;
}

template <class Cache>
std::size_t kv_length_inside(const Cache& c, std::size_t i) {
    std::size_t n = 0;
    c.visit(i, [&](const auto& lc) { for_each_kv_part(lc, [&](const KVCache& kv) { n += kv.length(); }); });
    return n;
}

bool all_zero(const std::vector<float>& v) {
    for (float x : v)
        if (x != 0.0f) return false;
    return true;
}

}  // namespace

TEST_SUITE("cache/channel_checks") {
    TEST_CASE("keep_only<kv> on a loaded all-Mamba Granite is a ChannelError naming model, layers and channel") {
        const AnyModel model = load(std::string(HYLENS_GOLDEN_DIR) + "/models/granite_h_allmamba");
        model.visit([&](const auto& m) {
            const auto a = m.prefill(TokenBatch(test::random_ids(6, m.config().vocab, 1)));
            const auto b = m.prefill(TokenBatch(test::random_ids(6, m.config().vocab, 2)));
            try {
                (void)keep_only<channel::kv>(a);
                FAIL("keep_only<channel::kv> on an all-Mamba model did not throw");
            } catch (const ChannelError& e) {
                const std::string w = e.what();
                CHECK(w.find("[keep_only] this model has no layer with the requested channel (channel::kv; model "
                             "granitemoehybrid, layers 0-2: mamba2 mamba2 mamba2)") != std::string::npos);
                CHECK(w.find("ask only for a channel that one of the model's layers holds") != std::string::npos);
            }
            CHECK_THROWS_AS((void)drop<channel::kv>(a), ChannelError);
            CHECK_THROWS_AS((void)drop<channel::kv>(a, LayerSet({1})), ChannelError);
            CHECK_THROWS_AS((void)state_swap(a, b, LayerSet({0}), LayerSet::all()), ChannelError);
            // What the model holds still works, and the split-prefill modes keep their table.
            CHECK(keep_only<channel::recurrent>(a) == a);
            CHECK(!(patch_state(a, b, LayerSet({0, 2})) == a));
            const auto kv_only = apply_split_mode(a, SplitMode::KV_ONLY).cache;
            for (std::size_t i = 0; i < kv_only.num_layers(); ++i) CHECK(all_zero(recurrent_values(kv_only, i)));
            CHECK_THROWS_AS((void)apply_split_mode(a, SplitMode::REC_ONLY, LayerSet({1})), ChannelError);
        });
    }

    TEST_CASE("split_prefill: an explicit layer list must name layers holding what the mode edits") {
        const AnyModel model = load(std::string(HYLENS_GOLDEN_DIR) + "/models/qwen3_5_dense");  // attention at 3, 7
        model.visit([&](const auto& m) {
            const auto a = m.prefill(TokenBatch(test::random_ids(6, m.config().vocab, 1)));
            CHECK_THROWS_WITH_AS((void)apply_split_mode(a, SplitMode::KV_ONLY, LayerSet({2, 3})),
                                 doctest::Contains("layer 3 (attention) does not hold the requested channel "
                                                   "(channel::recurrent; model qwen3_5"),
                                 ChannelError);
            CHECK_THROWS_AS((void)apply_split_mode(a, SplitMode::REC_ONLY, LayerSet({0})), ChannelError);
            CHECK_NOTHROW((void)apply_split_mode(a, SplitMode::KV_ONLY, LayerSet({0, 1, 2})));
            CHECK_NOTHROW((void)apply_split_mode(a, SplitMode::REC_ONLY, LayerSet({3, 7})));
        });
    }

    TEST_CASE("a stitched block declares its donor layers' channels, surgery edits them") {
        const auto m = test::random_qwen({});  // G G A G
        // Layers 1-3 become one block of donor layers 1, 2, 3 (G A G): stitched layers [G, S].
        const auto s = stitch<NoAdapter>(m, StitchPlan{{{1, 3, {1, 2, 3}, false}}}, m, {NoAdapter{}});
        using SC = typename std::remove_cvref_t<decltype(s)>::cache_type;
        const auto a = s.prefill(TokenBatch(test::random_ids(7, 50, 1)));
        const auto b = s.prefill(TokenBatch(test::random_ids(7, 50, 2)));
        REQUIRE(s.num_layers() == 2);
        CHECK(a.kind_name(1) == "stitch");
        CHECK(layers_with<channel::kv>(a) == std::vector<std::size_t>{1});
        CHECK(layers_with<channel::recurrent>(a) == std::vector<std::size_t>{0, 1});
        CHECK(kv_length_inside(a, 1) == 7);
        REQUIRE(!all_zero(recurrent_values(a, 1)));
        REQUIRE(recurrent_values(a, 1) != recurrent_values(b, 1));

        // KV-ONLY resets the block's recurrent layers and keeps its K/V; REC-ONLY empties its K/V.
        const SC kv = keep_only<channel::kv>(a);
        CHECK(all_zero(recurrent_values(kv, 1)));
        CHECK(kv_length_inside(kv, 1) == 7);
        const SC rec = keep_only<channel::recurrent>(a);
        CHECK(kv_length_inside(rec, 1) == 0);
        CHECK(recurrent_values(rec, 1) == recurrent_values(a, 1));

        // A state swap takes the block's recurrent state from the other cache; a state patch of
        // layer 1 only copies the block's.
        const SC ab = state_swap(a, b);
        CHECK(recurrent_values(ab, 1) == recurrent_values(b, 1));
        CHECK(recurrent_values(ab, 0) == recurrent_values(b, 0));
        const SC p = patch_state(a, b, LayerSet({1}));
        CHECK(recurrent_values(p, 1) == recurrent_values(b, 1));
        CHECK(recurrent_values(p, 0) == recurrent_values(a, 0));
        // The swapped cache behaves as B's recurrent state under A's K/V: decoding from it differs
        // from decoding A.
        auto ca = a, cab = ab;
        const Tensor3 la = s.forward(TokenBatch({5}), ca), lab = s.forward(TokenBatch({5}), cab);
        CHECK(max_abs_diff(la, lab) > 0.0f);
    }
}
