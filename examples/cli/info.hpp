#pragma once
// hylens info: what a model folder holds (family, layer kinds, widths, dtypes).

#include <hylens/models/load.hpp>

#include <iostream>

#include "args.hpp"

namespace hylens::cli {

inline constexpr const char* kInfoHelp =
    "usage: hylens info --model DIR\n"
    "\n"
    "Loads DIR and prints the model type, the layer pattern (one letter per layer: G = Gated\n"
    "DeltaNet, M = Mamba-2, A = attention, P = parallel attention + Mamba-2), hidden size,\n"
    "vocabulary and the weight dtype.\n";

inline int run_info(int argc, char** argv) {
    const Args a(argc, argv, 2);
    if (a.help()) {
        std::cout << kInfoHelp;
        return 0;
    }
    const AnyModel model = load(a.get("--model"));
    model.visit([&](const auto& m) {
        std::string pattern;
        for (std::size_t i = 0; i < m.num_layers(); ++i)
            m.stack().visit(i, [&](const auto& layer) {
                const std::string k = std::remove_cvref_t<decltype(layer.mixer())>::kind_name;
                pattern += k == "gdn" ? 'G' : k == "mamba2" ? 'M' : k == "attention" ? 'A' : 'P';
            });
        std::cout << "model_type: " << m.config().model_type << "\n"
                  << "layers:     " << m.num_layers() << " " << pattern << "\n"
                  << "hidden:     " << m.config().hidden << "\n"
                  << "vocab:      " << m.config().vocab << "\n"
                  << "weights:    " << (m.embedding().is_bf16() ? "bf16 (used in place)" : "f32") << "\n"
                  << "tied head:  " << (m.tied_embeddings() ? "yes" : "no") << "\n";
    });
    return 0;
}

}  // namespace hylens::cli
