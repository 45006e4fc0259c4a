// The transplant study (include/hylens/experiments/transplant_study.hpp):
//  * conditions, blocks and position sets on hand-written cases;
//  * a transplant of a prompt onto itself, run through the study's condition runner, scores
//    exactly as the clean run (mixer kind: as condition B; state kinds: as the split control),
//    on a random Qwen-like model and on the shipped organism models/qwen35-tiny; the layer-write
//    kind adds the write back onto resid_pre, fl(x + fl(y - x)), which is checked bit for bit
//    at the block's first layer (its scores then agree to 1e-4 relative, the rounding it causes);
//  * the summary of hand-computed records;
//  * the study on models/qwen35-tiny: a resumed killed run and merged shards give the unsharded
//    run's files byte for byte, and a second run gives the same bytes (determinism);
//  * the query-map study on that organism (donor = receiver): its baselines and in-family
//    condition equal the transplant study's A, B and mixer transplant at the final position,
//    the shuffled fit's targets are a permutation, resume / shards / a second run give the same
//    bytes;
//  * the CLI end to end on that organism (when the tool is built).
// The organisms are retrained from time to time: nothing here depends on their accuracy.

#include <hylens/experiments/study_folder.hpp>
#include <hylens/experiments/transplant_study.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/experiments/query_map_study.hpp>
#include <hylens/models/load.hpp>

#include "../support/random_ids.hpp"
#include "../support/random_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "studies_circuit/fixtures.hpp"  // sh
#include "support/damaged_model.hpp"
#include "support/figure_scripts.hpp"
#include "support/killed_run.hpp"
#include "support/tokenizer_without.hpp"

using namespace hylens;
namespace ex = hylens::experiments;
namespace fs = std::filesystem;
namespace lk = hylens::tasks::lookup;

