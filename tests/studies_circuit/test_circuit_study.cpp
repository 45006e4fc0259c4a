// The circuit study (experiments/circuit_study.hpp) end to end on the trained organisms of
// models/ (their 1024-token tokenizers keep chat8 pairs; the golden models' tokenizers drop
// them all). The organisms are retrained from time to time, so nothing here depends on what an
// organism has learned: the checks are the structure of the result files, the identities
// between them, determinism, shards and resume, and agreement with interp/circuit.hpp's
// identify_circuit run on the same pairs. Each test copies the model folder first, so a
// retraining in the middle of a test cannot change its weights.

#include <doctest/doctest.h>

#include <hylens/experiments/circuit_study.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>
#include <hylens/tasks/lookup/fit_corpus.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>  // WEXITSTATUS

#include "fixtures.hpp"
#include "support/damaged_model.hpp"
#include "support/killed_run.hpp"
#include "support/figure_scripts.hpp"

namespace {

namespace fs = std::filesystem;
namespace ex = hylens::experiments;
using hylens::test::studies::read_text;
using hylens::test::studies::TempDir;
using hylens::test::studies::write_text;
using hylens::test::studies::organism_copy;
using hylens::test::studies::records_of;


struct Organism {
    hylens::AnyModel model;
    hylens::Tokenizer tok;
    hylens::ChatFamily family;
    explicit Organism(const fs::path& dir)
        : model(hylens::load(dir)), tok(hylens::Tokenizer::from_file((dir / "tokenizer.json").string())),
          family(ex::chat_family(model.config().model_type)) {}
};

ex::CircuitStudyOptions small_options(const fs::path& out, std::size_t group_size) {
    ex::CircuitStudyOptions o;
    o.variant = "chat8";
    o.per_config = 3;  // 4 configurations: 12 draws
    o.seeds = {5};
    o.circuit.group_size = group_size;
    o.circuit.top = 3;
    o.out = out;
    o.progress = false;
    o.bootstrap.resamples = 200;
    return o;
}

ex::CircuitStudyResult run_study(const Organism& m, const ex::CircuitStudyOptions& o) {
    return m.model.visit([&](const auto& typed) { return ex::run_circuit_study(typed, m.tok, m.family, o); });
}

nlohmann::json json_of(const fs::path& p) { return nlohmann::json::parse(read_text(p)); }

/// The circuit options a study definition records (top, critical).
hylens::CircuitOptions copt_of(const nlohmann::json& def) {
    hylens::CircuitOptions o;
    o.top = def["top"].get<std::size_t>();
    o.critical = def["critical"].get<double>();
    return o;
}

/// Options resuming `dir`, made a folder with `run` as its run.json (status running) and no
/// records yet: what a folder an older build started looks like.
ex::CircuitStudyOptions unfinished_folder(const fs::path& dir, nlohmann::json run) {
    fs::create_directories(dir);
    write_text(dir / "run.json", hylens::test::as_killed(std::move(run)).dump(1));
    write_text(dir / "items.jsonl", "");
    ex::CircuitStudyOptions o = small_options(dir, 3);
    o.resume = true;
    return o;
}

}  // namespace

