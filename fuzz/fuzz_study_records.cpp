// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for a study's result folders as resume and merge read them back. The input,
// cut at NUL bytes, is run.json, items.jsonl and skipped.jsonl of folder a, then run.json and
// items.jsonl of folder b (absent parts: no file; no b run.json: a merge of a alone), written
// to a scratch folder on /dev/shm. They go to merge_result_folders (what `hylens experiment
// merge` calls, by run.json's kind) and to a StudyFolder resuming folder a with the kind and
// definition its run.json names, up to finish(). Each must succeed or throw hylens::Error; any
// other exception escaping (nlohmann::json's type_error included) or a sanitizer report is a
// finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "hylens/experiments/merge_by_kind.hpp"
#include "hylens/experiments/study_folder.hpp"

namespace {

namespace fs = std::filesystem;

// A folder of this process's, removed at exit.
struct Scratch {
    fs::path dir = fs::path("/dev/shm") / ("hylens_fuzz_study_" + std::to_string(::getpid()));
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

const fs::path& scratch() {
    static const Scratch s;
    return s.dir;
}

void write(const fs::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// The study a folder's run.json names, for the resume: its kind and its definition (shard
// aside), as a study resuming it would pass them.
void resume(const fs::path& dir, std::string_view run_text) {
    namespace ex = hylens::experiments;
    // A run.json that is not an object still goes to the StudyFolder (as the "circuit" study's):
    // its reader must refuse it.
    const nlohmann::json run = nlohmann::json::parse(run_text, nullptr, /*allow_exceptions=*/false);
    const std::string kind = run.is_object() ? ex::detail::run_kind(run) : "circuit";
    nlohmann::json def = run.is_object() && run.contains("study") && run["study"].is_object() ? run["study"]
                                                                                              : nlohmann::json::object();
    ex::Shard shard;
    if (def.contains("shard") && def["shard"].is_string()) {
        try {
            shard = ex::parse_shard(def["shard"].get<std::string>());
        } catch (const hylens::Error&) {
        }
    }
    def.erase("shard");
    ex::StudyFolder folder({.out = dir, .kind = kind, .definition = def, .resume = true, .shard = shard});
    // The study asks done() for each key it makes: here, every key on disk (cut as the folder cut it).
    for (const auto& r : ex::read_records(folder.items_path(), false)) (void)folder.done(ex::record_key(r, "fuzz"));
    folder.check_resumed_records();
    (void)folder.records();
    folder.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> parts;
    for (std::size_t b = 0; parts.size() < 5;) {
        const std::size_t e = in.find('\0', b);
        parts.push_back(in.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
        if (e == std::string_view::npos) break;
        b = e + 1;
    }
    const fs::path a = scratch() / "a", b = scratch() / "b", out = scratch() / "out";
    fs::remove_all(scratch());
    fs::create_directories(a);
    const char* names[] = {"run.json", "items.jsonl", "skipped.jsonl", "run.json", "items.jsonl"};
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i == 3) fs::create_directories(b);
        write((i < 3 ? a : b) / names[i], parts[i]);
    }
    std::vector<fs::path> dirs{a};
    if (parts.size() > 3) dirs.push_back(b);
    try {
        namespace ex = hylens::experiments;
        // merge_result_folders, with the channel study's bootstrap cut to a few resamples (its
        // 10 000 made each accepted input take 0.2 s).
        if (ex::result_kind(a) == "channels")
            (void)ex::merge_results(dirs, out, {.resamples = 16});
        else
            (void)ex::merge_result_folders(dirs, out);
    } catch (const hylens::Error&) {
    }
    try {
        resume(a, parts[0]);
    } catch (const hylens::Error&) {
    }
    return 0;
}
