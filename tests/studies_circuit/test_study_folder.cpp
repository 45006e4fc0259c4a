// StudyFolder and merge_study_folders (experiments/study_folder.hpp): resume after a torn line
// gives the uninterrupted run's items.jsonl, the union of the shards is the unsharded run, and
// a folder of another kind or definition is refused, and so is a folder holding records its
// study does not make (edited, duplicated, another shard's) or an items.jsonl changed after
// its run finished.

#include <doctest/doctest.h>

#include <hylens/core/simd.hpp>
#include <hylens/experiments/progress.hpp>
#include <hylens/experiments/study_folder.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "support/killed_run.hpp"

namespace {

using hylens::test::studies::read_text;
using hylens::test::studies::TempDir;
using hylens::test::studies::write_text;
namespace ex = hylens::experiments;

const nlohmann::json kDefinition = {{"variant", "chat8"}, {"per_config", 3}, {"seed", 7}};
const std::vector<std::string> kConditions = {"baseline", "drop:G0", "drop:L1"};

/// A toy study: 7 units (items), 3 conditions each; the record's value depends only on its key.
/// Runs the units of its shard, stopping after `stop_after` appends (0: all), then finishes.
/// Returns false when it stopped early.
bool toy_study(const ex::StudyFolderOptions& o, std::size_t stop_after = 0) {
    ex::StudyFolder f(o);
    // As every study does: ask for every key of the shard, then check the resumed records.
    for (std::size_t item = 0; item < 7; ++item)
        if (f.mine(item))
            for (const std::string& c : kConditions) (void)f.done({"chat8", 7, item, c});
    f.check_resumed_records();
    std::size_t appended = 0;
    for (std::size_t item = 0; item < 7; ++item) {
        if (!f.mine(item)) continue;
        std::vector<nlohmann::json> recs;
        for (const std::string& c : kConditions) {
            const ex::RecordKey k{"chat8", 7, item, c};
            if (f.done(k)) continue;
            recs.push_back({{"task", k.task}, {"seed", k.seed}, {"item", k.item}, {"condition", k.condition},
                            {"d_clean", 0.25 * static_cast<double>(item) - static_cast<double>(c.size())}});
        }
        if (recs.empty()) continue;
        f.append(recs);
        if (stop_after && ++appended == stop_after) return false;
    }
    f.finish({{"note", "toy"}});
    return true;
}

ex::StudyFolderOptions options(const std::filesystem::path& out, bool resume = false, ex::Shard shard = {}) {
    ex::StudyFolderOptions o;
    o.out = out;
    o.kind = "toy";
    o.definition = kDefinition;
    o.resume = resume;
    o.shard = shard;
    o.run_info = {{"model", "none"}};
    return o;
}

}  // namespace

