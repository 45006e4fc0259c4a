#pragma once
// The Encode (Bind) sufficiency swaps (protocols.md §A.12, exp29; docs/study_circuit.md):
// does the Encode block's write at a few token positions carry what the model retrieves?
//
//   value swap: host = the corrupted prompt (values of t and d exchanged, answer v_d), donor =
//               the clean prompt; written at t's value token; success = the host answers v_t.
//   key swap:   host = the clean prompt (answer v_t), donor = the clean dictionary with the
//               keys of t and d exchanged (tasks::lookup::key_swap); written at both key tokens;
//               success = the host answers v_d.
//
// Sources (record "condition" = "<swap>:<source>"):
//   none         the host alone (the rate at which it already gives the swap's answer)
//   bind         the donor's Encode-block mixer outputs (the circuit file's Encode layers)
//   embedding    the donor's token embeddings, the Encode block recomputed on them
//   other_block  the donor's mixer outputs of another block (--other-layers; default the
//                circuit's Address block when it is not the Encode block, else not run)
//   mean         each Encode layer's mean mixer output over the donor prompt's positions
// The cross-family sources of §A.12 (ridge-mapped writes, mapped embeddings, shuffled map) need
// a second model and fitted maps; they are not part of this study.
//
// One record per (item, condition) through a StudyFolder (resume, shards, merge), scored with
// score_transplant (A = the swap's answer, B = the host's own answer): "success" = ansA.

#include <algorithm>   // std::find
#include <chrono>      // std::chrono
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem
#include <optional>    // std::optional
#include <string>      // std::string
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../interp/circuit.hpp"
#include "../interp/metric_intervals.hpp"
#include "../interp/run.hpp"
#include "../interp/transplant.hpp"  // recurrent_layers
#include "../stack/finite_check.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "../tasks/lookup/vocabulary.hpp"
#include "../text/chat.hpp"
#include "../text/tokenizer.hpp"
#include "bootstrap.hpp"
#include "progress.hpp"
#include "study_folder.hpp"

