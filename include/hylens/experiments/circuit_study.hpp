#pragma once
// The circuit study (protocols.md §A.6-A.7, battery B1-B7; docs/study_circuit.md):
// identify_circuit's battery run item by item, one record per (item, condition) in
// items.jsonl through a StudyFolder (resume, shards, merge), and the roles (Encode, Address,
// reader head) computed from those records, so a merge of shard folders gives the circuit of
// the unsharded run.
//
// Conditions (record "condition"), each on the clean and the corrupted prompt of an item:
//   baseline              B1; also the attention split of every softmax head (B4 ranking, B7 intact)
//   group:G<i>            B2, group i removed; also the attention split of every head (B7)
//   layer:L<l>            B3, linear layer l removed
//   head:L<l>H<h>         B4, softmax head h of layer l removed (every head, so the reader rule
//                         can be applied to the pooled records of any set of shards)
//   vhead:L<l>H<h>        B5, value head h of the first linear layer l removed (its slice of the
//                         out_proj input zeroed at every position: head_zero at lin_head_out)
//   qk:L<s>G<g>           B6 at softmax layer s for each of its address candidates g: the q.k
//                         selectivity 2x2 of every head of layer s (clean prompt only)
// Every removal uses CircuitOptions::unit (the mixer output zeroed at every position, default).
//
// Roles (circuit_from_records): the rules of interp/circuit.hpp (critical_layers, pick_reader,
// address_candidates, pick_address) on item means of the records.
//
// Seeds (CircuitStudyOptions::seeds): each seed draws its own pairs; the roles and every mean
// pool the (seed, item) records, the intervals resample items within each seed, and the summaries
// give each seed's value and roles beside the pooled ones (circuit_file's per_seed, agreement).
// The roles and the summaries are computed over the items with a record of every condition
// (detail::CompleteItems): a merge of unfinished folders can hold part of an item.

#include <algorithm>   // std::none_of, std::stable_sort, std::min, std::sort, std::unique
#include <array>       // std::array
#include <chrono>      // std::chrono
#include <cmath>       // std::isnan
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem
#include <functional>  // std::function
#include <map>         // std::map
#include <optional>    // std::optional
#include <set>         // std::set
#include <string>      // std::string
#include <tuple>       // std::tuple
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../interp/circuit.hpp"
#include "../interp/metric_intervals.hpp"
#include "../stack/finite_check.hpp"
#include "../tasks/lookup/fit_corpus.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "../tasks/lookup/prompt.hpp"  // filler_text
#include "../tasks/lookup/vocabulary.hpp"
#include "../text/chat.hpp"
#include "../text/tokenizer.hpp"
#include "bootstrap.hpp"
#include "progress.hpp"
#include "study_folder.hpp"

