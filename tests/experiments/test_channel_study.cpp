// The channel-study runner end to end on a shipped random model (tests/golden/models) with the
// test tokenizer and tasks of fixtures.hpp: records, summaries recomputed from the records,
// batched == one at a time, merge(shards) == unsharded, resume after a torn write ==
// uninterrupted, and FULL == greedy generation on the joint prompt.

#include <hylens/experiments/channel_study.hpp>
#include <hylens/experiments/merge.hpp>
#include <hylens/models/load.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "support/killed_run.hpp"
#include "support/tokenizer_without.hpp"

using namespace hylens;
using namespace hylens::experiments;
namespace fs = std::filesystem;

namespace {

const AnyModel& qwen_model() {
    static const AnyModel m = load(fs::path(HYLENS_GOLDEN_DIR) / "models" / "qwen3_5_dense");
    return m;
}

const tasks::TaskSpec& swap_task() {
    static const tasks::TaskSpec t = test::lookup_task(true);
    return t;
}
const tasks::TaskSpec& plain_task() {
    static const tasks::TaskSpec t = test::lookup_task(false);
    return t;
}

StudyOptions small_study(const fs::path& out) {
    StudyOptions o;
    o.tasks = {&swap_task(), &plain_task()};
    o.conditions = parse_conditions("FULL,KV_ONLY,REC_ONLY,NONE,KV_A+REC_B,KV_B+REC_A,KV_A+REC_A,KV_B+REC_B");
    o.items = 6;
    o.seeds = {1, 2};
    o.out = out;
    o.progress = false;
    o.bootstrap.resamples = 200;  // the statistics are tested on their own; keep this fast
    return o;
}

StudyResult run(const StudyOptions& o, const AnyModel& any = qwen_model()) {
    return any.visit([&](const auto& m) { return run_channel_study(m, test::tiny_tokenizer(), ChatFamily::qwen35, o); });
}



}  // namespace

TEST_CASE("channel study: records, summaries recomputed from them, FULL == greedy on the joint prompt") {
    test::TempDir dir("records");
    StudyOptions o = small_study(dir.path);
    o.max_new = 8;  // answers long enough for the conditions to move them on random weights
    const StudyResult r = run(o);
    // 2 seeds x 6 items: 8 conditions on the swap task, the 4 split conditions on the other.
    CHECK(r.records == 2 * 6 * 8 + 2 * 6 * 4);
    CHECK(r.written == r.records);
    CHECK(r.skipped_items == 0);
    const auto records = read_records(dir.path / "items.jsonl", false);
    REQUIRE(records.size() == r.records);
    std::map<std::string, std::map<std::string, nlohmann::json>> by_item;  // "task/seed/item" -> condition -> record
    for (const auto& rec : records) {
        for (const char* k : {"task", "seed", "item", "condition", "context", "query", "expected", "generated", "score",
                              "first_token", "item_fields", "score_fields", "generated_ids", "query_position"})
            CHECK(rec.contains(k));
        by_item[rec["task"].get<std::string>() + "/" + rec["seed"].dump() + "/" + rec["item"].dump()]
               [rec["condition"].get<std::string>()] = rec;
    }
    CHECK(records.front()["task"] == "lookup");
    CHECK(records.front()["condition"] == "FULL");
    CHECK(records.front().contains("first_token_b"));
    // Summaries: exactly what the records give.
    const nlohmann::json run_json = nlohmann::json::parse(test::read_text(dir.path / "run.json"));
    CHECK(run_json["status"] == "complete");
    const auto conds = run_json["study"]["conditions"].get<std::vector<std::string>>();
    BootstrapOptions bo;
    bo.resamples = 200;
    const Summary s = summarize(records, conds, bo);
    CHECK(test::read_text(dir.path / "summary.csv") == summary_csv(s));
    CHECK(test::read_text(dir.path / "diffs.csv") == diffs_csv(s));
    CHECK(nlohmann::json::parse(test::read_text(dir.path / "summary.json")) == summary_json(s));
    // Rows per group and metric; FULL has rel_full 1 wherever its mean is non-zero.
    bool saw_group = false, saw_answered = false, saw_ft = false;
    for (const auto& row : s.rows) {
        saw_group = saw_group || row.group == "three";
        saw_answered = saw_answered || row.metric == "answered";
        saw_ft = saw_ft || row.metric == "first_token";
        if (row.condition == "FULL" && row.mean.value > 0) CHECK(row.rel_full.value == 1.0);
        CHECK(row.mean.lo <= row.mean.value + 1e-12);
        CHECK(row.mean.value <= row.mean.hi + 1e-12);
        // Every condition scored every item of both seeds; first_token is a proportion, so it
        // has Wilson's interval of its count, the same at the row's n.
        if (row.group == "all" && row.metric != "answered") {
            CHECK(row.seeds == 2);
            CHECK(row.min_seed_n == 6);
        }
        if (row.metric == "first_token") {
            const auto [lo, hi] = wilson_interval(std::round(row.mean.value * static_cast<double>(row.mean.n)), row.mean.n, 0.95);
            CHECK(row.wilson.lo == lo);
            CHECK(row.wilson.hi == hi);
        }
    }
    CHECK(saw_group);
    CHECK(saw_answered);
    // The records carry information: answers are generated and the conditions move them.
    std::size_t nonempty = 0, differ = 0;
    for (const auto& [key, cell] : by_item) {
        nonempty += !cell.at("FULL")["generated_ids"].empty();
        differ += cell.at("NONE")["generated_ids"] != cell.at("FULL")["generated_ids"];
    }
    CHECK(nonempty > by_item.size() / 2);
    CHECK(differ > 0);
    CHECK(saw_ft);
    // FULL: greedy generation on context ids ++ query ids; the same-source control KV_A+REC_A
    // equals FULL; KV_B+REC_B equals FULL on the B context.
    const test::TempDir unused("unused");
    const PromptRenderer pr(test::tiny_tokenizer(), ChatFamily::qwen35);
    qwen_model().visit([&](const auto& m) {
        for (std::size_t i = 0; i < 3; ++i) {
            const tasks::Item item = swap_task().make(2, i);
            const RenderedItem ids = pr.render(item, true);
            auto cache = m.prefill(TokenBatch(ids.context));
            GenerateOptions g;
            g.max_new = o.max_new;
            g.stop_ids = pr.stop_ids();
            const auto out = generate(m, cache, TokenBatch(ids.query), g);
            const auto& cell = by_item["lookup/2/" + std::to_string(i)];
            CHECK(cell.at("FULL")["generated_ids"] == nlohmann::json(pr.until_stop(out.ids[0]).first));
            CHECK(cell.at("FULL")["query_position"] == ids.context.size());
            CHECK(cell.at("KV_A+REC_A")["generated"] == cell.at("FULL")["generated"]);
            CHECK(cell.at("REC_ONLY")["query_position"] == 0);
            auto cache_b = m.prefill(TokenBatch(ids.alt_context));
            const auto out_b = generate(m, cache_b, TokenBatch(ids.query), g);
            CHECK(cell.at("KV_B+REC_B")["generated_ids"] == nlohmann::json(pr.until_stop(out_b.ids[0]).first));
        }
    });
    // The prompt split: context segment = prefix + context, query segment = query + suffix.
    const tasks::Item item = swap_task().make(1, 0);
    const RenderedItem ids = pr.render(item, true);
    CHECK(pr.decode(ids.context) == "user\n" + item.context);  // <|im_start|> is special, skipped by decode
    CHECK(pr.decode(ids.query) == item.query + "\nassistant\n<think>\n\n</think>\n\n");
    CHECK(ids.context.front() == 257);
    REQUIRE(ids.first_a.has_value());
    CHECK(*ids.first_a == static_cast<unsigned char>(item.expected[0][0]));  // one byte = one token here
    CHECK(pr.stop_ids() == std::vector<std::int64_t>{258, 256});
}

