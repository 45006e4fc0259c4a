#pragma once
// Generic access to the channel parts of any layer cache: kv_part(c) is the KVCache inside c
// (or nullptr), recurrent_part(c) the RecurrentCache (or nullptr). Works through nested
// ParallelCache halves, so every operation written on parts covers every layer kind.

#include <type_traits>  // std::is_same_v, std::remove_const_t

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
