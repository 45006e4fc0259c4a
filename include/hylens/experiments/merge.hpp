#pragma once
// Merging the result folders of a sharded study: the records of every folder's items.jsonl
// (each key at most once across folders), in canonical order, with summaries recomputed from
// them, so merging the shards of a study gives exactly the files of the unsharded run.
// The folders must describe the same study (run.json "study", shard aside), and their
// skipped.jsonl lines items of it, each once.

#include <algorithm>   // std::all_of, std::find, std::sort
#include <cstdint>     // std::uint64_t
#include <filesystem>  // std::filesystem
#include <set>         // std::set
#include <string>      // std::string
#include <tuple>       // std::tuple
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "channel_study.hpp"
#include "folder_lock.hpp"
#include "records.hpp"
#include "study_folder.hpp"  // MergeResult
#include "summary.hpp"

namespace hylens::experiments {

namespace detail {

/// A (task, seed, item) of a folder to merge must be one of its study and shard: a task and
/// seed the definition lists, an item below its "items", and a number in study order
/// (run_channel_study's sharding) that is the folder's shard. `what` names the line in errors.
inline void channel_item_check(const nlohmann::json& s, const std::string& task, std::uint64_t seed, std::size_t item,
                               const std::string& where, const std::string& what) {
    const nlohmann::json none = nlohmann::json::array();
    const auto index_in = [&](const char* list, const char* field, const nlohmann::json& v) -> std::size_t {
        const nlohmann::json& l = s.contains(list) && s[list].is_array() ? s[list] : none;
        for (std::size_t i = 0; i < l.size(); ++i)
            if (l[i] == v) return i;
        fail<FormatError>("[merge] ", where, " holds ", what, " of ", field, " ", v.dump(), ", which the study does not run (",
                          list, ": ", l.dump(), "): the file was edited or comes from another run");
    };
    const std::size_t t = index_in("tasks", "task", task), si = index_in("seeds", "seed", seed);
    const std::size_t items = s.value("items", std::size_t{0});
    check<FormatError>(item < items, "[merge] ", where, " holds ", what, " of item ", item, " in a study of ", items,
                       " items per task and seed: the file was edited or comes from another run");
    const Shard shard = parse_shard(s.value("shard", "0/1"));
    const std::size_t number = (t * s["seeds"].size() + si) * items + item;
    check<FormatError>(shard.takes(number), "[merge] ", where, " holds ", what, " of (", task, ", seed ", seed, ", item ", item,
                       "), which shard ", (number % shard.count), "/", shard.count, " runs, not this folder's shard ",
                       shard.text(), ": the file was edited or comes from another run");
}

/// A channel-study record of a folder to merge: its (task, seed, item) is one of the folder's
/// (channel_item_check), and its condition one the definition lists.
inline void channel_record_check(const nlohmann::json& run, const nlohmann::json& r, const std::string& where) {
    const nlohmann::json& s = run["study"];
    const RecordKey k = record_key(r, where);
    check_record_score(r, where);
    const nlohmann::json& conds = s.contains("conditions") && s["conditions"].is_array() ? s["conditions"] : nlohmann::json::array();
    check<FormatError>(std::find(conds.begin(), conds.end(), nlohmann::json(k.condition)) != conds.end(), "[merge] ", where,
                       " holds a record of condition \"", k.condition, "\", which the study does not run (conditions: ",
                       conds.dump(), "): the file was edited or comes from another run");
    channel_item_check(s, k.task, k.seed, k.item, where, "a record");
    // A swap condition (KV of A, recurrent part of B, ...) runs on swap tasks only, whose
    // records carry the B context.
    check<FormatError>(!parse_condition(k.condition).needs_b() || r.contains("alt_context"), "[merge] ", where,
                       " holds a record of the swap condition ", k.condition, " on (", k.task,
                       ", seed ", k.seed, ", item ", k.item, "), which has no B context (not a swap task): the file was "
                       "edited or comes from another run");
}

/// The lines of a folder's skipped.jsonl, each a (task, seed, item) of the folder's study and
/// shard (channel_item_check), left out by a study with a swap condition (only such a study
/// leaves items out), and not listed by an earlier folder or line (`seen`).
inline std::vector<nlohmann::json> channel_skipped_lines(const std::filesystem::path& dir, const nlohmann::json& run,
                                                         std::set<std::tuple<std::string, std::uint64_t, std::size_t>>& seen) {
    std::vector<nlohmann::json> lines;
    const std::filesystem::path path = dir / "skipped.jsonl";
    if (!std::filesystem::exists(path)) return lines;
    const nlohmann::json& s = run["study"];
    bool pairs_b = false;
    for (const nlohmann::json& c : s["conditions"])
        pairs_b = pairs_b || (c.is_string() && parse_condition(c.get<std::string>()).needs_b());
    std::size_t line = 0;
    for (auto& r : read_jsonl(path, false)) {
        const std::string where = path.string() + " line " + std::to_string(++line);
        check<FormatError>(r.is_object() && r.contains("task") && r["task"].is_string() && r.contains("seed") &&
                               r["seed"].is_number_unsigned() && r.contains("item") && r["item"].is_number_unsigned(),
                           "[merge] ", where, " is not a skipped item (task, seed, item): the file was edited or comes from another run");
        const std::string task = r["task"].get<std::string>();
        const std::uint64_t seed = r["seed"].get<std::uint64_t>();
        const std::size_t item = r["item"].get<std::size_t>();
        check<FormatError>(pairs_b, "[merge] ", where, " lists (", task, ", seed ", seed, ", item ", item,
                           ") as left out, but the study runs no swap condition, so it leaves no item out: the file was "
                           "edited or comes from another run");
        channel_item_check(s, task, seed, item, where, "a skipped item");
        check<FormatError>(seen.insert({task, seed, item}).second, "[merge] ", where, " lists (", task, ", seed ", seed,
                           ", item ", item, ") as left out, which an earlier line or folder lists too: the folders overlap, "
                           "or a file was edited");
        lines.push_back(std::move(r));
    }
    return lines;
}

}  // namespace detail

namespace detail {
inline MergeResult merge_channel_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                         const BootstrapOptions& bootstrap) {
    namespace fs = std::filesystem;
    ScoreRecords scores;  // what the summaries read of each record: the merge holds no record whole
    detail::ShardFolders f = detail::read_shard_folders(
        dirs, out,
        [](const fs::path& p, const nlohmann::json& run) {
            check(detail::run_kind(run) == "channels", "[merge] ", p.string(), " is not a 'channels' study (it holds a '",
                  detail::run_kind(run), "' study)");
            check(run.contains("study") && run["study"].is_object() && run["study"].contains("conditions"), "[merge] ", p.string(),
                  " has no study definition");
            const nlohmann::json& conds = run["study"]["conditions"];
            check<FormatError>(conds.is_array() && std::all_of(conds.begin(), conds.end(), [](const auto& c) { return c.is_string(); }),
                               "[merge] ", p.string(), ": the study's conditions are not a list of names: the file was edited "
                               "or comes from another program");
        },
        detail::channel_record_check, [&](const nlohmann::json& r, const std::string& where) { scores.add(r, where); });
    // A swap item left out for its lengths has no records.
    std::vector<nlohmann::json> skipped;
    std::set<std::tuple<std::string, std::uint64_t, std::size_t>> left_out;
    for (std::size_t i = 0; i < dirs.size(); ++i)  // f.runs[i]: dirs[i]'s run.json, as read_shard_folders read it
        for (nlohmann::json& r : detail::channel_skipped_lines(dirs[i], f.runs[i], left_out)) skipped.push_back(std::move(r));
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const RecordKey k = scores.key(i);
        check<FormatError>(!left_out.count({k.task, k.seed, k.item}), "[merge] record (", k.task, ", seed ", k.seed, ", item ",
                           k.item, ", ", k.condition, ") is of an item a skipped.jsonl lists as left out: the files were "
                           "edited or come from another run");
    }
    std::vector<std::string> conditions = f.study["conditions"].get<std::vector<std::string>>();
    // The records' lines in canonical order, written again from the folders' files.
    std::vector<std::pair<detail::CanonicalKey, LineRef>> order;
    order.reserve(scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) order.push_back({detail::canonical_key(scores.key(i), conditions), f.lines[i]});
    const std::vector<LineRef> lines = detail::in_canonical_order(std::move(order));
    detail::sort_skipped(skipped);
    const FolderLock lock(out, "merge");  // makes the folder
    detail::check_merge_output(out, f);   // again, now that no other run can write there
    nlohmann::json run = detail::merged_run(f, scores.size());
    run["skipped_items"] = skipped.size();
    detail::start_merge(out, run);
    run[detail::kItemsFingerprintKey] = write_record_lines(out / "items.jsonl", f.items_files, lines);
    write_file_atomic(out / "skipped.jsonl", detail::jsonl_text(skipped));
    write_summaries(out, scores, conditions, bootstrap);
    write_file_atomic(out / "run.json", run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    MergeResult res = f.counts;
    res.records = scores.size();
    return res;
}
}  // namespace detail

/// Merges the shard folders of one channel study into `out` (experiments.md, "Sharding, merging, MPI, Slurm").
inline MergeResult merge_results(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                 const BootstrapOptions& bootstrap = {}) {
    // A value of another type than a study writes, anywhere in the folders (a skipped.jsonl's
    // study of "items": "x"), is named as such; it was the JSON library's bare type_error.
    try {
        return detail::merge_channel_folders(dirs, out, bootstrap);
    } catch (const nlohmann::json::exception& e) {
        fail<FormatError>("[merge] a run.json, items.jsonl or skipped.jsonl of the folders merged holds a value of another "
                          "type or shape than the channel study writes (", e.what(), "): a file was edited or comes from "
                          "another program");
    }
}

}  // namespace hylens::experiments
