#pragma once
// hylens top-k: the most likely next tokens after a prompt, with their probabilities.

#include <hylens/models/load.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

inline int run_top_k(int argc, char** argv) {
    CLI::App app{"Runs the prompt on a fresh cache and prints the k most likely next tokens: rank, id, probability "
                 "(softmax of the logits), logit and the token's text.",
                 "hylens top-k"};
    ModelInput mi;
    mi.add(app);
    TokenInput prompt;
    prompt.add(app, "--prompt", "--ids", "the prompt");
    std::size_t k = 10;
    std::string json;
    app.add_option("-k,--k", k, "how many tokens (default 10)")->check(CLI::Range(1, 1 << 24));
    app.add_option("--json", json,
                   "write the list as JSON to FILE (- for stdout) instead of the table (\"text\": null for an id the "
                   "tokenizer has no token for, such as a padding row of the embedding)")
        ->check(writable_file(true));
    prompt.require_in(app);
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const AnyModel model = load_model(mi.dir, mi.load_options());
    const std::vector<std::int64_t> ids = mi.ids(prompt, model.config().model_type);
    const std::size_t V = model.config().vocab;
    const Tensor3 logits = model.visit([&](const auto& m) {
        auto cache = m.new_cache(1);
        ForwardOptions fo;
        fo.last_only = true;
        fo.check_finite = !mi.no_finite_check;
        return m.forward(TokenBatch(ids), cache, fo);
    });
    const nlohmann::json top = top_k_json(mi, logits.data(), V, k);
    if (!json.empty()) {
        write_json({{"model", model.config().model_type}, {"prompt", tokens_json(mi, ids)}, {"top_k", top}}, json);
        return 0;
    }
    std::printf("%4s  %8s  %10s  %10s  %s\n", "rank", "id", "prob", "logit", "token");
    for (std::size_t r = 0; r < top.size(); ++r) {
        const auto& t = top[r];
        // A null text is an id the tokenizer has no token for (a padding row of the embedding).
        const std::string txt = !t.contains("text")  ? ""
                                : t["text"].is_null() ? "(not a token of the tokenizer)"
                                                      : t["text"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::printf("%4zu  %8lld  %10.6f  %10.4f  %s\n", r + 1, static_cast<long long>(t["id"].get<std::int64_t>()),
                    t["prob"].get<double>(), t["logit"].get<double>(), txt.c_str());
    }
    return 0;
}

}  // namespace hylens::cli