namespace hylens::experiments {

struct CircuitStudyOptions : StudyRunOptions {
    std::string variant = "chat8";  ///< tasks::lookup::parse_variant
    /// The long variant's filler between the dictionary and the question (tasks::lookup::
    /// filler_text), required by it and refused otherwise; `filler_source` says where it came
    /// from (run.json's filler_source, outside the definition: copies of one text agree).
    std::string filler{}, filler_source{};
    std::size_t per_config = 20;    ///< draws per (target, distractor) configuration
    /// Data-generation seeds (distinct): each draws its own pairs, and the summaries pool them.
    std::vector<std::uint64_t> seeds{1};
    CircuitOptions circuit{};       ///< group_size, top, unit, critical
    BootstrapOptions bootstrap{};
};

/// The long variant's filler: the first `tokens` tokens of the held-out chunks of `corpus` (empty:
/// tasks::lookup's fit corpus, the Debian Policy Manual), and where it came from.
inline void set_long_filler(CircuitStudyOptions& o, const Tokenizer& tok, const std::filesystem::path& corpus,
                            std::size_t tokens) {
    namespace lk = tasks::lookup;
    const lk::FitCorpus c = corpus.empty() ? lk::read_fit_corpus() : lk::read_fit_corpus(corpus);
    o.filler = lk::filler_text(tok, lk::held_out_text(c), tokens);
    o.filler_source = std::filesystem::absolute(c.source).string() + " (held-out chunks, first " + std::to_string(tokens) +
                      " tokens)";
}

/// What the roles are computed over: the model's groups, linear and softmax layers (in the
/// study definition, so a merge needs no model).
struct CircuitStructure {
    std::vector<LayerGroup> groups;
    std::vector<LayerIndex> linear_layers, attention_layers;
};

template <class Stack>
CircuitStructure circuit_structure(const Stack& stack, std::size_t group_size) {
    CircuitStructure s;
    s.groups = layer_groups(stack, group_size);
    s.linear_layers = recurrent_layers(stack);
    s.attention_layers = attention_layers(stack);
    check<ShapeError>(!s.groups.empty() && !s.groups.front().layers.empty(),
                      "[circuit] the model has no group of linear layers before a softmax layer");
    return s;
}

inline nlohmann::json to_json(const CircuitStructure& s) {
    nlohmann::json g = nlohmann::json::array();
    for (const LayerGroup& lg : s.groups) g.push_back({{"layers", lg.layers}, {"softmax_layer", lg.softmax_layer}});
    return {{"groups", g}, {"linear_layers", s.linear_layers}, {"attention_layers", s.attention_layers}};
}

inline CircuitStructure circuit_structure_from_json(const nlohmann::json& j) {
    try {
        CircuitStructure s;
        for (const auto& g : j.at("groups"))
            s.groups.push_back({g.at("layers").get<std::vector<LayerIndex>>(), g.at("softmax_layer").get<LayerIndex>()});
        s.linear_layers = j.at("linear_layers").get<std::vector<LayerIndex>>();
        s.attention_layers = j.at("attention_layers").get<std::vector<LayerIndex>>();
        return s;
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[circuit] the study definition's 'structure' is malformed: ", e.what());
    }
}

namespace circuit_conditions {
inline std::string group(std::size_t g) { return "group:G" + std::to_string(g); }
inline std::string layer(LayerIndex l) { return "layer:L" + std::to_string(l); }
inline std::string head(LayerIndex l, std::size_t h) { return "head:L" + std::to_string(l) + "H" + std::to_string(h); }
inline std::string value_head(LayerIndex l, std::size_t h) { return "vhead:L" + std::to_string(l) + "H" + std::to_string(h); }
inline std::string qk(LayerIndex s, std::size_t g) { return "qk:L" + std::to_string(s) + "G" + std::to_string(g); }

/// The (softmax layer, group) pairs of the qk conditions: each softmax layer after a group of
/// linear layers, with each of its address candidates.
inline std::vector<std::pair<LayerIndex, std::size_t>> qk_pairs(const CircuitStructure& st) {
    std::vector<std::pair<LayerIndex, std::size_t>> r;
    for (LayerIndex s : st.attention_layers) {
        if (std::none_of(st.groups.begin(), st.groups.end(),
                         [&](const LayerGroup& g) { return g.softmax_layer <= s && !g.layers.empty(); }))
            continue;
        for (std::size_t g : address_candidates(st.groups, s)) r.push_back({s, g});
    }
    return r;
}

/// The conditions a circuit study of `definition` (its run.json "study") makes, as a test of a
/// name: what a merge checks a record against (it loads no model, so a head of a softmax layer
/// may be any head). Built once per merge; FormatError where the definition's structure is
/// malformed.
inline std::function<bool(const std::string&)> known(const nlohmann::json& definition) {
    const CircuitStructure st =
        circuit_structure_from_json(definition.is_object() && definition.contains("structure") ? definition["structure"]
                                                                                              : nlohmann::json());
    std::set<std::string> names{"baseline"};
    for (std::size_t g = 0; g < st.groups.size(); ++g) names.insert(group(g));
    for (LayerIndex l : st.linear_layers) names.insert(layer(l));
    for (const auto& [s, g] : qk_pairs(st)) names.insert(qk(s, g));
    const nlohmann::json v = definition.value("value_heads", nlohmann::json());
    if (v.is_object() && v.value("layer", nlohmann::json()).is_number_unsigned() &&
        v.value("heads", nlohmann::json()).is_number_unsigned())
        for (std::size_t h = 0; h < std::min<std::size_t>(v["heads"].get<std::size_t>(), 1u << 20); ++h)
            names.insert(value_head(v["layer"].get<LayerIndex>(), h));
    return [names, attention = st.attention_layers](const std::string& c) {
        if (names.count(c)) return true;
        for (LayerIndex l : attention) {  // head:L<l>H<h>, h any head written without leading zeros
            const std::string p = "head:L" + std::to_string(l) + "H";
            if (c.size() > p.size() && c.size() <= p.size() + 6 && c.compare(0, p.size(), p) == 0 &&
                c.find_first_not_of("0123456789", p.size()) == std::string::npos && c == head(l, std::stoul(c.substr(p.size()))))
                return true;
        }
        return false;
    };
}
}  // namespace circuit_conditions

/// The study-defining part of run.json.
inline nlohmann::json circuit_definition(const CircuitStudyOptions& o, const CircuitStructure& s) {
    nlohmann::json d = {{"variant", o.variant},
                        {"per_config", o.per_config},
                        {"seeds", o.seeds},
                        {"group_size", o.circuit.group_size},
                        {"top", o.circuit.top},
                        {"unit", o.circuit.unit == RemovalUnit::mixer ? "mixer" : "layer"},
                        {"critical", o.circuit.critical},
                        {"structure", to_json(s)}};
    // The filler is part of every prompt: a resume or a merge with other filler is another study
    // (compared by content; where it was read from is run.json's filler_source).
    if (!o.filler.empty()) d["filler"] = {{"chars", o.filler.size()}, {"fnv1a64", fnv1a64_hex(o.filler)}};
    return d;
}

namespace detail {

inline nlohmann::json pair_fields(const PairScore& s) {
    return {{"d_clean", s.d_clean},       {"d_corrupt", s.d_corrupt},     {"gap", s.gap()},
            {"acc_clean", s.acc_clean},   {"acc_corrupt", s.acc_corrupt}, {"cacc_clean", s.cacc_clean},
            {"cacc_corrupt", s.cacc_corrupt}};
}

inline PairScore pair_score_of(const nlohmann::json& r) {
    PairScore s;
    s.d_clean = r.at("d_clean").get<double>();
    s.d_corrupt = r.at("d_corrupt").get<double>();
    s.acc_clean = r.at("acc_clean").get<bool>();
    s.acc_corrupt = r.at("acc_corrupt").get<bool>();
    s.cacc_clean = r.at("cacc_clean").get<bool>();
    s.cacc_corrupt = r.at("cacc_corrupt").get<bool>();
    return s;
}

/// The attention split of every head of every softmax layer from a capture at the final position:
/// {"L<l>": {"target": [h...], "others": [...], "first": [...], "rest": [...]}}.
inline nlohmann::json attention_fields(const NamedTensors& cap, const std::vector<SiteRef>& sites,
                                       const std::vector<Span>& entries, std::size_t target) {
    nlohmann::json j = nlohmann::json::object();
    for (const SiteRef& s : sites) {
        const NamedTensor& p = cap.at(s.name());
        std::vector<double> t, o, f, r;
        for (std::size_t h = 0; h < p.shape()[1]; ++h) {
            std::size_t Tk = 0;
            const float* row = probs_row(p, 0, h, 0, Tk);
            const AttentionSplit a = attention_split(row, Tk, entries, target);
            t.push_back(a.target);
            o.push_back(a.others);
            f.push_back(a.first);
            r.push_back(a.rest);
        }
        j["L" + std::to_string(s.layer)] = {{"target", t}, {"others", o}, {"first", f}, {"rest", r}};
    }
    return j;
}

inline constexpr const char* kCellNames[2][2] = {{"intact", "k_ablated"}, {"q_ablated", "both_ablated"}};

/// One pair condition on an item: the scores of clean and corrupted prompt under `iv`, and the
/// attention split of every softmax head on the clean prompt when `attention` is set.
template <class Model>
nlohmann::json pair_condition(const Model& model, const PairItem& it, const std::vector<std::int64_t>& choices,
                              const std::vector<Intervention>& iv, const std::vector<SiteRef>* attention) {
    RunOptions o;
    o.last_only = true;
    if (attention) o.capture = *attention;
    const RunResult c = run(model, TokenBatch(it.clean), iv, o);
    o.capture.clear();
    const RunResult k = run(model, TokenBatch(it.corrupt), iv, o);
    const std::size_t V = model.config().vocab;
    nlohmann::json rec = pair_fields(score_pair(logits_row(c.logits), logits_row(k.logits), V, it.answer, it.other, choices));
    if (attention) rec["attention"] = attention_fields(c.captures, *attention, it.entries, it.target);
    return rec;
}

/// B6 at softmax layer `s` with group `removed` ablated: the 2x2 cells for every head of s.
template <class Model>
nlohmann::json qk_condition(const Model& model, const PairItem& it, const std::vector<LayerIndex>& removed, LayerIndex s, RemovalUnit unit) {
    const TokenBatch ids(it.clean);
    const std::vector<SiteRef> qk{site::q(s, Positions::last()), site::k(s)};
    const NamedTensors intact = capture(model, ids, qk), ablated = capture(model, ids, qk, removal(model.stack(), removed, unit));
    nlohmann::json cells = nlohmann::json::object();
    for (int qa = 0; qa < 2; ++qa)
        for (int ka = 0; ka < 2; ++ka) {
            const std::vector<Intervention> iv{
                proj_patch(s, Site::q, Positions::last(), to_vector((qa ? ablated : intact).at(qk[0].name()))),
                proj_patch(s, Site::k, Positions::all(), to_vector((ka ? ablated : intact).at(qk[1].name())))};
            RunOptions o;
            o.capture = {site::attn_probs(s, Positions::last())};
            o.skip_logits = true;
            const RunResult r = run(model, ids, iv, o);
            const NamedTensor& p = r.captures.at(o.capture[0].name());
            std::vector<double> sel, margin;
            std::vector<bool> top1;
            for (std::size_t h = 0; h < p.shape()[1]; ++h) {
                std::size_t Tk = 0;
                const float* row = probs_row(p, 0, h, 0, Tk);  // sets Tk
                const Selectivity q = qk_selectivity(row, Tk, it.entries, it.target);
                sel.push_back(q.selectivity);
                margin.push_back(q.margin);
                top1.push_back(q.top1);
            }
            cells[kCellNames[qa][ka]] = {{"selectivity", sel}, {"margin", margin}, {"top1", top1}};
        }
    return {{"cells", cells}};
}

/// Records of one condition, item order.
inline std::vector<const nlohmann::json*> of_condition(const std::vector<nlohmann::json>& records, const std::string& c) {
    std::vector<const nlohmann::json*> out;
    for (const auto& r : records)
        if (r.at("condition").get<std::string>() == c) out.push_back(&r);
    return out;
}

inline std::vector<PairScore> pair_scores(const std::vector<nlohmann::json>& records, const std::string& c) {
    std::vector<PairScore> out;
    for (const nlohmann::json* r : of_condition(records, c)) out.push_back(pair_score_of(*r));
    return out;
}

/// The pair scores of condition c grouped by seed, in seed order (seeds without such a record
/// left out), with the seeds.
inline std::pair<std::vector<std::uint64_t>, std::vector<std::vector<PairScore>>> pair_scores_by_seed(
    const std::vector<nlohmann::json>& records, const std::string& c) {
    std::map<std::uint64_t, std::vector<PairScore>> by;
    for (const nlohmann::json* r : of_condition(records, c)) by[r->at("seed").get<std::uint64_t>()].push_back(pair_score_of(*r));
    std::pair<std::vector<std::uint64_t>, std::vector<std::vector<PairScore>>> out;
    for (auto& [seed, scores] : by) {
        out.first.push_back(seed);
        out.second.push_back(std::move(scores));
    }
    return out;
}

/// The records of the items (task, seed, item) that hold a record of every condition found in
/// the records, which the roles and the summaries are computed over, and how many items fell
/// short. Every item's records are appended in one write, so part of an item is left only by an
/// interrupted write (a resume drops the torn line and rewrites the item's missing records; a run
/// stopped again before it did leaves the part) or an edited folder; a merge can then hold it.
/// Keeps a pointer to `records`, which must outlive it; copies nothing when no item falls short.
class CompleteItems {
public:
    explicit CompleteItems(const std::vector<nlohmann::json>& records) : all_(&records) {
        std::map<std::tuple<std::string, std::uint64_t, std::uint64_t>, std::size_t> count;
        std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> keys;
        keys.reserve(records.size());
        for (const nlohmann::json& r : records) {
            const std::string c = r.at("condition").get<std::string>();
            const std::uint64_t seed = r.at("seed").get<std::uint64_t>();
            conditions_.insert(c);
            present_[seed].insert(c);
            keys.emplace_back(r.at("task").get<std::string>(), seed, r.at("item").get<std::uint64_t>());
            ++count[keys.back()];  // record keys are unique (StudyFolder refuses a record written twice)
        }
        for (const auto& [key, n] : count) left_out_ += n != conditions_.size();
        if (left_out_ == 0) return;
        for (std::size_t i = 0; i < records.size(); ++i)
            if (count.at(keys[i]) == conditions_.size()) kept_.push_back(records[i]);
    }
    const std::vector<nlohmann::json>& records() const noexcept { return left_out_ ? kept_ : *all_; }
    std::size_t left_out() const noexcept { return left_out_; }
    /// Every seed with a record, ascending (with or without a complete item).
    std::vector<std::uint64_t> seeds() const {
        std::vector<std::uint64_t> out;
        for (const auto& [seed, c] : present_) out.push_back(seed);
        return out;
    }
    /// " (no record of condition 'a')" / " (no record of conditions 'a', 'b')" for the conditions
    /// found in the records that no record of `seed` has; "" when it has every one.
    std::string missing_of(std::uint64_t seed) const {
        const auto held = present_.find(seed);
        if (held == present_.end()) return " (no record of the seed)";
        std::string names;
        std::size_t n = 0;
        for (const std::string& c : conditions_)
            if (!held->second.count(c)) names += (n++ ? ", '" : "'") + c + "'";
        return n == 0 ? std::string() : " (no record of condition" + std::string(n > 1 ? "s " : " ") + names + ")";
    }

private:
    const std::vector<nlohmann::json>* all_;
    std::vector<nlohmann::json> kept_;
    std::set<std::string> conditions_;
    std::map<std::uint64_t, std::set<std::string>> present_;
    std::size_t left_out_ = 0;
};

/// The records of each seed, in seed order (record order within a seed).
inline std::map<std::uint64_t, std::vector<nlohmann::json>> records_by_seed(const std::vector<nlohmann::json>& records) {
    std::map<std::uint64_t, std::vector<nlohmann::json>> by;
    for (const nlohmann::json& r : records) by[r.at("seed").get<std::uint64_t>()].push_back(r);
    return by;
}

inline PairScores pair_summary(const std::vector<nlohmann::json>& records, const std::string& c) {
    const std::vector<PairScore> s = pair_scores(records, c);
    check<FormatError>(!s.empty(), "[circuit] no record of condition '", c, "'");
    const PairSummary p = summarize_pairs(s);
    return {p.acc, p.gap};
}

/// Item mean of records[i]["attention"]["L<l>"][field][h].
inline double attention_mean(const std::vector<nlohmann::json>& records, const std::string& c, LayerIndex l, std::size_t h,
                             const char* field) {
    const auto rs = of_condition(records, c);
    double s = 0.0;
    for (const nlohmann::json* r : rs) s += r->at("attention").at("L" + std::to_string(l)).at(field).at(h).get<double>();
    return rs.empty() ? 0.0 : s / static_cast<double>(rs.size());
}

/// The (layer, head) of the B5 records, in head order.
inline std::vector<std::pair<LayerIndex, std::size_t>> value_heads(const std::vector<nlohmann::json>& records) {
    std::vector<std::pair<LayerIndex, std::size_t>> out;
    for (const nlohmann::json& r : records)
        if (r.contains("value_head")) out.push_back({r.at("layer").get<LayerIndex>(), r.at("value_head").get<std::size_t>()});
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

inline std::size_t heads_of(const std::vector<nlohmann::json>& records, LayerIndex l) {
    const auto rs = of_condition(records, "baseline");
    check<FormatError>(!rs.empty(), "[circuit] no baseline record");
    return rs.front()->at("attention").at("L" + std::to_string(l)).at("target").size();
}

}  // namespace detail

/// The circuit of the records (the rules of interp/circuit.hpp on item means).
inline Circuit circuit_from_records(const std::vector<nlohmann::json>& records, const CircuitStructure& s,
                                    const CircuitOptions& opt) {
    namespace cc = circuit_conditions;
    Circuit c;
    c.groups = s.groups;
    c.linear_layers = s.linear_layers;
    c.baseline = detail::pair_summary(records, "baseline");
    for (std::size_t g = 0; g < s.groups.size(); ++g) c.group_removed.push_back(detail::pair_summary(records, cc::group(g)));
    for (LayerIndex l : s.linear_layers) c.layer_removed.push_back(detail::pair_summary(records, cc::layer(l)));
    c.critical_layers = critical_layers(c.baseline, c.linear_layers, c.layer_removed, opt.critical);
    // B4: every head ranked by mean target mass (stable: layer, head order on ties).
    std::vector<HeadCandidate> cand;
    for (LayerIndex l : s.attention_layers)
        for (std::size_t h = 0; h < detail::heads_of(records, l); ++h)
            cand.push_back({l, h, detail::attention_mean(records, "baseline", l, h, "target"),
                            detail::attention_mean(records, "baseline", l, h, "others"),
                            detail::attention_mean(records, "baseline", l, h, "first")});
    std::stable_sort(cand.begin(), cand.end(),
                     [](const HeadCandidate& a, const HeadCandidate& b) { return a.target_mass > b.target_mass; });
    for (HeadCandidate& h : cand)  // every head is scanned (a made-up 0 below the top read as "removal destroys it")
        h.gap_removed = detail::pair_summary(records, cc::head(h.layer, h.head)).gap.mean;
    c.reader.baseline = c.baseline;
    c.reader.reader = pick_reader(cand, opt.top);
    c.reader.ranked = std::move(cand);
    // B6 at the reader.
    const LayerIndex rl = c.reader.reader.layer;
    const std::size_t rh = c.reader.reader.head;
    c.address_candidates = address_candidates(c.groups, rl);
    for (std::size_t g : c.address_candidates) {
        const auto rs = detail::of_condition(records, cc::qk(rl, g));
        check<FormatError>(!rs.empty(), "[circuit] no record of condition '", cc::qk(rl, g), "', which the reader L", rl, "H", rh,
                           " of the records needs: no item has it (a run stopped before its items' last records; resume it)");
        std::array<std::array<SelectivityMean, 2>, 2> t{};
        const double w = 1.0 / static_cast<double>(rs.size());
        for (const nlohmann::json* r : rs)
            for (int q = 0; q < 2; ++q)
                for (int k = 0; k < 2; ++k) {
                    const nlohmann::json& cell = r->at("cells").at(detail::kCellNames[q][k]);
                    t[q][k].selectivity += w * cell.at("selectivity").at(rh).get<double>();
                    t[q][k].margin += w * cell.at("margin").at(rh).get<double>();
                    t[q][k].top1 += w * (cell.at("top1").at(rh).get<bool>() ? 1.0 : 0.0);
                }
        c.selectivity.push_back(t);
    }
    c.address = pick_address(c.address_candidates, c.selectivity);
    c.encode = 0;
    return c;
}

namespace detail {

/// The circuit file of the records taken as one pool: to_json(circuit_from_records) plus the
/// reader's attention split (B7), intact and with each address candidate removed, the value
/// heads (B5) and the item count.
inline nlohmann::json pooled_circuit_file(const std::vector<nlohmann::json>& records, const CircuitStructure& s,
                                          const CircuitOptions& opt) {
    const Circuit c = circuit_from_records(records, s, opt);
    nlohmann::json j = to_json(c);
    const LayerIndex rl = c.reader.reader.layer;
    const std::size_t rh = c.reader.reader.head;
    const auto split = [&](const std::string& cond) {
        nlohmann::json o;
        for (const char* f : {"target", "others", "first", "rest"}) o[f] = detail::attention_mean(records, cond, rl, rh, f);
        return o;
    };
    j["attention_split"] = {{"intact", split("baseline")}};
    for (std::size_t g : c.address_candidates)
        j["attention_split"][circuit_conditions::group(g)] = split(circuit_conditions::group(g));
    // B5: each value head's removal, and whether it is a single-head point of failure (B3's rule:
    // the gap falls below `critical` x the baseline gap). Absent from folders without B5 records.
    const std::vector<std::pair<LayerIndex, std::size_t>> vh = detail::value_heads(records);
    if (!vh.empty()) {
        nlohmann::json heads = nlohmann::json::array();
        for (const auto& [l, h] : vh) {
            const PairScores p = detail::pair_summary(records, circuit_conditions::value_head(l, h));
            heads.push_back({{"head", h},
                             {"removed", hylens::detail::scores_json(p)},
                             {"point_of_failure", c.baseline.gap.mean > 0.0 && p.gap.mean < opt.critical * c.baseline.gap.mean}});
        }
        j["value_heads"] = {{"layer", vh.front().first}, {"heads", heads}};
    }
    j["items"] = c.baseline.gap.n;
    return j;
}

/// The roles of a circuit file (what per_seed lists): encode, address, reader, critical layers,
/// the value heads that are single-head points of failure, and the item count.
inline nlohmann::json circuit_roles(const nlohmann::json& c) {
    nlohmann::json failures = nlohmann::json::array();
    if (c.contains("value_heads"))
        for (const nlohmann::json& h : c["value_heads"]["heads"])
            if (h.at("point_of_failure").get<bool>()) failures.push_back(h.at("head"));
    return {{"encode", c.at("encode")},     {"address", c.at("address")},
            {"reader", c.at("reader")},     {"critical_layers", c.at("critical_layers")},
            {"value_head_failures", failures}, {"items", c.at("items")}};
}

}  // namespace detail

namespace detail {

/// circuit_file over the complete items of the records (CompleteItems), per seed over
/// `defined_seeds` (the study's) and every seed with a record: a seed of the study without any
/// record (a merge of unfinished shards) is one without roles, where it went missing from
/// `seeds` and the agreement read as a study of fewer seeds.
inline nlohmann::json circuit_file_of(const CompleteItems& complete, const CircuitStructure& s, const CircuitOptions& opt,
                                      const std::vector<std::uint64_t>& defined_seeds = {}) {
    check<FormatError>(!complete.records().empty(), "[circuit] ",
                       complete.left_out() ? "none of the " + std::to_string(complete.left_out()) +
                                                 " items has a record of every condition"
                                           : std::string("no record"));
    nlohmann::json j = pooled_circuit_file(complete.records(), s, opt);
    j["items_left_out"] = complete.left_out();
    const nlohmann::json pooled = detail::circuit_roles(j);
    const bool address_choice = j.at("selectivity").size() > 1;
    std::size_t counted = 0, reader = 0, address = 0, critical = 0, failures = 0;
    std::vector<std::uint64_t> without;
    j["seeds"] = nlohmann::json::array();
    j["per_seed"] = nlohmann::json::array();
    const std::map<std::uint64_t, std::vector<nlohmann::json>> by_seed = records_by_seed(complete.records());
    std::set<std::uint64_t> seeds(defined_seeds.begin(), defined_seeds.end());
    for (const std::uint64_t seed : complete.seeds()) seeds.insert(seed);
    for (const std::uint64_t seed : seeds) {
        j["seeds"].push_back(seed);
        nlohmann::json roles;
        try {
            const auto recs = by_seed.find(seed);
            if (recs == by_seed.end())
                fail<FormatError>("[circuit] no item of seed ", seed, " has a record of every condition", complete.missing_of(seed));
            roles = circuit_roles(pooled_circuit_file(recs->second, s, opt));
        } catch (const Error& e) {
            j["per_seed"].push_back({{"seed", seed}, {"error", e.what()}});
            without.push_back(seed);
            continue;
        }
        ++counted;
        reader += roles["reader"]["layer"] == pooled["reader"]["layer"] && roles["reader"]["head"] == pooled["reader"]["head"];
        address += roles["address"]["group"] == pooled["address"]["group"];
        critical += roles["critical_layers"] == pooled["critical_layers"];
        failures += roles["value_head_failures"] == pooled["value_head_failures"];
        roles["seed"] = seed;
        j["per_seed"].push_back(std::move(roles));
    }
    j["agreement"] = {{"seeds", counted},
                      {"reader", reader},
                      {"address", address_choice ? nlohmann::json(address) : nlohmann::json(nullptr)},
                      {"critical_layers", critical},
                      {"value_head_failures", failures},
                      {"without_roles", without}};
    return j;
}

}  // namespace detail

/// The circuit file of the records, over their complete items (detail::CompleteItems; the others
/// counted in `items_left_out`): detail::pooled_circuit_file over every seed's items (the roles on
/// (seed, item) means), plus `seeds` (ascending), `per_seed` (each seed's roles from its items
/// alone: detail::circuit_roles and `seed`) and `agreement`: for the reader (layer and head), the
/// address group, the critical layers and the value heads that are points of failure, how many
/// seeds give the pooled role, of `seeds`. The address count is null where the pooled reader's
/// layer has one address candidate (the rule has no choice to agree on); Encode is G0 by rule and
/// is not counted. A seed whose roles the rules cannot give (no complete item; its reader on a
/// softmax layer without a group of linear layers before it) has `error` instead of roles, is
/// listed in `agreement.without_roles` and is left out of the counts.
inline nlohmann::json circuit_file(const std::vector<nlohmann::json>& records, const CircuitStructure& s,
                                   const CircuitOptions& opt) {
    return detail::circuit_file_of(detail::CompleteItems(records), s, opt);
}

/// Refuses the definition of a folder an older build wrote: its records lack B5 or are keyed by
/// one seed, so its roles and rows would not be those of a current run (a resume, or a merge with
/// a current folder, is refused by the definitions differing; this catches a merge of old folders
/// alone, before anything is written).
inline void check_circuit_definition(const nlohmann::json& definition) {
    check<FormatError>(definition.contains("seeds") && definition.contains("value_heads"),
                       "[circuit] the study definition has no '", definition.contains("seeds") ? "value_heads" : "seeds",
                       "': the folder was written by a hylens build from before 2026-12-06; rerun the study");
}

/// summary.json, summary.csv and circuit.json of the records.
inline void write_circuit_summaries(const std::filesystem::path& out, const std::vector<nlohmann::json>& records,
                                    const nlohmann::json& definition, const BootstrapOptions& bootstrap) {
    check_circuit_definition(definition);
    const CircuitStructure s = circuit_structure_from_json(definition.at("structure"));
    CircuitOptions opt;
    opt.top = definition.at("top").get<std::size_t>();
    opt.critical = definition.at("critical").get<double>();
    // Every row and role over the complete items (detail::CompleteItems).
    const detail::CompleteItems complete(records);
    const std::vector<nlohmann::json>& recs = complete.records();
    const nlohmann::json circuit =
        detail::circuit_file_of(complete, s, opt, definition.at("seeds").get<std::vector<std::uint64_t>>());
    // Pair conditions in study order with bootstrap intervals.
    std::vector<std::pair<std::string, std::string>> conds{{"baseline", "B1"}};
    for (std::size_t g = 0; g < s.groups.size(); ++g) conds.push_back({circuit_conditions::group(g), "B2"});
    for (LayerIndex l : s.linear_layers) conds.push_back({circuit_conditions::layer(l), "B3"});
    for (const auto& h : circuit["reader_candidates"])
        conds.push_back({circuit_conditions::head(h["layer"].get<LayerIndex>(), h["head"].get<std::size_t>()), "B4"});
    for (const auto& [l, h] : detail::value_heads(recs)) conds.push_back({circuit_conditions::value_head(l, h), "B5"});
    std::string csv = "condition,block,n,gap,gap_lo,gap_hi,acc,acc_lo,acc_hi,cacc,cacc_lo,cacc_hi,seeds,gap_sd_seeds,"
                      "acc_sd_seeds,cacc_sd_seeds\n";
    const auto sd_cell = [](const std::vector<double>& per_seed) {  // empty below two seeds
        const double sd = sample_sd(per_seed);
        return "," + (std::isnan(sd) ? std::string() : csv_number(sd));
    };
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [c, block] : conds) {
        const auto [seeds, by_seed] = detail::pair_scores_by_seed(recs, c);
        if (seeds.empty()) continue;
        std::size_t n = 0;
        std::vector<double> gap, acc, cacc;  // each seed's means
        for (const std::vector<PairScore>& ps : by_seed) {
            n += ps.size();
            const PairSummary p = summarize_pairs(ps);
            gap.push_back(p.gap.mean);
            acc.push_back(p.acc);
            cacc.push_back(p.cacc);
        }
        // Items resampled within each seed, the seeds pooled.
        const PairIntervals iv = pair_intervals(by_seed, bootstrap);
        rows.push_back({{"condition", c}, {"block", block}, {"n", n}, {"seeds", seeds},
                        {"gap", seeds_interval_json(iv.gap, gap)}, {"acc", seeds_interval_json(iv.acc, acc)},
                        {"cacc", seeds_interval_json(iv.cacc, cacc)}});
        csv += c + "," + block + "," + std::to_string(n) + csv_interval(iv.gap) + csv_interval(iv.acc) +
               csv_interval(iv.cacc) + "," + std::to_string(seeds.size()) + sd_cell(gap) + sd_cell(acc) + sd_cell(cacc) + "\n";
    }
    nlohmann::json summary = {{"conditions", rows},
                              {"roles", {{"encode", circuit["encode"]}, {"address", circuit["address"]}, {"reader", circuit["reader"]},
                                         {"critical_layers", circuit["critical_layers"]}}},
                              {"seeds", circuit["seeds"]},
                              {"per_seed", circuit["per_seed"]},
                              {"agreement", circuit["agreement"]},
                              {"items_left_out", circuit["items_left_out"]},
                              {"value_heads", circuit.value("value_heads", nlohmann::json(nullptr))},
                              {"selectivity", circuit["selectivity"]},
                              {"attention_split", circuit["attention_split"]},
                              {"bootstrap", {{"resamples", bootstrap.resamples}, {"level", bootstrap.level}, {"seed", bootstrap.seed}}}};
    write_file_atomic(out / "summary.csv", csv);
    write_file_atomic(out / "summary.json", detail::pretty_json(summary));
    write_file_atomic(out / "circuit.json", detail::pretty_json(circuit));
}

struct CircuitStudyResult {
    std::size_t items = 0;    ///< kept pairs (all shards, all seeds)
    std::size_t records = 0;  ///< in items.jsonl at the end
    std::size_t written = 0, resumed = 0;
    tasks::lookup::Drops dropped;  ///< summed over the seeds (run.json's pairs: per seed)
    double seconds = 0.0;
};

/// Runs the circuit study on a typed model with its tokenizer and chat family.
template <class Model>
CircuitStudyResult run_circuit_study(const Model& model, const Tokenizer& tok, ChatFamily family,
                                     const CircuitStudyOptions& opt) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    const CheckFiniteScope finite_check;  // a NaN stops the study at its layer and site (stack/finite_check.hpp)
    namespace lk = tasks::lookup;
    namespace cc = circuit_conditions;
    const auto t0 = std::chrono::steady_clock::now();
    const lk::Variant variant = lk::parse_variant(opt.variant);
    check(variant.long_filler == !opt.filler.empty(), "[circuit] ",
          variant.long_filler ? "the 'long' variant needs filler text (CircuitStudyOptions::filler; --corpus and "
                                "--filler-tokens on the command line)"
                              : "filler text is read by the 'long' variant alone");
    check(opt.per_config >= 1, "[circuit] --per-config must be at least 1");
    check(!opt.seeds.empty(), "[circuit] need at least one seed");
    check_distinct_seeds(opt.seeds, "circuit");
    const lk::Vocabulary vocab = lk::in_family_vocabulary(tok);
    std::vector<lk::CleanCorruptSet> sets;
    nlohmann::json pairs = nlohmann::json::object();  // run.json's pairs: per seed
    CircuitStudyResult res;
    for (std::uint64_t seed : opt.seeds) {
        sets.push_back(lk::clean_corrupt_pairs(tok, chat_format(family), variant, vocab, opt.per_config, seed, opt.filler));
        const lk::CleanCorruptSet& set = sets.back();
        check(!set.items.empty(), "[circuit] seed ", seed, ": every one of the ", set.drawn, " ", opt.variant,
              " pairs was dropped by this tokenizer's filters (length ", set.dropped.length, ", value tokens ",
              set.dropped.value_tokens, ", outside ", set.dropped.outside, ", answer tokens ", set.dropped.answer_tokens, ")");
        pairs[std::to_string(seed)] = {{"drawn", set.drawn},
                                       {"kept", set.items.size()},
                                       {"dropped", {{"length", set.dropped.length}, {"value_tokens", set.dropped.value_tokens},
                                                    {"outside", set.dropped.outside}, {"answer_tokens", set.dropped.answer_tokens}}}};
        res.items += set.items.size();
        res.dropped.length += set.dropped.length;
        res.dropped.outside += set.dropped.outside;
        res.dropped.value_tokens += set.dropped.value_tokens;
        res.dropped.answer_tokens += set.dropped.answer_tokens;
        res.dropped.positions += set.dropped.positions;
    }
    const CircuitStructure st = circuit_structure(model.stack(), opt.circuit.group_size);

