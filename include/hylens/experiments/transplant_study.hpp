#pragma once
// The transplant study (protocols.md §A.8 exp22, §A.9 exp32) on donor/host pairs of one
// dictionary (tasks/lookup/pairs.hpp): run A (the donor) asks entry ia, run B (the host) asks
// entry ib. Conditions, each scored on the host's final position (interp/metrics.hpp
// score_transplant: ansA, ansB, dAB, and the reader head's attention attA / attB on entries A
// and B, captured in the same run):
//
//   A, B                     the donor and the host run alone (baselines);
//   mixer:<block>@<pos>      the mixer outputs of every layer of the block at the position set,
//                            copied from run A into run B (transplant_mixer; exp22, exp32-A);
//   layer:<block>@<pos>      the layer writes resid_post - resid_pre instead (transplant_layer_write);
//   mixer_in:<block>@<pos>   each layer's mixer input (its normed hidden state; exp32-D(i));
//   resid_pre:<block>@<pos>  the residual entering the block's first layer (exp32-D(ii));
//   A/without:<U>            run A with the recurrent mixers of block U zeroed (exp32-C: the
//                            donor's own answer under the removal);
//   mixer:<block>@<pos>/without:<U>  the mixer transplant from that donor (exp32-C);
//   split                    run B prefilled over T - 1 tokens, then its final token (the control
//                            of the state transplants: no copy);
//   state:<block>            as split, with the recurrent state of the block's layers copied from
//                            A's prefill (transplant_state_run; exp32-B);
//   state+conv:<block>       the state and the conv window.
//
// Position sets: final {T-1}; question [qstart, T); question-nofinal [qstart, T-1) (exp32-A(iii));
// dictionary [0, qstart); all [0, T).
// Blocks: a layer group "G<i>" (interp/reader_search.hpp layer_groups), a layer "12", a range
// "12-14", or a union joined by '+' ("G1+G2").
//
// Records (one per (task, seed, item, condition), through StudyFolder): the key, the condition's
// kind / block / layers / positions (/ without, without_layers), ia, ib, the answer ids, T,
// qstart, the entries' spans, ansA, ansB, dAB, attA, attB (null without a reader), and with
// watched heads (§A.8 --watch) "watch": each head's attA / attB. The summary (summary.json /
// summary.csv) holds, per (task, condition), the mean of each score with its 95 % bootstrap
// interval (interp/metric_intervals.hpp transplant_intervals), computed from the records alone.
// Sharding numbers the (seed, item) units in study order.

#include <algorithm>   // std::sort, std::find
#include <cmath>       // std::isnan, std::isfinite, std::sqrt
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem
#include <iterator>    // std::size
#include <limits>      // std::numeric_limits
#include <map>         // std::map
#include <optional>    // std::optional
#include <set>         // std::set
#include <sstream>     // std::ostringstream
#include <string>      // std::string
#include <string_view> // std::string_view
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../interp/circuit.hpp"  // CircuitRoles, check_circuit_model
#include "../interp/metric_intervals.hpp"
#include "../interp/metrics.hpp"
#include "../interp/reader_search.hpp"
#include "../interp/transplant.hpp"
#include "../stack/finite_check.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "progress.hpp"
#include "reader_head.hpp"
#include "records.hpp"
#include "study_folder.hpp"

