#pragma once
// The query-vector transfer study (protocols.md §A.10, exp26): a ridge map f from a donor
// model's final-position features to a receiver's Address-layer mixer outputs at the final
// position, fitted on dictionaries of K_fit keys and tested on donor/host pairs of K_test keys
// (tasks/lookup: key_split, query_items, donor_host_pairs). Donor and receiver each read the
// text in their own chat format; the donor may be the receiver itself (an in-family map).
//
// Features (one donor forward per prompt): for each source block, the concatenation of its
// layers' mixer outputs at T-1 (layer-major, |block| * H_donor); the "embedding" source is the
// donor's input embedding of the queried key token (site embed at the key's position, which
// is static: the embedding row of " key"). Target: the receiver's Address layers' mixer outputs
// at T-1 (|address| * H_recv). Fit: interp/stitch.hpp fit_query_map (centred ridge, float64,
// first min(500, n/5) rows held out, the query-map lambda grid).
//
// Conditions on each test pair (all scored on the receiver's host run B at T-1, with the reader
// head's attention; interp/metrics.hpp score_transplant):
//   A, B               the receiver's donor and host runs alone;
//   in_family          the receiver's own A-run Address outputs at T-1 copied into run B;
//   mean               the fit-set mean target written (the map with no input);
//   map:S              f_S(donor feature of prompt A) written into run B (the transfer);
//   self:S             f_S(donor feature of prompt B): should keep B;
//   shuffled:S         f fitted on row-permuted targets, applied to prompt A's feature;
//   map:S@n            the learning curve: f fitted on the first n fit prompts.
// Records and summaries are those of the transplant study (score_record, transplant_summary);
// run.json holds each fit's held-out R^2 and lambda exponent ("fits").

#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem
#include <optional>    // std::optional
#include <string>      // std::string
#include <string_view> // std::string_view
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../interp/circuit.hpp"  // CircuitRoles
#include "../interp/ridge.hpp"
#include "../interp/stitch.hpp"
#include "../interp/transplant.hpp"
#include "../stack/finite_check.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "../tasks/lookup/vocabulary.hpp"
#include "../text/tokenizer.hpp"
#include "bootstrap.hpp"
#include "input_fingerprint.hpp"
#include "progress.hpp"
#include "study_folder.hpp"
#include "transplant_study.hpp"

