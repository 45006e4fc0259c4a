// Statistics of the channel study against closed forms: the bootstrap distribution of the mean
// of n binary scores with k ones is Binomial(n, k/n) / n; resampling within seeds keeps each
// seed's share; paired differences of a constant shift have no spread; Wilson's interval against
// published values; the summary's rows of hand-made records against numbers worked out by hand.

#include <hylens/experiments/bootstrap.hpp>
#include <hylens/experiments/summary.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace hylens::experiments;

namespace {

/// Exact p-quantile of Binomial(n, q) / n: the smallest atom whose CDF reaches p.
double binomial_quantile(int n, double q, double p) {
    double cdf = 0.0;
    for (int k = 0; k <= n; ++k) {
        cdf += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * std::log(q) +
                        (n - k) * std::log1p(-q));
        if (cdf >= p) return static_cast<double>(k) / n;
    }
    return 1.0;
}

SeedScores column(const std::vector<double>& x) { return {x.size(), x}; }

}  // namespace

TEST_CASE("bootstrap: percentile is the type-7 quantile") {
    std::vector<double> v = {4, 1, 3, 2};
    CHECK(percentile(v, 0.5) == doctest::Approx(2.5));
    v = {4, 1, 3, 2};
    CHECK(percentile(v, 0.25) == doctest::Approx(1.75));
    v = {4, 1, 3, 2};
    CHECK(percentile(v, 0.0) == 1.0);
    v = {4, 1, 3, 2, NAN};
    CHECK(percentile(v, 1.0) == 4.0);  // NaN dropped
    v = {NAN};
    CHECK(std::isnan(percentile(v, 0.5)));
}

TEST_CASE("bootstrap: binary scores give the binomial interval and spread (closed form)") {
    const int n = 50, k = 20;
    std::vector<double> x(n, 0.0);
    for (int i = 0; i < k; ++i) x[static_cast<std::size_t>(i) * 2] = 1.0;
    const Bootstrap boot({column(x)}, 1);
    const Interval m = boot.mean(0);
    CHECK(m.value == doctest::Approx(0.4));
    CHECK(m.n == 50);
    // Percentile interval = the binomial quantiles, within one atom (1/n) for Monte Carlo error.
    CHECK(std::abs(m.lo - binomial_quantile(n, 0.4, 0.025)) <= 1.0 / n + 1e-12);
    CHECK(std::abs(m.hi - binomial_quantile(n, 0.4, 0.975)) <= 1.0 / n + 1e-12);
    // Spread of the B = 10,000 resample means: sqrt(p (1 - p) / n); its Monte Carlo error is
    // about 1 / sqrt(2 B) = 0.7 %, so 4 % is over five standard errors.
    const std::vector<double> r = boot.resample_means(0);
    CHECK(r.size() == 10000);
    std::vector<double> copy = r;
    CHECK(m.lo == percentile(copy, 0.025));  // the interval is the percentile of the resample means
    copy = r;
    CHECK(m.hi == percentile(copy, 0.975));
    double mu = 0, var = 0;
    for (double v : r) mu += v;
    mu /= static_cast<double>(r.size());
    for (double v : r) var += (v - mu) * (v - mu);
    var /= static_cast<double>(r.size() - 1);
    CHECK(std::sqrt(var) == doctest::Approx(std::sqrt(0.4 * 0.6 / n)).epsilon(0.04));
    CHECK(mu == doctest::Approx(0.4).epsilon(0.01));
}

TEST_CASE("bootstrap: items are resampled within each seed and seeds pooled") {
    // Seed 1: 10 items scoring 0; seed 2: 30 items scoring 1. Within-seed resampling keeps
    // 10 + 30 draws, so every resample mean is exactly 30 / 40.
    const Bootstrap boot({column(std::vector<double>(10, 0.0)), column(std::vector<double>(30, 1.0))}, 1);
    const Interval m = boot.mean(0);
    CHECK(m.value == 0.75);
    CHECK(m.lo == 0.75);
    CHECK(m.hi == 0.75);
    CHECK(m.n == 40);
}

