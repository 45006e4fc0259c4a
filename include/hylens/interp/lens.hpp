#pragma once
// Readouts of a model (protocols.md §A.5, §C.4): logit lens, attention probabilities per
// head, the logit difference D and the metrics built on it (gap, acc, cacc, recovery,
// transplant scores), reader-attention splits, q.k selectivity, candidate margin and the
// effective rank of a state matrix. All logits are read at one position and in float32;
// reductions run in float64.

#include <algorithm>  // std::max
#include <cmath>      // std::sqrt, std::log, std::exp, std::nan
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <limits>     // std::numeric_limits
#include <utility>    // std::pair
#include <vector>     // std::vector

#include "../core/error.hpp"
#include "../core/tensor.hpp"
#include "../stack/tokens.hpp"
#include "named_tensors.hpp"
#include "ridge.hpp"
#include "run.hpp"
#include "sites.hpp"

namespace hylens {

/// A half-open span [begin, end) of token positions (an entry of a dictionary prompt).
using Span = std::pair<std::size_t, std::size_t>;

/// Row (b, t) of logits [B, T, V]; t = -1 is the final position.
inline const float* logits_row(const Tensor3& logits, std::size_t b = 0, long t = -1) {
    const std::size_t T = logits.shape()[1], V = logits.shape()[2];
    const std::size_t tt = t < 0 ? T - static_cast<std::size_t>(-t) : static_cast<std::size_t>(t);
    check<ShapeError>(b < logits.shape()[0] && tt < T, "[logits_row] row (", b, ", ", t, ") of logits [",
                      logits.shape()[0], ", ", T, ", ", V, "]");
    return logits.data() + (b * T + tt) * V;
}

/// A token id of a logits row of V: a ShapeError naming the caller otherwise (an id past the
/// vocabulary read past the row).
inline void check_vocab_id(std::int64_t id, std::size_t V, const char* who) {
    check<ShapeError>(id >= 0 && static_cast<std::size_t>(id) < V, "[", who, "] token id ", id,
                      " is outside the vocabulary of ", V);
}

/// D = logit(answer) - logit(other), of a logits row of V.
inline double logit_diff(const float* row, std::size_t V, std::int64_t answer, std::int64_t other) {
    check_vocab_id(answer, V, "logit_diff");
    check_vocab_id(other, V, "logit_diff");
    return static_cast<double>(row[answer]) - static_cast<double>(row[other]);
}

/// Argmax over the whole vocabulary.
inline std::int64_t argmax(const float* row, std::size_t V) {
    std::size_t best = 0;
    for (std::size_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
    return static_cast<std::int64_t>(best);
}
/// Argmax restricted to `choices` (cacc: the dictionary's value tokens), of a logits row of V.
inline std::int64_t argmax_among(const float* row, std::size_t V, const std::vector<std::int64_t>& choices) {
    check<ShapeError>(!choices.empty(), "[argmax_among] no choices");
    for (std::int64_t c : choices) check_vocab_id(c, V, "argmax_among");
    std::int64_t best = choices[0];
    for (std::int64_t c : choices)
        if (row[c] > row[best]) best = c;
    return best;
}

struct MeanSem {
    double mean = 0.0, sem = 0.0;  ///< sem = std / sqrt(n) (population std, as numpy's default)
    std::size_t n = 0;
};
/// The mean of `x` and its SEM; both NaN for no values (a mean of nothing is not 0).
inline MeanSem mean_sem(const std::vector<double>& x) {
    MeanSem m;
    m.n = x.size();
    if (x.empty()) {
        m.mean = m.sem = std::numeric_limits<double>::quiet_NaN();
        return m;
    }
    for (double v : x) m.mean += v;
    m.mean /= static_cast<double>(x.size());
    double ss = 0.0;
    for (double v : x) ss += (v - m.mean) * (v - m.mean);
    m.sem = std::sqrt(ss / static_cast<double>(x.size())) / std::sqrt(static_cast<double>(x.size()));
    return m;
}

/// gap = mean over items of D(clean) - D(corrupted), with its SEM (NaN for no items).
inline MeanSem gap(const std::vector<double>& d_clean, const std::vector<double>& d_corrupt) {
    check<ShapeError>(d_clean.size() == d_corrupt.size(), "[gap] ", d_clean.size(), " clean and ", d_corrupt.size(),
                      " corrupted items");
    std::vector<double> d(d_clean.size());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = d_clean[i] - d_corrupt[i];
    return mean_sem(d);
}

/// recovery = (D_patched - D_corrupt) / (D_clean - D_corrupt); NaN when the denominator is
/// below 1e-6 in magnitude.
inline double recovery(double d_patched, double d_corrupt, double d_clean) {
    const double den = d_clean - d_corrupt;
    return std::fabs(den) < 1e-6 ? std::nan("") : (d_patched - d_corrupt) / den;
}

/// Attention mass of one probability row [Tk] over a span of keys.
inline double attention_mass(const float* probs, std::size_t Tk, Span span) {
    check<ShapeError>(span.first <= span.second && span.second <= Tk, "[attention_mass] span [", span.first, ", ",
                      span.second, ") of ", Tk, " keys");
    double s = 0.0;
    for (std::size_t k = span.first; k < span.second; ++k) s += probs[k];
    return s;
}

/// The probability row of (batch b, head h, query slot q) of an attn_probs capture
/// [B, Hq, |P|, Tk]; returns the row and sets Tk.
inline const float* probs_row(const NamedTensor& probs, std::size_t b, std::size_t h, std::size_t q, std::size_t& Tk) {
    check<ShapeError>(probs.dimension() == 4, "[probs_row] expected an attn_probs capture [B, Hq, |P|, Tk]");
    const auto& s = probs.shape();
    check<ShapeError>(b < s[0] && h < s[1] && q < s[2], "[probs_row] (", b, ", ", h, ", ", q, ") out of [", s[0], ", ",
                      s[1], ", ", s[2], ", ", s[3], "]");
    Tk = s[3];
    return probs.data() + ((b * s[1] + h) * s[2] + q) * s[3];
}

/// Reader attention split (§A.5): mass on the target entry, on the other entries, on position 0
/// (the sink), and the rest.
struct AttentionSplit {
    double target = 0.0, others = 0.0, first = 0.0, rest = 0.0;
};
inline AttentionSplit attention_split(const float* probs, std::size_t Tk, const std::vector<Span>& entries,
                                      std::size_t target) {
    check<ShapeError>(target < entries.size(), "[attention_split] target entry ", target, " of ", entries.size());
    // Overlapping entries counted their keys twice (rest came out negative).
    for (std::size_t i = 0; i < entries.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            check<ShapeError>(entries[i].second <= entries[j].first || entries[j].second <= entries[i].first ||
                                  entries[i].first == entries[i].second || entries[j].first == entries[j].second,
                              "[attention_split] entries ", j, " [", entries[j].first, ", ", entries[j].second, ") and ", i,
                              " [", entries[i].first, ", ", entries[i].second, ") overlap");
    AttentionSplit a;
    for (std::size_t j = 0; j < entries.size(); ++j)
        (j == target ? a.target : a.others) += attention_mass(probs, Tk, entries[j]);
    a.first = Tk > 0 ? probs[0] : 0.0;
    a.rest = 1.0 - a.target - a.others - a.first;
    return a;
}

/// q.k selectivity at one reader head (§A.5): s_j = log(max(mass on entry j, 1e-30));
/// selectivity = s_target - mean_{j != target} s_j, margin = s_target - max_{j != target} s_j,
/// top1 = [s_target > max_{j != target} s_j].
struct Selectivity {
    double selectivity = 0.0, margin = 0.0;
    bool top1 = false;
};
inline Selectivity qk_selectivity(const float* probs, std::size_t Tk, const std::vector<Span>& entries,
                                  std::size_t target) {
    check<ShapeError>(entries.size() >= 2 && target < entries.size(), "[qk_selectivity] need the target among >= 2 entries");
    std::vector<double> s(entries.size());
    for (std::size_t j = 0; j < entries.size(); ++j) s[j] = std::log(std::max(attention_mass(probs, Tk, entries[j]), 1e-30));
    double mean = 0.0, mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < s.size(); ++j)
        if (j != target) {
            mean += s[j];
            mx = std::max(mx, s[j]);
        }
    mean /= static_cast<double>(s.size() - 1);
    return {s[target] - mean, s[target] - mx, s[target] > mx};
}

/// Candidate margin (exp34): logit(answer) minus the mean logit of the other candidates, of a
/// logits row of V.
inline double candidate_margin(const float* row, std::size_t V, std::int64_t answer,
                               const std::vector<std::int64_t>& candidates) {
    check_vocab_id(answer, V, "candidate_margin");
    for (std::int64_t c : candidates) check_vocab_id(c, V, "candidate_margin");
    double sum = 0.0;
    std::size_t n = 0;
    for (std::int64_t c : candidates)
        if (c != answer) {
            sum += row[c];
            ++n;
        }
    check<ShapeError>(n > 0, "[candidate_margin] no other candidates");
    return static_cast<double>(row[answer]) - sum / static_cast<double>(n);
}

/// Effective rank of a matrix [rows, cols] (Part XXII): exp(entropy(sigma / sum sigma)), and
/// the share of the largest singular value sigma_1^2 / sum sigma^2. Singular values come from
/// the eigenvalues of M^T M in float64.
struct EffectiveRank {
    double erank = 0.0, top_share = 0.0;
};
inline EffectiveRank effective_rank(const float* m, std::size_t rows, std::size_t cols) {
    for (std::size_t i = 0; i < rows * cols; ++i)  // LAPACK said only "(bad argument)"
        check<ShapeError>(std::isfinite(m[i]), "[effective_rank] row ", i / cols, " column ", i % cols, " is ", m[i],
                          ": the rank needs finite values");
    std::vector<double> G(cols * cols, 0.0), L;
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t a = 0; a < cols; ++a)
            for (std::size_t b = 0; b < cols; ++b) G[a * cols + b] += static_cast<double>(m[r * cols + a]) * m[r * cols + b];
    detail::symmetric_eigen(G, cols, L);
    double sum = 0.0, sum2 = 0.0, top = 0.0;
    std::vector<double> sv;
    for (double l : L) {
        const double s = std::sqrt(std::max(l, 0.0));
        sv.push_back(s);
        sum += s;
        sum2 += s * s;
        top = std::max(top, s);
    }
    EffectiveRank e;
    if (sum <= 0.0) return e;
    double H = 0.0;
    for (double s : sv)
        if (s > 0.0) H -= (s / sum) * std::log(s / sum);
    e.erank = std::exp(H);
    e.top_share = top * top / sum2;
    return e;
}

/// Logit lens (§A.5, §C.4): unembed(final_norm(resid_post(l)[pos])) for each listed layer,
/// from one forward of `ids`; returns [B, |P|, V] per layer (same order as `layers`).
template <class Model>
std::vector<Tensor3> logit_lens(const Model& model, const TokenBatch& ids, const std::vector<LayerIndex>& layers,
                                const Positions& positions = Positions::last()) {
    check_distinct_layers(layers, "logit_lens");  // else the capture's message, of a site never listed
    std::vector<SiteRef> sites;
    for (LayerIndex l : layers) sites.push_back(site::resid_post(l, positions));
    const NamedTensors c = capture(model, ids, sites);
    std::vector<Tensor3> out;
    for (const SiteRef& s : sites) {
        const NamedTensor& t = c.at(s.name());
        out.push_back(model.head(t.data(), t.shape()[0], t.shape()[1]));
    }
    return out;
}

/// Attention probabilities per head of layer l from one forward: [B, Hq, |P|, Tk] (P = the
/// query positions).
template <class Model>
NamedTensor attention_probs(const Model& model, const TokenBatch& ids, LayerIndex l,
                            const Positions& positions = Positions::last()) {
    const SiteRef s = site::attn_probs(l, positions);
    return capture(model, ids, {s}).at(s.name());
}

}  // namespace hylens
