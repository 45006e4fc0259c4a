#pragma once
// Generic access to the channel parts of any layer cache: kv_part(c) is the KVCache inside c
// (or nullptr), recurrent_part(c) the RecurrentCache (or nullptr). Works through nested
// ParallelCache halves, so every operation written on parts covers every layer kind. The
// for_each_* forms also reach the layers of a nested stack cache (a stitched block's).

#include <type_traits>  // std::is_same_v, std::remove_const_t, std::type_identity_t

#include <cstddef>  // std::size_t
#include <string>   // std::string, std::to_string

#include "../core/error.hpp"
#include "channels.hpp"
#include "kv_cache.hpp"
#include "recurrent_cache.hpp"

namespace hylens {

template <class C>
auto kv_part(C& c) {
    using Out = std::conditional_t<std::is_const_v<C>, const KVCache*, KVCache*>;
    if constexpr (std::is_same_v<std::remove_const_t<C>, KVCache>) {
        return static_cast<Out>(&c);
    } else if constexpr (requires { c.first; c.second; }) {
        Out p = kv_part(c.first);
        return p ? p : kv_part(c.second);
    } else {
        return static_cast<Out>(nullptr);
    }
}

template <class C>
auto recurrent_part(C& c) {
    using Out = std::conditional_t<std::is_const_v<C>, const RecurrentCache*, RecurrentCache*>;
    if constexpr (std::is_same_v<std::remove_const_t<C>, RecurrentCache>) {
        return static_cast<Out>(&c);
    } else if constexpr (requires { c.first; c.second; }) {
        Out p = recurrent_part(c.first);
        return p ? p : recurrent_part(c.second);
    } else {
        return static_cast<Out>(nullptr);
    }
}

}  // namespace hylens

namespace hylens {

/// Calls f(Part&, name) for every part of type Part inside a layer cache (as for_each_part):
/// `name` is `prefix` for the layer's own parts (both halves of a ParallelCache, one KV and one
/// recurrent, share it) and `prefix` + "<i>." for those of layer i of a nested stack cache (a
/// stitched block's donor layers). save_cache's tensor names.
template <class Part, class C, class F>
void for_each_named_part(C& c, const std::string& prefix, F&& f) {
    if constexpr (std::is_same_v<std::remove_const_t<C>, Part>) {
        f(c, prefix);
    } else if constexpr (requires { c.first; c.second; }) {
        for_each_named_part<Part>(c.first, prefix, f);
        for_each_named_part<Part>(c.second, prefix, f);
    } else if constexpr (requires { c.inner.num_layers(); }) {
        for (std::size_t i = 0; i < c.inner.num_layers(); ++i)
            c.inner.visit(i, [&](auto& lc) { for_each_named_part<Part>(lc, prefix + std::to_string(i) + ".", f); });
    }
}

/// Calls f(Part&) for every part of type Part (KVCache or RecurrentCache) inside a layer
/// cache: its own, both halves of a ParallelCache, and every layer of a nested stack cache (a
/// stitched block's donor layers).
template <class Part, class C, class F>
void for_each_part(C& c, F&& f) {
    for_each_named_part<Part>(c, std::string(), [&](auto& part, const std::string&) { f(part); });
}
template <class C, class F>
void for_each_kv_part(C& c, F&& f) {
    for_each_part<KVCache>(c, f);
}
template <class C, class F>
void for_each_recurrent_part(C& c, F&& f) {
    for_each_part<RecurrentCache>(c, f);
}

/// Whether two layer caches of one type nest equal layouts: a stitched block's donor layers,
/// as many and of the same kinds (two stitch plans of one C++ type may differ there).
template <class C>
bool same_nested_layout(const C& a, const C& b) {
    if constexpr (requires { a.first; a.second; }) {
        return same_nested_layout(a.first, b.first) && same_nested_layout(a.second, b.second);
    } else if constexpr (requires { a.inner.num_layers(); }) {
        return a.inner.num_layers() == b.inner.num_layers() && a.inner.order() == b.inner.order();
    } else {
        return true;
    }
}

/// Calls f(dst_part, src_part) for the matching parts of type Part of two layer caches of one
/// type (equal layouts: nested stack caches of one model); `dst` may be const (a comparison).
/// Stitched blocks of two different plans are a ShapeError (their extra donor layers were
/// skipped without a word).
template <class Part, class C, class F>
void for_each_part_pair(C& dst, const std::type_identity_t<std::remove_const_t<C>>& src, F&& f) {
    if constexpr (std::is_same_v<std::remove_const_t<C>, Part>) {
        f(dst, src);
    } else if constexpr (requires { dst.first; dst.second; }) {
        for_each_part_pair<Part>(dst.first, src.first, f);
        for_each_part_pair<Part>(dst.second, src.second, f);
    } else if constexpr (requires { dst.inner.num_layers(); }) {
        check<ShapeError>(same_nested_layout(dst, src), "[cache] stitched blocks of different plans (", dst.inner.num_layers(),
                          " and ", src.inner.num_layers(), " donor layers, or other kinds): the caches come from different "
                          "stitched models");
        for (std::size_t i = 0; i < dst.inner.num_layers(); ++i)
            dst.inner.visit(i, [&](auto& d) {
                src.inner.visit(i, [&](const auto& s) {
                    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(d)>, std::remove_cvref_t<decltype(s)>>)
                        for_each_part_pair<Part>(d, s, f);
                });
            });
    }
}
template <class C, class F>
void for_each_kv_pair(C& dst, const std::type_identity_t<std::remove_const_t<C>>& src, F&& f) {
    for_each_part_pair<KVCache>(dst, src, f);
}
template <class C, class F>
void for_each_recurrent_pair(C& dst, const std::type_identity_t<std::remove_const_t<C>>& src, F&& f) {
    for_each_part_pair<RecurrentCache>(dst, src, f);
}

/// Whether a layer cache holds `Channel` at run time (some part of it, nested ones included).
template <class Channel, class C>
bool layer_holds(const C& c) {
    bool found = false;
    if constexpr (std::is_same_v<Channel, channel::kv>)
        for_each_kv_part(c, [&](const KVCache&) { found = true; });
    else
        for_each_recurrent_part(c, [&](const RecurrentCache&) { found = true; });
    return found;
}

namespace detail {

/// ShapeError unless two recurrent parts have one shape (batch, conv window, state): the
/// caches of a copy between them come from models of one shape.
inline void check_same_recurrent(const RecurrentCache& a, const RecurrentCache& b, std::size_t layer,
                                  const char* op) {
    check<ShapeError>(a.batch() == b.batch() && a.conv_channels() == b.conv_channels() &&
                          a.conv_width() == b.conv_width() && a.state_shape() == b.state_shape(),
                      "[", op, "] layer ", layer, ": recurrent parts differ (conv ", a.conv_channels(), "x",
                      a.conv_width(), ", state of ", a.state_size(), " vs conv ", b.conv_channels(), "x",
                      b.conv_width(), ", state of ", b.state_size(), "); the caches come from different models");
}

inline void check_same_kv(const KVCache& a, const KVCache& b, std::size_t layer, const char* op) {
    check<ShapeError>(a.batch() == b.batch() && a.kv_heads() == b.kv_heads() && a.head_dim() == b.head_dim(), "[",
                      op, "] layer ", layer, ": KV parts differ (", a.kv_heads(), " heads x ", a.head_dim(), " vs ",
                      b.kv_heads(), " heads x ", b.head_dim(), "); the caches come from different models");
}

}  // namespace detail

}  // namespace hylens
