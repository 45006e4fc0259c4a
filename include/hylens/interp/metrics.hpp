#pragma once
// Per-item scores of the circuit studies (protocols.md §A.5) and their summaries, built on the
// readouts of interp/lens.hpp (D, argmax, attention mass). Each study writes the per-item
// scores as records; every summary here is a plain function of them (and the bootstrap
// intervals of the statistics module are computed from the same records).
//
//   clean/corrupted pair:  D = logit(clean answer) - logit(corrupted answer) on each prompt;
//                          gap = mean D(clean) - D(corrupted) with its SEM; acc = share of the
//                          2n prompts whose argmax over the vocabulary is the prompt's own
//                          answer; cacc = the same with the argmax over the dictionary's values.
//   donor/host transplant: ansA / ansB = argmax is the donor's / host's value; dAB = logit(vA) -
//                          logit(vB); attA / attB = the reader head's probability from the final
//                          position summed over entry A / entry B.
//   language modelling:    per-token NLL by log-softmax in float64 (nll[t] = -log p(ids[t+1] |
//                          ids[0..t]) from logits row t); perplexity = exp(mean NLL over all
//                          tokens of all sequences).
// All logits are float32 and are read at one position; reductions run in float64.

#include <algorithm>  // std::max_element
#include <cmath>      // std::exp, std::log, std::nan
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <limits>     // std::numeric_limits
#include <vector>     // std::vector

#include "../core/error.hpp"
#include "../core/tensor.hpp"
#include "../stack/tokens.hpp"
#include "lens.hpp"

