#pragma once
// The result folder of a study: run.json, items.jsonl (one record per (task, seed, item,
// condition), records.hpp), resume, sharding and the merge of shard folders. Every study of
// the Encode-Address family (circuit, encode-swap, transplant, query-map, stitch) writes its
// records through a StudyFolder, so --resume, --shard, merge and MPI behave the same in all.
//
//   run.json   {"kind": K, "study": definition + {"shard": "I/N"}, "status": "running" |
//               "complete" | "incomplete" (merged from folders not all complete), "started",
//               "finished", "records", run_info...}
//
// A new folder (no --resume) must not hold records yet. With --resume, run.json's kind and
// study must equal this run's (a clear error otherwise), a torn last line of items.jsonl (a
// killed run) is cut off, and the records on disk are kept: done(key) says which to skip.
// A record on disk twice, or one the study never asks done() for (an edited seed, another
// shard's item), is a FormatError (check_resumed_records). finish() rewrites items.jsonl in
// RecordKey order, atomically, and marks run.json complete with the file's fingerprint
// ("items_fnv1a64"), which a later resume or merge checks; the study writes its summaries
// from records() before calling it.
//
// Sharding: the study numbers its units of work (ordinal 0, 1, ...) in a fixed order; shard I
// of N runs those with ordinal % N == I. merge_study_folders() joins the shard folders of one
// study into one folder whose items.jsonl is byte for byte the unsharded run's.

#include <algorithm>   // std::all_of, std::sort, std::stable_sort, std::max
#include <cmath>       // std::isnan
#include <cstddef>     // std::size_t
#include <cstdint>     // std::uint64_t
#include <cstdio>      // std::snprintf
#include <ctime>       // std::time, std::gmtime, std::strftime
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <functional>  // std::function
#include <iterator>    // std::istreambuf_iterator
#include <memory>      // std::unique_ptr
#include <optional>    // std::optional
#include <set>         // std::set
#include <string>      // std::string
#include <string_view> // std::string_view
#include <system_error> // std::error_code
#include <tuple>       // std::make_tuple
#include <utility>     // std::move, std::pair
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "../core/precision.hpp"  // precision::round_activations
#include "../core/simd.hpp"       // simd::active
#include "../io/json_depth.hpp"
#include "bootstrap.hpp"  // Interval, sample_sd
#include "folder_lock.hpp"
#include "input_fingerprint.hpp"
#include "records.hpp"

namespace hylens::experiments {

/// Shard I of N (0 <= I < N).
struct Shard {
    std::size_t index = 0, count = 1;
    std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
    bool takes(std::size_t n) const noexcept { return n % count == index; }
};

/// Parses "I/N".
inline Shard parse_shard(std::string_view s) {
    const auto digits = [](std::string_view d) {
        return !d.empty() && d.size() < 7 && d.find_first_not_of("0123456789") == std::string_view::npos;
    };
    const std::size_t slash = s.find('/');
    check(slash != std::string_view::npos && digits(s.substr(0, slash)) && digits(s.substr(slash + 1)),
          "[shard] '", s, "' is not I/N (e.g. 0/4)");
    Shard r{std::stoul(std::string(s.substr(0, slash))), std::stoul(std::string(s.substr(slash + 1)))};
    check(r.count >= 1 && r.index < r.count, "[shard] '", s, "': need 0 <= I < N");
    return r;
}

namespace detail {

inline nlohmann::json read_json_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    check<FormatError>(in.good(), "[experiment] cannot read ", p.string());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    io::check_json_depth(text, "[experiment] " + p.string());
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[experiment] ", p.string(), " is not JSON: ", e.what());
    }
}

/// A result folder's run.json to resume: a JSON object (an array or a number there was the JSON
/// library's bare "cannot use value() with array", naming no file).
inline nlohmann::json read_run_json(const std::filesystem::path& p, const std::string& who) {
    nlohmann::json j = read_json_file(p);
    check<FormatError>(j.is_object(), who, p.string(), " is not a study's run.json (it holds ", j.type_name(),
                       ", not an object): the file was edited or comes from another program");
    return j;
}

/// The first place where two JSON values differ, below `path`: "conditions[11]: (none) and
/// \"NONE@0-3\"" (objects by key, arrays by index; each value cut to 120 characters).
inline std::string first_difference(const nlohmann::json& a, const nlohmann::json& b, const std::string& path) {
    const auto shown = [](const nlohmann::json* v) {
        if (!v) return std::string("(none)");
        std::string s = v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return s.size() > 120 ? s.substr(0, 117) + "..." : s;
    };
    if (a.is_object() && b.is_object()) {
        std::set<std::string> keys;
        for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
        for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
        for (const std::string& k : keys)
            if (!a.contains(k) || !b.contains(k) || a[k] != b[k]) {
                const std::string p = path.empty() ? k : path + "." + k;
                if (!a.contains(k) || !b.contains(k)) return p + ": " + shown(a.contains(k) ? &a[k] : nullptr) + " and " +
                                                             shown(b.contains(k) ? &b[k] : nullptr);
                return first_difference(a[k], b[k], p);
            }
    }
    if (a.is_array() && b.is_array())
        for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i)
            if (i >= a.size() || i >= b.size() || a[i] != b[i]) {
                const std::string p = path + "[" + std::to_string(i) + "]";
                if (i >= a.size() || i >= b.size()) return p + ": " + shown(i < a.size() ? &a[i] : nullptr) + " and " +
                                                           shown(i < b.size() ? &b[i] : nullptr);
                return first_difference(a[i], b[i], p);
            }
    return (path.empty() ? std::string("the definition") : path) + ": " + shown(&a) + " and " + shown(&b);
}

