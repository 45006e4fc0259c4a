#pragma once
// Non-owning xtensor views of float32 buffers that hylens owns (cache K/V and states, captured
// tensors), so results are read, sliced and written with xtensor without copying them.
//   TensorView<N> / ConstTensorView<N>: a row-major xt::xtensor_adaptor of rank N over a
//     contiguous buffer (a recurrent state, a conv window, a captured tensor).
//   ArrayView / ConstArrayView: the same with the rank known at run time (xt::xarray_adaptor).
//   Strided slices of a larger buffer (a KV cache's filled positions inside its capacity) are
//     xt::view()s of such an adaptor: see KVCache::k_view.
// A view is valid until its owner reallocates (KVCache::reserve_more, a forward that grows the
// cache, assigning a new NamedTensor) or dies. A mutable view writes through to its owner
// (`view = expr`, `xt::noalias(view) = expr`, `view(i, j) = x`); assigning an expression of
// another shape throws, since the storage cannot be resized. Const views do not compile on
// assignment. Never build a strided xt::adapt (shape + strides) for a slice: its plain
// assignment copies contiguously and writes the wrong elements (xtensor 0.24).

#include <array>    // std::array
#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "tensor.hpp"

namespace hylens {

namespace detail {

template <class P, class Shape>
auto contiguous_view(P data, const Shape& shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    // a prvalue pointer: the adaptor holds the pointer itself, not a reference to `data`
    return xt::adapt(static_cast<P>(data), n, xt::no_ownership(), shape);
}

}  // namespace detail

template <std::size_t N>
using TensorView = decltype(detail::contiguous_view<float*>(nullptr, std::array<std::size_t, N>{}));
template <std::size_t N>
using ConstTensorView = decltype(detail::contiguous_view<const float*>(nullptr, std::array<std::size_t, N>{}));
using ArrayView = decltype(detail::contiguous_view<float*>(nullptr, std::vector<std::size_t>{}));
using ConstArrayView = decltype(detail::contiguous_view<const float*>(nullptr, std::vector<std::size_t>{}));

/// A row-major view of the first product(shape) floats at `data`.
template <std::size_t N>
TensorView<N> make_view(float* data, const std::array<std::size_t, N>& shape) {
    return detail::contiguous_view(data, shape);
}
template <std::size_t N>
ConstTensorView<N> make_view(const float* data, const std::array<std::size_t, N>& shape) {
    return detail::contiguous_view(data, shape);
}
inline ArrayView make_view(float* data, const std::vector<std::size_t>& shape) { return detail::contiguous_view(data, shape); }
inline ConstArrayView make_view(const float* data, const std::vector<std::size_t>& shape) {
    return detail::contiguous_view(data, shape);
}

}  // namespace hylens
