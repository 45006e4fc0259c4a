#pragma once
// hylens patch: the mixer-output patch (Paper A exp22) and the recurrent-state patch (exp32-B)
// of a surgery reference file, on any model folder (tests/golden/README.md, 'Mixer-output
// patch' and 'State patch').

#include <hylens/interp/transplant.hpp>
#include <hylens/io/safetensors.hpp>
#include <hylens/models/load.hpp>

#include <iostream>
#include <vector>

#include "args.hpp"
#include "dump.hpp"

namespace hylens::cli {

inline constexpr const char* kPatchHelp =
    "usage: hylens patch --model DIR --input IN.safetensors --out OUT.safetensors\n"
    "\n"
    "Reads the I64 tensors patch.donor.ids, patch.host.ids (equal length Tp), patch.layers\n"
    "(recurrent layers) and patch.attn_layer (one attention layer) from IN, and writes to OUT:\n"
    "  patch.donor.mixer_out [|layers|, hidden]  donor mixer outputs at Tp-1 (before any\n"
    "                                            residual multiplier; Falcon-H1: ssm_out)\n"
    "  patch.attn.donor.mixer_out [hidden]       donor attention output at Tp-1 (Falcon-H1: attn_out)\n"
    "  patch.host.logits_final [V]               host with those rows patched in at Tp-1\n"
    "  patch.attn.host.logits_final [V]          host with the attention row patched in\n"
    "  state_patch.logits_final [V]              host [0,Tp-2] cache with the donor's SSM state and\n"
    "                                            conv window of patch.layers, then token Tp-1\n"
    "  state_patch.ssm_only.logits_final [V]     the same, SSM state only\n"
    "  state_patch.all.logits_final [V]          the same, every recurrent layer\n"
    "  state_patch.control.logits_final [V]      the same, nothing copied\n";

inline int run_patch(int argc, char** argv) {
    const Args a(argc, argv, 2);
    if (a.help()) {
        std::cout << kPatchHelp;
        return 0;
    }
    const AnyModel model = load(a.get("--model"));
    const io::SafetensorsFile in = io::SafetensorsFile::open(a.get("--input"));
    const std::vector<std::int64_t> donor = in.read_i64("patch.donor.ids"), host = in.read_i64("patch.host.ids");
    std::vector<int> layers;
    for (auto l : in.read_i64("patch.layers")) layers.push_back(static_cast<int>(l));
    const std::vector<std::int64_t> attn = in.read_i64("patch.attn_layer");
    check<ShapeError>(attn.size() == 1, "[patch] ", a.get("--input"), ": patch.attn_layer holds ", attn.size(),
                      " values, expected 1");
    const NamedTensors out = model.visit(
        [&](const auto& m) { return patch_reference_tensors(m, donor, host, layers, static_cast<int>(attn[0])); });
    write_named(out, a.get("--out"));
    std::cerr << "hylens patch: " << model.config().model_type << ", " << host.size() << " tokens, " << out.size()
              << " tensors -> " << a.get("--out") << "\n";
    return 0;
}

}  // namespace hylens::cli