TEST_CASE("channel study: batched and one-at-a-time runs write identical results") {
    test::TempDir a("batched"), b("single");
    StudyOptions o = small_study(a.path);
    o.conditions = parse_conditions("FULL,KV_ONLY,REC_ONLY,KV_A+REC_B");
    o.batch = 16;
    run(o);
    o.out = b.path;
    o.batch = 1;
    run(o);
    CHECK(hylens::test::differing_results(a.path, b.path).empty());
    // The batch dimension was used: some group of this study has several items.
    CHECK(nlohmann::json::parse(test::read_text(a.path / "run.json"))["batch"] == 16);
}

TEST_CASE("channel study: merge of the shards == the unsharded run, bad merges are errors") {
    test::TempDir whole("whole"), s0("shard0"), s1("shard1"), s2("shard2of3"), merged("merged");
    StudyOptions o = small_study(whole.path);
    o.layers = parse_layer_spec("single");
    o.conditions = parse_conditions("FULL,KV_ONLY,KV_A+REC_B");
    run(o);
    o.shard = parse_shard("0/2");
    o.out = s0.path;
    const StudyResult r0 = run(o);
    o.shard = parse_shard("1/2");
    o.out = s1.path;
    const StudyResult r1 = run(o);
    CHECK(r0.records > 0);
    CHECK(r1.records > 0);
    const BootstrapOptions boot = [] {
        BootstrapOptions b;
        b.resamples = 200;
        return b;
    }();
    const MergeResult m = merge_results({s1.path, s0.path}, merged.path, boot);
    CHECK(m.records == r0.records + r1.records);
    CHECK(m.incomplete == 0);
    CHECK(hylens::test::differing_results(whole.path, merged.path).empty());
    // Into an earlier merge of the same study: replaced. Into another run's result: refused,
    // and that folder is left as it was (its other files would stay beside the records).
    CHECK(merge_results({s0.path, s1.path}, merged.path, boot).records == m.records);
    CHECK(hylens::test::differing_results(whole.path, merged.path).empty());
    const std::string whole_items = test::read_text(whole.path / "items.jsonl");
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, whole.path), doctest::Contains("holds a 'channels' study's run (not a merge)"),
                         Error);
    CHECK(test::read_text(whole.path / "items.jsonl") == whole_items);
    test::TempDir circuit("merge_into_circuit"), orphan("merge_into_orphan"), other("merge_into_other");
    test::write_text(circuit.path / "run.json", R"({"kind": "circuit", "study": {}, "merged_from": []})");
    test::write_text(circuit.path / "circuit.json", "{}");
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, circuit.path),
                         doctest::Contains("holds a 'circuit' study, and the folders merged are a 'channels' study"), Error);
    CHECK(!fs::exists(circuit.path / "items.jsonl"));
    test::write_text(orphan.path / "items.jsonl", "");
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, orphan.path), doctest::Contains("holds an items.jsonl and no run.json"),
                         Error);
    nlohmann::json another = nlohmann::json::parse(test::read_text(merged.path / "run.json"));
    another["study"]["items"] = 99;
    test::write_text(other.path / "run.json", another.dump());
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, other.path), doctest::Contains("holds a merge of another study: items"),
                         Error);
    // A merge that stops after its run.json ("merging") and part of its files (here: it cannot
    // write skipped.jsonl, a folder) is an earlier merge of the same study: the next one replaces it.
    test::TempDir stopped("merge_stopped");
    fs::create_directories(stopped.path / "skipped.jsonl");
    CHECK_THROWS(merge_results({s0.path, s1.path}, stopped.path, boot));
    CHECK(nlohmann::json::parse(test::read_text(stopped.path / "run.json"))["status"] == "merging");
    CHECK(fs::exists(stopped.path / "items.jsonl"));
    CHECK(!fs::exists(stopped.path / "summary.csv"));
    // Until then, resuming the study there or merging the folder says what it is.
    StudyOptions into_stopped = o;
    into_stopped.shard = parse_shard("0/1");
    into_stopped.out = stopped.path;
    into_stopped.resume = true;
    const char* stopped_merge = "holds a merge that stopped before it finished (run.json's status is 'merging')";
    CHECK_THROWS_WITH_AS(run(into_stopped), doctest::Contains(stopped_merge), FormatError);
    test::TempDir from_stopped("merge_from_stopped");
    CHECK_THROWS_WITH_AS(merge_results({stopped.path}, from_stopped.path), doctest::Contains(stopped_merge), FormatError);
    fs::remove_all(stopped.path / "skipped.jsonl");
    CHECK(merge_results({s0.path, s1.path}, stopped.path, boot).incomplete == 0);
    CHECK(hylens::test::differing_results(whole.path, stopped.path).empty());
    CHECK(merge_results({s0.path, s1.path}, merged.path, boot).incomplete == 0);
    CHECK(hylens::test::differing_results(whole.path, merged.path).empty());
    CHECK(nlohmann::json::parse(test::read_text(merged.path / "run.json"))["status"] == "complete");
    // A skipped.jsonl line that is not a skipped item is an error naming the file and line.
    const std::string s1_skipped = test::read_text(s1.path / "skipped.jsonl");
    test::write_text(s1.path / "skipped.jsonl", s1_skipped + R"({"task": "lookup", "item": 1})" + "\n");
    const std::string bad_line = "skipped.jsonl line " +
                                 std::to_string(std::count(s1_skipped.begin(), s1_skipped.end(), '\n') + 1) +
                                 " is not a skipped item";
    test::TempDir fresh("merge_bad_skipped");
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, fresh.path), doctest::Contains(bad_line.c_str()), FormatError);
    // A line must name an item of the folder's study and shard, once. Shard 1/2 runs the odd
    // numbers in study order ((task, seed) in definition order, then item): (swap, seed 1, item 1).
    const auto skipped_line = [&](const std::string& task, int item) {
        return nlohmann::json{{"task", task}, {"seed", 1}, {"item", item}}.dump() + "\n";
    };
    const std::string swap_name = swap_task().name;
    const std::vector<std::pair<std::string, std::string>> bad_skipped = {
        {skipped_line(swap_name, 0), "holds a skipped item of (" + swap_name + ", seed 1, item 0), which shard 0/2 runs, not "
                                     "this folder's shard 1/2"},
        {skipped_line("no_such_task", 1), "holds a skipped item of task \"no_such_task\", which the study does not run"},
        {skipped_line(swap_name, 7), "holds a skipped item of item 7 in a study of 6 items per task and seed"},
        {skipped_line(swap_name, 1) + skipped_line(swap_name, 1),
         "lists (" + swap_name + ", seed 1, item 1) as left out, which an earlier line or folder lists too"},
        // One line of an item the folder ran: the records of a left-out item contradict it.
        {skipped_line(swap_name, 1), "is of an item a skipped.jsonl lists as left out"},
    };
    for (const auto& [lines, message] : bad_skipped) {
        CAPTURE(lines);
        test::write_text(s1.path / "skipped.jsonl", s1_skipped + lines);
        CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, fresh.path), doctest::Contains(message.c_str()), FormatError);
    }
    CHECK(!fs::exists(fresh.path / "items.jsonl"));
    test::write_text(s1.path / "skipped.jsonl", s1_skipped);
    // The same shard twice, or a folder of another study, is an error.
    test::TempDir bad("badmerge");
    CHECK_THROWS_AS(merge_results({s0.path, s0.path}, bad.path), Error);
    o.shard = parse_shard("2/3");
    o.out = s2.path;
    o.items = 5;
    run(o);
    CHECK_THROWS_AS(merge_results({s0.path, s2.path}, bad.path), Error);
    CHECK_THROWS_AS(merge_results({bad.path}, merged.path), Error);
    CHECK_THROWS_AS(parse_shard("2/2"), Error);
    CHECK_THROWS_AS(parse_shard("1"), Error);
    CHECK_THROWS_AS(parse_shard("a/3"), Error);
}

