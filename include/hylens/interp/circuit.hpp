#pragma once
// Identification of a model's Encode block, Address block and reader head (protocols.md
// §A.6, §A.7) from clean/corrupted dictionary pairs, with the battery of interp/reader_search.hpp:
//   B1 baseline (acc, gap); B2 each layer group removed; B3 each linear layer removed
//      ("critical" when the gap falls below `critical` x the baseline gap);
//   B4 reader search (the top `top` heads by attention on the target entry, the one whose
//      removal lowers the gap most);
//   B6 q.k selectivity 2x2 at the reader for the group feeding the reader's layer (Gr-1) and
//      the one before it (Gr-2).
// Rules: Encode = the first group G0 (the protocol's finding in every model is that removing it
// takes accuracy to 0; the record keeps its removal scores to check that); Address = the
// candidate group (Gr-1, Gr-2) whose removal from Q only drives the reader's top-1 rate lowest
// (ties: the lower selectivity). The result serialises to the circuit file the other studies
// read (to_json / circuit_from_json).

#include <algorithm>  // std::min
#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <filesystem>  // std::filesystem::path
#include <fstream>  // std::ifstream
#include <iterator>  // std::istreambuf_iterator
#include <string>   // std::string
#include <utility>  // std::pair
#include <vector>   // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../io/json_depth.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "metrics.hpp"
#include "reader_search.hpp"

