// Cache surgery ops on random stacks of every kind (Qwen-, Granite-, Falcon-like, batch 2):
// what each op keeps, zeroes, empties or copies, per layer set; inputs are never modified;
// runtime mismatches are ShapeErrors.

#include <hylens/cache/surgery.hpp>

#include "../support/random_model.hpp"
#include "../support/random_ids.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace hylens;

namespace {

bool all_zero(const float* p, std::size_t n) {
    return std::all_of(p, p + n, [](float x) { return x == 0.0f; });
}

/// Per layer: is the KV empty, the conv window zero, the state zero (only for parts present).
struct LayerView {
    bool has_kv = false, has_rec = false;
    std::size_t kv_len = 0;
    bool conv_zero = false, state_zero = false;
};
template <class Cache>
LayerView view(const Cache& c, std::size_t i) {
    LayerView v;
    c.visit(i, [&](const auto& lc) {
        if (const KVCache* kv = kv_part(lc)) {
            v.has_kv = true;
            v.kv_len = kv->length();
        }
        if (const RecurrentCache* r = recurrent_part(lc)) {
            v.has_rec = true;
            v.conv_zero = v.state_zero = true;
            for (std::size_t b = 0; b < r->batch(); ++b) {
                v.conv_zero = v.conv_zero && all_zero(r->conv(b), r->conv_channels() * r->conv_width());
                v.state_zero = v.state_zero && all_zero(r->state(b), r->state_size());
            }
        }
    });
    return v;
}

template <class Model>
void check_channel_ops(const Model& m, const std::string& label) {
    INFO(label);
    constexpr std::size_t n = 9;
    const auto a = m.prefill(test::random_batch(2, n, m.config().vocab, 1));
    const auto a_copy = a;
    const std::size_t L = a.num_layers();
    // Layers 1 and 2, as far as they hold the channel (a layer set may only name layers that do).
    const auto among_1_2 = [&](std::vector<std::size_t> v) {
        std::erase_if(v, [](std::size_t i) { return i != 1 && i != 2; });
        return LayerSet(std::move(v));
    };
    const LayerSet rec_some = among_1_2(layers_with<channel::recurrent>(a));
    const LayerSet kv_some = among_1_2(layers_with<channel::kv>(a));
    // A prefilled cache: every KV holds n positions, every recurrent part is non-zero.
    for (std::size_t i = 0; i < L; ++i) {
        const LayerView v = view(a, i);
        if (v.has_kv) CHECK(v.kv_len == n);
        if (v.has_rec) CHECK((!v.conv_zero && !v.state_zero));
    }

    SUBCASE("keep_only<kv> resets every recurrent part and keeps the KV") {
        const auto k = keep_only<channel::kv>(a);
        for (std::size_t i = 0; i < L; ++i) {
            const LayerView v = view(k, i);
            if (v.has_kv) CHECK(v.kv_len == n);
            if (v.has_rec) CHECK((v.conv_zero && v.state_zero));
        }
        CHECK(diff(k, a).kv == 0.0);
        CHECK(continue_position(k) == n);
    }
    SUBCASE("keep_only<recurrent> empties every KV and keeps the recurrent parts") {
        const auto k = keep_only<channel::recurrent>(a);
        for (std::size_t i = 0; i < L; ++i) {
            const LayerView v = view(k, i);
            if (v.has_kv) CHECK(v.kv_len == 0);
        }
        const CacheDiff d = diff(k, a);
        CHECK(!d.same_layout);  // KV lengths differ now
        // the KV part does not read "identical" (it read 0); the recurrent parts are compared
        CHECK(std::isinf(d.kv));
        CHECK(d.conv == 0.0);
        CHECK(d.state == 0.0);
        CHECK(std::isinf(d.max()));
        CHECK(continue_position(k) == 0);
        // Restricted to the recurrent parts, nothing changed.
        CHECK(keep_only<channel::kv>(k) == keep_only<channel::kv>(keep_only<channel::recurrent>(a)));
    }
    SUBCASE("keep_only<ssm> / keep_only<conv> keep one half of the recurrent part") {
        const auto s = keep_only<channel::ssm>(a);
        const auto c = keep_only<channel::conv>(a);
        for (std::size_t i = 0; i < L; ++i) {
            const LayerView vs = view(s, i), vc = view(c, i);
            if (vs.has_rec) {
                CHECK((vs.conv_zero && !vs.state_zero));
                CHECK((!vc.conv_zero && vc.state_zero));
            }
            if (vs.has_kv) CHECK((vs.kv_len == 0 && vc.kv_len == 0));
        }
    }
    SUBCASE("drop on a layer set touches only those layers") {
        const auto d = drop<channel::recurrent>(a, rec_some);
        const auto k = drop<channel::kv>(a, kv_some);
        for (std::size_t i = 0; i < L; ++i) {
            const LayerView vd = view(d, i), vk = view(k, i);
            if (vd.has_rec) CHECK((vd.conv_zero && vd.state_zero) == rec_some.contains(i));
            if (vk.has_kv) CHECK((vk.kv_len == 0) == kv_some.contains(i));
            if (!rec_some.contains(i)) CHECK(diff(d, a, LayerSet({i})).max() == 0.0);
            if (!kv_some.contains(i)) CHECK(diff(k, a, LayerSet({i})).max() == 0.0);
        }
        CHECK(drop<channel::recurrent>(a, LayerSet::none()) == a);
        CHECK(drop<channel::recurrent>(a, LayerSet(layers_with<channel::recurrent>(a))) == drop<channel::recurrent>(a));
    }
    SUBCASE("drop<recurrent> with ssm_only keeps the conv window") {
        const auto d = drop<channel::recurrent>(a, {}, DropOptions{.ssm_only = true});
        for (std::size_t i = 0; i < L; ++i) {
            const LayerView v = view(d, i);
            if (v.has_rec) CHECK((!v.conv_zero && v.state_zero));
        }
        CHECK(d == drop<channel::ssm>(a));
        CHECK(diff(d, a).conv == 0.0);
    }
    SUBCASE("state_swap: KV from one cache, recurrent part from the other, per layer set") {
        const auto b = m.prefill(test::random_batch(2, n + 4, m.config().vocab, 2));
        CHECK(state_swap(a, a) == a);  // one source: that source
        CHECK(state_swap(b, b) == b);
        const auto ab = state_swap(a, b);
        CHECK(continue_position(ab) == n);  // KV source's length
        CHECK(ab.kv_len() == n);
        CHECK(diff(keep_only<channel::kv>(ab), keep_only<channel::kv>(a)).max() == 0.0);
        // Recurrent parts are b's: equal after emptying the KV of both.
        auto rb = keep_only<channel::recurrent>(b);
        auto rab = keep_only<channel::recurrent>(ab);
        rab.set_tokens_seen(rb.tokens_seen());
        CHECK(rab == rb);
        // Layer subsets: layers_rec = none is the KV source; layers_kv = none takes the KV too.
        CHECK(state_swap(a, b, LayerSet::all(), LayerSet::none()) == a);
        auto bb = state_swap(a, b, LayerSet::none(), LayerSet::all());
        bb.set_tokens_seen(b.tokens_seen());
        CHECK(bb == b);
        const auto part = state_swap(a, b, LayerSet::all(), rec_some);
        for (std::size_t i = 0; i < L; ++i) {
            const bool in = rec_some.contains(i);
            const CacheDiff to_a = diff(part, a, LayerSet({i}));
            CHECK((to_a.conv == 0.0 && to_a.state == 0.0) != (in && view(a, i).has_rec));
        }
        // conv_with_state = false: only the SSM state comes from the other cache.
        const auto noconv = state_swap(a, b, LayerSet::all(), LayerSet::all(), false);
        CHECK(diff(noconv, a).conv == 0.0);
        CHECK(diff(noconv, a).state > 0.0);
        CHECK(a == a_copy);  // inputs untouched
    }
    SUBCASE("patch_state copies states of the listed layers only; host -> host is the identity") {
        const auto d = m.prefill(test::random_batch(2, n, m.config().vocab, 3));
        CHECK(patch_state(a, a, LayerSet::all()) == a);
        // Caches of other batch sizes: the error names patch_state (it said state_swap).
        const auto one = m.prefill(test::random_batch(1, n, m.config().vocab, 3));
        CHECK_THROWS_WITH_AS((void)patch_state(a, one, LayerSet::all()), "[patch_state] the caches hold 2 and 1 sequences", ShapeError);
        const auto p = patch_state(a, d, rec_some);
        const auto p_noconv = patch_state(a, d, rec_some, false);
        for (std::size_t i = 0; i < L; ++i) {
            const bool in = rec_some.contains(i) && view(a, i).has_rec;
            CHECK((diff(p, d, LayerSet({i})).state == 0.0) == (in || !view(a, i).has_rec));
            CHECK((diff(p, a, LayerSet({i})).state == 0.0) == !in);
            CHECK(diff(p_noconv, a, LayerSet({i})).conv == 0.0);
        }
        CHECK(diff(p, a).kv == 0.0);
        CHECK(a == a_copy);
    }
    SUBCASE("a layer set entry naming a layer without the channel is a ChannelError, not a no-op") {
        const auto d = m.prefill(test::random_batch(2, n, m.config().vocab, 3));
        for (std::size_t i = 0; i < L; ++i) {
            INFO("layer ", i);
            const LayerView v = view(a, i);
            if (!v.has_kv) {
                CHECK_THROWS_AS((void)drop<channel::kv>(a, LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)keep_only<channel::kv>(a, LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)state_swap(a, d, LayerSet({i}), LayerSet::all()), ChannelError);
                // mask_state / patch_heads returned the cache unchanged here.
                CHECK_THROWS_AS((void)mask_state<channel::kv>(a, LayerSet({i}), {0}), ChannelError);
                CHECK_THROWS_AS((void)patch_heads<channel::kv>(a, d, LayerSet({i}), {0}), ChannelError);
            }
            if (!v.has_rec) {
                CHECK_THROWS_AS((void)drop<channel::recurrent>(a, LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)drop<channel::ssm>(a, LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)patch_state(a, d, LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)state_swap(a, d, LayerSet::all(), LayerSet({i})), ChannelError);
                CHECK_THROWS_AS((void)mask_state<channel::ssm>(a, LayerSet({i}), {0}), ChannelError);
                CHECK_THROWS_AS((void)patch_heads<channel::conv>(a, d, LayerSet({i}), {0}), ChannelError);
                try {
                    (void)drop<channel::recurrent>(a, LayerSet({i}));
                } catch (const ChannelError& e) {
                    const std::string w = e.what();
                    CHECK(w.find("[drop] layer " + std::to_string(i) + " (attention) does not hold the requested "
                                 "channel (channel::recurrent") != std::string::npos);
                }
            }
        }
        CHECK(a == a_copy);
    }
    SUBCASE("patch_state: host and donor must come from prefixes of equal length") {
        const auto longer = m.prefill(test::random_batch(2, n + 1, m.config().vocab, 3));
        CHECK_THROWS_WITH_AS((void)patch_state(a, longer, LayerSet::all()),
                             doctest::Contains("has seen 9 tokens and the donor 10"), ShapeError);
    }
    SUBCASE("mask_state and patch_heads edit single heads and channels") {
        const auto z = mask_state<channel::ssm>(a, LayerSet::all(), {0});
        const auto c = mask_state<channel::conv>(a, LayerSet({0}), {2, 5}, 1.5f);
        const auto k = mask_state<channel::kv>(a, LayerSet::all(), {1});
        for (std::size_t i = 0; i < L; ++i)
            z.visit(i, [&](const auto& lc) {
                if (const RecurrentCache* r = recurrent_part(lc)) {
                    const std::size_t per = r->state_size() / r->state_shape()[0];
                    for (std::size_t b = 0; b < r->batch(); ++b) {
                        CHECK(all_zero(r->state(b), per));
                        CHECK(!all_zero(r->state(b) + per, per));
                    }
                }
            });
        c.visit(0, [&](const auto& lc) {
            if (const RecurrentCache* r = recurrent_part(lc)) {
                const std::size_t K = r->conv_width();
                for (std::size_t b = 0; b < r->batch(); ++b) CHECK(r->conv(b)[2 * K + 1] == 1.5f);
                CHECK(r->conv(0)[0] != 1.5f);
            }
        });
        CHECK(diff(c, a, LayerSet::range(1, L)).max() == 0.0);
        for (std::size_t i = 0; i < L; ++i)
            k.visit(i, [&](const auto& lc) {
                if (const KVCache* kv = kv_part(lc)) {
                    CHECK(all_zero(kv->k(1, 1), n * kv->head_dim()));
                    CHECK(all_zero(kv->v(0, 1), n * kv->head_dim()));
                    CHECK(!all_zero(kv->k(0, 0), n * kv->head_dim()));
                }
            });
        CHECK(diff(k, a).conv == 0.0);
        CHECK(mask_state<channel::ssm>(a, LayerSet::none(), {0}) == a);
        CHECK_THROWS_AS((void)mask_state<channel::ssm>(a, LayerSet::all(), {1000}), ShapeError);
        CHECK_THROWS_AS((void)mask_state<channel::kv>(a, LayerSet::all(), {1000}), ShapeError);
        // patch_heads: every head from the donor == patch_state of the states.
        const auto d = m.prefill(test::random_batch(2, n, m.config().vocab, 4));
        for (std::size_t i : layers_with<channel::recurrent>(a)) {
            std::vector<std::size_t> heads;
            a.visit(i, [&](const auto& lc) {
                if (const auto* r = recurrent_part(lc))
                    for (std::size_t h = 0; h < r->state_shape()[0]; ++h) heads.push_back(h);
            });
            const auto ph = patch_heads<channel::ssm>(a, d, LayerSet({i}), heads);
            CHECK(ph == patch_state(a, d, LayerSet({i}), false));
            CHECK(!(ph == a));
        }
        CHECK(patch_heads<channel::kv>(a, a, LayerSet::all(), {0}) == a);
    }
    SUBCASE("runtime mismatches are ShapeErrors and leave the inputs untouched") {
        const auto one = m.prefill(test::random_batch(1, n, m.config().vocab, 5));
        CHECK_THROWS_AS((void)state_swap(a, one), ShapeError);
        CHECK_THROWS_AS((void)patch_state(a, one, LayerSet::all()), ShapeError);
        CHECK_THROWS_AS((void)drop<channel::recurrent>(a, LayerSet({L})), ShapeError);
        CHECK_THROWS_AS((void)keep_only<channel::kv>(a, LayerSet({0, 99})), ShapeError);
        CHECK_THROWS_AS((void)state_swap(a, a, LayerSet({L + 3})), ShapeError);
        CHECK(!diff(a, one).same_layout);
        CHECK(a == a_copy);
    }
}

}  // namespace