TEST_CASE("channel study: resume after a kill (torn items.jsonl) == uninterrupted, never duplicates") {
    test::TempDir whole("resume_whole"), killed("resume_killed");
    StudyOptions o = small_study(whole.path);
    run(o);
    // A killed run: items.jsonl cut in the middle of a line, summaries not yet written.
    o.out = killed.path;
    run(o);
    const std::string items = test::read_text(killed.path / "items.jsonl");
    const std::size_t cut = items.size() * 3 / 5;
    REQUIRE(items[cut] != '\n');
    fs::resize_file(killed.path / "items.jsonl", cut);
    fs::remove(killed.path / "summary.csv");
    test::write_text(killed.path / "run.json",
                     test::as_killed(nlohmann::json::parse(test::read_text(killed.path / "run.json"))).dump(1));
    // Without --resume: an error, and the file is left alone.
    CHECK_THROWS_AS(run(o), Error);
    CHECK(fs::file_size(killed.path / "items.jsonl") == cut);
    o.resume = true;
    const StudyResult r = run(o);
    CHECK(r.resumed > 0);
    CHECK(r.resumed + r.written == r.records);
    CHECK(hylens::test::differing_results(whole.path, killed.path).empty());
    // Resuming a finished run adds nothing.
    const StudyResult again = run(o);
    CHECK(again.written == 0);
    CHECK(hylens::test::differing_results(whole.path, killed.path).empty());
    // Resuming with another study definition is an error.
    o.items = 7;
    CHECK_THROWS_AS(run(o), Error);
}

