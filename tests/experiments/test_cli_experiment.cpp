// `hylens experiment` end to end on a shipped random model (a golden model folder copied with
// the test tokenizer): bad arguments are usage errors (exit 2); a run over real tasks writes
// every result file; the CLI's shards merged == the unsharded run; the figure script draws
// from the result folder; built with MPI, `mpirun -np 2` == one process. Built only when the
// tool is (HYLENS_CLI).

#ifdef HYLENS_CLI
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/wait.h>  // WEXITSTATUS

#include "fixtures.hpp"

namespace fs = std::filesystem;

namespace {

int sh(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

const std::string kCli = HYLENS_CLI;

/// A model folder a study can run on: a golden Qwen3.5 model and the byte-level test tokenizer.
fs::path model_folder(const fs::path& root) {
    const fs::path m = root / "model";
    fs::create_directories(m);
    const fs::path golden = fs::path(HYLENS_GOLDEN_DIR) / "models" / "qwen3_5_dense";
    fs::copy_file(golden / "config.json", m / "config.json");
    fs::copy_file(golden / "model.safetensors", m / "model.safetensors");
    std::ofstream(m / "tokenizer.json") << hylens::test::tiny_tokenizer_json();
    return m;
}


}  // namespace

TEST_CASE("cli: hylens experiment rejects bad arguments with a usage error") {
    hylens::test::TempDir dir("cli_args");
    const fs::path model = model_folder(dir.path);
    const std::string base = kCli + " experiment channels --model " + model.string() + " --out " + (dir.path / "o").string();
    const std::string quiet = " >/dev/null 2>&1";
    CHECK(sh(kCli + " experiment --help" + quiet) == 0);
    CHECK(sh(kCli + " experiment channels --help" + quiet) == 0);
    CHECK(sh(kCli + " experiment" + quiet) == 2);                                        // no subcommand
    CHECK(sh(kCli + " experiment bogus" + quiet) == 2);
    CHECK(sh(base + quiet) == 2);                                                        // no --task
    CHECK(sh(base + " --task dictionary --bogus 7" + quiet) == 2);                       // unknown option
    CHECK(sh(base + " --task nosuchtask" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --conditions FULL,KV_ONLY@x" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --conditions full" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --layers sideways" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --shard 2/2" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --items 0" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --items x" + quiet) == 2);
    CHECK(sh(base + " --task dictionary --seeds 1,y" + quiet) == 2);
    CHECK(sh(kCli + " experiment channels --model /nonexistent --task dictionary --out x" + quiet) == 2);
    CHECK(sh(kCli + " experiment merge --out x" + quiet) == 2);                          // no folder
    CHECK(sh(kCli + " experiment merge " + dir.path.string() + quiet) == 2);             // no --out
    CHECK(sh(kCli + " experiment merge " + model.string() + " --out " + (dir.path / "m").string() + quiet) == 1);  // not results
    CHECK_FALSE(fs::exists(dir.path / "o" / "items.jsonl"));
    // A layer beyond the model is an error of the run (exit 1), before any record.
    CHECK(sh(base + " --task dictionary --items 1 --conditions KV_ONLY@8" + quiet) == 1);
}

TEST_CASE("cli: hylens experiment channels on real tasks; shards merged == unsharded; figures") {
    hylens::test::TempDir dir("cli_run");
    const fs::path model = model_folder(dir.path);
    const std::string study = kCli + " experiment channels --model " + model.string() +
                              " --task language:lexicon,drm --items 4 --seeds 1,2 --max-new 4 --layers single"
                              " --conditions FULL,REC_ONLY,KV_A+REC_B,KV_B+REC_A";
    const fs::path whole = dir.path / "whole", s0 = dir.path / "s0", s1 = dir.path / "s1", merged = dir.path / "merged";
    REQUIRE(sh(study + " --out " + whole.string() + " 2>/dev/null") == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "diffs.csv", "run.json", "skipped.jsonl"})
        CHECK(fs::exists(whole / f));
    const nlohmann::json run = nlohmann::json::parse(hylens::test::read_text(whole / "run.json"));
    CHECK(run["status"] == "complete");
    CHECK(run["model_type"] == "qwen3_5");
    CHECK(run["study"]["tasks"] == nlohmann::json::array({"language:lexicon", "drm"}));
    CHECK(run["timings"].contains("records_per_second"));
    CHECK(run.contains("hylens_version"));
    // Rerunning into a finished folder without --resume is refused; with it, nothing is added.
    CHECK(sh(study + " --out " + whole.string() + " >/dev/null 2>&1") == 1);
    CHECK(sh(study + " --resume --out " + whole.string() + " >/dev/null 2>&1") == 0);
    REQUIRE(sh(study + " --shard 0/2 --out " + s0.string() + " 2>/dev/null") == 0);
    REQUIRE(sh(study + " --shard 1/2 --out " + s1.string() + " 2>/dev/null") == 0);
    REQUIRE(sh(kCli + " experiment merge " + s0.string() + " " + s1.string() + " --out " + merged.string() + " 2>/dev/null") == 0);
    CHECK(hylens::test::differing_results(whole, merged).empty());
    // The figure script (matplotlib, Agg) draws from the result folder alone.
    const fs::path script = fs::path(HYLENS_GOLDEN_DIR).parent_path().parent_path() / "scripts" / "plot_channels.py";
    if (sh("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0) {
        CHECK(sh("/usr/bin/python3 " + script.string() + " " + whole.string() + " >/dev/null") == 0);
        CHECK(fs::file_size(whole / "channels.png") > 1000);
        CHECK(fs::file_size(whole / "swaps.png") > 1000);
        CHECK(fs::file_size(whole / "layers.png") > 1000);
        CHECK(sh("/usr/bin/python3 " + script.string() + " " + model.string() + " >/dev/null 2>&1") != 0);
    } else {
        MESSAGE("matplotlib not installed: figure script not run");
    }
}

#ifdef HYLENS_MPIRUN
TEST_CASE("cli: mpirun -np 2 hylens experiment == one process") {
    hylens::test::TempDir dir("cli_mpi");
    const fs::path model = model_folder(dir.path);
    const std::string args = " experiment channels --model " + model.string() +
                             " --task dictionary --items 3 --seeds 1,2 --max-new 3";
    const fs::path one = dir.path / "one", two = dir.path / "two";
    REQUIRE(sh(kCli + args + " --out " + one.string() + " 2>/dev/null") == 0);
    REQUIRE(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " + kCli + args + " --out " +
               two.string() + " >/dev/null 2>&1") == 0);
    CHECK(hylens::test::differing_results(one, two).empty());
    CHECK(fs::exists(two / "ranks" / "rank-1-of-2" / "items.jsonl"));
    const nlohmann::json run = nlohmann::json::parse(hylens::test::read_text(two / "run.json"));
    CHECK(run["merged_from"].size() == 2);
}
#endif
#endif