    // B5: the value heads of the first linear layer that has them (a DeltaNet or Mamba-2 mixer).
    // In the definition, so a folder written without B5 is not resumed or merged into one with it.
    LayerIndex value_layer = no_layer;
    std::size_t value_heads = 0;
    for (LayerIndex l : st.linear_layers)
        if (const std::optional<std::size_t> w = site_width(model.stack(), l, Site::lin_head_out)) {
            value_layer = l;
            value_heads = *w / head_width(model.stack(), l, Site::lin_head_out);
            break;
        }
    nlohmann::json definition = circuit_definition(opt, st);
    definition["value_heads"] = value_heads ? nlohmann::json{{"layer", value_layer}, {"heads", value_heads}} : nlohmann::json(nullptr);
    StudyFolderOptions fo = opt.folder("circuit", definition);
    if (!opt.filler.empty()) fo.run_info["filler_source"] = opt.filler_source;
    fo.run_info["pairs"] = pairs;
    StudyFolder folder(fo);

    // Every condition of an item, in study order; qk conditions carry (softmax layer, group).
    std::vector<std::string> names{"baseline"};
    for (std::size_t g = 0; g < st.groups.size(); ++g) names.push_back(cc::group(g));
    for (LayerIndex l : st.linear_layers) names.push_back(cc::layer(l));
    const std::size_t pair_conditions = names.size();
    std::vector<SiteRef> attention;
    for (LayerIndex l : st.attention_layers) attention.push_back(site::attn_probs(l, Positions::last()));
    std::vector<std::pair<LayerIndex, std::size_t>> heads, qk;
    {
        const PairItem probe = pair_item(sets.front().items.front());
        const NamedTensors cap = capture(model, TokenBatch(probe.clean), attention);
        for (const SiteRef& s : attention)
            for (std::size_t h = 0; h < cap.at(s.name()).shape()[1]; ++h) heads.push_back({s.layer, h});
    }
    for (const auto& [l, h] : heads) names.push_back(cc::head(l, h));
    const std::size_t head_end = names.size();
    for (std::size_t h = 0; h < value_heads; ++h) names.push_back(cc::value_head(value_layer, h));
    const std::size_t value_head_end = names.size();
    qk = cc::qk_pairs(st);
    for (const auto& [s, g] : qk) names.push_back(cc::qk(s, g));