TEST_CASE("circuit study on qwen35-tiny: records, summaries and circuit.json agree with identify_circuit") {
    TempDir d("circuit_qwen");
    const Organism m(organism_copy("qwen35-tiny", d.path));
    const ex::CircuitStudyOptions o = small_options(d.path / "run", 3);
    const ex::CircuitStudyResult r = run_study(m, o);
    REQUIRE(r.items >= 1);
    CHECK(r.resumed == 0);
    CHECK(r.written == r.records);

    const nlohmann::json run = json_of(o.out / "run.json");
    CHECK(run["kind"] == "circuit");
    CHECK(run["status"] == "complete");
    CHECK(run["records"] == r.records);
    CHECK(run["pairs"]["5"]["kept"] == r.items);  // per seed
    CHECK(run["study"]["value_heads"] == nlohmann::json{{"layer", 0}, {"heads", 4}});
    {  // a folder written before B5 (its definition without value_heads) is another study
        nlohmann::json before = run;
        before["study"].erase("value_heads");
        CHECK_THROWS_WITH_AS(run_study(m, unfinished_folder(d.path / "old", before)), doctest::Contains("describes another study"),
                             hylens::Error);
        CHECK_NOTHROW(run_study(m, unfinished_folder(d.path / "old", run)));  // the same folder with B5 resumes
    }
    const ex::CircuitStructure st = ex::circuit_structure_from_json(run["study"]["structure"]);
    // Qwen3.5 layout organism: layers 0-2 GatedDeltaNet, layer 3 softmax attention.
    REQUIRE(st.groups.size() == 1);
    CHECK(st.groups[0].layers == std::vector<hylens::LayerIndex>{0, 1, 2});
    CHECK(st.groups[0].softmax_layer == 3);
    CHECK(st.attention_layers == std::vector<hylens::LayerIndex>{3});

    // One record per (item, condition): baseline, G0, L0-L2, 4 heads of layer 3, the 4 value
    // heads of DeltaNet layer 0 (B5), qk:L3G0.
    const std::vector<nlohmann::json> recs = records_of(o.out);
    CHECK(recs.size() == r.items * (1 + 1 + 3 + 4 + 4 + 1));
    std::set<std::string> conditions;
    std::set<std::size_t> items;
    for (const auto& rec : recs) {
        conditions.insert(rec["condition"].get<std::string>());
        items.insert(rec["item"].get<std::size_t>());
        CHECK(rec["task"] == "chat8");
        CHECK(rec["seed"] == 5);
        if (rec.contains("gap")) CHECK(rec["gap"].get<double>() == rec["d_clean"].get<double>() - rec["d_corrupt"].get<double>());
    }
    CHECK(items.size() == r.items);
    CHECK(conditions == std::set<std::string>{"baseline", "group:G0", "layer:L0", "layer:L1", "layer:L2", "head:L3H0",
                                              "head:L3H1", "head:L3H2", "head:L3H3", "vhead:L0H0", "vhead:L0H1",
                                              "vhead:L0H2", "vhead:L0H3", "qk:L3G0"});
    // What a merge takes by the definition's names (no model): each of these, and no other.
    const auto known = ex::circuit_conditions::known(run["study"]);
    for (const std::string& c : conditions) CHECK_MESSAGE(known(c), c);
    CHECK(known("head:L3H17"));  // a merge cannot know the heads' count
    for (const char* c : {"BOGUS", "head:L0H0", "head:L3H01", "head:L3H", "head:L3H1x", "layer:L3", "group:G1", "qk:L3G1",
                          "qk:L2G0", "vhead:L0H4", "vhead:L1H0", "FULL"})
        CHECK_FALSE_MESSAGE(known(c), c);
    CHECK_THROWS_AS(ex::circuit_conditions::known(nlohmann::json::object()), hylens::FormatError);  // not a circuit study's

    // The circuit file is what circuit_from_records gives on items.jsonl.
    const nlohmann::json circuit = json_of(o.out / "circuit.json");
    hylens::CircuitOptions copt;
    copt.top = 3;
    CHECK(circuit == ex::circuit_file(recs, st, copt));
    {  // Read back beside its run.json only while that run is complete (not a partial merge's, not a killed run's).
        CHECK(hylens::read_circuit_file(o.out / "circuit.json").encode == hylens::circuit_from_json(circuit).encode);
        const fs::path partial = d.path / "partial";
        fs::create_directories(partial);
        fs::copy_file(o.out / "circuit.json", partial / "circuit.json");
        for (const char* status : {"incomplete", "merging", "running"}) {
            nlohmann::json other = run;
            other["status"] = status;
            write_text(partial / "run.json", other.dump(1));
            CHECK_THROWS_WITH_AS(hylens::read_circuit_file(partial / "circuit.json"),
                                 doctest::Contains(("run.json status is '" + std::string(status) + "', not 'complete'").c_str()),
                                 hylens::FormatError);
        }
        nlohmann::json shard = run;  // a finished shard's: found on its share of the items
        shard["study"]["shard"] = "1/3";
        write_text(partial / "run.json", shard.dump(1));
        CHECK_THROWS_WITH_AS(hylens::read_circuit_file(partial / "circuit.json"), doctest::Contains("comes from shard 1/3"),
                             hylens::FormatError);
        fs::remove(partial / "run.json");  // the file copied out of its folder is taken as it is
        CHECK(hylens::read_circuit_file(partial / "circuit.json").encode == hylens::circuit_from_json(circuit).encode);
    }
    CHECK(circuit["encode"]["layers"] == std::vector<int>{0, 1, 2});
    CHECK(circuit["reader"]["layer"] == 3);
    CHECK(circuit["reader"]["head"].get<std::size_t>() < 4);
    CHECK(circuit["reader_candidates"].size() == 4);
    CHECK(circuit["items"] == r.items);
    const hylens::CircuitRoles roles = hylens::circuit_from_json(circuit);
    CHECK(roles.reader_layer == 3);

    // identify_circuit on the same pairs: the same scans, the same roles.
    namespace lk = hylens::tasks::lookup;
    const auto set = lk::clean_corrupt_pairs(m.tok, hylens::chat_format(m.family), lk::parse_variant("chat8"),
                                             lk::in_family_vocabulary(m.tok), 3, 5);
    REQUIRE(set.items.size() == r.items);
    // Every record names the spans the attention split summed over: entry `target` of the clean
    // prompt holds the clean answer's token, of the corrupted prompt the corrupted answer's.
    for (const auto& rec : recs) {
        const auto item = std::find_if(set.items.begin(), set.items.end(),
                                       [&](const auto& it) { return it.index == rec["item"].get<std::size_t>(); });
        REQUIRE(item != set.items.end());
        CHECK(rec["qstart"] == item->clean.qstart);
        REQUIRE(rec["entries"].size() == 8);
        std::size_t prev_end = 0;
        for (const auto& e : rec["entries"]) {
            CHECK(e[0].get<std::size_t>() >= prev_end);
            CHECK(e[0].get<std::size_t>() < e[1].get<std::size_t>());
            prev_end = e[1].get<std::size_t>();
        }
        CHECK(prev_end <= rec["qstart"].get<std::size_t>());
        const auto& t = rec["entries"][rec["target"].get<std::size_t>()];
        const auto holds = [&](const std::vector<std::int64_t>& ids, std::int64_t id) {
            return std::find(ids.begin() + t[0].get<long>(), ids.begin() + t[1].get<long>(), id) != ids.begin() + t[1].get<long>();
        };
        CHECK(holds(item->clean.ids, rec["answer"].get<std::int64_t>()));
        CHECK(holds(item->corrupt_ids, rec["corrupt_answer"].get<std::int64_t>()));
    }
    std::vector<hylens::PairItem> pairs;
    for (const auto& it : set.items) pairs.push_back(hylens::pair_item(it));
    copt.group_size = 3;
    const hylens::Circuit ref = m.model.visit([&](const auto& typed) { return hylens::identify_circuit(typed, pairs, copt); });
    // B5 against the library's head_scan on the same pairs, and the point-of-failure rule.
    const std::vector<hylens::PairScores> scan =
        m.model.visit([&](const auto& typed) { return hylens::head_scan(typed, pairs, 0, 4); });
    REQUIRE(circuit["value_heads"]["layer"] == 0);
    REQUIRE(circuit["value_heads"]["heads"].size() == 4);
    for (std::size_t h = 0; h < 4; ++h) {
        const nlohmann::json& vh = circuit["value_heads"]["heads"][h];
        CHECK(vh["head"] == h);
        CHECK(vh["removed"]["acc"].get<double>() == scan[h].acc);
        CHECK(vh["removed"]["gap"].get<double>() == doctest::Approx(scan[h].gap.mean).epsilon(1e-12));
        CHECK(vh["point_of_failure"] == (ref.baseline.gap.mean > 0 && scan[h].gap.mean < 0.6 * ref.baseline.gap.mean));
    }
    const nlohmann::json refj = hylens::to_json(ref);
    // D and acc are the same numbers read through items.jsonl (JSON keeps doubles exactly).
    CHECK(circuit["baseline"] == refj["baseline"]);
    CHECK(circuit["groups"] == refj["groups"]);
    CHECK(circuit["layers"] == refj["layers"]);
    CHECK(circuit["critical_layers"] == refj["critical_layers"]);
    CHECK(circuit["encode"] == refj["encode"]);
    CHECK(circuit["address"] == refj["address"]);
    CHECK(circuit["reader"]["layer"] == refj["reader"]["layer"]);
    CHECK(circuit["reader"]["head"] == refj["reader"]["head"]);
    CHECK(circuit["reader"]["gap_removed"] == refj["reader"]["gap_removed"]);
    // Every head's gap_removed is the mean gap of its head: records, below the top 3 too (the
    // fourth was a made-up 0.0, which read as "removing this head destroys the lookup").
    REQUIRE(circuit["reader_candidates"].size() == 4);
    for (const auto& h : circuit["reader_candidates"]) {
        const std::string cond = "head:L" + std::to_string(h["layer"].get<int>()) + "H" + std::to_string(h["head"].get<int>());
        double sum = 0.0;
        std::size_t n = 0;
        for (const auto& rec : recs)
            if (rec["condition"] == cond) {
                sum += rec["gap"].get<double>();
                ++n;
            }
        REQUIRE(n == r.items);
        CHECK(h["gap_removed"].get<double>() == doctest::Approx(sum / static_cast<double>(n)).epsilon(1e-12));
    }
    CHECK(circuit["reader"]["target_mass"].get<double>() ==
          doctest::Approx(refj["reader"]["target_mass"].get<double>()).epsilon(1e-12));
    for (int q = 0; q < 2; ++q)
        for (const char* cell : {"intact", "k_ablated", "q_ablated", "both_ablated"})
            for (const char* f : {"selectivity", "margin", "top1"})
                CHECK(circuit["selectivity"][0]["cells"][cell][f].get<double>() ==
                      doctest::Approx(refj["selectivity"][0]["cells"][cell][f].get<double>()).epsilon(1e-12));

    // summary.csv: a row per pair condition, the point values the plain summaries.
    const std::string csv = read_text(o.out / "summary.csv");
    CHECK(csv.rfind("condition,block,n,gap,gap_lo,gap_hi,acc,acc_lo,acc_hi,cacc,cacc_lo,cacc_hi,seeds,gap_sd_seeds,"
                    "acc_sd_seeds,cacc_sd_seeds\n", 0) == 0);
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 1 + 1 + 3 + 4 + 4);
    CHECK(csv.find("\nvhead:L0H3,B5,") != std::string::npos);
    CHECK(csv.find(",1,,,\nlayer:L0,B3,") != std::string::npos);  // one seed: no sd
    const nlohmann::json summary = json_of(o.out / "summary.json");
    REQUIRE(summary["conditions"].size() == 13);
    CHECK(summary["value_heads"] == circuit["value_heads"]);
    const auto& base = summary["conditions"][0];
    CHECK(base["condition"] == "baseline");
    CHECK(base["gap"]["value"].get<double>() == doctest::Approx(ref.baseline.gap.mean).epsilon(1e-12));
    CHECK(base["acc"]["value"].get<double>() == doctest::Approx(ref.baseline.acc).epsilon(1e-12));
    CHECK(base["gap"]["lo"].get<double>() <= base["gap"]["value"].get<double>());
    CHECK(base["gap"]["hi"].get<double>() >= base["gap"]["value"].get<double>());
    CHECK(summary["roles"]["reader"] == circuit["reader"]);
    // One seed: its roles are the pooled roles.
    CHECK(circuit["seeds"] == std::vector<int>{5});
    REQUIRE(circuit["per_seed"].size() == 1);
    CHECK(circuit["per_seed"][0]["reader"] == circuit["reader"]);
    CHECK(circuit["per_seed"][0]["items"] == r.items);
    CHECK(circuit["agreement"] == nlohmann::json{{"seeds", 1}, {"reader", 1}, {"address", nullptr}, {"critical_layers", 1},
                                                  {"value_head_failures", 1}, {"without_roles", nlohmann::json::array()}});
    CHECK(base["seeds"] == std::vector<int>{5});
    CHECK(base["gap"]["per_seed"][0].get<double>() == doctest::Approx(ref.baseline.gap.mean).epsilon(1e-12));
    CHECK(base["gap"]["sd_seeds"].is_null());

    // Deterministic: a second run writes the same records and files.
    const ex::CircuitStudyOptions o2 = small_options(d.path / "again", 3);
    run_study(m, o2);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(o.out / f) == read_text(o2.out / f), f);
}

