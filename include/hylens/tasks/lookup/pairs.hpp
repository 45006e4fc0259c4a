#pragma once
// Paper A's item generators (protocols.md §A.4.4, §A.4.5, §A.4.7; C.9 `dictionary`,
// `donor_host`, `xfam_items`), deterministic for a seed on every machine (tasks/rng.hpp):
// item k of a generator is drawn from its own stream (seed, generator and variant name, k).
//
//  * clean/corrupted pairs: N distinct keys and values; a (target t, distractor d)
//    configuration; the corrupted prompt exchanges the values of entries t and d, the question
//    still asks k_t (clean answer v_t, corrupted answer v_d). Configurations: 4 pairs
//    (0,3),(3,0),(1,2),(2,1); 8 pairs (2,5),(5,2),(1,6),(6,1); 16 pairs (3,12),(12,3),(6,9),
//    (9,6); perm8: every t in 0..7 with a random d. `per_config` items each (25 in the paper).
//  * donor/host pairs: one 8-pair dictionary, run A asks entry ia, run B entry ib, (ia, ib)
//    from (2,5),(5,2),(1,6),(6,1).
//  * query items: one dictionary asking a random entry (the fit and test sets of the
//    cross-family maps, drawn from K_fit or K_test keys).
// Every pair is checked and dropped (counted in Drops) unless: the two prompts have equal token
// length; every differing token lies inside the target or distractor entry (clean/corrupted) or
// at or after qstart (donor/host), and at least one differs; both answers (bare value words)
// are one token; (clean/corrupted) every value of the dictionary is one token inside the
// prompt; (donor/host) the entries and qstart sit at the same positions in both prompts.
// Query items are not pairs: they are kept whatever their tokenization (their answer, the bare
// value word, is one token by the vocabulary filter).

#include <algorithm>    // std::all_of, std::find, std::sort
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::int64_t
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::pair
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/lookup/prompt.hpp"
#include "hylens/tasks/lookup/vocabulary.hpp"
#include "hylens/tasks/rng.hpp"
#include "hylens/text/chat.hpp"
#include "hylens/text/tokenizer.hpp"

