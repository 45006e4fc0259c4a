// Acceptance tests T1, T4-T8 of protocols.md §C.10 and the surgery identities, on every
// model in tests/golden/models (including those without surgery references: the same
// agreement must hold on models these tests were not written against) and on random stacks:
//   T1  split execution at every cut, and chunked feeding (w = 1, 3, 7) == one forward
//   T4  a surgered / patched run leaves no trace in the next plain run (caches are values)
//   T5  split_prefill FULL == the joint forward of context ++ query ++ greedy tokens
//   T6  KV_ONLY on a pure-attention stack == FULL (and REC_ONLY on a recurrent-only one)
//   T7  REC_ONLY starts at 0, its KV holds m positions after the query, it differs from NONE
//   T8  state_swap of a cache with itself == FULL
// plus: swap with one source == that source; KV_ONLY on layers S = {} == FULL, S = every
// recurrent layer == KV_ONLY; NONE == the query alone.

#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>

#include "../support/random_model.hpp"
#include "../support/random_ids.hpp"
#include "../support/nan_max.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace hylens;
using test::random_ids;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCtx = 29, kQuery = 6, kGen = 4;

std::vector<std::int64_t> concat(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// max |a - b| / max(1, max |b|).
double rel(const float* a, const float* b, std::size_t n) {
    double worst = 0.0, scale = 1.0;
    for (std::size_t i = 0; i < n; ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        if (!(d <= worst)) worst = d;
        if (std::isnan(d)) break;  // a later finite difference would replace the NaN
    }
    return worst / scale;
}

/// Logits [T, V] of one forward of `ids` on a fresh cache (B = 1).
template <class Model>
std::vector<float> one_forward(const Model& m, const std::vector<std::int64_t>& ids) {
    auto c = m.new_cache(1);
    const Tensor3 l = m.forward(TokenBatch(ids), c);
    return std::vector<float>(l.data(), l.data() + l.size());
}

/// The query logits followed by each fed greedy token's logits: [(m + gen), V].
std::vector<float> run_logits(const GenerateResult& r) {
    std::vector<float> out(r.prompt_logits.data(), r.prompt_logits.data() + r.prompt_logits.size());
    for (const auto& s : r.step_logits) out.insert(out.end(), s.data(), s.data() + s.size());
    return out;
}

SplitOptions gen_opts(LayerSet layers = {}, bool conv_with_state = true) {
    SplitOptions o;
    o.layers = std::move(layers);
    o.conv_with_state = conv_with_state;
    o.max_new = kGen;
    o.feed_last = true;
    return o;
}

std::size_t argmax(const float* row, std::size_t V) { return static_cast<std::size_t>(std::max_element(row, row + V) - row); }

/// T1: split at every cut t of ctx ++ query, and chunked feeding, against one forward.
template <class Model>
void check_t1(const Model& m, const std::vector<std::int64_t>& ids, double tol, const std::string& label) {
    INFO(label);
    const std::size_t T = ids.size(), V = m.config().vocab;
    const std::vector<float> ref = one_forward(m, ids);
    double worst = 0.0;
    bool argmax_equal = true;
    for (std::size_t t = 1; t < T; ++t) {
        const std::vector<std::int64_t> head(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(t));
        const std::vector<std::int64_t> tail(ids.begin() + static_cast<std::ptrdiff_t>(t), ids.end());
        const auto r = split_prefill(m, TokenBatch(head), TokenBatch(tail), SplitMode::FULL);
        const float* want = ref.data() + t * V;
        worst = hylens::test::nan_max(worst, rel(r.run.prompt_logits.data(), want, (T - t) * V));
        for (std::size_t j = 0; j < T - t; ++j)
            argmax_equal = argmax_equal && argmax(r.run.prompt_logits.data() + j * V, V) == argmax(want + j * V, V);
    }
    for (std::size_t w : {1, 3, 7}) {
        auto c = m.new_cache(1);
        for (std::size_t t0 = 0; t0 < T; t0 += w) {
            const std::size_t t1 = std::min(T, t0 + w);
            const Tensor3 l = m.forward(TokenBatch(std::vector<std::int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(t0),
                                                                               ids.begin() + static_cast<std::ptrdiff_t>(t1))),
                                        c);
            worst = hylens::test::nan_max(worst, rel(l.data(), ref.data() + t0 * V, (t1 - t0) * V));
            for (std::size_t j = 0; j < t1 - t0; ++j)
                argmax_equal = argmax_equal && argmax(l.data() + j * V, V) == argmax(ref.data() + (t0 + j) * V, V);
        }
    }
    CHECK_MESSAGE(worst <= tol, label << ": split / chunked vs one forward, relative " << worst);
    CHECK(argmax_equal);
}