TEST_CASE("circuit study: shards merged == one run, a resumed run after a torn line == one run") {
    TempDir d("circuit_shards");
    const Organism m(organism_copy("qwen35-tiny", d.path));
    const ex::CircuitStudyOptions whole = small_options(d.path / "whole", 3);
    run_study(m, whole);

    std::vector<fs::path> dirs;
    for (std::size_t i = 0; i < 3; ++i) {
        ex::CircuitStudyOptions o = small_options(d.path / ("s" + std::to_string(i)), 3);
        o.shard = {i, 3};
        run_study(m, o);
        dirs.push_back(o.out);
    }
    const fs::path merged = d.path / "merged";
    const nlohmann::json def = json_of(whole.out / "run.json")["study"];
    const ex::MergeResult mr = ex::merge_study_folders(
        dirs, merged, "circuit",
        [&](const fs::path& out, const std::vector<nlohmann::json>& r) { ex::write_circuit_summaries(out, r, def, whole.bootstrap); });
    CHECK(mr.folders == 3);
    CHECK(mr.incomplete == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(merged / f) == read_text(whole.out / f), f);
    CHECK(json_of(merged / "run.json")["study"] == def);

    // Killed in the middle: items.jsonl cut inside a line; --resume completes it.
    const fs::path cut = d.path / "cut";
    fs::create_directories(cut);
    write_text(cut / "run.json", hylens::test::as_killed(json_of(whole.out / "run.json")).dump(1));
    const std::string all = read_text(whole.out / "items.jsonl");
    const std::size_t at = all.find('\n', all.size() / 2) + 10;
    write_text(cut / "items.jsonl", all.substr(0, at));
    REQUIRE(all[at - 1] != '\n');
    ex::CircuitStudyOptions o = small_options(cut, 3);
    CHECK_THROWS_AS(run_study(m, o), hylens::Error);  // not without --resume
    o.resume = true;
    const ex::CircuitStudyResult r = run_study(m, o);
    CHECK(r.resumed >= 1);
    CHECK(r.written >= 1);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(cut / f) == read_text(whole.out / f), f);

    // Another definition cannot resume this folder.
    ex::CircuitStudyOptions other = small_options(cut, 3);
    other.resume = true;
    other.seeds = {6};
    CHECK_THROWS_WITH_AS(run_study(m, other), doctest::Contains("describes another study"), hylens::Error);
}