TEST_CASE("surgery ops: Qwen-like stack (DeltaNet + attention)") { check_channel_ops(test::random_qwen({}), "qwen-like"); }
TEST_CASE("surgery ops: Granite-like stack (Mamba-2 + attention)") { check_channel_ops(test::random_granite({}), "granite-like"); }
TEST_CASE("surgery ops: Falcon-like stack (parallel attention + Mamba-2 in every layer)") {
    check_channel_ops(test::random_falcon({}), "falcon-like");
}

TEST_CASE("surgery ops: caches of two models of the same stack type but other shapes are rejected at run time") {
    const auto a = test::random_qwen({});
    test::RandomWeights r({});
    test::QwenLikeStack st;  // same kinds, other layout: 2 layers, wider DeltaNet
    st.push_back(r.decoder(r.deltanet(2, 4, 8, 8), false, true));
    st.push_back(r.decoder(r.attention(true), false, true));
    const auto b = r.model(std::move(st));
    const auto ca = a.prefill(TokenBatch({1, 2, 3}));
    const auto cb = b.prefill(TokenBatch({1, 2, 3}));
    CHECK_THROWS_AS((void)state_swap(ca, cb), ShapeError);
    // Same layout, other dimensions.
    test::QwenLikeStack s1, s2;
    s1.push_back(r.decoder(r.deltanet(2, 4, 8, 6), false, true));
    s2.push_back(r.decoder(r.deltanet(2, 4, 8, 8), false, true));
    const auto m1 = r.model(std::move(s1));
    const auto m2 = r.model(std::move(s2));
    const auto c1 = m1.prefill(TokenBatch({1, 2}));
    const auto c2 = m2.prefill(TokenBatch({1, 2}));
    try {
        (void)state_swap(c1, c2);
        FAIL("expected a ShapeError");
    } catch (const ShapeError& e) {
        CHECK(std::string(e.what()).find("[state_swap] layer 0: recurrent parts differ") != std::string::npos);
    }
    CHECK(!diff(c1, c2).same_layout);
    // patch_heads compared only the layer order and copied the host's head size out of the donor
    // (past its end one way, part of its rows the other way).
    for (const auto* pair : {&c1, &c2}) {
        const auto& host = *pair;
        const auto& donor = pair == &c1 ? c2 : c1;
        CHECK_THROWS_WITH_AS((void)patch_heads<channel::ssm>(host, donor, LayerSet({0}), {1}),
                             doctest::Contains("[patch_heads] layer 0: recurrent parts differ"), ShapeError);
        CHECK_THROWS_AS((void)patch_heads<channel::conv>(host, donor, LayerSet({0}), {1}), ShapeError);
    }
    test::QwenLikeStack k1, k2;  // attention with head_dim 8 and 4
    k1.push_back(r.decoder(r.attention(true, 4, 2, 8, 4), false, true));
    k2.push_back(r.decoder(r.attention(true, 4, 2, 4, 4), false, true));
    const auto ck1 = r.model(std::move(k1)).prefill(TokenBatch({1, 2}));
    const auto ck2 = r.model(std::move(k2)).prefill(TokenBatch({1, 2}));
    CHECK_THROWS_WITH_AS((void)patch_heads<channel::kv>(ck2, ck1, LayerSet({0}), {1}),
                         "[patch_heads] layer 0: KV parts differ (2 heads x 4 vs 2 heads x 8); the caches come from "
                         "different models",
                         ShapeError);
}

