#pragma once
// Merging the shard folders of any study by its kind (run.json "kind"): the channel study
// (merge.hpp), circuit, encode-swap, transplant, query-map (the transplant study's summaries)
// and stitch. Each merge takes the
// records of every folder (each key at most once), checks that the folders describe one study
// run on the same inputs, and writes the summaries from the merged records, so the merge of a
// study's shards is the unsharded run's folder. What `hylens experiment merge` and
// hylens.merge (Python) call.

#include <algorithm>   // std::find
#include <filesystem>  // std::filesystem
#include <fstream>     // std::ifstream
#include <string>      // std::string
#include <vector>      // std::vector

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "circuit_study.hpp"
#include "encode_swap_study.hpp"
#include "merge.hpp"  // merge_results: the channel study
#include "stitch_study.hpp"
#include "study_folder.hpp"
#include "transplant_study.hpp"

namespace hylens::experiments {

/// run.json's "kind" of a result folder; "channels" where run.json has none (the channel study's
/// folders) or is not there (merge_results then names the folder).
inline std::string result_kind(const std::filesystem::path& dir) {
    const std::filesystem::path run = dir / "run.json";
    if (!std::filesystem::exists(run)) return "channels";
    std::ifstream in(run);
    return detail::run_kind(nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false));
}

inline MergeResult merge_circuit_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    const nlohmann::json definition = first_study_definition(dirs);
    check_circuit_definition(definition);  // before the merged folder is made
    const std::string variant = detail::definition_string(definition, "variant");
    const auto condition_known = circuit_conditions::known(definition);
    return merge_study_folders(
        dirs, out, "circuit",
        [&](const std::filesystem::path& o, const std::vector<nlohmann::json>& r) {
            if (!r.empty()) write_circuit_summaries(o, r, definition, {});
        },
        detail::record_names_check(
            "circuit", detail::task_is(variant), condition_known));
}

inline MergeResult merge_encode_swap_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    const nlohmann::json definition = first_study_definition(dirs);
    check<FormatError>(definition.is_object() && definition.contains("sources") && definition["sources"].is_array(),
                       "[merge] ", (dirs.front() / "run.json").string(),
                       " has no encode-swap study definition (its 'sources')");  // before the merged folder is made
    const std::string variant = detail::definition_string(definition, "variant");
    const std::vector<std::string> conditions = encode_swap_conditions(definition);
    return merge_study_folders(
        dirs, out, "encode-swap",
        [&](const std::filesystem::path& o, const std::vector<nlohmann::json>& r) {
            if (!r.empty()) write_encode_swap_summaries(o, r, definition, {});
        },
        detail::record_names_check("encode-swap", detail::task_is(variant), [conditions](const std::string& c) {
            return std::find(conditions.begin(), conditions.end(), c) != conditions.end();
        }));
}

namespace detail {
/// The merge of a study with the transplant study's summaries (transplant, query-map).
inline MergeResult merge_transplant_kind(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out,
                                         const char* kind) {
    const nlohmann::json definition = first_study_definition(dirs);
    const std::string task = definition_string(definition, "task");
    return merge_study_folders(
        dirs, out, kind,
        [](const std::filesystem::path& o, const std::vector<nlohmann::json>& r) { write_transplant_summaries(o, r); },
        record_names_check(
            kind, task_is(task),
            [&](const std::string& c) { return !definition.contains("conditions") || listed(definition["conditions"], c); }));
}
}  // namespace detail

inline MergeResult merge_transplant_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    return detail::merge_transplant_kind(dirs, out, "transplant");
}

inline MergeResult merge_query_map_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    return detail::merge_transplant_kind(dirs, out, "query-map");
}

/// The merge of the study the first folder holds (result_kind): the channel study, circuit,
/// encode-swap, transplant, query-map or stitch; another kind is an error.
inline MergeResult merge_result_folders(const std::vector<std::filesystem::path>& dirs, const std::filesystem::path& out) {
    check(!dirs.empty(), "[merge] no result folder given");
    const std::string kind = result_kind(dirs.front());
    if (kind == "channels") return merge_results(dirs, out);
    if (kind == "circuit") return merge_circuit_folders(dirs, out);
    if (kind == "encode-swap") return merge_encode_swap_folders(dirs, out);
    if (kind == "transplant") return merge_transplant_folders(dirs, out);
    if (kind == "query-map") return merge_query_map_folders(dirs, out);
    if (kind == "stitch") return merge_stitch_folders(dirs, out);
    fail("[merge] ", (dirs.front() / "run.json").string(), " holds a '", kind, "' study, which has no merge");
}

}  // namespace hylens::experiments