TEST_CASE("circuit study over several seeds: each seed's records and roles are its run alone, the summaries pool them") {
    TempDir d("circuit_seeds");
    const Organism m(organism_copy("qwen35-tiny", d.path));
    ex::CircuitStudyOptions both = small_options(d.path / "both", 3);
    both.seeds = {7, 5};  // run in this order; records and summaries in seed order
    const ex::CircuitStudyResult r = run_study(m, both);
    std::vector<ex::CircuitStudyOptions> alone;
    std::size_t items = 0;
    for (const std::uint64_t seed : {std::uint64_t{5}, std::uint64_t{7}}) {
        alone.push_back(small_options(d.path / ("seed" + std::to_string(seed)), 3));
        alone.back().seeds = {seed};
        items += run_study(m, alone.back()).items;
    }
    CHECK(r.items == items);
    // The records: the two runs' records, seed 5 first (items.jsonl is sorted by seed).
    CHECK(read_text(both.out / "items.jsonl") == read_text(alone[0].out / "items.jsonl") + read_text(alone[1].out / "items.jsonl"));
    const nlohmann::json run = json_of(both.out / "run.json");
    CHECK(run["study"]["seeds"] == std::vector<int>{7, 5});
    CHECK(run["pairs"]["5"] == json_of(alone[0].out / "run.json")["pairs"]["5"]);
    CHECK(run["pairs"]["7"] == json_of(alone[1].out / "run.json")["pairs"]["7"]);

    // circuit.json: each seed's roles are those of its run alone; the agreement counts them.
    const nlohmann::json circuit = json_of(both.out / "circuit.json");
    const nlohmann::json c5 = json_of(alone[0].out / "circuit.json"), c7 = json_of(alone[1].out / "circuit.json");
    CHECK(circuit["seeds"] == std::vector<int>{5, 7});
    REQUIRE(circuit["per_seed"].size() == 2);
    // A circuit file's value heads that are points of failure, read from its value_heads.
    const auto failing = [](const nlohmann::json& c) {
        std::vector<std::size_t> out;
        for (const auto& h : c["value_heads"]["heads"])
            if (h["point_of_failure"].get<bool>()) out.push_back(h["head"].get<std::size_t>());
        return out;
    };
    for (std::size_t i = 0; i < 2; ++i) {  // each seed's roles: the top-level roles of its run alone
        const nlohmann::json &got = circuit["per_seed"][i], &want = i == 0 ? c5 : c7;
        CHECK(got["seed"] == (i == 0 ? 5 : 7));
        for (const char* role : {"encode", "address", "reader", "critical_layers", "items"}) CHECK_MESSAGE(got[role] == want[role], role);
        CHECK(got["value_head_failures"].get<std::vector<std::size_t>>() == failing(want));
    }
    const auto agree = [&](const auto& same) {
        return static_cast<int>(same(c5, circuit)) + static_cast<int>(same(c7, circuit));
    };
    const nlohmann::json& a = circuit["agreement"];
    CHECK(a["seeds"] == 2);
    CHECK(a["reader"] == agree([](const nlohmann::json& x, const nlohmann::json& y) {
              return x["reader"]["layer"] == y["reader"]["layer"] && x["reader"]["head"] == y["reader"]["head"];
          }));
    REQUIRE(circuit["selectivity"].size() == 1);  // one address candidate (G0): nothing to agree on
    CHECK(a["address"].is_null());
    CHECK(a["critical_layers"] == agree([](const nlohmann::json& x, const nlohmann::json& y) {
              return x["critical_layers"] == y["critical_layers"];
          }));
    CHECK(a["value_head_failures"] == agree([&](const nlohmann::json& x, const nlohmann::json& y) { return failing(x) == failing(y); }));
    // The pooled baseline is the mean over every (seed, item) record.
    const std::vector<nlohmann::json> recs = records_of(both.out);
    double gap = 0.0;
    std::size_t n = 0;
    for (const auto& rec : recs)
        if (rec["condition"] == "baseline") {
            gap += rec["gap"].get<double>();
            ++n;
        }
    CHECK(n == r.items);
    CHECK(circuit["items"] == n);
    CHECK(circuit["baseline"]["gap"].get<double>() == doctest::Approx(gap / static_cast<double>(n)).epsilon(1e-12));

    // summary.json: every row pools the seeds and gives each seed's value (the run alone's) and their sd.
    const nlohmann::json summary = json_of(both.out / "summary.json"), s5 = json_of(alone[0].out / "summary.json"),
                         s7 = json_of(alone[1].out / "summary.json");
    CHECK(summary["per_seed"] == circuit["per_seed"]);
    CHECK(summary["agreement"] == circuit["agreement"]);
    std::size_t checked = 0;
    for (const auto& row : summary["conditions"]) {
        const auto alone_row = [&](const nlohmann::json& s) -> const nlohmann::json* {
            for (const auto& x : s["conditions"])
                if (x["condition"] == row["condition"]) return &x;
            return nullptr;
        };
        const nlohmann::json *r5 = alone_row(s5), *r7 = alone_row(s7);
        if (!r5 || !r7) continue;  // a B4 head ranked in the top of one run and not the other
        ++checked;
        CAPTURE(row["condition"].get<std::string>());
        CHECK(row["seeds"] == std::vector<int>{5, 7});
        CHECK(row["n"] == (*r5)["n"].get<std::size_t>() + (*r7)["n"].get<std::size_t>());
        for (const char* metric : {"gap", "acc", "cacc"}) {
            const double x5 = (*r5)[metric]["value"].get<double>(), x7 = (*r7)[metric]["value"].get<double>();
            const nlohmann::json& cell = row[metric];
            REQUIRE(cell["per_seed"].size() == 2);
            CHECK(cell["per_seed"][0].get<double>() == doctest::Approx(x5).epsilon(1e-12));
            CHECK(cell["per_seed"][1].get<double>() == doctest::Approx(x7).epsilon(1e-12));
            CHECK(cell["sd_seeds"].get<double>() == doctest::Approx(std::abs(x5 - x7) / std::sqrt(2.0)).epsilon(1e-9));
            // The pooled mean weighs each seed by its items.
            const double n5 = (*r5)["n"].get<double>(), n7 = (*r7)["n"].get<double>();
            CHECK(cell["value"].get<double>() == doctest::Approx((n5 * x5 + n7 * x7) / (n5 + n7)).epsilon(1e-12));
            CHECK(cell["lo"].get<double>() <= cell["value"].get<double>());
            CHECK(cell["hi"].get<double>() >= cell["value"].get<double>());
        }
    }
    CHECK(checked >= 1 + 1 + 3 + 4);  // B1, B2, B3, B5 at least
    const std::string csv = read_text(both.out / "summary.csv");
    const std::size_t at = csv.find("\nbaseline,B1,");
    REQUIRE(at != std::string::npos);
    const std::string line = csv.substr(at + 1, csv.find('\n', at + 1) - at - 1);
    CHECK(std::count(line.begin(), line.end(), ',') == 15);
    CHECK(line.find("," + std::to_string(r.items) + ",") != std::string::npos);
    CHECK(line.find(",2," + ex::csv_number(summary["conditions"][0]["gap"]["sd_seeds"].get<double>()) + ",") != std::string::npos);

    // Shards take the items of every seed by draw index; merged they are the whole run.
    std::vector<fs::path> dirs;
    for (std::size_t i = 0; i < 2; ++i) {
        ex::CircuitStudyOptions o = both;
        o.out = d.path / ("s" + std::to_string(i));
        o.shard = {i, 2};
        run_study(m, o);
        dirs.push_back(o.out);
    }
    const nlohmann::json def = run["study"];
    ex::merge_study_folders(dirs, d.path / "merged", "circuit", [&](const fs::path& out, const std::vector<nlohmann::json>& rs) {
        ex::write_circuit_summaries(out, rs, def, both.bootstrap);
    });
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(d.path / "merged" / f) == read_text(both.out / f), f);

    // Two address candidates, so that the seeds can disagree on the address: the structure split
    // into G0 = [0, 1] and G1 = [2] before layer 3, G1's records copies of G0's whose Q-ablated
    // cell makes G1 the address of seed 7 (top-1 0, selectivity -100 at every head) and not of
    // seed 5 (top-1 1, selectivity +100). Whichever the pooled address is, one seed gives it.
    {
        nlohmann::json st2 = def["structure"];
        st2["groups"] = nlohmann::json::array({{{"layers", {0, 1}}, {"softmax_layer", 3}}, {{"layers", {2}}, {"softmax_layer", 3}}});
        std::vector<nlohmann::json> two = recs;
        for (const auto& rec : recs) {
            if (rec["condition"] == "group:G0") {
                two.push_back(rec);
                two.back()["condition"] = "group:G1";
            } else if (rec["condition"] == "qk:L3G0") {
                nlohmann::json c = rec;
                c["condition"] = "qk:L3G1";
                c["group"] = 1;
                const bool seven = rec["seed"] == 7;
                nlohmann::json& cell = c["cells"]["q_ablated"];
                for (std::size_t h = 0; h < cell["top1"].size(); ++h) {
                    cell["top1"][h] = !seven;
                    cell["selectivity"][h] = seven ? -100.0 : 100.0;
                }
                two.push_back(std::move(c));
            }
        }
        const nlohmann::json c = ex::circuit_file(two, ex::circuit_structure_from_json(st2), copt_of(def));
        REQUIRE(c["selectivity"].size() == 2);
        CHECK(c["per_seed"][0]["address"]["group"] == 0);
        CHECK(c["per_seed"][1]["address"]["group"] == 1);
        CHECK(c["agreement"]["address"] == 1);
    }

    // An unfinished folder merged: a seed without some condition's records has an error in place
    // of its roles and is left out of the agreement; the pooled roles are those of the items with
    // every condition (here seed 5's alone).
    const ex::CircuitStructure st = ex::circuit_structure_from_json(def["structure"]);
    CHECK(circuit["items_left_out"] == 0);
    CHECK(summary["items_left_out"] == 0);
    {
        std::vector<nlohmann::json> part, seed5;  // every item of seed 7 without its head:L3H1 record
        for (const auto& rec : recs) {
            if (rec["seed"] != 7 || rec["condition"] != "head:L3H1") part.push_back(rec);
            if (rec["seed"] == 5) seed5.push_back(rec);
        }
        REQUIRE(part.size() < recs.size());
        const nlohmann::json c = ex::circuit_file(part, st, copt_of(def));
        CHECK(c["per_seed"][0] == circuit["per_seed"][0]);
        CHECK(c["per_seed"][1]["seed"] == 7);
        CHECK(c["per_seed"][1]["error"] ==
              "[circuit] no item of seed 7 has a record of every condition (no record of condition 'head:L3H1')");
        CHECK(c["agreement"]["seeds"] == 1);
        CHECK(c["agreement"]["without_roles"] == std::vector<int>{7});
        const nlohmann::json alone5 = ex::circuit_file(seed5, st, copt_of(def));
        CHECK(c["items"] == alone5["items"]);
        CHECK(c["items_left_out"] == circuit["per_seed"][1]["items"]);
        for (const char* key : {"encode", "address", "reader", "baseline", "layers", "groups", "critical_layers",
                                "reader_candidates", "selectivity", "attention_split", "value_heads"})
            CHECK_MESSAGE(c[key] == alone5[key], key);
        // A seed of the study without any record (a merge of a shard stopped before seed 7's
        // items): it is a seed without roles; it went missing from seeds, and the agreement read
        // as a study of seed 5 alone.
        fs::create_directories(d.path / "seed5");
        ex::write_circuit_summaries(d.path / "seed5", seed5, def, both.bootstrap);
        const nlohmann::json only5 = json_of(d.path / "seed5" / "circuit.json");
        CHECK(only5["seeds"] == std::vector<int>{5, 7});
        CHECK(only5["per_seed"][1] == nlohmann::json{{"seed", 7}, {"error", "[circuit] no item of seed 7 has a record of every "
                                                                            "condition (no record of the seed)"}});
        CHECK(only5["agreement"]["seeds"] == 1);
        CHECK(only5["agreement"]["without_roles"] == std::vector<int>{7});
        CHECK(only5["per_seed"][0] == alone5["per_seed"][0]);
        CHECK(json_of(d.path / "seed5" / "summary.json")["agreement"] == only5["agreement"]);
    }
    // Part of an item (one item of seed 5 without its value-head records, as a resumed run
    // stopped again before rewriting them leaves it): the roles and the summary rows leave that
    // item out, pooled and per seed, as if it had not been drawn.
    {
        const nlohmann::json first = recs.front();
        std::vector<nlohmann::json> cut, without_item;
        for (const auto& rec : recs) {
            const bool same = rec["seed"] == first["seed"] && rec["item"] == first["item"];
            if (!same || rec["condition"].get<std::string>().rfind("vhead:", 0) != 0) cut.push_back(rec);
            if (!same) without_item.push_back(rec);
        }
        REQUIRE(cut.size() < recs.size());
        REQUIRE(without_item.size() < cut.size());
        const nlohmann::json c = ex::circuit_file(cut, st, copt_of(def)), w = ex::circuit_file(without_item, st, copt_of(def));
        CHECK(c["items_left_out"] == 1);
        REQUIRE(w.contains("items_left_out"));
        CHECK(w["items_left_out"] == 0);
        CHECK(c["items"].get<std::size_t>() + 1 == circuit["items"].get<std::size_t>());
        nlohmann::json cw = c;
        cw["items_left_out"] = 0;
        CHECK(cw == w);
        fs::create_directories(d.path / "cut");
        ex::write_circuit_summaries(d.path / "cut", cut, def, both.bootstrap);
        const nlohmann::json cs = json_of(d.path / "cut" / "summary.json");
        CHECK(cs["items_left_out"] == 1);
        fs::create_directories(d.path / "without_item");
        ex::write_circuit_summaries(d.path / "without_item", without_item, def, both.bootstrap);
        nlohmann::json ws = json_of(d.path / "without_item" / "summary.json");
        CHECK(ws["items_left_out"] == 0);
        ws["items_left_out"] = 1;
        CHECK(cs == ws);  // every row too
        CHECK(read_text(d.path / "cut" / "summary.csv") == read_text(d.path / "without_item" / "summary.csv"));
        CHECK(cs["conditions"][0]["n"].get<std::size_t>() + 1 == r.items);
        // No item complete: the error names the items; seeds whose items each lack a different
        // condition hold every condition between them (no condition named).
        std::vector<nlohmann::json> none;
        for (const auto& rec : recs)
            if (rec["condition"] != (rec["item"].get<std::size_t>() % 2 ? "baseline" : "layer:L0")) none.push_back(rec);
        CHECK_THROWS_WITH_AS(ex::circuit_file(none, st, copt_of(def)),
                             ("[circuit] none of the " + std::to_string(r.items) + " items has a record of every condition").c_str(),
                             hylens::FormatError);
        CHECK_THROWS_WITH_AS(ex::circuit_file({}, st, copt_of(def)), "[circuit] no record", hylens::FormatError);
    }
    {
        // Folders of builds before 2026-12-06 (a definition without seeds, or without value_heads)
        // get no summaries, in a merge of old folders alone too.
        for (const char* key : {"seeds", "value_heads"}) {
            nlohmann::json old_def = def;
            old_def.erase(key);
            CHECK_THROWS_WITH_AS(ex::write_circuit_summaries(d.path / "old_summary", recs, old_def, both.bootstrap),
                                 doctest::Contains("written by a hylens build from before 2026-12-06"), hylens::FormatError);
        }
    }

    // Refusals: no seed, a seed twice; a folder written before seeds were pooled (its definition
    // has "seed") is another study.
    ex::CircuitStudyOptions bad = small_options(d.path / "bad", 3);
    bad.seeds = {};
    CHECK_THROWS_WITH_AS(run_study(m, bad), doctest::Contains("need at least one seed"), hylens::Error);
    bad.seeds = {5, 5};
    CHECK_THROWS_WITH_AS(run_study(m, bad), doctest::Contains("seed 5 is listed twice"), hylens::Error);
    nlohmann::json before = json_of(alone[0].out / "run.json");
    before["study"].erase("seeds");
    before["study"]["seed"] = 5;
    CHECK_THROWS_WITH_AS(run_study(m, unfinished_folder(d.path / "old", before)), doctest::Contains("describes another study"),
                         hylens::Error);
}