/// `dir`'s items.jsonl as a killed run left it (its first `keep` lines; run.json "running"),
/// the first line then changed by `edit`.
template <class Edit>
void killed_records_edited(const fs::path& dir, std::size_t keep, Edit edit) {
    const std::string all = test::read_text(dir / "items.jsonl");
    std::vector<nlohmann::json> lines;
    for (std::size_t b = 0; b < all.size() && lines.size() < keep; b = all.find('\n', b) + 1)
        lines.push_back(nlohmann::json::parse(all.substr(b, all.find('\n', b) - b)));
    REQUIRE(lines.size() == keep);
    edit(lines);
    std::string text;
    for (const auto& r : lines) text += json_line(r) + "\n";
    test::write_text(dir / "items.jsonl", text);
    test::write_text(dir / "run.json", test::as_killed(nlohmann::json::parse(test::read_text(dir / "run.json"))).dump(1));
}

TEST_CASE("channel study: resume and merge refuse records the study does not make, twice-held ones and edited files") {
    test::TempDir seed("edit_seed"), twice("edit_twice"), shard("edit_shard"), other("edit_other"), done("edit_done"),
        merged("edit_merged");
    StudyOptions o = small_study(seed.path);
    o.seeds = {1};
    o.items = 4;
    o.conditions = parse_conditions("FULL,KV_ONLY,KV_A+REC_B");
    const auto resume = [&](const fs::path& dir, const std::string& shard_text = "0/1") {
        StudyOptions r = o;
        r.out = dir;
        r.resume = true;
        r.shard = parse_shard(shard_text);
        return run(r);
    };
    // A record hand-edited to another seed.
    run(o);
    killed_records_edited(seed.path, 3, [](std::vector<nlohmann::json>& l) { l[0]["seed"] = 9; });
    CHECK_THROWS_WITH_AS(resume(seed.path), doctest::Contains(", seed 9, item 0, FULL), which this study does not make in shard 0/1"),
                         FormatError);
    // A line held twice.
    o.out = twice.path;
    run(o);
    killed_records_edited(twice.path, 3, [](std::vector<nlohmann::json>& l) { l.push_back(l[0]); });
    CHECK_THROWS_WITH_AS(resume(twice.path), doctest::Contains("twice"), FormatError);
    // Another shard's item (item 1 is shard 1/2's) in shard 0/2's folder: refused by --resume and by merge.
    o.out = shard.path;
    o.shard = parse_shard("0/2");
    run(o);
    o.out = other.path;
    o.shard = parse_shard("1/2");
    const std::size_t other_records = run(o).records;
    killed_records_edited(shard.path, 2, [](std::vector<nlohmann::json>& l) { l[0]["item"] = 1; });
    CHECK_THROWS_WITH_AS(merge_results({shard.path, other.path}, merged.path),
                         doctest::Contains("which shard 1/2 runs, not this folder's shard 0/2"), FormatError);
    CHECK_THROWS_WITH_AS(resume(shard.path, "0/2"), doctest::Contains("does not make in shard 0/2"), FormatError);
    // A finished folder whose items.jsonl changed after the run: refused by --resume and by merge.
    o.out = done.path;
    o.shard = parse_shard("0/2");
    const std::size_t done_records = run(o).records;
    const std::string items = test::read_text(done.path / "items.jsonl");
    test::write_text(done.path / "items.jsonl", items.substr(0, items.find('\n') + 1));
    CHECK_THROWS_WITH_AS(resume(done.path, "0/2"), doctest::Contains("is not the file its run wrote"), FormatError);
    CHECK_THROWS_WITH_AS(merge_results({done.path, other.path}, merged.path), doctest::Contains("is not the file its run wrote"),
                         FormatError);
    // The folders as their runs left them merge.
    test::write_text(done.path / "items.jsonl", items);
    CHECK(merge_results({done.path, other.path}, merged.path).records == done_records + other_records);
    // A record of an item skipped.jsonl lists as left out (item 0 of the swap task is shard 0/2's).
    const std::string skipped = test::read_text(done.path / "skipped.jsonl");
    test::write_text(done.path / "skipped.jsonl",
                     skipped + json_line({{"task", swap_task().name}, {"seed", 1}, {"item", 0}, {"reason", "edited"}}) + "\n");
    CHECK_THROWS_WITH_AS(merge_results({done.path, other.path}, merged.path),
                         doctest::Contains("is of an item a skipped.jsonl lists as left out"), FormatError);
    test::write_text(done.path / "skipped.jsonl", skipped);
    // A swap condition's record on a task without a B context (the plain task).
    const std::string all = test::read_text(done.path / "items.jsonl");
    killed_records_edited(done.path, static_cast<std::size_t>(std::count(all.begin(), all.end(), '\n')),
                          [](std::vector<nlohmann::json>& l) {
                              for (auto& r : l)
                                  if (!r.contains("alt_context")) {
                                      r["condition"] = "KV_A+REC_B";
                                      return;
                                  }
                              FAIL("no record of the plain task");
                          });
    CHECK_THROWS_WITH_AS(merge_results({done.path, other.path}, merged.path),
                         doctest::Contains("holds a record of the swap condition KV_A+REC_B on"), FormatError);
    // A score that is not a number in [0, 1]: averaged into the summaries (-5, 2, 1e308) or
    // dropped from them (a string, null, none), with exit 0. Refused by --resume and by merge.
    for (const nlohmann::json& bad : {nlohmann::json(-5), nlohmann::json(2.0), nlohmann::json(1e308), nlohmann::json("x"),
                                      nlohmann::json(nullptr), nlohmann::json::object()}) {
        INFO(bad.dump());
        const auto set_score = [&](std::vector<nlohmann::json>& l) {
            if (bad.is_object()) l[0].erase("score");  // {}: no score at all
            else l[0]["score"] = bad;
        };
        test::write_text(done.path / "items.jsonl", items);
        killed_records_edited(done.path, 2, set_score);
        CHECK_THROWS_WITH_AS(merge_results({done.path, other.path}, merged.path), doctest::Contains("is not a number in [0, 1]"),
                             FormatError);
        CHECK_THROWS_WITH_AS(resume(done.path, "0/2"), doctest::Contains("is not a number in [0, 1]"), FormatError);
    }
}

