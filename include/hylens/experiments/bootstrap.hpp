#pragma once
// Statistics of the channel study: means with 95 % percentile bootstrap confidence intervals,
// the ratio to FULL and paired differences between conditions, all from the same resamples.
//
// Data: for each seed (the data-generation seed), a matrix items x conditions of scores (NaN
// where an item has no record for a condition). One resample draws, within each seed, as many
// items as that seed has, uniformly with replacement, and pools the drawn items of all seeds;
// a condition's resample mean is the mean of its scores over the drawn items (NaN-free ones).
// Every condition, ratio and difference uses the same drawn items, so differences are paired
// (a difference between two conditions scored on different items resamples their pairs alone).
//
// Interval: the (1 - level)/2 and (1 + level)/2 quantiles of the resample values (finite ones; a
// ratio keeps x / 0 as an infinity, so a rare reference gives an unbounded interval), by
// linear interpolation between order statistics (x[floor(h)] + frac(h) * (x[floor(h)+1] -
// x[floor(h)]), h = p * (count - 1), "type 7"). The point estimate is the statistic on the data
// itself. The generator is PCG32 (O'Neill, XSH-RR), integers drawn with Lemire's unbiased
// bounded method, so a seed gives the same intervals on every machine and standard library.
//
// Beside it, for scores that are all 0 or 1, Wilson's score interval (wilson_interval), which
// needs no resamples: the percentile interval of a proportion shrinks to a point at 0 % and
// 100 % and falls short of its level near them at small n; and how the scores spread over the
// seeds (Bootstrap::seed_spread), since a seed of few items adds little spread to the
// resamples (docs/experiments.md measures both).

#include <algorithm>  // std::sort, std::nth_element, std::min_element
#include <cmath>      // std::isfinite, std::floor, std::nan, std::sqrt, std::erfc
#include <cstddef>    // std::size_t
#include <cstdint>    // std::uint32_t, std::uint64_t
#include <limits>     // std::numeric_limits
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "../core/error.hpp"