TEST_CASE("circuit study: the long variant puts the filler between the dictionary and the question") {
    TempDir d("circuit_long");
    const Organism m(organism_copy("qwen35-tiny", d.path));
    ex::CircuitStudyOptions o = small_options(d.path / "long", 3);
    o.per_config = 1;
    o.variant = "long";
    CHECK_THROWS_WITH_AS(run_study(m, o), doctest::Contains("the 'long' variant needs filler text"), hylens::Error);
    ex::CircuitStudyOptions chat = small_options(d.path / "chat", 3);
    chat.per_config = 1;
    chat.filler = "\nsome text\n";
    CHECK_THROWS_WITH_AS(run_study(m, chat), doctest::Contains("filler text is read by the 'long' variant alone"),
                         hylens::Error);
    namespace lk = hylens::tasks::lookup;
    o.filler = lk::filler_text(m.tok, "The quick brown fox jumps over the lazy dog. " + std::string(40, 'a') +
                                          " Then the story goes on for a while, in plain words, to fill the prompt.",
                               24);
    o.filler_source = "a test sentence";
    const ex::CircuitStudyResult r = run_study(m, o);
    REQUIRE(r.items >= 1);
    chat.filler.clear();
    const ex::CircuitStudyResult rc = run_study(m, chat);
    REQUIRE(rc.items >= 1);
    // The filler's tokens sit between the last entry and the question: the gap there grows by
    // about their count (the wrapping newlines may merge with their neighbours).
    const std::size_t n_filler = m.tok.encode_ids(o.filler).size();
    REQUIRE(n_filler >= 20);
    const auto gap = [](const nlohmann::json& rec) {
        return rec["qstart"].get<std::size_t>() - rec["entries"].back()[1].get<std::size_t>();
    };
    std::size_t chat_max = 0, long_min = SIZE_MAX;
    for (const auto& rec : records_of(chat.out)) chat_max = std::max(chat_max, gap(rec));
    for (const auto& rec : records_of(o.out)) {
        long_min = std::min(long_min, gap(rec));
        CHECK(rec["task"] == "long");
    }
    CHECK(long_min >= chat_max + n_filler - 4);
    const nlohmann::json run = json_of(o.out / "run.json");
    CHECK(run["filler_source"] == "a test sentence");
    CHECK(!run["study"]["filler"].contains("source"));  // copies of one text at other paths agree
    CHECK(run["study"]["filler"]["fnv1a64"] == ex::fnv1a64_hex(o.filler));
    CHECK(!json_of(chat.out / "run.json")["study"].contains("filler"));
    // Other filler in the same folder is another study.
    ex::CircuitStudyOptions other = o;
    other.resume = true;
    other.filler += "more";
    CHECK_THROWS_AS(run_study(m, other), hylens::Error);
}