TEST_CASE("StudyFolder: a run resumed after a torn last line equals the uninterrupted run") {
    TempDir whole("folder_whole"), cut("folder_cut");
    REQUIRE(toy_study(options(whole.path)));
    const std::string expected = read_text(whole.path / "items.jsonl");
    CHECK(std::count(expected.begin(), expected.end(), '\n') == 21);

    // Killed after 3 items, the last line half written.
    REQUIRE_FALSE(toy_study(options(cut.path), 3));
    const nlohmann::json run_cut = nlohmann::json::parse(read_text(cut.path / "run.json"));
    CHECK(run_cut["status"] == "running");
    CHECK(run_cut["kind"] == "toy");
    CHECK(run_cut["study"]["shard"] == "0/1");
    write_text(cut.path / "items.jsonl", read_text(cut.path / "items.jsonl") + "{\"task\":\"chat8\",\"se");
    // Without --resume the folder is refused.
    CHECK_THROWS_AS(ex::StudyFolder(options(cut.path)), hylens::Error);
    {
        ex::StudyFolder f(options(cut.path, true));
        CHECK(f.resumed() == 9);
        CHECK(f.done({"chat8", 7, 2, "drop:L1"}));
        CHECK_FALSE(f.done({"chat8", 7, 3, "baseline"}));
        const nlohmann::json rec = {{"task", "chat8"}, {"seed", 7}, {"item", 3}, {"condition", "baseline"}};
        // A resumed folder takes records only once its resumed ones are checked.
        CHECK_THROWS_WITH_AS(f.append({rec}), doctest::Contains("calls check_resumed_records() before its first append"),
                             hylens::Error);
        for (std::size_t item = 0; item < 7; ++item)
            for (const std::string& c : kConditions) (void)f.done({"chat8", 7, item, c});
        f.check_resumed_records();
        // A key already on disk cannot be written again.
        CHECK_THROWS_WITH_AS(f.append({{{"task", "chat8"}, {"seed", 7}, {"item", 0}, {"condition", "baseline"}}}),
                             doctest::Contains("written twice"), hylens::Error);
    }
    REQUIRE(toy_study(options(cut.path, true)));
    CHECK(read_text(cut.path / "items.jsonl") == expected);
    const nlohmann::json run = nlohmann::json::parse(read_text(cut.path / "run.json"));
    CHECK(run["status"] == "complete");
    CHECK(run["records"] == 21);
    CHECK(run["note"] == "toy");
    CHECK(run["model"] == "none");
}

TEST_CASE("StudyFolder: records() are sorted by key, finish() writes them in that order") {
    TempDir d("folder_order");
    {
        ex::StudyFolder f(options(d.path));
        f.append({{{"task", "chat8"}, {"seed", 7}, {"item", 2}, {"condition", "b"}}});
        f.append({{{"task", "chat8"}, {"seed", 7}, {"item", 1}, {"condition", "z"}},
                  {{"task", "chat8"}, {"seed", 7}, {"item", 1}, {"condition", "a"}}});
        const std::vector<nlohmann::json> r = f.records();
        REQUIRE(r.size() == 3);
        CHECK(r[0]["item"] == 1);
        CHECK(r[0]["condition"] == "a");
        CHECK(r[1]["condition"] == "z");
        CHECK(r[2]["item"] == 2);
        f.finish();
        CHECK(read_text(d.path / "items.jsonl") ==
              "{\"condition\":\"a\",\"item\":1,\"seed\":7,\"task\":\"chat8\"}\n"
              "{\"condition\":\"z\",\"item\":1,\"seed\":7,\"task\":\"chat8\"}\n"
              "{\"condition\":\"b\",\"item\":2,\"seed\":7,\"task\":\"chat8\"}\n");
    }  // f holds the folder's lock until here
    // A record without its key fields is an error.
    ex::StudyFolder g(options(d.path, true));
    CHECK_THROWS_AS(g.append({{{"task", "chat8"}, {"item", 3}}}), hylens::Error);
}

