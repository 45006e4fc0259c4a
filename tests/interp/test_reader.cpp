// Readouts (lens.hpp) and reader search / block-role scans (reader_search.hpp): T12 (reader
// search finds a planted head, not a decoy with the same attention but no effect), the
// metrics of §A.5 on hand-made rows, logit lens, groups(size).

#include <hylens/interp/lens.hpp>
#include <hylens/interp/reader_search.hpp>

#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace hylens;

namespace {

constexpr std::size_t kH = 16, kHd = 4;

Weight mat(std::size_t r, std::size_t c, const std::vector<std::tuple<std::size_t, std::size_t, float>>& nz) {
    std::vector<float> v(r * c, 0.0f);
    for (auto [i, j, x] : nz) v[i * c + j] = x;
    return Weight::from_floats(std::move(v), {r, c});
}

/// One attention layer, 4 heads of width 4, NoPE, tokens as one-hot embeddings (x 4). Head 0
/// (decoy) and head 2 (reader) both attend from the query token 1 to the marker token 5 / 6;
/// only head 2 carries the marker's identity (v) into the residual, as e5 - e6.
CausalLM<HybridStack<AttentionLayer<>>> planted_model() {
    AttentionConfig c;
    c.hidden = kH;
    c.Hq = 4;
    c.Hkv = 4;
    c.head_dim = kHd;
    c.rope = kernels::Rope{0, 10000.0f};
    AttentionWeights w;
    w.q_proj = mat(16, kH, {{0, 1, 2.0f}, {8, 1, 2.0f}});               // heads 0 and 2 ask from token 1
    w.k_proj = mat(16, kH, {{0, 5, 1.0f}, {0, 6, 1.0f}, {8, 5, 1.0f}, {8, 6, 1.0f}});  // ... for the marker
    w.v_proj = mat(16, kH, {{8, 5, 1.0f}, {8, 6, -1.0f}});              // head 2 reads its identity
    w.o_proj = mat(kH, 16, {{5, 8, 0.5f}, {6, 8, -0.5f}});              // and writes e5 - e6
    SwiGLU s;
    s.hidden = kH;
    s.inter = 4;
    s.gate = mat(4, kH, {});
    s.up = mat(4, kH, {});
    s.down = mat(kH, 4, {});
    FeedForward f;
    f.hidden = kH;
    f.has_dense = true;
    f.dense = s;
    HybridStack<AttentionLayer<>> st;
    st.push_back(DecoderLayer<AttentionLayer<>>({kH, 1e-6f, false, 1.0f}, std::vector<float>(kH, 1.0f),
                                                AttentionLayer<>(c, std::move(w)), std::vector<float>(kH, 1.0f), f));
    LMConfig lc;
    lc.model_type = "planted";
    lc.vocab = 16;
    lc.hidden = kH;
    std::vector<std::tuple<std::size_t, std::size_t, float>> emb, head;
    for (std::size_t t = 0; t < 16; ++t) {
        emb.push_back({t, t, 4.0f});
        if (t != 1) head.push_back({t, t, 1.0f});  // the query token is never the answer
    }
    return CausalLM<HybridStack<AttentionLayer<>>>(lc, mat(16, kH, emb), std::move(st), std::vector<float>(kH, 1.0f),
                                                   mat(16, kH, head));
}

std::vector<PairItem> planted_items() {
    std::vector<PairItem> items;
    const std::vector<std::int64_t> fill{7, 8, 9, 10, 11, 12, 13};
    for (std::size_t at = 0; at < 5; ++at) {
        PairItem it;
        for (std::size_t i = 0; i < 6; ++i) it.clean.push_back(i == at ? 5 : fill[(i + at) % fill.size()]);
        it.clean.push_back(1);
        it.corrupt = it.clean;
        it.corrupt[at] = 6;
        it.answer = 5;
        it.other = 6;
        for (std::size_t i = 0; i < 6; ++i) it.entries.push_back({i, i + 1});
        it.target = at;
        items.push_back(it);
    }
    return items;
}

}  // namespace

