#pragma once
// LayeredCache: what cache surgery needs from a whole-stack cache (StackCache<Kinds...> is
// one): per-layer caches reachable by index through visit(), their types listed in
// tuple_type = std::tuple<std::vector<LayerCacheOfKind>...>, and a position counter. Here too
// the compile-time checks every surgery op makes: the channel must be one that some layer
// kind of the stack declares, and two caches handed to one op must be of the same type.

#include <concepts>     // std::copyable, std::equality_comparable, std::convertible_to
#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <tuple>        // std::tuple
#include <type_traits>  // std::is_same_v, std::false_type, std::true_type
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "channels.hpp"
#include "layer_set.hpp"
#include "parts.hpp"

namespace hylens {

/// concept LayeredCache: a value type holding the caches of a stack's layers.
///   tuple_type          std::tuple<std::vector<C>...>, one vector per layer kind
///   num_layers(), batch()
///   order()             the layer layout (kind, index) — equal for caches of one model
///   visit(i, f)         calls f(layer cache i) with its concrete type
///   next_position()     where the next token goes (KV length, or tokens seen)
///   tokens_seen() / set_tokens_seen(n)
template <class C>
concept LayeredCache = std::copyable<C> && std::equality_comparable<C> &&
                       requires(const C& c, C& m, std::size_t i) {
                           typename C::tuple_type;
                           { c.num_layers() } -> std::convertible_to<std::size_t>;
                           { c.batch() } -> std::convertible_to<std::size_t>;
                           c.order() == c.order();
                           { c.next_position() } -> std::convertible_to<std::size_t>;
                           { c.tokens_seen() } -> std::convertible_to<std::size_t>;
                           m.set_tokens_seen(i);
                       };

namespace detail {

template <class T>
struct is_channel_tag : std::false_type {};
template <>
struct is_channel_tag<channel::kv> : std::true_type {};
template <>
struct is_channel_tag<channel::recurrent> : std::true_type {};
template <>
struct is_channel_tag<channel::conv> : std::true_type {};
template <>
struct is_channel_tag<channel::ssm> : std::true_type {};

template <class Tuple, class Channel>
struct tuple_has_channel : std::false_type {};
template <class... LayerCaches, class Channel>
struct tuple_has_channel<std::tuple<std::vector<LayerCaches>...>, Channel> {
    static constexpr bool value = (channel::has_channel<LayerCaches, Channel> || ...);
};

}  // namespace detail

/// True when some layer kind of the stack whose cache is `Cache` declares `Channel`.
template <class Cache, class Channel>
inline constexpr bool stack_has_channel = detail::tuple_has_channel<typename Cache::tuple_type, Channel>::value;

namespace detail {

/// The static check of every channel op: one plain sentence per misuse, saying what to ask for instead.
template <class Cache, class Channel>
consteval bool require_channel() {
    static_assert(is_channel_tag<Channel>::value,
                  "hylens: not a channel tag; use channel::kv, channel::recurrent, channel::conv or channel::ssm.");
    static_assert(stack_has_channel<Cache, Channel>,
                  "hylens: this stack has no layer kind with the requested channel (for example channel::kv "
                  "on a stack without attention layers); ask only for a channel that one of the stack's "
                  "layer kinds declares.");
    return true;
}

template <class CacheA, class CacheB>
consteval bool require_same_stack() {
    static_assert(std::is_same_v<CacheA, CacheB>,
                  "hylens: cache surgery between caches of different stack types; both caches must come "
                  "from models of the same HybridStack type.");
    return true;
}

/// Runtime check that two caches of one type were made by the same model layout.
template <class Cache>
void check_same_layout(const Cache& a, const Cache& b, const char* op) {
    if constexpr (requires { a.check_usable(op); }) {
        a.check_usable(op);
        b.check_usable(op);
    }
    check<ShapeError>(a.num_layers() == b.num_layers(), "[", op, "] the caches have ", a.num_layers(), " and ",
                      b.num_layers(), " layers");
    check<ShapeError>(a.order() == b.order(), "[", op,
                      "] the caches have the same number of layers but another order of layer kinds");
    check<ShapeError>(a.batch() == b.batch(), "[", op, "] the caches hold ", a.batch(), " and ", b.batch(),
                      " sequences");
}

/// Calls f(layer_index, cache_of_a, cache_of_b) for every layer (same concrete type in both).
template <class Cache, class F>
void for_each_layer_pair(Cache& a, const Cache& b, F&& f) {
    for (std::size_t i = 0; i < a.num_layers(); ++i)
        a.visit(i, [&](auto& ca) {
            b.visit(i, [&](const auto& cb) {
                using A = std::remove_cvref_t<decltype(ca)>;
                using B = std::remove_cvref_t<decltype(cb)>;
                // Equal order() makes the types equal; the branch keeps other pairs uncompiled.
                if constexpr (std::is_same_v<A, B>) f(i, ca, cb);
            });
        });
}

}  // namespace detail

/// The layers whose cache holds `Channel` (in layer order; a stitched block's layer counts
/// when one of its donor layers holds it).
template <class Channel, LayeredCache Cache>
std::vector<std::size_t> layers_with(const Cache& cache) {
    static_assert(detail::require_channel<Cache, Channel>());
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](const auto& c) {
            if (layer_holds<Channel>(c)) out.push_back(i);
        });
    return out;
}

