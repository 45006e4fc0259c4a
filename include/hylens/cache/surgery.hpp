#pragma once
// Cache surgery: keep or drop the KV and recurrent channels of a
// stack cache, swap the recurrent part between caches, patch recurrent states from a donor.
// Every op is generic over the channel declarations of the layer caches (through kv_part /
// recurrent_part), so ParallelLayer caches (Falcon-H1: both channels in every layer) need
// no special code, and every op is restricted to a LayerSet (default: all layers).
//
// Value semantics: every op takes its inputs by const reference and returns a NEW cache;
// the inputs are never modified (a prefilled context can be reused for every condition).
// The *_in_place variants edit the cache they are given, for callers that own a copy.
//
// Positions follow the KV source: the returned cache's next_position() is the KV length of
// its first attention layer (0 after the KV was dropped), or, in a stack without attention,
// its tokens_seen() (a swap takes the KV source's). Override it per call with
// ForwardOptions::positions or GenerateOptions::start_position.

#include <algorithm>    // std::copy
#include <cstddef>      // std::size_t
#include <type_traits>  // std::is_same_v
#include <utility>      // std::as_const

#include "../core/error.hpp"
#include "cache_diff.hpp"  // diff(): comparison of two caches
#include "channels.hpp"
#include "kv_cache.hpp"
#include "layer_set.hpp"
#include "layered_cache.hpp"
#include "mask_state.hpp"  // mask_state(), patch_heads(): edits of single heads / channels
#include "parts.hpp"
#include "recurrent_cache.hpp"

