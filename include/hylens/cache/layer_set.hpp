#pragma once
// LayerSet: which decoder layers a cache operation touches. Either every layer ("all", the
// default of every surgery op) or an explicit list of layer indices (an empty list touches
// nothing). Indices are checked against the cache when an op runs.

#include <algorithm>         // std::sort, std::unique, std::binary_search
#include <cstddef>           // std::size_t
#include <cstdint>           // std::int64_t
#include <initializer_list>  // std::initializer_list
#include <string>            // std::string
#include <vector>            // std::vector

#include "../core/error.hpp"

namespace hylens {

class LayerSet {
public:
    /// Every layer.
    LayerSet() = default;
    static LayerSet all() { return LayerSet(); }
    /// No layer (an op restricted to it is the identity).
    static LayerSet none() { return LayerSet(std::vector<std::size_t>{}); }
    /// Exactly these layers (order and repeats do not matter).
    LayerSet(std::initializer_list<std::size_t> layers) : LayerSet(std::vector<std::size_t>(layers)) {}
    explicit LayerSet(std::vector<std::size_t> layers) : all_(false), layers_(std::move(layers)) {
        std::sort(layers_.begin(), layers_.end());
        layers_.erase(std::unique(layers_.begin(), layers_.end()), layers_.end());
    }
    /// From the I64 layer lists of the reference files (kv_only_layers.layers, ...).
    static LayerSet from_i64(const std::vector<std::int64_t>& ids, const std::string& what = "layer set") {
        std::vector<std::size_t> v;
        v.reserve(ids.size());
        for (auto id : ids) {
            check<ShapeError>(id >= 0, "[LayerSet] ", what, ": negative layer index ", id);
            v.push_back(static_cast<std::size_t>(id));
        }
        return LayerSet(std::move(v));
    }
    /// Layers [first, last); first == last is no layer, first > last a ShapeError (reversed
    /// bounds gave an empty set, so the op did nothing).
    static LayerSet range(std::size_t first, std::size_t last) {
        check<ShapeError>(first <= last, "[LayerSet] range(", first, ", ", last,
                          "): the first layer is past the end (layers [first, last))");
        std::vector<std::size_t> v;
        for (std::size_t i = first; i < last; ++i) v.push_back(i);
        return LayerSet(std::move(v));
    }

    bool is_all() const noexcept { return all_; }
    bool contains(std::size_t layer) const noexcept {
        return all_ || std::binary_search(layers_.begin(), layers_.end(), layer);
    }
    /// The explicit indices (empty for "all").
    const std::vector<std::size_t>& indices() const noexcept { return layers_; }

    /// Throws ShapeError naming `op` when an explicit index is not below num_layers.
    void check_against(std::size_t num_layers, const char* op) const {
        if (all_ || layers_.empty()) return;
        check<ShapeError>(layers_.back() < num_layers, "[", op, "] layer ", layers_.back(),
                          " is out of range: the cache has ", num_layers, " layers");
    }

    friend bool operator==(const LayerSet&, const LayerSet&) = default;

private:
    bool all_ = true;
    std::vector<std::size_t> layers_;  // sorted, unique; used when !all_
};

}  // namespace hylens
