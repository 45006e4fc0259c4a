#pragma once
// The one header of hylens that includes xtensor. Activations, caches and states are
// xtensor containers of float32 (64-byte aligned with XTENSOR_USE_XSIMD); kernels take
// raw pointers into them. Keep xtensor expression chains out of inner loops, and never
// broadcast a lazy keep_dims reducer: in xtensor 0.24.3, `x - xt::amax(x, {1}, xt::keep_dims)`
// gives wrong values (garbage with XTENSOR_USE_XSIMD; upstream xtensor#2737); evaluate the
// reduction into a container first.

#include <xtensor/xadapt.hpp>   // xt::adapt
#include <xtensor/xtensor.hpp>  // xt::xtensor

#include <cstddef>  // std::size_t
#include <string>   // std::string
#include <vector>   // std::vector

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

/// Largest |a - b| over two containers of equal size (tests and checks).
template <class A, class B>
float max_abs_diff(const A& a, const B& b) {
    float m = 0.0f;
    auto ia = a.begin();
    for (auto ib = b.begin(); ia != a.end() && ib != b.end(); ++ia, ++ib) {
        float d = static_cast<float>(*ia) - static_cast<float>(*ib);
        if (d < 0) d = -d;
        if (!(d <= m)) m = d;  // NaN propagates as a large value
    }
    return m;
}

}  // namespace hylens