TEST_CASE("channel study: resuming with another model is an error (its records would mix with the first's)") {
    test::TempDir dir("resume_model");
    StudyOptions o = small_study(dir.path);
    o.seeds = {1};
    o.run_info = {{"model", "/models/qwen-a"}, {"model_type", "qwen3_5"}};
    run(o);
    o.resume = true;
    o.run_info["model"] = "/models/x/../qwen-a";  // the same folder, written another way
    CHECK(run(o).written == 0);
    o.run_info["model"] = "/models/qwen-b";
    CHECK_THROWS_WITH_AS(run(o),
                         doctest::Contains("differ in model \"/models/x/../qwen-a\" and \"/models/qwen-b\"; resume with the same inputs"),
                         Error);
    o.run_info = {{"model", "/models/qwen-a"}, {"model_type", "granitemoehybrid"}};
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("differ in model_type"), Error);
    // bf16-rounded activations change a bf16 model's records: run.json says which arithmetic
    // ran, and a resume or a merge with the other is refused (they mixed without a word).
    o.run_info = {{"model", "/models/qwen-a"}, {"model_type", "qwen3_5"}};
    CHECK(nlohmann::json::parse(test::read_text(dir.path / "run.json"))["bf16_activations"] == false);
    {
        const precision::RoundActivations on(true);
        CHECK_THROWS_WITH_AS(run(o), doctest::Contains("differ in bf16_activations false and true"), Error);
        test::TempDir other("resume_model_bf16");
        StudyOptions p = o;
        p.resume = false;
        p.out = other.path;
        p.shard = parse_shard("1/2");
        run(p);
        CHECK(nlohmann::json::parse(test::read_text(other.path / "run.json"))["bf16_activations"] == true);
        test::TempDir first("resume_model_first"), merged("resume_model_merged");
        p.out = first.path;
        p.shard = parse_shard("0/2");
        {
            const precision::RoundActivations off(false);
            run(p);
        }
        CHECK_THROWS_WITH_AS(merge_results({first.path, other.path}, merged.path),
                             doctest::Contains("were run on other inputs: bf16_activations false and true"), Error);
    }
    // The kernels' instruction-set level is recorded, not compared: a resume, or a merge, at
    // another level runs and records every level its records were computed at (its records
    // differ in the last bits from one run's, and run.json says so).
    namespace simd = hylens::simd;
    const std::string level = simd::level_name(simd::f32_level(simd::active()));
    const auto simd_of = [](const fs::path& d) { return nlohmann::json::parse(test::read_text(d / "run.json"))["simd"]; };
    CHECK(simd_of(dir.path) == level);
    {
        const simd::ForceLevel base(simd::Level::baseline);
        CHECK(run(o).written == 0);
    }
    CHECK(simd_of(dir.path) == level);  // a resume that computed nothing keeps the folder's level
    {
        test::TempDir low("resume_simd_low"), shard("resume_simd_shard"), merged("resume_simd_merged");
        StudyOptions p = o;
        p.resume = false;
        p.out = low.path;
        {
            const simd::ForceLevel base(simd::Level::baseline);
            run(p);
        }
        CHECK(simd_of(low.path) == "baseline");  // whatever the machine's best level
        const nlohmann::json both = level == "baseline" ? nlohmann::json("baseline") : nlohmann::json({level, "baseline"});
        const nlohmann::json both_sorted = both.is_array() && both[0] > both[1] ? nlohmann::json({both[1], both[0]}) : both;
        killed_records_edited(low.path, 2, [](std::vector<nlohmann::json>&) {});
        p.resume = true;
        CHECK(run(p).written > 0);  // at the default level
        CHECK(simd_of(low.path) == both_sorted);
        // A folder written before the key: the level of its records is not known, so a resume records none.
        nlohmann::json old = nlohmann::json::parse(test::read_text(low.path / "run.json"));
        old.erase("simd");
        test::write_text(low.path / "run.json", test::as_killed(old).dump(1));
        CHECK(run(p).written == 0);
        CHECK_FALSE(nlohmann::json::parse(test::read_text(low.path / "run.json")).contains("simd"));
        // Shards at two levels merge, recording both.
        StudyOptions q = o;
        q.resume = false;
        q.out = shard.path;
        q.shard = parse_shard("0/2");
        {
            const simd::ForceLevel base(simd::Level::baseline);
            run(q);
        }
        test::TempDir other_shard("resume_simd_shard1");
        q.out = other_shard.path;
        q.shard = parse_shard("1/2");
        run(q);
        merge_results({shard.path, other_shard.path}, merged.path);
        CHECK(simd_of(merged.path) == both_sorted);
    }
    CHECK(run(o).written == 0);
}