TEST_CASE("surgery ops: diff counts a NaN as a difference, and mask_state writes finite values only") {
    const auto m = test::random_qwen({});
    const auto a = m.prefill(TokenBatch({1, 2, 3}));
    auto b = a;
    b.visit(0, [](auto& layer) { recurrent_part(layer)->state(0)[5] = std::nanf(""); });
    CHECK(std::isnan(diff(a, b).state));  // it was 0: std::max(0, NaN) kept the 0
    CHECK(std::isnan(diff(a, b).max()));
    CHECK(diff(a, b).kv == 0.0);
    CHECK_THROWS_AS((void)mask_state<channel::ssm>(a, LayerSet({0}), {0}, std::nanf("")), ShapeError);
}

TEST_CASE("surgery ops: diff measures both K and V, in every sequence and head") {
    const auto m = test::random_qwen({});  // layer 2 is the attention layer, 2 KV heads
    const auto a = m.prefill(test::random_batch(2, 5, m.config().vocab, 1));
    // Two copies that differ in one element, set to 1 and to 1.5: diff().kv is exactly 0.5,
    // for an element of V as for one of K (V was once left out of the comparison).
    for (const bool in_v : {true, false}) {
        INFO("one element of " << (in_v ? "V" : "K"));
        const auto set = [in_v](auto& cache, float value) {
            cache.visit(2, [&](auto& layer) {
                KVCache* kv = kv_part(layer);
                REQUIRE(kv != nullptr);
                REQUIRE(kv->length() == 5);
                float* p = in_v ? kv->v(1, 1) : kv->k(1, 1);  // sequence 1, KV head 1
                p[4 * kv->head_dim() + 3] = value;           // position 4, channel 3
            });
        };
        auto x = a, y = a;
        set(x, 1.0f);
        set(y, 1.5f);
        const CacheDiff d = diff(x, y);
        CHECK(d.same_layout);
        CHECK(d.kv == 0.5);
        CHECK(d.conv == 0.0);
        CHECK(d.state == 0.0);
        CHECK(d.max() == 0.5);
        CHECK(diff(x, y, LayerSet({0, 1, 3})).max() == 0.0);  // the other layers are untouched
    }
}

