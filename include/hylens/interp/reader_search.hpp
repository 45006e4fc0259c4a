#pragma once
// Reader search (protocols.md §A.7, battery step B4) and the block-role scans of §A.6
// (B1 baseline, B2 block removal, B3 single-layer removal, B5 value-head removal, B6 q.k
// selectivity 2x2), on clean / corrupted items. Everything is run() with interventions; the
// metrics come from interp/lens.hpp.

#include <algorithm>  // std::stable_sort, std::min, std::max
#include <array>      // std::array
#include <cstddef>    // std::size_t
#include <limits>     // std::numeric_limits
#include <cstdint>    // std::int64_t
#include <string>     // std::string
#include <vector>     // std::vector

#include "../core/error.hpp"
#include "../stack/tokens.hpp"
#include "interventions.hpp"
#include "lens.hpp"
#include "metrics.hpp"  // score_pair, summarize_pairs
#include "run.hpp"
#include "sites.hpp"
#include "transplant.hpp"

namespace hylens {

/// One clean / corrupted pair (§A.4.4): the answer of the clean prompt and of the corrupted
/// one, and the entry spans of the clean prompt with the target among them.
struct PairItem {
    std::vector<std::int64_t> clean, corrupt;
    std::int64_t answer = 0, other = 0;  ///< D = logit(answer) - logit(other)
    std::vector<Span> entries{};         ///< entry spans (positions) of the clean prompt
    std::size_t target = 0;              ///< index of the queried entry in `entries`
};

/// acc (argmax over the vocabulary equals each prompt's own answer; clean and corrupted both
/// count, so 2n rows) and gap (mean D(clean) - D(corrupted)).
struct PairScores {
    double acc = 0.0;
    MeanSem gap;
};

/// Scores the items under a list of interventions (applied to clean and corrupted runs alike):
/// the summary of score_pair per item (choices: the two answers).
template <class Model>
PairScores score_pairs(const Model& model, const std::vector<PairItem>& items,
                       const std::vector<Intervention>& interventions = {}) {
    check<ShapeError>(!items.empty(), "[score_pairs] no items");
    const std::size_t V = model.config().vocab;
    std::vector<PairScore> scores;
    RunOptions o;
    o.last_only = true;
    for (const PairItem& it : items) {
        const Tensor3 c = run(model, TokenBatch(it.clean), interventions, o).logits;
        const Tensor3 k = run(model, TokenBatch(it.corrupt), interventions, o).logits;
        scores.push_back(score_pair(logits_row(c), logits_row(k), V, it.answer, it.other, {it.answer, it.other}));
    }
    const PairSummary s = summarize_pairs(scores);
    return {s.acc, s.gap};
}

struct HeadCandidate {
    LayerIndex layer = no_layer;
    std::size_t head = 0;
    double target_mass = 0.0;  ///< mean attention from the final position on the target entry
    double other_mass = 0.0;   ///< ... on the other entries
    double first_mass = 0.0;   ///< ... on position 0
    /// Gap with the head removed; NaN (null in circuit.json) for a head that was not scanned
    /// (reader_search scans the top candidates only).
    double gap_removed = std::numeric_limits<double>::quiet_NaN();
};

struct ReaderSearch {
    std::vector<HeadCandidate> ranked;  ///< every (layer, head), by target mass, descending
    HeadCandidate reader;               ///< the top candidate with the lowest gap once removed
    PairScores baseline;
};

/// §A.7: rank every softmax head by its attention from the final position on the target entry
/// (mean over clean prompts), remove each of the `top` best (zero its o_proj input slice at
/// every position, clean and corrupted) and pick the one whose removal lowers the gap most.
template <class Model>
ReaderSearch reader_search(const Model& model, const std::vector<PairItem>& items, std::size_t top = 8) {
    check<ShapeError>(!items.empty(), "[reader_search] no items");
    check<ShapeError>(top >= 1, "[reader_search] top = 0: no candidate head would be removed and scored");
    ReaderSearch rs;
    rs.baseline = score_pairs(model, items);
    const std::vector<LayerIndex> layers = attention_layers(model.stack());
    check<ShapeError>(!layers.empty(), "[reader_search] the model has no softmax attention layer");
    std::vector<SiteRef> sites;
    for (LayerIndex l : layers) sites.push_back(site::attn_probs(l, Positions::last()));
    std::vector<HeadCandidate> cand;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const PairItem& it = items[i];
        check<ShapeError>(it.target < it.entries.size(), "[reader_search] item ", i, ": target entry ", it.target,
                          " of ", it.entries.size());
        const NamedTensors c = capture(model, TokenBatch(it.clean), sites);
        std::size_t k = 0;
        for (const SiteRef& s : sites) {
            const NamedTensor& p = c.at(s.name());
            for (std::size_t h = 0; h < p.shape()[1]; ++h, ++k) {
                if (i == 0) cand.push_back({s.layer, h, 0, 0, 0});
                std::size_t Tk = 0;
                const float* row = probs_row(p, 0, h, 0, Tk);
                const AttentionSplit a = attention_split(row, Tk, it.entries, it.target);
                cand[k].target_mass += a.target / static_cast<double>(items.size());
                cand[k].other_mass += a.others / static_cast<double>(items.size());
                cand[k].first_mass += a.first / static_cast<double>(items.size());
            }
        }
    }
    std::stable_sort(cand.begin(), cand.end(),
                     [](const HeadCandidate& a, const HeadCandidate& b) { return a.target_mass > b.target_mass; });
    const std::size_t n = std::min(top, cand.size());
    for (std::size_t i = 0; i < n; ++i)
        cand[i].gap_removed = score_pairs(model, items, {head_zero(cand[i].layer, {cand[i].head})}).gap.mean;
    rs.reader = cand[0];
    for (std::size_t i = 1; i < n; ++i)
        if (cand[i].gap_removed < rs.reader.gap_removed) rs.reader = cand[i];
    rs.ranked = std::move(cand);
    return rs;
}

