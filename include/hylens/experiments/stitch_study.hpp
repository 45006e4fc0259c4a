#pragma once
// The block-stitching study (protocols.md §A.11, exp27; multi-slot exp34): a block of a donor
// model of another family replaces a block of a host through two ridge adapters fitted in
// closed form, g(h) = M_out(B_donor(M_in(h)) - M_in(h)) (interp/stitch.hpp), and every
// condition of §A.11 is scored on dictionary lookups and on held-out English text.
//
// Fit set (one per seed, deterministic for it; StitchStudyOptions::seeds: each seed redraws
// K_fit / K_test, the fit and test dictionaries, and refits every map):
//   * `fit_prompts` cross-family dictionaries (tasks/lookup: 8 pairs of the variant's style,
//     keys from K_fit, a random queried entry), each rendered in each model's own chat format
//     and aligned token by token by canonical spans of the user and prefill segments (§A.4.7);
//   * fit chunks of the fit corpus (tasks/lookup/fit_corpus.hpp), in order, until the host's
//     tokens reach `fit_tokens`; a chunk is one segment for the alignment.
//   M_in is fitted on the aligned positions, M_out on every position (fit_stitch_slots: slot k
//   with slots < k already stitched). The bypass M (host h_in -> block write, every position)
//   is fitted per slot on the intact host.
// Test set: `test_items` dictionaries from K_test keys asking a random entry (lookup records),
// and `ppl_seqs` sequences of `ppl_len` consecutive host tokens of the held-out chunks
// (perplexity records).
//
// Conditions (each on every slot of the plan at once):
//   intact           the host;
//   removed          each slot's layers output their input (g = 0);
//   mixers_zeroed    the host's mixer outputs in each slot are zeroed (its MLPs run);
//   bypass           each slot becomes h_in + M(h_in) with the fitted linear M;
//   stitched         the donor blocks through their fitted adapters;
//   donor_no_mixing  the same, the donor blocks' mixers zeroed (adapters fitted that way);
//   donor:A-B        another donor block A-B stitched the same way (single-slot plans only).
//
// Records (items.jsonl, one per (task, seed, item, condition)):
//   lookup  task "lookup:<variant>": answer, argmax (token ids), acc (argmax over the
//           vocabulary is the answer), cacc (argmax over the dictionary's values is the
//           answer), margin (logit of the answer minus the mean logit of the other values,
//           §A.5 candidate margin), d_top (answer minus the best other value: > 0 iff cacc),
//           tokens;
//   ppl     task "ppl": tokens (predicted tokens, ppl_len - 1), nll_mean and nll (per-token
//           negative log-likelihoods, interp/metrics.hpp token_nll).
// summary.json / summary.csv: per (task, condition) the mean of acc, cacc, margin, d_top (or
// the perplexity and mean NLL) with bootstrap intervals (interp/metric_intervals.hpp), each
// seed's value and their sd; all are recomputed from the records by write_stitch_summaries.

#include <algorithm>   // std::find, std::max_element, std::sort
#include <chrono>      // std::chrono
#include <cmath>       // std::exp, std::sqrt, std::isnan
#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ofstream
#include <functional>  // std::function
#include <limits>      // std::numeric_limits
#include <map>         // std::map
#include <optional>    // std::optional
#include <sstream>     // std::ostringstream
#include <string>      // std::string
#include <string_view> // std::string_view
#include <utility>     // std::pair
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../interp/interventions.hpp"
#include "../interp/lens.hpp"
#include "../interp/metric_intervals.hpp"
#include "../interp/metrics.hpp"
#include "../interp/ridge.hpp"
#include "../interp/run.hpp"
#include "../interp/stitch.hpp"
#include "../io/safetensors_writer.hpp"
#include "../stack/finite_check.hpp"
#include "../stack/tokens.hpp"
#include "../tasks/lookup/align.hpp"
#include "../tasks/lookup/fit_corpus.hpp"
#include "../tasks/lookup/pairs.hpp"
#include "../tasks/lookup/prompt.hpp"
#include "../tasks/lookup/vocabulary.hpp"
#include "../text/chat.hpp"
#include "../text/tokenizer.hpp"
#include "bootstrap.hpp"
#include "progress.hpp"
#include "reader_head.hpp"
#include "records.hpp"
#include "study_folder.hpp"

