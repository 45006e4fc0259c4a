#pragma once
// Merging the result folders of a sharded study: the records of every folder's items.jsonl
// (each key at most once across folders), in canonical order, with summaries recomputed from
// them, so merging the shards of a study gives exactly the files of the unsharded run.
// The folders must describe the same study (run.json "study", shard aside).

#include <filesystem>  // std::filesystem
#include <set>         // std::set
#include <string>      // std::string
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "channel_study.hpp"
#include "records.hpp"
#include "study_folder.hpp"  // MergeResult
#include "summary.hpp"

namespace hylens::experiments {

inline MergeResult merge_results(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                 const BootstrapOptions& bootstrap = {}) {
    namespace fs = std::filesystem;
    detail::ShardFolders f = detail::read_shard_folders(dirs, out, [](const fs::path& p, const nlohmann::json& run) {
        check(run.contains("study") && run["study"].contains("conditions"), "[merge] ", p.string(), " has no study definition");
    });
    std::vector<nlohmann::json> skipped;
    for (const fs::path& d : dirs)
        if (fs::exists(d / "skipped.jsonl"))
            for (auto& r : read_jsonl(d / "skipped.jsonl", false)) skipped.push_back(std::move(r));
    std::vector<std::string> conditions = f.study["conditions"].get<std::vector<std::string>>();
    sort_records(f.records, conditions);
    std::sort(skipped.begin(), skipped.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        return std::make_tuple(a["task"].get<std::string>(), a["seed"].get<std::uint64_t>(), a["item"].get<std::size_t>()) <
               std::make_tuple(b["task"].get<std::string>(), b["seed"].get<std::uint64_t>(), b["item"].get<std::size_t>());
    });
    fs::create_directories(out);
    write_file_atomic(out / "items.jsonl", detail::jsonl_text(f.records));
    write_file_atomic(out / "skipped.jsonl", detail::jsonl_text(skipped));
    write_summaries(out, f.records, conditions, bootstrap);
    nlohmann::json run = detail::merged_run(f, f.records.size());
    run["skipped_items"] = skipped.size();
    write_file_atomic(out / "run.json", run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    MergeResult res = f.counts;
    res.records = f.records.size();
    return res;
}

}  // namespace hylens::experiments
