// Circuit metrics (interp/metrics.hpp) on hand-computed cases: log-softmax, per-token NLL and
// perplexity, D / gap / acc / cacc of clean-corrupted pairs, recovery, the transplant scores
// ansA / ansB / dAB / attA / attB, and their bootstrap intervals.

#include <hylens/interp/metric_intervals.hpp>
#include <hylens/interp/metrics.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace hylens;

TEST_SUITE("circuit/metrics") {

TEST_CASE("log_softmax: hand-computed rows, stable for large logits") {
    const float flat[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    for (double v : log_softmax(flat, 4)) CHECK(v == doctest::Approx(-std::log(4.0)).epsilon(1e-15));
    // {2, 0}: log(1 + e^-2) = 0.1269280110429725
    const float two[2] = {2.0f, 0.0f};
    const std::vector<double> l = log_softmax(two, 2);
    CHECK(l[0] == doctest::Approx(-0.1269280110429725).epsilon(1e-14));
    CHECK(l[1] == doctest::Approx(-2.1269280110429725).epsilon(1e-14));
    // 1000 - (1000 + log 2): the subtraction keeps ~13 of the 16 digits
    const float big[2] = {1000.0f, 1000.0f};
    for (double v : log_softmax(big, 2)) CHECK(v == doctest::Approx(-std::log(2.0)).epsilon(1e-12));
    const float bad[2] = {NAN, 0.0f};
    CHECK_THROWS_AS(log_softmax(bad, 2), ShapeError);
}

TEST_CASE("token_nll and perplexity: -log p(next token), exp of the pooled mean") {
    // logits [1, 3, 2]; ids 0 1 1: row 0 {0, 0} predicts 1 -> log 2; row 1 {2, 0} predicts 1 -> 2.12692801...
    Tensor3 lg({1, 3, 2});
    const float vals[6] = {0.0f, 0.0f, 2.0f, 0.0f, 5.0f, 5.0f};
    std::copy(vals, vals + 6, lg.data());
    const std::vector<double> nll = token_nll(lg, TokenBatch({0, 1, 1}));
    REQUIRE(nll.size() == 2);
    CHECK(nll[0] == doctest::Approx(0.6931471805599453).epsilon(1e-14));
    CHECK(nll[1] == doctest::Approx(2.1269280110429725).epsilon(1e-14));
    const Perplexity p = perplexity({nll});
    CHECK(p.tokens == 2);
    CHECK(p.ppl == doctest::Approx(std::exp((0.6931471805599453 + 2.1269280110429725) / 2.0)).epsilon(1e-14));
    // pooled over tokens, not averaged over sequences: {1}, {2, 3} -> mean 2
    const Perplexity q = perplexity({{1.0}, {2.0, 3.0}});
    CHECK(q.mean_nll == 2.0);
    CHECK(q.ppl == doctest::Approx(std::exp(2.0)).epsilon(1e-15));
    CHECK(std::isnan(perplexity({}).ppl));
    CHECK_THROWS_AS(token_nll(lg, TokenBatch({0, 1})), ShapeError);
    CHECK_THROWS_AS(token_nll(lg, TokenBatch({0, 7, 1})), ShapeError);
}

TEST_CASE("pairs: D, gap (mean and SEM), acc over 2n prompts, cacc among the dictionary values") {
    // item 1: clean answer 1, corrupted answer 3
    const float c1[5] = {0.0f, 3.0f, 1.0f, 2.0f, 0.5f};  // argmax 1 (= clean answer)
    const float x1[5] = {0.0f, 1.0f, 0.0f, 4.0f, 5.0f};  // argmax 4 (not 3); among {1, 3}: 3
    const PairScore a = score_pair(c1, x1, 5, 1, 3, {1, 3});
    CHECK(a.d_clean == 1.0);
    CHECK(a.d_corrupt == -3.0);
    CHECK(a.gap() == 4.0);
    CHECK(a.acc_clean);
    CHECK(!a.acc_corrupt);
    CHECK(a.cacc_clean);
    CHECK(a.cacc_corrupt);
    // item 2: the model ignores the dictionary: both prompts give argmax 0, among {1, 3}: 1
    const float c2[5] = {9.0f, 2.0f, 0.0f, 0.0f, 0.0f};
    const PairScore b = score_pair(c2, c2, 5, 1, 3, {1, 3});
    CHECK(b.gap() == 0.0);
    CHECK(!b.acc_clean);
    CHECK(b.cacc_clean);
    CHECK(!b.cacc_corrupt);
    const PairSummary s = summarize_pairs({a, b});
    CHECK(s.n == 2);
    CHECK(s.gap.mean == 2.0);
    CHECK(s.gap.sem == doctest::Approx(2.0 / std::sqrt(2.0)).epsilon(1e-15));  // population std 2
    CHECK(s.acc == 0.25);   // 1 of 4 prompts
    CHECK(s.cacc == 0.75);  // 3 of 4 prompts
    // No items: no mean (it read 0, a gap and accuracies of a study that never ran).
    const PairSummary none = summarize_pairs({});
    CHECK(none.n == 0);
    CHECK(std::isnan(none.gap.mean));
    CHECK(std::isnan(none.gap.sem));
    CHECK(std::isnan(none.acc));
    CHECK(std::isnan(none.cacc));
    CHECK_THROWS_AS(score_pair(c1, x1, 5, 1, 7, {1, 3}), ShapeError);
}

TEST_CASE("recovery: (D_patched - D_corrupt) / (D_clean - D_corrupt), NaN on a vanishing denominator") {
    CHECK(recovery(2.0, -3.0, 1.0) == 1.25);
    CHECK(recovery(-3.0, -3.0, 1.0) == 0.0);
    CHECK(std::isnan(recovery(1.0, 0.5, 0.5 + 1e-7)));
}

TEST_CASE("transplant scores: ansA / ansB / dAB from the logits, attA / attB from the reader's row") {
    const float row[4] = {0.0f, 2.5f, 1.0f, 3.0f};  // argmax 3
    const float probs[6] = {0.1f, 0.2f, 0.3f, 0.15f, 0.05f, 0.2f};
    const TransplantScore s = score_transplant(row, 4, 3, 1, probs, 6, {1, 3}, {3, 5});
    CHECK(s.ansA);
    CHECK(!s.ansB);
    CHECK(s.dAB == 0.5);
    CHECK(s.attA == doctest::Approx(0.5).epsilon(1e-7));
    CHECK(s.attB == doctest::Approx(0.2).epsilon(1e-7));
    const TransplantScore t = score_transplant(row, 4, 1, 3);  // the host's own answer wins
    CHECK(!t.ansA);
    CHECK(t.ansB);
    CHECK(t.dAB == -0.5);
    CHECK(std::isnan(t.attA));
    const TransplantSummary m = summarize_transplants({s, t});
    CHECK(m.ansA == 0.5);
    CHECK(m.ansB == 0.5);
    CHECK(m.dAB.mean == 0.0);
    CHECK(m.attA.n == 1);  // only the item with a reader row
    CHECK(m.attA.mean == doctest::Approx(0.5).epsilon(1e-7));
    // No item with a reader row: attA has no mean (it read 0, as if the head ignored entry A).
    const TransplantSummary unread = summarize_transplants({t});
    CHECK(unread.attA.n == 0);
    CHECK(std::isnan(unread.attA.mean));
    CHECK(std::isnan(unread.attB.mean));
    CHECK(unread.dAB.mean == -0.5);
    const TransplantSummary empty = summarize_transplants({});
    CHECK(std::isnan(empty.ansA));
    CHECK(std::isnan(empty.dAB.mean));
    CHECK(contiguous_span({4, 5, 6}) == Span{4, 7});
    CHECK_THROWS_AS(contiguous_span({4, 6}), ShapeError);
    CHECK_THROWS_AS(score_transplant(row, 4, 9, 1), ShapeError);
}

TEST_CASE("intervals: the point values are the plain summaries, the intervals contain them, constant data has none") {
    std::vector<PairScore> pairs;
    for (int i = 0; i < 30; ++i) {
        PairScore p;
        p.d_clean = 1.0 + 0.1 * i;
        p.d_corrupt = -1.0;
        p.acc_clean = i % 3 != 0;
        p.acc_corrupt = i % 2 == 0;
        p.cacc_clean = true;
        p.cacc_corrupt = i % 5 != 0;
        pairs.push_back(p);
    }
    const experiments::BootstrapOptions opt{2000, 0.95, 7};
    const PairIntervals pi = pair_intervals({pairs}, opt);
    const PairSummary ps = summarize_pairs(pairs);
    CHECK(pi.gap.value == doctest::Approx(ps.gap.mean).epsilon(1e-14));
    CHECK(pi.acc.value == doctest::Approx(ps.acc).epsilon(1e-14));
    CHECK(pi.cacc.value == doctest::Approx(ps.cacc).epsilon(1e-14));
    for (const experiments::Interval& i : {pi.gap, pi.acc, pi.cacc}) {
        CHECK(i.n == 30);
        CHECK(i.lo <= i.value);
        CHECK(i.value <= i.hi);
    }
    CHECK(pi.gap.lo < pi.gap.hi);
    // a 95 % interval of the gap (sd 0.87 over 30 items) is about 2 x 1.96 x 0.87 / sqrt(30) = 0.62 wide
    CHECK(pi.gap.hi - pi.gap.lo == doctest::Approx(0.62).epsilon(0.2));
    // the same seed gives the same interval
    CHECK(pair_intervals({pairs}, opt).gap.lo == pi.gap.lo);

    std::vector<TransplantScore> ts(10);
    for (auto& t : ts) t = {true, false, 2.0, 0.8, 0.1};
    const TransplantIntervals ti = transplant_intervals({ts}, opt);
    CHECK(ti.ansA.value == 1.0);
    CHECK(ti.ansA.lo == 1.0);
    CHECK(ti.ansA.hi == 1.0);
    CHECK(ti.dAB.lo == 2.0);
    CHECK(ti.attA.value == doctest::Approx(0.8).epsilon(1e-12));
    ts[0].attA = std::nan("");  // a missing reader row is left out
    CHECK(transplant_intervals({ts}, opt).attA.n == 9);

    // perplexity: exp of the interval of the sequences' mean NLL; e^2 for a constant NLL of 2
    const experiments::Interval pp = perplexity_interval({{2.0, 2.0}, {2.0, 2.0}}, opt);
    CHECK(pp.value == doctest::Approx(std::exp(2.0)).epsilon(1e-14));
    CHECK(pp.lo == doctest::Approx(std::exp(2.0)).epsilon(1e-14));
    CHECK_THROWS_AS(perplexity_interval({{1.0}, {1.0, 2.0}}, opt), ShapeError);
    CHECK(mean_interval({{1.0, std::nan(""), 3.0}}, opt).value == 2.0);
}

}  // TEST_SUITE