namespace hylens::experiments {

struct EncodeSwapOptions : StudyRunOptions {
    std::optional<CircuitRoles> circuit{};  ///< the circuit file read, if any: check_circuit_model against the model
    std::string variant = "chat8";
    std::size_t per_config = 20;
    std::uint64_t seed = 1;
    std::vector<LayerIndex> encode;        ///< the Encode block's layers (circuit file)
    std::vector<LayerIndex> other;         ///< the control block's layers (empty: no other_block condition)
    nlohmann::json circuit_info = nullptr;  ///< what the roles came from (for the definition)
    BootstrapOptions bootstrap{};
};

/// Sets the Encode block and the control block from a circuit file's roles: `other` when given,
/// else the Address block when it is not the Encode block (else no control), and what they came
/// from (circuit_info).
inline void set_encode_swap_roles(EncodeSwapOptions& o, const CircuitRoles& roles,
                                  const std::optional<std::vector<LayerIndex>>& other = std::nullopt) {
    o.circuit = roles;
    o.encode = roles.encode;
    o.other = other ? *other : roles.address != roles.encode ? roles.address : std::vector<LayerIndex>{};
    o.circuit_info = {{"encode", roles.encode}, {"address", roles.address}};
}

/// The sources of a study with these options, in study order.
inline std::vector<std::string> encode_swap_sources(const EncodeSwapOptions& o) {
    std::vector<std::string> s{"none", "bind", "embedding"};
    if (!o.other.empty()) s.push_back("other_block");
    s.push_back("mean");
    return s;
}

inline nlohmann::json encode_swap_definition(const EncodeSwapOptions& o) {
    return {{"variant", o.variant},  {"per_config", o.per_config}, {"seed", o.seed},
            {"encode", o.encode},    {"other", o.other},           {"sources", encode_swap_sources(o)},
            {"circuit", o.circuit_info}};
}

/// The name of the condition of a swap ("value", "key") from a source: "value:bind".
inline std::string encode_swap_condition(const std::string& swap, const std::string& source) { return swap + ":" + source; }

/// The conditions of the encode-swap study `definition` defines, in summary order: value:<source>
/// for each of its sources, then key:<source>. What the summaries list and a merge accepts.
inline std::vector<std::string> encode_swap_conditions(const nlohmann::json& definition) {
    const nlohmann::json& sources = definition.at("sources");
    std::vector<std::string> conditions;
    for (const char* swap : {"value", "key"})
        for (const auto& s : sources) {
            check<FormatError>(s.is_string(), "[encode-swap] the study's sources are not names: ", sources.dump());
            conditions.push_back(encode_swap_condition(swap, s.get<std::string>()));
        }
    return conditions;
}

/// summary.csv / summary.json: per condition, success (ansA), the host's own answer (ansB) and
/// dAB = D(swap answer - host answer), item means with bootstrap intervals.
inline void write_encode_swap_summaries(const std::filesystem::path& out, const std::vector<nlohmann::json>& records,
                                        const nlohmann::json& definition, const BootstrapOptions& bootstrap) {
    const std::vector<std::string> conditions = encode_swap_conditions(definition);
    std::string csv = "condition,swap,source,n,success,success_lo,success_hi,host_answer,host_answer_lo,host_answer_hi,dAB,dAB_lo,dAB_hi\n";
    nlohmann::json rows = nlohmann::json::array();
    for (const std::string& c : conditions) {
        std::vector<double> success, host, dab;
        for (const auto& r : records)
            if (r.at("condition").get<std::string>() == c) {
                success.push_back(r.at("success").get<bool>() ? 1.0 : 0.0);
                host.push_back(r.at("host_answer").get<bool>() ? 1.0 : 0.0);
                dab.push_back(r.at("dAB").get<double>());
            }
        if (success.empty()) continue;
        const Interval ok = mean_interval({success}, bootstrap), own = mean_interval({host}, bootstrap),
                       d = mean_interval({dab}, bootstrap);
        const std::string swap = c.substr(0, c.find(':')), source = c.substr(c.find(':') + 1);
        rows.push_back({{"condition", c}, {"swap", swap}, {"source", source}, {"n", success.size()}, {"success", interval_json(ok)},
                        {"host_answer", interval_json(own)}, {"dAB", interval_json(d)}});
        csv += c + "," + swap + "," + source + "," + std::to_string(success.size()) + csv_interval(ok) + csv_interval(own) +
               csv_interval(d) + "\n";
    }
    write_file_atomic(out / "summary.csv", csv);
    write_file_atomic(out / "summary.json",
                      detail::pretty_json({{"conditions", rows},
                                           {"bootstrap", {{"resamples", bootstrap.resamples}, {"level", bootstrap.level},
                                                          {"seed", bootstrap.seed}}}}));
}

namespace detail {

/// The host's final-position logits with `source` written at `positions` from the donor.
template <class Model>
Tensor3 encode_swap_run(const Model& model, const std::vector<std::int64_t>& donor, const std::vector<std::int64_t>& host,
                        const std::vector<std::size_t>& positions, const std::string& source, const EncodeSwapOptions& o) {
    RunOptions ro;
    ro.last_only = true;
    const TokenBatch d(donor), h(host);
    std::vector<std::int64_t> idx(positions.begin(), positions.end());
    const Positions at = Positions::at(idx);
    // The donor's rows of `sites` written into the host run.
    const auto from_donor = [&](const std::vector<SiteRef>& sites) {
        const NamedTensors cap = capture(model, d, sites);
        std::vector<Intervention> iv;
        for (const SiteRef& s : sites) iv.push_back(patch(s, cap));
        return run(model, h, iv, ro).logits;
    };
    const auto mixers = [&](const std::vector<LayerIndex>& layers) {
        std::vector<SiteRef> sites;
        for (LayerIndex l : layers) sites.push_back({mixer_site(model.stack(), l, MixerChannel::recurrent), l, at, false});
        return sites;
    };
    if (source == "none") return run(model, h, {}, ro).logits;
    if (source == "bind") return from_donor(mixers(o.encode));
    if (source == "other_block") return from_donor(mixers(o.other));
    if (source == "embedding") return from_donor({site::embed(at)});
    check(source == "mean", "[encode-swap] unknown source '", source, "'");
    // Each Encode layer's mixer output averaged over the donor's positions, at every swap position.
    std::vector<SiteRef> all;
    for (LayerIndex l : o.encode) all.push_back({mixer_site(model.stack(), l, MixerChannel::recurrent), l, Positions::all(), false});
    const NamedTensors cap = capture(model, d, all);
    std::vector<Intervention> iv;
    for (const SiteRef& s : all) {
        const NamedTensor& t = cap.at(s.name());
        const std::size_t T = t.shape()[1], D = t.shape()[2];
        std::vector<double> mean(D, 0.0);
        for (std::size_t p = 0; p < T; ++p)
            for (std::size_t j = 0; j < D; ++j) mean[j] += static_cast<double>(t.data()[p * D + j]);
        std::vector<float> rows;
        for (std::size_t k = 0; k < positions.size(); ++k)
            for (std::size_t j = 0; j < D; ++j) rows.push_back(static_cast<float>(mean[j] / static_cast<double>(T)));
        iv.push_back(patch(SiteRef{s.site, s.layer, at, false}, std::move(rows)));
    }
    return run(model, h, iv, ro).logits;
}

}  // namespace detail

struct EncodeSwapResult {
    std::size_t items = 0, key_items = 0, records = 0, written = 0, resumed = 0;
    double seconds = 0.0;
};

/// Runs the encode-swap study on a typed model with its tokenizer and chat family.
template <class Model>
EncodeSwapResult run_encode_swap_study(const Model& model, const Tokenizer& tok, ChatFamily family, const EncodeSwapOptions& opt) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    const CheckFiniteScope finite_check;  // a NaN stops the study at its layer and site (stack/finite_check.hpp)
    if (opt.circuit) check_circuit_model(*opt.circuit, model.stack(), "encode-swap");
    namespace lk = tasks::lookup;
    const auto t0 = std::chrono::steady_clock::now();
    const lk::Variant variant = lk::parse_variant(opt.variant);
    check(!variant.long_filler, "[encode-swap] the 'long' variant is not supported");
    check(!opt.encode.empty(), "[encode-swap] no Encode layers");
    const std::vector<LayerIndex> linear = recurrent_layers(model.stack());
    const auto is_linear = [&](LayerIndex l) { return std::find(linear.begin(), linear.end(), l) != linear.end(); };
    for (LayerIndex l : opt.encode)
        check(is_linear(l), "[encode-swap] layer ", l,
              " of the circuit's Encode block is not a linear layer of this model (a circuit file of another model?)");
    for (std::size_t i = 0; i < opt.other.size(); ++i) {
        const LayerIndex l = opt.other[i];
        check(std::find(opt.other.begin(), opt.other.begin() + static_cast<std::ptrdiff_t>(i), l) ==
                  opt.other.begin() + static_cast<std::ptrdiff_t>(i),
              "[encode-swap] control layer ", l, " (--other-layers; Python: other_layers=) is listed twice");
        if (is_linear(l)) continue;
        std::string names;
        for (LayerIndex k : linear) names += (names.empty() ? "" : ",") + std::to_string(k);
        fail("[encode-swap] control layer ", l, " (--other-layers; Python: other_layers=) is not a linear layer of this model (its linear layers: ",
             names, ")");
    }
    const ChatFormat format = chat_format(family);
    const lk::CleanCorruptSet set =
        lk::clean_corrupt_pairs(tok, format, variant, lk::in_family_vocabulary(tok), opt.per_config, opt.seed);
    check(!set.items.empty(), "[encode-swap] every one of the ", set.drawn, " ", opt.variant,
          " pairs was dropped by this tokenizer's filters");