namespace hylens::experiments {

struct QueryMapOptions : StudyRunOptions {  // progress: per seed
    std::optional<CircuitRoles> circuit{};  ///< the circuit file read, if any: check_circuit_model against the model
    tasks::lookup::Style style = tasks::lookup::Style::chat;
    std::size_t n_pairs = 8;
    std::size_t fit_items = 2000;           ///< fit prompts (K_fit keys)
    std::size_t per_config = 50;            ///< test pairs per (ia, ib) configuration (K_test keys)
    std::vector<std::uint64_t> seeds{1};    ///< data seeds (key split, fit and test prompts)
    std::vector<TransplantBlock> sources;   ///< donor blocks
    bool embedding_source = true;           ///< also the donor's key embedding as a source
    std::vector<LayerIndex> address;               ///< the receiver's Address layers (the target)
    std::vector<std::size_t> curve;         ///< learning-curve fit sizes (each < fit_items)
    ReaderHead reader;                      ///< the receiver's reader head (layer no_layer: none)
    tasks::lookup::Vocabulary vocabulary;   ///< before the key split (filtered for both tokenizers)
};

/// The words of the query-map's keys and values: the in-family vocabulary when one tokenizer reads
/// both prompts (no donor tokenizer, the receiver's own, or a tokenizer file of the same contents:
/// input_fingerprint, as resumes compare inputs), else the words both tokenizers keep (cross-family).
inline tasks::lookup::Vocabulary query_map_vocabulary(const Tokenizer& receiver, const Tokenizer* donor) {
    const auto contents = [](const std::string& path) {
        const std::string f = input_fingerprint(path);
        check(!f.empty(), "[query-map] cannot read the tokenizer file ", path);
        return f;
    };
    const bool same = donor == nullptr || donor == &receiver ||
                      (!receiver.source().empty() && !donor->source().empty() &&
                       (receiver.source() == donor->source() || contents(receiver.source()) == contents(donor->source())));
    return same ? tasks::lookup::in_family_vocabulary(receiver) : tasks::lookup::cross_family_vocabulary({&receiver, donor});
}

/// o.address and o.sources as `hylens experiment query-map` sets them. address: one block over
/// the receiver's layer groups of `receiver_group_size` (G<i>, a-b, layers joined by +; empty:
/// the circuit's Address layers when `roles` is given, else the receiver's last layer group);
/// sources: donor blocks over the donor's groups of `donor_group_size` (empty: every donor group
/// that has layers).
template <class Receiver, class Donor>
void set_query_map_blocks(QueryMapOptions& o, const Receiver& receiver, std::size_t receiver_group_size, const Donor& donor,
                          std::size_t donor_group_size, std::string_view address, std::string_view sources,
                          const std::optional<CircuitRoles>& roles) {
    // parse_blocks's errors name the block, not which of the two lists or models it was in.
    const auto blocks = [](std::string_view spec, const std::vector<std::vector<LayerIndex>>& groups, std::size_t layers,
                           const char* what) {
        try {
            return parse_blocks(spec, groups, layers);
        } catch (const Error& e) {
            fail("[query-map] ", what, " '", spec, "': ", e.what());
        }
    };
    const std::vector<std::vector<LayerIndex>> rg = group_layers(receiver.stack(), receiver_group_size);
    if (!address.empty()) {
        const std::vector<TransplantBlock> b = blocks(address, rg, receiver.num_layers(), "the receiver's address");
        check(b.size() == 1, "[query-map] the address '", address, "' names ", b.size(),
              " blocks; give one (join layers with +)");
        o.address = b.front().layers;
    } else if (roles) {
        o.address = roles->address;
    } else {
        check(!rg.empty() && !rg.back().empty(), "[query-map] the receiver has no layer group; name the address (--address; Python: address=)");
        o.address = rg.back();
    }
    const std::vector<std::vector<LayerIndex>> dg = group_layers(donor.stack(), donor_group_size);
    const std::string spec = sources.empty() ? every_group_block(dg) : std::string(sources);
    o.sources = spec.empty() ? std::vector<TransplantBlock>{} : blocks(spec, dg, donor.num_layers(), "the donor's sources");
}

struct QueryMapResult {
    std::size_t records = 0, written = 0, resumed = 0, items = 0;
    nlohmann::json fits = nlohmann::json::object();
};

namespace detail {

/// Mixer outputs at the final position of `layers`, concatenated layer-major ([|layers| * H]),
/// and (when key_pos >= 0) the embedding row at key_pos appended as one more block.
template <class Model>
std::vector<std::vector<float>> final_features(const Model& m, const std::vector<std::int64_t>& ids,
                                               const std::vector<std::vector<LayerIndex>>& blocks, long key_pos) {
    std::vector<SiteRef> sites;
    for (const auto& b : blocks)
        for (LayerIndex l : b) sites.push_back({mixer_site(m.stack(), l, MixerChannel::recurrent), l, Positions::last(), false});
    if (key_pos >= 0) sites.push_back(site::embed(Positions::at({key_pos})));
    // a layer listed in two blocks is captured once
    std::vector<SiteRef> unique;
    for (const SiteRef& s : sites) {
        bool seen = false;
        for (const SiteRef& u : unique) seen = seen || u.name() == s.name();
        if (!seen) unique.push_back(s);
    }
    const NamedTensors c = capture(m, TokenBatch(ids), unique);
    std::vector<std::vector<float>> out;
    for (const auto& b : blocks) {
        std::vector<float> f;
        for (LayerIndex l : b) {
            const auto v = flat(c.at(SiteRef{mixer_site(m.stack(), l, MixerChannel::recurrent), l, Positions::last(), false}.name()));
            f.insert(f.end(), v.begin(), v.end());
        }
        out.push_back(std::move(f));
    }
    if (key_pos >= 0) out.push_back(to_vector(c.at(site::embed().name())));
    return out;
}

/// The rows of `X` [n, d] permuted by a fixed PCG32 Fisher-Yates shuffle of `seed`.
inline std::vector<float> shuffled_rows(const std::vector<float>& X, std::size_t n, std::uint64_t seed) {
    const std::size_t d = X.size() / n;
    std::vector<std::size_t> perm(n);
    for (std::size_t i = 0; i < n; ++i) perm[i] = i;
    Pcg32 rng(seed, 0x7175657279ULL);  // "query"
    for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.below(static_cast<std::uint32_t>(i))]);
    std::vector<float> out(X.size());
    for (std::size_t i = 0; i < n; ++i)
        std::copy(X.begin() + static_cast<std::ptrdiff_t>(perm[i] * d), X.begin() + static_cast<std::ptrdiff_t>((perm[i] + 1) * d),
                  out.begin() + static_cast<std::ptrdiff_t>(i * d));
    return out;
}

