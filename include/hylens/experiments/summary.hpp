#pragma once
// summary.csv, summary.json and diffs.csv, computed from the records of items.jsonl alone, so
// they can be recomputed (and checked) from the per-item file beside them.
//
// Rows: per task, group, metric and condition.
//   group   "all", and one group per value of the item field "group" (or, without one, of the
//           item field "condition": the probe kinds of the recognition tasks, the name/answer
//           conditions of the label task), each summarised on its own items;
//   metric  "score" (the task's primary score), "first_token" (first generated token == the
//           expected answer's first token; tasks with expected answers), "first_token_b" (the
//           same against source B's answer; swap tasks) and every number or boolean that the
//           task's scorer writes into score_fields (booleans count as 0 / 1).
// Statistics (experiments/bootstrap.hpp): mean, 95 % percentile bootstrap CI (B = 10,000,
// items resampled within each seed, seeds pooled), rel_full = mean / mean(FULL) with its CI on
// the same resamples, the seeds and the fewest scores of a seed (seeds, min_seed_n), Wilson's
// interval where the scores are 0 / 1, and paired differences (diffs.csv): every condition minus FULL, every
// pair of whole-model conditions, and every layer-restricted condition minus its whole-model
// form, each on the same resamples.

#include <algorithm>  // std::sort, std::find
#include <cmath>      // std::isfinite
#include <cstdint>    // std::uint64_t
#include <cstdio>     // std::snprintf
#include <filesystem> // std::filesystem
#include <limits>     // std::numeric_limits
#include <map>        // std::map
#include <set>        // std::set
#include <string>     // std::string
#include <tuple>      // std::tuple
#include <utility>    // std::pair
#include <vector>     // std::vector

#include <nlohmann/json.hpp>

#include "bootstrap.hpp"
#include "records.hpp"

namespace hylens::experiments {

/// How the intervals were computed (written into summary.json).
inline constexpr const char* kResamplingNote =
    "percentile bootstrap: items resampled with replacement within each seed, seeds pooled";

namespace detail {

/// A record's place in the canonical order: task, seed, item, then the study's condition order
/// (conditions not in `conditions` last, by name).
using CanonicalKey = std::tuple<std::string, std::uint64_t, std::size_t, std::size_t, std::string>;
inline CanonicalKey canonical_key(RecordKey k, const std::vector<std::string>& conditions) {
    const auto rank = static_cast<std::size_t>(std::find(conditions.begin(), conditions.end(), k.condition) - conditions.begin());
    return {std::move(k.task), k.seed, k.item, rank, std::move(k.condition)};
}

/// The lines of `keyed` sorted by their canonical keys (the merge's and the study's rewrite).
inline std::vector<LineRef> in_canonical_order(std::vector<std::pair<CanonicalKey, LineRef>> keyed) {
    std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<LineRef> refs;
    refs.reserve(keyed.size());
    for (const auto& k : keyed) refs.push_back(k.second);
    return refs;
}

}  // namespace detail

/// Sorts records into the canonical order (detail::canonical_key).
inline void sort_records(std::vector<nlohmann::json>& records, const std::vector<std::string>& conditions) {
    std::vector<std::pair<detail::CanonicalKey, std::size_t>> keys;
    keys.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i)
        keys.push_back({detail::canonical_key(record_key(records[i], "record " + std::to_string(i)), conditions), i});
    std::sort(keys.begin(), keys.end());
    std::vector<nlohmann::json> out;
    out.reserve(records.size());
    for (const auto& k : keys) out.push_back(std::move(records[k.second]));
    records = std::move(out);
}

/// Rewrites an items.jsonl in the canonical order (detail::canonical_key), each line as
/// json_line writes its record, through a temporary file and a rename; returns the new file's
/// fnv1a64_hex. The file is read line by line, twice, and never held whole: a study's records
/// can outgrow the memory (a record's context and generation are 2-7 KB as JSON objects). The
/// same bytes as sort_records and json_line over the records read whole.
inline std::string rewrite_items_canonical(const std::filesystem::path& items, const std::vector<std::string>& conditions) {
    std::vector<std::pair<detail::CanonicalKey, LineRef>> lines;
    for_each_jsonl_line(items, false, [&](std::size_t line, std::string_view text, std::uint64_t offset) {
        const std::string where = items.string() + " line " + std::to_string(line);
        lines.push_back({detail::canonical_key(record_key(parse_jsonl_line(text, where), where), conditions),
                         line_ref(0, line, text, offset)});
    });
    return write_record_lines(items, {items}, detail::in_canonical_order(std::move(lines)));
}

