// `hylens experiment` end to end on a shipped random model (a golden model folder copied with
// the test tokenizer): bad arguments are usage errors (exit 2); a run over real tasks writes
// every result file; the CLI's shards merged == the unsharded run; the figure script draws
// from the result folder; built with MPI, `mpirun -np 2` == one process; --judge scores the
// persona task with a second model; a model whose weights hold a NaN fails the run at the
// non-finite site. Built only when the tool is (HYLENS_CLI).

#ifdef HYLENS_CLI
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fixtures.hpp"
#include "support/figure_scripts.hpp"

namespace fs = std::filesystem;

using hylens::test::kCli;
using hylens::test::sh;

namespace {

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

/// The records of items.jsonl.
std::vector<nlohmann::json> records(const fs::path& dir) {
    std::vector<nlohmann::json> out;
    std::istringstream in(hylens::test::read_text(dir / "items.jsonl"));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

/// Overwrites the data of tensor `name` in a safetensors file with 0xFF bytes (a float32 NaN),
/// leaving the header intact.
void poison_tensor(const fs::path& file, const std::string& name) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    unsigned char len[8];
    f.read(reinterpret_cast<char*>(len), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    const nlohmann::json h = nlohmann::json::parse(header);
    REQUIRE(h.contains(name));
    REQUIRE(h[name]["dtype"] == "F32");
    const std::uint64_t begin = h[name]["data_offsets"][0], end = h[name]["data_offsets"][1];
    REQUIRE(end > begin);
    f.seekp(static_cast<std::streamoff>(8 + n + begin));
    const std::string nan_bytes(end - begin, '\xff');
    f.write(nan_bytes.data(), static_cast<std::streamsize>(nan_bytes.size()));
    REQUIRE(f.good());
}

/// Every record was scored by `by` ("judge" or "rubric"): its score is that verdict; the rule
/// rubric is recorded either way, the judge's answer only when it decided.
void check_scored_by(const std::vector<nlohmann::json>& recs, const std::string& by) {
    for (const auto& r : recs) {
        CHECK(r["scored_by"] == by);
        REQUIRE(r["score_fields"].contains(by));
        CHECK(r["score_fields"].contains("rubric"));
        CHECK(r["score_fields"].contains("judge") == (by == "judge"));
        CHECK(r["score"] == (r["score_fields"][by] == true ? 1.0 : 0.0));
    }
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
    CHECK(sh(kCli + " experiment chanels --model x --out y 2>&1 | grep -q \"unknown study 'chanels'\"") == 0);
    // An option before the study (it said "A subcommand is required").
    CHECK(sh(kCli + " experiment --bogus" + quiet) == 2);
    CHECK(sh(kCli + " experiment --bogus 2>&1 | grep -q \"the study comes first, then its options: '--bogus'\"") == 0);
    // An error found after parsing names the whole command in its usage line (it said "Usage: channels").
    CHECK(sh(base + " --task dictionary,dictionary 2>&1 | grep -q \"^Usage: hylens experiment channels \\[OPTIONS\\]\"") == 0);
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
    {  // a study kind without a merge: an error of the run (exit 1), before the merged folder is made
        fs::create_directories(dir.path / "odd");
        std::ofstream(dir.path / "odd" / "run.json") << R"({"kind": "bogus", "study": {}})";
        CHECK(sh(kCli + " experiment merge " + (dir.path / "odd").string() + " --out " + (dir.path / "m").string() + quiet) == 1);
        CHECK_FALSE(fs::exists(dir.path / "m"));
    }
    {  // an --out through a file is a usage error naming it, before the model loads (it was a
       // filesystem error after it; merge's said "unexpected error")
        std::ofstream(dir.path / "file.txt") << "x";
        const std::string through = " --out " + (dir.path / "file.txt" / "run").string();
        const std::string says = " 2>&1 | grep -q \"file.txt is a file, not a folder\"";
        CHECK(sh(kCli + " experiment channels --model " + model.string() + " --task dictionary" + through + quiet) == 2);
        CHECK(sh(kCli + " experiment channels --model " + model.string() + " --task dictionary" + through + says) == 0);
        CHECK(sh(kCli + " experiment merge " + dir.path.string() + through + says) == 0);
        CHECK(sh(kCli + " experiment circuit --model " + model.string() + through + says) == 0);
        CHECK(sh(kCli + " experiment stitch --host " + model.string() + " --donor " + model.string() + through + says) == 0);
        CHECK(sh(kCli + " experiment channels --model " + model.string() + " --task dictionary --out " +
                 (dir.path / "file.txt").string() + " 2>&1 | grep -q \"is a file, not a folder\"") == 0);
        // through the file by '..' (the system resolves file.txt/.. through the file), and a link to nothing
        CHECK(sh(kCli + " experiment merge " + dir.path.string() + " --out " + (dir.path / "file.txt" / ".." / "m").string() +
                 says) == 0);
        fs::create_symlink(dir.path / "nothing", dir.path / "dangling");
        CHECK(sh(kCli + " experiment merge " + dir.path.string() + " --out " + (dir.path / "dangling").string() +
                 " 2>&1 | grep -q \"dangling is a link to nothing\"") == 0);
        // a folder that exists, and one to make below it, pass the check (merge then finds no results: exit 1)
        CHECK(sh(kCli + " experiment merge " + dir.path.string() + " --out " + (dir.path / "new" / "m").string() + quiet) == 1);
    }
    CHECK_FALSE(fs::exists(dir.path / "o" / "items.jsonl"));
    // A layer beyond the model is an error of the run (exit 1), before any record.
    CHECK(sh(base + " --task dictionary --items 1 --conditions KV_ONLY@8" + quiet) == 1);
}

TEST_CASE("cli: hylens experiment channels on real tasks, shards merged == unsharded, figures") {
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
    // --batch 1 (one item at a time) writes the same results; --no-progress prints no progress line.
    const fs::path one = dir.path / "one";
    REQUIRE(sh(study + " --batch 1 --no-progress --out " + one.string() + " 2>" + (dir.path / "one.err").string()) == 0);
    CHECK(hylens::test::differing_results(whole, one).empty());
    CHECK(nlohmann::json::parse(hylens::test::read_text(one / "run.json"))["batch"] == 1);
    CHECK(hylens::test::read_text(dir.path / "one.err").find("ETA") == std::string::npos);  // the progress line's
    CHECK(sh(study + " --batch 0 --out " + (dir.path / "zero").string() + " >/dev/null 2>&1") == 2);
    REQUIRE(sh(study + " --shard 0/2 --out " + s0.string() + " 2>/dev/null") == 0);
    REQUIRE(sh(study + " --shard 1/2 --out " + s1.string() + " 2>/dev/null") == 0);
    REQUIRE(sh(kCli + " experiment merge " + s0.string() + " " + s1.string() + " --out " + merged.string() + " 2>/dev/null") == 0);
    CHECK(hylens::test::differing_results(whole, merged).empty());
    // One shard of two merges as a partial result, marked so; the output may not be an input.
    const fs::path half = dir.path / "half";
    REQUIRE(sh(kCli + " experiment merge " + s0.string() + " --out " + half.string() + " 2>/dev/null") == 0);
    const nlohmann::json half_run = nlohmann::json::parse(hylens::test::read_text(half / "run.json"));
    CHECK(half_run["status"] == "incomplete");
    CHECK(half_run["missing_shards"] == nlohmann::json::array({"1/2"}));
    CHECK(nlohmann::json::parse(hylens::test::read_text(merged / "run.json"))["status"] == "complete");
    const std::string s1_items = hylens::test::read_text(s1 / "items.jsonl");
    CHECK(sh(kCli + " experiment merge " + s0.string() + " " + s1.string() + " --out " + s1.string() + " 2>/dev/null") == 1);
    CHECK(hylens::test::read_text(s1 / "items.jsonl") == s1_items);
    // Shards of another count: shard 1/3 does not complete shard 0/2.
    const fs::path s1x = dir.path / "s1x";
    fs::create_directories(s1x);
    for (const char* f : {"items.jsonl", "run.json"}) fs::copy_file(s1 / f, s1x / f);
    nlohmann::json run_x = nlohmann::json::parse(hylens::test::read_text(s1x / "run.json"));
    run_x["study"]["shard"] = "1/3";
    std::ofstream(s1x / "run.json") << run_x.dump();
    CHECK(sh(kCli + " experiment merge " + s0.string() + " " + s1x.string() + " --out " + (dir.path / "mx").string() +
             " 2>&1 | grep -q 'is one of 2 shards'") == 0);
    // A value of another type than a study writes (an edited shard of 1, a number) names the
    // folder; it was the JSON library's bare type error, shown as an unexpected error.
    run_x["study"]["shard"] = 1;
    std::ofstream(s1x / "run.json") << run_x.dump();
    CHECK(sh(kCli + " experiment merge " + s0.string() + " " + s1x.string() + " --out " + (dir.path / "mt").string() + " 2>" +
             (dir.path / "mt.err").string()) == 1);
    const std::string typed = hylens::test::read_text(dir.path / "mt.err");
    CHECK(typed.find("error: [merge] " + s1x.string() + " holds a run.json or items.jsonl value of another type") !=
          std::string::npos);
    CHECK(typed.find("unexpected") == std::string::npos);
    // The figure script (matplotlib, Agg) draws from the result folder alone.
    const fs::path script = fs::path(HYLENS_GOLDEN_DIR).parent_path().parent_path() / "scripts" / "plot_channels.py";
    if (hylens::test::figure_scripts_can_run()) {
        CHECK(sh("/usr/bin/python3 " + script.string() + " " + whole.string() + " >/dev/null") == 0);
        CHECK(fs::file_size(whole / "channels.png") > 1000);
        CHECK(fs::file_size(whole / "swaps.png") > 1000);
        CHECK(fs::file_size(whole / "layers.png") > 1000);
        CHECK(sh("/usr/bin/python3 " + script.string() + " " + model.string() + " >/dev/null 2>&1") != 0);
    }
}

TEST_CASE("cli: hylens experiment channels --judge scores persona with a second model") {
    hylens::test::TempDir dir("cli_judge");
    const fs::path model = model_folder(dir.path);
    const fs::path judge_root = dir.path / "j";
    const fs::path judge = model_folder(judge_root);
    const fs::path judge_tok = dir.path / "judge_tokenizer.json";
    std::ofstream(judge_tok) << hylens::test::tiny_tokenizer_json();
    fs::remove(judge / "tokenizer.json");  // the judge's tokenizer comes from --judge-tokenizer
    const std::string study = kCli + " experiment channels --model " + model.string() +
                              " --task persona --items 6 --seeds 1 --max-new 4 --conditions FULL,NONE";
    const fs::path judged = dir.path / "judged", ruled = dir.path / "ruled";
    REQUIRE(sh(study + " --judge " + judge.string() + " --judge-tokenizer " + judge_tok.string() + " --out " +
               judged.string() + " 2>/dev/null") == 0);
    const nlohmann::json run = nlohmann::json::parse(hylens::test::read_text(judged / "run.json"));
    CHECK(run["status"] == "complete");
    CHECK(run["judge"]["model"] == fs::absolute(judge).string());
    CHECK(run["judge"]["tokenizer"] == fs::absolute(judge_tok).string());
    // The definition names the judge by content: its type and the digests of its folder and
    // tokenizer, no path.
    const nlohmann::json& named = run["study"]["judge"];
    CHECK(named.size() == 3);
    CHECK(named["model_type"] == run["judge"]["model_type"]);
    CHECK(named["model_contents"].get<std::string>().size() == 16);
    CHECK(named["model_contents"] == run["judge"]["model_contents"]);
    CHECK(named["tokenizer_contents"] == run["judge"]["tokenizer_contents"]);
    CHECK(named["tokenizer_contents"] != named["model_contents"]);
    CHECK(run["check_finite"] == true);
    // Swap items whose A and B contexts differ in token length are skipped (skipped.jsonl).
    const std::size_t kept = 6 - run["skipped_items"].get<std::size_t>();
    REQUIRE(kept >= 1);
    const std::vector<nlohmann::json> jr = records(judged);
    REQUIRE(jr.size() == 2 * kept);
    check_scored_by(jr, "judge");
    // Without --judge the rule rubric decides, and run.json says so.
    REQUIRE(sh(study + " --out " + ruled.string() + " 2>/dev/null") == 0);
    CHECK(nlohmann::json::parse(hylens::test::read_text(ruled / "run.json"))["judge"] == "rubric");
    const std::vector<nlohmann::json> rr = records(ruled);
    REQUIRE(rr.size() == 2 * kept);
    check_scored_by(rr, "rubric");
    // The judge changes the score only: the same answers, the same rubric verdicts.
    for (std::size_t i = 0; i < rr.size(); ++i) {
        CHECK(jr[i]["generated"] == rr[i]["generated"]);
        CHECK(jr[i]["score_fields"]["rubric"] == rr[i]["score_fields"]["rubric"]);
    }
    // Resuming a judged run without its judge is another study.
    CHECK(sh(study + " --resume --out " + judged.string() + " >/dev/null 2>&1") == 1);
    // A copy of the judge and its tokenizer at other paths is the same judge: the resume goes on.
    const fs::path judge_copy = dir.path / "jcopy", tok_copy = dir.path / "jcopy_tokenizer.json";
    fs::copy(judge, judge_copy, fs::copy_options::recursive);
    fs::copy_file(judge_tok, tok_copy);
    CHECK(sh(study + " --judge " + judge_copy.string() + " --judge-tokenizer " + tok_copy.string() + " --resume --out " +
             judged.string() + " >/dev/null 2>&1") == 0);
    CHECK(records(judged).size() == 2 * kept);
    // The judge's weights changed in place (the same path, one float): another study.
    {
        std::fstream w(judge_copy / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        w.seekp(-4, std::ios::end);
        const float other = 12345.0f;
        w.write(reinterpret_cast<const char*>(&other), sizeof other);
    }
    const fs::path resume_log = dir.path / "resume_stderr.txt";
    CHECK(sh(study + " --judge " + judge_copy.string() + " --judge-tokenizer " + tok_copy.string() + " --resume --out " +
             judged.string() + " >/dev/null 2>" + resume_log.string()) == 1);
    CHECK(hylens::test::read_text(resume_log).find("describes another study") != std::string::npos);
    // A missing judge folder is an error of the run before any item; --judge-tokenizer needs --judge.
    const fs::path missing = dir.path / "missing";
    CHECK(sh(study + " --judge " + (dir.path / "nojudge").string() + " --out " + missing.string() + " >/dev/null 2>&1") == 1);
    CHECK_FALSE(fs::exists(missing / "items.jsonl"));
    CHECK(sh(study + " --judge " + judge.string() + " --out " + missing.string() + " >/dev/null 2>&1") == 1);  // no tokenizer
    CHECK_FALSE(fs::exists(missing / "items.jsonl"));
    CHECK(sh(study + " --judge-tokenizer " + judge_tok.string() + " --out " + missing.string() + " >/dev/null 2>&1") == 2);
}

TEST_CASE("cli: hylens experiment channels stops at the first non-finite value of a damaged model") {
    hylens::test::TempDir dir("cli_nan");
    const fs::path model = model_folder(dir.path);
    poison_tensor(model / "model.safetensors", "model.language_model.layers.2.mlp.down_proj.weight");
    const fs::path out = dir.path / "o", log = dir.path / "stderr.txt";
    const int rc = sh(kCli + " experiment channels --model " + model.string() +
                      " --task drm --items 2 --seeds 1 --max-new 2 --conditions FULL --out " + out.string() +
                      " 2>" + log.string());
    CHECK(rc == 1);
    const std::string err = hylens::test::read_text(log);
    INFO(err);
    CHECK(err.find("non-finite") != std::string::npos);
    CHECK(err.find("layer 2, site mlp_out") != std::string::npos);
    CHECK_FALSE(fs::exists(out / "summary.json"));
    CHECK_FALSE(fs::exists(out / "summary.csv"));
    CHECK(nlohmann::json::parse(hylens::test::read_text(out / "run.json"))["status"] == "running");
    CHECK(records(out).empty());
}

#ifdef HYLENS_MPIRUN
TEST_CASE("cli: mpirun -np 2 hylens experiment == one process") {
    hylens::test::TempDir dir("cli_mpi");
    const fs::path model = model_folder(dir.path);
    const std::string args = " experiment channels --model " + model.string() +
                             " --task dictionary --items 3 --seeds 1,2 --max-new 3";
    const fs::path one = dir.path / "one", two = dir.path / "two";
    REQUIRE(sh(kCli + args + " --out " + one.string() + " 2>/dev/null") == 0);
    // Outside a launcher the tool leaves MPI alone (a job of one rank); HYLENS_MPI=1 initialises
    // it anyway (a singleton job), with the same results; another value is refused.
    const fs::path single = dir.path / "single";
    REQUIRE(sh("HYLENS_MPI=1 " + kCli + args + " --out " + single.string() + " 2>/dev/null") == 0);
    CHECK(hylens::test::differing_results(one, single).empty());
    const std::string log0 = (dir.path / "log0").string();
    CHECK(sh("HYLENS_MPI=yes " + kCli + args + " --out " + (dir.path / "bad").string() + " >" + log0 + " 2>&1") != 0);
    CHECK(hylens::test::read_text(log0).find("HYLENS_MPI must be 0 or 1 (it is 'yes')") != std::string::npos);
    REQUIRE(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " + kCli + args + " --out " +
               two.string() + " >/dev/null 2>&1") == 0);
    CHECK(hylens::test::differing_results(one, two).empty());
    CHECK(fs::exists(two / "ranks" / "rank-1-of-2" / "items.jsonl"));
    const nlohmann::json run = nlohmann::json::parse(hylens::test::read_text(two / "run.json"));
    CHECK(run["merged_from"].size() == 2);
    // Into the one-process run's folder, which rank 0's merge would refuse: refused before the
    // ranks run (they ran the whole study first), that folder left as it was.
    const std::string before = hylens::test::read_text(one / "items.jsonl");
    CHECK(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " + kCli + args + " --out " +
             one.string() + " >" + (dir.path / "log").string() + " 2>&1") != 0);
    CHECK(hylens::test::read_text(dir.path / "log").find("holds a 'channels' study's run (not a merge)") != std::string::npos);
    CHECK(!fs::exists(one / "ranks"));
    CHECK(hylens::test::read_text(one / "items.jsonl") == before);
    // A killed mpirun -np 2 (its rank folders, no merge yet) resumed over another number of
    // ranks, or alone: refused naming the layout (both computed every record again beside the
    // rank folders, without a word); over 2 ranks it finishes as one process would.
    const fs::path killed = dir.path / "killed";
    fs::create_directories(killed);
    fs::copy(two / "ranks", killed / "ranks", fs::copy_options::recursive);
    const std::string log = (dir.path / "log2").string();
    CHECK(sh(kCli + args + " --resume --out " + killed.string() + " >" + log + " 2>&1") == 1);
    CHECK(hylens::test::read_text(log).find("over 2 MPI ranks; a run in one process would run it again") !=
          std::string::npos);
    CHECK(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 3 " + kCli + args + " --resume --out " +
             killed.string() + " >" + log + " 2>&1") != 0);
    CHECK(hylens::test::read_text(log).find("a run over 3 ranks would run it again") != std::string::npos);
    CHECK(!fs::exists(killed / "ranks" / "rank-0-of-3"));
    CHECK(!fs::exists(killed / "items.jsonl"));
    REQUIRE(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " + kCli + args +
               " --resume --out " + killed.string() + " >/dev/null 2>&1") == 0);
    CHECK(hylens::test::differing_results(one, killed).empty());
}
#endif
#endif