namespace hylens {

struct DropOptions {
    /// channel::recurrent only: zero the SSM state and keep the conv window (NOT a reset: the
    /// window still holds the last conv inputs of the context).
    bool ssm_only = false;
};

namespace detail {

/// Empties or zeroes `Channel` in one layer cache, if that layer holds it (every part of it,
/// the donor layers of a stitched block included).
template <class Channel, class LayerCache>
void drop_channel(LayerCache& c, const DropOptions& opt) {
    if constexpr (std::is_same_v<Channel, channel::kv>) {
        for_each_kv_part(c, [](KVCache& kv) { kv.clear(); });
    } else {
        for_each_recurrent_part(c, [&](RecurrentCache& r) {
            if constexpr (std::is_same_v<Channel, channel::recurrent>) {
                if (opt.ssm_only) {
                    r.zero_state();
                } else {
                    r.reset();  // conv window and state zero = exactly a fresh sequence start
                }
            } else if constexpr (std::is_same_v<Channel, channel::conv>) {
                r.zero_conv();
            } else {
                static_assert(std::is_same_v<Channel, channel::ssm>);
                r.zero_state();
            }
        });
    }
}

/// drop<Channel> without the static check, for ops that drop "whatever else is there".
template <class Channel, class Cache>
void drop_if_present(Cache& cache, const LayerSet& layers, const DropOptions& opt) {
    if constexpr (stack_has_channel<Cache, Channel>) {
        for (std::size_t i = 0; i < cache.num_layers(); ++i)
            if (layers.contains(i)) cache.visit(i, [&](auto& c) { drop_channel<Channel>(c, opt); });
    }
}

/// Copies the SSM state (and the conv window when with_conv) of `src` into `dst`.
inline void copy_recurrent(RecurrentCache& dst, const RecurrentCache& src, bool with_conv) {
    const std::size_t nc = dst.conv_channels() * dst.conv_width(), ns = dst.state_size();
    for (std::size_t b = 0; b < dst.batch(); ++b) {
        std::copy(src.state(b), src.state(b) + ns, dst.state(b));  // (state_shape...)
        if (with_conv) std::copy(src.conv(b), src.conv(b) + nc, dst.conv(b));  // (C, K)
    }
}

}  // namespace detail

/// Copy of a cache (caches are values; this is the copy constructor, named for readability).
template <LayeredCache Cache>
Cache clone(const Cache& cache) {
    return cache;
}

/// In the layers of `layers`, empties (channel::kv) or zeroes (channel::recurrent: conv window
/// and state, or the state only with opt.ssm_only; channel::conv; channel::ssm) the channel.
/// With every layer (the default), layers that do not hold the channel are left alone. Does
/// not compile for a channel that no layer kind of the stack has; throws ChannelError when no
/// layer of the model holds it, or when `layers` lists a layer that does not; ShapeError for
/// a layer index out of range.
template <class Channel, LayeredCache Cache>
void drop_in_place(Cache& cache, const LayerSet& layers = {}, const DropOptions& opt = {}) {
    static_assert(detail::require_channel<Cache, Channel>());
    layers.check_against(cache.num_layers(), "drop");
    detail::require_channel_held<Channel>(cache, layers, "drop");
    detail::drop_if_present<Channel>(cache, layers, opt);
}

/// drop_in_place on a copy: returns the edited cache, `cache` is unchanged.
template <class Channel, LayeredCache Cache>
Cache drop(const Cache& cache, const LayerSet& layers = {}, const DropOptions& opt = {}) {
    Cache out = cache;
    drop_in_place<Channel>(out, layers, opt);
    return out;
}

/// In the layers of `layers`, keeps `Channel` and drops every other channel:
///   keep_only<channel::kv>         recurrent part reset (conv window and state zero) = KV-ONLY
///   keep_only<channel::recurrent>  KV emptied = REC-ONLY
///   keep_only<channel::ssm>        KV emptied, conv window zeroed
///   keep_only<channel::conv>       KV emptied, state zeroed
/// ChannelError when no layer of the model holds `Channel` (keep_only<channel::kv> on an
/// all-Mamba Granite would silently reset everything), or when `layers` lists one that does not.
template <class Channel, LayeredCache Cache>
void keep_only_in_place(Cache& cache, const LayerSet& layers = {}) {
    static_assert(detail::require_channel<Cache, Channel>());
    layers.check_against(cache.num_layers(), "keep_only");
    detail::require_channel_held<Channel>(cache, layers, "keep_only");
    if constexpr (!std::is_same_v<Channel, channel::kv>) detail::drop_if_present<channel::kv>(cache, layers, {});
    if constexpr (std::is_same_v<Channel, channel::kv>) detail::drop_if_present<channel::recurrent>(cache, layers, {});
    if constexpr (std::is_same_v<Channel, channel::ssm>) detail::drop_if_present<channel::conv>(cache, layers, {});
    if constexpr (std::is_same_v<Channel, channel::conv>) detail::drop_if_present<channel::ssm>(cache, layers, {});
}

template <class Channel, LayeredCache Cache>
Cache keep_only(const Cache& cache, const LayerSet& layers = {}) {
    Cache out = cache;
    keep_only_in_place<Channel>(out, layers);
    return out;
}

/// State swap: per layer l of the result
///   KV part        = (l in layers_kv  ? kv_from : rec_from)'s
///   recurrent part = (l in layers_rec ? rec_from : kv_from)'s  (with conv_with_state = false
///                    only the SSM state comes from rec_from; the conv window stays kv_from's)
/// With the defaults: KV of kv_from, recurrent part of rec_from everywhere. tokens_seen is
/// kv_from's, so the result continues at the KV source's position. Both caches must be of
/// the same stack type (else it does not compile) and layout (else ShapeError); their KV
/// lengths may differ. An explicit layers_kv entry must name a layer holding K/V, a layers_rec
/// entry one holding a recurrent part (ChannelError). A stitched block's donor layers swap too.
namespace detail {

/// state_swap_in_place, its errors naming `op` (patch_state is a swap of recurrent parts).
template <LayeredCache Cache, class Other>
void swap_parts(Cache& kv_from, const Other& rec_from, const LayerSet& layers_kv, const LayerSet& layers_rec,
                bool conv_with_state, const char* op) {
    static_assert(require_same_stack<Cache, Other>());
    if constexpr (std::is_same_v<Cache, Other>) {  // keeps a mismatch down to the one sentence above
        check_same_layout(kv_from, rec_from, op);
        layers_kv.check_against(kv_from.num_layers(), op);
        layers_rec.check_against(kv_from.num_layers(), op);
        if (!layers_kv.is_all()) require_channel_held<channel::kv>(kv_from, layers_kv, op);
        if (!layers_rec.is_all()) require_channel_held<channel::recurrent>(kv_from, layers_rec, op);
        // Check every layer before copying anything, so a mismatch leaves kv_from untouched.
        for_each_layer_pair(kv_from, rec_from, [&](std::size_t i, auto& dst, const auto& src) {
            for_each_kv_pair(dst, src, [&](const KVCache& d, const KVCache& s) { check_same_kv(d, s, i, op); });
            for_each_recurrent_pair(dst, src, [&](const RecurrentCache& d, const RecurrentCache& s) {
                check_same_recurrent(d, s, i, op);
            });
        });
        for_each_layer_pair(kv_from, rec_from, [&](std::size_t i, auto& dst, const auto& src) {
            if (!layers_kv.contains(i)) for_each_kv_pair(dst, src, [](KVCache& d, const KVCache& s) { d = s; });
            if (layers_rec.contains(i))
                for_each_recurrent_pair(dst, src, [&](RecurrentCache& d, const RecurrentCache& s) {
                    copy_recurrent(d, s, conv_with_state);
                });
        });
    }
}

}  // namespace detail

template <LayeredCache Cache, class Other>
void state_swap_in_place(Cache& kv_from, const Other& rec_from, const LayerSet& layers_kv = {},
                         const LayerSet& layers_rec = {}, bool conv_with_state = true) {
    detail::swap_parts(kv_from, rec_from, layers_kv, layers_rec, conv_with_state, "state_swap");
}

template <LayeredCache Cache, class Other>
Cache state_swap(const Cache& kv_from, const Other& rec_from, const LayerSet& layers_kv = {},
                 const LayerSet& layers_rec = {}, bool conv_with_state = true) {
    Cache out = kv_from;
    state_swap_in_place(out, rec_from, layers_kv, layers_rec, conv_with_state);
    return out;
}

/// State patch (Paper A exp32-B): a copy of `host` whose recurrent
/// layers in `layers` take the donor's SSM state (and conv window when include_conv). The
/// host's K/V and position are kept. Both caches must come from prefixes of equal length
/// (equal tokens_seen(), else ShapeError), and the layers must hold a recurrent part
/// (ChannelError, as for every channel op).
template <LayeredCache Cache, class Other>
Cache patch_state(const Cache& host, const Other& donor, const LayerSet& layers, bool include_conv = true) {
    static_assert(detail::require_channel<Cache, channel::recurrent>());
    static_assert(detail::require_same_stack<Cache, Other>());
    layers.check_against(host.num_layers(), "patch_state");
    detail::require_channel_held<channel::recurrent>(host, layers, "patch_state");
    check<ShapeError>(host.tokens_seen() == donor.tokens_seen(), "[patch_state] the host cache has seen ",
                      host.tokens_seen(), " tokens and the donor ", donor.tokens_seen(),
                      "; a state patch copies between prefixes of equal length");
    Cache out = host;
    detail::swap_parts(out, donor, LayerSet::all(), layers, include_conv, "patch_state");
    return out;
}

/// Where generation continues on `cache` (the KV source's length, or tokens seen in a stack
/// without attention): the default start position of forward() and generate().
template <LayeredCache Cache>
std::size_t continue_position(const Cache& cache) {
    return cache.next_position();
}

}  // namespace hylens
