// The encode-swap study (experiments/encode_swap_study.hpp) on the trained Qwen3.5-layout
// organism: exact identities between its records and independent runs (the host alone is the
// circuit study's clean / corrupted run; a key swap of the embeddings at every key token is the
// donor's own run), the structure of the files, shards merged == one run, resume.

#include <doctest/doctest.h>

#include <hylens/experiments/circuit_study.hpp>
#include <hylens/experiments/encode_swap_study.hpp>
#include <hylens/experiments/prompt.hpp>
#include <hylens/models/load.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.hpp"
#include "support/damaged_model.hpp"
#include "support/killed_run.hpp"

namespace {

namespace fs = std::filesystem;
namespace ex = hylens::experiments;
namespace lk = hylens::tasks::lookup;
using hylens::test::studies::read_text;
using hylens::test::studies::TempDir;
using hylens::test::studies::write_text;
using hylens::test::studies::records_of;


ex::EncodeSwapOptions swap_options(const fs::path& out) {
    ex::EncodeSwapOptions o;
    o.variant = "chat8";
    o.per_config = 3;
    o.seed = 5;
    o.encode = {0, 1, 2};
    o.out = out;
    o.progress = false;
    o.bootstrap.resamples = 200;
    return o;
}

}  // namespace

TEST_CASE("encode-swap on qwen35-tiny: records, identities with independent runs, shards, resume") {
    TempDir d("encode_swap");
    const fs::path model_dir = d.path / "qwen35-tiny";
    fs::create_directories(model_dir);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
        fs::copy_file(fs::path(HYLENS_MODELS_DIR) / "qwen35-tiny" / f, model_dir / f);
    const hylens::AnyModel model = hylens::load(model_dir);
    const hylens::Tokenizer tok = hylens::Tokenizer::from_file((model_dir / "tokenizer.json").string());
    const hylens::ChatFamily family = ex::chat_family(model.config().model_type);
    const auto run = [&](const ex::EncodeSwapOptions& o) {
        return model.visit([&](const auto& m) { return ex::run_encode_swap_study(m, tok, family, o); });
    };

    const ex::EncodeSwapOptions o = swap_options(d.path / "run");
    const ex::EncodeSwapResult r = run(o);
    REQUIRE(r.items >= 1);
    REQUIRE(r.key_items >= 1);  // the key-swap identities below must run
    // The Encode block is the only block of this organism: no other_block control.
    CHECK(ex::encode_swap_sources(o) == std::vector<std::string>{"none", "bind", "embedding", "mean"});
    CHECK(r.records == 4 * (r.items + r.key_items));
    const nlohmann::json run_json = nlohmann::json::parse(read_text(o.out / "run.json"));
    CHECK(run_json["kind"] == "encode-swap");
    CHECK(run_json["status"] == "complete");
    CHECK(run_json["key_swap_items"] == r.key_items);

    // Independent runs of the same pairs.
    const auto set = lk::clean_corrupt_pairs(tok, hylens::chat_format(family), lk::parse_variant("chat8"),
                                             lk::in_family_vocabulary(tok), 3, 5);
    REQUIRE(set.items.size() == r.items);
    std::map<std::size_t, const lk::CleanCorruptItem*> by_index;
    for (const auto& it : set.items) by_index[it.index] = &it;
    const auto last_logits = [&](const std::vector<std::int64_t>& ids) {
        hylens::RunOptions ro;
        ro.last_only = true;
        return model.visit([&](const auto& m) { return hylens::run(m, hylens::TokenBatch(ids), {}, ro).logits; });
    };
    lk::Drops drops;
    std::size_t checked_key = 0;
    for (const auto& rec : records_of(o.out)) {
        const lk::CleanCorruptItem& it = *by_index.at(rec["item"].get<std::size_t>());
        const std::string cond = rec["condition"];
        if (cond == "value:none") {
            // The corrupted prompt alone: D(v_t - v_d) = the circuit study's d_corrupt.
            const auto l = last_logits(it.corrupt_ids);
            CHECK(rec["dAB"].get<double>() == hylens::logit_diff(hylens::logits_row(l), model.config().vocab, it.answer, it.corrupt_answer));
            CHECK(rec["positions"] == std::vector<std::size_t>{it.clean.values[it.target][0]});
        }
        if (cond == "key:none") {
            const auto l = last_logits(it.clean.ids);
            CHECK(rec["dAB"].get<double>() == hylens::logit_diff(hylens::logits_row(l), model.config().vocab, it.corrupt_answer, it.answer));
        }
        if (cond == "key:embedding") {
            // The donor differs from the host only at the key tokens, so writing the donor's
            // embeddings at all of them is the donor's own run, bit for bit.
            const auto ks = lk::key_swap(tok, hylens::chat_format(family), lk::parse_variant("chat8"), it, drops);
            REQUIRE(ks.has_value());
            const auto l = last_logits(ks->ids);
            CHECK(rec["dAB"].get<double>() == hylens::logit_diff(hylens::logits_row(l), model.config().vocab, it.corrupt_answer, it.answer));
            CHECK(rec["success"].get<bool>() == (hylens::argmax(hylens::logits_row(l), model.config().vocab) == it.corrupt_answer));
            ++checked_key;
        }
    }
    CHECK(checked_key == r.key_items);

    // summary.csv: one row per condition with its n.
    const std::string csv = read_text(o.out / "summary.csv");
    CHECK(csv.find("value:bind,value,bind," + std::to_string(r.items) + ",") != std::string::npos);
    CHECK(csv.find("key:mean,key,mean," + std::to_string(r.key_items) + ",") != std::string::npos);

    // Shards merged == one run.
    std::vector<fs::path> dirs;
    for (std::size_t i = 0; i < 2; ++i) {
        ex::EncodeSwapOptions s = swap_options(d.path / ("s" + std::to_string(i)));
        s.shard = {i, 2};
        run(s);
        dirs.push_back(s.out);
    }
    const nlohmann::json def = run_json["study"];
    ex::merge_study_folders(dirs, d.path / "merged", "encode-swap", [&](const fs::path& out, const std::vector<nlohmann::json>& recs) {
        ex::write_encode_swap_summaries(out, recs, def, o.bootstrap);
    });
    for (const char* f : {"items.jsonl", "summary.csv", "summary.json"})
        CHECK_MESSAGE(read_text(d.path / "merged" / f) == read_text(o.out / f), f);

    // Killed mid-line and resumed == one run.
    const fs::path cut = d.path / "cut";
    fs::create_directories(cut);
    write_text(cut / "run.json", hylens::test::as_killed(run_json).dump(1));
    const std::string all = read_text(o.out / "items.jsonl");
    write_text(cut / "items.jsonl", all.substr(0, all.find('\n', all.size() / 3) + 7));
    ex::EncodeSwapOptions res = swap_options(cut);
    res.resume = true;
    const ex::EncodeSwapResult rr = run(res);
    CHECK(rr.resumed >= 1);
    CHECK(read_text(cut / "items.jsonl") == all);
    CHECK(read_text(cut / "summary.csv") == csv);

    // A layer that is not a linear layer of the model (a circuit of another model) is an error.
    ex::EncodeSwapOptions bad = swap_options(d.path / "bad");
    bad.encode = {3};
    CHECK_THROWS_WITH_AS(run(bad), doctest::Contains("not a linear layer"), hylens::Error);
}