/// One row of summary.csv.
struct SummaryRow {
    std::string task, group, metric, condition, base, layers;
    Interval mean, rel_full;
    std::uint64_t bootstrap_seed = 0;  ///< the seed of this (task, group)'s resamples
    std::size_t seeds = 0;             ///< seeds holding a score of the row
    std::size_t min_seed_n = 0;        ///< the fewest scores among those seeds
    Interval wilson;                   ///< Wilson's interval where every score is 0 or 1 (NaN otherwise)
};

/// One row of diffs.csv: condition minus other.
struct DiffRow {
    std::string task, group, metric, condition, minus;
    Interval diff;
};

struct Summary {
    std::vector<SummaryRow> rows;
    std::vector<DiffRow> diffs;
    BootstrapOptions options;
};

namespace detail {

inline std::uint64_t name_hash(const std::string& s) {
    std::uint64_t h = 1469598103934665603ULL;
    for (const unsigned char c : s) h = h * 1099511628211ULL + c + 0x9e37ULL;
    return h;
}

inline std::string base_of(const std::string& condition) { return condition.substr(0, condition.find('@')); }
inline std::string layers_of(const std::string& condition) {
    const std::size_t at = condition.find('@');
    return at == std::string::npos ? "all" : condition.substr(at + 1);
}

}  // namespace detail

/// What summarize() reads of each record, held compactly: its key, "score", "first_token" and
/// "first_token_b" where present (NaN where not a number or boolean; booleans as 0 / 1), the
/// numbers and booleans of "score_fields", and its group (the string "group", else the string
/// "condition", of "item_fields"). Names are held once; a record takes about 100 bytes where
/// its JSON object took 2-7 KB (its context and generation), so a study holds these for its
/// summaries instead of its records. The summary of the records is the summary of these.
class ScoreRecords {
public:
    /// Adds the part of record `r` that the summaries read; FormatError naming `where` (its
    /// file and line) when its key is missing or its score_fields is not an object.
    void add(const nlohmann::json& r, const std::string& where = "") {
        const std::string at = where.empty() ? "record " + std::to_string(rows_.size()) : where;
        const RecordKey k = record_key(r, at);
        Row row{id(k.task), id(k.condition), 0, k.seed, k.item, metrics_.size(), 0};
        const auto number = [](const nlohmann::json& v) {
            if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
            if (v.is_number()) return v.get<double>();
            return std::numeric_limits<double>::quiet_NaN();
        };
        for (const char* m : {"score", "first_token", "first_token_b"})
            if (const auto it = r.find(m); it != r.end()) metrics_.push_back({id(m), number(*it)});
        if (const auto f = r.find("score_fields"); f != r.end()) {
            check<FormatError>(f->is_object(), "[items.jsonl] ", at, ": score_fields is ", f->type_name(),
                               ", not an object (the file was edited or comes from another program)");
            for (auto it = f->begin(); it != f->end(); ++it)
                if (it->is_boolean() || it->is_number()) metrics_.push_back({id(kFieldPrefix + it.key()), number(*it)});
        }
        if (const auto f = r.find("item_fields"); f != r.end() && f->is_object())
            for (const char* g : {"group", "condition"})
                if (const auto it = f->find(g); it != f->end() && it->is_string()) {
                    if (!it->get_ref<const std::string&>().empty()) row.group = id(it->get<std::string>());
                    break;
                }
        row.m1 = metrics_.size();
        rows_.push_back(row);
    }

