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
    check(!dirs.empty(), "[merge] no result folder given");
    MergeResult res;
    nlohmann::json study, first_run;
    std::vector<nlohmann::json> records;
    std::set<RecordKey> keys;
    std::vector<nlohmann::json> skipped;
    nlohmann::json sources = nlohmann::json::array();
    std::set<std::string> shards;
    for (const fs::path& d : dirs) {
        check(fs::exists(d / "run.json"), "[merge] ", d.string(), " holds no run.json (not a study result folder)");
        const nlohmann::json run = detail::read_json_file(d / "run.json");
        check(run.contains("study") && run["study"].contains("conditions"), "[merge] ", (d / "run.json").string(),
              " has no study definition");
        nlohmann::json s = run["study"];
        const std::string shard = s.value("shard", "0/1");
        s.erase("shard");
        if (study.is_null()) {
            study = s;
            first_run = run;
        }
        check(s == study, "[merge] ", d.string(), " is another study than ", dirs.front().string(), " (", s.dump(),
              " vs ", study.dump(), ")");
        check(shards.insert(shard).second || shard == "0/1", "[merge] shard ", shard, " is given twice");
        if (run.value("status", "") != "complete") ++res.incomplete;
        sources.push_back({{"folder", d.string()}, {"shard", shard}, {"status", run.value("status", "")}});
        for (auto& r : read_records(d / "items.jsonl", false)) {
            const RecordKey k = record_key(r, (d / "items.jsonl").string());
            check(keys.insert(k).second, "[merge] record (", k.task, ", seed ", k.seed, ", item ", k.item, ", ",
                  k.condition, ") appears in more than one folder (", d.string(), ")");
            records.push_back(std::move(r));
        }
        if (fs::exists(d / "skipped.jsonl"))
            for (auto& r : read_jsonl(d / "skipped.jsonl", false)) skipped.push_back(std::move(r));
        ++res.folders;
    }
    std::vector<std::string> conditions = study["conditions"].get<std::vector<std::string>>();
    sort_records(records, conditions);
    std::sort(skipped.begin(), skipped.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        return std::make_tuple(a["task"].get<std::string>(), a["seed"].get<std::uint64_t>(), a["item"].get<std::size_t>()) <
               std::make_tuple(b["task"].get<std::string>(), b["seed"].get<std::uint64_t>(), b["item"].get<std::size_t>());
    });
    fs::create_directories(out);
    std::string text;
    for (const auto& r : records) text += json_line(r) + "\n";
    write_file_atomic(out / "items.jsonl", text);
    text.clear();
    for (const auto& r : skipped) text += json_line(r) + "\n";
    write_file_atomic(out / "skipped.jsonl", text);
    write_summaries(out, records, conditions, bootstrap);
    nlohmann::json run = first_run;
    study["shard"] = "0/1";
    run["study"] = study;
    run["merged_from"] = sources;
    run["status"] = res.incomplete ? "incomplete" : "complete";
    run["records"] = records.size();
    run["skipped_items"] = skipped.size();
    run.erase("timings");
    write_file_atomic(out / "run.json", run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    res.records = records.size();
    return res;
}

}  // namespace hylens::experiments