    // A shard takes the items of every seed whose draw index is its own.
    std::size_t total = 0;
    for (std::size_t si = 0; si < sets.size(); ++si)
        for (const auto& it : sets[si].items)
            if (folder.mine(it.index))
                for (const auto& n : names) total += !folder.done({opt.variant, opt.seeds[si], it.index, n});
    folder.check_resumed_records();  // every key asked: a record the study does not make stops it here, before its pairs run
    Progress progress(total, "circuit " + opt.shard.text(), opt.progress);
    for (std::size_t si = 0; si < sets.size(); ++si) {
        const std::uint64_t seed = opt.seeds[si];
        for (const lk::CleanCorruptItem& ci : sets[si].items) {
            if (!folder.mine(ci.index)) continue;
            const PairItem it = pair_item(ci);
            // The entries' token spans [begin, end) in dictionary order: what the attention split
            // sums over (entry `target` and the others), checkable from a record.
            nlohmann::json entries = nlohmann::json::array();
            for (const Span& e : it.entries) entries.push_back({e.first, e.second});
            std::vector<nlohmann::json> recs;
            for (std::size_t c = 0; c < names.size(); ++c) {
                if (folder.done({opt.variant, seed, ci.index, names[c]})) continue;
                nlohmann::json rec;
                if (c == 0) {
                    rec = detail::pair_condition(model, it, ci.value_ids, {}, &attention);
                } else if (c <= st.groups.size()) {
                    rec = detail::pair_condition(model, it, ci.value_ids,
                                                 removal(model.stack(), st.groups[c - 1].layers, opt.circuit.unit), &attention);
                } else if (c < pair_conditions) {
                    const LayerIndex l = st.linear_layers[c - 1 - st.groups.size()];
                    rec = detail::pair_condition(model, it, ci.value_ids, removal(model.stack(), {l}, opt.circuit.unit), nullptr);
                } else if (c < head_end) {
                    const auto [l, h] = heads[c - pair_conditions];
                    rec = detail::pair_condition(model, it, ci.value_ids, {head_zero(l, {h})}, nullptr);
                } else if (c < value_head_end) {
                    const std::size_t h = c - head_end;
                    rec = detail::pair_condition(model, it, ci.value_ids, {head_zero(value_layer, {h}, Site::lin_head_out)},
                                                 nullptr);
                    rec["layer"] = value_layer;
                    rec["value_head"] = h;
                } else {
                    const auto [s, g] = qk[c - value_head_end];
                    rec = detail::qk_condition(model, it, st.groups[g].layers, s, opt.circuit.unit);
                    rec["softmax_layer"] = s;
                    rec["group"] = g;
                }
                nlohmann::json full = {{"task", opt.variant},         {"seed", seed},
                                       {"item", ci.index},            {"condition", names[c]},
                                       {"target", ci.target},         {"distractor", ci.distractor},
                                       {"answer", ci.answer},         {"corrupt_answer", ci.corrupt_answer},
                                       {"tokens", ci.clean.ids.size()},
                                       {"qstart", ci.clean.qstart},
                                       {"entries", entries}};
                full.update(rec);
                recs.push_back(std::move(full));
            }
            if (recs.empty()) continue;
            folder.append(recs);
            progress.add(recs.size());
        }
    }
    progress.finish();

    res.written = folder.written();
    res.resumed = folder.resumed();
    const std::vector<nlohmann::json> records = folder.records();
    res.records = records.size();
    // A shard without items (more shards than items) has nothing to summarise.
    if (!records.empty()) write_circuit_summaries(opt.out, records, fo.definition, opt.bootstrap);
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    folder.finish({{"timings", {{"seconds", res.seconds}}}});
    return res;
}

}  // namespace hylens::experiments