/// T4, T5, T7, T8 and the identities, on any model with a recurrent and an attention channel.
template <class Model>
void check_conditions(const Model& m, double tol, const std::string& label) {
    INFO(label);
    using Cache = typename Model::cache_type;
    const std::size_t V = m.config().vocab;
    const auto ctx = random_ids(kCtx, V, 11), ctx_b = random_ids(kCtx, V, 12), q = random_ids(kQuery, V, 13);
    const Cache a = m.prefill(TokenBatch(ctx));
    const Cache a_saved = a;
    const Cache b = m.prefill(TokenBatch(ctx_b));

    // T5: FULL == joint forward of ctx ++ q ++ greedy tokens; identical tokens.
    const auto full = run_split(m, a, TokenBatch(q), SplitMode::FULL, gen_opts());
    const std::vector<float> joint = one_forward(m, concat(concat(ctx, q), full.run.ids[0]));
    const std::vector<float> got = run_logits(full.run);
    CHECK(rel(got.data(), joint.data() + kCtx * V, got.size()) <= tol);
    for (std::size_t j = 0; j < kGen; ++j)
        CHECK(static_cast<std::size_t>(full.run.ids[0][j]) == argmax(joint.data() + (kCtx + kQuery - 1 + j) * V, V));
    CHECK(full.position == static_cast<std::int64_t>(kCtx));
    CHECK(full.run.positions.front() == static_cast<std::int64_t>(kCtx));

    // NONE == the query (and its greedy tokens) alone.
    const auto none = run_split(m, a, TokenBatch(q), SplitMode::NONE, gen_opts());
    const std::vector<float> alone = one_forward(m, concat(q, none.run.ids[0]));
    const std::vector<float> got_none = run_logits(none.run);
    CHECK(rel(got_none.data(), alone.data(), got_none.size()) <= tol);

    // T7: REC_ONLY starts at 0, leaves a KV of m (+ fed greedy) positions, differs from NONE.
    const auto rec = run_split(m, a, TokenBatch(q), SplitMode::REC_ONLY);
    const auto none_q = run_split(m, a, TokenBatch(q), SplitMode::NONE);
    CHECK(rec.position == 0);
    CHECK(rec.run.positions.front() == 0);
    CHECK(rec.cache.kv_len() == kQuery);
    CHECK(rel(rec.run.prompt_logits.data(), none_q.run.prompt_logits.data(), kQuery * V) > 1e-3);

    // T8: swap of a cache with itself == FULL; swap with one source == that source.
    CHECK(state_swap(a, a) == a);
    const auto self_swap = run_split(m, state_swap(a, a), TokenBatch(q), SplitMode::FULL, gen_opts());
    CHECK(run_logits(self_swap.run) == got);
    CHECK(self_swap.run.ids == full.run.ids);

    // KV_ONLY on S = {} == FULL, on S = every recurrent layer == KV_ONLY (exactly).
    const auto kv_only = run_split(m, a, TokenBatch(q), SplitMode::KV_ONLY, gen_opts());
    const auto kv_none = run_split(m, a, TokenBatch(q), SplitMode::KV_ONLY, gen_opts(LayerSet::none()));
    const auto kv_all = run_split(m, a, TokenBatch(q), SplitMode::KV_ONLY, gen_opts(LayerSet(layers_with<channel::recurrent>(a))));
    CHECK(run_logits(kv_none.run) == got);
    CHECK(run_logits(kv_all.run) == run_logits(kv_only.run));
    CHECK(rel(run_logits(kv_only.run).data(), got.data(), got.size()) > 1e-3);  // the reset matters
    // A swap continues from its KV source; swap on all layers == swap on the explicit sets of
    // the layers holding each channel.
    const Cache ab = state_swap(a, b);
    CHECK(continue_position(ab) == kCtx);
    CHECK(ab == state_swap(a, b, LayerSet(layers_with<channel::kv>(a)), LayerSet(layers_with<channel::recurrent>(a))));

    // T4: surgered and patched runs, then a plain run: unchanged, bit for bit.
    (void)run_split(m, ab, TokenBatch(q), SplitMode::FULL, gen_opts());
    (void)run_split(m, patch_state(a, b, LayerSet::all()), TokenBatch(q), SplitMode::FULL, gen_opts());
    (void)run_split(m, mask_state<channel::ssm>(a, LayerSet::all(), {0}), TokenBatch(q), SplitMode::FULL, gen_opts());
    (void)run_split(m, a, TokenBatch(q), SplitMode::REC_ONLY, gen_opts());
    CHECK(a == a_saved);
    const auto again = run_split(m, a, TokenBatch(q), SplitMode::FULL, gen_opts());
    CHECK(run_logits(again.run) == got);
    CHECK(again.cache == full.cache);
}