/// Where two study definitions differ, for a message: the first difference (first_difference)
/// in each of up to three differing keys, "items: 6 and 7; seeds[1]: (none) and 2". A
/// definition can be long (the circuit study's structure, a condition list): a message
/// printing both whole, or each cut short, hid the setting that differed.
inline std::string definition_difference(const nlohmann::json& a, const nlohmann::json& b) {
    if (!a.is_object() || !b.is_object()) return first_difference(a, b, "");
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    std::string out;
    std::size_t n = 0;
    for (const std::string& k : keys) {
        if (a.contains(k) && b.contains(k) && a[k] == b[k]) continue;
        if (n++ < 3) {
            nlohmann::json x = nlohmann::json::object(), y = nlohmann::json::object();
            if (a.contains(k)) x[k] = a[k];
            if (b.contains(k)) y[k] = b[k];
            out += (n > 1 ? "; " : "") + first_difference(x, y, "");
        }
    }
    if (n > 3) out += "; and " + std::to_string(n - 3) + " more";
    return out;
}

/// The refusal of a folder that holds records but no run.json: nothing says which study
/// wrote them, so --resume cannot continue it.
inline void check_no_orphan_records(const std::filesystem::path& items, const std::string& kind) {
    namespace fs = std::filesystem;
    check(!fs::exists(items) || fs::file_size(items) == 0, "[", kind, "] ", items.string(),
          " holds records but its folder has no run.json, so nothing says which study wrote them: "
          "choose another output folder (or move that items.jsonl away)");
}

/// The run.json keys naming a model's family, compared as written (the keys naming a folder or a
/// file are input_fingerprint.hpp's kInputPathKeys).
inline constexpr const char* kInputTypeKeys[] = {"model_type", "host_type", "donor_type"};

/// The run.json keys saying how the products were computed, compared as written:
/// "bf16_activations" (precision.hpp), which changes the records of a model with bf16 weights.
/// (The kernels' level, "simd", is recorded, not compared: simd_levels.)
inline constexpr const char* kArithmeticKeys[] = {"bf16_activations"};

/// The first input named in both run.json files on which they disagree, as "model \"a\"
/// and \"b\"" ("" when they agree). Where both record an input's contents digest, or else its
/// header fingerprint (input_fingerprint.hpp), those are compared, wherever the inputs lay
/// (copies of one checkpoint on two nodes agree, a checkpoint overwritten in place does not);
/// otherwise the paths, resolved. A key only one of them has is not compared (older folders
/// lack some).
inline std::string differing_input(const nlohmann::json& prev, const nlohmann::json& now) {
    namespace fs = std::filesystem;
    if (!prev.is_object() || !now.is_object()) return "";
    for (const char* key : kInputPathKeys) {
        if (!prev.contains(key) || !now.contains(key)) continue;
        const nlohmann::json &a = prev[key], &b = now[key];
        // The contents digest (weights included) where both have it; the header fingerprint of
        // a folder written before it.
        bool compared = false;
        for (const auto& [suffix, what] : {std::pair{"_contents", "digests"}, std::pair{"_fingerprint", "fingerprints"}}) {
            const std::string k = std::string(key) + suffix;
            if (!prev.contains(k) || !now.contains(k)) continue;
            if (prev[k] != now[k])
                return std::string(key) + " " + a.dump() + " and " + b.dump() + " (other contents: " + what + " " +
                       prev[k].dump() + " and " + now[k].dump() + ")";
            compared = true;
            break;
        }
        if (compared) continue;
        bool same = a == b;
        if (!same && a.is_string() && b.is_string()) {
            std::error_code ea, eb;
            const fs::path pa = fs::weakly_canonical(a.get<std::string>(), ea), pb = fs::weakly_canonical(b.get<std::string>(), eb);
            same = !ea && !eb && pa == pb;
        }
        if (!same) return std::string(key) + " " + a.dump() + " and " + b.dump();
    }
    for (const char* key : kInputTypeKeys)
        if (prev.contains(key) && now.contains(key) && prev[key] != now[key])
            return std::string(key) + " " + prev[key].dump() + " and " + now[key].dump();
    for (const char* key : kArithmeticKeys)
        if (prev.contains(key) && now.contains(key) && prev[key] != now[key])
            return std::string(key) + " " + prev[key].dump() + " and " + now[key].dump();
    return "";
}

}  // namespace detail

/// `run_info` as a study's run.json records what it read and how it computed: the digests of
/// each input (with_input_fingerprints), "bf16_activations" (precision::round_activations:
/// products with bf16 weights round their inputs to bf16, HYLENS_BF16_ACTIVATIONS=1 or Python's
/// set_bf16_activations, which changes a bf16 model's records; a resume or a merge compares it:
/// detail::differing_input) and "simd", the kernels' instruction-set level (simd::active;
/// avx512bf16 computes as avx512 unless activations are rounded to bf16, so it is recorded as
/// avx512 then; a resume or merge at other levels records them all: detail::simd_levels).
inline nlohmann::json with_run_inputs(nlohmann::json run_info) {
    run_info = with_input_fingerprints(std::move(run_info));
    if (run_info.is_object()) {
        const bool rounded = precision::round_activations();
        run_info["bf16_activations"] = rounded;
        run_info["simd"] = simd::level_name(rounded ? simd::active() : simd::f32_level(simd::active()));
    }
    return run_info;
}