TEST_CASE("LineAppender: each sync() writes its lines (a killed process loses none), fsync at most once per interval") {
    using namespace std::chrono_literals;
    TempDir d("appender");
    const std::filesystem::path slow = d.path / "slow.jsonl", every = d.path / "every.jsonl";
    {
        ex::LineAppender a(slow, 1h);
        a.add("{\"a\":1}");
        CHECK(read_text(slow).empty());  // queued, not written
        a.sync();
        a.add("{\"a\":2}");
        a.add("{\"a\":3}");
        a.sync();
        CHECK(read_text(slow) == "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");  // written, before any fsync
        CHECK(a.fsyncs() == 0);
        ex::LineAppender b(every, 0ms);
        for (int i = 0; i < 3; ++i) {
            b.add("x");
            b.sync();
        }
        CHECK(b.fsyncs() == 3);
        CHECK(read_text(every) == "x\nx\nx\n");
    }
    CHECK(read_text(slow) == "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
}

TEST_CASE("Progress: its unit, a phase's note, and a phase left out of the rate") {
    TempDir d("progress");
    const std::filesystem::path log = d.path / "stderr.txt";
    std::fflush(stderr);
    const int saved = ::dup(2);
    {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        ::dup2(fd, 2);
        ::close(fd);
        ex::Progress p(4, "stitch", true, "items");
        p.note("seed 1: fitting");
        p.exclude(1e9);  // a phase longer than the run: no time left to divide by
        p.add(4);        // the last unit prints the line
        std::fflush(stderr);
        ::dup2(saved, 2);
        ::close(saved);
    }
    const std::string text = read_text(log);
    CHECK(text.find("[stitch] seed 1: fitting\n") != std::string::npos);
    CHECK(text.find("[stitch] 4/4 items (100.0 %), 0.00 items/s") != std::string::npos);
}

TEST_CASE("merge_study_folders: the union of the shards is the unsharded run") {
    TempDir whole("merge_whole"), s0("merge_s0"), s1("merge_s1"), s2("merge_s2"), merged("merge_out");
    REQUIRE(toy_study(options(whole.path)));
    REQUIRE(toy_study(options(s0.path, false, ex::parse_shard("0/3"))));
    REQUIRE(toy_study(options(s1.path, false, ex::parse_shard("1/3"))));
    REQUIRE(toy_study(options(s2.path, false, ex::parse_shard("2/3"))));
    // Shard 1 of 3 holds items 1 and 4.
    CHECK(read_text(s1.path / "items.jsonl").find("\"item\":4") != std::string::npos);
    CHECK(read_text(s1.path / "items.jsonl").find("\"item\":0") == std::string::npos);
    std::size_t summarised = 0;
    const ex::MergeResult m =
        ex::merge_study_folders({s2.path, s0.path, s1.path}, merged.path, "toy",
                                [&](const std::filesystem::path& out, const std::vector<nlohmann::json>& recs) {
                                    CHECK(out == merged.path);
                                    summarised = recs.size();
                                });
    CHECK(m.folders == 3);
    CHECK(m.records == 21);
    CHECK(m.incomplete == 0);
    CHECK(summarised == 21);
    CHECK(read_text(merged.path / "items.jsonl") == read_text(whole.path / "items.jsonl"));
    const nlohmann::json run = nlohmann::json::parse(read_text(merged.path / "run.json"));
    CHECK(run["status"] == "complete");
    CHECK(run["study"] == nlohmann::json::parse(read_text(whole.path / "run.json"))["study"]);
    CHECK(run["merged_from"].size() == 3);

    // A shard twice, or the same records twice, is refused.
    TempDir again("merge_again");
    CHECK_THROWS_AS(ex::merge_study_folders({s0.path, s0.path}, again.path, "toy", nullptr), hylens::Error);
    CHECK_THROWS_AS(ex::merge_study_folders({whole.path, s0.path}, again.path, "toy", nullptr), hylens::Error);
}

TEST_CASE("merge_study_folders: an unfinished shard is counted incomplete") {
    TempDir s0("inc_s0"), s1("inc_s1"), merged("inc_out");
    REQUIRE(toy_study(options(s0.path, false, ex::parse_shard("0/2"))));
    REQUIRE_FALSE(toy_study(options(s1.path, false, ex::parse_shard("1/2")), 1));
    const ex::MergeResult m = ex::merge_study_folders({s0.path, s1.path}, merged.path, "toy", nullptr);
    CHECK(m.incomplete == 1);
    CHECK(m.records == 4 * 3 + 3);
    CHECK(nlohmann::json::parse(read_text(merged.path / "run.json"))["status"] == "incomplete");
}

TEST_CASE("StudyFolder: another kind or definition is refused with --resume and by merge") {
    TempDir d("mismatch"), other("mismatch_other"), out("mismatch_out");
    REQUIRE_FALSE(toy_study(options(d.path), 1));
    ex::StudyFolderOptions kind = options(d.path, true);
    kind.kind = "circuit";
    CHECK_THROWS_WITH_AS(ex::StudyFolder{kind}, doctest::Contains("'toy' study, not 'circuit'"), hylens::Error);
    ex::StudyFolderOptions def = options(d.path, true);
    def.definition["per_config"] = 4;
    // The message names the setting that differs, not both definitions whole.
    CHECK_THROWS_WITH_AS(ex::StudyFolder{def}, doctest::Contains("describes another study: per_config: 3 and 4 (there and here)"),
                         hylens::Error);
    // Another shard is another study for --resume.
    CHECK_THROWS_AS(ex::StudyFolder(options(d.path, true, ex::parse_shard("0/2"))), hylens::Error);
    // The definition may not carry the shard itself.
    ex::StudyFolderOptions bad = options(other.path);
    bad.definition["shard"] = "0/1";
    CHECK_THROWS_AS(ex::StudyFolder{bad}, hylens::Error);

    ex::StudyFolderOptions o2 = options(other.path);
    o2.definition["seed"] = 8;
    REQUIRE(toy_study(o2));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({d.path, other.path}, out.path, "toy", nullptr),
                         doctest::Contains(("is another study than " + d.path.string() + ": seed: 8 and 7").c_str()), hylens::Error);
    // Records without a run.json: --resume cannot say which study wrote them.
    TempDir orphan("mismatch_orphan");
    write_text(orphan.path / "items.jsonl", read_text(d.path / "items.jsonl"));
    CHECK_THROWS_WITH_AS(ex::StudyFolder(options(orphan.path, true)), doctest::Contains("holds records but its folder has no run.json"),
                         hylens::Error);
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({d.path}, out.path, "circuit", nullptr),
                         doctest::Contains("is not a 'circuit' study"), hylens::Error);
}

