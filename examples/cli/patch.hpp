#pragma once
// hylens patch: the mixer-output patch (Paper A exp22) and the recurrent-state patch (exp32-B)
// on any model folder, from text, ids or the inputs of a surgery reference file; written as
// safetensors in the reference format (tests/golden/README.md, 'Mixer-output patch' and
// 'State patch') and / or as a readable JSON summary.

#include <hylens/interp/transplant.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/models/load.hpp>

#include <iostream>
#include <vector>

#include "args.hpp"
#include "dump.hpp"

namespace hylens::cli {

inline constexpr const char* kPatchOutputs =
    "Outputs (Tp = prompt length):\n"
    "  patch.donor.mixer_out [|layers|, hidden]  donor mixer outputs at Tp-1 (before any\n"
    "                                            residual multiplier; Falcon-H1: ssm_out)\n"
    "  patch.attn.donor.mixer_out [hidden]       donor attention output at Tp-1 (Falcon-H1: attn_out)\n"
    "  patch.host.logits_final [V]               host with those rows patched in at Tp-1\n"
    "  patch.attn.host.logits_final [V]          host with the attention row patched in\n"
    "  state_patch.logits_final [V]              host [0,Tp-2] cache with the donor's SSM state and\n"
    "                                            conv window of the layers, then token Tp-1\n"
    "  state_patch.ssm_only.logits_final [V]     the same, SSM state only\n"
    "  state_patch.all.logits_final [V]          the same, every recurrent layer\n"
    "  state_patch.control.logits_final [V]      the same, nothing copied\n";

inline int run_patch(int argc, char** argv) {
    CLI::App app{"Runs donor and host prompts of equal token length, patches the donor's mixer outputs of the "
                 "recurrent --layers (and of one attention layer) into the host at the last position, and copies "
                 "the donor's recurrent state into the host's cache before its last token. Inputs as text (--donor, "
                 "--host), ids (--donor-ids, --host-ids) or the I64 tensors patch.donor.ids, patch.host.ids, "
                 "patch.layers and patch.attn_layer of a surgery reference file (--input). --out writes the outputs "
                 "below as safetensors; --json writes the top next tokens of every logits output.",
                 "hylens patch"};
    app.footer(kPatchOutputs);
    ModelInput mi;
    mi.add(app);
    TokenInput donor, host;
    donor.add(app, "--donor", "--donor-ids", "the donor prompt");
    host.add(app, "--host", "--host-ids", "the host prompt (as many tokens as the donor)");
    std::vector<LayerIndex> layers;
    LayerIndex attn_layer = no_layer;
    std::string input, out, json;
    std::size_t top = 5;
    auto* in_opt = app.add_option("--input", input, "surgery reference file with the inputs")->check(CLI::ExistingFile);
    auto* l_opt = app.add_option("--layers", layers, "recurrent layers to patch (default: every recurrent layer)")
                      ->delimiter(',')
                      ->check(whole_number());
    auto* a_opt = app.add_option("--attn-layer", attn_layer, "attention layer to patch (default: the first)")
                      ->check(whole_number());
    app.add_option("--out", out, "safetensors file to write")->check(writable_file(false));
    app.add_option("--json", json, "JSON summary to write (- for stdout)")->check(writable_file(true));
    app.add_option("--top", top, "next tokens per output in the JSON (default 5)")->check(CLI::Range(1, 1 << 20));
    for (auto* o : {donor.text_opt, donor.ids_opt, host.text_opt, host.ids_opt, l_opt, a_opt}) in_opt->excludes(o);
    app.callback([&] {
        if (input.empty() && !donor.given()) throw CLI::RequiredError(donor.flags() + " or --input");
        if (input.empty() && !host.given()) throw CLI::RequiredError(host.flags() + " or --input");
        if (out.empty() && json.empty()) throw CLI::RequiredError("--out or --json");
    });
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;

    const AnyModel model = load_model(mi.dir, mi.load_options());
    const std::string& type = model.config().model_type;
    std::vector<std::int64_t> d, h;
    if (!input.empty()) {
        const io::SafetensorsFile in = io::SafetensorsFile::open(input);
        d = read_token_ids(in, "patch.donor.ids");
        h = read_token_ids(in, "patch.host.ids");
        for (auto l : read_layer_list(in, "patch.layers")) layers.push_back(layer_index(l));
        const std::vector<std::int64_t> attn = read_layer_list(in, "patch.attn_layer");  // not BOOL [true]: layer 1
        check<ShapeError>(attn.size() == 1, "[patch] ", input, ": patch.attn_layer holds ", attn.size(),
                          " values, expected 1");
        attn_layer = layer_index(attn[0]);
    } else {
        d = mi.ids(donor, type);
        h = mi.ids(host, type);
        check<ShapeError>(d.size() == h.size(), "[patch] the donor has ", d.size(), " tokens and the host ", h.size(),
                          "; the patch needs prompts of equal token length");
        model.visit([&](const auto& m) {
            if (layers.empty()) layers = recurrent_layers(m.stack());
            if (attn_layer == no_layer) {
                const std::vector<LayerIndex> att = attention_layers(m.stack());
                check<ShapeError>(!att.empty(), "[patch] model ", type, " has no attention layer to patch");
                attn_layer = att.front();
            }
        });
    }
    const NamedTensors t =
        model.visit([&](const auto& m) { return test::patch_reference_tensors(m, d, h, layers, attn_layer); });
    if (!mi.no_finite_check)
        for (const auto& [name, x] : t.all()) {
            const std::size_t i = hylens::detail::first_non_finite(x.data(), x.size());
            check<NonFiniteError>(i == x.size(), "[patch] model ", type, ": non-finite value in ", name,
                                  " at index ", i, "; `hylens verify --model DIR` scans the weights");
        }
    if (!out.empty()) write_named(t, out);
    if (!json.empty()) {
        const std::size_t V = model.config().vocab;
        nlohmann::json outputs = nlohmann::json::object();
        for (const auto& [name, x] : t.all())
            if (name.find("logits") != std::string::npos) outputs[name] = top_k_json(mi, x.data(), V, top);
        write_json({{"model", type},
                    {"donor", tokens_json(mi, d)},
                    {"host", tokens_json(mi, h)},
                    {"layers", layers},
                    {"attn_layer", attn_layer},
                    {"next_tokens", outputs}},
                   json);
    }
    std::cerr << "hylens patch: " << type << ", " << h.size() << " tokens, " << t.size() << " tensors"
              << (out.empty() ? "" : " -> " + out) << "\n";
    return 0;
}

}  // namespace hylens::cli
