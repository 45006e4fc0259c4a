// HybridStack / StackCache / CausalLM behaviour: caches are values, positions, generation.

#include <hylens/stack/generate.hpp>

#include "../support/random_model.hpp"
#include "cache_compare.hpp"

#include <doctest/doctest.h>

using namespace hylens;

TEST_CASE("stack cache: copies are independent values, reset gives a fresh cache") {
    const auto m = test::random_qwen({});
    auto a = m.prefill(TokenBatch({1, 2, 3, 4, 5}));
    auto b = a;
    CHECK(a == b);
    (void)m.forward(TokenBatch({6}), b);
    CHECK(!(a == b));
    CHECK(a.kv_len() == 5);
    CHECK(b.kv_len() == 6);
    b.reset();
    CHECK(b == m.new_cache(1));
}

TEST_CASE("stack cache: next position follows the KV length, recurrent-only stacks count tokens") {
    test::RandomWeights r({});
    HybridStack<Mamba2Layer<>> st;
    st.push_back(r.decoder(r.mamba2()));
    const auto m = r.model(std::move(st));
    auto c = m.prefill(TokenBatch({1, 2, 3}));
    CHECK(c.next_position() == 3);
    CHECK(!c.has_kv_layers());
    const auto q = test::random_granite({});
    auto cq = q.prefill(TokenBatch({1, 2, 3, 4}));
    CHECK(cq.next_position() == 4);
}

TEST_CASE("generate: prefill + greedy decode equals the joint forward, and positions are contiguous") {
    const auto m = test::random_falcon({});
    auto cache = m.prefill(TokenBatch({3, 1, 4, 1, 5}));
    GenerateOptions o;
    o.max_new = 4;
    o.feed_last = true;
    const GenerateResult g = generate(m, cache, TokenBatch({9, 2}), o);
    REQUIRE(g.ids[0].size() == 4);
    REQUIRE(g.step_logits.size() == 4);
    CHECK(g.positions == std::vector<std::int64_t>{5, 6, 7, 8, 9, 10});
    std::vector<std::int64_t> joint{3, 1, 4, 1, 5, 9, 2};
    joint.insert(joint.end(), g.ids[0].begin(), g.ids[0].end());
    auto c2 = m.new_cache(1);
    const Tensor3 all = m.forward(TokenBatch(joint), c2);
    const std::size_t V = m.config().vocab;
    for (std::size_t j = 0; j < 4; ++j) {
        const float* ref = all.data() + (7 + j) * V;
        CHECK(test::rel_diff(g.step_logits[j].data(), ref, V) <= 1e-5);
    }
    CHECK(test::cache_rel_diff(cache, c2) <= 1e-5);
}

TEST_CASE("stack: explicit positions override the cache's next position") {
    const auto m = test::random_qwen({});
    auto c1 = m.new_cache(1);
    auto c2 = m.new_cache(1);
    const std::vector<std::int64_t> pos{10, 11, 12};
    ForwardOptions o;
    o.positions = pos;
    const Tensor3 a = m.forward(TokenBatch({1, 2, 3}), c1, o);
    const Tensor3 b = m.forward(TokenBatch({1, 2, 3}), c2);
    // RoPE makes attention depend on position offsets only through relative distances,
    // so the logits agree; the cached keys, rotated at other angles, do not.
    CHECK(test::rel_diff(a.data(), b.data(), a.size()) <= 1e-4);
    CHECK(!(c1 == c2));
    CHECK_THROWS_AS((void)m.forward(TokenBatch({1, 2}), c1, o), ShapeError);
}

TEST_CASE("stack: positions are rotary positions in any order, the causal mask follows the tokens") {
    // As Hugging Face's position_ids: positions may go backwards or repeat. Row 0 of a run sees
    // token 0 alone whatever its position, so it is the one-token run at that position.
    const auto m = test::random_qwen({});
    const std::vector<std::int64_t> backwards{7, 6, 5, 5};
    ForwardOptions o;
    o.positions = backwards;
    auto c = m.new_cache(1);
    const Tensor3 all = m.forward(TokenBatch({4, 9, 2, 3}), c, o);
    const std::vector<std::int64_t> first{7};
    ForwardOptions o1;
    o1.positions = first;
    auto c1 = m.new_cache(1);
    const Tensor3 one = m.forward(TokenBatch({4}), c1, o1);
    const std::size_t V = m.config().vocab;
    CHECK(test::rel_diff(all.data(), one.data(), V) <= 1e-4);  // chunked vs one-step recurrences round apart
    // ... and differs from the one-token run at position 0 (the positions reached attention).
    auto c0 = m.new_cache(1);
    const Tensor3 at0 = m.forward(TokenBatch({4, 9}), c0);
    const std::vector<std::int64_t> fwd{7, 6};
    ForwardOptions o2;
    o2.positions = fwd;
    auto c2 = m.new_cache(1);
    const Tensor3 two = m.forward(TokenBatch({4, 9}), c2, o2);
    CHECK(test::rel_diff(two.data() + V, at0.data() + V, V) > 1e-4);
    const std::vector<std::int64_t> negative{0, -1};
    o2.positions = negative;
    auto c3 = m.new_cache(1);
    CHECK_THROWS_WITH_AS((void)m.forward(TokenBatch({4, 9}), c3, o2), "[CausalLM::forward] negative position -1", ShapeError);
}