TEST_CASE("parse_shard") {
    CHECK(ex::parse_shard("2/3").index == 2);
    CHECK(ex::parse_shard("2/3").count == 3);
    CHECK_THROWS_AS(ex::parse_shard("3/3"), hylens::Error);
    CHECK_THROWS_AS(ex::parse_shard("1"), hylens::Error);
    CHECK_THROWS_AS(ex::parse_shard("-1/3"), hylens::Error);
}

namespace {

/// `text` with the first occurrence of `from` replaced by `to` (which must occur).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

/// A folder killed after `appends` appends, its items.jsonl then changed by `edit`.
template <class Edit>
void killed_and_edited(const std::filesystem::path& dir, std::size_t appends, Edit edit, ex::Shard shard = {}) {
    REQUIRE_FALSE(toy_study(options(dir, false, shard), appends));
    write_text(dir / "items.jsonl", edit(read_text(dir / "items.jsonl")));
}

}  // namespace

TEST_CASE("StudyFolder: a resumed record the study does not make, or one on disk twice, stops the run") {
    TempDir seed("foreign_seed"), shard("foreign_shard"), twice("foreign_twice"), item("foreign_item");
    // A record hand-edited to another seed: the study never asks for its key.
    killed_and_edited(seed.path, 2, [](std::string t) { return replaced(t, "\"item\":1,\"seed\":7", "\"item\":1,\"seed\":9"); });
    CHECK_THROWS_WITH_AS(toy_study(options(seed.path, true)), doctest::Contains("holds record (chat8, seed 9, item 1, baseline), which this study does not make in shard 0/1"),
                         hylens::FormatError);
    // An item beyond the study's.
    killed_and_edited(item.path, 1, [](std::string t) { return replaced(t, "\"item\":0", "\"item\":70"); });
    CHECK_THROWS_WITH_AS(toy_study(options(item.path, true)), doctest::Contains("item 70"), hylens::FormatError);
    // Another shard's record (item 1 is shard 1/2's) in shard 0/2's folder.
    killed_and_edited(shard.path, 1, [](std::string t) { return replaced(t, "\"item\":0", "\"item\":1"); }, ex::parse_shard("0/2"));
    CHECK_THROWS_WITH_AS(toy_study(options(shard.path, true, ex::parse_shard("0/2"))),
                         doctest::Contains("does not make in shard 0/2"), hylens::FormatError);
    // A line duplicated: refused when the folder is opened.
    killed_and_edited(twice.path, 1, [](const std::string& t) { return t + t.substr(0, t.find('\n') + 1); });
    CHECK_THROWS_WITH_AS(ex::StudyFolder(options(twice.path, true)), doctest::Contains("twice"), hylens::FormatError);
    // The unedited kill resumes (the check does not refuse the study's own records).
    TempDir plain("foreign_none");
    REQUIRE_FALSE(toy_study(options(plain.path), 2));
    CHECK(toy_study(options(plain.path, true)));
}

