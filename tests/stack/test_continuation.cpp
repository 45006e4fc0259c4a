// The continuation contract (docs/architecture.md): feeding a prompt in any split — one-token pieces
// included — gives the same logits and the same final cache as one call, for every layer
// kind and for ParallelLayer, with batch > 1, float32 and bf16 weights. 1e-5 relative.

#include "../support/random_model.hpp"
#include "../support/random_ids.hpp"
#include "cache_compare.hpp"

#include <doctest/doctest.h>

#include <random>
#include <vector>

using namespace hylens;

namespace {

constexpr std::size_t kT = 100;

TokenBatch piece(const TokenBatch& all, std::size_t t0, std::size_t t1) {
    std::vector<std::vector<std::int64_t>> seqs(all.batch);
    for (std::size_t b = 0; b < all.batch; ++b)
        for (std::size_t t = t0; t < t1; ++t) seqs[b].push_back(all.at(b, t));
    return TokenBatch(seqs);
}

/// Runs `ids` split at `cuts` (sorted, inside (0, T)); returns the logits [B, T, V] and the cache.
template <class Model>
std::pair<std::vector<float>, typename Model::cache_type> run_split(const Model& m, const TokenBatch& ids,
                                                                   const std::vector<std::size_t>& cuts) {
    const std::size_t B = ids.batch, T = ids.T(), V = m.config().vocab;
    auto cache = m.new_cache(B);
    std::vector<float> logits(B * T * V);
    std::size_t t0 = 0;
    std::vector<std::size_t> ends = cuts;
    ends.push_back(T);
    for (std::size_t t1 : ends) {
        Tensor3 l = m.forward(piece(ids, t0, t1), cache);
        for (std::size_t b = 0; b < B; ++b)
            std::copy(l.data() + b * (t1 - t0) * V, l.data() + (b + 1) * (t1 - t0) * V, logits.data() + (b * T + t0) * V);
        t0 = t1;
    }
    return {std::move(logits), std::move(cache)};
}

template <class Model>
void check_contract(const Model& m, std::size_t B, const std::string& label) {
    INFO(label);
    const TokenBatch ids = test::random_batch(B, kT, m.config().vocab, 5);
    const auto [ref_logits, ref_cache] = run_split(m, ids, {});
    double worst_logits = 0.0, worst_cache = 0.0;
    auto check_split = [&](const std::vector<std::size_t>& cuts) {
        const auto [logits, cache] = run_split(m, ids, cuts);
        const double dl = test::rel_diff(logits.data(), ref_logits.data(), logits.size());
        worst_logits = hylens::test::nan_max(worst_logits, dl);
        worst_cache = hylens::test::nan_max(worst_cache, test::cache_rel_diff(cache, ref_cache));
    };
    for (std::size_t t = 1; t < kT; ++t) check_split({t});  // every two-piece split
    std::vector<std::size_t> ones;
    for (std::size_t t = 1; t < kT; ++t) ones.push_back(t);
    check_split(ones);  // one token at a time
    std::mt19937 rng(9);
    for (int r = 0; r < 20; ++r) {  // random multi-piece splits
        std::vector<std::size_t> cuts;
        for (std::size_t t = 1; t < kT; ++t)
            if (rng() % 7 == 0) cuts.push_back(t);
        check_split(cuts);
    }
    CHECK(worst_logits <= 1e-5);
    CHECK(worst_cache <= 1e-5);
    MESSAGE(label << ": worst relative difference logits " << worst_logits << ", caches " << worst_cache);
}

}  // namespace

TEST_CASE("continuation: DeltaNet + attention stack (Qwen-like, MoE), batch 2") {
    check_contract(test::random_qwen({}), 2, "qwen-like f32");
}

TEST_CASE("continuation: Mamba-2 + attention stack (Granite-like), batch 2") {
    check_contract(test::random_granite({}), 2, "granite-like f32");
}

TEST_CASE("continuation: ParallelLayer stack (Falcon-like), batch 2") {
    check_contract(test::random_falcon({}), 2, "falcon-like f32");
}

TEST_CASE("continuation: bf16 weights, batch 1") {
    test::RandomSpec s;
    s.bf16 = true;
    check_contract(test::random_qwen(s), 1, "qwen-like bf16");
    check_contract(test::random_falcon(s), 1, "falcon-like bf16");
}

TEST_CASE("continuation: sequences of a batch are independent") {
    const auto m = test::random_granite({});
    const TokenBatch two = test::random_batch(2, 40, m.config().vocab, 3);
    auto c2 = m.new_cache(2);
    const Tensor3 l2 = m.forward(two, c2);
    for (std::size_t b = 0; b < 2; ++b) {
        const auto first = two.ids.begin() + static_cast<std::ptrdiff_t>(b * 40);
        auto c1 = m.new_cache(1);
        const Tensor3 l1 = m.forward(TokenBatch(std::vector<std::int64_t>(first, first + 40)), c1);
        const std::size_t n = 40 * m.config().vocab;
        CHECK(test::rel_diff(l2.data() + b * n, l1.data(), n) <= 1e-5);
    }
}