/// A stack whose layers are all recurrent (granite_h_allmamba): REC_ONLY == FULL, NONE ==
/// KV_ONLY == the query alone, a swap takes the recurrent source's behaviour.
template <class Model>
void check_recurrent_only(const Model& m, double tol, const std::string& label) {
    INFO(label);
    const std::size_t V = m.config().vocab;
    const auto ctx = random_ids(kCtx, V, 11), ctx_b = random_ids(kCtx, V, 12), q = random_ids(kQuery, V, 13);
    const auto a = m.prefill(TokenBatch(ctx));
    const auto b = m.prefill(TokenBatch(ctx_b));
    const auto full = run_split(m, a, TokenBatch(q), SplitMode::FULL, gen_opts());
    const auto rec = run_split(m, a, TokenBatch(q), SplitMode::REC_ONLY, gen_opts());
    const auto kv = run_split(m, a, TokenBatch(q), SplitMode::KV_ONLY, gen_opts());
    const auto none = run_split(m, a, TokenBatch(q), SplitMode::NONE, gen_opts());
    CHECK(run_logits(rec.run) == run_logits(full.run));
    CHECK(rec.position == 0);
    CHECK(run_logits(kv.run) == run_logits(none.run));
    const std::vector<float> alone = one_forward(m, concat(q, none.run.ids[0]));
    CHECK(rel(run_logits(none.run).data(), alone.data(), alone.size()) <= tol);
    const auto ab = run_split(m, state_swap(a, b), TokenBatch(q), SplitMode::FULL, gen_opts());
    const auto full_b = run_split(m, b, TokenBatch(q), SplitMode::FULL, gen_opts());
    CHECK(run_logits(ab.run) == run_logits(full_b.run));
    CHECK(ab.position == static_cast<std::int64_t>(kCtx));
}

std::vector<fs::path> golden_model_dirs() {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(HYLENS_GOLDEN_DIR) / "models"))
        if (e.is_directory() && fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    return dirs;
}

template <class Model>
constexpr bool has_both_channels = stack_has_channel<typename Model::cache_type, channel::kv> &&
                                   stack_has_channel<typename Model::cache_type, channel::recurrent>;

}  // namespace

TEST_CASE("T1: split execution at every cut and chunked feeding == one forward (golden models, F32)") {
    const auto dirs = golden_model_dirs();
    REQUIRE(dirs.size() >= 1);
    for (const auto& dir : dirs) {
        SUBCASE(dir.filename().string().c_str()) {
            const AnyModel model = load(dir);
            model.visit([&](const auto& m) {
                check_t1(m, random_ids(kCtx + kQuery, m.config().vocab, 7), 1e-4, dir.filename().string());
            });
        }
    }
}

TEST_CASE("T1: split execution at every cut == one forward (random stacks, batch 1, float32 and bf16)") {
    const auto ids = random_ids(40, 50, 3);
    for (bool bf16 : {false, true}) {
        test::RandomSpec s;
        s.bf16 = bf16;
        check_t1(test::random_qwen(s), ids, 1e-5, bf16 ? "qwen-like bf16" : "qwen-like");
        check_t1(test::random_granite(s), ids, 1e-5, bf16 ? "granite-like bf16" : "granite-like");
        check_t1(test::random_falcon(s), ids, 1e-5, bf16 ? "falcon-like bf16" : "falcon-like");
    }
}