TEST_CASE("StudyFolder: a finished folder's items.jsonl is fingerprinted and a changed one is refused by --resume and merge") {
    TempDir whole("fp_whole"), s0("fp_s0"), s1("fp_s1"), out("fp_out"), out2("fp_out2");
    REQUIRE(toy_study(options(whole.path)));
    const nlohmann::json run = nlohmann::json::parse(read_text(whole.path / "run.json"));
    // The fingerprint is FNV-1a 64 of the file's bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char c : read_text(whole.path / "items.jsonl")) h = (h ^ c) * 0x100000001b3ULL;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    CHECK(run["items_fnv1a64"] == hex);
    // Resuming the finished folder unchanged adds nothing; a score edited is refused.
    CHECK(toy_study(options(whole.path, true)));
    write_text(whole.path / "items.jsonl", replaced(read_text(whole.path / "items.jsonl"), "\"d_clean\":-8.0", "\"d_clean\":8.0"));
    CHECK_THROWS_WITH_AS(toy_study(options(whole.path, true)), doctest::Contains("is not the file its run wrote"), hylens::FormatError);

    // Merge: an edited finished shard is refused; the merged run.json fingerprints its own file.
    REQUIRE(toy_study(options(s0.path, false, ex::parse_shard("0/2"))));
    REQUIRE(toy_study(options(s1.path, false, ex::parse_shard("1/2"))));
    ex::merge_study_folders({s0.path, s1.path}, out.path, "toy", nullptr);
    CHECK(nlohmann::json::parse(read_text(out.path / "run.json"))["items_fnv1a64"] == hex);
    const std::string s1_items = read_text(s1.path / "items.jsonl");
    write_text(s1.path / "items.jsonl", s1_items.substr(0, s1_items.find('\n') + 1));  // a record removed
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, s1.path}, out2.path, "toy", nullptr),
                         doctest::Contains("is not the file its run wrote"), hylens::FormatError);
}

TEST_CASE("merge_study_folders: a killed shard's record of a seed the study does not run is refused") {
    TempDir s0("mseed_s0"), s1("mseed_s1"), out("mseed_out");
    REQUIRE(toy_study(options(s0.path, false, ex::parse_shard("0/2"))));
    killed_and_edited(s1.path, 1, [](std::string t) { return replaced(t, "\"seed\":7", "\"seed\":9"); }, ex::parse_shard("1/2"));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, s1.path}, out.path, "toy", nullptr),
                         doctest::Contains("holds a record of seed 9, which the study does not run"), hylens::FormatError);
}

TEST_CASE("definition_difference names the first differing place of each differing key") {
    std::vector<std::string> conds;
    for (int i = 0; i < 11; ++i) conds.push_back("KV_ONLY@" + std::to_string(i));  // longer than a message cuts a value
    std::vector<std::string> more = conds;
    more.push_back("NONE@0-3");
    CHECK(ex::detail::definition_difference({{"conditions", conds}}, {{"conditions", more}}) ==
          "conditions[11]: (none) and \"NONE@0-3\"");
    CHECK(ex::detail::definition_difference({{"items", 6}, {"seeds", {1}}, {"x", 1}}, {{"items", 7}, {"seeds", {1, 2}}, {"x", 1}}) ==
          "items: 6 and 7; seeds[1]: (none) and 2");
    const nlohmann::json a = {{"structure", {{"groups", {{0, 1}, {2}}}}}}, b = {{"structure", {{"groups", {{0, 1}, {3}}}}}};
    CHECK(ex::detail::definition_difference(a, b) == "structure.groups[1][0]: 2 and 3");
    CHECK(ex::detail::definition_difference({{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}}, nlohmann::json::object()) ==
          "a: 1 and (none); b: 1 and (none); c: 1 and (none); and 1 more");
}