namespace hylens::experiments {

// ---- conditions --------------------------------------------------------------------------

enum class TransplantKind { baseline, mixer, layer, mixer_in, resid_pre, upstream, split, state, state_conv };

inline std::string kind_name(TransplantKind k) {
    switch (k) {
        case TransplantKind::baseline: return "baseline";
        case TransplantKind::mixer: return "mixer";
        case TransplantKind::layer: return "layer";
        case TransplantKind::mixer_in: return "mixer_in";
        case TransplantKind::resid_pre: return "resid_pre";
        case TransplantKind::upstream: return "upstream";
        case TransplantKind::split: return "split";
        case TransplantKind::state: return "state";
        case TransplantKind::state_conv: return "state+conv";
    }
    return "?";
}
/// The kinds a user picks (--kind): mixer, layer, mixer_in, resid_pre, upstream, state, state+conv.
inline TransplantKind parse_transplant_kind(std::string_view s) {
    if (s == "mixer") return TransplantKind::mixer;
    if (s == "layer") return TransplantKind::layer;
    if (s == "mixer_in") return TransplantKind::mixer_in;
    if (s == "resid_pre") return TransplantKind::resid_pre;
    if (s == "upstream") return TransplantKind::upstream;
    if (s == "state") return TransplantKind::state;
    if (s == "state+conv") return TransplantKind::state_conv;
    fail("[transplant] unknown kind '", s, "' (mixer, layer, mixer_in, resid_pre, upstream, state, state+conv)");
}
/// The kinds that copy rows of a donor run at a position set (the others copy a cache).
inline bool copies_rows(TransplantKind k) {
    return k == TransplantKind::mixer || k == TransplantKind::layer || k == TransplantKind::mixer_in ||
           k == TransplantKind::resid_pre || k == TransplantKind::upstream;
}

enum class PositionSet { final_position, question, question_nofinal, dictionary, all };

inline std::string position_set_name(PositionSet p) {
    switch (p) {
        case PositionSet::final_position: return "final";
        case PositionSet::question: return "question";
        case PositionSet::question_nofinal: return "question-nofinal";
        case PositionSet::dictionary: return "dictionary";
        case PositionSet::all: return "all";
    }
    return "?";
}
inline PositionSet parse_position_set(std::string_view s) {
    if (s == "final") return PositionSet::final_position;
    if (s == "question") return PositionSet::question;
    if (s == "question-nofinal") return PositionSet::question_nofinal;
    if (s == "dictionary" || s == "dict") return PositionSet::dictionary;
    if (s == "all") return PositionSet::all;
    fail("[transplant] unknown position set '", s, "' (final, question, question-nofinal, dictionary, all)");
}
/// The positions of a set in a prompt of T tokens whose question starts at qstart.
inline Positions positions_of(PositionSet p, std::size_t qstart, std::size_t T) {
    check<ShapeError>(qstart > 0 && qstart < T, "[transplant] qstart ", qstart, " is not inside a prompt of ", T, " tokens");
    switch (p) {
        case PositionSet::final_position: return Positions::last();
        case PositionSet::question: return Positions::range(static_cast<std::int64_t>(qstart), static_cast<std::int64_t>(T));
        case PositionSet::question_nofinal:
            check<ShapeError>(qstart + 1 < T, "[transplant] question-nofinal: the question starts at the final position ",
                              qstart, " of ", T, " tokens (the set is empty)");
            return Positions::range(static_cast<std::int64_t>(qstart), static_cast<std::int64_t>(T) - 1);
        case PositionSet::dictionary: return Positions::range(0, static_cast<std::int64_t>(qstart));
        case PositionSet::all: return Positions::all();
    }
    return Positions::all();
}

/// A named set of layers transplanted together.
struct TransplantBlock {
    std::string name;
    std::vector<LayerIndex> layers;
};

/// One '+'-joined part of a block as written: a layer group G<index>, or the layers lo-hi
/// (a single layer: lo == hi).
struct BlockPart {
    bool group = false;
    std::size_t lo = 0, hi = 0;  ///< group: lo is the group index
};

/// A block as written: its name (the text) and its parts.
struct BlockSpec {
    std::string name;
    std::vector<BlockPart> parts;
};

/// Parses the syntax of a block list "G0,G1+G2,12-14,3" without a model: malformed numbers,
/// empty blocks and backwards ranges are errors here, so a command line can refuse them before
/// it loads a model (parse_blocks checks the rest against the model).
inline std::vector<BlockSpec> parse_block_spec(std::string_view spec) {
    std::vector<BlockSpec> out;
    std::size_t b = 0;
    while (b <= spec.size()) {
        const std::size_t e = std::min(spec.find(',', b), spec.size());
        const std::string_view item = spec.substr(b, e - b);
        check(!item.empty(), "[blocks] empty block in '", spec, "'");
        const auto number = [&](std::string_view s) {
            check(!s.empty() && s.size() < 7 && s.find_first_not_of("0123456789") == std::string_view::npos,
                  "[blocks] block '", item, "': '", s, "' is not a layer number, a range a-b or a group G<i>");
            return static_cast<std::size_t>(std::stoul(std::string(s)));
        };
        BlockSpec blk{std::string(item), {}};
        std::size_t pb = 0;
        while (pb <= item.size()) {
            const std::size_t pe = std::min(item.find('+', pb), item.size());
            const std::string_view part = item.substr(pb, pe - pb);
            if (!part.empty() && part[0] == 'G') {
                const std::size_t g = number(part.substr(1));
                blk.parts.push_back({true, g, g});
            } else if (const std::size_t dash = part.find('-'); dash != std::string_view::npos) {
                const std::size_t lo = number(part.substr(0, dash)), hi = number(part.substr(dash + 1));
                check(lo <= hi, "[blocks] block '", item, "': range ", lo, "-", hi, " runs backwards (write ", hi, "-", lo, ")");
                blk.parts.push_back({false, lo, hi});
            } else {
                const std::size_t l = number(part);
                blk.parts.push_back({false, l, l});
            }
            pb = pe + 1;
        }
        out.push_back(std::move(blk));
        b = e + 1;
    }
    return out;
}

/// Parses a block list "G0,G1+G2,12-14,3" (parse_block_spec) against the model's layer groups
/// (`groups[i]` is G<i>) and its layer count; layers of a union are sorted and deduplicated.
inline std::vector<TransplantBlock> parse_blocks(std::string_view spec, const std::vector<std::vector<LayerIndex>>& groups,
                                                 std::size_t num_layers) {
    std::vector<TransplantBlock> out;
    for (const BlockSpec& bs : parse_block_spec(spec)) {
        TransplantBlock blk{bs.name, {}};
        for (const BlockPart& part : bs.parts) {
            if (part.group) {
                const std::size_t g = part.lo;
                check(g < groups.size(), "[blocks] block '", bs.name, "': the model has ", groups.size(),
                      " layer groups (G0..G", groups.empty() ? 0 : groups.size() - 1, ")");
                check(!groups[g].empty(), "[blocks] block '", bs.name, "': group G", g, " has no layers");
                blk.layers.insert(blk.layers.end(), groups[g].begin(), groups[g].end());
            } else if (part.lo != part.hi) {
                check(part.hi < num_layers, "[blocks] block '", bs.name, "': range ", part.lo, "-", part.hi,
                      " is not inside the model's ", num_layers, " layers (0-", num_layers - 1, ")");
                for (LayerIndex l = part.lo; l <= part.hi; ++l) blk.layers.push_back(l);
            } else {
                check(part.lo < num_layers, "[blocks] block '", bs.name, "': layer ", part.lo, " is not one of the model's ",
                      num_layers, " layers (0-", num_layers - 1, ")");
                blk.layers.push_back(part.lo);
            }
        }
        std::sort(blk.layers.begin(), blk.layers.end());
        blk.layers.erase(std::unique(blk.layers.begin(), blk.layers.end()), blk.layers.end());
        out.push_back(std::move(blk));
    }
    return out;
}

struct TransplantCondition {
    std::string name;  ///< the record's "condition"
    TransplantKind kind = TransplantKind::baseline;
    std::string block;         ///< block name ("" for split); "A" / "B" for the baselines
    std::vector<LayerIndex> layers{};
    PositionSet positions = PositionSet::final_position;  ///< the kinds that copy rows (copies_rows)
    TransplantBlock without{};  ///< upstream kind and its donor baseline: the donor's zeroed mixers
};

/// The conditions of a study, in order: A, B, then for each kind: mixer, layer, mixer_in and
/// resid_pre: each block at each position set; upstream: for each removed block U of
/// `upstream`, "A/without:U" (the donor run with U's mixers zeroed) then each block at each
/// position set ("mixer:<block>@<set>/without:U"; every layer of U must come before the
/// block's first); state kinds: split first, then each block.
inline std::vector<TransplantCondition> transplant_conditions(const std::vector<TransplantKind>& kinds,
                                                              const std::vector<TransplantBlock>& blocks,
                                                              const std::vector<PositionSet>& positions,
                                                              const std::vector<TransplantBlock>& upstream = {}) {
    std::vector<TransplantCondition> out{{"A", TransplantKind::baseline, "A"}, {"B", TransplantKind::baseline, "B"}};
    const bool wants_upstream = std::find(kinds.begin(), kinds.end(), TransplantKind::upstream) != kinds.end();
    check(wants_upstream == !upstream.empty(), "[transplant] ",
          wants_upstream ? "the upstream kind needs the blocks to remove from the donor (--upstream)"
                         : "blocks to remove from the donor (--upstream) are read by the upstream kind alone");
    bool split = false;
    for (TransplantKind k : kinds) {
        check(k != TransplantKind::baseline && k != TransplantKind::split, "[transplant] ", kind_name(k),
              " is not a transplant kind");
        if (k == TransplantKind::upstream) {
            for (const TransplantBlock& u : upstream) {
                const std::string suffix = "/without:" + u.name;
                out.push_back({"A" + suffix, TransplantKind::baseline, "A", {}, PositionSet::final_position, u});
                for (const TransplantBlock& b : blocks) {
                    // Upstream: every removed layer before the block's first. A shared layer would
                    // copy its zeroed rows; a later one would leave the donor rows as they are.
                    check(!u.layers.empty() && !b.layers.empty() && u.layers.back() < b.layers.front(), "[transplant] ",
                          "--upstream ", u.name, " is not upstream of block ", b.name, ": its layer ",
                          u.layers.empty() ? 0 : u.layers.back(), " is not before the block's first layer ",
                          b.layers.empty() ? 0 : b.layers.front(), " (exp32-C removes blocks before the transplanted one)");
                    for (PositionSet p : positions)
                        out.push_back({"mixer:" + b.name + "@" + position_set_name(p) + suffix, k, b.name, b.layers, p, u});
                }
            }
        } else if (copies_rows(k)) {
            for (const TransplantBlock& b : blocks)
                for (PositionSet p : positions)
                    out.push_back({kind_name(k) + ":" + b.name + "@" + position_set_name(p), k, b.name, b.layers, p});
        } else {
            if (!split) out.push_back({"split", TransplantKind::split, ""});
            split = true;
            for (const TransplantBlock& b : blocks) out.push_back({kind_name(k) + ":" + b.name, k, b.name, b.layers});
        }
    }
    for (std::size_t i = 0; i < out.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
            check(out[i].name != out[j].name, "[transplant] condition ", out[i].name, " is listed twice");
    return out;
}

// ---- one item ----------------------------------------------------------------------------

/// What one donor/host item needs: both prompts, the two answers, the two entries' spans.
struct TransplantItem {
    std::vector<std::int64_t> a, b;
    std::int64_t value_a = 0, value_b = 0;
    Span entry_a{}, entry_b{};
    std::size_t qstart = 0;
};

inline TransplantItem transplant_item(const tasks::lookup::DonorHostItem& it) {
    TransplantItem t;
    t.a = it.a.ids;
    t.b = it.b_ids;
    t.value_a = it.answer_a;
    t.value_b = it.answer_b;
    t.entry_a = contiguous_span(it.a.entries[it.ia]);
    t.entry_b = contiguous_span(it.a.entries[it.ib]);
    t.qstart = it.a.qstart;
    return t;
}

/// The item fields of every record of a donor/host pair: the entries asked (ia, ib), the two
/// answers' ids, and what attA / attB and the position sets were computed over, so they can be
/// checked from the record alone: T (both prompts' length), qstart, and the token spans
/// [begin, end) of entries A and B.
inline nlohmann::json donor_host_fields(const tasks::lookup::DonorHostItem& di, const TransplantItem& it) {
    return {{"ia", di.ia},
            {"ib", di.ib},
            {"answer_a", di.answer_a},
            {"answer_b", di.answer_b},
            {"T", it.a.size()},
            {"qstart", it.qstart},
            {"entry_a", {it.entry_a.first, it.entry_a.second}},
            {"entry_b", {it.entry_b.first, it.entry_b.second}}};
}

/// The capture of each distinct layer of the reader and the watched heads: their attention
/// rows from the final position.
inline std::vector<SiteRef> head_captures(const ReaderHead& reader, const std::vector<ReaderHead>& watch) {
    std::vector<ReaderHead> heads{reader};
    heads.insert(heads.end(), watch.begin(), watch.end());
    std::vector<SiteRef> out;
    std::vector<LayerIndex> seen;
    for (const ReaderHead& h : heads)
        if (h.given() && std::find(seen.begin(), seen.end(), h.layer) == seen.end()) {
            seen.push_back(h.layer);
            out.push_back(site::attn_probs(h.layer, Positions::last()));
        }
    return out;
}

/// A head's probability row from the final position, out of a run that captured head_captures
/// (nullptr without a head); Tk is set to its length.
inline const float* head_row(const RunResult& r, const ReaderHead& h, std::size_t& Tk) {
    Tk = 0;
    if (!h.given()) return nullptr;
    return probs_row(r.captures.at(site::attn_probs(h.layer, Positions::last()).name()), 0, h.head, 0, Tk);
}

/// The score of the host's final position of a run (logits [1, 1 or T, V]), with the reader's
/// row from the run's captures when a reader is given.
template <class Model>
TransplantScore score_run(const Model& model, const RunResult& r, const TransplantItem& it, const ReaderHead& reader) {
    std::size_t Tk = 0;
    const float* probs = head_row(r, reader, Tk);
    const std::size_t rows = r.logits.shape()[1];
    return score_transplant(logits_row(r.logits, 0, static_cast<long>(rows) - 1), model.config().vocab, it.value_a,
                            it.value_b, probs, Tk, it.entry_a, it.entry_b);
}

/// The attention of a watched head from the host's final position on entries A and B
/// (protocols.md §A.8 --watch), as attA / attB of the reader.
struct WatchedAttention {
    ReaderHead head;
    double attA = 0.0, attB = 0.0;
};
inline std::vector<WatchedAttention> watched_attention(const RunResult& r, const TransplantItem& it,
                                                       const std::vector<ReaderHead>& watch) {
    std::vector<WatchedAttention> out;
    for (const ReaderHead& h : watch) {
        std::size_t Tk = 0;
        const float* probs = head_row(r, h, Tk);
        out.push_back({h, attention_mass(probs, Tk, it.entry_a), attention_mass(probs, Tk, it.entry_b)});
    }
    return out;
}

/// The sites whose rows a condition copies from the donor's clean run (mixer, layer, mixer_in,
/// resid_pre), at `at`; none for the other kinds (the baselines, the upstream kind's donor runs
/// with mixers removed, the state kinds).
template <class Model>
std::vector<SiteRef> clean_donor_sites(const Model& model, const TransplantCondition& c, const Positions& at) {
    std::vector<SiteRef> sites;
    switch (c.kind) {
        case TransplantKind::mixer:
            for (LayerIndex l : c.layers) sites.push_back({mixer_site(model.stack(), l, MixerChannel::recurrent), l, at, false});
            break;
        case TransplantKind::layer:
            for (LayerIndex l : c.layers) sites.push_back(site::layer_write(l, at));
            break;
        case TransplantKind::mixer_in:
            for (LayerIndex l : c.layers) sites.push_back(site::mixer_in(l, at));
            break;
        case TransplantKind::resid_pre: sites.push_back(site::resid_pre(c.layers.front(), at)); break;
        default: break;
    }
    return sites;
}

/// What the conditions of one item share, computed once for all of them: the donor's clean run,
/// captured at every position at each site a condition copies rows from (each condition's rows
/// are gathered from it: the floats its own donor run would hold), and the host's and the
/// donor's caches over every token but the last (each state condition edits a copy). Without
/// it every condition ran its own donor forward and the state conditions two prefills each,
/// the same every time: 40 % of a transplant study's time. The records are bitwise those of a
/// run per condition (test_studies_transplant.cpp).
template <class Model>
struct TransplantItemRuns {
    using Cache = typename Model::cache_type;
    NamedTensors donor;                          ///< [1, T, D] per site name
    std::optional<Cache> host_prefix, donor_prefix;  ///< after tokens [0, T - 2], made at first use

    /// Captures the donor run `it.a` at every site that `conds` copy rows from.
    TransplantItemRuns(const Model& model, const TransplantItem& it, const std::vector<const TransplantCondition*>& conds) {
        std::vector<SiteRef> sites;
        std::set<std::string> names;
        for (const TransplantCondition* c : conds)
            for (SiteRef s : clean_donor_sites(model, *c, Positions::all()))
                if (names.insert(s.name()).second) sites.push_back(std::move(s));
        if (!sites.empty()) donor = capture(model, TokenBatch(it.a), sites);
    }
};

/// The host run of one condition on one item, with `o`'s captures (last_only is set): logits
/// [1, 1 or T, V] whose last row is the host's final position. With `shared`, the donor's
/// rows and the prefix caches come from it (the same floats).
template <class Model>
RunResult transplant_condition_run(const Model& model, const TransplantItem& it, const TransplantCondition& c,
                                   RunOptions o, TransplantItemRuns<Model>* shared = nullptr) {
    check<ShapeError>(it.a.size() == it.b.size(), "[transplant] donor and host have ", it.a.size(), " and ", it.b.size(),
                      " tokens");
    o.last_only = true;
    const TokenBatch A(it.a), B(it.b);
    const auto at = [&] { return positions_of(c.positions, it.qstart, it.b.size()); };
    const std::size_t T = it.b.size();
    if (shared != nullptr) {
        // at() checks the item's question start: only for the kinds that copy rows, as below.
        if (const std::vector<SiteRef> sites = copies_rows(c.kind) ? clean_donor_sites(model, c, at()) : std::vector<SiteRef>{};
            !sites.empty()) {
            if (c.kind == TransplantKind::mixer) check_distinct_layers(c.layers, "transplant_mixer");
            if (c.kind == TransplantKind::layer) check_distinct_layers(c.layers, "transplant_layer_write");
            std::vector<Intervention> iv;
            for (const SiteRef& site : sites) {
                const NamedTensor& all = shared->donor.at(site.name());  // [1, T, D]
                const std::size_t D = all.shape()[2];
                std::vector<float> rows;
                for (const std::size_t t : site.positions.resolve(T))
                    rows.insert(rows.end(), all.data() + t * D, all.data() + (t + 1) * D);
                iv.push_back(patch(site, std::move(rows)));
            }
            return run(model, B, iv, o);
        }
        if (c.kind == TransplantKind::split || c.kind == TransplantKind::state || c.kind == TransplantKind::state_conv) {
            check<ShapeError>(T >= 2, "[transplant_state] the prompts need at least 2 tokens");
            if (!shared->host_prefix) {
                shared->host_prefix.emplace(state_after(model, B, T - 2));
                shared->donor_prefix.emplace(state_after(model, A, T - 2));
            }
            auto hc = *shared->host_prefix;
            copy_recurrent(hc, *shared->donor_prefix, c.kind == TransplantKind::split ? std::vector<LayerIndex>{} : c.layers,
                           c.kind == TransplantKind::state_conv);
            return run_last_token(model, hc, B, o);
        }
    }
    const std::vector<Intervention> without = zero_mixers(model.stack(), c.without.layers);
    switch (c.kind) {
        case TransplantKind::baseline: return run(model, c.block == "A" ? A : B, c.block == "A" ? without : std::vector<Intervention>{}, o);
        case TransplantKind::mixer: return transplant_mixer(model, A, B, c.layers, at(), MixerChannel::recurrent, o).host;
        case TransplantKind::upstream:
            return transplant_mixer(model, A, B, c.layers, at(), MixerChannel::recurrent, o, without).host;
        case TransplantKind::layer: return transplant_layer_write(model, A, B, c.layers, at(), o).host;
        case TransplantKind::mixer_in:
        case TransplantKind::resid_pre: return transplant_sites(model, A, B, clean_donor_sites(model, c, at()), o).host;
        case TransplantKind::split: return transplant_state_run(model, A, B, {}, false, o);
        case TransplantKind::state:
        case TransplantKind::state_conv:
            return transplant_state_run(model, A, B, c.layers, c.kind == TransplantKind::state_conv, o);
    }
    fail("[transplant] unknown condition kind");
}

/// Runs one condition on one item and scores it with the reader.
template <class Model>
TransplantScore run_transplant_condition(const Model& model, const TransplantItem& it, const TransplantCondition& c,
                                         const ReaderHead& reader) {
    RunOptions o;
    o.capture = head_captures(reader, {});
    return score_run(model, transplant_condition_run(model, it, c, o), it, reader);
}

/// The fields that name a condition in its records: kind, block, layers, positions for the
/// kinds that copy rows, and for the upstream kind and its donor baseline `without` (the removed
/// block's name) and `without_layers`.
inline nlohmann::json condition_fields(const TransplantCondition& c) {
    nlohmann::json f = {{"kind", kind_name(c.kind)}, {"block", c.block}, {"layers", c.layers}};
    if (copies_rows(c.kind)) f["positions"] = position_set_name(c.positions);
    if (!c.without.layers.empty()) {
        f["without"] = c.without.name;
        f["without_layers"] = c.without.layers;
    }
    return f;
}

/// A head's label in records and summaries: "L3H1".
inline std::string head_label(const ReaderHead& h) {
    return "L" + std::to_string(h.layer) + "H" + std::to_string(h.head);
}

/// The record field "watch": per watched head, its layer, head and attA / attB.
inline nlohmann::json watch_field(const std::vector<WatchedAttention>& w) {
    nlohmann::json out = nlohmann::json::array();
    for (const WatchedAttention& a : w)
        out.push_back({{"layer", a.head.layer}, {"head", a.head.head}, {"attA", a.attA}, {"attB", a.attB}});
    return out;
}

/// The record of one (item, condition): the key, the condition's `order` in the study (the
/// summary's row order), the condition's fields, `extra` (item fields), then the scores.
inline nlohmann::json score_record(const std::string& task, std::uint64_t seed, std::size_t item, const std::string& condition,
                                   std::size_t order, const nlohmann::json& fields, const TransplantScore& s,
                                   const nlohmann::json& extra = nlohmann::json::object()) {
    const auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
    nlohmann::json r = {{"task", task}, {"seed", seed}, {"item", item}, {"condition", condition}, {"order", order}};
    for (auto e = fields.begin(); e != fields.end(); ++e) r[e.key()] = e.value();
    for (auto e = extra.begin(); e != extra.end(); ++e) r[e.key()] = e.value();
    r["ansA"] = s.ansA;
    r["ansB"] = s.ansB;
    r["dAB"] = num(s.dAB);
    r["attA"] = num(s.attA);
    r["attB"] = num(s.attB);
    return r;
}

/// score_record for a TransplantCondition.
inline nlohmann::json transplant_record(const std::string& task, std::uint64_t seed, std::size_t item,
                                        const TransplantCondition& c, std::size_t order, const TransplantScore& s,
                                        const nlohmann::json& extra = nlohmann::json::object()) {
    return score_record(task, seed, item, c.name, order, condition_fields(c), s, extra);
}

/// The scores of a record (null attention: NaN).
inline TransplantScore score_of_record(const nlohmann::json& r) {
    const auto num = [&](const char* k) {
        const nlohmann::json& v = r.at(k);
        return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
    };
    TransplantScore s;
    s.ansA = r.at("ansA").get<bool>();
    s.ansB = r.at("ansB").get<bool>();
    s.dAB = num("dAB");
    s.attA = num("attA");
    s.attB = num("attB");
    return s;
}

// ---- summaries ---------------------------------------------------------------------------

/// A score's mean in each seed (NaN where the seed has no finite value) and the sample
/// standard deviation (n - 1) of the finite ones (NaN below two): the protocol's "over three
/// seeds: mean ± sd" beside the pooled bootstrap interval.
struct SeedSpread {
    std::vector<double> means;
    double sd = std::numeric_limits<double>::quiet_NaN();
};
template <class Field>
SeedSpread seed_spread(const std::vector<std::vector<TransplantScore>>& seeds, Field field) {
    SeedSpread s;
    std::vector<double> finite;
    for (const auto& items : seeds) {
        double sum = 0.0;
        std::size_t k = 0;
        for (const TransplantScore& t : items)
            if (const double x = field(t); std::isfinite(x)) {
                sum += x;
                ++k;
            }
        s.means.push_back(k ? sum / static_cast<double>(k) : std::numeric_limits<double>::quiet_NaN());
        if (k) finite.push_back(s.means.back());
    }
    s.sd = sample_sd(finite);
    return s;
}

/// One row per (task, condition), in (task, order) order: the record fields that name the
/// condition, n, and each score's mean with its interval (attA / attB over the records that
/// have them).
inline nlohmann::json transplant_summary(const std::vector<nlohmann::json>& records, const BootstrapOptions& boot = {}) {
    struct Group {
        nlohmann::json head;
        std::map<std::uint64_t, std::vector<TransplantScore>> seeds;
        std::vector<std::string> watch;  ///< the watched heads' labels, in record order
        std::map<std::string, std::map<std::uint64_t, std::vector<TransplantScore>>> watched;  ///< attA / attB only
    };
    std::map<std::pair<std::string, std::size_t>, Group> groups;
    for (const nlohmann::json& r : records) {
        Group& g = groups[{r.at("task").get<std::string>(), r.at("order").get<std::size_t>()}];
        if (g.head.is_null()) {
            g.head = {{"task", r.at("task")}, {"condition", r.at("condition")}, {"order", r.at("order")}};
            for (const char* k : {"kind", "block", "layers", "positions", "without", "without_layers", "fit_items"})
                if (r.contains(k)) g.head[k] = r[k];
        }
        check<FormatError>(g.head["condition"] == r.at("condition"), "[transplant summary] conditions ",
                           g.head["condition"].dump(), " and ", r.at("condition").dump(), " share order ",
                           r.at("order").dump());
        const std::uint64_t seed = r.at("seed").get<std::uint64_t>();
        g.seeds[seed].push_back(score_of_record(r));
        for (const nlohmann::json& w : r.value("watch", nlohmann::json::array())) {
            const std::string label = head_label({w.at("layer").get<LayerIndex>(), w.at("head").get<std::size_t>()});
            if (std::find(g.watch.begin(), g.watch.end(), label) == g.watch.end()) g.watch.push_back(label);
            TransplantScore t;
            t.dAB = std::numeric_limits<double>::quiet_NaN();
            t.attA = w.at("attA").get<double>();
            t.attB = w.at("attB").get<double>();
            g.watched[label][seed].push_back(t);
        }
    }
    nlohmann::json rows = nlohmann::json::array();
    const auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
    using Field = double (*)(const TransplantScore&);
    const std::pair<const char*, Field> fields[] = {
        {"ansA", [](const TransplantScore& t) { return t.ansA ? 1.0 : 0.0; }},
        {"ansB", [](const TransplantScore& t) { return t.ansB ? 1.0 : 0.0; }},
        {"dAB", [](const TransplantScore& t) { return t.dAB; }},
        {"attA", [](const TransplantScore& t) { return t.attA; }},
        {"attB", [](const TransplantScore& t) { return t.attB; }}};
    // A score's summary cell: the pooled mean and interval, each seed's mean and their sd.
    const auto cell = [&](const Interval& i, const std::vector<std::vector<TransplantScore>>& seeds, Field field) {
        const SeedSpread sp = seed_spread(seeds, field);
        nlohmann::json per_seed = nlohmann::json::array();
        for (double m : sp.means) per_seed.push_back(num(m));
        return nlohmann::json{{"mean", num(i.value)}, {"lo", num(i.lo)}, {"hi", num(i.hi)}, {"n", i.n},
                              {"per_seed", per_seed}, {"sd_seeds", num(sp.sd)}};
    };
    const auto by_seed = [](const std::map<std::uint64_t, std::vector<TransplantScore>>& m) {
        std::vector<std::vector<TransplantScore>> out;
        for (const auto& [seed, items] : m) out.push_back(items);
        return out;
    };
    for (auto& [key, g] : groups) {
        const std::vector<std::vector<TransplantScore>> seeds = by_seed(g.seeds);
        nlohmann::json seed_list = nlohmann::json::array();
        std::size_t n = 0;
        for (const auto& [seed, items] : g.seeds) {
            n += items.size();
            seed_list.push_back(seed);
        }
        const TransplantIntervals iv = transplant_intervals(seeds, boot);
        nlohmann::json row = g.head;
        row["n"] = n;
        row["seeds"] = seed_list;
        const Interval* intervals[] = {&iv.ansA, &iv.ansB, &iv.dAB, &iv.attA, &iv.attB};
        for (std::size_t f = 0; f < std::size(fields); ++f) row[fields[f].first] = cell(*intervals[f], seeds, fields[f].second);
        if (!g.watch.empty()) {
            row["watch"] = nlohmann::json::array();
            for (const std::string& label : g.watch) {
                const std::vector<std::vector<TransplantScore>> ws = by_seed(g.watched[label]);
                const TransplantIntervals wi = transplant_intervals(ws, boot);
                row["watch"].push_back(
                    {{"head", label}, {"attA", cell(wi.attA, ws, fields[3].second)}, {"attB", cell(wi.attB, ws, fields[4].second)}});
            }
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

/// summary.csv of transplant_summary's rows: task, condition, kind, block, positions, without,
/// n, then mean, lo, hi of ansA, ansB, dAB, attA, attB, then seeds (their count) and each
/// score's sd over the seeds' means, then for each watched head (the first row's, in order)
/// <head>_attA, _lo, _hi and <head>_attB, _lo, _hi (empty cells for missing values).
inline std::string transplant_summary_csv(const nlohmann::json& rows) {
    std::ostringstream o;
    o.precision(9);
    std::vector<std::string> watch;
    for (const nlohmann::json& r : rows)
        if (r.contains("watch") && watch.empty())
            for (const nlohmann::json& w : r["watch"]) watch.push_back(w.at("head").get<std::string>());
    o << "task,condition,kind,block,positions,without,n";
    for (const char* m : {"ansA", "ansB", "dAB", "attA", "attB"}) o << "," << m << "," << m << "_lo," << m << "_hi";
    o << ",seeds";
    for (const char* m : {"ansA", "ansB", "dAB", "attA", "attB"}) o << "," << m << "_sd_seeds";
    for (const std::string& w : watch)
        for (const char* m : {"attA", "attB"}) o << "," << w << "_" << m << "," << w << "_" << m << "_lo," << w << "_" << m << "_hi";
    o << "\n";
    const auto cell = [&](const nlohmann::json& v) {
        if (v.is_null()) return;
        if (v.is_string()) o << v.get<std::string>();
        else o << v.get<double>();
    };
    for (const nlohmann::json& r : rows) {
        o << r["task"].get<std::string>() << "," << r["condition"].get<std::string>() << ","
          << r.value("kind", std::string()) << "," << r.value("block", std::string()) << ","
          << r.value("positions", std::string()) << "," << r.value("without", std::string()) << ","
          << r["n"].get<std::size_t>();
        for (const char* m : {"ansA", "ansB", "dAB", "attA", "attB"})
            for (const char* f : {"mean", "lo", "hi"}) {
                o << ",";
                cell(r[m][f]);
            }
        o << "," << r.value("seeds", nlohmann::json::array()).size();
        for (const char* m : {"ansA", "ansB", "dAB", "attA", "attB"}) {
            o << ",";
            cell(r[m].value("sd_seeds", nlohmann::json()));
        }
        const nlohmann::json row_watch = r.value("watch", nlohmann::json::array());
        for (const std::string& label : watch) {
            const nlohmann::json* w = nullptr;
            for (const nlohmann::json& x : row_watch)
                if (x.at("head") == label) w = &x;
            for (const char* m : {"attA", "attB"})
                for (const char* f : {"mean", "lo", "hi"}) {
                    o << ",";
                    if (w) cell((*w)[m][f]);
                }
        }
        o << "\n";
    }
    return o.str();
}

/// Writes summary.json and summary.csv into `out` from the records.
inline void write_transplant_summaries(const std::filesystem::path& out, const std::vector<nlohmann::json>& records,
                                       const BootstrapOptions& boot = {}) {
    const nlohmann::json rows = transplant_summary(records, boot);
    write_file_atomic(out / "summary.json", rows.dump(1) + "\n");
    write_file_atomic(out / "summary.csv", transplant_summary_csv(rows));
}

// ---- the study ---------------------------------------------------------------------------

struct TransplantStudyOptions : StudyRunOptions {
    std::optional<CircuitRoles> circuit{};  ///< the circuit file read, if any: check_circuit_model against the model
    tasks::lookup::Style style = tasks::lookup::Style::chat;
    std::size_t n_pairs = 8;
    std::size_t per_config = 25;                 ///< items per (ia, ib) configuration
    std::vector<std::uint64_t> seeds{1};
    std::vector<TransplantBlock> blocks;         ///< required
    std::vector<PositionSet> positions{PositionSet::final_position, PositionSet::question, PositionSet::dictionary,
                                       PositionSet::all};
    std::vector<TransplantKind> kinds{TransplantKind::mixer, TransplantKind::layer, TransplantKind::state,
                                      TransplantKind::state_conv};
    std::vector<TransplantBlock> upstream;  ///< the upstream kind's blocks removed from the donor (exp32-C)
    ReaderHead reader;
    std::vector<ReaderHead> watch;  ///< extra heads whose attA / attB are recorded (--watch)
};

struct TransplantStudyResult {
    std::size_t records = 0, written = 0, resumed = 0, items = 0;
    nlohmann::json drops = nlohmann::json::object();  ///< per seed: draws and dropped pairs by reason
};

/// The task name of the records ("transplant:chat8").
inline std::string transplant_task(tasks::lookup::Style style, std::size_t n_pairs) {
    return "transplant:" + tasks::lookup::Variant{style, n_pairs}.name();
}

/// "G0,G1,..." over the groups that have layers: every layer group as a block list (parse_blocks).
inline std::string every_group_block(const std::vector<std::vector<LayerIndex>>& groups) {
    std::string spec;
    for (std::size_t g = 0; g < groups.size(); ++g)
        if (!groups[g].empty()) spec += (spec.empty() ? "G" : ",G") + std::to_string(g);
    return spec;
}

/// Sets the prompt variant (o.style, o.n_pairs) of a study on donor/host pairs: chat4, chat8,
/// chat16, list8, rev8 (the long and perm variants have none); `study` names it in the error.
template <class Options>
void set_donor_host_variant(Options& o, std::string_view name, std::string_view study = "transplant") {
    const tasks::lookup::Variant v = tasks::lookup::parse_variant(name);
    check(!v.long_filler && !v.perm, "[", study, "] variant ", name,
          " has no donor/host pairs (chat4, chat8, chat16, list8, rev8)");
    o.style = v.style;
    o.n_pairs = v.n_pairs;
}

/// The layers of each of a model's layer groups (layer_groups(stack, group_size)): the groups
/// G<i> a block list names.
template <class Stack>
std::vector<std::vector<LayerIndex>> group_layers(const Stack& stack, std::size_t group_size) {
    std::vector<std::vector<LayerIndex>> out;
    for (const LayerGroup& g : layer_groups(stack, group_size)) out.push_back(g.layers);
    return out;
}

/// Sets o.blocks from the block list `blocks` (parse_blocks against the model's layer groups of
/// `group_size`; empty: every group that has layers, G0,G1,...) and o.upstream from `upstream`
/// (empty: none).
template <class Model>
void set_transplant_blocks(TransplantStudyOptions& o, const Model& m, std::size_t group_size, std::string_view blocks,
                           std::string_view upstream) {
    const std::vector<std::vector<LayerIndex>> groups = group_layers(m.stack(), group_size);
    const std::string spec = blocks.empty() ? every_group_block(groups) : std::string(blocks);
    check(!spec.empty(), "[transplant] the model has no layer group; name the blocks (--blocks; Python: blocks=)");
    o.blocks = parse_blocks(spec, groups, m.num_layers());
    o.upstream = upstream.empty() ? std::vector<TransplantBlock>{} : parse_blocks(upstream, groups, m.num_layers());
}

/// Runs the study into opts.out (items.jsonl, summary.json / .csv, run.json).
template <class Model>
TransplantStudyResult run_transplant_study(const Model& model, const Tokenizer& tok, const ChatFormat& format,
                                           const TransplantStudyOptions& opt) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    const CheckFiniteScope finite_check;  // a NaN stops the study at its layer and site (stack/finite_check.hpp)
    require_chat_specials(tok, chat_specials(format));  // before the folder is made (the prompts check it too)
    if (opt.circuit) check_circuit_model(*opt.circuit, model.stack(), "transplant");
    check(!opt.blocks.empty() || opt.kinds.empty(), "[transplant] no blocks to transplant");
    check(!opt.seeds.empty() && opt.per_config >= 1, "[transplant] need at least one seed and one item per configuration");
    check_distinct_seeds(opt.seeds, "transplant");
    const std::vector<TransplantCondition> conds = transplant_conditions(opt.kinds, opt.blocks, opt.positions, opt.upstream);
    // Layers each kind can act on: clear errors before any item runs.
    for (const TransplantCondition& c : conds) {
        const bool recurrent = c.kind == TransplantKind::mixer || c.kind == TransplantKind::upstream ||
                               c.kind == TransplantKind::state || c.kind == TransplantKind::state_conv;
        for (LayerIndex l : c.layers) {
            check<ShapeError>(l < model.num_layers(), "[transplant] ", c.name,
                              ": layer ", l, " of ", model.num_layers());
            if (recurrent)
                check<ShapeError>(find_mixer_site(model.stack(), l, MixerChannel::recurrent).has_value(), "[transplant] ",
                                  c.name, ": layer ", l, " has no recurrent mixer (mixer, upstream and state transplants "
                                  "act on DeltaNet / Mamba-2 layers)");
        }
        for (LayerIndex l : c.without.layers) {
            check<ShapeError>(l < model.num_layers(), "[transplant] ", c.name, ": layer ", l, " of ", model.num_layers());
            check<ShapeError>(find_mixer_site(model.stack(), l, MixerChannel::recurrent).has_value(), "[transplant] ",
                              c.name, ": layer ", l, " has no recurrent mixer to remove");
        }
    }
    check_reader_head(model.stack(), opt.reader, "transplant");
    for (std::size_t i = 0; i < opt.watch.size(); ++i) {
        check(opt.watch[i].given(), "[transplant] watched head ", i, " has no layer");
        check_reader_head(model.stack(), opt.watch[i], "transplant --watch");
        for (std::size_t j = 0; j < i; ++j)
            check(head_label(opt.watch[i]) != head_label(opt.watch[j]), "[transplant] --watch lists ",
                  head_label(opt.watch[i]), " twice");
    }
    const std::string task = transplant_task(opt.style, opt.n_pairs);
    nlohmann::json def = {{"task", task},
                          {"per_config", opt.per_config},
                          {"seeds", opt.seeds},
                          {"reader", opt.reader.given() ? nlohmann::json{{"layer", opt.reader.layer}, {"head", opt.reader.head}}
                                                        : nlohmann::json(nullptr)},
                          {"conditions", nlohmann::json::array()}};
    for (const TransplantCondition& c : conds) {
        def["conditions"].push_back({{"name", c.name}, {"layers", c.layers}});
        if (!c.without.layers.empty()) def["conditions"].back()["without_layers"] = c.without.layers;
    }
    if (!opt.watch.empty()) {
        def["watch"] = nlohmann::json::array();
        for (const ReaderHead& h : opt.watch) def["watch"].push_back(head_label(h));
    }
    StudyFolder folder(opt.folder("transplant", def));
    const tasks::lookup::Vocabulary vocab = tasks::lookup::in_family_vocabulary(tok);
    TransplantStudyResult res;
    std::vector<tasks::lookup::DonorHostSet> sets;
    std::size_t ordinal = 0, mine = 0;
    for (std::uint64_t seed : opt.seeds) {
        sets.push_back(tasks::lookup::donor_host_pairs(tok, format, opt.style, vocab, opt.per_config, seed, opt.n_pairs));
        const tasks::lookup::DonorHostSet& set = sets.back();
        res.drops[std::to_string(seed)] = {{"drawn", set.drawn},
                                           {"kept", set.items.size()},
                                           {"length", set.dropped.length},
                                           {"outside", set.dropped.outside},
                                           {"positions", set.dropped.positions},
                                           {"answer_tokens", set.dropped.answer_tokens}};
        for (std::size_t i = 0; i < set.items.size(); ++i) {
            if (!folder.mine(ordinal++)) continue;
            ++mine;
            for (const auto& c : conds) (void)folder.done({task, seed, set.items[i].index, c.name});  // claims resumed keys
        }
    }
    folder.check_resumed_records();  // before any forward
    Progress progress(mine * conds.size(), "transplant", opt.progress);
    ordinal = 0;
    for (std::size_t si = 0; si < opt.seeds.size(); ++si) {
        const std::uint64_t seed = opt.seeds[si];
        for (const tasks::lookup::DonorHostItem& di : sets[si].items) {
            if (!folder.mine(ordinal++)) continue;
            ++res.items;
            const TransplantItem it = transplant_item(di);
            const nlohmann::json extra = donor_host_fields(di, it);
            std::vector<nlohmann::json> recs;
            RunOptions ro;
            ro.capture = head_captures(opt.reader, opt.watch);
            std::vector<const TransplantCondition*> pending;
            for (const TransplantCondition& c : conds)
                if (!folder.done({task, seed, di.index, c.name})) pending.push_back(&c);
            TransplantItemRuns<Model> shared(model, it, pending);
            for (std::size_t k = 0; k < conds.size(); ++k) {
                if (folder.done({task, seed, di.index, conds[k].name})) continue;
                const RunResult r = transplant_condition_run(model, it, conds[k], ro, &shared);
                recs.push_back(transplant_record(task, seed, di.index, conds[k], k, score_run(model, r, it, opt.reader), extra));
                if (!opt.watch.empty()) recs.back()["watch"] = watch_field(watched_attention(r, it, opt.watch));
            }
            if (!recs.empty()) folder.append(recs);
            progress.add(conds.size());
        }
    }
    progress.finish();
    const std::vector<nlohmann::json> records = folder.records();
    write_transplant_summaries(opt.out, records);
    folder.finish({{"pairs", res.drops}});
    res.records = records.size();
    res.written = folder.written();
    res.resumed = folder.resumed();
    return res;
}

}  // namespace hylens::experiments