namespace detail {

/// The kernels' instruction-set levels of the records of several run.json files (a folder and
/// its resume, or the folders of a merge): their "simd" level, or the sorted list of the
/// levels when they differ (the records of two levels differ in their last bits, and a greedy
/// answer may flip, so such a folder is not the bytes of any one run: a requeued job on another
/// kind of node, the ranks of an mpirun over unlike nodes); null when one lacks the key (a folder
/// written before it: the level of its records is not known).
inline nlohmann::json simd_levels(const std::vector<nlohmann::json>& runs) {
    std::set<std::string> levels;
    for (const nlohmann::json& r : runs) {
        const nlohmann::json v = r.is_object() && r.contains("simd") ? r["simd"] : nlohmann::json();
        if (v.is_string()) levels.insert(v.get<std::string>());
        else if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_string(); }))
            for (const auto& x : v) levels.insert(x.get<std::string>());
        else return nullptr;
    }
    if (levels.size() == 1) return *levels.begin();
    return std::vector<std::string>(levels.begin(), levels.end());
}

/// On a resume of a folder whose run.json has no contents digest of an input (written before
/// it existed), the digest of what is on disk now vouches for nothing the earlier records were
/// made from: it is left out of `run_info`, so later resumes and merges compare the header
/// fingerprints, as they did.
inline void keep_unverified(const nlohmann::json& prev, nlohmann::json& run_info) {
    if (!prev.is_object() || !run_info.is_object()) return;
    for (const char* key : kInputPathKeys) {
        const std::string ck = std::string(key) + "_contents";
        if (!prev.contains(ck)) run_info.erase(ck);
    }
}

/// Sets run.json's "simd" of a resumed folder holding records: the level of the records on disk
/// (`prev`, its run.json) and, when this run wrote records (`wrote`), this run's too
/// (simd_levels of both); no level where `prev` has none (an older folder: its records' level
/// is not known). A resume that adds nothing keeps the folder's level.
inline void resumed_simd(nlohmann::json& run, const nlohmann::json& prev, const nlohmann::json& now_level, bool wrote) {
    const nlohmann::json then = prev.is_object() && prev.contains("simd") ? prev["simd"] : nlohmann::json();
    const nlohmann::json levels = then.is_null() ? then : wrote ? simd_levels({prev, {{"simd", now_level}}}) : then;
    if (levels.is_null()) run.erase("simd");
    else run["simd"] = levels;
}

/// Resuming a folder with another model, tokenizer, host or donor mixed two models' records
/// in one items.jsonl without a word: the inputs named in both run.json files must agree.
inline void check_same_inputs(const nlohmann::json& prev, const nlohmann::json& now, const std::filesystem::path& run_path,
                              const std::string& kind) {
    const std::string d = differing_input(prev, now);
    check(d.empty(), "[", kind, "] --resume: ", run_path.string(), " and this run differ in ", d,
          "; resume with the same inputs or choose another output folder");
}

}  // namespace detail

/// A study's seeds, each once: a seed listed twice queued its items twice (duplicate records,
/// counted twice by the summaries, or a failure at the end on the duplicate key).
inline void check_distinct_seeds(const std::vector<std::uint64_t>& seeds, const char* study) {
    for (std::size_t i = 0; i < seeds.size(); ++i)
        for (std::size_t j = 0; j < i; ++j) check(seeds[i] != seeds[j], "[", study, "] seed ", seeds[i], " is listed twice");
}

namespace detail {

inline std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

inline std::string pretty_json(const nlohmann::json& j) {
    return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

/// run.json's fingerprint of the items.jsonl a finished run (or a merge) wrote:
/// fnv1a64_hex of the file's bytes. A resume or a merge of that folder checks it, so a record
/// edited, added or removed after the run is an error, not a summarised result.
inline constexpr const char* kItemsFingerprintKey = "items_fnv1a64";

/// FormatError when run.json records an items fingerprint that `items` no longer has, or is
/// the run.json of a merge that stopped before its files were written (status "merging").
inline void check_items_unchanged(const nlohmann::json& run, const std::filesystem::path& items, const std::string& who) {
    check<FormatError>(!run.is_object() || !run.contains("status") || run["status"] != "merging", who,
                       items.parent_path().string(), " holds a merge that stopped before it finished (run.json's status is "
                       "'merging'): rerun that merge with this folder as its --out, then use the folder");
    if (!run.is_object() || !run.contains(kItemsFingerprintKey)) return;  // a killed run or an older folder
    const std::string now = fnv1a64_file_hex(items), then = run[kItemsFingerprintKey].is_string()
                                                          ? run[kItemsFingerprintKey].get<std::string>()
                                                          : run[kItemsFingerprintKey].dump();
    check<FormatError>(now == then, who, items.string(), " is not the file its run wrote (run.json's ", kItemsFingerprintKey,
                       " is ", then, ", the file's ", now,
                       "): a record was edited, added or removed after the run; rerun that study or shard");
}

/// Sorts records by RecordKey (task, seed, item, condition).
inline void sort_by_key(std::vector<nlohmann::json>& records) {
    std::vector<std::pair<RecordKey, std::size_t>> keys;
    keys.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) keys.push_back({record_key(records[i], "record " + std::to_string(i)), i});
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<nlohmann::json> out;
    out.reserve(records.size());
    for (const auto& k : keys) out.push_back(std::move(records[k.second]));
    records = std::move(out);
}

/// The study a run.json describes: its "kind", "channels" where it has none (the channel
/// study's folders).
inline std::string run_kind(const nlohmann::json& run) {
    return run.is_object() && run.contains("kind") && run["kind"].is_string() ? run["kind"].get<std::string>() : "channels";
}

/// Sorts the lines of a skipped.jsonl by (task, seed, item): the items.jsonl order, so a run's
/// file and a merge of its shards' are the same bytes.
inline void sort_skipped(std::vector<nlohmann::json>& skipped) {
    const auto key = [](const nlohmann::json& r) {
        return std::make_tuple(r.at("task").get<std::string>(), r.at("seed").get<std::uint64_t>(), r.at("item").get<std::size_t>());
    };
    std::stable_sort(skipped.begin(), skipped.end(), [&](const nlohmann::json& a, const nlohmann::json& b) { return key(a) < key(b); });
}

inline std::string jsonl_text(const std::vector<nlohmann::json>& records) {
    std::string text;
    for (const auto& r : records) text += json_line(r) + "\n";
    return text;
}

}  // namespace detail

