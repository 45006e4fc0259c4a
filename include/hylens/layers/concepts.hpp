#pragma once
// The contract of a token-mixer kind (DeltaNetLayer, Mamba2Layer, AttentionLayer,
// ParallelLayer): a cache type that declares its channels, a cache factory and one forward
// entry for any T >= 1 tokens that starts from whatever the cache holds (the continuation
// contract: feeding tokens in any split gives the same result as one call). forward writes every
// element of out ([B * T, hidden]): DecoderLayer and ParallelLayer hand it buffers they do not
// zero.

#include <concepts>  // std::same_as
#include <cstddef>   // std::size_t

#include "hooks.hpp"

namespace hylens {

template <class C>
concept LayerCache = std::copyable<C> && std::equality_comparable<C> && requires { typename C::channels; };

template <class L>
concept MixerKind = requires(const L& layer, typename L::cache_type& cache, const float* x, float* out,
                             std::size_t n, const ForwardContext& ctx) {
    typename L::cache_type;
    typename L::config_type;
    requires LayerCache<typename L::cache_type>;
    { layer.new_cache(n) } -> std::same_as<typename L::cache_type>;
    layer.forward(x, n, n, out, cache, ctx);
    { layer.config() } -> std::same_as<const typename L::config_type&>;
};

namespace detail {
/// A per-kind check that names the offending type (g++ 12 reports a failed pack
/// constraint without saying which element failed).
template <class L>
consteval bool assert_mixer_kind() {
    static_assert(MixerKind<L>,
                  "hylens: this type is not a layer kind. A layer kind (DeltaNetLayer<>, Mamba2Layer<>, "
                  "AttentionLayer<>, ParallelLayer<A, B>) needs cache_type, config_type, new_cache(batch), "
                  "config() and forward(x, B, T, out, cache, ctx).");
    return true;
}
}  // namespace detail

}  // namespace hylens
