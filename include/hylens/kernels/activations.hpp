#pragma once
// Scalar activation functions with PyTorch's exact conventions (families.md §0.1).

#include <cmath>  // std::exp, std::log1p

namespace hylens::kernels {

inline float sigmoid(float x) noexcept { return 1.0f / (1.0f + std::exp(-x)); }
inline float silu(float x) noexcept { return x / (1.0f + std::exp(-x)); }
/// softplus with PyTorch's defaults: beta = 1, threshold = 20 (x > 20 returns x).
inline float softplus(float x) noexcept { return x > 20.0f ? x : std::log1p(std::exp(x)); }

/// In-place silu over n values.
inline void silu_inplace(float* x, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) x[i] = silu(x[i]);
}

}  // namespace hylens::kernels
