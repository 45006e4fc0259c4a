#pragma once
// hylens generate: a prompt (text or ids) in, the continuation out as text, greedy or sampled.

#include <hylens/models/load.hpp>
#include <hylens/stack/generate.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

/// The end-of-sequence ids of a model folder's config.json (eos_token_id at the top or in
/// text_config; a non-negative integer, a list of them, or null), empty when there is none. Any
/// other value is a ConfigError: ignored, generation would run past the end of the answer.
inline std::vector<std::int64_t> eos_ids(const std::string& dir) {
    const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
    // Read as the loader reads it: it accepts the NaN and Infinity that Python's json writes
    // ("time_step_limit": [0.0, Infinity]); a plain parse failed on them and the stop list was
    // empty, so generation ran past the end of the answer.
    const nlohmann::json cfg = std::filesystem::exists(path) ? io::Config::from_file(path).raw() : nlohmann::json();
    std::vector<std::int64_t> out;
    for (const char* where : {"", "text_config"}) {
        const nlohmann::json* c = *where ? (cfg.is_object() && cfg.contains(where) ? &cfg[where] : nullptr) : &cfg;
        if (!c || !c->is_object() || !c->contains("eos_token_id")) continue;
        const nlohmann::json& e = (*c)["eos_token_id"];
        if (e.is_null()) continue;
        const auto add = [&](const nlohmann::json& v) {
            check<ConfigError>(v.is_number_integer() && v.get<std::int64_t>() >= 0, "[generate] ", path.string(), ": ",
                               *where ? std::string(where) + "." : std::string(), "eos_token_id must be a token id or a list of them, got ",
                               v.dump());
            out.push_back(v.get<std::int64_t>());
        };
        if (e.is_array())
            for (const auto& v : e) add(v);
        else
            add(e);
    }
    return out;
}

inline int run_generate(int argc, char** argv) {
    CLI::App app{"Feeds the prompt to the model on a fresh cache and generates up to --max-new tokens: greedy by "
                 "default, or sampled with --temperature (> 0), --top-k, --top-p and --seed (the same seed gives the "
                 "same text on every machine). Stops at the model's end-of-sequence token (config.json eos_token_id) "
                 "unless --no-stop. Prints the generated text (the ids without a tokenizer).",
                 "hylens generate"};
    ModelInput mi;
    mi.add(app);
    TokenInput prompt;
    prompt.add(app, "--prompt", "--ids", "the prompt");
    std::size_t max_new = 32;
    SamplingOptions s;
    bool no_stop = false, show_ids = false;
    std::string json;
    app.add_option("--max-new", max_new, "tokens to generate (default 32)")->check(CLI::Range(1, 1 << 20));
    app.add_option("--temperature", s.temperature, "0 (default): greedy; > 0: sample")->check(CLI::Range(0.0, 1e6));
    app.add_option("--top-k", s.top_k, "sample among the k most likely tokens (0: all)");
    app.add_option("--top-p", s.top_p, "sample among the most likely tokens of mass >= p (default 1)")
        ->check(CLI::Range(1e-6, 1.0));
    app.add_option("--seed", s.seed, "PRNG seed for sampling (default 0)");
    app.add_flag("--no-stop", no_stop, "do not stop at the end-of-sequence token");
    app.add_flag("--show-ids", show_ids, "also print the generated ids (stderr)");
    app.add_option("--json", json,
                   "also write prompt, generated ids and text as JSON to FILE (- for stdout: the text then goes to stderr, "
                   "so stdout is one JSON document)")
        ->check(writable_file(true));
    prompt.require_in(app);
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const AnyModel model = load_model(mi.dir, mi.load_options());
    const std::vector<std::int64_t> ids = mi.ids(prompt, model.config().model_type);
    GenerateOptions g;
    g.max_new = max_new;
    g.sampling = s;
    g.check_finite = !mi.no_finite_check;
    if (!no_stop) g.stop_ids = eos_ids(mi.dir);
    const std::vector<std::int64_t> out = model.visit([&](const auto& m) {
        auto cache = m.new_cache(1);
        return generate(m, cache, TokenBatch(ids), g).ids[0];
    });
    const std::optional<std::string> text = mi.text(out);
    std::ostream& shown = json == "-" ? std::cerr : std::cout;
    if (text) {
        shown << *text << "\n";
    } else {
        for (std::size_t i = 0; i < out.size(); ++i) shown << (i ? " " : "") << out[i];
        shown << "\n";
    }
    if (show_ids || (!text && json != "-")) {  // with --json - and no tokenizer the ids were just shown there
        std::cerr << "hylens generate: ids";
        for (auto id : out) std::cerr << " " << id;
        std::cerr << (text ? "\n" : " (no tokenizer: printed ids)\n");
    }
    if (!json.empty())
        write_json({{"model", model.config().model_type},
                    {"prompt", tokens_json(mi, ids)},
                    {"generated", tokens_json(mi, out)},
                    {"sampling",
                     {{"temperature", s.temperature}, {"top_k", s.top_k}, {"top_p", s.top_p}, {"seed", s.seed}}}},
                   json);
    return 0;
}

}  // namespace hylens::cli
