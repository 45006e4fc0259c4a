// Conditions of the channel study: names, layer sets, --layers sweeps, and the caches they
// build, checked against the surgery ops they are defined by.

#include <hylens/experiments/condition_cache.hpp>
#include <hylens/experiments/conditions.hpp>
#include <hylens/models/load.hpp>

#include <doctest/doctest.h>

#include <filesystem>

#include "../support/random_ids.hpp"

using namespace hylens;
using namespace hylens::experiments;

TEST_CASE("conditions: names parse, print back, and bad names are errors") {
    for (const auto& n : condition_bases()) CHECK(parse_condition(n).name() == n);
    const Condition c = parse_condition("KV_A+REC_B@4-6+0");
    CHECK(c.kind == ConditionKind::swap);
    CHECK(c.kv == Source::A);
    CHECK(c.rec == Source::B);
    CHECK(c.name() == "KV_A+REC_B@0+4-6");
    CHECK(c.layers_text() == "0+4-6");
    CHECK(parse_condition("KV_ONLY").layers_text() == "all");
    CHECK(parse_condition("KV_B+REC_A").edits_kv());
    CHECK_FALSE(parse_condition("KV_B+REC_A").edits_recurrent());
    CHECK(parse_condition("NONE").edits_kv());
    CHECK(parse_condition("NONE").edits_recurrent());
    CHECK(parse_condition("KV_ONLY").score_context().recurrent == Source::none);
    CHECK(parse_condition("KV_ONLY").score_context().kv == Source::A);
    CHECK(parse_condition("REC_ONLY").score_context().kv == Source::none);
    CHECK(parse_condition("KV_B+REC_A").score_context().kv == Source::B);
    CHECK(parse_condition("KV_B+REC_B").same_source());
    CHECK(format_layer_set({5, 1, 2, 3, 7, 8}) == "1-3+5+7-8");
    CHECK(parse_layer_set("7+1-3+2") == std::vector<std::size_t>{1, 2, 3, 7});
    CHECK(parse_conditions("FULL,KV_ONLY@2").size() == 2);

    CHECK_THROWS_AS(parse_condition("full"), Error);
    CHECK_THROWS_AS(parse_condition("KV_C+REC_A"), Error);
    CHECK_THROWS_AS(parse_condition("FULL@1"), Error);        // edits nothing
    CHECK_THROWS_AS(parse_condition("KV_A+REC_A@1"), Error);  // edits nothing
    CHECK_THROWS_AS(parse_condition("KV_ONLY@3-1"), Error);   // empty range
    CHECK_THROWS_AS(parse_condition("KV_ONLY@x"), Error);
    CHECK_THROWS_AS(parse_condition("KV_ONLY@"), Error);
    CHECK_THROWS_AS(parse_conditions("FULL,,NONE"), Error);
    CHECK_THROWS_AS(parse_conditions("FULL,FULL"), Error);
    CHECK_THROWS_AS(parse_layer_spec("single,bogus"), Error);
    CHECK_THROWS_AS(parse_layer_spec(""), Error);
}