TEST_CASE("T4, T5, T7, T8 and identities on every golden model (F32), seen by the surgery references or not") {
    for (const auto& dir : golden_model_dirs()) {
        SUBCASE(dir.filename().string().c_str()) {
            const AnyModel model = load(dir);
            model.visit([&](const auto& m) {
                using M = std::remove_cvref_t<decltype(m)>;
                if constexpr (has_both_channels<M>) {
                    if (layers_with<channel::kv>(m.new_cache(1)).empty()) {  // granite_h_allmamba
                        check_recurrent_only(m, 1e-4, dir.filename().string());
                    } else {
                        check_conditions(m, 1e-4, dir.filename().string());
                    }
                }
            });
        }
    }
}

TEST_CASE("T4, T5, T7, T8 and identities on random stacks (float32)") {
    check_conditions(test::random_qwen({}), 1e-5, "qwen-like");
    check_conditions(test::random_granite({}), 1e-5, "granite-like");
    check_conditions(test::random_falcon({}), 1e-5, "falcon-like");
}

TEST_CASE("T6: KV_ONLY on a pure-attention stack == FULL, REC_ONLY on a recurrent-only stack == FULL") {
    test::RandomWeights r({});
    HybridStack<AttentionLayer<>> att;
    for (int i = 0; i < 3; ++i) att.push_back(r.decoder(r.attention(true)));
    const auto ma = r.model(std::move(att));
    const auto ctx = random_ids(kCtx, 50, 21), q = random_ids(kQuery, 50, 22);
    const auto full = split_prefill(ma, TokenBatch(ctx), TokenBatch(q), SplitMode::FULL, gen_opts());
    const auto kv = split_prefill(ma, TokenBatch(ctx), TokenBatch(q), SplitMode::KV_ONLY, gen_opts());
    CHECK(run_logits(kv.run) == run_logits(full.run));
    CHECK(kv.run.ids == full.run.ids);
    CHECK(kv.run.positions == full.run.positions);
    CHECK(kv.cache == full.cache);
    const auto none = split_prefill(ma, TokenBatch(ctx), TokenBatch(q), SplitMode::NONE, gen_opts());
    CHECK(none.position == 0);
    CHECK(run_logits(none.run) != run_logits(full.run));

    HybridStack<Mamba2Layer<>, DeltaNetLayer<>> rec;
    rec.push_back(r.decoder(r.mamba2()));
    rec.push_back(r.decoder(r.deltanet()));
    rec.push_back(r.decoder(r.mamba2(2, 16, 4, 2, MambaNorm::norm_before_gate)));
    const auto mr = r.model(std::move(rec));
    const auto rfull = split_prefill(mr, TokenBatch(ctx), TokenBatch(q), SplitMode::FULL, gen_opts());
    const auto ronly = split_prefill(mr, TokenBatch(ctx), TokenBatch(q), SplitMode::REC_ONLY, gen_opts());
    CHECK(run_logits(ronly.run) == run_logits(rfull.run));
    CHECK(ronly.run.ids == rfull.run.ids);
    CHECK(ronly.position == 0);  // no KV: the position counter restarts as the table says
    CHECK(rfull.position == static_cast<std::int64_t>(kCtx));
    const auto rnone = split_prefill(mr, TokenBatch(ctx), TokenBatch(q), SplitMode::NONE, gen_opts());
    CHECK(rel(run_logits(rnone.run).data(), run_logits(rfull.run).data(), kQuery * 50) > 1e-3);
}

TEST_CASE("split_prefill: explicit position override and batch mismatch") {
    const auto m = test::random_qwen({});
    const auto ctx = random_ids(kCtx, 50, 31), q = random_ids(kQuery, 50, 32);
    SplitOptions o;
    o.position = 100;
    const auto r = split_prefill(m, TokenBatch(ctx), TokenBatch(q), SplitMode::KV_ONLY, o);
    CHECK(r.position == 100);
    CHECK(r.run.positions.front() == 100);
    CHECK(r.cache.kv_len() == kCtx + kQuery);
    const TokenBatch two(std::vector<std::vector<std::int64_t>>{q, q});
    CHECK_THROWS_AS((void)split_prefill(m, TokenBatch(ctx), two, SplitMode::FULL), ShapeError);
    CHECK(to_string(SplitMode::REC_ONLY) == "REC_ONLY");
}