TEST_CASE("StudyFolder: a refused resume leaves a finished folder's run.json as it was") {
    TempDir d("refused_keeps");
    REQUIRE(toy_study(options(d.path)));
    // An older finished folder (no items fingerprint) with a record edited to another seed.
    nlohmann::json run = nlohmann::json::parse(read_text(d.path / "run.json"));
    run.erase("items_fnv1a64");
    write_text(d.path / "run.json", run.dump(1));
    write_text(d.path / "items.jsonl", replaced(read_text(d.path / "items.jsonl"), "\"item\":1,\"seed\":7", "\"item\":1,\"seed\":9"));
    const std::string before = read_text(d.path / "run.json");
    ex::StudyFolder f(options(d.path, true));
    for (std::size_t item = 0; item < 7; ++item)
        for (const std::string& c : kConditions) (void)f.done({"chat8", 7, item, c});
    CHECK_THROWS_WITH_AS(f.check_resumed_records(), doctest::Contains("seed 9, item 1"), hylens::FormatError);
    CHECK(read_text(d.path / "run.json") == before);
}

TEST_CASE("merge_study_folders: a killed shard's record of another task or condition is refused by the study's names") {
    // record_names_check: what every study's merge passes (merge_by_kind.hpp, stitch_study.hpp).
    const auto names = ex::detail::record_names_check(
        "toy", [](const std::string& t) { return t == "chat8"; },
        [](const std::string& c) { return std::find(kConditions.begin(), kConditions.end(), c) != kConditions.end(); });
    const auto summaries = [](const std::filesystem::path&, const std::vector<nlohmann::json>& r) {
        for (const nlohmann::json& x : r) (void)x.at("d_clean").get<double>();  // what a study's summaries read
    };
    TempDir s0("mnames_s0"), task("mnames_task"), cond("mnames_cond"), lacking("mnames_lacking"), out("mnames_out");
    REQUIRE(toy_study(options(s0.path, false, ex::parse_shard("0/2"))));
    killed_and_edited(task.path, 1, [](std::string t) { return replaced(t, "\"task\":\"chat8\"", "\"task\":\"dictionary\""); },
                      ex::parse_shard("1/2"));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, task.path}, out.path, "toy", summaries, names),
                         doctest::Contains("items.jsonl line 1 holds a record of task 'dictionary', which this toy study does not run"),
                         hylens::FormatError);
    killed_and_edited(cond.path, 1, [](std::string t) { return replaced(t, "\"drop:G0\"", "\"FULL\""); }, ex::parse_shard("1/2"));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, cond.path}, out.path, "toy", summaries, names),
                         doctest::Contains("holds a record of condition 'FULL', which this toy study does not make"),
                         hylens::FormatError);
    // Its names the study's, a value its summaries read missing: named, not the JSON library's bare message.
    killed_and_edited(lacking.path, 1, [](std::string t) { return replaced(t, "\"d_clean\"", "\"score\""); }, ex::parse_shard("1/2"));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, lacking.path}, out.path, "toy", summaries, names),
                         doctest::Contains("a record of the folders merged lacks a value the toy study's summaries read"),
                         hylens::FormatError);
    // The unedited killed shard merges, marked incomplete.
    TempDir plain("mnames_plain"), out2("mnames_out2");
    REQUIRE_FALSE(toy_study(options(plain.path, false, ex::parse_shard("1/2")), 1));
    CHECK(ex::merge_study_folders({s0.path, plain.path}, out2.path, "toy", summaries, names).incomplete == 1);
}