namespace {

using hylens::test::studies::read_text;

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("hylens_studies_transplant_" + std::to_string(::getpid())) / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

const fs::path kOrganism = fs::path(HYLENS_MODELS_DIR) / "qwen35-tiny";

/// Checks that every condition of `conds` scores on `it` (donor = host) as the clean run.
template <class Model>
void check_self(const Model& m, const ex::TransplantItem& it, const std::vector<ex::TransplantCondition>& conds,
                const ex::ReaderHead& reader) {
    REQUIRE(it.a == it.b);
    const ex::TransplantCondition B{"B", ex::TransplantKind::baseline, "B"};
    const ex::TransplantCondition split{"split", ex::TransplantKind::split, ""};
    const TransplantScore clean = ex::run_transplant_condition(m, it, B, reader);
    const TransplantScore clean_split = ex::run_transplant_condition(m, it, split, reader);
    CHECK(!std::isnan(clean.attA));
    CHECK(!std::isnan(clean_split.attB));
    for (const ex::TransplantCondition& c : conds) {
        CAPTURE(c.name);
        const bool state = c.kind == ex::TransplantKind::state || c.kind == ex::TransplantKind::state_conv ||
                           c.kind == ex::TransplantKind::split;
        const TransplantScore& want = state ? clean_split : clean;
        const TransplantScore got = ex::run_transplant_condition(m, it, c, reader);
        if (c.kind == ex::TransplantKind::layer) {
            // resid_post := resid_pre + (resid_post - resid_pre) is fl(x + fl(y - x)), not y: check
            // that identity bit for bit at the block's first layer (everything before it is the
            // clean computation), and the scores only to the rounding that follows from it.
            const int l0 = c.layers.front();
            const Positions P = ex::positions_of(c.positions, it.qstart, it.b.size());
            const NamedTensors cl = capture(m, TokenBatch(it.b), {site::resid_pre(l0), site::resid_post(l0)});
            RunOptions o;
            o.capture = {site::resid_post(l0)};
            const MixerTransplant t = transplant_layer_write(m, TokenBatch(it.a), TokenBatch(it.b), c.layers, P, o);
            const auto& x = flat(cl.at(site::resid_pre(l0).name()));
            const auto& y = flat(cl.at(site::resid_post(l0).name()));
            const auto& z = flat(t.host.captures.at(site::resid_post(l0).name()));
            const std::size_t H = m.config().hidden;
            std::vector<bool> patched(it.b.size(), false);
            for (std::size_t p : P.resolve(it.b.size())) patched[p] = true;
            std::size_t wrong = 0;
            for (std::size_t i = 0; i < z.size(); ++i) {
                const float want_z = patched[i / H] ? x[i] + (y[i] - x[i]) : y[i];
                wrong += z[i] != want_z;
            }
            CHECK(wrong == 0);
            // The rounding moves each logit by at most 16 u of its size (the bound
            // circuit/test_circuit_models.cpp holds this identity to), so a difference of two
            // logits by 32 u of theirs (dAB's own size stands in for it: measured up to 5.4 u of
            // |dAB|), and the reader head's attention weights (at most 1) by 32 u absolute
            // (measured up to 1.1 u).
            constexpr double u = 0x1p-24;
            CHECK(std::abs(got.dAB - want.dAB) <= 32 * u * std::max(1.0, std::abs(want.dAB)));
            CHECK(std::abs(got.attA - want.attA) <= 32 * u);
            CHECK(std::abs(got.attB - want.attB) <= 32 * u);
            continue;
        }
        CHECK(got.ansA == want.ansA);
        CHECK(got.ansB == want.ansB);
        CHECK(got.dAB == want.dAB);
        CHECK(got.attA == want.attA);
        CHECK(got.attB == want.attB);
    }
}

/// The organism's donor/host pairs (in-family vocabulary, chat8).
lk::DonorHostSet organism_pairs(const Tokenizer& tok, std::size_t per_config, std::uint64_t seed) {
    return lk::donor_host_pairs(tok, chat_format(ChatFamily::qwen35), lk::Style::chat, lk::in_family_vocabulary(tok),
                                per_config, seed);
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

}  // namespace

TEST_CASE("transplant study: blocks, position sets and conditions") {
    const std::vector<std::vector<LayerIndex>> groups = {{0, 1, 2}, {4, 5}};
    const auto b = ex::parse_blocks("G0,3,1-2,G1+G0,2+0", groups, 7);
    REQUIRE(b.size() == 5);
    CHECK(b[0].name == "G0");
    CHECK(b[0].layers == std::vector<LayerIndex>{0, 1, 2});
    CHECK(b[1].layers == std::vector<LayerIndex>{3});
    CHECK(b[2].layers == std::vector<LayerIndex>{1, 2});
    CHECK(b[3].name == "G1+G0");
    CHECK(b[3].layers == std::vector<LayerIndex>{0, 1, 2, 4, 5});
    CHECK(b[4].layers == std::vector<LayerIndex>{0, 2});
    for (const char* bad : {"G2", "7", "x", "", "G0,,1", "3-1", "1-9", "G", "+1"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(ex::parse_blocks(bad, groups, 7), Error);
    }
    CHECK_THROWS_WITH_AS(ex::parse_blocks("3-1", groups, 7), doctest::Contains("range 3-1 runs backwards (write 1-3)"), Error);
    CHECK_THROWS_WITH_AS(ex::parse_blocks("1-9", groups, 7), doctest::Contains("is not inside the model's 7 layers (0-6)"), Error);
    CHECK_THROWS_WITH_AS(ex::parse_blocks("7", groups, 7), doctest::Contains("layer 7 is not one of the model's 7 layers (0-6)"), Error);

    using P = std::vector<std::size_t>;
    CHECK(ex::positions_of(ex::PositionSet::final_position, 5, 9).resolve(9) == P{8});
    CHECK(ex::positions_of(ex::PositionSet::question, 5, 9).resolve(9) == P{5, 6, 7, 8});
    CHECK(ex::positions_of(ex::PositionSet::dictionary, 5, 9).resolve(9) == P{0, 1, 2, 3, 4});
    CHECK(ex::positions_of(ex::PositionSet::all, 5, 9).resolve(9) == P{0, 1, 2, 3, 4, 5, 6, 7, 8});
    CHECK(ex::positions_of(ex::PositionSet::question_nofinal, 5, 9).resolve(9) == P{5, 6, 7});  // exp32-A(iii)
    CHECK(ex::positions_of(ex::parse_position_set("question-nofinal"), 7, 9).resolve(9) == P{7});
    CHECK_THROWS_WITH_AS(ex::positions_of(ex::PositionSet::question_nofinal, 8, 9),
                         "[transplant] question-nofinal: the question starts at the final position 8 of 9 tokens (the set "
                         "is empty)", ShapeError);
    CHECK_THROWS_AS(ex::positions_of(ex::PositionSet::all, 9, 9), ShapeError);
    CHECK_THROWS_AS(ex::parse_position_set("middle"), Error);
    CHECK_THROWS_AS(ex::parse_transplant_kind("residual"), Error);
    for (const char* k : {"mixer", "layer", "mixer_in", "resid_pre", "upstream", "state", "state+conv"})
        CHECK(ex::kind_name(ex::parse_transplant_kind(k)) == k);

    const auto conds = ex::transplant_conditions({ex::TransplantKind::mixer, ex::TransplantKind::state,
                                                  ex::TransplantKind::state_conv},
                                                 {b[0], b[1]}, {ex::PositionSet::final_position, ex::PositionSet::all});
    std::vector<std::string> names;
    for (const auto& c : conds) names.push_back(c.name);
    CHECK(names == std::vector<std::string>{"A", "B", "mixer:G0@final", "mixer:G0@all", "mixer:3@final", "mixer:3@all",
                                            "split", "state:G0", "state:3", "state+conv:G0", "state+conv:3"});
    CHECK_THROWS_AS(ex::transplant_conditions({ex::TransplantKind::mixer}, {b[0], b[0]}, {ex::PositionSet::all}), Error);

    // exp32-C and D: the donor baseline under each removal, then the block transplants from it.
    const auto up = ex::transplant_conditions({ex::TransplantKind::resid_pre, ex::TransplantKind::upstream}, {b[1]},
                                              {ex::PositionSet::final_position}, {b[2], b[4]});
    names.clear();
    for (const auto& c : up) names.push_back(c.name);
    CHECK(names == std::vector<std::string>{"A", "B", "resid_pre:3@final", "A/without:1-2", "mixer:3@final/without:1-2",
                                            "A/without:2+0", "mixer:3@final/without:2+0"});
    CHECK(up[3].kind == ex::TransplantKind::baseline);
    CHECK(up[3].block == "A");
    CHECK(up[5].without.layers == std::vector<LayerIndex>{0, 2});
    const nlohmann::json f = ex::condition_fields(up[6]);
    CHECK(f["kind"] == "upstream");
    CHECK(f["positions"] == "final");
    CHECK(f["without"] == "2+0");
    CHECK(f["without_layers"] == nlohmann::json::array({0, 2}));
    CHECK(!ex::condition_fields(up[0]).contains("without"));
    // Upstream means before the block: a later block, or a shared layer (whose zeroed rows would
    // be copied), is refused.
    CHECK_THROWS_WITH_AS(ex::transplant_conditions({ex::TransplantKind::upstream}, {b[0]}, {ex::PositionSet::all}, {b[1]}),
                         "[transplant] --upstream 3 is not upstream of block G0: its layer 3 is not before the block's "
                         "first layer 0 (exp32-C removes blocks before the transplanted one)", Error);
    CHECK_THROWS_WITH_AS(ex::transplant_conditions({ex::TransplantKind::upstream}, {b[2]}, {ex::PositionSet::all}, {b[4]}),
                         doctest::Contains("--upstream 2+0 is not upstream of block 1-2: its layer 2 is not before"), Error);
    CHECK_THROWS_WITH_AS(ex::transplant_conditions({ex::TransplantKind::upstream}, {b[0]}, {ex::PositionSet::all}),
                         "[transplant] the upstream kind needs the blocks to remove from the donor (--upstream)", Error);
    CHECK_THROWS_WITH_AS(ex::transplant_conditions({ex::TransplantKind::mixer}, {b[0]}, {ex::PositionSet::all}, {b[1]}),
                         "[transplant] blocks to remove from the donor (--upstream) are read by the upstream kind alone",
                         Error);
}

TEST_CASE("transplant study: a prompt transplanted onto itself scores as the clean run") {
    const std::vector<ex::TransplantKind> kinds = {ex::TransplantKind::mixer,    ex::TransplantKind::layer,
                                                   ex::TransplantKind::mixer_in, ex::TransplantKind::resid_pre,
                                                   ex::TransplantKind::state,    ex::TransplantKind::state_conv};
    const std::vector<ex::PositionSet> sets = {ex::PositionSet::final_position, ex::PositionSet::question,
                                               ex::PositionSet::question_nofinal, ex::PositionSet::dictionary,
                                               ex::PositionSet::all};
    SUBCASE("random Qwen-like model (DeltaNet 0, 1, 3; reader layer 2)") {
        const auto m = test::random_qwen({});
        ex::TransplantItem it;
        it.a = it.b = test::random_ids(14, m.config().vocab, 3);
        it.value_a = 7;
        it.value_b = 11;
        it.entry_a = {2, 5};
        it.entry_b = {6, 9};
        it.qstart = 10;
        const auto blocks = ex::parse_blocks("0+1,3,0+1+3", {}, 4);
        for (std::size_t h : {0u, 1u}) check_self(m, it, ex::transplant_conditions(kinds, blocks, sets), {2, h});
    }
    SUBCASE("models/qwen35-tiny on its own donor/host pairs (B onto B)") {
        const AnyModel model = load(kOrganism);
        const Tokenizer tok = Tokenizer::from_file((kOrganism / "tokenizer.json").string());
        const lk::DonorHostSet set = organism_pairs(tok, 1, 5);
        REQUIRE(set.items.size() >= 2);
        model.visit([&](const auto& m) {
            const auto blocks = ex::parse_blocks("G0,2", {{0, 1, 2}}, m.num_layers());
            for (std::size_t i = 0; i < 2; ++i) {
                ex::TransplantItem it = ex::transplant_item(set.items[i]);
                it.a = it.b;
                check_self(m, it, ex::transplant_conditions(kinds, blocks, sets), {3, 1});
            }
        });
    }
}

TEST_CASE("transplant study: exp32-C and D conditions against runs built by hand") {
    // Random Qwen-like model: DeltaNet 0, 1, 3, softmax attention at 2 (the reader's layer).
    const auto m = test::random_qwen({});
    ex::TransplantItem it;
    it.a = test::random_ids(14, m.config().vocab, 3);
    it.b = test::random_ids(14, m.config().vocab, 4);
    it.value_a = 7;
    it.value_b = 11;
    it.entry_a = {2, 5};
    it.entry_b = {6, 9};
    it.qstart = 10;
    const ex::ReaderHead reader{2, 1};
    const auto same = [](const TransplantScore& x, const TransplantScore& y) {
        CHECK(x.ansA == y.ansA);
        CHECK(x.ansB == y.ansB);
        CHECK(x.dAB == y.dAB);
        CHECK(x.attA == y.attA);
        CHECK(x.attB == y.attB);
    };
    const std::vector<ex::PositionSet> sets{ex::PositionSet::final_position, ex::PositionSet::question};
    std::map<std::string, TransplantScore> got;
    for (const ex::TransplantCondition& c :
         ex::transplant_conditions({ex::TransplantKind::mixer, ex::TransplantKind::mixer_in, ex::TransplantKind::resid_pre},
                                   ex::parse_blocks("0+1,3", {}, 4), sets))
        got[c.name] = ex::run_transplant_condition(m, it, c, reader);
    for (const ex::TransplantCondition& c : ex::transplant_conditions({ex::TransplantKind::upstream}, ex::parse_blocks("3", {}, 4),
                                                                      sets, ex::parse_blocks("0,0+1", {}, 4)))
        got[c.name] = ex::run_transplant_condition(m, it, c, reader);
    RunOptions o;
    o.last_only = true;
    o.capture = {site::attn_probs(2, Positions::last())};
    const auto score = [&](const RunResult& r) { return ex::score_run(m, r, it, reader); };
    const TokenBatch A(it.a), B(it.b);
    // The donor under a removal: its run with the layer's mixer output zeroed at every position.
    same(got.at("A/without:0"), score(run(m, A, {zero(Site::mixer_out, {0})}, o)));
    same(got.at("A/without:0+1"), score(run(m, A, {zero(Site::mixer_out, {0}), zero(Site::mixer_out, {1})}, o)));
    // The runner removes what it is given: a layer after the block (transplant_conditions refuses
    // it) leaves the block's donor rows, hence the transplant, as they were.
    for (ex::PositionSet p : sets) {
        const ex::TransplantCondition later{"x", ex::TransplantKind::upstream, "0+1", {0, 1}, p, {"3", {3}}};
        same(ex::run_transplant_condition(m, it, later, reader),
             got.at("mixer:0+1@" + ex::position_set_name(p)));
    }
    // Removing one before it changes them: the rows are taken from the donor without layer 0.
    {
        const NamedTensors donor = capture(m, A, {site::mixer_out(3, Positions::last())}, {zero(Site::mixer_out, {0})});
        same(got.at("mixer:3@final/without:0"),
             score(run(m, B, {patch(site::mixer_out(3, Positions::last()), donor)}, o)));
        CHECK(got.at("mixer:3@final/without:0").dAB != got.at("mixer:3@final").dAB);
    }
    // exp32-D: the mixer inputs of the block's layers, and the residual entering its first layer.
    {
        const Positions q = Positions::range(10, 14);
        const NamedTensors donor = capture(m, A, {site::mixer_in(0, q), site::mixer_in(1, q), site::resid_pre(3, q)});
        same(got.at("mixer_in:0+1@question"),
             score(run(m, B, {patch(site::mixer_in(0, q), donor), patch(site::mixer_in(1, q), donor)}, o)));
        same(got.at("resid_pre:3@question"), score(run(m, B, {patch(site::resid_pre(3, q), donor)}, o)));
    }
    // The residual entering layer 0 at every position is the embedding: the host becomes the donor.
    const ex::TransplantCondition all0{"resid_pre:0@all", ex::TransplantKind::resid_pre, "0", {0}, ex::PositionSet::all};
    same(ex::run_transplant_condition(m, it, all0, reader), ex::run_transplant_condition(m, it, {"A", ex::TransplantKind::baseline, "A"}, reader));
}

/// Every condition of every kind on `it`, run on the item's shared donor capture and prefix
/// caches (what the study does), gives the bits of its own separate runs: logits and the
/// reader's attention row.
template <class Model>
void check_shared_runs(const Model& m, const ex::TransplantItem& it, const std::vector<ex::TransplantCondition>& conds,
                       const ex::ReaderHead& reader) {
    RunOptions o;
    o.capture = ex::head_captures(reader, {});
    std::vector<const ex::TransplantCondition*> all;
    for (const auto& c : conds) all.push_back(&c);
    ex::TransplantItemRuns<Model> shared(m, it, all);
    for (const auto& c : conds) {
        CAPTURE(c.name);
        const RunResult own = ex::transplant_condition_run(m, it, c, o);
        const RunResult got = ex::transplant_condition_run(m, it, c, o, &shared);
        REQUIRE(got.logits.shape() == own.logits.shape());
        CHECK(std::equal(got.logits.begin(), got.logits.end(), own.logits.begin()));
        REQUIRE(own.captures.size() == 1);  // the reader's attention row
        for (const auto& [name, t] : own.captures.all()) {
            CAPTURE(name);
            REQUIRE(got.captures.contains(name));
            const NamedTensor& g = got.captures.at(name);
            REQUIRE(shape_of(g) == shape_of(t));
            CHECK(std::equal(g.begin(), g.end(), t.begin()));
        }
    }
}

TEST_CASE("transplant study: an item's conditions on its shared donor run and prefixes give their own runs' bits") {
    ex::TransplantItem it;
    it.a = test::random_ids(14, 50, 3);  // the random models' vocabulary: 50
    it.b = test::random_ids(14, 50, 4);
    it.value_a = 7;
    it.value_b = 11;
    it.entry_a = {2, 5};
    it.entry_b = {6, 9};
    it.qstart = 10;
    const std::vector<ex::TransplantKind> kinds{ex::TransplantKind::mixer,    ex::TransplantKind::layer,
                                                ex::TransplantKind::mixer_in, ex::TransplantKind::resid_pre,
                                                ex::TransplantKind::state,    ex::TransplantKind::state_conv,
                                                ex::TransplantKind::upstream};
    const std::vector<ex::PositionSet> sets{ex::PositionSet::final_position, ex::PositionSet::question,
                                            ex::PositionSet::dictionary, ex::PositionSet::all};
    {
        const auto m = test::random_qwen({});  // DeltaNet 0, 1, 3, softmax attention at 2
        check_shared_runs(m, it,
                          ex::transplant_conditions(kinds, ex::parse_blocks("1,3", {}, 4), sets, ex::parse_blocks("0", {}, 4)),
                          {2, 1});
    }
    {
        // The kinds that copy no rows never read the question start (an item a library caller
        // made without one), shared or not.
        const auto m = test::random_qwen({});
        ex::TransplantItem no_question = it;
        no_question.qstart = 0;
        check_shared_runs(m, no_question,
                          ex::transplant_conditions({ex::TransplantKind::state, ex::TransplantKind::state_conv},
                                                    ex::parse_blocks("1,3", {}, 4), sets),
                          {2, 1});
    }
    {
        const auto m = test::random_falcon({});  // parallel layers: attention and Mamba-2 in each
        const ex::ReaderHead reader{m.num_layers() - 1, 0};
        check_shared_runs(m, it,
                          ex::transplant_conditions(kinds, ex::parse_blocks("1,1+2", {}, m.num_layers()), sets,
                                                    ex::parse_blocks("0", {}, m.num_layers())),
                          reader);
    }
}

TEST_CASE("transplant study: the summary of hand-computed records") {
    const ex::TransplantCondition c{"mixer:G0@final", ex::TransplantKind::mixer, "G0", {0, 1, 2}};
    const auto score = [](bool a, bool b, double d, double attA) {
        TransplantScore s;
        s.ansA = a;
        s.ansB = b;
        s.dAB = d;
        s.attA = attA;
        s.attB = 0.25;
        return s;
    };
    const double nan = std::nan("");
    const std::vector<nlohmann::json> recs = {
        ex::transplant_record("transplant:chat8", 1, 0, c, 2, score(true, false, 1.0, 0.5)),
        ex::transplant_record("transplant:chat8", 1, 1, c, 2, score(false, true, 2.0, nan)),
        ex::transplant_record("transplant:chat8", 1, 2, c, 2, score(true, false, 3.0, 0.7)),
        ex::transplant_record("transplant:chat8", 2, 0, c, 2, score(false, false, 6.0, 0.9)),
    };
    CHECK(recs[1]["attA"].is_null());
    CHECK(recs[0]["positions"] == "final");
    CHECK(recs[0]["layers"] == nlohmann::json::array({0, 1, 2}));
    const nlohmann::json rows = ex::transplant_summary(recs, {2000, 0.95, 7});
    REQUIRE(rows.size() == 1);
    const nlohmann::json& r = rows[0];
    CHECK(r["condition"] == "mixer:G0@final");
    CHECK(r["n"] == 4);
    CHECK(r["ansA"]["mean"].get<double>() == doctest::Approx(0.5).epsilon(1e-15));   // 2 of 4
    CHECK(r["ansB"]["mean"].get<double>() == doctest::Approx(0.25).epsilon(1e-15));  // 1 of 4
    CHECK(r["dAB"]["mean"].get<double>() == doctest::Approx(3.0).epsilon(1e-15));    // (1+2+3+6)/4
    CHECK(r["attA"]["mean"].get<double>() == doctest::Approx(0.7).epsilon(1e-15));   // (0.5+0.7+0.9)/3, null left out
    CHECK(r["attA"]["n"] == 3);
    CHECK(r["attB"]["mean"].get<double>() == 0.25);
    CHECK(r["attB"]["lo"].get<double>() == 0.25);  // every resample of a constant is the constant
    CHECK(r["attB"]["hi"].get<double>() == 0.25);
    for (const char* m : {"ansA", "ansB", "dAB", "attA"}) {
        CAPTURE(m);
        CHECK(r[m]["lo"].get<double>() <= r[m]["mean"].get<double>());
        CHECK(r[m]["mean"].get<double>() <= r[m]["hi"].get<double>());
    }
    // the dAB interval stays within the item range; 6.0 sits alone in seed 2, so every resample has it
    CHECK(r["dAB"]["lo"].get<double>() >= (1.0 + 1.0 + 1.0 + 6.0) / 4 - 1e-12);
    CHECK(r["dAB"]["hi"].get<double>() <= (3.0 + 3.0 + 3.0 + 6.0) / 4 + 1e-12);
    // Each seed's mean and their sample sd (n - 1): seed 1 holds items 0-2, seed 2 item 0.
    CHECK(r["seeds"] == nlohmann::json::array({1, 2}));
    CHECK(r["ansA"]["per_seed"][0].get<double>() == doctest::Approx(2.0 / 3.0));
    CHECK(r["ansA"]["per_seed"][1].get<double>() == 0.0);
    CHECK(r["ansA"]["sd_seeds"].get<double>() == doctest::Approx(std::sqrt(2.0 / 9.0)));  // means 2/3, 0
    CHECK(r["dAB"]["sd_seeds"].get<double>() == doctest::Approx(std::sqrt(8.0)));         // means 2, 6
    CHECK(r["attA"]["per_seed"][0].get<double>() == doctest::Approx(0.6));                // null left out
    CHECK(r["attA"]["sd_seeds"].get<double>() == doctest::Approx(std::sqrt(2 * 0.15 * 0.15)));
    CHECK(r["attB"]["sd_seeds"].get<double>() == 0.0);
    const std::vector<std::string> csv = lines(ex::transplant_summary_csv(rows));
    REQUIRE(csv.size() == 2);
    CHECK(csv[0] == "task,condition,kind,block,positions,without,n,ansA,ansA_lo,ansA_hi,ansB,ansB_lo,ansB_hi,dAB,dAB_lo,dAB_hi,"
                    "attA,attA_lo,attA_hi,attB,attB_lo,attB_hi,seeds,ansA_sd_seeds,ansB_sd_seeds,dAB_sd_seeds,"
                    "attA_sd_seeds,attB_sd_seeds");
    CHECK(csv[1].rfind("transplant:chat8,mixer:G0@final,mixer,G0,final,,4,0.5,", 0) == 0);
    CHECK(csv[1].find(",0.25,0.25,0.25,2,0.471404521,") != std::string::npos);
    CHECK(csv[1].substr(csv[1].size() - 2) == ",0");
    // One seed: no sd (empty cells, null in the JSON).
    const nlohmann::json one = ex::transplant_summary({recs[0], recs[1]}, {200, 0.95, 7});
    CHECK(one[0]["dAB"]["sd_seeds"].is_null());
    CHECK(lines(ex::transplant_summary_csv(one))[1].substr(lines(ex::transplant_summary_csv(one))[1].size() - 7) == ",1,,,,,");
    // a record round trip
    const TransplantScore back = ex::score_of_record(recs[1]);
    CHECK(back.ansB);
    CHECK(std::isnan(back.attA));
    CHECK(back.dAB == 2.0);
}

TEST_CASE("transplant study on models/qwen35-tiny: resume and shards give the unsharded run's files") {
    const AnyModel model = load(kOrganism);
    const Tokenizer tok = Tokenizer::from_file((kOrganism / "tokenizer.json").string());
    const ChatFormat fmt = chat_format(ChatFamily::qwen35);
    const fs::path root = fresh_dir("study");
    const auto opts = [&](const fs::path& out) {
        ex::TransplantStudyOptions o;
        o.out = out;
        o.per_config = 1;
        o.seeds = {1, 2};
        o.blocks = ex::parse_blocks("G0,1", {{0, 1, 2}}, 4);
        o.positions = {ex::PositionSet::final_position, ex::PositionSet::question};
        o.reader = {3, 0};
        return o;
    };
    const auto run_study = [&](const ex::TransplantStudyOptions& o) {
        return model.visit([&](const auto& m) { return ex::run_transplant_study(m, tok, fmt, o); });
    };
    {  // a seed listed twice is refused before any work (it failed at the end, on a duplicate key)
        ex::TransplantStudyOptions twice = opts(root / "twice");
        twice.seeds = {3, 3};
        CHECK_THROWS_WITH_AS(run_study(twice), doctest::Contains("[transplant] seed 3 is listed twice"), hylens::Error);
        CHECK(!fs::exists(root / "twice" / "items.jsonl"));
    }
    const ex::TransplantStudyResult full = run_study(opts(root / "full"));
    const std::size_t conds = 2 + 2 * 2 * 2 + 1 + 2 * 2;  // A, B; mixer, layer x 2 blocks x 2 sets; split; state, state+conv x 2
    REQUIRE(full.items >= 4);
    CHECK(full.records == full.items * conds);
    const std::string items = read_text(root / "full" / "items.jsonl");
    const std::string summary = read_text(root / "full" / "summary.json");
    const nlohmann::json run = nlohmann::json::parse(read_text(root / "full" / "run.json"));
    CHECK(run["kind"] == "transplant");
    CHECK(run["status"] == "complete");
    CHECK(nlohmann::json::parse(summary).size() == conds);
    for (const std::string& l : lines(items)) {
        const nlohmann::json r = nlohmann::json::parse(l);
        for (const char* k : {"ansA", "ansB", "dAB", "attA", "attB", "ia", "ib", "answer_a", "answer_b", "kind", "block",
                              "T", "qstart", "entry_a", "entry_b"})
            CHECK(r.contains(k));
        CHECK(!r["attA"].is_null());
        // The spans attA and attB sum over: two different entries of the dictionary, before the question.
        const auto a0 = r["entry_a"][0].get<std::size_t>(), a1 = r["entry_a"][1].get<std::size_t>();
        const auto b0 = r["entry_b"][0].get<std::size_t>(), b1 = r["entry_b"][1].get<std::size_t>();
        CHECK(a0 < a1);
        CHECK(b0 < b1);
        CHECK((a1 <= b0 || b1 <= a0));
        CHECK(std::max(a1, b1) <= r["qstart"].get<std::size_t>());
        CHECK(r["qstart"].get<std::size_t>() < r["T"].get<std::size_t>());
        CHECK((r["ia"] < r["ib"]) == (a0 < b0));  // entries in dictionary order
    }

    SUBCASE("a second run gives the same bytes") {
        run_study(opts(root / "again"));
        CHECK(read_text(root / "again" / "items.jsonl") == items);
        CHECK(read_text(root / "again" / "summary.json") == summary);
        CHECK(read_text(root / "again" / "summary.csv") == read_text(root / "full" / "summary.csv"));
    }
    SUBCASE("a killed run resumed") {
        const fs::path d = root / "killed";
        fs::create_directories(d);
        const std::vector<std::string> ls = lines(items);
        std::string part;
        for (std::size_t i = 0; i < ls.size() / 2; ++i) part += ls[i] + "\n";
        part += ls[ls.size() / 2].substr(0, 10);  // a torn last line
        std::ofstream(d / "items.jsonl", std::ios::binary) << part;
        std::ofstream(d / "run.json", std::ios::binary)
            << hylens::test::as_killed(nlohmann::json::parse(read_text(root / "full" / "run.json"))).dump(1);
        auto o = opts(d);
        CHECK_THROWS_AS(run_study(o), Error);  // without --resume the folder is refused
        o.resume = true;
        const ex::TransplantStudyResult r = run_study(o);
        CHECK(r.resumed == ls.size() / 2);
        CHECK(r.written == ls.size() - ls.size() / 2);
        CHECK(read_text(d / "items.jsonl") == items);
        CHECK(read_text(d / "summary.json") == summary);
        auto other = opts(d);
        other.resume = true;
        other.per_config = 2;
        CHECK_THROWS_AS(run_study(other), Error);  // another study in the folder
    }
    SUBCASE("shards merged") {
        std::vector<fs::path> dirs;
        for (std::size_t s = 0; s < 3; ++s) {
            auto o = opts(root / ("shard" + std::to_string(s)));
            o.shard = {s, 3};
            run_study(o);
            dirs.push_back(o.out);
        }
        ex::merge_study_folders(dirs, root / "merged", "transplant",
                                [](const fs::path& out, const std::vector<nlohmann::json>& recs) {
                                    ex::write_transplant_summaries(out, recs);
                                });
        CHECK(read_text(root / "merged" / "items.jsonl") == items);
        CHECK(read_text(root / "merged" / "summary.json") == summary);
        CHECK(read_text(root / "merged" / "summary.csv") == read_text(root / "full" / "summary.csv"));
    }
}

TEST_CASE("transplant study: an upstream block without a recurrent mixer is refused (granite-h-tiny)") {
    // granite-h-tiny: Mamba-2 0, 1, attention 2, Mamba-2 3. Layer 2 is before block 3, but it has
    // no recurrent mixer to zero.
    const fs::path dir = fs::path(HYLENS_MODELS_DIR) / "granite-h-tiny";
    const AnyModel model = load(dir);
    const Tokenizer tok = Tokenizer::from_file((dir / "tokenizer.json").string());
    ex::TransplantStudyOptions o;
    o.out = fresh_dir("granite_upstream") / "out";
    o.per_config = 1;
    o.blocks = ex::parse_blocks("3", {}, 4);
    o.kinds = {ex::TransplantKind::upstream};
    o.positions = {ex::PositionSet::final_position};
    o.upstream = ex::parse_blocks("2", {}, 4);
    CHECK_THROWS_WITH_AS(
        model.visit([&](const auto& m) { return ex::run_transplant_study(m, tok, chat_format(ChatFamily::granite4), o); }),
        "[transplant] A/without:2: layer 2 has no recurrent mixer to remove", ShapeError);
    CHECK(!fs::exists(o.out / "items.jsonl"));
}

TEST_CASE("transplant study on models/qwen35-tiny: watched heads, upstream removal, input transplants") {
    const AnyModel model = load(kOrganism);
    const Tokenizer tok = Tokenizer::from_file((kOrganism / "tokenizer.json").string());
    const fs::path root = fresh_dir("watch");
    ex::TransplantStudyOptions o;
    o.out = root / "w";
    o.per_config = 2;
    o.blocks = ex::parse_blocks("1,2", {{0, 1, 2}}, 4);
    o.positions = {ex::PositionSet::final_position, ex::PositionSet::question_nofinal};
    o.kinds = {ex::TransplantKind::mixer, ex::TransplantKind::mixer_in, ex::TransplantKind::resid_pre,
               ex::TransplantKind::upstream, ex::TransplantKind::state};
    o.upstream = ex::parse_blocks("0", {{0, 1, 2}}, 4);
    o.reader = {3, 1};
    o.watch = {{3, 0}, {3, 1}};  // the second is the reader itself
    const auto run_study = [&](const ex::TransplantStudyOptions& opt) {
        return model.visit([&](const auto& m) { return ex::run_transplant_study(m, tok, chat_format(ChatFamily::qwen35), opt); });
    };
    {
        ex::TransplantStudyOptions bad = o;
        bad.out = root / "bad";
        bad.watch = {{3, 0}, {3, 0}};
        CHECK_THROWS_WITH_AS(run_study(bad), "[transplant] --watch lists L3H0 twice", Error);
        bad.watch = {{1, 0}};
        CHECK_THROWS_WITH_AS(run_study(bad), "[transplant --watch] the reader layer 1 has no softmax attention", ShapeError);
        bad.watch = {};
        bad.upstream = ex::parse_blocks("0+1", {{0, 1, 2}}, 4);  // layer 1 is block 1 itself
        CHECK_THROWS_WITH_AS(run_study(bad), doctest::Contains("--upstream 0+1 is not upstream of block 1"), Error);
        CHECK(!fs::exists(root / "bad" / "items.jsonl"));
    }
    const ex::TransplantStudyResult r = run_study(o);
    // A, B; mixer, mixer_in, resid_pre x 2 blocks x 2 sets; the removal: A/without + 2 x 2; split, state x 2.
    const std::size_t conds = 2 + 3 * 2 * 2 + (1 + 2 * 2) + 1 + 2;
    REQUIRE(r.items >= 4);
    CHECK(r.records == r.items * conds);
    std::size_t upstream = 0, without_baselines = 0;
    for (const std::string& l : lines(read_text(o.out / "items.jsonl"))) {
        const nlohmann::json rec = nlohmann::json::parse(l);
        REQUIRE(rec["watch"].size() == 2);
        CHECK(rec["watch"][0]["layer"] == 3);
        CHECK(rec["watch"][0]["head"] == 0);
        // the reader watched is the reader: the same attention, bit for bit
        CHECK(rec["watch"][1]["attA"] == rec["attA"]);
        CHECK(rec["watch"][1]["attB"] == rec["attB"]);
        upstream += rec["kind"] == "upstream";
        if (rec.contains("without")) {
            CHECK(rec["without"] == "0");
            CHECK(rec["without_layers"] == nlohmann::json::array({0}));
            without_baselines += rec["kind"] == "baseline";
        }
    }
    CHECK(upstream == r.items * 4);
    CHECK(without_baselines == r.items);
    const nlohmann::json rows = nlohmann::json::parse(read_text(o.out / "summary.json"));
    REQUIRE(rows.size() == conds);
    for (const nlohmann::json& row : rows) {
        CAPTURE(row["condition"]);
        REQUIRE(row["watch"].size() == 2);
        CHECK(row["watch"][0]["head"] == "L3H0");
        CHECK(row["watch"][1]["head"] == "L3H1");
        for (const char* m : {"attA", "attB"})  // the same values and bootstrap draws: the same interval
            for (const char* f : {"mean", "lo", "hi", "n", "sd_seeds"}) CHECK(row["watch"][1][m][f] == row[m][f]);
    }
    const std::vector<std::string> csv = lines(read_text(o.out / "summary.csv"));
    CHECK(csv[0].find(",attB_sd_seeds,L3H0_attA,L3H0_attA_lo,L3H0_attA_hi,L3H0_attB,L3H0_attB_lo,L3H0_attB_hi,L3H1_attA,") !=
          std::string::npos);
    const nlohmann::json run = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run["study"]["watch"] == nlohmann::json::array({"L3H0", "L3H1"}));
    // A resume with other watched heads is another study.
    ex::TransplantStudyOptions other = o;
    other.resume = true;
    other.watch = {{3, 2}};
    CHECK_THROWS_AS(run_study(other), Error);
}

TEST_CASE("query-map: shuffled rows are a fixed permutation of the rows") {
    std::vector<float> X;
    for (int i = 0; i < 12; ++i)
        for (int c = 0; c < 3; ++c) X.push_back(static_cast<float>(10 * i + c));
    const std::vector<float> a = ex::detail::shuffled_rows(X, 12, 4), b = ex::detail::shuffled_rows(X, 12, 4);
    CHECK(a == b);
    CHECK(a != X);
    std::vector<int> seen(12, 0);
    for (std::size_t r = 0; r < 12; ++r) {
        const int i = static_cast<int>(a[r * 3]) / 10;
        REQUIRE((i >= 0 && i < 12));
        ++seen[static_cast<std::size_t>(i)];
        CHECK(a[r * 3 + 1] == static_cast<float>(10 * i + 1));  // whole rows move
        CHECK(a[r * 3 + 2] == static_cast<float>(10 * i + 2));
    }
    CHECK(std::count(seen.begin(), seen.end(), 1) == 12);
    CHECK(ex::detail::shuffled_rows(X, 12, 5) != a);
    const auto conds = ex::query_map_conditions({"G0", "embedding"}, {20});
    std::vector<std::string> names;
    for (const auto& c : conds) names.push_back(c.name);
    CHECK(names == std::vector<std::string>{"A", "B", "in_family", "mean", "map:G0", "self:G0", "shuffled:G0", "map:embedding",
                                            "self:embedding", "shuffled:embedding", "map:G0@20", "map:embedding@20"});
}

TEST_CASE("query-map study on models/qwen35-tiny (donor = receiver)") {
    const AnyModel model = load(kOrganism);
    const Tokenizer tok = Tokenizer::from_file((kOrganism / "tokenizer.json").string());
    const ChatFormat fmt = chat_format(ChatFamily::qwen35);
    const fs::path root = fresh_dir("query_map");
    const auto opts = [&](const fs::path& out) {
        ex::QueryMapOptions o;
        o.out = out;
        o.n_pairs = 4;  // the organism's in-family vocabulary has 10 keys: 5 per half of the key split
        o.fit_items = 40;
        o.per_config = 2;
        o.seeds = {3};
        o.sources = ex::parse_blocks("G0,1", {{0, 1, 2}}, 4);
        o.address = {0, 1, 2};
        o.curve = {20};
        o.reader = {3, 1};
        o.vocabulary = lk::in_family_vocabulary(tok);
        o.progress = false;
        return o;
    };
    const auto run_study = [&](const ex::QueryMapOptions& o) {
        return model.visit([&](const auto& m) { return ex::run_query_map_study(m, tok, fmt, m, tok, fmt, o); });
    };
    const ex::QueryMapResult full = run_study(opts(root / "full"));
    const std::size_t conds = 4 + 3 * 3 + 3;  // A, B, in_family, mean; map/self/shuffled x 3 sources; 3 curve points
    REQUIRE(full.items >= 4);
    CHECK(full.records == full.items * conds);
    const std::string items = read_text(root / "full" / "items.jsonl");
    const nlohmann::json run = nlohmann::json::parse(read_text(root / "full" / "run.json"));
    CHECK(run["kind"] == "query-map");
    for (const char* f : {"G0", "1", "embedding", "shuffled:G0", "G0@20"}) CHECK(run["fits"]["3"].contains(f));
    CHECK(run["fits"]["3"]["G0"]["in"] == 3 * 64);
    CHECK(run["fits"]["3"]["G0"]["out"] == 3 * 64);
    CHECK(run["fits"]["3"]["embedding"]["in"] == 64);

    // A, B and in_family against the transplant study's runner on the same pairs.
    std::map<std::pair<std::size_t, std::string>, nlohmann::json> by;
    for (const std::string& l : lines(items)) {
        const nlohmann::json r = nlohmann::json::parse(l);
        by[{r["item"].get<std::size_t>(), r["condition"].get<std::string>()}] = r;
    }
    const lk::KeySplit split = lk::key_split(lk::in_family_vocabulary(tok).keys, 3);
    const lk::DonorHostSet test =
        lk::donor_host_pairs(tok, fmt, lk::Style::chat, {split.test, lk::in_family_vocabulary(tok).values}, 2, 3, 4);
    REQUIRE(test.items.size() == full.items);
    const auto blocks = ex::parse_blocks("0-2", {}, 4);
    const auto tconds = ex::transplant_conditions({ex::TransplantKind::mixer}, blocks, {ex::PositionSet::final_position});
    model.visit([&](const auto& m) {
        for (const lk::DonorHostItem& di : test.items) {
            const ex::TransplantItem it = ex::transplant_item(di);
            for (const auto& [qm, tc] : {std::pair<std::string, std::size_t>{"A", 0}, {"B", 1}, {"in_family", 2}}) {
                CAPTURE(qm);
                const nlohmann::json want =
                    ex::transplant_record("x", 3, di.index, tconds[tc], 0, ex::run_transplant_condition(m, it, tconds[tc], {3, 1}));
                const nlohmann::json& got = by.at({di.index, qm});
                for (const char* k : {"ansA", "ansB", "dAB", "attA", "attB"}) CHECK(got[k] == want[k]);
            }
        }
    });

    SUBCASE("a second run, a resumed run and merged shards give the same bytes") {
        run_study(opts(root / "again"));
        CHECK(read_text(root / "again" / "items.jsonl") == items);
        CHECK(read_text(root / "again" / "summary.json") == read_text(root / "full" / "summary.json"));
        const fs::path d = root / "killed";
        fs::create_directories(d);
        const std::vector<std::string> ls = lines(items);
        std::string part;
        for (std::size_t i = 0; i < ls.size() / 3; ++i) part += ls[i] + "\n";
        std::ofstream(d / "items.jsonl", std::ios::binary) << part << ls[ls.size() / 3].substr(0, 7);
        std::ofstream(d / "run.json", std::ios::binary)
            << hylens::test::as_killed(nlohmann::json::parse(read_text(root / "full" / "run.json"))).dump(1);
        auto o = opts(d);
        o.resume = true;
        CHECK(run_study(o).resumed == ls.size() / 3);
        CHECK(read_text(d / "items.jsonl") == items);
        std::vector<fs::path> dirs;
        for (std::size_t s = 0; s < 2; ++s) {
            auto os = opts(root / ("shard" + std::to_string(s)));
            os.shard = {s, 2};
            run_study(os);
            dirs.push_back(os.out);
        }
        ex::merge_study_folders(dirs, root / "merged", "query-map",
                                [](const fs::path& out, const std::vector<nlohmann::json>& recs) {
                                    ex::write_transplant_summaries(out, recs);
                                });
        CHECK(read_text(root / "merged" / "items.jsonl") == items);
        CHECK(read_text(root / "merged" / "summary.csv") == read_text(root / "full" / "summary.csv"));
    }
}

#ifdef HYLENS_CLI
using hylens::test::kCli;
using hylens::test::sh;

TEST_CASE("transplant and query-map studies: another model's circuit file, and a model that produces a NaN, stop them") {
    const fs::path root = fresh_dir("stops");
    const Tokenizer tok = Tokenizer::from_file((kOrganism / "tokenizer.json").string());
    const ChatFormat fmt = chat_format(ChatFamily::qwen35);
    const auto transplant = [&](const AnyModel& model, const fs::path& out, std::optional<hylens::CircuitRoles> circuit) {
        ex::TransplantStudyOptions o;
        o.out = out;
        o.per_config = 1;
        o.seeds = {1};
        o.blocks = ex::parse_blocks("G0", {{0, 1, 2}}, 4);
        o.positions = {ex::PositionSet::final_position};
        o.circuit = std::move(circuit);
        o.progress = false;
        return model.visit([&](const auto& m) { return ex::run_transplant_study(m, tok, fmt, o); });
    };
    const auto query_map = [&](const AnyModel& model, const fs::path& out, std::optional<hylens::CircuitRoles> circuit) {
        ex::QueryMapOptions o;
        o.out = out;
        o.n_pairs = 4;
        o.fit_items = 20;
        o.per_config = 1;
        o.seeds = {3};
        o.sources = ex::parse_blocks("1", {}, 4);
        o.address = {0, 1, 2};
        o.vocabulary = lk::in_family_vocabulary(tok);
        o.circuit = std::move(circuit);
        o.progress = false;
        return model.visit([&](const auto& m) { return ex::run_query_map_study(m, tok, fmt, m, tok, fmt, o); });
    };
    // A Granite-layout circuit (linear layers 0, 1, 3; softmax layer 2) on the Qwen3.5-layout organism.
    const AnyModel model = load(kOrganism);
    nlohmann::json j = {{"encode", {{"layers", {0, 1}}}}, {"address", {{"layers", {0, 1, 2}}}}, {"reader", {{"layer", 2}, {"head", 0}}}};
    for (int l : {0, 1, 3}) j["layers"].push_back({{"layer", l}});
    j["reader_candidates"].push_back({{"layer", 2}, {"head", 0}});
    const hylens::CircuitRoles foreign = hylens::circuit_from_json(j);
    CHECK_THROWS_WITH_AS(transplant(model, root / "t_foreign", foreign),
                         doctest::Contains("[transplant] the circuit file was found on another model"), ShapeError);
    CHECK_THROWS_WITH_AS(query_map(model, root / "q_foreign", foreign),
                         doctest::Contains("[query-map] the circuit file was found on another model"), ShapeError);
    CHECK_FALSE(fs::exists(root / "t_foreign" / "items.jsonl"));
    CHECK_FALSE(fs::exists(root / "q_foreign" / "items.jsonl"));

    // A tokenizer without a token of the chat format is refused before the folder is made (the
    // prompts' check came after it: an empty items.jsonl and a "running" run.json were left),
    // and query-map names which of its two tokenizers it is.
    const Tokenizer stripped =
        Tokenizer::from_string(hylens::test::tokenizer_without(kOrganism / "tokenizer.json", "<|im_start|>"));
    REQUIRE_FALSE(stripped.token_to_id("<|im_start|>").has_value());
    ex::TransplantStudyOptions to;
    to.out = root / "t_stripped";
    to.seeds = {1};
    to.blocks = ex::parse_blocks("G0", {{0, 1, 2}}, 4);
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_transplant_study(m, stripped, fmt, to); }),
                         "[chat] the tokenizer has no token '<|im_start|>', which the chat format writes (is it the "
                         "model's tokenizer.json?)", hylens::FormatError);
    ex::QueryMapOptions qo;
    qo.out = root / "q_stripped";
    qo.seeds = {3};
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_query_map_study(m, tok, fmt, m, stripped, fmt, qo); }),
                         doctest::Contains("[chat] the donor's tokenizer has no token '<|im_start|>'"), hylens::FormatError);
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_query_map_study(m, stripped, fmt, m, tok, fmt, qo); }),
                         doctest::Contains("[chat] the receiver's tokenizer has no token '<|im_start|>'"), hylens::FormatError);
    CHECK_FALSE(fs::exists(root / "t_stripped"));
    CHECK_FALSE(fs::exists(root / "q_stripped"));
    // No donor block and no key embedding: the message says how to give a source.
    ex::QueryMapOptions no_source;
    no_source.out = root / "q_no_source";
    no_source.seeds = {3};
    no_source.address = {3};
    no_source.embedding_source = false;
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_query_map_study(m, tok, fmt, m, tok, fmt, no_source); }),
                         doctest::Contains("[query-map] no donor source: no donor layer block"), hylens::Error);
    CHECK_FALSE(fs::exists(root / "q_no_source"));

    // NaN weights in layer 1's MLP: the study stops there (it ran to the end with null scores).
    const fs::path damaged = hylens::test::damaged_model(kOrganism, root / "damaged", "model.layers.1.mlp.down_proj.weight");
    const AnyModel bad = load(damaged);
    for (const auto& [name, runs] : std::vector<std::pair<std::string, std::function<void(const fs::path&)>>>{
             {"transplant", [&](const fs::path& out) { (void)transplant(bad, out, std::nullopt); }},
             {"query-map", [&](const fs::path& out) { (void)query_map(bad, out, std::nullopt); }}}) {
        INFO(name);
        CHECK_THROWS_WITH_AS(runs(root / name), doctest::Contains("first non-finite value (nan) at layer 1, site mlp_out"),
                             hylens::NonFiniteError);
        CHECK_FALSE(fs::exists(root / name / "summary.json"));
    }
}