/// A number of a summary.csv: %.10g.
inline std::string csv_number(double x) {
    char b[40];
    std::snprintf(b, sizeof b, "%.10g", x);
    return b;
}

/// ",value,lo,hi" of an interval, for a summary.csv row.
inline std::string csv_interval(const Interval& i) {
    return "," + csv_number(i.value) + "," + csv_number(i.lo) + "," + csv_number(i.hi);
}

/// {"value", "lo", "hi"} of an interval, for a summary.json.
inline nlohmann::json interval_json(const Interval& i) { return {{"value", i.value}, {"lo", i.lo}, {"hi", i.hi}}; }

/// interval_json of a score pooled over seeds, with each seed's value ("per_seed", in seed
/// order) and their sample standard deviation ("sd_seeds"; null below two seeds).
inline nlohmann::json seeds_interval_json(const Interval& i, const std::vector<double>& per_seed) {
    nlohmann::json j = interval_json(i);
    j["per_seed"] = per_seed;
    const double sd = sample_sd(per_seed);
    j["sd_seeds"] = std::isnan(sd) ? nlohmann::json(nullptr) : nlohmann::json(sd);
    return j;
}

struct StudyFolderOptions {
    std::filesystem::path out;   ///< the result folder (created)
    std::string kind;            ///< the study ("circuit", "transplant", ...): run.json "kind"
    nlohmann::json definition;   ///< what defines the study (a resumed run must match it); no "shard" key
    bool resume = false;
    Shard shard{};
    nlohmann::json run_info = nlohmann::json::object();  ///< merged into run.json (model, arguments, version, ...)
};

/// What the options of every Encode-Address study share: where the results go and how this run
/// takes part in the study. Each study's options derive from it.
struct StudyRunOptions {
    std::filesystem::path out;  ///< the result folder
    Shard shard{};              ///< run shard I of N
    bool resume = false;        ///< continue a killed run in out (records already there are kept)
    bool progress = true;       ///< the progress line on stderr (progress.hpp)
    nlohmann::json run_info = nlohmann::json::object();  ///< merged into run.json

    /// The result-folder options of a study of `kind` defined by `definition`.
    StudyFolderOptions folder(std::string kind, nlohmann::json definition) const {
        return {out, std::move(kind), std::move(definition), resume, shard, run_info};
    }
};

class StudyFolder {
public:
    explicit StudyFolder(StudyFolderOptions o) : o_(std::move(o)) {
        namespace fs = std::filesystem;
        o_.run_info = with_run_inputs(std::move(o_.run_info));
        check(!o_.kind.empty(), "[study] no study kind");
        check(o_.definition.is_object() && !o_.definition.contains("shard"), "[study] ", o_.kind,
              ": the definition must be a JSON object without a 'shard' key");
        lock_ = std::make_unique<FolderLock>(o_.out, o_.kind);  // makes the folder
        const fs::path items = items_path(), run_path = o_.out / "run.json";
        nlohmann::json study = o_.definition;
        study["shard"] = o_.shard.text();
        if (o_.resume && fs::exists(run_path)) {
            const nlohmann::json prev = detail::read_run_json(run_path, "[" + o_.kind + "] --resume: ");
            const nlohmann::json prev_kind = prev.value("kind", nlohmann::json());
            check(prev_kind == o_.kind, "[", o_.kind, "] --resume: ", run_path.string(), " holds a '",
                  prev_kind.is_string() ? prev_kind.get<std::string>() : std::string("channels"), "' study, not '", o_.kind, "'");
            check(prev.value("study", nlohmann::json()) == study, "[", o_.kind, "] --resume: ", run_path.string(),
                  " describes another study: ", detail::definition_difference(prev.value("study", nlohmann::json()), study),
                  " (there and here); resume with the same settings or choose another output folder");
            detail::check_same_inputs(prev, o_.run_info, run_path, o_.kind);
            detail::check_items_unchanged(prev, items, "[" + o_.kind + "] --resume: ");
            detail::keep_unverified(prev, o_.run_info);
            prev_run_ = prev;
        } else if (o_.resume) {
            detail::check_no_orphan_records(items, o_.kind);
        } else {
            check(!fs::exists(items) || fs::file_size(items) == 0, "[", o_.kind, "] ", items.string(),
                  " already exists: continue it with --resume (Python: resume=True) or choose another output folder");
        }
        records_ = read_records(items, o_.resume);
        for (std::size_t i = 0; i < records_.size(); ++i) {
            const RecordKey k = record_key(records_[i], items.string() + " line " + std::to_string(i + 1));
            check<FormatError>(done_.insert(k).second, "[", o_.kind, "] ", items.string(), " holds record (", k.task,
                               ", seed ", k.seed, ", item ", k.item, ", ", k.condition, ") twice");
        }
        resumed_ = records_.size();
        if (resumed_ == 0) prev_run_ = nullptr;  // no record of its: the folder is this run's alone
        run_ = o_.run_info;
        run_["kind"] = o_.kind;
        run_["study"] = study;
        run_["status"] = "running";
        run_["started"] = detail::utc_now();
        // A resumed folder's run.json is rewritten at its first new record, after its records are
        // known to be the study's (check_resumed_records): a refused resume leaves a finished
        // run.json as it was, and so does a resume of a finished folder killed before its end
        // (it marked the folder running and dropped its items fingerprint, so an edited record
        // passed the next resume).
        if (resumed_ == 0) {
            start();
            checked_ = true;
        }
        appender_ = std::make_unique<LineAppender>(items);
    }