/// A block (§A.6 `groups(size)`): the linear layers feeding one softmax layer.
struct LayerGroup {
    std::vector<LayerIndex> layers;
    LayerIndex softmax_layer = no_layer;
};

/// The group size (layer_groups) the studies take by default for a model type: 3 for Qwen3.5
/// (model types qwen3_5*: the protocol's blocks of three GatedDeltaNet layers before each softmax
/// layer), 0 otherwise (every linear layer since the previous softmax layer).
inline std::size_t default_group_size(const std::string& model_type) { return model_type.rfind("qwen3_5", 0) == 0 ? 3 : 0; }

/// groups(size): for each softmax layer s in order, size > 0 takes the linear layers in
/// [s - size, s); size = 0 takes every linear layer since the previous softmax layer. Linear
/// layers after the last softmax layer belong to no group.
template <class Stack>
std::vector<LayerGroup> layer_groups(const Stack& stack, std::size_t size) {
    std::vector<LayerGroup> out;
    LayerIndex next = 0;  // the first layer after the previous softmax layer
    for (LayerIndex s : attention_layers(stack)) {
        LayerGroup g;
        g.softmax_layer = s;
        const LayerIndex from = size > 0 ? (s > size ? s - size : 0) : next;
        for (LayerIndex l = from; l < s; ++l)
            if (find_mixer_site(stack, l, MixerChannel::recurrent)) g.layers.push_back(l);
        out.push_back(std::move(g));
        next = s + 1;
    }
    return out;
}

/// How a layer is removed (§A.6): its mixer output zeroed at every position (the MLP still
/// runs on the changed residual), or the whole layer outputting its input.
enum class RemovalUnit { mixer, layer };

