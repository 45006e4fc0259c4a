#pragma once
// Channel tags: which part of a layer's cache carries what.
//   channel::kv        the attention K and V of every cached position
//   channel::recurrent the recurrent part: conv window (channel::conv) and SSM / delta-rule
//                      state (channel::ssm)
// A cache type declares the channels it holds as `using channels = channel::list<...>`; cache
// surgery is generic over those declarations.

#include <type_traits>  // std::is_same_v

namespace hylens::channel {

struct kv {};
struct recurrent {};
struct conv {};  ///< the conv window, a sub-part of recurrent
struct ssm {};   ///< the SSM / delta-rule state, a sub-part of recurrent

template <class... Cs>
struct list {
    template <class C>
    static constexpr bool has = (std::is_same_v<C, Cs> || ...);
};

template <class Cache, class C>
inline constexpr bool has_channel = Cache::channels::template has<C>;

}  // namespace hylens::channel
