#pragma once
// hylens info: what a model folder holds (family, layer kinds, widths, dtypes).

#include <hylens/models/load.hpp>

#include <iostream>

#include "args.hpp"

namespace hylens::cli {

/// One letter per layer: G = Gated DeltaNet, M = Mamba-2, A = attention, P = parallel, S = stitched block.
template <class Model>
std::string layer_pattern(const Model& m) {
    std::string pattern;
    for (std::size_t i = 0; i < m.num_layers(); ++i)
        m.stack().visit(i, [&](const auto& layer) {
            const std::string k = std::remove_cvref_t<decltype(layer.mixer())>::kind_name;
            pattern += k == "gdn" ? 'G' : k == "mamba2" ? 'M' : k == "attention" ? 'A' : k == "stitch" ? 'S' : 'P';
        });
    return pattern;
}

inline int run_info(int argc, char** argv) {
    CLI::App app{"Loads DIR and prints the model type, the layer pattern (one letter per layer: G = Gated DeltaNet, "
                 "M = Mamba-2, A = attention, P = parallel attention + Mamba-2), hidden size, vocabulary and the "
                 "weight dtype.",
                 "hylens info"};
    std::string dir;
    app.add_option("--model", dir, "model folder")->required();
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
    const AnyModel model = load_model(dir);
    model.visit([&](const auto& m) {
        std::cout << "model_type: " << m.config().model_type << "\n"
                  << "layers:     " << m.num_layers() << " " << layer_pattern(m) << "\n"
                  << "hidden:     " << m.config().hidden << "\n"
                  << "vocab:      " << m.config().vocab << "\n"
                  << "weights:    " << (m.embedding().is_bf16() ? "bf16 (used in place)" : "f32") << "\n"
                  << "tied head:  " << (m.tied_embeddings() ? "yes" : "no") << "\n";
    });
    std::cout << "unused:     " << model.unused_tensors().size() << " tensors of the checkpoint\n";
    return 0;
}

}  // namespace hylens::cli