TEST_CASE("circuit study on granite-h-tiny: groups of size 0, the structure of the files") {
    TempDir d("circuit_granite");
    const Organism m(organism_copy("granite-h-tiny", d.path));
    ex::CircuitStudyOptions o = small_options(d.path / "run", 0);
    o.per_config = 1;
    const ex::CircuitStudyResult r = run_study(m, o);
    REQUIRE(r.items >= 1);
    const nlohmann::json run = json_of(o.out / "run.json");
    const ex::CircuitStructure st = ex::circuit_structure_from_json(run["study"]["structure"]);
    // Mamba-2, Mamba-2, attention, Mamba-2: one group {0, 1}; layer 3 belongs to no group but is scanned.
    REQUIRE(st.groups.size() == 1);
    CHECK(st.groups[0].layers == std::vector<hylens::LayerIndex>{0, 1});
    CHECK(st.linear_layers == std::vector<hylens::LayerIndex>{0, 1, 3});
    const nlohmann::json circuit = json_of(o.out / "circuit.json");
    CHECK(circuit["reader"]["layer"] == 2);
    CHECK(circuit["address"]["layers"] == std::vector<int>{0, 1});
    CHECK(circuit["layers"].size() == 3);
    hylens::CircuitOptions copt;
    copt.top = 3;
    CHECK(circuit == ex::circuit_file(records_of(o.out), st, copt));
}