inline nlohmann::json fit_json(const Ridge& r, std::size_t n) {
    return {{"fit_items", n}, {"in", r.in_dim()}, {"out", r.out_dim()}, {"r2", r.r2()}, {"lambda_exponent", r.lambda_exponent()}};
}

}  // namespace detail

/// One condition of the query-map study.
struct QueryMapCondition {
    std::string name, kind, source;  ///< kind: baseline, in_family, mean, map, self, shuffled
    std::size_t fit_items = 0;       ///< the fit size (0: not a fitted map, or every fit prompt)
};

inline std::vector<QueryMapCondition> query_map_conditions(const std::vector<std::string>& sources,
                                                           const std::vector<std::size_t>& curve) {
    std::vector<QueryMapCondition> out = {{"A", "baseline", "A"}, {"B", "baseline", "B"}, {"in_family", "in_family", ""},
                                          {"mean", "mean", ""}};
    for (const std::string& s : sources) {
        out.push_back({"map:" + s, "map", s});
        out.push_back({"self:" + s, "self", s});
        out.push_back({"shuffled:" + s, "shuffled", s});
    }
    for (const std::string& s : sources)
        for (std::size_t n : curve) out.push_back({"map:" + s + "@" + std::to_string(n), "map", s, n});
    return out;
}