TEST_CASE("input fingerprints: two copies of a checkpoint agree, an edited one does not, merges compare contents") {
    const fs::path src = fs::path(HYLENS_GOLDEN_DIR) / "models" / "qwen3_5_dense";
    test::TempDir a("fp_a"), b("fp_b"), s0("fp_shard0"), s1("fp_shard1"), merged("fp_merged");
    for (const fs::path& d : {a.path, b.path}) {
        fs::create_directories(d / "m");
        for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, d / "m" / f);
    }
    const std::string fa = input_fingerprint(a.path / "m"), fb = input_fingerprint(b.path / "m");
    CHECK(fa.size() == 16);
    CHECK(fa == fb);  // the same bytes in another folder
    CHECK(input_fingerprint(a.path / "absent").empty());
    CHECK(input_fingerprint(src / "config.json") != input_fingerprint(src / "manifest.json"));
    // Shards run on the two copies (node-local scratch) merge: the contents agree.
    StudyOptions o = small_study(s0.path);
    o.seeds = {1};
    o.shard = parse_shard("0/2");
    o.run_info = {{"model", (a.path / "m").string()}, {"model_type", "qwen3_5"}};
    run(o);
    CHECK(nlohmann::json::parse(test::read_text(s0.path / "run.json"))["model_fingerprint"] == fa);
    o.out = s1.path;
    o.shard = parse_shard("1/2");
    o.run_info["model"] = (b.path / "m").string();
    run(o);
    CHECK(merge_results({s0.path, s1.path}, merged.path).incomplete == 0);
    // The checkpoint edited in place: the same path, other contents, refused on resume.
    {
        std::ofstream cfg(b.path / "m" / "config.json", std::ios::app);
        cfg << "\n";
    }
    CHECK(input_fingerprint(b.path / "m") != fa);
    o.resume = true;
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("(other contents: digests"), Error);
    // Weights changed in place with the same header (a checkpoint retrained at its shapes): the
    // header fingerprint cannot see it, the contents digest does, and the resume is refused.
    fs::copy_file(a.path / "m" / "config.json", b.path / "m" / "config.json", fs::copy_options::overwrite_existing);
    REQUIRE(input_contents(b.path / "m") == input_contents(a.path / "m"));
    {
        std::fstream w(b.path / "m" / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        w.seekp(-4, std::ios::end);  // the last float of the last tensor
        const float other = 12345.0f;
        w.write(reinterpret_cast<const char*>(&other), sizeof other);
    }
    CHECK(input_fingerprint(b.path / "m") == fa);
    CHECK(input_contents(b.path / "m") != input_contents(a.path / "m"));
    CHECK(input_contents(b.path / "m").size() == 16);
    CHECK(input_contents(a.path / "absent").empty());
    const nlohmann::json s1_run = nlohmann::json::parse(test::read_text(s1.path / "run.json"));
    CHECK(s1_run["model_contents"] == input_contents(a.path / "m"));  // written when b held a's bytes
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("(other contents: digests"), Error);
    // A folder written before the contents digest compares the header fingerprints.
    nlohmann::json old_run = s1_run;
    old_run.erase("model_contents");
    old_run.erase("tokenizer_contents");
    test::write_text(s1.path / "run.json", old_run.dump(1));
    CHECK_NOTHROW(run(o));
    // ... and does not take the digest of the bytes there now: the records were made from others.
    CHECK_FALSE(nlohmann::json::parse(test::read_text(s1.path / "run.json")).contains("model_contents"));
    // A checkpoint named by its file is its folder's digest (the loader reads its config.json).
    CHECK(input_contents(a.path / "m" / "model.safetensors") == input_contents(a.path / "m"));
    // A merge compares every pair of folders: an older first folder (no contents digest) does
    // not hide two later ones run on other weights (it compared each with the first only).
    test::TempDir t0("fp_t0"), t1("fp_t1"), t2("fp_t2"), tm("fp_tm");
    o.resume = false;
    o.shard = parse_shard("0/3");
    o.out = t0.path;
    o.run_info["model"] = (a.path / "m").string();
    run(o);
    nlohmann::json t0_run = nlohmann::json::parse(test::read_text(t0.path / "run.json"));
    t0_run.erase("model_contents");
    test::write_text(t0.path / "run.json", t0_run.dump(1));
    o.shard = parse_shard("1/3");
    o.out = t1.path;
    run(o);
    o.shard = parse_shard("2/3");
    o.out = t2.path;
    o.run_info["model"] = (b.path / "m").string();  // the weights changed in place
    run(o);
    CHECK_THROWS_WITH_AS(merge_results({t0.path, t1.path, t2.path}, tm.path),
                         doctest::Contains("were run on other inputs: model"), Error);
    // Merged with a folder that has none, the merge has no contents digest either (the first
    // folder's run.json, which the merge copies, has one here).
    CHECK(merge_results({t1.path, t0.path}, tm.path).incomplete == 0);
    CHECK_FALSE(nlohmann::json::parse(test::read_text(tm.path / "run.json")).contains("model_contents"));
}

