#pragma once
// HybridStack<Kinds...>: decoder layers of the given mixer kinds, in an order that is data
// (from config.json or a builder), because every size of a family shares its kinds but not
// its depth. HybridStack<DeltaNetLayer<>, AttentionLayer<>> runs every Qwen3.5,
// HybridStack<Mamba2Layer<>, AttentionLayer<>> every Granite 4.0 H,
// HybridStack<ParallelLayer<AttentionLayer<>, Mamba2Layer<>>> every Falcon-H1.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <tuple>        // std::tuple
#include <type_traits>  // std::is_same_v
#include <utility>      // std::index_sequence
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "../layers/concepts.hpp"
#include "../layers/decoder.hpp"
#include "stack_cache.hpp"

namespace hylens {

namespace detail {
template <class K, class... Ks>
consteval std::size_t kind_index() {
    constexpr bool found[] = {std::is_same_v<K, Ks>...};
    for (std::size_t i = 0; i < sizeof...(Ks); ++i)
        if (found[i]) return i;
    return sizeof...(Ks);
}
template <class... Ks>
consteval bool kinds_are_distinct() {
    constexpr std::size_t n = sizeof...(Ks);
    constexpr std::size_t idx[] = {kind_index<Ks, Ks...>()...};
    for (std::size_t i = 0; i < n; ++i)
        if (idx[i] != i) return false;
    return true;
}
}  // namespace detail

template <class... Kinds>
class HybridStack {
    static_assert(sizeof...(Kinds) >= 1, "hylens: a HybridStack needs at least one layer kind");
    static_assert((detail::assert_mixer_kind<Kinds>() && ...));
    static_assert(detail::kinds_are_distinct<Kinds...>(), "hylens: each layer kind may appear once in a HybridStack");

public:
    using cache_type = StackCache<Kinds...>;
    using kinds = std::tuple<Kinds...>;
    static constexpr std::size_t num_kinds = sizeof...(Kinds);

    /// Index of kind K in Kinds...; a kind outside the stack does not compile.
    template <class K>
    static constexpr std::size_t index_of() {
        constexpr std::size_t i = detail::kind_index<K, Kinds...>();
        static_assert(i < sizeof...(Kinds), "hylens: this layer kind is not one of the stack's kinds");
        return i;
    }
    template <class K>
    static constexpr bool has_kind = detail::kind_index<K, Kinds...>() < sizeof...(Kinds);

    /// Appends a decoder layer of kind K.
    template <class K>
    void push_back(DecoderLayer<K> layer) {
        constexpr std::size_t k = index_of<K>();
        auto& v = std::get<k>(layers_);
        order_.push_back(LayerSlot{k, v.size()});
        v.push_back(std::move(layer));
    }

    std::size_t size() const noexcept { return order_.size(); }
    const std::vector<LayerSlot>& order() const noexcept { return order_; }
    std::size_t kind_of(std::size_t layer) const {
        check<ShapeError>(layer < size(), "[HybridStack] layer ", layer, " out of ", size());
        return order_[layer].kind;
    }

    /// Calls f(decoder_layer_i) with its concrete DecoderLayer<K> type.
    template <class F>
    void visit(std::size_t layer, F&& f) const {
        visit_impl(*this, layer, std::forward<F>(f), std::index_sequence_for<Kinds...>{});
    }
    template <class F>
    void visit(std::size_t layer, F&& f) {
        visit_impl(*this, layer, std::forward<F>(f), std::index_sequence_for<Kinds...>{});
    }

    cache_type new_cache(std::size_t batch) const {
        typename cache_type::tuple_type parts;
        fill_caches(parts, batch, std::index_sequence_for<Kinds...>{});
        return cache_type(std::move(parts), order_, batch);
    }

    /// Checks that a cache was made for this stack's layers (layer order and batch).
    void check_cache(const cache_type& cache, std::size_t batch) const {
        cache.check_usable("HybridStack");
        check<ShapeError>(cache.order() == order_, "[HybridStack] the cache has ", cache.num_layers(),
                          " layers in another order than this stack's ", size());
        check<ShapeError>(cache.batch() == batch, "[HybridStack] cache batch ", cache.batch(), ", input batch ", batch);
    }

    /// Runs layers [first, last) over the residual stream h [B*T, hidden] in place.
    void forward(float* h, std::size_t B, std::size_t T, cache_type& cache, const std::int64_t* positions,
                 const Hook* hook, std::size_t first = 0, std::size_t last = static_cast<std::size_t>(-1)) const {
        check_cache(cache, B);
        last = last > size() ? size() : last;
        for (std::size_t i = first; i < last; ++i) {
            ForwardContext ctx{i, positions, hook};
            visit(i, [&](const auto& layer) {
                using L = std::remove_cvref_t<decltype(layer)>;
                constexpr std::size_t k = index_of<typename L::kind_type>();
                layer.forward(h, B, T, cache.template of_kind<k>()[order_[i].index], ctx);
            });
        }
    }

private:
    template <class Self, class F, std::size_t... K>
    static void visit_impl(Self& self, std::size_t layer, F&& f, std::index_sequence<K...>) {
        check<ShapeError>(layer < self.order_.size(), "[HybridStack] layer ", layer, " out of ", self.order_.size());
        const LayerSlot s = self.order_[layer];
        // Visitors return nothing: a fold over the kinds calls f on the one that matches.
        ((s.kind == K ? (void)f(std::get<K>(self.layers_)[s.index]) : void()), ...);
    }

    template <std::size_t... K>
    void fill_caches(typename cache_type::tuple_type& parts, std::size_t batch, std::index_sequence<K...>) const {
        ((std::get<K>(parts).reserve(std::get<K>(layers_).size())), ...);
        for (const LayerSlot& s : order_)
            ((s.kind == K ? (void)std::get<K>(parts).push_back(std::get<K>(layers_)[s.index].new_cache(batch)) : void()),
             ...);
    }

    std::tuple<std::vector<DecoderLayer<Kinds>>...> layers_;
    std::vector<LayerSlot> order_;
};

}  // namespace hylens
