#pragma once
// hylens surgery: the ten split-prefill / state-swap conditions on any model folder, from
// text, ids or the inputs of a surgery reference file; written as safetensors in the
// reference format (tests/golden/README.md) and / or as a readable JSON summary.

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

inline constexpr const char* kSurgeryConditions =
    "Conditions (A = context, B = context B, S = a layer set):\n"
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
    "  kv_only_noconv     A        SSM state zeroed, conv window kept (A's)     n\n";

/// The inputs of the ten conditions.
struct SurgeryInputs {
    std::vector<std::int64_t> a, b, query;
    LayerSet kv_layers, swap_layers;
    std::size_t n_gen = 4;
    bool check_finite = true;
    std::size_t top = 5;
};

namespace detail {

/// Runs one condition's cache; appends its four tensors to the writer and its summary to j.
template <class Model>
void run_condition(io::SafetensorsWriter& w, nlohmann::json& j, const ModelInput& mi, const Model& m,
                   const std::string& name, EditedCache<typename Model::cache_type> e, const SurgeryInputs& in) {
    GenerateOptions g;
    g.max_new = in.n_gen;
    g.feed_last = true;
    g.start_position = e.position;
    g.check_finite = in.check_finite;
    const TokenBatch query(in.query);
    const GenerateResult r = generate(m, e.cache, query, g);
    const std::size_t V = m.config().vocab, mq = query.T();
    w.add_f32(name + ".logits", {mq, V}, std::span<const float>(r.prompt_logits.data(), mq * V));
    std::vector<float> steps;
    for (const auto& s : r.step_logits) steps.insert(steps.end(), s.data(), s.data() + V);
    w.add_i64(name + ".gen.ids", {r.ids[0].size()}, r.ids[0]);
    w.add_f32(name + ".gen.logits", {r.step_logits.size(), V}, steps);
    w.add_i64(name + ".positions", {r.positions.size()}, r.positions);
    j[name] = {{"query_start", e.position},
               {"next_after_query", top_k_json(mi, r.prompt_logits.data() + (mq - 1) * V, V, in.top)},
               {"generated", tokens_json(mi, r.ids[0])}};
}

template <class Model>
void surgery_conditions(io::SafetensorsWriter& w, nlohmann::json& j, const ModelInput& mi, const Model& m,
                        const SurgeryInputs& in) {
    using Cache = typename Model::cache_type;
    const Cache a = m.prefill(TokenBatch(in.a));
    const Cache b = m.prefill(TokenBatch(in.b));
    // A swap continues at its KV source's position, which the swapped cache carries.
    const auto swap = [](Cache c) {
        const auto p = static_cast<std::int64_t>(continue_position(c));
        return EditedCache<Cache>{std::move(c), p};
    };
    const auto run = [&](const char* name, EditedCache<Cache> e) { run_condition(w, j, mi, m, name, std::move(e), in); };
    run("full", apply_split_mode(a, SplitMode::FULL));
    run("full_b", apply_split_mode(b, SplitMode::FULL));
    run("kv_only", apply_split_mode(a, SplitMode::KV_ONLY));
    run("rec_only", apply_split_mode(a, SplitMode::REC_ONLY));
    run("none", apply_split_mode(a, SplitMode::NONE));
    run("swap_ka_rb", swap(state_swap(a, b)));
    run("swap_kb_ra", swap(state_swap(b, a)));
    run("kv_only_layers", apply_split_mode(a, SplitMode::KV_ONLY, in.kv_layers));
    run("swap_ka_rb_layers", swap(state_swap(a, b, LayerSet::all(), in.swap_layers)));
    run("kv_only_noconv", apply_split_mode(a, SplitMode::KV_ONLY, LayerSet::all(), /*conv_with_state=*/false));
}

/// The recurrent layers in the first half of the stack (the default layer set S).
template <class Model>
LayerSet default_surgery_layers(const Model& m) {
    std::vector<std::size_t> v;
    for (std::size_t i = 0; i < m.num_layers() / 2 + m.num_layers() % 2; ++i)
        m.stack().visit(i, [&](const auto& layer) {
            auto c = layer.new_cache(1);
            if (recurrent_part(c)) v.push_back(i);
        });
    return LayerSet(std::move(v));
}

}  // namespace detail