TEST_CASE("surgery ops: layers_with lists the layers holding a channel") {
    const auto q = test::random_qwen({}).new_cache(1);
    CHECK(layers_with<channel::kv>(q) == std::vector<std::size_t>{2});
    CHECK(layers_with<channel::recurrent>(q) == std::vector<std::size_t>{0, 1, 3});
    const auto f = test::random_falcon({}).new_cache(1);
    CHECK(layers_with<channel::kv>(f) == std::vector<std::size_t>{0, 1, 2});
    CHECK(layers_with<channel::ssm>(f) == std::vector<std::size_t>{0, 1, 2});
    CHECK(stack_has_channel<decltype(q), channel::conv>);
    test::RandomWeights r({});
    HybridStack<Mamba2Layer<>> st;
    st.push_back(r.decoder(r.mamba2()));
    const auto mc = r.model(std::move(st)).new_cache(1);
    CHECK(!stack_has_channel<decltype(mc), channel::kv>);
    CHECK(stack_has_channel<decltype(mc), channel::recurrent>);
}

TEST_CASE("surgery ops: LayerSet") {
    const LayerSet s({3, 1, 3});
    CHECK(s.indices() == std::vector<std::size_t>{1, 3});
    CHECK(s.contains(1));
    CHECK(!s.contains(2));
    CHECK(LayerSet::all().contains(1000));
    CHECK(!LayerSet::none().contains(0));
    CHECK(LayerSet::range(1, 4) == LayerSet({1, 2, 3}));
    CHECK(LayerSet::range(2, 2) == LayerSet::none());
    CHECK_THROWS_WITH_AS((void)LayerSet::range(5, 2), doctest::Contains("range(5, 2)"), ShapeError);
    CHECK(LayerSet::from_i64({0, 2}) == LayerSet({0, 2}));
    CHECK_THROWS_AS((void)LayerSet::from_i64({-1}), ShapeError);
    CHECK_THROWS_AS(s.check_against(3, "test"), ShapeError);
    CHECK_NOTHROW(s.check_against(4, "test"));
}