    std::size_t size() const noexcept { return rows_.size(); }
    RecordKey key(std::size_t i) const {
        const Row& r = rows_.at(i);
        return {names_[r.task], r.seed, r.item, names_[r.condition]};
    }
    const std::string& task(std::size_t i) const { return names_[rows_[i].task]; }
    const std::string& condition(std::size_t i) const { return names_[rows_[i].condition]; }
    std::uint64_t seed(std::size_t i) const { return rows_[i].seed; }
    std::size_t item(std::size_t i) const { return rows_[i].item; }
    /// The record's group, "" when it has none.
    const std::string& group(std::size_t i) const { return rows_[i].group ? names_[rows_[i].group] : names_[0]; }
    /// Whether the record holds the field `name` ("score", "first_token", "first_token_b").
    bool has(std::size_t i, const std::string& name) const { return find(i, name) != nullptr; }
    /// The names of the record's number and boolean score_fields.
    std::vector<std::string> fields(std::size_t i) const {
        std::vector<std::string> out;
        for (std::size_t m = rows_[i].m0; m < rows_[i].m1; ++m)
            if (const std::string& n = names_[metrics_[m].first]; n.rfind(kFieldPrefix, 0) == 0) out.push_back(n.substr(kFieldPrefix.size()));
        return out;
    }
    /// The value of metric `metric` in record i (metric_value's rule), NaN if absent.
    double value(std::size_t i, const std::string& metric) const {
        const bool own = metric == "score" || metric == "first_token" || metric == "first_token_b";
        const double* v = find(i, own ? metric : kFieldPrefix + metric);
        return v ? *v : std::numeric_limits<double>::quiet_NaN();
    }

private:
    inline static const std::string kFieldPrefix = "score_fields.";
    struct Row {
        std::uint32_t task, condition, group;  ///< name ids; group 0: none
        std::uint64_t seed;
        std::size_t item;
        std::size_t m0, m1;  ///< the record's metrics: metrics_[m0, m1)
    };
    std::uint32_t id(const std::string& name) {
        const auto [it, fresh] = ids_.try_emplace(name, static_cast<std::uint32_t>(names_.size()));
        if (fresh) names_.push_back(name);
        return it->second;
    }
    const double* find(std::size_t i, const std::string& name) const {
        const auto it = ids_.find(name);
        if (it == ids_.end()) return nullptr;
        for (std::size_t m = rows_[i].m0; m < rows_[i].m1; ++m)
            if (metrics_[m].first == it->second) return &metrics_[m].second;
        return nullptr;
    }
    std::vector<std::string> names_{""};                 // id 0: "", no group
    std::map<std::string, std::uint32_t> ids_{{"", 0}};
    std::vector<Row> rows_;
    std::vector<std::pair<std::uint32_t, double>> metrics_;
};

