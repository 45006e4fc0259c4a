// Every condition of every model in tests/golden/surgery (split-prefill, state swap, layer
// subsets, SSM-only reset) and the state patches, against the float64 Hugging Face
// reference, from the F32 and the BF16 checkpoints: query logits, greedy ids, the logits
// after each fed greedy token, positions, and KV lengths (manifest atol; ids exact).

#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>

#include "golden_surgery.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace hylens;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kGoldenGen = 4;

template <class Model>
void check_conditions(const Model& m, const test::SurgeryReference& ref, const std::string& label) {
    using Cache = typename Model::cache_type;
    const auto& f = ref.file;
    const TokenBatch query(f.read_i64("query.ids"));
    const Cache a = m.prefill(TokenBatch(f.read_i64("ctx_a.ids")));
    const Cache b = m.prefill(TokenBatch(f.read_i64("ctx_b.ids")));
    const LayerSet s_kv = LayerSet::from_i64(f.read_i64("kv_only_layers.layers"));
    const LayerSet s_swap = LayerSet::from_i64(f.read_i64("swap_ka_rb_layers.layers"));
    // Swaps carry their position in the cache (the KV source's length).
    const auto swapped = [](Cache c) {
        const auto p = static_cast<std::int64_t>(continue_position(c));
        return EditedCache<Cache>{std::move(c), p};
    };
    const std::map<std::string, std::function<EditedCache<Cache>()>> build = {
        {"full", [&] { return apply_split_mode(a, SplitMode::FULL); }},
        {"full_b", [&] { return apply_split_mode(b, SplitMode::FULL); }},
        {"kv_only", [&] { return apply_split_mode(a, SplitMode::KV_ONLY); }},
        {"rec_only", [&] { return apply_split_mode(a, SplitMode::REC_ONLY); }},
        {"none", [&] { return apply_split_mode(a, SplitMode::NONE); }},
        {"swap_ka_rb", [&] { return swapped(state_swap(a, b)); }},
        {"swap_kb_ra", [&] { return swapped(state_swap(b, a)); }},
        {"kv_only_layers", [&] { return apply_split_mode(a, SplitMode::KV_ONLY, s_kv); }},
        {"swap_ka_rb_layers", [&] { return swapped(state_swap(a, b, LayerSet::all(), s_swap)); }},
        {"kv_only_noconv", [&] { return apply_split_mode(a, SplitMode::KV_ONLY, LayerSet::all(), false); }},
    };
    const std::size_t V = m.config().vocab, mq = query.T();
    int compared = 0;
    for (auto it = ref.manifest["conditions"].begin(); it != ref.manifest["conditions"].end(); ++it) {
        const std::string c = it.key();
        INFO(label << ", condition " << c);
        REQUIRE_MESSAGE(build.count(c) == 1, label << ": no construction for condition " << c);
        EditedCache<Cache> e = build.at(c)();
        CHECK(e.position == it.value()["pos0"].get<std::int64_t>());
        GenerateOptions g;
        g.max_new = kGoldenGen;
        g.feed_last = true;
        g.start_position = e.position;
        const GenerateResult r = generate(m, e.cache, query, g);
        ref.check_close(c + ".logits", r.prompt_logits.data(), mq * V, label);
        CHECK(r.ids[0] == f.read_i64(c + ".gen.ids"));
        REQUIRE(r.step_logits.size() == kGoldenGen);
        std::vector<float> steps;
        for (const auto& s : r.step_logits) steps.insert(steps.end(), s.data(), s.data() + V);
        ref.check_close(c + ".gen.logits", steps.data(), steps.size(), label);
        CHECK(r.positions == f.read_i64(c + ".positions"));
        CHECK(e.cache.kv_len() == it.value()["kv_len_after_query_and_gen"].get<std::size_t>());
        ++compared;
    }
    CHECK(compared == 10);
}

/// State patch (Paper A exp32-B): host and donor prefixes [0, Tp-2], recurrent parts of
/// patch.layers (or every layer) copied from the donor, then the host's last token.
template <class Model>
void check_state_patch(const Model& m, const test::SurgeryReference& ref, const std::string& label) {
    using Cache = typename Model::cache_type;
    const auto& f = ref.file;
    std::vector<std::int64_t> donor_ids = f.read_i64("patch.donor.ids"), host_ids = f.read_i64("patch.host.ids");
    const std::int64_t last = host_ids.back();
    const auto pos = static_cast<std::int64_t>(host_ids.size() - 1);
    donor_ids.pop_back();
    host_ids.pop_back();
    const Cache donor = m.prefill(TokenBatch(donor_ids));
    const Cache host = m.prefill(TokenBatch(host_ids));
    const LayerSet layers = LayerSet::from_i64(f.read_i64("patch.layers"));
    const auto final_logits = [&](Cache c, const std::string& name) {
        const std::int64_t p[1] = {pos};
        ForwardOptions o;
        o.positions = p;
        o.last_only = true;
        const Tensor3 l = m.forward(TokenBatch({last}), c, o);
        ref.check_close(name, l.data(), l.size(), label);
    };
    final_logits(host, "state_patch.control.logits_final");
    final_logits(patch_state(host, donor, layers), "state_patch.logits_final");
    final_logits(patch_state(host, donor, layers, false), "state_patch.ssm_only.logits_final");
    final_logits(patch_state(host, donor, LayerSet::all()), "state_patch.all.logits_final");
    // A patch from the host's own cache is exactly the host.
    CHECK(patch_state(host, host, LayerSet::all()) == host);
}

void check_folder(const fs::path& dir, bool bf16) {
    const std::string label = dir.filename().string() + (bf16 ? " (BF16)" : " (F32)");
    const test::SurgeryReference ref(dir);
    const AnyModel model = load(test::surgery_model_dir(dir, bf16));
    model.visit([&](const auto& m) {
        check_conditions(m, ref, label);
        check_state_patch(m, ref, label);
    });
}

}  // namespace

TEST_CASE("golden surgery: every condition of every model, float32 checkpoints") {
    const auto dirs = test::surgery_folders();
    REQUIRE(dirs.size() >= 1);
    for (const auto& dir : dirs) {
        SUBCASE(dir.filename().string().c_str()) { check_folder(dir, false); }
    }
}

TEST_CASE("golden surgery: every condition of every model, bfloat16 checkpoints (same weights)") {
    int n = 0;
    for (const auto& dir : test::surgery_folders()) {
        if (!fs::exists(test::surgery_model_dir(dir, true) / "model.safetensors")) continue;
        ++n;
        SUBCASE(dir.filename().string().c_str()) { check_folder(dir, true); }
    }
    CHECK(n >= 1);
}