    StudyFolderOptions fo = opt.folder("encode-swap", encode_swap_definition(opt));
    fo.run_info["pairs"] = {{"drawn", set.drawn}, {"kept", set.items.size()}};
    StudyFolder folder(fo);

    const std::vector<std::string> sources = encode_swap_sources(opt);
    lk::Drops key_drops;
    std::vector<std::optional<lk::KeySwap>> keys;
    for (const auto& it : set.items) keys.push_back(lk::key_swap(tok, format, variant, it, key_drops));
    EncodeSwapResult res;
    res.items = set.items.size();
    for (const auto& k : keys) res.key_items += k.has_value();

    // Every key of this shard asked before any forward, so a resumed record the study does not
    // make stops it here (StudyFolder::check_resumed_records).
    std::size_t total = 0;
    for (std::size_t i = 0; i < set.items.size(); ++i) {
        if (!folder.mine(set.items[i].index)) continue;
        for (const char* swap : {"value", "key"})
            if (swap == std::string("value") || keys[i])
                for (const std::string& src : sources)
                    total += !folder.done({opt.variant, opt.seed, set.items[i].index, encode_swap_condition(swap, src)});
    }
    folder.check_resumed_records();
    Progress progress(total, "encode-swap " + opt.shard.text(), opt.progress);
    const std::size_t V = model.config().vocab;
    for (std::size_t i = 0; i < set.items.size(); ++i) {
        const lk::CleanCorruptItem& it = set.items[i];
        if (!folder.mine(it.index)) continue;
        std::vector<nlohmann::json> recs;
        for (const char* swap : {"value", "key"}) {
            const bool value = swap == std::string("value");
            if (!value && !keys[i]) continue;
            // value: host corrupted (answers v_d), donor clean, at t's value; key: host clean
            // (answers v_t), donor key-swapped, at both keys.
            const std::vector<std::int64_t>& host = value ? it.corrupt_ids : it.clean.ids;
            const std::vector<std::int64_t>& donor = value ? it.clean.ids : keys[i]->ids;
            const std::vector<std::size_t> pos = value ? it.clean.values[it.target] : keys[i]->positions;
            const std::int64_t want = value ? it.answer : it.corrupt_answer, own = value ? it.corrupt_answer : it.answer;
            for (const std::string& src : sources) {
                const std::string cond = encode_swap_condition(swap, src);
                if (folder.done({opt.variant, opt.seed, it.index, cond})) continue;
                const Tensor3 logits = detail::encode_swap_run(model, donor, host, pos, src, opt);
                const TransplantScore s = score_transplant(logits_row(logits), V, want, own);
                recs.push_back({{"task", opt.variant},  {"seed", opt.seed},       {"item", it.index},
                                {"condition", cond},    {"swap", swap},           {"source", src},
                                {"target", it.target},  {"distractor", it.distractor}, {"positions", pos},
                                {"swap_answer", want},  {"host_own_answer", own}, {"success", s.ansA},
                                {"host_answer", s.ansB}, {"dAB", s.dAB}});
            }
        }
        if (recs.empty()) continue;
        folder.append(recs);
        progress.add(recs.size());
    }
    progress.finish();
    const std::vector<nlohmann::json> records = folder.records();
    res.records = records.size();
    res.written = folder.written();
    res.resumed = folder.resumed();
    if (!records.empty()) write_encode_swap_summaries(opt.out, records, fo.definition, opt.bootstrap);
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    folder.finish({{"key_swap_items", res.key_items},
                   {"key_swap_dropped", {{"length", key_drops.length}, {"outside", key_drops.outside}}},
                   {"timings", {{"seconds", res.seconds}}}});
    return res;
}

}  // namespace hylens::experiments