TEST_SUITE("interp/reader") {

TEST_CASE("T12: reader search finds the planted head, not the decoy that attends the same way") {
    const auto m = planted_model();
    const auto items = planted_items();
    const ReaderSearch rs = reader_search(m, items, 4);
    // top = 0 returned the first head as the reader with a removal gap never computed.
    CHECK_THROWS_AS((void)reader_search(m, items, 0), ShapeError);
    CHECK(rs.baseline.acc == 1.0);
    CHECK(rs.baseline.gap.mean > 1.0);
    REQUIRE(rs.ranked.size() == 4);
    // heads 0 and 2 both put ~all their final-position attention on the target entry
    CHECK(rs.ranked[0].target_mass > 0.99);
    CHECK(rs.ranked[1].target_mass > 0.99);
    CHECK(rs.reader.layer == 0);
    CHECK(rs.reader.head == 2);
    CHECK(rs.reader.gap_removed == doctest::Approx(0.0).epsilon(1e-6));
    for (const auto& c : rs.ranked)
        if (c.head == 0) CHECK(c.gap_removed == doctest::Approx(rs.baseline.gap.mean));
    // B6 with nothing removed: intact everywhere, the reader selects the target every time
    const auto sel = selectivity_2x2(m, items, {}, 0, 2, RemovalUnit::layer);
    CHECK(sel[0][0].top1 == 1.0);
    CHECK(sel[0][0].selectivity > 10.0);
}

TEST_CASE("metrics of §A.5 on hand-made rows") {
    const float row[] = {0.0f, 2.0f, -1.0f, 5.0f};
    CHECK(logit_diff(row, 4, 3, 1) == 3.0);
    CHECK(hylens::argmax(row, 4) == 3);
    CHECK(argmax_among(row, 4, {0, 1, 2}) == 1);
    CHECK(candidate_margin(row, 4, 3, {0, 1, 2, 3}) == doctest::Approx(5.0 - 1.0 / 3.0));
    // An id outside the row's vocabulary is an error naming it (it read past the row).
    CHECK_THROWS_WITH_AS(logit_diff(row, 4, 4, 1), "[logit_diff] token id 4 is outside the vocabulary of 4",
                         hylens::ShapeError);
    CHECK_THROWS_AS(logit_diff(row, 4, 3, -1), hylens::ShapeError);
    CHECK_THROWS_WITH_AS(argmax_among(row, 4, {0, 7}), "[argmax_among] token id 7 is outside the vocabulary of 4",
                         hylens::ShapeError);
    CHECK_THROWS_AS(candidate_margin(row, 4, 9, {0, 1}), hylens::ShapeError);
    CHECK_THROWS_AS(candidate_margin(row, 4, 3, {0, 4}), hylens::ShapeError);
    CHECK(std::isnan(recovery(1.0, 2.0, 2.0 + 1e-8)));
    CHECK(recovery(1.5, 1.0, 3.0) == doctest::Approx(0.25));
    const MeanSem g = gap({3.0, 5.0}, {1.0, 1.0});
    CHECK(g.mean == 3.0);
    CHECK(g.sem == doctest::Approx(1.0 / std::sqrt(2.0)));
    const MeanSem none = gap({}, {});  // a mean of no items is not 0
    CHECK(none.n == 0);
    CHECK(std::isnan(none.mean));
    CHECK(std::isnan(none.sem));
    const float probs[] = {0.1f, 0.6f, 0.1f, 0.2f};
    const AttentionSplit a = attention_split(probs, 4, {{1, 2}, {2, 4}}, 0);
    CHECK(a.target == doctest::Approx(0.6));
    CHECK(a.others == doctest::Approx(0.3));
    CHECK(a.first == doctest::Approx(0.1));
    CHECK(a.rest == doctest::Approx(0.0).epsilon(1e-6));
    // Overlapping entries counted keys twice (rest -0.6 here); an empty span overlaps nothing.
    CHECK_THROWS_WITH_AS(attention_split(probs, 4, {{1, 3}, {2, 4}}, 0),
                         "[attention_split] entries 0 [1, 3) and 1 [2, 4) overlap", hylens::ShapeError);
    CHECK(attention_split(probs, 4, {{1, 2}, {2, 2}, {2, 4}}, 0).others == doctest::Approx(0.3));
    const Selectivity s = qk_selectivity(probs, 4, {{1, 2}, {2, 3}, {3, 4}}, 0);
    CHECK(s.selectivity == doctest::Approx(std::log(0.6) - 0.5 * (std::log(0.1) + std::log(0.2))));
    CHECK(s.margin == doctest::Approx(std::log(0.6 / 0.2)));
    CHECK(s.top1);
    const float ones[] = {1, 2, 2, 4, 3, 6};  // rank 1
    CHECK(effective_rank(ones, 3, 2).erank == doctest::Approx(1.0).epsilon(1e-6));
    const float eye[] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    const EffectiveRank e = effective_rank(eye, 3, 3);
    CHECK(e.erank == doctest::Approx(3.0));
    CHECK(e.top_share == doctest::Approx(1.0 / 3.0));
    const TransplantScores ts = transplant_scores({row, row}, 4, {3, 1}, {1, 3});
    CHECK(ts.ansA == 0.5);
    CHECK(ts.ansB == 0.5);
    CHECK(ts.dAB.mean == 0.0);
}

TEST_CASE("effective_rank of singular values 3 and 1: entropy of sigma / sum sigma, top share sigma_1^2 / sum sigma^2") {
    // Singular values 3 and 1: p = (3/4, 1/4), erank = exp(-(3/4 ln 3/4 + 1/4 ln 1/4)) ~ 1.7548;
    // top_share = 9 / (9 + 1) = 0.9. (On the eigenvalues 9 and 1 of M^T M instead, erank would
    // be ~ 1.38; unsquared, top_share would be 3/4.)
    const double want_erank = std::exp(-(0.75 * std::log(0.75) + 0.25 * std::log(0.25)));
    REQUIRE(want_erank == doctest::Approx(1.7548).epsilon(1e-4));
    const float diag[] = {3, 0, 0, 1};
    const EffectiveRank d = effective_rank(diag, 2, 2);
    CHECK(d.erank == doctest::Approx(want_erank).epsilon(1e-9));
    CHECK(d.top_share == doctest::Approx(0.9).epsilon(1e-9));
    // The same singular values in a rotated 3 x 2 matrix: M = R diag(3, 1), a zero row below.
    const double c = std::cos(0.6), s = std::sin(0.6);
    const float rot[] = {static_cast<float>(3 * c), static_cast<float>(-s), static_cast<float>(3 * s),
                         static_cast<float>(c), 0, 0};
    const EffectiveRank e = effective_rank(rot, 3, 2);
    CHECK(e.erank == doctest::Approx(want_erank).epsilon(1e-6));
    CHECK(e.top_share == doctest::Approx(0.9).epsilon(1e-6));
}

TEST_CASE("logit lens at the last layer is the model's own output, attention_probs per head") {
    const auto m = test::random_qwen({});
    const TokenBatch ids({3, 1, 4, 1, 5, 9, 2, 6});
    auto c = m.new_cache(1);
    const Tensor3 out = m.forward(ids, c);
    const auto lens = logit_lens(m, ids, {0, 3});
    REQUIRE(lens.size() == 2);
    const std::size_t V = m.config().vocab;
    float d = 0, d0 = 0;
    for (std::size_t v = 0; v < V; ++v) {
        d = std::max(d, std::fabs(lens[1].data()[v] - out.data()[7 * V + v]));
        d0 = std::max(d0, std::fabs(lens[0].data()[v] - out.data()[7 * V + v]));
    }
    CHECK(d <= 1e-5f);
    CHECK(d0 > 1e-3f);
    const NamedTensor p = attention_probs(m, ids, 2);
    CHECK(shape_of(p) == std::vector<std::size_t>{1, 4, 1, 8});
}

TEST_CASE("groups(size) and removal scans") {
    const auto q = test::random_qwen({});  // G G A G
    const auto g3 = layer_groups(q.stack(), 3);
    REQUIRE(g3.size() == 1);
    CHECK(g3[0].layers == std::vector<LayerIndex>{0, 1});
    CHECK(g3[0].softmax_layer == 2);
    const auto g = test::random_granite({});  // M A M M
    const auto g0 = layer_groups(g.stack(), 0);
    REQUIRE(g0.size() == 1);
    CHECK(g0[0].layers == std::vector<LayerIndex>{0});
    std::vector<PairItem> items{{{1, 2, 3, 4}, {1, 2, 7, 4}, 5, 6, {}, 0}};
    const auto scan = removal_scan(g, items, {{0}, {2, 3}});
    REQUIRE(scan.size() == 2);
    const PairScores base = score_pairs(g, items);
    CHECK(scan[0].gap.mean != base.gap.mean);
    const auto heads = head_scan(g, items, 0, 4);
    CHECK(heads.size() == 4);
}

}  // TEST_SUITE