TEST_CASE("a cache whose size overflows is refused when it is made, not at its first read") {
    // Python's new_cache(2**60) made a cache whose element count had wrapped around: a small
    // buffer that reads and writes ran past (a segfault).
    const std::size_t huge = std::size_t{1} << 60;
    CHECK_THROWS_WITH_AS(RecurrentCache(huge, 64, 4, {2, 16, 16}), doctest::Contains("[RecurrentCache] a container of"), ShapeError);
    CHECK_THROWS_WITH_AS(RecurrentCache(2, 64, 4, {huge, 16}), doctest::Contains("larger than memory can address"), ShapeError);
    CHECK_THROWS_WITH_AS(KVCache(huge, 2, 8), doctest::Contains("[KVCache] a container of"), ShapeError);
    CHECK(checked_elements({std::size_t{3}, std::size_t{0}, huge, huge}, "t") == 0);  // nothing to allocate
    CHECK(checked_elements({std::size_t{3}, std::size_t{5}}, "t") == 15);
    KVCache kv(1, 1, 4);
    kv.reserve_more(3);
    CHECK(kv.capacity() == 16);
    kv.reserve_more(17);  // growth stays amortised: twice the capacity, not just what is needed
    CHECK(kv.capacity() == 32);
    CHECK_THROWS_WITH_AS(kv.reserve_more(std::numeric_limits<std::size_t>::max()),
                         doctest::Contains("[KVCache] a container of [1, 1, 18446744073709551615, 4] floats"), ShapeError);
    CHECK_THROWS_AS(test::random_qwen({}).new_cache(huge), ShapeError);
    CHECK_THROWS_AS(test::random_falcon({}).new_cache(huge), ShapeError);
}