TEST_CASE("channel study: a seed or a task listed twice is an error (their items were queued twice)") {
    test::TempDir dir("twice");
    StudyOptions o = small_study(dir.path);
    o.seeds = {1, 2, 1};
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("seed 1 is listed twice"), Error);
    o.seeds = {1};
    o.tasks.push_back(o.tasks.front());
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("is listed twice"), Error);
    CHECK(!std::filesystem::exists(dir.path / "items.jsonl"));
}

TEST_CASE("channel study: shards run on two models do not merge (the result named the first model only)") {
    test::TempDir s0("inputs_shard0"), s1("inputs_shard1"), merged("inputs_merged");
    StudyOptions o = small_study(s0.path);
    o.seeds = {1};
    o.run_info = {{"model", "/models/qwen-a"}, {"model_type", "qwen3_5"}};
    o.shard = parse_shard("0/2");
    run(o);
    o.out = s1.path;
    o.shard = parse_shard("1/2");
    o.run_info["model"] = "/models/qwen-b";
    run(o);
    CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, merged.path),
                         doctest::Contains("were run on other inputs: model \"/models/qwen-a\" and \"/models/qwen-b\""),
                         Error);
    CHECK(!std::filesystem::exists(merged.path / "items.jsonl"));
    // The same model written another way merges.
    test::TempDir s1a("inputs_shard1_same");
    o.out = s1a.path;
    o.run_info["model"] = "/models/x/../qwen-a";
    run(o);
    CHECK(merge_results({s0.path, s1a.path}, merged.path).incomplete == 0);
}

TEST_CASE("channel study: swap items whose A and B differ in token length are skipped and listed") {
    test::TempDir dir("skip");
    tasks::TaskSpec t = test::lookup_task(true);
    const auto make = t.make;
    t.make = [make](std::uint64_t seed, std::size_t index) {
        tasks::Item it = make(seed, index);
        if (index % 2 == 1) it.alt_context += "!";
        return it;
    };
    StudyOptions o = small_study(dir.path);
    o.tasks = {&t};
    o.seeds = {1};
    const StudyResult r = run(o);
    CHECK(r.skipped_items == 3);
    CHECK(r.records == 3 * 8);
    const auto skipped = read_jsonl(dir.path / "skipped.jsonl", false);
    REQUIRE(skipped.size() == 3);
    CHECK(skipped[0]["item"] == 1);
    CHECK(skipped[0]["reason"].get<std::string>().find("tokens") != std::string::npos);

    // Listed in (task, seed, item) order, the order of a merge's file, whatever the seeds' order.
    test::TempDir two("skip_two_seeds");
    o.out = two.path;
    o.seeds = {2, 1};
    CHECK(run(o).skipped_items == 6);
    const auto both = read_jsonl(two.path / "skipped.jsonl", false);
    REQUIRE(both.size() == 6);
    for (std::size_t i = 0; i < both.size(); ++i) {
        CHECK(both[i]["seed"] == (i < 3 ? 1 : 2));
        CHECK(both[i]["item"] == 2 * (i % 3) + 1);
    }

    // Split conditions only read no B context: every item runs, none is left out.
    test::TempDir split("skip_split_only");
    o.out = split.path;
    o.seeds = {1};
    o.conditions = parse_conditions("FULL,KV_ONLY,REC_ONLY,NONE");
    const StudyResult s = run(o);
    CHECK(s.skipped_items == 0);
    CHECK(s.records == 6 * 4);
    CHECK(read_jsonl(split.path / "skipped.jsonl", false).empty());
}