/// Runs the study into opts.out. `recv` / `donor` may be the same model (then pass the same
/// tokenizer and format twice).
template <class RecvModel, class DonorModel>
QueryMapResult run_query_map_study(const RecvModel& recv, const Tokenizer& tok_r, const ChatFormat& fmt_r,
                                   const DonorModel& donor, const Tokenizer& tok_d, const ChatFormat& fmt_d,
                                   const QueryMapOptions& opt) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    const CheckFiniteScope finite_check;  // a NaN stops the study at its layer and site (stack/finite_check.hpp)
    // before the folder is made (the prompts check it too), naming which of the two it is
    require_chat_specials(tok_r, chat_specials(fmt_r), "the receiver's tokenizer");
    require_chat_specials(tok_d, chat_specials(fmt_d), "the donor's tokenizer");
    if (opt.circuit) check_circuit_model(*opt.circuit, recv.stack(), "query-map");
    namespace lk = tasks::lookup;
    check(!opt.address.empty(), "[query-map] no receiver Address layers");
    check(!opt.sources.empty() || opt.embedding_source,
          "[query-map] no donor source: no donor layer block (the default, every donor layer group, found none) and the "
          "key embedding left out (--no-embedding; Python: embedding=False); name donor blocks with --sources (Python: "
          "sources=) or keep the embedding");
    check(opt.fit_items >= 10 && opt.per_config >= 1 && !opt.seeds.empty(), "[query-map] need at least 10 fit prompts, "
                                                                            "one test pair per configuration and a seed");
    check_distinct_seeds(opt.seeds, "query-map");
    for (std::size_t n : opt.curve)
        check(n >= 10 && n < opt.fit_items, "[query-map] learning-curve size ", n, " must be in [10, ", opt.fit_items, ")");
    for (LayerIndex l : opt.address)
        check<ShapeError>(l < recv.num_layers() &&
                              find_mixer_site(recv.stack(), l, MixerChannel::recurrent).has_value(),
                          "[query-map] receiver layer ", l, " is no recurrent mixer layer");
    for (const TransplantBlock& b : opt.sources)
        for (LayerIndex l : b.layers)
            check<ShapeError>(l < donor.num_layers() &&
                                  find_mixer_site(donor.stack(), l, MixerChannel::recurrent).has_value(),
                              "[query-map] source ", b.name, ": donor layer ", l, " is no recurrent mixer layer");
    check_reader_head(recv.stack(), opt.reader, "query-map");
    std::vector<std::string> source_names;
    std::vector<std::vector<LayerIndex>> source_layers;
    for (const TransplantBlock& b : opt.sources) {
        source_names.push_back(b.name);
        source_layers.push_back(b.layers);
    }
    if (opt.embedding_source) source_names.push_back("embedding");
    const std::vector<QueryMapCondition> conds = query_map_conditions(source_names, opt.curve);
    for (std::size_t i = 0; i < conds.size(); ++i)  // before the folder is made
        for (std::size_t j = 0; j < i; ++j)
            check(conds[i].name != conds[j].name, "[query-map] the condition ", conds[i].name,
                  " comes twice: a source or a learning-curve size is listed twice");
    const std::string task = "query-map:" + lk::Variant{opt.style, opt.n_pairs}.name();
    nlohmann::json def = {{"task", task},          {"fit_items", opt.fit_items}, {"per_config", opt.per_config},
                          {"seeds", opt.seeds},    {"address", opt.address},     {"curve", opt.curve},
                          {"vocabulary", {{"keys", opt.vocabulary.keys}, {"values", opt.vocabulary.values}}},
                          {"reader", opt.reader.given() ? nlohmann::json{{"layer", opt.reader.layer}, {"head", opt.reader.head}}
                                                        : nlohmann::json(nullptr)},
                          {"conditions", nlohmann::json::array()}};
    for (std::size_t s = 0; s < opt.sources.size(); ++s)
        def["sources"].push_back({{"name", opt.sources[s].name}, {"layers", opt.sources[s].layers}});
    for (const QueryMapCondition& c : conds) def["conditions"].push_back(c.name);
    StudyFolder folder(opt.folder("query-map", def));

    const std::size_t Hr = recv.config().hidden;
    const Site recv_site = mixer_site(recv.stack(), opt.address.front(), MixerChannel::recurrent);
    QueryMapResult res;
    RunOptions ro;
    ro.last_only = true;
    if (opt.reader.given()) ro.capture = {site::attn_probs(opt.reader.layer, Positions::last())};
    // The test pairs of every seed, kept in both tokenizations (tokenizers only, no forward),
    // drawn first so that every key of this shard is asked before any forward: a resumed
    // record the study does not make stops it here (StudyFolder::check_resumed_records).
    struct TestPairs {
        lk::DonorHostSet d, r;
        std::vector<std::pair<const lk::DonorHostItem*, const lk::DonorHostItem*>> both;  // (receiver, donor)
    };
    std::vector<TestPairs> tests;
    tests.reserve(opt.seeds.size());  // `both` points into d and r: no reallocation
    for (std::size_t si = 0, ordinal = 0; si < opt.seeds.size(); ++si) {
        const std::uint64_t seed = opt.seeds[si];
        const lk::Vocabulary vtest{lk::key_split(opt.vocabulary.keys, seed).test, opt.vocabulary.values};
        tests.push_back({lk::donor_host_pairs(tok_d, fmt_d, opt.style, vtest, opt.per_config, seed, opt.n_pairs),
                         lk::donor_host_pairs(tok_r, fmt_r, opt.style, vtest, opt.per_config, seed, opt.n_pairs), {}});
        TestPairs& t = tests.back();
        for (std::size_t jr = 0, jd = 0; jr < t.r.items.size(); ++jr) {
            while (jd < t.d.items.size() && t.d.items[jd].index < t.r.items[jr].index) ++jd;
            if (jd < t.d.items.size() && t.d.items[jd].index == t.r.items[jr].index) t.both.push_back({&t.r.items[jr], &t.d.items[jd]});
        }
        for (const auto& [rp, dp] : t.both)
            if (folder.mine(ordinal++))
                for (const QueryMapCondition& c : conds) (void)folder.done({task, seed, rp->index, c.name});
    }
    folder.check_resumed_records();

    std::size_t ordinal = 0;
    for (std::size_t si = 0; si < opt.seeds.size(); ++si) {
        const std::uint64_t seed = opt.seeds[si];
        const lk::KeySplit split = lk::key_split(opt.vocabulary.keys, seed);
        const lk::Vocabulary vfit{split.fit, opt.vocabulary.values};
        // The fit set: the same dictionaries in both models' formats.
        const auto fit_d = lk::query_items(tok_d, fmt_d, opt.style, vfit, opt.fit_items, seed, "fit", opt.n_pairs);
        const auto fit_r = lk::query_items(tok_r, fmt_r, opt.style, vfit, opt.fit_items, seed, "fit", opt.n_pairs);
        const auto& [test_d, test_r, both] = tests[si];
        std::size_t mine = 0;
        for (std::size_t i = 0; i < both.size(); ++i) mine += folder.mine(ordinal + i);
        Progress progress(mine * conds.size(), "query-map seed " + std::to_string(seed), opt.progress);
        progress.note("fitting " + std::to_string(source_names.size() * (2 + opt.curve.size())) + " maps on " +
                      std::to_string(opt.fit_items) + " prompts (no record until they are fitted)");
        const double fit_start = progress.seconds();
        const std::size_t S = source_names.size();
        std::vector<std::vector<float>> X(S);
        std::vector<float> Tg;
        for (std::size_t i = 0; i < opt.fit_items; ++i) {
            const auto& key = fit_d[i].tokens.keys[fit_d[i].query];
            check<ShapeError>(key.size() == 1, "[query-map] the queried key of fit prompt ", i, " is not one token");
            auto f = detail::final_features(donor, fit_d[i].tokens.ids, source_layers,
                                            opt.embedding_source ? static_cast<long>(key.front()) : -1);
            for (std::size_t s = 0; s < S; ++s) X[s].insert(X[s].end(), f[s].begin(), f[s].end());
            const auto t = detail::final_features(recv, fit_r[i].tokens.ids, {opt.address}, -1);
            Tg.insert(Tg.end(), t[0].begin(), t[0].end());
        }
        const std::size_t n = opt.fit_items;
        std::vector<Ridge> maps, shuffled;
        std::vector<std::vector<Ridge>> curves(S);
        nlohmann::json fits = nlohmann::json::object();
        const std::vector<float> Tshuf = detail::shuffled_rows(Tg, n, seed);
        for (std::size_t s = 0; s < S; ++s) {
            maps.push_back(fit_query_map(X[s], Tg, n));
            shuffled.push_back(fit_query_map(X[s], Tshuf, n));
            fits[source_names[s]] = detail::fit_json(maps.back(), n);
            fits["shuffled:" + source_names[s]] = detail::fit_json(shuffled.back(), n);
            const std::size_t dx = X[s].size() / n;
            for (std::size_t m : opt.curve) {
                const std::vector<float> Xm(X[s].begin(), X[s].begin() + static_cast<std::ptrdiff_t>(m * dx));
                const std::vector<float> Tm(Tg.begin(), Tg.begin() + static_cast<std::ptrdiff_t>(m * Tg.size() / n));
                curves[s].push_back(fit_query_map(Xm, Tm, m));
                fits[source_names[s] + "@" + std::to_string(m)] = detail::fit_json(curves[s].back(), m);
            }
        }
        std::vector<float> mean_target(Tg.size() / n, 0.0f);
        {
            std::vector<double> acc(mean_target.size(), 0.0);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t c = 0; c < acc.size(); ++c) acc[c] += Tg[i * acc.size() + c];
            for (std::size_t c = 0; c < acc.size(); ++c) mean_target[c] = static_cast<float>(acc[c] / static_cast<double>(n));
        }
        res.fits[std::to_string(seed)] = fits;
        progress.exclude(progress.seconds() - fit_start);  // the fits made no record
        for (const auto& [rp, dp] : both) {
            const lk::DonorHostItem& ri = *rp;
            const lk::DonorHostItem& di = *dp;
            if (!folder.mine(ordinal++)) continue;
            ++res.items;
            const TransplantItem it = transplant_item(ri);
            const TokenBatch A(it.a), B(it.b);
            const nlohmann::json extra = donor_host_fields(ri, it);
            const long kA = static_cast<long>(di.a.keys[di.ia].front()), kB = static_cast<long>(di.a.keys[di.ib].front());
            std::vector<std::vector<float>> fA, fB;
            std::vector<nlohmann::json> recs;
            for (std::size_t k = 0; k < conds.size(); ++k) {
                const QueryMapCondition& c = conds[k];
                if (folder.done({task, seed, ri.index, c.name})) continue;
                std::size_t s = 0;
                while (s < S && source_names[s] != c.source) ++s;
                const auto set = [&](const std::vector<float>& mapped) {
                    return score_run(recv, run(recv, B, set_final(opt.address, mapped, Hr, recv_site), ro), it, opt.reader);
                };
                const auto feature = [&](bool a) -> const std::vector<float>& {
                    auto& f = a ? fA : fB;
                    if (f.empty())
                        f = detail::final_features(donor, a ? di.a.ids : di.b_ids, source_layers,
                                                   opt.embedding_source ? (a ? kA : kB) : -1);
                    return f[s];
                };
                TransplantScore sc;
                if (c.kind == "baseline") sc = score_run(recv, run(recv, c.source == "A" ? A : B, {}, ro), it, opt.reader);
                else if (c.kind == "in_family")
                    sc = score_run(recv, transplant_mixer(recv, A, B, opt.address, Positions::last(), MixerChannel::recurrent, ro).host,
                                   it, opt.reader);
                else if (c.kind == "mean") sc = set(mean_target);
                else if (c.kind == "map" && c.fit_items == 0) sc = set(maps[s].apply(feature(true)));
                else if (c.kind == "self") sc = set(maps[s].apply(feature(false)));
                else if (c.kind == "shuffled") sc = set(shuffled[s].apply(feature(true)));
                else {
                    std::size_t ci = 0;
                    while (opt.curve[ci] != c.fit_items) ++ci;
                    sc = set(curves[s][ci].apply(feature(true)));
                }
                nlohmann::json fields = {{"kind", c.kind}, {"block", c.source}};
                if (c.kind == "map" || c.kind == "self" || c.kind == "shuffled")
                    fields["fit_items"] = c.fit_items ? c.fit_items : opt.fit_items;
                recs.push_back(score_record(task, seed, ri.index, c.name, k, fields, sc, extra));
            }
            if (!recs.empty()) folder.append(recs);
            progress.add(conds.size());
        }
        progress.finish();
        res.fits[std::to_string(seed)]["test_pairs"] = {{"drawn", test_r.drawn},
                                                        {"receiver_kept", test_r.items.size()},
                                                        {"donor_kept", test_d.items.size()},
                                                        {"both_kept", both.size()}};
    }
    const std::vector<nlohmann::json> records = folder.records();
    write_transplant_summaries(opt.out, records);
    folder.finish({{"fits", res.fits}});
    res.records = records.size();
    res.written = folder.written();
    res.resumed = folder.resumed();
    return res;
}

}  // namespace hylens::experiments
