#pragma once
// The conditions of the channel study (split-prefill and state swap), as data: their names on
// the command line and in the result files, which channel each one edits, and the layer-wise
// sweeps. Building the edited cache of a condition is in experiments/condition_cache.hpp.
//
//   name          KV part            recurrent part       the query starts at
//   FULL          A                  A                    n
//   KV_ONLY       A                  reset                n
//   REC_ONLY      dropped            A                    0
//   NONE          dropped            reset                0
//   KV_A+REC_B    A                  B                    n   (swap tasks only)
//   KV_B+REC_A    B                  A                    n
//   KV_A+REC_A    A                  A   (= FULL)         n   (same-source controls)
//   KV_B+REC_B    B                  B   (= FULL on B)    n
//
// A condition restricted to a layer set S is written NAME@SET ("KV_ONLY@0-3", "REC_ONLY@7",
// "KV_A+REC_B@0-2+4"): the edit happens in the layers of S only, every other layer stays as in
// FULL on A. SET is a '+'-separated list of layer indices and inclusive ranges a-b.

#include <algorithm>    // std::any_of, std::find, std::sort
#include <cstddef>      // std::size_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "../cache/layer_set.hpp"
#include "../core/error.hpp"
#include "../stack/split_prefill.hpp"  // SplitMode
#include "../tasks/item.hpp"           // tasks::Source

