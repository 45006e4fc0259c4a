#pragma once
// Bootstrap confidence intervals of the circuit metrics (interp/metrics.hpp), through the
// statistics module (experiments/bootstrap.hpp): items are resampled with replacement, every
// metric of one summary is computed on the same resampled items, and the interval is the
// percentile interval of the resample means. The point values equal the plain summaries
// (summarize_pairs, summarize_transplants, perplexity).
//
// Per-item columns: a pair's gap D(clean) - D(corrupted), its acc and cacc as the share of its
// two prompts answered (so the item mean is the share over the 2n prompts); a transplant's
// ansA, ansB (0 or 1), dAB, attA, attB (missing reader rows are left out). Items of several
// seeds are resampled within their seed and pooled (pass one vector per seed).

#include <cmath>    // std::exp, std::nan
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "../core/error.hpp"
#include "../experiments/bootstrap.hpp"
#include "metrics.hpp"

namespace hylens {

namespace detail {

/// The Bootstrap of `columns` per-item values of every item of every seed.
template <class Item, class Columns>
experiments::Bootstrap item_bootstrap(const std::vector<std::vector<Item>>& seeds, std::size_t columns,
                                      Columns&& columns_of, const experiments::BootstrapOptions& opt) {
    std::vector<experiments::SeedScores> s;
    for (const auto& items : seeds) {
        experiments::SeedScores sc;
        sc.items = items.size();
        for (const Item& it : items) {
            const std::vector<double> row = columns_of(it);
            check<ShapeError>(row.size() == columns, "[metric_intervals] ", row.size(), " columns, expected ", columns);
            sc.x.insert(sc.x.end(), row.begin(), row.end());
        }
        s.push_back(std::move(sc));
    }
    return experiments::Bootstrap(std::move(s), columns, opt);
}

}  // namespace detail

struct PairIntervals {
    experiments::Interval gap, acc, cacc;
};
/// gap, acc and cacc of clean/corrupted pairs with bootstrap intervals.
inline PairIntervals pair_intervals(const std::vector<std::vector<PairScore>>& seeds, const experiments::BootstrapOptions& opt = {}) {
    const auto b = detail::item_bootstrap(seeds, 3, [](const PairScore& p) {
        return std::vector<double>{p.gap(), (static_cast<double>(p.acc_clean) + static_cast<double>(p.acc_corrupt)) / 2.0,
                                   (static_cast<double>(p.cacc_clean) + static_cast<double>(p.cacc_corrupt)) / 2.0};
    }, opt);
    return {b.mean(0), b.mean(1), b.mean(2)};
}

struct TransplantIntervals {
    experiments::Interval ansA, ansB, dAB, attA, attB;
};
/// ansA, ansB, dAB, attA, attB of donor/host items with bootstrap intervals.
inline TransplantIntervals transplant_intervals(const std::vector<std::vector<TransplantScore>>& seeds,
                                                const experiments::BootstrapOptions& opt = {}) {
    const auto b = detail::item_bootstrap(seeds, 5, [](const TransplantScore& t) {
        return std::vector<double>{static_cast<double>(t.ansA), static_cast<double>(t.ansB), t.dAB, t.attA, t.attB};
    }, opt);
    return {b.mean(0), b.mean(1), b.mean(2), b.mean(3), b.mean(4)};
}

/// The mean of any per-item value (recovery, selectivity, ...) with its interval; NaN values
/// are left out.
inline experiments::Interval mean_interval(const std::vector<std::vector<double>>& seeds, const experiments::BootstrapOptions& opt = {}) {
    return detail::item_bootstrap(seeds, 1, [](double x) { return std::vector<double>{x}; }, opt).mean(0);
}

/// Perplexity with its interval, resampling whole sequences. The sequences must have equal
/// lengths (then the pooled mean NLL is the mean of the sequence means, and exp maps its
/// interval to the perplexity's).
inline experiments::Interval perplexity_interval(const std::vector<std::vector<double>>& nll_per_sequence, const experiments::BootstrapOptions& opt = {}) {
    std::vector<double> means;
    for (const auto& seq : nll_per_sequence) {
        check<ShapeError>(!seq.empty() && seq.size() == nll_per_sequence.front().size(), "[perplexity_interval] ",
                          "the sequences must have equal, non-zero lengths");
        double s = 0.0;
        for (double x : seq) s += x;
        means.push_back(s / static_cast<double>(seq.size()));
    }
    experiments::Interval i = mean_interval({means}, opt);
    i.value = std::exp(i.value);
    i.lo = std::exp(i.lo);
    i.hi = std::exp(i.hi);
    return i;
}

}  // namespace hylens