namespace hylens::experiments {

/// Decoder layers lo..hi (inclusive).
struct LayerRange {
    LayerIndex lo = 0, hi = 0;
    std::string text() const { return std::to_string(lo) + "-" + std::to_string(hi); }
    std::vector<LayerIndex> layers() const {
        std::vector<LayerIndex> v;
        for (LayerIndex l = lo; l <= hi; ++l) v.push_back(l);
        return v;
    }
    friend bool operator==(const LayerRange&, const LayerRange&) = default;
};

/// Parses "A-B" or "A" (one layer).
inline LayerRange parse_layer_range(std::string_view s) {
    const auto num = [&](std::string_view d) {
        check(!d.empty() && d.size() < 6 && d.find_first_not_of("0123456789") == std::string_view::npos, "[stitch] '", s,
              "' is not a layer range A-B (e.g. 0-2)");
        return static_cast<LayerIndex>(std::stoul(std::string(d)));
    };
    const std::size_t dash = s.find('-');
    const LayerRange r = dash == std::string_view::npos ? LayerRange{num(s), num(s)}
                                                        : LayerRange{num(s.substr(0, dash)), num(s.substr(dash + 1))};
    check(r.lo <= r.hi, "[stitch] layer range '", s, "' ends before it starts");
    return r;
}

/// Parses "A-B[,C-D...]": one range per slot.
inline std::vector<LayerRange> parse_layer_ranges(std::string_view s) {
    std::vector<LayerRange> out;
    for (std::size_t b = 0; b <= s.size();) {
        std::size_t e = s.find(',', b);
        if (e == std::string_view::npos) e = s.size();
        out.push_back(parse_layer_range(s.substr(b, e - b)));
        b = e + 1;
    }
    return out;
}

inline constexpr std::string_view stitch_base_conditions[] = {"intact",   "removed",  "mixers_zeroed",
                                                              "bypass",   "stitched", "donor_no_mixing"};

struct StitchStudyOptions : StudyRunOptions {
    std::vector<LayerRange> host_blocks, donor_blocks;  ///< one of each per slot, host blocks in order
    std::vector<std::string> conditions;                ///< empty = the six base conditions and donor:A-B for other_blocks
    std::vector<LayerRange> other_blocks;               ///< donor blocks of the donor:A-B conditions
    bool default_other_blocks = true;                   ///< other_blocks empty: every single donor layer outside the block
    std::string variant = "chat8";                      ///< chat8, list8 or rev8 (chat4 / chat16 too)
    std::size_t fit_prompts = 500, fit_tokens = 30000;
    std::size_t test_items = 200, ppl_seqs = 8, ppl_len = 512;
    /// Data seeds: each redraws K_fit / K_test, the fit dictionaries and the test dictionaries,
    /// and refits every map (protocols.md §A.11 "over three seeds"); records carry their seed.
    std::vector<std::uint64_t> seeds{1};
    ReaderHead reader{};  ///< the host's reader head: each lookup record's att_target (none: not recorded)
    BootstrapOptions bootstrap{};
};

struct StitchStudyResult {
    std::size_t records = 0, written = 0, resumed = 0;
    double seconds = 0.0;
    nlohmann::json fits;  ///< R^2 and lambda of every fitted map
};

/// Checks condition names as far as they can be checked without the donor model: each a base
/// condition or donor:A-B (with a single-slot plan of `slots` slots), each once. `donor_layers`
/// also bounds donor:A-B where given (0: not known yet).
inline void check_stitch_conditions(const std::vector<std::string>& c, std::size_t slots, std::size_t donor_layers = 0) {
    for (const std::string& name : c) {
        bool known = false;
        for (std::string_view b : stitch_base_conditions) known = known || name == b;
        if (name.rfind("donor:", 0) == 0) {
            const LayerRange r = parse_layer_range(std::string_view(name).substr(6));
            check(slots == 1, "[stitch] condition ", name, ": other donor blocks need a single-slot plan");
            check(donor_layers == 0 || r.hi < donor_layers, "[stitch] condition ", name, ": the donor has ", donor_layers,
                  " layers");
            known = true;
        }
        check(known, "[stitch] unknown condition '", name,
              "' (intact, removed, mixers_zeroed, bypass, stitched, donor_no_mixing, donor:A-B)");
    }
    for (std::size_t i = 0; i < c.size(); ++i)
        for (std::size_t j = 0; j < i; ++j) check(c[i] != c[j], "[stitch] condition '", c[i], "' given twice");
}

/// The conditions a run evaluates, in order (validated).
inline std::vector<std::string> stitch_conditions(const StitchStudyOptions& o, std::size_t donor_layers) {
    std::vector<LayerRange> others = o.other_blocks;
    if (others.empty() && o.default_other_blocks && o.host_blocks.size() == 1)
        for (LayerIndex l = 0; l < donor_layers; ++l)
            if (l < o.donor_blocks.front().lo || l > o.donor_blocks.front().hi) others.push_back({l, l});
    std::vector<std::string> c = o.conditions;
    if (c.empty()) {
        c.assign(std::begin(stitch_base_conditions), std::end(stitch_base_conditions));
        for (const LayerRange& r : others) c.push_back("donor:" + r.text());
    }
    check_stitch_conditions(c, o.host_blocks.size(), donor_layers);
    return c;
}

/// What the study reads of its corpus, by content, for its definition: the number of fit and
/// held-out chunks and FNV-1a of their text (each chunk and its kind), so a resume or a merge
/// with other text at the same path is another study and a copy of the text elsewhere is not
/// (the definition named the path as typed).
inline nlohmann::json stitch_corpus_digest(const tasks::lookup::FitCorpus& corpus) {
    detail::Fnv1a f;
    for (const auto* part : {&corpus.fit, &corpus.held_out}) {
        f.add(part == &corpus.fit ? "fit" : "held_out");
        for (const std::string& chunk : *part) {
            f.add(std::to_string(chunk.size()));
            f.add(":");
            f.add(chunk);
        }
    }
    return {{"fit_chunks", corpus.fit.size()}, {"held_out_chunks", corpus.held_out.size()}, {"fnv1a64", f.hex()}};
}

/// The fit items of §A.11 and what they hold.
struct StitchFitSet {
    std::vector<StitchItem> items;
    std::size_t prompts = 0, chunks = 0, host_tokens = 0, aligned = 0;
};

/// Dictionaries (K_fit keys) in both chat formats, aligned, then fit-corpus chunks up to
/// fit_tokens host tokens.
inline StitchFitSet make_stitch_fit_set(const Tokenizer& host_tok, const ChatFormat& host_fmt, const Tokenizer& donor_tok,
                                        const ChatFormat& donor_fmt, const tasks::lookup::Vocabulary& fit_vocab,
                                        const tasks::lookup::Variant& variant, const tasks::lookup::FitCorpus& corpus,
                                        std::size_t fit_prompts, std::size_t fit_tokens, std::uint64_t seed) {
    namespace lk = tasks::lookup;
    StitchFitSet s;
    const auto h = lk::query_items(host_tok, host_fmt, variant.style, fit_vocab, fit_prompts, seed, "stitch-fit", variant.n_pairs);
    const auto d = lk::query_items(donor_tok, donor_fmt, variant.style, fit_vocab, fit_prompts, seed, "stitch-fit", variant.n_pairs);
    for (std::size_t i = 0; i < fit_prompts; ++i) {
        const auto ah = lk::canonical_spans(h[i].tokens.encoding, {h[i].text.span("user"), h[i].text.span("prefill")});
        const auto ad = lk::canonical_spans(d[i].tokens.encoding, {d[i].text.span("user"), d[i].text.span("prefill")});
        StitchItem it{h[i].tokens.ids, d[i].tokens.ids, lk::align(ah, ad)};
        check(!it.aligned.empty(), "[stitch] fit dictionary ", i, " has no aligned token");
        s.host_tokens += it.recv_ids.size();
        s.aligned += it.aligned.size();
        s.items.push_back(std::move(it));
        ++s.prompts;
    }
    std::size_t chunk_tokens = 0;
    for (const std::string& chunk : corpus.fit) {
        if (chunk_tokens >= fit_tokens) break;
        const Encoding eh = host_tok.encode(chunk), ed = donor_tok.encode(chunk);
        const std::vector<CharSpan> seg{{0, chunk.size()}};
        StitchItem it{std::vector<std::int64_t>(eh.ids.begin(), eh.ids.end()),
                      std::vector<std::int64_t>(ed.ids.begin(), ed.ids.end()),
                      lk::align(lk::canonical_spans(eh, seg), lk::canonical_spans(ed, seg))};
        if (it.recv_ids.empty() || it.donor_ids.empty() || it.aligned.empty()) continue;
        chunk_tokens += it.recv_ids.size();
        s.host_tokens += it.recv_ids.size();
        s.aligned += it.aligned.size();
        s.items.push_back(std::move(it));
        ++s.chunks;
    }
    check(fit_tokens == 0 || chunk_tokens >= fit_tokens, "[stitch] the fit corpus (", corpus.source, ") has only ",
          chunk_tokens, " host tokens in its fit chunks, fewer than --fit-tokens ", fit_tokens);
    return s;
}

/// ppl_seqs sequences of ppl_len consecutive host tokens of the held-out chunks (joined by "\n").
inline std::vector<std::vector<std::int64_t>> held_out_sequences(const Tokenizer& tok, const tasks::lookup::FitCorpus& corpus,
                                                                 std::size_t seqs, std::size_t len) {
    std::string text;
    for (const std::string& c : corpus.held_out) {
        if (!text.empty()) text += '\n';
        text += c;
    }
    const auto ids = tok.encode_ids(text);
    check(ids.size() >= seqs * len, "[stitch] the held-out text of ", corpus.source, " has ", ids.size(),
          " tokens, fewer than --ppl-seqs x --ppl-len = ", seqs * len);
    std::vector<std::vector<std::int64_t>> out(seqs);
    for (std::size_t s = 0; s < seqs; ++s) out[s].assign(ids.begin() + static_cast<std::ptrdiff_t>(s * len),
                                                         ids.begin() + static_cast<std::ptrdiff_t>((s + 1) * len));
    return out;
}

/// A forward of one condition: logits [1, T, V] (or [1, 1, V] with last_only) of ids. With a
/// `reader_row`, the forward also copies the reader head's probability row of the final query
/// into it (the study's reader; the forward is built with it).
using StitchForward = std::function<Tensor3(const TokenBatch&, bool last_only, std::vector<float>* reader_row)>;

/// The forward of a model as it is.
template <class Model>
StitchForward plain_forward(const Model& m, ReaderHead reader = {}) {
    return [&m, reader](const TokenBatch& ids, bool last_only, std::vector<float>* row) {
        auto cache = m.new_cache(ids.batch);
        ForwardOptions fo;
        fo.last_only = last_only;
        Hook h;
        if (row && reader.given()) {
            h = reader_row_hook(reader, ids.T(), *row);
            fo.hook = &h;
        }
        return m.forward(ids, cache, fo);
    };
}

/// The forward of a model with interventions.
template <class Model>
StitchForward intervened_forward(const Model& m, std::vector<Intervention> iv, ReaderHead reader = {}) {
    return [&m, iv = std::move(iv), reader](const TokenBatch& ids, bool last_only, std::vector<float>* row) {
        RunOptions ro;
        ro.last_only = last_only;
        const SiteRef probs = site::attn_probs(reader.layer, Positions::last());
        if (row && reader.given()) ro.capture = {probs};
        RunResult r = run(m, ids, iv, ro);
        if (row && reader.given()) {
            std::size_t Tk = 0;
            const float* p = probs_row(r.captures.at(probs.name()), 0, reader.head, 0, Tk);
            row->assign(p, p + Tk);
        }
        return std::move(r.logits);
    };
}

/// One slot's bypass: resid_post(hi) <- resid_pre(lo) + M(resid_pre(lo)).
struct BypassSlot {
    LayerRange block;
    AffineMap map;
};

/// The host with each slot replaced by its linear bypass (the slot's layers still run, their
/// result is overwritten at resid_post(hi), so nothing downstream sees it).
template <class Model>
StitchForward bypass_forward(const Model& m, std::vector<BypassSlot> slots, ReaderHead reader = {}) {
    return [&m, slots = std::move(slots), reader](const TokenBatch& ids, bool last_only, std::vector<float>* row) {
        std::vector<std::vector<float>> h_in(slots.size());
        Hook hook;
        hook.wants = [&](Site s, LayerIndex l) {
            for (const BypassSlot& b : slots)
                if ((s == Site::resid_pre && l == b.block.lo) || (s == Site::resid_post && l == b.block.hi)) return true;
            return false;
        };
        hook.fn = [&](Site s, LayerIndex l, const ActivationView& v, const std::int64_t*) {
            for (std::size_t k = 0; k < slots.size(); ++k) {
                const std::size_t M = v.B * v.T;
                if (s == Site::resid_pre && l == slots[k].block.lo) {
                    h_in[k].resize(M * v.D);
                    for (std::size_t r = 0; r < M; ++r) std::copy(v.data + r * v.ld, v.data + r * v.ld + v.D, h_in[k].data() + r * v.D);
                }
                if (s == Site::resid_post && l == slots[k].block.hi) {
                    std::vector<float> g(M * v.D);
                    slots[k].map.apply(h_in[k].data(), M, g.data());
                    for (std::size_t r = 0; r < M; ++r)
                        for (std::size_t c = 0; c < v.D; ++c) v.data[r * v.ld + c] = h_in[k][r * v.D + c] + g[r * v.D + c];
                }
            }
        };
        auto cache = m.new_cache(ids.batch);
        ForwardOptions fo;
        fo.last_only = last_only;
        fo.hook = &hook;
        Hook with_reader;
        if (row && reader.given()) {
            with_reader = reader_row_hook(reader, ids.T(), *row, &hook);
            fo.hook = &with_reader;
        }
        return m.forward(ids, cache, fo);
    };
}

/// Fits one slot's bypass: host resid_pre(lo) -> resid_post(hi) - resid_pre(lo) at every
/// position of the fit items.
template <class Model>
Ridge fit_bypass(const Model& host, LayerRange block, const std::vector<StitchItem>& items, Ridge::Options ridge = {}) {
    std::vector<float> X, T;
    for (const StitchItem& it : items) {
        const NamedTensors c = capture(host, TokenBatch(it.recv_ids), {site::resid_pre(block.lo), site::resid_post(block.hi)});
        const auto a = flat(c.at(site::resid_pre(block.lo).name()));
        const auto b = flat(c.at(site::resid_post(block.hi).name()));
        X.insert(X.end(), a.begin(), a.end());
        for (std::size_t k = 0; k < b.size(); ++k) T.push_back(b[k] - a[k]);
    }
    const std::size_t H = host.config().hidden;
    return Ridge::fit(X, T, X.size() / H, ridge);
}

/// The lookup record fields of one final-position logit row.
inline nlohmann::json score_lookup_row(const float* row, std::size_t V, std::int64_t answer,
                                       const std::vector<std::int64_t>& values) {
    check_vocab_id(answer, V, "stitch");
    for (std::int64_t v : values) check_vocab_id(v, V, "stitch");  // before any is read
    double others = 0.0, best = -std::numeric_limits<double>::infinity();
    std::size_t n_others = 0;
    for (std::int64_t v : values)
        if (v != answer) {
            others += row[v];
            best = std::max(best, static_cast<double>(row[v]));
            ++n_others;
        }
    check<ShapeError>(n_others > 0, "[stitch] the dictionary has no value besides the answer");
    const double a = row[answer];
    const std::int64_t top = argmax(row, V);
    return {{"answer", answer},
            {"argmax", top},
            {"acc", top == answer ? 1 : 0},
            {"cacc", argmax_among(row, V, values) == answer ? 1 : 0},
            {"margin", a - others / static_cast<double>(n_others)},
            {"d_top", a - best}};
}

namespace detail {

inline std::string stitch_csv_number(double x) {
    if (std::isnan(x)) return "nan";
    std::ostringstream s;
    s.precision(10);
    s << x;
    return s.str();
}

}  // namespace detail

/// summary.json and summary.csv from the records of a stitch study (any shard or merged).
/// Rows: (task, condition, metric, value, lo, hi, n, seeds, per_seed, sd_seeds), conditions in
/// the order of the records' first appearance in study order (run.json's "conditions" when
/// given). A lookup interval resamples items within each seed (each seed draws its own test
/// dictionaries) and pools the seeds; a perplexity interval resamples the held-out sequences,
/// which every seed shares (n: the sequences). per_seed is each seed's value (its mean, or its
/// perplexity) and sd_seeds their sample standard deviation (n - 1; null below two seeds): the
/// protocol's "over three seeds: mean ± sd".
inline nlohmann::json write_stitch_summaries(const std::filesystem::path& out, const std::vector<nlohmann::json>& records,
                                             const std::vector<std::string>& condition_order = {},
                                             const BootstrapOptions& opt = {}) {
    // (task, condition) -> seed -> records, seeds in ascending order.
    std::map<std::pair<std::string, std::string>, std::map<std::uint64_t, std::vector<const nlohmann::json*>>> groups;
    std::vector<std::string> tasks, conds = condition_order;
    for (const nlohmann::json& r : records) {
        const std::string t = r.at("task").get<std::string>(), c = r.at("condition").get<std::string>();
        if (std::find(tasks.begin(), tasks.end(), t) == tasks.end()) tasks.push_back(t);
        if (std::find(conds.begin(), conds.end(), c) == conds.end()) conds.push_back(c);
        groups[{t, c}][r.at("seed").get<std::uint64_t>()].push_back(&r);
    }
    std::sort(tasks.begin(), tasks.end());
    nlohmann::json rows = nlohmann::json::array();
    const auto num = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
    const auto add = [&](const std::string& t, const std::string& c, const char* metric, const Interval& i,
                         const std::vector<std::uint64_t>& seeds, const std::vector<double>& per_seed) {
        const double sd = sample_sd(per_seed);
        rows.push_back({{"task", t}, {"condition", c}, {"metric", metric}, {"value", i.value}, {"lo", i.lo}, {"hi", i.hi},
                        {"n", i.n}, {"seeds", seeds}, {"per_seed", per_seed}, {"sd_seeds", num(sd)}});
    };
    const auto mean = [](const std::vector<double>& x) {
        double s = 0.0;
        for (double v : x) s += v;
        return s / static_cast<double>(x.size());
    };
    for (const std::string& t : tasks)
        for (const std::string& c : conds) {
            const auto it = groups.find({t, c});
            if (it == groups.end()) continue;
            std::vector<std::uint64_t> seeds;
            for (const auto& [seed, rs] : it->second) seeds.push_back(seed);
            if (t == "ppl") {
                // Perplexity = exp(mean NLL over all tokens); the sequences have equal lengths, so
                // it is exp of the mean of the sequence means, and exp maps their interval. Every
                // seed scores the same held-out sequences (only its maps differ), so the
                // resampling unit is the sequence: its mean NLL averaged over the seeds that
                // scored it (resampling seeds x sequences as independent would narrow the
                // interval by counting each sequence once per seed).
                std::map<std::size_t, std::vector<double>> by_sequence;
                std::vector<double> ppl_seed, nll_seed;
                std::size_t len = 0;
                for (const auto& [seed, rs] : it->second) {
                    std::vector<double> seed_means;
                    for (const nlohmann::json* r : rs) {
                        const std::vector<double> nll = r->at("nll").get<std::vector<double>>();
                        check<FormatError>(!nll.empty() && (len == 0 || nll.size() == len), "[stitch summary] the ppl "
                                           "sequences must have equal, non-zero lengths");
                        len = nll.size();
                        seed_means.push_back(mean(nll));
                        by_sequence[r->at("item").get<std::size_t>()].push_back(seed_means.back());
                    }
                    nll_seed.push_back(mean(seed_means));
                    ppl_seed.push_back(std::exp(nll_seed.back()));
                }
                std::vector<double> sequence_means;
                for (const auto& [item, means] : by_sequence) sequence_means.push_back(mean(means));
                const Interval m = mean_interval({sequence_means}, opt);
                Interval p = m;
                p.value = std::exp(m.value);
                p.lo = std::exp(m.lo);
                p.hi = std::exp(m.hi);
                add(t, c, "ppl", p, seeds, ppl_seed);
                add(t, c, "nll", m, seeds, nll_seed);
            } else {
                for (const char* metric : {"acc", "cacc", "margin", "d_top", "att_target"}) {
                    if (!it->second.begin()->second.front()->contains(metric)) continue;  // att_target: only with a reader
                    std::vector<std::vector<double>> x;
                    std::vector<double> per_seed;
                    for (const auto& [seed, rs] : it->second) {
                        x.emplace_back();
                        for (const nlohmann::json* r : rs) x.back().push_back(r->at(metric).get<double>());
                        per_seed.push_back(mean(x.back()));
                    }
                    add(t, c, metric, mean_interval(x, opt), seeds, per_seed);
                }
            }
        }
    std::string csv = "task,condition,metric,value,lo,hi,n,seeds,sd_seeds\n";
    for (const auto& r : rows)
        csv += r["task"].get<std::string>() + "," + r["condition"].get<std::string>() + "," + r["metric"].get<std::string>() +
               "," + detail::stitch_csv_number(r["value"].get<double>()) + "," +
               detail::stitch_csv_number(r["lo"].get<double>()) + "," + detail::stitch_csv_number(r["hi"].get<double>()) +
               "," + std::to_string(r["n"].get<std::size_t>()) + "," + std::to_string(r["seeds"].size()) + "," +
               (r["sd_seeds"].is_null() ? std::string() : detail::stitch_csv_number(r["sd_seeds"].get<double>())) + "\n";
    const nlohmann::json summary = {{"kind", "stitch"},
                                    {"bootstrap", {{"resamples", opt.resamples}, {"level", opt.level}, {"seed", opt.seed}}},
                                    {"rows", rows}};
    write_file_atomic(out / "summary.json", summary.dump(1) + "\n");
    write_file_atomic(out / "summary.csv", csv);
    return summary;
}

namespace detail {

inline void add_affine(io::SafetensorsWriter& w, const std::string& prefix, const AffineMap& m) {
    w.add_f32(prefix + ".W", {m.in, m.out}, m.W);
    w.add_f32(prefix + ".x_mean", {m.in}, m.x_mean);
    w.add_f32(prefix + ".t_mean", {m.out}, m.t_mean);
}

inline nlohmann::json ridge_info(const Ridge& r) { return {{"r2", r.r2()}, {"lambda", r.lambda()}}; }

}  // namespace detail

/// Runs the study (see the top) with `host` receiving blocks of `donor`; the result folder is
/// o.out (StudyFolder: run.json kind "stitch", items.jsonl, summaries, adapters.safetensors).
template <class Host, class Donor>
StitchStudyResult run_stitch_study(const Host& host, const Tokenizer& host_tok, ChatFamily host_family, const Donor& donor,
                                   const Tokenizer& donor_tok, ChatFamily donor_family,
                                   const tasks::lookup::FitCorpus& corpus, const StitchStudyOptions& o) {
    const precision::HoldRoundActivations one_arithmetic;  // every forward of the study, as run.json records it
    const CheckFiniteScope finite_check;  // a NaN stops the study at its layer and site (stack/finite_check.hpp)
    // before the folder is made (the prompts check it too), naming which of the two it is
    require_chat_specials(host_tok, chat_specials(chat_format(host_family)), "the host's tokenizer");
    require_chat_specials(donor_tok, chat_specials(chat_format(donor_family)), "the donor's tokenizer");
    namespace lk = tasks::lookup;
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t Lh = host.num_layers(), Ld = donor.num_layers();
    check(!o.host_blocks.empty() && o.host_blocks.size() == o.donor_blocks.size(), "[stitch] ", o.host_blocks.size(),
          " host blocks and ", o.donor_blocks.size(), " donor blocks: give one of each per slot");
    for (std::size_t k = 0; k < o.host_blocks.size(); ++k) {
        check(o.host_blocks[k].hi < Lh, "[stitch] host block ", o.host_blocks[k].text(), ": the host has ",
              Lh, " layers");
        check(o.donor_blocks[k].hi < Ld, "[stitch] donor block ", o.donor_blocks[k].text(),
              ": the donor has ", Ld, " layers");
        check(k == 0 || o.host_blocks[k - 1].hi < o.host_blocks[k].lo, "[stitch] host blocks must be in order and disjoint");
    }
    check(o.test_items >= 1 && o.ppl_len >= 2, "[stitch] need at least one test item and ppl_len >= 2");
    const lk::Variant variant = lk::parse_variant(o.variant);
    check(!variant.long_filler && !variant.perm, "[stitch] variant ", o.variant, ": use chat4/chat8/chat16/list8/rev8");
    const std::vector<std::string> conditions = stitch_conditions(o, Ld);
    for (const std::string& c : conditions)
        check(o.fit_prompts + o.fit_tokens > 0 || c == "intact" || c == "removed" || c == "mixers_zeroed", "[stitch] condition ",
              c, " fits adapters, and --fit-prompts 0 with --fit-tokens 0 leaves nothing to fit them on");
    // The reader reads the host's attention: a softmax layer of the host outside every slot
    // (a slot's layers are replaced, skipped or bypassed by the conditions).
    check_reader_head(host.stack(), o.reader, "stitch");
    for (const LayerRange& b : o.host_blocks)
        check(!o.reader.given() || o.reader.layer < b.lo || o.reader.layer > b.hi, "[stitch] the reader layer ",
              o.reader.layer, " lies in the host block ", b.text(), ", which the conditions replace");

    check(!o.seeds.empty(), "[stitch] no seed given");
    check_distinct_seeds(o.seeds, "stitch");

    // Data: the cross-family vocabulary of both tokenizers, K_fit / K_test per seed.
    const lk::Vocabulary vocab = lk::cross_family_vocabulary({&host_tok, &donor_tok});
    {
        const lk::KeySplit split = lk::key_split(vocab.keys, o.seeds.front());  // the halves' sizes hold for every seed
        check(split.fit.size() >= variant.n_pairs && split.test.size() >= variant.n_pairs &&
                  vocab.values.size() >= variant.n_pairs,
              "[stitch] the cross-family vocabulary of the two tokenizers keeps ", vocab.keys.size(), " keys and ",
              vocab.values.size(), " values: too few for ", variant.n_pairs, "-pair dictionaries from each half of the keys");
    }
    const ChatFormat hfmt = chat_format(host_family), dfmt = chat_format(donor_family);
    const auto ppl = held_out_sequences(host_tok, corpus, o.ppl_seqs, o.ppl_len);

    nlohmann::json def = {{"host_blocks", nlohmann::json::array()}, {"donor_blocks", nlohmann::json::array()},
                          {"conditions", conditions}, {"variant", variant.name()}, {"fit_prompts", o.fit_prompts},
                          {"fit_tokens", o.fit_tokens}, {"test_items", o.test_items}, {"ppl_seqs", o.ppl_seqs},
                          {"ppl_len", o.ppl_len}, {"seeds", o.seeds}, {"corpus", stitch_corpus_digest(corpus)},
                          {"bootstrap", {{"resamples", o.bootstrap.resamples}, {"level", o.bootstrap.level},
                                         {"seed", o.bootstrap.seed}}}};
    for (std::size_t k = 0; k < o.host_blocks.size(); ++k) {
        def["host_blocks"].push_back(o.host_blocks[k].text());
        def["donor_blocks"].push_back(o.donor_blocks[k].text());
    }
    if (o.reader.given()) def["reader"] = {{"layer", o.reader.layer}, {"head", o.reader.head}};
    StudyFolderOptions fo = o.folder("stitch", def);
    // Where it was read (null for a corpus made in memory); the definition holds what.
    fo.run_info["corpus"] = corpus.source.empty() ? nlohmann::json(nullptr)
                                                  : nlohmann::json(std::filesystem::absolute(corpus.source).string());
    StudyFolder folder(fo);

    const auto wants = [&](std::string_view c) { return std::find(conditions.begin(), conditions.end(), c) != conditions.end(); };
    std::vector<LayerIndex> slot_layers;
    for (const LayerRange& b : o.host_blocks)
        for (LayerIndex l : b.layers()) slot_layers.push_back(l);
    const auto plan_of = [&](const std::vector<LayerRange>& donor_blocks, bool zero_mixers) {
        StitchPlan p;
        for (std::size_t k = 0; k < o.host_blocks.size(); ++k)
            p.blocks.push_back({o.host_blocks[k].lo, o.host_blocks[k].hi, donor_blocks[k].layers(), zero_mixers});
        return p;
    };
    using Stitched = decltype(stitch<LinearAdapter>(host, StitchPlan{}, donor, std::vector<LinearAdapter>{}));
    io::SafetensorsWriter adapters(io::SafetensorsWriter::Order::insertion);
    const bool several = o.seeds.size() > 1;
    // run.json's fits, fit_set and vocabulary: as they are for one seed, keyed by seed for several.
    nlohmann::json fits_out = nlohmann::json::object(), fit_set_out = nlohmann::json::object(),
                   vocab_out = nlohmann::json::object();

    // Units of work, in seed order: each seed's test items, then its perplexity sequences; each
    // with every condition.
    const std::string lookup_task = "lookup:" + variant.name();
    const std::size_t per_seed = o.test_items + ppl.size();
    // Each seed's test items (tokenizer only, no forward), drawn first so that every key of
    // this shard is asked before any fit or forward: a resumed record the study does not make
    // stops it here (StudyFolder::check_resumed_records).
    const auto unit_key = [&](std::uint64_t seed, std::size_t u, std::size_t n_tests, const std::string& c) {
        const bool is_lookup = u < n_tests;
        return RecordKey{is_lookup ? lookup_task : "ppl", seed, is_lookup ? u : u - n_tests, c};
    };
    std::vector<std::vector<lk::QueryItem>> tests_of;
    std::size_t mine = 0;
    for (std::size_t si = 0; si < o.seeds.size(); ++si) {
        const lk::Vocabulary test_vocab{lk::key_split(vocab.keys, o.seeds[si]).test, vocab.values};
        tests_of.push_back(lk::query_items(host_tok, hfmt, variant.style, test_vocab, o.test_items, o.seeds[si], "stitch-test",
                                           variant.n_pairs));
        for (std::size_t u = 0; u < per_seed; ++u) {
            if (!folder.mine(si * per_seed + u)) continue;
            ++mine;
            for (const std::string& c : conditions) (void)folder.done(unit_key(o.seeds[si], u, tests_of[si].size(), c));
        }
    }
    folder.check_resumed_records();
    Progress progress(mine, "stitch", o.progress, "items");  // an item: a record of each condition
    const std::size_t V = host.config().vocab;
    for (std::size_t si = 0; si < o.seeds.size(); ++si) {
        const std::uint64_t seed = o.seeds[si];
        const std::string prefix = several ? "seed" + std::to_string(seed) + "." : "";
        const lk::KeySplit split = lk::key_split(vocab.keys, seed);
        const lk::Vocabulary fit_vocab{split.fit, vocab.values};
        const auto& tests = tests_of[si];

        // Fits (deterministic; every shard fits the same maps, for every seed). Announced, and
        // left out of the progress line's rate: they make no record.
        const auto fits_began = std::chrono::steady_clock::now();
        progress.note("seed " + std::to_string(seed) + ": fitting the adapters (no record until they are fitted)");
        const StitchFitSet fit = make_stitch_fit_set(host_tok, hfmt, donor_tok, dfmt, fit_vocab, variant, corpus,
                                                     o.fit_prompts, o.fit_tokens, seed);
        std::vector<std::pair<std::string, Stitched>> stitched;  // condition -> model
        nlohmann::json fits = nlohmann::json::object();
        const auto fit_condition = [&](const std::string& name, const std::vector<LayerRange>& donor_blocks, bool zero_mixers) {
            auto [model, slot_fits] = fit_stitch_slots(host, plan_of(donor_blocks, zero_mixers), donor, fit.items);
            nlohmann::json info = nlohmann::json::array();
            for (std::size_t k = 0; k < slot_fits.size(); ++k) {
                info.push_back({{"host_block", o.host_blocks[k].text()}, {"donor_block", donor_blocks[k].text()},
                                {"m_in", detail::ridge_info(slot_fits[k].m_in)}, {"m_out", detail::ridge_info(slot_fits[k].m_out)}});
                detail::add_affine(adapters, prefix + name + ".slot" + std::to_string(k) + ".in", slot_fits[k].adapter.in);
                detail::add_affine(adapters, prefix + name + ".slot" + std::to_string(k) + ".out", slot_fits[k].adapter.out);
            }
            fits[name] = info;
            stitched.emplace_back(name, std::move(model));
        };
        std::vector<BypassSlot> bypass;
        for (const std::string& c : conditions) {
            if (c == "stitched") fit_condition(c, o.donor_blocks, false);
            if (c == "donor_no_mixing") fit_condition(c, o.donor_blocks, true);
            if (c.rfind("donor:", 0) == 0) fit_condition(c, {parse_layer_range(std::string_view(c).substr(6))}, false);
        }
        if (wants("bypass")) {
            nlohmann::json info = nlohmann::json::array();
            for (std::size_t k = 0; k < o.host_blocks.size(); ++k) {
                const Ridge r = fit_bypass(host, o.host_blocks[k], fit.items);
                bypass.push_back({o.host_blocks[k], AffineMap::from_ridge(r)});
                info.push_back({{"host_block", o.host_blocks[k].text()}, {"m", detail::ridge_info(r)}});
                detail::add_affine(adapters, prefix + "bypass.slot" + std::to_string(k), bypass.back().map);
            }
            fits["bypass"] = info;
        }
        const nlohmann::json fit_set = {{"prompts", fit.prompts}, {"chunks", fit.chunks}, {"host_tokens", fit.host_tokens},
                                        {"aligned", fit.aligned}};
        const nlohmann::json vocab_info = {{"keys", vocab.keys.size()}, {"values", vocab.values.size()},
                                           {"k_fit", split.fit}, {"k_test", split.test}};
        const auto place = [&](nlohmann::json& out, const nlohmann::json& v) { (several ? out[std::to_string(seed)] : out) = v; };
        place(fits_out, fits);
        place(fit_set_out, fit_set);
        place(vocab_out, vocab_info);
        progress.exclude(std::chrono::duration<double>(std::chrono::steady_clock::now() - fits_began).count());

        std::vector<std::pair<std::string, StitchForward>> forwards;
        for (const std::string& c : conditions) {
            StitchForward f;
            // In a stitched model each slot takes one layer: the host's later layers move down.
            const ReaderHead stitched_reader{
                o.reader.given() ? plan_of(o.donor_blocks, false).map_layer(o.reader.layer) : no_layer, o.reader.head};
            if (c == "intact") f = plain_forward(host, o.reader);
            else if (c == "removed") f = intervened_forward(host, {skip_layers(slot_layers)}, o.reader);
            else if (c == "mixers_zeroed") f = intervened_forward(host, {zero(Site::mixer_out, slot_layers)}, o.reader);
            else if (c == "bypass") f = bypass_forward(host, bypass, o.reader);
            else
                for (const auto& [name, model] : stitched)
                    if (name == c) f = plain_forward(model, stitched_reader);
            forwards.emplace_back(c, std::move(f));
        }

        for (std::size_t u = 0; u < per_seed; ++u) {
            if (!folder.mine(si * per_seed + u)) continue;
            const bool is_lookup = u < tests.size();
            std::vector<nlohmann::json> recs;
            for (const auto& [c, f] : forwards) {
                const RecordKey key = unit_key(seed, u, tests.size(), c);
                if (folder.done(key)) continue;
                const std::size_t item = key.item;
                nlohmann::json r = {{"task", key.task}, {"seed", seed}, {"item", item}, {"condition", c}};
                if (is_lookup) {
                    const auto& t = tests[item];
                    std::vector<float> reader_row;
                    const Tensor3 lg = f(TokenBatch(t.tokens.ids), true, o.reader.given() ? &reader_row : nullptr);
                    r.update(score_lookup_row(logits_row(lg, 0, -1), V, t.answer, t.value_ids));
                    r["tokens"] = t.tokens.ids.size();
                    if (o.reader.given()) {
                        // The reader's attention from the final position on the queried entry's tokens.
                        check(reader_row.size() == t.tokens.ids.size(), "[stitch] condition ", c, ": the reader row holds ",
                              reader_row.size(), " keys for ", t.tokens.ids.size(), " tokens");
                        r["att_target"] = attention_mass(reader_row.data(), reader_row.size(),
                                                         contiguous_span(t.tokens.entries[t.query]));
                    }
                } else {
                    const TokenBatch ids(ppl[item]);
                    const std::vector<double> nll = token_nll(f(ids, false, nullptr), ids);
                    double sum = 0.0;
                    for (double x : nll) sum += x;
                    r["tokens"] = nll.size();
                    r["nll_mean"] = sum / static_cast<double>(nll.size());
                    r["nll"] = nll;
                }
                recs.push_back(std::move(r));
            }
            if (!recs.empty()) folder.append(recs);
            progress.add(1);
        }
    }
    adapters.set_metadata("hylens", std::string("stitch study adapters: ") + (several ? "seed<s>." : "") +
                                        "<condition>.slot<k>.{in,out}.{W,x_mean,t_mean}, " + (several ? "seed<s>." : "") +
                                        "bypass.slot<k>.{W,x_mean,t_mean}; y = (x - x_mean) W + t_mean");
    if (adapters.size() > 0) adapters.write(o.out / "adapters.safetensors");

    const std::vector<nlohmann::json> records = folder.records();
    write_stitch_summaries(o.out, records, conditions, o.bootstrap);
    StitchStudyResult res;
    res.records = records.size();
    res.written = folder.written();
    res.resumed = folder.resumed();
    res.fits = fits_out;
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    folder.finish({{"fits", fits_out},
                   {"fit_set", fit_set_out},
                   {"vocabulary", vocab_out},
                   {"corpus_info", {{"source", corpus.source}, {"bytes", corpus.bytes}, {"paragraphs", corpus.paragraphs.size()},
                                    {"fit_chunks", corpus.fit.size()}, {"held_out_chunks", corpus.held_out.size()}}}});
    return res;
}

/// Merges the shard folders of one stitch study (merge_study_folders), recomputing the
/// summaries with the study's bootstrap options, and copies the first folder's
/// adapters.safetensors (every shard fits the same maps).
inline MergeResult merge_stitch_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    check(!dirs.empty(), "[merge] no result folder given");
    std::vector<std::string> order;
    BootstrapOptions opt;
    {
        const nlohmann::json study = first_study_definition(dirs);
        try {
            if (study.contains("conditions")) order = study["conditions"].get<std::vector<std::string>>();
            if (study.contains("bootstrap")) {
                opt.resamples = study["bootstrap"].at("resamples").get<std::size_t>();
                opt.level = study["bootstrap"].at("level").get<double>();
                opt.seed = study["bootstrap"].at("seed").get<std::uint64_t>();
            }
        } catch (const nlohmann::json::exception& e) {
            fail<FormatError>("[merge] ", (dirs.front() / "run.json").string(), ": bad stitch study definition (", e.what(), ")");
        }
    }
    // Inside the merge's lock on `out`. (read_shard_folders refused an output folder among the
    // inputs, and one holding another study's result.) A run whose conditions fit no map has no
    // adapters: a stray adapters.safetensors in `out` is not this study's.
    const nlohmann::json definition = first_study_definition(dirs);
    const std::string variant = detail::definition_string(definition, "variant");
    const bool ppl = !definition.contains("ppl_seqs") || definition["ppl_seqs"] != 0;  // a study without ppl task
    const auto record_ok = detail::record_names_check(
        "stitch", [&](const std::string& t) { return variant.empty() || t == "lookup:" + variant || (ppl && t == "ppl"); },
        [&](const std::string& c) { return order.empty() || std::find(order.begin(), order.end(), c) != order.end(); });
    return merge_study_folders(
        dirs, out, "stitch",
        [&](const std::filesystem::path& o, const std::vector<nlohmann::json>& r) {
            write_stitch_summaries(o, r, order, opt);
            const std::filesystem::path a = dirs.front() / "adapters.safetensors";
            if (std::filesystem::exists(a))
                std::filesystem::copy_file(a, o / "adapters.safetensors", std::filesystem::copy_options::overwrite_existing);
            else
                std::filesystem::remove(o / "adapters.safetensors");
        },
        record_ok);
}

}  // namespace hylens::experiments
