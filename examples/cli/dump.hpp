#pragma once
// hylens dump: prefill a prompt, decode tokens one at a time, write every tensor of the
// golden format (tests/golden/README.md) to safetensors and / or a readable JSON summary.

#include <hylens/io/safetensors.hpp>
#include <hylens/io/safetensors_writer.hpp>
#include <hylens/models/load.hpp>
#include <hylens/stack/finite_check.hpp>

#include <iostream>

#include "args.hpp"
#include "../../tests/support/reference_format.hpp"  // dump_run: the golden-file format

namespace hylens::cli {

inline void write_named(const NamedTensors& t, const std::filesystem::path& out) {
    io::SafetensorsWriter w;
    for (const auto& [name, tensor] : t.all()) w.add_f32(name, shape_of(tensor), flat(tensor));
    w.write(out);
}

/// NonFiniteError at the first NaN / infinity of a dump, in forward order (embedding, layers,
/// final norm, logits; then the decode steps).
inline void check_dump_finite(const NamedTensors& t, std::size_t L, const std::string& model) {
    std::vector<std::string> order;
    for (const std::string pre : {"", "decode."}) {
        if (!pre.empty() && !t.contains("decode.logits")) break;
        if (pre.empty()) order.push_back("hidden.embed");
        for (std::size_t i = 0; i < L; ++i) order.push_back(pre + "hidden.layer." + std::to_string(i));
        order.push_back(pre + "hidden.final_norm");
        order.push_back(pre + "logits");
    }
    for (const auto& name : order) {
        const NamedTensor& x = t.at(name);
        const std::size_t i = hylens::detail::first_non_finite(x.data(), x.size()), D = x.shape().back();
        check<NonFiniteError>(i == x.size(), "[dump] model ", model, ": first non-finite value (", i < x.size() ? x.data()[i] : 0.0f,
                              ") in ", name, " at token ", i / D, ", index ", i % D, " of ", D,
                              "; if the weights may be damaged, `hylens verify --model DIR` scans them");
    }
}

inline int run_dump(int argc, char** argv) {
    CLI::App app{"Loads the model folder DIR, prefills the prompt (--prompt / --ids, or the I64 tensor 'input_ids' "
                 "of --input), then feeds the decode tokens (--decode-ids, or 'decode.input_ids' of --input) one at "
                 "a time. --out writes logits, hidden.embed, hidden.layer.N, hidden.final_norm, "
                 "cache.N.{conv,state,k,v}, and decode.logits, decode.hidden.layer.N, decode.hidden.final_norm, "
                 "decode.cache.N.* (float32, batch axis dropped) to safetensors; --json writes the tokens, the top "
                 "predictions at every position and the tensor shapes.",
                 "hylens dump"};
    ModelInput mi;
    mi.add(app);
    TokenInput prompt;
    prompt.add(app, "--prompt", "--ids", "the prompt");
    std::vector<std::int64_t> decode;
    std::string input, out, json;
    std::size_t k = 5;
    auto* in_opt = app.add_option("--input", input, "golden-format input file (input_ids, decode.input_ids)")
                       ->check(CLI::ExistingFile);
    app.add_option("--decode-ids", decode, "tokens fed one at a time after the prompt")->delimiter(',')->check(whole_number());
    app.add_option("--out", out, "safetensors file to write")->check(writable_file(false));
    app.add_option("--json", json, "JSON summary to write (- for stdout)")->check(writable_file(true));
    app.add_option("--top", k, "predictions per position in the JSON (default 5)")->check(CLI::Range(1, 1 << 20));
    in_opt->excludes(prompt.text_opt)->excludes(prompt.ids_opt);
    app.callback([&] {
        if (!prompt.given() && input.empty()) throw CLI::RequiredError(prompt.flags() + " or --input");
        if (out.empty() && json.empty()) throw CLI::RequiredError("--out or --json");
    });
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const AnyModel model = load_model(mi.dir, mi.load_options());
    std::vector<std::int64_t> ids = mi.ids(prompt, model.config().model_type);
    if (!input.empty()) {
        const io::SafetensorsFile in = io::SafetensorsFile::open(input);
        ids = read_token_ids(in, "input_ids");
        if (decode.empty() && in.contains("decode.input_ids")) decode = read_token_ids(in, "decode.input_ids");
    }
    const NamedTensors t = model.visit([&](const auto& m) { return test::dump_run(m, ids, decode); });
    if (!mi.no_finite_check) check_dump_finite(t, model.num_layers(), model.config().model_type);
    if (!out.empty()) write_named(t, out);
    if (!json.empty()) {
        const std::size_t V = model.config().vocab;
        nlohmann::json j = {{"model", model.config().model_type}, {"prompt", tokens_json(mi, ids)}};
        const auto predictions = [&](const std::string& name, const std::vector<std::int64_t>& fed, std::size_t p0) {
            nlohmann::json rows = nlohmann::json::array();
            const NamedTensor& lg = t.at(name);
            for (std::size_t r = 0; r < fed.size(); ++r)
                rows.push_back({{"position", p0 + r}, {"token", token_json(mi, fed[r])},
                                {"next", top_k_json(mi, lg.data() + r * V, V, k)}});
            return rows;
        };
        j["predictions"] = predictions("logits", ids, 0);
        if (!decode.empty()) {
            j["decode"] = tokens_json(mi, decode);
            j["decode_predictions"] = predictions("decode.logits", decode, ids.size());
        }
        nlohmann::json shapes = nlohmann::json::object();
        for (const auto& [name, tensor] : t.all()) shapes[name] = shape_of(tensor);
        j["tensors"] = shapes;
        write_json(j, json);
    }
    std::cerr << "hylens dump: " << model.config().model_type << ", " << ids.size() << " prompt tokens, "
              << decode.size() << " decode steps, " << t.size() << " tensors"
              << (out.empty() ? "" : " -> " + out) << "\n";
    return 0;
}

}  // namespace hylens::cli
