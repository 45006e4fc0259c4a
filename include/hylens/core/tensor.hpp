#pragma once
// The one header of hylens that includes xtensor. Activations, caches and states are
// xtensor containers of float32 (64-byte aligned with XTENSOR_USE_XSIMD); kernels take
// raw pointers into them. Keep xtensor expression chains out of inner loops, and never
// broadcast a lazy keep_dims reducer: in xtensor 0.24.3, `x - xt::amax(x, {1}, xt::keep_dims)`
// gives wrong values (garbage with XTENSOR_USE_XSIMD; upstream xtensor#2737); evaluate the
// reduction into a container first.

#include <xtensor/xadapt.hpp>   // xt::adapt
#include <xtensor/xtensor.hpp>  // xt::xtensor

#include <cstddef>           // std::size_t
#include <initializer_list>  // std::initializer_list
#include <limits>            // std::numeric_limits
#include <string>            // std::string
#include <vector>            // std::vector

#include "error.hpp"

namespace hylens {

template <std::size_t N>
using Tensor = xt::xtensor<float, N>;
using Tensor1 = Tensor<1>;
using Tensor2 = Tensor<2>;
using Tensor3 = Tensor<3>;
using Tensor4 = Tensor<4>;

/// "[2, 3, 4]" for messages.
template <class Shape>
std::string shape_string(const Shape& s) {
    std::string out = "[";
    bool first = true;
    for (auto d : s) {
        if (!first) out += ", ";
        out += std::to_string(d);
        first = false;
    }
    return out + "]";
}

/// The element count of a float32 container of shape `dims`, checked: a ShapeError naming
/// `where` when its bytes do not fit in a size_t. xtensor multiplies the sizes unchecked, and a
/// count that wrapped around allocated a small buffer that later reads and writes ran past.
template <class Shape>
std::size_t checked_elements(const Shape& dims, const char* where) {
    std::size_t n = 1;
    bool zero = false;
    for (const std::size_t d : dims) zero = zero || d == 0;
    if (zero) return 0;
    for (const std::size_t d : dims) {
        check<ShapeError>(n <= std::numeric_limits<std::size_t>::max() / sizeof(float) / d, "[", where, "] a container of ",
                          shape_string(dims), " floats is larger than memory can address");
        n *= d;
    }
    return n;
}
inline std::size_t checked_elements(std::initializer_list<std::size_t> dims, const char* where) {
    return checked_elements<std::initializer_list<std::size_t>>(dims, where);
}

/// Largest |a - b| over two containers of equal size (tests and checks): NaN when any
/// difference is NaN (it was kept only when no larger finite difference came after it, so a
/// NaN before the last element compared as equal), infinity when the sizes differ.
template <class A, class B>
float max_abs_diff(const A& a, const B& b) {
    float m = 0.0f;
    auto ia = a.begin();
    auto ib = b.begin();
    for (; ia != a.end() && ib != b.end(); ++ia, ++ib) {
        float d = static_cast<float>(*ia) - static_cast<float>(*ib);
        if (d < 0) d = -d;
        if (d != d) return d;  // NaN
        if (d > m) m = d;
    }
    if (ia != a.end() || ib != b.end()) return std::numeric_limits<float>::infinity();
    return m;
}

}  // namespace hylens