    const std::filesystem::path& out() const noexcept { return o_.out; }
    std::filesystem::path items_path() const { return o_.out / "items.jsonl"; }
    const Shard& shard() const noexcept { return o_.shard; }
    /// Records found on disk when the folder was opened (--resume).
    std::size_t resumed() const noexcept { return resumed_; }
    /// Records appended by this run.
    std::size_t written() const noexcept { return records_.size() - resumed_; }

    /// True when the record of `k` is on disk already. A study asks this for every key it
    /// makes in this shard; a resumed record never asked for is not the study's (below).
    bool done(const RecordKey& k) const {
        const bool d = done_.count(k) != 0;
        if (d && resumed_ > 0) claimed_.insert(k);
        return d;
    }

    /// Every record found on disk at --resume must be one this study makes in this shard (the
    /// study asked done() for its key): a record hand-edited to another seed, item or condition,
    /// or another shard's, would be counted by the summaries as if the study had made it.
    /// A resumed study calls it once it has asked for every key of its shard, before its
    /// first append (the studies: before their forwards); run.json is marked running at the
    /// first append after it, so a refusal, or a resume with nothing left to do, leaves a
    /// finished run.json as it was until finish(). append() refuses a resumed folder not
    /// checked yet; finish() checks one that appended nothing.
    void check_resumed_records() {
        verify_claims();
        checked_ = true;
    }

    /// True when unit `ordinal` of the study belongs to this shard.
    bool mine(std::size_t ordinal) const noexcept { return o_.shard.takes(ordinal); }

    /// Appends whole lines and fsyncs them. A key already recorded is an error.
    void append(const std::vector<nlohmann::json>& records) {
        check(checked_, "[", o_.kind, "] a resumed study calls check_resumed_records() before its first append");
        if (records.empty()) return;
        // Every key checked before run.json is marked running or a line is written.
        std::set<RecordKey> fresh;
        for (const auto& r : records) {
            const RecordKey k = record_key(r, "new record");
            check(!done_.count(k) && fresh.insert(k).second, "[", o_.kind, "] record (", k.task, ", seed ", k.seed,
                  ", item ", k.item, ", ", k.condition, ") written twice");
        }
        start();
        done_.insert(fresh.begin(), fresh.end());
        for (const auto& r : records) appender_->add(json_line(r));
        appender_->sync();
        records_.insert(records_.end(), records.begin(), records.end());
    }

    /// Every record (resumed and new), sorted by RecordKey; the resumed ones checked first.
    std::vector<nlohmann::json> records() const {
        verify_claims();
        std::vector<nlohmann::json> r = records_;
        detail::sort_by_key(r);
        return r;
    }

    /// Rewrites items.jsonl in RecordKey order and marks run.json complete; `extra` (an
    /// object) is merged into run.json.
    void finish(const nlohmann::json& extra = nlohmann::json::object()) {
        if (!checked_) check_resumed_records();
        appender_.reset();
        const std::string text = detail::jsonl_text(records());
        write_file_atomic(items_path(), text);
        run_[detail::kItemsFingerprintKey] = fnv1a64_hex(text);
        if (extra.is_object())
            for (auto it = extra.begin(); it != extra.end(); ++it) run_[it.key()] = it.value();
        if (!prev_run_.is_null()) detail::resumed_simd(run_, prev_run_, o_.run_info.value("simd", nlohmann::json()), written() > 0);
        run_["status"] = "complete";
        run_["finished"] = detail::utc_now();
        run_["records"] = records_.size();
        run_["records_written"] = written();
        write_file_atomic(o_.out / "run.json", detail::pretty_json(run_));
    }

private:
    /// Writes run.json "running" (once), before this run's first record.
    void start() {
        if (started_) return;
        if (!prev_run_.is_null()) detail::resumed_simd(run_, prev_run_, o_.run_info.value("simd", nlohmann::json()), true);
        write_file_atomic(o_.out / "run.json", detail::pretty_json(run_));
        started_ = true;
    }

    void verify_claims() const {
        for (std::size_t i = 0; i < resumed_; ++i) {
            const RecordKey k = record_key(records_[i], "record " + std::to_string(i));
            check<FormatError>(claimed_.count(k) != 0, "[", o_.kind, "] --resume: ", items_path().string(),
                               " holds record (", k.task, ", seed ", k.seed, ", item ", k.item, ", ", k.condition,
                               "), which this study does not make in shard ", o_.shard.text(),
                               " (another task, seed, item, condition or shard): the file was edited or comes from "
                               "another run; remove that line or resume in the folder that run wrote");
        }
    }

    StudyFolderOptions o_;
    std::unique_ptr<FolderLock> lock_;  ///< held while the folder is this run's
    std::vector<nlohmann::json> records_;
    std::set<RecordKey> done_;
    mutable std::set<RecordKey> claimed_;  ///< resumed keys the study asked done() for
    std::size_t resumed_ = 0;
    bool started_ = false;  ///< run.json marked running by this run
    bool checked_ = false;  ///< the resumed records are the study's (check_resumed_records), or none were
    nlohmann::json prev_run_;  ///< the run.json of the records resumed (null: none resumed)
    nlohmann::json run_;
    std::unique_ptr<LineAppender> appender_;
};

struct MergeResult {
    std::size_t records = 0, folders = 0, incomplete = 0;  ///< incomplete: folders whose run was not complete
    std::size_t missing_shards = 0;                         ///< shards i/N of the study not among the folders
};