TEST_CASE("encode-swap refuses a circuit file found on another model (check_circuit_model, which transplant and query-map run too)") {
    // A Granite-layout circuit (linear layers 0, 1, 3; softmax layer 2) ran on the Qwen3.5-layout
    // organism (linear 0-2, softmax 3): its Encode layers 0-1 are linear there too, so nothing failed.
    TempDir d("encode_swap_foreign");
    const hylens::AnyModel model = hylens::load(fs::path(HYLENS_MODELS_DIR) / "qwen35-tiny");
    const hylens::Tokenizer tok = hylens::Tokenizer::from_file((fs::path(HYLENS_MODELS_DIR) / "qwen35-tiny" / "tokenizer.json").string());
    const hylens::ChatFamily family = ex::chat_family(model.config().model_type);
    const std::size_t heads = model.visit([](const auto& m) { return hylens::attention_heads(m.stack(), 3); });
    const auto circuit = [&](std::vector<int> linear, int softmax) {
        nlohmann::json j = {{"encode", {{"layers", {0, 1}}}}, {"address", {{"layers", {0, 1}}}},
                            {"reader", {{"layer", softmax}, {"head", 0}}}};
        for (int l : linear) j["layers"].push_back({{"layer", l}});
        for (std::size_t h = 0; h < heads; ++h) j["reader_candidates"].push_back({{"layer", softmax}, {"head", h}});
        return hylens::circuit_from_json(j);
    };
    const hylens::CircuitRoles foreign = circuit({0, 1, 3}, 2), own = circuit({0, 1, 2}, 3);
    CHECK(own.found_linear == std::vector<hylens::LayerIndex>{0, 1, 2});
    CHECK(own.found_heads == std::vector<std::pair<hylens::LayerIndex, std::size_t>>{{3, heads}});
    model.visit([&](const auto& m) {
        CHECK_NOTHROW(hylens::check_circuit_model(own, m.stack(), "test"));
        CHECK_THROWS_WITH_AS(hylens::check_circuit_model(foreign, m.stack(), "test"),
                             doctest::Contains("[test] the circuit file was found on another model (linear layers 0 1 3, "
                                               "softmax layers 2"),
                             hylens::ShapeError);
        hylens::CircuitRoles old_file = foreign;  // a file without the scans: nothing to compare
        old_file.found_linear.clear();
        old_file.found_heads.clear();
        CHECK_NOTHROW(hylens::check_circuit_model(old_file, m.stack(), "test"));
    });
    ex::EncodeSwapOptions o = swap_options(d.path / "run");
    ex::set_encode_swap_roles(o, foreign);
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_encode_swap_study(m, tok, family, o); }),
                         doctest::Contains("[encode-swap] the circuit file was found on another model"), hylens::ShapeError);
    CHECK_FALSE(fs::exists(d.path / "run"));
}

TEST_CASE("encode-swap: a model that produces a NaN stops the study at the layer and site (no null scores)") {
    TempDir d("encode_swap_nan");
    const fs::path src = organism_copy("qwen35-tiny", d.path);
    const fs::path dir = hylens::test::damaged_model(src, d.path / "damaged", "model.layers.1.mlp.down_proj.weight");
    const hylens::AnyModel model = hylens::load(dir);
    const hylens::Tokenizer tok = hylens::Tokenizer::from_file((src / "tokenizer.json").string());
    const ex::EncodeSwapOptions o = swap_options(d.path / "out");
    CHECK_THROWS_WITH_AS(model.visit([&](const auto& m) { return ex::run_encode_swap_study(m, tok, hylens::ChatFamily::qwen35, o); }),
                         doctest::Contains("first non-finite value (nan) at layer 1, site mlp_out"), hylens::NonFiniteError);
    CHECK_FALSE(fs::exists(d.path / "out" / "summary.json"));
}