/// A channel op asked for a channel that the model's layers (or the listed ones) do not hold:
/// the run-time twin of the compile-time channel check, for models whose stack type allows a
/// channel that their layer list lacks (an all-Mamba Granite, whose type allows attention).
class ChannelError : public Error {
public:
    using Error::Error;
};

template <class Channel>
constexpr const char* channel_name() noexcept {
    if constexpr (std::is_same_v<Channel, channel::kv>) return "channel::kv";
    else if constexpr (std::is_same_v<Channel, channel::recurrent>) return "channel::recurrent";
    else if constexpr (std::is_same_v<Channel, channel::conv>) return "channel::conv";
    else return "channel::ssm";
}

namespace detail {

/// "model granitemoehybrid, layers 0-2: mamba2 mamba2 mamba2" (what the cache knows of itself).
template <class Cache>
std::string describe_layers(const Cache& cache) {
    std::string out;
    if constexpr (requires { cache.model(); })
        out = "model " + (cache.model().empty() ? std::string("(unnamed)") : cache.model()) + ", ";
    out += cache.num_layers() ? "layers 0-" + std::to_string(cache.num_layers() - 1) + ":" : "no layers";
    for (std::size_t i = 0; i < cache.num_layers(); ++i) {
        if constexpr (requires { cache.kind_name(i); })
            out += " " + std::string(cache.kind_name(i));
        else
            out += " ?";
    }
    return out;
}

/// The run-time channel check of every channel op: with `layers` = all, some layer must hold
/// `Channel`; with an explicit list, every listed layer must (ChannelError otherwise, naming the
/// model, its layers and the channel, in the wording of the static check).
template <class Channel, class Cache>
void require_channel_held(const Cache& cache, const LayerSet& layers, const char* op) {
    using Held = std::conditional_t<std::is_same_v<Channel, channel::kv>, channel::kv, channel::recurrent>;
    std::vector<std::size_t> held;
    for (std::size_t i = 0; i < cache.num_layers(); ++i)
        cache.visit(i, [&](const auto& c) {
            if (layer_holds<Held>(c)) held.push_back(i);
        });
    std::string held_s;
    for (std::size_t i : held) held_s += (held_s.empty() ? "" : ", ") + std::to_string(i);
    if (layers.is_all()) {
        check<ChannelError>(!held.empty(), "hylens: [", op, "] this model has no layer with the requested channel (",
                            channel_name<Channel>(), "; ", describe_layers(cache),
                            "); ask only for a channel that one of the model's layers holds.");
        return;
    }
    for (std::size_t l : layers.indices()) {
        bool ok = false;
        for (std::size_t h : held) ok = ok || h == l;
        std::string kind;
        if constexpr (requires { cache.kind_name(l); }) kind = " (" + std::string(cache.kind_name(l)) + ")";
        check<ChannelError>(ok, "hylens: [", op, "] layer ", l, kind, " does not hold the requested channel (",
                            channel_name<Channel>(), "; ", describe_layers(cache), "); list only layers that hold it",
                            held.empty() ? std::string(": none does") : ": " + held_s, ".");
    }
}

}  // namespace detail

}  // namespace hylens