namespace detail {

/// The shard folders of one study, read and checked for a merge.
struct ShardFolders {
    MergeResult counts;                      ///< folders and incomplete (records set by the caller)
    nlohmann::json study;                    ///< the definition, shard aside
    std::vector<nlohmann::json> runs;        ///< every folder's run.json, in the order given
    nlohmann::json sources = nlohmann::json::array();  ///< run.json "merged_from"
    std::vector<std::string> missing;        ///< shards "i/N" of the study that no folder holds
    std::vector<nlohmann::json> records;     ///< every folder's records, unsorted (none with a `keep`)
    std::vector<std::filesystem::path> items_files;  ///< every folder's items.jsonl, in the order given
    std::vector<LineRef> lines;              ///< with a `keep`: where each record kept lies, in the order kept
};

/// Takes each record a merge reads, in place of `records` (the channel merge: ScoreRecords::add,
/// what the summaries read); the merge then writes each record's line again from its folder's
/// file (write_record_lines).
using KeepRecord = std::function<void(const nlohmann::json& record, const std::string& where)>;

/// The seeds a study definition names ("seeds": [...] or "seed": n); none when it names none.
inline std::optional<std::set<std::uint64_t>> defined_seeds(const nlohmann::json& study) {
    std::set<std::uint64_t> seeds;
    if (study.contains("seeds") && study["seeds"].is_array()) {
        for (const auto& s : study["seeds"])
            if (s.is_number_unsigned()) seeds.insert(s.get<std::uint64_t>());
    } else if (study.contains("seed") && study["seed"].is_number_unsigned()) {
        seeds.insert(study["seed"].get<std::uint64_t>());
    } else {
        return std::nullopt;
    }
    return seeds;
}

/// A merge writes its files over `out`'s and leaves the rest, so `out` may hold an earlier merge
/// of the same study (the merge replaces it) but no other run's result: a study's folder
/// (another study's summaries, adapters or skipped items would stay beside the merged records)
/// or an items.jsonl without run.json.
/// What check_merge_output can check before the folders are read (under mpirun, before the
/// ranks run): `out` holds no result, or a merge's. Returns its run.json (null when none).
inline constexpr const char* kMergeTargetFix =
    ": merge into a folder without run.json and items.jsonl, or into an earlier merge of the same study";

inline nlohmann::json check_merge_target(const std::filesystem::path& out) {
    namespace fs = std::filesystem;
    const bool has_run = fs::exists(out / "run.json");
    if (!has_run && !fs::exists(out / "items.jsonl")) return nullptr;
    const std::string where = "[merge] the output folder " + out.string();
    const char* fix = kMergeTargetFix;
    check(has_run, where, " holds an items.jsonl and no run.json", fix);
    nlohmann::json prev;
    try {
        prev = read_json_file(out / "run.json");
    } catch (const Error&) {
        fail(where, " holds a run.json that is not a study's", fix);
    }
    check(prev.is_object() && prev.contains("merged_from"), where, " holds a '", run_kind(prev), "' study's run (not a merge)",
          fix);
    return prev;
}

inline void check_merge_output(const std::filesystem::path& out, const ShardFolders& f) {
    const nlohmann::json prev = check_merge_target(out);
    if (prev.is_null()) return;
    const std::string where = "[merge] the output folder " + out.string();
    const char* fix = kMergeTargetFix;
    check(run_kind(prev) == run_kind(f.runs.front()), where, " holds a '", run_kind(prev), "' study, and the folders merged are a '",
          run_kind(f.runs.front()), "' study", fix);
    nlohmann::json study = prev.value("study", nlohmann::json());
    if (study.is_object()) study.erase("shard");
    check(study == f.study, where, " holds a merge of another study: ", definition_difference(study, f.study),
          " (there and in the folders merged)", fix);
}

/// Checks one record of a merged folder (its run.json, the record, "FILE line N"): a
/// FormatError when the record is not one that folder's study and shard make.
using MergeRecordCheck = std::function<void(const nlohmann::json&, const nlohmann::json&, const std::string&)>;

/// The check of a merged record's task and condition: `task_ok` and `condition_ok` say whether
/// the study (its definition) makes them; a definition without the names (an older folder's)
/// takes any. A merge loads no model, so an unfinished folder's
/// records are checked by these names and their seeds, not key by key as --resume checks them.
inline MergeRecordCheck record_names_check(const char* kind, std::function<bool(const std::string&)> task_ok,
                                           std::function<bool(const std::string&)> condition_ok) {
    return [=](const nlohmann::json&, const nlohmann::json& r, const std::string& where) {
        const std::string task = r.at("task").get<std::string>(), condition = r.at("condition").get<std::string>();
        const char* fix = ": the file was edited or comes from another run";
        check<FormatError>(task_ok(task), "[merge] ", where, " holds a record of task '", task, "', which this ", kind,
                           " study does not run", fix);
        check<FormatError>(condition_ok(condition), "[merge] ", where, " holds a record of condition '", condition,
                           "', which this ", kind, " study does not make", fix);
    };
}

/// The test of a merged record's task in a study of one task: `name`, or any task where the
/// definition names none (an older folder's).
inline std::function<bool(const std::string&)> task_is(std::string name) {
    return [name = std::move(name)](const std::string& t) { return name.empty() || t == name; };
}

/// True when `name` is one of the strings of `list` (an array of strings, or of objects with a
/// "name"); false for anything else.
inline bool listed(const nlohmann::json& list, const std::string& name) {
    if (!list.is_array()) return false;
    for (const auto& e : list)
        if ((e.is_string() && e.get<std::string>() == name) ||
            (e.is_object() && e.contains("name") && e["name"].is_string() && e["name"].get<std::string>() == name))
            return true;
    return false;
}

/// A definition's string value at `key` ("" where it has none).
inline std::string definition_string(const nlohmann::json& d, const char* key) {
    return d.is_object() && d.contains(key) && d[key].is_string() ? d[key].get<std::string>() : std::string();
}

/// Reads the folders of a merge into `out`: each must hold a run.json that `accept(path, run)`
/// takes (it fails otherwise) and the same study definition (shard aside); each shard at most
/// once, of one shard count N; no record key in two folders; `out` none of them (the merge
/// would overwrite what it reads). A folder whose run.json records its items fingerprint must
/// still hold that file (check_items_unchanged); every record's seed must be one the
/// definition names, and `record_ok` (when given) checks the rest of it. Shards i/N that no
/// folder holds are listed in `missing`: a merge of some shards is a partial result, not the
/// study's (merged_run marks it incomplete). The files are read line by line; with `keep`,
/// each record goes to it instead of `records`, and `lines` says where it lies.
inline ShardFolders read_shard_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                       const std::function<void(const std::filesystem::path&, const nlohmann::json&)>& accept,
                                       const MergeRecordCheck& record_ok = {}, const KeepRecord& keep = {}) {
    namespace fs = std::filesystem;
    check(!dirs.empty(), "[merge] no result folder given");
    check(!out.empty(), "[merge] the output folder is an empty path");
    check(!fs::exists(out) || fs::is_directory(out), "[merge] the output folder ", out.string(), " is a file");
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        std::error_code ec;  // a folder that does not exist is reported below, with its run.json
        check(!fs::equivalent(out, dirs[i], ec), "[merge] the output folder ", out.string(), " is one of the folders to merge (",
              dirs[i].string(), "): choose another output folder");
        for (std::size_t j = 0; j < i; ++j)
            check(!fs::equivalent(dirs[i], dirs[j], ec), "[merge] ", dirs[i].string(), " is given twice (as ",
                  dirs[j].string(), ")");
    }
    ShardFolders f;
    std::set<RecordKey> keys;
    std::set<std::string> shards;
    std::size_t shard_count = 0;
    std::set<std::size_t> present;
    // One folder: its run.json and records, into f.
    const auto read_folder = [&](const fs::path& d) {
        const nlohmann::json run = read_json_file(d / "run.json");
        accept(d / "run.json", run);
        nlohmann::json s = run["study"];
        const std::string shard = s.value("shard", "0/1");
        s.erase("shard");
        if (f.runs.empty()) f.study = s;
        check(s == f.study, "[merge] ", d.string(), " is another study than ", dirs.front().string(), ": ",
              definition_difference(s, f.study), " (there and in the first)");
        // Shards of one study run on two models merged into one result that named the first.
        // Every pair of folders: the strongest digest two folders share is compared, so an
        // older first folder (no contents digest) must not hide two later ones that differ.
        for (std::size_t j = 0; j < f.runs.size(); ++j) {
            const std::string other = differing_input(f.runs[j], run);
            check(other.empty(), "[merge] ", dirs[j].string(), " and ", d.string(), " were run on other inputs: ", other);
        }
        f.runs.push_back(run);
        check(shards.insert(shard).second || shard == "0/1", "[merge] shard ", shard, " is given twice");
        Shard sh;
        try {
            sh = parse_shard(shard);
        } catch (const Error& e) {
            fail<FormatError>("[merge] ", (d / "run.json").string(), ": ", e.what());
        }
        if (shard_count == 0) shard_count = sh.count;
        check(sh.count == shard_count, "[merge] ", d.string(), " is shard ", shard, " where ", dirs.front().string(),
              " is one of ", shard_count, " shards");
        present.insert(sh.index);
        if (run.value("status", "") != "complete") ++f.counts.incomplete;
        f.sources.push_back({{"folder", d.string()}, {"shard", shard}, {"status", run.value("status", "")}});
        check_items_unchanged(run, d / "items.jsonl", "[merge] ");
        const std::optional<std::set<std::uint64_t>> seeds = defined_seeds(s);
        std::set<RecordKey> own;  // this folder's keys: one held twice is an edited file, not a second folder
        const std::size_t file = f.items_files.size();
        f.items_files.push_back(d / "items.jsonl");
        for_each_jsonl_line(d / "items.jsonl", false, [&](std::size_t line, std::string_view text, std::uint64_t offset) {
            const std::string where = (d / "items.jsonl").string() + " line " + std::to_string(line);
            nlohmann::json r = parse_jsonl_line(text, where);
            const RecordKey k = record_key(r, where);
            check<FormatError>(!seeds || seeds->count(k.seed), "[merge] ", where, " holds a record of seed ", k.seed,
                               ", which the study does not run (its seeds: ", (s.contains("seeds") ? s["seeds"] : s["seed"]).dump(),
                               "): the file was edited or comes from another run");
            if (record_ok) record_ok(run, r, where);
            check<FormatError>(own.insert(k).second, "[merge] ", where, " holds record (", k.task, ", seed ", k.seed, ", item ",
                               k.item, ", ", k.condition, ") twice: the file was edited");
            check(keys.insert(k).second, "[merge] record (", k.task, ", seed ", k.seed, ", item ", k.item, ", ", k.condition,
                  ") appears in more than one folder (", d.string(), ")");
            if (keep) {
                keep(r, where);
                f.lines.push_back(line_ref(file, line, text, offset));
            } else {
                f.records.push_back(std::move(r));
            }
        });
    };
    for (const fs::path& d : dirs) {
        check(fs::exists(d / "run.json"), "[merge] ", d.string(), " holds no run.json (not a study result folder)");
        // A value of another type than a study writes (an edited "shard": 0) is named with its
        // folder; it was the JSON library's bare "type must be string, but is number".
        try {
            read_folder(d);
        } catch (const nlohmann::json::exception& e) {
            fail<FormatError>("[merge] ", d.string(), " holds a run.json or items.jsonl value of another type or shape",
                              " than a study writes: ", e.what());
        }
        ++f.counts.folders;
    }
    if (shard_count > 1)
        for (std::size_t i = 0; i < shard_count; ++i)
            if (!present.count(i)) f.missing.push_back(std::to_string(i) + "/" + std::to_string(shard_count));
    f.counts.missing_shards = f.missing.size();
    check_merge_output(out, f);
    return f;
}