namespace hylens::experiments {

/// PCG32 (XSH-RR 64/32): a small, fixed, portable generator.
class Pcg32 {
public:
    explicit Pcg32(std::uint64_t seed, std::uint64_t stream = 0x5851f42d4c957f2dULL) noexcept
        : inc_((stream << 1u) | 1u) {
        next();
        state_ += seed;
        next();
    }
    std::uint32_t next() noexcept {
        const std::uint64_t old = state_;
        state_ = old * 6364136223846793005ULL + inc_;
        const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
        const auto rot = static_cast<std::uint32_t>(old >> 59u);
        return (xorshifted >> rot) | (xorshifted << ((0u - rot) & 31u));
    }
    /// Uniform in [0, n), unbiased (Lemire 2019); 0 < n < 2^32.
    std::uint32_t below(std::uint32_t n) noexcept {
        std::uint64_t m = static_cast<std::uint64_t>(next()) * n;
        auto low = static_cast<std::uint32_t>(m);
        if (low < n) {
            const std::uint32_t threshold = (0u - n) % n;
            while (low < threshold) {
                m = static_cast<std::uint64_t>(next()) * n;
                low = static_cast<std::uint32_t>(m);
            }
        }
        return static_cast<std::uint32_t>(m >> 32u);
    }

private:
    std::uint64_t state_ = 0, inc_;
};

/// Scores of one seed: items x conditions, row-major; NaN = no record.
struct SeedScores {
    std::size_t items = 0;
    std::vector<double> x;
};

struct BootstrapOptions {
    std::size_t resamples = 10000;  ///< B
    double level = 0.95;
    std::uint64_t seed = 20260101;
};

/// A point estimate, its percentile interval and the number of scores (or pairs) behind it.
/// `undefined`: resamples whose statistic was undefined (NaN: no drawn item scored, or 0 / 0
/// for a ratio), left out of the quantiles.
struct Interval {
    double value = std::numeric_limits<double>::quiet_NaN();
    double lo = std::numeric_limits<double>::quiet_NaN();
    double hi = std::numeric_limits<double>::quiet_NaN();
    std::size_t n = 0;
    std::size_t undefined = 0;
};

/// The type-7 quantile p of the finite values of v (NaN if there are none). Sorts v.
inline double percentile(std::vector<double>& v, double p) {
    std::erase_if(v, [](double x) { return !std::isfinite(x); });
    if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::sort(v.begin(), v.end());
    const double h = p * static_cast<double>(v.size() - 1);
    const auto i = static_cast<std::size_t>(std::floor(h));
    if (i + 1 >= v.size()) return v.back();
    return v[i] + (h - static_cast<double>(i)) * (v[i + 1] - v[i]);
}

/// The standard normal quantile: x with Phi(x) = p, 0 < p < 1, by bisection on
/// Phi(x) = erfc(-x / sqrt 2) / 2 until the bracket is one double wide (no closed form; the
/// standard library has erfc but not its inverse).
inline double normal_quantile(double p) {
    check(p > 0.0 && p < 1.0, "[normal_quantile] p = ", p, " is not in (0, 1)");
    double lo = -40.0, hi = 40.0;  // Phi(-40) is below the smallest double
    for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

/// Wilson's score interval for k successes in n trials at `level` (two-sided):
/// (p + z^2/2n -+ z sqrt(p(1 - p)/n + z^2/4n^2)) / (1 + z^2/n), p = k/n,
/// z = normal_quantile((1 + level) / 2). Unlike the percentile bootstrap it does not shrink to a
/// point at k = 0 or k = n (there [0, z^2/(n + z^2)] and its mirror).
inline std::pair<double, double> wilson_interval(double k, std::size_t n, double level) {
    check(n > 0 && k >= 0.0 && k <= static_cast<double>(n), "[wilson_interval] ", k, " successes in ", n, " trials");
    check(level > 0.0 && level < 1.0, "[wilson_interval] level ", level, " is not in (0, 1)");
    const double z = normal_quantile((1.0 + level) / 2.0), nn = static_cast<double>(n), p = k / nn;
    const double z2 = z * z, denom = 1.0 + z2 / nn;
    const double centre = (p + z2 / (2.0 * nn)) / denom;
    const double half = z * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
    // At k = 0 (k = n) the lower (upper) bound is 0 (1) exactly: the two terms are equal.
    return {k == 0.0 ? 0.0 : std::max(0.0, centre - half), k == nn ? 1.0 : std::min(1.0, centre + half)};
}

/// Resample means of every condition; then means, ratios and paired differences.
class Bootstrap {
public:
    Bootstrap(std::vector<SeedScores> seeds, std::size_t conditions, const BootstrapOptions& opt = {})
        : seeds_(std::move(seeds)), C_(conditions), opt_(opt) {
        check(opt.resamples >= 2, "[bootstrap] need at least 2 resamples, got ", opt.resamples);
        check(opt.level > 0.0 && opt.level < 1.0, "[bootstrap] level ", opt.level, " is not in (0, 1)");
        for (const auto& s : seeds_)
            check(s.x.size() == s.items * C_ && s.items < (std::size_t{1} << 31), "[bootstrap] a seed holds ",
                  s.x.size(), " scores for ", s.items, " items x ", C_, " conditions");
        resample();
    }

    std::size_t conditions() const noexcept { return C_; }
    const BootstrapOptions& options() const noexcept { return opt_; }

    /// Mean of condition c with its interval.
    Interval mean(std::size_t c) const {
        Interval r = interval([&](std::size_t b) { return means_[b * C_ + c]; });
        r.value = point_mean(c, r.n);
        return r;
    }
    /// mean(c) / mean(ref) (NaN where mean(ref) is 0). A resample where mean(ref) is 0 and
    /// mean(c) is not gives an infinite ratio, kept among the resamples: when more than
    /// (1 - level) / 2 of them are, the bound is infinite (dropping them gave a finite upper
    /// bound, too small, whenever the reference was rare). 0 / 0 is undefined, left out and
    /// counted.
    Interval ratio(std::size_t c, std::size_t ref) const {
        Interval r = interval([&](std::size_t b) { return means_[b * C_ + c] / means_[b * C_ + ref]; }, true);
        std::size_t n = 0, nref = 0;
        r.value = point_mean(c, n) / point_mean(ref, nref);
        r.n = n;
        return r;
    }
    /// mean(c) - mean(d) over the items scored in both, paired on the same resampled items; n
    /// counts those items. Where the two conditions cover the same items (a complete run) the
    /// resamples are this bootstrap's; otherwise (a merge of incomplete shards) the pairs alone
    /// are resampled with the same options, so the difference stays paired.
    Interval difference(std::size_t c, std::size_t d) const {
        bool same_items = true;
        std::size_t both = 0;
        for (const auto& s : seeds_)
            for (std::size_t i = 0; i < s.items; ++i) {
                const bool fc = std::isfinite(s.x[i * C_ + c]), fd = std::isfinite(s.x[i * C_ + d]);
                same_items = same_items && fc == fd;
                both += fc && fd;
            }
        if (!same_items) {
            std::vector<SeedScores> pairs;
            for (const auto& s : seeds_) {
                SeedScores p;
                for (std::size_t i = 0; i < s.items; ++i)
                    if (std::isfinite(s.x[i * C_ + c]) && std::isfinite(s.x[i * C_ + d])) {
                        p.x.push_back(s.x[i * C_ + c]);
                        p.x.push_back(s.x[i * C_ + d]);
                        ++p.items;
                    }
                pairs.push_back(std::move(p));
            }
            return Bootstrap(std::move(pairs), 2, opt_).difference(0, 1);
        }
        Interval r = interval([&](std::size_t b) { return means_[b * C_ + c] - means_[b * C_ + d]; });
        std::size_t nc = 0, nd = 0;
        r.value = point_mean(c, nc) - point_mean(d, nd);
        r.n = both;
        return r;
    }

    /// How condition c's scores spread over the seeds: the seeds holding any, and the fewest
    /// scores among those seeds. A seed of one scored item is redrawn whole by every resample,
    /// so it adds no spread to the interval (measured coverage: docs/experiments.md).
    struct SeedSpread {
        std::size_t seeds = 0;
        std::size_t min_items = 0;
    };
    SeedSpread seed_spread(std::size_t c) const {
        SeedSpread r;
        for (const auto& s : seeds_) {
            std::size_t n = 0;
            for (std::size_t i = 0; i < s.items; ++i) n += std::isfinite(s.x[i * C_ + c]);
            if (n == 0) continue;
            r.min_items = r.seeds == 0 ? n : std::min(r.min_items, n);
            ++r.seeds;
        }
        return r;
    }

    /// Wilson's score interval of condition c's mean where every score is 0 or 1 (a proportion
    /// over all its scored items, seeds pooled); NaN bounds otherwise, and without scores.
    Interval wilson(std::size_t c) const {
        Interval r;
        double k = 0.0;
        for (const auto& s : seeds_)
            for (std::size_t i = 0; i < s.items; ++i)
                if (const double x = s.x[i * C_ + c]; std::isfinite(x)) {
                    if (x != 0.0 && x != 1.0) {
                        r.n = 0;
                        return r;
                    }
                    k += x;
                    ++r.n;
                }
        if (r.n == 0) return r;
        r.value = k / static_cast<double>(r.n);
        const auto [lo, hi] = wilson_interval(k, r.n, opt_.level);
        r.lo = lo;
        r.hi = hi;
        return r;
    }

    /// The B resample means of condition c (NaN where no drawn item had a score).
    std::vector<double> resample_means(std::size_t c) const {
        std::vector<double> v(opt_.resamples);
        for (std::size_t b = 0; b < opt_.resamples; ++b) v[b] = means_[b * C_ + c];
        return v;
    }

private:
    /// Quantiles of the resample values; NaN values are left out and counted, infinite ones
    /// too unless `keep_infinite` (a ratio's x / 0).
    template <class F>
    Interval interval(F&& value_of, bool keep_infinite = false) const {
        std::vector<double> v;
        v.reserve(opt_.resamples);
        Interval r;
        for (std::size_t b = 0; b < opt_.resamples; ++b) {
            const double x = value_of(b);
            if (std::isfinite(x) || (keep_infinite && std::isinf(x)))
                v.push_back(x);
            else
                ++r.undefined;
        }
        r.lo = select_quantile(v, (1.0 - opt_.level) / 2.0);
        r.hi = select_quantile(v, (1.0 + opt_.level) / 2.0);
        return r;
    }

    /// percentile() of finite values by selection (O(B) instead of a sort; the same value).
    static double select_quantile(std::vector<double>& v, double p) {
        if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
        const double h = p * static_cast<double>(v.size() - 1);
        const auto i = static_cast<std::size_t>(std::floor(h));
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
        const double lo = v[i];
        if (i + 1 >= v.size()) return lo;
        const double hi = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(i) + 1, v.end());
        const double frac = h - static_cast<double>(i);
        // Between an infinite order statistic and another, the interpolation is the infinity
        // (inf - inf is NaN); frac = 0 is the lower one.
        if (std::isinf(lo) || lo == hi || frac == 0.0) return lo;
        if (std::isinf(hi)) return hi;
        return lo + frac * (hi - lo);
    }

    double point_mean(std::size_t c, std::size_t& n) const {
        double sum = 0.0;
        n = 0;
        for (const auto& s : seeds_)
            for (std::size_t i = 0; i < s.items; ++i)
                if (const double x = s.x[i * C_ + c]; std::isfinite(x)) {
                    sum += x;
                    ++n;
                }
        return n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
    }

    void resample() {
        Pcg32 rng(opt_.seed);
        means_.assign(opt_.resamples * C_, 0.0);
        std::vector<double> sum(C_), count(C_);
        std::vector<std::uint32_t> weight;
        for (std::size_t b = 0; b < opt_.resamples; ++b) {
            std::fill(sum.begin(), sum.end(), 0.0);
            std::fill(count.begin(), count.end(), 0.0);
            for (const auto& s : seeds_) {
                if (s.items == 0) continue;
                weight.assign(s.items, 0);
                for (std::size_t k = 0; k < s.items; ++k) ++weight[rng.below(static_cast<std::uint32_t>(s.items))];
                for (std::size_t i = 0; i < s.items; ++i) {
                    if (weight[i] == 0) continue;
                    const double w = weight[i];
                    for (std::size_t c = 0; c < C_; ++c)
                        if (const double x = s.x[i * C_ + c]; std::isfinite(x)) {
                            sum[c] += w * x;
                            count[c] += w;
                        }
                }
            }
            for (std::size_t c = 0; c < C_; ++c)
                means_[b * C_ + c] = count[c] > 0 ? sum[c] / count[c] : std::numeric_limits<double>::quiet_NaN();
        }
    }

    std::vector<SeedScores> seeds_;
    std::size_t C_;
    BootstrapOptions opt_;
    std::vector<double> means_;  // [B, C]
};

/// The sample standard deviation (n - 1) of per-seed values: the protocol's "mean ± sd over
/// seeds" beside a pooled interval. NaN below two values.
inline double sample_sd(const std::vector<double>& x) {
    if (x.size() < 2) return std::numeric_limits<double>::quiet_NaN();
    double mean = 0.0, ss = 0.0;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    for (double v : x) ss += (v - mean) * (v - mean);
    return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

}  // namespace hylens::experiments