namespace hylens {

/// The PairItem of reader_search.hpp for a generated clean/corrupted pair.
inline PairItem pair_item(const tasks::lookup::CleanCorruptItem& it) {
    PairItem p;
    p.clean = it.clean.ids;
    p.corrupt = it.corrupt_ids;
    p.answer = it.answer;
    p.other = it.corrupt_answer;
    for (const auto& e : it.clean.entries) p.entries.push_back(contiguous_span(e));
    p.target = it.target;
    return p;
}

struct CircuitOptions {
    std::size_t group_size = 0;  ///< layer_groups(size): 3 for Qwen3.5, 0 for Granite / Falcon-H1
    std::size_t top = 8;         ///< reader-search candidates
    RemovalUnit unit = RemovalUnit::mixer;
    double critical = 0.6;       ///< B3: a layer is critical when its removal leaves gap < critical x baseline
};

struct Circuit {
    PairScores baseline;                                  ///< B1
    std::vector<LayerGroup> groups;
    std::vector<PairScores> group_removed;                ///< B2, per group
    std::vector<LayerIndex> linear_layers;
    std::vector<PairScores> layer_removed;                ///< B3, per linear layer
    std::vector<LayerIndex> critical_layers;
    ReaderSearch reader;                                  ///< B4
    std::vector<std::size_t> address_candidates;          ///< Gr-1, Gr-2 (group indices)
    std::vector<std::array<std::array<SelectivityMean, 2>, 2>> selectivity;  ///< B6 per candidate
    std::size_t encode = 0;                               ///< group index
    std::size_t address = 0;                              ///< group index
};

/// B3's rule: the linear layers whose removal leaves a gap below `critical` x the baseline gap
/// (none when the baseline gap is not positive: the model does not solve the task).
inline std::vector<LayerIndex> critical_layers(const PairScores& baseline, const std::vector<LayerIndex>& linear_layers,
                                        const std::vector<PairScores>& layer_removed, double critical) {
    std::vector<LayerIndex> out;
    for (std::size_t i = 0; i < linear_layers.size(); ++i)
        if (baseline.gap.mean > 0.0 && layer_removed[i].gap.mean < critical * baseline.gap.mean)
            out.push_back(linear_layers[i]);
    return out;
}

/// B4's rule: of the first `top` candidates (ranked by target mass, gap_removed set), the one
/// whose removal lowers the gap most (the first on a tie).
inline HeadCandidate pick_reader(const std::vector<HeadCandidate>& ranked, std::size_t top) {
    check<ShapeError>(!ranked.empty(), "[circuit] no reader candidate");
    HeadCandidate r = ranked[0];
    for (std::size_t i = 1; i < std::min(top, ranked.size()); ++i)
        if (ranked[i].gap_removed < r.gap_removed) r = ranked[i];
    return r;
}

/// Gr-1 (the last group with linear layers whose softmax layer is at or before the reader's
/// layer) and Gr-2 (the group before it, when it has linear layers).
inline std::vector<std::size_t> address_candidates(const std::vector<LayerGroup>& groups, LayerIndex reader_layer) {
    std::size_t r1 = groups.size();
    for (std::size_t i = 0; i < groups.size(); ++i)
        if (groups[i].softmax_layer <= reader_layer && !groups[i].layers.empty()) r1 = i;
    check<ShapeError>(r1 < groups.size(), "[identify_circuit] no group of linear layers before the reader layer ", reader_layer);
    std::vector<std::size_t> out{r1};
    if (r1 > 0 && !groups[r1 - 1].layers.empty()) out.push_back(r1 - 1);
    return out;
}

/// The Address rule: the candidate whose removal from Q only gives the lowest top-1 rate
/// (ties: the lower selectivity).
inline std::size_t pick_address(const std::vector<std::size_t>& candidates,
                                const std::vector<std::array<std::array<SelectivityMean, 2>, 2>>& selectivity) {
    check<ShapeError>(!candidates.empty() && candidates.size() == selectivity.size(), "[circuit] ", candidates.size(),
                      " address candidates, ", selectivity.size(), " selectivity tables");
    std::size_t pick = 0;
    for (std::size_t k = 1; k < selectivity.size(); ++k) {
        const SelectivityMean &a = selectivity[k][1][0], &b = selectivity[pick][1][0];
        if (a.top1 < b.top1 || (a.top1 == b.top1 && a.selectivity < b.selectivity)) pick = k;
    }
    return candidates[pick];
}

/// Runs B1-B4 and B6 on the items and applies the rules above.
template <class Model>
Circuit identify_circuit(const Model& model, const std::vector<PairItem>& items, const CircuitOptions& opt = {}) {
    check<ShapeError>(!items.empty(), "[identify_circuit] no items");
    Circuit c;
    c.groups = layer_groups(model.stack(), opt.group_size);
    check<ShapeError>(!c.groups.empty() && !c.groups.front().layers.empty(),
                      "[identify_circuit] the model has no group of linear layers before a softmax layer");
    c.baseline = score_pairs(model, items);
    std::vector<std::vector<LayerIndex>> g, single;
    for (const LayerGroup& lg : c.groups) g.push_back(lg.layers);
    c.group_removed = removal_scan(model, items, g, opt.unit);
    c.linear_layers = recurrent_layers(model.stack());
    for (LayerIndex l : c.linear_layers) single.push_back({l});
    c.layer_removed = removal_scan(model, items, single, opt.unit);
    c.critical_layers = critical_layers(c.baseline, c.linear_layers, c.layer_removed, opt.critical);
    c.reader = reader_search(model, items, opt.top);
    c.address_candidates = address_candidates(c.groups, c.reader.reader.layer);
    for (std::size_t gi : c.address_candidates)
        c.selectivity.push_back(
            selectivity_2x2(model, items, c.groups[gi].layers, c.reader.reader.layer, c.reader.reader.head, opt.unit));
    c.address = pick_address(c.address_candidates, c.selectivity);
    c.encode = 0;
    return c;
}

namespace detail {
inline nlohmann::json scores_json(const PairScores& s) {
    return {{"acc", s.acc}, {"gap", s.gap.mean}, {"gap_sem", s.gap.sem}, {"n", s.gap.n}};
}
}  // namespace detail

/// The circuit file: encode / address groups (layers), the reader head, and every scan behind them.
inline nlohmann::json to_json(const Circuit& c) {
    nlohmann::json j;
    j["encode"] = {{"group", c.encode}, {"layers", c.groups[c.encode].layers}};
    j["address"] = {{"group", c.address}, {"layers", c.groups[c.address].layers},
                    {"softmax_layer", c.groups[c.address].softmax_layer}};
    j["reader"] = {{"layer", c.reader.reader.layer},
                   {"head", c.reader.reader.head},
                   {"target_mass", c.reader.reader.target_mass},
                   {"gap_removed", c.reader.reader.gap_removed}};
    j["baseline"] = detail::scores_json(c.baseline);
    j["groups"] = nlohmann::json::array();
    for (std::size_t i = 0; i < c.groups.size(); ++i)
        j["groups"].push_back({{"layers", c.groups[i].layers},
                               {"softmax_layer", c.groups[i].softmax_layer},
                               {"removed", detail::scores_json(c.group_removed[i])}});
    j["layers"] = nlohmann::json::array();
    for (std::size_t i = 0; i < c.linear_layers.size(); ++i)
        j["layers"].push_back({{"layer", c.linear_layers[i]}, {"removed", detail::scores_json(c.layer_removed[i])}});
    j["critical_layers"] = c.critical_layers;
    j["reader_candidates"] = nlohmann::json::array();
    for (const HeadCandidate& h : c.reader.ranked)
        j["reader_candidates"].push_back({{"layer", h.layer},
                                          {"head", h.head},
                                          {"target_mass", h.target_mass},
                                          {"other_mass", h.other_mass},
                                          {"first_mass", h.first_mass},
                                          {"gap_removed", h.gap_removed}});
    j["selectivity"] = nlohmann::json::array();
    for (std::size_t k = 0; k < c.address_candidates.size(); ++k) {
        nlohmann::json cells = nlohmann::json::object();
        const char* names[2][2] = {{"intact", "k_ablated"}, {"q_ablated", "both_ablated"}};
        for (int q = 0; q < 2; ++q)
            for (int kk = 0; kk < 2; ++kk) {
                const SelectivityMean& s = c.selectivity[k][q][kk];
                cells[names[q][kk]] = {{"selectivity", s.selectivity}, {"margin", s.margin}, {"top1", s.top1}};
            }
        j["selectivity"].push_back({{"group", c.address_candidates[k]}, {"cells", cells}});
    }
    return j;
}

namespace detail {
/// A layer index of a circuit file: a FormatError for anything but a non-negative integer.
inline LayerIndex layer_from_json(const nlohmann::json& x, const char* what) {
    check<FormatError>(x.is_number_unsigned() || (x.is_number_integer() && x.get<long long>() >= 0), "[circuit file] ",
                       what, ": ", x.dump(), " is not a layer index");
    return x.get<LayerIndex>();
}
inline std::vector<LayerIndex> layers_from_json(const nlohmann::json& x, const char* what) {
    check<FormatError>(x.is_array(), "[circuit file] ", what, " is not a list of layers");
    std::vector<LayerIndex> out;
    for (const auto& l : x) out.push_back(layer_from_json(l, what));
    return out;
}
/// A head index: a non-negative integer (1.5 was read as 1, -1 as 2^64 - 1).
inline std::size_t head_from_json(const nlohmann::json& x, const char* what) {
    check<FormatError>(x.is_number_unsigned() || (x.is_number_integer() && x.get<long long>() >= 0), "[circuit file] ",
                       what, ": ", x.dump(), " is not a head index");
    return x.get<std::size_t>();
}
/// j[key][inner], a FormatError naming "key.inner" when j[key] is not an object holding it
/// (it was nlohmann's "cannot use at() with array").
inline const nlohmann::json& member(const nlohmann::json& j, const char* key, const char* inner) {
    check<FormatError>(j.contains(key) && j[key].is_object() && j[key].contains(inner), "[circuit file] needs '", key, ".",
                       inner, "'", j.contains(key) ? " ('" + std::string(key) + "' is " + j[key].dump() + ")" : std::string());
    return j[key][inner];
}
}  // namespace detail

/// What the other studies read back from a circuit file.
struct CircuitRoles {
    std::vector<LayerIndex> encode, address;
    LayerIndex reader_layer = no_layer;
    std::size_t reader_head = 0;
    /// The model the circuit was found on, as the file describes it (empty when it does not):
    /// its linear layers (the B3 scan, "layers") and its softmax layers with their number of
    /// heads (the B4 scan, "reader_candidates"). check_circuit_model compares them.
    std::vector<LayerIndex> found_linear;
    std::vector<std::pair<LayerIndex, std::size_t>> found_heads;
};
inline CircuitRoles circuit_from_json(const nlohmann::json& j) {
    check<FormatError>(j.is_object() && j.contains("encode") && j.contains("address") && j.contains("reader"),
                       "[circuit file] needs 'encode', 'address' and 'reader'");
    CircuitRoles r;
    r.encode = detail::layers_from_json(detail::member(j, "encode", "layers"), "encode.layers");
    r.address = detail::layers_from_json(detail::member(j, "address", "layers"), "address.layers");
    r.reader_layer = detail::layer_from_json(detail::member(j, "reader", "layer"), "reader.layer");
    r.reader_head = detail::head_from_json(detail::member(j, "reader", "head"), "reader.head");
    if (j.contains("layers") && j["layers"].is_array())
        for (const auto& e : j["layers"])
            if (e.is_object() && e.contains("layer")) r.found_linear.push_back(detail::layer_from_json(e["layer"], "layers"));
    if (j.contains("reader_candidates") && j["reader_candidates"].is_array())
        for (const auto& e : j["reader_candidates"]) {
            if (!e.is_object() || !e.contains("layer") || !e.contains("head")) continue;
            const LayerIndex l = detail::layer_from_json(e["layer"], "reader_candidates");
            const std::size_t h = detail::head_from_json(e["head"], "reader_candidates");
            auto it = std::find_if(r.found_heads.begin(), r.found_heads.end(), [&](const auto& x) { return x.first == l; });
            if (it == r.found_heads.end()) r.found_heads.push_back({l, h + 1});
            else it->second = std::max(it->second, h + 1);
        }
    std::sort(r.found_linear.begin(), r.found_linear.end());
    std::sort(r.found_heads.begin(), r.found_heads.end());
    return r;
}

/// Refuses a circuit found on another model: the layers and heads a circuit names are those of
/// the model it was found on, so a file whose linear layers or softmax heads differ from
/// `stack`'s (another family, size or layout) would silently move other layers (a Granite
/// circuit swapped Qwen3.5 layers). `study` names the caller. Files without the scans pass.
template <class Stack>
void check_circuit_model(const CircuitRoles& r, const Stack& stack, const char* study) {
    std::vector<std::pair<LayerIndex, std::size_t>> heads;
    for (LayerIndex l : attention_layers(stack)) heads.push_back({l, attention_heads(stack, l)});
    const auto text = [](const std::vector<LayerIndex>& linear, const std::vector<std::pair<LayerIndex, std::size_t>>& h) {
        std::string t = "linear layers";
        for (LayerIndex l : linear) t += " " + std::to_string(l);
        t += linear.empty() ? " none" : "";
        t += ", softmax layers";
        for (const auto& [l, n] : h) t += " " + std::to_string(l) + " (" + std::to_string(n) + " heads)";
        return t;
    };
    const bool linear_ok = r.found_linear.empty() || r.found_linear == recurrent_layers(stack);
    const bool heads_ok = r.found_heads.empty() || r.found_heads == heads;
    check<ShapeError>(linear_ok && heads_ok, "[", study, "] the circuit file was found on another model (",
                      text(r.found_linear, r.found_heads), "); this model has ", text(recurrent_layers(stack), heads),
                      ": a circuit's layers and heads are those of the model it was found on");
}

/// The roles of a circuit file on disk (circuit.json of `hylens experiment circuit`).
inline CircuitRoles read_circuit_file(const std::filesystem::path& path) {
    check<FormatError>(!std::filesystem::is_directory(path), "[circuit file] ", path.string(),
                       " is a folder (a circuit study's result? its circuit file is circuit.json in it)");
    std::ifstream in(path, std::ios::binary);
    check<FormatError>(in.good(), "[circuit file] cannot read the circuit file ", path.string());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    io::check_json_depth(text, "[circuit file] " + path.string());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[circuit file] the circuit file ", path.string(), " is not JSON: ", e.what());
    }
    CircuitRoles roles;
    try {
        roles = circuit_from_json(j);
    } catch (const FormatError& e) {
        fail<FormatError>(e.what(), " (in ", path.string(), ")");  // which file, of the several a study reads
    }
    // Beside its circuit study's run.json, the file is taken only from a complete run: a merge
    // of unfinished or missing shards (status "incomplete") found its roles on part of the
    // items, and a merge killed while writing ("merging") may have left an earlier one.
    const std::filesystem::path run_path = path.parent_path() / "run.json";
    if (std::filesystem::exists(run_path)) {
        std::ifstream run_in(run_path, std::ios::binary);
        const nlohmann::json run = nlohmann::json::parse(run_in, nullptr, /*allow_exceptions=*/false);
        const auto text_of = [&](const char* key) {
            return run.is_object() && run.contains(key) && run[key].is_string() ? run[key].get<std::string>() : std::string();
        };
        check<FormatError>(text_of("kind") != "circuit" || text_of("status") == "complete", "[circuit file] ", path.string(),
                           " comes from a circuit study whose run.json status is '", text_of("status"),
                           "', not 'complete': its roles were found on part of the study's items (a merge of unfinished "
                           "or missing shards, or a run or merge stopped before its end); resume the unfinished shards "
                           "and merge every shard again, or copy the file out of the folder to use it as it is");
        // A finished shard's file is complete too, and found on its share of the items alone.
        const nlohmann::json study = run.is_object() && run.contains("study") ? run["study"] : nlohmann::json();
        const std::string shard =
            study.is_object() && study.contains("shard") && study["shard"].is_string() ? study["shard"].get<std::string>() : "0/1";
        check<FormatError>(text_of("kind") != "circuit" || shard == "0/1", "[circuit file] ", path.string(),
                           " comes from shard ", shard, " of a circuit study: its roles were found on that shard's items "
                           "alone; merge every shard (hylens experiment merge) and use the merged folder's circuit.json");
    }
    return roles;
}

}  // namespace hylens