inline int run_surgery(int argc, char** argv) {
    CLI::App app{"Prefills context A and context B separately, builds each condition below on a copy of those "
                 "caches, runs the query Q on it and then N greedy tokens (the last one is fed too). The inputs come "
                 "as text (--context, --context-b, --query), as ids (--context-ids, ...), or from the I64 tensors "
                 "ctx_a.ids, ctx_b.ids, query.ids, kv_only_layers.layers and swap_ka_rb_layers.layers of a surgery "
                 "reference file (--input). --out writes, for every condition <c>: <c>.logits [m, vocab], "
                 "<c>.gen.ids [N] (I64), <c>.gen.logits [N, vocab] and <c>.positions [m + N] (I64); --json writes "
                 "where Q started, the top next tokens after Q and the generated text of every condition.",
                 "hylens surgery"};
    app.footer(kSurgeryConditions);
    ModelInput mi;
    mi.add(app);
    TokenInput ctx_a, ctx_b, query;
    ctx_a.add(app, "--context", "--context-ids", "context A");
    ctx_b.add(app, "--context-b", "--context-b-ids", "context B (default: context A)");
    query.add(app, "--query", "--query-ids", "the query Q");
    std::vector<std::size_t> kv_layers, swap_layers;
    std::string input, out, json;
    SurgeryInputs in;
    auto* in_opt = app.add_option("--input", input, "surgery reference file with the inputs")->check(CLI::ExistingFile);
    auto* kv_opt = app.add_option("--kv-only-layers", kv_layers,
                                  "S of kv_only_layers (default: the recurrent layers of the first half)")
                       ->delimiter(',');
    auto* sw_opt = app.add_option("--swap-layers", swap_layers, "S of swap_ka_rb_layers (default: as --kv-only-layers)")
                       ->delimiter(',');
    app.add_option("--gen", in.n_gen, "greedy tokens after the query (default 4)")->check(CLI::Range(1, 99999));
    app.add_option("--out", out, "safetensors file to write")->check(writable_file(false));
    app.add_option("--json", json, "JSON summary to write (- for stdout)")->check(writable_file(true));
    for (auto* o : {ctx_a.text_opt, ctx_a.ids_opt, ctx_b.text_opt, ctx_b.ids_opt, query.text_opt, query.ids_opt, kv_opt, sw_opt})
        in_opt->excludes(o);
    app.callback([&] {
        if (input.empty() && !ctx_a.given()) throw CLI::RequiredError(ctx_a.flags() + " or --input");
        if (input.empty() && !query.given()) throw CLI::RequiredError(query.flags() + " or --input");
        if (out.empty() && json.empty()) throw CLI::RequiredError("--out or --json");
    });
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const AnyModel model = load_model(mi.dir, mi.load_options());
    const std::string& type = model.config().model_type;
    in.check_finite = !mi.no_finite_check;
    if (!input.empty()) {
        const io::SafetensorsFile f = io::SafetensorsFile::open(input);
        in.a = read_token_ids(f, "ctx_a.ids");
        in.b = read_token_ids(f, "ctx_b.ids");
        in.query = read_token_ids(f, "query.ids");
        in.kv_layers = LayerSet::from_i64(read_layer_list(f, "kv_only_layers.layers"), "kv_only_layers.layers");
        in.swap_layers = LayerSet::from_i64(read_layer_list(f, "swap_ka_rb_layers.layers"), "swap_ka_rb_layers.layers");
    } else {
        in.a = mi.ids(ctx_a, type);
        in.b = ctx_b.given() ? mi.ids(ctx_b, type) : in.a;
        in.query = mi.ids(query, type);
        const LayerSet def = model.visit([](const auto& m) { return detail::default_surgery_layers(m); });
        in.kv_layers = kv_opt->count() ? LayerSet(kv_layers) : def;
        in.swap_layers = sw_opt->count() ? LayerSet(swap_layers) : in.kv_layers;
    }
    io::SafetensorsWriter w;
    nlohmann::json conditions = nlohmann::json::object();
    model.visit([&](const auto& m) { detail::surgery_conditions(w, conditions, mi, m, in); });
    if (!out.empty()) w.write(out);
    if (!json.empty())
        write_json({{"model", type},
                    {"context_a", tokens_json(mi, in.a)},
                    {"context_b", tokens_json(mi, in.b)},
                    {"query", tokens_json(mi, in.query)},
                    {"kv_only_layers", in.kv_layers.indices()},
                    {"swap_layers", in.swap_layers.indices()},
                    {"conditions", conditions}},
                   json);
    std::cerr << "hylens surgery: " << type << ", 10 conditions x " << in.n_gen << " greedy tokens, " << w.size()
              << " tensors" << (out.empty() ? "" : " -> " + out) << "\n";
    return 0;
}

}  // namespace hylens::cli
