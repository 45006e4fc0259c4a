#pragma once
// StackCache<Kinds...>: the cache of a HybridStack<Kinds...>, a typed tuple with one member
// per kind, each holding that kind's per-layer caches in layer order. Its type is the
// stack's kinds, so a cache of one stack type cannot be handed to another. Values: copy,
// compare, reset.

#include <cstddef>      // std::size_t
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <tuple>        // std::tuple, std::get
#include <utility>  // std::index_sequence
#include <vector>   // std::vector

#include "../cache/parts.hpp"
#include "../core/error.hpp"

namespace hylens {

/// Where decoder layer i lives: which kind, and its index among the layers of that kind.
struct LayerSlot {
    std::size_t kind = 0;
    std::size_t index = 0;
    friend bool operator==(const LayerSlot&, const LayerSlot&) = default;
};

template <class... Kinds>
class StackCache {
public:
    using tuple_type = std::tuple<std::vector<typename Kinds::cache_type>...>;

    StackCache() = default;
    StackCache(tuple_type parts, std::vector<LayerSlot> order, std::size_t batch)
        : parts_(std::move(parts)), order_(std::move(order)), batch_(batch) {}

    std::size_t num_layers() const noexcept { return order_.size(); }
    std::size_t batch() const noexcept { return batch_; }
    const std::vector<LayerSlot>& order() const noexcept { return order_; }
    /// The kind_name of layer i's kind ("gdn", "mamba2", "attention", ...), for messages.
    std::string_view kind_name(std::size_t layer) const {
        check<ShapeError>(layer < order_.size(), "[StackCache] layer ", layer, " out of ", order_.size());
        static constexpr std::string_view names[] = {std::string_view(Kinds::kind_name)...};
        return names[order_[layer].kind];
    }
    /// The model_type of the model that made the cache (set by CausalLM::new_cache), for
    /// messages; not part of the value (two caches compare equal whatever their names).
    const std::string& model() const noexcept { return model_; }
    void set_model(std::string name) { model_ = std::move(name); }

    /// The per-layer caches of kind number K (in layer order).
    template <std::size_t K>
    auto& of_kind() noexcept { return std::get<K>(parts_); }
    template <std::size_t K>
    const auto& of_kind() const noexcept { return std::get<K>(parts_); }

    /// Calls f(cache_of_layer_i) with the layer's concrete cache type.
    template <class F>
    void visit(std::size_t layer, F&& f) {
        visit_impl(*this, layer, std::forward<F>(f), std::index_sequence_for<Kinds...>{});
    }
    template <class F>
    void visit(std::size_t layer, F&& f) const {
        visit_impl(*this, layer, std::forward<F>(f), std::index_sequence_for<Kinds...>{});
    }

    /// KV length of the first layer holding K/V (0 when there is none): the position at which
    /// the next token goes.
    std::size_t kv_len() const {
        for (std::size_t i = 0; i < num_layers(); ++i) {
            std::size_t n = 0;
            bool found = false;
            visit(i, [&](const auto& c) {
                if (auto* kv = kv_part(c)) {
                    n = kv->length();
                    found = true;
                }
            });
            if (found) return n;
        }
        return 0;
    }
    bool has_kv_layers() const {
        for (std::size_t i = 0; i < num_layers(); ++i) {
            bool found = false;
            visit(i, [&](const auto& c) { found = kv_part(c) != nullptr; });
            if (found) return true;
        }
        return false;
    }
    /// Tokens fed since the last reset (tracks positions of stacks with no attention layer).
    std::size_t tokens_seen() const noexcept { return seen_; }
    void set_tokens_seen(std::size_t n) noexcept { seen_ = n; }
    /// Position of the next token: the KV length, or the tokens seen when there is no KV.
    std::size_t next_position() const { return has_kv_layers() ? kv_len() : seen_; }

    /// Why the cache can no longer be used, or "" while it can: a forward that failed part-way
    /// (an exception from a hook, the non-finite check or a layer) left some layers updated
    /// and others not (CausalLM::forward marks it). Copies keep the mark; reset() clears it;
    /// the forward, the surgery of two caches and save_cache refuse a marked cache
    /// (check_usable). Not part of the value (==).
    const std::string& torn() const noexcept { return torn_; }
    void mark_torn(std::string why) { torn_ = why.empty() ? std::string("an unknown error") : std::move(why); }
    /// Throws when the cache is marked torn, naming `op` and the failure.
    void check_usable(const char* op) const {
        check(torn_.empty(), "[", op, "] the cache was left part-updated by a forward that failed (", torn_,
              "): its layers hold different numbers of tokens. Use a copy taken before that forward, or reset() it");
    }

    /// Back to a fresh cache: KV emptied, conv windows and states zeroed.
    void reset() {
        for (std::size_t i = 0; i < num_layers(); ++i)
            visit(i, [](auto& c) {
                for_each_kv_part(c, [](KVCache& kv) { kv.clear(); });
                for_each_recurrent_part(c, [](RecurrentCache& r) { r.reset(); });
            });
        seen_ = 0;
        torn_.clear();
    }

    friend bool operator==(const StackCache& a, const StackCache& b) {
        return a.parts_ == b.parts_ && a.order_ == b.order_ && a.batch_ == b.batch_ && a.seen_ == b.seen_;
    }

private:
    template <class Self, class F, std::size_t... K>
    static void visit_impl(Self& self, std::size_t layer, F&& f, std::index_sequence<K...>) {
        check<ShapeError>(layer < self.order_.size(), "[StackCache] layer ", layer, " out of ", self.order_.size());
        const LayerSlot s = self.order_[layer];
        // Visitors return nothing: a fold over the kinds calls f on the one that matches.
        ((s.kind == K ? (void)f(std::get<K>(self.parts_)[s.index]) : void()), ...);
    }

    tuple_type parts_;
    std::vector<LayerSlot> order_;
    std::size_t batch_ = 0;
    std::size_t seen_ = 0;
    std::string model_;
    std::string torn_;
};

}  // namespace hylens