TEST_CASE("bootstrap: differences are paired, rel_full shares the resamples, a seed is deterministic") {
    // Two conditions per item: FULL = x_i, other = x_i - 0.25 (x spread over [0, 1]).
    SeedScores s;
    s.items = 40;
    for (std::size_t i = 0; i < s.items; ++i) {
        const double x = static_cast<double>((i * 37) % 40) / 39.0;
        s.x.push_back(x);
        s.x.push_back(x - 0.25);
    }
    const Bootstrap boot({s}, 2);
    const Interval d = boot.difference(1, 0);
    CHECK(d.value == doctest::Approx(-0.25));
    CHECK(d.lo == doctest::Approx(-0.25).epsilon(1e-12));
    CHECK(d.hi == doctest::Approx(-0.25).epsilon(1e-12));
    CHECK(d.n == 40);
    CHECK(boot.mean(0).hi - boot.mean(0).lo > 0.1);  // each mean alone does vary
    // Ratio to a condition that is 1 everywhere: the mean itself, same interval.
    SeedScores t;
    t.items = 30;
    for (std::size_t i = 0; i < t.items; ++i) {
        t.x.push_back(1.0);
        t.x.push_back(i % 3 == 0 ? 1.0 : 0.0);
    }
    const Bootstrap b2({t}, 2);
    const Interval rel = b2.ratio(1, 0), mean = b2.mean(1);
    CHECK(rel.value == doctest::Approx(1.0 / 3.0));
    CHECK(rel.lo == mean.lo);
    CHECK(rel.hi == mean.hi);
    // Same seed, same intervals; another seed, other resamples.
    const Bootstrap again({t}, 2);
    CHECK(again.mean(1).lo == mean.lo);
    CHECK(again.resample_means(1) == b2.resample_means(1));
    BootstrapOptions o;
    o.seed = 7;
    CHECK(Bootstrap({t}, 2, o).resample_means(1) != b2.resample_means(1));
    // Missing scores are left out of their condition only.
    SeedScores m;
    m.items = 3;
    m.x = {1.0, NAN, 0.0, 1.0, 1.0, 1.0};
    const Bootstrap b3({m}, 2);
    CHECK(b3.mean(0).n == 3);
    CHECK(b3.mean(1).n == 2);
    CHECK(b3.mean(1).value == 1.0);
    CHECK_THROWS_AS(Bootstrap({m}, 3), hylens::Error);
}

TEST_CASE("bootstrap: a difference over different items is over the pairs, a rare reference leaves the ratio unbounded") {
    // Condition 1 lacks item 0: the difference is over items 1 and 2 only, (1 - 0 + 1 - 1) / 2
    // (mean(1) - mean(0) over each one's own items gave 1 - 2/3, unpaired).
    SeedScores m;
    m.items = 3;
    m.x = {1.0, NAN, 0.0, 1.0, 1.0, 1.0};
    const Interval d = Bootstrap({m}, 2).difference(1, 0);
    CHECK(d.n == 2);
    CHECK(d.value == 0.5);
    // ... and its interval is that of the pairs alone, resampled with the same options.
    SeedScores pairs;
    pairs.items = 2;
    pairs.x = {0.0, 1.0, 1.0, 1.0};
    const Interval p = Bootstrap({pairs}, 2).difference(1, 0);
    CHECK(d.lo == p.lo);
    CHECK(d.hi == p.hi);
    CHECK(d.lo == 0.0);
    CHECK(d.hi == 1.0);

    // FULL scores 1 on 2 items of 50, the other condition on 3: (48/50)^50 = 13 % of the
    // resamples draw neither FULL item, an infinite ratio there (or 0 / 0 where the other's
    // items are missed too). Dropping them gave a finite upper bound; more than 2.5 % are
    // infinite, so the bound is.
    SeedScores r;
    r.items = 50;
    for (std::size_t i = 0; i < r.items; ++i) {
        r.x.push_back(i < 2 ? 1.0 : 0.0);
        r.x.push_back(i >= 10 && i < 13 ? 1.0 : 0.0);
    }
    const Bootstrap br({r}, 2);
    const Interval rel = br.ratio(1, 0);
    CHECK(rel.value == doctest::Approx(1.5));
    CHECK(std::isinf(rel.hi));
    CHECK(rel.hi > 0.0);
    CHECK(std::isfinite(rel.lo));
    // The undefined resamples are those where both means are 0, counted from the resamples.
    const std::vector<double> full = br.resample_means(0), other = br.resample_means(1);
    std::size_t zero_zero = 0, x_zero = 0;
    for (std::size_t b = 0; b < full.size(); ++b) {
        zero_zero += full[b] == 0.0 && other[b] == 0.0;
        x_zero += full[b] == 0.0 && other[b] > 0.0;
    }
    CHECK(rel.undefined == zero_zero);
    CHECK(zero_zero > 0);
    CHECK(static_cast<double>(x_zero) / static_cast<double>(full.size() - zero_zero) > 0.025);
    // A reference never 0 in a resample keeps every ratio finite, none undefined.
    SeedScores q;
    q.items = 4;
    q.x = {1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0};
    const Interval finite = Bootstrap({q}, 2).ratio(1, 0);
    CHECK(finite.undefined == 0);
    CHECK(std::isfinite(finite.hi));
}

