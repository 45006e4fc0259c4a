#pragma once
// What every study binding does around its runner: run.json's description of a run from Python,
// the run on the typed model with the GIL released, and this call's counts as a dict.

#include <hylens/experiments/prompt.hpp>        // chat_family
#include <hylens/experiments/study_folder.hpp>  // StudyRunOptions, parse_shard
#include <hylens/interp/reader_search.hpp>       // default_group_size
#include <hylens/version.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nogil.hpp"
#include "arrays.hpp"  // Count
#include "bind_model.hpp"

namespace hylens::python {

/// run.json's description of a study run from Python: the model's folder and type, the
/// library's version (as the tool writes it), "via": "python", and the tokenizer's file, so a
/// resume or a merge with another tokenizer is refused.
inline nlohmann::json python_run_info(const PyModel& model, const Tokenizer& tok) {
    nlohmann::json info = {{"model", std::filesystem::absolute(model.path()).string()},
                           {"model_type", model.model_type()},
                           {"hylens_version", hylens::version},
                           {"via", "python"}};
    if (!tok.source().empty()) info["tokenizer"] = tok.source();
    return info;
}

/// A tokenizer's file for run.json (absolute, as read), or null for one not read from a file.
inline nlohmann::json tokenizer_file_json(const Tokenizer& tok) {
    return tok.source().empty() ? nlohmann::json(nullptr) : nlohmann::json(tok.source());
}

/// group_size from Python, or the model type's default when None (default_group_size).
inline std::size_t group_size_or_default(const std::optional<Count>& group_size, const PyModel& model) {
    return group_size ? static_cast<std::size_t>(*group_size) : default_group_size(model.model_type());
}

/// The result-folder part of a lookup study's options from Python: out, shard ("I/N" or empty),
/// resume, progress, and run.json's description (python_run_info).
inline void set_python_run(experiments::StudyRunOptions& o, const PyModel& model, const Tokenizer& tok,
                           const std::string& out, const std::string& shard, bool resume, bool progress) {
    if (!shard.empty()) o.shard = experiments::parse_shard(shard);
    o.resume = resume;
    o.progress = progress;
    o.out = out;
    o.run_info = python_run_info(model, tok);
}

/// run(typed model, its chat family) with the GIL released (the study threads its own work).
template <class Run>
auto run_study_released(const PyModel& model, Run&& run) {
    const ChatFamily family = experiments::chat_family(model.model_type());
    return model.visit([&](const auto& x) {
        const NoGil nogil;
        return run(x, family);
    });
}

/// run(typed first model, its chat family, typed second model, its chat family) with the GIL
/// released: the studies of two models (query-map: receiver and donor; stitch: host and donor).
template <class Run>
auto run_two_models_released(const PyModel& first, const PyModel& second, Run&& run) {
    const ChatFamily f1 = experiments::chat_family(first.model_type()), f2 = experiments::chat_family(second.model_type());
    return first.visit([&](const auto& x) {
        return second.visit([&](const auto& y) {
            const NoGil nogil;
            return run(x, f1, y, f2);
        });
    });
}

/// The counts every study result has, as the dict a binding returns.
inline pybind11::dict study_counts(std::size_t records, std::size_t written, std::size_t resumed) {
    pybind11::dict d;
    d["records"] = records;
    d["written"] = written;
    d["resumed"] = resumed;
    return d;
}

}  // namespace hylens::python
