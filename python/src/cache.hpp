#pragma once
// PyCache: a stack cache as a Python object. The three model types have three cache types;
// PyCache holds one of them in a variant whose index is the model type's index in
// AnyModel::variant_type, so a cache can only be handed to a model (or a surgery op next to a
// cache) of the same type: anything else is a ValueError that names both types. The
// channel ops check at run time that the model has the channel (a Granite model without
// attention layers has no K/V to keep), since every family's stack type declares both.

#include <hylens/cache/surgery.hpp>
#include <hylens/models/load.hpp>

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "arrays.hpp"

namespace hylens::python {

namespace pyb = pybind11;

using CacheVariant = std::variant<Qwen35Model::cache_type, GraniteModel::cache_type, FalconH1Model::cache_type>;
static_assert(std::variant_size_v<CacheVariant> == std::variant_size_v<AnyModel::variant_type>);

/// Family names by variant index (AnyModel::variant_type order).
inline const char* family_name(std::size_t index) {
    constexpr const char* names[] = {"qwen3_5", "granite4h", "falcon_h1"};
    return names[index];
}

class PyCache {
public:
    PyCache(CacheVariant c, std::string model_type)
        : c_(std::move(c)), model_type_(std::move(model_type)), family_index_(c_.index()) {}

    const std::string& model_type() const noexcept { return model_type_; }
    /// The stack type's index, kept when the cache is closed (closing empties c_, whose index
    /// is then the first family's: a closed Granite cache said 'qwen3_5').
    std::size_t family_index() const noexcept { return family_index_; }
    const char* family() const noexcept { return family_name(family_index_); }
    bool closed() const noexcept { return closed_; }
    /// Whether another thread runs a forward on the cache now.
    bool busy() const noexcept { return busy_.load(); }

    /// Frees the cache; every later use raises ValueError. Closing a closed cache does nothing
    /// (as a file's close()), so close() inside a `with` block is not an error at its end.
    void close() {
        if (closed_ && !busy_) return;
        check_open("close");
        c_ = CacheVariant{};
        closed_ = true;
    }

    /// Every use of the cache passes here: ValueError when it is closed, RuntimeError while
    /// another thread runs a forward on it (reading, writing or closing it then was a race;
    /// closing it freed the memory under the forward).
    void check_open(const char* op) const {
        if (closed_) throw pyb::value_error(std::string(op) + ": the cache is closed");
        if (busy_) throw std::runtime_error(std::string(op) + ": the cache is in use by another thread");
    }

    /// The typed cache; ValueError when it belongs to another model type. `other` says what
    /// it was handed to ("this qwen3_5 model", "a cache of a granitemoehybrid model").
    template <class Cache>
    Cache& as(const char* op, const std::string& other) {
        check_open(op);
        Cache* c = std::get_if<Cache>(&c_);
        if (!c)
            throw pyb::value_error(std::string(op) + ": the cache belongs to a " + model_type_ + " model (" + family() +
                                   " stack type), but " + other + "; a cache only works with models and caches of "
                                   "the stack type that made it");
        return *c;
    }

    /// f(typed cache) under the cache's own type.
    template <class F>
    decltype(auto) visit(const char* op, F&& f) {
        check_open(op);
        return std::visit(std::forward<F>(f), c_);
    }

    /// Marks the cache in use while a forward pass runs without the GIL: a second thread using
    /// it at the same time gets a RuntimeError instead of a data race.
    class Lease {
    public:
        Lease(PyCache* c, const char* op) : c_(c) {
            if (c_ && c_->busy_.exchange(true))
                throw std::runtime_error(std::string(op) + ": the cache is in use by another thread");
        }
        ~Lease() {
            if (c_) c_->busy_ = false;
        }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;

    private:
        PyCache* c_;
    };

private:
    CacheVariant c_;
    std::string model_type_;
    std::size_t family_index_;
    bool closed_ = false;
    std::atomic<bool> busy_{false};
};

using CachePtr = std::shared_ptr<PyCache>;

/// The channel names of the Python API.
enum class Chan { kv, recurrent, conv, ssm };

inline Chan parse_channel(const std::string& s, const char* op) {
    if (s == "kv") return Chan::kv;
    if (s == "recurrent") return Chan::recurrent;
    if (s == "conv") return Chan::conv;
    if (s == "ssm") return Chan::ssm;
    throw pyb::value_error(std::string(op) + ": unknown channel '" + s + "' (use 'kv', 'recurrent', 'conv' or 'ssm')");
}

/// f(channel tag) for a run-time channel name.
template <class F>
decltype(auto) with_channel(Chan ch, F&& f) {
    switch (ch) {
        case Chan::kv: return f(channel::kv{});
        case Chan::recurrent: return f(channel::recurrent{});
        case Chan::conv: return f(channel::conv{});
        case Chan::ssm: break;
    }
    return f(channel::ssm{});
}

/// ValueError unless some layer of `c` holds the channel (conv and ssm live in recurrent layers).
template <class Cache>
void require_channel(const Cache& c, Chan ch, const char* op, const std::string& model_type) {
    bool has = false;
    if (ch == Chan::kv) {
        if constexpr (stack_has_channel<Cache, channel::kv>) has = !layers_with<channel::kv>(c).empty();
    } else {
        if constexpr (stack_has_channel<Cache, channel::recurrent>) has = !layers_with<channel::recurrent>(c).empty();
    }
    if (!has)
        throw pyb::value_error(std::string(op) + ": this " + model_type + " model has no " +
                               (ch == Chan::kv ? "attention layers, so no 'kv' channel"
                                               : "recurrent layers, so no recurrent channel") +
                               " to act on");
}

/// A LayerSet from None (every layer) or an iterable of layer indices.
inline LayerSet to_layers(pyb::handle obj, const std::string& what) {
    if (obj.is_none()) return LayerSet::all();
    return LayerSet(to_indices(obj, what));
}

/// The layers of a cache that hold a channel, as a Python list.
template <class Cache>
std::vector<std::size_t> layers_holding(const Cache& c, Chan ch) {
    if (ch == Chan::kv) {
        if constexpr (stack_has_channel<Cache, channel::kv>) return layers_with<channel::kv>(c);
    } else {
        if constexpr (stack_has_channel<Cache, channel::recurrent>) return layers_with<channel::recurrent>(c);
    }
    return {};
}

}  // namespace hylens::python