template <class Stack>
std::vector<Intervention> removal(const Stack& stack, const std::vector<LayerIndex>& layers, RemovalUnit unit) {
    if (layers.empty()) return {};
    if (unit == RemovalUnit::layer) return {skip_layers(layers)};
    std::vector<Intervention> out;
    for (LayerIndex l : layers) {
        // A parallel layer's recurrent mixer is its ssm_out half; others use mixer_out.
        const auto s = find_mixer_site(stack, l, MixerChannel::recurrent);
        out.push_back(zero(s ? *s : Site::mixer_out, {l}));
    }
    return out;
}

/// B2 / B3: the scores with each group (or each single layer, as one-layer groups) removed.
template <class Model>
std::vector<PairScores> removal_scan(const Model& model, const std::vector<PairItem>& items,
                                     const std::vector<std::vector<LayerIndex>>& groups, RemovalUnit unit = RemovalUnit::mixer) {
    std::vector<PairScores> out;
    for (const auto& g : groups) out.push_back(score_pairs(model, items, removal(model.stack(), g, unit)));
    return out;
}

/// B5: the scores with each value head of recurrent layer l removed (zero its slice of the
/// out_proj input at every position).
template <class Model>
std::vector<PairScores> head_scan(const Model& model, const std::vector<PairItem>& items, LayerIndex l, std::size_t heads) {
    std::vector<PairScores> out;
    for (std::size_t h = 0; h < heads; ++h)
        out.push_back(score_pairs(model, items, {head_zero(l, {h}, Site::lin_head_out)}));
    return out;
}

/// Item means of q.k selectivity, margin and the top-1 rate.
struct SelectivityMean {
    double selectivity = 0.0, margin = 0.0, top1 = 0.0;
};

/// B6: q.k selectivity at a reader head with Q (final position) and K (all positions) of the
/// reader layer taken from the intact run or from a run with `removed` layers removed:
/// result[q_ablated][k_ablated], means over the items' clean prompts.
template <class Model>
std::array<std::array<SelectivityMean, 2>, 2> selectivity_2x2(const Model& model, const std::vector<PairItem>& items,
                                                          const std::vector<LayerIndex>& removed, LayerIndex reader_layer,
                                                          std::size_t reader_head, RemovalUnit unit = RemovalUnit::mixer) {
    check<ShapeError>(!items.empty(), "[selectivity_2x2] no items");
    check<ShapeError>(reader_head < attention_heads(model.stack(), reader_layer), "[selectivity_2x2] head ", reader_head,
                      " is not a head of layer ", reader_layer, " (", attention_heads(model.stack(), reader_layer),
                      " query heads)");
    std::array<std::array<SelectivityMean, 2>, 2> acc{};
    const std::vector<Intervention> rm = removal(model.stack(), removed, unit);
    for (const PairItem& it : items) {
        const TokenBatch ids(it.clean);
        const std::vector<SiteRef> qk{site::q(reader_layer, Positions::last()), site::k(reader_layer)};
        const NamedTensors intact = capture(model, ids, qk), ablated = capture(model, ids, qk, rm);
        for (int qa = 0; qa < 2; ++qa)
            for (int ka = 0; ka < 2; ++ka) {
                const std::vector<Intervention> iv{
                    proj_patch(reader_layer, Site::q, Positions::last(), to_vector((qa ? ablated : intact).at(qk[0].name()))),
                    proj_patch(reader_layer, Site::k, Positions::all(), to_vector((ka ? ablated : intact).at(qk[1].name())))};
                RunOptions o;
                o.capture = {site::attn_probs(reader_layer, Positions::last())};
                o.skip_logits = true;
                const RunResult r = run(model, ids, iv, o);
                std::size_t Tk = 0;
                const float* row = probs_row(r.captures.at(o.capture[0].name()), 0, reader_head, 0, Tk);
                const Selectivity s = qk_selectivity(row, Tk, it.entries, it.target);
                const double w = 1.0 / static_cast<double>(items.size());
                acc[qa][ka].selectivity += w * s.selectivity;
                acc[qa][ka].margin += w * s.margin;
                acc[qa][ka].top1 += w * (s.top1 ? 1.0 : 0.0);
            }
    }
    return acc;
}

}  // namespace hylens
