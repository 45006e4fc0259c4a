#pragma once
// The cache a condition generates from (experiments/conditions.hpp), built from the prefilled
// caches of source A (and of source B for the swaps) and left unchanged.
//
// Layer-restricted conditions (NAME@S) edit the layers of S that hold the channel they edit
// (edited_layers) and keep FULL-on-A elsewhere:
//   KV_ONLY@S     recurrent part reset in S
//   REC_ONLY@S    KV dropped in S
//   NONE@S        both in S
//   KV_A+REC_B@S  recurrent part of B in S (KV of A everywhere)
//   KV_B+REC_A@S  KV of B in S (recurrent part of A everywhere)
// The query starts at the KV source's length n while any layer still holds K/V, and at 0 once
// the KV of every attention layer is dropped (REC_ONLY, NONE) or in a stack without attention.

#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t
#include <utility>  // std::move

#include "../cache/layer_set.hpp"
#include "../cache/surgery.hpp"
#include "../core/error.hpp"
#include "../stack/split_prefill.hpp"
#include "conditions.hpp"

namespace hylens::experiments {

/// Which layers of a cache hold each channel.
template <LayeredCache Cache>
ChannelLayers channel_layers(const Cache& c) {
    ChannelLayers out;
    out.num_layers = c.num_layers();
    if constexpr (stack_has_channel<Cache, channel::kv>) out.kv = layers_with<channel::kv>(c);
    if constexpr (stack_has_channel<Cache, channel::recurrent>) out.recurrent = layers_with<channel::recurrent>(c);
    return out;
}

namespace detail {

template <LayeredCache Cache>
bool any_kv_left(const Cache& c) {
    bool any = false;
    for (std::size_t i = 0; i < c.num_layers(); ++i)
        c.visit(i, [&](const auto& layer) {
            if (const KVCache* kv = kv_part(layer)) any = any || kv->length() > 0;
        });
    return any;
}

}  // namespace detail

/// The cache of condition `c` and its query start position. `b` is needed (non-null) by the
/// swap conditions only; A and B must have the same token length.
template <LayeredCache Cache>
EditedCache<Cache> condition_cache(const Condition& c, const Cache& a, const Cache* b) {
    const LayerSet layers = c.layers ? LayerSet(edited_layers(c, channel_layers(a))) : LayerSet::all();
    check(layers.is_all() || !layers.indices().empty(), "[condition_cache] ", c.name(),
          ": no layer of the set holds a channel the condition edits");
    if (c.kind == ConditionKind::split) {
        EditedCache<Cache> e = apply_split_mode(a, c.mode, layers);
        if (c.layers && (c.mode == SplitMode::REC_ONLY || c.mode == SplitMode::NONE) && detail::any_kv_left(e.cache))
            e.position = static_cast<std::int64_t>(a.next_position());
        return e;
    }
    check(b != nullptr, "[condition_cache] ", c.name(), " needs the cache of source B");
    check(a.tokens_seen() == b->tokens_seen(), "[condition_cache] ", c.name(), ": sources A and B hold ",
          a.tokens_seen(), " and ", b->tokens_seen(), " tokens (a swap needs equal lengths)");
    const Cache& kv_src = c.kv == Source::A ? a : *b;
    const Cache& rec_src = c.rec == Source::A ? a : *b;
    Cache out = [&] {
        // The same-source controls go through the swap too (both parts from one cache): a swap
        // that wrote a part wrongly shows in them. They have no @ form (parse_condition).
        check(!c.same_source() || !c.layers, "[condition_cache] ", c.name(), ": a same-source control edits no layer set");
        if (!c.layers) return state_swap(kv_src, rec_src);
        // Restricted: FULL on A outside S.
        if (c.kv == Source::A) return state_swap(a, *b, LayerSet::all(), layers);  // REC of B in S
        return state_swap(*b, a, layers, LayerSet::all());                         // KV of B in S
    }();
    const auto p = static_cast<std::int64_t>(a.next_position());
    return {std::move(out), p};
}

}  // namespace hylens::experiments