TEST_CASE("conditions: --layers expands per edited channel (single, cumulative, cumulative-top, sets)") {
    // Qwen3.5 layout of 8 layers: attention at 3 and 7.
    const ChannelLayers qwen{8, {3, 7}, {0, 1, 2, 4, 5, 6}};
    const auto listed = parse_conditions("FULL,KV_ONLY,REC_ONLY,KV_A+REC_B,KV_B+REC_A,KV_A+REC_A");
    const auto names = [](const std::vector<Condition>& v) {
        std::vector<std::string> n;
        for (const auto& c : v) n.push_back(c.name());
        return n;
    };
    CHECK(names(expand_conditions(listed, {}, qwen)) ==
          std::vector<std::string>{"FULL", "KV_ONLY", "REC_ONLY", "KV_A+REC_B", "KV_B+REC_A", "KV_A+REC_A"});
    const auto single = names(expand_conditions(parse_conditions("KV_ONLY,REC_ONLY"), parse_layer_spec("single"), qwen));
    CHECK(single == std::vector<std::string>{"KV_ONLY", "REC_ONLY", "KV_ONLY@0", "KV_ONLY@1", "KV_ONLY@2", "KV_ONLY@4",
                                             "KV_ONLY@5", "KV_ONLY@6", "REC_ONLY@3", "REC_ONLY@7"});
    const auto cum = names(expand_conditions(parse_conditions("REC_ONLY,KV_B+REC_A"), parse_layer_spec("cumulative,cumulative-top,1+3"), qwen));
    // A sweep's set runs when one of its layers holds the edited channel (KV here: 3 and 7);
    // the set 1+3 edits layer 3 (condition_cache below), a set of none is left out.
    CHECK(cum == std::vector<std::string>{"REC_ONLY", "KV_B+REC_A", "REC_ONLY@0-3", "REC_ONLY@0-7", "REC_ONLY@3-7",
                                          "REC_ONLY@7", "REC_ONLY@1+3", "KV_B+REC_A@0-3", "KV_B+REC_A@0-7",
                                          "KV_B+REC_A@3-7", "KV_B+REC_A@7", "KV_B+REC_A@1+3"});
    // A set left out for a condition is described; one left out for every listed condition runs
    // nothing it asks for and is refused (it ran the study without a sweep, silently).
    std::vector<std::string> left_out;
    CHECK(names(expand_conditions(parse_conditions("KV_ONLY,REC_ONLY"), parse_layer_spec("3"), qwen, &left_out)) ==
          std::vector<std::string>{"KV_ONLY", "REC_ONLY", "REC_ONLY@3"});
    CHECK(left_out == std::vector<std::string>{"KV_ONLY@3 left out: no layer of 3 holds a recurrent state, which KV_ONLY edits"});
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("REC_ONLY"), parse_layer_spec("0-2"), qwen),
                         "[layers] --layers set 0-2 runs for no listed condition: no layer of it holds a channel one of "
                         "them edits (layers with KV: 3+7; with a recurrent state: 0-2+4-6)", Error);
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("REC_ONLY,KV_B+REC_A"), parse_layer_spec("single,0-2"), qwen, &left_out),
                         doctest::Contains("--layers set 0-2 runs for no listed condition"), Error);
    CHECK(edited_layers(parse_condition("KV_ONLY@0-4"), qwen) == std::vector<std::size_t>{0, 1, 2, 4});
    CHECK(edited_layers(parse_condition("NONE@2-3"), qwen) == std::vector<std::size_t>{2, 3});
    CHECK(edited_layers(parse_condition("KV_B+REC_A"), qwen) == std::vector<std::size_t>{3, 7});
    // A condition named with a set in which no layer holds its channel edits nothing: refused
    // here, before a study starts (the surgery refused it at the condition's first item).
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("KV_ONLY@3"), {}, qwen),
                         "[conditions] KV_ONLY@3: no layer of 3 holds a recurrent state, which KV_ONLY edits (layers "
                         "with KV: 3+7; with a recurrent state: 0-2+4-6)", Error);
    CHECK_THROWS_AS(expand_conditions(parse_conditions("KV_B+REC_A@0-2"), {}, qwen), Error);
    CHECK(names(expand_conditions(parse_conditions("NONE@2-3"), {}, qwen)) == std::vector<std::string>{"NONE@2-3"});
    // FULL and the same-source controls edit nothing: no sweep, and --layers with only them is
    // refused (it ran the whole-model conditions alone).
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("FULL,KV_B+REC_B"), parse_layer_spec("single"), qwen),
                         doctest::Contains("asks for layer sweeps, but no listed condition edits a channel"), Error);
    CHECK(names(expand_conditions(parse_conditions("FULL,KV_B+REC_B,NONE"), parse_layer_spec("3"), qwen)) ==
          std::vector<std::string>{"FULL", "KV_B+REC_B", "NONE", "NONE@3"});
    // Falcon-H1: both channels in every layer, swept independently.
    const ChannelLayers falcon{2, {0, 1}, {0, 1}};
    CHECK(names(expand_conditions(parse_conditions("NONE"), parse_layer_spec("single"), falcon)) ==
          std::vector<std::string>{"NONE", "NONE@0", "NONE@1"});
    // A model without attention (Granite-4.0-H all Mamba-2): REC_ONLY (it drops KV) has nothing
    // to sweep; beside KV_ONLY it is noted, alone it is refused (it ran without a sweep, silently).
    const ChannelLayers allmamba{3, {}, {0, 1, 2}};
    left_out.clear();
    CHECK(names(expand_conditions(parse_conditions("KV_ONLY,REC_ONLY"), parse_layer_spec("single"), allmamba, &left_out)) ==
          std::vector<std::string>{"KV_ONLY", "REC_ONLY", "KV_ONLY@0", "KV_ONLY@1", "KV_ONLY@2"});
    CHECK(left_out == std::vector<std::string>{"REC_ONLY not swept: no layer of the model holds KV, which REC_ONLY edits"});
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("REC_ONLY,KV_ONLY@1"), parse_layer_spec("cumulative"), allmamba),
                         "[layers] --layers (Python: layers=) adds no condition (REC_ONLY: no layer of the model holds KV, "
                         "which REC_ONLY edits; a condition listed with @SET is not swept; layers with KV: none; with a "
                         "recurrent state: 0-2)", Error);
    // a sweep whose every set is listed already adds nothing either (it passed silently)
    CHECK_THROWS_WITH_AS(expand_conditions(parse_conditions("KV_ONLY,KV_ONLY@1"), parse_layer_spec("1"), allmamba),
                         doctest::Contains("adds no condition (KV_ONLY: each of its sets is listed already or holds none of it;"),
                         Error);
    CHECK_THROWS_AS(expand_conditions(parse_conditions("KV_ONLY@8"), {}, qwen), Error);
    CHECK_THROWS_AS(expand_conditions(parse_conditions("KV_ONLY"), parse_layer_spec("9"), qwen), Error);
}