#ifdef HYLENS_CLI
using hylens::test::kCli;
using hylens::test::sh;

TEST_CASE("hylens experiment circuit and encode-swap: usage errors, a run, shards through merge (and mpirun) == the library run") {
    TempDir d("circuit_cli");
    const fs::path model = organism_copy("qwen35-tiny", d.path);
    const std::string base = kCli + " experiment circuit --model " + model.string() + " --no-progress ";
    const std::string quiet = " 2>" + (d.path / "err.txt").string();
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --bogus 1" + quiet) == 2);
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --variant chat9" + quiet) == 2);
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --shard 3/3" + quiet) == 2);
    CHECK(read_text(d.path / "err.txt").find("need 0 <= I < N") != std::string::npos);
    CHECK(sh(kCli + " experiment circuit --out x" + quiet) == 2);  // --model missing
    CHECK(sh(kCli + " experiment --help | grep -q circuit") == 0);
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --filler-tokens 64" + quiet) == 2);  // chat8 takes no filler
    CHECK(read_text(d.path / "err.txt").find("read by --variant long alone") != std::string::npos);
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --seed 5 --seeds 5,7" + quiet) == 2);  // one or the other
    CHECK(sh(base + "--out " + (d.path / "x").string() + " --seeds 5,5" + quiet) == 2);
    CHECK(read_text(d.path / "err.txt").find("seed 5 is listed twice") != std::string::npos);
    {  // the long variant: the filler is the first N tokens of the corpus's held-out text
        const fs::path lg = d.path / "long";
        REQUIRE(sh(base + "--variant long --filler-tokens 48 --per-config 1 --seed 5 --top 3 --out " + lg.string() + quiet) == 0);
        const nlohmann::json run_json = json_of(lg / "run.json"), study = run_json["study"];
        CHECK(study["variant"] == "long");
        CHECK(run_json["filler_source"].get<std::string>().find("policy.txt.gz (held-out chunks, first 48 tokens)") !=
              std::string::npos);
        const Organism lm(model);
        const hylens::tasks::lookup::FitCorpus c = hylens::tasks::lookup::read_fit_corpus();
        CHECK(study["filler"]["fnv1a64"] ==
              ex::fnv1a64_hex(hylens::tasks::lookup::filler_text(lm.tok, hylens::tasks::lookup::held_out_text(c), 48)));
    }

    const std::string args = " --variant chat8 --per-config 2 --seed 5 --top 3 ";
    const fs::path one = d.path / "one";
    REQUIRE(sh(base + args + "--out " + one.string() + quiet) == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json", "run.json"})
        CHECK_MESSAGE(fs::exists(one / f), f);
    // The library with the same options writes the same records and circuit.
    const Organism m(model);
    ex::CircuitStudyOptions o = small_options(d.path / "lib", 3);
    o.per_config = 2;
    o.bootstrap = {};
    run_study(m, o);
    for (const char* f : {"items.jsonl", "summary.csv", "circuit.json"}) CHECK_MESSAGE(read_text(one / f) == read_text(o.out / f), f);
    // A finished folder is not overwritten without --resume; with it nothing is rerun.
    CHECK(sh(base + args + "--out " + one.string() + quiet) == 1);
    CHECK(sh(base + args + "--out " + one.string() + " --resume" + quiet) == 0);
    CHECK(read_text(one / "items.jsonl") == read_text(o.out / "items.jsonl"));

    const fs::path s0 = d.path / "s0", s1 = d.path / "s1", merged = d.path / "merged";
    REQUIRE(sh(base + args + "--shard 0/2 --out " + s0.string() + quiet) == 0);
    REQUIRE(sh(base + args + "--shard 1/2 --out " + s1.string() + quiet) == 0);
    REQUIRE(sh(kCli + " experiment merge " + s1.string() + " " + s0.string() + " --out " + merged.string() + quiet) == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(merged / f) == read_text(one / f), f);
    // Folders of different kinds do not merge.
    const fs::path toy = d.path / "toy";
    fs::create_directories(toy);
    write_text(toy / "run.json", R"({"kind": "toy", "study": {}, "status": "complete"})");
    CHECK(sh(kCli + " experiment merge " + s0.string() + " " + toy.string() + " --out " + (d.path / "m2").string() + quiet) == 1);
    CHECK(read_text(d.path / "err.txt").find("is not a 'circuit' study") != std::string::npos);
    {  // folders of a build from before seeds were pooled, merged alone: refused before the merged folder is made
        std::vector<std::string> old;
        for (const fs::path& s : {s0, s1}) {
            const fs::path o = d.path / ("old_" + s.filename().string());
            fs::copy(s, o, fs::copy_options::recursive);
            nlohmann::json run = json_of(o / "run.json");
            run["study"]["seed"] = run["study"]["seeds"][0];
            run["study"].erase("seeds");
            write_text(o / "run.json", run.dump(1));
            old.push_back(o.string());
        }
        CHECK(sh(kCli + " experiment merge " + old[0] + " " + old[1] + " --out " + (d.path / "m3").string() + quiet) == 1);
        CHECK(read_text(d.path / "err.txt").find("written by a hylens build from before 2026-12-06") != std::string::npos);
        CHECK(!fs::exists(d.path / "m3"));
    }

    // encode-swap with the circuit file: usage errors, shards through merge == one run.
    const std::string swap = kCli + " experiment encode-swap --model " + model.string() + " --no-progress --variant chat8 --per-config 2 --seed 5 ";
    CHECK(sh(swap + "--circuit " + (one / "circuit.json").string() + " --top 3 --out " + (d.path / "y").string() + quiet) == 2);
    CHECK(sh(swap + "--out " + (d.path / "y").string() + quiet) == 2);  // --circuit missing
    CHECK(sh(swap + "--circuit " + (one / "circuit.json").string() + " --other-layers x --out " + (d.path / "y").string() + quiet) == 2);
    // A control layer that is not a linear layer names the option and this model's linear layers.
    CHECK(sh(swap + "--circuit " + (one / "circuit.json").string() + " --other-layers 99 --out " + (d.path / "y").string() + quiet) == 1);
    CHECK(read_text(d.path / "err.txt").find("control layer 99 (--other-layers; Python: other_layers=) is not a linear layer of this model") !=
          std::string::npos);
    const fs::path w = d.path / "swap", w0 = d.path / "swap0", w1 = d.path / "swap1", wm = d.path / "swap_merged";
    const std::string with_circuit = swap + "--circuit " + (one / "circuit.json").string() + " ";
    REQUIRE(sh(with_circuit + "--out " + w.string() + quiet) == 0);
    REQUIRE(sh(with_circuit + "--shard 0/2 --out " + w0.string() + quiet) == 0);
    REQUIRE(sh(with_circuit + "--shard 1/2 --out " + w1.string() + quiet) == 0);
    REQUIRE(sh(kCli + " experiment merge " + w0.string() + " " + w1.string() + " --out " + wm.string() + quiet) == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json"}) CHECK_MESSAGE(read_text(wm / f) == read_text(w / f), f);
    CHECK(json_of(w / "run.json")["study"]["encode"] == json_of(one / "circuit.json")["encode"]["layers"]);

#ifdef HYLENS_MPIRUN
    // mpirun -np 2: the ranks are the shards, rank 0 merges them into --out.
    const fs::path two = d.path / "mpi";
    REQUIRE(sh(std::string(HYLENS_MPIRUN) + " --allow-run-as-root --oversubscribe -np 2 " + base + args + "--out " + two.string() +
               " >/dev/null 2>&1") == 0);
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json", "circuit.json"})
        CHECK_MESSAGE(read_text(two / f) == read_text(one / f), f);
    CHECK(fs::exists(two / "ranks" / "rank-1-of-2" / "items.jsonl"));
    CHECK(json_of(two / "run.json")["merged_from"].size() == 2);
    // Its rank folders alone (a killed run) resumed in one process: refused, naming the layout
    // (it computed every record again beside them).
    const fs::path killed = d.path / "mpi_killed";
    fs::create_directories(killed);
    fs::copy(two / "ranks", killed / "ranks", fs::copy_options::recursive);
    CHECK(sh(base + args + "--resume --out " + killed.string() + " >" + (d.path / "log").string() + " 2>&1") == 1);
    CHECK(read_text(d.path / "log").find("over 2 MPI ranks; a run in one process would run it again") != std::string::npos);
    CHECK(!fs::exists(killed / "items.jsonl"));
#endif

    // The figure script draws from the result folder.
    if (hylens::test::figure_scripts_can_run()) {
        CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_circuit.py " + one.string() + " --out " +
                 (d.path / "fig.png").string() + quiet) == 0);
        CHECK(fs::exists(d.path / "fig.png"));
    }
}
#endif

TEST_CASE("circuit study: a model that produces a NaN stops the study at the layer and site (no null scores)") {
    // It ran to the end with status complete, null gaps and no critical layer.
    const TempDir d("circuit_nan");
    const fs::path src = organism_copy("qwen35-tiny", d.path);
    const fs::path dir = hylens::test::damaged_model(src, d.path / "damaged", "model.layers.1.mlp.down_proj.weight");
    fs::copy_file(src / "tokenizer.json", dir / "tokenizer.json");
    const Organism m(dir);
    CHECK_THROWS_WITH_AS(run_study(m, small_options(d.path / "out", 0)),
                         doctest::Contains("first non-finite value (nan) at layer 1, site mlp_out"), hylens::NonFiniteError);
    CHECK_FALSE(fs::exists(d.path / "out" / "circuit.json"));
}