TEST_CASE("hylens experiment transplant end to end on models/qwen35-tiny") {
    const fs::path root = fresh_dir("cli");
    const std::string base = kCli + " experiment transplant --model " + kOrganism.string() +
                             " --per-config 1 --blocks G0 --positions final --kind mixer,state --reader 3:0 --no-progress";
    const std::string quiet = " >" + (root / "log").string() + " 2>&1";
    SUBCASE("usage errors") {
        CHECK(sh(base + " --out " + (root / "x").string() + " --bogus 1" + quiet) == 2);
        CHECK(sh(base + " --out " + (root / "x").string() + " --kind residual" + quiet) == 2);
        CHECK(sh(base + " --out " + (root / "x").string() + " --positions middle" + quiet) == 2);
        const std::string no_kind = kCli + " experiment transplant --model " + kOrganism.string() +
                                    " --per-config 1 --blocks G0 --positions final --reader 3:0 --no-progress --out " +
                                    (root / "x").string();
        CHECK(sh(no_kind + " --kind upstream" + quiet) == 2);
        CHECK(read_text(root / "log").find("--kind upstream needs --upstream BLOCKS") != std::string::npos);
        CHECK(sh(no_kind + " --upstream 0" + quiet) == 2);
        CHECK(read_text(root / "log").find("--upstream is read by --kind upstream alone") != std::string::npos);
        CHECK(sh(base + " --out " + (root / "x").string() + " --watch 3" + quiet) == 2);
        CHECK(read_text(root / "log").find("--watch '3' is not LAYER:HEAD") != std::string::npos);
        CHECK(sh(base + " --out " + (root / "x").string() + " --reader 3" + quiet) == 2);
        CHECK(sh(base + " --out " + (root / "x").string() + " --seed 2 --seeds 1,2" + quiet) == 2);  // one or the other
        CHECK(sh(base + " --out " + (root / "x").string() + " --seeds 1,1" + quiet) == 2);
        CHECK(read_text(root / "log").find("seed 1 is listed twice") != std::string::npos);
        CHECK(sh(kCli + " experiment transplant --model " + kOrganism.string() + quiet) == 2);  // no --out
        CHECK(sh(kCli + " experiment transplant --model " + kOrganism.string() + " --blocks G7 --out " + (root / "x").string() +
                 quiet) == 1);  // checked against the model: an error, not a usage error
        CHECK(read_text(root / "log").find("G7") != std::string::npos);
        // The syntax of a block list is a usage error before the model loads (a backwards range
        // exited 1 after it): --blocks, --upstream, and query-map's --address and --sources.
        CHECK(sh(kCli + " experiment transplant --model " + kOrganism.string() + " --blocks 3-1 --out " + (root / "x").string() +
                 quiet) == 2);
        CHECK(read_text(root / "log").find("--blocks: [blocks] block '3-1': range 3-1 runs backwards (write 1-3)") !=
              std::string::npos);
        CHECK(sh(no_kind + " --kind upstream --upstream 0,,1" + quiet) == 2);
        CHECK(read_text(root / "log").find("--upstream: [blocks] empty block in '0,,1'") != std::string::npos);
        CHECK(sh(kCli + " experiment query-map --model " + kOrganism.string() + " --address G --out " + (root / "x").string() +
                 quiet) == 2);
        CHECK(read_text(root / "log").find("--address: [blocks] block 'G': '' is not a layer number") != std::string::npos);
        CHECK(sh(kCli + " experiment query-map --model " + kOrganism.string() + " --sources 2-x --out " + (root / "x").string() +
                 quiet) == 2);
        CHECK(read_text(root / "log").find("--sources: [blocks] block '2-x'") != std::string::npos);
        CHECK_FALSE(fs::exists(root / "x" / "items.jsonl"));
        // A head the reader layer does not have (it failed inside the attention capture).
        CHECK(sh(kCli + " experiment transplant --model " + kOrganism.string() +
                 " --per-config 1 --blocks G0 --positions final --kind mixer --reader 3:99 --out " + (root / "h").string() +
                 quiet) == 1);
        CHECK(read_text(root / "log").find("the reader head 99 is not a head of layer 3 (4 query heads)") != std::string::npos);
    }
    SUBCASE("a run, two shards merged by `hylens experiment merge`, the figure") {
        REQUIRE(sh(base + " --out " + (root / "full").string() + quiet) == 0);
        for (const char* f : {"items.jsonl", "summary.json", "summary.csv", "run.json"}) CHECK(fs::exists(root / "full" / f));
        const nlohmann::json run = nlohmann::json::parse(read_text(root / "full" / "run.json"));
        CHECK(run["kind"] == "transplant");
        CHECK(run["study"]["reader"]["layer"] == 3);
        // Two seeds: each seed's pairs, the summary's per-seed means and their sd.
        REQUIRE(sh(base + " --seeds 1,2 --out " + (root / "two").string() + quiet) == 0);
        const nlohmann::json two = nlohmann::json::parse(read_text(root / "two" / "summary.json"));
        REQUIRE(!two.empty());
        CHECK(two[0]["seeds"] == nlohmann::json::array({1, 2}));
        CHECK(two[0]["dAB"]["per_seed"].size() == 2);
        CHECK(two[0]["dAB"]["sd_seeds"].is_number());
        CHECK(nlohmann::json::parse(read_text(root / "two" / "run.json"))["study"]["seeds"] == nlohmann::json::array({1, 2}));
        REQUIRE(sh(base + " --shard 0/2 --out " + (root / "s0").string() + quiet) == 0);
        REQUIRE(sh(base + " --shard 1/2 --out " + (root / "s1").string() + quiet) == 0);
        REQUIRE(sh(kCli + " experiment merge " + (root / "s0").string() + " " + (root / "s1").string() + " --out " +
                   (root / "merged").string() + quiet) == 0);
        CHECK(read_text(root / "merged" / "items.jsonl") == read_text(root / "full" / "items.jsonl"));
        CHECK(read_text(root / "merged" / "summary.csv") == read_text(root / "full" / "summary.csv"));
        // exp32-A(iii), C and D with a watched head through the CLI, and the watched head's figure.
        REQUIRE(sh(kCli + " experiment transplant --model " + kOrganism.string() + " --per-config 1 --blocks 2 --positions "
                   "final,question-nofinal --kind mixer_in,resid_pre,upstream --upstream 0,0+1 --reader 3:1 --watch 3:0 "
                   "--no-progress --out " + (root / "exp32").string() + quiet) == 0);
        const nlohmann::json e32 = nlohmann::json::parse(read_text(root / "exp32" / "summary.json"));
        std::vector<std::string> names;
        for (const nlohmann::json& row : e32) names.push_back(row["condition"].get<std::string>());
        CHECK(names == std::vector<std::string>{"A", "B", "mixer_in:2@final", "mixer_in:2@question-nofinal",
                                                "resid_pre:2@final", "resid_pre:2@question-nofinal", "A/without:0",
                                                "mixer:2@final/without:0", "mixer:2@question-nofinal/without:0",
                                                "A/without:0+1", "mixer:2@final/without:0+1",
                                                "mixer:2@question-nofinal/without:0+1"});
        CHECK(e32[0]["watch"][0]["head"] == "L3H0");
        if (hylens::test::figure_scripts_can_run()) {
            CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_transplant.py " +
                     (root / "exp32").string() + " --metric L3H0:attA" + quiet) == 0);
            CHECK(fs::exists(root / "exp32" / "transplant.png"));
            CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_transplant.py " +
                     (root / "exp32").string() + " --metric L3H2:attA" + quiet) != 0);
            CHECK(read_text(root / "log").find("watched no head L3H2 (watched: L3H0)") != std::string::npos);
        }
        if (hylens::test::figure_scripts_can_run()) {
            CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_transplant.py " +
                     (root / "full").string() + quiet) == 0);
            CHECK(fs::exists(root / "full" / "transplant.png"));
        }
    }
    SUBCASE("query-map: a run, two shards merged, the figure") {
        const std::string qm = kCli + " experiment query-map --model " + kOrganism.string() +
                               " --variant chat4 --fit 30 --curve 15 --per-config 1 --reader 3:1 --no-progress";
        CHECK(sh(qm + " --out " + (root / "q").string() + " --curve 40" + quiet) == 2);  // a curve point beyond --fit
        const std::string qm_head = kCli + " experiment query-map --model " + kOrganism.string() +
                                    " --variant chat4 --fit 30 --curve 15 --per-config 1 --reader 3:77 --no-progress";
        CHECK(sh(qm_head + " --out " + (root / "qh").string() + quiet) == 1);
        CHECK(read_text(root / "log").find("the reader head 77 is not a head of layer 3 (4 query heads)") != std::string::npos);
        // The address is one block; a source or a curve size twice is refused before the folder is made.
        CHECK(sh(qm + " --address 0,1 --out " + (root / "qa").string() + quiet) == 2);  // before the model loads
        CHECK(read_text(root / "log").find("--address '0,1' names more than one block") != std::string::npos);
        CHECK(sh(qm + " --sources G9 --out " + (root / "qa").string() + quiet) == 1);
        CHECK(read_text(root / "log").find("[query-map] the donor's sources 'G9': ") != std::string::npos);
        CHECK(sh(kCli + " experiment query-map --model " + kOrganism.string() +
                 " --variant chat4 --fit 30 --curve 15,15 --per-config 1 --reader 3:1 --no-progress --out " +
                 (root / "qa").string() + quiet) == 1);
        CHECK(read_text(root / "log").find("the condition map:G0@15 comes twice") != std::string::npos);
        CHECK_FALSE(fs::exists(root / "qa"));
        REQUIRE(sh(qm + " --out " + (root / "q").string() + quiet) == 0);
        REQUIRE(sh(qm + " --shard 0/2 --out " + (root / "q0").string() + quiet) == 0);
        REQUIRE(sh(qm + " --shard 1/2 --out " + (root / "q1").string() + quiet) == 0);
        REQUIRE(sh(kCli + " experiment merge " + (root / "q0").string() + " " + (root / "q1").string() + " --out " +
                   (root / "qm").string() + quiet) == 0);
        CHECK(read_text(root / "qm" / "items.jsonl") == read_text(root / "q" / "items.jsonl"));
        CHECK(read_text(root / "qm" / "summary.json") == read_text(root / "q" / "summary.json"));
        if (hylens::test::figure_scripts_can_run()) {
            CHECK(sh("/usr/bin/python3 " + std::string(HYLENS_SOURCE_DIR) + "/scripts/plot_transplant.py " +
                     (root / "q").string() + quiet) == 0);
            CHECK(fs::exists(root / "q" / "query_map.png"));
        }
    }
}
#endif
