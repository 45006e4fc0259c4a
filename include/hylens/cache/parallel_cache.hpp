#pragma once
// ParallelCache<CA, CB>: the cache of a ParallelLayer (Falcon-H1: attention KV and Mamba-2
// recurrent part in every layer). It declares the union of both halves' channels.

#include "channels.hpp"

namespace hylens {

template <class CA, class CB>
struct ParallelCache {
    using first_type = CA;
    using second_type = CB;
    struct channels {
        template <class C>
        static constexpr bool has = CA::channels::template has<C> || CB::channels::template has<C>;
    };
    CA first;
    CB second;
    friend bool operator==(const ParallelCache&, const ParallelCache&) = default;
};

}  // namespace hylens