TEST_CASE("bootstrap: the normal quantile against tabulated values") {
    // Phi^-1 of 0.975, 0.995 and 1e-10, to the digits of standard tables (Abramowitz & Stegun
    // 26.2; the last as given by Python's statistics.NormalDist().inv_cdf).
    CHECK(normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-13));
    CHECK(normal_quantile(0.995) == doctest::Approx(2.5758293035489004).epsilon(1e-13));
    CHECK(normal_quantile(1e-10) == doctest::Approx(-6.361340902404056).epsilon(1e-12));
    CHECK(std::abs(normal_quantile(0.5)) < 1e-15);
    CHECK(normal_quantile(0.025) == doctest::Approx(-normal_quantile(0.975)).epsilon(1e-14));
    CHECK_THROWS_AS(normal_quantile(0.0), hylens::Error);
    CHECK_THROWS_AS(normal_quantile(1.0), hylens::Error);
    CHECK_THROWS_AS(normal_quantile(NAN), hylens::Error);
}

TEST_CASE("bootstrap: Wilson's interval against Newcombe (1998), ends exact at 0 and n") {
    // Newcombe, Statistics in Medicine 17:857-872, Table I, method 3 (score, no continuity
    // correction), printed to 4 decimals.
    struct Case {
        double k;
        std::size_t n;
        double lo, hi;
    };
    for (const Case& c : {Case{81, 263, 0.2553, 0.3662}, Case{15, 148, 0.0624, 0.1605}, Case{0, 20, 0.0, 0.1611},
                          Case{1, 29, 0.0061, 0.1718}}) {
        CAPTURE(c.k);
        const auto [lo, hi] = wilson_interval(c.k, c.n, 0.95);
        CHECK(std::abs(lo - c.lo) <= 5e-5);
        CHECK(std::abs(hi - c.hi) <= 5e-5);
    }
    CHECK(wilson_interval(0, 20, 0.95).first == 0.0);  // exactly, not a rounding residue
    CHECK(wilson_interval(20, 20, 0.95).second == 1.0);
    // Symmetric in k <-> n - k.
    const auto a = wilson_interval(3, 11, 0.9), b = wilson_interval(8, 11, 0.9);
    CHECK(a.first == doctest::Approx(1.0 - b.second).epsilon(1e-14));
    CHECK_THROWS_AS(wilson_interval(3, 0, 0.95), hylens::Error);
    CHECK_THROWS_AS(wilson_interval(4, 3, 0.95), hylens::Error);
    CHECK_THROWS_AS(wilson_interval(1, 3, -0.5), hylens::Error);  // z <= 0 gave lo > hi
    CHECK_THROWS_AS(wilson_interval(1, 3, 1.0), hylens::Error);
}

TEST_CASE("bootstrap: Wilson's interval of a condition and how its scores spread over the seeds") {
    // Items x conditions. Condition 0: binary, seed 1 holds 3 scores (1, 0, 1; item 2 has none),
    // seed 2 one (1); condition 1: a 0.5 makes it not a proportion; condition 2: no score in seed 2.
    SeedScores s1{4, {1, 0.5, 0, /**/ 0, 0, 1, /**/ NAN, 1, 1, /**/ 1, 1, 1}};
    SeedScores s2{1, {1, 1, NAN}};
    const Bootstrap boot({s1, s2}, 3);
    const auto sp0 = boot.seed_spread(0), sp2 = boot.seed_spread(2);
    CHECK(sp0.seeds == 2);
    CHECK(sp0.min_items == 1);
    CHECK(sp2.seeds == 1);
    CHECK(sp2.min_items == 4);
    const Interval w = boot.wilson(0);  // 3 of 4
    CHECK(w.n == 4);
    CHECK(w.value == 0.75);
    const auto [lo, hi] = wilson_interval(3, 4, 0.95);
    CHECK(w.lo == lo);
    CHECK(w.hi == hi);
    CHECK(std::isnan(boot.wilson(1).lo));
    CHECK(std::isnan(boot.wilson(1).hi));
    // One score per seed: resampled within seeds the percentile interval has no width at all,
    // whatever the scores; the spread says so, and Wilson's interval keeps its width.
    const Bootstrap one({column({1.0}), column({0.0}), column({1.0})}, 1);
    const Interval m = one.mean(0);
    CHECK(m.lo == m.hi);
    CHECK(one.seed_spread(0).min_items == 1);
    CHECK(one.wilson(0).hi - one.wilson(0).lo > 0.5);
}