TEST_CASE("conditions: the cache of each condition is the surgery op it is defined by") {
    const AnyModel any = load(std::filesystem::path(HYLENS_GOLDEN_DIR) / "models" / "qwen3_5_dense");
    any.visit([](const auto& m) {
        using Cache = typename std::decay_t<decltype(m)>::cache_type;
        const std::size_t V = m.config().vocab;
        const Cache a = m.prefill(TokenBatch(test::random_ids(9, V, 1)));
        const Cache b = m.prefill(TokenBatch(test::random_ids(9, V, 2)));
        const auto cc = [&](const char* name) { return condition_cache(parse_condition(name), a, &b); };
        CHECK(cc("FULL").cache == a);
        CHECK(cc("FULL").position == 9);
        CHECK(cc("KV_ONLY").cache == keep_only<channel::kv>(a));
        CHECK(cc("KV_ONLY").position == 9);
        CHECK(cc("REC_ONLY").cache == keep_only<channel::recurrent>(a));
        CHECK(cc("REC_ONLY").position == 0);
        CHECK(cc("NONE").position == 0);
        CHECK(cc("KV_A+REC_B").cache == state_swap(a, b));
        CHECK(cc("KV_B+REC_A").cache == state_swap(b, a));
        CHECK(cc("KV_A+REC_A").cache == a);
        CHECK(cc("KV_B+REC_B").cache == b);
        CHECK(cc("KV_B+REC_B").position == 9);
        // Restricted forms: FULL on A outside the set; whole channel sets give the whole-model form.
        CHECK(cc("KV_ONLY@0-2+4-6").cache == keep_only<channel::kv>(a));
        CHECK(cc("KV_ONLY@1").cache == apply_split_mode(a, SplitMode::KV_ONLY, LayerSet{1}).cache);
        CHECK(cc("REC_ONLY@3+7").cache == keep_only<channel::recurrent>(a));
        CHECK(cc("REC_ONLY@3+7").position == 0);  // no K/V left anywhere: the query starts at 0
        CHECK(cc("REC_ONLY@3").position == 9);    // layer 7 still holds positions 0..8
        CHECK(cc("NONE@3").position == 9);
        CHECK(cc("KV_A+REC_B@0-2+4-6").cache == state_swap(a, b));
        CHECK(cc("KV_A+REC_B@1").cache == state_swap(a, b, LayerSet::all(), LayerSet{1}));
        CHECK(cc("KV_B+REC_A@3+7").cache == state_swap(b, a));
        CHECK(cc("KV_B+REC_A@3").cache != state_swap(b, a));
        // A set that spans layers without the edited channel edits the layers of it that hold it
        // (cumulative sweeps on Qwen3.5: [0, 4] holds the attention layer 3; the surgery refused it).
        CHECK(cc("KV_ONLY@0-7").cache == keep_only<channel::kv>(a));
        CHECK(cc("KV_ONLY@0-4").cache == apply_split_mode(a, SplitMode::KV_ONLY, LayerSet{0, 1, 2, 4}).cache);
        CHECK(cc("REC_ONLY@0-3").cache == cc("REC_ONLY@3").cache);
        CHECK(cc("KV_B+REC_A@2-3").cache == cc("KV_B+REC_A@3").cache);
        CHECK(cc("KV_A+REC_B@3-4").cache == cc("KV_A+REC_B@4").cache);
        CHECK_THROWS_WITH_AS(cc("KV_ONLY@3"), doctest::Contains("no layer of the set holds a channel"), Error);
        const Cache shorter = m.prefill(TokenBatch(test::random_ids(8, V, 3)));
        CHECK_THROWS_AS(condition_cache(parse_condition("KV_A+REC_B"), a, &shorter), Error);
        CHECK_THROWS_AS(condition_cache(parse_condition("KV_A+REC_B"), a, static_cast<const Cache*>(nullptr)), Error);
        const ChannelLayers ch = channel_layers(a);
        CHECK(ch.kv == std::vector<std::size_t>{3, 7});
        CHECK(ch.recurrent == std::vector<std::size_t>{0, 1, 2, 4, 5, 6});
    });
}