/// Computes the summary of `records` (any order); `conditions` is the study's condition order.
inline Summary summarize(const ScoreRecords& records, const std::vector<std::string>& conditions,
                         const BootstrapOptions& opt = {}) {
    Summary out;
    out.options = opt;
    // task -> its records
    std::map<std::string, std::vector<std::size_t>> by_task;
    for (std::size_t r = 0; r < records.size(); ++r) by_task[records.task(r)].push_back(r);
    for (const auto& [task, recs] : by_task) {
        // Conditions present, in study order.
        std::set<std::string> present;
        for (const std::size_t r : recs) present.insert(records.condition(r));
        std::vector<std::string> conds;
        for (const auto& c : conditions)
            if (present.count(c)) conds.push_back(c);
        for (const auto& c : present)
            if (std::find(conds.begin(), conds.end(), c) == conds.end()) conds.push_back(c);
        // Metrics present.
        std::vector<std::string> metrics = {"score"};
        std::set<std::string> extra;
        bool ft = false, ftb = false;
        std::set<std::string> groups;
        for (const std::size_t r : recs) {
            ft = ft || records.has(r, "first_token");
            ftb = ftb || records.has(r, "first_token_b");
            for (std::string& m : records.fields(r)) extra.insert(std::move(m));
            if (const std::string& g = records.group(r); !g.empty()) groups.insert(g);
        }
        if (ft) metrics.push_back("first_token");
        if (ftb) metrics.push_back("first_token_b");
        for (const auto& m : extra)
            if (m != "score" && m != "first_token" && m != "first_token_b") metrics.push_back(m);
        std::vector<std::string> group_list = {"all"};
        group_list.insert(group_list.end(), groups.begin(), groups.end());
        const std::size_t C = conds.size();
        const auto cidx = [&](const std::string& c) {
            return static_cast<std::size_t>(std::find(conds.begin(), conds.end(), c) - conds.begin());
        };
        const auto full = std::find(conds.begin(), conds.end(), "FULL");
        for (const auto& group : group_list) {
            // seed -> item -> its records
            std::map<std::uint64_t, std::map<std::size_t, std::vector<std::size_t>>> cells;
            for (const std::size_t r : recs) {
                if (group != "all" && records.group(r) != group) continue;
                cells[records.seed(r)][records.item(r)].push_back(r);
            }
            BootstrapOptions bo = opt;
            bo.seed = opt.seed ^ detail::name_hash(task + "/" + group);
            for (const auto& metric : metrics) {
                std::vector<SeedScores> seeds;
                for (const auto& [seed, items] : cells) {
                    SeedScores s;
                    s.items = items.size();
                    s.x.assign(s.items * C, std::numeric_limits<double>::quiet_NaN());
                    std::size_t i = 0;
                    for (const auto& [item, rs] : items) {
                        for (const std::size_t r : rs) s.x[i * C + cidx(records.condition(r))] = records.value(r, metric);
                        ++i;
                    }
                    seeds.push_back(std::move(s));
                }
                const Bootstrap boot(std::move(seeds), C, bo);
                for (std::size_t c = 0; c < C; ++c) {
                    SummaryRow row{task, group, metric, conds[c], detail::base_of(conds[c]), detail::layers_of(conds[c]),
                                   boot.mean(c), {}, bo.seed, 0, 0, {}};
                    if (row.mean.n == 0) continue;  // the metric does not apply to this condition
                    if (full != conds.end()) row.rel_full = boot.ratio(c, cidx("FULL"));
                    const auto spread = boot.seed_spread(c);
                    row.seeds = spread.seeds;
                    row.min_seed_n = spread.min_items;
                    row.wilson = boot.wilson(c);
                    out.rows.push_back(std::move(row));
                }
                // Paired differences. (The task by a name of its own: clang before 16 refuses a
                // lambda that captures a structured binding.)
                const std::string& task_name = task;
                const auto add_diff = [&](std::size_t c, std::size_t d) {
                    Interval iv = boot.difference(c, d);
                    if (iv.n > 0) out.diffs.push_back({task_name, group, metric, conds[c], conds[d], iv});
                };
                for (std::size_t c = 0; c < C; ++c) {
                    if (full != conds.end() && conds[c] != "FULL") add_diff(c, cidx("FULL"));
                    const bool whole = conds[c].find('@') == std::string::npos;
                    if (!whole) {
                        const std::size_t b = cidx(detail::base_of(conds[c]));
                        if (b < C && detail::base_of(conds[c]) != "FULL") add_diff(c, b);
                        continue;
                    }
                    for (std::size_t d = c + 1; d < C; ++d)
                        if (conds[d].find('@') == std::string::npos && conds[c] != "FULL" && conds[d] != "FULL")
                            add_diff(c, d);
                }
            }
        }
    }
    return out;
}


/// The summary of JSON records (ScoreRecords of them).
inline Summary summarize(const std::vector<nlohmann::json>& records, const std::vector<std::string>& conditions,
                         const BootstrapOptions& opt = {}) {
    ScoreRecords scores;
    for (const nlohmann::json& r : records) scores.add(r);
    return summarize(scores, conditions, opt);
}