TEST_CASE("bootstrap: an interval of continuous scores is the type-7 percentile of the resample means") {
    // Binary scores leave neighbouring order statistics equal, so the interpolation between
    // them went unchecked; i / 39 makes them differ.
    std::vector<double> x;
    for (int i = 0; i < 40; ++i) x.push_back(i / 39.0);
    const Bootstrap boot({column(x)}, 1);
    const Interval m = boot.mean(0);
    // (The interval's quantile is (1 - level) / 2, which is 0.025 only to rounding: 1e-12.)
    std::vector<double> r = boot.resample_means(0);
    CHECK(m.lo == doctest::Approx(percentile(r, 0.025)).epsilon(1e-12));
    r = boot.resample_means(0);
    CHECK(m.hi == doctest::Approx(percentile(r, 0.975)).epsilon(1e-12));
    r = boot.resample_means(0);
    std::sort(r.begin(), r.end());
    REQUIRE(r[250] - r[249] > 1e-6);  // h = 0.025 * 9999 = 249.975: two order statistics apart, interpolated
    CHECK(m.lo == doctest::Approx(r[249] + 0.975 * (r[250] - r[249])).epsilon(1e-12));
    CHECK(std::abs(m.lo - r[249]) > 1e-3 * (r[250] - r[249]));  // not the lower order statistic itself
}

TEST_CASE("summary: rows and differences of hand-made records") {
    // One seed, four items, FULL and KV_ONLY; items 0-1 in group g1, 2-3 in g2. Every number
    // below is worked out by hand from these scores.
    const double full[] = {1, 1, 0, 0}, kv[] = {1, 0, 0, 0};
    const bool full_ft[] = {true, true, false, true}, hit[] = {true, false, false, false};
    std::vector<nlohmann::json> records;
    for (std::size_t i = 0; i < 4; ++i)
        for (const bool is_full : {true, false})
            records.push_back({{"task", "t"},
                               {"seed", 1},
                               {"item", i},
                               {"condition", is_full ? "FULL" : "KV_ONLY"},
                               {"score", is_full ? full[i] : kv[i]},
                               {"first_token", is_full ? full_ft[i] : false},
                               {"score_fields", {{"hit", is_full ? hit[i] : false}}},
                               {"item_fields", {{"group", i < 2 ? "g1" : "g2"}}}});
    BootstrapOptions bo;
    bo.resamples = 500;
    const Summary s = summarize(records, {"FULL", "KV_ONLY"}, bo);
    const auto row = [&](const std::string& group, const std::string& metric, const std::string& cond) -> const SummaryRow& {
        for (const auto& r : s.rows)
            if (r.group == group && r.metric == metric && r.condition == cond) return r;
        FAIL("no row ", group, " ", metric, " ", cond);
        return s.rows.front();
    };
    CHECK(row("all", "score", "KV_ONLY").mean.value == 0.25);
    CHECK(row("all", "score", "KV_ONLY").rel_full.value == 0.5);  // 0.25 / 0.5, not 0.5 / 0.25
    CHECK(row("all", "first_token", "FULL").mean.value == 0.75);  // true counts 1
    CHECK(row("all", "hit", "FULL").mean.value == 0.25);
    CHECK(row("g1", "score", "KV_ONLY").mean.value == 0.5);
    CHECK(row("g2", "score", "FULL").mean.value == 0.0);
    CHECK(row("all", "score", "FULL").mean.n == 4);
    bool diff_seen = false;
    for (const auto& d : s.diffs)
        if (d.group == "all" && d.metric == "score" && d.condition == "KV_ONLY" && d.minus == "FULL") {
            CHECK(d.diff.value == -0.25);  // KV_ONLY minus FULL
            CHECK(d.diff.n == 4);
            diff_seen = true;
        }
    CHECK(diff_seen);
    // Each (task, group) resamples from its own documented seed: 20260101 XOR name_hash, with
    // name_hash as docs/experiments.md states it.
    const auto documented_seed = [](const std::string& name) {
        std::uint64_t h = 1469598103934665603ULL;
        for (const unsigned char c : name) h = h * 1099511628211ULL + c + 0x9e37ULL;
        return 20260101ULL ^ h;
    };
    CHECK(row("all", "score", "FULL").bootstrap_seed == documented_seed("t/all"));
    CHECK(row("g1", "score", "FULL").bootstrap_seed == documented_seed("t/g1"));
    CHECK(row("g2", "hit", "KV_ONLY").bootstrap_seed == documented_seed("t/g2"));
    // The intervals are a Bootstrap of the items x conditions matrix from that seed.
    BootstrapOptions g = bo;
    g.seed = documented_seed("t/all");
    const Bootstrap boot({SeedScores{4, {1, 1, 1, 0, 0, 0, 0, 0}}}, 2, g);
    const SummaryRow& r = row("all", "score", "KV_ONLY");
    CHECK(r.mean.lo == boot.mean(1).lo);
    CHECK(r.mean.hi == boot.mean(1).hi);
    CHECK(r.rel_full.lo == boot.ratio(1, 0).lo);
    CHECK(r.rel_full.hi == boot.ratio(1, 0).hi);
}
