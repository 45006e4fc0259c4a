#pragma once
// Merging the result folders of a sharded study: the records of every folder's items.jsonl
// (each key at most once across folders), in canonical order, with summaries recomputed from
// them, so merging the shards of a study gives exactly the files of the unsharded run.
// The folders must describe the same study (run.json "study", shard aside).

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

/// A channel-study record of a folder to merge must be one of its study and shard: a task,
/// seed and condition the definition lists, an item below its "items", and a (task, seed,
/// item) whose number in study order (run_channel_study's sharding) is the folder's shard.
inline void channel_record_check(const nlohmann::json& run, const nlohmann::json& r, const std::string& where) {
    const nlohmann::json& s = run["study"];
    const RecordKey k = record_key(r, where);
    const nlohmann::json none = nlohmann::json::array();
    const auto index_in = [&](const char* list, const char* what, const nlohmann::json& v) -> std::size_t {
        const nlohmann::json& l = s.contains(list) && s[list].is_array() ? s[list] : none;
        for (std::size_t i = 0; i < l.size(); ++i)
            if (l[i] == v) return i;
        fail<FormatError>("[merge] ", where, " holds a record of ", what, " ", v.dump(), ", which the study does not run (",
                          list, ": ", l.dump(), "): the file was edited or comes from another run");
    };
    const std::size_t t = index_in("tasks", "task", k.task), si = index_in("seeds", "seed", k.seed);
    (void)index_in("conditions", "condition", k.condition);
    // A swap condition (KV of A, recurrent part of B, ...) runs on swap tasks only, whose
    // records carry the B context.
    check<FormatError>(!parse_condition(k.condition).needs_b() || r.contains("alt_context"), "[merge] ", where,
                       " holds a record of the swap condition ", k.condition, " on (", k.task,
                       ", seed ", k.seed, ", item ", k.item, "), which has no B context (not a swap task): the file was "
                       "edited or comes from another run");
    const std::size_t items = s.value("items", std::size_t{0});
    check<FormatError>(k.item < items, "[merge] ", where, " holds item ", k.item, " of a study of ", items,
                       " items per task and seed: the file was edited or comes from another run");
    const Shard shard = parse_shard(s.value("shard", "0/1"));
    const std::size_t number = (t * s["seeds"].size() + si) * items + k.item;
    check<FormatError>(shard.takes(number), "[merge] ", where, " holds (", k.task, ", seed ", k.seed, ", item ", k.item,
                       "), which shard ", (number % shard.count), "/", shard.count, " runs, not this folder's shard ",
                       shard.text(), ": the file was edited or comes from another run");
}

}  // namespace detail

inline MergeResult merge_results(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                 const BootstrapOptions& bootstrap = {}) {
    namespace fs = std::filesystem;
    detail::ShardFolders f = detail::read_shard_folders(
        dirs, out,
        [](const fs::path& p, const nlohmann::json& run) {
            check(detail::run_kind(run) == "channels", "[merge] ", p.string(), " is not a 'channels' study (it holds a '",
                  detail::run_kind(run), "' study)");
            check(run.contains("study") && run["study"].contains("conditions"), "[merge] ", p.string(), " has no study definition");
        },
        detail::channel_record_check);
    std::vector<nlohmann::json> skipped;
    for (const fs::path& d : dirs)
        if (fs::exists(d / "skipped.jsonl")) {
            std::size_t line = 0;
            for (auto& r : read_jsonl(d / "skipped.jsonl", false)) {
                ++line;
                check<FormatError>(r.is_object() && r.contains("task") && r["task"].is_string() && r.contains("seed") &&
                                       r["seed"].is_number_unsigned() && r.contains("item") && r["item"].is_number_unsigned(),
                                   "[merge] ", (d / "skipped.jsonl").string(), " line ", line,
                                   " is not a skipped item (task, seed, item): the file was edited or comes from another run");
                skipped.push_back(std::move(r));
            }
        }
    // A swap item left out for its lengths has no records.
    std::set<std::tuple<std::string, std::uint64_t, std::size_t>> left_out;
    for (const nlohmann::json& r : skipped)
        left_out.insert({r.value("task", ""), r.value("seed", std::uint64_t{0}), r.value("item", std::size_t{0})});
    for (const nlohmann::json& r : f.records) {
        const RecordKey k = record_key(r, "a merged record");
        check<FormatError>(!left_out.count({k.task, k.seed, k.item}), "[merge] record (", k.task, ", seed ", k.seed, ", item ",
                           k.item, ", ", k.condition, ") is of an item a skipped.jsonl lists as left out: the files were "
                           "edited or come from another run");
    }
    std::vector<std::string> conditions = f.study["conditions"].get<std::vector<std::string>>();
    sort_records(f.records, conditions);
    detail::sort_skipped(skipped);
    const FolderLock lock(out, "merge");  // makes the folder
    detail::check_merge_output(out, f);   // again, now that no other run can write there
    const std::string text = detail::jsonl_text(f.records);
    nlohmann::json run = detail::merged_run(f, f.records.size(), text);
    run["skipped_items"] = skipped.size();
    detail::start_merge(out, run);
    write_file_atomic(out / "items.jsonl", text);
    write_file_atomic(out / "skipped.jsonl", detail::jsonl_text(skipped));
    write_summaries(out, f.records, conditions, bootstrap);
    write_file_atomic(out / "run.json", run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    MergeResult res = f.counts;
    res.records = f.records.size();
    return res;
}

}  // namespace hylens::experiments