namespace hylens::tasks::lookup {

/// A (target, distractor) or (donor ia, host ib) pair of entry indices.
struct EntryPair {
    std::size_t first = 0, second = 0;
};

/// The fixed configurations of §A.4.4 for 4, 8 or 16 pairs (also the (ia, ib) of §A.4.5).
inline std::vector<EntryPair> standard_configs(std::size_t n_pairs) {
    if (n_pairs == 4) return {{0, 3}, {3, 0}, {1, 2}, {2, 1}};
    if (n_pairs == 8) return {{2, 5}, {5, 2}, {1, 6}, {6, 1}};
    if (n_pairs == 16) return {{3, 12}, {12, 3}, {6, 9}, {9, 6}};
    fail<ShapeError>("[lookup] no standard configurations for ", n_pairs, " pairs (4, 8 or 16)");
}

/// Why generated pairs were dropped.
struct Drops {
    std::size_t length = 0;        ///< token lengths differ
    std::size_t outside = 0;       ///< a differing token outside the allowed spans, or none differs
    std::size_t value_tokens = 0;  ///< a dictionary value is not one token
    std::size_t answer_tokens = 0; ///< an answer (a value as a bare word) is not one token
    std::size_t positions = 0;     ///< entries or qstart at other positions in the two prompts
    std::size_t total() const noexcept { return length + outside + value_tokens + answer_tokens + positions; }
};

/// One drawn dictionary: keys and values in presentation order.
struct Dictionary {
    std::vector<std::string> keys, values;
};

/// n distinct keys and n distinct values of `vocab`, drawn from `rng`.
inline Dictionary draw_dictionary(const Vocabulary& vocab, std::size_t n, TaskRng& rng) {
    check<ShapeError>(n >= 2 && n <= vocab.keys.size() && n <= vocab.values.size(), "[lookup] ", n,
                      " pairs need that many distinct keys and values; the vocabulary has ", vocab.keys.size(),
                      " keys and ", vocab.values.size(), " values");
    Dictionary d;
    for (std::size_t i : rng.sample(vocab.keys.size(), n)) d.keys.push_back(vocab.keys[i]);
    for (std::size_t i : rng.sample(vocab.values.size(), n)) d.values.push_back(vocab.values[i]);
    return d;
}

namespace detail {

inline bool contains(const std::vector<std::size_t>& v, std::size_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

/// The bare-word ids of the dictionary's values (the answers and the cacc choices), or none when
/// one is not a single token (a vocabulary not filtered for this tokenizer).
inline std::optional<std::vector<std::int64_t>> value_ids(const Tokenizer& tok, const Dictionary& d) {
    std::vector<std::int64_t> out;
    for (const std::string& v : d.values) {
        const auto id = tok.single_token_id(v, false);
        if (!id) return std::nullopt;
        out.push_back(static_cast<std::int64_t>(*id));
    }
    return out;
}

/// True if the value of every entry is one token inside the prompt.
inline bool values_single_in_prompt(const LookupTokens& t) {
    for (const auto& v : t.values)
        if (v.size() != 1) return false;
    return true;
}

/// Positions where two equal-length id sequences differ.
inline std::vector<std::size_t> differing(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    std::vector<std::size_t> d;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        if (a[i] != b[i]) d.push_back(i);
    return d;
}

/// True when the two sequences differ somewhere, and only at positions `inside` accepts.
template <class Inside>
bool differs_only_inside(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b, Inside&& inside) {
    const std::vector<std::size_t> diff = differing(a, b);
    return !diff.empty() && std::all_of(diff.begin(), diff.end(), inside);
}

/// The draw loop of the pair generators: per configuration c, per_config draws; draw k is item
/// c * per_config + k, drawn from its own stream (seed, stream, index). `make(index, config,
/// rng)` builds the item or returns none (counting why); kept items are collected in order.
template <class Item, class Make>
std::vector<Item> draw_pairs(const std::vector<EntryPair>& configs, std::size_t per_config, std::uint64_t seed,
                             const std::string& stream, std::size_t& drawn, Make&& make) {
    std::vector<Item> items;
    for (std::size_t c = 0; c < configs.size(); ++c)
        for (std::size_t k = 0; k < per_config; ++k) {
            const std::size_t index = c * per_config + k;
            ++drawn;
            TaskRng rng(seed, stream, index);
            if (std::optional<Item> it = make(index, configs[c], rng)) items.push_back(std::move(*it));
        }
    return items;
}

}  // namespace detail

/// A clean/corrupted pair (§A.4.4). Positions are those of the clean prompt (the corrupted one
/// has the same length and differs only inside entries t and d).
struct CleanCorruptItem {
    std::size_t index = 0;  ///< draw index within the generator (dropped draws leave gaps)
    std::size_t target = 0, distractor = 0;
    Dictionary dict;  ///< the clean dictionary
    LookupText clean_text, corrupt_text;
    LookupTokens clean;                    ///< clean ids and the positions of every part
    std::vector<std::int64_t> corrupt_ids;
    std::int64_t answer = 0;          ///< id of v_t (bare): the clean answer
    std::int64_t corrupt_answer = 0;  ///< id of v_d (bare): the corrupted answer
    std::vector<std::int64_t> value_ids;  ///< bare ids of the dictionary's values, entry order
};

struct CleanCorruptSet {
    std::vector<CleanCorruptItem> items;
    std::size_t drawn = 0;
    Drops dropped;
};

/// Clean/corrupted pairs of `variant` (§A.4.4): per_config draws per configuration, in
/// configuration order. `filler` is the long variant's text (filler_text), ignored otherwise.
inline CleanCorruptSet clean_corrupt_pairs(const Tokenizer& tok, const ChatFormat& format, const Variant& variant,
                                           const Vocabulary& vocab, std::size_t per_config, std::uint64_t seed,
                                           std::string_view filler = {}) {
    check<ShapeError>(!variant.long_filler || !filler.empty(), "[lookup] the long variant needs filler text");
    const std::string stream = "lookup:clean_corrupt:" + variant.name();
    std::vector<EntryPair> configs;
    if (variant.perm) {
        TaskRng rng(seed, stream + ":configs", 0);
        for (std::size_t t = 0; t < variant.n_pairs; ++t) configs.push_back({t, rng.other_than(variant.n_pairs, t)});
    } else {
        configs = standard_configs(variant.n_pairs);
    }
    CleanCorruptSet out;
    out.items = detail::draw_pairs<CleanCorruptItem>(
        configs, per_config, seed, stream, out.drawn,
        [&](std::size_t index, const EntryPair& config, TaskRng& rng) -> std::optional<CleanCorruptItem> {
            CleanCorruptItem it;
            it.index = index;
            it.target = config.first;
            it.distractor = config.second;
            it.dict = draw_dictionary(vocab, variant.n_pairs, rng);
            Dictionary corrupt = it.dict;
            std::swap(corrupt.values[it.target], corrupt.values[it.distractor]);
            const std::string_view fill = variant.long_filler ? filler : std::string_view{};
            it.clean_text = render(format, variant.style, it.dict.keys, it.dict.values, it.target, fill);
            it.corrupt_text = render(format, variant.style, corrupt.keys, corrupt.values, it.target, fill);
            it.clean = tokenize(tok, it.clean_text, variant.n_pairs);
            const LookupTokens cor = tokenize(tok, it.corrupt_text, variant.n_pairs);
            if (cor.size() != it.clean.size()) {
                ++out.dropped.length;
                return std::nullopt;
            }
            if (!detail::values_single_in_prompt(it.clean)) {
                ++out.dropped.value_tokens;
                return std::nullopt;
            }
            if (!detail::differs_only_inside(it.clean.ids, cor.ids, [&](std::size_t i) {
                    return detail::contains(it.clean.entries[it.target], i) || detail::contains(it.clean.entries[it.distractor], i);
                })) {
                ++out.dropped.outside;
                return std::nullopt;
            }
            const auto ids = detail::value_ids(tok, it.dict);
            if (!ids) {
                ++out.dropped.answer_tokens;
                return std::nullopt;
            }
            it.value_ids = *ids;
            it.answer = it.value_ids[it.target];
            it.corrupt_answer = it.value_ids[it.distractor];
            it.corrupt_ids = cor.ids;
            return it;
        });
    return out;
}

/// The key-swap donor of a clean/corrupted item (§A.12, exp29): the clean dictionary with the
/// keys of entries t and d exchanged, the question still asking k_t (which now sits in entry d,
/// so its answer is v_d). `positions` are the key tokens of t and d in the clean prompt (the
/// host), where the swap writes. None when the donor does not have the clean prompt's length,
/// or differs from it outside those key tokens (or nowhere): `dropped` counts why.
struct KeySwap {
    LookupText text;
    std::vector<std::int64_t> ids;
    std::vector<std::size_t> positions;
};
inline std::optional<KeySwap> key_swap(const Tokenizer& tok, const ChatFormat& format, const Variant& variant,
                                       const CleanCorruptItem& it, Drops& dropped) {
    check<ShapeError>(!variant.long_filler, "[lookup::key_swap] the long variant is not supported");
    std::vector<std::string> keys = it.dict.keys;
    std::swap(keys[it.target], keys[it.distractor]);
    KeySwap out;
    out.text = render(format, variant.style, keys, it.dict.values, it.distractor);
    const LookupTokens t = tokenize(tok, out.text, variant.n_pairs);
    if (t.size() != it.clean.size()) {
        ++dropped.length;
        return std::nullopt;
    }
    for (std::size_t e : {it.target, it.distractor})
        out.positions.insert(out.positions.end(), it.clean.keys[e].begin(), it.clean.keys[e].end());
    std::sort(out.positions.begin(), out.positions.end());
    if (!detail::differs_only_inside(it.clean.ids, t.ids, [&](std::size_t i) { return detail::contains(out.positions, i); })) {
        ++dropped.outside;
        return std::nullopt;
    }
    out.ids = t.ids;
    return out;
}

/// A donor/host pair (§A.4.5): one dictionary, A asks entry ia, B asks entry ib.
struct DonorHostItem {
    std::size_t index = 0;
    std::size_t ia = 0, ib = 0;
    Dictionary dict;
    LookupText a_text, b_text;
    LookupTokens a;                    ///< donor ids and positions (B's entries and qstart are the same)
    std::vector<std::int64_t> b_ids;   ///< host ids
    std::int64_t answer_a = 0, answer_b = 0;  ///< bare ids of v_ia and v_ib
    std::vector<std::int64_t> value_ids;
};

struct DonorHostSet {
    std::vector<DonorHostItem> items;
    std::size_t drawn = 0;
    Drops dropped;
};

/// Donor/host pairs (§A.4.5) of an 8-pair `style` dictionary: per_config draws for each
/// (ia, ib) of standard_configs(8). `vocab` may be a cross-family K_test vocabulary.
inline DonorHostSet donor_host_pairs(const Tokenizer& tok, const ChatFormat& format, Style style, const Vocabulary& vocab,
                                     std::size_t per_config, std::uint64_t seed, std::size_t n_pairs = 8) {
    const std::vector<EntryPair> configs = standard_configs(n_pairs);
    const std::string stream = "lookup:donor_host:" + Variant{style, n_pairs}.name();
    DonorHostSet out;
    out.items = detail::draw_pairs<DonorHostItem>(
        configs, per_config, seed, stream, out.drawn,
        [&](std::size_t index, const EntryPair& config, TaskRng& rng) -> std::optional<DonorHostItem> {
            DonorHostItem it;
            it.index = index;
            it.ia = config.first;
            it.ib = config.second;
            it.dict = draw_dictionary(vocab, n_pairs, rng);
            it.a_text = render(format, style, it.dict.keys, it.dict.values, it.ia);
            it.b_text = render(format, style, it.dict.keys, it.dict.values, it.ib);
            it.a = tokenize(tok, it.a_text, n_pairs);
            const LookupTokens b = tokenize(tok, it.b_text, n_pairs);
            if (b.size() != it.a.size()) {
                ++out.dropped.length;
                return std::nullopt;
            }
            if (b.entries != it.a.entries || b.values != it.a.values || b.keys != it.a.keys || b.qstart != it.a.qstart) {
                ++out.dropped.positions;
                return std::nullopt;
            }
            if (!detail::differs_only_inside(it.a.ids, b.ids, [&](std::size_t i) { return i >= it.a.qstart; })) {
                ++out.dropped.outside;
                return std::nullopt;
            }
            const auto ids = detail::value_ids(tok, it.dict);
            if (!ids) {
                ++out.dropped.answer_tokens;
                return std::nullopt;
            }
            it.value_ids = *ids;
            it.answer_a = it.value_ids[it.ia];
            it.answer_b = it.value_ids[it.ib];
            it.b_ids = b.ids;
            return it;
        });
    return out;
}

/// A dictionary asking one random entry (the fit and test prompts of §A.10 / §A.11).
struct QueryItem {
    std::size_t index = 0;
    std::size_t query = 0;
    Dictionary dict;
    LookupText text;
    LookupTokens tokens;
    std::int64_t answer = 0;
    std::vector<std::int64_t> value_ids;
};

/// n query items of `style` with n_pairs entries, the queried entry drawn at random; `stream`
/// separates sets of the same seed ("fit", "test").
inline std::vector<QueryItem> query_items(const Tokenizer& tok, const ChatFormat& format, Style style, const Vocabulary& vocab,
                            std::size_t n, std::uint64_t seed, std::string_view stream, std::size_t n_pairs = 8) {
    const std::string name = "lookup:query:" + std::string(stream) + ":" + Variant{style, n_pairs}.name();
    std::vector<QueryItem> out;
    for (std::size_t index = 0; index < n; ++index) {
        TaskRng rng(seed, name, index);
        QueryItem it;
        it.index = index;
        it.dict = draw_dictionary(vocab, n_pairs, rng);
        it.query = rng.below(n_pairs);
        it.text = render(format, style, it.dict.keys, it.dict.values, it.query);
        it.tokens = tokenize(tok, it.text, n_pairs);
        const auto ids = detail::value_ids(tok, it.dict);
        check<ShapeError>(ids.has_value(), "[lookup::query_items] a value is not one token in this tokenizer: filter "
                                           "the vocabulary with it");
        it.value_ids = *ids;
        it.answer = it.value_ids[it.query];
        out.push_back(std::move(it));
    }
    return out;
}

}  // namespace hylens::tasks::lookup