TEST_CASE("channel study: a parallel hybrid (Falcon-H1) runs every condition and sweep") {
    test::TempDir dir("falcon");
    const AnyModel falcon = load(fs::path(HYLENS_GOLDEN_DIR) / "models" / "falcon_h1");
    StudyOptions o = small_study(dir.path);
    o.tasks = {&swap_task()};
    o.items = 2;
    o.seeds = {3};
    o.layers = parse_layer_spec("single,cumulative");
    const StudyResult r = falcon.visit([&](const auto& m) { return run_channel_study(m, test::tiny_tokenizer(), ChatFamily::falcon_h1, o); });
    // 4 layers with both channels: the 5 editing conditions x (4 single + 4 cumulative, where
    // cumulative [0, 0] = single {0}) + the 8 whole-model ones.
    CHECK(r.records == 2 * (8 + 5 * 7));
}

TEST_CASE("channel study: a --layers set left out for a condition is named in run.json") {
    test::TempDir dir("left_out");
    StudyOptions o = small_study(dir.path);
    o.tasks = {&plain_task()};
    o.conditions = parse_conditions("KV_ONLY,REC_ONLY");
    o.layers = parse_layer_spec("3");  // the golden Qwen3.5 model: attention at 3, recurrent 0-2
    o.items = 1;
    o.seeds = {1};
    CHECK(run(o).records == 3);
    const nlohmann::json j = nlohmann::json::parse(test::read_text(dir.path / "run.json"));
    CHECK(j["study"]["conditions"] == nlohmann::json{"KV_ONLY", "REC_ONLY", "REC_ONLY@3"});
    CHECK(j["layers_left_out"] == nlohmann::json{"KV_ONLY@3 left out: no layer of 3 holds a recurrent state, which KV_ONLY edits"});
}

TEST_CASE("channel study: a tokenizer without the chat format's special tokens is refused before the folder is made") {
    // The test tokenizer without Granite's role tokens: the renderer spelled "<|start_of_role|>"
    // as 17 byte tokens, a prompt the model was never trained on.
    const Tokenizer without = Tokenizer::from_string(test::tokenizer_text_without(
        test::tokenizer_text_without(test::tiny_tokenizer_json(), "<|start_of_role|>"), "<|end_of_role|>"));
    REQUIRE(!without.token_to_id("<|start_of_role|>").has_value());
    test::TempDir dir("no_specials");
    const fs::path out = dir.path / "run";
    StudyOptions o = small_study(out);
    o.seeds = {1};
    const auto granite = [&](const Tokenizer& tok) {
        return qwen_model().visit([&](const auto& m) { return run_channel_study(m, tok, ChatFamily::granite4, o); });
    };
    CHECK_THROWS_WITH_AS(granite(without), doctest::Contains("the tokenizer has no token '<|start_of_role|>'"), FormatError);
    CHECK(!fs::exists(out));
    // the same tokenizer serves the Qwen format, whose specials it has, and the full one Granite's
    CHECK(qwen_model().visit([&](const auto& m) { return run_channel_study(m, without, ChatFamily::qwen35, o); }).records > 0);
    o.out = dir.path / "granite";
    CHECK(granite(test::tiny_tokenizer()).records > 0);
}

TEST_CASE("channel study: the shipped byte-level tokenizer (docs' demo study) is the test tokenizer") {
    const fs::path shipped = fs::path(HYLENS_GOLDEN_DIR).parent_path() / "experiments" / "byte_tokenizer.json";
    CHECK(nlohmann::json::parse(test::read_text(shipped)) == nlohmann::json::parse(test::tiny_tokenizer_json()));
    CHECK(Tokenizer::from_file(shipped.string()).vocab_size() == 265);
}

TEST_CASE("channel study: a folder another run is writing is refused, and free again once that run ends") {
    test::TempDir dir("locked"), s0("locked_shard0"), s1("locked_shard1");
    StudyOptions o = small_study(dir.path);
    o.tasks = {&plain_task()};
    o.seeds = {1};
    std::size_t shard_records = 0;
    {
        const FolderLock other(dir.path, "another run");  // a second flock on the file, as another process's
        CHECK_THROWS_WITH_AS(run(o), doctest::Contains("is in use: another study or merge is writing there now"), Error);
        CHECK(!fs::exists(dir.path / "items.jsonl"));
        o.shard = parse_shard("0/2");
        o.out = s0.path;
        shard_records += run(o).records;
        o.shard = parse_shard("1/2");
        o.out = s1.path;
        shard_records += run(o).records;
        CHECK_THROWS_WITH_AS(merge_results({s0.path, s1.path}, dir.path), doctest::Contains("is in use"), Error);
    }
    CHECK(shard_records == 6 * 4);  // the plain task runs the four split conditions
    CHECK(merge_results({s0.path, s1.path}, dir.path).records == shard_records);
    o.shard = {};
    o.out = dir.path;
    o.resume = false;
    CHECK_THROWS_WITH_AS(run(o), doctest::Contains("already exists"), Error);  // the merge's records, not a lock
}
