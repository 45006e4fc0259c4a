#pragma once
// The index types of the public API, one per meaning (docs/containers.md):
//   LayerIndex (std::size_t): a decoder layer of a model, 0 .. L-1: stacks, caches, LayerSet,
//     cache surgery, state patches by LayerSet.
//   SiteLayer (int): the layer of an activation site: SiteRef::layer, Hook callbacks,
//     Intervention::layers; 0 .. L-1, or -1 for the layer-less sites (embed, final_norm).
//   Token ids and positions are std::int64_t (TokenBatch, GenerateResult, RunOptions::positions);
//     the tokenizer's int32 ids widen into them.
// tests/containers checks at compile time that the public signatures keep to this rule.
// site_layer() and layer_index() convert between the two with a range check.

#include <cstddef>  // std::size_t
#include <limits>   // std::numeric_limits

#include "error.hpp"

namespace hylens {

using LayerIndex = std::size_t;
using SiteLayer = int;

/// The SiteLayer of a model layer (a ShapeError if it does not fit an int).
inline SiteLayer site_layer(LayerIndex layer) {
    check<ShapeError>(layer <= static_cast<LayerIndex>(std::numeric_limits<SiteLayer>::max()), "[site_layer] layer ", layer,
                      " does not fit a site's layer index");
    return static_cast<SiteLayer>(layer);
}

/// The model layer a site names (a ShapeError for -1 and other negatives: embed and
/// final_norm belong to no layer).
inline LayerIndex layer_index(SiteLayer layer) {
    check<ShapeError>(layer >= 0, "[layer_index] site layer ", layer, " names no decoder layer (-1 is embed / final_norm)");
    return static_cast<LayerIndex>(layer);
}

}  // namespace hylens