namespace hylens {

/// log-softmax of one logit row [V] in float64: z - max - log(sum exp(z - max)).
inline std::vector<double> log_softmax(const float* row, std::size_t V) {
    check<ShapeError>(V > 0, "[log_softmax] empty row");
    const double mx = *std::max_element(row, row + V);
    check<ShapeError>(std::isfinite(mx), "[log_softmax] the row's largest logit is not finite (", mx, ")");
    double s = 0.0;
    for (std::size_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(row[v]) - mx);
    const double lse = mx + std::log(s);
    std::vector<double> out(V);
    for (std::size_t v = 0; v < V; ++v) out[v] = static_cast<double>(row[v]) - lse;
    return out;
}

/// Per-token NLL of sequence b of `ids` under `logits` [B, T, V] of the same run: T - 1 values,
/// nll[t] = -log_softmax(logits[b, t])[ids[b, t + 1]].
inline std::vector<double> token_nll(const Tensor3& logits, const TokenBatch& ids, std::size_t b = 0) {
    const std::size_t B = logits.shape()[0], T = logits.shape()[1], V = logits.shape()[2];
    check<ShapeError>(ids.batch == B && ids.T() == T && b < B, "[token_nll] logits [", B, ", ", T, ", ", V,
                      "] do not belong to ids [", ids.batch, ", ", ids.T(), "] (sequence ", b, ")");
    std::vector<double> nll;
    for (std::size_t t = 0; t + 1 < T; ++t) {
        const std::int64_t next = ids.at(b, t + 1);
        check<ShapeError>(next >= 0 && static_cast<std::size_t>(next) < V, "[token_nll] token ", next, " at position ",
                          t + 1, " is outside the vocabulary of ", V);
        nll.push_back(-log_softmax(logits_row(logits, b, static_cast<long>(t)), V)[static_cast<std::size_t>(next)]);
    }
    return nll;
}

struct Perplexity {
    double mean_nll = std::numeric_limits<double>::quiet_NaN();
    double ppl = std::numeric_limits<double>::quiet_NaN();
    std::size_t tokens = 0;
};
/// exp(mean NLL) over every token of every sequence (the sequences pooled, not averaged).
inline Perplexity perplexity(const std::vector<std::vector<double>>& nll_per_sequence) {
    Perplexity p;
    double s = 0.0;
    for (const auto& seq : nll_per_sequence)
        for (double x : seq) {
            s += x;
            ++p.tokens;
        }
    if (p.tokens == 0) return p;
    p.mean_nll = s / static_cast<double>(p.tokens);
    p.ppl = std::exp(p.mean_nll);
    return p;
}

/// The scores of one clean/corrupted pair, read from the final-position logit rows.
struct PairScore {
    double d_clean = 0.0, d_corrupt = 0.0;          ///< D on each prompt (clean answer minus corrupted answer)
    bool acc_clean = false, acc_corrupt = false;    ///< argmax over the vocabulary = the prompt's own answer
    bool cacc_clean = false, cacc_corrupt = false;  ///< argmax over `choices` = the prompt's own answer
    double gap() const noexcept { return d_clean - d_corrupt; }
};
inline PairScore score_pair(const float* clean_row, const float* corrupt_row, std::size_t V, std::int64_t answer,
                            std::int64_t corrupt_answer, const std::vector<std::int64_t>& choices) {
    PairScore s;  // logit_diff checks both ids (check_vocab_id) before any row is read
    s.d_clean = logit_diff(clean_row, V, answer, corrupt_answer);
    s.d_corrupt = logit_diff(corrupt_row, V, answer, corrupt_answer);
    s.acc_clean = argmax(clean_row, V) == answer;
    s.acc_corrupt = argmax(corrupt_row, V) == corrupt_answer;
    s.cacc_clean = argmax_among(clean_row, V, choices) == answer;
    s.cacc_corrupt = argmax_among(corrupt_row, V, choices) == corrupt_answer;
    return s;
}

struct PairSummary {
    MeanSem gap;      ///< mean D(clean) - D(corrupted) over items, SEM = std / sqrt(n)
    double acc = 0.0;   ///< over the 2n prompts
    double cacc = 0.0;  ///< over the 2n prompts
    std::size_t n = 0;  ///< items
};
/// The summary of `items`; every mean is NaN for no items.
inline PairSummary summarize_pairs(const std::vector<PairScore>& items) {
    PairSummary s;
    s.n = items.size();
    s.gap = mean_sem({});
    if (items.empty()) {
        s.acc = s.cacc = std::numeric_limits<double>::quiet_NaN();
        return s;
    }
    std::vector<double> g;
    for (const PairScore& p : items) {
        g.push_back(p.gap());
        s.acc += static_cast<double>(p.acc_clean) + static_cast<double>(p.acc_corrupt);
        s.cacc += static_cast<double>(p.cacc_clean) + static_cast<double>(p.cacc_corrupt);
    }
    s.gap = mean_sem(g);
    s.acc /= 2.0 * static_cast<double>(items.size());
    s.cacc /= 2.0 * static_cast<double>(items.size());
    return s;
}

/// The half-open span [first, last + 1) of a run of consecutive token positions (an entry).
inline Span contiguous_span(const std::vector<std::size_t>& positions) {
    check<ShapeError>(!positions.empty(), "[contiguous_span] no positions");
    for (std::size_t i = 1; i < positions.size(); ++i)
        check<ShapeError>(positions[i] == positions[i - 1] + 1, "[contiguous_span] positions ", positions[i - 1], " and ",
                          positions[i], " are not consecutive");
    return {positions.front(), positions.back() + 1};
}

/// The scores of one donor/host item (the host run, possibly transplanted).
struct TransplantScore {
    bool ansA = false, ansB = false;
    double dAB = 0.0;
    double attA = std::numeric_limits<double>::quiet_NaN();  ///< NaN when no reader row was given
    double attB = std::numeric_limits<double>::quiet_NaN();
};
/// `row` [V]: the host's final-position logits; `probs` [Tk] (optional): the reader head's
/// probability row from the final position, `entry_a` / `entry_b` the entries' token spans.
inline TransplantScore score_transplant(const float* row, std::size_t V, std::int64_t value_a, std::int64_t value_b,
                                        const float* probs = nullptr, std::size_t Tk = 0, Span entry_a = {},
                                        Span entry_b = {}) {
    for (std::int64_t id : {value_a, value_b}) check_vocab_id(id, V, "score_transplant");
    TransplantScore s;
    const std::int64_t top = argmax(row, V);
    s.ansA = top == value_a;
    s.ansB = top == value_b;
    s.dAB = logit_diff(row, V, value_a, value_b);
    if (probs) {
        s.attA = attention_mass(probs, Tk, entry_a);
        s.attB = attention_mass(probs, Tk, entry_b);
    }
    return s;
}

struct TransplantSummary {
    double ansA = 0.0, ansB = 0.0;
    MeanSem dAB, attA, attB;  ///< attA / attB over the items that have a reader row (NaN: none has)
    std::size_t n = 0;
};
/// The summary of `items`; every mean is NaN for no items.
inline TransplantSummary summarize_transplants(const std::vector<TransplantScore>& items) {
    TransplantSummary s;
    s.n = items.size();
    if (items.empty()) {
        s.ansA = s.ansB = std::numeric_limits<double>::quiet_NaN();
        s.dAB = s.attA = s.attB = mean_sem({});
        return s;
    }
    std::vector<double> d, a, b;
    for (const TransplantScore& t : items) {
        s.ansA += static_cast<double>(t.ansA);
        s.ansB += static_cast<double>(t.ansB);
        d.push_back(t.dAB);
        if (!std::isnan(t.attA)) a.push_back(t.attA);
        if (!std::isnan(t.attB)) b.push_back(t.attB);
    }
    s.ansA /= static_cast<double>(items.size());
    s.ansB /= static_cast<double>(items.size());
    s.dAB = mean_sem(d);
    s.attA = mean_sem(a);
    s.attB = mean_sem(b);
    return s;
}

/// Transplant scores over donor/host items from their final-position rows: ansA / ansB = share
/// of argmax == the donor's / host's value, dAB = mean logit(vA) - logit(vB) with its SEM; the
/// summary of score_transplant per row.
struct TransplantScores {
    double ansA = 0.0, ansB = 0.0;
    MeanSem dAB;
};
inline TransplantScores transplant_scores(const std::vector<const float*>& rows, std::size_t V,
                                          const std::vector<std::int64_t>& value_a,
                                          const std::vector<std::int64_t>& value_b) {
    check<ShapeError>(rows.size() == value_a.size() && rows.size() == value_b.size() && !rows.empty(),
                      "[transplant_scores] ", rows.size(), " rows for ", value_a.size(), " / ", value_b.size(),
                      " values");
    std::vector<TransplantScore> items;
    for (std::size_t i = 0; i < rows.size(); ++i) items.push_back(score_transplant(rows[i], V, value_a[i], value_b[i]));
    const TransplantSummary s = summarize_transplants(items);
    return {s.ansA, s.ansB, s.dAB};
}

}  // namespace hylens