TEST_CASE("StudyFolder: run.json lists the SIMD levels its records were computed at") {
    namespace simd = hylens::simd;
    const std::string level = simd::level_name(simd::f32_level(simd::active()));
    nlohmann::json both = nlohmann::json::array({"baseline", level});
    if (level == "baseline") both = "baseline";
    if (both.is_array() && both[0] > both[1]) std::swap(both[0], both[1]);
    const auto simd_of = [](const std::filesystem::path& d) { return nlohmann::json::parse(read_text(d / "run.json"))["simd"]; };
    TempDir d("simd_levels");
    {
        const simd::ForceLevel base(simd::Level::baseline);
        REQUIRE_FALSE(toy_study(options(d.path), 2));  // killed after two items
        CHECK(simd_of(d.path) == "baseline");
    }
    REQUIRE(toy_study(options(d.path, true)));  // the rest at the machine's level
    CHECK(simd_of(d.path) == both);
    {
        const simd::ForceLevel base(simd::Level::baseline);
        REQUIRE(toy_study(options(d.path, true)));  // nothing left: no record at this level
    }
    CHECK(simd_of(d.path) == both);
}

TEST_CASE("merge_study_folders: a record held twice in one folder is an edited file") {
    TempDir s0("dup_s0"), s1("dup_s1"), out("dup_out");
    killed_and_edited(s0.path, 1, [](const std::string& t) { return t + t.substr(0, t.find('\n') + 1); }, ex::parse_shard("0/2"));
    REQUIRE(toy_study(options(s1.path, false, ex::parse_shard("1/2"))));
    CHECK_THROWS_WITH_AS(ex::merge_study_folders({s0.path, s1.path}, out.path, "toy", nullptr),
                         doctest::Contains("line 4 holds record (chat8, seed 7, item 0, baseline) twice: the file was edited"),
                         hylens::FormatError);
}

TEST_CASE("StudyFolder: a resume of a finished folder leaves run.json finished until a record is added") {
    // A requeued job resumes its finished folder; killed before its end, that resume had marked
    // the folder running and dropped its items fingerprint, so an edited record passed the next
    // resume. run.json now changes at the first new record, or at finish().
    TempDir d("noop_resume");
    REQUIRE(toy_study(options(d.path)));
    const std::string before = read_text(d.path / "run.json");
    {
        ex::StudyFolder f(options(d.path, true));
        for (std::size_t item = 0; item < 7; ++item)
            for (const std::string& c : kConditions) CHECK(f.done({"chat8", 7, item, c}));
        f.check_resumed_records();
        CHECK(read_text(d.path / "run.json") == before);  // killed here: still finished, fingerprinted
    }
    CHECK(toy_study(options(d.path, true)));
    CHECK(nlohmann::json::parse(read_text(d.path / "run.json"))["status"] == "complete");
    // A folder with work left: its run.json is rewritten at the first new record, not by an
    // empty append or by a record held already (they marked it running before).
    TempDir k("noop_resume_killed");
    CHECK(!toy_study(options(k.path), 1));
    nlohmann::json marked = nlohmann::json::parse(read_text(k.path / "run.json"));
    marked["status"] = "complete";  // marked finished (without a fingerprint, which a resume checks)
    write_text(k.path / "run.json", marked.dump(1));
    const std::string sentinel = read_text(k.path / "run.json");
    ex::StudyFolder f(options(k.path, true));
    for (std::size_t item = 0; item < 7; ++item)
        for (const std::string& c : kConditions) (void)f.done({"chat8", 7, item, c});
    f.check_resumed_records();
    f.append({});
    CHECK_THROWS_WITH(f.append({{{"task", "chat8"}, {"seed", 7}, {"item", 0}, {"condition", "baseline"}}}),
                      doctest::Contains("written twice"));
    CHECK(read_text(k.path / "run.json") == sentinel);
    f.append({{{"task", "chat8"}, {"seed", 7}, {"item", 5}, {"condition", "baseline"}, {"d_clean", 1.0}}});
    CHECK(nlohmann::json::parse(read_text(k.path / "run.json"))["status"] == "running");
}
