#pragma once
// Head- and channel-level cache edits (mask_state): set selected heads or
// channels of one part of the cache to a value (zero ablation, or any constant), or copy them
// from a donor cache. The part is a channel tag:
//   channel::ssm   heads of the SSM / delta-rule state: the first axis of state_shape()
//                  (DeltaNet (Hv, dk, dv), Mamba-2 (H, P, N)); every sequence of the batch
//   channel::conv  channels of the conv window: rows of (C, K)
//   channel::kv    KV heads: K and V of that head at every filled position
// Like every surgery op these return a new cache and are restricted to a LayerSet; layers
// without the part are left alone.

#include <algorithm>    // std::fill, std::copy
#include <cmath>        // std::isfinite
#include <cstddef>      // std::size_t
#include <type_traits>  // std::conditional_t, std::is_same_v
#include <utility>      // std::as_const
#include <vector>       // std::vector

#include "../core/error.hpp"
#include "channels.hpp"
#include "kv_cache.hpp"
#include "layer_set.hpp"
#include "layered_cache.hpp"
#include "parts.hpp"
#include "recurrent_cache.hpp"

namespace hylens {

namespace detail {

template <class Part>
consteval bool require_maskable_part() {
    static_assert(std::is_same_v<Part, channel::ssm> || std::is_same_v<Part, channel::conv> ||
                      std::is_same_v<Part, channel::kv>,
                  "hylens: mask_state / patch_heads act on channel::ssm (state heads), channel::conv (conv "
                  "channels) or channel::kv (KV heads); channel::recurrent is both, name one of them.");
    return true;
}

/// Number of selectable units (heads or channels) of Part in one layer cache; 0 if absent.
template <class Part, class LayerCache>
std::size_t units_of(const LayerCache& c) {
    if constexpr (std::is_same_v<Part, channel::kv>) {
        const KVCache* kv = kv_part(c);
        return kv ? kv->kv_heads() : 0;
    } else {
        const RecurrentCache* r = recurrent_part(c);
        if (!r) return 0;
        if constexpr (std::is_same_v<Part, channel::conv>) return r->conv_channels();
        return r->state_shape().empty() ? 0 : r->state_shape().front();
    }
}

/// Calls f(dst, src, n) for every contiguous run of floats of unit u (all sequences). src is
/// the donor's matching run, or nullptr when there is no donor.
template <class Part, class LayerCache, class F>
void for_unit(LayerCache& c, const LayerCache* donor, std::size_t u, F&& f) {
    if constexpr (requires { c.inner.num_layers(); }) {
        return;  // a stitched block: its parts are its donor layers' (check_units refuses it or passes it by)
    } else if constexpr (std::is_same_v<Part, channel::kv> && !LayerCache::channels::template has<channel::kv>) {
        return;  // no K/V in this kind of layer (callers skip it; this keeps null pointers out of the code)
    } else if constexpr (!std::is_same_v<Part, channel::kv> && !LayerCache::channels::template has<channel::recurrent>) {
        return;
    } else if constexpr (std::is_same_v<Part, channel::kv>) {
        KVCache& kv = *kv_part(c);
        const KVCache* dk = donor ? kv_part(*donor) : nullptr;
        const std::size_t n = kv.length() * kv.head_dim();  // (L, hd)
        for (std::size_t b = 0; b < kv.batch(); ++b) {
            f(kv.k(b, u), dk ? dk->k(b, u) : nullptr, n);
            f(kv.v(b, u), dk ? dk->v(b, u) : nullptr, n);
        }
    } else {
        RecurrentCache& r = *recurrent_part(c);
        const RecurrentCache* dr = donor ? recurrent_part(*donor) : nullptr;
        for (std::size_t b = 0; b < r.batch(); ++b) {
            if constexpr (std::is_same_v<Part, channel::conv>) {
                const std::size_t K = r.conv_width();  // row u of (C, K)
                f(r.conv(b) + u * K, dr ? dr->conv(b) + u * K : nullptr, K);
            } else {
                const std::size_t per_head = r.state_size() / r.state_shape().front();
                f(r.state(b) + u * per_head, dr ? dr->state(b) + u * per_head : nullptr, per_head);
            }
        }
    }
}

/// Layers in range, holding Part (a listed layer without it is a ChannelError, as for drop /
/// keep_only: it was left unchanged without a word), and every unit index in range.
template <class Part, class Cache>
void check_units(const Cache& cache, const LayerSet& layers, const std::vector<std::size_t>& units, const char* op) {
    layers.check_against(cache.num_layers(), op);
    require_channel_held<std::conditional_t<std::is_same_v<Part, channel::kv>, channel::kv, channel::recurrent>>(
        cache, layers, op);
    for (std::size_t i = 0; i < cache.num_layers(); ++i) {
        if (!layers.contains(i)) continue;
        cache.visit(i, [&](const auto& c) {
            // A stitched block holds the channel in its donor layers, several of them, where the
            // heads of one part are meant: it was left unchanged without a word. Named in the
            // set, it is an error; all layers (the default) pass it by, as a layer without the part.
            if constexpr (requires { c.inner.num_layers(); })
                if (!layers.is_all())
                    fail<ChannelError>("[", op, "] layer ", i, " is a stitched block: its ",
                                   std::is_same_v<Part, channel::kv> ? "KV heads" : "state heads and conv channels",
                                   " are its donor layers' (", c.inner.num_layers(), " of them), and ", op,
                                   " selects those of one layer; leave it out of the layers, or edit it whole (patch_state, "
                                   "drop, keep_only, swap)");
            const std::size_t n = units_of<Part>(c);
            if (n == 0) return;
            for (std::size_t u : units)
                check<ShapeError>(u < n, "[", op, "] layer ", i, ": index ", u, " is out of range (the part has ", n,
                                  std::is_same_v<Part, channel::conv> ? " channels)" : " heads)");
        });
    }
}

}  // namespace detail

/// Sets the selected heads / channels of Part to `value` in the layers of `layers`. Returns
/// a new cache. Throws ShapeError for an index out of range.
template <class Part, LayeredCache Cache>
Cache mask_state(const Cache& cache, const LayerSet& layers, const std::vector<std::size_t>& units,
                 float value = 0.0f) {
    static_assert(detail::require_maskable_part<Part>());
    static_assert(detail::require_channel<Cache, Part>());
    detail::check_units<Part>(cache, layers, units, "mask_state");
    check<ShapeError>(std::isfinite(value), "[mask_state] value ", value, " (a cache holds finite values only)");
    Cache out = cache;
    for (std::size_t i = 0; i < out.num_layers(); ++i) {
        if (!layers.contains(i)) continue;
        out.visit(i, [&](auto& c) {
            using C = std::remove_cvref_t<decltype(c)>;
            if (detail::units_of<Part>(std::as_const(c)) == 0) return;
            for (std::size_t u : units)
                detail::for_unit<Part>(c, static_cast<const C*>(nullptr), u,
                                       [&](float* dst, const float*, std::size_t n) { std::fill(dst, dst + n, value); });
        });
    }
    return out;
}

/// Copies the selected heads / channels of Part from `donor` into a copy of `host`, in the
/// layers of `layers`. For channel::kv both caches must hold equally many positions.
template <class Part, LayeredCache Cache, class Other>
Cache patch_heads(const Cache& host, const Other& donor, const LayerSet& layers, const std::vector<std::size_t>& units) {
    static_assert(detail::require_maskable_part<Part>());
    static_assert(detail::require_channel<Cache, Part>());
    static_assert(detail::require_same_stack<Cache, Other>());
    Cache out = host;
    if constexpr (std::is_same_v<Cache, Other>) {
        detail::check_same_layout(host, donor, "patch_heads");
        detail::check_units<Part>(host, layers, units, "patch_heads");
        detail::check_units<Part>(donor, layers, units, "patch_heads");
        // Every layer's parts of one shape before anything is copied (the caches of two models of
        // one stack type and layer order, such as two Qwen3.5 sizes, read past the donor's rows).
        detail::for_each_layer_pair(out, donor, [&](std::size_t i, auto& c, const auto& d) {
            if (!layers.contains(i) || detail::units_of<Part>(std::as_const(c)) == 0) return;
            if constexpr (std::is_same_v<Part, channel::kv>) {
                for_each_kv_pair(c, d, [&](const KVCache& h, const KVCache& o) {
                    detail::check_same_kv(h, o, i, "patch_heads");
                    check<ShapeError>(o.length() == h.length(), "[patch_heads] layer ", i, ": host holds ", h.length(),
                                      " positions, donor ", o.length());
                });
            } else {
                for_each_recurrent_pair(c, d, [&](const RecurrentCache& h, const RecurrentCache& o) {
                    detail::check_same_recurrent(h, o, i, "patch_heads");
                });
            }
        });
        detail::for_each_layer_pair(out, donor, [&](std::size_t i, auto& c, const auto& d) {
            if (!layers.contains(i) || detail::units_of<Part>(std::as_const(c)) == 0) return;
            for (std::size_t u : units)
                detail::for_unit<Part>(c, &d, u, [](float* dst, const float* src, std::size_t n) { std::copy(src, src + n, dst); });
        });
    }
    return out;
}

}  // namespace hylens
