#pragma once
// Plain twin of kernels/linear.hpp: widen each weight element and accumulate in double.

#include <cstddef>  // std::size_t

#include "../../core/weight.hpp"

namespace hylens::reference {

inline void linear(const float* x, std::size_t ldx, std::size_t M, const Weight& W, const float* bias, float* y,
                   std::size_t ldy, float alpha = 1.0f) {
    const std::size_t out = W.rows(), in = W.cols();
    for (std::size_t m = 0; m < M; ++m)
        for (std::size_t o = 0; o < out; ++o) {
            double s = 0.0;
            for (std::size_t i = 0; i < in; ++i) s += static_cast<double>(x[m * ldx + i]) * W.at(o * in + i);
            y[m * ldy + o] = static_cast<float>(alpha * s + (bias ? bias[o] : 0.0f));
        }
}

}  // namespace hylens::reference
