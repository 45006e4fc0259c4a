#pragma once
// The index types of the public API, one per meaning (docs/containers.md):
//   LayerIndex (std::size_t): a decoder layer of a model, 0 .. L-1, everywhere: stacks, caches,
//     LayerSet, cache surgery, site descriptors (SiteRef::layer), Hook callbacks and
//     Intervention::layers. The layer-less sites (embed, final_norm) sit at `no_layer`.
//   Token ids and positions are std::int64_t (TokenBatch, GenerateResult, RunOptions::positions);
//     the tokenizer's int32 ids widen into them.
// tests/containers checks at compile time that the public signatures keep to this rule.
// layer_index() and site_layer_index() read a layer from a signed number (CLI, JSON, Python)
// with a range check: a negative layer is a ShapeError, never a wrapped-around index.

#include <concepts>  // std::integral
#include <cstddef>   // std::size_t
#include <limits>    // std::numeric_limits
#include <string>    // std::string
#include <type_traits>  // std::is_signed_v

#include "error.hpp"

namespace hylens {

using LayerIndex = std::size_t;

/// The layer of the sites that belong to no decoder layer (embed, final_norm).
inline constexpr LayerIndex no_layer = std::numeric_limits<LayerIndex>::max();

/// A decoder layer read from a signed number: a ShapeError for a negative one.
template <std::integral I>
LayerIndex layer_index(I layer) {
    if constexpr (std::is_signed_v<I>)
        check<ShapeError>(layer >= 0, "[layer_index] layer ", layer, " is negative: decoder layers count from 0");
    return static_cast<LayerIndex>(layer);
}

/// The layer of a site read from a signed number: -1 is `no_layer` (embed, final_norm), other
/// negatives are a ShapeError.
template <std::integral I>
LayerIndex site_layer_index(I layer) {
    if constexpr (std::is_signed_v<I>)
        if (layer == -1) return no_layer;
    return layer_index(layer);
}

/// "13", or "none" for no_layer (messages and descriptions).
inline std::string layer_name(LayerIndex layer) { return layer == no_layer ? "none" : std::to_string(layer); }

/// A ShapeError naming `op` when a layer comes twice in `layers` (one result per layer).
template <class Layers>
void check_distinct_layers(const Layers& layers, const char* op) {
    for (auto i = layers.begin(); i != layers.end(); ++i)
        for (auto j = layers.begin(); j != i; ++j)
            check<ShapeError>(*i != *j, "[", op, "] layer ", layer_name(*i), " is listed twice");
}

}  // namespace hylens