namespace detail {

/// A CSV number: "inf" / "-inf" for an unbounded interval end (a ratio's), "" for NaN.
inline std::string num(double x) {
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    if (std::isnan(x)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6f", x);
    return buf;
}

inline nlohmann::json num_json(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

inline std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

}  // namespace detail

inline std::string summary_csv(const Summary& s) {
    std::string out =
        "task,group,metric,condition,base,layers,n,mean,ci_lo,ci_hi,rel_full,rel_full_lo,rel_full_hi,seeds,min_seed_n,"
        "wilson_lo,wilson_hi\n";
    for (const auto& r : s.rows) {
        for (const auto* f : {&r.task, &r.group, &r.metric, &r.condition, &r.base, &r.layers}) out += detail::csv_field(*f) + ",";
        out += std::to_string(r.mean.n) + "," + detail::num(r.mean.value) + "," + detail::num(r.mean.lo) + "," +
               detail::num(r.mean.hi) + "," + detail::num(r.rel_full.value) + "," + detail::num(r.rel_full.lo) + "," +
               detail::num(r.rel_full.hi) + "," + std::to_string(r.seeds) + "," + std::to_string(r.min_seed_n) + "," +
               detail::num(r.wilson.lo) + "," + detail::num(r.wilson.hi) + "\n";
    }
    return out;
}

inline std::string diffs_csv(const Summary& s) {
    std::string out = "task,group,metric,condition,minus,n,diff,ci_lo,ci_hi\n";
    for (const auto& d : s.diffs) {
        for (const auto* f : {&d.task, &d.group, &d.metric, &d.condition, &d.minus}) out += detail::csv_field(*f) + ",";
        out += std::to_string(d.diff.n) + "," + detail::num(d.diff.value) + "," + detail::num(d.diff.lo) + "," +
               detail::num(d.diff.hi) + "\n";
    }
    return out;
}

inline nlohmann::json summary_json(const Summary& s) {
    nlohmann::json j;
    j["statistics"] = {{"interval", "95 % percentile bootstrap"},
                       {"resampling", kResamplingNote},
                       {"resamples", s.options.resamples},
                       {"level", s.options.level},
                       {"seed", s.options.seed},
                       {"seed_rule", "each (task, group) resamples with bootstrap_seed = seed XOR name_hash(task + '/' + "
                                     "group); name_hash: h = 1469598103934665603, then for each byte c of the name "
                                     "h = h * 1099511628211 + c + 0x9e37 (mod 2^64)"},
                       {"rel_full", "mean / mean(FULL), interval on the same resamples; a resample with FULL's mean 0 "
                                    "is an infinite ratio, so a bound is null (unbounded) when more than (1 - level) / 2 "
                                    "of the resamples are; rel_full_undefined counts resamples of 0 / 0, left out"},
                       {"seed_spread", "seeds: the seeds holding a score of the row; min_seed_n: the fewest scores "
                                       "among them. Resampled within its seed, a seed of one score adds no spread, so "
                                       "rows with small min_seed_n have intervals narrower than their level"},
                       {"wilson", "wilson_lo, wilson_hi: Wilson's score interval at the same level, over the row's "
                                  "n scores pooled, where every score is 0 or 1 (null otherwise); unlike the "
                                  "percentile interval it does not shrink to a point at 0 or 1"}};
    j["rows"] = nlohmann::json::array();
    for (const auto& r : s.rows)
        j["rows"].push_back({{"task", r.task},
                             {"group", r.group},
                             {"metric", r.metric},
                             {"condition", r.condition},
                             {"base", r.base},
                             {"layers", r.layers},
                             {"n", r.mean.n},
                             {"mean", detail::num_json(r.mean.value)},
                             {"ci_lo", detail::num_json(r.mean.lo)},
                             {"ci_hi", detail::num_json(r.mean.hi)},
                             {"rel_full", detail::num_json(r.rel_full.value)},
                             {"rel_full_lo", detail::num_json(r.rel_full.lo)},
                             {"rel_full_hi", detail::num_json(r.rel_full.hi)},
                             {"rel_full_undefined", r.rel_full.undefined},
                             {"seeds", r.seeds},
                             {"min_seed_n", r.min_seed_n},
                             {"wilson_lo", detail::num_json(r.wilson.lo)},
                             {"wilson_hi", detail::num_json(r.wilson.hi)},
                             {"bootstrap_seed", r.bootstrap_seed}});
    return j;
}

/// Writes summary.csv, summary.json and diffs.csv of `records` into `dir`.
inline Summary write_summaries(const std::filesystem::path& dir, const ScoreRecords& records,
                               const std::vector<std::string>& conditions, const BootstrapOptions& opt = {}) {
    Summary s = summarize(records, conditions, opt);
    write_file_atomic(dir / "summary.csv", summary_csv(s));
    write_file_atomic(dir / "summary.json", summary_json(s).dump(1) + "\n");
    write_file_atomic(dir / "diffs.csv", diffs_csv(s));
    return s;
}
inline Summary write_summaries(const std::filesystem::path& dir, const std::vector<nlohmann::json>& records,
                               const std::vector<std::string>& conditions, const BootstrapOptions& opt = {}) {
    ScoreRecords scores;
    for (const nlohmann::json& r : records) scores.add(r);
    return write_summaries(dir, scores, conditions, opt);
}

}  // namespace hylens::experiments