/// The merged folder's run.json: the first folder's, with "shard": "0/1", "merged_from",
/// "status" ("incomplete" when a folder was not complete), "records" and no timings; the
/// caller sets the fingerprint of the merged items.jsonl (kItemsFingerprintKey).
inline nlohmann::json merged_run(const ShardFolders& f, std::size_t records) {
    nlohmann::json run = f.runs.front(), study = f.study;
    study["shard"] = "0/1";
    run["study"] = study;
    run["merged_from"] = f.sources;
    run["status"] = f.counts.incomplete || f.counts.missing_shards ? "incomplete" : "complete";
    if (!f.missing.empty()) run["missing_shards"] = f.missing;
    run["records"] = records;
    run.erase(kItemsFingerprintKey);
    run.erase("records_written");
    run.erase("timings");
    const nlohmann::json levels = simd_levels(f.runs);
    if (levels.is_null()) run.erase("simd");
    else run["simd"] = levels;
    // An input's contents digest vouches for every record only where every folder has it (they
    // agree: read_shard_folders compared them); else the merge is as strong as its weakest folder.
    for (const char* key : kInputPathKeys) {
        const std::string ck = std::string(key) + "_contents";
        for (const nlohmann::json& r : f.runs)
            if (!r.contains(ck)) run.erase(ck);
    }
    return run;
}

