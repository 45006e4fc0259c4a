#pragma once
// Split-prefill: prefill a context, keep or drop the KV and
// recurrent parts of its cache, then run a query (and greedy tokens) on the edited cache.
//
//   mode      KV part   recurrent part                      query starts at
//   FULL      kept      kept                                n  (= joint forward of ctx ++ query)
//   KV_ONLY   kept      reset (conv window and state zero)  n
//   REC_ONLY  dropped   kept                                0
//   NONE      dropped   reset                               0  (= the query alone)
//
// `layers` restricts the edit (a reset, or a KV drop) to those layers; conv_with_state =
// false makes a reset zero the SSM state only and keep the conv window (not a true reset:
// the window still holds the context's last conv inputs). Stacks
// without attention skip the KV edits (REC_ONLY == FULL there) and restart their position
// counter at 0 for REC_ONLY and NONE; stacks without recurrent layers skip the resets
// (KV_ONLY == FULL there). An explicit `layers` list must name layers that hold what the mode
// edits: recurrent layers for KV_ONLY, attention layers for REC_ONLY (ChannelError).

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "../cache/channels.hpp"
#include "../cache/layer_set.hpp"
#include "../cache/surgery.hpp"
#include "../core/error.hpp"
#include "generate.hpp"
#include "tokens.hpp"

namespace hylens {

enum class SplitMode { FULL, KV_ONLY, REC_ONLY, NONE };

inline std::string_view to_string(SplitMode m) noexcept {
    switch (m) {
        case SplitMode::FULL: return "FULL";
        case SplitMode::KV_ONLY: return "KV_ONLY";
        case SplitMode::REC_ONLY: return "REC_ONLY";
        case SplitMode::NONE: return "NONE";
    }
    return "?";
}

/// A cache after surgery and the position at which its next token goes.
template <class Cache>
struct EditedCache {
    Cache cache;
    std::int64_t position = 0;
};

/// Applies `mode` to a copy of a prefilled cache (`prefilled` is unchanged).
template <LayeredCache Cache>
EditedCache<Cache> apply_split_mode(const Cache& prefilled, SplitMode mode, const LayerSet& layers = {},
                                    bool conv_with_state = true) {
    EditedCache<Cache> out{prefilled, 0};
    Cache& c = out.cache;
    const bool drop_kv = mode == SplitMode::REC_ONLY || mode == SplitMode::NONE;
    const bool reset_rec = mode == SplitMode::KV_ONLY || mode == SplitMode::NONE;
    layers.check_against(c.num_layers(), "split_prefill");
    // Every layer: a mode skips the channels the model lacks (the table above). An explicit
    // layer list must name layers holding what the mode edits (ChannelError otherwise).
    if (!layers.is_all()) {
        if (reset_rec && !drop_kv) detail::require_channel_held<channel::recurrent>(c, layers, "split_prefill");
        if (drop_kv && !reset_rec) detail::require_channel_held<channel::kv>(c, layers, "split_prefill");
    }
    if constexpr (stack_has_channel<Cache, channel::recurrent>) {
        if (reset_rec) detail::drop_if_present<channel::recurrent>(c, layers, DropOptions{.ssm_only = !conv_with_state});
    }
    bool any_kv = false;
    if constexpr (stack_has_channel<Cache, channel::kv>) {
        if (drop_kv) detail::drop_if_present<channel::kv>(c, layers, {});
        any_kv = !layers_with<channel::kv>(c).empty();  // the type may allow attention that the model lacks
    }
    // No KV to carry the position (e.g. an all-Mamba Granite): restart at 0 as the table says.
    if (drop_kv && !any_kv) c.set_tokens_seen(0);
    out.position = static_cast<std::int64_t>(c.next_position());
    return out;
}

struct SplitOptions {
    LayerSet layers{};                     ///< layers the mode edits (default: all)
    bool conv_with_state = true;           ///< a reset zeroes the conv window too
    std::size_t max_new = 0;               ///< greedy tokens after the query
    bool feed_last = false;                ///< also feed the last greedy token (its logits are returned)
    std::vector<std::int64_t> stop_ids{};  ///< stop early once every sequence produced one
    std::int64_t position = -1;            ///< query start position (-1: the one the mode implies)
};

template <class Cache>
struct SplitResult {
    GenerateResult run;       ///< query logits, greedy ids, step logits, positions
    Cache cache;              ///< the cache after the query and the greedy tokens
    std::int64_t position;    ///< where the query started
};

/// Runs `query` (then opt.max_new greedy tokens) on a prefilled context cache edited by `mode`.
template <class Model>
SplitResult<typename Model::cache_type> run_split(const Model& model, const typename Model::cache_type& prefilled,
                                                  const TokenBatch& query, SplitMode mode, const SplitOptions& opt = {}) {
    auto edited = apply_split_mode(prefilled, mode, opt.layers, opt.conv_with_state);
    GenerateOptions g;
    g.max_new = opt.max_new;
    g.feed_last = opt.feed_last;
    g.stop_ids = opt.stop_ids;
    check<ShapeError>(opt.position >= -1, "[split_prefill] position ", opt.position,
                      " (a query start position, or -1 for the one the mode implies)");
    g.start_position = opt.position >= 0 ? opt.position : edited.position;
    GenerateResult run = generate(model, edited.cache, query, g);
    return {std::move(run), std::move(edited.cache), g.start_position};
}

/// split_prefill(model, context, query, mode): prefills `context` on a fresh cache, applies
/// `mode` to the layers of opt.layers, and runs `query` plus opt.max_new greedy tokens.
template <class Model>
SplitResult<typename Model::cache_type> split_prefill(const Model& model, const TokenBatch& context,
                                                      const TokenBatch& query, SplitMode mode,
                                                      const SplitOptions& opt = {}) {
    check<ShapeError>(context.batch == query.batch, "[split_prefill] context has ", context.batch,
                      " sequences, query ", query.batch);
    return run_split(model, model.prefill(context), query, mode, opt);
}

}  // namespace hylens
