#pragma once
// hylens surgery: the split-prefill / state-swap conditions of tests/golden/README.md
// ("Cache surgery, state swap and patching") on any model folder, from the inputs of a
// surgery reference file, written in the same format.

#include <hylens/cache/layer_set.hpp>
#include <hylens/cache/surgery.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/split_prefill.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

inline constexpr const char* kSurgeryHelp =
    "usage: hylens surgery --model DIR --input IN.safetensors --out OUT.safetensors [--gen N]\n"
    "\n"
    "Reads from IN the I64 tensors ctx_a.ids, ctx_b.ids (contexts A and B), query.ids (the\n"
    "query Q), kv_only_layers.layers and swap_ka_rb_layers.layers (layer sets S). Prefills A\n"
    "and B separately, builds each condition below on a copy of those caches, runs Q on it and\n"
    "then N greedy tokens (default 4; the last one is fed too), and writes to OUT, for every\n"
    "condition <c>: <c>.logits [m, vocab], <c>.gen.ids [N] (I64), <c>.gen.logits [N, vocab]\n"
    "(after feeding each greedy token) and <c>.positions [m + N] (I64).\n"
    "\n"
    "  condition          KV part  recurrent part (conv window + SSM state)      Q starts at\n"
    "  full               A        A                                            n\n"
    "  full_b             B        B                                            n\n"
    "  kv_only            A        reset (zero) in every recurrent layer        n\n"
    "  rec_only           dropped  A                                            0\n"
    "  none               dropped  reset                                        0\n"
    "  swap_ka_rb         A        B in every recurrent layer                   n (KV source)\n"
    "  swap_kb_ra         B        A                                            n\n"
    "  kv_only_layers     A        reset in the layers of S, A elsewhere        n\n"
    "  swap_ka_rb_layers  A        B in the layers of S, A elsewhere            n\n"
    "  kv_only_noconv     A        SSM state zeroed, conv window kept (A's)     n\n"
    "\n"
    "Works on every model folder of the supported families (F32 or BF16 checkpoints).\n";

namespace detail {

/// Runs one condition's cache and appends its four tensors to the writer.
template <class Model>
void write_condition(io::SafetensorsWriter& w, const Model& m, const std::string& name, EditedCache<typename Model::cache_type> e,
                     const TokenBatch& query, std::size_t n_gen) {
    GenerateOptions g;
    g.max_new = n_gen;
    g.feed_last = true;
    g.start_position = e.position;
    const GenerateResult r = generate(m, e.cache, query, g);
    const std::size_t V = m.config().vocab, mq = query.T();
    w.add_f32(name + ".logits", {mq, V}, std::span<const float>(r.prompt_logits.data(), mq * V));
    std::vector<float> steps;
    for (const auto& s : r.step_logits) steps.insert(steps.end(), s.data(), s.data() + V);
    w.add_i64(name + ".gen.ids", {r.ids[0].size()}, r.ids[0]);
    w.add_f32(name + ".gen.logits", {r.step_logits.size(), V}, steps);
    w.add_i64(name + ".positions", {r.positions.size()}, r.positions);
}

template <class Model>
void surgery_conditions(io::SafetensorsWriter& w, const Model& m, const io::SafetensorsFile& in, std::size_t n_gen) {
    using Cache = typename Model::cache_type;
    const TokenBatch query(in.read_i64("query.ids"));
    const Cache a = m.prefill(TokenBatch(in.read_i64("ctx_a.ids")));
    const Cache b = m.prefill(TokenBatch(in.read_i64("ctx_b.ids")));
    const LayerSet s_kv = LayerSet::from_i64(in.read_i64("kv_only_layers.layers"), "kv_only_layers.layers");
    const LayerSet s_swap = LayerSet::from_i64(in.read_i64("swap_ka_rb_layers.layers"), "swap_ka_rb_layers.layers");
    // A swap continues at its KV source's position, which the swapped cache carries.
    const auto swap = [](Cache c) {
        const auto p = static_cast<std::int64_t>(continue_position(c));
        return EditedCache<Cache>{std::move(c), p};
    };
    const auto run = [&](const char* name, EditedCache<Cache> e) { write_condition(w, m, name, std::move(e), query, n_gen); };
    run("full", apply_split_mode(a, SplitMode::FULL));
    run("full_b", apply_split_mode(b, SplitMode::FULL));
    run("kv_only", apply_split_mode(a, SplitMode::KV_ONLY));
    run("rec_only", apply_split_mode(a, SplitMode::REC_ONLY));
    run("none", apply_split_mode(a, SplitMode::NONE));
    run("swap_ka_rb", swap(state_swap(a, b)));
    run("swap_kb_ra", swap(state_swap(b, a)));
    run("kv_only_layers", apply_split_mode(a, SplitMode::KV_ONLY, s_kv));
    run("swap_ka_rb_layers", swap(state_swap(a, b, LayerSet::all(), s_swap)));
    run("kv_only_noconv", apply_split_mode(a, SplitMode::KV_ONLY, LayerSet::all(), /*conv_with_state=*/false));
}

}  // namespace detail

inline int run_surgery(int argc, char** argv) {
    const Args a(argc, argv, 2);
    if (a.help()) {
        std::cout << kSurgeryHelp;
        return 0;
    }
    const AnyModel model = load(a.get("--model"));
    const io::SafetensorsFile in = io::SafetensorsFile::open(a.get("--input"));
    const std::string gen = a.get("--gen", "4");
    check(!gen.empty() && gen.size() < 6 && gen.find_first_not_of("0123456789") == std::string::npos && gen != "0",
          "--gen needs a positive number of greedy tokens, got '", gen, "'");
    const std::size_t n_gen = std::stoul(gen);
    io::SafetensorsWriter w;
    model.visit([&](const auto& m) { detail::surgery_conditions(w, m, in, n_gen); });
    w.write(a.get("--out"));
    std::cerr << "hylens surgery: " << model.config().model_type << ", 10 conditions x " << n_gen
              << " greedy tokens, " << w.size() << " tensors -> " << a.get("--out") << "\n";
    return 0;
}

}  // namespace hylens::cli