namespace hylens::experiments {

using tasks::Source;

/// The layers of a model that hold each channel.
struct ChannelLayers {
    std::size_t num_layers = 0;
    std::vector<std::size_t> kv;         ///< layers with a KV part (attention)
    std::vector<std::size_t> recurrent;  ///< layers with a recurrent part (GDN, Mamba-2)
};

namespace detail {

inline bool all_digits(std::string_view s) {
    return !s.empty() && s.size() < 7 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

inline std::size_t parse_layer_index(std::string_view s, std::string_view whole) {
    check(all_digits(s), "[layers] '", whole, "': '", s, "' is not a layer index");
    return static_cast<std::size_t>(std::stoul(std::string(s)));
}

inline std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    std::size_t b = 0;
    for (;;) {
        const std::size_t e = s.find(sep, b);
        out.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
        if (e == std::string_view::npos) return out;
        b = e + 1;
    }
}

}  // namespace detail

/// Parses a layer set: '+'-separated indices and inclusive ranges ("3", "0-5", "0-2+4+6-7").
inline std::vector<std::size_t> parse_layer_set(std::string_view text) {
    std::vector<std::size_t> out;
    check(!text.empty(), "[layers] empty layer set");
    for (const std::string_view part : detail::split(text, '+')) {
        const std::size_t dash = part.find('-');
        if (dash == std::string_view::npos) {
            out.push_back(detail::parse_layer_index(part, text));
            continue;
        }
        const std::size_t a = detail::parse_layer_index(part.substr(0, dash), text);
        const std::size_t b = detail::parse_layer_index(part.substr(dash + 1), text);
        check(a <= b, "[layers] '", text, "': range ", a, "-", b, " is empty");
        for (std::size_t i = a; i <= b; ++i) out.push_back(i);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

/// The canonical text of a layer set: sorted, runs of consecutive layers as ranges ("0-2+4").
inline std::string format_layer_set(std::vector<std::size_t> layers) {
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    std::string s;
    for (std::size_t i = 0; i < layers.size();) {
        std::size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        if (!s.empty()) s += '+';
        s += std::to_string(layers[i]);
        if (j > i) s += "-" + std::to_string(layers[j]);
        i = j + 1;
    }
    return s;
}

enum class ConditionKind { split, swap };

/// One condition of the study.
struct Condition {
    std::string base;        ///< "FULL", "KV_ONLY", ..., "KV_A+REC_B", ...
    ConditionKind kind = ConditionKind::split;
    SplitMode mode = SplitMode::FULL;  ///< split conditions
    Source kv = Source::A;             ///< swap conditions: the KV source
    Source rec = Source::A;            ///< swap conditions: the recurrent source
    std::optional<std::vector<std::size_t>> layers;  ///< the edited layers (nullopt: all)

    /// "KV_ONLY" or "KV_ONLY@0-3".
    std::string name() const { return layers ? base + "@" + format_layer_set(*layers) : base; }
    /// "all" or the layer set text.
    std::string layers_text() const { return layers ? format_layer_set(*layers) : "all"; }
    /// Needs the second source B (a swap task).
    bool needs_b() const noexcept { return kind == ConditionKind::swap; }
    /// KV_A+REC_A and KV_B+REC_B: nothing edited.
    bool same_source() const noexcept { return kind == ConditionKind::swap && kv == rec; }
    /// What the scorer is told: each channel's source (none: dropped / reset).
    tasks::ScoreContext score_context() const {
        if (kind == ConditionKind::swap) return {kv, rec};
        const bool kv_kept = mode == SplitMode::FULL || mode == SplitMode::KV_ONLY;
        const bool rec_kept = mode == SplitMode::FULL || mode == SplitMode::REC_ONLY;
        return {kv_kept ? Source::A : Source::none, rec_kept ? Source::A : Source::none};
    }
    /// The channels the condition changes against FULL on A (for the layer sweeps).
    bool edits_kv() const noexcept {
        return kind == ConditionKind::split ? (mode == SplitMode::REC_ONLY || mode == SplitMode::NONE)
                                            : kv == Source::B && rec == Source::A;
    }
    bool edits_recurrent() const noexcept {
        return kind == ConditionKind::split ? (mode == SplitMode::KV_ONLY || mode == SplitMode::NONE)
                                            : kv == Source::A && rec == Source::B;
    }
};

/// The names of the whole-model conditions, in the study's order.
inline const std::vector<std::string>& condition_bases() {
    static const std::vector<std::string> names = {"FULL",       "KV_ONLY",    "REC_ONLY",   "NONE",
                                                   "KV_A+REC_B", "KV_B+REC_A", "KV_A+REC_A", "KV_B+REC_B"};
    return names;
}

/// Parses "NAME" or "NAME@SET" (names as in condition_bases(), upper case).
inline Condition parse_condition(std::string_view text) {
    const std::size_t at = text.find('@');
    const std::string base(text.substr(0, at));
    Condition c;
    c.base = base;
    if (base == "FULL") c.mode = SplitMode::FULL;
    else if (base == "KV_ONLY") c.mode = SplitMode::KV_ONLY;
    else if (base == "REC_ONLY") c.mode = SplitMode::REC_ONLY;
    else if (base == "NONE") c.mode = SplitMode::NONE;
    else if (base.size() == 10 && base.rfind("KV_", 0) == 0 && base.substr(4, 5) == "+REC_" &&
             (base[3] == 'A' || base[3] == 'B') && (base[9] == 'A' || base[9] == 'B')) {
        c.kind = ConditionKind::swap;
        c.kv = base[3] == 'A' ? Source::A : Source::B;
        c.rec = base[9] == 'A' ? Source::A : Source::B;
    } else {
        fail("[conditions] unknown condition '", text,
             "' (known: FULL, KV_ONLY, REC_ONLY, NONE, KV_A+REC_B, KV_B+REC_A, KV_A+REC_A, KV_B+REC_B, each "
             "optionally @LAYERS)");
    }
    if (at != std::string_view::npos) {
        check(base != "FULL" && !c.same_source(), "[conditions] '", text, "': ", base,
              " edits nothing, so it has no layer-restricted form");
        c.layers = parse_layer_set(text.substr(at + 1));
    }
    return c;
}

/// Parses a comma-separated list of conditions; repeats are an error.
inline std::vector<Condition> parse_conditions(std::string_view list) {
    std::vector<Condition> out;
    std::vector<std::string> seen;
    for (const std::string_view part : detail::split(list, ',')) {
        check(!part.empty(), "[conditions] empty entry in '", list, "'");
        Condition c = parse_condition(part);
        check(std::find(seen.begin(), seen.end(), c.name()) == seen.end(), "[conditions] '", c.name(),
              "' is listed twice");
        seen.push_back(c.name());
        out.push_back(std::move(c));
    }
    return out;
}

/// --layers SPEC: comma-separated entries, each
///   single          S = {l} for every layer l that holds a channel the condition edits
///   cumulative      S = [0, l] for every such l
///   cumulative-top  S = [l, L-1] for every such l
///   SET             one explicit layer set ("0-3", "5+7")
struct LayerSpec {
    bool single = false, cumulative = false, cumulative_top = false;
    std::vector<std::vector<std::size_t>> sets;
    bool empty() const noexcept { return !single && !cumulative && !cumulative_top && sets.empty(); }
};

inline LayerSpec parse_layer_spec(std::string_view spec) {
    LayerSpec s;
    check(!spec.empty(), "[layers] empty --layers");
    for (const std::string_view part : detail::split(spec, ',')) {
        if (part == "single") s.single = true;
        else if (part == "cumulative") s.cumulative = true;
        else if (part == "cumulative-top") s.cumulative_top = true;
        else {
            check(!part.empty() && part.find_first_not_of("0123456789-+") == std::string_view::npos, "[layers] '",
                  part, "' is not single, cumulative, cumulative-top or a layer set like 0-3+5");
            s.sets.push_back(parse_layer_set(part));
        }
    }
    return s;
}

/// The layers a condition edits: those of its set (all layers without one) that hold a channel
/// it edits. NAME@S leaves a layer of S without that channel as it is (KV_ONLY@0-4 on Qwen3.5
/// resets the recurrent layers 0-2 and 4, not the attention layer 3), as NONE@S always has.
inline std::vector<std::size_t> edited_layers(const Condition& c, const ChannelLayers& model) {
    std::vector<std::size_t> out;
    for (std::size_t l = 0; l < model.num_layers; ++l) {
        if (c.layers && std::find(c.layers->begin(), c.layers->end(), l) == c.layers->end()) continue;
        const bool kv = std::find(model.kv.begin(), model.kv.end(), l) != model.kv.end();
        const bool rec = std::find(model.recurrent.begin(), model.recurrent.end(), l) != model.recurrent.end();
        if ((c.edits_kv() && kv) || (c.edits_recurrent() && rec)) out.push_back(l);
    }
    return out;
}

namespace detail {

inline std::string edited_channels(const Condition& c) {
    if (c.edits_kv() && c.edits_recurrent()) return "KV or a recurrent state";
    return c.edits_kv() ? "KV" : "a recurrent state";
}

/// "no layer of WHERE holds C, which BASE edits": why `c` edits nothing in WHERE.
inline std::string holds_none(const std::string& where, const Condition& c) {
    return "no layer of " + where + " holds " + edited_channels(c) + ", which " + c.base + " edits";
}

inline std::string held_text(const std::vector<std::size_t>& layers) {
    return layers.empty() ? "none" : format_layer_set(layers);
}

}  // namespace detail

/// The conditions of a study: `listed` (whole-model or explicit @SET conditions), then, for
/// every listed whole-model condition that edits something, its layer-restricted forms of
/// `spec`: the single sets, then cumulative, then cumulative-top, then the listed sets in spec
/// order. Layer indices are checked against the model.
///
/// A set of `spec.sets` in which no layer holds a channel a condition edits is left out for that
/// condition, and a condition whose channel no layer of the model holds is not swept; each is
/// described in `left_out` (when given). A `spec` that adds no condition (none listed edits a
/// channel, or none the model holds), or a set of `spec.sets` that every listed condition leaves
/// out, runs nothing it asks for and is an error.
inline std::vector<Condition> expand_conditions(const std::vector<Condition>& listed, const LayerSpec& spec,
                                                const ChannelLayers& model, std::vector<std::string>* left_out = nullptr) {
    std::vector<Condition> out;
    std::vector<std::string> names;
    const auto add = [&](Condition c) {
        if (c.layers) {
            check(!c.layers->empty(), "[conditions] ", c.base, ": empty layer set");
            check(c.layers->back() < model.num_layers, "[conditions] ", c.name(), ": layer ", c.layers->back(),
                  " is out of range (the model has ", model.num_layers, " layers)");
            if (edited_layers(c, model).empty())
                fail("[conditions] ", c.name(), ": ", detail::holds_none(format_layer_set(*c.layers), c),
                     " (layers with KV: ", detail::held_text(model.kv), "; with a recurrent state: ",
                     detail::held_text(model.recurrent), ")");
        }
        if (std::find(names.begin(), names.end(), c.name()) != names.end()) return false;
        names.push_back(c.name());
        out.push_back(std::move(c));
        return true;
    };
    for (const Condition& c : listed) add(c);
    if (spec.empty()) return out;
    const auto sweeps = [](const Condition& c) { return !c.layers && (c.edits_kv() || c.edits_recurrent()); };
    check(std::any_of(listed.begin(), listed.end(), sweeps), "[layers] --layers (Python: layers=) asks for layer "
          "sweeps, but no listed condition edits a channel (FULL and the same-source controls edit nothing, and a "
          "condition with @SET is not swept): list KV_ONLY, REC_ONLY, NONE, KV_A+REC_B or KV_B+REC_A");
    std::vector<bool> set_run(spec.sets.size(), false);
    std::vector<std::string> notes;
    bool swept = false;             // a condition added by spec
    std::string why_none;           // per swept condition, why it added none
    for (const Condition& c : listed) {
        if (!sweeps(c)) continue;
        const std::vector<std::size_t> edited = edited_layers(c, model);  // every layer holding an edited channel
        const bool swept_before = swept;
        const std::string holds_none = detail::holds_none("the model", c);
        if (edited.empty() && (spec.single || spec.cumulative || spec.cumulative_top))
            notes.push_back(c.name() + " not swept: " + holds_none);
        // A sweep's set is run when a layer of it holds an edited channel (the set 0-2 of
        // REC_ONLY on Qwen3.5, attention at 3, edits nothing and is left out).
        const auto with = [&](const std::vector<std::size_t>& layers) {
            for (std::size_t l : layers)
                check(l < model.num_layers, "[layers] layer set ", format_layer_set(layers), ": layer ", l,
                      " is out of range (the model has ", model.num_layers, " layers)");
            Condition s = c;
            s.layers = layers;
            if (edited_layers(s, model).empty()) {
                notes.push_back(s.name() + " left out: " + detail::holds_none(format_layer_set(layers), c));
                return false;
            }
            if (add(std::move(s))) swept = true;
            return true;
        };
        if (spec.single)
            for (std::size_t l : edited) with({l});
        if (spec.cumulative)
            for (std::size_t l : edited) {
                std::vector<std::size_t> r;
                for (std::size_t i = 0; i <= l; ++i) r.push_back(i);
                with(r);
            }
        if (spec.cumulative_top)
            for (std::size_t l : edited) {
                std::vector<std::size_t> r;
                for (std::size_t i = l; i < model.num_layers; ++i) r.push_back(i);
                with(r);
            }
        for (std::size_t k = 0; k < spec.sets.size(); ++k)
            if (with(spec.sets[k])) set_run[k] = true;
        if (swept == swept_before)  // only meaningful when nothing at all is added
            why_none += (why_none.empty() ? "" : "; ") + c.name() + ": " +
                        (edited.empty() ? holds_none : "each of its sets is listed already or holds none of it");
    }
    for (std::size_t k = 0; k < spec.sets.size(); ++k)
        check(set_run[k], "[layers] --layers set ", format_layer_set(spec.sets[k]), " runs for no listed condition: ",
              "no layer of it holds a channel one of them edits (layers with KV: ", detail::held_text(model.kv),
              "; with a recurrent state: ", detail::held_text(model.recurrent), ")");
    const bool any_set = std::any_of(listed.begin(), listed.end(), [](const Condition& c) { return c.layers.has_value(); });
    check(swept, "[layers] --layers (Python: layers=) adds no condition (", why_none,
          any_set ? "; a condition listed with @SET is not swept" : "", "; layers with KV: ", detail::held_text(model.kv),
          "; with a recurrent state: ", detail::held_text(model.recurrent), ")");
    if (left_out) left_out->insert(left_out->end(), notes.begin(), notes.end());
    return out;
}

}  // namespace hylens::experiments