/// Writes the merge's run.json with "status": "merging" before its records, so a merge killed
/// part-way leaves an earlier merge of the same study, which the next merge replaces
/// (check_merge_output), not an items.jsonl without run.json.
inline void start_merge(const std::filesystem::path& out, nlohmann::json run) {
    run["status"] = "merging";
    write_file_atomic(out / "run.json", pretty_json(run));
}

}  // namespace detail

/// The study definition (run.json "study") of the first result folder, which a study's merge
/// writes its summaries from (merge_study_folders checks that every folder has the same).
inline nlohmann::json first_study_definition(const std::vector<std::filesystem::path>& dirs) {
    check(!dirs.empty(), "[merge] no result folder given");
    check(std::filesystem::exists(dirs.front() / "run.json"), "[merge] ", dirs.front().string(),
          " holds no run.json (not a study result folder)");
    return detail::read_json_file(dirs.front() / "run.json").value("study", nlohmann::json());
}

/// Merges the shard folders of one study of kind `kind`: same kind and definition (shard
/// aside), no key in two folders, every shard at most once. Writes out/items.jsonl (RecordKey
/// order; the summaries of an earlier merge into `out` removed: summary.csv, summary.json,
/// circuit.json; merge_stitch_folders handles adapters.safetensors) and out/run.json (the first
/// folder's, "shard": "0/1", "merged_from", status
/// "complete" or "incomplete" when a folder was not complete or a shard is missing,
/// "missing_shards", "records"), then calls
/// write_summaries(out, records) for the study's own summary files. `record_ok` checks each
/// record beyond its seed (read_shard_folders): the study's task and condition names.
inline MergeResult merge_study_folders(
    const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out, const std::string& kind,
    const std::function<void(const std::filesystem::path&, const std::vector<nlohmann::json>&)>& write_summaries,
    const detail::MergeRecordCheck& record_ok = {}) {
    detail::ShardFolders f = detail::read_shard_folders(
        dirs, out,
        [&](const std::filesystem::path& p, const nlohmann::json& run) {
            check(run.value("kind", "") == kind && run.contains("study") && run["study"].is_object(), "[merge] ", p.string(),
                  " is not a '", kind, "' study (it holds a '", detail::run_kind(run), "' study)");
        },
        record_ok);
    detail::sort_by_key(f.records);
    const FolderLock lock(out, "merge");  // makes the folder
    detail::check_merge_output(out, f);   // again, now that no other run can write there
    const std::string text = detail::jsonl_text(f.records);
    nlohmann::json run = detail::merged_run(f, f.records.size());
    run[detail::kItemsFingerprintKey] = fnv1a64_hex(text);
    detail::start_merge(out, run);
    // An earlier merge into `out` left summaries this one may not write (no records: no summaries).
    for (const char* stale : {"summary.csv", "summary.json", "circuit.json"}) std::filesystem::remove(out / stale);
    write_file_atomic(out / "items.jsonl", text);
    // A record without a value its study's summaries read, or with one of another type (an
    // edited line of a killed shard, whose records no fingerprint vouches for), is named as such;
    // it was the JSON library's bare "key 'order' not found".
    try {
        if (write_summaries) write_summaries(out, f.records);
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[merge] a record of the folders merged lacks a value the ", kind,
                          " study's summaries read, or holds one of another type (", e.what(),
                          "): a file was edited or holds another study's lines; resume each unfinished folder (--resume "
                          "names the line) and merge again");
    }
    write_file_atomic(out / "run.json", detail::pretty_json(run));
    MergeResult res = f.counts;
    res.records = f.records.size();
    return res;
}

}  // namespace hylens::experiments
